import CReloadGateHeap
import Dispatch
import Foundation
import Logging
import ServiceLifecycle
import Synchronization

/// Gives the C heap's free memory back to the system once much of it is free, so that the gateway's
/// resident memory follows what it holds (devices, pending reloads), not the largest burst it has seen.
///
/// A herd (a fan-out over a million instances releases 900,000 deliveries at once) fills the heap with
/// deliveries on their way to the upstream; once they are sent most of that memory is free again, but glibc
/// keeps it: free chunks between live ones are returned only by `malloc_trim`, and each of the arenas it
/// makes for the threads (up to 8 a core) keeps its own. Measured with `N=200000 scripts/bench-scale` after
/// the herd: 311 MB held by malloc, 121 MB of it in use, 303 MB resident (docs/BENCHMARKS.md, issue 49).
/// Every `interval` this looks at the free bytes the arenas hold (`mallinfo2`) and trims them past
/// `threshold`, on a queue of its own (``HeapTrims``: a trim of a large heap takes milliseconds and locks
/// each arena in turn). The delivery worker also asks for a look as soon as a burst has ended
/// (``DeliveryWorker/burstEnded``), so that the memory a herd freed is given back when it is sent, not up
/// to `interval` later.
struct MemoryUpkeep: Service {
    let logger: Logger
    let trims: HeapTrims
    var interval: Duration = .seconds(10)

    init(trims: HeapTrims, logger: Logger) {
        self.trims = trims
        self.logger = logger
    }

    func run() async throws {
        let turns = PeriodicTurns(interval: interval, deadline: .seconds(10), logger: logger, failure: "the heap's free memory could not be looked at")
        await turns.run { [trims] in await trims.look() }
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

/// The heap's looks and trims, one at a time on a queue of their own: the upkeep's periodic ones, and one
/// asked for without waiting when a burst of deliveries has ended (``lookSoon()``).
final class HeapTrims: Sendable {
    /// Free bytes held by malloc above which the heap is trimmed.
    let threshold: Int
    private let logger: Logger
    private let queue = DispatchQueue(label: "reloadgate.heap")
    /// A look asked for by ``lookSoon()`` is queued and has not started: further asks are the same look.
    private let asked = Atomic<Bool>(false)
    /// Looks made, asked for or periodic (tests).
    private let made = Atomic<Int>(0)

    init(threshold: Int = 64 << 20, logger: Logger) {
        self.threshold = threshold
        self.logger = logger
    }

    /// Looks at the heap and trims it past ``threshold``, on the queue; returns when that is done.
    func look() async {
        await withCheckedContinuation { continuation in
            queue.async {
                self.lookNow()
                continuation.resume()
            }
        }
    }

    /// Asks for a look on the queue without waiting for it.
    func lookSoon() {
        guard asked.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged else { return }
        queue.async {
            self.asked.store(false, ordering: .releasing)
            self.lookNow()
        }
    }

    var looks: Int { made.load(ordering: .acquiring) }

    private func lookNow() {
        if let free = MemoryUpkeep.trim(above: threshold) {
            logger.debug("gave the heap's free memory back to the system", metadata: ["free": "\(free >> 20) MiB"])
        }
        made.add(1, ordering: .releasing)
    }
}

/// ``MemoryUpkeep/limitArenas(environment:)``, for the `serve` command before it starts anything.
public func limitMallocArenas() {
    MemoryUpkeep.limitArenas()
}
