import Foundation
import ReloadGateCore
import ReloadGateStore

// The registry's commands: devices, timelines, and Apple's 410.

/// `PUT /v1/apps/<bundle>/devices/<token>`: the device's widget set (and a retired previous token).
/// Removed widgets' pending reloads are dropped with a `cancelled` decision.
struct PutDevice: GatewayCommand {
    var app: App
    var token: DeviceToken
    var widgets: [WidgetRegistration]
    var previousToken: DeviceToken?

    /// Written with the registry's next group commit (``RegistryLog``).
    func execute(at door: GatewayDoor) async throws -> DeviceRegistration {
        guard case .device(let registration) = try await door.registry.write(
            .putDevice(app: app, token: token, widgets: widgets, previousToken: previousToken)
        ) else { preconditionFailure("a device write answers with a registration") }
        return registration
    }
}

/// `PUT /v1/apps/<bundle>/controls/<token>` or `.../activities/<token>`: a token of one instance (a control,
/// an activity; and a retired previous token of it), written with the registry's next group commit.
/// Registered again, it keeps its instance (and budget); a pending reload stays.
struct PutRegistry: GatewayCommand {
    var write: RegistryWrite

    /// Written with the registry's next group commit (``RegistryLog``).
    func execute(at door: GatewayDoor) async throws -> DeviceRegistration {
        guard case .device(let registration) = try await door.registry.write(write) else {
            throw StoreError.corrupt(reason: "a token's registration answered without its instances")
        }
        return registration
    }
}

/// `DELETE /v1/apps/<bundle>/devices/<token>` (or `.../controls/<token>`) and `reloadgate devices remove`:
/// the device and its widgets (or the control) are gone; their pending reloads are dropped with a
/// `cancelled` decision. `pushType` `nil` removes a token of either type (the operator's command).
struct DeleteDevice: GatewayCommand {
    var app: App
    var token: DeviceToken
    var pushType: PushType? = nil

    func execute(at door: GatewayDoor) async throws -> (device: Int64, instances: [Int64]) {
        let removed = try await door.store.deleteDevice(app: app, token: token, pushType: pushType, now: door.now())
        door.registryCache.forget(tokens: [token.hex])
        try await door.engine.remove(instances: removed.instances, of: removed.device)
        return removed
    }
}

/// `PUT .../widgets/<widget>/timeline`: answered once the instance's planned reload is written through.
struct SetTimeline: GatewayCommand {
    var app: App
    var token: DeviceToken
    var widgetID: String
    var timeline: Timeline

    /// Written with the registry's next group commit (``RegistryLog``).
    func execute(at door: GatewayDoor) async throws -> Int64 {
        guard case .timeline(let instance) = try await door.registry.write(
            .putTimeline(app: app, token: token, widgetID: widgetID, timeline: timeline)
        ) else { preconditionFailure("a timeline write answers with its instance") }
        return instance
    }
}

/// Apple answered 410 for a device: it is unregistered since `since` in the store, the push path answers
/// `Unregistered` for it, and the scheduler forgets its instances, dropping their pending reloads with a
/// `cancelled` decision. The outcome is instance -> dropped requests, or `nil` when the device was not
/// active (or registered again after `since`): nothing changed.
struct MarkUnregistered: GatewayCommand {
    var device: Int64
    var since: Timestamp

    func execute(at door: GatewayDoor) async throws -> [Int64: [RequestID]]? {
        guard let token = try await door.store.markDeviceInvalid(device: device, since: since.date) else { return nil }
        door.registryCache.forget(tokens: [token])
        return try await door.engine.unregister(device: device, since: since)
    }
}
