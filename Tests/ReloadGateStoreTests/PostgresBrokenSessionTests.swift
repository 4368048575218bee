import Foundation
import Logging
import PostgresNIO
import ReloadGateTesting
import Testing

@testable import ReloadGateStore

/// A store operation whose session the server ends under it (an administrator, a restart,
/// `idle_in_transaction_session_timeout` while a paused gateway sat between two statements). What it sent
/// in a transaction whose `COMMIT` was never written cannot have been committed: the store is unavailable
/// (`503`, the engine keeps its state). A statement written outside a transaction block commits by itself,
/// so there the outcome stays unknown (the retry is answered, the engine reloads).
@Suite(.enabled(if: TestPostgres.isEnabled))
struct PostgresBrokenSessionTests {
    static let logger = {
        var logger = Logger(label: "broken-session")
        logger.logLevel = .critical
        return logger
    }()

    /// The store, and a connection of the test's own to end the store's session with.
    static func withStore(_ body: (PostgresStore, PostgresConnection) async throws -> Void) async throws {
        let directory = try TemporaryDirectory("broken-session")
        defer { directory.remove() }
        let url = try await TestPostgres.newDatabase()
        let store = try await TestPostgres.openStore(url: url, secretsDirectory: directory.path("data"))
        defer { try? store.close() }
        let location = try PostgresLocation(url: url)
        let admin = try await PostgresConnection.connect(configuration: try location.connectionConfiguration(), id: 9, logger: logger)
        do {
            _ = try await admin.rows("CREATE TABLE reloadgate_broken (v integer)", logger: logger)
            try await body(store, admin)
        } catch {
            try? await admin.close()
            throw error
        }
        try await admin.close()
    }

    /// Ends the session `pid` and waits until the server no longer lists it.
    static func terminate(_ pid: Int32, by admin: PostgresConnection) async throws {
        _ = try await admin.rows("SELECT pg_terminate_backend(\(pid))", logger: logger)
        let gone = try await eventually(within: .seconds(10), every: .milliseconds(20)) {
            (try? await admin.rows("SELECT 1 FROM pg_stat_activity WHERE pid = \(pid)", logger: logger).isEmpty) ?? false
        }
        try #require(gone, "the session \(pid) did not end")
    }

    /// The store error `operation` ends with (`nil` when it succeeds or fails otherwise, which the tests record).
    static func storeError(of operation: () async throws -> Void) async -> StoreError? {
        do {
            try await operation()
            Issue.record("the operation succeeded")
            return nil
        } catch {
            guard let error = error as? StoreError else {
                Issue.record("the operation's error: \(error)")
                return nil
            }
            return error
        }
    }

    /// Ends the connection's session between two inserts (the second is never written).
    static func breakSession(of connection: PostgresConnection, by admin: PostgresConnection) async throws {
        let pid = try await connection.rows("SELECT pg_backend_pid() AS pid", logger: logger).first!.value("pid", as: Int32.self)
        try await terminate(pid, by: admin)
        _ = try await connection.rows("INSERT INTO reloadgate_broken VALUES (2)", logger: logger)
    }

    /// `error` is an unknown outcome, and the first insert, which committed, is in the table.
    static func expectUnknownWithTheFirstRow(_ error: StoreError?, admin: PostgresConnection) async throws {
        guard case .outcomeUnknown? = error else {
            Issue.record("the operation's error: \(String(describing: error))")
            return
        }
        let count = try await rows(in: admin)
        #expect(count == 1)
    }

    static func rows(in admin: PostgresConnection) async throws -> Int64 {
        try await admin.rows("SELECT count(*)::bigint AS n FROM reloadgate_broken", logger: logger).first!.value("n", as: Int64.self)
    }

    @Test func aTransactionWhoseSessionEndsBeforeItsCommitIsUnavailableAndWroteNothing() async throws {
        try await Self.withStore { store, admin in
            let error = await Self.storeError {
                try await store.transaction { connection in
                    _ = try await connection.rows("INSERT INTO reloadgate_broken VALUES (1)", logger: Self.logger)
                    try await Self.breakSession(of: connection, by: admin)
                }
            }
            guard case .unavailable(let reason)? = error else {
                Issue.record("the transaction's error: \(String(describing: error))")
                return
            }
            #expect(reason.contains("COMMIT was never sent"), "\(reason)")
            let count = try await Self.rows(in: admin)
            #expect(count == 0)
        }
    }

