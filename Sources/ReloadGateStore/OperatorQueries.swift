import Foundation
public import ReloadGateCore

// The operator's queries: pending, explain, budget, stats, devices. Written once for both engines.

extension SQLStore {
    /// Pending reloads in due order, filtered.
    public func pendingReloads(_ filter: PendingFilter) async throws -> [PendingReloadRow] {
        var query: SQLQuery = """
            SELECT p.instanceId, p.due, p.priority, p.expiration, l.requests, p.requestCount, p.exempt,
                   w.widgetID, w.kind, w.family, w.configuration, d.token, a.bundle
            FROM pending_reload p
            LEFT JOIN pending_list l ON l.instanceId = p.instanceId
            JOIN widget w ON w.id = p.instanceId JOIN device d ON d.id = w.deviceId JOIN app a ON a.id = d.appId
            WHERE true
            """
        if let bundle = filter.bundle { query += " AND a.bundle = \(bundle)" }
        if let kind = filter.kind { query += " AND w.kind = \(kind)" }
        if let token = filter.deviceToken { query += " AND d.token = \(token)" }
        if let before = filter.dueBefore { query += " AND p.due <= \(before.milliseconds)" }
        query += " ORDER BY p.due, p.instanceId LIMIT \(Int64(max(0, filter.limit)))"
        return try await reading { [query] session in
            try await session.rows(query).map { row in
                let requests = IntegerList.parse(try row.optionalString("requests") ?? "[]")
                return PendingReloadRow(
                    instance: try row.int64("instanceId"), bundle: try row.string("bundle"), deviceToken: try row.string("token"),
                    widgetID: try row.string("widgetID"), kind: try row.string("kind"), family: try row.string("family"),
                    configuration: try row.string("configuration"), due: Timestamp(milliseconds: try row.int64("due")),
                    priority: try row.int("priority"), expiration: try row.optionalInt64("expiration").map(Timestamp.init(milliseconds:)),
                    requestCount: try row.optionalInt64("requestCount").map(Int.init) ?? requests.count, requests: requests,
                    exempt: try row.bool("exempt")
                )
            }
        }
    }

    /// The instances with a pending reload on the device `token` or of the app `bundle` (both nil: all).
    public func pendingInstances(deviceToken: String?, bundle: String?) async throws -> [Int64] {
        var query: SQLQuery = """
            SELECT p.instanceId FROM pending_reload p
            JOIN widget w ON w.id = p.instanceId JOIN device d ON d.id = w.deviceId JOIN app a ON a.id = d.appId WHERE true
            """
        if let deviceToken { query += " AND d.token = \(deviceToken)" }
        if let bundle { query += " AND a.bundle = \(bundle)" }
        query += " ORDER BY p.due, p.instanceId"
        return try await reading { [query] session in try await session.rows(query).map { try $0.int64("instanceId") } }
    }

    /// The instances whose pending reload lists `request`.
    public func pendingInstances(listing request: Int64) async throws -> [Int64] {
        try await reading { session in
            try await session.rows("""
                SELECT l.instanceId FROM pending_list l JOIN pending_reload p ON p.instanceId = l.instanceId
                WHERE \(jsonArray: "l.requests", contains: request) ORDER BY l.instanceId
                """).map { try $0.int64("instanceId") }
        }
    }

    /// The requests of the push with this apns-id (a sender may reuse one), oldest first: one seek of
    /// `request_on_block_apns_id` per block of 1,024 request ids the ledger holds, newest first.
    public func requests(apnsID: String) async throws -> [Int64] {
        try await reading { session in
            let bounds = try await session.row("SELECT MIN(id) AS first, MAX(id) AS last FROM request")
            guard let first = try bounds?.optionalInt64("first"), let last = try bounds?.optionalInt64("last") else { return [] }
            return try await session.rows(LedgerLayout.requests(
                apnsID: StoredAPNsID.of(apnsID), blocks: (first >> LedgerLayout.apnsIDBlockBits)...(last >> LedgerLayout.apnsIDBlockBits)
            )).map { try $0.int64("id") }
        }
    }

