// SPDX-License-Identifier: GPL-2.0-or-later
// Counts heap allocations in the benchmark process (malloc and friends are interposed).
#pragma once
unsigned long cuff_malloc_count(void);
