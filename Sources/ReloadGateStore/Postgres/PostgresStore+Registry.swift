public import Foundation
import PostgresNIO
public import ReloadGateCore

// Devices, widgets and timelines; targeting; what the push path and the delivery worker read.

extension PostgresStore {
    /// Registers a device with its full widget set, replacing the previous set in one transaction (the
    /// rules of ``SQLiteStore/putDevice(app:token:widgets:previousToken:now:)``). An insert that races
    /// with another gateway's for the same token updates the row the other one wrote.
    public func putDevice(
        app: App,
        token: DeviceToken,
        widgets: [WidgetRegistration],
        previousToken: DeviceToken?,
        now: Date
    ) async throws -> DeviceRegistration {
        let logger = logger
        return try await transaction { connection in
            try await Self.putDevice(
                connection, app: app, token: token, pushType: .widgets, instances: widgets.map(InstanceRegistration.init),
                previousToken: previousToken, now: now, logger: logger
            )
        }
    }

    /// Registers a control's token (``SQLiteStore/putControl(app:token:control:previousToken:now:)``).
    public func putControl(app: App, token: DeviceToken, control: ControlRegistration, previousToken: DeviceToken?, now: Date) async throws
        -> DeviceRegistration
    {
        let logger = logger
        return try await transaction { connection in
            try await Self.putDevice(
                connection, app: app, token: token, pushType: .controls, instances: [InstanceRegistration(control)],
                previousToken: previousToken, now: now, logger: logger
            )
        }
    }

    /// Writes many registry changes in one transaction. One refused (a ``RegistryError``) leaves the
    /// others written and has written nothing itself: as on SQLite, every refusal comes from a check
    /// before the write's first change (a savepoint would cost two round trips a write).
    public func writeRegistry(_ writes: [RegistryWrite], now: Date) async throws -> [Result<RegistryWritten, RegistryError>] {
        guard !writes.isEmpty else { return [] }
        let logger = logger
        return try await transaction { connection in
            var results: [Result<RegistryWritten, RegistryError>] = []
            results.reserveCapacity(writes.count)
            for write in writes {
                do {
                    switch write {
                    case .putDevice(let app, let token, let widgets, let previousToken):
                        results.append(.success(.device(
                            try await Self.putDevice(
                                connection, app: app, token: token, pushType: .widgets, instances: widgets.map(InstanceRegistration.init),
                                previousToken: previousToken, now: now, logger: logger
                            )
                        )))
                    case .putControl(let app, let token, let control, let previousToken):
                        results.append(.success(.device(
                            try await Self.putDevice(
                                connection, app: app, token: token, pushType: .controls, instances: [InstanceRegistration(control)],
                                previousToken: previousToken, now: now, logger: logger
                            )
                        )))
                    case .putTimeline(let app, let token, let widgetID, let timeline):
                        results.append(.success(.timeline(
                            instance: try await Self.putTimeline(connection, app: app, token: token, widgetID: widgetID, timeline: timeline, now: now, logger: logger)
                        )))
                    }
                } catch let error as RegistryError {
                    results.append(.failure(error))
                }
            }
            return results
        }
    }

