// SPDX-License-Identifier: GPL-2.0-or-later
// Interposes glibc's allocation entry points to count calls; linked into CuffBenchmarks only.
#define _GNU_SOURCE
#include <stddef.h>
#include <stdatomic.h>
#include <errno.h>
#include "malloc_counter.h"

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

static atomic_ulong allocations;

unsigned long cuff_malloc_count(void) { return atomic_load(&allocations); }

void *malloc(size_t n) { atomic_fetch_add(&allocations, 1); return __libc_malloc(n); }
void *calloc(size_t a, size_t b) { atomic_fetch_add(&allocations, 1); return __libc_calloc(a, b); }
void *realloc(void *p, size_t n) { atomic_fetch_add(&allocations, 1); return __libc_realloc(p, n); }
void *memalign(size_t al, size_t n) { atomic_fetch_add(&allocations, 1); return __libc_memalign(al, n); }
void *aligned_alloc(size_t al, size_t n) { atomic_fetch_add(&allocations, 1); return __libc_memalign(al, n); }
int posix_memalign(void **out, size_t al, size_t n) {
    atomic_fetch_add(&allocations, 1);
    void *p = __libc_memalign(al, n);
    if (!p) return ENOMEM;
    *out = p;
    return 0;
}
