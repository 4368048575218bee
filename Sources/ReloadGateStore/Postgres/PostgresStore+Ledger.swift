import Foundation
import PostgresNIO
public import ReloadGateCore

// The group commit on PostgreSQL: each kind of row of a batch is one statement, whatever the batch's size
// (the rows travel as one JSON array, unpacked by `jsonb_to_recordset`), so a batch costs a handful of
// round trips and one commit.

extension PostgresStore {
    /// Writes a batch in one transaction (the group commit): nothing of it is visible unless all of it is.
    public func commit(_ batch: LedgerBatch) async throws {
        guard !batch.isEmpty else { return }
        let rows = try BatchRows(batch)
        guard !rows.idempotency.isEmpty else {
            // One statement: atomic by itself, one round trip.
            // Collected: an error of a statement that returns rows arrives with them, not with the call.
            if let statement = Self.ledgerStatement(rows) { try Self.checkFence(rows, try await self.rows(statement)) }
            return
        }
        try await transaction { connection in
            try await Self.write(rows, on: connection, logger: self.logger)
        }
    }

    /// Throws ``StoreError/leaseLost(partitions:)`` when the statement's fence did not hold (it wrote nothing).
    static func checkFence(_ rows: BatchRows, _ result: [PostgresRow]) throws {
        guard let fence = rows.fence, let row = result.first else { return }
        let (ok, held) = try row.decode((Bool, [Int64]?).self)
        guard !ok else { return }
        let kept = Set((held ?? []).map(Int.init))
        throw StoreError.leaseLost(partitions: fence.epochs.keys.filter { !kept.contains($0) }.sorted())
    }

    /// A batch as JSON arrays, one per table (keys in lower case: PostgreSQL folds the column names of
    /// `jsonb_to_recordset`'s record type).
    struct BatchRows: Sendable {
        var idempotency: [IdempotentAnswer]
        var requests: String?
        var decisions: String?
        var removedInstances: [Int64]
        var states: String?
        var pendingRemoved: [Int64]
        var pending: String?
        var lists: String?
        var deliveries: String?
        var forwards: String?
        var consumedInbox: [Int64]
        var fence: LeaseFence?

        init(_ batch: LedgerBatch) throws {
            let encoder = JSONEncoder()
            func json(_ value: some Encodable & Collection) throws -> String? {
                value.isEmpty ? nil : String(decoding: try encoder.encode(value), as: UTF8.self)
            }
            idempotency = batch.idempotentAnswers
            var position: [RequestID: Int] = [:]
            for (index, request) in batch.requests.enumerated() { position[request.id] = index }
            var first = [Int](repeating: -1, count: batch.requests.count)
            var others: [DecisionRow] = []
            for (index, decision) in batch.decisions.enumerated() {
                if let request = position[decision.request], first[request] < 0 {
                    first[request] = index
                } else {
                    others.append(DecisionRow(decision, n: others.count))
                }
            }
            requests = try json(batch.requests.enumerated().map { index, request in
                RequestRow(request, first: first[index] >= 0 ? batch.decisions[first[index]] : nil)
            })
            decisions = try json(others)
            // The last state of each instance counts (one row per key and statement).
            var last: [Int64: InstanceSnapshot?] = [:]
            var order: [Int64] = []
            for (instance, snapshot) in batch.instanceStates {
                if last.updateValue(snapshot, forKey: instance) == nil { order.append(instance) }
            }
            var removed: [Int64] = []
            var states: [StateRow] = []
            var pendingRemoved: [Int64] = []
            var pending: [PendingRow] = []
            var lists: [ListRow] = []
            for instance in order {
                guard let snapshot = last[instance]! else {
                    removed.append(instance)
                    continue
                }
                states.append(StateRow(instance: instance, snapshot: snapshot))
                guard let reload = snapshot.pending else {
                    pendingRemoved.append(instance)
                    continue
                }
                pending.append(PendingRow(instance: instance, pending: reload))
                let ids = reload.requests.map { Int64(bitPattern: $0) }
                lists.append(
                    ListRow(instanceid: instance, firstrequest: ids.first ?? 0, listed: Int64(ids.count), requests: SQLiteStore.list(ids))
                )
            }
            removedInstances = removed
            self.states = try json(states)
            self.pendingRemoved = pendingRemoved
            self.pending = try json(pending)
            self.lists = try json(lists)
            deliveries = try json(batch.deliveries.map(DeliveryRow.init))
            forwards = try json(try batch.forwards.map { entry in
                InboxRow(partition: Int64(entry.partition), work: String(decoding: try encoder.encode(entry.work), as: UTF8.self),
                    createdat: batch.requests.first?.received.milliseconds ?? 0)
            })
            consumedInbox = batch.consumedInbox
            fence = batch.fence.flatMap { $0.epochs.isEmpty ? nil : $0 }
        }
    }

