import Foundation
import GRDB
import ReloadGateCore
@testable import ReloadGateStore
import ReloadGateTesting
import Testing

/// A pending reload's request list lives in `pending_list` (migration v11) and is written only when it
/// is not the stored one: same first request and length.
struct PendingListTests {
    let now = Date(timeIntervalSince1970: 1_790_000_000)

    func withStore(_ implementation: StoreImplementation, _ body: (any GatewayStore, Int64) async throws -> Void) async throws {
        try await StoreFixture.with("pending-list", implementation, widgets: [StoreFixture.scores], now: now) { fixture in
            try await body(fixture.store, fixture.instances[0])
        }
    }

    func commit(_ store: any GatewayStore, _ instance: Int64, requests: [RequestID], count: Int? = nil) async throws {
        var batch = LedgerBatch()
        batch.instanceStates = [(
            instance,
            InstanceSnapshot(
                bucketFullAt: nil, lastReload: nil, plannedReload: nil,
                pending: PendingSnapshot(
                    due: Timestamp(seconds: 1_790_000_300), priority: .high, expiration: nil, requests: requests,
                    requestCount: count, collapseID: nil, team: nil, exempt: false
                )
            )
        )]
        try await store.commit(batch)
    }

    func storedList(_ store: any GatewayStore, _ instance: Int64) async throws -> [RequestID]? {
        try await store.instanceSnapshots().first { $0.instance == instance }?.snapshot.pending?.requests
    }

    @Test(arguments: StoreImplementation.all) func aFullListStaysWhileMergesOnlyCountAndTheCountIsWritten(_ implementation: StoreImplementation) async throws {
        try await withStore(implementation) { store, instance in
            let listed = (1...100).map { RequestID($0) }
            try await commit(store, instance, requests: listed, count: 100)
            try await commit(store, instance, requests: listed, count: 150)
            let snapshot = try await store.instanceSnapshots().first { $0.instance == instance }?.snapshot.pending
            #expect(snapshot?.requests == listed)
            #expect(snapshot?.requestCount == 150)
            #expect(try await store.pendingReloads(PendingFilter()).first?.requestCount == 150)
            #expect(try await store.pendingInstances(listing: 100) == [instance])
        }
    }

    /// SQLite's own layout (the stored text of `pending_list`), so the SQLite store only.
    @Test func anUnchangedListIsNotRewritten() async throws {
        try await withStore(.sqlite) { store, instance in
            let listed = (1...100).map { RequestID($0) }
            try await commit(store, instance, requests: listed, count: 100)
            // Mark the stored text: a rewrite would replace the mark.
            try await #require(store as? SQLiteStore).writer.write { db in try db.execute(sql: "UPDATE pending_list SET requests = '[1]'") }
            try await commit(store, instance, requests: listed, count: 101)
            #expect(try await storedList(store, instance) == [1])
            try await commit(store, instance, requests: [200], count: 1)
            #expect(try await storedList(store, instance) == [200])
        }
    }

    @Test(arguments: StoreImplementation.all) func aGrowingListIsWrittenAgain(_ implementation: StoreImplementation) async throws {
        try await withStore(implementation) { store, instance in
            try await commit(store, instance, requests: [1, 2])
            try await commit(store, instance, requests: [1, 2, 3])
            #expect(try await storedList(store, instance) == [1, 2, 3])
            #expect(try await store.pendingInstances(listing: 3) == [instance])
        }
    }

    @Test(arguments: StoreImplementation.all) func aNewPendingReloadOfTheSameLengthReplacesTheList(_ implementation: StoreImplementation) async throws {
        try await withStore(implementation) { store, instance in
            try await commit(store, instance, requests: [1, 2, 3])
            // Delivered, then three new requests in the same batch: the same length, another list.
            try await commit(store, instance, requests: [7, 8, 9])
            #expect(try await storedList(store, instance) == [7, 8, 9])
            #expect(try await store.pendingReloads(PendingFilter()).first?.requests == [7, 8, 9])
            #expect(try await store.pendingInstances(listing: 2).isEmpty)
        }
    }

