public import Foundation
import GRDB
public import ReloadGateCore

extension SQLiteStore {
    /// Registers a device with its full widget set (WidgetKit hands over the whole list), replacing the
    /// previous set in one transaction: kept widgets keep their instance ids (and so their budgets),
    /// missing ones are removed, new ones added. `previousToken` retires the old token: from then on it
    /// is `Unregistered` (410) and its widgets are gone.
    public func putDevice(app: App, token: DeviceToken, widgets: [WidgetRegistration], previousToken: DeviceToken?, now: Date) throws
        -> DeviceRegistration
    {
        try writer.write { db in
            try Self.putDevice(db, app: app, token: token, pushType: .widgets, instances: widgets.map(InstanceRegistration.init), previousToken: previousToken, now: now)
        }
    }

    /// Registers a control's token with its kind and configuration (its one instance keeps its id, and
    /// so its budget, when registered again). `previousToken` retires the control's old token, as for a
    /// device.
    public func putControl(app: App, token: DeviceToken, control: ControlRegistration, previousToken: DeviceToken?, now: Date) throws
        -> DeviceRegistration
    {
        try writer.write { db in
            try Self.putDevice(db, app: app, token: token, pushType: .controls, instances: [InstanceRegistration(control)], previousToken: previousToken, now: now)
        }
    }

    /// Writes many registry changes in one transaction (one sync). One refused (a ``RegistryError``)
    /// leaves the others written and has written nothing itself: every refusal comes from a check
    /// before the write's first change (no savepoint needed, which costs two statements a write).
    public func writeRegistry(_ writes: [RegistryWrite], now: Date) throws -> [Result<RegistryWritten, RegistryError>] {
        guard !writes.isEmpty else { return [] }
        return try Self.orUnavailable { try writer.write { db in
            try writes.map { write in
                try Result.of {
                    switch write.step {
                    case .instances(let app, let token, let pushType, let instances, let previousToken):
                        .device(try Self.putDevice(db, app: app, token: token, pushType: pushType, instances: instances, previousToken: previousToken, now: now))
                    case .timeline(let app, let token, let widgetID, let timeline):
                        .timeline(instance: try Self.putTimeline(db, app: app, token: token, widgetID: widgetID, timeline: timeline, now: now))
                    }
                }
            }
        } }
    }

    static func putDevice(
        _ db: Database,
        app: App,
        token: DeviceToken,
        pushType: PushType,
        instances widgets: [InstanceRegistration],
        previousToken: DeviceToken?,
        now: Date
    ) throws -> DeviceRegistration {
        // Refusals first, before any change (writeRegistry relies on it).
        let current = try Self.device(db, app: app, token: token)
        if let current, current.pushType != pushType { throw RegistryError.otherPushType(token, registered: current.pushType) }
        let previous = try previousToken.flatMap { try Self.device(db, app: app, token: $0) }
        if let previous, let previousToken, previous.pushType != pushType {
            throw RegistryError.otherPushType(previousToken, registered: previous.pushType)
        }
        var retired: (device: Int64, instances: [Int64])?
        if let previousToken, previousToken != token, let old = previous, old.active {
            let instances = try Int64.fetchAll(db.cachedStatement(sql: "SELECT id FROM widget WHERE deviceId = ? ORDER BY id"), arguments: [old.id])
            try db.cachedStatement(sql: "DELETE FROM widget WHERE deviceId = ?").execute(arguments: [old.id])
            try db.cachedStatement(sql: "UPDATE device SET active = 0, unregisteredAt = ? WHERE id = ?")
                .execute(arguments: [now.storedMilliseconds, old.id])
            retired = (old.id, instances)
        }

        let device: Int64
        if let existing = current {
            device = existing.id
            try db.cachedStatement(sql: "UPDATE device SET active = 1, registeredAt = ?, unregisteredAt = NULL WHERE id = ?")
                .execute(arguments: [now.storedMilliseconds, device])
        } else {
            try db.cachedStatement(sql: "INSERT INTO device (appId, token, active, registeredAt, pushType) VALUES (?, ?, 1, ?, ?)")
                .execute(arguments: [app.id, token.hex, now.storedMilliseconds, pushType.rawValue])
            device = db.lastInsertedRowID
        }

        var existing: [String: Int64] = [:]
        for row in try Row.fetchAll(db.cachedStatement(sql: "SELECT id, widgetID FROM widget WHERE deviceId = ?"), arguments: [device]) {
            existing[row["widgetID"]] = row["id"]
        }
        let wanted = Set(widgets.map(\.id))
        var removed: [Int64] = []
        for (widgetID, id) in existing where !wanted.contains(widgetID) {
            try db.cachedStatement(sql: "DELETE FROM widget WHERE id = ?").execute(arguments: [id])
            removed.append(id)
        }
        var instances: [(id: Int64, widget: InstanceRegistration)] = []
        for widget in widgets {
            let arguments: StatementArguments = [
                widget.kind, widget.family, widget.configuration.canonicalJSON, widget.pushEnabled,
            ]
            if let id = existing[widget.id] {
                try db.cachedStatement(sql: "UPDATE widget SET kind = ?, family = ?, configuration = ?, pushEnabled = ? WHERE id = ?")
                    .execute(arguments: arguments + [id])
                instances.append((id, widget))
            } else {
                try db.cachedStatement(sql: "INSERT INTO widget (deviceId, widgetID, kind, family, configuration, pushEnabled) VALUES (?, ?, ?, ?, ?, ?)")
                    .execute(arguments: [device, widget.id] + arguments)
                instances.append((db.lastInsertedRowID, widget))
            }
        }
        return DeviceRegistration(
            device: device,
            pushType: pushType,
            instances: instances,
            removedInstances: removed.sorted(),
            retired: retired
        )
    }