    /// Writes the batch: its idempotent answers first (rare: webhook calls with a key), then everything
    /// else as one statement (``ledgerStatement(_:)``).
    static func write(_ rows: BatchRows, on connection: PostgresConnection, logger: Logger) async throws {
        for answer in rows.idempotency {
            // A key older than the window is replaced; a live one makes the whole batch fail.
            _ = try await connection.rows(
                """
                DELETE FROM idempotency WHERE appId = \(answer.app) AND key = \(answer.key)
                    AND createdAt < \(answer.createdAt.milliseconds - SQLiteStore.idempotencyWindow)
                """,
                logger: logger
            )
            _ = try await connection.rows(
                """
                INSERT INTO idempotency (appId, key, bodyHash, status, response, createdAt)
                VALUES (\(answer.app), \(answer.key), \(ByteBuffer(bytes: answer.bodyHash)), \(Int64(answer.status)),
                    \(answer.response), \(answer.createdAt.milliseconds))
                """,
                logger: logger
            )
        }
        if let statement = ledgerStatement(rows) {
            // A fence that did not hold throws here: the transaction (its idempotent answers) rolls back.
            try checkFence(rows, try await connection.rows(statement, logger: logger))
        }
    }

    /// Every row of the batch but its idempotent answers, as one statement of data-modifying CTEs: one
    /// round trip, atomic on its own (a single statement needs no BEGIN and COMMIT of its own). The parts
    /// touch disjoint rows (an instance is either deleted or upserted; foreign keys are checked at the end
    /// of the statement), so the order in which PostgreSQL runs them does not matter.
    static func ledgerStatement(_ rows: BatchRows) -> PostgresQuery? {
        var parts: [String] = []
        var bindings = PostgresBindings()
        func json(_ value: String) -> String {
            bindings.append(value)
            return "jsonb_to_recordset($\(bindings.count)::jsonb)"
        }
        func ids(_ value: [Int64]) -> String {
            bindings.append(value)
            return "$\(bindings.count)"
        }
        if let requests = rows.requests {
            parts.append("""
                INSERT INTO request (id, appId, source, receivedAt, priority, expiration, collapseId, exempt, summary, apnsId,
                    decisionInstanceId, decisionKind, decisionDue, decisionReason)
                SELECT id, appid, source, receivedat, priority, expiration, collapseid, exempt, summary, apnsid,
                    decisioninstanceid, decisionkind, decisiondue, decisionreason
                FROM \(json(requests)) AS r(id bigint, appid bigint, source text, receivedat bigint,
                    priority bigint, expiration bigint, collapseid text, exempt boolean, summary text, apnsid text,
                    decisioninstanceid bigint, decisionkind text, decisiondue bigint, decisionreason text)
                """)
        }
        if let decisions = rows.decisions {
            parts.append("""
                INSERT INTO decision (requestId, instanceId, kind, due, reason)
                SELECT requestid, instanceid, kind, due, reason FROM \(json(decisions))
                    AS d(n bigint, requestid bigint, instanceid bigint, kind text, due bigint, reason text)
                ORDER BY n
                """)
        }
        if !rows.removedInstances.isEmpty {
            parts.append("DELETE FROM instance_state WHERE instanceId = ANY(\(ids(rows.removedInstances)))")
        }
        let noPending = rows.removedInstances + rows.pendingRemoved
        if !noPending.isEmpty {
            let list = ids(noPending)
            parts.append("DELETE FROM pending_reload WHERE instanceId = ANY(\(list))")
            parts.append("DELETE FROM pending_list WHERE instanceId = ANY(\(list))")
        }
        if let states = rows.states {
            parts.append("""
                INSERT INTO instance_state (instanceId, bucketFullAt, lastReload, plannedReload)
                SELECT instanceid, bucketfullat, lastreload, plannedreload FROM \(json(states))
                    AS s(instanceid bigint, bucketfullat bigint, lastreload bigint, plannedreload bigint)
                ON CONFLICT (instanceId) DO UPDATE SET bucketFullAt = excluded.bucketFullAt,
                    lastReload = excluded.lastReload, plannedReload = excluded.plannedReload
                WHERE (instance_state.bucketFullAt, instance_state.lastReload, instance_state.plannedReload)
                    IS DISTINCT FROM (excluded.bucketFullAt, excluded.lastReload, excluded.plannedReload)
                """)
        }
        if let pending = rows.pending {
            parts.append("""
                INSERT INTO pending_reload (instanceId, due, priority, expiration, requestCount, collapseId, team, exempt)
                SELECT instanceid, due, priority, expiration, requestcount, collapseid, team, exempt
                FROM \(json(pending)) AS p(instanceid bigint, due bigint, priority bigint,
                    expiration bigint, requestcount bigint, collapseid text, team text, exempt boolean)
                ON CONFLICT (instanceId) DO UPDATE SET due = excluded.due, priority = excluded.priority,
                    expiration = excluded.expiration, requestCount = excluded.requestCount,
                    collapseId = excluded.collapseId, team = excluded.team, exempt = excluded.exempt
                """)
        }
        if let lists = rows.lists {
            // A pending reload's list only grows from its first request: the stored row is rewritten
            // only when its first id or length differ (most merges leave it as it is).
            parts.append("""
                INSERT INTO pending_list (instanceId, firstRequest, listed, requests)
                SELECT instanceid, firstrequest, listed, requests FROM \(json(lists))
                    AS l(instanceid bigint, firstrequest bigint, listed bigint, requests text)
                ON CONFLICT (instanceId) DO UPDATE SET firstRequest = excluded.firstRequest, listed = excluded.listed,
                    requests = excluded.requests
                WHERE pending_list.firstRequest <> excluded.firstRequest OR pending_list.listed <> excluded.listed
                """)
        }
        if let deliveries = rows.deliveries {
            parts.append("""
                INSERT INTO delivery (apnsId, deviceId, releasedAt, instances, requests, requestCount, priority, expiration, state)
                SELECT apnsid, deviceid, releasedat, instances, requests, requestcount, priority, expiration, state
                FROM \(json(deliveries)) AS d(apnsid text, deviceid bigint, releasedat bigint,
                    instances text, requests text, requestcount bigint, priority bigint, expiration bigint, state text)
                """)
        }
        if let forwards = rows.forwards {
            parts.append("""
                INSERT INTO inbox (partition, work, createdAt)
                SELECT partition, work, createdat FROM \(json(forwards)) AS f(partition integer, work text, createdat bigint)
                """)
        }
        if !rows.consumedInbox.isEmpty {
            parts.append("DELETE FROM inbox WHERE id = ANY(\(ids(rows.consumedInbox)))")
        }
        guard !parts.isEmpty else { return nil }
        // Owners are told at commit (a notification is sent when its transaction commits).
        let notify = rows.forwards == nil ? "" : ", pg_notify('\(clusterChannel)', '\(ClusterChange.inbox.rawValue)')"
        guard let fence = rows.fence else {
            let sql = "WITH " + parts.enumerated().map { "w\($0.offset) AS (\($0.element))" }.joined(separator: ",\n")
                + "\nSELECT 1\(notify)"
            return PostgresQuery(unsafeSQL: sql, binds: bindings)
        }
        // Fenced: every part writes only if the gateway still holds each lease with its epoch. The leases
        // are locked FOR SHARE (a takeover's UPDATE waits for this commit, then loads what it wrote);
        // a lease changed since the statement's snapshot is read again as it is now.
        let partitions = fence.epochs.keys.sorted()
        bindings.append(fence.gateway)
        let gateway = "$\(bindings.count)"
        let partitionList = ids(partitions.map(Int64.init))
        let epochList = ids(partitions.map { fence.epochs[$0]! })
        let head = """
            fence AS (SELECT partition FROM partition_lease
                WHERE owner = \(gateway) AND (partition, epoch) IN (SELECT * FROM unnest(\(partitionList)::bigint[], \(epochList)::bigint[]))
                ORDER BY partition FOR SHARE),
            fenced AS (SELECT count(*) = \(partitions.count) AS ok, array_agg(partition::bigint) AS held FROM fence)
            """
        let guarded = parts.map { Self.guarding($0) }
        let sql = "WITH " + head + ",\n" + guarded.enumerated().map { "w\($0.offset) AS (\($0.element))" }.joined(separator: ",\n")
            + "\nSELECT ok, held FROM fenced"
            + (notify.isEmpty ? "" : " LEFT JOIN LATERAL (SELECT pg_notify('\(clusterChannel)', '\(ClusterChange.inbox.rawValue)')) n ON ok")
        return PostgresQuery(unsafeSQL: sql, binds: bindings)
    }

