import Foundation
import GRDB
public import ReloadGateCore

extension SQLiteStore {
    /// The push-enabled widget instances of the app's active devices (or its controls, for a target of
    /// push type `controls`) that the target selects, with their devices, ordered by instance id. Configuration values are compared by type and value (the string
    /// "42" does not match the number 42).
    public func targetInstances(app: App, target: ReloadTarget) throws -> [(instance: Int64, device: Int64)] {
        var sql = """
            SELECT widget.id, widget.deviceId FROM widget JOIN device ON device.id = widget.deviceId
            WHERE device.appId = ? AND device.active AND device.pushType = ? AND widget.pushEnabled
            """
        var arguments: StatementArguments = [app.id, target.pushType.rawValue]
        if let kind = target.kind {
            sql += " AND widget.kind = ?"
            arguments += [kind]
        }
        if let devices = target.devices {
            guard !devices.isEmpty else { return [] }
            sql += " AND device.token IN (" + devices.map { _ in "?" }.joined(separator: ",") + ")"
            arguments += StatementArguments(devices.map(\.hex))
        }
        let match = Self.matchFilter(target.match)
        sql += match.sql + " ORDER BY widget.id"
        arguments += match.arguments
        return try writer.read { db in
            // Prepared once per shape of query (kind or not, how many devices and match keys).
            let rows = try RowCursor(db, sql: sql, arguments: arguments)
            var instances: [(instance: Int64, device: Int64)] = []
            while try rows.next() { instances.append((rows.int64(0), rows.int64(1))) }
            return instances
        }
    }

    /// `AND` conditions on `widget.id` for a configuration match: each key is an indexed lookup in
    /// widget_parameter (kept by triggers from the JSON).
    static func matchFilter(_ match: [String: WidgetConfiguration.Value]) -> (sql: String, arguments: StatementArguments) {
        var sql = ""
        var arguments = StatementArguments()
        for (key, value) in match.sorted(by: { $0.key < $1.key }) {
            sql += " AND widget.id IN (SELECT widgetId FROM widget_parameter WHERE key = ?"
            switch value {
            case .string(let text):
                sql += " AND value = ? AND type = 'text')"
                arguments += [key, text]
            case .number(let number):
                sql += " AND value = ? AND type IN ('integer', 'real'))"
                arguments += [key, number]
            case .bool(let flag):
                sql += " AND type = ?)"
                arguments += [key, flag ? "true" : "false"]
            }
        }
        return (sql, arguments)
    }
}
