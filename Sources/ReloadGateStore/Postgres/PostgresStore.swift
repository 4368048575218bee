import Foundation
public import Logging
import NIOPosix
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
    /// How long one operation may take on the database (`store.deadline`): the server's
    /// `statement_timeout` and `lock_timeout` of the pool's connections; the client closes a connection
    /// that has not answered a second after it.
    public let deadline: Duration
    /// The deadline of reads that may scan whole tables (loading partitions, the dashboard, export).
    public static let readDeadline: Duration = .seconds(300)
    /// `store.deadline`'s default.
    public static let defaultDeadline: Duration = .seconds(5)
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

    /// The event loop every connection of the store runs on (the pool's, the LISTEN connection's, the
    /// reachability probe's): a thread of its own, not one of the loops that serve the gateway's HTTP/2
    /// connections (postgres-nio's default is NIO's shared group, which the listeners use too). On a busy
    /// gateway those loops are seldom idle, and a group commit's answer would wait behind their TLS and
    /// HTTP/2 work before the commit loop learns of it (decision 0108 has the figures). One thread: the
    /// store's connections mostly wait for the server. Never shut down, like NIO's shared group: it serves
    /// every store the process opens.
    static let connectionLoops = MultiThreadedEventLoopGroup(numberOfThreads: 1)

    /// A postgres-nio client and the task running it.
    private struct Pool: Sendable {
        var client: PostgresClient
        var runner: Task<Void, Never>

        init(configuration: PostgresClient.Configuration, logger: Logger) {
            let client = PostgresClient(configuration: configuration, eventLoopGroup: PostgresStore.connectionLoops, backgroundLogger: logger)
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
        deadline: Duration = PostgresStore.defaultDeadline,
        logger: Logger
    ) async throws(StoreError) {
        let description = location.description
        var configuration: PostgresClient.Configuration
        do {
            configuration = try location.clientConfiguration()
        } catch {
            throw .cannotOpen(path: description, reason: "\(error)")
        }
        // The server holds every statement of the pool's connections to the deadline too: past it (a lock
        // held by a migration, a slow disk) it cancels the statement and rolls the transaction back, so a
        // request refused for it is never committed later. A transaction left idle (a client gone) ends
        // soon after.
        let milliseconds = deadline.milliseconds
        configuration.options.additionalStartupParameters = [
            ("statement_timeout", "\(milliseconds)"), ("lock_timeout", "\(milliseconds)"),
            ("idle_in_transaction_session_timeout", "\(2 * milliseconds + 1000)"),
        ]
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
        let durability = try await Self.checkConnection(location, description: description, logger: logger)
        // An answer is sent only after its commit, and a commit must survive the server's crash: with
        // `synchronous_commit = off` (the server's, the database's or the role's default) PostgreSQL answers
        // a commit before its WAL is flushed. The store's sessions set it `on` then; any other value
        // (`local`, `remote_write`, `on`, `remote_apply`) flushes the WAL first and is left as the operator
        // chose it. `fsync = off` no session can change: it is said at start (decision 0119).
        if let parameter = Self.durabilityParameter(durability) {
            configuration.options.additionalStartupParameters.append(parameter)
        }
        for (level, message) in durability.said {
            logger.log(level: level, message, metadata: ["store": "\(description)"])
        }
        // postgres-nio warns at `warning` when a query waits for `run()` to start (as the first one here
        // does, harmlessly); its errors still show, and every failed query throws to its caller.
        var clientLogger = logger
        clientLogger.logLevel = max(logger.logLevel, .error)
        let pool = Pool(configuration: configuration, logger: clientLogger)
        let client = pool.client
        let runner = pool.runner
        let stored: DeploymentEnvironment
        do {
            // Bounded: the pool waits for a connection as long as its reconnection backoff lasts (a server
            // that refuses connections, all of them taken), and a start must end with an answer.
            stored = try await Self.within(Self.migrationTimeout, doing: "opening the store") {
            try await Self.migrate(client, logger: logger)
            return try await client.withConnection { connection in try await connection.inTransaction(logger: logger) { connection in
                _ = try await connection.rows(
                    """
                    INSERT INTO store_info (key, value) VALUES ('environment', \(environment.rawValue)),
                        ('createdAt', \(String(now.storedMilliseconds))) ON CONFLICT (key) DO NOTHING
                    """,
                    logger: logger
                )
                let rows = try await connection.rows("SELECT value FROM store_info WHERE key = 'environment'", logger: logger)
                guard let text = try rows.first?.value("value", as: String.self), let stored = DeploymentEnvironment(rawValue: text) else {
                    throw StoreError.corrupt(reason: "store_info lacks a valid environment")
                }
                guard stored == environment else { return stored }
                guard try await Self.checkSecretsKey(sealer, on: connection, logger: logger) else {
                    throw StoreError.secretsKeyMismatch(directory: URL(fileURLWithPath: secretsDirectory).standardizedFileURL.path)
                }
                return stored
            } }
            }
        } catch {
            runner.cancel()
            if case .secretsKeyMismatch(let directory) = error as? StoreError {
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
        self.deadline = deadline
        self.logger = logger
        self.sealer = sealer
        self.pool = Mutex(pool)
        self.configuration = configuration
        self.clientLogger = clientLogger
        self.location = location
    }

    /// The startup parameter the store's sessions add for ``Durability``: `synchronous_commit = on` where
    /// the server would give them `off`, else none.
    static func durabilityParameter(_ durability: Durability) -> (String, String)? {
        durability.synchronousCommit == "off" ? ("synchronous_commit", "on") : nil
    }

    /// Whether `sealer`'s key is the one the store's secrets were sealed with (as ``StoreInfo`` checks it
    /// for SQLite): the check value opens with it, or (a store from before the check) the first app's
    /// webhook secret does. A store without a check value gets this key's.
    private static func checkSecretsKey(_ sealer: SecretSealer, on connection: PostgresConnection, logger: Logger) async throws -> Bool {
        if let row = try await connection.rows("SELECT value FROM store_info WHERE key = 'secretsCheck'", logger: logger).first {
            return sealer.opens(checkValue: try row.value("value", as: String.self))
        }
        if let row = try await connection.rows("SELECT webhookSecret FROM app ORDER BY id LIMIT 1", logger: logger).first {
            let sealed = try row.value("webhookSecret", as: ByteBuffer.self)
            if sealer.opens(Data(sealed.readableBytesView)) == false { return false }
        }
        try await connection.run(
            "INSERT INTO store_info (key, value) VALUES ('secretsCheck', \(try sealer.checkValue())) ON CONFLICT (key) DO NOTHING",
            logger: logger
        )
        // Two gateways with different keys starting at once: the one whose value was not kept finds out here.
        let kept = try await connection.rows("SELECT value FROM store_info WHERE key = 'secretsCheck'", logger: logger).first
        return try kept.map { sealer.opens(checkValue: try $0.value("value", as: String.self)) } ?? false
    }

    /// Closes the connections (in the background: queries still running fail).
    public func close() throws {
        pool.withLock { $0.runner.cancel() }
    }

    /// A PostgreSQL error as one line: the server's message and detail when there is one, with its SQLSTATE
    /// (the same in every language the server speaks: an operator can look it up, a test can match it), else
    /// the connection's error.
    static func describe(_ error: any Error) -> String {
        if let error = error as? PSQLError {
            if let message = error.serverInfo?[.message] {
                let detail = error.serverInfo?[.detail].map { " (\($0))" } ?? ""
                return message + detail + (error.serverInfo?[.sqlState].map(stateMark) ?? "")
            }
            if let underlying = error.underlying { return "\(error.code): \(underlying)" }
            return "\(error.code)"
        }
        return "\(error)"
    }

    /// How ``describe(_:)`` ends a server error's line: ` [SQLSTATE 25P03]`.
    static func stateMark(_ code: String) -> String { " [SQLSTATE \(code)]" }

    /// How long opening the store waits for the server to answer.
    static let openTimeout: Duration = .seconds(10)
    /// How long opening the store may take with its migrations (a gateway starting while another migrates
    /// waits for it).
    static let migrationTimeout: Duration = .seconds(120)

    /// `body`'s result, or ``StoreError/unavailable(reason:)`` when it has none within `timeout`.
    static func within<T: Sendable>(_ timeout: Duration, doing what: String, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
        try await abandoning(after: timeout, timedOut: {
            StoreError.unavailable(reason: "no answer from the database within \(timeout) while \(what)")
        }, body)
    }

    /// What a session of the store gets from the server, read when the store opens, about whether a commit
    /// reaches the disk before its answer.
    struct Durability: Sendable {
        /// `synchronous_commit` as the server gives it to a session of this role and database.
        var synchronousCommit: String
        /// `fsync` (the server's own: no session can change it).
        var fsync: String

        /// What the store logs of these settings when it opens: a notice when its sessions raise
        /// `synchronous_commit` (``PostgresStore/durabilityParameter(_:)``), a warning for `fsync = off`.
        var said: [(Logger.Level, Logger.Message)] {
            var lines: [(Logger.Level, Logger.Message)] = []
            if PostgresStore.durabilityParameter(self) != nil {
                lines.append((.notice, "the database commits without waiting for its WAL (synchronous_commit = off): the gateway's sessions set it on"))
            }
            if fsync == "off" {
                lines.append((.warning, "the database server runs with fsync = off: a crash of its machine can lose answered requests and corrupt the database"))
            }
            return lines
        }
    }

    /// Connects once (within ``openTimeout``), reads the sessions' ``Durability`` and closes again, or
    /// throws why it could not.
    private static func checkConnection(_ location: PostgresLocation, description: String, logger: Logger) async throws(StoreError) -> Durability {
        let configuration: PostgresConnection.Configuration
        do {
            configuration = try location.connectionConfiguration()
        } catch {
            throw .cannotOpen(path: description, reason: "\(error)")
        }
        var quiet = logger
        quiet.logLevel = .critical
        let connectLogger = quiet
        let outcome: Result<Durability, any Error>
        do {
            outcome = .success(try await abandoning(after: openTimeout, timedOut: { StoreError.unavailable(reason: "no answer within \(openTimeout)") }) {
                let connection = try await PostgresConnection.connect(
                    on: PostgresStore.connectionLoops.next(), configuration: configuration, id: 0, logger: connectLogger
                )
                do {
                    let row = try await connection.rows(
                        "SELECT current_setting('synchronous_commit') AS commits, current_setting('fsync') AS fsync", logger: connectLogger
                    ).first
                    try? await connection.close()
                    return Durability(
                        synchronousCommit: try row?.value("commits", as: String.self) ?? "",
                        fsync: try row?.value("fsync", as: String.self) ?? ""
                    )
                } catch {
                    try? await connection.close()
                    throw error
                }
            })
        } catch {
            outcome = .failure(error)
        }
        switch outcome {
        case .success(let durability): return durability
        case .failure(let error): throw .cannotOpen(path: description, reason: describe(error))
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

    /// Takes, and gives back at once, the locks a group commit takes on the ledger's tables (`ROW
    /// EXCLUSIVE`, what an `INSERT` or `UPDATE` takes): a table locked by a migration (`ACCESS EXCLUSIVE`)
    /// or a dump in `SHARE` mode fails it within `timeout`. Nothing is written.
    public func commitProbe(within timeout: Duration) async -> String? {
        guard await isReachable(within: timeout) else { return "the database does not answer within \(timeout)" }
        let logger = logger
        let milliseconds = max(1, timeout.milliseconds)
        do {
            // Nothing is written: a cancelled caller (a stopping gateway) does not wait for it.
            try await transaction(leftWhenCancelled: true) { connection in
                try await connection.run("SET LOCAL lock_timeout = \(unescaped: String(milliseconds))", logger: logger)
                try await connection.run(
                    """
                    LOCK TABLE request, decision_run, instance_state, pending_reload, pending_list, delivery, inbox, device, widget
                    IN ROW EXCLUSIVE MODE
                    """,
                    logger: logger
                )
            }
            return nil
        } catch {
            let translated = Self.translate(error, overran: false, limit: timeout)
            if let error = translated as? StoreError, error.isStoreAway {
                return "a table of the ledger stays locked (\(Self.describe(error)))"
            }
            return Self.describe(translated)
        }
    }

    /// Whether `client` answers `SELECT 1` within `timeout`.
    private static func answers(_ client: PostgresClient, within timeout: Duration, logger: Logger) async -> Bool {
        (try? await abandoning(after: timeout, timedOut: { CancellationError() }) {
            try await client.withConnection { connection in _ = try await connection.rows("SELECT 1", logger: logger) }
        }) != nil
    }

    // MARK: Running queries

    /// How long an operation waits for a connection of the pool. postgres-nio queues a request while it
    /// cannot connect and fails it only when its circuit breaker trips, after a minute; the gateway must
    /// refuse requests sooner than that when the database is away.
    static let leaseTimeout: Duration = .seconds(5)

    /// The rows of `query`, on a connection of the pool, within the store's deadline or (a read that may
    /// scan whole tables) within `deadline`.
    func rows(_ query: PostgresQuery, deadline: Duration? = nil) async throws -> [PostgresRow] {
        let logger = logger
        guard let deadline, deadline > self.deadline else {
            return try await withConnection { connection in try await connection.rows(query, logger: logger) }
        }
        return try await withConnection(deadline: deadline) { connection in
            try await connection.inTransaction(logger: logger) { connection in
                try await connection.run("SET LOCAL statement_timeout = \(unescaped: String(deadline.milliseconds))", logger: logger)
                return try await connection.rows(query, logger: logger)
            }
        }
    }

    /// Runs `body` in one transaction (committed when it returns, rolled back when it throws). An error
    /// of `body` is rethrown as it is (a ``RegistryError``, a ``StoreError``), once rolled back.
    /// `leftWhenCancelled`: a cancelled caller stops waiting for `body` at once
    /// (``withConnection(deadline:leftWhenCancelled:_:)``).
    func transaction<Result: Sendable>(
        deadline: Duration? = nil,
        leftWhenCancelled: Bool = false,
        _ body: @escaping @Sendable (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        let logger = logger
        return try await withConnection(deadline: deadline, leftWhenCancelled: leftWhenCancelled) { connection in
            try await connection.inTransaction(logger: logger) { connection in
                if let deadline {
                    try await connection.run("SET LOCAL statement_timeout = \(unescaped: String(deadline.milliseconds))", logger: logger)
                }
                return try await body(connection)
            }
        }
    }

    /// Runs `body` on a connection of the pool, or throws ``StoreError/unavailable(reason:)`` when none is
    /// leased within ``leaseTimeout`` or the server cancels the operation at its deadline, and
    /// ``StoreError/outcomeUnknown(reason:)`` when its connection breaks or is closed under it.
    ///
    /// The deadline (`deadline`, else the store's) is the server's first: it cancels a statement past it
    /// (`statement_timeout`, `lock_timeout`) and rolls the transaction back, which is answered here as the
    /// store being unavailable. A server that does not answer at all (paused, cut off) is the client's: a
    /// second after the deadline the connection is closed, which ends the operation with an error (the
    /// server rolls back what it had not committed). The outcome is always the operation's own: an
    /// operation that committed just before its connection was closed still reports its success.
    ///
    /// Should the race itself not end (an operation that neither its cancellation nor its closed
    /// connection ends), a backstop well past both abandons it: as `unavailable` while it still waited for
    /// a connection, and as ``StoreError/outcomeUnknown(reason:)`` once it had one, since the server may yet
    /// do what it was sent.
    ///
    /// A cancelled caller waits for a write until it ends (its outcome decides what the caller may do
    /// next), but not for an operation `leftWhenCancelled`: a read, which changes nothing (one that scans
    /// has a deadline of minutes, which a stopping gateway must not wait out on a connection that no longer
    /// answers), or a write whose outcome no one needs (a pruning step of the ledger, which the next step
    /// repeats). Its connection is closed then: the server rolls back what was not committed.
    func withConnection<Result: Sendable>(
        deadline: Duration? = nil,
        leftWhenCancelled: Bool = false,
        _ body: @escaping @Sendable (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        let client = client
        let lease = Lease()
        let limit = (deadline ?? self.deadline) + .seconds(1)
        // The race below answers within the lease timeout and the deadline when postgres-nio ends its
        // operations on cancellation; `abandoning` makes it so when it does not (a group waits for its
        // children). A cancelled caller still waits for a write up to then. (A backstop, well past the
        // race's own ends: on a starved machine closing an overrun connection and failing its operation
        // take seconds of their own.)
        let backstop = Self.leaseTimeout + limit * 2 + .seconds(5)
        let logger = logger
        return try await abandoning(after: backstop, timedOut: {
            let error = lease.abandoned(after: backstop)
            logger.error("a database operation was abandoned at the store's backstop", metadata: ["error": "\(error)"])
            return error
        }, returnOnCancel: leftWhenCancelled) {
            // The statements the operation writes are noted on its lease (``rows(_:logger:)``), for the
            // backstop's error to name the last one.
            try await Self.$runningLease.withValue(lease) {
                try await self.raceLeaseAndDeadline(client: client, lease: lease, limit: limit, leftWhenCancelled: leftWhenCancelled, body)
            }
        }
    }

    /// ``withConnection(deadline:leftWhenCancelled:_:)``'s race of the operation with the lease timeout and its deadline.
    ///
    /// The deadline holds even when the race is cancelled (its caller cancelled): postgres-nio does not end
    /// a query on cancellation, so a write whose server stopped answering would otherwise wait, with no one
    /// to close its connection, until the backstop. A cancelled operation `leftWhenCancelled` is not waited
    /// for (``abandoning`` returns at once); its connection is closed then, so that the pool does not keep it
    /// leased for the minutes a scanning read may take.
    private func raceLeaseAndDeadline<Result: Sendable>(
        client: PostgresClient,
        lease: Lease,
        limit: Duration,
        leftWhenCancelled: Bool,
        _ body: @escaping @Sendable (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        try await withThrowingTaskGroup(of: Result?.self) { group in
            group.addTask {
                do {
                    return try await client.withConnection { connection in
                        guard lease.grant(connection) else {
                            throw StoreError.unavailable(reason: "no database connection within \(Self.leaseTimeout)")
                        }
                        defer { lease.finish() }
                        do {
                            return try await body(connection)
                        } catch {
                            // A statement cancelled at the deadline may have been the preparation of the
                            // ledger statement: postgres-nio keeps a failed preparation for the connection's
                            // life and fails every later execution of that statement on it with the same
                            // error (a gateway that never commits again after a lock). Such a connection is
                            // closed; the pool opens another.
                            if Self.passedDeadline(error) { try? await connection.close() }
                            throw error
                        }
                    }
                } catch {
                    throw Self.translate(error, overran: lease.overran, limit: limit, mayHaveCommitted: lease.mayHaveCommitted)
                }
            }
            group.addTask {
                // Cancelled: the operation ended (its result is in), or its caller cancelled.
                let cancelled = (try? await LateTimer.sleep(until: .now.advanced(by: Self.leaseTimeout)) { lease.isWaiting }) == nil
                if lease.expireWaiting() {
                    // No connection yet: none is taken now (nothing was sent).
                    if cancelled { throw CancellationError() }
                    self.poolSuspect.withLock { $0 = true }
                    throw StoreError.unavailable(reason: "no database connection within \(Self.leaseTimeout)")
                }
                if cancelled, leftWhenCancelled, let connection = lease.overrun() {
                    try? await connection.close()
                    return nil
                }
                // Leased: the operation runs until its deadline at most, cancelled or not (and a moment more
                // when the deadline passed while the process was paused: its answer may be in, unread).
                if let leasedAt = lease.leasedAt {
                    let deadline = leasedAt.advanced(by: limit)
                    await lease.waitForEnd(until: deadline)
                    if LateTimer.firedAfterPause(due: deadline), lease.leasedAt != nil {
                        await lease.waitForEnd(until: .now.advanced(by: LateTimer.grace))
                    }
                }
                if let connection = lease.overrun() {
                    self.logger.error(
                        "the database did not answer within the store deadline; its connection was closed",
                        metadata: ["deadline": "\(limit)"]
                    )
                    try? await connection.close()
                }
                return nil  // the operation's own result decides
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

    /// A query not written because its connection was closed (``PostgresConnection/rows(_:logger:)``): what
    /// the operation sent before it may have been done.
    struct ClosedConnection: Error {}

    /// The SQLSTATE of `reloadgate_key_answered_meanwhile` (migration `pg7-idempotency-expiry`).
    static let keyAnsweredMeanwhileState = "RG001"

    /// Whether `error` is the server's cancellation of a statement at the deadline (`statement_timeout`,
    /// `lock_timeout`, `idle_in_transaction_session_timeout`).
    static func passedDeadline(_ error: any Error) -> Bool {
        guard let psql = error as? PSQLError else { return false }
        return ["57014", "55P03", "25P03"].contains(psql.serverInfo?[.sqlState] ?? "")
    }

    /// Whether `error` is the server ending the session under a running statement: an error of severity
    /// `FATAL` or `PANIC`, or of SQLSTATE class 57P (`pg_terminate_backend`, a shutdown, a dropped
    /// database), after which the server closes the connection. The session's open transaction is rolled
    /// back with it, as when the connection breaks.
    static func endedSession(_ psql: PSQLError) -> Bool {
        guard psql.code == .server else { return false }
        let severity = psql.serverInfo?[.severity] ?? ""
        return severity == "FATAL" || severity == "PANIC" || (psql.serverInfo?[.sqlState] ?? "").hasPrefix("57P")
    }

    /// A failed operation's error as the gateway answers it: a statement the server cancelled at the
    /// deadline is the store being unavailable (`503`, nothing committed); a connection closed at the
    /// deadline, or one that broke, leaves the outcome unknown (`503` too: the retry is answered) when
    /// what the operation sent may have committed (`mayHaveCommitted`), and is the store being unavailable
    /// when it cannot have: an operation whose every statement ran in a transaction whose `COMMIT` was
    /// never sent, which the server rolls back when its session ends.
    static func translate(_ error: any Error, overran: Bool, limit: Duration, mayHaveCommitted: Bool = true) -> any Error {
        if error is StoreError || error is RegistryError { return error }
        if let psql = error as? PSQLError, psql.serverInfo?[.sqlState] == keyAnsweredMeanwhileState {
            return StoreError.keyAnsweredMeanwhile(key: psql.serverInfo?[.detail] ?? "")
        }
        if passedDeadline(error), let psql = error as? PSQLError {
            return StoreError.unavailable(reason: "the database did not finish within the store deadline: \(describe(psql))")
        }
        let broken: String
        if overran {
            broken = "the database did not answer within \(limit); the connection was closed"
        } else if error is ClosedConnection {
            broken = "the connection to the database was closed under the operation"
        } else if let psql = error as? PSQLError, [.serverClosedConnection, .uncleanShutdown, .connectionError].contains(psql.code) {
            broken = "the connection to the database broke (\(describe(psql)))"
        } else if let psql = error as? PSQLError, endedSession(psql) {
            broken = "the database ended the session (\(describe(psql)))"
        } else {
            return error
        }
        // The connection broke under the operation: what was sent may have been done, unless nothing sent
        // could commit.
        guard mayHaveCommitted else {
            return StoreError.unavailable(reason: broken + "; nothing was committed: the transaction's COMMIT was never sent")
        }
        return StoreError.outcomeUnknown(reason: broken)
    }

    /// The lease of the operation running in this task (``withConnection(deadline:leftWhenCancelled:_:)``).
    @TaskLocal fileprivate static var runningLease: Lease?

    /// Notes `statement` as the last one the running operation wrote (see ``runningLease``), before it is
    /// written, and what it may commit (``Lease/mayHaveCommitted``).
    static func noteStatement(_ statement: String) {
        guard let lease = runningLease else { return }
        lease.lastStatement.withLock { $0 = statement }
        lease.writes.withLock { $0.note(statement) }
    }

    /// What the statements an operation wrote may have committed, statement by statement: a statement
    /// outside a transaction block commits by itself, one inside commits with the block's `COMMIT`.
    fileprivate enum Writes {
        /// Nothing written yet, or only transactions rolled back.
        case none
        /// In a transaction block (`BEGIN` written) whose `COMMIT` was not written.
        case inTransaction
        /// A `COMMIT`, or a statement outside a transaction block, was written.
        case mayHaveCommitted

        /// `BEGIN`, `COMMIT` and `ROLLBACK` are the texts ``PostgresConnection/inTransaction(logger:_:)``
        /// writes (every transaction of the store runs there). Anything else that could end a block
        /// (`END`, a `COMMIT` spelled otherwise) counts as a commit: the rule errs toward "may have
        /// committed", never toward "nothing was stored".
        mutating func note(_ statement: String) {
            switch (self, statement) {
            case (.mayHaveCommitted, _): return
            case (.none, "BEGIN"): self = .inTransaction
            case (.inTransaction, "ROLLBACK"): self = .none
            case (.inTransaction, "COMMIT"), (.none, _): self = .mayHaveCommitted
            case (.inTransaction, _):
                let first = statement.drop { $0.isWhitespace }.prefix { $0.isLetter }.uppercased()
                if first == "COMMIT" || first == "END" { self = .mayHaveCommitted }
            }
        }
    }

    fileprivate enum LeaseState {
        case waiting
        case leased(PostgresConnection, since: ContinuousClock.Instant)
        case finished
        case overrun
        case timedOut
    }

    /// Where an operation is: waiting for its connection, running on it, or ended (shared by the
    /// operation and its timer).
    fileprivate final class Lease: Sendable {
        let state = Mutex(LeaseState.waiting)
        /// The last statement the operation wrote (its text, without its values).
        let lastStatement = Mutex<String?>(nil)
        /// What the statements written so far may have committed.
        let writes = Mutex(Writes.none)

        /// Whether what the operation wrote may have been committed (see ``Writes``).
        var mayHaveCommitted: Bool {
            writes.withLock { writes in
                if case .mayHaveCommitted = writes { return true }
                return false
            }
        }
        /// The timer's wait for the running operation's end (``waitForEnd(until:)``), resumed once.
        private let endWaiter = Mutex<CheckedContinuation<Void, Never>?>(nil)

        /// The operation got `connection` in time: `false` when the wait had already timed out.
        func grant(_ connection: PostgresConnection) -> Bool {
            state.withLock { state in
                guard case .waiting = state else { return false }
                state = .leased(connection, since: .now)
                return true
            }
        }

        func finish() {
            state.withLock { state in
                if case .leased = state { state = .finished }
            }
            endWaiter.withLock { $0.take() }?.resume()
        }

        /// Returns when the operation is no longer running on its connection, or at `deadline`, whichever
        /// comes first; a cancelled task waits too.
        func waitForEnd(until deadline: ContinuousClock.Instant) async {
            let timer = Task.detached {
                try? await Task.sleep(until: deadline, clock: .continuous)
                self.endWaiter.withLock { $0.take() }?.resume()
            }
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                endWaiter.withLock { $0 = continuation }
                // Ended, or past the deadline, before the wait was in place: `finish()` or the timer found no
                // one to resume.
                if leasedAt == nil || ContinuousClock.now >= deadline { endWaiter.withLock { $0.take() }?.resume() }
            }
            timer.cancel()
        }

        /// Whether the operation still waits for its connection.
        var isWaiting: Bool {
            state.withLock { state in
                if case .waiting = state { return true }
                return false
            }
        }

        /// The wait for a connection timed out (`true`), unless the operation got one.
        func expireWaiting() -> Bool {
            state.withLock { state in
                guard case .waiting = state else { return false }
                state = .timedOut
                return true
            }
        }

        /// When the running operation got its connection; `nil` once it ended.
        var leasedAt: ContinuousClock.Instant? {
            state.withLock { state in
                if case .leased(_, let since) = state { return since }
                return nil
            }
        }

        /// The connection of an operation still running past its deadline (to close), once.
        func overrun() -> PostgresConnection? {
            state.withLock { state in
                guard case .leased(let connection, _) = state else { return nil }
                state = .overrun
                return connection
            }
        }

        var overran: Bool {
            state.withLock { state in
                if case .overrun = state { return true }
                return false
            }
        }

        /// The error of an operation that the backstop abandoned, by where it was then. Still waiting for a
        /// connection, it sent nothing (`unavailable`). Once it had its connection, what it sent may be done
        /// or may still be done by the server (a commit whose answer never came back): `outcomeUnknown`, so
        /// that a write is never answered as not stored when it may be.
        func abandoned(after backstop: Duration) -> StoreError {
            let last = lastStatement.withLock { $0 }.map { statement in
                let line = statement.split(whereSeparator: \.isWhitespace).joined(separator: " ")
                return "; its last statement: " + (line.count > 100 ? line.prefix(100) + "..." : line)
            } ?? ""
            return state.withLock { state in
                switch state {
                case .waiting, .timedOut:
                    .unavailable(reason: "no database connection within \(backstop) (the wait for one did not end)")
                case .leased:
                    .outcomeUnknown(reason: "the database operation did not end within \(backstop) on its connection" + last)
                case .overrun:
                    .outcomeUnknown(
                        reason: "the database operation did not end within \(backstop), though its connection was closed at the deadline" + last
                    )
                case .finished:
                    .outcomeUnknown(reason: "the database operation ended, but its answer did not come back within \(backstop)" + last)
                }
            }
        }
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
    /// without demand and that state is never reached.
    ///
    /// The query is sent from the connection's event loop, and so `all()` is attached to the row stream in
    /// the event-loop turn that creates it. Sent from a task's thread, the collecting callback is attached
    /// in an event-loop task of its own: when the loop handles the first rows of the answer before that
    /// task (a thread preempted under load), they wait for a consumer without demand, the same state. The
    /// prepared ledger statement (``LedgerStatement``) is the one exception, and its answer is one short row
    /// that arrives with its end (see there).
    ///
    /// A query is never written to a closed connection: postgres-nio hands a query to the channel, and on a
    /// channel already closed it reaches no handler and is never answered, so its caller would wait for
    /// the store's backstop (decision 0047). Checked in the event-loop turn that writes the query, where
    /// the channel cannot close in between.
    func rows(_ query: PostgresQuery, logger: Logger) async throws -> [PostgresRow] {
        PostgresStore.noteStatement(query.sql)
        let result: EventLoopFuture<PostgresQueryResult> = eventLoop.flatSubmit {
            guard !self.isClosed else { return self.eventLoop.makeFailedFuture(PostgresStore.ClosedConnection()) }
            return self.query(query, logger: logger)
        }
        return try await result.get().rows
    }

    /// Runs `query` for its effect, discarding its rows (through ``rows(_:logger:)``, for the same reason).
    func run(_ query: PostgresQuery, logger: Logger) async throws {
        _ = try await rows(query, logger: logger)
    }

    /// `body` in one transaction: `BEGIN`, `body`, `COMMIT`, and `ROLLBACK` when `body` throws, unless the
    /// connection is closed by then (the server rolls back what a session had not committed when it
    /// ends). postgres-nio's `withTransaction` writes its `ROLLBACK` whatever the connection's state, and
    /// one written after the connection closed is never answered (``rows(_:logger:)``): closed by the
    /// deadline, or by the server (`idle_in_transaction_session_timeout` while a loaded client is slow
    /// between two statements, a restart). Every transaction of the store, its migrations included, runs
    /// here. `body`'s error is rethrown as it is; a `COMMIT` that fails throws its own.
    /// A connection whose `ROLLBACK` failed is closed, so that the pool does not hand out a session left
    /// in a failed transaction.
    func inTransaction<Result: Sendable>(
        logger: Logger, _ body: (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        try await run("BEGIN", logger: logger)
        let result: Result
        do {
            result = try await body(self)
        } catch {
            if !isClosed {
                do {
                    try await run("ROLLBACK", logger: logger)
                } catch {
                    try? await close()
                }
            }
            throw error
        }
        try await run("COMMIT", logger: logger)
        return result
    }
}

extension PostgresStore: GatewayStore {
    /// Gateways share a PostgreSQL store.
    public var cluster: (any ClusterStore)? { self }

    /// PostgreSQL checkpoints and vacuums by itself.
    public var periodicUpkeep: (@Sendable () throws -> Void)? { nil }
}