    /// A part of ``ledgerStatement(_:)`` that writes only when the fence held.
    static func guarding(_ part: String) -> String {
        let condition = "(SELECT ok FROM fenced)"
        if part.hasPrefix("DELETE") { return part + " AND " + condition }
        for keyword in ["ORDER BY n", "ON CONFLICT"] {
            if let range = part.range(of: keyword) {
                return part[..<range.lowerBound] + " WHERE " + condition + "\n" + part[range.lowerBound...]
            }
        }
        return part + " WHERE " + condition
    }

    /// Applies state changes of many deliveries in one statement (merged per delivery as SQLite does).
    public func setDeliveryStates(_ changes: [DeliveryStateChange], at now: Date) async throws {
        guard !changes.isEmpty else { return }
        var merged: [String: SQLiteStore.MergedChange] = [:]
        var order: [String] = []
        for change in changes {
            if merged[change.apnsID] == nil { order.append(change.apnsID) }
            merged[change.apnsID, default: SQLiteStore.MergedChange()].add(change)
        }
        let rows = order.map { apnsID in
            let change = merged[apnsID]!
            return StateChangeRow(
                apnsid: apnsID, state: change.state.rawValue, lasterror: change.error, attempts: Int64(change.attempts),
                unknownoutcomes: Int64(change.unknownOutcomes)
            )
        }
        let json = String(decoding: try JSONEncoder().encode(rows), as: UTF8.self)
        let time = Timestamp(now).milliseconds
        _ = try await self.rows(
            """
            UPDATE delivery SET state = c.state, lastError = c.lasterror, updatedAt = \(time),
                attempts = delivery.attempts + c.attempts, unknownOutcomes = delivery.unknownOutcomes + c.unknownoutcomes
            FROM jsonb_to_recordset(\(json)::jsonb) AS c(apnsid text, state text, lasterror text, attempts bigint, unknownoutcomes bigint)
            WHERE delivery.apnsId = c.apnsid
            """
        )
    }

