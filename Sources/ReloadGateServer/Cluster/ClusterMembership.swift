import Foundation
import Logging
import ReloadGateCore
import ReloadGateStore
import ServiceLifecycle
import Synchronization

/// A gateway's place among several on one PostgreSQL database (docs/DESIGN.md, scale-out): its id, its
/// partition leases (renewed by a heartbeat each second, taken over from gateways that stopped beating,
/// handed back when newcomers need their share), and the changes other gateways publish.
///
/// The engine schedules exactly the partitions held (``SchedulerEngine/takeOver(_:)``,
/// ``SchedulerEngine/giveUp(_:handingBack:)``). The delivery worker asks it before each attempt
/// (``DeliveryLeases``): a lease counts as held only until its expiry by this process's monotonic clock,
/// less a margin, so a gateway that was paused (SIGSTOP, a VM freeze) sends nothing for partitions another
/// gateway may have taken meanwhile; and a partition is handed back once the attempts out for it ended.
final class ClusterMembership: DeliveryLeases {
    let gateway: String
    let address: String?
    let store: any SharedSchedulingStore
    let engine: SchedulerEngine
    let logger: Logger
    let startedAt: Int64
    /// How long a lease lasts without renewal.
    let leaseTime: Duration
    /// How often the gateway renews its leases.
    let heartbeatInterval: Duration
    /// The monotonic clock the leases are counted by (the cluster simulation's is virtual).
    let monotonic: @Sendable () -> ContinuousClock.Instant
    /// Returns once every delivery state change the worker recorded so far is written (the door's
    /// delivery log): a hand-back writes the outcomes of its partitions' last attempts before the release.
    let deliveryStatesWritten: @Sendable () async throws -> Void
    /// Counts the attempts a hand-back left out (``handBack(_:)``).
    let metrics: GatewayMetrics

    /// The leases and what they imply (``PartitionLeases``), read by the delivery worker from any task.
    private let held: Mutex<PartitionLeases>
    /// While a hand-back waits for the attempts out in its partitions (``waitForAttempts(in:)``): told
    /// each time an attempt ends, so that the wait looks again then rather than on a timer.
    private let attemptEnded = Mutex<AsyncStream<Void>.Continuation?>(nil)

    init(
        gateway: String,
        address: String?,
        store: any SharedSchedulingStore,
        engine: SchedulerEngine,
        logger: Logger,
        leaseTime: Duration = .seconds(5),
        heartbeatInterval: Duration = .seconds(1),
        monotonic: @escaping @Sendable () -> ContinuousClock.Instant = { .now },
        deliveryStatesWritten: @escaping @Sendable () async throws -> Void = {},
        metrics: GatewayMetrics = GatewayMetrics()
    ) {
        self.metrics = metrics
        self.monotonic = monotonic
        self.deliveryStatesWritten = deliveryStatesWritten
        self.gateway = gateway
        self.address = address
        self.store = store
        self.engine = engine
        self.logger = logger
        self.startedAt = Int64(Date().timeIntervalSince1970 * 1000)
        self.leaseTime = leaseTime
        self.heartbeatInterval = heartbeatInterval
        held = Mutex(PartitionLeases(leaseTime: leaseTime, now: monotonic()))
    }

    /// A gateway id: the host name, the process id and a random suffix (a restarted gateway is a new one).
    static func newGatewayID() -> String {
        let host = ProcessInfo.processInfo.hostName.prefix(40)
        return "\(host)-\(ProcessInfo.processInfo.processIdentifier)-\(String(UInt16.random(in: .min ... .max), radix: 16))"
    }

    /// The safety margin: a lease counts as lost this long before it expires (clock rates, the time
    /// a heartbeat takes to reach the database).
    var margin: Duration { leaseTime / 5 }

    /// Whether this gateway holds the lease of `device`'s partition now (and it has not run out).
    func owns(device: Int64) -> Bool {
        held.withLock { $0.owns(partition: DevicePartition.of(device: device), at: monotonic()) }
    }

