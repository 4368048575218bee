import Foundation
import GRDB
import ReloadGateCore
@testable import ReloadGateStore
import ReloadGateTesting
import Testing

/// A request's first decision is written in its row (migration v12); the others, and decisions of
/// requests recorded before (cancelled, expired), go to `decision_run` (v15; `decision` before), alike
/// consecutive ones in one row. Readers see them all, in order.
struct FirstDecisionTests {
    let now = Date(timeIntervalSince1970: 1_790_000_000)

    func decisionTableRows(_ store: SQLiteStore) throws -> [[String?]] {
        try store.writer.read { db in
            try Row.fetchAll(db, sql: "SELECT requestId, kind, count FROM decision_run ORDER BY rowid").map {
                [($0["requestId"] as Int64?).map(String.init), $0["kind"], ($0["count"] as Int64?).map(String.init)]
            }
        }
    }

    /// SQLite's own layout (the decision table), so the SQLite store only.
    @Test func firstDecisionsAreInTheRequestRowAndEveryDecisionIsReadBackInOrder() async throws {
        try await StoreFixture.with("first-decision", .sqlite, now: now) { fixture in
            let store = try #require(fixture.store as? SQLiteStore)
            let app = fixture.app
            let registration = fixture.registration
            let w1 = InstanceHandle(Int32(registration.instances[0].id))
            let w2 = InstanceHandle(Int32(registration.instances[1].id))
            let due = Timestamp(seconds: 1_790_000_300)

            var batch = LedgerBatch()
            // Decisions in the order the engine makes them: request 1 targets two instances, request 2 none;
            // request 3 is recorded without a decision.
            batch.decisions = [
                Decision(request: 1, instance: w1, kind: .deferred, due: due, reason: .lowPriority(until: due, delay: 300)),
                Decision(request: 1, instance: w2, kind: .merged, due: due, reason: .mergedIntoPending(due: due, requests: 2)),
                Decision(request: 2, instance: nil, kind: .noMatch, due: nil, reason: .noMatchingWidget),
            ]
            batch.requests = [StoreFixture.request(1, app: app), StoreFixture.request(2, app: app), StoreFixture.request(3, app: app)]
            try await store.commit(batch)
            // Only request 1's second decision needed a row of its own.
            #expect(try decisionTableRows(store) == [["1", "merged", "1"]])

            // Later: the operator cancels request 1's pending reload of w1.
            var later = LedgerBatch()
            later.decisions = [Decision(request: 1, instance: w1, kind: .cancelled, due: nil, reason: .cancelledByOperator)]
            try await store.commit(later)

            let first = try #require(try await store.requestRecord(1))
            #expect(first.decisions.map(\.decision) == ["deferred", "merged", "cancelled"])
            #expect(first.decisions.map(\.widgetID) == ["w1", "w2", "w1"])
            #expect(first.decisions.map(\.kind) == ["scores", "news", "scores"])
            #expect(first.decisions[0].deviceToken == String(repeating: "ab", count: 32))
            #expect(first.decisions[0].due == due)
            #expect(first.decisions[0].reason == DecisionReason.lowPriority(until: due, delay: 300).description)
            let second = try #require(try await store.requestRecord(2))
            #expect(second.decisions.map(\.decision) == ["no-match"])
            #expect(second.decisions[0].instance == nil)
            #expect(try await store.requestRecord(3)?.decisions.isEmpty == true)

            #expect(try await store.ledgerCounts().decisions == 4)
            #expect(try await store.statistics().decisionsByKind == ["deferred": 1, "merged": 1, "no-match": 1, "cancelled": 1])
        }
    }

