import Foundation
import Logging
import ReloadGateCore
import ReloadGateStore
import ReloadGateTesting
import ServiceLifecycle
import Synchronization
import Testing

@testable import ReloadGateServer

/// Memory follows what the gateway holds, never how many requests it has seen: 200,000 pushes through the
/// engine (its commit loop and delivery worker running, a SQLite store) over 100 devices, half of them
/// with an apns-id, and nothing the engine or its scheduler keeps is larger after them than its bound:
/// the instances, their pending reloads, the retry window's keys (up to the index's capacity), and what
/// is in flight (nothing, once every push is answered). Sizes, not timings.
@Suite(.timeLimit(.minutes(10)), .heavy)
struct EngineFootprintTests {
    static let devices = 100
    static let capacity = 1_000

    @Test func twoHundredThousandPushesLeaveNothingBehindThatGrowsWithThem() async throws {
        let directory = try TemporaryDirectory("engine-footprint")
        defer { directory.remove() }
        var logger = Logger(label: "engine-footprint")
        logger.logLevel = .warning
        let store = try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: Date())
        defer { try? store.close() }
        let credentials = try await store.createApp(bundle: try BundleID("com.example.footprint"), teamID: "TEAM000001", allowsExemptions: false, now: Date())
        let widgets = [WidgetRegistration(id: "w1", kind: "scores", family: .systemSmall, configuration: WidgetConfiguration())]
        for index in 0..<Self.devices {
            _ = try await store.putDevice(
                app: credentials.app, token: try DeviceToken(String(format: "%064x", 0xf000 + index)), widgets: widgets, previousToken: nil,
                now: Date()
            )
        }
        let instances = try await store.registeredInstances()
        try #require(instances.count == Self.devices)

        let door = GatewayDoor(
            store: store, scheduling: SchedulerConfiguration(), now: { Date() }, logger: logger, keptAnswerCapacity: Self.capacity
        )
        try await door.load()
        let service = DoorService(
            door: door,
            worker: DeliveryWorker(
                store: door.reader, upstream: try OutboxUpstream(dataDirectory: directory.path("data"), logger: logger), states: door,
                now: { Date() }, logger: logger
            ),
            readiness: Readiness(),
            logger: logger
        )
        let group = ServiceGroup(configuration: .init(services: [service], gracefulShutdownSignals: [], logger: logger))
        let engine = door.engine
        let app = credentials.app

        /// Sends `count` pushes (`first` on), a chunk at a time, and returns once every one is answered.
        @Sendable func push(from first: Int, count: Int) async throws {
            let chunk = 2_000
            for start in stride(from: first, to: first + count, by: chunk) {
                let failures = Mutex(0)
                await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                    let left = Mutex(min(chunk, first + count - start))
                    for number in start..<min(start + chunk, first + count) {
                        let instance = instances[number % instances.count]
                        let apnsID = number.isMultiple(of: 2) ? String(format: "00000000-0000-4000-8000-%012x", number) : nil
                        let submission = ReloadCommand(
                            app: app, source: .push, targets: [instance.instance], targetDevices: [instance.device], priority: .high,
                            expiration: nil, collapseID: nil, team: "TEAM000001", exempt: false, summary: "{}",
                            apnsID: apnsID ?? String(format: "00000000-0000-4000-9000-%012x", number), received: Timestamp(Date()),
                            idempotency: apnsID.map { .push(apnsID: $0, device: instance.device) }
                        )
                        engine.enqueue(submission, render: { _, _ in (200, "reloadgate-decision: scheduled") }) { result in
                            if case .failure = result { failures.withLock { $0 += 1 } }
                            let remaining = left.withLock { left in
                                left -= 1
                                return left
                            }
                            if remaining == 0 { done.resume() }
                        }
                    }
                }
                #expect(failures.withLock { $0 } == 0)
            }
        }

        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            try await push(from: 0, count: 20_000)
            let early = await engine.footprint
            try await push(from: 20_000, count: 180_000)
            let late = await engine.footprint
            print("EngineFootprintTests: after 20,000 pushes \(early); after 200,000 \(late)")

            // (The instance table's count includes its unused slot 0.)
            #expect(late.scheduler.instances == early.scheduler.instances)
            #expect(late.scheduler.instances <= Self.devices + 1)
            #expect(late.scheduler.pendingSlots <= Self.devices)
            // A timer per instance and kind that is live, and stale ones that wait for their time to come
            // up (at most one per pending reload's change): never more than the pushes of the last moments.
            #expect(late.scheduler.timers <= max(early.scheduler.timers, 4 * Self.devices))
            #expect(late.scheduler.released <= max(early.scheduler.released, Self.devices))
            #expect(late.scheduler.changed <= Self.devices)
            // Every push answered: nothing in flight.
            #expect(late.inFlightKeys == 0)
            #expect(late.openWaiters == 0)
            #expect(late.batchKeys == 0)
            #expect(late.openBatch <= early.openBatch + 4 * Self.devices)
            // The retry window's keys: up to the index's capacity, the rest in the idempotency table.
            #expect(late.keptAnswers <= Self.capacity)
            // The commit loop's children are collected as it goes.
            #expect(late.uncollectedCommits <= 1)
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }
    }
}