    /// Removes a device and its widgets (`DELETE .../devices/<token>`).
    /// - Returns: the device id and its removed instance ids.
    public func deleteDevice(app: App, token: DeviceToken, pushType: PushType? = nil) throws -> (device: Int64, instances: [Int64]) {
        try writer.write { db in
            guard let device = try Self.device(db, app: app, token: token) else { throw RegistryError.deviceNotFound(token) }
            if let pushType, device.pushType != pushType { throw RegistryError.otherPushType(token, registered: device.pushType) }
            let instances = try Int64.fetchAll(db, sql: "SELECT id FROM widget WHERE deviceId = ? ORDER BY id", arguments: [device.id])
            try db.execute(sql: "DELETE FROM device WHERE id = ?", arguments: [device.id])
            return (device.id, instances)
        }
    }

    /// Records a widget instance's timeline (`PUT .../widgets/<id>/timeline`).
    /// - Returns: the instance id.
    public func putTimeline(app: App, token: DeviceToken, widgetID: String, timeline: Timeline, now: Date) throws -> Int64 {
        try writer.write { db in try Self.putTimeline(db, app: app, token: token, widgetID: widgetID, timeline: timeline, now: now) }
    }

    static func putTimeline(_ db: Database, app: App, token: DeviceToken, widgetID: String, timeline: Timeline, now: Date) throws -> Int64 {
        guard let device = try Self.device(db, app: app, token: token) else { throw RegistryError.deviceNotFound(token) }
        guard device.active else { throw RegistryError.deviceUnregistered(token) }
        // A control has no timeline.
        guard device.pushType == .widgets else { throw RegistryError.otherPushType(token, registered: device.pushType) }
        guard let instance = try Int64.fetchOne(
            db.cachedStatement(sql: "SELECT id FROM widget WHERE deviceId = ? AND widgetID = ?"),
            arguments: [device.id, widgetID]
        ) else { throw RegistryError.widgetNotFound(token, widgetID) }
        let entries = timeline.storedEntries
        let policy = timeline.storedPolicy
        try db.cachedStatement(sql: """
            INSERT INTO timeline (widgetId, entries, policy, plannedReload, reportedAt) VALUES (?, ?, ?, ?, ?)
            ON CONFLICT(widgetId) DO UPDATE SET entries = excluded.entries, policy = excluded.policy,
                plannedReload = excluded.plannedReload, reportedAt = excluded.reportedAt
            """).execute(arguments: [instance, entries, policy, timeline.plannedReload?.milliseconds, now.storedMilliseconds])
        return instance
    }

    /// The distinct (kind, family, configuration) of the app's active devices with their counts
    /// (`GET .../configurations`), optionally of one kind.
    public func configurations(app: App, kind: String?) throws -> [ConfigurationUsage] {
        try writer.read { db in
            var sql = """
                SELECT widget.kind, widget.family, widget.configuration, COUNT(*) AS count
                FROM widget JOIN device ON device.id = widget.deviceId
                WHERE device.appId = ? AND device.active
                """
            var arguments: StatementArguments = [app.id]
            if let kind {
                sql += " AND widget.kind = ?"
                arguments += [kind]
            }
            sql += " GROUP BY widget.kind, widget.family, widget.configuration ORDER BY widget.kind, widget.family, widget.configuration"
            return try Row.fetchAll(db, sql: sql, arguments: arguments).map {
                ConfigurationUsage(kind: $0["kind"], family: $0["family"], configuration: $0["configuration"], count: $0["count"])
            }
        }
    }

    /// The device's state: whether it is active, and since when it is unregistered (for `410`).
    public func deviceStatus(app: App, token: DeviceToken) throws -> (active: Bool, unregisteredAt: Date?)? {
        try writer.read { db in
            try Self.device(db, app: app, token: token).map { ($0.active, $0.unregisteredAt) }
        }
    }

    /// The app's device with this token, in any state.
    static func device(_ db: Database, app: App, token: DeviceToken) throws
        -> (id: Int64, active: Bool, unregisteredAt: Date?, pushType: PushType)?
    {
        try Row.fetchOne(
            db.cachedStatement(sql: "SELECT id, active, unregisteredAt, pushType FROM device WHERE appId = ? AND token = ?"),
            arguments: [app.id, token.hex]
        ).map { row in
            (
                row["id"], row["active"], (row["unregisteredAt"] as Int64?).map(Date.init(storedMilliseconds:)),
                PushType(rawValue: row["pushType"]) ?? .widgets
            )
        }
    }
}
