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
        let match = SQLDialect.sqlite.render(SQLDialect.sqlite.parameterMatch(target.match))
        sql += match.text + " ORDER BY widget.id"
        arguments += StatementArguments(match.values.map(\.databaseValue))
        return try writer.read { db in
            // Prepared once per shape of query (kind or not, how many devices and match keys).
            let rows = try RowCursor(db, sql: sql, arguments: arguments)
            var instances: [(instance: Int64, device: Int64)] = []
            while try rows.next() { instances.append((rows.int64(0), rows.int64(1))) }
            return instances
        }
    }
}
