import Foundation
import GRDB
import Logging
import PostgresNIO
import ReloadGateCore
@testable import ReloadGateStore
import ReloadGateTesting
import Testing

/// The implementations of ``GatewayStore`` the contract tests run against: each `@Test(arguments:
/// StoreImplementation.all)` case runs once per implementation. PostgreSQL runs on the cluster that
/// `.ci/run` starts (``TestPostgres``; a database per test); without one, outside CI, only SQLite runs.
/// Tests of one implementation's own matters (SQLite's migrations, WAL, file modes) use it directly.
enum StoreImplementation: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case sqlite
    case postgres

    static let all: [StoreImplementation] = TestPostgres.isEnabled ? allCases : [.sqlite]

    var testDescription: String { rawValue }

    /// A new, empty store of this implementation in `directory` (a sandbox gateway's).
    func open(_ directory: TemporaryDirectory, now: Date) async throws -> any GatewayStore {
        switch self {
        case .sqlite: try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: now)
        case .postgres: try await TestPostgres.newStore(secretsDirectory: directory.path("data"), now: now)
        }
    }
}

extension TestPostgres {
    /// A PostgreSQL store on a new database reached through a proxy (``TCPProxy``) that the test can
    /// stall, cut or heal, with `deadline`; the caller stops the proxy.
    static func newStoreThroughProxy(in directory: TemporaryDirectory, deadline: Duration) async throws -> (PostgresStore, TCPProxy) {
        let database = try await newDatabase()
        // Migrated first by a handle with the tests' generous deadline: a migration's statements beside the
        // whole suite on two cores can take longer than a short deadline under test (a CI run's open once
        // failed at 500 ms), and the test asks about its operations, not about the open.
        try await openStore(url: database, secretsDirectory: directory.path("data")).close()
        let (proxy, proxied) = try await TCPProxy.inFront(of: database)
        var logger = Logger(label: "test")
        logger.logLevel = .critical
        // The short deadline makes the server end a session idle in a transaction after twice the deadline
        // and a second; the open's own transaction, beside the whole suite on two cores, can wait that long
        // between two statements (a full run's open failed so at 500 ms: "terminating connection due to
        // idle-in-transaction timeout", SQLSTATE 25P03, matched by its code whatever the server's language).
        // Such an open is tried again, up to three times.
        var attempt = 1
        while true {
            do {
                let store = try await PostgresStore(
                    location: try PostgresLocation(url: proxied), secretsDirectory: directory.path("data"),
                    environment: .sandbox, now: Date(), deadline: deadline, logger: logger
                )
                return (store, proxy)
            } catch StoreError.cannotOpen(_, let reason) where reason.contains(PostgresStore.stateMark("25P03")) && attempt < 3 {
                attempt += 1
            } catch {
                await proxy.stop()
                throw error
            }
        }
    }
}

/// A store in a temporary directory with one app (`com.example.scores`) and one device
/// (token `abab…`) showing `widgets`: the start of most ledger tests.
struct StoreFixture {
    static let token = String(repeating: "ab", count: 32)
    static let scores = WidgetRegistration(id: "w1", kind: "scores", family: .systemSmall, configuration: WidgetConfiguration())
    static let news = WidgetRegistration(id: "w2", kind: "news", family: .systemSmall, configuration: WidgetConfiguration())

    let store: any GatewayStore
    let app: App
    let registration: DeviceRegistration

    /// A webhook request of `app` (received at 1,790,000,000 s, priority 10) for a batch.
    static func request(_ id: RequestID, app: App) -> RecordedRequest {
        RecordedRequest(
            id: id, app: app.id, source: .webhook, received: Timestamp(seconds: 1_790_000_000), priority: .high,
            expiration: nil, collapseID: nil, exempt: false, summary: #"{"kind":"scores"}"#
        )
    }

    /// The instance ids of the device's widgets, in the order given.
    var instances: [Int64] { registration.instances.map(\.id) }

    static func with(
        _ name: String,
        _ implementation: StoreImplementation,
        widgets: [WidgetRegistration] = [scores, news],
        now: Date,
        _ body: (StoreFixture) async throws -> Void
    ) async throws {
        let directory = try TemporaryDirectory(name)
        defer { directory.remove() }
        let store = try await implementation.open(directory, now: now)
        defer { try? store.close() }
        let app = try await store.createApp(bundle: try BundleID("com.example.scores"), teamID: nil, allowsExemptions: false, now: now).app
        let registration = try await store.putDevice(
            app: app, token: try DeviceToken(token), widgets: widgets, previousToken: nil, now: now
        )
        try await body(StoreFixture(store: store, app: app, registration: registration))
    }

    /// Writes the data directory an older ReloadGate would have left: the store's migrations up to and
    /// including `migration`, then `sql` (rows in that older layout). App 1 (`com.example.scores`) is
    /// there already.
    static func writeOlderStore(in directory: TemporaryDirectory, upTo migration: String, sql: String) throws {
        try FileManager.default.createDirectory(atPath: directory.path("data"), withIntermediateDirectories: true)
        let queue = try DatabaseQueue(path: directory.path("data/" + SQLiteStore.fileName))
        try SQLiteStore.migrator.migrate(queue, upTo: migration)
        try queue.write { db in
            try db.execute(sql: """
                INSERT INTO app (id, bundle, environment, apiKeyHash, webhookSecret, createdAt)
                    VALUES (1, 'com.example.scores', 'sandbox', x'01', x'02', 0);
                """)
            try db.execute(sql: sql)
        }
        try queue.close()
    }

    /// A new PostgreSQL database as an older version left it: migrated up to `migration`, with the app
    /// `com.example.scores` as id 1, then `statements` run in order. Returns where it is.
    static func writeOlderPostgres(upTo migration: String, statements: [PostgresQuery] = [], logger: Logger) async throws -> PostgresLocation {
        let location = try PostgresLocation(url: try await TestPostgres.newDatabase())
        let client = PostgresClient(configuration: try location.clientConfiguration(), backgroundLogger: logger)
        let running = Task { await client.run() }
        defer { running.cancel() }
        try await PostgresStore.migrate(client, upTo: migration, logger: logger)
        try await client.withConnection { connection in
            _ = try await connection.query("""
                INSERT INTO app (id, bundle, environment, apiKeyHash, webhookSecret, createdAt) VALUES (1, 'com.example.scores', 'sandbox', '\\x01', '\\x02', 0)
                """, logger: logger)
            for statement in statements { _ = try await connection.query(statement, logger: logger) }
        }
        return location
    }
}
