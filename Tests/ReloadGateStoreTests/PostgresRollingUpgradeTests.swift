import Foundation
import Logging
import PostgresNIO
import ReloadGateCore
@testable import ReloadGateStore
import ReloadGateTesting
import Testing

/// A rolling upgrade on a shared database: gateways of the version before (migrations up to
/// `pg8-ledger-retention`) keep serving while a gateway of this version migrates the database and after.
/// The version before is represented by its statements that touch what `pg9-decision-runs` changed,
/// kept here as that version runs them.
struct PostgresRollingUpgradeTests {
    static let now = Date(timeIntervalSince1970: 1_790_000_000)
    static let logger = Logger(label: "rolling-upgrade")

    /// The version before's group commit, reduced to a request and its further decisions (one statement,
    /// decisions into `decision` from arrays, in batch order), prepared once per connection as it is.
    struct OldCommit: PostgresPreparedStatement {
        typealias Row = Bool
        static let sql = """
            WITH requests AS (INSERT INTO request (id, appId, source, receivedAt, priority, expiration, collapseId, exempt,
                    summary, apnsId, decisionInstanceId, decisionKind, decisionDue, decisionReason)
                VALUES ($1, 1, 'webhook', 1790000000000, 10, NULL, NULL, false, '{}', NULL, 7, 'scheduled', 1790000000000, 'scheduled')),
            decisions AS (INSERT INTO decision (requestId, instanceId, kind, due, reason)
                SELECT d.requestId, d.instanceId, d.kind, d.due, d.reason
                FROM unnest($2::bigint[], $3::bigint[], $4::text[], $5::bigint[], $6::text[])
                    WITH ORDINALITY AS d(requestId, instanceId, kind, due, reason, n)
                ORDER BY d.n)
            SELECT true
            """
        let request: Int64

        func makeBindings() throws -> PostgresBindings {
            var bindings = PostgresBindings()
            bindings.append(request)
            bindings.append([request, request])
            bindings.append(PostgresPackedArray<Int64?>([8, nil]))
            bindings.append(["scheduled", "no-match"])
            bindings.append(PostgresPackedArray<Int64?>([1_790_000_000_000, nil]))
            bindings.append(["scheduled", "no-match"])
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws -> Row { try row.decode(Bool.self) }
    }

    /// Runs the version before's commit of `request` on `connection`.
    static func commit(_ request: Int64, on connection: PostgresConnection) async throws -> [Bool] {
        var answers: [Bool] = []
        for try await answer in try await connection.execute(OldCommit(request: request), logger: logger) { answers.append(answer) }
        return answers
    }

    /// The version before's reading of a request's further decisions (`explain`).
    static let oldExplain: PostgresQuery = """
        SELECT dc.instanceId, dc.kind FROM decision dc LEFT JOIN widget w ON w.id = dc.instanceId
        LEFT JOIN device d ON d.id = w.deviceId WHERE dc.requestId = 3 ORDER BY dc.seq
        """

