public import Foundation
public import ReloadGateCore

// The registry's rules, written once for both engines: devices, widgets, controls and timelines.

extension SQLStore {
    /// Registers a device with its full widget set (WidgetKit hands over the whole list), replacing the
    /// previous set in one transaction: kept widgets keep their instance ids (and so their budgets),
    /// missing ones are removed, new ones added. `previousToken` retires the old token: from then on it
    /// is `Unregistered` (410) and its widgets are gone.
    public func putDevice(app: App, token: DeviceToken, widgets: [WidgetRegistration], previousToken: DeviceToken?, now: Date) async throws
        -> DeviceRegistration
    {
        try await writeRegistered(.putDevice(app: app, token: token, widgets: widgets, previousToken: previousToken), now: now).device
    }

    /// Registers a control's token with its kind and configuration (its one instance keeps its id, and
    /// so its budget, when registered again). `previousToken` retires the control's old token, as for a
    /// device.
    public func putControl(app: App, token: DeviceToken, control: ControlRegistration, previousToken: DeviceToken?, now: Date) async throws
        -> DeviceRegistration
    {
        try await writeRegistered(.putControl(app: app, token: token, control: control, previousToken: previousToken), now: now).device
    }

    /// Registers a Live Activity's token (or a push-to-start token) with its attributes type.
    public func putActivity(app: App, token: DeviceToken, activity: ActivityRegistration, previousToken: DeviceToken?, now: Date) async throws
        -> DeviceRegistration
    {
        try await writeRegistered(.putActivity(app: app, token: token, activity: activity, previousToken: previousToken), now: now).device
    }

    /// Records a widget instance's timeline (`PUT .../widgets/<id>/timeline`). - Returns: the instance id.
    public func putTimeline(app: App, token: DeviceToken, widgetID: String, timeline: Timeline, now: Date) async throws -> Int64 {
        try await writeRegistered(.putTimeline(app: app, token: token, widgetID: widgetID, timeline: timeline), now: now).instance
    }

    /// One registry write in its own transaction, its refusal thrown.
    func writeRegistered(_ write: RegistryWrite, now: Date) async throws -> RegistryWritten {
        try await writing { session in
            let written = try await session.write(write, now: now)
            try await session.registryChanged(devices: session.devices(changedBy: [written]), tokens: write.announced(written).map(\.hex), at: now)
            return written
        }
    }

    /// Writes many registry changes in one transaction (one sync). One refused (a ``RegistryError``)
    /// leaves the others written and has written nothing itself: every refusal comes from a check
    /// before the write's first change (no savepoint needed, which costs two statements a write).
    public func writeRegistry(_ writes: [RegistryWrite], now: Date) async throws -> [Result<RegistryWritten, RegistryError>] {
        guard !writes.isEmpty else { return [] }
        return try await writing { session in
            var results: [Result<RegistryWritten, RegistryError>] = []
            results.reserveCapacity(writes.count)
            var index = 0
            while index < writes.count {
                // Adoptions one after the other are written together (``SQLSession/adopt(_:now:)``).
                var adoptions: [Adoption] = []
                while index < writes.count, case .adopt(let app, let token, let pushType, let pushToStart) = writes[index].step {
                    adoptions.append(Adoption(app: app, token: token, pushType: pushType, pushToStart: pushToStart))
                    index += 1
                }
                if !adoptions.isEmpty {
                    results += try await session.adopt(adoptions, now: now)
                    continue
                }
                // So are registrations of distinct tokens that retire none (``SQLSession/register(_:now:)``).
                var registrations: [TokenRegistration] = []
                var tokens = Set<DeviceKey>()
                while index < writes.count, case .instances(let app, let token, let pushType, let instances, .none) = writes[index].step,
                    tokens.insert(DeviceKey(app: app.id, token: token.hex)).inserted
                {
                    registrations.append(TokenRegistration(app: app, token: token, pushType: pushType, instances: instances))
                    index += 1
                }
                if !registrations.isEmpty {
                    results += try await session.register(registrations, now: now)
                    continue
                }
                let write = writes[index]
                results.append(try await Result.of { try await session.write(write, now: now) })
                index += 1
            }
            var written: [RegistryWritten] = []
            var announced: [String] = []
            for (write, result) in zip(writes, results) {
                guard case .success(let value) = result else { continue }
                written.append(value)
                announced += write.announced(value).map(\.hex)
            }
            try await session.registryChanged(devices: session.devices(changedBy: written), tokens: announced, at: now)
            return results
        }
    }

