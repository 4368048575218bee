import Foundation
import Logging
import ReloadGateCore
import ReloadGateMockAPNs
import ReloadGateStore
import ReloadGateTesting
import Synchronization
import Testing

@testable import ReloadGateServer

/// Two deliveries of one Live Activity held by the delivery worker at once (released one after the other,
/// or an older one handed over with its partition): whatever order their groups and retries take, Apple
/// gets the activity's content newest-last, and an older update that would come after a newer one ends
/// `failed` as outdated instead.
@Suite(.timeLimit(.minutes(2)))
struct ActivityDeliveryOrderTests {
    /// Answers each Live Activity push after `delays[timestamp]` (Apple receiving it then), 429 to the first
    /// attempts of `refusedOnce`; `accepted` lists the timestamps it took, in the order it took them.
    final class Upstream: DeliveryUpstream {
        let delays: [Int64: Duration]
        let refusedOnce: Set<Int64>
        let refusedForGood: Set<Int64>
        let accepted = Mutex<[Int64]>([])
        let refused = Mutex<[Int64]>([])

        init(delays: [Int64: Duration] = [:], refusedOnce: Set<Int64> = [], refusedForGood: Set<Int64> = []) {
            self.delays = delays
            self.refusedOnce = refusedOnce
            self.refusedForGood = refusedForGood
        }

        func send(_ push: OutgoingPush) async throws -> DeliveryOutcome {
            let body = String(decoding: push.payload ?? [], as: UTF8.self)
            let timestamp = try #require(MockAPNsServer.activityTimestamp(body))
            if let delay = delays[timestamp] { try await Task.sleep(for: delay) }
            if refusedForGood.contains(timestamp) { return .failed(reason: "PayloadTooLarge") }
            let refuse = refusedOnce.contains(timestamp) && refused.withLock { refused in
                if refused.contains(timestamp) { return false }
                refused.append(timestamp)
                return true
            }
            if refuse { return .retry(reason: "TooManyRequests", retryAfter: nil) }
            accepted.withLock { $0.append(timestamp) }
            return .sent
        }
    }

    /// The door, with the deliveries' ends as the freshness figures get them (timestamp, failed).
    final class Reports: DeliveryReports {
        let door: GatewayDoor
        let timestamps: [String: Int64]
        let served = Mutex<[(timestamp: Int64, failed: Bool)]>([])

        init(door: GatewayDoor, timestamps: [String: Int64]) {
            self.door = door
            self.timestamps = timestamps
        }

        func record(_ change: DeliveryStateChange) { door.record(change) }
        func recordDurably(_ changes: [DeliveryStateChange]) async throws { try await door.recordDurably(changes) }
        func markUnregistered(device: Int64, since: Timestamp) async { await door.markUnregistered(device: device, since: since) }
        func served(_ delivery: RecordedDelivery, at: Timestamp, failed: Bool) {
            served.withLock { $0.append((timestamps[delivery.apnsID] ?? -1, failed)) }
            door.served(delivery, at: at, failed: failed)
        }
    }

    /// The deliveries of timestamps `older` and `newer` to one activity, handed to a worker with two groups
    /// of one in flight, older first; returns what the upstream took and each delivery's end.
    func deliver(through upstream: Upstream, older: Int64 = 1_796_043_349, newer: Int64 = 1_796_043_350) async throws
        -> Result
    {
        let directory = try TemporaryDirectory("activity-order")
        defer { directory.remove() }
        let store = try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: Date())
        defer { try? store.close() }
        let app = try await store.createApp(bundle: try BundleID("com.example.adventure"), now: Date()).app
        let activity = try await store.putActivity(
            app: app, token: try DeviceToken(String(repeating: "b4", count: 32)),
            activity: ActivityRegistration(attributesType: "AdventureAttributes"), previousToken: nil, now: Date()
        )
        var batch = LedgerBatch()
        var deliveries: [Int64: RecordedDelivery] = [:]
        for (index, timestamp) in [older, newer].enumerated() {
            let request = RequestID(index + 1)
            batch.requests.append(RecordedRequest(
                id: request, app: app.id, source: .push, received: Timestamp(Date()), priority: .high, expiration: nil,
                collapseID: nil, exempt: false,
                summary: #"{"aps":{"timestamp":\#(timestamp),"event":"update","content-state":{"step":\#(timestamp)}}}"#
            ))
            deliveries[timestamp] = RecordedDelivery(
                apnsID: UUID().uuidString.lowercased(), device: activity.device, released: Timestamp(Date()),
                instances: [activity.instances[0].id], requests: [request], priority: .high, expiration: nil, state: .pending
            )
        }
        batch.deliveries = [older, newer].compactMap { deliveries[$0] }
        try await store.commit(batch)

