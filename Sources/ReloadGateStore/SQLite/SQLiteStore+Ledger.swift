import Foundation
import GRDB
public import ReloadGateCore

extension SQLiteStore {
    /// Writes a batch in one transaction (the group commit): nothing of it is visible unless all of it
    /// is. The caller answers the requests in it only after this returns.
    public func commit(_ batch: LedgerBatch) throws {
        guard !batch.isEmpty else { return }
        // One gateway owns a SQLite file: nothing is ever forwarded or fenced.
        guard batch.forwards.isEmpty, batch.consumedInbox.isEmpty else {
            throw StoreError.corrupt(reason: "a SQLite store has no inbox (forwarded work belongs to a shared PostgreSQL store)")
        }
        let deleted = try writer.writeWithoutTransaction { db in try writeInTransaction(batch, in: db) }
        storedPending.remove(deleted)
    }

    /// A batch with at least this many rows of instance states and deliveries (a fan-out's, a herd's)
    /// commits with its statement journals in memory whatever their size (decision 0106).
    static let rowsForStatementJournalsInMemory = 8 * GroupedRows.rowsPerStatement

    /// Writes `batch` in a transaction of its own on `db` (outside any), a large batch with its
    /// statement journals in memory: its statements are at most 32 rows each, so each journals a bounded
    /// number of pages, but a few of them journal past SQLite's threshold (128 KiB, decision 0105), and
    /// from the first such statement on every journal of the transaction goes to a file, two system calls
    /// a page (230,696 pages in the fan-out over a million instances). A small batch (a few pushes) has
    /// little to gain, and does without the two `PRAGMA` statements this takes (about 4 us).
    func writeInTransaction(_ batch: LedgerBatch, in db: Database) throws -> [Int64] {
        var deleted: [Int64] = []
        let operations = {
            deleted = try self.write(batch, in: db)
            return Database.TransactionCompletion.commit
        }
        if batch.instanceStates.count + batch.deliveries.count >= Self.rowsForStatementJournalsInMemory {
            try db.inTransactionKeepingStatementJournalsInMemory(operations)
        } else {
            try db.inTransaction(nil, operations)
        }
        return deleted
    }

