import Foundation
import ReloadGateCore
import ReloadGateStore
import ReloadGateTesting
import Testing

struct LedgerTests {
    let now = Date(timeIntervalSince1970: 1_790_000_000)

    func withFixture(_ implementation: StoreImplementation, _ body: (StoreFixture) async throws -> Void) async throws {
        try await StoreFixture.with("ledger", implementation, now: now, body)
    }

    @Test(arguments: StoreImplementation.all) func aCommittedBatchIsReadBackWholeAndDeliveriesMoveThroughTheirStates(_ implementation: StoreImplementation) async throws {
        try await withFixture(implementation) { fixture in
            let w1 = fixture.registration.instances[0].id
            let w2 = fixture.registration.instances[1].id
            let pending = PendingSnapshot(
                due: Timestamp(seconds: 1_790_000_300), priority: .low, expiration: Timestamp(seconds: 1_790_003_600),
                requests: [7, 8], collapseID: "c", team: "TEAM", exempt: true
            )
            var batch = LedgerBatch()
            batch.requests = [StoreFixture.request(7, app: fixture.app), StoreFixture.request(8, app: fixture.app)]
            batch.decisions = [
                Decision(request: 7, instance: InstanceHandle(Int32(w1)), kind: .deferred, due: pending.due, reason: .lowPriority(until: pending.due, delay: 300)),
                Decision(request: 8, instance: nil, kind: .noMatch, due: nil, reason: .noMatchingWidget),
            ]
            batch.instanceStates = [
                (w1, InstanceSnapshot(bucketFullAt: 1_790_002_160_000, lastReload: Timestamp(seconds: 1_789_999_000), plannedReload: nil, pending: pending)),
                (w2, InstanceSnapshot(bucketFullAt: nil, lastReload: nil, plannedReload: Timestamp(seconds: 1_790_007_200), pending: nil)),
            ]
            batch.deliveries = [
                RecordedDelivery(
                    apnsID: "00000000-0000-4000-8000-000000000001", device: fixture.registration.device,
                    released: Timestamp(seconds: 1_790_000_000), instances: [w1, w2], requests: [5, 6],
                    priority: .high, expiration: nil, state: .pending
                )
            ]
            try await fixture.store.commit(batch)

            let snapshots = try await fixture.store.instanceSnapshots()
            #expect(snapshots.map(\.instance) == [w1, w2])
            #expect(snapshots[0].snapshot == batch.instanceStates[0].snapshot)
            #expect(snapshots[1].snapshot == batch.instanceStates[1].snapshot)
            #expect(try await fixture.store.lastRequestID() == 8)

            let waiting = try await fixture.store.deliveries(in: [.pending, .sending])
            #expect(waiting == batch.deliveries)
            try await fixture.store.setDeliveryStates([DeliveryStateChange(apnsID: waiting[0].apnsID, state: .sending)], at: Date())
            #expect(try await fixture.store.deliveries(in: [.sending]).count == 1)
            try await fixture.store.setDeliveryStates([DeliveryStateChange(apnsID: waiting[0].apnsID, state: .sent)], at: Date())
            #expect(try await fixture.store.deliveries(in: [.pending, .sending]).isEmpty)
            #expect(try await fixture.store.deliveries(in: [.sent]).map(\.history.attempts) == [1])
        }
    }

    /// An upstream that records what it takes (the outbox) gets no `sending` mark: each attempt is counted
    /// on the change that records its outcome. Changes are merged by delivery, in the order each first appears.
    @Test(arguments: StoreImplementation.all) func attemptsWithoutASendingMarkAreCountedOnTheirOutcomes(_ implementation: StoreImplementation) async throws {
        try await withFixture(implementation) { fixture in
            let ids = ["00000000-0000-4000-8000-00000000000a", "00000000-0000-4000-8000-00000000000b"]
            var batch = LedgerBatch()
            batch.deliveries = ids.map { apnsID in
                RecordedDelivery(
                    apnsID: apnsID, device: fixture.registration.device, released: Timestamp(seconds: 1_790_000_000),
                    instances: [fixture.registration.instances[0].id], requests: [], priority: .high, expiration: nil, state: .pending
                )
            }
            try await fixture.store.commit(batch)
            let changes = [
                DeliveryStateChange(apnsID: ids[0], state: .pending, attempted: true),
                DeliveryStateChange(apnsID: ids[1], state: .sent, attempted: true),
                DeliveryStateChange(apnsID: ids[0], state: .pending, error: "the outbox could not be written", unknownOutcome: true),
                DeliveryStateChange(apnsID: ids[0], state: .sent, attempted: true),
            ]
            #expect(DeliveryStateChange.merged(changes).map(\.apnsID) == ids)
            try await fixture.store.setDeliveryStates(changes, at: Date())
            let sent = try await fixture.store.deliveries(in: [.sent]).sorted { $0.apnsID < $1.apnsID }
            #expect(sent.map(\.history.attempts) == [2, 1])
            #expect(sent.map(\.history.unknownOutcomes) == [1, 0])
        }
    }