        let logger = Logger(label: "test")
        let door = GatewayDoor(store: store, scheduling: SchedulerConfiguration(), now: { Date() }, logger: logger)
        let states = door.deliveryStates
        let reports = Reports(door: door, timestamps: Dictionary(uniqueKeysWithValues: deliveries.map { ($1.apnsID, $0) }))
        var worker = DeliveryWorker(store: store, upstream: upstream, states: reports, now: { Date() }, logger: logger)
        worker.concurrency = 2
        worker.groupSize = 1
        worker.firstBackoff = .milliseconds(300)
        let (batches, feed) = AsyncStream.makeStream(of: [RecordedDelivery].self)
        let statesTask = Task { await states.run() }
        let running = Task { [worker] in await worker.run(batches) }
        feed.yield(batch.deliveries)
        let ended = try await eventually(within: .seconds(30)) {
            try await store.deliveries(in: [.sent, .failed]).count == 2
        }
        #expect(ended, "both deliveries end")
        #expect(worker.held.count == 0 && worker.held.deviceCount == 0, "nothing held once both ended")
        feed.finish()
        await running.value
        states.finish()
        await statesTask.value

        var ends: [Int64: RecordedDelivery.State] = [:]
        var errors: [Int64: String] = [:]
        for (timestamp, delivery) in deliveries {
            let record = try #require(try await store.delivery(apnsID: delivery.apnsID))
            ends[timestamp] = record.delivery.state
            errors[timestamp] = record.delivery.history.lastError
        }
        return Result(accepted: upstream.accepted.withLock { $0 }, ends: ends, errors: errors, served: reports.served.withLock { $0 })
    }

    struct Result {
        var accepted: [Int64]
        var ends: [Int64: RecordedDelivery.State]
        var errors: [Int64: String]
        /// What the freshness figures were told, in order: (timestamp, failed).
        var served: [(timestamp: Int64, failed: Bool)]
    }

    /// Checks what every run must show: the newest content taken last, nothing twice, and an older update
    /// not taken ended as outdated, which is no freshness miss (the newer delivery serves its requests).
    func expectNewestLast(_ result: Result) {
        let (older, newer): (Int64, Int64) = (1_796_043_349, 1_796_043_350)
        #expect(result.accepted == result.accepted.sorted() && Set(result.accepted).count == result.accepted.count, "\(result.accepted)")
        #expect(result.accepted.last == newer, "\(result.accepted)")
        #expect(result.ends[newer] == .sent)
        if result.accepted.contains(older) {
            #expect(result.ends[older] == .sent)
        } else {
            #expect(result.ends[older] == .failed)
            #expect(result.errors[older]?.hasPrefix("outdated: timestamp \(older) is older than \(newer)") == true, "\(result.errors)")
        }
        let served = result.served.filter { !$0.failed }.map(\.timestamp)
        #expect(served == result.accepted, "\(result.served)")
        #expect(!result.served.contains { $0.failed }, "an outdated update counted as a miss: \(result.served)")
    }

    /// The older update's attempt takes longer to be answered than the newer one's would: the newer one
    /// waits for it, or (when it went first) the older one is not sent.
    @Test func aSlowOlderUpdateIsNotOvertakenByANewerOne() async throws {
        let upstream = Upstream(delays: [1_796_043_349: .milliseconds(300)])
        expectNewestLast(try await deliver(through: upstream))
    }

    /// The older update's first attempt is refused (429): the newer one goes meanwhile, and the older one's
    /// retry is not sent after it.
    @Test func anOlderUpdateRetriedAfterANewerOneWentIsNotSent() async throws {
        let upstream = Upstream(refusedOnce: [1_796_043_349])
        let result = try await deliver(through: upstream)
        expectNewestLast(result)
        #expect(result.accepted == [1_796_043_350], "\(result.accepted)")
    }

    /// The older update's first attempt is refused (429) and the newer one's for good (`PayloadTooLarge`, say):
    /// the device showed neither, so the older one's retry is sent, not dropped as outdated.
    @Test func anOlderUpdateGoesWhenTheNewerOneWasRefusedForGood() async throws {
        let (older, newer): (Int64, Int64) = (1_796_043_349, 1_796_043_350)
        let upstream = Upstream(delays: [older: .milliseconds(50)], refusedOnce: [older], refusedForGood: [newer])
        let result = try await deliver(through: upstream)
        #expect(upstream.refused.withLock { $0 } == [older], "the older update's first attempt was refused")
        #expect(result.accepted == [older], "\(result.accepted)")
        #expect(result.ends[older] == .sent, "\(result.errors)")
        #expect(result.ends[newer] == .failed)
        #expect(result.errors[newer] == "PayloadTooLarge", "\(result.errors)")
    }

    /// Turns themselves: one attempt of a device's content at a time, the next after it ends, older content
    /// than attempted is outdated, and a device is forgotten when nothing of it is held.
    @Test func turnsGoOneAtATimeAndForgetADeviceNothingHolds() async throws {
        let held = HeldDeliveries()
        #expect(held.tryTurn(device: 7, timestamp: 10) == .go)
        #expect(held.tryTurn(device: 7, timestamp: 12) == .busy)
        #expect(held.tryTurn(device: 8, timestamp: 1) == .go, "another device has its own turn")
        let waiting = Task { await held.turn(device: 7, timestamp: 12) }
        try await Task.sleep(for: .milliseconds(50))
        held.endTurn(device: 7, reached: 10)
        #expect(await waiting.value == .go)
        held.endTurn(device: 7, reached: 12)
        // Forgotten once idle: what it knew lasts only while a delivery of the device is held.
        #expect(held.tryTurn(device: 7, timestamp: 11) == .go)
        held.endTurn(device: 7, reached: 11)
        held.endTurn(device: 8, reached: 1)
        #expect(held.deviceCount == 0)

        let delivery = RecordedDelivery(
            apnsID: "a", device: 9, released: Timestamp(milliseconds: 0), instances: [1], requests: [1], priority: .high,
            expiration: nil, state: .pending
        )
        _ = held.take([delivery])
        #expect(held.tryTurn(device: 9, timestamp: 20) == .go)
        held.endTurn(device: 9, reached: 20)
        #expect(held.tryTurn(device: 9, timestamp: 19) == .outdated(newer: 20))
        #expect(held.tryTurn(device: 9, timestamp: 20) == .go, "the same content again (a retry) goes")
        held.endTurn(device: 9, reached: 20)
        // Newer content that Apple refused showed nothing: older content still goes.
        #expect(held.tryTurn(device: 9, timestamp: 30) == .go)
        held.endTurn(device: 9, reached: nil)
        #expect(held.tryTurn(device: 9, timestamp: 25) == .go, "content older than a refused attempt goes")
        held.endTurn(device: 9, reached: 25)
        #expect(held.tryTurn(device: 9, timestamp: 21) == .outdated(newer: 25))
        held.release([delivery])
        #expect(held.deviceCount == 0)
    }
}