    /// What `key` finds for `app`: nothing (or older than 24 hours), the first answer for the same body,
    /// or a conflict for another body.
    public func idempotentAnswer(app: Int64, key: String, bodyHash: [UInt8], now: Timestamp) async throws -> IdempotencyLookup {
        guard let row = try await rows(
            "SELECT bodyHash, status, response, createdAt FROM idempotency WHERE appId = \(app) AND key = \(key)"
        ).first else { return .new }
        let (hash, status, response, created) = try row.decode((ByteBuffer, Int64, String, Int64).self)
        guard created >= now.milliseconds - SQLiteStore.idempotencyWindow else { return .new }
        guard Array(buffer: hash) == bodyHash else { return .conflict }
        return .replay(status: Int(status), response: response)
    }

    /// The stored scheduling state of every instance that has one, to restore on start.
    public func instanceSnapshots() async throws -> [(instance: Int64, snapshot: InstanceSnapshot)] {
        try await instanceSnapshots(instancesIn: nil)
    }

    /// The stored scheduling state of the instances that `instancesIn` (a query of instance ids) selects;
    /// every one when nil.
    func instanceSnapshots(instancesIn selection: String?) async throws -> [(instance: Int64, snapshot: InstanceSnapshot)] {
        let pendingFilter = selection.map { " WHERE p.instanceId IN (\($0))" } ?? ""
        let stateFilter = selection.map { " WHERE instanceId IN (\($0))" } ?? ""
        var pending: [Int64: PendingSnapshot] = [:]
        for row in try await rows(
            PostgresQuery(unsafeSQL: """
                SELECT p.instanceId, p.due, p.priority, p.expiration, p.requestCount, p.collapseId, p.team, p.exempt, l.requests
                FROM pending_reload p LEFT JOIN pending_list l ON l.instanceId = p.instanceId\(pendingFilter)
                """)
        ) {
            let (instance, due, priorityValue, expiration, count, collapseID, team, exempt, requests) = try row.decode(
                (Int64, Int64, Int64, Int64?, Int64?, String?, String?, Bool, String?).self
            )
            guard let priority = Priority(rawValue: Int(priorityValue)) else { continue }
            pending[instance] = PendingSnapshot(
                due: Timestamp(milliseconds: due),
                priority: priority,
                expiration: expiration.map(Timestamp.init(milliseconds:)),
                requests: SQLiteStore.integers(requests ?? "[]").map { RequestID(bitPattern: $0) },
                requestCount: count.map(Int.init),
                collapseID: collapseID,
                team: team,
                exempt: exempt
            )
        }
        return try await rows(
            PostgresQuery(unsafeSQL: "SELECT instanceId, bucketFullAt, lastReload, plannedReload FROM instance_state\(stateFilter) ORDER BY instanceId")
        ).map { row in
            let (instance, bucketFullAt, lastReload, plannedReload) = try row.decode((Int64, Int64?, Int64?, Int64?).self)
            return (
                instance,
                InstanceSnapshot(
                    bucketFullAt: bucketFullAt,
                    lastReload: lastReload.map(Timestamp.init(milliseconds:)),
                    plannedReload: plannedReload.map(Timestamp.init(milliseconds:)),
                    pending: pending[instance]
                )
            )
        }
    }

