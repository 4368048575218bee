import Foundation
import PostgresNIO
import ReloadGateCore

// The group commit on PostgreSQL: a batch is one prepared statement whatever its size. Each column of each
// table travels as one typed array (binary format), unpacked by `unnest`, so a batch costs one round trip,
// no JSON printed or parsed on either side, and no planning once the connection has prepared it.

extension PostgresStore {
    /// Writes a batch in one transaction (the group commit): nothing of it is visible unless all of it is.
    public func commit(_ batch: LedgerBatch) async throws {
        guard !batch.isEmpty else { return }
        try batch.checkNoKeptAnswers()
        let statement = LedgerStatement(batch)
        let logger = logger
        // One statement: atomic by itself (it needs no BEGIN and COMMIT of its own), one round trip, its
        // idempotency keys included. Collected: an error of a statement that returns rows arrives with
        // them, not with the call. A batch large enough to take the server longer than the store's deadline
        // (a fan-out over hundreds of thousands of instances) gets more time, in a transaction of its own
        // that sets it: at the deadline it would fail every time it was sent again.
        let outcome: [LedgerStatement.Row]
        let deadline = Self.commitDeadline(rows: batch.rowCount, deadline: self.deadline)
        if deadline == self.deadline {
            outcome = try await withConnection { connection in try await Self.run(statement, on: connection, logger: logger) }
        } else {
            outcome = try await transaction(deadline: deadline) { connection in try await Self.run(statement, on: connection, logger: logger) }
        }
        guard let fence = statement.fence, let row = outcome.first, !row.ok else { return }
        // Nothing was written. Which partitions the gateway still holds is read apart from the statement, so
        // that the statement's answer stays one short row (see ``LedgerStatement``).
        let held = try await rows("SELECT partition FROM partition_lease WHERE owner = \(fence.gateway) ORDER BY partition")
            .map { Int(try $0.value("partition", as: Int32.self)) }
        throw StoreError.fenced(generation: row.generation ?? 0, held: held)
    }

    /// The rows from which a group commit is given time beyond the store's deadline. A smaller batch (a
    /// turn's pushes, a registration's widgets) runs within the deadline, in one round trip.
    static let largeBatchRows = 20_000

    /// The server's time for one row of a large group commit, allowed beyond the store's deadline: about ten
    /// times what a fan-out's rows took alone on the project's 2-core machine, and twice what 100,000 request
    /// rows took with the whole test suite running beside the database there (decision 0112).
    static let commitTimePerRow: Duration = .microseconds(150)

    /// The deadline of a group commit of `rows` rows: the store's `deadline`, and for a batch of
    /// ``largeBatchRows`` or more, the deadline plus ``commitTimePerRow`` a row (a fan-out over 1,000,000
    /// instances: about 1,500,000 rows, 225 s more). The deadline is there for a server that stopped
    /// answering; a batch PostgreSQL is working through is not one.
    static func commitDeadline(rows: Int, deadline: Duration) -> Duration {
        rows < largeBatchRows ? deadline : deadline + commitTimePerRow * rows
    }

    /// The rows of the ledger statement (its one row).
    ///
    /// The one prepared statement the store runs, and so the one place rows come through postgres-nio's
    /// `PostgresRowSequence` (see ``PostgresConnection/rows(_:logger:)`` for why everything else avoids it).
    /// It is safe here because the answer is one row of two short columns: the server sends it with its
    /// `CommandComplete` in one write, so the row stream ends within the read that brought the row and is
    /// never left waiting for demand when a connection ends.
    static func run(_ statement: LedgerStatement, on connection: PostgresConnection, logger: Logger) async throws -> [LedgerStatement.Row] {
        // Not written to a closed connection, where postgres-nio would never answer it
        // (``PostgresConnection/rows(_:logger:)``). Checked from the task's thread, so a close a moment later
        // may still come first; the store's backstop bounds that.
        guard !connection.isClosed else { throw PostgresStore.ClosedConnection() }
        PostgresStore.noteStatement("the ledger statement (a group commit)")
        var rows: [LedgerStatement.Row] = []
        for try await row in try await connection.execute(statement, logger: logger) { rows.append(row) }
        return rows
    }

