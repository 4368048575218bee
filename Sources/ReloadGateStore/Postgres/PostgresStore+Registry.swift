public import Foundation
import Logging
import PostgresNIO
public import ReloadGateCore

// Devices, widgets and timelines: the registry API's writes and reads.

extension PostgresStore {
    /// Registers a device with its full widget set, replacing the previous set in one transaction (the
    /// rules of ``SQLiteStore/putDevice(app:token:widgets:previousToken:now:)``). An insert that races
    /// with another gateway's for the same token updates the row the other one wrote.
    public func putDevice(app: App, token: DeviceToken, widgets: [WidgetRegistration], previousToken: DeviceToken?, now: Date) async throws
        -> DeviceRegistration
    {
        let logger = logger
        return try await transaction { connection in
            let registration = try await Self.putDevice(
                connection, app: app, token: token, pushType: .widgets, instances: widgets.map(InstanceRegistration.init),
                previousToken: previousToken, now: now, logger: logger
            )
            try await Self.noticeOwners(of: registration.devices, at: now, on: connection, logger: logger)
            return registration
        }
    }

    /// Registers a control's token (``SQLiteStore/putControl(app:token:control:previousToken:now:)``).
    public func putControl(app: App, token: DeviceToken, control: ControlRegistration, previousToken: DeviceToken?, now: Date) async throws
        -> DeviceRegistration
    {
        let logger = logger
        return try await transaction { connection in
            let registration = try await Self.putDevice(
                connection, app: app, token: token, pushType: .controls, instances: [InstanceRegistration(control)],
                previousToken: previousToken, now: now, logger: logger
            )
            try await Self.noticeOwners(of: registration.devices, at: now, on: connection, logger: logger)
            return registration
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
                results.append(try await Result.of {
                    switch write.step {
                    case .instances(let app, let token, let pushType, let instances, let previousToken):
                        .device(try await Self.putDevice(
                            connection, app: app, token: token, pushType: pushType, instances: instances, previousToken: previousToken, now: now,
                            logger: logger
                        ))
                    case .timeline(let app, let token, let widgetID, let timeline):
                        .timeline(instance: try await Self.putTimeline(
                            connection, app: app, token: token, widgetID: widgetID, timeline: timeline, now: now, logger: logger
                        ))
                    }
                })
            }
            var changed: [Int64] = []
            for case .success(let written) in results {
                switch written {
                case .device(let registration): changed += registration.devices
                case .timeline(let instance): changed += try await Self.device(ofInstance: instance, on: connection, logger: logger)
                }
            }
            try await Self.noticeOwners(of: changed, at: now, on: connection, logger: logger)
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
            // A delete is given no time of its own; the row's time is only for a person reading the table.
            try await Self.noticeOwners(of: [device.id], at: Date(), on: connection, logger: self.logger)
            return (device.id, instances)
        }
    }

    /// Records a widget instance's timeline. - Returns: the instance id.
    public func putTimeline(app: App, token: DeviceToken, widgetID: String, timeline: Timeline, now: Date) async throws -> Int64 {
        let logger = logger
        return try await transaction { connection in
            let instance = try await Self.putTimeline(connection, app: app, token: token, widgetID: widgetID, timeline: timeline, now: now, logger: logger)
            try await Self.noticeOwners(of: Self.device(ofInstance: instance, on: connection, logger: logger), at: now, on: connection, logger: logger)
            return instance
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
}

extension PostgresStore {
    /// Tells the owners of `devices` that their registration changed, in the caller's transaction: an
    /// inbox row per device for its partition's owner (``ForwardedWork/device(id:)``), and a notification
    /// delivered when the transaction commits. The owner learns of the change even when the gateway that
    /// made it fails right after (it would otherwise tell it with its next group commit).
    /// `at`: the inbox row's `createdAt` (the time of the change; read by no gateway).
    static func noticeOwners(of devices: [Int64], at: Date, on connection: PostgresConnection, logger: Logger) async throws {
        let unique = Array(Set(devices)).sorted()
        guard !unique.isEmpty else { return }
        let encoder = JSONEncoder()
        let works = try unique.map { String(decoding: try encoder.encode(ForwardedWork.device(id: $0)), as: UTF8.self) }
        let partitions = unique.map { Int32(DevicePartition.of(device: $0)) }
        let created = at.storedMilliseconds
        _ = try await connection.rows(
            """
            INSERT INTO inbox (partition, work, createdAt)
            SELECT partition, work, \(created) FROM unnest(\(partitions)::integer[], \(works)::text[]) AS notice(partition, work)
            """,
            logger: logger
        )
        _ = try await connection.rows(
            "SELECT pg_notify(\(PostgresStore.clusterChannel), \(ClusterChange.inbox.rawValue))", logger: logger
        )
    }

    /// The device of a widget instance (`[]`: none).
    static func device(ofInstance instance: Int64, on connection: PostgresConnection, logger: Logger) async throws -> [Int64] {
        try await connection.rows("SELECT deviceId FROM widget WHERE id = \(instance)", logger: logger).map { try $0.decode(Int64.self) }
    }
}