    /// Writes the batch; returns the instances whose pending-reload rows it deleted (for
    /// ``storedPending``, once the transaction has committed).
    func write(_ batch: LedgerBatch, in db: Database) throws -> [Int64] {
        var deleted: [Int64] = []
        if let expiredBy = batch.expiredBy {
            try db.executeCached(
                sql: """
                    DELETE FROM idempotency WHERE rowid IN
                        (SELECT rowid FROM idempotency WHERE expiresAt <= ? ORDER BY expiresAt LIMIT ?)
                    """,
                arguments: [expiredBy.milliseconds, batch.pruneLimit]
            )
        }
        if !batch.idempotentAnswers.isEmpty {
            // A new key, or one whose answer expired, takes this answer; a live one (answered since the
            // engine looked it up) makes the whole batch fail.
            var upsert = try BoundStatement(db, sql: """
                INSERT INTO idempotency (appId, key, bodyHash, status, response, createdAt, expiresAt)
                VALUES (?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (appId, key) DO UPDATE SET bodyHash = excluded.bodyHash, status = excluded.status,
                    response = excluded.response, createdAt = excluded.createdAt, expiresAt = excluded.expiresAt
                WHERE idempotency.expiresAt <= excluded.createdAt
                """)
            for answer in batch.idempotentAnswers {
                upsert.bind(answer.app)
                upsert.bind(answer.key)
                upsert.bind(answer.bodyHash)
                upsert.bind(answer.status)
                upsert.bind(answer.response)
                upsert.bind(answer.createdAt.milliseconds)
                upsert.bind(answer.expiresAt.milliseconds)
                try upsert.run()
                guard db.changesCount == 1 else { throw StoreError.keyAnsweredMeanwhile(key: answer.key) }
            }
        }
        // The statements below run for every request, decision and changed instance: bound directly
        // (BoundStatement), each prepared once per batch.
        let decisions = StoredDecisions(batch)
        if !batch.requests.isEmpty {
            var rows = try GroupedRows(
                db,
                head: """
                    INSERT INTO request (id, appId, source, receivedAt, priority, expiration, collapseId, exempt, summary, apnsId,
                        decisionInstanceId, decisionKind, decisionDue, decisionReason,
                        answerKey, answerBodyHash, answerStatus, answerResponse, answerExpiresAt)
                    """,
                row: "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                count: batch.requests.count
            )
            for (index, request) in batch.requests.enumerated() {
                try rows.add { insert in
                    insert.bind(Int64(bitPattern: request.id))
                    insert.bind(request.app)
                    insert.bind(request.source.rawValue)
                    insert.bind(request.received.milliseconds)
                    insert.bind(request.priority.rawValue)
                    insert.bind(request.expiration?.milliseconds)
                    insert.bind(request.collapseID)
                    insert.bind(request.exempt)
                    insert.bind(request.summary)
                    insert.bind(request.apnsID)
                    if let decision = decisions.first[index] {
                        insert.bindOutcome(of: decision)
                    } else {
                        for _ in 0..<4 { insert.bindNull() }
                    }
                    if let answer = request.answer {
                        guard answer.app == request.app else {
                            throw StoreError.corrupt(reason: "request \(request.id) keeps an answer of another app")
                        }
                        insert.bind(answer.key)
                        insert.bind(answer.bodyHash)
                        insert.bind(answer.status)
                        insert.bind(answer.response)
                        insert.bind(answer.expiresAt.milliseconds)
                    } else {
                        for _ in 0..<5 { insert.bindNull() }
                    }
                }
            }
            try rows.finish()
        }
        if !decisions.runs.isEmpty {
            var insert = try BoundStatement(db, sql: "INSERT INTO decision_run (requestId, kind, due, reason, instances, count) VALUES (?, ?, ?, ?, ?, ?)")
            for run in decisions.runs {
                insert.bind(Int64(bitPattern: run.request))
                insert.bind(run.kind.rawValue)
                insert.bind(run.due?.milliseconds)
                insert.bind(run.reason)
                insert.bindList(run.instances)
                insert.bind(run.count)
                try insert.run()
            }
        }
        if !batch.instanceStates.isEmpty {
            // Each instance once, with its last state (``LedgerBatch/lastInstanceStates``): no removal and
            // write of one instance meet in the batch, so each kind of row is written in groups.
            let last = batch.lastInstanceStates
            try storedPending.load(from: db)
            // Each kind of row counted for its statements: states written and removed, pending reloads
            // written, and those deleted (only where the instance may have rows).
            var stateCount = 0
            var removedCount = 0
            var pendingCount = 0
            var pendingDeletes = 0
            last.forEach { instance, snapshot in
                if let snapshot {
                    stateCount += 1
                    if snapshot.pending != nil {
                        pendingCount += 1
                        return
                    }
                } else {
                    removedCount += 1
                }
                if storedPending.mayHaveRows(instance) { pendingDeletes += 1 }
            }
            // A pending reload's list only grows, from its first request (a new id for every new pending
            // reload), up to 100: its first id and length say whether the stored list is this one. Most
            // merges leave it as it is (docs/DECISIONS.md, "Pending reloads keep their request lists
            // apart"). Read before anything is written, so that the lists to write are counted first; an
            // instance that never had pending rows has none to compare with (a fan-out's new pending
            // reloads are written without a read each).
            var storedList = try BoundStatement(db, sql: "SELECT firstRequest, listed FROM pending_list WHERE instanceId = ?")
            var listsKept = Set<Int64>()
            try last.forEach { instance, snapshot in
                guard let pending = snapshot?.pending, storedPending.mayHaveRows(instance) else { return }
                storedList.bind(instance)
                let first = pending.firstRequest.map { Int64(bitPattern: $0) } ?? 0
                if try storedList.firstRow(integers: 2) == [first, Int64(pending.listedCount)] { listsKept.insert(instance) }
            }
            var upsertStates = try GroupedRows(
                db,
                head: "INSERT INTO instance_state (instanceId, bucketFullAt, lastReload, plannedReload, activity)",
                row: "(?, ?, ?, ?, ?)",
                tail: """
                    ON CONFLICT(instanceId) DO UPDATE SET bucketFullAt = excluded.bucketFullAt,
                        lastReload = excluded.lastReload, plannedReload = excluded.plannedReload, activity = excluded.activity
                    """,
                count: stateCount
            )
            var upsertPending = try GroupedRows(
                db,
                head: "INSERT INTO pending_reload (instanceId, due, priority, expiration, requestCount, collapseId, team, exempt)",
                row: "(?, ?, ?, ?, ?, ?, ?, ?)",
                tail: """
                    ON CONFLICT(instanceId) DO UPDATE SET due = excluded.due, priority = excluded.priority,
                        expiration = excluded.expiration, requestCount = excluded.requestCount,
                        collapseId = excluded.collapseId, team = excluded.team, exempt = excluded.exempt
                    """,
                count: pendingCount
            )
            var replaceLists = try GroupedRows(
                db,
                head: "INSERT OR REPLACE INTO pending_list (instanceId, firstRequest, listed, requests)",
                row: "(?, ?, ?, ?)",
                count: pendingCount - listsKept.count
            )
            var deleteStates = try GroupedRows(db, deletingFrom: "instance_state", key: "instanceId", count: removedCount)
            var deletePending = try GroupedRows(db, deletingFrom: "pending_reload", key: "instanceId", count: pendingDeletes)
            var deleteLists = try GroupedRows(db, deletingFrom: "pending_list", key: "instanceId", count: pendingDeletes)
            func removePending(_ instance: Int64) throws {
                guard storedPending.mayHaveRows(instance) else { return }
                deleted.append(instance)
                try deletePending.add { $0.bind(instance) }
                try deleteLists.add { $0.bind(instance) }
            }
            try last.forEach { instance, snapshot in
                guard let snapshot else {
                    try deleteStates.add { $0.bind(instance) }
                    try removePending(instance)
                    return
                }
                try upsertStates.add { upsert in
                    upsert.bind(instance)
                    upsert.bind(snapshot.bucketFullAt)
                    upsert.bind(snapshot.lastReload?.milliseconds)
                    upsert.bind(snapshot.plannedReload?.milliseconds)
                    upsert.bind(snapshot.activity?.text)
                }
                guard let pending = snapshot.pending else {
                    try removePending(instance)
                    return
                }
                storedPending.add(instance)
                try upsertPending.add { upsert in
                    upsert.bind(instance)
                    upsert.bind(pending.due.milliseconds)
                    upsert.bind(pending.priority.rawValue)
                    upsert.bind(pending.expiration?.milliseconds)
                    upsert.bind(pending.requestCount)
                    upsert.bind(pending.collapseID)
                    upsert.bind(pending.team)
                    upsert.bind(pending.exempt)
                }
                guard !listsKept.contains(instance) else { return }
                try replaceLists.add { replace in
                    replace.bind(instance)
                    replace.bind(pending.firstRequest.map { Int64(bitPattern: $0) } ?? 0)
                    let listed = pending.requests
                    replace.bind(listed.count)
                    replace.bindList(requests: listed)
                }
            }
            for rows in [upsertStates, upsertPending, replaceLists, deleteStates, deletePending, deleteLists] { try rows.finish() }
        }
        if !batch.deliveries.isEmpty {
            var rows = try GroupedRows(
                db,
                head: "INSERT INTO delivery (apnsId, deviceId, releasedAt, instances, requests, requestCount, priority, expiration, state)",
                row: "(?, ?, ?, ?, ?, ?, ?, ?, ?)",
                count: batch.deliveries.count
            )
            for delivery in batch.deliveries {
                try rows.add { insert in
                    insert.bind(delivery.apnsID)
                    insert.bind(delivery.device)
                    insert.bind(delivery.released.milliseconds)
                    insert.bindList(delivery.instances)
                    insert.bindList(requests: delivery.requests)
                    insert.bind(delivery.requestCount)
                    insert.bind(delivery.priority.rawValue)
                    insert.bind(delivery.expiration?.milliseconds)
                    insert.bind(delivery.state.rawValue)
                }
            }
            try rows.finish()
        }
        return deleted
    }

