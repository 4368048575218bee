import Foundation
import PropertyBased
import ReloadGateCore
import ReloadGateStore
import ReloadGateTesting
import Synchronization
import Testing

/// What a lease test talks to: PostgreSQL's rows, or the cluster simulation's table in memory
/// (``InMemoryLeaseTable``). The same cases run against both, so that the simulation's leases stay
/// PostgreSQL's.
protocol LeaseTableUnderTest: Sendable {
    func heartbeat(gateway: String, address: String?, startedAt: Int64, leaseMilliseconds: Int64, now: Int64?) async throws -> LeaseState
    func release(_ leases: [Int: Int64], gateway: String) async throws
    func leave(gateway: String) async throws
    func close() throws
}

extension PostgresStore: LeaseTableUnderTest {}

/// ``InMemoryLeaseTable`` behind the test's protocol.
final class MemoryLeases: LeaseTableUnderTest {
    private let table = Mutex(InMemoryLeaseTable())

    func heartbeat(gateway: String, address: String?, startedAt: Int64, leaseMilliseconds: Int64, now: Int64?) async throws -> LeaseState {
        table.withLock {
            $0.heartbeat(gateway: gateway, address: address, startedAt: startedAt, leaseMilliseconds: leaseMilliseconds, now: now ?? 0)
        }
    }

    func release(_ leases: [Int: Int64], gateway: String) async throws {
        table.withLock { $0.release(leases, gateway: gateway) }
    }

    func leave(gateway: String) async throws {
        table.withLock { $0.leave(gateway: gateway) }
    }

    func close() throws {}
}

enum LeaseBackend: String, Sendable, CustomTestStringConvertible {
    case memory, postgres

    /// PostgreSQL when a test cluster is given (`RG_TEST_POSTGRES_URL`); the table in memory always.
    static var available: [LeaseBackend] { TestPostgres.isEnabled ? [.memory, .postgres] : [.memory] }

    var testDescription: String { rawValue }

    func open(_ directory: TemporaryDirectory) async throws -> any LeaseTableUnderTest {
        switch self {
        case .memory: MemoryLeases()
        case .postgres: try await TestPostgres.newStore(secretsDirectory: directory.path("data"), now: Date())
        }
    }
}

/// The partition leases of gateways sharing one database, with times given by the test (milliseconds;
/// the gateways use the database's clock): on PostgreSQL's rows and on the simulation's table alike.
struct LeaseTableTests {
    let lease: Int64 = 10_000

    @Test(arguments: LeaseBackend.available) func aGatewayAloneOwnsEverythingAndASecondOneGetsHalfOnceTheFirstGivesItBack(backend: LeaseBackend) async throws {
        let directory = try TemporaryDirectory("leases")
        defer { directory.remove() }
        let store = try await backend.open(directory)
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

    @Test(arguments: LeaseBackend.available) func threeGatewaysShareThePartitionsByTheirIDs(backend: LeaseBackend) async throws {
        let directory = try TemporaryDirectory("leases-three")
        defer { directory.remove() }
        let store = try await backend.open(directory)
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

    /// Generated runs of three gateways (heartbeats at random times, hand-backs of the surplus, a gateway
    /// that leaves), each step answered by PostgreSQL and by the table in memory: the answers are the same.
    @Test(.enabled(if: TestPostgres.isEnabled)) func theTableInMemoryAnswersAsPostgreSQLDoes() async throws {
        let step = zip(Gen.int(in: 0...2), Gen.int(in: 0...5), Gen.int(in: 0...6_000))   // gateway, action, ms later
        await propertyCheck(count: 12, input: step.array(of: 1...24)) { steps in
            let directory = try TemporaryDirectory("leases-differential")
            defer { directory.remove() }
            let postgres = try await LeaseBackend.postgres.open(directory)
            defer { try? postgres.close() }
            let memory = MemoryLeases()
            var time: Int64 = 0
            var last: [String: LeaseState] = [:]
            for (index, action, later) in steps {
                time += Int64(later)
                let gateway = ["g1", "g2", "g3"][index]
                switch action {
                case 0...3:
                    let expected = try await postgres.heartbeat(gateway: gateway, address: nil, startedAt: 0, leaseMilliseconds: lease, now: time)
                    let got = try await memory.heartbeat(gateway: gateway, address: nil, startedAt: 0, leaseMilliseconds: lease, now: time)
                    #expect(got == expected, "heartbeat of \(gateway) at \(time) after \(steps)")
                    last[gateway] = expected
                case 4:
                    guard let state = last[gateway] else { continue }
                    let surplus = state.held.filter { state.surplus.contains($0.key) }
                    try await postgres.release(surplus, gateway: gateway)
                    try await memory.release(surplus, gateway: gateway)
                default:
                    try await postgres.leave(gateway: gateway)
                    try await memory.leave(gateway: gateway)
                    last[gateway] = nil
                }
            }
        }
    }
}
