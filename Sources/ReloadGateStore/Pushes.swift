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

    /// Adopts a token never registered in a transaction of its own (``SQLSession/adopt(_:now:)``).
    /// - Returns: the device id and the instance id.
    public func adoptDevice(app: App, token: DeviceToken, pushType: PushType, pushToStart: Bool, now: Date) async throws -> (device: Int64, instance: Int64) {
        let written = try await writeRegistered(.adoptDevice(app: app, token: token, pushType: pushType, pushToStart: pushToStart), now: now)
        guard case .adopted(let adopted) = written else { throw StoreError.corrupt(reason: "an adoption wrote no device") }
        return (adopted.device, adopted.instance)
    }

    /// Apple said the device's token is no longer valid (`410` with its timestamp, or `BadDeviceToken`):
    /// the device is marked unregistered as of `since`, unless it registered again after that time.
    /// - Returns: the device's token (hex) when it was marked, `nil` when not.
    @discardableResult
    public func markDeviceInvalid(device: Int64, since: Date) async throws -> String? {
        let time = since.storedMilliseconds
        return try await writing { session in
            let marked = try await session.rows("""
                UPDATE device SET active = false, unregisteredAt = \(time) WHERE id = \(device) AND active AND registeredAt <= \(time)
                RETURNING id, token
                """).map { (id: try $0.int64("id"), token: try $0.string("token")) }
            try await session.registryChanged(devices: marked.map(\.id), tokens: marked.map(\.token), at: since)
            return marked.first?.token
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

/// A token to adopt: one ``RegistryWrite/adoptDevice(app:token:pushType:pushToStart:)``.
struct Adoption: Sendable {
    var app: App
    var token: DeviceToken
    var pushType: PushType
    var pushToStart: Bool
}

/// A device's row by what identifies it.
struct DeviceKey: Hashable {
    var app: Int64
    var token: String
}

/// An instance's row by what identifies it.
struct InstanceKey: Hashable {
    var device: Int64
    var widgetID: String
}

extension SQLSession {
    /// Adopts tokens never registered: records each device (or control, or activity, or push-to-start
    /// token) with one implicit instance of kind `*` (until its widgets, control or activity are
    /// registered), so budgets and coalescing apply from its first push. A token written first by another
    /// push, gateway or registration (or earlier in `adoptions`) keeps its row (`created` is false) and
    /// gets the implicit instance; one of the other push type is refused before any change of its own
    /// (``RegistryError/otherPushType(_:registered:)``).
    ///
    /// A herd of new installs adopts many tokens in one registry batch: the devices are inserted in one
    /// statement and the instances in another, per ``adoptionChunk`` tokens (on PostgreSQL each statement
    /// is a round trip; one per token was ~550 adoptions a second, docs/decisions/0084), on SQLite per
    /// ``SQLDialect/registryInsertRows`` (so that each statement's journal stays in memory). Tokens that were
    /// there already are read one by one.
    /// - Returns: one result per adoption, in order.
    func adopt(_ adoptions: [Adoption], now: Date) async throws -> [Result<RegistryWritten, RegistryError>] {
        try await Self.inChunks(adoptions, of: min(Self.adoptionChunk, dialect.registryInsertRows)) { try await adoptChunk($0, now: now) }
    }

    /// `body`'s results for `items` taken `size` at a time, in order (a statement's parameters are bounded).
    static func inChunks<Item, Written>(
        _ items: [Item], of size: Int, _ body: (ArraySlice<Item>) async throws -> [Written]
    ) async throws -> [Written] {
        var results: [Written] = []
        results.reserveCapacity(items.count)
        for chunk in items.chunks(of: size) { results += try await body(chunk) }
        return results
    }

    /// At most this many tokens in one statement (four parameters each in either statement: SQLite allows 32,766, PostgreSQL 65,535).
    static var adoptionChunk: Int { 1_000 }

    private func adoptChunk(_ adoptions: ArraySlice<Adoption>, now: Date) async throws -> [Result<RegistryWritten, RegistryError>] {
        var insert: SQLQuery = "INSERT INTO device (appId, token, active, registeredAt, pushType) VALUES "
        for (offset, adoption) in adoptions.enumerated() {
            if offset > 0 { insert += ", " }
            insert += "(\(adoption.app.id), \(adoption.token.hex), true, \(now.storedMilliseconds), \(adoption.pushType.rawValue))"
        }
        insert += " ON CONFLICT (appId, token) DO NOTHING RETURNING id, appId, token"
        var created: [DeviceKey: Int64] = [:]
        for row in try await rows(insert) {
            created[DeviceKey(app: try row.int64("appId"), token: try row.string("token"))] = try row.int64("id")
        }
        // Each token's device, or its refusal; a token twice in the batch is created by its first adoption.
        var devices: [Result<(id: Int64, created: Bool), RegistryError>] = []
        for adoption in adoptions {
            let key = DeviceKey(app: adoption.app.id, token: adoption.token.hex)
            if let id = created.removeValue(forKey: key) {
                devices.append(.success((id, true)))
                continue
            }
            // The insert skipped it: the token's row is another's, whose type is checked first.
            guard let device = try await device(app: adoption.app, token: adoption.token) else {
                throw StoreError.corrupt(reason: "an adopted device has no row")
            }
            if device.pushType != adoption.pushType {
                devices.append(.failure(.otherPushType(adoption.token, registered: device.pushType)))
            } else {
                devices.append(.success((device.id, false)))
            }
        }
        var instances: SQLQuery = "INSERT INTO widget (deviceId, widgetID, kind, family, configuration, pushEnabled) VALUES "
        var any = false
        for (adoption, device) in zip(adoptions, devices) {
            guard case .success(let device) = device else { continue }
            let (implicit, family) = ImplicitInstance.of(adoption.pushType, pushToStart: adoption.pushToStart)
            if any { instances += ", " }
            instances += "(\(device.id), \(implicit), \(ImplicitInstance.kind), \(family), '{}', true)"
            any = true
        }
        instances += " ON CONFLICT (deviceId, widgetID) DO NOTHING RETURNING id, deviceId, widgetID"
        var added: [InstanceKey: Int64] = [:]
        if any {
            for row in try await rows(instances) {
                added[InstanceKey(device: try row.int64("deviceId"), widgetID: try row.string("widgetID"))] = try row.int64("id")
            }
        }
        var results: [Result<RegistryWritten, RegistryError>] = []
        for (adoption, device) in zip(adoptions, devices) {
            switch device {
            case .failure(let refusal):
                results.append(.failure(refusal))
            case .success(let device):
                let implicit = ImplicitInstance.of(adoption.pushType, pushToStart: adoption.pushToStart).widgetID
                // The instance is added by the first adoption that names it; a later one finds it.
                if let id = added.removeValue(forKey: InstanceKey(device: device.id, widgetID: implicit)) {
                    results.append(.success(.adopted(AdoptedDevice(device: device.id, instance: id, created: device.created, instanceAdded: true))))
                    continue
                }
                guard let instance = try await row("SELECT id FROM widget WHERE deviceId = \(device.id) AND widgetID = \(implicit)") else {
                    throw StoreError.corrupt(reason: "an adopted device has no implicit instance")
                }
                results.append(.success(.adopted(AdoptedDevice(device: device.id, instance: try instance.int64("id"), created: device.created, instanceAdded: false))))
            }
        }
        return results
    }
}