    /// A fan-out's alike decisions are one row; a change of kind, due time or reason starts another, and
    /// decisions without an instance are counted in a row of their own. Every reader sees each decision.
    @Test func alikeDecisionsAreOneRunAndEveryReaderCountsThemAll() async throws {
        try await StoreFixture.with("decision-runs", .sqlite, now: now) { fixture in
            let store = try #require(fixture.store as? SQLiteStore)
            let w1 = InstanceHandle(Int32(fixture.registration.instances[0].id))
            let w2 = InstanceHandle(Int32(fixture.registration.instances[1].id))
            let at = Timestamp(seconds: 1_790_000_000)
            let later = Timestamp(seconds: 1_790_000_300)
            var batch = LedgerBatch()
            batch.requests = [StoreFixture.request(1, app: fixture.app)]
            batch.decisions = [
                Decision(request: 1, instance: w1, kind: .scheduled, due: at, reason: .dueNow),  // in the request's row
                Decision(request: 1, instance: w2, kind: .scheduled, due: at, reason: .dueNow),
                Decision(request: 1, instance: w1, kind: .scheduled, due: at, reason: .dueNow),
                Decision(request: 1, instance: w2, kind: .scheduled, due: at, reason: .dueNow),
                Decision(request: 1, instance: w1, kind: .deferred, due: later, reason: .lowPriority(until: later, delay: 300)),
                Decision(request: 1, instance: nil, kind: .cancelled, due: nil, reason: .removedFromRegistry),
                Decision(request: 1, instance: nil, kind: .cancelled, due: nil, reason: .removedFromRegistry),
            ]
            try await store.commit(batch)
            #expect(try decisionTableRows(store) == [["1", "scheduled", "3"], ["1", "deferred", "1"], ["1", "cancelled", "2"]])
            let record = try #require(try await store.requestRecord(1))
            #expect(record.decisions.map(\.decision) == ["scheduled", "scheduled", "scheduled", "scheduled", "deferred", "cancelled", "cancelled"])
            #expect(record.decisions.map(\.widgetID) == ["w1", "w2", "w1", "w2", "w1", nil, nil])
            #expect(record.decisions[1].deviceToken == String(repeating: "ab", count: 32))
            #expect(record.decisions[4].due == later)
            #expect(record.decisions[4].reason == DecisionReason.lowPriority(until: later, delay: 300).description)
            #expect(try await store.ledgerCounts().decisions == 7)
            #expect(try await store.statistics().decisionsByKind == ["scheduled": 4, "deferred": 1, "cancelled": 2])
            let exported = try await store.exportLedger(since: Timestamp(milliseconds: 0), bundle: nil)
            // On arrival only (not `cancelled`), in order, with their instances.
            #expect(exported.requests.first?.decisions.map(\.kind) == ["scheduled", "scheduled", "scheduled", "scheduled", "deferred"])
            #expect(exported.requests.first?.decisions.map(\.instance) == [w1, w2, w1, w2, w1].map { Int64($0.rawValue) })
        }
    }

    @Test func decisionsRecordedBeforeV12AreStillRead() async throws {
        let directory = try TemporaryDirectory("first-decision-migration")
        defer { directory.remove() }
        try StoreFixture.writeOlderStore(in: directory, upTo: "v11-pending-lists", sql: """
            INSERT INTO request (id, appId, source, receivedAt, priority, expiration, collapseId, exempt, summary, apnsId)
                VALUES (1, 1, 'webhook', 1790000000000, 10, NULL, NULL, 0, '{}', NULL);
            INSERT INTO decision (requestId, instanceId, kind, due, reason) VALUES
                (1, NULL, 'no-match', NULL, 'no-match: the device shows no widget the request targets');
            """)
        let store = try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: now)
        defer { try? store.close() }
        #expect(try await store.requestRecord(1)?.decisions.map(\.decision) == ["no-match"])
        #expect(try await store.ledgerCounts().decisions == 1)
        #expect(try await store.statistics().decisionsByKind == ["no-match": 1])
    }

    /// A store of the tree before `v20-decisions-in-runs-only`: decisions written one row each (before v15) and
    /// in runs (since) move into one table, each request's in the order they were made.
    @Test func decisionsOfBothLayoutsMoveIntoRunsInTheirOrder() async throws {
        let directory = try TemporaryDirectory("decision-runs-migration")
        defer { directory.remove() }
        try StoreFixture.writeOlderStore(in: directory, upTo: "v19-ledger-retention", sql: """
            INSERT INTO device (id, appId, token, active, registeredAt, pushType) VALUES (1, 1, '\(String(repeating: "ab", count: 32))', 1, 0, 'widgets');
            INSERT INTO widget (id, deviceId, widgetID, kind, family, configuration, pushEnabled) VALUES
                (7, 1, 'w7', 'scores', 'systemSmall', '{}', 1), (8, 1, 'w8', 'scores', 'systemSmall', '{}', 1);
            INSERT INTO request (id, appId, source, receivedAt, priority, expiration, collapseId, exempt, summary, apnsId)
                VALUES (1, 1, 'webhook', 1790000000000, 10, NULL, NULL, 0, '{}', NULL);
            INSERT INTO decision_run (requestId, kind, due, reason, instances, count) VALUES (1, 'cancelled', NULL, 'cancelled', '[7,8]', 2);
            INSERT INTO decision (requestId, instanceId, kind, due, reason) VALUES
                (1, 7, 'scheduled', 1790000000000, 'scheduled'), (1, NULL, 'no-match', NULL, 'no-match');
            """)
        let store = try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: now)
        defer { try? store.close() }
        let record = try #require(try await store.requestRecord(1))
        #expect(record.decisions.map(\.decision) == ["scheduled", "no-match", "cancelled", "cancelled"])
        #expect(record.decisions.map(\.widgetID) == ["w7", nil, "w7", "w8"])
        #expect(try await store.ledgerCounts().decisions == 4)
        #expect(try store.appliedMigrations().contains("v20-decisions-in-runs-only"))
    }
}
