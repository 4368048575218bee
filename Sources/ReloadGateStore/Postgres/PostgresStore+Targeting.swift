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
        sql += Self.matchFilter(target.match, into: &bindings) + " ORDER BY widget.id"
        return try await rows(PostgresQuery(unsafeSQL: sql, binds: bindings)).map { try $0.decode((Int64, Int64).self) }
    }

    /// `AND` conditions on `widget.id` for a configuration match, binding into `bindings`.
    static func matchFilter(_ match: [String: WidgetConfiguration.Value], into bindings: inout PostgresBindings) -> String {
        var sql = ""
        for (key, value) in match.sorted(by: { $0.key < $1.key }) {
            bindings.append(key)
            sql += " AND widget.id IN (SELECT widgetId FROM widget_parameter WHERE key = $\(bindings.count)"
            switch value {
            case .string(let text):
                bindings.append(text)
                sql += " AND type = 'text' AND textValue = $\(bindings.count))"
            case .number(let number):
                bindings.append(number)
                sql += " AND type = 'number' AND numberValue = $\(bindings.count))"
            case .bool(let flag):
                bindings.append(flag ? "true" : "false")
                sql += " AND type = $\(bindings.count))"
            }
        }
        return sql
    }
}
