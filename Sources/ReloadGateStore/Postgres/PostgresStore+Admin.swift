import Foundation
import PostgresNIO
import ReloadGateCore

// The operator's queries: pending, explain, budget, stats, devices.

extension PostgresStore {
    /// Pending reloads in due order, filtered.
    public func pendingReloads(_ filter: PendingFilter) async throws -> [PendingReloadRow] {
        try await rows(
            """
            SELECT p.instanceId, p.due, p.priority, p.expiration, l.requests, p.requestCount, p.exempt,
                   w.widgetID, w.kind, w.family, w.configuration, d.token, a.bundle
            FROM pending_reload p
            LEFT JOIN pending_list l ON l.instanceId = p.instanceId
            JOIN widget w ON w.id = p.instanceId JOIN device d ON d.id = w.deviceId JOIN app a ON a.id = d.appId
            WHERE (\(filter.bundle)::text IS NULL OR a.bundle = \(filter.bundle)) AND (\(filter.kind)::text IS NULL OR w.kind = \(filter.kind))
              AND (\(filter.deviceToken)::text IS NULL OR d.token = \(filter.deviceToken))
              AND (\(filter.dueBefore?.milliseconds)::bigint IS NULL OR p.due <= \(filter.dueBefore?.milliseconds))
            ORDER BY p.due, p.instanceId
            LIMIT \(Int64(filter.limit))
            """
        ).map { row in
            let columns = row.makeRandomAccess()
            let requests = IntegerList.parse(try columns["requests"].decode(String?.self) ?? "[]")
            return PendingReloadRow(
                instance: try columns["instanceid"].decode(Int64.self),
                bundle: try columns["bundle"].decode(String.self),
                deviceToken: try columns["token"].decode(String.self),
                widgetID: try columns["widgetid"].decode(String.self),
                kind: try columns["kind"].decode(String.self),
                family: try columns["family"].decode(String.self),
                configuration: try columns["configuration"].decode(String.self),
                due: Timestamp(milliseconds: try columns["due"].decode(Int64.self)),
                priority: Int(try columns["priority"].decode(Int64.self)),
                expiration: try columns["expiration"].decode(Int64?.self).map(Timestamp.init(milliseconds:)),
                requestCount: try columns["requestcount"].decode(Int64?.self).map(Int.init) ?? requests.count,
                requests: requests,
                exempt: try columns["exempt"].decode(Bool.self)
            )
        }
    }

    /// The instances with a pending reload on the device `token` or of the app `bundle` (both nil: all).
    public func pendingInstances(deviceToken: String?, bundle: String?) async throws -> [Int64] {
        try await rows(
            """
            SELECT p.instanceId FROM pending_reload p
            JOIN widget w ON w.id = p.instanceId JOIN device d ON d.id = w.deviceId JOIN app a ON a.id = d.appId
            WHERE (\(deviceToken)::text IS NULL OR d.token = \(deviceToken)) AND (\(bundle)::text IS NULL OR a.bundle = \(bundle))
            ORDER BY p.due, p.instanceId
            """
        ).map { try $0.decode(Int64.self) }
    }

    /// The instances whose pending reload lists `request`.
    public func pendingInstances(listing request: Int64) async throws -> [Int64] {
        try await rows(
            """
            SELECT l.instanceId FROM pending_list l JOIN pending_reload p ON p.instanceId = l.instanceId
            WHERE l.requests::jsonb @> jsonb_build_array(\(request)::bigint)
            """
        ).map { try $0.decode(Int64.self) }
    }

    /// The requests of the push with this apns-id, oldest first.
    public func requests(apnsID: String) async throws -> [Int64] {
        // One probe of request_on_block_apns_id per block of 1,024 ids, newest block first.
        try await rows(
            """
            SELECT r.id FROM generate_series((SELECT COALESCE(MAX(id), 0) >> 10 FROM request), 0, -1) AS block(number)
            JOIN request r ON (r.id >> 10) = block.number AND r.apnsId = \(apnsID.lowercased())
            ORDER BY r.id
            """
        ).map { try $0.decode(Int64.self) }
    }

