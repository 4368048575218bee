import Foundation
import Logging
import ReloadGateCore
import ReloadGateStore
import ReloadGateTesting
import Synchronization
import Testing

@testable import ReloadGateServer

/// Apple's 410 for a delivery: the device is marked unregistered before the delivery's failure is
/// recorded, so that whoever reads the failure (an operator, a test, the next push) finds the device
/// unregistered too, and a crash between the two writes sends the delivery again rather than losing the
/// mark. A CI run of `APNsUpstreamTests` once read the failure and then pushed, and got 200 instead of 410.
@Suite(.timeLimit(.minutes(1)))
struct UnregisteredOrderTests {
    /// Answers every push with 410 Unregistered, without Apple's timestamp (the worker takes its own time:
    /// a timestamp from before the token's registration would leave the device registered).
    struct Gone: DeliveryUpstream {
        func send(_ push: OutgoingPush) async throws -> DeliveryOutcome {
            .deviceInvalid(reason: "Unregistered", since: nil)
        }
    }

    /// The door, with each report written down in the order it came; the mark takes a while, as a commit
    /// on a loaded machine does.
    final class Reports: DeliveryReports {
        let door: GatewayDoor
        let events = Mutex<[String]>([])

        init(door: GatewayDoor) { self.door = door }

        func record(_ change: DeliveryStateChange) {
            events.withLock { $0.append("record \(change.state.rawValue)") }
            door.record(change)
        }
        func recordDurably(_ changes: [DeliveryStateChange]) async throws {
            events.withLock { $0.append(contentsOf: changes.map { "durably \($0.state.rawValue)" }) }
            try await door.recordDurably(changes)
        }
        func markUnregistered(device: Int64, since: Timestamp) async {
            events.withLock { $0.append("mark begins") }
            try? await Task.sleep(for: .milliseconds(200))
            await door.markUnregistered(device: device, since: since)
            events.withLock { $0.append("mark ends") }
        }
        func served(_ delivery: RecordedDelivery, at: Timestamp, failed: Bool) {
            door.served(delivery, at: at, failed: failed)
        }
    }

    @Test func theDeviceIsMarkedBeforeTheFailureIsRecorded() async throws {
        let directory = try TemporaryDirectory("unregistered-order")
        defer { directory.remove() }
        let store = try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: Date())
        defer { try? store.close() }
        var batch = LedgerBatch()
        batch.deliveries = try await DeliveryWorkerTests.pendingDeliveries(1, in: store).deliveries
        try await store.commit(batch)

        let logger = Logger(label: "test")
        let door = GatewayDoor(store: store, scheduling: SchedulerConfiguration(), now: { Date() }, logger: logger)
        let states = door.deliveryStates
        let reports = Reports(door: door)
        let worker = DeliveryWorker(store: store, upstream: Gone(), states: reports, now: { Date() }, logger: logger)
        try await door.engine.load()
        // The commit loop, turned beside the worker: the mark is a command the engine commits, which the
        // worker waits for.
        let done = Atomic(false)
        async let turns: Void = BesideTheCommitLoopTests.turns(of: door.engine, within: .seconds(30), pastDeadline: .stopTheEngine) {
            done.load(ordering: .relaxed)
        }
        let (batches, feed) = AsyncStream.makeStream(of: [RecordedDelivery].self)
        let statesTask = Task { await states.run() }
        let running = Task { [worker] in await worker.run(batches) }
        feed.yield(batch.deliveries)
        let failed = try await eventually(within: .seconds(30)) { try await store.deliveries(in: [.failed]).count == 1 }
        #expect(failed)
        // Once the failure can be read, so can the mark.
        let all = try await store.devices(bundle: nil, token: nil, limit: 10)
        #expect(all.map(\.active) == [false], "\(reports.events.withLock { $0 }) \(all)")
        feed.finish()
        await running.value
        states.finish()
        await statesTask.value
        done.store(true, ordering: .relaxed)
        try await turns

        let events = reports.events.withLock { $0 }
        let markEnds = try #require(events.firstIndex(of: "mark ends"), "\(events)")
        let failure = try #require(events.firstIndex(of: "record failed"), "\(events)")
        #expect(markEnds < failure, "\(events)")
    }
}