    /// Whether the worker may send `delivery` now: its partition's lease is held, with the epoch it was
    /// released under, and has not run out (``PartitionLeases/owns(_:at:)``).
    func owns(_ delivery: RecordedDelivery) -> Bool {
        let now = monotonic()
        return held.withLock { $0.owns(delivery, at: now) }
    }

    /// Whether the worker may send `delivery` now (``owns(_:)``); when it may, its attempt counts as out
    /// until ``endAttempt(_:)``, and a hand-back of its partition waits for it (``handBack(_:)``).
    func beginAttempt(_ delivery: RecordedDelivery) -> Bool {
        let now = monotonic()
        return held.withLock { $0.beginAttempt(delivery, at: now) }
    }

    /// The attempt of `delivery` begun by ``beginAttempt(_:)`` ended, and its outcome is recorded.
    func endAttempt(_ delivery: RecordedDelivery) {
        held.withLock { $0.endAttempt(delivery) }
        attemptEnded.withLock { $0 }?.yield()
    }

    /// Takes deliveries the worker did not send because ``owns(_:)`` said no. The next heartbeat
    /// gives back to the engine those whose partition it renews with the same epoch: the lease had only
    /// run out by the local clock (a heartbeat late on a loaded machine), nobody else took it, and
    /// without this they would wait for the next start. The others are the new owner's, which loads
    /// them from the store.
    func leaveBehind(_ deliveries: [RecordedDelivery]) {
        held.withLock { $0.leaveBehind(deliveries) }
    }

    /// Lets the leases count as lost by the local clock now, as when a heartbeat is late past the local
    /// deadline (a loaded machine, a paused process); the next ``beat()`` renews them. For tests.
    func lapseLocally() {
        let now = monotonic()
        held.withLock { $0.lapse(at: now) }
    }

    /// The leases held now (partition -> epoch).
    var leases: [Int: Int64] { held.withLock { $0.held } }

    /// One heartbeat: renews, takes and hands back leases, and tells the engine.
    func beat() async throws {
        let surplus = try await renew()
        if !surplus.isEmpty { try await handBack(surplus) }
    }

    /// The heartbeat itself: renews and takes leases and tells the engine; returns the leases beyond the
    /// gateway's fair share, to hand back (``handBack(_:)``).
    func renew() async throws -> [Int: Int64] {
        let started = monotonic()
        let milliseconds = leaseTime.milliseconds
        let state = try await store.heartbeat(
            gateway: gateway, address: address, startedAt: startedAt, leaseMilliseconds: milliseconds, now: nil
        )
        let renewal = held.withLock { $0.renewed(state, startedAt: started) }
        if !renewal.lost.isEmpty { await engine.giveUp(renewal.lost, handingBack: false) }
        // (After the lost partitions are forgotten: batches begun before keep the old generation and fail.)
        await engine.adopt(generation: renewal.generation)
        // Loaded beside the commit loop; a load that fails is tried again (the leases stay held).
        if !renewal.acquired.isEmpty { await engine.takeOver(renewal.acquired) }
        // Whatever the engine let go meanwhile of what is still held (a failed commit's answer) is loaded again.
        await engine.reconcile(with: leases)
        if !renewal.requeue.isEmpty {
            logger.notice("deliveries held back while the lease counted as lost are sent again", metadata: ["deliveries": "\(renewal.requeue.count)"])
            await engine.requeue(renewal.requeue)
        }
        return renewal.handBack
    }

    /// Hands `surplus` back: the engine stops scheduling it, what it decided for it is committed, the
    /// worker's attempts out for it end and their outcomes are written, then the leases are released (a
    /// free lease is taken without raising this gateway's fence generation: only this order keeps the next
    /// owner's load after the last write). The next owner sends again what its load finds unfinished:
    /// without the wait, a delivery out at Apple at the hand-back, or whose `sent` mark was not written
    /// yet, reached Apple twice though no gateway stopped.
    func handBack(_ surplus: [Int: Int64]) async throws {
        await engine.giveUp(Array(surplus.keys), handingBack: true)
        try? await engine.waitForCommit()
        await waitForAttempts(in: surplus.keys)
        do {
            try await deliveryStatesWritten()
        } catch {
            logger.warning("cannot write the outcomes of deliveries before a hand-back; their new owner may send them again", metadata: ["error": "\(error)"])
        }
        try await store.release(surplus, gateway: gateway)
    }