    /// Moves a delivery to a new state (pending -> sending -> sent | failed) at `now`, counting attempts.
    public func setDeliveryState(apnsID: String, to state: RecordedDelivery.State, error: String? = nil, at now: Date) throws {
        try writer.write { db in
            var change = DeliveryStateChange.Merged()
            change.add(DeliveryStateChange(apnsID: apnsID, state: state, error: error))
            try Self.apply([(apnsID, change)], at: Self.timestamp(now), in: db)
        }
    }

    /// A SQLite file has one gateway, whose engine sees every commit.
    public var keepsAnswersInRequests: Bool { true }

    /// The answers kept in the rows of `requests`: one primary-key seek each.
    public func keptAnswers(requests: [RequestID]) throws -> [RequestID: IdempotentAnswer] {
        guard !requests.isEmpty else { return [:] }
        return try writer.read { db in
            let statement = try db.cachedStatement(sql: """
                SELECT appId, receivedAt, answerKey, answerBodyHash, answerStatus, answerResponse, answerExpiresAt
                FROM request WHERE id = ? AND answerKey IS NOT NULL
                """)
            var found: [RequestID: IdempotentAnswer] = [:]
            for id in requests {
                guard let row = try Row.fetchOne(statement, arguments: [Int64(bitPattern: id)]) else { continue }
                found[id] = IdempotentAnswer(
                    app: row["appId"], key: row["answerKey"], bodyHash: (row["answerBodyHash"] as Data?).map(Array.init) ?? [],
                    status: row["answerStatus"], response: row["answerResponse"],
                    createdAt: Timestamp(milliseconds: row["receivedAt"]), expiresAt: Timestamp(milliseconds: row["answerExpiresAt"])
                )
            }
            return found
        }
    }

