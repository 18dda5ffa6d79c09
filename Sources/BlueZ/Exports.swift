// SPDX-License-Identifier: GPL-2.0-or-later

// bluetoothd speaks D-Bus: its values and messages are part of this module's API.
@_exported import DBus