    /// How long a hand-back waits for the worker's attempts out in its partitions: the heartbeat waits
    /// with it, and the next one (an interval after this one ends) must renew the leases kept before they
    /// count as lost by the local clock, with an interval to spare. 2 s with the default lease and interval.
    var handBackWait: Duration { max(.zero, leaseTime - margin - heartbeatInterval * 2) }

    /// Waits until no attempt is out for a delivery of `partitions`, at most ``handBackWait``. No new one
    /// begins meanwhile: the partitions are no longer held. Past the wait the partitions are released all
    /// the same (their new owner may send those deliveries again, as after a stop: at least once).
    private func waitForAttempts(in partitions: some Collection<Int>) async {
        // Woken by each attempt's end (``endAttempt(_:)``) and once at the deadline. The stream keeps the
        // last wake-up that came before the wait reads it: an attempt that ends between a count and the
        // wait that follows it is not missed. (One hand-back at a time: the heartbeat runs them.)
        let (wakeUps, wake) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        attemptEnded.withLock { $0 = wake }
        let expired = Atomic(false)
        let wait = handBackWait
        let deadline = Task {
            // Cancelled: the wait ended first.
            guard (try? await Task.sleep(for: wait)) != nil else { return }
            expired.store(true, ordering: .sequentiallyConsistent)
            wake.yield()
        }
        defer {
            attemptEnded.withLock { $0 = nil }
            deadline.cancel()
            wake.finish()
        }
        var out = held.withLock { $0.attemptsOut(in: partitions) }
        var next = wakeUps.makeAsyncIterator()
        while out > 0, !expired.load(ordering: .sequentiallyConsistent) {
            guard await next.next() != nil else { break }
            out = held.withLock { $0.attemptsOut(in: partitions) }
        }
        if out > 0 {
            metrics.handBackAttemptsOut(out)
            logger.notice(
                "deliveries still out at the push service when their partitions are handed back; the new owner may send them again",
                metadata: ["deliveries": "\(out)", "waited": "\(handBackWait)"]
            )
        }
    }

    /// Beats every ``heartbeatInterval`` until cancelled. While heartbeats fail, the leases run out by
    /// the local clock and the engine forgets them (another gateway may take them).
    func run() async {
        var failing = false
        while !Task.isCancelled {
            do {
                try await beat()
                if failing { logger.notice("heartbeats reach the database again") }
                failing = false
            } catch {
                if Task.isCancelled { break }   // the gateway stops
                if !failing { logger.error("heartbeat failed; leases run out unless renewed", metadata: ["error": "\(error)"]) }
                failing = true
                await heartbeatFailed()
            }
            try? await Task.sleep(for: heartbeatInterval)
        }
    }

    /// A heartbeat failed: once the leases have run out by the local clock, the engine forgets them.
    func heartbeatFailed() async {
        let now = monotonic()
        let expired = held.withLock { $0.heartbeatFailed(at: now) }
        if !expired.isEmpty { await engine.giveUp(expired, handingBack: false) }
    }

    /// Gives every lease back (the gateway stops after its last commit): others take them at once.
    func releaseAll() async {
        let all = held.withLock { $0.releaseAll() }
        do {
            try await store.leave(gateway: gateway)
            logger.info("leases released", metadata: ["partitions": "\(all.count)"])
        } catch {
            logger.warning("cannot release the leases; they expire by themselves", metadata: ["error": "\(error)"])
        }
    }
}

/// Runs a gateway's cluster membership: the heartbeat, and the listener for other gateways' changes
/// (apps, keys, devices: the caches forget them; forwarded work: the engine reads its inbox). On
/// shutdown (after the door's last commit, since it starts before the door) the leases are released.
struct ClusterService: Service {
    let membership: ClusterMembership
    /// The shared store whose change notifications the gateway listens to.
    let listener: any ClusterStore
    let door: GatewayDoor

