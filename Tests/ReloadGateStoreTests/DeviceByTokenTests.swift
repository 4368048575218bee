import Foundation
import GRDB
import Logging
import PostgresNIO
import ReloadGateCore
@testable import ReloadGateStore
import ReloadGateTesting
import Testing

/// A device's token is indexed once, as (token, appId) (migrations `v24-device-by-token` and
/// `pg13-device-by-token`, decision 0103): the push's lookup by token alone, a registration's by app and
/// tokens, and the conflict target `(appId, token)` are all served by it.
struct DeviceByTokenTests {
    static let now = Date(timeIntervalSince1970: 1_790_000_000)
    static let logger = Logger(label: "device-by-token")
    static let tokens = [String(repeating: "ab", count: 32), String(repeating: "cd", count: 32), String(repeating: "ef", count: 32)]

    /// A store of the version before, with a removed device's id above the ones left: the rebuilt table
    /// keeps every row and id, the widgets' link to their device, and the id high mark.
    @Test func theSQLiteDeviceTableIsRebuiltWithItsRowsIdsAndHighMark() async throws {
        let directory = try TemporaryDirectory("v24")
        defer { directory.remove() }
        try StoreFixture.writeOlderStore(in: directory, upTo: "v23-delivery-in-flight", sql: """
            INSERT INTO device (id, appId, token, active, registeredAt, unregisteredAt, pushType)
                VALUES (1, 1, '\(Self.tokens[0])', 1, 1790000000000, NULL, 'widgets'),
                       (5, 1, '\(Self.tokens[1])', 0, 1790000000000, 1790000100500, 'controls'),
                       (9, 1, '\(Self.tokens[2])', 1, 1790000000000, NULL, 'widgets');
            DELETE FROM device WHERE id = 9;
            INSERT INTO widget (id, deviceId, widgetID, kind, family, configuration, pushEnabled)
                VALUES (1, 1, 'w1', 'scores', 'systemSmall', '{"team":"a"}', 1),
                       (2, 5, 'control', 'garage', 'control', '{}', 1);
            """)
        let store = try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: Self.now)
        defer { try? store.close() }
        #expect(try store.appliedMigrations().last == "v24-device-by-token")
        let app = try #require(try await store.app(bundle: try BundleID("com.example.scores")))

        let devices = try await store.devices(bundle: nil, token: nil, limit: 10).sorted { $0.token < $1.token }
        #expect(devices.map(\.token) == Array(Self.tokens[0...1]))
        #expect(devices.map(\.active) == [true, false])
        #expect(devices[1].unregisteredAt == Date(timeIntervalSince1970: 1_790_000_100.5))
        #expect(try await store.pushDeviceStatus(app: app, token: try DeviceToken(Self.tokens[0])) == .active(device: 1, pushType: .widgets))
        #expect(try await store.pushDeviceStatus(app: app, token: try DeviceToken(Self.tokens[2])) == .unknown)
        #expect(try await store.instances(ofDevice: Self.tokens[0], bundle: nil).map(\.instance.instance) == [1])
        #expect(try await store.pushTargets(device: 1, kind: "scores", match: ["team": .string("a")]) == [1])

        // The removed device's id is not given again.
        let adopted = try await store.adoptDevice(app: app, token: try DeviceToken(Self.tokens[2]), pushType: .widgets, pushToStart: false, now: Self.now)
        #expect(adopted.device == 10)

