import Foundation
import GRDB
import ReloadGateCore

extension SQLiteStore {
    /// Pending reloads in due order, filtered.
    public func pendingReloads(_ filter: PendingFilter) throws -> [PendingReloadRow] {
        try writer.read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT p.instanceId, p.due, p.priority, p.expiration, l.requests, p.requestCount, p.exempt,
                           w.widgetID, w.kind, w.family, w.configuration, d.token, a.bundle
                    FROM pending_reload p
                    LEFT JOIN pending_list l ON l.instanceId = p.instanceId
                    JOIN widget w ON w.id = p.instanceId
                    JOIN device d ON d.id = w.deviceId
                    JOIN app a ON a.id = d.appId
                    WHERE (?1 IS NULL OR a.bundle = ?1) AND (?2 IS NULL OR w.kind = ?2)
                      AND (?3 IS NULL OR d.token = ?3) AND (?4 IS NULL OR p.due <= ?4)
                    ORDER BY p.due, p.instanceId
                    LIMIT ?5
                    """,
                arguments: [filter.bundle, filter.kind, filter.deviceToken, filter.dueBefore?.milliseconds, filter.limit]
            ).map { row in
                let requests = IntegerList.parse((row["requests"] as String?) ?? "[]")
                return PendingReloadRow(
                    instance: row["instanceId"],
                    bundle: row["bundle"],
                    deviceToken: row["token"],
                    widgetID: row["widgetID"],
                    kind: row["kind"],
                    family: row["family"],
                    configuration: row["configuration"],
                    due: Timestamp(milliseconds: row["due"]),
                    priority: row["priority"],
                    expiration: (row["expiration"] as Int64?).map(Timestamp.init(milliseconds:)),
                    requestCount: (row["requestCount"] as Int?) ?? requests.count,
                    requests: requests,
                    exempt: row["exempt"]
                )
            }
        }
    }

    /// The instances with a pending reload on the device `token` or of the app `bundle` (both nil: all).
    public func pendingInstances(deviceToken: String?, bundle: String?) throws -> [Int64] {
        try writer.read { db in
            try Int64.fetchAll(
                db,
                sql: """
                    SELECT p.instanceId FROM pending_reload p
                    JOIN widget w ON w.id = p.instanceId JOIN device d ON d.id = w.deviceId JOIN app a ON a.id = d.appId
                    WHERE (?1 IS NULL OR d.token = ?1) AND (?2 IS NULL OR a.bundle = ?2)
                    ORDER BY p.due
                    """,
                arguments: [deviceToken, bundle]
            )
        }
    }

    /// The instances whose pending reload lists `request` (among its first 100 requests).
    public func pendingInstances(listing request: Int64) throws -> [Int64] {
        try writer.read { db in
            try Int64.fetchAll(
                db,
                sql: """
                    SELECT l.instanceId FROM pending_list l JOIN pending_reload p ON p.instanceId = l.instanceId
                    WHERE EXISTS (SELECT 1 FROM json_each(l.requests) WHERE value = ?)
                    """,
                arguments: [request]
            )
        }
    }

    /// The requests of the push with this apns-id (a sender may reuse one), oldest first.
    public func requests(apnsID: String) throws -> [Int64] {
        try writer.read { db in
            let last = try Int64.fetchOne(db, sql: "SELECT MAX(id) FROM request") ?? 0
            return try Int64.fetchAll(
                db,
                sql: Self.requestsByAPNsIDSQL,
                arguments: [last >> Self.apnsIDBlockBits, apnsID.lowercased()]
            )
        }
    }

    /// The requests of an apns-id (arguments: the newest block number, the lowercase apns-id): one seek
    /// of `request_on_block_apns_id` per block of request ids, from the newest block down to 0.
    static let requestsByAPNsIDSQL = """
        WITH RECURSIVE block(number) AS (SELECT ? UNION ALL SELECT number - 1 FROM block WHERE number > 0)
        SELECT r.id FROM block JOIN request r ON (r.id >> \(apnsIDBlockBits)) = block.number AND r.apnsId = ?
        ORDER BY r.id
        """

    /// A request with its decisions, or nil.
    public func requestRecord(_ id: Int64) throws -> RequestRecord? {
        try writer.read { db in
            guard let row = try Row.fetchOne(
                db,
                sql: """
                    SELECT r.*, a.bundle, w.widgetID AS decisionWidgetID, w.kind AS decisionWidgetKind, d.token AS decisionToken
                    FROM request r JOIN app a ON a.id = r.appId
                    LEFT JOIN widget w ON w.id = r.decisionInstanceId LEFT JOIN device d ON d.id = w.deviceId
                    WHERE r.id = ?
                    """,
                arguments: [id]
            ) else { return nil }
            // The first decision is in the request's row (since v12), the others in `decision` (before
            // v15) and `decision_run` (since).
            var decisions: [RequestRecord.DecisionRow] = []
            if let kind: String = row["decisionKind"] {
                decisions.append(
                    RequestRecord.DecisionRow(
                        instance: row["decisionInstanceId"],
                        widgetID: row["decisionWidgetID"],
                        kind: row["decisionWidgetKind"],
                        deviceToken: row["decisionToken"],
                        decision: kind,
                        due: (row["decisionDue"] as Int64?).map(Timestamp.init(milliseconds:)),
                        reason: row["decisionReason"] ?? ""
                    )
                )
            }
            decisions += try Row.fetchAll(
                db,
                sql: """
                    SELECT dc.instanceId, dc.kind AS decision, dc.due, dc.reason, w.widgetID, w.kind, d.token
                    FROM decision dc LEFT JOIN widget w ON w.id = dc.instanceId LEFT JOIN device d ON d.id = w.deviceId
                    WHERE dc.requestId = ? ORDER BY dc.rowid
                    """,
                arguments: [id]
            ).map { row in
                RequestRecord.DecisionRow(
                    instance: row["instanceId"],
                    widgetID: row["widgetID"],
                    kind: row["kind"],
                    deviceToken: row["token"],
                    decision: row["decision"],
                    due: (row["due"] as Int64?).map(Timestamp.init(milliseconds:)),
                    reason: row["reason"]
                )
            }
            decisions += try Self.decisionRuns(of: id, in: db)
            return RequestRecord(
                id: row["id"],
                bundle: row["bundle"],
                source: row["source"],
                receivedAt: Timestamp(milliseconds: row["receivedAt"]),
                priority: row["priority"],
                expiration: (row["expiration"] as Int64?).map(Timestamp.init(milliseconds:)),
                collapseID: row["collapseId"],
                exempt: row["exempt"],
                summary: row["summary"],
                apnsID: row["apnsId"],
                decisions: decisions
            )
        }
    }

    /// The decisions a request's runs hold, in order, each with its widget's id and kind and its device's
    /// token (one lookup for all the instances).
    static func decisionRuns(of request: Int64, in db: Database) throws -> [RequestRecord.DecisionRow] {
        let runs = try Row.fetchAll(
            db,
            sql: "SELECT kind, due, reason, instances, count FROM decision_run WHERE requestId = ? ORDER BY rowid",
            arguments: [request]
        )
        guard !runs.isEmpty else { return [] }
        var widgets: [Int64: (widgetID: String, kind: String, token: String)] = [:]
        let listed = runs.map { $0["instances"] as String }.filter { $0 != "[]" }
        for list in listed {
            for widget in try Row.fetchAll(
                db,
                sql: """
                    SELECT w.id, w.widgetID, w.kind, d.token FROM json_each(?) j
                    JOIN widget w ON w.id = j.value JOIN device d ON d.id = w.deviceId
                    """,
                arguments: [list]
            ) {
                widgets[widget["id"]] = (widget["widgetID"], widget["kind"], widget["token"])
            }
        }
        var decisions: [RequestRecord.DecisionRow] = []
        for run in runs {
            let kind: String = run["kind"]
            let due = (run["due"] as Int64?).map(Timestamp.init(milliseconds:))
            let reason: String = run["reason"]
            let instances = IntegerList.parse(run["instances"] as String)
            if instances.isEmpty {
                for _ in 0..<max(0, run["count"] as Int) {
                    decisions.append(.init(instance: nil, widgetID: nil, kind: nil, deviceToken: nil, decision: kind, due: due, reason: reason))
                }
                continue
            }
            for instance in instances {
                let widget = widgets[instance]
                decisions.append(
                    .init(instance: instance, widgetID: widget?.widgetID, kind: widget?.kind, deviceToken: widget?.token, decision: kind, due: due, reason: reason)
                )
            }
        }
        return decisions
    }

    /// The deliveries that serve `request` (listed among their first 100 requests), oldest first.
    public func deliveries(serving request: Int64) throws -> [DeliveryRecord] {
        try deliveryRecords(where: "EXISTS (SELECT 1 FROM json_each(dl.requests) WHERE value = ?)", [request])
    }

    /// The delivery with this apns-id, or nil.
    public func delivery(apnsID: String) throws -> DeliveryRecord? {
        try deliveryRecords(where: "dl.apnsId = ?", [apnsID.lowercased()]).first
    }

    /// The last `limit` deliveries to the device `token` of `bundle`, newest first.
    public func recentDeliveries(bundle: String, deviceToken: String, limit: Int) throws -> [DeliveryRecord] {
        Array(try deliveryRecords(where: "a.bundle = ? AND d.token = ?", [bundle, deviceToken]).reversed().prefix(limit))
    }

    private func deliveryRecords(where condition: String, _ arguments: StatementArguments) throws -> [DeliveryRecord] {
        try writer.read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT dl.*, d.token, a.bundle FROM delivery dl
                    LEFT JOIN device d ON d.id = dl.deviceId LEFT JOIN app a ON a.id = d.appId
                    WHERE \(condition) ORDER BY dl.releasedAt, dl.apnsId
                    """,
                arguments: arguments
            ).compactMap { row in
                guard let delivery = Self.recordedDelivery(row) else { return nil }
                return DeliveryRecord(
                    delivery: delivery,
                    bundle: row["bundle"],
                    deviceToken: row["token"],
                    updatedAt: (row["updatedAt"] as Int64?).map(Timestamp.init(milliseconds:))
                )
            }
        }
    }

    /// The device `token` (of any app when `bundle` is nil): its app and widget instances with their
    /// timelines. Empty when no active device has that token.
    public func instances(ofDevice token: String, bundle: String?) throws -> [(bundle: String, instance: InstanceRecord)] {
        try writer.read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT a.bundle, w.id, w.widgetID, w.kind, w.family, w.configuration, t.policy, t.reportedAt
                    FROM device d JOIN app a ON a.id = d.appId JOIN widget w ON w.deviceId = d.id
                    LEFT JOIN timeline t ON t.widgetId = w.id
                    WHERE d.token = ? AND d.active AND (?2 IS NULL OR a.bundle = ?2)
                    ORDER BY a.bundle, w.widgetID
                    """,
                arguments: [token.lowercased(), bundle]
            ).map { row in
                (
                    row["bundle"],
                    InstanceRecord(
                        instance: row["id"],
                        widgetID: row["widgetID"],
                        kind: row["kind"],
                        family: row["family"],
                        configuration: row["configuration"],
                        timelinePolicy: row["policy"],
                        timelineReportedAt: (row["reportedAt"] as Int64?).map(Date.init(storedMilliseconds:))
                    )
                )
            }
        }
    }

    /// Counts of decisions, deliveries and pending reloads.
    public func statistics() throws -> LedgerStatistics {
        try writer.read { db in
            func counts(_ sql: String) throws -> [String: Int] {
                var result: [String: Int] = [:]
                for row in try Row.fetchAll(db, sql: sql) { result[row[0] ?? "?"] = row[1] }
                return result
            }
            return LedgerStatistics(
                decisionsByKind: try counts("""
                    SELECT kind, sum(n) FROM (
                        SELECT decisionKind AS kind, 1 AS n FROM request WHERE decisionKind IS NOT NULL
                        UNION ALL SELECT kind, 1 FROM decision
                        UNION ALL SELECT kind, count FROM decision_run
                    ) GROUP BY kind
                    """),
                deliveriesByState: try counts("SELECT state, count(*) FROM delivery GROUP BY state"),
                failuresByReason: try counts("SELECT lastError, count(*) FROM delivery WHERE state = 'failed' GROUP BY lastError"),
                pendingReloads: try Int.fetchOne(db, sql: "SELECT count(*) FROM pending_reload") ?? 0,
                oldestPendingDue: try Int64.fetchOne(db, sql: "SELECT min(due) FROM pending_reload").map(Timestamp.init(milliseconds:)),
                oldestOpenDelivery: try Int64.fetchOne(db, sql: "SELECT min(releasedAt) FROM delivery WHERE state IN ('pending', 'sending')")
                    .map(Timestamp.init(milliseconds:)),
                unknownOutcomes: try Int.fetchOne(db, sql: "SELECT coalesce(sum(unknownOutcomes), 0) FROM delivery") ?? 0
            )
        }
    }
}

extension SQLiteStore {
    /// Devices, by app and token: of `bundle` only when given; of `token` only when given.
    public func devices(bundle: String?, token: String?, limit: Int) throws -> [DeviceRecord] {
        try writer.read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT a.bundle, d.token, d.active, d.registeredAt, d.unregisteredAt, d.pushType,
                           (SELECT count(*) FROM widget w WHERE w.deviceId = d.id) AS widgets,
                           (SELECT count(*) FROM widget w JOIN pending_reload p ON p.instanceId = w.id WHERE w.deviceId = d.id) AS pending
                    FROM device d JOIN app a ON a.id = d.appId
                    WHERE (?1 IS NULL OR a.bundle = ?1) AND (?2 IS NULL OR d.token = ?2)
                    ORDER BY a.bundle, d.token
                    LIMIT ?3
                    """,
                arguments: [bundle, token?.lowercased(), limit]
            ).map { row in
                DeviceRecord(
                    bundle: row["bundle"],
                    token: row["token"],
                    active: row["active"],
                    registeredAt: Date(storedMilliseconds: row["registeredAt"]),
                    unregisteredAt: (row["unregisteredAt"] as Int64?).map(Date.init(storedMilliseconds:)),
                    widgets: row["widgets"],
                    pendingReloads: row["pending"],
                    pushType: PushType(rawValue: row["pushType"]) ?? .widgets
                )
            }
        }
    }
}

extension SQLiteStore {
    /// Counts the ledger's rows.
    public func ledgerCounts() throws -> LedgerCounts {
        try writer.read { db in
            func count(_ table: String) throws -> Int { try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM \(table)") ?? 0 }
            return LedgerCounts(
                requests: try count("request"),
                decisions: try count("decision")
                    + (Int.fetchOne(db, sql: "SELECT count(*) FROM request WHERE decisionKind IS NOT NULL") ?? 0)
                    + (Int.fetchOne(db, sql: "SELECT coalesce(sum(count), 0) FROM decision_run") ?? 0),
                pendingReloads: try count("pending_reload"),
                deliveries: try count("delivery"),
                idempotencyKeys: try count("idempotency")
            )
        }
    }
}
