import Foundation
import Logging
import ReloadGateCore
import ReloadGateStore
import ReloadGateTesting
import ServiceLifecycleTestKit
import Synchronization
import Testing

@testable import ReloadGateServer

/// The delivery worker's slots: first attempts leave in groups, and a delivery that waits for its retry
/// keeps one slot, never its whole group's.
@Suite(.timeLimit(.minutes(2)))
struct DeliveryWorkerTests {
    /// Answers 429 to the devices in `slow` (every time) and 200 to the others; counts what it sends.
    final class Upstream: DeliveryUpstream {
        let slow: Set<String>
        let sent = Mutex<[String]>([])
        let refused = Mutex<[String]>([])

        init(slow: Set<String>) {
            self.slow = slow
        }

        func send(_ push: OutgoingPush) async throws -> DeliveryOutcome {
            if slow.contains(push.deviceToken.hex) {
                refused.withLock { $0.append(push.deviceToken.hex) }
                return .retry(reason: "TooManyRequests", retryAfter: nil)
            }
            sent.withLock { $0.append(push.deviceToken.hex) }
            return .sent
        }
    }

    /// `count` devices of one widget registered in `store` (an app of its own), and a pending delivery to
    /// each; the devices' tokens in the same order.
    static func pendingDeliveries(_ count: Int, in store: SQLiteStore) async throws -> (deliveries: [RecordedDelivery], tokens: [String]) {
        let app = try await store.createApp(bundle: try BundleID("com.example.worker"), now: Date()).app
        var deliveries: [RecordedDelivery] = []
        var tokens: [String] = []
        for index in 0..<count {
            let token = String(format: "%08x", index) + String(repeating: "a", count: 56)
            let registered = try await store.putDevice(
                app: app,
                token: try DeviceToken(token),
                widgets: [WidgetRegistration(id: "w", kind: "scores", family: .systemSmall, configuration: WidgetConfiguration())],
                previousToken: nil,
                now: Date()
            )
            tokens.append(token)
            deliveries.append(RecordedDelivery(
                apnsID: UUID().uuidString.lowercased(),
                device: registered.device,
                released: Timestamp(Date()),
                instances: [registered.instances[0].id],
                requests: [],
                priority: .high,
                expiration: nil,
                state: .pending
            ))
        }
        return (deliveries, tokens)
    }

