import Foundation
import PostgresNIO
import ReloadGateCore
@testable import ReloadGateStore
import ReloadGateTesting
import Testing

/// The tables of a new PostgreSQL database have no statistics until autovacuum first analyzes them, and
/// without them a fan-out webhook's targets were read in 45 s: the gateway has the tables that hold rows
/// but no statistics analyzed (decision 0113).
struct PostgresStatisticsTests {
    /// `schema`: the store's tables in a schema of that name (the database's `search_path`) rather than
    /// `public`; a name that needs quoting as an identifier is compared as the catalog holds it.
    @Test(.enabled(if: TestPostgres.isEnabled), arguments: [nil, "Tenant A"])
    func tablesWithRowsButNoStatisticsAreAnalyzed(schema: String?) async throws {
        let directory = try TemporaryDirectory("pg-statistics")
        defer { directory.remove() }
        let url = try await TestPostgres.newDatabase()
        if let schema {
            let setup = try await TestPostgres.openStore(url: url, secretsDirectory: directory.path("data"))
            let quoted = "\"" + schema.replacingOccurrences(of: "\"", with: "\"\"") + "\""
            _ = try await setup.rows(PostgresQuery(unsafeSQL: "CREATE SCHEMA \(quoted)"))
            _ = try await setup.rows(PostgresQuery(unsafeSQL: "DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET search_path = %I', current_database(), '\(schema)'); END $$"))
            try setup.close()
        }
        let store = try await TestPostgres.openStore(url: url, secretsDirectory: directory.path("data"))
        defer { try? store.close() }
        if let schema {
            let current = try await store.rows("SELECT current_schema() AS s").first?.value("s", as: String.self)
            try #require(current == schema, "the store's schema: \(String(describing: current))")
        }
        // Autovacuum would analyze them too, a minute after the writes at most: not these two.
        for table in ["device", "widget"] {
            _ = try await store.rows(PostgresQuery(unsafeSQL: "ALTER TABLE \(table) SET (autovacuum_enabled = false)"))
        }
        let app = try await store.createApp(bundle: try BundleID("com.example.scores"), teamID: nil, allowsExemptions: false, now: Date()).app
        var generator = SplitMix64(seed: 113)
        let writes = (0..<1_500).map { _ in RegistryStatementJournalTests.putDevice(app, &generator) }
        _ = try await store.writeRegistry(writes, now: Date())

        // The server counts the rows a moment after the writes: looked at until it has.
        var analyzed: Set<String> = []
        #expect(try await eventually(within: .seconds(60), every: .milliseconds(200)) {
            analyzed.formUnion(try await store.analyzeTablesWithoutStatistics(minimumRows: 1_000))
            return analyzed.isSuperset(of: ["device", "widget"])
        }, "analyzed: \(analyzed)")
        for table in ["device", "widget"] {
            let rows = try await store.rows(
                "SELECT reltuples::bigint AS n FROM pg_class WHERE relname = \(table) AND relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = current_schema())"
            )
            #expect(try rows.first?.value("n", as: Int64.self) == 1_500, "\(table)")
        }
        // Analyzed once, they are not analyzed again; the tables with fewer rows are left as they are.
        let again = try await store.analyzeTablesWithoutStatistics(minimumRows: 1_000)
        #expect(again.isEmpty, "\(again)")
        #expect(!analyzed.contains("app"))
    }
}
