import Foundation
import Logging
import PostgresNIO
import Synchronization
import ReloadGateCore
import ReloadGateStore
import ReloadGateTesting
import Testing

/// The partition leases of gateways sharing one PostgreSQL database, on the database's rows with times
/// given by the test (milliseconds; the gateways use the database's clock).
@Suite(.enabled(if: TestPostgres.isEnabled))
struct PartitionLeaseTests {
    let lease: Int64 = 10_000

    func store(_ directory: TemporaryDirectory) async throws -> PostgresStore {
        try await TestPostgres.newStore(secretsDirectory: directory.path("data"), now: Date())
    }

    /// The group commit's fence: a takeover raises the previous owner's fence generation, and a batch of
    /// that owner decided under the old generation writes nothing and says what it still holds; under
    /// the new generation it is written. A hand-back (release) and taking free leases raise nothing.
    @Test func aBatchOfAGatewayWhosePartitionsWereTakenOverWritesNothing() async throws {
        let directory = try TemporaryDirectory("leases-fence")
        defer { directory.remove() }
        let store = try await store(directory)
        defer { try? store.close() }
        let app = try await store.createApp(bundle: try BundleID("com.example.fence"), teamID: nil, allowsExemptions: false, now: Date()).app
        let widget = WidgetRegistration(id: "w1", kind: "scores", family: .systemSmall, configuration: WidgetConfiguration())
        let device = try await store.putDevice(
            app: app, token: try DeviceToken(String(repeating: "fe", count: 32)), widgets: [widget], previousToken: nil, now: Date()
        )
        let instance = try #require(device.instances.first?.id)

        // g1 holds everything (free leases: nobody's generation rises); g2 joins, g1 hands half back.
        let first = try await store.heartbeat(gateway: "g1", address: nil, startedAt: 0, leaseMilliseconds: lease, now: 0)
        #expect(first.generation == 1)
        let joined = try await store.heartbeat(gateway: "g2", address: nil, startedAt: 0, leaseMilliseconds: lease, now: 100)
        #expect(joined.generation == 1)
        let renewed = try await store.heartbeat(gateway: "g1", address: nil, startedAt: 0, leaseMilliseconds: lease, now: 200)
        try await store.release(renewed.held.filter { renewed.surplus.contains($0.key) }, gateway: "g1")
        let shared = try await store.heartbeat(gateway: "g2", address: nil, startedAt: 0, leaseMilliseconds: lease, now: 300)
        #expect(shared.held.count == 512)
        #expect(shared.generation == 1, "taking leases that were handed back raises nobody's generation")

        func batch(_ id: RequestID, gateway: String, generation: Int64) -> LedgerBatch {
            var batch = LedgerBatch()
            batch.requests = [
                RecordedRequest(
                    id: id, app: app.id, source: .push, received: Timestamp(seconds: 1_790_000_000), priority: .high,
                    expiration: nil, collapseID: nil, exempt: false, summary: "{}", apnsID: UUID().uuidString.lowercased()
                )
            ]
            let due = Timestamp(seconds: 1_790_000_300)
            batch.decisions = [Decision(request: id, instance: InstanceHandle(Int32(instance)), kind: .deferred, due: due, reason: .lowPriority(until: due, delay: 300))]
            let pending = PendingSnapshot(due: due, priority: .low, expiration: nil, requests: [id], collapseID: nil, team: nil, exempt: false)
            batch.instanceStates = [(instance, InstanceSnapshot(bucketFullAt: nil, lastReload: nil, plannedReload: nil, pending: pending))]
            batch.fence = LeaseFence(gateway: gateway, generation: generation)
            return batch
        }
        try await store.commit(batch(1, gateway: "g1", generation: 1))

        // g1 stops beating; after its leases ran out g2 takes them over, raising g1's generation.
        let takeover = try await store.heartbeat(gateway: "g2", address: nil, startedAt: 0, leaseMilliseconds: lease, now: 20_000)
        #expect(takeover.held.count == 1024)
        #expect(takeover.generation == 1)
        // The paused g1 commits what it decided before: nothing is written, and it learns that it holds
        // nothing and its generation is 2.
        await #expect(throws: StoreError.fenced(generation: 2, held: [])) {
            try await store.commit(batch(2, gateway: "g1", generation: 1))
        }
        #expect(try await store.requestRecord(2) == nil)
        #expect(try await store.instanceSnapshots().first?.snapshot.pending?.requests == [1])
        // g1's heartbeat says the same.
        let woken = try await store.heartbeat(gateway: "g1", address: nil, startedAt: 0, leaseMilliseconds: lease, now: 20_100)
        #expect(woken.held.isEmpty)
        #expect(woken.generation == 2)
        // Batches without a fence (request rows and forwarded work only) are written by any gateway; g2
        // under its generation writes the partition's state.
        try await store.commit(batch(3, gateway: "g2", generation: 1))
        #expect(try await store.requestRecord(3)?.decisions.map(\.decision) == ["deferred"])
        #expect(try await store.instanceSnapshots().first?.snapshot.pending?.requests == [3])
    }

    /// A takeover waits for the previous owner's commit in flight (its fence row is locked `FOR SHARE`
    /// until it ends), so the new owner loads what that commit wrote.
    @Test func aTakeoverWaitsForThePreviousOwnersCommitInFlight() async throws {
        let directory = try TemporaryDirectory("leases-fence-wait")
        defer { directory.remove() }
        let url = try await TestPostgres.newDatabase()
        let logger = Logger(label: "test")
        let store = try await TestPostgres.openStore(url: url, secretsDirectory: directory.path("data"))
        defer { try? store.close() }
        _ = try await store.heartbeat(gateway: "g1", address: nil, startedAt: 0, leaseMilliseconds: lease, now: 0)
        // A commit of g1 in flight: a transaction holding g1's fence row as the group commit does.
        let connection = try await PostgresConnection.connect(
            configuration: try PostgresLocation(url: url).connectionConfiguration(), id: 9, logger: logger
        )
        _ = try await connection.query("BEGIN", logger: logger).collect()
        _ = try await connection.query(
            "SELECT gateway FROM gateway_fence WHERE gateway = 'g1' AND generation = 1 FOR SHARE", logger: logger
        ).collect()
        let done = Mutex(false)
        let takeover = Task {
            defer { done.withLock { $0 = true } }
            return try await store.heartbeat(gateway: "g2", address: nil, startedAt: 0, leaseMilliseconds: lease, now: 20_000)
        }
        try await Task.sleep(for: .milliseconds(500))
        #expect(!done.withLock { $0 }, "the takeover did not wait for the commit in flight")
        _ = try await connection.query("COMMIT", logger: logger).collect()
        try await connection.close()
        let state = try await takeover.value
        #expect(state.held.count == 1024)
        #expect(try await store.heartbeat(gateway: "g1", address: nil, startedAt: 0, leaseMilliseconds: lease, now: 20_100).generation == 2)
    }

    @Test func theClusterListsLiveGatewaysWithTheirPartitions() async throws {
        let directory = try TemporaryDirectory("leases-list")
        defer { directory.remove() }
        let store = try await store(directory)
        defer { try? store.close() }
        // An hour's lease, listed within an hour: a loaded machine once took more than the 10 s lease between
        // the two statements (the listing counts only unexpired leases).
        let hour: Int64 = 3_600_000
        let state = try await store.heartbeat(gateway: "g1", address: "10.0.0.1:8443", startedAt: 5, leaseMilliseconds: hour)
        let gateways = try await store.clusterGateways(within: hour)
        #expect(gateways.map(\.id) == ["g1"])
        #expect(gateways.first?.partitions == 1024)
        #expect(gateways.first?.address == "10.0.0.1:8443")
        #expect(gateways.first?.heartbeatAt == state.expiresAt - hour)
        #expect(PostgresStore.partition(ofDevice: 1025) == 1)
        #expect(PostgresStore.partition(ofDevice: Int64.max) == Int(Int64.max % 1024))
    }
}