    @Test(.enabled(if: TestPostgres.isEnabled)) func gatewaysOfTheVersionBeforeKeepServingWhileAndAfterTheDatabaseMigrates() async throws {
        let directory = try TemporaryDirectory("pg-rolling-upgrade")
        defer { directory.remove() }
        let location = try await StoreFixture.writeOlderPostgres(upTo: "pg8-ledger-retention", statements: [
            "INSERT INTO device (id, appId, token, active, registeredAt) VALUES (1, 1, \(String(repeating: "ab", count: 32)), true, 0)",
            """
            INSERT INTO widget (id, deviceId, widgetID, kind, family, configuration, pushEnabled)
            VALUES (7, 1, 'w7', 'scores', 'systemSmall', '{}', true), (8, 1, 'w8', 'scores', 'systemSmall', '{}', true)
            """,
        ], logger: Self.logger)

        // A gateway of the version before commits request 1, and holds its connection (its statement
        // prepared there) for later.
        let old = try await PostgresConnection.connect(configuration: try location.connectionConfiguration(), id: 1, logger: Self.logger)
        defer { Task { try? await old.close() } }
        #expect(try await Self.commit(1, on: old) == [true])

        // It commits request 2 while a gateway of this version starts and migrates: the migration waits
        // for the commit, which is acknowledged, and moves its decisions too.
        let other = try await PostgresConnection.connect(configuration: try location.connectionConfiguration(), id: 2, logger: Self.logger)
        defer { Task { try? await other.close() } }
        _ = try await other.query("BEGIN", logger: Self.logger)
        _ = try await Self.commit(2, on: other)
        let opening = Task {
            try await PostgresStore(
                location: location, secretsDirectory: directory.path("data"), environment: .sandbox, now: Self.now, logger: Self.logger
            )
        }
        // The migration is under way once it waits for the commit's lock.
        var waiting = false
        for _ in 0..<100 where !waiting {
            try await Task.sleep(for: .milliseconds(50))
            let rows = try await old.query("SELECT count(*) FROM pg_locks WHERE NOT granted", logger: Self.logger).collect()
            waiting = try rows.first?.decode(Int64.self) ?? 0 > 0
        }
        #expect(waiting, "the migration waits for the version before's commit")
        _ = try await other.query("COMMIT", logger: Self.logger)
        let store = try await opening.value
        defer { try? store.close() }
        #expect(try await store.appliedMigrations().contains("pg9-decision-runs"))

        // The version before's prepared commit still runs, on the connection that prepared it before the
        // migration; every request's decisions read back in order through this version.
        #expect(try await Self.commit(3, on: old) == [true])
        for request: Int64 in [1, 2, 3] {
            let record = try #require(try await store.requestRecord(request))
            #expect(record.decisions.map(\.decision) == ["scheduled", "scheduled", "no-match"], "request \(request)")
            #expect(record.decisions.map(\.widgetID) == ["w7", "w8", nil], "request \(request)")
        }
        #expect(try await store.ledgerCounts().decisions == 9)
        #expect(try await store.statistics().decisionsByKind == ["scheduled": 6, "no-match": 3])

        // This version's commit writes runs, which the version before reads as it did.
        var batch = LedgerBatch()
        batch.requests = [RecordedRequest(
            id: 4, app: 1, source: .webhook, received: Timestamp(Self.now), priority: .high, expiration: nil, collapseID: nil,
            exempt: false, summary: "{}"
        )]
        batch.decisions = [7, 8, 7].enumerated().map { index, instance in
            Decision(request: 4, instance: InstanceHandle(Int32(instance)), kind: index == 0 ? .scheduled : .merged, due: nil, reason: .noMatchingWidget)
        } + [Decision(request: 4, instance: nil, kind: .noMatch, due: nil, reason: .noMatchingWidget)]
        try await store.commit(batch)
        let read = try await old.query(Self.oldExplain.replacingRequest(4), logger: Self.logger).collect().map { try $0.decode((Int64?, String).self) }
        #expect(read.map(\.0) == [8, 7, nil])
        #expect(read.map(\.1) == ["merged", "merged", "no-match"])
        let explained = try await old.query(Self.oldExplain, logger: Self.logger).collect().map { try $0.decode((Int64?, String).self) }
        #expect(explained.map(\.1) == ["scheduled", "no-match"])

        // Its commit probe, its counts and its pruning work on the migrated database.
        _ = try await old.query("BEGIN", logger: Self.logger)
        _ = try await old.query(
            "LOCK TABLE request, decision, instance_state, pending_reload, pending_list, delivery, inbox, device, widget IN ROW EXCLUSIVE MODE",
            logger: Self.logger
        )
        _ = try await old.query("COMMIT", logger: Self.logger)
        let counted = try await old.query("SELECT count(*) FROM decision", logger: Self.logger).collect().map { try $0.decode(Int64.self) }
        #expect(counted == [9])
        _ = try await old.query("""
            WITH gone AS (DELETE FROM request WHERE id = 1 RETURNING id),
                decisions AS (DELETE FROM decision WHERE requestId IN (SELECT id FROM gone))
            SELECT count(*) FROM gone
            """, logger: Self.logger)
        #expect(try await store.requestRecord(1)?.id == nil)
        #expect(try await store.ledgerCounts().decisions == 9 - 3 + 4)
    }
}

extension PostgresQuery {
    /// The query with its request id 3 replaced.
    func replacingRequest(_ request: Int64) -> PostgresQuery {
        PostgresQuery(unsafeSQL: sql.replacingOccurrences(of: "dc.requestId = 3", with: "dc.requestId = \(request)"), binds: binds)
    }
}
