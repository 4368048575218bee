import GRDB
public import ReloadGateCore

extension SQLiteStore {
    /// The dashboard's figures (``DashboardFigures``) for `bundle`'s app, or every app when `nil`. Scans
    /// the ledger as ``statistics()`` does (the request table has no index on time): for a page refreshed
    /// every few seconds, not for the hot path.
    public func dashboardFigures(bundle: String?, now: Timestamp) throws -> DashboardFigures {
        try writer.read { db in
            var figures = DashboardFigures()
            figures.bundles = try String.fetchAll(db, sql: "SELECT bundle FROM app ORDER BY bundle")
            var app: Int64?
            if let bundle {
                // An unknown app has nothing: every figure stays zero.
                guard let id = try Int64.fetchOne(db, sql: "SELECT id FROM app WHERE bundle = ?", arguments: [bundle]) else { return figures }
                app = id
            }
            let appArguments: StatementArguments = [app]
            let since = (now.milliseconds / DashboardFigures.hour - 23) * DashboardFigures.hour
            for row in try Row.fetchAll(
                db,
                sql: """
                    SELECT receivedAt / \(DashboardFigures.hour), kind, sum(n) FROM (
                        SELECT receivedAt, decisionKind AS kind, 1 AS n FROM request WHERE decisionKind IS NOT NULL AND (?1 IS NULL OR appId = ?1)
                        UNION ALL SELECT r.receivedAt, d.kind, 1 FROM decision d JOIN request r ON r.id = d.requestId WHERE (?1 IS NULL OR r.appId = ?1)
                        UNION ALL SELECT r.receivedAt, d.kind, d.count FROM decision_run d JOIN request r ON r.id = d.requestId WHERE (?1 IS NULL OR r.appId = ?1)
                    ) GROUP BY 1, 2
                    """,
                arguments: appArguments
            ) {
                let (hour, kind, count): (Int64, String, Int) = (row[0], row[1], row[2])
                figures.decisionsByKind[kind, default: 0] += count
                if hour * DashboardFigures.hour >= since { figures.addDecisions(hour: hour, kind: kind, count: count, now: now) }
            }
            for row in try Row.fetchAll(
                db,
                sql: """
                    SELECT dl.state, dl.lastError, count(*), coalesce(sum(max(dl.attempts - 1, 0)), 0), coalesce(sum(dl.unknownOutcomes), 0)
                    FROM delivery dl JOIN device d ON d.id = dl.deviceId
                    WHERE (?1 IS NULL OR d.appId = ?1) GROUP BY 1, 2
                    """,
                arguments: appArguments
            ) {
                let (state, error, count, retries, unknown): (String, String?, Int, Int, Int) = (row[0], row[1], row[2], row[3], row[4])
                figures.deliveriesByState[state, default: 0] += count
                if state == "failed" { figures.failuresByReason[error ?? "?", default: 0] += count }
                figures.retries += retries
                figures.unknownOutcomes += unknown
            }
            figures.oldestOpenDelivery = try Int64.fetchOne(
                db,
                sql: """
                    SELECT min(dl.releasedAt) FROM delivery dl JOIN device d ON d.id = dl.deviceId
                    WHERE dl.state IN ('pending', 'sending') AND (?1 IS NULL OR d.appId = ?1)
                    """,
                arguments: appArguments
            ).map(Timestamp.init(milliseconds:))
            for row in try Row.fetchAll(
                db,
                sql: """
                    SELECT \(DashboardFigures.pendingBin(dueColumn: "p.due", now: now.milliseconds)), count(*)
                    FROM pending_reload p JOIN widget w ON w.id = p.instanceId JOIN device d ON d.id = w.deviceId
                    WHERE (?1 IS NULL OR d.appId = ?1) GROUP BY 1
                    """,
                arguments: appArguments
            ) {
                figures.addPending(bin: row[0], count: row[1])
            }
            figures.unregisteredDevices = try Int.fetchOne(
                db, sql: "SELECT count(*) FROM device WHERE NOT active AND (?1 IS NULL OR appId = ?1)", arguments: appArguments
            ) ?? 0
            figures.recentlyUnregistered = try Row.fetchAll(
                db,
                sql: """
                    SELECT a.bundle, d.token, d.unregisteredAt FROM device d JOIN app a ON a.id = d.appId
                    WHERE NOT d.active AND d.unregisteredAt IS NOT NULL AND (?1 IS NULL OR d.appId = ?1)
                    ORDER BY d.unregisteredAt DESC, d.id DESC LIMIT 10
                    """,
                arguments: appArguments
            ).map { UnregisteredDevice(bundle: $0[0], token: $0[1], since: Timestamp(milliseconds: $0[2])) }
            return figures
        }
    }

    /// The given instances by name.
    public func instanceDescriptions(_ instances: [Int64]) throws -> [InstanceDescription] {
        guard !instances.isEmpty else { return [] }
        return try writer.read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT w.id, a.bundle, d.token, w.widgetID, w.kind FROM widget w
                    JOIN device d ON d.id = w.deviceId JOIN app a ON a.id = d.appId
                    WHERE w.id IN (SELECT value FROM json_each(?)) ORDER BY w.id
                    """,
                arguments: [IntegerList.text(instances)]
            ).map { InstanceDescription(instance: $0[0], bundle: $0[1], token: $0[2], widgetID: $0[3], kind: $0[4]) }
        }
    }
}
