// SPDX-License-Identifier: GPL-2.0-or-later
// Placeholder until this layer lands.