    /// Every row of a batch, as one statement of data-modifying CTEs over typed
    /// arrays (one array per column, `unnest` makes the rows). Its text never changes, so each connection
    /// prepares it once; a part with no rows gets empty arrays and writes nothing. The parts touch disjoint
    /// rows (an instance is either deleted or written; foreign keys are checked at the end of the
    /// statement), so the order in which PostgreSQL runs them does not matter.
    ///
    /// Instance states, pending reloads and their lists are updated where they differ and inserted where
    /// absent, not upserted: `ON CONFLICT DO UPDATE` locks every conflicting row, changed or not (a lock is
    /// a WAL record), and most rows of a busy batch are unchanged (a merge changes a pending reload's count,
    /// not the instance's budget, nor a list that is full). Only the owner of an instance's partition
    /// writes it, one commit at a time, so the two halves never race another writer. Each half also names
    /// the instances by `= ANY(<ids>)`, which the join implies: PostgreSQL plans a prepared statement once
    /// for all executions (after five), so a plan made while the tables were small (a new database, before
    /// autovacuum's first `ANALYZE`) would join by reading the whole table on every commit as it grows;
    /// with the list of ids the primary key is used whatever the plan (decision 0109). The rows the
    /// batch's instances already have are counted once a table (`statesStored`, `pendingStored`,
    /// `listsStored`), and the inserting half runs only when fewer were found than the batch has instances.
    /// A busy gateway's batches change known instances; the half unpacked its arrays and joined them for
    /// nothing (decision 0111).
    ///
    /// Fenced (several gateways): every part writes only if the gateway's fence generation is still the
    /// one the batch was decided under (no other gateway has taken a partition from it since). Its fence
    /// row is locked `FOR SHARE`: a takeover's `UPDATE` of it waits for this commit (and then loads what it
    /// wrote), and a row changed since the statement's snapshot is read again as it is now. One row lock
    /// per commit, however many partitions the batch touches.
    ///
    /// Idempotency keys (webhook calls' `idempotency-key`, pushes' `apns-id`): a new key, or one whose answer
    /// expired, takes the batch's answer; a live one (another gateway answered it since this one looked it
    /// up) ends the statement with an error (`reloadgate_key_answered_meanwhile`, migration
    /// `pg7-idempotency-expiry`), so that nothing of the batch is written. Answers expired by the batch's
    /// time are deleted with it (a few, never one of its own keys, never a row another gateway is
    /// deleting). The statement answers one short row: whether the
    /// fence held and, when it did not, the generation now (the partitions the gateway still holds are read
    /// after it: an array of up to 1,024 of them could make the answer longer than one read).
    struct LedgerStatement: PostgresPreparedStatement {
        typealias Row = (ok: Bool, generation: Int64?)

