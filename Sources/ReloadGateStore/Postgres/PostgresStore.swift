import Foundation
public import Logging
import PostgresNIO
import Synchronization
public import ReloadGateCore

/// The shared store of several gateways: one PostgreSQL database (postgres-nio).
///
/// It keeps the SQLite store's contract (``GatewayStore``; the store test suite runs against both) and its
/// layout, with PostgreSQL's types: times are `bigint` milliseconds, request lists the same JSON text.
/// Opening runs the named migrations of ``PostgresStore/migrations`` inside one transaction under an
/// advisory lock, so that gateways starting together migrate once and the others wait for it.
///
/// Webhook secrets are sealed with the key in `secretsDirectory` (`secrets.key`), as with SQLite: every
/// gateway of one database needs the same key file (a Kubernetes secret, a copied file).
public final class PostgresStore: Sendable {
    /// Where the database is, without the password.
    public let path: String
    /// The environment the store was created for.
    public let environment: DeploymentEnvironment
    let logger: Logger
    let sealer: SecretSealer
    /// The connection pool in use, replaced by a new one when the database comes back after an outage.
    private let pool: Mutex<Pool>
    /// An operation found no connection in time: the pool may be waiting out its reconnection backoff
    /// (up to a minute), so reachability is checked with a new pool, which then replaces it.
    private let poolSuspect = Mutex(false)
    private let configuration: PostgresClient.Configuration
    private let clientLogger: Logger
    /// The database, for connections outside the pool (LISTEN).
    let location: PostgresLocation

    /// A postgres-nio client and the task running it.
    private struct Pool: Sendable {
        var client: PostgresClient
        var runner: Task<Void, Never>

        init(configuration: PostgresClient.Configuration, logger: Logger) {
            let client = PostgresClient(configuration: configuration, backgroundLogger: logger)
            self.client = client
            // Detached: a task inherits task-local values, and postgres-nio's `run()` ends the pool when
            // the graceful shutdown of an enclosing service group (a task-local of ServiceLifecycle) begins:
            // the pool would close while the gateway's own services still commit and release their leases
            // in order. The pool ends when the store closes it (`close()` cancels this task).
            runner = Task.detached { await client.run() }
        }
    }

    /// The pool's client.
    var client: PostgresClient { pool.withLock { $0.client } }

