import Foundation
import ReloadGateCore
@testable import ReloadGateStore
import ReloadGateTesting
import Testing

/// One batch writes instances whose rows exist beside instances whose rows do not: each is updated or
/// inserted, whichever it needs. PostgreSQL's statement inserts only when some of the batch's instances
/// have no row (it counts the rows it finds first and skips the inserting half otherwise), so a batch of
/// only known instances and one with new ones beside them both count here.
struct LedgerMixedBatchTests {
    let now = Date(timeIntervalSince1970: 1_790_000_000)
    static let third = WidgetRegistration(id: "w3", kind: "weather", family: .systemSmall, configuration: WidgetConfiguration())

    static func snapshot(lastReload: Int64, pending: (due: Int64, requests: [RequestID], count: Int)?) -> InstanceSnapshot {
        InstanceSnapshot(
            bucketFullAt: nil, lastReload: Timestamp(seconds: lastReload), plannedReload: nil,
            pending: pending.map {
                PendingSnapshot(
                    due: Timestamp(seconds: $0.due), priority: .high, expiration: nil, requests: $0.requests, requestCount: $0.count,
                    collapseID: nil, team: nil, exempt: false
                )
            }
        )
    }

    func commit(_ store: any GatewayStore, _ states: [(Int64, InstanceSnapshot)]) async throws {
        var batch = LedgerBatch()
        batch.instanceStates = states.map { ($0.0, Optional($0.1)) }
        try await store.commit(batch)
    }

    /// The stored snapshots of `instances`, in their order (`nil` for one without a row).
    func stored(_ store: any GatewayStore, _ instances: [Int64]) async throws -> [InstanceSnapshot?] {
        let all = try await store.instanceSnapshots()
        return instances.map { instance in all.first { $0.instance == instance }?.snapshot }
    }

    @Test(arguments: StoreImplementation.all) func knownAndNewInstancesInOneBatchAreEachWritten(_ implementation: StoreImplementation) async throws {
        try await StoreFixture.with(
            "ledger-mixed", implementation, widgets: [StoreFixture.scores, StoreFixture.news, Self.third], now: now
        ) { fixture in
            let store = fixture.store
            let (a, b, c) = (fixture.instances[0], fixture.instances[1], fixture.instances[2])
            // Only `a` has rows.
            let first = [(a, Self.snapshot(lastReload: 1_790_000_000, pending: (1_790_000_300, [1], 1)))]
            try await commit(store, first)
            #expect(try await stored(store, [a, b, c]) == [first[0].1, nil, nil])

            // `a` changed, `b` new with a pending reload, `c` new without one.
            let second = [
                (a, Self.snapshot(lastReload: 1_790_000_001, pending: (1_790_000_200, [1, 2], 2))),
                (b, Self.snapshot(lastReload: 1_790_000_002, pending: (1_790_000_400, [3], 1))),
                (c, Self.snapshot(lastReload: 1_790_000_003, pending: nil)),
            ]
            try await commit(store, second)
            #expect(try await stored(store, [a, b, c]) == second.map(\.1))

            // Every state known, `c`'s pending reload new: the pending rows are mixed again.
            let third = [
                (a, Self.snapshot(lastReload: 1_790_000_004, pending: (1_790_000_200, [1, 2, 4], 3))),
                (b, Self.snapshot(lastReload: 1_790_000_005, pending: (1_790_000_400, [3, 5], 2))),
                (c, Self.snapshot(lastReload: 1_790_000_006, pending: (1_790_000_500, [6], 1))),
            ]
            try await commit(store, third)
            #expect(try await stored(store, [a, b, c]) == third.map(\.1))

            // Every row known: only counts and states change.
            let fourth = [
                (a, Self.snapshot(lastReload: 1_790_000_007, pending: (1_790_000_200, [1, 2, 4], 9))),
                (b, Self.snapshot(lastReload: 1_790_000_008, pending: (1_790_000_400, [3, 5], 8))),
                (c, Self.snapshot(lastReload: 1_790_000_009, pending: (1_790_000_500, [6], 7))),
            ]
            try await commit(store, fourth)
            #expect(try await stored(store, [a, b, c]) == fourth.map(\.1))
            #expect(try await store.pendingReloads(PendingFilter()).map(\.requestCount).sorted() == [7, 8, 9])
        }
    }
}
