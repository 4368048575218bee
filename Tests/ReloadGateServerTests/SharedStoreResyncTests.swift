import Foundation
import ReloadGateCore
import ReloadGateTesting
import Testing

@testable import ReloadGateServer
@testable import ReloadGateStore

/// On a shared store, the registry batch's devices are brought in line with one read, not one a device:
/// on PostgreSQL each read is a round trip in the commit loop's turn, and one a device held registrations
/// near 520 a second (docs/BENCHMARKS.md). What the scheduler holds after is what a read a device gives;
/// a device whose partition is given up while the read waits is left to its next owner.
@Suite struct SharedStoreResyncTests {
    @Test func aRegistryBatchIsBroughtInLineWithOneRead() async throws {
        let cluster = try await BesideTheCommitLoopTests.Cluster()
        let store = cluster.store
        // Forty devices registered in the store, as a registry batch writes them, then a timeline write
        // between two runs of registrations.
        var registered: [(device: Int64, instances: [Int64])] = []
        for number in 10..<50 {
            registered.append(try store.register(app: cluster.app.id, token: BesideTheCommitLoopTests.Cluster.token(number), kinds: ["scores"], now: Timestamp(Date())))
        }
        func written(_ device: (device: Int64, instances: [Int64])) -> (RegistryWrite, RegistryWritten) {
            let widget = WidgetRegistration(id: "w", kind: "scores", family: .systemSmall, configuration: WidgetConfiguration([:]))
            let registration = DeviceRegistration(
                device: device.device, pushType: .widgets, instances: device.instances.map { ($0, InstanceRegistration(widget)) },
                removedInstances: [], retired: nil
            )
            return (.putDevice(app: cluster.app, token: try! DeviceToken(BesideTheCommitLoopTests.Cluster.token(Int(device.device))), widgets: [widget], previousToken: nil), .device(registration))
        }
        let reads = store.registrationReads
        _ = try await cluster.engine.applyWithoutWaiting(registered.map(written))
        #expect(store.registrationReads - reads == 1, "reads for one batch of \(registered.count) registrations")
        for device in registered {
            for instance in device.instances {
                let handle = try #require(SchedulerEngine.handle(instance))
                #expect(await cluster.engine.scheduler.isRegistered(handle), "instance \(instance) of device \(device.device)")
            }
        }
        // Two runs split by another write: a read each.
        let timeline: (RegistryWrite, RegistryWritten) = (
            .putTimeline(app: cluster.app, token: try DeviceToken(BesideTheCommitLoopTests.Cluster.token(10)), widgetID: "w", timeline: Timeline(entries: [], policy: .never)),
            .timeline(instance: registered[0].instances[0])
        )
        let before = store.registrationReads
        _ = try await cluster.engine.applyWithoutWaiting(registered.prefix(5).map(written) + [timeline] + registered.suffix(5).map(written))
        #expect(store.registrationReads - before == 2)

        // A batch larger than one read names (1,000 devices) is read in parts, each within the store's deadline.
        for number in 50..<1_060 {
            registered.append(try store.register(app: cluster.app.id, token: BesideTheCommitLoopTests.Cluster.token(number), kinds: ["scores"], now: Timestamp(Date())))
        }
        let large = store.registrationReads
        _ = try await cluster.engine.applyWithoutWaiting(registered.map(written))
        #expect(store.registrationReads - large == 2, "reads for \(registered.count) registrations")
        let last = try #require(registered.last.flatMap { SchedulerEngine.handle($0.instances[0]) })
        #expect(await cluster.engine.scheduler.isRegistered(last))
    }

    /// A registry change's registrations are read while the heartbeat goes on, and the device's partition
    /// can be given up meanwhile (a hand-back, or a lease lost): what the read found is not registered
    /// here. (It was: a scheduler holding widgets of a partition another gateway schedules.)
    @Test func aDeviceGivenUpWhileItsRegistrationIsReadIsNotRegisteredHere() async throws {
        let cluster = try await BesideTheCommitLoopTests.Cluster()
        let (store, engine) = (cluster.store, cluster.engine)
        let added = try store.register(app: cluster.app.id, token: BesideTheCommitLoopTests.Cluster.token(60), kinds: ["scores"], now: Timestamp(Date()))
        let partition = DevicePartition.of(device: added.device)
        #expect(await engine.ownedPartitions[partition] != nil)
        store.registrationReadHold.hold()
        let change = Task { try await engine.devicesChangedWithoutWaiting([added.device]) }
        try await BesideTheCommitLoopTests.wait(within: .seconds(30)) { store.registrationReadHold.waiting == 1 }
        await engine.giveUp([partition], handingBack: false)
        store.registrationReadHold.release()
        _ = try await change.value
        let handle = try #require(SchedulerEngine.handle(added.instances[0]))
        #expect(await !engine.scheduler.isRegistered(handle))
        #expect(await engine.scheduler.instances(ofDevice: try #require(SchedulerEngine.deviceHandle(added.device))).isEmpty)
    }