        static let sql = """
            WITH fence AS (SELECT gateway FROM gateway_fence WHERE $51 AND gateway = $52 AND generation = $53 FOR SHARE),
                fenced AS (SELECT NOT $51 OR count(*) = 1 AS ok FROM fence),
                keys AS (INSERT INTO idempotency (appId, key, bodyHash, status, response, createdAt, expiresAt)
                    SELECT x.appId, x.key, decode(x.bodyHash, 'hex'), x.status, x.response, x.createdAt, x.expiresAt
                    FROM unnest($54::bigint[], $55::text[], $56::text[], $57::bigint[], $58::text[], $59::bigint[], $60::bigint[])
                        AS x(appId, key, bodyHash, status, response, createdAt, expiresAt)
                    WHERE (SELECT ok FROM fenced)
                    ON CONFLICT (appId, key) DO UPDATE SET bodyHash = EXCLUDED.bodyHash, status = EXCLUDED.status,
                        response = EXCLUDED.response, createdAt = EXCLUDED.createdAt, expiresAt = EXCLUDED.expiresAt
                    WHERE idempotency.expiresAt <= EXCLUDED.createdAt
                    RETURNING key),
                pruned AS (DELETE FROM idempotency WHERE (appId, key) IN
                    (SELECT i.appId, i.key FROM idempotency i WHERE i.expiresAt <= $61 AND (SELECT ok FROM fenced)
                        AND (i.appId, i.key) NOT IN (SELECT * FROM unnest($54::bigint[], $55::text[]))
                        ORDER BY i.expiresAt LIMIT $62 FOR UPDATE SKIP LOCKED)),
                requests AS (INSERT INTO request (id, appId, source, receivedAt, priority, expiration, collapseId, exempt,
                        summary, apnsId, decisionInstanceId, decisionKind, decisionDue, decisionReason)
                    SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::bigint[], $5::bigint[], $6::bigint[],
                        $7::text[], $8::boolean[], $9::text[], $10::text[], $11::bigint[], $12::text[], $13::bigint[], $14::text[])
                    WHERE (SELECT ok FROM fenced)),
                decisions AS (INSERT INTO decision_run (requestId, instances, kind, due, reason, count)
                    SELECT d.requestId, d.instances, d.kind, d.due, d.reason, d.count
                    FROM unnest($15::bigint[], $16::text[], $17::text[], $18::bigint[], $19::text[], $63::bigint[])
                        WITH ORDINALITY AS d(requestId, instances, kind, due, reason, count, n)
                    WHERE (SELECT ok FROM fenced) ORDER BY d.n),
                removedStates AS (DELETE FROM instance_state WHERE instanceId = ANY($20::bigint[]) AND (SELECT ok FROM fenced)),
                removedPending AS (DELETE FROM pending_reload WHERE instanceId = ANY($21::bigint[]) AND (SELECT ok FROM fenced)),
                removedLists AS (DELETE FROM pending_list WHERE instanceId = ANY($21::bigint[]) AND (SELECT ok FROM fenced)),
                statesStored AS (SELECT instanceId FROM instance_state WHERE instanceId = ANY($22::bigint[])),
                pendingStored AS (SELECT instanceId FROM pending_reload WHERE instanceId = ANY($26::bigint[])),
                listsStored AS (SELECT instanceId FROM pending_list WHERE instanceId = ANY($34::bigint[])),
                statesChanged AS (UPDATE instance_state s SET bucketFullAt = x.bucketFullAt, lastReload = x.lastReload,
                        plannedReload = x.plannedReload, activity = x.activity
                    FROM unnest($22::bigint[], $23::bigint[], $24::bigint[], $25::bigint[], $64::text[])
                        AS x(instanceId, bucketFullAt, lastReload, plannedReload, activity)
                    WHERE s.instanceId = x.instanceId AND s.instanceId = ANY($22::bigint[]) AND (SELECT ok FROM fenced)
                        AND (s.bucketFullAt, s.lastReload, s.plannedReload, s.activity)
                            IS DISTINCT FROM (x.bucketFullAt, x.lastReload, x.plannedReload, x.activity)),
                statesAdded AS (INSERT INTO instance_state (instanceId, bucketFullAt, lastReload, plannedReload, activity)
                    SELECT * FROM unnest($22::bigint[], $23::bigint[], $24::bigint[], $25::bigint[], $64::text[]) AS x(instanceId, b, l, p, a)
                    WHERE (SELECT ok FROM fenced)
                        AND (SELECT count(*) FROM statesStored) < cardinality($22::bigint[])
                        AND NOT EXISTS (SELECT 1 FROM instance_state s
                            WHERE s.instanceId = x.instanceId AND s.instanceId = ANY($22::bigint[]))),
                pendingChanged AS (UPDATE pending_reload p SET due = x.due, priority = x.priority, expiration = x.expiration,
                        requestCount = x.requestCount, collapseId = x.collapseId, team = x.team, exempt = x.exempt
                    FROM unnest($26::bigint[], $27::bigint[], $28::bigint[], $29::bigint[], $30::bigint[], $31::text[],
                        $32::text[], $33::boolean[]) AS x(instanceId, due, priority, expiration, requestCount, collapseId, team, exempt)
                    WHERE p.instanceId = x.instanceId AND p.instanceId = ANY($26::bigint[]) AND (SELECT ok FROM fenced)
                        AND (p.due, p.priority, p.expiration, p.requestCount, p.collapseId, p.team, p.exempt)
                            IS DISTINCT FROM (x.due, x.priority, x.expiration, x.requestCount, x.collapseId, x.team, x.exempt)),
                pendingAdded AS (INSERT INTO pending_reload (instanceId, due, priority, expiration, requestCount, collapseId, team, exempt)
                    SELECT * FROM unnest($26::bigint[], $27::bigint[], $28::bigint[], $29::bigint[], $30::bigint[],
                        $31::text[], $32::text[], $33::boolean[]) AS x(instanceId, due, priority, expiration, requestCount, collapseId, team, exempt)
                    WHERE (SELECT ok FROM fenced)
                        AND (SELECT count(*) FROM pendingStored) < cardinality($26::bigint[])
                        AND NOT EXISTS (SELECT 1 FROM pending_reload p
                            WHERE p.instanceId = x.instanceId AND p.instanceId = ANY($26::bigint[]))),
                listsChanged AS (UPDATE pending_list l SET firstRequest = x.firstRequest, listed = x.listed, requests = x.requests
                    FROM unnest($34::bigint[], $35::bigint[], $36::bigint[], $37::text[]) AS x(instanceId, firstRequest, listed, requests)
                    WHERE l.instanceId = x.instanceId AND l.instanceId = ANY($34::bigint[]) AND (SELECT ok FROM fenced)
                        AND (l.firstRequest <> x.firstRequest OR l.listed <> x.listed)),
                listsAdded AS (INSERT INTO pending_list (instanceId, firstRequest, listed, requests)
                    SELECT * FROM unnest($34::bigint[], $35::bigint[], $36::bigint[], $37::text[]) AS x(instanceId, f, n, r)
                    WHERE (SELECT ok FROM fenced)
                        AND (SELECT count(*) FROM listsStored) < cardinality($34::bigint[])
                        AND NOT EXISTS (SELECT 1 FROM pending_list l
                            WHERE l.instanceId = x.instanceId AND l.instanceId = ANY($34::bigint[]))),
                deliveries AS (INSERT INTO delivery (apnsId, deviceId, releasedAt, instances, requests, requestCount, priority,
                        expiration, state)
                    SELECT * FROM unnest($38::text[], $39::bigint[], $40::bigint[], $41::text[], $42::text[], $43::bigint[],
                        $44::bigint[], $45::bigint[], $46::text[])
                    WHERE (SELECT ok FROM fenced)),
                forwards AS (INSERT INTO inbox (partition, work, createdAt)
                    SELECT * FROM unnest($47::integer[], $48::text[], $49::bigint[])
                    WHERE (SELECT ok FROM fenced)),
                consumed AS (DELETE FROM inbox WHERE id = ANY($50::bigint[]) AND (SELECT ok FROM fenced))
            SELECT ok, CASE WHEN NOT ok THEN (SELECT generation FROM gateway_fence WHERE gateway = $52) END AS generation
                FROM fenced
                LEFT JOIN LATERAL (SELECT pg_notify('\(PostgresStore.clusterChannel)', '\(ClusterChange.inbox.rawValue)')
                    WHERE cardinality($47::integer[]) > 0) notified ON ok
                WHERE CASE WHEN NOT ok OR (SELECT count(*) FROM keys) = cardinality($55::text[]) THEN true
                    ELSE reloadgate_key_answered_meanwhile(
                        (SELECT taken.key FROM (SELECT unnest($55::text[]) AS key EXCEPT SELECT key FROM keys) taken LIMIT 1))
                    END
            """