    /// The highest request id recorded, so that ids keep growing across restarts.
    public func lastRequestID() async throws -> RequestID {
        let value = try await rows("SELECT COALESCE(MAX(id), 0) FROM request").first?.decode(Int64.self) ?? 0
        return RequestID(bitPattern: value)
    }

    /// Deliveries in the given states, oldest first.
    public func deliveries(in states: [RecordedDelivery.State]) async throws -> [RecordedDelivery] {
        try await rows(
            "SELECT \(unescaped: Self.deliveryColumns) FROM delivery dl WHERE state = ANY(\(states.map(\.rawValue))) ORDER BY releasedAt, apnsId"
        ).compactMap { try Self.recordedDelivery($0) }
    }

    /// The columns ``recordedDelivery(_:)`` reads, in its order (of `delivery dl`).
    static let deliveryColumns = """
        dl.apnsId, dl.deviceId, dl.releasedAt, dl.instances, dl.requests, dl.requestCount, dl.priority, dl.expiration,
        dl.state, dl.attempts, dl.lastError, dl.unknownOutcomes, dl.updatedAt
        """

    /// A row of ``deliveryColumns`` as a value; `nil` for an unknown priority or state.
    static func recordedDelivery(_ row: PostgresRow) throws -> RecordedDelivery? {
        let columns = row.makeRandomAccess()
        let priorityValue = try columns[6].decode(Int64.self)
        guard let priority = Priority(rawValue: Int(priorityValue)),
            let state = RecordedDelivery.State(rawValue: try columns[8].decode(String.self))
        else { return nil }
        let requests = SQLiteStore.integers(try columns[4].decode(String.self))
        return RecordedDelivery(
            apnsID: try columns[0].decode(String.self),
            device: try columns[1].decode(Int64.self),
            released: Timestamp(milliseconds: try columns[2].decode(Int64.self)),
            instances: SQLiteStore.integers(try columns[3].decode(String.self)),
            requests: requests.map { RequestID(bitPattern: $0) },
            requestCount: try columns[5].decode(Int64?.self).map(Int.init),
            priority: priority,
            expiration: try columns[7].decode(Int64?.self).map(Timestamp.init(milliseconds:)),
            state: state,
            history: .init(
                attempts: Int(try columns[9].decode(Int64.self)),
                lastError: try columns[10].decode(String?.self),
                unknownOutcomes: Int(try columns[11].decode(Int64.self))
            )
        )
    }
}