    /// Connects, migrates and checks the environment.
    /// - Parameters:
    ///   - location: the database.
    ///   - secretsDirectory: the directory of `secrets.key` (created there, mode 0600, when missing).
    ///   - environment: a new store records it; a store of the other environment is refused.
    ///   - now: the store's creation time, when new.
    /// - Throws: ``StoreError``.
    public init(
        location: PostgresLocation,
        secretsDirectory: String,
        environment: DeploymentEnvironment,
        now: Date,
        logger: Logger
    ) async throws(StoreError) {
        let description = location.description
        let configuration: PostgresClient.Configuration
        do {
            configuration = try location.clientConfiguration()
        } catch {
            throw .cannotOpen(path: description, reason: "\(error)")
        }
        do {
            try FileManager.default.createDirectory(
                atPath: secretsDirectory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700]
            )
        } catch {
            throw .cannotOpen(path: description, reason: "cannot create \(secretsDirectory): \(error.localizedDescription)")
        }
        let sealer = try SecretSealer(directory: secretsDirectory)
        // One connection first, outside the pool: the pool would retry an unreachable server for a minute
        // and then report only that it gave up; this says why (refused, unknown host, bad password).
        try await Self.checkConnection(location, description: description, logger: logger)
        // postgres-nio warns at `warning` when a query waits for `run()` to start (as the first one here
        // does, harmlessly); its errors still show, and every failed query throws to its caller.
        var clientLogger = logger
        clientLogger.logLevel = max(logger.logLevel, .error)
        let pool = Pool(configuration: configuration, logger: clientLogger)
        let client = pool.client
        let runner = pool.runner
        let stored: DeploymentEnvironment
        do {
            try await Self.migrate(client, logger: logger)
            stored = try await client.withTransaction(logger: logger) { connection in
                _ = try await connection.rows(
                    """
                    INSERT INTO store_info (key, value) VALUES ('environment', \(environment.rawValue)),
                        ('createdAt', \(String(now.storedMilliseconds))) ON CONFLICT (key) DO NOTHING
                    """,
                    logger: logger
                )
                let rows = try await connection.rows("SELECT value FROM store_info WHERE key = 'environment'", logger: logger)
                guard let text = try rows.first?.decode(String.self), let stored = DeploymentEnvironment(rawValue: text) else {
                    throw StoreError.corrupt(reason: "store_info lacks a valid environment")
                }
                guard stored == environment else { return stored }
                guard try await Self.checkSecretsKey(sealer, on: connection, logger: logger) else {
                    throw StoreError.secretsKeyMismatch(directory: URL(fileURLWithPath: secretsDirectory).standardizedFileURL.path)
                }
                return stored
            }
        } catch {
            runner.cancel()
            if case .secretsKeyMismatch(let directory) = (error as? PostgresTransactionError)?.closureError as? StoreError {
                throw .secretsKeyMismatch(directory: directory)
            }
            throw .cannotOpen(path: description, reason: Self.describe(error))
        }
        guard stored == environment else {
            runner.cancel()
            throw .environmentMismatch(path: description, stored: stored, configured: environment)
        }
        self.path = description
        self.environment = environment
        self.logger = logger
        self.sealer = sealer
        self.pool = Mutex(pool)
        self.configuration = configuration
        self.clientLogger = clientLogger
        self.location = location
    }

    /// Whether `sealer`'s key is the one the store's secrets were sealed with (as ``StoreInfo`` checks it
    /// for SQLite): the check value opens with it, or (a store from before the check) the first app's
    /// webhook secret does. A store without a check value gets this key's.
    private static func checkSecretsKey(_ sealer: SecretSealer, on connection: PostgresConnection, logger: Logger) async throws -> Bool {
        if let row = try await connection.rows("SELECT value FROM store_info WHERE key = 'secretsCheck'", logger: logger).first {
            return sealer.opens(checkValue: try row.decode(String.self))
        }
        if let row = try await connection.rows("SELECT webhookSecret FROM app ORDER BY id LIMIT 1", logger: logger).first {
            let sealed = try row.decode(ByteBuffer.self)
            if sealer.opens(Data(sealed.readableBytesView)) == false { return false }
        }
        try await connection.run(
            "INSERT INTO store_info (key, value) VALUES ('secretsCheck', \(try sealer.checkValue())) ON CONFLICT (key) DO NOTHING",
            logger: logger
        )
        // Two gateways with different keys starting at once: the one whose value was not kept finds out here.
        let kept = try await connection.rows("SELECT value FROM store_info WHERE key = 'secretsCheck'", logger: logger).first
        return try kept.map { sealer.opens(checkValue: try $0.decode(String.self)) } ?? false
    }

    /// Closes the connections (in the background: queries still running fail).
    public func close() throws {
        pool.withLock { $0.runner.cancel() }
    }

    /// A PostgreSQL error as one line: the server's message and detail when there is one, else the
    /// connection's error.
    static func describe(_ error: any Error) -> String {
        if let error = error as? PSQLError {
            if let message = error.serverInfo?[.message] {
                let detail = error.serverInfo?[.detail].map { " (\($0))" } ?? ""
                return message + detail
            }
            if let underlying = error.underlying { return "\(error.code): \(underlying)" }
            return "\(error.code)"
        }
        return "\(error)"
    }

    /// How long opening the store waits for the server to answer.
    static let openTimeout: Duration = .seconds(10)

    /// Connects once (within ``openTimeout``) and closes again, or throws why it could not.
    private static func checkConnection(_ location: PostgresLocation, description: String, logger: Logger) async throws(StoreError) {
        let configuration: PostgresConnection.Configuration
        do {
            configuration = try location.connectionConfiguration()
        } catch {
            throw .cannotOpen(path: description, reason: "\(error)")
        }
        var quiet = logger
        quiet.logLevel = .critical
        let connectLogger = quiet
        let outcome: Result<Void, any Error> = await withTaskGroup(of: Result<Void, any Error>?.self) { group in
            group.addTask {
                do {
                    let connection = try await PostgresConnection.connect(configuration: configuration, id: 0, logger: connectLogger)
                    try? await connection.close()
                    return .success(())
                } catch {
                    return .failure(error)
                }
            }
            group.addTask {
                try? await Task.sleep(for: openTimeout)
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first ?? .failure(StoreError.unavailable(reason: "no answer within \(openTimeout)"))
        }
        if case .failure(let error) = outcome {
            throw .cannotOpen(path: description, reason: describe(error))
        }
    }

    /// Whether the server answers `SELECT 1` within `timeout`. (postgres-nio's pool queues a query while it
    /// cannot connect and fails it only when its circuit breaker trips, after up to a minute: this bounds
    /// the wait.)
    public func isReachable(within timeout: Duration) async -> Bool {
        guard poolSuspect.withLock({ $0 }) else {
            let answers = await Self.answers(client, within: timeout, logger: logger)
            if !answers { poolSuspect.withLock { $0 = true } }
            return answers
        }
        // The pool may still be backing off from the outage: a new pool answers as soon as the server
        // does, and takes the old one's place.
        let fresh = Pool(configuration: configuration, logger: clientLogger)
        guard await Self.answers(fresh.client, within: timeout, logger: logger) else {
            fresh.runner.cancel()
            return false
        }
        let old = pool.withLock { pool in
            let old = pool
            pool = fresh
            return old
        }
        // Operations still running on the old pool finish there (a commit in flight is not cut off).
        Task {
            try? await Task.sleep(for: .seconds(30))
            old.runner.cancel()
        }
        poolSuspect.withLock { $0 = false }
        logger.notice("the database answers again; its connections were opened anew", metadata: ["path": "\(path)"])
        return true
    }

    /// Whether `client` answers `SELECT 1` within `timeout`.
    private static func answers(_ client: PostgresClient, within timeout: Duration, logger: Logger) async -> Bool {
        await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                (try? await client.withConnection { connection in try await connection.rows("SELECT 1", logger: logger) }) != nil
            }
            group.addTask {
                try? await Task.sleep(for: timeout)
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
    }

    // MARK: Running queries

    /// How long an operation waits for a connection of the pool. postgres-nio queues a request while it
    /// cannot connect and fails it only when its circuit breaker trips, after a minute; the gateway must
    /// refuse requests sooner than that when the database is away.
    static let leaseTimeout: Duration = .seconds(5)

    /// The rows of `query`, on a connection of the pool.
    func rows(_ query: PostgresQuery) async throws -> [PostgresRow] {
        let logger = logger
        return try await withConnection { connection in try await connection.rows(query, logger: logger) }
    }

    /// Runs `body` in one transaction (committed when it returns, rolled back when it throws). An error
    /// of `body` is rethrown as it is (a ``RegistryError``, a ``StoreError``), once rolled back.
    func transaction<Result: Sendable>(_ body: @escaping @Sendable (PostgresConnection) async throws -> Result) async throws -> Result {
        let logger = logger
        return try await withConnection { connection in
            do {
                return try await connection.withTransaction(logger: logger) { connection in try await body(connection) }
            } catch let error as PostgresTransactionError {
                if let thrown = error.closureError, error.rollbackError == nil { throw thrown }
                throw error
            }
        }
    }

    /// Runs `body` on a connection of the pool, or throws ``StoreError/unavailable(reason:)`` when none is
    /// leased within ``leaseTimeout``. The deadline covers only the wait for a connection: once `body`
    /// runs it is never abandoned (a transaction cut off by a timer might have committed).
    func withConnection<Result: Sendable>(_ body: @escaping @Sendable (PostgresConnection) async throws -> Result) async throws -> Result {
        let client = client
        let lease = Lease()
        return try await withThrowingTaskGroup(of: Result?.self) { group in
            group.addTask {
                try await client.withConnection { connection in
                    let granted = lease.state.withLock { state in
                        guard state == .waiting else { return false }
                        state = .leased
                        return true
                    }
                    guard granted else { throw StoreError.unavailable(reason: "no database connection within \(Self.leaseTimeout)") }
                    return try await body(connection)
                }
            }
            group.addTask {
                try await Task.sleep(for: Self.leaseTimeout)
                let expired = lease.state.withLock { state in
                    guard state == .waiting else { return false }
                    state = .timedOut
                    return true
                }
                if expired {
                    self.poolSuspect.withLock { $0 = true }
                    throw StoreError.unavailable(reason: "no database connection within \(Self.leaseTimeout)")
                }
                return nil  // leased in time: the operation's own result decides
            }
            while let next = try await group.next() {
                if let result = next {
                    group.cancelAll()
                    return result
                }
            }
            throw StoreError.unavailable(reason: "the database operation ended without a result")
        }
    }

    private enum LeaseState { case waiting, leased, timedOut }

    /// Whether an operation got its connection before its deadline (shared by the two racing tasks).
    private final class Lease: Sendable {
        let state = Mutex(LeaseState.waiting)
    }
}