    /// A request with its decisions (the first in its row, the others in its runs), or nil.
    public func requestRecord(_ id: Int64) async throws -> RequestRecord? {
        try await reading { session in
            guard let row = try await session.row("""
                SELECT r.id, a.bundle, r.source, r.receivedAt, r.priority, r.expiration, r.collapseId, r.exempt, r.summary, r.apnsId,
                       r.decisionInstanceId, r.decisionKind, r.decisionDue, r.decisionReason,
                       w.widgetID AS decisionWidgetID, w.kind AS decisionWidgetKind, d.token AS decisionToken
                FROM request r JOIN app a ON a.id = r.appId
                LEFT JOIN widget w ON w.id = r.decisionInstanceId LEFT JOIN device d ON d.id = w.deviceId
                WHERE r.id = \(id)
                """) else { return nil }
            var decisions: [RequestRecord.DecisionRow] = []
            if let kind = try row.optionalString("decisionKind") {
                decisions.append(RequestRecord.DecisionRow(
                    instance: try row.optionalInt64("decisionInstanceId"), widgetID: try row.optionalString("decisionWidgetID"),
                    kind: try row.optionalString("decisionWidgetKind"), deviceToken: try row.optionalString("decisionToken"), decision: kind,
                    due: try row.optionalInt64("decisionDue").map(Timestamp.init(milliseconds:)), reason: try row.optionalString("decisionReason") ?? ""
                ))
            }
            decisions += try await session.decisionRuns(of: id)
            return RequestRecord(
                id: try row.int64("id"), bundle: try row.string("bundle"), source: try row.string("source"),
                receivedAt: Timestamp(milliseconds: try row.int64("receivedAt")), priority: try row.int("priority"),
                expiration: try row.optionalInt64("expiration").map(Timestamp.init(milliseconds:)), collapseID: try row.optionalString("collapseId"),
                exempt: try row.bool("exempt"), summary: try row.string("summary"), apnsID: try row.optionalString("apnsId"), decisions: decisions
            )
        }
    }

    /// The deliveries that serve `request`, oldest first.
    public func deliveries(serving request: Int64) async throws -> [DeliveryRecord] {
        try await deliveryRecords("WHERE \(jsonArray: "dl.requests", contains: request) ORDER BY dl.releasedAt, dl.apnsId")
    }

    /// The delivery with this apns-id, or nil.
    public func delivery(apnsID: String) async throws -> DeliveryRecord? {
        try await deliveryRecords("WHERE dl.apnsId = \(StoredAPNsID.of(apnsID))").first
    }

    /// The last `limit` deliveries to the device `token` of `bundle`, newest first.
    public func recentDeliveries(bundle: String, deviceToken: String, limit: Int) async throws -> [DeliveryRecord] {
        try await deliveryRecords("""
            WHERE a.bundle = \(bundle) AND d.token = \(deviceToken) ORDER BY dl.releasedAt DESC, dl.apnsId DESC LIMIT \(Int64(max(0, limit)))
            """)
    }

    private func deliveryRecords(_ condition: SQLQuery) async throws -> [DeliveryRecord] {
        let query: SQLQuery = """
            SELECT \(unescaped: RecordedDelivery.columns), d.token, a.bundle FROM delivery dl
            LEFT JOIN device d ON d.id = dl.deviceId LEFT JOIN app a ON a.id = d.appId \(condition)
            """
        return try await reading { [query] session in
            try await session.rows(query).compactMap { row in
                guard let delivery = try RecordedDelivery(row) else { return nil }
                return DeliveryRecord(
                    delivery: delivery, bundle: try row.optionalString("bundle"), deviceToken: try row.optionalString("token"),
                    updatedAt: try row.optionalInt64("updatedAt").map(Timestamp.init(milliseconds:))
                )
            }
        }
    }

