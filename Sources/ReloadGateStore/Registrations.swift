import Foundation
import ReloadGateCore

/// A registration of a token's whole instance set (a device's widgets, a control's or an activity's one
/// instance) that retires no previous token: those one after the other in a registry batch are written
/// together (``SQLSession/register(_:now:)``).
struct TokenRegistration: Sendable {
    var app: App
    var token: DeviceToken
    var pushType: PushType
    var instances: [InstanceRegistration]
}

extension SQLSession {
    /// Registrations of distinct tokens that retire none, written as one by one would write them: the
    /// tokens' rows are read in one statement an app, new tokens' devices inserted in one, and their
    /// instances in one per ``insertRows`` rows, for each ``registrationChunk`` tokens (on SQLite each
    /// ``SQLDialect/registryInsertRows``, and so are the inserts); a token with a row goes on through
    /// ``putInstances(app:token:pushType:instances:previousToken:current:now:)`` with the row read.
    ///
    /// An app's release makes its installs register at once, many of them tokens never seen (a new
    /// install, a restored phone): a lookup, a device insert and a widget insert for each were a fifth of
    /// a registration's CPU on SQLite, and three round trips each on PostgreSQL (docs/BENCHMARKS.md).
    /// - Precondition: no token is in `registrations` twice (the caller ends a run at a repeated token).
    /// - Returns: one result per registration, in order.
    func register(_ registrations: [TokenRegistration], now: Date) async throws -> [Result<RegistryWritten, RegistryError>] {
        try await Self.inChunks(registrations, of: min(Self.registrationChunk, dialect.registryInsertRows)) {
            try await registerChunk($0, now: now)
        }
    }

    /// At most this many tokens in one statement (five parameters each in the device insert: SQLite
    /// allows 32,766, PostgreSQL 65,535).
    static var registrationChunk: Int { 1_000 }

    private func registerChunk(_ registrations: ArraySlice<TokenRegistration>, now: Date) async throws -> [Result<RegistryWritten, RegistryError>] {
        // The rows of the tokens known already, one read an app (in the order the apps first appear).
        var tokensByApp: [Int64: [String]] = [:]
        var apps: [Int64] = []
        for registration in registrations {
            if tokensByApp[registration.app.id] == nil { apps.append(registration.app.id) }
            tokensByApp[registration.app.id, default: []].append(registration.token.hex)
        }
        var stored: [DeviceKey: StoredDevice] = [:]
        for app in apps {
            let query: SQLQuery =
                "SELECT id, token, active, unregisteredAt, pushType FROM device WHERE appId = \(app) AND token IN \(texts: tokensByApp[app] ?? [])"
            for row in try await rows(query) {
                stored[DeviceKey(app: app, token: try row.string("token"))] = try StoredDevice(row)
            }
        }

        // The new tokens' devices in one insert. A token another gateway wrote since the read is not
        // returned: it is registered below as a known one.
        let new = registrations.filter { stored[DeviceKey(app: $0.app.id, token: $0.token.hex)] == nil }
        var created: [DeviceKey: Int64] = [:]
        if !new.isEmpty {
            let time = now.storedMilliseconds
            var insert: SQLQuery = "INSERT INTO device (appId, token, active, registeredAt, pushType) VALUES "
            for (offset, registration) in new.enumerated() {
                if offset > 0 { insert += ", " }
                insert += "(\(registration.app.id), \(registration.token.hex), true, \(time), \(registration.pushType.rawValue))"
            }
            insert += " ON CONFLICT (appId, token) DO NOTHING RETURNING id, appId, token"
            for row in try await rows(insert) {
                created[DeviceKey(app: try row.int64("appId"), token: try row.string("token"))] = try row.int64("id")
            }
        }

        // Their instances, ``insertRows`` rows a statement (fewer on SQLite: ``SQLDialect/registryInsertRows``);
        // each row is paired with its registration by device and widget id, not by the order the engine
        // returns rows in.
        var instanceRows: [(device: Int64, instance: InstanceRegistration)] = []
        for registration in new {
            guard let device = created[DeviceKey(app: registration.app.id, token: registration.token.hex)] else { continue }
            for instance in registration.instances { instanceRows.append((device, instance)) }
        }
        var added: [InstanceKey: Int64] = [:]
        let perStatement = min(Self.insertRows, dialect.registryInsertRows)
        for first in stride(from: 0, to: instanceRows.count, by: perStatement) {
            var values: SQLQuery = ""
            for (index, (device, instance)) in instanceRows[first..<min(first + perStatement, instanceRows.count)].enumerated() {
                values += "\(unescaped: index == 0 ? "" : ", ")(\(device), \(instance.id), \(instance.kind), \(instance.family), \(instance.configuration.canonicalJSON), \(instance.pushEnabled))"
            }
            let insert: SQLQuery = "INSERT INTO widget (deviceId, widgetID, kind, family, configuration, pushEnabled) VALUES \(values) RETURNING id, deviceId, widgetID"
            for row in try await rows(insert) {
                added[InstanceKey(device: try row.int64("deviceId"), widgetID: try row.string("widgetID"))] = try row.int64("id")
            }
        }

        // Each registration's result, in order: a created device's from the inserts, a known token's
        // from its own write.
        var results: [Result<RegistryWritten, RegistryError>] = []
        results.reserveCapacity(registrations.count)
        for registration in registrations {
            let key = DeviceKey(app: registration.app.id, token: registration.token.hex)
            if let device = created[key] {
                let instances = try registration.instances.map { instance in
                    guard let id = added[InstanceKey(device: device, widgetID: instance.id)] else {
                        throw StoreError.corrupt(reason: "registering a widget returned no id")
                    }
                    return (id: id, widget: instance)
                }
                results.append(.success(.device(DeviceRegistration(
                    device: device, pushType: registration.pushType, instances: instances, removedInstances: [], retired: nil
                ))))
                continue
            }
            var current = stored[key]
            if current == nil { current = try await device(app: registration.app, token: registration.token) }
            results.append(try await Result.of {
                .device(try await putInstances(
                    app: registration.app, token: registration.token, pushType: registration.pushType,
                    instances: registration.instances, previousToken: nil, current: current, now: now
                ))
            })
        }
        return results
    }
}
