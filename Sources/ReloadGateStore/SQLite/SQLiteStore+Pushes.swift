public import Foundation
import GRDB
public import ReloadGateCore

extension SQLiteStore {
    /// The status of `token` for `app` (one indexed read).
    public func pushDeviceStatus(app: App, token: DeviceToken) throws -> PushDeviceStatus {
        try writer.read { db in
            let rows = try Row.fetchAll(
                db.cachedStatement(sql: "SELECT id, appId, active, unregisteredAt, pushType FROM device WHERE token = ?"),
                arguments: [token.hex]
            )
            guard let own = rows.first(where: { ($0["appId"] as Int64) == app.id }) else {
                return rows.isEmpty ? .unknown : .otherApp
            }
            if own["active"] as Bool { return .active(device: own["id"], pushType: PushType(rawValue: own["pushType"]) ?? .widgets) }
            return .unregistered(since: Date(storedMilliseconds: own["unregisteredAt"] ?? 0))
        }
    }

    /// The push-enabled widget instances of `device` a push targets: those of `kind` whose configuration
    /// has the `match` values (all when both are empty), and always the implicit instance of an adopted
    /// device, which stands for widgets not registered yet.
    public func pushTargets(device: Int64, kind: String?, match: [String: WidgetConfiguration.Value]) throws -> [Int64] {
        var sql = "SELECT widget.id FROM widget WHERE widget.deviceId = ? AND widget.pushEnabled AND (widget.kind = ? OR (1"
        var arguments: StatementArguments = [device, ImplicitInstance.kind]
        if let kind {
            sql += " AND widget.kind = ?"
            arguments += [kind]
        }
        let filter = Self.matchFilter(match)
        sql += filter.sql + ")) ORDER BY widget.id"
        arguments += filter.arguments
        return try writer.read { db in try Int64.fetchAll(db.cachedStatement(sql: sql), arguments: arguments) }
    }

    /// Adopts a token never registered: records the device (or control) with one implicit instance of
    /// kind `*` (until its widgets or control are registered), so budgets and coalescing apply from its
    /// first push.
    /// - Returns: the device id and the instance id (an existing device's, if another push adopted it first).
    public func adoptDevice(app: App, token: DeviceToken, pushType: PushType, now: Date) throws -> (device: Int64, instance: Int64) {
        let implicit = ImplicitInstance.of(pushType)
        return try Self.orUnavailable { try writer.write { db in
            if let row = try Row.fetchOne(
                db,
                sql: """
                    SELECT device.id, widget.id, device.pushType FROM device
                    LEFT JOIN widget ON widget.deviceId = device.id AND widget.widgetID = ?
                    WHERE device.appId = ? AND device.token = ?
                    """,
                arguments: [implicit.widgetID, app.id, token.hex]
            ) {
                // Another push (of the other type) adopted it first, or the app registered it meanwhile.
                if let registered = PushType(rawValue: row[2]), registered != pushType {
                    throw RegistryError.otherPushType(token, registered: registered)
                }
                if let instance = row[1] as Int64? { return (row[0], instance) }
            }
            try db.execute(
                sql: "INSERT OR IGNORE INTO device (appId, token, active, registeredAt, pushType) VALUES (?, ?, 1, ?, ?)",
                arguments: [app.id, token.hex, now.storedMilliseconds, pushType.rawValue]
            )
            let device = try Int64.fetchOne(
                db,
                sql: "SELECT id FROM device WHERE appId = ? AND token = ?",
                arguments: [app.id, token.hex]
            ) ?? db.lastInsertedRowID
            try db.execute(
                sql: """
                    INSERT INTO widget (deviceId, widgetID, kind, family, configuration, pushEnabled)
                    VALUES (?, ?, ?, ?, '{}', 1)
                    """,
                arguments: [device, implicit.widgetID, ImplicitInstance.kind, implicit.family]
            )
            return (device, db.lastInsertedRowID)
        } }
    }
}

extension SQLiteStore {
    /// Apple said the device's token is no longer valid (`410` with its timestamp, or `BadDeviceToken`):
    /// the device is marked unregistered as of `since`, unless it registered again after that time.
    /// - Returns: whether the device was marked.
    @discardableResult
    public func markDeviceInvalid(device: Int64, since: Date) throws -> Bool {
        try writer.write { db in
            try db.execute(
                sql: "UPDATE device SET active = 0, unregisteredAt = ? WHERE id = ? AND active AND registeredAt <= ?",
                arguments: [since.storedMilliseconds, device, since.storedMilliseconds]
            )
            return db.changesCount > 0
        }
    }
}
