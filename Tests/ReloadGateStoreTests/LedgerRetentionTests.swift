import Foundation
import GRDB
import PostgresNIO
import ReloadGateCore
@testable import ReloadGateStore
import ReloadGateTesting
import Testing

/// The ledger's retention (``GatewayStore/pruneLedger(_:)``), the same on both stores: a step deletes
/// requests received before its bound with their decisions, and finished deliveries released before it,
/// at most its limit of each, and nothing else; what it deleted is told to `explain` and `export`.
@Suite(.offThePool)
struct LedgerRetentionTests {
    static let now = Date(timeIntervalSince1970: 1_790_000_000)
    static let day: Int64 = 86_400_000

    /// Requests 1-3 two days old (2 with a second decision, kept apart), 5-6 new; on a store that keeps
    /// answers in request rows, 4 is two days old but keeps an answer to a retry live for an hour.
    /// Deliveries: old `sent`, old `pending` (on its way), old `failed`, new `sent`.
    static func fill(_ fixture: StoreFixture) async throws -> (withAnswer: Bool, deliveries: [String]) {
        let at = Timestamp(Self.now)
        let old = at.adding(milliseconds: -2 * day)
        let w1 = InstanceHandle(Int32(fixture.instances[0]))
        let withAnswer = fixture.store.keepsAnswersInRequests
        var batch = LedgerBatch()
        for id: RequestID in [1, 2, 3, 4, 5, 6] where id != 4 || withAnswer {
            var request = StoreFixture.request(id, app: fixture.app)
            request.received = id <= 4 ? old : at
            if id == 4 {
                request.answer = IdempotentAnswer(
                    app: fixture.app.id, key: "push:4", bodyHash: [1], status: 200, response: "{}",
                    createdAt: old, expiresAt: at.adding(milliseconds: 3_600_000)
                )
            }
            batch.requests.append(request)
            batch.decisions.append(Decision(request: id, instance: w1, kind: .scheduled, due: request.received, reason: .dueNow))
        }
        batch.decisions.append(Decision(request: 2, instance: nil, kind: .noMatch, due: nil, reason: .noMatchingWidget))
        let deliveries = (1...4).map { "00000000-0000-4000-8000-00000000000\($0)" }
        for (index, apnsID) in deliveries.enumerated() {
            batch.deliveries.append(RecordedDelivery(
                apnsID: apnsID, device: fixture.registration.device, released: index == 3 ? at : old,
                instances: [fixture.instances[0]], requests: [1], priority: .high, expiration: nil, state: .pending
            ))
        }
        try await fixture.store.commit(batch)
        try await fixture.store.setDeliveryStates(
            [.init(apnsID: deliveries[0], state: .sent), .init(apnsID: deliveries[2], state: .failed, error: "BadDeviceToken"),
             .init(apnsID: deliveries[3], state: .sent)],
            at: Self.now
        )
        return (withAnswer, deliveries)
    }

