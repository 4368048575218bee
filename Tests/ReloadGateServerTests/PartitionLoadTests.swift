import Foundation
import Logging
import ReloadGateCore
import ReloadGateStore
import ReloadGateTesting
import Synchronization
import Testing

@testable import ReloadGateServer

/// A partition taken by a heartbeat is loaded beside the commit loop, not in its turn: while the load's
/// reads do not answer (a connection that died under a scan, a slow database), the requests of the
/// partitions already scheduled are decided and answered, and those of the partition being loaded go to
/// its inbox, decided once it is loaded.
@Suite struct PartitionLoadTests {
    @Test func aLoadThatDoesNotAnswerHoldsUpNoRequest() async throws {
        let store = InMemorySharedStore(clock: { Int64(Date().timeIntervalSince1970 * 1000) })
        let app = App(
            id: 1, bundle: try BundleID("com.example.load"), environment: .production, teamID: "TEAM123456",
            allowsExemptions: false, createdAt: Date()
        )
        let scheduled = try store.register(app: app.id, token: Self.token(1), kinds: ["scores"], now: Timestamp(Date()))
        let taken = try store.register(app: app.id, token: Self.token(2), kinds: ["scores"], now: Timestamp(Date()))
        let takenPartition = DevicePartition.of(device: taken.device)
        #expect(DevicePartition.of(device: scheduled.device) != takenPartition)

        var logger = Logger(label: "test")
        logger.logLevel = .critical
        let engine = SchedulerEngine(
            store: store, configuration: SchedulerConfiguration(), now: { Date() }, logger: logger, metrics: GatewayMetrics(),
            partitioning: SchedulerEngine.Partitioning(gateway: "g", store: store), monotonic: { .now },
            outlet: SchedulerEngine.DeliveryOutlet(yield: { _ in }, finish: {})
        )
        let membership = ClusterMembership(
            gateway: "g", address: nil, store: store, engine: engine, logger: logger,
            leaseTime: .seconds(120), heartbeatInterval: .seconds(1)
        )
        try await engine.load()
        _ = try await membership.renew()
        await engine.partitionLoadEnded()
        #expect(await engine.ownedPartitions.count == DevicePartition.partitionCount)

        // The taken device's partition is let go and taken again; its load's reads do not answer.
        let epoch = try #require(membership.leases[takenPartition])
        await engine.giveUp([takenPartition], handingBack: false)
        store.holdPartitionReads()
        // (A takeover or a turn that waited for the load would wait for the hold: it is let go after 5 s, and
        // the test fails.)
        let waitedForTheLoad = Mutex(false)
        let watchdog = Task {
            try await Task.sleep(for: .seconds(5))
            waitedForTheLoad.withLock { $0 = true }
            store.releasePartitionReads()
        }
        await engine.takeOver([takenPartition: epoch])
        try await Self.wait(within: .seconds(10)) { store.partitionReadsWaiting == 1 || waitedForTheLoad.withLock { $0 } }

        // A push to each device: both answered while the load waits.
        let answers = Mutex<[Int64: RequestID]>([:])
        for device in [scheduled, taken] {
            let command = ReloadCommand(
                app: app, source: .push, targets: device.instances, targetDevices: device.instances.map { _ in device.device },
                priority: .high, expiration: nil, collapseID: nil, team: app.teamID, exempt: false, summary: "push",
                received: Timestamp(Date()), idempotency: nil
            )
            engine.enqueue(command, render: { _, _ in (200, "") }) { result in
                if case .success(.decided(let id, _, _, _)) = result { answers.withLock { $0[device.device] = id } }
            }
        }
        try await Self.turns(of: engine, within: .seconds(10)) { answers.withLock { $0.count } == 2 }
        watchdog.cancel()
        #expect(!waitedForTheLoad.withLock { $0 })
        #expect(store.partitionReadsWaiting == 1)
        let decided = store.ledger.decisions
        #expect(decided.contains { $0.instance?.rawValue == Int32(scheduled.instances[0]) && $0.kind != .forwarded })
        #expect(decided.filter { $0.instance?.rawValue == Int32(taken.instances[0]) }.map(\.kind) == [.forwarded])

        // Once the reads answer, the partition is scheduled here and the forwarded push decided from its inbox.
        store.releasePartitionReads()
        await engine.partitionLoadEnded()
        #expect(await engine.ownedPartitions[takenPartition] == epoch)
        try await Self.turns(of: engine, within: .seconds(10)) {
            store.ledger.decisions.contains { $0.instance?.rawValue == Int32(taken.instances[0]) && $0.kind != .forwarded }
        }
    }

    static func token(_ number: Int) -> String {
        String(repeating: "0", count: 48) + String(format: "%016x", number)
    }

    /// Runs the commit loop's turns (each commit in turn) until `done` or the deadline.
    static func turns(of engine: SchedulerEngine, within limit: Duration, until done: @Sendable () -> Bool) async throws {
        let deadline = ContinuousClock.now + limit
        while !done() {
            guard ContinuousClock.now < deadline else { throw TimedOut() }
            let turn = await engine.commitTurn()
            if let commit = turn.commit { await engine.perform(commit) }
            turn.answer()
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    static func wait(within limit: Duration, until done: @Sendable () -> Bool) async throws {
        let deadline = ContinuousClock.now + limit
        while !done() {
            guard ContinuousClock.now < deadline else { throw TimedOut() }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    struct TimedOut: Error {}
}