    func run() async throws {
        let door = door
        let listener = listener
        let engine = membership.engine
        await withDiscardingTaskGroup { group in
            group.addTask {
                await membership.run()
                membership.logger.debug("heartbeat stopped")
            }
            group.addTask {
                defer { membership.logger.debug("listener stopped") }
                await listener.listen { notice in
                    switch notice?.change {
                    case .apps?: door.apps.forgetAll()
                    case .keys?: await door.keys.refresh()
                    case .devices?:
                        if let tokens = notice?.tokens {
                            door.registryCache.forget(tokens: tokens)
                        } else {
                            door.registryCache.invalidate()
                        }
                    case .inbox?: await engine.inboxChanged()
                    case nil:
                        door.apps.forgetAll()
                        door.registryCache.invalidate()
                        await door.keys.refresh()
                        await engine.inboxChanged()
                    }
                }
            }
            group.addTask {
                await Self.gatherStatistics(every: Self.statisticsInterval, logger: membership.logger) {
                    try await listener.analyzeTablesWithoutStatistics(minimumRows: Self.rowsForStatistics)
                }
            }
            try? await gracefulShutdown()
            group.cancelAll()
        }
        await membership.releaseAll()
    }

    /// How often the gateway looks for tables without statistics (``gatherStatistics(of:every:logger:)``):
    /// a registration herd on a new database adds thousands of rows a second, and until the look has them
    /// analyzed a group commit's plan may read those tables whole (decision 0113).
    static let statisticsInterval: Duration = .seconds(2)
    /// Tables this small are planned well enough without statistics.
    static let rowsForStatistics = 1_000

    /// Until cancelled, every `interval`: has the database analyze the store's tables that hold rows but
    /// no statistics yet (`look`, ``ClusterStore/analyzeTablesWithoutStatistics(minimumRows:)``). On a new
    /// database, autovacuum's first `ANALYZE` comes up to a minute after the first writes; until then
    /// PostgreSQL took an app's 50,000 devices for a few hundred and read a fan-out webhook's targets in
    /// 44 s, past the store's deadline (decision 0113). Once every table has been analyzed, by anyone, a
    /// look finds nothing to do.
    ///
    /// A look that fails once (the database away for a moment, another gateway analyzing the same table)
    /// is tried again at the next; one that keeps failing (``statisticsFailuresToWarn`` in a row: a role
    /// without the right to analyze, a changed catalog) is told once at warning level, since the gateway
    /// then works on without statistics on a new database, slower, and says so again when a look succeeds.
    static func gatherStatistics(every interval: Duration, logger: Logger, look: () async throws -> [String]) async {
        var failures = 0
        while !Task.isCancelled {
            do {
                let analyzed = try await look()
                if failures >= statisticsFailuresToWarn {
                    logger.notice("the look for tables without statistics works again")
                }
                failures = 0
                if !analyzed.isEmpty {
                    logger.info("gathered statistics for tables the database had none for", metadata: ["tables": "\(analyzed.joined(separator: ", "))"])
                }
            } catch {
                if Task.isCancelled { break }  // the gateway stops
                failures += 1
                if failures == statisticsFailuresToWarn {
                    logger.warning(
                        "cannot look for tables without statistics; a new database's tables may be read whole until autovacuum analyzes them",
                        metadata: ["error": "\(error)", "looks": "\(failures)"]
                    )
                } else {
                    logger.debug("could not gather statistics", metadata: ["error": "\(error)"])
                }
            }
            try? await Task.sleep(for: interval)
        }
    }

    /// Looks failed in a row before the gateway warns (6 s at ``statisticsInterval``): fewer would warn of
    /// a database restarting.
    static let statisticsFailuresToWarn = 3
}

/// The gateway's place among several on one database (PostgreSQL): its id and the shared store. `nil`
/// wherever the gateway is the only one (SQLite).
struct GatewayCluster: Sendable {
    var gateway: String
    var store: any ClusterStore
}
