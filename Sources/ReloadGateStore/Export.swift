public import ReloadGateCore

extension SQLStore {
    /// What `reloadgate export` reads: the registry's active devices (of `bundle`, or all), their
    /// timelines, and the requests received at or after `since` with their decisions on arrival (later
    /// ones, `cancelled`, are left out), in request order. One read transaction over one snapshot: a
    /// consistent picture while gateways write (on a shared store, the whole cluster's ledger). `progress`
    /// is told the rows read so far after each row.
    public func exportLedger(since: Timestamp, bundle: String?, progress: (@Sendable (Int) -> Void)? = nil) async throws -> LedgerExport {
        try await reading(scanning: true) { session in
            try await session.readSnapshot()
            var export = LedgerExport.Builder(progress: progress)
            var devices: SQLQuery = "SELECT d.id, a.bundle, d.token, d.pushType FROM device d JOIN app a ON a.id = d.appId WHERE d.active"
            if let bundle { devices += " AND a.bundle = \(bundle)" }
            try await session.forEachRow(devices + " ORDER BY d.id") { row in
                export.add(device: try row.int64("id"), bundle: try row.string("bundle"), token: try row.string("token"), pushType: try row.string("pushType"))
            }
            try await session.forEachRow("SELECT id, deviceId, widgetID, kind, family FROM widget ORDER BY id") { row in
                export.add(
                    widget: try row.int64("id"), device: try row.int64("deviceId"), widgetID: try row.string("widgetID"), kind: try row.string("kind"),
                    family: try row.string("family")
                )
            }
            try await session.forEachRow("SELECT widgetId, plannedReload, reportedAt FROM timeline ORDER BY reportedAt, widgetId") { row in
                export.add(timeline: try row.int64("widgetId"), plannedReload: try row.optionalInt64("plannedReload"), reportedAt: try row.int64("reportedAt"))
            }
            var requests: SQLQuery = """
                SELECT r.id, r.appId, r.source, r.receivedAt, r.priority, r.expiration, r.collapseId, r.exempt, r.summary,
                       r.decisionInstanceId, r.decisionKind
                FROM request r JOIN app a ON a.id = r.appId
                WHERE r.receivedAt >= \(since.milliseconds) AND r.source IN ('push', 'webhook')
                """
            if let bundle { requests += " AND a.bundle = \(bundle)" }
            try await session.forEachRow(requests + " ORDER BY r.id") { row in
                export.add(
                    request: LedgerExport.Request(
                        id: try row.int64("id"), app: try row.int64("appId"), source: try row.string("source"),
                        received: Timestamp(milliseconds: try row.int64("receivedAt")), priority: try row.int("priority"),
                        expiration: try row.optionalInt64("expiration").map(Timestamp.init(milliseconds:)),
                        collapseID: try row.optionalString("collapseId"), exempt: try row.bool("exempt"), summary: try row.string("summary"),
                        decisions: []
                    ),
                    firstDecision: (try row.optionalInt64("decisionInstanceId"), try row.optionalString("decisionKind"))
                )
            }
            // A request's other decisions, in the order they were made: a run's instances, or `count`
            // no-matches.
            if let first = export.firstRequest {
                try await session.forEachRow("SELECT requestId, kind, instances, count FROM decision_run WHERE requestId >= \(first) ORDER BY seq") { row in
                    let instances = IntegerList.parse(try row.string("instances"))
                    let listed: [Int64?] = instances.isEmpty ? Array(repeating: nil, count: max(0, try row.int("count"))) : instances
                    for instance in listed { export.add(decision: try row.string("kind"), request: try row.int64("requestId"), instance: instance) }
                }
            }
            return export.export
        }
    }
}