    static func putDevice(
        _ connection: PostgresConnection,
        app: App,
        token: DeviceToken,
        pushType: PushType,
        instances widgets: [InstanceRegistration],
        previousToken: DeviceToken?,
        now: Date,
        logger: Logger
    ) async throws -> DeviceRegistration {
        let time = now.storedMilliseconds
        // Refusals first, before any change (writeRegistry relies on it).
        if let current = try await Self.device(connection, app: app, token: token, logger: logger), current.pushType != pushType {
            throw RegistryError.otherPushType(token, registered: current.pushType)
        }
        var previous: (id: Int64, active: Bool, unregisteredAt: Date?, pushType: PushType)?
        if let previousToken {
            previous = try await Self.device(connection, app: app, token: previousToken, logger: logger)
            if let previous, previous.pushType != pushType { throw RegistryError.otherPushType(previousToken, registered: previous.pushType) }
        }
        var retired: (device: Int64, instances: [Int64])?
        if let previousToken, previousToken != token, let old = previous, old.active {
            let instances = try await connection.rows(
                "DELETE FROM widget WHERE deviceId = \(old.id) RETURNING id", logger: logger
            ).map { try $0.decode(Int64.self) }.sorted()
            _ = try await connection.rows(
                "UPDATE device SET active = false, unregisteredAt = \(time) WHERE id = \(old.id)", logger: logger
            )
            retired = (old.id, instances)
        }
        let device = try await connection.rows(
            """
            INSERT INTO device (appId, token, active, registeredAt, pushType) VALUES (\(app.id), \(token.hex), true, \(time), \(pushType.rawValue))
            ON CONFLICT (appId, token) DO UPDATE SET active = true, registeredAt = excluded.registeredAt, unregisteredAt = NULL
            RETURNING id
            """,
            logger: logger
        ).first!.decode(Int64.self)
        var existing: [String: Int64] = [:]
        for row in try await connection.rows("SELECT id, widgetID FROM widget WHERE deviceId = \(device)", logger: logger) {
            let (id, widgetID) = try row.decode((Int64, String).self)
            existing[widgetID] = id
        }
        let wanted = Set(widgets.map(\.id))
        let removed = existing.filter { !wanted.contains($0.key) }.map(\.value).sorted()
        if !removed.isEmpty {
            _ = try await connection.rows("DELETE FROM widget WHERE id = ANY(\(removed))", logger: logger)
        }
        var instances: [(id: Int64, widget: InstanceRegistration)] = []
        for widget in widgets {
            let configuration = widget.configuration.canonicalJSON
            if let id = existing[widget.id] {
                _ = try await connection.rows(
                    """
                    UPDATE widget SET kind = \(widget.kind), family = \(widget.family),
                        configuration = \(configuration), pushEnabled = \(widget.pushEnabled) WHERE id = \(id)
                    """,
                    logger: logger
                )
                instances.append((id, widget))
            } else {
                let id = try await connection.rows(
                    """
                    INSERT INTO widget (deviceId, widgetID, kind, family, configuration, pushEnabled)
                    VALUES (\(device), \(widget.id), \(widget.kind), \(widget.family), \(configuration), \(widget.pushEnabled))
                    RETURNING id
                    """,
                    logger: logger
                ).first!.decode(Int64.self)
                instances.append((id, widget))
            }
        }
        return DeviceRegistration(device: device, pushType: pushType, instances: instances, removedInstances: removed, retired: retired)
    }

    /// Removes a device and its widgets. - Returns: the device id and its removed instance ids.
    public func deleteDevice(app: App, token: DeviceToken, pushType: PushType? = nil) async throws -> (device: Int64, instances: [Int64]) {
        try await transaction { connection in
            guard let device = try await Self.device(connection, app: app, token: token, logger: self.logger) else {
                throw RegistryError.deviceNotFound(token)
            }
            if let pushType, device.pushType != pushType { throw RegistryError.otherPushType(token, registered: device.pushType) }
            let instances = try await connection.rows(
                "SELECT id FROM widget WHERE deviceId = \(device.id) ORDER BY id", logger: self.logger
            ).map { try $0.decode(Int64.self) }
            _ = try await connection.rows("DELETE FROM device WHERE id = \(device.id)", logger: self.logger)
            return (device.id, instances)
        }
    }

    /// Records a widget instance's timeline. - Returns: the instance id.
    public func putTimeline(app: App, token: DeviceToken, widgetID: String, timeline: Timeline, now: Date) async throws -> Int64 {
        let logger = logger
        return try await transaction { connection in
            try await Self.putTimeline(connection, app: app, token: token, widgetID: widgetID, timeline: timeline, now: now, logger: logger)
        }
    }

    static func putTimeline(
        _ connection: PostgresConnection, app: App, token: DeviceToken, widgetID: String, timeline: Timeline, now: Date, logger: Logger
    ) async throws -> Int64 {
        let entries = timeline.storedEntries
        let policy = timeline.storedPolicy
        let planned = timeline.plannedReload?.milliseconds
        let time = now.storedMilliseconds
        guard let device = try await Self.device(connection, app: app, token: token, logger: logger) else {
            throw RegistryError.deviceNotFound(token)
        }
        guard device.active else { throw RegistryError.deviceUnregistered(token) }
        // A control has no timeline.
        guard device.pushType == .widgets else { throw RegistryError.otherPushType(token, registered: device.pushType) }
        guard let instance = try await connection.rows(
            "SELECT id FROM widget WHERE deviceId = \(device.id) AND widgetID = \(widgetID)", logger: logger
        ).first?.decode(Int64.self) else { throw RegistryError.widgetNotFound(token, widgetID) }
        _ = try await connection.rows(
            """
            INSERT INTO timeline (widgetId, entries, policy, plannedReload, reportedAt)
            VALUES (\(instance), \(entries), \(policy), \(planned), \(time))
            ON CONFLICT (widgetId) DO UPDATE SET entries = excluded.entries, policy = excluded.policy,
                plannedReload = excluded.plannedReload, reportedAt = excluded.reportedAt
            """,
            logger: logger
        )
        return instance
    }