    @Test(arguments: StoreImplementation.all) func aStepDeletesWhatIsPastRetentionAndNothingElse(_ implementation: StoreImplementation) async throws {
        try await StoreFixture.with("retention-step", implementation, now: Self.now) { fixture in
            let store = fixture.store
            let (withAnswer, deliveries) = try await Self.fill(fixture)
            let at = Timestamp(Self.now)
            let before = try await store.ledgerCounts()
            #expect(try await store.ledgerPruning(request: 1) == LedgerPruning(span: nil, latest: nil, oldest: nil))

            let step = LedgerPruneStep(receivedBefore: at.adding(milliseconds: -Self.day), now: at, limit: 100)
            let pruned = try await store.pruneLedger(step)
            #expect(pruned.requests == 3)
            #expect(pruned.deliveries == 2)
            #expect(!pruned.more && !pruned.skipped)
            for id in [1, 2, 3] as [Int64] { #expect(try await store.requestRecord(id) == nil, "request \(id)") }
            for id in (withAnswer ? [4, 5, 6] : [5, 6]) as [Int64] { #expect(try await store.requestRecord(id) != nil, "request \(id)") }
            #expect(try await store.delivery(apnsID: deliveries[0]) == nil)
            #expect(try await store.delivery(apnsID: deliveries[1]) != nil, "a delivery on its way is kept")
            #expect(try await store.delivery(apnsID: deliveries[2]) == nil)
            #expect(try await store.delivery(apnsID: deliveries[3]) != nil)
            // The pruned requests' decisions went with them (request 2's second one too).
            let after = try await store.ledgerCounts()
            #expect(after.requests == before.requests - 3)
            #expect(after.decisions == before.decisions - 4)
            #expect(after.deliveries == before.deliveries - 2)

            // explain and export are told what is gone and since when.
            let pruning = try await store.ledgerPruning(request: 2)
            #expect(pruning.span == PrunedSpan(firstRequest: 1, lastRequest: 3, receivedBefore: step.receivedBefore, since: at, until: at))
            #expect(pruning.latest == pruning.span)
            #expect(pruning.sentence(request: 2)?.contains("pruned from the ledger between \(at.rfc3339)") == true)
            #expect(try await store.ledgerPruning(request: 5).sentence(request: 5) == nil)

            // Nothing more now; the kept answer's request goes once its answer expired, into the same span.
            #expect(try await store.pruneLedger(step).requests == 0)
            let later = at.adding(milliseconds: 2 * 3_600_000)
            let next = try await store.pruneLedger(LedgerPruneStep(receivedBefore: later.adding(milliseconds: -Self.day), now: later, limit: 100))
            #expect(next.requests == (withAnswer ? 1 : 0))
            #expect(try await store.requestRecord(5) != nil)
            if withAnswer {
                #expect(try await store.ledgerPruning(request: 4).span?.lastRequest == 4)
                #expect(try await store.ledgerPruning(request: 4).span?.until == later)
            }
        }
    }

    @Test(arguments: StoreImplementation.all) func aStepDeletesAtMostItsLimit(_ implementation: StoreImplementation) async throws {
        try await StoreFixture.with("retention-limit", implementation, now: Self.now) { fixture in
            let store = fixture.store
            _ = try await Self.fill(fixture)
            let at = Timestamp(Self.now)
            let step = LedgerPruneStep(receivedBefore: at.adding(milliseconds: -Self.day), now: at, limit: 2)
            let first = try await store.pruneLedger(step)
            #expect(first.requests == 2 && first.deliveries == 2 && first.more)
            #expect(try await store.requestRecord(3) != nil)
            let second = try await store.pruneLedger(step)
            #expect(second.requests == 1 && second.deliveries == 0 && !second.more)
            #expect(try await store.requestRecord(3) == nil)
            // With every request pruned, the next id still follows the last one ever given.
            let everything = LedgerPruneStep(receivedBefore: at.adding(milliseconds: Self.day), now: at.adding(milliseconds: Self.day), limit: 100)
            _ = try await store.pruneLedger(everything)
            #expect(try await store.ledgerCounts().requests == 0)
            #expect(try await store.lastRequestID() == 6)
        }
    }

    @Test func aNewSQLiteFileGivesFreedPagesBack() async throws {
        let directory = try TemporaryDirectory("retention-vacuum")
        defer { directory.remove() }
        let store = try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: Self.now)
        defer { try? store.close() }
        let app = try await store.createApp(bundle: try BundleID("com.example.scores"), now: Self.now).app
        let old = Timestamp(Self.now).adding(milliseconds: -2 * Self.day)
        // 20,000 requests with 1 KB summaries: about 5,000 pages.
        for block in 0..<20 {
            var batch = LedgerBatch()
            for index in 0..<1000 {
                var request = StoreFixture.request(RequestID(block * 1000 + index + 1), app: app)
                request.received = old
                request.summary = String(repeating: "x", count: 1000)
                batch.requests.append(request)
            }
            try await store.commit(batch)
        }
        func pages() throws -> (count: Int, free: Int, mode: Int) {
            try store.writer.read { db in
                (try Int.fetchOne(db, sql: "PRAGMA page_count")!, try Int.fetchOne(db, sql: "PRAGMA freelist_count")!,
                 try Int.fetchOne(db, sql: "PRAGMA auto_vacuum")!)
            }
        }
        let full = try pages()
        #expect(full.mode == 2, "a new file is created with auto_vacuum = INCREMENTAL")
        var released = 0
        var more = true
        while more {
            let pruned = try await store.pruneLedger(LedgerPruneStep(receivedBefore: Timestamp(Self.now), now: Timestamp(Self.now), limit: 4096))
            released += pruned.pagesReleased
            more = pruned.more || pruned.pagesReleased > 0
        }
        let emptied = try pages()
        #expect(released > 0)
        #expect(emptied.count < full.count / 2, "\(full.count) pages before, \(emptied.count) after")
        #expect(emptied.free <= max(SQLiteStore.keptFreePages, emptied.count / 8))
    }
}

extension LedgerRetentionTests {
    /// Several gateways share a PostgreSQL store: while one holds the pruning lock, another's step deletes
    /// nothing and says so.
    @Test(.enabled(if: TestPostgres.isEnabled)) func onASharedStoreOneGatewayPrunesAtATime() async throws {
        let directory = try TemporaryDirectory("retention-shared")
        defer { directory.remove() }
        let url = try await TestPostgres.newDatabase()
        let first = try await TestPostgres.openStore(url: url, secretsDirectory: directory.path("data"), environment: .sandbox, now: Self.now)
        defer { try? first.close() }
        let second = try await TestPostgres.openStore(url: url, secretsDirectory: directory.path("data"), environment: .sandbox, now: Self.now)
        defer { try? second.close() }
        let app = try await first.createApp(bundle: try BundleID("com.example.scores"), teamID: nil, allowsExemptions: false, now: Self.now).app
        var batch = LedgerBatch()
        batch.requests = ([1, 2] as [RequestID]).map { id in
            var request = StoreFixture.request(id, app: app)
            request.received = Timestamp(Self.now).adding(milliseconds: -2 * Self.day)
            return request
        }
        try await first.commit(batch)
        let step = LedgerPruneStep(receivedBefore: Timestamp(Self.now).adding(milliseconds: -Self.day), now: Timestamp(Self.now), limit: 100)
        let whileHeld = try await first.transaction { connection in
            _ = try await connection.rows("SELECT pg_advisory_xact_lock(\(PostgresStore.pruneLock))", logger: first.logger)
            return try await second.pruneLedger(step)
        }
        #expect(whileHeld.skipped && whileHeld.requests == 0)
        #expect(try await second.ledgerCounts().requests == 2)
        let afterwards = try await second.pruneLedger(step)
        #expect(!afterwards.skipped && afterwards.requests == 2)
    }
}
