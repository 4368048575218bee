// Hints to the memory system, for the scheduler's reads of tables larger than the caches
// (Sources/ReloadGateCore/Scheduling/InstanceTable.swift). Swift has no spelling for them.
#ifndef CRELOADGATEPREFETCH_H
#define CRELOADGATEPREFETCH_H

#include <stddef.h>

/// The cache line's size on the machines the gateway runs on (x86-64, and the arm64 servers).
#define RELOADGATE_CACHE_LINE 64

/// Asks for every cache line holding a byte of the `bytes` bytes at `start` to be brought in for
/// reading (a record that straddles lines is wanted whole); changes nothing else, nothing for no bytes.
/// The hints go to `start`, every line's length on, and the last byte: no two are more than a line
/// apart, so none of the lines is missed, and their number follows from `bytes` alone. (Stepping over
/// the lines themselves, from `start` rounded down, would make it follow the address's alignment: a
/// branch the processor cannot predict, which cost the scheduler a tenth of its decisions, decision 0115.)
static inline void reloadgate_prefetch(const void *start, size_t bytes) {
#if defined(__GNUC__) || defined(__clang__)
    if (bytes == 0) return;
    const char *first = (const char *)start;
    const char *last = first + (bytes - 1);
    for (const char *line = first; line < last; line += RELOADGATE_CACHE_LINE) {
        __builtin_prefetch(line, 0, 3);
    }
    __builtin_prefetch(last, 0, 3);
#else
    (void)start;
    (void)bytes;
#endif
}

#endif