    /// A request with its decisions, or nil.
    public func requestRecord(_ id: Int64) async throws -> RequestRecord? {
        guard let row = try await rows(
            """
            SELECT r.id, a.bundle, r.source, r.receivedAt, r.priority, r.expiration, r.collapseId, r.exempt, r.summary, r.apnsId,
                   r.decisionInstanceId, r.decisionKind, r.decisionDue, r.decisionReason, w.widgetID, w.kind AS widgetKind, d.token
            FROM request r JOIN app a ON a.id = r.appId
            LEFT JOIN widget w ON w.id = r.decisionInstanceId LEFT JOIN device d ON d.id = w.deviceId
            WHERE r.id = \(id)
            """
        ).first else { return nil }
        let columns = row.makeRandomAccess()
        var decisions: [RequestRecord.DecisionRow] = []
        if let kind = try columns["decisionkind"].decode(String?.self) {
            decisions.append(
                RequestRecord.DecisionRow(
                    instance: try columns["decisioninstanceid"].decode(Int64?.self),
                    widgetID: try columns["widgetid"].decode(String?.self),
                    kind: try columns["widgetkind"].decode(String?.self),
                    deviceToken: try columns["token"].decode(String?.self),
                    decision: kind,
                    due: try columns["decisiondue"].decode(Int64?.self).map(Timestamp.init(milliseconds:)),
                    reason: try columns["decisionreason"].decode(String?.self) ?? ""
                )
            )
        }
        for row in try await rows(
            """
            SELECT dc.instanceId, dc.kind, dc.due, dc.reason, w.widgetID, w.kind, d.token
            FROM decision dc LEFT JOIN widget w ON w.id = dc.instanceId LEFT JOIN device d ON d.id = w.deviceId
            WHERE dc.requestId = \(id) ORDER BY dc.seq
            """
        ) {
            let (instance, decision, due, reason, widgetID, kind, token) = try row.decode(
                (Int64?, String, Int64?, String, String?, String?, String?).self
            )
            decisions.append(
                RequestRecord.DecisionRow(
                    instance: instance, widgetID: widgetID, kind: kind, deviceToken: token, decision: decision,
                    due: due.map(Timestamp.init(milliseconds:)), reason: reason
                )
            )
        }
        return RequestRecord(
            id: try columns["id"].decode(Int64.self),
            bundle: try columns["bundle"].decode(String.self),
            source: try columns["source"].decode(String.self),
            receivedAt: Timestamp(milliseconds: try columns["receivedat"].decode(Int64.self)),
            priority: Int(try columns["priority"].decode(Int64.self)),
            expiration: try columns["expiration"].decode(Int64?.self).map(Timestamp.init(milliseconds:)),
            collapseID: try columns["collapseid"].decode(String?.self),
            exempt: try columns["exempt"].decode(Bool.self),
            summary: try columns["summary"].decode(String.self),
            apnsID: try columns["apnsid"].decode(String?.self),
            decisions: decisions
        )
    }

    /// The deliveries that serve `request`, oldest first.
    public func deliveries(serving request: Int64) async throws -> [DeliveryRecord] {
        try await deliveryRecords(
            "SELECT \(unescaped: Self.deliveryRecordColumns) WHERE dl.requests::jsonb @> jsonb_build_array(\(request)::bigint) ORDER BY dl.releasedAt, dl.apnsId"
        )
    }

    /// The delivery with this apns-id, or nil.
    public func delivery(apnsID: String) async throws -> DeliveryRecord? {
        try await deliveryRecords("SELECT \(unescaped: Self.deliveryRecordColumns) WHERE dl.apnsId = \(apnsID.lowercased())").first
    }

    /// The last `limit` deliveries to the device `token` of `bundle`, newest first.
    public func recentDeliveries(bundle: String, deviceToken: String, limit: Int) async throws -> [DeliveryRecord] {
        try await deliveryRecords(
            """
            SELECT \(unescaped: Self.deliveryRecordColumns) WHERE a.bundle = \(bundle) AND d.token = \(deviceToken)
            ORDER BY dl.releasedAt DESC, dl.apnsId DESC LIMIT \(Int64(max(0, limit)))
            """
        )
    }

    static let deliveryRecordColumns = deliveryColumns + """
        , d.token, a.bundle FROM delivery dl LEFT JOIN device d ON d.id = dl.deviceId LEFT JOIN app a ON a.id = d.appId
        """

    private func deliveryRecords(_ query: PostgresQuery) async throws -> [DeliveryRecord] {
        try await rows(query).compactMap { row in
            guard let delivery = try Self.recordedDelivery(row) else { return nil }
            let columns = row.makeRandomAccess()
            return DeliveryRecord(
                delivery: delivery,
                bundle: try columns["bundle"].decode(String?.self),
                deviceToken: try columns["token"].decode(String?.self),
                updatedAt: try columns["updatedat"].decode(Int64?.self).map(Timestamp.init(milliseconds:))
            )
        }
    }

