import Foundation
import Logging
import PostgresNIO
@testable import ReloadGateStore
import ReloadGateTesting
import Testing

/// The group commit's statement finds the rows it changes by their primary key whatever plan PostgreSQL
/// made for it (decision 0109). A prepared statement is planned once for all its executions; a plan made
/// while the tables were small (a new database, before autovacuum's first `ANALYZE`) joined the batch's
/// instances to `instance_state`, `pending_reload` and `pending_list` by reading the whole table, on
/// every commit as the tables grew.
struct PostgresLedgerPlanTests {
    @Test(.enabled(if: TestPostgres.isEnabled)) func aPlanMadeOnEmptyTablesFindsTheBatchsRowsByTheirKeys() async throws {
        let directory = try TemporaryDirectory("pg-ledger-plan")
        defer { directory.remove() }
        let url = try await TestPostgres.newDatabase()
        let store = try await TestPostgres.openStore(url: url, secretsDirectory: directory.path("data"))
        try store.close()
        let logger = Logger(label: "test")
        let connection = try await PostgresConnection.connect(
            configuration: try PostgresLocation(url: url).connectionConfiguration(), id: 1, logger: logger
        )
        defer { Task { try? await connection.close() } }
        // The plan PostgreSQL keeps for every execution, made now, on the new database's empty tables.
        _ = try await connection.query("SET plan_cache_mode = force_generic_plan", logger: logger).collect()
        _ = try await connection.query(PostgresQuery(unsafeSQL: "PREPARE ledger AS \(PostgresStore.LedgerStatement.sql)"), logger: logger).collect()
        // Every array empty; the fence not asked for ($51), a gateway and generation ($52, $53), no answer
        // expired ($61), none to prune ($62).
        var arguments = Array(repeating: "'{}'", count: 64)
        arguments[50] = "false"
        arguments[51] = "'g1'"
        arguments[52] = "0"
        arguments[60] = "0"
        arguments[61] = "0"
        let plan = try await connection.query(
            PostgresQuery(unsafeSQL: "EXPLAIN (COSTS OFF) EXECUTE ledger(\(arguments.joined(separator: ", ")))"), logger: logger
        ).collect().map { try $0.decode(String.self) }.joined(separator: "\n")
        for table in ["instance_state", "pending_reload", "pending_list"] {
            #expect(!plan.contains("Seq Scan on \(table)"), "the plan reads all of \(table):\n\(plan)")
            #expect(plan.contains("Index Scan on \(table)_pkey"), "the plan does not use \(table)'s key:\n\(plan)")
        }
    }
}
