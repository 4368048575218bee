import Foundation
import Logging
import PostgresNIO
import ReloadGateCore
import ReloadGateTesting
import Testing

@testable import ReloadGateStore

/// The ends of a store operation (``PostgresStore/withConnection(deadline:leftWhenCancelled:_:)``). An operation that
/// ends neither when its deadline closes its connection nor when it is cancelled is abandoned at the
/// backstop, and its error says what may have happened: once it had its connection, the server may yet do
/// what it was sent, so the caller must not answer it as not stored. And a cancelled caller's write keeps
/// its deadline.
@Suite(.enabled(if: TestPostgres.isEnabled))
struct PostgresBackstopTests {
    @Test func anOperationAbandonedOnItsConnectionHasAnUnknownOutcome() async throws {
        let directory = try TemporaryDirectory("backstop")
        defer { directory.remove() }
        let logger = {
            var logger = Logger(label: "test")
            logger.logLevel = .critical
            return logger
        }()
        // Migrated first with the tests' generous deadline, as `newStoreThroughProxy` does: the open is not what
        // this asks about.
        let database = try await TestPostgres.newDatabase()
        try await TestPostgres.openStore(url: database, secretsDirectory: directory.path("data")).close()
        // A short deadline keeps the backstop (lease timeout 5 s + 2 x (deadline + 1 s) + 5 s) at 13 s.
        let store = try await PostgresStore(
            location: try PostgresLocation(url: database), secretsDirectory: directory.path("data"),
            environment: .sandbox, now: Date(), deadline: .milliseconds(500), logger: logger
        )
        defer { try? store.close() }
        let (release, releasing) = AsyncStream<Void>.makeStream()
        let (ended, ending) = AsyncStream<Void>.makeStream()
        let started = ContinuousClock.now
        let outcome: (any Error)?
        do {
            try await store.withConnection { connection in
                _ = try await connection.rows("SELECT 1 AS reloadgate_backstop", logger: logger)
                // Deaf to its cancellation and to its connection's close: it waits for the test alone.
                await Task.detached { for await _ in release { break } }.value
                ending.finish()
            }
            outcome = nil
        } catch {
            outcome = error
        }
        let took = ContinuousClock.now - started
        releasing.finish()
        for await _ in ended {}
        guard case .outcomeUnknown(let reason)? = outcome as? StoreError else {
            Issue.record("the abandoned operation's error: \(String(describing: outcome))")
            return
        }
        #expect(took >= .seconds(12) && took < .seconds(40), "abandoned after \(took)")
        // The error names what the operation last wrote, for the log to say which operation it was.
        #expect(reason.hasSuffix("its last statement: SELECT 1 AS reloadgate_backstop"), "\(reason)")
    }

    /// A write whose caller is cancelled is still waited for, and still has its deadline: when the server
    /// stops answering, its connection is closed a second after the deadline and the write ends as an
    /// unknown outcome, not at the backstop.
    @Test func aCancelledWriteKeepsItsDeadlineWhenTheServerStopsAnswering() async throws {
        let directory = try TemporaryDirectory("cancelled-write")
        defer { directory.remove() }
        let (store, proxy) = try await TestPostgres.newStoreThroughProxy(in: directory, deadline: .milliseconds(500))
        defer { Task { await proxy.stop() } }
        defer { try? store.close() }
        let logger = Logger(label: "test")
        // Nothing the server answers comes back from this statement on.
        proxy.swallowReplies(onceClientSends: "reloadgate_cancelled_write")
        let started = ContinuousClock.now
        let write = Task {
            try await store.withConnection { connection in
                _ = try await connection.rows("SELECT 1 AS reloadgate_cancelled_write", logger: logger)
            }
        }
        let reached = try await eventually(within: .seconds(10), every: .milliseconds(20)) { proxy.isSwallowing }
        try #require(reached, "the statement never reached the proxy")
        write.cancel()
        let outcome = await write.result
        let took = ContinuousClock.now - started
        guard case .failure(let error) = outcome, case .outcomeUnknown? = error as? StoreError else {
            Issue.record("the cancelled write's outcome: \(outcome)")
            return
        }
        // Its deadline and the second after it (1.5 s); the backstop would be 13 s.
        #expect(took < .seconds(8), "the cancelled write ended after \(took)")
    }

