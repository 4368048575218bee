import Foundation
import GRDB
import ReloadGateCore
@testable import ReloadGateStore
import ReloadGateTesting
import Testing

/// `explain <apns-id>` finds pushes through an index keyed by block of request ids, then apns-id
/// (migration v10): the lookup must visit every block, old and new, and use that index.
struct APNsIDLookupTests {
    let now = Date(timeIntervalSince1970: 1_790_000_000)

    func push(_ id: RequestID, app: App, apnsID: String) -> RecordedRequest {
        RecordedRequest(
            id: id, app: app.id, source: .push, received: Timestamp(seconds: 1_790_000_000), priority: .high,
            expiration: nil, collapseID: nil, exempt: false, summary: "{}", apnsID: apnsID
        )
    }

    @Test(arguments: StoreImplementation.all) func anAPNsIDIsFoundInEveryBlockOldestFirst(_ implementation: StoreImplementation) async throws {
        let directory = try TemporaryDirectory("apns-id")
        defer { directory.remove() }
        let store = try await implementation.open(directory, now: now)
        defer { try? store.close() }
        let app = try await store.createApp(bundle: try BundleID("com.example.scores"), teamID: nil, allowsExemptions: false, now: now).app

        let reused = "0f8e4a2c-9b1d-4c3e-8a7f-2d6b5e4c3a21"
        // Ids in the first block, on both sides of a block boundary, and far beyond (blocks in between empty).
        let reusedIDs: [RequestID] = [1, 1023, 1024, 5_000, 3_000_000]
        var batch = LedgerBatch()
        for id in reusedIDs { batch.requests.append(push(id, app: app, apnsID: reused)) }
        for id: RequestID in [2, 1025, 3_000_001] {
            batch.requests.append(push(id, app: app, apnsID: String(format: "00000000-0000-4000-8000-%012d", id)))
        }
        try await store.commit(batch)

        #expect(try await store.requests(apnsID: reused) == reusedIDs.map { Int64($0) })
        #expect(try await store.requests(apnsID: reused.uppercased()) == reusedIDs.map { Int64($0) })
        #expect(try await store.requests(apnsID: "00000000-0000-4000-8000-000000001025") == [1025])
        #expect(try await store.requests(apnsID: "00000000-0000-4000-8000-000000000099").isEmpty)
    }

    @Test func theLookupSeeksTheBlockIndex() throws {
        let directory = try TemporaryDirectory("apns-id")
        defer { directory.remove() }
        let store = try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: now)
        defer { try? store.close() }
        let plan = try store.writer.read { db in
            let (sql, values) = SQLDialect.sqlite.render(LedgerLayout.requests(apnsID: "x", blocks: 1...3))
            return try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + sql, arguments: StatementArguments(values.map(\.databaseValue)))
                .map { $0["detail"] as String }
        }
        #expect(plan.contains { $0.contains("USING COVERING INDEX request_on_block_apns_id") }, "\(plan)")
        #expect(!plan.contains { $0.hasPrefix("SCAN r") }, "\(plan)")
    }

    /// A list of tokens binds one parameter each on SQLite: `IN (?, ?)` is planned as a lookup per token,
    /// where a list in one JSON parameter (`json_each`) was planned as a scan of the app's devices.
    @Test func aListOfTokensIsLookedUpByToken() throws {
        let directory = try TemporaryDirectory("token-list")
        defer { directory.remove() }
        let store = try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: now)
        defer { try? store.close() }
        let tokens = [String(repeating: "ab", count: 32), String(repeating: "cd", count: 32)]
        let (sql, values) = SQLDialect.sqlite.render("""
            SELECT widget.id FROM widget JOIN device ON device.id = widget.deviceId
            WHERE device.appId = \(Int64(1)) AND device.active AND device.token IN \(texts: tokens)
            """)
        #expect(values.count == 3)
        let plan = try store.writer.read { db in
            try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + sql, arguments: StatementArguments(values.map(\.databaseValue)))
                .map { $0["detail"] as String }
        }
        #expect(plan.contains { $0.hasPrefix("SEARCH device") && $0.contains("token") }, "\(plan)")
        #expect(!plan.contains { $0.hasPrefix("SCAN") }, "\(plan)")
    }
}

/// SQLite's session binds every value itself (`sqlite3_bind_*`): a statement whose placeholders and values
/// disagree fails as a store error, and the process goes on.
struct SQLiteSessionBindingTests {
    @Test func aPlaceholderWithoutAValueIsAnErrorNotATrap() throws {
        let directory = try TemporaryDirectory("session-binding")
        defer { directory.remove() }
        let store = try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: Date(timeIntervalSince1970: 1_790_000_000))
        defer { try? store.close() }
        #expect(throws: StoreError.self) {
            try store.readingHere { session in try await session.rows("SELECT \(Int64(1)), \(unescaped: "?")") }
        }
        // The session is usable after (the statement was reset).
        let one = try store.readingHere { session in try await session.rows("SELECT \(Int64(1)) AS one").first?.int64("one") }
        #expect(one == 1)
    }
}

extension SQLValue {
    /// The value as GRDB binds it (these tests plan a statement through GRDB's API).
    fileprivate var databaseValue: DatabaseValue {
        switch self {
        case .null: .null
        case .integer(let value): value.databaseValue
        case .real(let value): value.databaseValue
        case .text(let value): value.databaseValue
        case .bool(let value): (value ? 1 : 0 as Int64).databaseValue
        case .blob(let value): value.databaseValue
        }
    }
}