    /// Removes a device and its widgets (`DELETE .../devices/<token>`); with `pushType`, a token of the
    /// other type is refused and nothing is removed.
    /// - Returns: the device id and its removed instance ids.
    public func deleteDevice(app: App, token: DeviceToken, pushType: PushType? = nil, now: Date) async throws -> (device: Int64, instances: [Int64]) {
        let (device, instances) = try await writing { session in
            guard let device = try await session.device(app: app, token: token) else { throw RegistryError.deviceNotFound(token) }
            if let pushType, device.pushType != pushType { throw RegistryError.otherPushType(token, registered: device.pushType) }
            let instances = try await session.rows("SELECT id FROM widget WHERE deviceId = \(device.id) ORDER BY id").map { try $0.int64("id") }
            try await session.run("DELETE FROM device WHERE id = \(device.id)")
            try await session.registryChanged(devices: [device.id], tokens: [token.hex], at: now)
            return (device.id, instances)
        }
        return (device, instances)
    }

    /// The distinct (kind, family, configuration) of the app's active devices with their counts
    /// (`GET .../configurations`), optionally of one kind.
    public func configurations(app: App, kind: String?) async throws -> [ConfigurationUsage] {
        try await reading { session in
            var query: SQLQuery = """
                SELECT widget.kind, widget.family, widget.configuration, COUNT(*) AS count
                FROM widget JOIN device ON device.id = widget.deviceId
                WHERE device.appId = \(app.id) AND device.active
                """
            if let kind { query += " AND widget.kind = \(kind)" }
            query += """
                 GROUP BY widget.kind, widget.family, widget.configuration
                ORDER BY widget.kind\(SQLCollation.binary), widget.family\(SQLCollation.binary), widget.configuration\(SQLCollation.binary)
                """
            return try await session.rows(query).map { row in
                ConfigurationUsage(
                    kind: try row.string("kind"), family: try row.string("family"), configuration: try row.string("configuration"),
                    count: try row.int("count")
                )
            }
        }
    }

    /// The device's state: whether it is active, and since when it is unregistered (for `410`).
    public func deviceStatus(app: App, token: DeviceToken) async throws -> (active: Bool, unregisteredAt: Date?)? {
        let device = try await reading { session in try await session.device(app: app, token: token) }
        return device.map { ($0.active, $0.unregisteredAt) }
    }
}

/// A device row as the registry's rules read it.
struct StoredDevice: Sendable {
    var id: Int64
    var active: Bool
    var unregisteredAt: Date?
    var pushType: PushType
}

extension StoredDevice {
    /// From a row with the device's `id`, `active`, `unregisteredAt` and `pushType`.
    init(_ row: SQLRow) throws {
        self.init(
            id: try row.int64("id"), active: try row.bool("active"),
            unregisteredAt: try row.optionalInt64("unregisteredAt").map(Date.init(storedMilliseconds:)),
            pushType: PushType(rawValue: try row.string("pushType")) ?? .widgets
        )
    }
}

/// A widget row (or a control's or activity's instance row) as a registration compares it with what it
/// registers.
private struct StoredInstance {
    var id: Int64
    var kind: String
    var family: String
    var configuration: String
    var pushEnabled: Bool
}

extension SQLSession {
    /// New instance rows written by one `INSERT`: 6 values each, far inside both engines' limits on a
    /// statement's parameters (SQLite 32,766, PostgreSQL 65,535) whatever `RegistryLimits` allows.
    static var insertRows: Int { 500 }

    /// One registry write, or its refusal (thrown before its first change).
    func write(_ write: RegistryWrite, now: Date) async throws -> RegistryWritten {
        switch write.step {
        case .instances(let app, let token, let pushType, let instances, let previousToken):
            .device(try await putInstances(app: app, token: token, pushType: pushType, instances: instances, previousToken: previousToken, now: now))
        case .timeline(let app, let token, let widgetID, let timeline):
            .timeline(instance: try await putTimeline(app: app, token: token, widgetID: widgetID, timeline: timeline, now: now))
        case .adopt(let app, let token, let pushType, let pushToStart):
            try await adopt([Adoption(app: app, token: token, pushType: pushType, pushToStart: pushToStart)], now: now)[0].get()
        }
    }

