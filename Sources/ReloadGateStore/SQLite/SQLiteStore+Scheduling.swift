import Foundation
import GRDB
public import ReloadGateCore

extension SQLiteStore {
    /// Every widget instance of an active device, with its device, kind and planned timeline reload,
    /// ordered by instance id: what the scheduler registers on start.
    public func registeredInstances() throws -> [RegisteredInstance] {
        try writer.read { db in
            let rows = try RowCursor(db, sql: """
                SELECT widget.id, widget.deviceId, widget.kind, timeline.plannedReload, device.pushType
                FROM widget JOIN device ON device.id = widget.deviceId
                LEFT JOIN timeline ON timeline.widgetId = widget.id
                WHERE device.active ORDER BY widget.id
                """)
            var instances: [RegisteredInstance] = []
            // Kinds are few: one string each, shared by its instances.
            var kinds: [String: String] = [:]
            while try rows.next() {
                let read = rows.string(2) ?? ""
                let kind = kinds[read] ?? read
                if kinds[read] == nil { kinds[read] = read }
                instances.append(RegisteredInstance(
                    instance: rows.int64(0),
                    device: rows.int64(1),
                    kind: kind,
                    pushType: rows.string(4) == PushType.controls.rawValue ? .controls : .widgets,
                    plannedReload: rows.optionalInt64(3).map(Timestamp.init(milliseconds:))
                ))
            }
            return instances
        }
    }

    /// The address of a delivery to `device`: `nil` when the device is gone or unregistered.
    public func pushAddress(device: Int64, instances: [Int64]) throws -> PushAddress? {
        try pushAddresses([(device, instances)])[0]
    }

    /// The addresses of many deliveries, read in one transaction: `nil` for a device that is gone or
    /// unregistered.
    public func pushAddresses(_ deliveries: [(device: Int64, instances: [Int64])]) throws -> [PushAddress?] {
        // Two queries for the whole batch, however many deliveries (one pair per delivery cost 7% of
        // the gateway's CPU in the delivery benchmark): the active devices with their app's bundle, and
        // every widget of those devices (a handful each, read from the (deviceId, widgetID) index
        // alone), from which each delivery's own are picked here.
        let deviceIDs = IntegerList.text(Array(Set(deliveries.map(\.device))))
        return try writer.read { db in
            var addresses: [Int64: (bundle: BundleID, token: DeviceToken, pushType: PushType)] = [:]
            var bundles: [String: BundleID] = [:]
            let devices = try Row.fetchCursor(db.cachedStatement(sql: """
                SELECT device.id, app.bundle, device.token, device.pushType FROM device JOIN app ON app.id = device.appId
                WHERE device.id IN (SELECT value FROM json_each(?)) AND device.active
                """), arguments: [deviceIDs])
            while let row = try devices.next() {
                let id: Int64 = row[0]
                let bundleText: String = row[1]
                guard let bundle = bundles[bundleText] ?? (try? BundleID(bundleText)), let token = try? DeviceToken(row[2] as String) else {
                    throw StoreError.corrupt(reason: "device \(id) has an invalid bundle or token")
                }
                bundles[bundleText] = bundle
                addresses[id] = (bundle, token, (row[3] as String) == PushType.controls.rawValue ? .controls : .widgets)
            }
            var widgets: [Int64: [(id: Int64, widgetID: String)]] = [:]
            if deliveries.contains(where: { !$0.instances.isEmpty }) {
                let rows = try Row.fetchCursor(db.cachedStatement(sql: """
                    SELECT deviceId, id, widgetID FROM widget WHERE deviceId IN (SELECT value FROM json_each(?))
                    """), arguments: [deviceIDs])
                while let row = try rows.next() {
                    widgets[row[0], default: []].append((row[1], row[2]))
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

}