        // The widgets still belong to the rebuilt table: removing a device removes its widgets.
        let widgetsLeft = try await store.writer.write { db in
            try db.execute(sql: "DELETE FROM device WHERE id = 5")
            return try Int64.fetchAll(db, sql: "SELECT id FROM widget ORDER BY id")
        }
        #expect(widgetsLeft == [1, adopted.instance])
    }

    /// Every lookup of a device by token, by app or of a device's widgets seeks an index; the token is in
    /// one index only.
    @Test func theSQLiteLookupsSeekOneTokenIndex() throws {
        let directory = try TemporaryDirectory("device-plans")
        defer { directory.remove() }
        let store = try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: Self.now)
        defer { try? store.close() }
        let queries: [(sql: String, arguments: StatementArguments, seeks: String)] = [
            ("SELECT id, appId, active, unregisteredAt, pushType FROM device WHERE token = ?", [Self.tokens[0]], "(token=?)"),
            ("SELECT id, token FROM device WHERE appId = ? AND token IN (?, ?)", [1, Self.tokens[0], Self.tokens[1]], "(token=? AND appId=?)"),
            ("SELECT id FROM device WHERE appId = ?", [1], "(appId=?)"),
            ("SELECT id FROM widget WHERE deviceId = ?", [1], "(deviceId=?)"),
        ]
        try store.writer.read { db in
            for query in queries {
                let plan = try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + query.sql, arguments: query.arguments).map { $0["detail"] as String }
                #expect(plan.contains { $0.hasPrefix("SEARCH") && $0.hasSuffix(query.seeks) }, "\(query.sql): \(plan)")
                #expect(!plan.contains { $0.hasPrefix("SCAN") }, "\(query.sql): \(plan)")
            }
            let indexes = try String.fetchAll(db, sql: "SELECT name FROM pragma_index_list('device')")
            let overToken = try indexes.filter { index in
                try String.fetchAll(db, sql: "SELECT name FROM pragma_index_info(?)", arguments: [index]).contains("token")
            }
            #expect(overToken.count == 1, "\(indexes)")
            let widgetIndexes = try String.fetchAll(db, sql: "SELECT name FROM pragma_index_list('widget')")
            #expect(!widgetIndexes.contains("widget_on_deviceId"), "\(widgetIndexes)")
        }
    }

    /// On PostgreSQL: a database of the version before, migrated with its devices; the token is in one
    /// index, unique with the app, and `ON CONFLICT (appId, token)` (as both versions write it) still finds it.
    @Test(.enabled(if: TestPostgres.isEnabled)) func thePostgresDeviceTokenIsInOneIndex() async throws {
        let directory = try TemporaryDirectory("pg13")
        defer { directory.remove() }
        let location = try await StoreFixture.writeOlderPostgres(upTo: "pg12-delivery-in-flight", statements: [
            "INSERT INTO device (id, appId, token, active, registeredAt) VALUES (1, 1, \(Self.tokens[0]), true, 0)",
        ], logger: Self.logger)
        let store = try await PostgresStore(
            location: location, secretsDirectory: directory.path("data"), environment: .sandbox, now: Self.now, logger: Self.logger
        )
        defer { try? store.close() }
        #expect(try await store.appliedMigrations().last == "pg13-device-by-token")
        let app = try #require(try await store.app(bundle: try BundleID("com.example.scores")))
        #expect(try await store.pushDeviceStatus(app: app, token: try DeviceToken(Self.tokens[0])) == .active(device: 1, pushType: .widgets))

        let definitions = try await store.rows("SELECT indexdef FROM pg_indexes WHERE tablename = 'device'").map { try $0.decode(String.self) }
        #expect(definitions.filter { $0.contains("token") } == ["CREATE UNIQUE INDEX device_token_appid_key ON public.device USING btree (token, appid)"], "\(definitions)")
        #expect(definitions.contains { $0.hasSuffix("USING btree (appid)") }, "\(definitions)")

        // The conflict target as written before and now: the known token is not inserted twice.
        let inserted = try await store.rows("""
            INSERT INTO device (appId, token, active, registeredAt) VALUES (1, \(Self.tokens[0]), true, 0), (1, \(Self.tokens[1]), true, 0)
            ON CONFLICT (appId, token) DO NOTHING RETURNING token
            """).map { try $0.decode(String.self) }
        #expect(inserted == [Self.tokens[1]])
    }
}
