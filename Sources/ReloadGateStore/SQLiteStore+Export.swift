import Foundation
import GRDB
public import ReloadGateCore

extension SQLiteStore {
    /// The registry's active devices (of `bundle`, or all), their timelines, and the requests received
    /// at or after `since` with their decisions on arrival (later ones, `cancelled`, are left out), in
    /// request order. One read transaction: a consistent picture while the gateway runs.
    public func exportLedger(since: Timestamp, bundle: String?) throws -> LedgerExport {
        try writer.read { db in
            var devices: [LedgerExport.Device] = []
            var deviceIndex: [Int64: Int] = [:]
            let deviceRows = try Row.fetchCursor(
                db,
                sql: """
                    SELECT d.id, a.bundle, d.token, d.pushType FROM device d JOIN app a ON a.id = d.appId
                    WHERE d.active AND (?1 IS NULL OR a.bundle = ?1) ORDER BY d.id
                    """,
                arguments: [bundle]
            )
            while let row = try deviceRows.next() {
                deviceIndex[row["id"]] = devices.count
                devices.append(LedgerExport.Device(
                    id: row["id"], bundle: row["bundle"], token: row["token"], pushType: PushType(rawValue: row["pushType"]) ?? .widgets, widgets: []
                ))
            }
            var widgetIDs = Set<Int64>()
            let widgetRows = try Row.fetchCursor(db, sql: "SELECT id, deviceId, widgetID, kind FROM widget ORDER BY id")
            while let row = try widgetRows.next() {
                guard let index = deviceIndex[row["deviceId"]] else { continue }
                devices[index].widgets.append(LedgerExport.Widget(id: row["id"], widgetID: row["widgetID"], kind: row["kind"]))
                widgetIDs.insert(row["id"])
            }
            var timelines: [LedgerExport.Timeline] = []
            let timelineRows = try Row.fetchCursor(db, sql: "SELECT widgetId, plannedReload, reportedAt FROM timeline ORDER BY reportedAt, widgetId")
            while let row = try timelineRows.next() {
                guard widgetIDs.contains(row["widgetId"]) else { continue }
                timelines.append(
                    LedgerExport.Timeline(
                        widget: row["widgetId"],
                        plannedReload: (row["plannedReload"] as Int64?).map(Timestamp.init(milliseconds:)),
                        reportedAt: Timestamp(milliseconds: row["reportedAt"])
                    )
                )
            }
            let onArrival = Set(DecisionKind.onArrival.map(\.rawValue))
            var requests: [LedgerExport.Request] = []
            var requestIndex: [Int64: Int] = [:]
            let requestRows = try Row.fetchCursor(
                db,
                sql: """
                    SELECT r.id, r.appId, r.source, r.receivedAt, r.priority, r.expiration, r.collapseId, r.exempt,
                           r.decisionInstanceId, r.decisionKind
                    FROM request r JOIN app a ON a.id = r.appId
                    WHERE r.receivedAt >= ?1 AND (?2 IS NULL OR a.bundle = ?2) AND r.source IN ('push', 'webhook')
                    ORDER BY r.id
                    """,
                arguments: [since.milliseconds, bundle]
            )
            while let row = try requestRows.next() {
                var decisions: [(instance: Int64?, kind: String)] = []
                if let kind = row["decisionKind"] as String?, onArrival.contains(kind) {
                    decisions.append((row["decisionInstanceId"], kind))
                }
                requestIndex[row["id"]] = requests.count
                requests.append(
                    LedgerExport.Request(
                        id: row["id"],
                        app: row["appId"],
                        source: row["source"],
                        received: Timestamp(milliseconds: row["receivedAt"]),
                        priority: row["priority"],
                        expiration: (row["expiration"] as Int64?).map(Timestamp.init(milliseconds:)),
                        collapseID: row["collapseId"],
                        exempt: row["exempt"],
                        decisions: decisions
                    )
                )
            }
            if let first = requests.first?.id {
                let decisionRows = try Row.fetchCursor(
                    db,
                    sql: "SELECT requestId, instanceId, kind FROM decision WHERE requestId >= ? ORDER BY rowid",
                    arguments: [first]
                )
                while let row = try decisionRows.next() {
                    guard let index = requestIndex[row["requestId"]], onArrival.contains(row["kind"] as String) else { continue }
                    requests[index].decisions.append((row["instanceId"], row["kind"]))
                }
                let runRows = try Row.fetchCursor(
                    db,
                    sql: "SELECT requestId, kind, instances, count FROM decision_run WHERE requestId >= ? ORDER BY rowid",
                    arguments: [first]
                )
                while let row = try runRows.next() {
                    let kind: String = row["kind"]
                    guard let index = requestIndex[row["requestId"]], onArrival.contains(kind) else { continue }
                    let instances = IntegerList.parse(row["instances"] as String)
                    if instances.isEmpty {
                        for _ in 0..<max(0, row["count"] as Int) { requests[index].decisions.append((nil, kind)) }
                    } else {
                        for instance in instances { requests[index].decisions.append((instance, kind)) }
                    }
                }
            }
            return LedgerExport(devices: devices, timelines: timelines, requests: requests)
        }
    }
}
