public import ReloadGateCore

extension SQLStore {
    /// The dashboard's figures (``DashboardFigures``) for `bundle`'s app, or every app when `nil` (on a
    /// shared store, the whole cluster's, whichever gateway answers). Scans the ledger as ``statistics()``
    /// does (the request table has no index on time): for a page refreshed every few seconds, not for the
    /// hot path.
    public func dashboardFigures(bundle: String?, now: Timestamp) async throws -> DashboardFigures {
        try await reading(scanning: true) { session in
            var figures = DashboardFigures()
            figures.bundles = try await session.rows("SELECT bundle FROM app ORDER BY bundle\(SQLCollation.binary)").map { try $0.string("bundle") }
            // Every query below is of one app (`app`) or of all.
            var app: SQLQuery = ""
            var deviceApp: SQLQuery = ""
            if let bundle {
                // An unknown app has nothing: every figure stays zero.
                guard let id = try await session.row("SELECT id FROM app WHERE bundle = \(bundle)")?.int64("id") else { return figures }
                app = " AND appId = \(id)"
                deviceApp = " AND d.appId = \(id)"
            }
            let since = (now.milliseconds / DashboardFigures.hour - 23) * DashboardFigures.hour
            for row in try await session.rows("""
                SELECT receivedAt / \(DashboardFigures.hour) AS hour, kind, CAST(sum(n) AS bigint) AS count FROM (
                    SELECT receivedAt, decisionKind AS kind, 1 AS n FROM request WHERE decisionKind IS NOT NULL\(app)
                    UNION ALL SELECT r.receivedAt, d.kind, d.count FROM decision_run d JOIN request r ON r.id = d.requestId
                        WHERE r.id IS NOT NULL\(app)
                ) decided GROUP BY 1, 2
                """) {
                let (hour, kind, count) = (try row.int64("hour"), try row.string("kind"), try row.int("count"))
                figures.decisionsByKind[kind, default: 0] += count
                if hour * DashboardFigures.hour >= since { figures.addDecisions(hour: hour, kind: kind, count: count, now: now) }
            }
            for row in try await session.rows("""
                SELECT \(unescaped: RecordedDelivery.stateSQL) AS state, dl.lastError, count(*) AS count,
                    CAST(coalesce(sum(CASE WHEN dl.attempts > 1 THEN dl.attempts - 1 ELSE 0 END), 0) AS bigint) AS retries,
                    CAST(coalesce(sum(dl.unknownOutcomes), 0) AS bigint) AS unknown
                FROM delivery dl JOIN device d ON d.id = dl.deviceId WHERE true\(deviceApp) GROUP BY 1, 2
                """) {
                let (state, count) = (try row.string("state"), try row.int("count"))
                figures.deliveriesByState[state, default: 0] += count
                if state == "failed" { figures.failuresByReason[try row.optionalString("lastError") ?? "?", default: 0] += count }
                figures.retries += try row.int("retries")
                figures.unknownOutcomes += try row.int("unknown")
            }
            figures.oldestOpenDelivery = try await session.row("""
                SELECT min(dl.releasedAt) AS oldest FROM delivery dl JOIN device d ON d.id = dl.deviceId
                WHERE dl.state IN ('pending', 'sending')\(deviceApp)
                """)?.optionalInt64("oldest").map(Timestamp.init(milliseconds:))
            for row in try await session.rows("""
                SELECT CAST(\(unescaped: DashboardFigures.pendingBin(dueColumn: "p.due", now: now.milliseconds)) AS bigint) AS bin, count(*) AS count
                FROM pending_reload p JOIN widget w ON w.id = p.instanceId JOIN device d ON d.id = w.deviceId WHERE true\(deviceApp) GROUP BY 1
                """) {
                figures.addPending(bin: try row.int64("bin"), count: try row.int("count"))
            }
            figures.unregisteredDevices = try await session.row("SELECT count(*) AS count FROM device WHERE NOT active\(app)")?.int("count") ?? 0
            figures.recentlyUnregistered = try await session.rows("""
                SELECT a.bundle, d.token, d.unregisteredAt FROM device d JOIN app a ON a.id = d.appId
                WHERE NOT d.active AND d.unregisteredAt IS NOT NULL\(deviceApp)
                ORDER BY d.unregisteredAt DESC, d.id DESC LIMIT 10
                """).map {
                UnregisteredDevice(bundle: try $0.string("bundle"), token: try $0.string("token"), since: Timestamp(milliseconds: try $0.int64("unregisteredAt")))
            }
            return figures
        }
    }

    /// The given instances by name (those that no longer exist are left out).
    public func instanceDescriptions(_ instances: [Int64]) async throws -> [InstanceDescription] {
        guard !instances.isEmpty else { return [] }
        return try await reading(scanning: true) { session in
            try await session.rows("""
                SELECT w.id, a.bundle, d.token, w.widgetID, w.kind, d.pushType FROM widget w
                JOIN device d ON d.id = w.deviceId JOIN app a ON a.id = d.appId
                WHERE w.id IN \(ids: instances) ORDER BY w.id
                """).map {
                InstanceDescription(
                    instance: try $0.int64("id"), bundle: try $0.string("bundle"), token: try $0.string("token"),
                    widgetID: try $0.string("widgetID"), kind: try $0.string("kind"), pushType: try $0.string("pushType")
                )
            }
        }
    }
}