    /// A token's whole instance set (a device's widgets, a control's one instance): see
    /// ``SQLStore/putDevice(app:token:widgets:previousToken:now:)``. An insert that races with another
    /// gateway's for the same token updates the row the other one wrote.
    func putInstances(
        app: App, token: DeviceToken, pushType: PushType, instances widgets: [InstanceRegistration], previousToken: DeviceToken?, now: Date
    ) async throws -> DeviceRegistration {
        try await putInstances(
            app: app, token: token, pushType: pushType, instances: widgets, previousToken: previousToken,
            current: device(app: app, token: token), now: now
        )
    }

    /// ``putInstances(app:token:pushType:instances:previousToken:now:)`` with the token's row (`current`,
    /// `nil` for none) read in this transaction.
    func putInstances(
        app: App, token: DeviceToken, pushType: PushType, instances widgets: [InstanceRegistration], previousToken: DeviceToken?,
        current: StoredDevice?, now: Date
    ) async throws -> DeviceRegistration {
        let time = now.storedMilliseconds
        // Refusals first, before any change (writeRegistry relies on it).
        if let current, current.pushType != pushType { throw RegistryError.otherPushType(token, registered: current.pushType) }
        var previous: StoredDevice?
        if let previousToken {
            previous = try await device(app: app, token: previousToken)
            if let previous, previous.pushType != pushType { throw RegistryError.otherPushType(previousToken, registered: previous.pushType) }
        }
        var retired: (device: Int64, instances: [Int64])?
        if let previousToken, previousToken != token, let old = previous, old.active {
            let instances = try await rows("DELETE FROM widget WHERE deviceId = \(old.id) RETURNING id").map { try $0.int64("id") }.sorted()
            try await run("UPDATE device SET active = false, unregisteredAt = \(time) WHERE id = \(old.id)")
            retired = (old.id, instances)
        }
        // A new token's row is inserted and has no widgets yet; a known one's is updated and its widgets
        // read. An insert that races with another gateway's for the same token finds the other's row.
        var device: Int64?
        var existing: [String: StoredInstance] = [:]
        if current == nil {
            device = try await row("""
                INSERT INTO device (appId, token, active, registeredAt, pushType) VALUES (\(app.id), \(token.hex), true, \(time), \(pushType.rawValue))
                ON CONFLICT (appId, token) DO NOTHING RETURNING id
                """)?.int64("id")
        }
        if device == nil {
            guard let id = try await row("""
                UPDATE device SET active = true, registeredAt = \(time), unregisteredAt = NULL WHERE appId = \(app.id) AND token = \(token.hex)
                RETURNING id
                """)?.int64("id") else { throw StoreError.unavailable(reason: "a device changed while it was registered; try again") }
            device = id
            for row in try await rows("SELECT id, widgetID, kind, family, configuration, pushEnabled FROM widget WHERE deviceId = \(id)") {
                existing[try row.string("widgetID")] = StoredInstance(
                    id: try row.int64("id"), kind: try row.string("kind"), family: try row.string("family"),
                    configuration: try row.string("configuration"), pushEnabled: try row.bool("pushEnabled")
                )
            }
        }
        guard let device else { throw StoreError.corrupt(reason: "registering a device returned no id") }
        let wanted = Set(widgets.map(\.id))
        let removed = existing.filter { !wanted.contains($0.key) }.map(\.value.id).sorted()
        if !removed.isEmpty {
            try await run("DELETE FROM widget WHERE id IN \(ids: removed)")
        }
        // A kept widget's row is written only where it changed (a device registers its whole set again
        // each time, mostly unchanged); new widgets go in one statement per `insertRows`, not one each.
        var ids: [String: Int64] = [:]
        var added: [(widget: InstanceRegistration, configuration: String)] = []
        for widget in widgets {
            let configuration = widget.configuration.canonicalJSON
            guard let stored = existing[widget.id] else {
                added.append((widget, configuration))
                continue
            }
            ids[widget.id] = stored.id
            if stored.kind != widget.kind || stored.family != widget.family || stored.configuration != configuration
                || stored.pushEnabled != widget.pushEnabled
            {
                try await run("""
                    UPDATE widget SET kind = \(widget.kind), family = \(widget.family),
                        configuration = \(configuration), pushEnabled = \(widget.pushEnabled) WHERE id = \(stored.id)
                    """)
            }
        }
        let perStatement = min(Self.insertRows, dialect.registryInsertRows)
        for first in stride(from: 0, to: added.count, by: perStatement) {
            var values: SQLQuery = ""
            for (index, (widget, configuration)) in added[first..<min(first + perStatement, added.count)].enumerated() {
                values += "\(unescaped: index == 0 ? "" : ", ")(\(device), \(widget.id), \(widget.kind), \(widget.family), \(configuration), \(widget.pushEnabled))"
            }
            for row in try await rows("INSERT INTO widget (deviceId, widgetID, kind, family, configuration, pushEnabled) VALUES \(values) RETURNING id, widgetID") {
                ids[try row.string("widgetID")] = try row.int64("id")
            }
        }
        let instances = try widgets.map { widget in
            guard let id = ids[widget.id] else { throw StoreError.corrupt(reason: "registering a widget returned no id") }
            return (id: id, widget: widget)
        }
        return DeviceRegistration(device: device, pushType: pushType, instances: instances, removedInstances: removed, retired: retired)
    }