    @Test(arguments: StoreImplementation.all) func aBatchThatFailsLeavesNothingBehind(_ implementation: StoreImplementation) async throws {
        try await withFixture(implementation) { fixture in
            var first = LedgerBatch()
            first.requests = [StoreFixture.request(1, app: fixture.app)]
            try await fixture.store.commit(first)

            var failing = LedgerBatch()
            failing.requests = [StoreFixture.request(2, app: fixture.app), StoreFixture.request(1, app: fixture.app)]  // 1 exists: the insert fails
            failing.instanceStates = [(fixture.registration.instances[0].id, InstanceSnapshot(bucketFullAt: 5, lastReload: nil, plannedReload: nil, pending: nil))]
            await #expect(throws: (any Error).self) { try await fixture.store.commit(failing) }
            #expect(try await fixture.store.lastRequestID() == 1)
            #expect(try await fixture.store.instanceSnapshots().isEmpty)
        }
    }

    /// A batch larger than one multi-row statement (and not a multiple of it) is written whole, and of an
    /// instance's states in one batch (a commit gathers several turns) the last one counts, a removal
    /// included.
    @Test(arguments: StoreImplementation.all) func aLargeBatchIsWrittenWholeAndAnInstancesLastStateCounts(_ implementation: StoreImplementation) async throws {
        let widgets = (0..<45).map {
            WidgetRegistration(id: "w\($0)", kind: "scores", family: .systemSmall, configuration: WidgetConfiguration())
        }
        try await StoreFixture.with("ledger-large", implementation, widgets: widgets, now: now) { fixture in
            let ids = fixture.instances
            // Every other state with a pending reload: more than one statement's worth of those rows too.
            func state(_ bucket: Int64, requests: [RequestID]? = nil) -> InstanceSnapshot {
                InstanceSnapshot(
                    bucketFullAt: bucket, lastReload: Timestamp(seconds: 1_790_000_000), plannedReload: nil,
                    pending: bucket % 2 == 1 ? nil : PendingSnapshot(
                        due: Timestamp(seconds: 1_790_000_000 + bucket), priority: .high, expiration: nil,
                        requests: requests ?? [RequestID(bucket % 45 + 1)], collapseID: nil, team: nil, exempt: false
                    )
                )
            }
            var batch = LedgerBatch()
            batch.requests = (1...45).map { StoreFixture.request(RequestID($0), app: fixture.app) }
            batch.instanceStates = ids.enumerated().map { ($1, state(Int64($0))) }
            batch.instanceStates += [
                (ids[0], nil),  // removed after its state: gone
                (ids[1], nil), (ids[1], state(1_001)),  // removed, then a state again: the state
                (ids[2], state(1_002)),  // a second state: the second
                (ids[3], nil), (ids[3], state(1_003)), (ids[3], nil),  // removed last: gone
            ]
            batch.deliveries = (0..<45).map { index in
                RecordedDelivery(
                    apnsID: String(format: "00000000-0000-4000-8000-%012d", index), device: fixture.registration.device,
                    released: Timestamp(seconds: 1_790_000_000 + Int64(index)), instances: [ids[index]], requests: [RequestID(index + 1)],
                    priority: .high, expiration: nil, state: .pending
                )
            }
            try await fixture.store.commit(batch)

            #expect(try await fixture.store.lastRequestID() == 45)
            let stored = try await fixture.store.deliveries(in: [.pending])
            #expect(Set(stored.map(\.apnsID)) == Set(batch.deliveries.map(\.apnsID)))
            let snapshots = try await fixture.store.instanceSnapshots()
            let expected = [(ids[1], state(1_001)), (ids[2], state(1_002))] + ids.enumerated().dropFirst(4).map { ($1, state(Int64($0))) }
            #expect(snapshots.map(\.instance).sorted() == expected.map(\.0).sorted())
            for (instance, snapshot) in expected {
                #expect(snapshots.first { $0.instance == instance }?.snapshot == snapshot, "instance \(instance)")
            }

            // A second batch: the lists that grew are written again, the others kept.
            var next = LedgerBatch()
            next.requests = [StoreFixture.request(46, app: fixture.app)]
            let grown = ids.enumerated().dropFirst(4).map { index, id in
                (id, index % 4 == 0 ? state(Int64(index), requests: [RequestID(index % 45 + 1), 46]) : state(Int64(index)))
            }
            next.instanceStates = grown.map { ($0, $1) }
            try await fixture.store.commit(next)
            let reread = try await fixture.store.instanceSnapshots()
            for (instance, snapshot) in grown {
                #expect(reread.first { $0.instance == instance }?.snapshot == snapshot, "instance \(instance)")
            }
        }
    }

