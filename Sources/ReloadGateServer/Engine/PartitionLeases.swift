import ReloadGateStore

/// A gateway's partition leases (several gateways on one database), as a state machine: the heartbeat's
/// answer and the time come in, and what the engine and the store must do goes out. ``ClusterMembership``
/// performs it; this type reads no clock and writes nothing.
///
/// A partition is held with an epoch (the database raises it whenever the lease changes hands). Each
/// heartbeat renews what is still held; a partition held before and not renewed with the same epoch is
/// lost (another gateway took it: forgotten at once, without writing, since its state is the new owner's
/// now); one taken by the heartbeat is acquired (its state is loaded); one beyond the gateway's fair
/// share is handed back (what was decided for it is committed, then the lease is released). The leases
/// count as held only until their expiry by the local monotonic clock, less a margin: a gateway whose
/// heartbeats are late or fail (a loaded machine, a paused process) sends nothing for partitions another
/// gateway may have taken, and the deliveries it held back are sent again if the next heartbeat renews
/// the lease with the same epoch (nobody took it).
struct PartitionLeases {
    /// Partition -> epoch of every lease held.
    private(set) var held: [Int: Int64] = [:]
    /// Until when the leases are certainly this gateway's.
    private(set) var validUntil: ContinuousClock.Instant
    /// Deliveries not sent because their lease counted as lost by the local clock (``leaveBehind(_:)``).
    private(set) var leftBehind: [RecordedDelivery] = []
    /// Partition -> attempts the worker has out now (``beginAttempt(_:at:)``): a partition handed back is
    /// released once its attempts ended, so that its next owner does not send them again.
    private(set) var attempts: [Int: Int] = [:]
    /// How long a lease lasts without renewal.
    let leaseTime: Duration

    init(leaseTime: Duration, now: ContinuousClock.Instant) {
        self.leaseTime = leaseTime
        validUntil = now
    }

    /// A lease counts as lost this long before it expires (clock rates, the time a heartbeat takes to reach
    /// the database).
    var margin: Duration { leaseTime / 5 }

    /// What one heartbeat's answer asks of the engine and the store, in this order.
    struct Renewal: Equatable {
        /// Held before and not renewed with the same epoch: the engine forgets them, writing nothing.
        var lost: [Int] = []
        /// The gateway's fence generation from now on (the engine commits under it).
        var generation: Int64
        /// Taken by this heartbeat, or renewed after the engine had let them go: the engine loads them
        /// (until it can: a load that fails is tried again while the leases are held).
        var acquired: [Int: Int64] = [:]
        /// Deliveries held back while their lease counted as lost, renewed since with the same epoch: sent.
        var requeue: [RecordedDelivery] = []
        /// Beyond the fair share: the engine commits what it decided for them, then they are released.
        var handBack: [Int: Int64] = [:]
    }

    /// A heartbeat that began at `started` answered `state`.
    mutating func renewed(_ state: LeaseState, startedAt started: ContinuousClock.Instant) -> Renewal {
        let before = held
        var renewal = Renewal(generation: state.generation)
        renewal.lost = before.filter { state.held[$0.key] != $0.value }.map(\.key).sorted()
        renewal.acquired = state.held.filter { before[$0.key] != $0.value }
        renewal.handBack = Dictionary(uniqueKeysWithValues: state.surplus.compactMap { partition in
            state.held[partition].map { (partition, $0) }
        })
        held = state.held.filter { renewal.handBack[$0.key] == nil }
        validUntil = started + leaseTime - margin
        renewal.requeue = leftBehind.filter { delivery in
            let partition = DevicePartition.of(device: delivery.device)
            // (A copy released under an earlier epoch is not: the partition changed hands since.)
            return before[partition] != nil && held[partition] == before[partition]
                && (delivery.leaseEpoch == nil || delivery.leaseEpoch == held[partition])
        }
        leftBehind = []
        return renewal
    }

    /// A heartbeat failed at `now`: once the leases have run out by the local clock, every one counts as
    /// lost; returns those the engine must forget.
    mutating func heartbeatFailed(at now: ContinuousClock.Instant) -> [Int] {
        guard now >= validUntil else { return [] }
        defer { held = [:] }
        return held.keys.sorted()
    }

    /// Whether `partition`'s lease is held and has not run out by the local clock at `now`.
    func owns(partition: Int, at now: ContinuousClock.Instant) -> Bool {
        held[partition] != nil && now < validUntil
    }

    /// Whether `delivery` may be sent at `now`: its partition's lease is held with the epoch it was
    /// released under (any epoch, when it carries none) and has not run out by the local clock.
    func owns(_ delivery: RecordedDelivery, at now: ContinuousClock.Instant) -> Bool {
        guard now < validUntil, let epoch = held[DevicePartition.of(device: delivery.device)] else { return false }
        return delivery.leaseEpoch.map { $0 == epoch } ?? true
    }

    /// Counts an attempt of `delivery` as out (until ``endAttempt(_:)``) when it may be sent at `now`
    /// (``owns(_:at:)``); returns whether it may.
    mutating func beginAttempt(_ delivery: RecordedDelivery, at now: ContinuousClock.Instant) -> Bool {
        guard owns(delivery, at: now) else { return false }
        attempts[DevicePartition.of(device: delivery.device), default: 0] += 1
        return true
    }

    /// The attempt of `delivery` counted by ``beginAttempt(_:at:)`` ended, its outcome recorded.
    mutating func endAttempt(_ delivery: RecordedDelivery) {
        let partition = DevicePartition.of(device: delivery.device)
        guard let count = attempts[partition] else { return }
        attempts[partition] = count > 1 ? count - 1 : nil
    }

    /// The attempts out now for deliveries of `partitions`.
    func attemptsOut(in partitions: some Sequence<Int>) -> Int {
        partitions.reduce(0) { $0 + (attempts[$1] ?? 0) }
    }

    /// Keeps deliveries the worker did not send because ``owns(partition:at:)`` said no (see ``Renewal/requeue``).
    mutating func leaveBehind(_ deliveries: [RecordedDelivery]) {
        leftBehind.append(contentsOf: deliveries)
    }

    /// Lets the leases count as lost by the local clock from `now` (a heartbeat late past the local
    /// deadline). For tests.
    mutating func lapse(at now: ContinuousClock.Instant) {
        validUntil = now
    }

    /// The gateway stops: every lease is given back; returns them.
    mutating func releaseAll() -> [Int: Int64] {
        defer { held = [:] }
        return held
    }
}
