import Foundation
import Logging
import PostgresNIO
public import ReloadGateCore
public import ReloadGateStore

/// The PostgreSQL cluster the tests use: `RG_TEST_POSTGRES_URL`, which `.ci/run` sets after
/// starting a private cluster (`scripts/test-postgres start DIR`). Each test gets a database of its own
/// on it, so tests run in parallel and leave nothing to each other.
public enum TestPostgres {
    /// The cluster's URL (a superuser, any database), or `nil` when no cluster was started for the tests.
    public static var url: String? {
        ProcessInfo.processInfo.environment["RG_TEST_POSTGRES_URL"].flatMap { $0.isEmpty ? nil : $0 }
    }

    /// Whether tests that need PostgreSQL run: a cluster is given, or this is CI (where a missing cluster
    /// must fail the run, not skip the tests).
    public static var isEnabled: Bool {
        url != nil || ProcessInfo.processInfo.environment["CI"] == "true"
    }

    /// Why no database could be made.
    public struct Unavailable: Error, CustomStringConvertible {
        public var description: String
    }

    /// Creates an empty database with a new name and returns its URL.
    public static func newDatabase() async throws -> String {
        guard let url else {
            throw Unavailable(description: "RG_TEST_POSTGRES_URL is not set: start a cluster with scripts/test-postgres start DIR and export the URL it prints")
        }
        let name = "rg_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(20)
        return try await createDatabase(String(name), on: url)
    }

    /// Creates `name` on the cluster of `url` and returns the URL of the new database.
    static func createDatabase(_ name: String, on url: String) async throws -> String {
        // One connection, closed before it is released, within 120 s (a pool here once waited forever under
        // a loaded test run, its `run()` not yet started). The limit turns a wait without end into an
        // error; it is not a measure of the database: at the start of a parallel run on two cores the
        // concurrency pool can be held for tens of seconds, and 30 s failed tests whose database was fine.
        let configuration = try PostgresLocation(url: url).connectionConfiguration()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                let connection = try await PostgresConnection.connect(configuration: configuration, id: 1, logger: Logger(label: "test-postgres"))
                do {
                    _ = try await connection.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name)"), logger: Logger(label: "test-postgres")).collect()
                } catch {
                    try? await connection.close()
                    throw error
                }
                try await connection.close()
            }
            group.addTask {
                try await Task.sleep(for: .seconds(120))
                throw Unavailable(description: "creating the database \(name) took more than 120 s")
            }
            try await group.next()
            group.cancelAll()
        }
        guard var components = URLComponents(string: url) else { throw Unavailable(description: "invalid URL \(url)") }
        components.path = "/" + name
        return components.string!
    }

    /// The store deadline of the test's own store handles.
    public static let storeDeadline: Duration = .seconds(30)

    /// A new, empty PostgreSQL store of `environment`, its secrets key in `directory`.
    public static func newStore(secretsDirectory: String, environment: DeploymentEnvironment = .sandbox, now: Date) async throws
        -> PostgresStore
    {
        try await openStore(url: try await newDatabase(), secretsDirectory: secretsDirectory, environment: environment, now: now)
    }

    /// The store of the database at `url` (a test's second handle beside its gateway's), its secrets key in
    /// `secretsDirectory`.
    public static func openStore(
        url: String, secretsDirectory: String, environment: DeploymentEnvironment = .sandbox, now: Date = Date()
    ) async throws -> PostgresStore {
        var logger = Logger(label: "test-postgres")
        logger.logLevel = .warning
        // A generous store deadline: these handles test what the store does, beside the whole suite on two
        // cores and a database server shared by every test (a statement slowed past 5 s there is the
        // machine's load, not what a test asks about; StoreDeadlineTests set their own deadlines).
        return try await PostgresStore(
            location: try PostgresLocation(url: url), secretsDirectory: secretsDirectory, environment: environment, now: now,
            deadline: Self.storeDeadline, logger: logger
        )
    }
}

/// A PostgreSQL cluster of one test's own (`scripts/test-postgres`), for tests that stop the database
/// (the shared cluster of ``TestPostgres`` serves the other tests at the same time).
public final class PrivatePostgresCluster: Sendable {
    /// The cluster's directory (data, log, port).
    public let directory: String
    /// `postgres://reloadgate@127.0.0.1:PORT/postgres?sslmode=disable`.
    public let url: String
    private let script: URL

    /// Starts a cluster in a new temporary directory.
    public init(repositoryRoot: URL) async throws {
        HeavyTest.expectTurn("a PostgreSQL cluster (PrivatePostgresCluster)")
        script = repositoryRoot.appendingPathComponent("scripts/test-postgres")
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("reloadgate-pg-\(UUID().uuidString.prefix(8))").path
        url = try await Self.run(script, "start", directory).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// A URL of `database` on this cluster (created first).
    public func newDatabase(_ name: String) async throws -> String {
        try await TestPostgres.createDatabase(name, on: url)
    }

    /// Stops the server at once, as a crash (immediate shutdown); the data stays.
    public func halt() async throws { _ = try await Self.run(script, "halt", directory) }

    /// Starts the halted server again on the same port.
    public func resume() async throws { _ = try await Self.run(script, "resume", directory) }

    /// Stops the server and removes its directory.
    public func remove() async { _ = try? await Self.run(script, "stop", directory) }

    private static func run(_ script: URL, _ command: String, _ directory: String) async throws -> String {
        let child = try ChildProcess(script, [command, directory], in: URL(fileURLWithPath: "/"))
        let status = try await child.waitForExit(timeout: .seconds(120))
        guard status == 0 else {
            throw TestPostgres.Unavailable(description: "scripts/test-postgres \(command) failed (\(status)): \(child.standardError)")
        }
        return child.standardOutput
    }
}