        /// The batch's rows, column by column.
        let bindings: PostgresBindings
        /// The leases the batch depends on, when fenced.
        let fence: LeaseFence?

        init(_ batch: LedgerBatch) {
            var bindings = PostgresBindings(capacity: 64)
            // Every column is an array written in one pass (decision 0099).
            func column<Slot: PostgresPackedSlot>(_ values: [Slot]) {
                bindings.append(PostgresPackedArray(values))
            }

            // Requests, each with its first decision; further decisions in runs.
            let decisions = StoredDecisions(batch)
            let first = decisions.first
            let requests = batch.requests
            column(requests.map { Int64(bitPattern: $0.id) })
            column(requests.map(\.app))
            column(requests.map(\.source.rawValue))
            column(requests.map(\.received.milliseconds))
            column(requests.map { Int64($0.priority.rawValue) })
            column(requests.map { $0.expiration?.milliseconds })
            column(requests.map(\.collapseID))
            column(requests.map(\.exempt))
            column(requests.map(\.summary))
            column(requests.map(\.apnsID))
            column(first.map { $0?.instance.map { Int64($0.rawValue) } })
            column(first.map { $0?.kind.rawValue })
            column(first.map { $0?.due?.milliseconds })
            column(first.map { $0?.reason.description })
            let runs = decisions.runs
            column(runs.map { Int64(bitPattern: $0.request) })
            column(runs.map { PackedIntegerList($0.instances) })
            column(runs.map(\.kind.rawValue))
            column(runs.map { $0.due?.milliseconds })
            column(runs.map(\.reason))

            // The last state of each instance counts (one row per key and statement).
            var removed: [Int64] = []
            var noPending: [Int64] = []
            var states: [(instance: Int64, snapshot: InstanceSnapshot)] = []
            var pending: [(instance: Int64, reload: PendingSnapshot)] = []
            batch.lastInstanceStates.forEach { instance, snapshot in
                guard let snapshot else {
                    removed.append(instance)
                    return
                }
                states.append((instance, snapshot))
                if let reload = snapshot.pending { pending.append((instance, reload)) } else { noPending.append(instance) }
            }
            column(removed)
            column(removed + noPending)
            column(states.map(\.instance))
            column(states.map(\.snapshot.bucketFullAt))
            column(states.map { $0.snapshot.lastReload?.milliseconds })
            column(states.map { $0.snapshot.plannedReload?.milliseconds })
            column(pending.map(\.instance))
            column(pending.map(\.reload.due.milliseconds))
            column(pending.map { Int64($0.reload.priority.rawValue) })
            column(pending.map { $0.reload.expiration?.milliseconds })
            column(pending.map { Int64($0.reload.requestCount) })
            column(pending.map(\.reload.collapseID))
            column(pending.map(\.reload.team))
            column(pending.map(\.reload.exempt))
            // A pending reload's list only grows from its first request: the stored row is rewritten only
            // when its first id or length differ (most merges leave it as it is).
            let lists = pending.map { ($0.instance, $0.reload.requests.map { Int64(bitPattern: $0) }) }
            column(lists.map(\.0))
            column(lists.map { $0.1.first ?? 0 })
            column(lists.map { Int64($0.1.count) })
            column(lists.map { PackedIntegerList($0.1) })

            let deliveries = batch.deliveries
            column(deliveries.map(\.apnsID))
            column(deliveries.map(\.device))
            column(deliveries.map(\.released.milliseconds))
            column(deliveries.map { PackedIntegerList($0.instances) })
            column(deliveries.map { PackedIntegerList($0.requests.map { Int64(bitPattern: $0) }) })
            column(deliveries.map { Int64($0.requestCount) })
            column(deliveries.map { Int64($0.priority.rawValue) })
            column(deliveries.map { $0.expiration?.milliseconds })
            column(deliveries.map(\.state.rawValue))

            let encoder = JSONEncoder()
            let created = batch.requests.first?.received.milliseconds ?? 0
            column(batch.forwards.map { Int32($0.partition) })
            // ForwardedWork is a plain Codable enum of integers and strings: encoding cannot fail.
            column(batch.forwards.map { String(decoding: (try? encoder.encode($0.work)) ?? Data(), as: UTF8.self) })
            column(batch.forwards.map { _ in created })
            column(batch.consumedInbox)

            bindings.append(batch.fence != nil)
            bindings.append(batch.fence?.gateway ?? "")
            bindings.append(batch.fence?.generation ?? 0)

            let answers = batch.idempotentAnswers
            column(answers.map(\.app))
            column(answers.map(\.key))
            column(answers.map { Self.hex($0.bodyHash) })
            column(answers.map { Int64($0.status) })
            column(answers.map(\.response))
            column(answers.map(\.createdAt.milliseconds))
            column(answers.map(\.expiresAt.milliseconds))
            bindings.append(batch.expiredBy?.milliseconds ?? Int64.min)
            bindings.append(Int64(batch.pruneLimit))
            column(runs.map { Int64($0.count) })
            column(states.map { $0.snapshot.activity?.text })
            self.bindings = bindings
            self.fence = batch.fence
        }

