import Foundation
import GRDB
public import ReloadGateCore

/// A widget instance as the scheduler is loaded with it on start.
public struct RegisteredInstance: Hashable, Sendable {
    /// The instance id (the scheduler's instance handle).
    public var instance: Int64
    /// The device id (the scheduler's device handle).
    public var device: Int64
    public var kind: String
    /// Whether it is a widget or a control (whose policies are apart).
    public var pushType: PushType
    /// The planned reload of the instance's last reported timeline, if any.
    public var plannedReload: Timestamp?

    public init(instance: Int64, device: Int64, kind: String, pushType: PushType = .widgets, plannedReload: Timestamp?) {
        self.instance = instance
        self.device = device
        self.kind = kind
        self.pushType = pushType
        self.plannedReload = plannedReload
    }
}

/// Where a delivery goes: the app and device token, and the widget ids it reloads.
public struct PushAddress: Hashable, Sendable {
    public var bundle: BundleID
    public var token: DeviceToken
    /// A device's widgets, or a control (`apns-push-type: controls`).
    public var pushType: PushType = .widgets
    /// Widget ids of the delivery's instances that are still registered, in instance order.
    public var widgetIDs: [String]
}

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

    /// ``commit(_:)`` without blocking the caller's thread: the transaction runs on the store's writer
    /// queue, so requests keep arriving (and gather into the next batch) while it commits.
    public func commit(_ batch: LedgerBatch) async throws {
        guard !batch.isEmpty else { return }
        let deleted = try await writeOrUnavailable { try await writer.write { db in try self.write(batch, in: db) } }
        storedPending.remove(deleted)
    }
}

/// How many rows the ledger holds: for operators' statistics and for tests that check a refused
/// request changed nothing.
public struct LedgerCounts: Hashable, Sendable {
    public var requests: Int
    public var decisions: Int
    public var pendingReloads: Int
    public var deliveries: Int
    public var idempotencyKeys: Int
}

extension SQLiteStore {
    /// Counts the ledger's rows.
    public func ledgerCounts() throws -> LedgerCounts {
        try writer.read { db in
            func count(_ table: String) throws -> Int { try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM \(table)") ?? 0 }
            return LedgerCounts(
                requests: try count("request"),
                decisions: try count("decision")
                    + (Int.fetchOne(db, sql: "SELECT count(*) FROM request WHERE decisionKind IS NOT NULL") ?? 0)
                    + (Int.fetchOne(db, sql: "SELECT coalesce(sum(count), 0) FROM decision_run") ?? 0),
                pendingReloads: try count("pending_reload"),
                deliveries: try count("delivery"),
                idempotencyKeys: try count("idempotency")
            )
        }
    }
}
