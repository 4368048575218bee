public import Foundation
import PostgresNIO
public import ReloadGateCore

// What the scheduler loads and the delivery worker reads: the registered instances, push addresses.

extension PostgresStore {
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
