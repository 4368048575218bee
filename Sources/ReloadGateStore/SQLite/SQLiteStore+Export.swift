import Foundation
import GRDB
public import ReloadGateCore

extension SQLiteStore {
    /// The registry's active devices (of `bundle`, or all), their timelines, and the requests received
    /// at or after `since` with their decisions on arrival (later ones, `cancelled`, are left out), in
    /// request order. One read transaction: a consistent picture while the gateway runs. `progress` is
    /// told the rows read so far after each row.
    public func exportLedger(since: Timestamp, bundle: String?, progress: (@Sendable (Int) -> Void)? = nil) throws -> LedgerExport {
        try writer.read { db in
            var export = LedgerExport.Builder(progress: progress)
            let devices = try Row.fetchCursor(
                db,
                sql: """
                    SELECT d.id, a.bundle, d.token, d.pushType FROM device d JOIN app a ON a.id = d.appId
                    WHERE d.active AND (?1 IS NULL OR a.bundle = ?1) ORDER BY d.id
                    """,
                arguments: [bundle]
            )
            while let row = try devices.next() {
                export.add(device: row["id"], bundle: row["bundle"], token: row["token"], pushType: row["pushType"])
            }
            let widgets = try Row.fetchCursor(db, sql: "SELECT id, deviceId, widgetID, kind FROM widget ORDER BY id")
            while let row = try widgets.next() {
                export.add(widget: row["id"], device: row["deviceId"], widgetID: row["widgetID"], kind: row["kind"])
            }
            let timelines = try Row.fetchCursor(db, sql: "SELECT widgetId, plannedReload, reportedAt FROM timeline ORDER BY reportedAt, widgetId")
            while let row = try timelines.next() {
                export.add(timeline: row["widgetId"], plannedReload: row["plannedReload"], reportedAt: row["reportedAt"])
            }
            let requests = try Row.fetchCursor(
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
            while let row = try requests.next() {
                export.add(
                    request: LedgerExport.Request(
                        id: row["id"],
                        app: row["appId"],
                        source: row["source"],
                        received: Timestamp(milliseconds: row["receivedAt"]),
                        priority: row["priority"],
                        expiration: (row["expiration"] as Int64?).map(Timestamp.init(milliseconds:)),
                        collapseID: row["collapseId"],
                        exempt: row["exempt"],
                        decisions: []
                    ),
                    firstDecision: (row["decisionInstanceId"], row["decisionKind"])
                )
            }
            if let first = export.firstRequest {
                let decisions = try Row.fetchCursor(
                    db,
                    sql: "SELECT requestId, instanceId, kind FROM decision WHERE requestId >= ? ORDER BY rowid",
                    arguments: [first]
                )
                while let row = try decisions.next() {
                    export.add(decision: row["kind"], request: row["requestId"], instance: row["instanceId"])
                }
                // Runs of one kind (``SQLiteStore/decisionRuns(of:in:)``): their instances, or `count` no-matches.
                let runs = try Row.fetchCursor(
                    db,
                    sql: "SELECT requestId, kind, instances, count FROM decision_run WHERE requestId >= ? ORDER BY rowid",
                    arguments: [first]
                )
                while let row = try runs.next() {
                    let instances = IntegerList.parse(row["instances"] as String)
                    let listed: [Int64?] = instances.isEmpty ? Array(repeating: nil, count: max(0, row["count"] as Int)) : instances
                    for instance in listed { export.add(decision: row["kind"], request: row["requestId"], instance: instance) }
                }
            }
            return export.export
        }
    }
}
