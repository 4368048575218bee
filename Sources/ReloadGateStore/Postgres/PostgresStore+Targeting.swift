public import Foundation
import PostgresNIO
public import ReloadGateCore

// Which widget instances a webhook call targets.

extension PostgresStore {
    /// The push-enabled widget instances of the app's active devices that the target selects, ordered
    /// by instance id (values compared by type and value, as SQLite's store does).
    public func targetInstances(app: App, target: ReloadTarget) async throws -> [(instance: Int64, device: Int64)] {
        var bindings = PostgresBindings()
        bindings.append(app.id)
        bindings.append(target.pushType.rawValue)
        var sql = """
            SELECT widget.id, widget.deviceId FROM widget JOIN device ON device.id = widget.deviceId
            WHERE device.appId = $1 AND device.active AND device.pushType = $2 AND widget.pushEnabled
            """
        if let kind = target.kind {
            bindings.append(kind)
            sql += " AND widget.kind = $\(bindings.count)"
        }
        if let devices = target.devices {
            guard !devices.isEmpty else { return [] }
            bindings.append(devices.map(\.hex))
            sql += " AND device.token = ANY($\(bindings.count))"
        }
        // The match's parameters follow the ones bound above.
        let match = SQLDialect.postgres.render(SQLDialect.postgres.parameterMatch(target.match), firstPlaceholder: bindings.count + 1)
        sql += match.text + " ORDER BY widget.id"
        for value in match.values { bindings.append(value) }
        return try await rows(PostgresQuery(unsafeSQL: sql, binds: bindings)).map { try $0.decode((Int64, Int64).self) }
    }
}
