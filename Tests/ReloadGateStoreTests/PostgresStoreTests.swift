import Foundation
import Logging
import ReloadGateCore
import ReloadGateStore
import ReloadGateTesting
import Testing

/// What only the PostgreSQL store has: migrations shared by gateways that start together, the URL and
/// its secrets. Its contract with the gateway is tested with SQLite's by the suites that take a
/// `StoreImplementation`.
struct PostgresStoreTests {
    let now = Date(timeIntervalSince1970: 1_790_000_000)

    @Test(.enabled(if: TestPostgres.isEnabled)) func gatewaysStartingTogetherMigrateOnce() async throws {
        let directory = try TemporaryDirectory("pg-migrate")
        defer { directory.remove() }
        let url = try await TestPostgres.newDatabase()
        let location = try PostgresLocation(url: url)
        // Four stores open the empty database at once: one migrates, the others wait for its lock and
        // find the schema there.
        let stores = try await withThrowingTaskGroup(of: PostgresStore.self) { group in
            for _ in 0..<4 {
                group.addTask {
                    try await PostgresStore(location: location, secretsDirectory: directory.path("data"), environment: .sandbox, now: now, deadline: TestPostgres.storeDeadline, logger: .init(label: "test"))
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        defer { for store in stores { try? store.close() } }
        #expect(stores.count == 4)
        for store in stores {
            #expect(try await store.appliedMigrations() == PostgresStoreTests.migrationNames)
        }
        // What one wrote, the others read.
        let created = try await stores[0].createApp(bundle: try BundleID("com.example.scores"), teamID: nil, allowsExemptions: false, now: now)
        #expect(try await stores[3].app(forAPIKey: created.apiKey)?.bundle.rawValue == "com.example.scores")
        #expect(try await stores[2].webhookSecret(of: created.app) == created.webhookSecret)
    }

    static let migrationNames = ["pg1-schema", "pg2-cluster", "pg3-inbox", "pg4-ledger-without-foreign-keys", "pg5-gateway-fence", "pg6-push-types",
        "pg7-idempotency-expiry", "pg8-ledger-retention", "pg9-decision-runs", "pg10-activity-state", "pg11-registration-key", "pg12-delivery-in-flight",
        "pg13-device-by-token",
    ]

    @Test(.enabled(if: TestPostgres.isEnabled)) func aDatabaseOfTheOtherEnvironmentIsRefused() async throws {
        let directory = try TemporaryDirectory("pg-environment")
        defer { directory.remove() }
        let location = try PostgresLocation(url: try await TestPostgres.newDatabase())
        let sandbox = try await PostgresStore(location: location, secretsDirectory: directory.path("data"), environment: .sandbox, now: now, deadline: TestPostgres.storeDeadline, logger: .init(label: "test"))
        try sandbox.close()
        do {
            _ = try await PostgresStore(location: location, secretsDirectory: directory.path("data"), environment: .production, now: now, deadline: TestPostgres.storeDeadline, logger: .init(label: "test"))
            Issue.record("a sandbox database opened for production")
        } catch {
            #expect(error.code == "store.environment-mismatch")
            #expect(!error.description.contains("password"))
        }
    }

    /// A gateway whose data directory holds another `secrets.key` than the database's secrets were sealed
    /// with is refused when it opens the store (it would answer every webhook call with an error), with or
    /// without an app; the right key still opens it.
    @Test(.enabled(if: TestPostgres.isEnabled), arguments: [false, true])
    func anotherSecretsKeyIsRefused(withApp: Bool) async throws {
        let directory = try TemporaryDirectory("pg-secrets")
        defer { directory.remove() }
        let location = try PostgresLocation(url: try await TestPostgres.newDatabase())
        let first = try await PostgresStore(location: location, secretsDirectory: directory.path("a"), environment: .sandbox, now: now, deadline: TestPostgres.storeDeadline, logger: .init(label: "test"))
        if withApp { _ = try await first.createApp(bundle: try BundleID("com.example.scores"), teamID: nil, allowsExemptions: false, now: now) }
        try first.close()
        do {
            let other = try await PostgresStore(location: location, secretsDirectory: directory.path("b"), environment: .sandbox, now: now, deadline: TestPostgres.storeDeadline, logger: .init(label: "test"))
            try other.close()
            Issue.record("a store opened with another secrets.key")
        } catch let error as StoreError {
            #expect(error.code == "store.secrets-key-mismatch")
            #expect(error.description.contains(directory.path("b") + "/secrets.key"), "\(error.description)")
        }
        let again = try await PostgresStore(location: location, secretsDirectory: directory.path("a"), environment: .sandbox, now: now, deadline: TestPostgres.storeDeadline, logger: .init(label: "test"))
        try again.close()
    }

    @Test func aServerThatIsNotThereIsNamedWithTheReasonAndWithoutThePassword() async throws {
        let directory = try TemporaryDirectory("pg-absent")
        defer { directory.remove() }
        // Port 1 of loopback: nothing listens. Opening says so (from one connection, not after the pool's
        // minute of retries), and never shows the password.
        let location = try PostgresLocation(url: "postgres://gateway:s3cret@127.0.0.1:1/reloadgate?sslmode=disable")
        do {
            let store = try await PostgresStore(location: location, secretsDirectory: directory.path("data"), environment: .sandbox, now: now, deadline: TestPostgres.storeDeadline, logger: .init(label: "test"))
            try store.close()
            Issue.record("a store opened on a port where nothing listens")
        } catch let error as StoreError {
            #expect(error.code == "store.cannot-open")
            #expect(error.description.contains("refused"), "\(error.description)")
            #expect(error.description.contains("postgres://gateway@127.0.0.1:1/reloadgate"), "\(error.description)")
            #expect(!error.description.contains("s3cret"))
        }
    }

    @Test func theURLIsParsedAndItsPasswordNeverShown() throws {
        let location = try PostgresLocation(url: "postgres://gateway:s3cr%40t@db.internal:6432/reloadgate?sslmode=verify-full&sslrootcert=/etc/ca.pem")
        #expect(location.username == "gateway")
        #expect(location.password == "s3cr@t")
        #expect(location.host == "db.internal")
        #expect(location.port == 6432)
        #expect(location.database == "reloadgate")
        #expect(location.sslMode == "verify-full")
        #expect(location.sslRootCertificate == "/etc/ca.pem")
        #expect(!location.description.contains("s3cr"))

        let socket = try PostgresLocation(url: "postgresql://gateway@/reloadgate?host=/run/postgresql")
        #expect(socket.socketDirectory == "/run/postgresql")
        #expect(socket.host == nil)
        #expect(socket.port == 5432)

        let directory = try TemporaryDirectory("pg-password")
        defer { directory.remove() }
        try "from-file\n".write(toFile: directory.path("password"), atomically: true, encoding: .utf8)
        let fromFile = try PostgresLocation(url: "postgres://gateway:ignored@db/reloadgate", passwordFile: directory.path("password"))
        #expect(fromFile.password == "from-file")
        #expect(fromFile.sslMode == "prefer")

        #expect(try PostgresLocation(url: "postgres://u@[::1]:5433/d").host == "::1")
        // Numbers from outside: every extreme of the port is refused, never taken for the default.
        for bad in [
            "mysql://u@h/d", "postgres://h/d", "postgres://u@h:0/d", "postgres://u@h/d?sslmode=allow", "postgres://u@h/d?port=99999",
            "postgres://u@h:99999999999999999999/d", "postgres://u@h:65536/d", "postgres://u@h:-1/d", "postgres://u@h:1e300/d",
            "postgres://u@h/d?port=9223372036854775807", "postgres://u@h/d?port=-9223372036854775808", "postgres://u@h/d?port=1e300",
        ] {
            #expect(throws: PostgresLocation.Invalid.self, "\(bad)") { try PostgresLocation(url: bad) }
        }
        #expect(throws: PostgresLocation.Invalid.self) {
            try PostgresLocation(url: "postgres://u@h/d", passwordFile: directory.path("missing"))
        }
    }
}