// MARK: Rows as JSON

private struct RequestRow: Encodable {
    var id: Int64, appid: Int64, source: String, receivedat: Int64, priority: Int, expiration: Int64?
    var collapseid: String?, exempt: Bool, summary: String, apnsid: String?
    var decisioninstanceid: Int64?, decisionkind: String?, decisiondue: Int64?, decisionreason: String?

    init(_ request: RecordedRequest, first decision: Decision?) {
        id = Int64(bitPattern: request.id)
        appid = request.app
        source = request.source.rawValue
        receivedat = request.received.milliseconds
        priority = request.priority.rawValue
        expiration = request.expiration?.milliseconds
        collapseid = request.collapseID
        exempt = request.exempt
        summary = request.summary
        apnsid = request.apnsID
        decisioninstanceid = decision?.instance.map { Int64($0.rawValue) }
        decisionkind = decision?.kind.rawValue
        decisiondue = decision?.due?.milliseconds
        decisionreason = decision?.reason.description
    }
}

private struct InboxRow: Encodable {
    var partition: Int64, work: String, createdat: Int64
}

private struct DecisionRow: Encodable {
    /// The decision's place in the batch: `decision.seq` keeps it (explain lists decisions in order).
    var n: Int
    var requestid: Int64, instanceid: Int64?, kind: String, due: Int64?, reason: String

    init(_ decision: Decision, n: Int) {
        self.n = n
        requestid = Int64(bitPattern: decision.request)
        instanceid = decision.instance.map { Int64($0.rawValue) }
        kind = decision.kind.rawValue
        due = decision.due?.milliseconds
        reason = decision.reason.description
    }
}

private struct StateRow: Encodable {
    var instanceid: Int64, bucketfullat: Int64?, lastreload: Int64?, plannedreload: Int64?

    init(instance: Int64, snapshot: InstanceSnapshot) {
        instanceid = instance
        bucketfullat = snapshot.bucketFullAt
        lastreload = snapshot.lastReload?.milliseconds
        plannedreload = snapshot.plannedReload?.milliseconds
    }
}

private struct PendingRow: Encodable {
    var instanceid: Int64, due: Int64, priority: Int, expiration: Int64?, requestcount: Int?
    var collapseid: String?, team: String?, exempt: Bool

    init(instance: Int64, pending: PendingSnapshot) {
        instanceid = instance
        due = pending.due.milliseconds
        priority = pending.priority.rawValue
        expiration = pending.expiration?.milliseconds
        requestcount = pending.requestCount
        collapseid = pending.collapseID
        team = pending.team
        exempt = pending.exempt
    }
}

private struct ListRow: Encodable {
    var instanceid: Int64, firstrequest: Int64, listed: Int64, requests: String
}

private struct DeliveryRow: Encodable {
    var apnsid: String, deviceid: Int64, releasedat: Int64, instances: String, requests: String
    var requestcount: Int, priority: Int, expiration: Int64?, state: String

    init(_ delivery: RecordedDelivery) {
        apnsid = delivery.apnsID
        deviceid = delivery.device
        releasedat = delivery.released.milliseconds
        instances = SQLiteStore.list(delivery.instances)
        requests = SQLiteStore.list(delivery.requests.map { Int64(bitPattern: $0) })
        requestcount = delivery.requestCount
        priority = delivery.priority.rawValue
        expiration = delivery.expiration?.milliseconds
        state = delivery.state.rawValue
    }
}

private struct StateChangeRow: Encodable {
    var apnsid: String, state: String, lasterror: String?, attempts: Int64, unknownoutcomes: Int64
}
