// A hint to the memory system, for the scheduler's reads of a table larger than the caches
// (Sources/ReloadGateCore/Scheduling/InstanceTable.swift). Swift has no spelling for it.
#ifndef CRELOADGATEPREFETCH_H
#define CRELOADGATEPREFETCH_H

/// Asks for the cache line holding `address` to be brought in for reading; changes nothing else.
static inline void reloadgate_prefetch(const void *address) {
#if defined(__GNUC__) || defined(__clang__)
    __builtin_prefetch(address, 0, 3);
#else
    (void)address;
#endif
}

#endif