    /// An instance whose pending reload went out and which got a new one in the same batch (a commit gathers
    /// the turns decided while the last one ran: a delivery, then a push to the same widget) keeps the new
    /// one; when that one goes out in a later batch, its rows go too, and nothing is restored as pending.
    @Test(arguments: StoreImplementation.all) func aPendingReloadSetAgainInTheBatchThatRemovedItIsRemovedLater(_ implementation: StoreImplementation) async throws {
        try await withFixture(implementation) { fixture in
            let w1 = fixture.registration.instances[0].id
            func state(pendingFor request: RequestID?) -> InstanceSnapshot {
                InstanceSnapshot(
                    bucketFullAt: nil, lastReload: Timestamp(seconds: 1_790_000_000), plannedReload: nil,
                    pending: request.map {
                        PendingSnapshot(due: Timestamp(seconds: 1_790_000_300), priority: .high, expiration: nil, requests: [$0], collapseID: nil, team: nil, exempt: false)
                    }
                )
            }
            var batch = LedgerBatch()
            batch.requests = [StoreFixture.request(1, app: fixture.app)]
            batch.instanceStates = [(w1, state(pendingFor: 1))]
            try await fixture.store.commit(batch)

            batch = LedgerBatch()
            batch.requests = [StoreFixture.request(2, app: fixture.app)]
            batch.instanceStates = [(w1, state(pendingFor: nil)), (w1, state(pendingFor: 2))]
            try await fixture.store.commit(batch)
            #expect(try await fixture.store.instanceSnapshots().first { $0.instance == w1 }?.snapshot == state(pendingFor: 2))

            batch = LedgerBatch()
            batch.requests = [StoreFixture.request(3, app: fixture.app)]
            batch.instanceStates = [(w1, state(pendingFor: nil))]
            try await fixture.store.commit(batch)
            #expect(try await fixture.store.instanceSnapshots().first { $0.instance == w1 }?.snapshot == state(pendingFor: nil))
        }
    }

    @Test(arguments: StoreImplementation.all) func removedWidgetsTakeTheirStateWithThem(_ implementation: StoreImplementation) async throws {
        try await withFixture(implementation) { fixture in
            let w1 = fixture.registration.instances[0].id
            var batch = LedgerBatch()
            batch.requests = [StoreFixture.request(1, app: fixture.app)]
            batch.instanceStates = [(
                w1,
                InstanceSnapshot(
                    bucketFullAt: 1, lastReload: nil, plannedReload: nil,
                    pending: PendingSnapshot(due: Timestamp(seconds: 1), priority: .high, expiration: nil, requests: [1], collapseID: nil, team: nil, exempt: false)
                )
            )]
            try await fixture.store.commit(batch)
            _ = try await fixture.store.putDevice(
                app: fixture.app,
                token: try DeviceToken(String(repeating: "ab", count: 32)),
                widgets: [WidgetRegistration(id: "w2", kind: "news", family: .systemSmall, configuration: WidgetConfiguration())],
                previousToken: nil,
                now: now
            )
            #expect(try await fixture.store.instanceSnapshots().isEmpty)
        }
    }
}

