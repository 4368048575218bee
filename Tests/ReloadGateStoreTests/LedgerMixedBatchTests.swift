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

    @Test(arguments: StoreImplementation.all)
    func knownAndNewInstancesInOneBatchAreEachWritten(_ implementation: StoreImplementation) async throws {
        try await StoreFixture.with(
            "ledger-mixed", implementation, widgets: [StoreFixture.scores, StoreFixture.news, Self.third], now: now
        ) { fixture in
            let store = fixture.store
            let instances = fixture.instances
            // Each batch: per instance (by position), its last reload and its pending reload (due, listed
            // requests, count), or nothing written for it.
            typealias Pending = (due: Int64, requests: [RequestID], count: Int)
            let batches: [(what: String, states: [(Int, Int64, Pending?)])] = [
                ("only the first has rows", [(0, 1_790_000_000, (1_790_000_300, [1], 1))]),
                (
                    "the first changed, the second new with a pending reload, the third new without one",
                    [
                        (0, 1_790_000_001, (1_790_000_200, [1, 2], 2)), (1, 1_790_000_002, (1_790_000_400, [3], 1)),
                        (2, 1_790_000_003, nil),
                    ]
                ),
                (
                    "every state known, the third's pending reload new",
                    [
                        (0, 1_790_000_004, (1_790_000_200, [1, 2, 4], 3)), (1, 1_790_000_005, (1_790_000_400, [3, 5], 2)),
                        (2, 1_790_000_006, (1_790_000_500, [6], 1)),
                    ]
                ),
                (
                    "every row known, only counts and states change",
                    [
                        (0, 1_790_000_007, (1_790_000_200, [1, 2, 4], 9)), (1, 1_790_000_008, (1_790_000_400, [3, 5], 8)),
                        (2, 1_790_000_009, (1_790_000_500, [6], 7)),
                    ]
                ),
            ]
            var expected: [InstanceSnapshot?] = [nil, nil, nil]
            for batch in batches {
                let states = batch.states.map { (instances[$0.0], Self.snapshot(lastReload: $0.1, pending: $0.2)) }
                try await commit(store, states)
                for (position, state) in zip(batch.states.map(\.0), states) { expected[position] = state.1 }
                #expect(try await stored(store, instances) == expected, "\(batch.what)")
            }
            #expect(try await store.pendingReloads(PendingFilter()).map(\.requestCount).sorted() == [7, 8, 9])
        }
    }
}