    /// The device `token` (of any app when `bundle` is nil): its app and widget instances with timelines.
    public func instances(ofDevice token: String, bundle: String?) async throws -> [(bundle: String, instance: InstanceRecord)] {
        try await rows(
            """
            SELECT a.bundle, w.id, w.widgetID, w.kind, w.family, w.configuration, t.policy, t.reportedAt
            FROM device d JOIN app a ON a.id = d.appId JOIN widget w ON w.deviceId = d.id
            LEFT JOIN timeline t ON t.widgetId = w.id
            WHERE d.token = \(token.lowercased()) AND d.active AND (\(bundle)::text IS NULL OR a.bundle = \(bundle))
            ORDER BY a.bundle COLLATE "C", w.widgetID COLLATE "C"
            """
        ).map { row in
            let (bundle, id, widgetID, kind, family, configuration, policy, reported) = try row.decode(
                (String, Int64, String, String, String, String, String?, Int64?).self
            )
            return (
                bundle,
                InstanceRecord(
                    instance: id, widgetID: widgetID, kind: kind, family: family, configuration: configuration,
                    timelinePolicy: policy, timelineReportedAt: reported.map(Date.init(storedMilliseconds:))
                )
            )
        }
    }

    /// Counts of decisions, deliveries and pending reloads.
    public func statistics() async throws -> LedgerStatistics {
        func counts(_ query: PostgresQuery) async throws -> [String: Int] {
            var result: [String: Int] = [:]
            for row in try await rows(query) {
                let (key, count) = try row.decode((String?, Int64).self)
                result[key ?? "?"] = Int(count)
            }
            return result
        }
        let pending = try await rows("SELECT count(*), min(due) FROM pending_reload").first!.decode((Int64, Int64?).self)
        let oldestOpen = try await rows("SELECT min(releasedAt) FROM delivery WHERE state IN ('pending', 'sending')").first!
            .decode(Int64?.self)
        let unknown = try await rows("SELECT coalesce(sum(unknownOutcomes), 0)::bigint FROM delivery").first!.decode(Int64.self)
        return LedgerStatistics(
            decisionsByKind: try await counts(
                """
                SELECT kind, count(*) FROM (
                    SELECT decisionKind AS kind FROM request WHERE decisionKind IS NOT NULL UNION ALL SELECT kind FROM decision
                ) k GROUP BY kind
                """
            ),
            deliveriesByState: try await counts("SELECT state, count(*) FROM delivery GROUP BY state"),
            failuresByReason: try await counts("SELECT lastError, count(*) FROM delivery WHERE state = 'failed' GROUP BY lastError"),
            pendingReloads: Int(pending.0),
            oldestPendingDue: pending.1.map(Timestamp.init(milliseconds:)),
            oldestOpenDelivery: oldestOpen.map(Timestamp.init(milliseconds:)),
            unknownOutcomes: Int(unknown)
        )
    }

    /// Devices, by app and token.
    public func devices(bundle: String?, token: String?, limit: Int) async throws -> [DeviceRecord] {
        let token = token?.lowercased()
        return try await rows(
            """
            SELECT a.bundle, d.token, d.active, d.registeredAt, d.unregisteredAt,
                   (SELECT count(*) FROM widget w WHERE w.deviceId = d.id),
                   (SELECT count(*) FROM widget w JOIN pending_reload p ON p.instanceId = w.id WHERE w.deviceId = d.id), d.pushType
            FROM device d JOIN app a ON a.id = d.appId
            WHERE (\(bundle)::text IS NULL OR a.bundle = \(bundle)) AND (\(token)::text IS NULL OR d.token = \(token))
            ORDER BY a.bundle COLLATE "C", d.token COLLATE "C"
            LIMIT \(Int64(max(0, limit)))
            """
        ).map { row in
            let (bundle, token, active, registered, unregistered, widgets, pending, pushType) = try row.decode(
                (String, String, Bool, Int64, Int64?, Int64, Int64, String).self
            )
            return DeviceRecord(
                bundle: bundle, token: token, active: active, registeredAt: Date(storedMilliseconds: registered),
                unregisteredAt: unregistered.map(Date.init(storedMilliseconds:)), widgets: Int(widgets), pendingReloads: Int(pending),
                pushType: PushType(rawValue: pushType) ?? .widgets
            )
        }
    }

    /// Counts the ledger's rows.
    public func ledgerCounts() async throws -> LedgerCounts {
        let row = try await rows(
            """
            SELECT (SELECT count(*) FROM request), (SELECT count(*) FROM decision),
                   (SELECT count(*) FROM request WHERE decisionKind IS NOT NULL), (SELECT count(*) FROM pending_reload),
                   (SELECT count(*) FROM delivery), (SELECT count(*) FROM idempotency)
            """, deadline: Self.readDeadline).first!
        let (requests, decisions, inline, pending, deliveries, keys) = try row.decode((Int64, Int64, Int64, Int64, Int64, Int64).self)
        return LedgerCounts(
            requests: Int(requests), decisions: Int(decisions + inline), pendingReloads: Int(pending),
            deliveries: Int(deliveries), idempotencyKeys: Int(keys)
        )
    }
}