        func makeBindings() throws -> PostgresBindings { bindings }

        /// `bytes` as lower-case hexadecimal (the statement decodes it: a text array binds where a bytea
        /// array may not).
        static func hex(_ bytes: [UInt8]) -> String {
            let digits = Array("0123456789abcdef".utf8)
            var text: [UInt8] = []
            text.reserveCapacity(bytes.count * 2)
            for byte in bytes {
                text.append(digits[Int(byte >> 4)])
                text.append(digits[Int(byte & 0x0f)])
            }
            return String(decoding: text, as: UTF8.self)
        }

        func decodeRow(_ row: PostgresRow) throws -> Row {
            (try row.value("ok"), try row.value("generation"))
        }
    }

    /// Applies state changes of many deliveries in one statement (merged per delivery as SQLite does).
    public func setDeliveryStates(_ changes: [DeliveryStateChange], at now: Date) async throws {
        guard !changes.isEmpty else { return }
        let rows = DeliveryStateChange.merged(changes)
        let time = Timestamp(now).milliseconds
        let ids = PostgresPackedArray(rows.map(\.apnsID))
        let states = PostgresPackedArray(rows.map(\.change.state.rawValue))
        let errors = PostgresPackedArray(rows.map(\.change.error))
        let attempts = PostgresPackedArray(rows.map { Int64($0.change.attempts) })
        let unknown = PostgresPackedArray(rows.map { Int64($0.change.unknownOutcomes) })
        _ = try await self.rows(
            """
            UPDATE delivery SET state = CASE WHEN c.state = 'sending' THEN delivery.state ELSE c.state END,
                inFlight = CASE WHEN c.state = 'sending' THEN 1 ELSE 0 END, lastError = c.lastError, updatedAt = \(time),
                attempts = delivery.attempts + c.attempts, unknownOutcomes = delivery.unknownOutcomes + c.unknownOutcomes
            FROM unnest(\(ids)::text[], \(states)::text[], \(errors)::text[], \(attempts)::bigint[], \(unknown)::bigint[])
                AS c(apnsId, state, lastError, attempts, unknownOutcomes)
            WHERE delivery.apnsId = c.apnsId
            """
        )
    }
}
