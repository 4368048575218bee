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
        // A stopping gateway does not wait for a step (which may wait for a lock until the deadline): its
        // outcome is no one's answer, and whatever it did not commit the next step deletes.
        return try await transaction(leftWhenCancelled: true) { connection in
            var pruned = LedgerPruned()
            guard try await connection.rows("SELECT pg_try_advisory_xact_lock(\(Self.pruneLock)) AS locked", logger: logger)
                .first?.value("locked", as: Bool.self) == true
            else {
                pruned.skipped = true
                return pruned
            }
            let requests = try await connection.rows(
                """
                WITH window_ AS (SELECT id FROM request ORDER BY id LIMIT \(limit)),
                gone AS (DELETE FROM request WHERE id IN (SELECT id FROM window_) AND receivedAt < \(before) RETURNING id),
                decisions AS (DELETE FROM decision_run WHERE requestId IN (SELECT id FROM gone))
                SELECT count(*) AS pruned, min(id) AS low, max(id) AS high FROM gone
                """,
                logger: logger
            ).first!
            let count = try requests.value("pruned", as: Int64.self)
            pruned.requests = Int(count)
            pruned.more = count == limit
            let session = PostgresSession(connection: connection, logger: logger)
            if let low = try requests.value("low", as: Int64?.self), let high = try requests.value("high", as: Int64?.self) {
                try await session.recordPrunedSpan(first: low, last: high, step: step)
            }
            let deliveries = try await session.pruneDeliveries(step)
            pruned.deliveries = deliveries
            pruned.more = pruned.more || deliveries == step.limit
            return pruned
        }
    }
}