    @Test func aStatementOutsideATransactionLeavesTheOutcomeUnknownWhenItsSessionEnds() async throws {
        try await Self.withStore { store, admin in
            let error = await Self.storeError {
                try await store.withConnection { connection in
                    _ = try await connection.rows("INSERT INTO reloadgate_broken VALUES (1)", logger: Self.logger)
                    try await Self.breakSession(of: connection, by: admin)
                }
            }
            // The first insert committed by itself: answering it as not stored would have been wrong.
            try await Self.expectUnknownWithTheFirstRow(error, admin: admin)
        }
    }

    /// A session ended while its statement runs: the server reports it first as its own error (severity
    /// `FATAL`, SQLSTATE 57P01), which counts as the connection breaking (``PostgresStore/endedSession(_:)``).
    /// After a statement outside a block, the outcome is unknown.
    @Test func aSessionEndedUnderARunningStatementIsABreak() async throws {
        try await Self.withStore { store, admin in
            let error = await Self.storeError {
                try await store.withConnection { connection in
                    _ = try await connection.rows("INSERT INTO reloadgate_broken VALUES (1)", logger: Self.logger)
                    let pid = try await connection.rows("SELECT pg_backend_pid() AS pid", logger: Self.logger).first!.value("pid", as: Int32.self)
                    let ending = Task {
                        _ = try await eventually(within: .seconds(10), every: .milliseconds(20)) {
                            (try? await admin.rows(
                                "SELECT 1 FROM pg_stat_activity WHERE pid = \(pid) AND state = 'active' AND query LIKE 'SELECT pg_sleep%'",
                                logger: Self.logger
                            ).isEmpty == false) ?? false
                        }
                        _ = try await admin.rows("SELECT pg_terminate_backend(\(pid))", logger: Self.logger)
                    }
                    defer { ending.cancel() }
                    _ = try await connection.rows("SELECT pg_sleep(20)", logger: Self.logger)
                }
            }
            try await Self.expectUnknownWithTheFirstRow(error, admin: admin)
        }
    }

    /// A transaction that committed, then a second one on the same connection broken before its `COMMIT`:
    /// the first may be done, so the operation's outcome is unknown.
    @Test func aCommittedTransactionBeforeTheBreakLeavesTheOutcomeUnknown() async throws {
        try await Self.withStore { store, admin in
            let error = await Self.storeError {
                try await store.withConnection { connection in
                    try await connection.inTransaction(logger: Self.logger) { connection in
                        _ = try await connection.rows("INSERT INTO reloadgate_broken VALUES (1)", logger: Self.logger)
                    }
                    try await connection.inTransaction(logger: Self.logger) { connection in
                        try await Self.breakSession(of: connection, by: admin)
                    }
                }
            }
            try await Self.expectUnknownWithTheFirstRow(error, admin: admin)
        }
    }

    /// A block ended by a statement other than the store's own `COMMIT` (`END`) counts as committed: the
    /// rule never says "nothing was stored" of what may be.
    @Test func aBlockEndedOtherwiseLeavesTheOutcomeUnknown() async throws {
        try await Self.withStore { store, admin in
            let error = await Self.storeError {
                try await store.transaction { connection in
                    _ = try await connection.rows("INSERT INTO reloadgate_broken VALUES (1)", logger: Self.logger)
                    _ = try await connection.rows("end", logger: Self.logger)
                    try await Self.breakSession(of: connection, by: admin)
                }
            }
            try await Self.expectUnknownWithTheFirstRow(error, admin: admin)
        }
    }

    /// A server error is described with its SQLSTATE, which is the same whatever language the server
    /// answers in: an operator can look it up, and the test fixture's retry of an open whose session the
    /// idle-in-transaction timeout ended (`TestPostgres.newStoreThroughProxy`, `25P03`) matches it. (That
    /// error itself is not driven here: a session ended while it idled read as a closed connection at its
    /// next statement; the fixture's open met the server's message with a statement on its way.)
    @Test func aServerErrorIsDescribedWithItsState() async throws {
        try await Self.withStore { _, admin in
            var missing: (any Error)?
            do { _ = try await admin.rows("SELECT v FROM reloadgate_missing", logger: Self.logger) } catch { missing = error }
            let text = PostgresStore.describe(try #require(missing))
            #expect(text.contains("reloadgate_missing") && text.hasSuffix(" [SQLSTATE 42P01]"), "\(text)")
        }
    }
}
