import PostgresNIO
public import ReloadGateCore

extension PostgresStore {
    /// The dashboard's figures (``DashboardFigures``) for `bundle`'s app, or every app when `nil`: the
    /// whole cluster's, whichever gateway answers. Scans the ledger as ``statistics()`` does.
    public func dashboardFigures(bundle: String?, now: Timestamp) async throws -> DashboardFigures {
        var figures = DashboardFigures()
        figures.bundles = try await rows("SELECT bundle FROM app ORDER BY bundle COLLATE \"C\"", deadline: Self.readDeadline).map { try $0.decode(String.self) }
        var app: Int64?
        if let bundle {
            // An unknown app has nothing: every figure stays zero.
            guard let id = try await rows("SELECT id FROM app WHERE bundle = \(bundle)", deadline: Self.readDeadline).first?.decode(Int64.self) else { return figures }
            app = id
        }
        let since = (now.milliseconds / DashboardFigures.hour - 23) * DashboardFigures.hour
        for row in try await rows(
            """
            SELECT receivedAt / \(DashboardFigures.hour), kind, count(*) FROM (
                SELECT receivedAt, decisionKind AS kind FROM request WHERE decisionKind IS NOT NULL AND (\(app)::bigint IS NULL OR appId = \(app))
                UNION ALL SELECT r.receivedAt, d.kind FROM decision d JOIN request r ON r.id = d.requestId
                    WHERE (\(app)::bigint IS NULL OR r.appId = \(app))
            ) k GROUP BY 1, 2
            """, deadline: Self.readDeadline) {
            let (hour, kind, count) = try row.decode((Int64, String, Int64).self)
            figures.decisionsByKind[kind, default: 0] += Int(count)
            if hour * DashboardFigures.hour >= since { figures.addDecisions(hour: hour, kind: kind, count: Int(count), now: now) }
        }
        for row in try await rows(
            """
            SELECT dl.state, dl.lastError, count(*), coalesce(sum(greatest(dl.attempts - 1, 0)), 0)::bigint,
                coalesce(sum(dl.unknownOutcomes), 0)::bigint
            FROM delivery dl JOIN device d ON d.id = dl.deviceId
            WHERE (\(app)::bigint IS NULL OR d.appId = \(app)) GROUP BY 1, 2
            """, deadline: Self.readDeadline) {
            let (state, error, count, retries, unknown) = try row.decode((String, String?, Int64, Int64, Int64).self)
            figures.deliveriesByState[state, default: 0] += Int(count)
            if state == "failed" { figures.failuresByReason[error ?? "?", default: 0] += Int(count) }
            figures.retries += Int(retries)
            figures.unknownOutcomes += Int(unknown)
        }
        figures.oldestOpenDelivery = try await rows(
            """
            SELECT min(dl.releasedAt) FROM delivery dl JOIN device d ON d.id = dl.deviceId
            WHERE dl.state IN ('pending', 'sending') AND (\(app)::bigint IS NULL OR d.appId = \(app))
            """, deadline: Self.readDeadline).first?.decode(Int64?.self).map(Timestamp.init(milliseconds:))
        for row in try await rows(
            PostgresQuery(
                unsafeSQL: """
                    SELECT \(DashboardFigures.pendingBin(dueColumn: "p.due", now: now.milliseconds))::bigint, count(*)
                    FROM pending_reload p JOIN widget w ON w.id = p.instanceId JOIN device d ON d.id = w.deviceId
                    WHERE ($1::bigint IS NULL OR d.appId = $1) GROUP BY 1
                    """,
                binds: { var binds = PostgresBindings(); binds.append(app); return binds }()
            ), deadline: Self.readDeadline) {
            let (bin, count) = try row.decode((Int64, Int64).self)
            figures.addPending(bin: bin, count: Int(count))
        }
        figures.unregisteredDevices = Int(
            try await rows("SELECT count(*) FROM device WHERE NOT active AND (\(app)::bigint IS NULL OR appId = \(app))", deadline: Self.readDeadline).first!.decode(Int64.self)
        )
        figures.recentlyUnregistered = try await rows(
            """
            SELECT a.bundle, d.token, d.unregisteredAt FROM device d JOIN app a ON a.id = d.appId
            WHERE NOT d.active AND d.unregisteredAt IS NOT NULL AND (\(app)::bigint IS NULL OR d.appId = \(app))
            ORDER BY d.unregisteredAt DESC, d.id DESC LIMIT 10
            """, deadline: Self.readDeadline).map { row in
            let (bundle, token, since) = try row.decode((String, String, Int64).self)
            return UnregisteredDevice(bundle: bundle, token: token, since: Timestamp(milliseconds: since))
        }
        return figures
    }

    /// The given instances by name.
    public func instanceDescriptions(_ instances: [Int64]) async throws -> [InstanceDescription] {
        guard !instances.isEmpty else { return [] }
        return try await rows(
            """
            SELECT w.id, a.bundle, d.token, w.widgetID, w.kind FROM widget w
            JOIN device d ON d.id = w.deviceId JOIN app a ON a.id = d.appId
            WHERE w.id = ANY(\(instances)) ORDER BY w.id
            """, deadline: Self.readDeadline).map { row in
            let (id, bundle, token, widget, kind) = try row.decode((Int64, String, String, String, String).self)
            return InstanceDescription(instance: id, bundle: bundle, token: token, widgetID: widget, kind: kind)
        }
    }
}