extension PostgresConnection {
    /// The rows of `query`, collected on the connection's event loop: the one way the store reads rows.
    ///
    /// Never through postgres-nio's `PostgresRowSequence` (the async `query(_:logger:)` and `execute(_:)`):
    /// that sequence withdraws its demand after every batch of rows it hands on (1.33.2's
    /// `AdaptiveRowBuffer.didYield` always answers "stop producing") until the consuming task asks for the
    /// next row. A result longer than one socket read then waits in the row stream's `waitingForDemand`
    /// state, and when the server goes away in that moment (a crash, `pg_ctl stop -m immediate`) NIO delivers
    /// the end of file with a `channelReadComplete` that the row stream does not expect:
    /// `RowStreamStateMachine.channelReadComplete` stops the process with a precondition failure ("How can we
    /// receive a body part, after a channelReadComplete, but no read has been forwarded yet"). The newest
    /// upstream source has the same precondition. The EventLoopFuture API collects with `all()`, which
    /// asks for more rows in the same event-loop turn as it receives them, so the stream is never left
    /// without demand and that state is never reached. The prepared ledger statement (``LedgerStatement``)
    /// is the one exception, and it answers no rows unless its fence failed (see there).
    func rows(_ query: PostgresQuery, logger: Logger) async throws -> [PostgresRow] {
        let result: EventLoopFuture<PostgresQueryResult> = self.query(query, logger: logger)
        return try await result.get().rows
    }

    /// Runs `query` for its effect, discarding its rows (through ``rows(_:logger:)``, for the same reason).
    func run(_ query: PostgresQuery, logger: Logger) async throws {
        _ = try await rows(query, logger: logger)
    }
}