    /// The deliveries in `states`, in release order (the worker's queue at start).
    public func deliveries(in states: [RecordedDelivery.State]) async throws -> [RecordedDelivery] {
        try await reading(scanning: true) { session in
            try await session.rows("""
                SELECT \(unescaped: RecordedDelivery.columns) FROM delivery dl WHERE \(unescaped: RecordedDelivery.State.condition(states))
                ORDER BY dl.releasedAt, dl.apnsId
                """).compactMap(RecordedDelivery.init)
        }
    }

    /// The device `token` (of any app when `bundle` is nil): its app and widget instances with their
    /// timelines. Empty when no active device has that token.
    public func instances(ofDevice token: String, bundle: String?) async throws -> [(bundle: String, instance: InstanceRecord)] {
        var query: SQLQuery = """
            SELECT a.bundle, w.id, w.widgetID, w.kind, w.family, w.configuration, t.policy, t.reportedAt
            FROM device d JOIN app a ON a.id = d.appId JOIN widget w ON w.deviceId = d.id
            LEFT JOIN timeline t ON t.widgetId = w.id
            WHERE d.token = \(token.lowercased()) AND d.active
            """
        if let bundle { query += " AND a.bundle = \(bundle)" }
        query += " ORDER BY a.bundle\(SQLCollation.binary), w.widgetID\(SQLCollation.binary)"
        return try await reading { [query] session in
            try await session.rows(query).map { row in
                (
                    try row.string("bundle"),
                    InstanceRecord(
                        instance: try row.int64("id"), widgetID: try row.string("widgetID"), kind: try row.string("kind"),
                        family: try row.string("family"), configuration: try row.string("configuration"),
                        timelinePolicy: try row.optionalString("policy"),
                        timelineReportedAt: try row.optionalInt64("reportedAt").map(Date.init(storedMilliseconds:))
                    )
                )
            }
        }
    }

    /// Counts of decisions, deliveries and pending reloads.
    public func statistics() async throws -> LedgerStatistics {
        try await reading(scanning: true) { session in
            func counts(_ query: SQLQuery) async throws -> [String: Int] {
                var result: [String: Int] = [:]
                for row in try await session.rows(query) { result[try row.optionalString("key") ?? "?"] = try row.int("count") }
                return result
            }
            let pending = try await session.row("SELECT count(*) AS count, min(due) AS oldest FROM pending_reload")
            let open = try await session.row("SELECT min(releasedAt) AS oldest FROM delivery WHERE state IN ('pending', 'sending')")
            let unknown = try await session.row("SELECT CAST(coalesce(sum(unknownOutcomes), 0) AS bigint) AS count FROM delivery")
            return LedgerStatistics(
                decisionsByKind: try await counts("""
                    SELECT kind AS key, CAST(sum(n) AS bigint) AS count FROM (
                        SELECT decisionKind AS kind, 1 AS n FROM request WHERE decisionKind IS NOT NULL
                        UNION ALL SELECT kind, count FROM decision_run
                    ) decided GROUP BY kind
                    """),
                deliveriesByState: try await counts(
                    "SELECT \(unescaped: RecordedDelivery.stateSQL) AS key, count(*) AS count FROM delivery dl GROUP BY 1"
                ),
                failuresByReason: try await counts(
                    "SELECT lastError AS key, count(*) AS count FROM delivery WHERE state = 'failed' GROUP BY lastError"
                ),
                pendingReloads: try pending?.int("count") ?? 0,
                oldestPendingDue: try pending?.optionalInt64("oldest").map(Timestamp.init(milliseconds:)),
                oldestOpenDelivery: try open?.optionalInt64("oldest").map(Timestamp.init(milliseconds:)),
                unknownOutcomes: try unknown?.int("count") ?? 0
            )
        }
    }

