import PostgresNIO
public import ReloadGateCore

extension PostgresStore {
    /// What `reloadgate export` reads, as ``SQLiteStore/exportLedger(since:bundle:)`` does: the registry's
    /// active devices (of `bundle`, or all), their timelines, and the requests received at or after `since`
    /// with their decisions on arrival, in request order. The whole cluster's ledger, whichever gateway
    /// took the requests; one read-only transaction at repeatable read, so that the picture is consistent
    /// while gateways write.
    public func exportLedger(since: Timestamp, bundle: String?) async throws -> LedgerExport {
        let logger = logger
        return try await transaction(deadline: Self.readDeadline) { connection in
            _ = try await connection.rows("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY", logger: logger)
            var devices: [LedgerExport.Device] = []
            var deviceIndex: [Int64: Int] = [:]
            for row in try await connection.rows(
                """
                SELECT d.id, a.bundle, d.token, d.pushType FROM device d JOIN app a ON a.id = d.appId
                WHERE d.active AND (\(bundle)::text IS NULL OR a.bundle = \(bundle)) ORDER BY d.id
                """,
                logger: logger
            ) {
                let (id, bundle, token, pushType) = try row.decode((Int64, String, String, String).self)
                deviceIndex[id] = devices.count
                devices.append(LedgerExport.Device(
                    id: id, bundle: bundle, token: token, pushType: PushType(rawValue: pushType) ?? .widgets, widgets: []
                ))
            }
            var widgetIDs = Set<Int64>()
            for row in try await connection.rows("SELECT id, deviceId, widgetID, kind FROM widget ORDER BY id", logger: logger) {
                let (id, device, widgetID, kind) = try row.decode((Int64, Int64, String, String).self)
                guard let index = deviceIndex[device] else { continue }
                devices[index].widgets.append(LedgerExport.Widget(id: id, widgetID: widgetID, kind: kind))
                widgetIDs.insert(id)
            }
            var timelines: [LedgerExport.Timeline] = []
            for row in try await connection.rows(
                "SELECT widgetId, plannedReload, reportedAt FROM timeline ORDER BY reportedAt, widgetId", logger: logger
            ) {
                let (widget, planned, reported) = try row.decode((Int64, Int64?, Int64).self)
                guard widgetIDs.contains(widget) else { continue }
                timelines.append(
                    LedgerExport.Timeline(
                        widget: widget, plannedReload: planned.map(Timestamp.init(milliseconds:)), reportedAt: Timestamp(milliseconds: reported)
                    )
                )
            }
            let onArrival = Set(DecisionKind.onArrival.map(\.rawValue))
            var requests: [LedgerExport.Request] = []
            var requestIndex: [Int64: Int] = [:]
            for row in try await connection.rows(
                """
                SELECT r.id, r.appId, r.source, r.receivedAt, r.priority, r.expiration, r.collapseId, r.exempt,
                       r.decisionInstanceId, r.decisionKind
                FROM request r JOIN app a ON a.id = r.appId
                WHERE r.receivedAt >= \(since.milliseconds) AND (\(bundle)::text IS NULL OR a.bundle = \(bundle))
                  AND r.source IN ('push', 'webhook')
                ORDER BY r.id
                """,
                logger: logger
            ) {
                let columns = row.makeRandomAccess()
                let id = try columns[0].decode(Int64.self)
                var decisions: [(instance: Int64?, kind: String)] = []
                if let kind = try columns[9].decode(String?.self), onArrival.contains(kind) {
                    decisions.append((try columns[8].decode(Int64?.self), kind))
                }
                requestIndex[id] = requests.count
                requests.append(
                    LedgerExport.Request(
                        id: id,
                        app: try columns[1].decode(Int64.self),
                        source: try columns[2].decode(String.self),
                        received: Timestamp(milliseconds: try columns[3].decode(Int64.self)),
                        priority: Int(try columns[4].decode(Int64.self)),
                        expiration: try columns[5].decode(Int64?.self).map(Timestamp.init(milliseconds:)),
                        collapseID: try columns[6].decode(String?.self),
                        exempt: try columns[7].decode(Bool.self),
                        decisions: decisions
                    )
                )
            }
            // A request's other decisions, in the order they were made (`seq`).
            if let first = requests.first?.id {
                for row in try await connection.rows(
                    "SELECT requestId, instanceId, kind FROM decision WHERE requestId >= \(first) ORDER BY seq", logger: logger
                ) {
                    let (request, instance, kind) = try row.decode((Int64, Int64?, String).self)
                    guard let index = requestIndex[request], onArrival.contains(kind) else { continue }
                    requests[index].decisions.append((instance, kind))
                }
            }
            return LedgerExport(devices: devices, timelines: timelines, requests: requests)
        }
    }
}
