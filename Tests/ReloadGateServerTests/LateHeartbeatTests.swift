import Foundation
import Logging
import ReloadGateCore
import ReloadGateStore
import ReloadGateTesting
import Synchronization
import Testing

@testable import ReloadGateServer

/// A heartbeat late on a loaded machine: the leases count as lost by the gateway's own clock (the worker
/// sends nothing for them), then the next heartbeat renews them with the same epoch. Nobody else sends
/// what the worker held back, so it must come back to the worker, not wait for the next start. (A CI
/// run lost a delivery this way until the next start.)
@Suite(.timeLimit(.minutes(10)), .enabled(if: TestPostgres.isEnabled), .heavy)
struct LateHeartbeatTests {
    @Test func deliveriesHeldBackWhileALeaseLapsedLocallyAreSentWhenItIsRenewed() async throws {
        let directory = try TemporaryDirectory("late-heartbeat")
        defer { directory.remove() }
        let store = try await TestPostgres.newStore(secretsDirectory: directory.path("keys"), now: Date())
        defer { try? store.close() }
        var logger = Logger(label: "test")
        logger.logLevel = .warning
        let door = GatewayDoor(
            store: store, scheduling: SchedulerConfiguration(), now: { Date() }, logger: logger,
            partitioning: GatewayCluster(gateway: "gateway-a", store: store)
        )
        try await door.load()
        let membership = ClusterMembership(
            gateway: "gateway-a", address: nil, store: store, engine: door.engine, logger: logger,
            leaseTime: .seconds(120), heartbeatInterval: .seconds(1)
        )
        try await membership.beat()
        await door.engine.partitionLoadEnded()
        let device: Int64 = 7
        #expect(membership.owns(device: device))
        let epochs = membership.leases

        // Past the local deadline, long before the lease's expiry in the store (a late heartbeat).
        membership.lapseLocally()
        #expect(!membership.owns(device: device))

        // The worker holds back a delivery of that device: owns(_:) says no.
        let held = RecordedDelivery(
            apnsID: UUID().uuidString.lowercased(), device: device, released: Timestamp(Date()),
            instances: [], requests: [], priority: .high, expiration: nil, state: .pending
        )
        let upstream = CountingUpstream()
        var worker = DeliveryWorker(store: store, upstream: upstream, states: door, now: { Date() }, logger: logger)
        worker.leases = membership
        await worker.send(held)
        #expect(upstream.count == 0)

        // The late heartbeat renews the same epochs: the delivery goes back to the worker's stream.
        try await membership.beat()
        #expect(membership.leases == epochs)
        #expect(membership.owns(device: device))
        let stream = door.engine.releasedDeliveries
        let requeued = await withTaskGroup(of: [RecordedDelivery]?.self) { group in
            group.addTask { var iterator = stream.makeAsyncIterator(); return await iterator.next() }
            group.addTask { try? await Task.sleep(for: .seconds(5)); return nil }
            defer { group.cancelAll() }
            return await group.next() ?? nil
        }
        #expect(requeued?.map(\.apnsID) == [held.apnsID])
    }

    final class CountingUpstream: DeliveryUpstream {
        let sent = Mutex(0)
        var count: Int { sent.withLock { $0 } }
        func send(_ push: OutgoingPush) async throws -> DeliveryOutcome {
            sent.withLock { $0 += 1 }
            return .sent
        }
    }
}
