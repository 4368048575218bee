public import Foundation
public import ReloadGateCore

// What the push path reads and writes: a device's status, the instances a push targets, adopting an
// unknown device, marking one invalid.

extension SQLStore {
    /// The status of `token` for `app` (one indexed read).
    public func pushDeviceStatus(app: App, token: DeviceToken) async throws -> PushDeviceStatus {
        let rows = try await reading { session in
            try await session.rows("SELECT id, appId, active, unregisteredAt, pushType FROM device WHERE token = \(token.hex)")
        }
        guard let own = try rows.first(where: { try $0.int64("appId") == app.id }) else { return rows.isEmpty ? .unknown : .otherApp }
        if try own.bool("active") { return .active(device: try own.int64("id"), pushType: PushType(rawValue: try own.string("pushType")) ?? .widgets) }
        return .unregistered(since: Date(storedMilliseconds: try own.optionalInt64("unregisteredAt") ?? 0))
    }

    /// The push-enabled widget instances of `device` a push targets: those of `kind` whose configuration
    /// has the `match` values (all when both are empty), and always the implicit instance of an adopted
    /// device, which stands for widgets not registered yet.
    public func pushTargets(device: Int64, kind: String?, match: [String: WidgetConfiguration.Value]) async throws -> [Int64] {
        try await reading { session in
            var query: SQLQuery = """
                SELECT widget.id FROM widget WHERE widget.deviceId = \(device) AND widget.pushEnabled
                AND (widget.kind = \(ImplicitInstance.kind) OR (true
                """
            if let kind { query += " AND widget.kind = \(kind)" }
            query += session.dialect.parameterMatch(match) + ")) ORDER BY widget.id"
            return try await session.rows(query).map { try $0.int64("id") }
        }
    }

    /// Adopts a token never registered in a transaction of its own
    /// (``SQLSession/adopt(app:token:pushType:pushToStart:now:)``).
    /// - Returns: the device id and the instance id.
    public func adoptDevice(app: App, token: DeviceToken, pushType: PushType, pushToStart: Bool, now: Date) async throws -> (device: Int64, instance: Int64) {
        let written = try await writeRegistered(.adoptDevice(app: app, token: token, pushType: pushType, pushToStart: pushToStart), now: now)
        guard case .adopted(let adopted) = written else { throw StoreError.corrupt(reason: "an adoption wrote no device") }
        return (adopted.device, adopted.instance)
    }

    /// Apple said the device's token is no longer valid (`410` with its timestamp, or `BadDeviceToken`):
    /// the device is marked unregistered as of `since`, unless it registered again after that time.
    /// - Returns: whether the device was marked.
    @discardableResult
    public func markDeviceInvalid(device: Int64, since: Date) async throws -> Bool {
        let time = since.storedMilliseconds
        return try await writing { session in
            let marked = try await session.rows("""
                UPDATE device SET active = false, unregisteredAt = \(time) WHERE id = \(device) AND active AND registeredAt <= \(time)
                RETURNING id
                """).map { try $0.int64("id") }
            try await session.registryChanged(devices: marked, at: since)
            return !marked.isEmpty
        }
    }
}

extension SQLDialect {
    /// `AND` conditions on `widget.id` for a configuration match: each key is an indexed lookup in
    /// `widget_parameter`, which each engine keeps from the JSON configuration with its own columns
    /// (values compared by type and value: the string "42" does not match the number 42).
    func parameterMatch(_ match: [String: WidgetConfiguration.Value]) -> SQLQuery {
        var query: SQLQuery = ""
        for (key, value) in match.sorted(by: { $0.key < $1.key }) {
            query += " AND widget.id IN (SELECT widgetId FROM widget_parameter WHERE key = \(key)"
            switch (value, self) {
            case (.string(let text), .sqlite): query += " AND value = \(text) AND type = 'text')"
            case (.string(let text), .postgres): query += " AND type = 'text' AND textValue = \(text))"
            case (.number(let number), .sqlite): query += " AND value = \(number) AND type IN ('integer', 'real'))"
            case (.number(let number), .postgres): query += " AND type = 'number' AND numberValue = \(number))"
            case (.bool(let flag), _): query += " AND type = \(flag ? "true" : "false"))"
            }
        }
        return query
    }
}

extension SQLSession {
    /// Adopts a token never registered: records the device (or control, or activity, or push-to-start
    /// token) with one implicit instance of kind `*` (until its widgets, control or activity are
    /// registered), so budgets and coalescing apply from its first push. A token written first by another
    /// push, gateway or registration keeps its row (`created` is false) and gets the implicit instance; one
    /// of the other push type is refused before any change (``RegistryError/otherPushType(_:registered:)``).
    func adopt(app: App, token: DeviceToken, pushType: PushType, pushToStart: Bool, now: Date) async throws -> AdoptedDevice {
        let (implicit, family) = ImplicitInstance.of(pushType, pushToStart: pushToStart)
        let created = try await rows("""
            INSERT INTO device (appId, token, active, registeredAt, pushType)
            VALUES (\(app.id), \(token.hex), true, \(now.storedMilliseconds), \(pushType.rawValue))
            ON CONFLICT (appId, token) DO NOTHING RETURNING id
            """).map { try $0.int64("id") }
        let id: Int64
        if let new = created.first {
            id = new
        } else {
            // The insert changed nothing: the token's row is another's, whose type is checked first.
            guard let device = try await device(app: app, token: token) else {
                throw StoreError.corrupt(reason: "an adopted device has no row")
            }
            if device.pushType != pushType { throw RegistryError.otherPushType(token, registered: device.pushType) }
            id = device.id
        }
        let added = try await rows("""
            INSERT INTO widget (deviceId, widgetID, kind, family, configuration, pushEnabled)
            VALUES (\(id), \(implicit), \(ImplicitInstance.kind), \(family), '{}', true) ON CONFLICT (deviceId, widgetID) DO NOTHING
            RETURNING id
            """).map { try $0.int64("id") }
        if let instance = added.first { return AdoptedDevice(device: id, instance: instance, created: !created.isEmpty, instanceAdded: true) }
        guard let instance = try await row("SELECT id FROM widget WHERE deviceId = \(id) AND widgetID = \(implicit)") else {
            throw StoreError.corrupt(reason: "an adopted device has no implicit instance")
        }
        return AdoptedDevice(device: id, instance: try instance.int64("id"), created: false, instanceAdded: false)
    }
}