    /// One range of the expiry index: keys that expire between `now` and `limit` (a push's keys of the last
    /// window, and a slice of webhook keys written a day before), filtered by their prefix.
    public func lastExpiry(ofTableKeysPrefixed prefix: String, after now: Timestamp, notAfter limit: Timestamp) throws -> Timestamp? {
        try writer.read { db in
            try Int64.fetchOne(
                db,
                sql: """
                    SELECT MAX(expiresAt) FROM idempotency
                    WHERE expiresAt > ? AND expiresAt <= ? AND substr(key, 1, length(?)) = ?
                    """,
                arguments: [now.milliseconds, limit.milliseconds, prefix, prefix]
            ).map(Timestamp.init(milliseconds:))
        }
    }

    /// The unexpired answers kept in request rows, oldest first: the requests are read newest first
    /// (by id, the order the engine took them in) back to those received `window` (the longest a kept
    /// answer lasts) and a minute before `now`, which no answer kept in a row outlives.
    public func keptAnswerKeys(unexpiredAt now: Timestamp, window: Int64) throws -> [KeptAnswerKey] {
        try writer.read { db in
            let cursor = try Row.fetchCursor(
                db, sql: "SELECT id, appId, receivedAt, answerKey, answerExpiresAt FROM request ORDER BY id DESC"
            )
            let oldest = now.milliseconds - window - 60_000
            var found: [KeptAnswerKey] = []
            while let row = try cursor.next() {
                let received: Int64 = row["receivedAt"]
                if received < oldest { break }
                guard let key: String = row["answerKey"], let expiresAt: Int64 = row["answerExpiresAt"], expiresAt > now.milliseconds
                else { continue }
                found.append(KeptAnswerKey(
                    request: RequestID(bitPattern: row["id"]), name: IdempotencyKey(app: row["appId"], key: key),
                    expiresAt: Timestamp(milliseconds: expiresAt)
                ))
            }
            return found.reversed()
        }
    }
}