    /// A registry change brought in line on a shared store is answered without awaiting a commit, unless
    /// the commit writes something the change made: a dropped pending reload's `cancelled` decision, or a
    /// planned reload (the rule on a store of one gateway). On PostgreSQL that commit is an inbox read, a
    /// read of the device and a ledger statement more before a registration's answer.
    @Test func aRegistryChangeWaitsForACommitOnlyWhenTheCommitWritesWhatItMade() async throws {
        let cluster = try await BesideTheCommitLoopTests.Cluster()
        let (store, engine) = (cluster.store, cluster.engine)
        let added = try store.register(app: cluster.app.id, token: BesideTheCommitLoopTests.Cluster.token(80), kinds: ["scores", "news"], now: Timestamp(Date()))
        #expect(await engine.ownedPartitions[DevicePartition.of(device: added.device)] != nil)
        let (first, second) = (try #require(SchedulerEngine.handle(added.instances[0])), try #require(SchedulerEngine.handle(added.instances[1])))
        // New widgets: registered here, nothing for a commit.
        #expect(try await !engine.devicesChangedWithoutWaiting([added.device]))
        #expect(await engine.scheduler.isRegistered(first))
        // A widget removed with nothing pending: nothing for a commit.
        try store.removeWidget(added.instances[1])
        #expect(try await !engine.devicesChangedWithoutWaiting([added.device]))
        #expect(await !engine.scheduler.isRegistered(second))
        // A planned reload set, then the same read again.
        let planned = Timestamp(milliseconds: Timestamp(Date()).milliseconds + 3_600_000)
        try store.setPlannedReload(added.instances[0], planned)
        #expect(try await engine.devicesChangedWithoutWaiting([added.device]))
        #expect(await engine.scheduler.snapshot(of: first)?.plannedReload == planned)
        #expect(try await !engine.devicesChangedWithoutWaiting([added.device]))

        // A widget removed while a reload of it waits: its `cancelled` decision is written by the commit.
        let waiting = try store.register(app: cluster.app.id, token: BesideTheCommitLoopTests.Cluster.token(81), kinds: ["scores"], now: Timestamp(Date()))
        #expect(try await !engine.devicesChangedWithoutWaiting([waiting.device]))
        let handle = try #require(SchedulerEngine.handle(waiting.instances[0]))
        let answers = Shared<[String: BesideTheCommitLoopTests.Answer]>([:])
        var pushes = 0
        while await engine.scheduler.pendingReload(of: handle) == nil, pushes < 10 {
            cluster.push(to: waiting, "push \(pushes)", answers: answers)
            await BesideTheCommitLoopTests.turn(of: engine)
            pushes += 1
        }
        let pending = try #require(await engine.scheduler.pendingReload(of: handle), "no reload waits after \(pushes) pushes")
        try store.removeWidget(waiting.instances[0])
        #expect(try await engine.devicesChangedWithoutWaiting([waiting.device]))
        await BesideTheCommitLoopTests.turn(of: engine)
        let cancelled = store.ledger.decisions.filter { $0.instance == handle && $0.kind == .cancelled }
        #expect(Set(cancelled.map(\.request)) == Set(pending.requests))
    }

    /// A request forwarded by another gateway to a device this one has not registered yet is decided after
    /// that device's registration is read. When the partition is handed back during that read, the request
    /// stays in the inbox for the next owner. (A hand-back keeps this gateway's fence generation: the
    /// open batch commits, so a request decided there on forgotten state would leave the inbox with it.)
    @Test func aRequestForwardedToAPartitionHandedBackWhileItsTargetIsReadStaysInTheInbox() async throws {
        let cluster = try await BesideTheCommitLoopTests.Cluster()
        let (store, engine) = (cluster.store, cluster.engine)
        let added = try store.register(app: cluster.app.id, token: BesideTheCommitLoopTests.Cluster.token(70), kinds: ["scores"], now: Timestamp(Date()))
        let partition = DevicePartition.of(device: added.device)
        #expect(await engine.ownedPartitions[partition] != nil)
        #expect(await !engine.scheduler.isRegistered(try #require(SchedulerEngine.handle(added.instances[0]))))

        // The registry's notices of the devices are taken out of the inbox (they would be read first, and
        // hold the read themselves): the request's own read of its target's registration is the one held.
        var notices = LedgerBatch()
        notices.consumedInbox = try await store.inbox(partitions: Array(0..<DevicePartition.partitionCount), limit: 100).map(\.id)
        try await store.commit(notices)
        // Another gateway took the push and forwarded it.
        let forwarded = try await cluster.forwardFromAnotherGateway(id: 1_000_000_001, to: added)
        store.registrationReadHold.hold()
        await engine.inboxChanged()
        let turn = Task { await BesideTheCommitLoopTests.turn(of: engine) }
        try await BesideTheCommitLoopTests.wait(within: .seconds(30)) { store.registrationReadHold.waiting == 1 }
        await engine.giveUp([partition], handingBack: true)
        store.registrationReadHold.release()
        await turn.value
        // What the turn decided commits with the next turns (as the hand-back's own wait commits it).
        await BesideTheCommitLoopTests.turn(of: engine)
        await BesideTheCommitLoopTests.turn(of: engine)

        #expect(await !engine.isDegraded)
        #expect(try await store.inbox(partitions: [partition], limit: 10).map(\.work) == [forwarded.work])
        #expect(!store.ledger.decisions.contains { $0.request == forwarded.id }, "decided on a partition no longer scheduled here")
    }
}
