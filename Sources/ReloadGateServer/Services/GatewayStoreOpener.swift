public import Foundation
public import Logging
public import ReloadGateStore

/// Opens the store a configuration names: SQLite in the data directory, or the PostgreSQL database of
/// `store.url` (its secrets key in the data directory). `reloadgate serve` and the operator commands that
/// run without a gateway both open it here.
public enum GatewayStoreOpener {
    /// The PostgreSQL location of `configuration`, checked (`store.kind: postgres` needs `store.url`);
    /// `nil` for SQLite. Errors never repeat the URL (it may hold the password).
    public static func location(of configuration: GatewayConfiguration) throws(ConfigurationError) -> PostgresLocation? {
        guard configuration.store.kind == .postgres else { return nil }
        guard let url = configuration.store.url, !url.isEmpty else {
            throw .inconsistent(key: "store.url", reason: "store.kind is postgres: set store.url (or RELOADGATE_STORE_URL) to postgres://USER@HOST:PORT/DATABASE")
        }
        do {
            return try PostgresLocation(url: url, passwordFile: configuration.store.passwordFile)
        } catch {
            throw .inconsistent(key: "store.url", reason: error.description)
        }
    }

    /// Opens (creating and migrating if needed) the configured store.
    /// - Throws: ``ConfigurationError`` for an unusable `store.url`, ``StoreError`` when the store cannot open.
    public static func open(_ configuration: GatewayConfiguration, now: Date, logger: Logger) async throws -> any GatewayStore {
        if let location = try location(of: configuration) {
            return try await PostgresStore(
                location: location,
                secretsDirectory: configuration.dataDirectory,
                environment: configuration.environment,
                now: now,
                deadline: .milliseconds(configuration.store.deadline),
                logger: logger
            )
        }
        return try SQLiteStore(
            directory: configuration.dataDirectory, environment: configuration.environment, now: now,
            deadline: .milliseconds(configuration.store.deadline)
        )
    }
}