extension Database {
    /// Executes a statement kept prepared across transactions: the group commit runs the same few
    /// inserts thousands of times a second.
    func executeCached(sql: String, arguments: StatementArguments) throws {
        try cachedStatement(sql: sql).execute(arguments: arguments)
    }
}

extension SQLiteStore {
    /// Applies state changes of many deliveries in one transaction (the delivery worker's bookkeeping,
    /// group-committed). Changes of one delivery are merged first: its last state and error, with every
    /// attempt and unknown outcome counted, so a delivery that went `sending` -> `sent` within one batch
    /// costs one update.
    public func setDeliveryStates(_ changes: [DeliveryStateChange], at now: Date) async throws {
        guard !changes.isEmpty else { return }
        let time = Self.timestamp(now)
        let updates = DeliveryStateChange.merged(changes)
        try await writer.write { db in try Self.apply(updates, at: time, in: db) }
    }

    static func timestamp(_ date: Date) -> Timestamp {
        Timestamp(date)
    }

    /// Writes merged state changes, one row each, through prepared statements bound value by value: two
    /// of these run for every delivery to Apple (its `sending` mark and its final one), and GRDB's argument
    /// array, built and bound for each row, cost nearly as much as SQLite's own update (decision 0095).
    ///
    /// A change that ends `sending` sets `inFlight` and leaves `state` as it is (`pending`): SQLite moves a
    /// row in an index whenever the update sets one of its columns, so a mark that set `state` would move
    /// every delivery in `delivery_on_state` and back (decision 0096). Any other change sets `state` and clears
    /// `inFlight`. ``RecordedDelivery/stateSQL`` reads the two as one state.
    static func apply(_ updates: [(apnsID: String, change: DeliveryStateChange.Merged)], at time: Timestamp, in db: Database) throws {
        guard !updates.isEmpty else { return }
        // Prepared on first use: the mark sets `inFlight`, the others `state` (and clear `inFlight`).
        var marks: BoundStatement?
        var settles: BoundStatement?
        for (apnsID, change) in updates {
            let mark = change.state == .sending
            var update = try (mark ? marks : settles) ?? BoundStatement(db, sql: """
                UPDATE delivery SET \(mark ? "inFlight = 1" : "state = ?, inFlight = 0"), lastError = ?, updatedAt = ?,
                    attempts = attempts + ?, unknownOutcomes = unknownOutcomes + ?
                WHERE apnsId = ?
                """)
            if !mark { update.bind(change.state.rawValue) }
            update.bind(change.error)
            update.bind(time.milliseconds)
            update.bind(change.attempts)
            update.bind(change.unknownOutcomes)
            update.bind(apnsID)
            try update.run()
            if mark { marks = update } else { settles = update }
        }
    }
}

extension BoundStatement {
    /// Binds a decision's instance, kind, due time and reason (the columns of `decision`, and of a
    /// request's first decision in its row), in that order.
    mutating func bindOutcome(of decision: Decision) {
        bind(decision.instance.map { Int64($0.rawValue) })
        bind(decision.kind.rawValue)
        bind(decision.due?.milliseconds)
        bind(decision.reason.description)
    }
}

extension SQLiteStore {
    /// ``commit(_:)`` without blocking the caller's thread: the transaction runs on the store's writer
    /// queue, so requests keep arriving (and gather into the next batch) while it commits.
    public func commit(_ batch: LedgerBatch) async throws {
        guard !batch.isEmpty else { return }
        let deleted = try await writeOrUnavailable {
            try await writer.writeWithoutTransaction { db in try self.writeInTransaction(batch, in: db) }
        }
        storedPending.remove(deleted)
    }
}