    /// Devices, by app and token: of `bundle` only when given; of `token` only when given.
    public func devices(bundle: String?, token: String?, limit: Int) async throws -> [DeviceRecord] {
        var query: SQLQuery = """
            SELECT a.bundle, d.token, d.active, d.registeredAt, d.unregisteredAt, d.pushType,
                   (SELECT count(*) FROM widget w WHERE w.deviceId = d.id) AS widgets,
                   (SELECT count(*) FROM widget w JOIN pending_reload p ON p.instanceId = w.id WHERE w.deviceId = d.id) AS pending
            FROM device d JOIN app a ON a.id = d.appId WHERE true
            """
        if let bundle { query += " AND a.bundle = \(bundle)" }
        if let token { query += " AND d.token = \(token.lowercased())" }
        query += " ORDER BY a.bundle\(SQLCollation.binary), d.token\(SQLCollation.binary) LIMIT \(Int64(max(0, limit)))"
        return try await reading { [query] session in
            try await session.rows(query).map { row in
                DeviceRecord(
                    bundle: try row.string("bundle"), token: try row.string("token"), active: try row.bool("active"),
                    registeredAt: Date(storedMilliseconds: try row.int64("registeredAt")),
                    unregisteredAt: try row.optionalInt64("unregisteredAt").map(Date.init(storedMilliseconds:)),
                    widgets: try row.int("widgets"), pendingReloads: try row.int("pending"),
                    pushType: PushType(rawValue: try row.string("pushType")) ?? .widgets
                )
            }
        }
    }

    /// The highest request id recorded, pruned ones included (`ledger_prune`), so that ids keep growing
    /// across restarts and an id is never given twice.
    public func lastRequestID() async throws -> RequestID {
        try await reading { session in
            let row = try await session.row("""
                SELECT MAX(id) AS last FROM (SELECT MAX(id) AS id FROM request UNION ALL SELECT MAX(lastRequest) FROM ledger_prune) AS ids
                """)
            return RequestID(bitPattern: try row?.optionalInt64("last") ?? 0)
        }
    }

    /// Counts the ledger's rows.
    public func ledgerCounts() async throws -> LedgerCounts {
        try await reading(scanning: true) { session in
            guard let row = try await session.row("""
                SELECT (SELECT count(*) FROM request) AS requests,
                       (SELECT count(*) FROM request WHERE decisionKind IS NOT NULL) AS inline,
                       (SELECT CAST(coalesce(sum(count), 0) AS bigint) FROM decision_run) AS runs,
                       (SELECT count(*) FROM pending_reload) AS pending, (SELECT count(*) FROM delivery) AS deliveries,
                       (SELECT count(*) FROM idempotency) AS keys
                """) else { return LedgerCounts(requests: 0, decisions: 0, pendingReloads: 0, deliveries: 0, idempotencyKeys: 0) }
            return LedgerCounts(
                requests: try row.int("requests"), decisions: try row.int("inline") + row.int("runs"), pendingReloads: try row.int("pending"),
                deliveries: try row.int("deliveries"), idempotencyKeys: try row.int("keys")
            )
        }
    }
}

extension SQLSession {
    /// The decisions a request's runs hold, in order, each with its widget's id and kind and its device's
    /// token (one lookup for all the instances).
    func decisionRuns(of request: Int64) async throws -> [RequestRecord.DecisionRow] {
        let runs = try await rows("SELECT kind, due, reason, instances, count FROM decision_run WHERE requestId = \(request) ORDER BY seq")
        var listed: [Int64] = []
        for run in runs { listed += IntegerList.parse(try run.string("instances")) }
        var widgets: [Int64: (widgetID: String, kind: String, token: String)] = [:]
        if !listed.isEmpty {
            for widget in try await rows("""
                SELECT w.id, w.widgetID, w.kind, d.token FROM widget w JOIN device d ON d.id = w.deviceId WHERE w.id IN \(ids: listed)
                """) {
                widgets[try widget.int64("id")] = (try widget.string("widgetID"), try widget.string("kind"), try widget.string("token"))
            }
        }
        var decisions: [RequestRecord.DecisionRow] = []
        for run in runs {
            let kind = try run.string("kind")
            let due = try run.optionalInt64("due").map(Timestamp.init(milliseconds:))
            let reason = try run.string("reason")
            let instances = IntegerList.parse(try run.string("instances"))
            guard !instances.isEmpty else {
                for _ in 0..<max(0, try run.int("count")) {
                    decisions.append(.init(instance: nil, widgetID: nil, kind: nil, deviceToken: nil, decision: kind, due: due, reason: reason))
                }
                continue
            }
            for instance in instances {
                let widget = widgets[instance]
                decisions.append(.init(
                    instance: instance, widgetID: widget?.widgetID, kind: widget?.kind, deviceToken: widget?.token, decision: kind, due: due,
                    reason: reason
                ))
            }
        }
        return decisions
    }
}

