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
    /// The planned reload of the instance's last reported timeline, if any.
    public var plannedReload: Timestamp?
}

/// Where a delivery goes: the app and device token, and the widget ids it reloads.
public struct PushAddress: Hashable, Sendable {
    public var bundle: BundleID
    public var token: DeviceToken
    /// Widget ids of the delivery's instances that are still registered, in instance order.
    public var widgetIDs: [String]
}

extension SQLiteStore {
    /// Every widget instance of an active device, with its device, kind and planned timeline reload,
    /// ordered by instance id: what the scheduler registers on start.
    public func registeredInstances() throws -> [RegisteredInstance] {
        try writer.read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT widget.id, widget.deviceId, widget.kind, timeline.plannedReload
                    FROM widget JOIN device ON device.id = widget.deviceId
                    LEFT JOIN timeline ON timeline.widgetId = widget.id
                    WHERE device.active ORDER BY widget.id
                    """
            ).map { row in
                RegisteredInstance(
                    instance: row[0],
                    device: row[1],
                    kind: row[2],
                    plannedReload: (row[3] as Int64?).map(Timestamp.init(milliseconds:))
                )
            }
        }
    }

    /// The address of a delivery to `device`: `nil` when the device is gone or unregistered.
    public func pushAddress(device: Int64, instances: [Int64]) throws -> PushAddress? {
        try pushAddresses([(device, instances)])[0]
    }

    /// The addresses of many deliveries, read in one transaction: `nil` for a device that is gone or
    /// unregistered.
    public func pushAddresses(_ deliveries: [(device: Int64, instances: [Int64])]) throws -> [PushAddress?] {
        try writer.read { db in
            let device = try db.cachedStatement(sql: """
                SELECT app.bundle, device.token FROM device JOIN app ON app.id = device.appId
                WHERE device.id = ? AND device.active
                """)
            // All the device's widgets (a handful), read from the (deviceId, widgetID) index alone and
            // picked here: cheaper than matching the ids in SQL through json_each (a profile of the
            // delivery benchmark had that at 6% of the gateway's CPU).
            let widgets = try db.cachedStatement(sql: "SELECT id, widgetID FROM widget WHERE deviceId = ?")
            var bundles: [String: BundleID] = [:]
            return try deliveries.map { delivery -> PushAddress? in
                guard let row = try Row.fetchOne(device, arguments: [delivery.device]) else { return nil }
                let bundleText: String = row[0]
                guard let bundle = bundles[bundleText] ?? (try? BundleID(bundleText)), let token = try? DeviceToken(row[1] as String) else {
                    throw StoreError.corrupt(reason: "device \(delivery.device) has an invalid bundle or token")
                }
                bundles[bundleText] = bundle
                guard !delivery.instances.isEmpty else { return PushAddress(bundle: bundle, token: token, widgetIDs: []) }
                var found: [(id: Int64, widgetID: String)] = []
                let rows = try Row.fetchCursor(widgets, arguments: [delivery.device])
                while let widget = try rows.next() {
                    let id: Int64 = widget[0]
                    if delivery.instances.contains(id) { found.append((id, widget[1])) }
                }
                found.sort { $0.id < $1.id }
                return PushAddress(bundle: bundle, token: token, widgetIDs: found.map(\.widgetID))
            }
        }
    }

    /// ``commit(_:)`` without blocking the caller's thread: the transaction runs on the store's writer
    /// queue, so requests keep arriving (and gather into the next batch) while it commits.
    public func commit(_ batch: LedgerBatch) async throws {
        guard !batch.isEmpty else { return }
        try await writer.write { db in try Self.write(batch, in: db) }
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
                decisions: try count("decision"),
                pendingReloads: try count("pending_reload"),
                deliveries: try count("delivery"),
                idempotencyKeys: try count("idempotency")
            )
        }
    }
}