    /// The distinct (kind, family, configuration) of the app's active devices with their counts.
    public func configurations(app: App, kind: String?) async throws -> [ConfigurationUsage] {
        try await rows(
            """
            SELECT widget.kind, widget.family, widget.configuration, COUNT(*)
            FROM widget JOIN device ON device.id = widget.deviceId
            WHERE device.appId = \(app.id) AND device.active AND (\(kind)::text IS NULL OR widget.kind = \(kind))
            GROUP BY widget.kind, widget.family, widget.configuration
            ORDER BY widget.kind COLLATE "C", widget.family COLLATE "C", widget.configuration COLLATE "C"
            """
        ).map { row in
            let (kind, family, configuration, count) = try row.decode((String, String, String, Int64).self)
            return ConfigurationUsage(kind: kind, family: family, configuration: configuration, count: Int(count))
        }
    }

    /// The device's state: whether it is active, and since when it is unregistered.
    public func deviceStatus(app: App, token: DeviceToken) async throws -> (active: Bool, unregisteredAt: Date?)? {
        try await transaction { connection in
            try await Self.device(connection, app: app, token: token, logger: self.logger).map { ($0.active, $0.unregisteredAt) }
        }
    }

    private static func device(_ connection: PostgresConnection, app: App, token: DeviceToken, logger: Logger) async throws
        -> (id: Int64, active: Bool, unregisteredAt: Date?, pushType: PushType)?
    {
        guard let row = try await connection.rows(
            "SELECT id, active, unregisteredAt, pushType FROM device WHERE appId = \(app.id) AND token = \(token.hex)", logger: logger
        ).first else { return nil }
        let (id, active, unregistered, pushType) = try row.decode((Int64, Bool, Int64?, String).self)
        return (id, active, unregistered.map(Date.init(storedMilliseconds:)), PushType(rawValue: pushType) ?? .widgets)
    }

    // MARK: Targeting

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

    // MARK: The push path

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
        bindings.append(SQLiteStore.implicitWidget)
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
        let (implicit, family) = SQLiteStore.implicitInstance(pushType)
        let kind = SQLiteStore.implicitWidget
        return try await transaction { connection in
            _ = try await connection.rows(
                """
                INSERT INTO device (appId, token, active, registeredAt, pushType)
                VALUES (\(app.id), \(token.hex), true, \(now.storedMilliseconds), \(pushType.rawValue))
                ON CONFLICT (appId, token) DO NOTHING
                """,
                logger: self.logger
            )
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
            return (device, instance)
        }
    }

    /// Marks the device unregistered since `since` (Apple's 410), unless it registered again after that.
    @discardableResult
    public func markDeviceInvalid(device: Int64, since: Date) async throws -> Bool {
        let time = since.storedMilliseconds
        return try await !rows(
            """
            UPDATE device SET active = false, unregisteredAt = \(time) WHERE id = \(device) AND active AND registeredAt <= \(time)
            RETURNING id
            """
        ).isEmpty
    }

    // MARK: Loading and delivering

    /// Every widget instance of an active device, ordered by instance id.
    public func registeredInstances() async throws -> [RegisteredInstance] {
        try await registeredInstances(where: "device.active")
    }

    /// The address of a delivery to `device`: `nil` when the device is gone or unregistered.
    public func pushAddress(device: Int64, instances: [Int64]) async throws -> PushAddress? {
        try await pushAddresses([(device, instances)])[0]
    }

    /// The addresses of many deliveries, in two queries.
    public func pushAddresses(_ deliveries: [(device: Int64, instances: [Int64])]) async throws -> [PushAddress?] {
        let ids = Array(Set(deliveries.map(\.device)))
        var addresses: [Int64: (bundle: BundleID, token: DeviceToken, pushType: PushType)] = [:]
        for row in try await rows(
            """
            SELECT device.id, app.bundle, device.token, device.pushType FROM device JOIN app ON app.id = device.appId
            WHERE device.id = ANY(\(ids)) AND device.active
            """
        ) {
            let (id, bundleText, tokenText, pushType) = try row.decode((Int64, String, String, String).self)
            guard let bundle = try? BundleID(bundleText), let token = try? DeviceToken(tokenText) else {
                throw StoreError.corrupt(reason: "device \(id) has an invalid bundle or token")
            }
            addresses[id] = (bundle, token, PushType(rawValue: pushType) ?? .widgets)
        }
        var widgets: [Int64: [(id: Int64, widgetID: String)]] = [:]
        if deliveries.contains(where: { !$0.instances.isEmpty }) {
            for row in try await rows("SELECT deviceId, id, widgetID FROM widget WHERE deviceId = ANY(\(ids))") {
                let (device, id, widgetID) = try row.decode((Int64, Int64, String).self)
                widgets[device, default: []].append((id, widgetID))
            }
        }
        return deliveries.map { delivery -> PushAddress? in
            guard let address = addresses[delivery.device] else { return nil }
            var found = (widgets[delivery.device] ?? []).filter { delivery.instances.contains($0.id) }
            found.sort { $0.id < $1.id }
            return PushAddress(bundle: address.bundle, token: address.token, pushType: address.pushType, widgetIDs: found.map(\.widgetID))
        }
    }
}
