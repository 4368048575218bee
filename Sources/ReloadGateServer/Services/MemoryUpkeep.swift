import CReloadGateHeap
import Dispatch
import Foundation
import Logging
import ServiceLifecycle

/// Gives the C heap's free memory back to the system once much of it is free, so that the gateway's
/// resident memory follows what it holds (devices, pending reloads), not the largest burst it has seen.
///
/// A herd (a fan-out over a million instances releases 900,000 deliveries at once) fills the heap with
/// deliveries on their way to the upstream; once they are sent most of that memory is free again, but glibc
/// keeps it: free chunks between live ones are returned only by `malloc_trim`, and each of the arenas it
/// makes for the threads (up to 8 a core) keeps its own. Measured with `N=200000 scripts/bench-scale` after
/// the herd: 311 MB held by malloc, 121 MB of it in use, 303 MB resident (docs/BENCHMARKS.md, issue 49).
/// Every `interval` this looks at the free bytes the arenas hold (`mallinfo2`) and trims them past
/// `threshold`, on a queue of its own (a trim of a large heap takes milliseconds and locks each arena in
/// turn).
struct MemoryUpkeep: Service {
    let logger: Logger
    var interval: Duration = .seconds(10)
    /// Free bytes held by malloc above which the heap is trimmed.
    var threshold = 64 << 20

    func run() async throws {
        let queue = DispatchQueue(label: "reloadgate.heap")
        let turns = PeriodicTurns(interval: interval, deadline: .seconds(10), logger: logger, failure: "the heap's free memory could not be looked at")
        await turns.run { [logger, threshold] in
            let trimmed = await withCheckedContinuation { continuation in
                queue.async { continuation.resume(returning: Self.trim(above: threshold)) }
            }
            if let free = trimmed {
                logger.debug("gave the heap's free memory back to the system", metadata: ["free": "\(free >> 20) MiB"])
            }
        }
    }

    /// Trims the heap when it holds more than `threshold` free bytes; returns the free bytes it held then,
    /// or `nil` when it did not trim.
    static func trim(above threshold: Int) -> Int? {
        let free = Int(reloadgate_heap_free_bytes())
        guard free > threshold else { return nil }
        _ = reloadgate_heap_trim()
        return free
    }

    /// Free bytes the heap holds now (0 where the C library does not say).
    static var freeBytes: Int { Int(reloadgate_heap_free_bytes()) }

    /// Caps malloc's arenas at one per core (at least two) unless `MALLOC_ARENA_MAX` says otherwise: with
    /// glibc's default (eight a core) the memory a burst freed stays spread over up to sixteen arenas on two
    /// cores, each keeping its own. Measured (`N=200000 scripts/bench-scale`, two arenas against the
    /// default): 258 MB resident after the herd against 303-323 MB, registrations and herds as fast.
    /// Call it first thing, before threads start.
    static func limitArenas(environment: [String: String] = ProcessInfo.processInfo.environment) {
        guard environment["MALLOC_ARENA_MAX"] == nil else { return }
        _ = reloadgate_heap_limit_arenas(Int32(max(2, ProcessInfo.processInfo.activeProcessorCount)))
    }
}

/// ``MemoryUpkeep/limitArenas(environment:)``, for the `serve` command before it starts anything.
public func limitMallocArenas() {
    MemoryUpkeep.limitArenas()
}
