import Foundation
import PostgresNIO
import ReloadGateCore
import ReloadGateServer
import ReloadGateTesting
import Testing

@testable import ReloadGateStore

/// A gateway on a new PostgreSQL database has its tables analyzed once they hold rows (decision 0113):
/// without statistics PostgreSQL took an app's 50,000 devices for a few hundred and read a fan-out's
/// targets past the store's deadline. Autovacuum would analyze them too, up to a minute after the writes;
/// here it is off for `device`, so only the gateway can.
@Suite(.timeLimit(.minutes(10)), .enabled(if: TestPostgres.isEnabled), .heavy)
struct NewDatabaseStatisticsTests {
    @Test func aRunningGatewayHasItsTablesAnalyzed() async throws {
        let url = try await TestPostgres.newDatabase()
        let data = try TemporaryDirectory("new-database-statistics")
        defer { data.remove() }
        let store = try await TestPostgres.openStore(url: url, secretsDirectory: data.path("data"))
        defer { try? store.close() }
        _ = try await store.rows("ALTER TABLE device SET (autovacuum_enabled = false)")
        let app = try await store.createApp(bundle: try BundleID("com.example.scores"), teamID: nil, allowsExemptions: false, now: Date()).app
        var generator = SplitMix64(seed: 113)
        let writes = (0..<1_500).map { _ in
            let token = try! DeviceToken((0..<4).map { _ in String(format: "%016llx", generator.next()) }.joined())
            let widget = WidgetRegistration(id: "w1", kind: "scores", family: .systemSmall, configuration: WidgetConfiguration())
            return RegistryWrite.putDevice(app: app, token: token, widgets: [widget], previousToken: nil)
        }
        _ = try await store.writeRegistry(writes, now: Date())

        @Sendable func deviceRows() async throws -> Int64? {
            try await store.rows("SELECT reltuples::bigint AS n FROM pg_class WHERE relname = 'device'").first?.value("n", as: Int64.self)
        }
        // Never analyzed: PostgreSQL has no count of its rows yet.
        let before = try await deviceRows()
        #expect(before == -1)
        try await TestGateway.withRunning(configure: { configuration in
            configuration.usePostgres(url, dataDirectory: data.path("data"))
        }) { _ in
            // The gateway looks every few seconds (`ClusterService.statisticsInterval`); the server counts
            // the rows a moment after the writes.
            let analyzed = try await eventually(within: .seconds(90), every: .milliseconds(250)) { try await deviceRows() == 1_500 }
            let counted = try await deviceRows()
            #expect(analyzed, "device's rows as PostgreSQL counts them: \(String(describing: counted))")
        }
    }
}