    /// A pruning step of the ledger is not waited for once its caller is cancelled (a stopping gateway),
    /// though it writes: its outcome is no one's answer, and the next step deletes what it did not. Here it
    /// waits for the `request` table, locked by another session, and its caller is cancelled; a write
    /// waited for would end at the store's deadline (30 s), or at the lock's end.
    @Test func aCancelledPruningStepIsNotWaitedFor() async throws {
        let directory = try TemporaryDirectory("cancelled-prune")
        defer { directory.remove() }
        let url = try await TestPostgres.newDatabase()
        let store = try await TestPostgres.openStore(url: url, secretsDirectory: directory.path("data"))
        defer { try? store.close() }
        let logger = Logger(label: "test")
        let locker = try await PostgresConnection.connect(
            configuration: try PostgresLocation(url: url).connectionConfiguration(), id: 1, logger: logger
        )
        do {
            _ = try await locker.rows("BEGIN", logger: logger)
            _ = try await locker.rows("LOCK TABLE request IN ACCESS EXCLUSIVE MODE", logger: logger)
            let now = Timestamp(Date())
            let step = Task { try await store.pruneLedger(LedgerPruneStep(receivedBefore: now, now: now, limit: 16)) }
            let waiting = try await eventually(within: .seconds(20), every: .milliseconds(20)) {
                (try? await locker.rows(
                    "SELECT 1 FROM pg_stat_activity WHERE pg_backend_pid() = ANY(pg_blocking_pids(pid))", logger: logger
                ).isEmpty == false) ?? false
            }
            try #require(waiting, "the pruning step never waited for the lock")
            let cancelled = ContinuousClock.now
            step.cancel()
            let outcome = await step.result
            let took = cancelled.duration(to: .now)
            _ = try await locker.rows("ROLLBACK", logger: logger)
            if case .success(let pruned) = outcome { Issue.record("the cancelled step pruned: \(pruned)") }
            #expect(took < .seconds(5), "the cancelled pruning step was waited for \(took)")
        } catch {
            try? await locker.close()
            throw error
        }
        try await locker.close()
    }

    /// A transaction whose server stops answering ends a second after its deadline, when its connection
    /// is closed, not at the backstop: once its statement fails, nothing more (the `ROLLBACK` of a
    /// transaction) is written to the closed connection, which postgres-nio would never answer. Its
    /// `COMMIT` was never sent, so nothing of it was committed: the store is unavailable, not the outcome
    /// unknown.
    @Test func aTransactionEndsWhenItsConnectionIsClosedAtTheDeadline() async throws {
        let directory = try TemporaryDirectory("closed-transaction")
        defer { directory.remove() }
        let (store, proxy) = try await TestPostgres.newStoreThroughProxy(in: directory, deadline: .milliseconds(500))
        defer { Task { await proxy.stop() } }
        defer { try? store.close() }
        let logger = Logger(label: "test")
        proxy.swallowReplies(onceClientSends: "reloadgate_closed_transaction")
        let started = ContinuousClock.now
        let outcome: Result<Void, any Error>
        do {
            try await store.transaction { connection in
                _ = try await connection.rows("SELECT 1 AS reloadgate_closed_transaction", logger: logger)
            }
            outcome = .success(())
        } catch {
            outcome = .failure(error)
        }
        let took = ContinuousClock.now - started
        #expect(proxy.isSwallowing, "the statement never reached the proxy")
        guard case .failure(let error) = outcome, case .unavailable(let reason)? = error as? StoreError else {
            Issue.record("the transaction's outcome: \(outcome)")
            return
        }
        #expect(reason.contains("COMMIT was never sent"), "\(reason)")
        // Its deadline and the second after it (1.5 s); the backstop would be 13 s.
        #expect(took < .seconds(8), "the transaction ended after \(took)")
    }

    /// A start whose migration's connection breaks while a statement waits for its answer (the server ends
    /// the session: `idle_in_transaction_session_timeout` with a loaded client slow between two statements,
    /// an administrator, a restart) fails at once. postgres-nio's `withTransaction` writes its `ROLLBACK` to
    /// the closed connection, which is never answered: the start waited for the open's bound of 120 s.
    @Test func aStartWhoseMigrationConnectionBreaksFailsAtOnce() async throws {
        let directory = try TemporaryDirectory("broken-migration")
        defer { directory.remove() }
        let (proxy, proxied) = try await TCPProxy.inFront(of: try await TestPostgres.newDatabase())
        defer { Task { await proxy.stop() } }
        proxy.swallowReplies(onceClientSends: "pg_advisory_xact_lock")
        let opening = Task {
            var quiet = Logger(label: "test")
            quiet.logLevel = .critical
            return try await PostgresStore(
                location: try PostgresLocation(url: proxied), secretsDirectory: directory.path("data"),
                environment: .sandbox, now: Date(), deadline: .seconds(2), logger: quiet
            )
        }
        let asked = try await eventually(within: .seconds(30), every: .milliseconds(20)) { proxy.isSwallowing }
        try #require(asked, "the start's migration never asked for its lock")
        // Every connection is reset under the waiting statement.
        await proxy.heal()
        let broken = ContinuousClock.now
        let outcome = await opening.result
        let took = broken.duration(to: .now)
        if case .success(let store) = outcome { try? store.close() }
        guard case .failure(let error) = outcome, case .cannotOpen? = error as? StoreError else {
            Issue.record("the start's outcome: \(outcome)")
            return
        }
        #expect(took < .seconds(20), "the start ended \(took) after its migration's connection broke")
    }
}