struct IdempotencyTests {
    let now = Date(timeIntervalSince1970: 1_790_000_000)

    @Test(arguments: StoreImplementation.all) func theSameKeyReplaysTheFirstAnswerConflictsForAnotherBodyAndExpiresAfter24Hours(_ implementation: StoreImplementation) async throws {
        let directory = try TemporaryDirectory("idempotency")
        defer { directory.remove() }
        let store = try await implementation.open(directory, now: now)
        defer { try? store.close() }
        let app = try await store.createApp(bundle: try BundleID("com.example.scores"), teamID: nil, allowsExemptions: false, now: now).app
        let t0 = Timestamp(seconds: 1_790_000_000)
        let body: [UInt8] = Array(repeating: 1, count: 32)
        #expect(try await store.idempotentAnswer(app: app.id, key: "k1", bodyHash: body, now: t0) == .new)

        var batch = LedgerBatch()
        batch.idempotentAnswers = [IdempotentAnswer(app: app.id, key: "k1", bodyHash: body, status: 202, response: #"{"requestId":1}"#, createdAt: t0)]
        try await store.commit(batch)

        let later = t0.adding(seconds: 3600)
        #expect(try await store.idempotentAnswer(app: app.id, key: "k1", bodyHash: body, now: later) == .replay(status: 202, response: #"{"requestId":1}"#))
        #expect(try await store.idempotentAnswer(app: app.id, key: "k1", bodyHash: Array(repeating: 2, count: 32), now: later) == .conflict)
        #expect(try await store.idempotentAnswer(app: app.id, key: "k2", bodyHash: body, now: later) == .new)
        // A second answer under a live key is refused with its whole batch.
        await #expect(throws: (any Error).self) { try await store.commit(batch) }

        let nextDay = t0.adding(seconds: 86_401)
        #expect(try await store.idempotentAnswer(app: app.id, key: "k1", bodyHash: body, now: nextDay) == .new)
        var again = LedgerBatch()
        again.idempotentAnswers = [IdempotentAnswer(app: app.id, key: "k1", bodyHash: body, status: 202, response: #"{"requestId":2}"#, createdAt: nextDay)]
        try await store.commit(again)
        #expect(try await store.idempotentAnswer(app: app.id, key: "k1", bodyHash: body, now: nextDay) == .replay(status: 202, response: #"{"requestId":2}"#))
    }

    /// A push's apns-id is kept 15 minutes (its own expiry), a batch with a live key writes nothing of
    /// itself (not its other keys, not its requests), an expired key takes a new answer, and each commit
    /// deletes expired answers only, oldest first, at most its limit.
    @Test(arguments: StoreImplementation.all) func aKeyLastsToItsOwnExpiryAClashWritesNothingAndCommitsPruneExpiredKeys(_ implementation: StoreImplementation) async throws {
        let directory = try TemporaryDirectory("idempotency-expiry")
        defer { directory.remove() }
        let store = try await implementation.open(directory, now: now)
        defer { try? store.close() }
        let app = try await store.createApp(bundle: try BundleID("com.example.scores"), teamID: nil, allowsExemptions: false, now: now).app
        let t0 = Timestamp(seconds: 1_790_000_000)
        func answer(_ key: String, _ response: String, at created: Timestamp, lasting window: Int64) -> IdempotentAnswer {
            IdempotentAnswer(
                app: app.id, key: key, bodyHash: [], status: 200, response: response, createdAt: created,
                expiresAt: created.adding(milliseconds: window)
            )
        }
        func request(_ id: RequestID, at received: Timestamp) -> RecordedRequest {
            RecordedRequest(
                id: id, app: app.id, source: .push, received: received, priority: .high, expiration: nil, collapseID: nil,
                exempt: false, summary: "{}", apnsID: nil
            )
        }
        func lookup(_ key: String, at time: Timestamp) async throws -> IdempotencyLookup {
            try await store.idempotentAnswer(app: app.id, key: key, bodyHash: [], now: time)
        }

        var first = LedgerBatch()
        first.requests = [request(1, at: t0)]
        first.idempotentAnswers = [
            answer("push-a", "first", at: t0, lasting: IdempotentAnswer.pushRetryWindow),
            answer("day", "webhook", at: t0, lasting: IdempotentAnswer.webhookWindow),
            answer("minute", "short", at: t0, lasting: 60_000),
        ]
        try await store.commit(first)
        #expect(try await lookup("push-a", at: t0.adding(milliseconds: 899_999)) == .replay(status: 200, response: "first"))
        #expect(try await lookup("push-a", at: t0.adding(milliseconds: 900_000)) == .new)

        // Another gateway's batch, decided before the first committed: a new key and a live one.
        var clash = LedgerBatch()
        clash.requests = [request(2, at: t0.adding(seconds: 1))]
        clash.idempotentAnswers = [
            answer("push-b", "new", at: t0.adding(seconds: 1), lasting: IdempotentAnswer.pushRetryWindow),
            answer("push-a", "again", at: t0.adding(seconds: 1), lasting: IdempotentAnswer.pushRetryWindow),
        ]
        await #expect(throws: StoreError.keyAnsweredMeanwhile(key: "push-a")) { try await store.commit(clash) }
        #expect(try await lookup("push-b", at: t0.adding(seconds: 2)) == .new)
        #expect(try await store.lastRequestID() == 1)

        // Expired: the key takes a new answer.
        let later = t0.adding(milliseconds: 900_000)
        var again = LedgerBatch()
        again.idempotentAnswers = [answer("push-a", "second", at: later, lasting: IdempotentAnswer.pushRetryWindow)]
        try await store.commit(again)
        #expect(try await lookup("push-a", at: later) == .replay(status: 200, response: "second"))

        // Pruning, with each commit: only "minute" expired by then (push-a was replaced, "day" lasts a day).
        func stored() async throws -> Set<String> {
            let names = ["push-a", "push-b", "day", "minute", "m0", "m1", "m2"].map { IdempotencyKey(app: app.id, key: $0) }
            return Set(try await store.idempotentAnswers(for: names).keys.map(\.key))
        }
        #expect(try await stored() == ["push-a", "day", "minute"])
        var pruning = LedgerBatch()
        pruning.requests = [request(3, at: later)]
        pruning.expiredBy = later
        try await store.commit(pruning)
        #expect(try await stored() == ["push-a", "day"])
        // Oldest first, at most the batch's limit (64 and two per answer of its own): 70 expired answers,
        // expiring one second apart, then a commit with three answers of its own prunes 70 of them.
        var many = LedgerBatch()
        many.idempotentAnswers = (0..<70).map { answer("e\($0)", "e", at: later, lasting: 1_000 * Int64($0 + 1)) }
        try await store.commit(many)
        var next = LedgerBatch()
        next.idempotentAnswers = (0..<3).map { answer("m\($0)", "m", at: later.adding(seconds: 100), lasting: 60_000) }
        next.expiredBy = later.adding(seconds: 100)
        #expect(next.pruneLimit == 70)
        try await store.commit(next)
        let left = try await store.idempotentAnswers(for: (0..<70).map { IdempotencyKey(app: app.id, key: "e\($0)") })
        #expect(left.isEmpty)
        #expect(try await stored() == ["push-a", "day", "m0", "m1", "m2"])
        var partly = LedgerBatch()
        partly.idempotentAnswers = (0..<70).map { answer("f\($0)", "f", at: later, lasting: 1_000 * Int64($0 + 1)) }
        try await store.commit(partly)
        var onlyPruning = LedgerBatch()
        onlyPruning.requests = [request(4, at: later)]
        onlyPruning.expiredBy = later.adding(seconds: 200)
        try await store.commit(onlyPruning)
        let kept = try await store.idempotentAnswers(for: (0..<70).map { IdempotencyKey(app: app.id, key: "f\($0)") })
        #expect(kept.keys.map(\.key).sorted() == ["f64", "f65", "f66", "f67", "f68", "f69"], "the 64 oldest go first")
    }
}
