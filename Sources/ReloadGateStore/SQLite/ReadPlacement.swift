/// Where a read of the SQLite store waits for the disk: on the thread that asked (one of the Swift
/// concurrency pool's, as many as the machine has cores), or on the store's own threads, with the asking
/// task suspended. The hop there and back costs about 40 us of CPU a read on two cores (a third of a
/// one-instance webhook call), so it is taken only when needed.
///
/// A read runs where it was asked while that cannot stop the gateway: always while fewer than ``limit`` reads
/// run there (one less than the pool's threads, so one is left for everything else), and past that while the
/// disk is fast: no read took ``slow`` or longer within the last ``memory``, and none of those running where
/// they were asked began ``slow`` ago or earlier. A read that the machine's load only kept from a processor
/// for ``slow`` makes the disk look slow for ``memory``: a few reads more take the hop, nothing else.
/// (docs/DECISIONS.md, "The store's reads and writes wait on threads of its own".)
struct ReadPlacement {
    enum Place: Equatable {
        /// On the asking thread; ``ended(_:started:at:)`` with the id when done.
        case inline(id: UInt64)
        /// On the store's threads.
        case threads
    }

    /// How many reads may always run on their asking threads.
    let limit: Int
    /// A read this long or longer makes the disk slow.
    let slow: Duration
    /// How long the disk stays slow after a slow read.
    let memory: Duration

    /// The reads running on their asking threads, by id, with when they began.
    private var running: [UInt64: ContinuousClock.Instant] = [:]
    private var nextID: UInt64 = 0
    private var slowUntil: ContinuousClock.Instant?

    init(limit: Int, slow: Duration = .milliseconds(10), memory: Duration = .seconds(10)) {
        self.limit = limit
        self.slow = slow
        self.memory = memory
    }

    /// Where a read asked at `now` runs.
    mutating func place(at now: ContinuousClock.Instant) -> Place {
        if running.count >= limit {
            if let slowUntil, now < slowUntil { return .threads }
            if running.values.contains(where: { $0.duration(to: now) >= slow }) { return .threads }
        }
        nextID &+= 1
        running[nextID] = now
        return .inline(id: nextID)
    }

    /// A read that began at `started` ended at `now`; `id` is its ``Place/inline(id:)``, `nil` for one that
    /// ran on the store's threads.
    mutating func ended(_ id: UInt64?, started: ContinuousClock.Instant, at now: ContinuousClock.Instant) {
        if let id { running[id] = nil }
        if started.duration(to: now) >= slow { slowUntil = now.advanced(by: memory) }
    }
}
