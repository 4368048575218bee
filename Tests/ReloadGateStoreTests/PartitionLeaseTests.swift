import Foundation
import Logging
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

    @Test func aGatewayAloneOwnsEverythingAndASecondOneGetsHalfOnceTheFirstGivesItBack() async throws {
        let directory = try TemporaryDirectory("leases")
        defer { directory.remove() }
        let store = try await store(directory)
        defer { try? store.close() }
        let all = Set(0..<PostgresStore.partitionCount)

        let first = try await store.heartbeat(gateway: "g1", address: nil, startedAt: 0, leaseMilliseconds: lease, now: 0)
        #expect(Set(first.held.keys) == all)
        #expect(Set(first.acquired) == all)
        #expect(Set(first.held.values) == Set<Int64>([1]))
        #expect(first.surplus.isEmpty)
        #expect(first.expiresAt == 10_000)

        // A second gateway finds nothing free: the first one's leases are live.
        let joined = try await store.heartbeat(gateway: "g2", address: nil, startedAt: 1_000, leaseMilliseconds: lease, now: 1_000)
        #expect(joined.held.isEmpty)
        #expect(joined.liveGateways == ["g1", "g2"])

        // The first one's next beat names its surplus: half, the highest partitions; it gives them back.
        let renewed = try await store.heartbeat(gateway: "g1", address: nil, startedAt: 0, leaseMilliseconds: lease, now: 2_000)
        #expect(renewed.held.count == 1024)
        #expect(renewed.acquired.isEmpty)
        #expect(Set(renewed.surplus) == Set(512..<1024))
        try await store.release(renewed.held.filter { renewed.surplus.contains($0.key) }, gateway: "g1")

        let balanced = try await store.heartbeat(gateway: "g2", address: nil, startedAt: 1_000, leaseMilliseconds: lease, now: 3_000)
        #expect(Set(balanced.held.keys) == Set(512..<1024))
        #expect(Set(balanced.held.values) == Set<Int64>([2]), "a new lease of a partition has a new epoch")

        // g1 stops beating. Until its leases expire (12,000) nobody takes them.
        let early = try await store.heartbeat(gateway: "g2", address: nil, startedAt: 1_000, leaseMilliseconds: lease, now: 9_000)
        #expect(early.held.count == 512)
        #expect(early.liveGateways == ["g1", "g2"])
        // After: g2 is alone and takes them, each with the next epoch.
        let takeover = try await store.heartbeat(gateway: "g2", address: nil, startedAt: 1_000, leaseMilliseconds: lease, now: 12_500)
        #expect(Set(takeover.held.keys) == all)
        #expect(Set(takeover.acquired) == Set(0..<512))
        #expect(Set(takeover.acquired.map { takeover.held[$0]! }) == Set<Int64>([2]))
        #expect(takeover.liveGateways == ["g2"])

        // g1 wakes from a pause: it holds nothing any more and finds nothing free.
        let woken = try await store.heartbeat(gateway: "g1", address: nil, startedAt: 0, leaseMilliseconds: lease, now: 13_000)
        #expect(woken.held.isEmpty)
        #expect(woken.acquired.isEmpty)
        // A release with an old epoch frees nothing.
        try await store.release([0: 1], gateway: "g1")
        let after = try await store.heartbeat(gateway: "g2", address: nil, startedAt: 1_000, leaseMilliseconds: lease, now: 14_000)
        #expect(after.held[0] == 2)
        #expect(Set(after.surplus) == Set(512..<1024), "g1 is live again: g2 gives half back")
    }

    @Test func threeGatewaysShareThePartitionsByTheirIDs() async throws {
        let directory = try TemporaryDirectory("leases-three")
        defer { directory.remove() }
        let store = try await store(directory)
        defer { try? store.close() }
        for gateway in ["a", "b", "c"] {
            _ = try await store.heartbeat(gateway: gateway, address: nil, startedAt: 0, leaseMilliseconds: lease, now: 0)
        }
        // a took everything first; it gives back its surplus, then b and c take their shares.
        let a = try await store.heartbeat(gateway: "a", address: nil, startedAt: 0, leaseMilliseconds: lease, now: 100)
        #expect(a.surplus.count == 1024 - 342)
        try await store.release(a.held.filter { a.surplus.contains($0.key) }, gateway: "a")
        let b = try await store.heartbeat(gateway: "b", address: nil, startedAt: 0, leaseMilliseconds: lease, now: 200)
        let c = try await store.heartbeat(gateway: "c", address: nil, startedAt: 0, leaseMilliseconds: lease, now: 300)
        let shares: [Int] = [a.held.count - a.surplus.count, b.held.count, c.held.count]
        #expect(shares == [342, 341, 341])
        let owned = Set(a.held.keys).subtracting(a.surplus).union(b.held.keys).union(c.held.keys)
        #expect(owned.count == 1024)
    }

    @Test func theClusterListsLiveGatewaysWithTheirPartitions() async throws {
        let directory = try TemporaryDirectory("leases-list")
        defer { directory.remove() }
        let store = try await store(directory)
        defer { try? store.close() }
        let state = try await store.heartbeat(gateway: "g1", address: "10.0.0.1:8443", startedAt: 5, leaseMilliseconds: lease)
        let gateways = try await store.clusterGateways(within: lease)
        #expect(gateways.map(\.id) == ["g1"])
        #expect(gateways.first?.partitions == 1024)
        #expect(gateways.first?.address == "10.0.0.1:8443")
        #expect(gateways.first?.heartbeatAt == state.expiresAt - lease)
        #expect(PostgresStore.partition(ofDevice: 1025) == 1)
        #expect(PostgresStore.partition(ofDevice: Int64.max) == Int(Int64.max % 1024))
    }
}