    /// Records a widget instance's timeline; a control has none. - Returns: the instance id.
    func putTimeline(app: App, token: DeviceToken, widgetID: String, timeline: Timeline, now: Date) async throws -> Int64 {
        guard let device = try await device(app: app, token: token) else { throw RegistryError.deviceNotFound(token) }
        guard device.active else { throw RegistryError.deviceUnregistered(token) }
        guard device.pushType == .widgets else { throw RegistryError.otherPushType(token, registered: device.pushType) }
        guard let instance = try await row("SELECT id FROM widget WHERE deviceId = \(device.id) AND widgetID = \(widgetID)")?.int64("id") else {
            throw RegistryError.widgetNotFound(token, widgetID)
        }
        try await run("""
            INSERT INTO timeline (widgetId, entries, policy, plannedReload, reportedAt)
            VALUES (\(instance), \(timeline.storedEntries), \(timeline.storedPolicy), \(timeline.plannedReload?.milliseconds), \(now.storedMilliseconds))
            ON CONFLICT (widgetId) DO UPDATE SET entries = excluded.entries, policy = excluded.policy,
                plannedReload = excluded.plannedReload, reportedAt = excluded.reportedAt
            """)
        return instance
    }

    /// The devices that `written` changed (a timeline's: its instance's device).
    func devices(changedBy written: [RegistryWritten]) async throws -> [Int64] {
        var devices: [Int64] = []
        for write in written {
            switch write {
            case .device(let registration): devices += registration.devices
            case .timeline(let instance): devices += try await rows("SELECT deviceId FROM widget WHERE id = \(instance)").map { try $0.int64("deviceId") }
            // Its owner reads the device again when the adoption added the implicit instance.
            case .adopted(let adopted): if adopted.instanceAdded { devices.append(adopted.device) }
            }
        }
        return devices
    }

    /// The app's device with this token, in any state.
    func device(app: App, token: DeviceToken) async throws -> StoredDevice? {
        try await row("SELECT id, active, unregisteredAt, pushType FROM device WHERE appId = \(app.id) AND token = \(token.hex)").map(StoredDevice.init)
    }
}

extension RegistryWritten {
    /// The device registration written (only for a device or control write).
    var device: DeviceRegistration {
        get throws {
            guard case .device(let registration) = self else { throw StoreError.corrupt(reason: "a device write wrote a timeline") }
            return registration
        }
    }

    /// The instance whose timeline was written (only for a timeline write).
    var instance: Int64 {
        get throws {
            guard case .timeline(let instance) = self else { throw StoreError.corrupt(reason: "a timeline write wrote a device") }
            return instance
        }
    }
}
