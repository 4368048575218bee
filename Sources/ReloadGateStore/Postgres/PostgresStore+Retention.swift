import Logging
import PostgresNIO
import ReloadGateCore

extension PostgresStore {
    /// The advisory lock a pruning step holds for its transaction ("RLGP" in ASCII): one gateway of
    /// several prunes at a time, the others skip the step instead of deleting the same rows.
    static let pruneLock: Int64 = 0x524C_4750

    /// Deletes one step of what is past retention (``LedgerPruneStep``) in one transaction under
    /// ``pruneLock``, the rule of ``SQLiteStore/pruneLedger(_:)``: requests from the first `limit` by id,
    /// their decisions with them (deleted here: the ledger has no foreign keys on PostgreSQL), deliveries
    /// oldest first. Space is reused by
    /// PostgreSQL's autovacuum (docs/DECISIONS.md, "The ledger is kept for a time").
    public func pruneLedger(_ step: LedgerPruneStep) async throws -> LedgerPruned {
        guard step.limit > 0 else { return LedgerPruned() }
        let logger = logger
        let limit = Int64(step.limit)
        let before = step.receivedBefore.milliseconds
        let now = step.now.milliseconds
        return try await transaction { connection in
            var pruned = LedgerPruned()
            guard try await connection.rows("SELECT pg_try_advisory_xact_lock(\(Self.pruneLock))", logger: logger)
                .first?.decode(Bool.self) == true
            else {
                pruned.skipped = true
                return pruned
            }
            let requests = try await connection.rows(
                """
                WITH window_ AS (SELECT id FROM request ORDER BY id LIMIT \(limit)),
                gone AS (DELETE FROM request WHERE id IN (SELECT id FROM window_) AND receivedAt < \(before) RETURNING id),
                decisions AS (DELETE FROM decision_run WHERE requestId IN (SELECT id FROM gone))
                SELECT count(*), min(id), max(id), (SELECT count(*) FROM window_) FROM gone
                """,
                logger: logger
            ).first!.decode((Int64, Int64?, Int64?, Int64).self)
            pruned.requests = Int(requests.0)
            pruned.more = requests.0 == limit
            if let low = requests.1, let high = requests.2 {
                try await Self.recordSpan(first: low, last: high, before: before, now: now, on: connection, logger: logger)
            }
            let deliveries = try await connection.rows(
                """
                WITH gone AS (DELETE FROM delivery WHERE apnsId IN (
                    SELECT apnsId FROM delivery WHERE releasedAt < \(before) AND state IN (\(unescaped: LedgerPruneStep.finishedStatesSQL))
                    ORDER BY releasedAt LIMIT \(limit)) RETURNING 1)
                SELECT count(*) FROM gone
                """,
                logger: logger
            ).first!.decode(Int64.self)
            pruned.deliveries = Int(deliveries)
            pruned.more = pruned.more || deliveries == limit
            return pruned
        }
    }

    /// The newest span grows when it takes the step (``PrunedSpan/takes(first:at:)``), else a span starts.
    private static func recordSpan(first: Int64, last: Int64, before: Int64, now: Int64, on connection: PostgresConnection, logger: Logger) async throws {
        if let latest = try span(try await connection.rows(
            "SELECT \(unescaped: spanColumns) FROM ledger_prune ORDER BY until DESC LIMIT 1", logger: logger
        ).first) {
            let latestFirst = latest.firstRequest
            if latest.takes(first: first, at: now) {
                _ = try await connection.rows(
                    """
                    UPDATE ledger_prune SET lastRequest = greatest(lastRequest, \(last)),
                        receivedBefore = greatest(receivedBefore, \(before)), until = \(now)
                    WHERE firstRequest = \(latestFirst)
                    """,
                    logger: logger
                )
                return
            }
        }
        _ = try await connection.rows(
            "INSERT INTO ledger_prune (firstRequest, lastRequest, receivedBefore, since, until) VALUES (\(first), \(last), \(before), \(now), \(now))",
            logger: logger
        )
        _ = try await connection.rows(
            """
            DELETE FROM ledger_prune WHERE firstRequest IN (
                SELECT firstRequest FROM ledger_prune ORDER BY since DESC OFFSET \(Int64(PrunedSpan.kept)))
            """,
            logger: logger
        )
    }

    /// The columns of `ledger_prune`, in the order ``span(_:)`` reads them.
    static let spanColumns = "firstRequest, lastRequest, receivedBefore, since, until"

    /// A row of `ledger_prune` (``spanColumns``) as a span.
    static func span(_ row: PostgresRow?) throws -> PrunedSpan? {
        guard let row else { return nil }
        let (first, last, before, since, until) = try row.decode((Int64, Int64, Int64, Int64, Int64).self)
        return PrunedSpan(
            firstRequest: first, lastRequest: last, receivedBefore: Timestamp(milliseconds: before),
            since: Timestamp(milliseconds: since), until: Timestamp(milliseconds: until)
        )
    }

    public func ledgerPruning(request: Int64?) async throws -> LedgerPruning {
        let columns = Self.spanColumns
        var covering: PrunedSpan?
        if let request {
            covering = try Self.span(try await rows(
                """
                SELECT \(unescaped: columns) FROM ledger_prune WHERE firstRequest <= \(request) AND lastRequest >= \(request)
                ORDER BY firstRequest DESC LIMIT 1
                """
            ).first)
        }
        return LedgerPruning(
            span: covering,
            latest: try Self.span(try await rows("SELECT \(unescaped: columns) FROM ledger_prune ORDER BY until DESC LIMIT 1").first),
            oldest: try Self.span(try await rows("SELECT \(unescaped: columns) FROM ledger_prune ORDER BY since LIMIT 1").first)
        )
    }
}