    @Test func aDeliveryWaitingForItsRetryHoldsOneSlotNotItsGroups() async throws {
        let directory = try TemporaryDirectory("worker")
        defer { directory.remove() }
        let store = try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: Date())
        defer { try? store.close() }
        let (deliveries, tokens) = try await Self.pendingDeliveries(40, in: store)
        // 8 slots in groups of 2: one slow device in each of the first four groups. If a group kept its
        // slots while its slow delivery waited a minute for the retry, those four groups would hold all
        // eight and nothing else would leave; with one slot per waiting delivery, four stay free.
        let slow = Set([0, 2, 4, 6].map { tokens[$0] })
        let upstream = Upstream(slow: slow)
        let logger = Logger(label: "test")
        let door = GatewayDoor(store: store, scheduling: SchedulerConfiguration(), now: { Date() }, logger: logger)
        let states = door.deliveryStates
        var worker = DeliveryWorker(store: store, upstream: upstream, states: door, now: { Date() }, logger: logger)
        worker.concurrency = 8
        worker.firstBackoff = .seconds(60)
        #expect(worker.batchSize == 2)
        let (batches, feed) = AsyncStream.makeStream(of: [RecordedDelivery].self)
        let statesTask = Task { await states.run() }
        // The worker runs under a graceful shutdown of its own, as under the gateway's service group.
        try await testGracefulShutdown { shutdown in
            let running = Task { [worker] in await worker.run(batches) }
            feed.yield(deliveries)

            _ = try await eventually { upstream.sent.withLock({ $0.count }) >= 36 }
            #expect(upstream.sent.withLock { Set($0) } == Set(tokens).subtracting(slow))
            #expect(upstream.refused.withLock { Set($0) } == slow)

            // The four wait a minute for their retry: the graceful shutdown ends their waits.
            let stopped = ContinuousClock.now
            shutdown.triggerGracefulShutdown()
            feed.finish()
            await running.value
            #expect(stopped.duration(to: .now) < .seconds(20), "the worker waited for its retries' backoffs")
        }
        states.finish()
        await statesTask.value
    }

    /// The worker tells the memory upkeep when a burst has ended: once it holds nothing after at least
    /// `burstSize` deliveries ended, with every one of them sent by then; a smaller burst tells nothing.
    @Test func theEndOfABurstIsToldOnceEveryDeliveryOfItEnded() async throws {
        let directory = try TemporaryDirectory("worker")
        defer { directory.remove() }
        let store = try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: Date())
        defer { try? store.close() }
        let (deliveries, _) = try await Self.pendingDeliveries(50, in: store)
        let upstream = Upstream(slow: [])
        let logger = Logger(label: "test")
        let door = GatewayDoor(store: store, scheduling: SchedulerConfiguration(), now: { Date() }, logger: logger)
        let states = door.deliveryStates
        var worker = DeliveryWorker(store: store, upstream: upstream, states: door, now: { Date() }, logger: logger)
        worker.concurrency = 8
        worker.burstSize = 30
        // How many deliveries had been sent at each call.
        let told = Mutex<[Int]>([])
        worker.burstEnded = { told.withLock { $0.append(upstream.sent.withLock { $0.count }) } }
        let (batches, feed) = AsyncStream.makeStream(of: [RecordedDelivery].self)
        let statesTask = Task { await states.run() }
        let running = Task { [worker] in await worker.run(batches) }

        feed.yield(Array(deliveries.prefix(40)))
        _ = try await eventually { told.withLock { !$0.isEmpty } }
        #expect(told.withLock { $0 } == [40])
        // Ten more: fewer than a burst, so nothing is told once they are sent.
        feed.yield(Array(deliveries.suffix(10)))
        _ = try await eventually { upstream.sent.withLock({ $0.count }) == 50 && worker.held.count == 0 }
        feed.finish()
        await running.value
        #expect(told.withLock { $0 } == [40])
        states.finish()
        await statesTask.value
    }

    /// Records each push's widget ids; names widgets (like the outbox) or not (like Apple).
    final class NamingUpstream: DeliveryUpstream {
        let namesWidgets: Bool
        let widgetIDs = Mutex<[[String]]>([])

        init(namesWidgets: Bool) {
            self.namesWidgets = namesWidgets
        }

        func send(_ push: OutgoingPush) async throws -> DeliveryOutcome {
            widgetIDs.withLock { $0.append(push.widgetIDs) }
            return .sent
        }
    }

    /// A delivery's widget ids are read with its address only for an upstream that uses them: Apple's
    /// request carries none, and reading the device's widgets costs about a twentieth of a delivery's CPU.
    @Test func widgetIDsAreReadOnlyForAnUpstreamThatNamesThem() async throws {
        let directory = try TemporaryDirectory("worker")
        defer { directory.remove() }
        let store = try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: Date())
        defer { try? store.close() }
        let app = try await store.createApp(bundle: try BundleID("com.example.worker"), now: Date()).app
        let registered = try await store.putDevice(
            app: app,
            token: try DeviceToken(String(repeating: "ab", count: 32)),
            widgets: [
                WidgetRegistration(id: "scores-small", kind: "scores", family: .systemSmall, configuration: WidgetConfiguration()),
                WidgetRegistration(id: "scores-large", kind: "scores", family: .systemLarge, configuration: WidgetConfiguration()),
            ],
            previousToken: nil,
            now: Date()
        )
        for namesWidgets in [true, false] {
            let upstream = NamingUpstream(namesWidgets: namesWidgets)
            let logger = Logger(label: "test")
            let door = GatewayDoor(store: store, scheduling: SchedulerConfiguration(), now: { Date() }, logger: logger)
            let states = door.deliveryStates
            let worker = DeliveryWorker(store: store, upstream: upstream, states: door, now: { Date() }, logger: logger)
            let delivery = RecordedDelivery(
                apnsID: UUID().uuidString.lowercased(),
                device: registered.device,
                released: Timestamp(Date()),
                instances: CompactList(registered.instances.map(\.id)),
                requests: [],
                priority: .high,
                expiration: nil,
                state: .pending
            )
            let (batches, feed) = AsyncStream.makeStream(of: [RecordedDelivery].self)
            let statesTask = Task { await states.run() }
            feed.yield([delivery])
            feed.finish()
            await worker.run(batches)
            states.finish()
            await statesTask.value
            let expected: [[String]] = namesWidgets ? [["scores-large", "scores-small"].sorted()] : [[]]
            #expect(upstream.widgetIDs.withLock { $0.map { $0.sorted() } } == expected, "namesWidgets: \(namesWidgets)")
        }
    }

    /// Apple's `retry-after` is outside input: any number waits at most an hour, a negative one or an HTTP
    /// date is ignored, and no attempt count overflows the doubling.
    @Test func retryAfterAndTheBackoffAreBoundedWhateverAppleSays() throws {
        let directory = try TemporaryDirectory("worker")
        defer { directory.remove() }
        let store = try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: Date())
        defer { try? store.close() }
        let logger = Logger(label: "test")
        let worker = DeliveryWorker(
            store: store, upstream: Upstream(slow: []),
            states: GatewayDoor(store: store, scheduling: SchedulerConfiguration(), now: { Date() }, logger: logger),
            now: { Date() }, logger: logger
        )
        #expect(APNsUpstream.retryAfter("9223372036854775807") == 3600)
        #expect(APNsUpstream.retryAfter("-9223372036854775808") == 0)
        #expect(APNsUpstream.retryAfter("120") == 120)
        for text in ["99999999999999999999", "1e300", "Wed, 21 Oct 2026 07:28:00 GMT", "", "NaN"] {
            #expect(APNsUpstream.retryAfter(text) == nil, "\(text)")
        }
        for retryAfter in [Int64.max, Int64.min, 0, 3600, 7200] as [Int64] {
            for attempt in [Int.min, -1, 0, 1, 2, 17, 64, Int.max] {
                let wait = worker.backoff(attempt: attempt, retryAfter: retryAfter)
                #expect(wait >= .zero && wait <= .seconds(3600), "attempt \(attempt), retry-after \(retryAfter): \(wait)")
            }
        }
        #expect(worker.backoff(attempt: 1, retryAfter: 7200) == .seconds(3600))
        #expect(worker.backoff(attempt: 30, retryAfter: nil) <= .seconds(60))
    }

    /// Answers `retry` (429) `retries` times, then 200; counts attempts and notes the test clock and the
    /// push's expiration at each.
    final class RetryingUpstream: DeliveryUpstream {
        let retries: Int
        let clock: ManualClock
        let attempts = Mutex<[Duration]>([])
        let expirations = Mutex<[Timestamp?]>([])

        init(retries: Int, clock: ManualClock) {
            self.retries = retries
            self.clock = clock
        }

        func send(_ push: OutgoingPush) async throws -> DeliveryOutcome {
            expirations.withLock { $0.append(push.expiration) }
            let count = attempts.withLock { attempts in
                attempts.append(clock.now.offset)
                return attempts.count
            }
            return count <= retries ? .retry(reason: "TooManyRequests", retryAfter: nil) : .sent
        }
    }

    /// The retry backoff runs on the injected clock: nothing is tried again before the clock has moved
    /// by the first backoff (1 s less up to 20% jitter), then by the doubled one; no real second passes.
    @Test func retriesWaitTheirBackoffOnTheInjectedClock() async throws {
        let directory = try TemporaryDirectory("worker")
        defer { directory.remove() }
        let store = try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: Date())
        defer { try? store.close() }
        let app = try await store.createApp(bundle: try BundleID("com.example.worker"), now: Date()).app
        let registered = try await store.putDevice(
            app: app,
            token: try DeviceToken(String(repeating: "ab", count: 32)),
            widgets: [WidgetRegistration(id: "w", kind: "scores", family: .systemSmall, configuration: WidgetConfiguration())],
            previousToken: nil,
            now: Date()
        )
        let delivery = RecordedDelivery(
            apnsID: UUID().uuidString.lowercased(), device: registered.device, released: Timestamp(Date()),
            instances: [registered.instances[0].id], requests: [], priority: .high, expiration: nil, state: .pending
        )
        let clock = ManualClock()
        let upstream = RetryingUpstream(retries: 2, clock: clock)
        let logger = Logger(label: "test")
        let door = GatewayDoor(store: store, scheduling: SchedulerConfiguration(), now: { Date() }, logger: logger)
        var worker = DeliveryWorker(store: store, upstream: upstream, states: door, now: { Date() }, logger: logger)
        worker.clock = clock
        worker.firstBackoff = .seconds(1)
        let attempts = { upstream.attempts.withLock { $0 } }

        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await door.deliveryStates.run() }
            group.addTask { [worker] in await worker.send(delivery) }
            /// Moves the clock in 100 ms steps until `count` attempts were made, at most `limit` steps. A
            /// step is taken only once the worker sleeps on the clock (or the attempts are made): however
            /// slow the machine, the clock never runs ahead of the worker.
            func advance(until count: Int, limit: Int) async throws {
                for _ in 0..<limit where attempts().count < count {
                    _ = try await eventually(every: .milliseconds(5)) { clock.sleepers > 0 || attempts().count >= count }
                    guard attempts().count < count else { return }
                    clock.advance(by: .milliseconds(100))
                }
            }
            _ = try await eventually { !attempts().isEmpty }
            #expect(attempts() == [.zero])
            try await advance(until: 2, limit: 7)
            #expect(attempts().count == 1, "tried again before 0.8 s of the clock: \(attempts())")
            try await advance(until: 2, limit: 40)
            try await advance(until: 3, limit: 60)
            let times = attempts()
            #expect(times.count == 3, "\(times)")
            if times.count == 3 {
                #expect(times[1] >= .milliseconds(800), "\(times)")
                #expect(times[2] - times[1] >= .milliseconds(1600), "\(times)")
            }
            door.deliveryStates.finish()
            try await group.waitForAll()
        }
    }

    /// A delivery for now or never (`apns-expiration: 0`) is sent however late the worker gets to it (here
    /// 2 s after its release, a slowed worker), with `0` upstream; while its attempts ask for a retry it is
    /// tried again, but never 30 s or more after its release, and then it is failed with the reason. The
    /// clock and the wall clock move together, only while the worker sleeps on the clock.
    @Test func aDeliveryForNowOrNeverIsSentHoweverLateAndRetriedOnlyWithinItsBound() async throws {
        let directory = try TemporaryDirectory("worker-now-or-never")
        defer { directory.remove() }
        let store = try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: Date())
        defer { try? store.close() }
        let app = try await store.createApp(bundle: try BundleID("com.example.worker"), now: Date())
        let registered = try await store.putDevice(
            app: app.app,
            token: try DeviceToken(String(repeating: "cd", count: 32)),
            widgets: [WidgetRegistration(id: "w", kind: "scores", family: .systemSmall, configuration: WidgetConfiguration())],
            previousToken: nil,
            now: Date()
        )
        let clock = ManualClock()
        let start = Date(timeIntervalSince1970: 1_790_172_000)
        let wall: @Sendable () -> Date = { start.addingTimeInterval(Double(clock.now.offset.milliseconds) / 1000) }
        let delivery = RecordedDelivery(
            apnsID: UUID().uuidString.lowercased(), device: registered.device, released: Timestamp(start).adding(milliseconds: -2000),
            instances: [registered.instances[0].id], requests: [], priority: .high, expiration: .nowOrNever, state: .pending
        )
        var batch = LedgerBatch()
        batch.deliveries = [delivery]
        try await store.commit(batch)
        let upstream = RetryingUpstream(retries: 1_000, clock: clock)
        let logger = Logger(label: "test")
        let door = GatewayDoor(store: store, scheduling: SchedulerConfiguration(), now: wall, logger: logger)
        var worker = DeliveryWorker(store: store, upstream: upstream, states: door, now: wall, logger: logger)
        worker.clock = clock
        worker.maximumAttempts = 100
        let attempts = { upstream.attempts.withLock { $0 } }

        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await door.deliveryStates.run() }
            let finished = Order()
            let sending = Task { [worker] in
                await worker.send(delivery)
                finished.add("sent")
            }
            // The clock moves only while the worker sleeps on it, until the worker is done.
            while finished.all.isEmpty {
                _ = try await eventually(every: .milliseconds(5)) { clock.sleepers > 0 || !finished.all.isEmpty }
                if clock.sleepers > 0 { clock.advance(by: .milliseconds(100)) }
            }
            await sending.value
            door.deliveryStates.finish()
            try await group.waitForAll()
        }
        let times = attempts()
        #expect(times.first == .zero, "the first attempt, 2 s after the release, was made at once")
        #expect(times.count >= 5, "\(times)")
        #expect(times.allSatisfy { $0 < .seconds(28) }, "an attempt 30 s or more after the release: \(times)")
        #expect(upstream.expirations.withLock { $0 }.allSatisfy { $0 == .nowOrNever }, "sent as apns-expiration: 0")
        let failed = try await store.deliveries(in: [.failed])
        #expect(failed.map(\.apnsID) == [delivery.apnsID])
        let error = try #require(try await store.delivery(apnsID: delivery.apnsID)).delivery.history.lastError ?? ""
        #expect(error.contains("expiration 0 (now or never): not tried again 30 s after its release"), "\(error)")
    }

    /// Names in the order they were added, from any task.
    final class Order: Sendable {
        let names = Mutex<[String]>([])
        func add(_ name: String) { names.withLock { $0.append(name) } }
        var all: [String] { names.withLock { $0 } }
    }

    @Test func slotsAreTakenInOrderOfAsking() async throws {
        let slots = DeliverySlots(4)
        await slots.acquire(3)
        let order = Order()
        let two = Task {
            await slots.acquire(2)
            order.add("two")
        }
        try await Task.sleep(for: .milliseconds(50))
        // One slot is free, but the caller asking for two came first: the one asking for one waits too.
        let one = Task {
            await slots.acquire(1)
            order.add("one")
        }
        try await Task.sleep(for: .milliseconds(50))
        #expect(order.all.isEmpty)
        slots.release(1)   // two free: the first caller's turn
        await two.value
        try await Task.sleep(for: .milliseconds(50))
        #expect(order.all == ["two"])
        slots.release(1)
        await one.value
        #expect(order.all == ["two", "one"])
    }
}
