public import ReloadGateCore

// The herd forecast's counts. Written once for both engines.

extension SQLStore {
    /// The reloads ahead in the `minutes` from `start` (a whole minute), per app, kind and minute: every
    /// active instance's next planned timeline reload in the window, and every pending reload (one due
    /// before `start` counts in the first minute: it goes as soon as it can). On a shared store, the
    /// whole cluster's, whichever gateway answers.
    ///
    /// One scan of `instance_state` and of `pending_reload`, each row joined to its widget, device and
    /// app by primary key, grouped in the database; on a read connection, so no commit waits for it.
    public func herdForecastCounts(start: Timestamp, minutes: Int, bundle: String?, kind: String?) async throws -> [HerdForecast.Count] {
        let from = start.milliseconds
        let to = from + Int64(minutes) * HerdForecast.minute
        var filter: SQLQuery = ""
        if let bundle { filter += " AND a.bundle = \(bundle)" }
        if let kind { filter += " AND w.kind = \(kind)" }
        let query: SQLQuery = """
            SELECT bundle, kind, minute, CAST(sum(n) AS bigint) AS count FROM (
                SELECT a.bundle, w.kind, (s.plannedReload - \(from)) / \(HerdForecast.minute) AS minute, 1 AS n
                FROM instance_state s JOIN widget w ON w.id = s.instanceId JOIN device d ON d.id = w.deviceId
                JOIN app a ON a.id = d.appId
                WHERE s.plannedReload >= \(from) AND s.plannedReload < \(to) AND d.active\(filter)
                UNION ALL
                SELECT a.bundle, w.kind, CASE WHEN p.due < \(from) THEN 0 ELSE (p.due - \(from)) / \(HerdForecast.minute) END, 1
                FROM pending_reload p JOIN widget w ON w.id = p.instanceId JOIN device d ON d.id = w.deviceId
                JOIN app a ON a.id = d.appId
                WHERE p.due < \(to) AND d.active\(filter)
            ) ahead GROUP BY 1, 2, 3
            """
        return try await reading(scanning: true) { [query] session in
            var counts: [HerdForecast.Count] = []
            try await session.forEachRow(query) { row in
                counts.append(HerdForecast.Count(
                    bundle: try row.string("bundle"), kind: try row.string("kind"), minute: Int(try row.int64("minute")), count: try row.int("count")
                ))
            }
            return counts
        }
    }
}