    @Test(arguments: StoreImplementation.all) func aPendingReloadThatEndsTakesItsListWithIt(_ implementation: StoreImplementation) async throws {
        try await withStore(implementation) { store, instance in
            try await commit(store, instance, requests: [1, 2])
            var batch = LedgerBatch()
            batch.instanceStates = [(instance, InstanceSnapshot(bucketFullAt: 5, lastReload: nil, plannedReload: nil, pending: nil))]
            try await store.commit(batch)
            #expect(try await store.pendingInstances(listing: 1).isEmpty)
            if let sqlite = store as? SQLiteStore {
                #expect(try await sqlite.writer.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM pending_list") } == 0)
            }
            // A new pending reload that starts like the old one (same first id cannot recur; the list
            // row must be written again all the same, since none is stored).
            try await commit(store, instance, requests: [1, 2])
            #expect(try await storedList(store, instance) == [1, 2])
        }
    }

    @Test func migrationV11MovesStoredListsIntoTheirTable() async throws {
        let directory = try TemporaryDirectory("pending-list-migration")
        defer { directory.remove() }
        // A store as v10 left it, with a pending reload and its list in `pending_reload.requests`.
        try StoreFixture.writeOlderStore(in: directory, upTo: "v10-apns-id-by-block", sql: """
            INSERT INTO device (id, appId, token, active, registeredAt) VALUES (1, 1, 'abab', 1, 0);
            INSERT INTO widget (id, deviceId, widgetID, kind, family, configuration, pushEnabled)
                VALUES (1, 1, 'w1', 'scores', 'systemSmall', '{}', 1), (2, 1, 'w2', 'news', 'systemSmall', '{}', 1);
            INSERT INTO pending_reload (instanceId, due, priority, expiration, requests, requestCount, collapseId, team, exempt)
                VALUES (1, 1790000300000, 10, NULL, '[4,5,6]', 9, NULL, 'TEAM', 0),
                       (2, 1790000400000, 5, NULL, '[7]', NULL, NULL, NULL, 0);
            INSERT INTO instance_state (instanceId, bucketFullAt, lastReload, plannedReload) VALUES (1, NULL, NULL, NULL), (2, NULL, NULL, NULL);
            """)

        let store = try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: now)
        defer { try? store.close() }
        #expect(try store.appliedMigrations().contains("v11-pending-lists"))
        let pending = try await store.instanceSnapshots().map(\.snapshot.pending)
        #expect(pending.map { $0?.requests } == [[4, 5, 6], [7]])
        #expect(pending.map { $0?.requestCount } == [9, 1])
        let rows = try await store.pendingReloads(PendingFilter())
        #expect(rows.map(\.instance) == [1, 2])
        #expect(rows.map(\.requests) == [[4, 5, 6], [7]])
        #expect(try await store.pendingInstances(listing: 5) == [1])
        let lists = try await store.writer.read { db in
            try Row.fetchAll(db, sql: "SELECT instanceId, firstRequest, listed FROM pending_list ORDER BY instanceId")
                .map { [$0["instanceId"], $0["firstRequest"], $0["listed"]] as [Int64] }
        }
        #expect(lists == [[1, 4, 3], [2, 7, 1]])
        // The next commit of instance 1's unchanged list (more merges) keeps it.
        try await commit(store, 1, requests: [4, 5, 6], count: 12)
        #expect(try await store.pendingReloads(PendingFilter()).first?.requests == [4, 5, 6])
        #expect(try await store.pendingReloads(PendingFilter()).first?.requestCount == 12)
    }

    /// A Live Activity's content state is written with its instance's and read back on start, on both
    /// engines; changing only it is a change (PostgreSQL's update compares the columns).
    @Test(arguments: StoreImplementation.all) func anActivitysContentStateIsStoredWithItsInstance(_ implementation: StoreImplementation) async throws {
        try await withStore(implementation) { store, instance in
            func write(_ activity: ActivitySnapshot?) async throws {
                var batch = LedgerBatch()
                batch.instanceStates = [(instance, InstanceSnapshot(bucketFullAt: 5, lastReload: nil, plannedReload: nil, pending: nil, activity: activity))]
                try await store.commit(batch)
            }
            func stored() async throws -> ActivitySnapshot? {
                try await store.instanceSnapshots().first { $0.instance == instance }?.snapshot.activity
            }
            let pending = ActivitySnapshot(delivered: ContentStamp(timestamp: 10, request: 1), content: ContentStamp(timestamp: 12, request: 3), ending: true)
            try await write(pending)
            #expect(try await stored() == pending)
            let ended = ActivitySnapshot(delivered: ContentStamp(timestamp: 12, request: 3), ended: true)
            try await write(ended)
            #expect(try await stored() == ended)
            try await write(nil)
            #expect(try await stored() == nil)
        }
    }
}
