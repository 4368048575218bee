public import ReloadGateCore
import Foundation

// What the scheduler reads back from its own commits: the instances' states on start (and, on a shared
// store, when a partition or device changes hands) and the answers recorded for idempotency keys.

extension SQLStore {
    /// The stored scheduling state of every instance that has one, to restore on start.
    public func instanceSnapshots() async throws -> [(instance: Int64, snapshot: InstanceSnapshot)] {
        try await instanceSnapshots(where: "true")
    }

    /// The stored scheduling state of the instances that `condition` (over `s`, `instance_state`) selects,
    /// in instance order: one pass, each pending reload with its request list.
    func instanceSnapshots(where condition: SQLQuery) async throws -> [(instance: Int64, snapshot: InstanceSnapshot)] {
        try await reading(scanning: true) { session in
            var snapshots: [(instance: Int64, snapshot: InstanceSnapshot)] = []
            try await session.forEachRow("""
                SELECT s.instanceId, s.bucketFullAt, s.lastReload, s.plannedReload, s.activity,
                    p.due, p.priority, p.expiration, p.requestCount, p.collapseId, p.team, p.exempt, l.requests
                FROM instance_state s
                LEFT JOIN pending_reload p ON p.instanceId = s.instanceId
                LEFT JOIN pending_list l ON l.instanceId = s.instanceId
                WHERE \(condition) ORDER BY s.instanceId
                """) { row in
                var pending: PendingSnapshot?
                // A row without a pending reload has no due time (the column is NOT NULL); a priority this
                // gateway does not know is not restored.
                if let due = try row.optionalInt64("due"), let priority = Priority(rawValue: try row.int("priority")) {
                    pending = PendingSnapshot(
                        due: Timestamp(milliseconds: due),
                        priority: priority,
                        expiration: try row.optionalInt64("expiration").map(Timestamp.init(milliseconds:)),
                        requests: IntegerList.parse(try row.optionalString("requests") ?? "").map { RequestID(bitPattern: $0) },
                        requestCount: try row.optionalInt64("requestCount").map(Int.init),
                        collapseID: try row.optionalString("collapseId"),
                        team: try row.optionalString("team"),
                        exempt: try row.bool("exempt")
                    )
                }
                snapshots.append((
                    try row.int64("instanceId"),
                    InstanceSnapshot(
                        bucketFullAt: try row.optionalInt64("bucketFullAt"),
                        lastReload: try row.optionalInt64("lastReload").map(Timestamp.init(milliseconds:)),
                        plannedReload: try row.optionalInt64("plannedReload").map(Timestamp.init(milliseconds:)),
                        pending: pending,
                        // A state this gateway cannot read restarts the activity's (its content is in the ledger).
                        activity: try row.optionalString("activity").flatMap(ActivitySnapshot.init(text:))
                    )
                ))
            }
            return snapshots
        }
    }

    /// The answers recorded for `keys` in the idempotency table, expired or not: one query per app, each
    /// key an index seek (most keys are new, and a seek that finds no row reads nothing more).
    public func idempotentAnswers(for keys: [IdempotencyKey]) async throws -> [IdempotencyKey: IdempotentAnswer] {
        guard !keys.isEmpty else { return [:] }
        let byApp = Dictionary(grouping: keys, by: \.app)
        return try await reading { session in
            var found: [IdempotencyKey: IdempotentAnswer] = [:]
            for (app, names) in byApp.sorted(by: { $0.key < $1.key }) {
                try await session.forEachRow("""
                    SELECT key, bodyHash, status, response, createdAt, expiresAt FROM idempotency
                    WHERE appId = \(app) AND key IN \(texts: names.map(\.key))
                    """) { row in
                    let answer = IdempotentAnswer(
                        app: app, key: try row.string("key"), bodyHash: Array(try row.optionalData("bodyHash") ?? Data()),
                        status: try row.int("status"), response: try row.string("response"),
                        createdAt: Timestamp(milliseconds: try row.int64("createdAt")),
                        expiresAt: Timestamp(milliseconds: try row.int64("expiresAt"))
                    )
                    found[answer.name] = answer
                }
            }
            return found
        }
    }
}
