import PostgresNIO
public import ReloadGateCore

extension PostgresStore {
    /// What `reloadgate export` reads, as ``SQLiteStore/exportLedger(since:bundle:)`` does: the registry's
    /// active devices (of `bundle`, or all), their timelines, and the requests received at or after `since`
    /// with their decisions on arrival, in request order. The whole cluster's ledger, whichever gateway
    /// took the requests; one read-only transaction at repeatable read, so that the picture is consistent
    /// while gateways write. `progress` is told the rows read so far after each row.
    public func exportLedger(since: Timestamp, bundle: String?, progress: (@Sendable (Int) -> Void)? = nil) async throws -> LedgerExport {
        let logger = logger
        return try await transaction(deadline: Self.readDeadline) { connection in
            _ = try await connection.rows("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY", logger: logger)
            var export = LedgerExport.Builder(progress: progress)
            for row in try await connection.rows(
                """
                SELECT d.id, a.bundle, d.token, d.pushType FROM device d JOIN app a ON a.id = d.appId
                WHERE d.active AND (\(bundle)::text IS NULL OR a.bundle = \(bundle)) ORDER BY d.id
                """,
                logger: logger
            ) {
                let columns = row.makeRandomAccess()
                export.add(
                    device: try columns["id"].decode(Int64.self), bundle: try columns["bundle"].decode(String.self),
                    token: try columns["token"].decode(String.self), pushType: try columns["pushtype"].decode(String.self)
                )
            }
            for row in try await connection.rows("SELECT id, deviceId, widgetID, kind FROM widget ORDER BY id", logger: logger) {
                let columns = row.makeRandomAccess()
                export.add(
                    widget: try columns["id"].decode(Int64.self), device: try columns["deviceid"].decode(Int64.self),
                    widgetID: try columns["widgetid"].decode(String.self), kind: try columns["kind"].decode(String.self)
                )
            }
            for row in try await connection.rows(
                "SELECT widgetId, plannedReload, reportedAt FROM timeline ORDER BY reportedAt, widgetId", logger: logger
            ) {
                let columns = row.makeRandomAccess()
                export.add(
                    timeline: try columns["widgetid"].decode(Int64.self), plannedReload: try columns["plannedreload"].decode(Int64?.self),
                    reportedAt: try columns["reportedat"].decode(Int64.self)
                )
            }
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
                // PostgreSQL folds unquoted column names to lower case.
                let columns = row.makeRandomAccess()
                export.add(
                    request: LedgerExport.Request(
                        id: try columns["id"].decode(Int64.self),
                        app: try columns["appid"].decode(Int64.self),
                        source: try columns["source"].decode(String.self),
                        received: Timestamp(milliseconds: try columns["receivedat"].decode(Int64.self)),
                        priority: Int(try columns["priority"].decode(Int64.self)),
                        expiration: try columns["expiration"].decode(Int64?.self).map(Timestamp.init(milliseconds:)),
                        collapseID: try columns["collapseid"].decode(String?.self),
                        exempt: try columns["exempt"].decode(Bool.self),
                        decisions: []
                    ),
                    firstDecision: (try columns["decisioninstanceid"].decode(Int64?.self), try columns["decisionkind"].decode(String?.self))
                )
            }
            // A request's other decisions, in the order they were made (`seq`).
            if let first = export.firstRequest {
                for row in try await connection.rows(
                    "SELECT requestId, instanceId, kind FROM decision WHERE requestId >= \(first) ORDER BY seq", logger: logger
                ) {
                    let columns = row.makeRandomAccess()
                    export.add(
                        decision: try columns["kind"].decode(String.self), request: try columns["requestid"].decode(Int64.self),
                        instance: try columns["instanceid"].decode(Int64?.self)
                    )
                }
            }
            return export.export
        }
    }
}
