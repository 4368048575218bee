import Foundation
public import Logging
import PostgresNIO
public import ReloadGateCore
public import ReloadGateStore

/// The PostgreSQL cluster the tests use: `RELOADGATE_TEST_POSTGRES_URL`, which `.ci/run` sets after
/// starting a private cluster (`scripts/test-postgres start DIR`). Each test gets a database of its own
/// on it, so tests run in parallel and leave nothing to each other.
public enum TestPostgres {
    /// The cluster's URL (a superuser, any database), or `nil` when no cluster was started for the tests.
    public static var url: String? {
        ProcessInfo.processInfo.environment["RELOADGATE_TEST_POSTGRES_URL"].flatMap { $0.isEmpty ? nil : $0 }
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
            throw Unavailable(description: "RELOADGATE_TEST_POSTGRES_URL is not set: start a cluster with scripts/test-postgres start DIR and export the URL it prints")
        }
        let name = "rg_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(20)
        let location = try PostgresLocation(url: url)
        let client = PostgresClient(configuration: try location.testClientConfiguration(), backgroundLogger: Logger(label: "test-postgres"))
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await client.run() }
            _ = try await client.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name)")).collect()
            group.cancelAll()
        }
        guard var components = URLComponents(string: url) else { throw Unavailable(description: "invalid URL \(url)") }
        components.path = "/" + name
        return components.string!
    }

    /// A new, empty PostgreSQL store of `environment`, its secrets key in `directory`.
    public static func newStore(secretsDirectory: String, environment: DeploymentEnvironment = .sandbox, now: Date) async throws
        -> PostgresStore
    {
        var logger = Logger(label: "test-postgres")
        logger.logLevel = .warning
        return try await PostgresStore(
            location: try PostgresLocation(url: try await newDatabase()), secretsDirectory: secretsDirectory,
            environment: environment, now: now, logger: logger
        )
    }
}
