public import ReloadGateCore

// The herd forecast's counts. Written once for both engines.

extension SQLStore {
    /// The reloads ahead in the `minutes` from `start` (a whole minute), per app, kind and minute: every
    /// active instance's next planned timeline reload in the window, and every pending reload (one due
    /// before `start` counts in the first minute: it goes as soon as it can). On a shared store, the
    /// whole cluster's, whichever gateway answers.
    ///
    /// One scan of `instance_state` and of `pending_reload`, each row joined to its widget, device and
    /// app by primary key; on a read connection, so no commit waits for it.
    public func herdForecastCounts(start: Timestamp, minutes: Int, bundle: String?, kind: String?) async throws -> [HerdForecast.Count] {
        let from = start.milliseconds
        let to = from + Int64(minutes) * HerdForecast.minute
        var filter: SQLQuery = ""
        if let bundle { filter += " AND a.bundle = \(bundle)" }
        if let kind { filter += " AND w.kind = \(kind)" }
        // One row per reload ahead: its app, kind and minute (the rule of what counts, written once).
        let reloads: SQLQuery = """
            SELECT d.appId, w.kind, (s.plannedReload - \(from)) / \(HerdForecast.minute) AS minute
            FROM instance_state s JOIN widget w ON w.id = s.instanceId JOIN device d ON d.id = w.deviceId
            JOIN app a ON a.id = d.appId
            WHERE s.plannedReload >= \(from) AND s.plannedReload < \(to) AND d.active\(filter)
            UNION ALL
            SELECT d.appId, w.kind, CASE WHEN p.due < \(from) THEN 0 ELSE (p.due - \(from)) / \(HerdForecast.minute) END
            FROM pending_reload p JOIN widget w ON w.id = p.instanceId JOIN device d ON d.id = w.deviceId
            JOIN app a ON a.id = d.appId
            WHERE p.due < \(to) AND d.active\(filter)
            """
        return try await reading(scanning: true) { [reloads] session in
            let bundles = Dictionary(uniqueKeysWithValues: try await session.rows("SELECT id, bundle FROM app").map {
                (try $0.int64("id"), try $0.string("bundle"))
            })
            var counts: [CountKey: Int] = [:]
            switch session.dialect {
            case .sqlite:
                // Counted here, in a dictionary: SQLite hands rows over one by one, and its GROUP BY (a
                // B-tree) costs most of the query (docs/DECISIONS.md, "The herd forecast is read from the store").
                try await session.forEachRow(reloads) { row in
                    counts[CountKey(app: try row.int64("appId"), kind: try row.string("kind"), minute: try row.int64("minute")), default: 0] += 1
                }
            case .postgres:
                // Counted by PostgreSQL (a hash aggregate), whose result arrives whole.
                try await session.forEachRow("SELECT appId, kind, minute, count(*) AS count FROM (\(reloads)) ahead GROUP BY 1, 2, 3") { row in
                    counts[CountKey(app: try row.int64("appId"), kind: try row.string("kind"), minute: try row.int64("minute")), default: 0] += try row.int("count")
                }
            }
            return counts.compactMap { key, count in
                bundles[key.app].map { HerdForecast.Count(bundle: $0, kind: key.kind, minute: Int(key.minute), count: count) }
            }
        }
    }
}

/// The herd forecast's counts are kept by app id, kind and minute until the apps are named.
private struct CountKey: Hashable {
    var app: Int64
    var kind: String
    var minute: Int64
}
