import GRDB
import GRDBSQLite
public import ReloadGateCore

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
        let wait = Int32(clamping: Self.pruneLockWait.milliseconds)
        let deadline = Int32(clamping: self.deadline.milliseconds)
        return try await writeOrUnavailable {
            try await writer.writeWithoutTransaction { db in
                sqlite3_busy_timeout(db.sqliteConnection, wait)
                defer { sqlite3_busy_timeout(db.sqliteConnection, deadline) }
                return try body(db)
            }
        }
    }

    static func prune(_ step: LedgerPruneStep, in db: Database) throws -> LedgerPruned {
        var pruned = LedgerPruned()
        let window = try Int64.fetchAll(db, sql: "SELECT id FROM request ORDER BY id LIMIT ?", arguments: [step.limit])
        if let first = window.first, let last = window.last {
            // The rows to delete, for the span; their decisions go with them (foreign keys cascade).
            let condition = "id BETWEEN ?1 AND ?2 AND receivedAt < ?3 AND (answerExpiresAt IS NULL OR answerExpiresAt <= ?4)"
            let arguments: StatementArguments = [first, last, step.receivedBefore.milliseconds, step.now.milliseconds]
            let bounds = try Row.fetchOne(db, sql: "SELECT COUNT(*), MIN(id), MAX(id) FROM request WHERE \(condition)", arguments: arguments)
            if let bounds, let count = bounds[0] as Int?, count > 0, let low = bounds[1] as Int64?, let high = bounds[2] as Int64? {
                try db.execute(sql: "DELETE FROM request WHERE \(condition)", arguments: arguments)
                pruned.requests = count
                try recordSpan(first: low, last: high, step: step, in: db)
            }
            pruned.more = pruned.requests == step.limit
        }
        try db.execute(
            sql: """
                DELETE FROM delivery WHERE rowid IN (
                    SELECT rowid FROM delivery WHERE releasedAt < ? AND state IN (\(LedgerPruneStep.finishedStatesSQL)) ORDER BY releasedAt LIMIT ?)
                """,
            arguments: [step.receivedBefore.milliseconds, step.limit]
        )
        pruned.deliveries = db.changesCount
        pruned.more = pruned.more || pruned.deliveries == step.limit
        return pruned
    }

    /// Adds the step's requests to the newest span when it began within ``PrunedSpan/joinWithin``, else
    /// starts a span (and drops the oldest past ``PrunedSpan/kept``).
    private static func recordSpan(first: Int64, last: Int64, step: LedgerPruneStep, in db: Database) throws {
        let now = step.now.milliseconds
        let before = step.receivedBefore.milliseconds
        if let latest = try Self.span(Row.fetchOne(db, sql: "SELECT * FROM ledger_prune ORDER BY until DESC LIMIT 1")),
            latest.takes(first: first, at: now)
        {
            try db.execute(
                sql: """
                    UPDATE ledger_prune SET lastRequest = MAX(lastRequest, ?), receivedBefore = MAX(receivedBefore, ?), until = ?
                    WHERE firstRequest = ?
                    """,
                arguments: [last, before, now, latest.firstRequest]
            )
            return
        }
        try db.execute(
            sql: "INSERT INTO ledger_prune (firstRequest, lastRequest, receivedBefore, since, until) VALUES (?, ?, ?, ?, ?)",
            arguments: [first, last, before, now, now]
        )
        try db.execute(
            sql: """
                DELETE FROM ledger_prune WHERE firstRequest IN (
                    SELECT firstRequest FROM ledger_prune ORDER BY since DESC LIMIT -1 OFFSET ?)
                """,
            arguments: [PrunedSpan.kept]
        )
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

    /// A row of `ledger_prune` as a span.
    private static func span(_ row: Row?) -> PrunedSpan? {
        row.map {
            PrunedSpan(
                firstRequest: $0["firstRequest"], lastRequest: $0["lastRequest"],
                receivedBefore: Timestamp(milliseconds: $0["receivedBefore"]),
                since: Timestamp(milliseconds: $0["since"]), until: Timestamp(milliseconds: $0["until"])
            )
        }
    }

    /// What pruning deleted: the span of `request` (when one kept covers it), the newest and the oldest.
    public func ledgerPruning(request: Int64?) async throws -> LedgerPruning {
        try await writer.read { db in
            let covering = try request.flatMap { id in
                try Self.span(Row.fetchOne(
                    db,
                    sql: "SELECT * FROM ledger_prune WHERE firstRequest <= ?1 AND lastRequest >= ?1 ORDER BY firstRequest DESC LIMIT 1",
                    arguments: [id]
                ))
            }
            return LedgerPruning(
                span: covering,
                latest: try Self.span(Row.fetchOne(db, sql: "SELECT * FROM ledger_prune ORDER BY until DESC LIMIT 1")),
                oldest: try Self.span(Row.fetchOne(db, sql: "SELECT * FROM ledger_prune ORDER BY since LIMIT 1"))
            )
        }
    }
}
