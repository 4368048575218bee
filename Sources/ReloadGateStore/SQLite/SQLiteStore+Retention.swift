import GRDB
import ReloadGateCore

extension SQLiteStore {
    /// Deletes one step of what is past retention (``LedgerPruneStep``) in one write transaction, then
    /// gives free pages back to the file system past a slack (``releasePages(in:)``).
    ///
    /// Requests are taken in id order from the first `limit` rows: a young row among them (received
    /// after the bound, or keeping a live answer) stays and is looked at again by the next step, so a step
    /// never scans further than its limit.
    ///
    /// The group commits wait behind a step on the store's writer: a step waits for another process's
    /// write lock ``pruneLockWait`` at most, not the store's deadline, and throws
    /// ``StoreError/unavailable(reason:)`` past it (the pruning tries again later).
    public func pruneLedger(_ step: LedgerPruneStep) async throws -> LedgerPruned {
        guard step.limit > 0 else { return LedgerPruned() }
        var pruned = try await writeWithShortWait { db in
            var result = LedgerPruned()
            try db.inTransaction(.immediate) {
                result = try Self.prune(step, in: db)
                return .commit
            }
            return result
        }
        pruned.pagesReleased = try await writeWithShortWait { db in try Self.releasePages(in: db) }
        return pruned
    }

    /// How long a pruning step waits for another process's write lock.
    static let pruneLockWait: Duration = .milliseconds(100)

    /// Runs `body` on the writer outside a transaction, waiting for another process's lock
    /// ``pruneLockWait`` at most.
    private func writeWithShortWait<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        let deadline = self.deadline
        return try await writeOrUnavailable {
            try await writer.writeWithoutTransaction { db in
                try db.waitingForLocks(Self.pruneLockWait, thenBack: deadline) { try body(db) }
            }
        }
    }

    static func prune(_ step: LedgerPruneStep, in db: Database) throws -> LedgerPruned {
        try SQLiteSession.run(db) { session in
            var pruned = LedgerPruned()
            let window = try await session.rows("SELECT id FROM request ORDER BY id LIMIT \(Int64(step.limit))").map { try $0.int64("id") }
            if let first = window.first, let last = window.last {
                // The rows to delete, for the span; their decisions go with them (foreign keys cascade). A
                // request whose row keeps a live answer to a retried apns-id stays.
                let condition: SQLQuery = """
                    id BETWEEN \(first) AND \(last) AND receivedAt < \(step.receivedBefore.milliseconds)
                    AND (answerExpiresAt IS NULL OR answerExpiresAt <= \(step.now.milliseconds))
                    """
                let gone = try await session.row("SELECT COUNT(*) AS count, MIN(id) AS low, MAX(id) AS high FROM request WHERE \(condition)")
                if let gone, try gone.int("count") > 0, let low = try gone.optionalInt64("low"), let high = try gone.optionalInt64("high") {
                    try await session.run("DELETE FROM request WHERE \(condition)")
                    pruned.requests = try gone.int("count")
                    try await session.recordPrunedSpan(first: low, last: high, step: step)
                }
                pruned.more = pruned.requests == step.limit
            }
            pruned.deliveries = try await session.pruneDeliveries(step)
            pruned.more = pruned.more || pruned.deliveries == step.limit
            return pruned
        }
    }

    /// Free pages the file keeps for the next commits: an eighth of it, and at least this many.
    static let keptFreePages = 1024
    /// Pages given back in one step at most (4 MiB of 4 KiB pages): the next step gives more.
    static let releasedPagesPerStep = 1024

    /// Gives free pages beyond a slack back to the file system (`PRAGMA incremental_vacuum`), in a file
    /// created with `auto_vacuum = INCREMENTAL`; returns how many. A steady ledger reuses the pages
    /// its pruning frees, so the file stops growing; this shrinks it when the ledger shrinks (a shorter
    /// retention, a burst gone by).
    static func releasePages(in db: Database) throws -> Int {
        guard try Int.fetchOne(db, sql: "PRAGMA auto_vacuum") == 2 else { return 0 }
        let free = try Int.fetchOne(db, sql: "PRAGMA freelist_count") ?? 0
        let pages = try Int.fetchOne(db, sql: "PRAGMA page_count") ?? 0
        let excess = free - max(keptFreePages, pages / 8)
        guard excess > 0 else { return 0 }
        let released = min(excess, releasedPagesPerStep)
        try db.execute(sql: "PRAGMA incremental_vacuum(\(released))")
        return released
    }
}
