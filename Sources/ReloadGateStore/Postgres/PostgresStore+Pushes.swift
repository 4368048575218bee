public import Foundation
import PostgresNIO
public import ReloadGateCore

// What the push path reads and writes: a device's status, the instances a push targets, adopting an unknown
// device, marking one invalid.

extension PostgresStore {
    /// The status of `token` for `app`.
    public func pushDeviceStatus(app: App, token: DeviceToken) async throws -> PushDeviceStatus {
        let rows = try await rows("SELECT id, appId, active, unregisteredAt, pushType FROM device WHERE token = \(token.hex)").map {
            try $0.decode((Int64, Int64, Bool, Int64?, String).self)
        }
        guard let own = rows.first(where: { $0.1 == app.id }) else { return rows.isEmpty ? .unknown : .otherApp }
        if own.2 { return .active(device: own.0, pushType: PushType(rawValue: own.4) ?? .widgets) }
        return .unregistered(since: Date(storedMilliseconds: own.3 ?? 0))
    }

    /// The push-enabled widget instances of `device` a push targets (and always the implicit instance of
    /// an adopted device).
    public func pushTargets(device: Int64, kind: String?, match: [String: WidgetConfiguration.Value]) async throws -> [Int64] {
        var bindings = PostgresBindings()
        bindings.append(device)
        bindings.append(ImplicitInstance.kind)
        var sql = "SELECT widget.id FROM widget WHERE widget.deviceId = $1 AND widget.pushEnabled AND (widget.kind = $2 OR (true"
        if let kind {
            bindings.append(kind)
            sql += " AND widget.kind = $\(bindings.count)"
        }
        sql += Self.matchFilter(match, into: &bindings) + ")) ORDER BY widget.id"
        return try await rows(PostgresQuery(unsafeSQL: sql, binds: bindings)).map { try $0.decode(Int64.self) }
    }

    /// Adopts a token never registered (one implicit instance of kind `*`:
    /// ``SQLiteStore/adoptDevice(app:token:pushType:now:)``).
    /// - Returns: the device id and the instance id (an existing device's, if another push adopted it first).
    public func adoptDevice(app: App, token: DeviceToken, pushType: PushType, now: Date) async throws -> (device: Int64, instance: Int64) {
        let (implicit, family) = ImplicitInstance.of(pushType)
        let kind = ImplicitInstance.kind
        return try await transaction { connection in
            let created = try await connection.rows(
                """
                INSERT INTO device (appId, token, active, registeredAt, pushType)
                VALUES (\(app.id), \(token.hex), true, \(now.storedMilliseconds), \(pushType.rawValue))
                ON CONFLICT (appId, token) DO NOTHING RETURNING id
                """,
                logger: self.logger
            ).map { try $0.decode(Int64.self) }
            let (device, registered) = try await connection.rows(
                "SELECT id, pushType FROM device WHERE appId = \(app.id) AND token = \(token.hex)", logger: self.logger
            ).first!.decode((Int64, String).self)
            // Another push (of the other type) adopted it first, or the app registered it meanwhile.
            if let registered = PushType(rawValue: registered), registered != pushType {
                throw RegistryError.otherPushType(token, registered: registered)
            }
            _ = try await connection.rows(
                """
                INSERT INTO widget (deviceId, widgetID, kind, family, configuration, pushEnabled)
                VALUES (\(device), \(implicit), \(kind), \(family), '{}', true) ON CONFLICT (deviceId, widgetID) DO NOTHING
                """,
                logger: self.logger
            )
            let instance = try await connection.rows(
                "SELECT id FROM widget WHERE deviceId = \(device) AND widgetID = \(implicit)", logger: self.logger
            ).first!.decode(Int64.self)
            try await Self.noticeOwners(of: created, at: now, on: connection, logger: self.logger)
            return (device, instance)
        }
    }

    /// Marks the device unregistered since `since` (Apple's 410), unless it registered again after that.
    @discardableResult
    public func markDeviceInvalid(device: Int64, since: Date) async throws -> Bool {
        let time = since.storedMilliseconds
        let logger = logger
        return try await transaction { connection in
            let marked = try await connection.rows(
                """
                UPDATE device SET active = false, unregisteredAt = \(time) WHERE id = \(device) AND active AND registeredAt <= \(time)
                RETURNING id
                """,
                logger: logger
            ).map { try $0.decode(Int64.self) }
            try await Self.noticeOwners(of: marked, at: since, on: connection, logger: logger)
            return !marked.isEmpty
        }
    }
}
