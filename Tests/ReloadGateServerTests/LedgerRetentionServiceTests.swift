import Foundation
import Logging
import ReloadGateCore
import ReloadGateStore
import ReloadGateTesting
import Synchronization
import Testing

@testable import ReloadGateServer

/// The gateway's pruning of the ledger (``LedgerRetentionService``) under traffic, on both stores: a
/// backlog far past retention is deleted in steps while group commits go on, none of which waits
/// anywhere near the store's deadline, and nothing within retention is deleted.
@Suite(.heavy, .timeLimit(.minutes(10)))
struct LedgerRetentionServiceTests {
    enum Store: String, CaseIterable, CustomTestStringConvertible {
        case sqlite, postgres
        static let all: [Store] = TestPostgres.isEnabled ? allCases : [.sqlite]
        var testDescription: String { rawValue }
    }

    /// Enough old requests for tens of steps even at the largest step size.
    static let backlog = 40_000

    @Test(arguments: Store.all) func aBacklogIsPrunedInStepsWhileCommitsGoOn(_ kind: Store) async throws {
        let directory = try TemporaryDirectory("retention-service")
        defer { directory.remove() }
        let now = Date()
        let store: any GatewayStore =
            switch kind {
            case .sqlite: try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: now)
            case .postgres: try await TestPostgres.newStore(secretsDirectory: directory.path("data"), now: now)
            }
        defer { try? store.close() }
        let app = try await store.createApp(bundle: try BundleID("com.example.scores"), teamID: nil, allowsExemptions: false, now: now).app
        let old = Timestamp(now).adding(milliseconds: -2 * 86_400_000)
        func request(_ id: Int, at time: Timestamp) -> RecordedRequest {
            RecordedRequest(
                id: RequestID(id), app: app.id, source: .webhook, received: time, priority: .high,
                expiration: nil, collapseID: nil, exempt: false, summary: #"{"kind":"scores"}"#
            )
        }
        for start in stride(from: 1, through: Self.backlog, by: 5_000) {
            var batch = LedgerBatch()
            batch.requests = (start..<start + 5_000).map { request($0, at: old) }
            try await store.commit(batch)
        }

        let metrics = GatewayMetrics()
        var service = LedgerRetentionService(
            store: store, retention: 86_400_000, now: { Date() }, metrics: metrics, logger: Logger(label: "retention-test")
        )
        let steps = Mutex<[(requests: Int, took: Duration)]>([])
        service.observe = { pruned, took in steps.withLock { $0.append((pruned.requests, took)) } }
        let pruning = Task { try await service.run() }
        defer { pruning.cancel() }
        // Commits of 20 new requests, back to back with 5 ms between, until the backlog is gone. How long
        // that takes depends on the machine (a loaded one shrinks the steps to their floor), so the wait is
        // bounded by progress: the loop ends when no step was made for 30 s, or after five minutes.
        var next = Self.backlog + 1
        var slowest: Duration = .zero
        var commits = 0
        let clock = ContinuousClock()
        let until = clock.now + .seconds(300)
        var stepsSeen = 0
        var lastStep = clock.now
        while clock.now < until {
            let stepsNow = steps.withLock { $0.count }
            if stepsNow != stepsSeen {
                stepsSeen = stepsNow
                lastStep = clock.now
            } else if clock.now - lastStep > .seconds(30) {
                break
            }
            var batch = LedgerBatch()
            batch.requests = (next..<next + 20).map { request($0, at: Timestamp(Date())) }
            next += 20
            let started = clock.now
            try await store.commit(batch)
            slowest = max(slowest, clock.now - started)
            commits += 1
            if commits % 20 == 0, try await store.ledgerCounts().requests == next - Self.backlog - 1 { break }
            try await Task.sleep(for: .milliseconds(5))
        }
        let counts = try await store.ledgerCounts()
        #expect(counts.requests == next - Self.backlog - 1, "every old request pruned, every new one kept (\(stepsSeen) steps)")
        #expect(try await store.requestRecord(Int64(Self.backlog)) == nil)
        #expect(try await store.requestRecord(Int64(Self.backlog + 1)) != nil)
        // The service counts a step once the store has answered it: the last step's count may follow the
        // rows' deletion by a moment.
        let counted = "reloadgate_ledger_pruned_total{table=\"requests\"} \(Self.backlog)"
        var exposition = String(decoding: metrics.exposition(), as: UTF8.self)
        for _ in 0..<100 where !exposition.contains(counted) {
            try await Task.sleep(for: .milliseconds(20))
            exposition = String(decoding: metrics.exposition(), as: UTF8.self)
        }
        #expect(exposition.contains(counted), "\(exposition)")
        let span = try await store.ledgerPruning(request: 1).span
        #expect(span?.firstRequest == 1)
        #expect(span?.lastRequest == Int64(Self.backlog))
        // Small steps: none deletes more than the largest step size, so none holds the store for long
        // (the store's deadline is 5 s; a step is sized to take about 25 ms), and commits go on between them.
        let taken = steps.withLock { $0 }
        #expect(taken.allSatisfy { $0.requests <= LedgerRetentionService.StepSize.range.upperBound })
        #expect(taken.map(\.requests).reduce(0, +) == Self.backlog)
        let longest = taken.map(\.took).max() ?? .zero
        // No commit was held anywhere near the store's deadline (5 s) by the steps. What keeps a step short
        // is its size, checked above; this bound is the deadline with a margin for the machine
        // (docs/TESTING.md): a commit's time here is measured by the test's own task, whose resumption waits
        // for the process's concurrency pool, and on a loaded machine (the whole suite on two slow cores,
        // PostgreSQL's fsyncs beside it) one commit has taken 3.7 s, another 5.19 s, between steps that
        // were all small.
        #expect(slowest < .seconds(15), "the slowest of \(commits) commits took \(slowest); the longest of \(taken.count) steps \(longest)")
    }

    @Test func aStepSizeFollowsHowLongStepsTake() {
        var size = LedgerRetentionService.StepSize()
        let start = size.limit
        size.took(.milliseconds(5), full: true)
        #expect(size.limit == start * 2)
        size.took(.milliseconds(5), full: false)
        #expect(size.limit == start * 2, "a step that was not full says nothing of a larger one")
        size.took(.milliseconds(100), full: true)
        #expect(size.limit == start)
        for _ in 0..<20 { size.took(.seconds(1), full: true) }
        #expect(size.limit == LedgerRetentionService.StepSize.range.lowerBound)
        for _ in 0..<20 { size.took(.zero, full: true) }
        #expect(size.limit == LedgerRetentionService.StepSize.range.upperBound)
    }
}
