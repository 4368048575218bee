// The C heap's bookkeeping, for the gateway's memory upkeep (Sources/ReloadGateServer/Services/MemoryUpkeep.swift).
// glibc declares these in <malloc.h>, which Swift's Glibc module does not import. Elsewhere (musl, Darwin)
// they do nothing.
#ifndef CRELOADGATEHEAP_H
#define CRELOADGATEHEAP_H

#include <stddef.h>
// (Any libc header defines __GLIBC__ where glibc is the C library.)
#include <stdlib.h>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

/// Bytes free inside the heap's arenas (held by malloc, not in use); 0 where unknown.
static inline size_t reloadgate_heap_free_bytes(void) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
    struct mallinfo2 info = mallinfo2();
    return info.fordblks;
#else
    return 0;
#endif
}

/// Gives the arenas' free pages back to the system (`malloc_trim(0)`); 1 when some were given back.
static inline int reloadgate_heap_trim(void) {
#if defined(__GLIBC__)
    return malloc_trim(0);
#else
    return 0;
#endif
}

/// Caps how many arenas malloc keeps (`M_ARENA_MAX`); 1 when set.
static inline int reloadgate_heap_limit_arenas(int count) {
#if defined(__GLIBC__)
    return mallopt(M_ARENA_MAX, count);
#else
    (void)count;
    return 0;
#endif
}

#endif