extension RecordedDelivery.State {
    /// `states` as the items of an SQL `IN (...)` list: their names quoted (names the code chose).
    static func sqlList(_ states: [Self]) -> String {
        states.map { "'\($0.rawValue)'" }.joined(separator: ", ")
    }

    /// The condition that a delivery (`delivery dl`) is in one of `states`: first on the indexed `state`
    /// column (a delivery in flight is `pending` there, or `sending` when a gateway of the version before
    /// marked it), then on the state as read (``RecordedDelivery/stateSQL``).
    static func condition(_ states: [Self]) -> String {
        let stored = states.contains(.sending) ? Array(Set(states + [.pending])).sorted { $0.rawValue < $1.rawValue } : states
        return "dl.state IN (\(sqlList(stored))) AND \(RecordedDelivery.stateSQL) IN (\(sqlList(states)))"
    }
}

extension RecordedDelivery {
    /// A delivery's state (of `delivery dl`): `sending` while an attempt of a `pending` one is on its way
    /// (`inFlight`, written without a change of the indexed `state`: decision 0096), else its `state`.
    static let stateSQL = "(CASE WHEN dl.inFlight = 1 AND dl.state = 'pending' THEN 'sending' ELSE dl.state END)"

    /// The columns ``init(_:)`` reads (of `delivery dl`).
    static let columns = """
        dl.apnsId, dl.deviceId, dl.releasedAt, dl.instances, dl.requests, dl.requestCount, dl.priority, dl.expiration,
        \(stateSQL) AS state, dl.attempts, dl.lastError, dl.unknownOutcomes, dl.updatedAt
        """

    /// A `delivery` row; `nil` for an unknown priority or state.
    init?(_ row: SQLRow) throws {
        guard let priority = Priority(rawValue: try row.int("priority")), let state = State(rawValue: try row.string("state")) else { return nil }
        self.init(
            apnsID: try row.string("apnsId"), device: try row.int64("deviceId"), released: Timestamp(milliseconds: try row.int64("releasedAt")),
            instances: CompactList(IntegerList.parse(try row.string("instances"))),
            requests: CompactList(IntegerList.parse(try row.string("requests")).lazy.map { RequestID(bitPattern: $0) }),
            requestCount: try row.optionalInt64("requestCount").map(Int.init), priority: priority,
            expiration: try row.optionalInt64("expiration").map(Timestamp.init(milliseconds:)), state: state,
            history: .init(attempts: try row.int("attempts"), lastError: try row.optionalString("lastError"), unknownOutcomes: try row.int("unknownOutcomes"))
        )
    }
}

/// How the ledger's tables are laid out, where a query must match an index's expression.
enum LedgerLayout {
    /// Requests are indexed by apns-id within blocks of 2^10 consecutive request ids
    /// (`request_on_block_apns_id`): a group commit's entries fall into one or two blocks of at most
    /// about a dozen index pages, and a lookup costs one index seek per block.
    static let apnsIDBlockBits: Int64 = 10

    /// The requests of an apns-id (lower case): one seek of `request_on_block_apns_id` per block of request
    /// ids in `blocks`, newest first.
    static func requests(apnsID: String, blocks: ClosedRange<Int64>) -> SQLQuery {
        """
        WITH RECURSIVE block(number) AS (
            SELECT \(blocks.upperBound) UNION ALL SELECT number - 1 FROM block WHERE number > \(blocks.lowerBound))
        SELECT r.id FROM block JOIN request r ON (r.id >> \(unescaped: String(apnsIDBlockBits))) = block.number AND r.apnsId = \(apnsID)
        ORDER BY r.id
        """
    }
}
