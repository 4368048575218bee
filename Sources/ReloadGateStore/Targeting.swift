import Foundation
public import ReloadGateCore

// What the scheduler loads, what a webhook call targets, and where the delivery worker sends.

extension SQLStore {
    /// The push-enabled widget instances of the app's active devices (or its controls, for a target of
    /// push type `controls`) that the target selects, with their devices, ordered by instance id.
    /// Configuration values are compared by type and value (the string "42" does not match the number 42).
    public func targetInstances(app: App, target: ReloadTarget) async throws -> [(instance: Int64, device: Int64)] {
        if let devices = target.devices, devices.isEmpty { return [] }
        let found = try await reading { session in
            var query: SQLQuery = """
                SELECT widget.id, widget.deviceId FROM widget JOIN device ON device.id = widget.deviceId
                WHERE device.appId = \(app.id) AND device.active AND device.pushType = \(target.pushType.rawValue) AND widget.pushEnabled
                """
            if let kind = target.kind { query += " AND widget.kind = \(kind)" }
            // A webhook updates activities; a push-to-start token has none to update.
            if let start = target.pushType.descriptor.pushToStartInstance { query += " AND widget.family <> \(start.family)" }
            if let devices = target.devices { query += " AND device.token IN \(texts: devices.map(\.hex))" }
            query += session.dialect.parameterMatch(target.match) + " ORDER BY widget.id"
            var instances: [TargetedInstance] = []
            try await session.forEachRow(query) { row in
                instances.append(TargetedInstance(instance: try row.int64("id"), device: try row.int64("deviceId")))
            }
            return instances
        }
        return found.map { ($0.instance, $0.device) }
    }

    /// Every widget instance of an active device, with its device, kind and planned timeline reload,
    /// ordered by instance id: what the scheduler registers on start.
    public func registeredInstances() async throws -> [RegisteredInstance] {
        try await registeredInstances(where: "device.active")
    }

    /// The instances of active devices that `condition` selects (over `widget` and `device`), in instance
    /// order. `scanning`: the read may cover whole tables (the longer deadline); a few rows' read (one
    /// device's) takes the store's deadline, as the commit loop that waits for it must.
    func registeredInstances(where condition: SQLQuery, scanning: Bool = true) async throws -> [RegisteredInstance] {
        try await reading(scanning: scanning) { session in
            var instances: [RegisteredInstance] = []
            // Kinds are few: one string each, shared by its instances.
            var kinds: [String: String] = [:]
            try await session.forEachRow("""
                SELECT widget.id, widget.deviceId, widget.kind, timeline.plannedReload, device.pushType,
                    CASE WHEN device.pushType = 'widgets' THEN '' ELSE widget.family END AS family
                FROM widget JOIN device ON device.id = widget.deviceId LEFT JOIN timeline ON timeline.widgetId = widget.id
                WHERE \(condition) ORDER BY widget.id
                """) { row in
                let read = try row.string("kind")
                let kind = kinds[read] ?? read
                if kinds[read] == nil { kinds[read] = read }
                instances.append(RegisteredInstance(
                    instance: try row.int64("id"), device: try row.int64("deviceId"), kind: kind,
                    pushType: PushType(rawValue: try row.string("pushType")) ?? .widgets,
                    plannedReload: try row.optionalInt64("plannedReload").map(Timestamp.init(milliseconds:)),
                    family: try row.string("family")
                ))
            }
            return instances
        }
    }

    public func requestBodies(_ requests: [RequestID]) async throws -> [(request: RequestID, body: String)] {
        guard !requests.isEmpty else { return [] }
        let ids = requests.map { Int64(bitPattern: $0) }
        return try await reading { session in
            try await session.rows("SELECT id, summary FROM request WHERE id IN \(ids: ids) ORDER BY id").map { row in
                (RequestID(bitPattern: try row.int64("id")), try row.string("summary"))
            }
        }
    }

    /// The address of a delivery to `device`: `nil` when the device is gone or unregistered.
    public func pushAddress(device: Int64, instances: CompactList<Int64>) async throws -> PushAddress? {
        try await pushAddresses([(device, instances)])[0]
    }

    /// The addresses of many deliveries, in their order: `nil` for a device that is gone or unregistered.
    /// Two queries for the whole batch, however many deliveries (not a pair per delivery, which the
    /// delivery benchmark felt): the active devices with their app's bundle, and every
    /// widget of those devices (a handful each, read from the (deviceId, widgetID) index alone), from
    /// which each delivery's own are picked here.
    public func pushAddresses(_ deliveries: [(device: Int64, instances: CompactList<Int64>)]) async throws -> [PushAddress?] {
        let ids = Array(Set(deliveries.map(\.device)))
        let wantsWidgets = deliveries.contains { !$0.instances.isEmpty }
        let (addresses, widgets) = try await reading { session in
            var addresses: [Int64: DeviceAddress] = [:]
            var bundles: [String: BundleID] = [:]
            try await session.forEachRow("""
                SELECT device.id, app.bundle, device.token, device.pushType FROM device JOIN app ON app.id = device.appId
                WHERE device.id IN \(ids: ids) AND device.active
                """) { row in
                let id = try row.int64("id")
                let bundleText = try row.string("bundle")
                guard let bundle = bundles[bundleText] ?? (try? BundleID(bundleText)), let token = try? DeviceToken(try row.string("token")) else {
                    throw StoreError.corrupt(reason: "device \(id) has an invalid bundle or token")
                }
                bundles[bundleText] = bundle
                addresses[id] = DeviceAddress(bundle: bundle, token: token, pushType: PushType(rawValue: try row.string("pushType")) ?? .widgets)
            }
            var widgets: [Int64: [WidgetName]] = [:]
            if wantsWidgets {
                try await session.forEachRow("SELECT deviceId, id, widgetID FROM widget WHERE deviceId IN \(ids: ids)") { row in
                    widgets[try row.int64("deviceId"), default: []].append(WidgetName(id: try row.int64("id"), widgetID: try row.string("widgetID")))
                }
            }
            return (addresses, widgets)
        }
        return deliveries.map { delivery -> PushAddress? in
            guard let address = addresses[delivery.device] else { return nil }
            var found = (widgets[delivery.device] ?? []).filter { delivery.instances.contains($0.id) }
            found.sort { $0.id < $1.id }
            return PushAddress(bundle: address.bundle, token: address.token, pushType: address.pushType, widgetIDs: found.map(\.widgetID))
        }
    }
}

/// An instance a target selects, with its device.
private struct TargetedInstance: Sendable {
    var instance: Int64
    var device: Int64
}

/// Where a device's deliveries go.
private struct DeviceAddress: Sendable {
    var bundle: BundleID
    var token: DeviceToken
    var pushType: PushType
}

/// A widget instance's id and its app's widget id.
private struct WidgetName: Sendable {
    var id: Int64
    var widgetID: String
}
