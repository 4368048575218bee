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
    @Test(.enabled(if: TestPostgres.isEnabled)) func tablesWithRowsButNoStatisticsAreAnalyzed() async throws {
        let directory = try TemporaryDirectory("pg-statistics")
        defer { directory.remove() }
        let store = try await TestPostgres.newStore(secretsDirectory: directory.path("data"), now: Date())
        defer { try? store.close() }
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
            let rows = try await store.rows("SELECT reltuples::bigint AS n FROM pg_class WHERE relname = \(table)")
            #expect(try rows.first?.value("n", as: Int64.self) == 1_500, "\(table)")
        }
        // Analyzed once, they are not analyzed again; the tables with fewer rows are left as they are.
        let again = try await store.analyzeTablesWithoutStatistics(minimumRows: 1_000)
        #expect(again.isEmpty, "\(again)")
        #expect(!analyzed.contains("app"))
    }
}
