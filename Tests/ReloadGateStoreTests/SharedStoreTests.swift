import Foundation
import ReloadGateCore
import ReloadGateStore
import ReloadGateTesting
import Testing

/// The cluster simulation's store (``InMemorySharedStore``) against PostgreSQL: the same cases, each
/// asserting what it expects and writing down what it saw; the two transcripts must be equal. What the
/// engine asks of a shared store (``SharedSchedulingStore``): fenced commits, the inbox, request-id blocks,
/// idempotency keys, adoption, partition-wise loading. (The leases themselves: `LeaseTableTests`.)
struct SharedStoreTests {
    /// A store under test and the registry writes the cases make.
    struct Subject: Sendable {
        var store: any SharedSchedulingStore
        var app: App
        var register: @Sendable (_ token: String, _ kinds: [String]) async throws -> (device: Int64, instances: [Int64])
        var close: @Sendable () throws -> Void
    }

    enum Backend: String, CaseIterable, Sendable {
        case memory, postgres

        func open(_ directory: TemporaryDirectory) async throws -> Subject {
            switch self {
            case .memory:
                let store = InMemorySharedStore(clock: { 0 })
                let app = App(
                    id: 1, bundle: try BundleID("com.example.shared"), environment: .sandbox, teamID: nil, allowsExemptions: false,
                    createdAt: Date()
                )
                return Subject(
                    store: store, app: app,
                    register: { token, kinds in try store.register(app: 1, token: token, kinds: kinds, now: Timestamp(Date())) },
                    close: {}
                )
            case .postgres:
                let store = try await TestPostgres.newStore(secretsDirectory: directory.path("data"), now: Date())
                let app = try await store.createApp(bundle: try BundleID("com.example.shared"), teamID: nil, allowsExemptions: false, now: Date()).app
                return Subject(
                    store: store, app: app,
                    register: { token, kinds in
                        let widgets = kinds.enumerated().map { index, kind in
                            WidgetRegistration(id: "w\(index)", kind: kind, family: .systemSmall, configuration: WidgetConfiguration())
                        }
                        let registration = try await store.putDevice(
                            app: app, token: try DeviceToken(token), widgets: widgets, previousToken: nil, now: Date()
                        )
                        return (registration.device, registration.instances.map(\.id).sorted())
                    },
                    close: { try store.close() }
                )
            }
        }
    }

    typealias Case = @Sendable (Subject) async throws -> [String]

    /// Runs `body` on the in-memory store and (when a test cluster is given) on PostgreSQL, and compares.
    func differential(_ name: String, _ body: Case) async throws {
        var transcripts: [Backend: [String]] = [:]
        for backend in TestPostgres.isEnabled ? Backend.allCases : [.memory] {
            let directory = try TemporaryDirectory("shared-\(name)")
            defer { directory.remove() }
            let subject = try await backend.open(directory)
            defer { try? subject.close() }
            transcripts[backend] = try await body(subject)
        }
        if let memory = transcripts[.memory], let postgres = transcripts[.postgres] {
            #expect(memory == postgres, "the in-memory store and PostgreSQL disagree on \(name)")
        }
    }

    static func token(_ number: Int) -> String { String(repeating: "a", count: 48) + String(format: "%016x", number) }

    static func request(_ id: RequestID, app: App) -> RecordedRequest {
        RecordedRequest(
            id: id, app: app.id, source: .webhook, received: Timestamp(milliseconds: 1_000), priority: .high, expiration: nil,
            collapseID: nil, exempt: false, summary: "request \(id)", apnsID: nil
        )
    }

    @Test func aCommitUnderAFenceThatNoLongerHoldsWritesNothing() async throws {
        try await differential("fence") { subject in
            let store = subject.store
            let device = try await subject.register(Self.token(1), ["scores"])
            let a = try await store.heartbeat(gateway: "gateway-a", address: nil, startedAt: 0, leaseMilliseconds: 5_000, now: 1_000)
            #expect(a.held.count == DevicePartition.partitionCount)
            var batch = LedgerBatch()
            batch.requests = [Self.request(5_000, app: subject.app)]
            batch.fence = LeaseFence(gateway: "gateway-a", generation: a.generation)
            try await store.commit(batch)
            // gateway-b takes every lease after they expired: gateway-a's generation rises.
            let b = try await store.heartbeat(gateway: "gateway-b", address: nil, startedAt: 0, leaseMilliseconds: 5_000, now: 7_000)
            #expect(b.held.count == DevicePartition.partitionCount)
            var late = LedgerBatch()
            late.requests = [Self.request(5_001, app: subject.app)]
            late.instanceStates = [(device.instances[0], InstanceSnapshot(bucketFullAt: nil, lastReload: Timestamp(milliseconds: 2_000), plannedReload: nil, pending: nil))]
            late.fence = LeaseFence(gateway: "gateway-a", generation: a.generation)
            var transcript = ["generation a \(a.generation)"]
            do {
                try await store.commit(late)
                Issue.record("a commit under a stale fence was written")
            } catch StoreError.fenced(let generation, let held) {
                #expect(generation > a.generation)
                transcript.append("fenced: generation \(generation), held \(held.count)")
            }
            #expect(try await store.lastRequestID() == 5_000)
            #expect(try await store.instanceSnapshots(partitions: [DevicePartition.of(device: device.device)]).isEmpty)
            // Without a fence (request rows and forwarded work only) any gateway may write.
            var unfenced = LedgerBatch()
            unfenced.requests = [Self.request(5_002, app: subject.app)]
            try await store.commit(unfenced)
            transcript.append("last request \(try await store.lastRequestID())")
            return transcript
        }
    }

    @Test func theInboxKeepsForwardedWorkInOrderUntilAConsumingCommit() async throws {
        try await differential("inbox") { subject in
            let store = subject.store
            var batch = LedgerBatch()
            batch.forwards = [
                InboxEntry(partition: 3, work: .device(id: 3)),
                InboxEntry(partition: 4, work: .cancel(instances: [9], request: nil)),
                InboxEntry(partition: 3, work: .flush(instances: [7], ignoringBudget: true)),
            ]
            try await store.commit(batch)
            let three = try await store.inbox(partitions: [3], limit: 10)
            #expect(three.map(\.work) == [.device(id: 3), .flush(instances: [7], ignoringBudget: true)])
            let firstPage = try await store.inbox(partitions: [3, 4], limit: 2)
            #expect(firstPage.map(\.work) == [.device(id: 3), .cancel(instances: [9], request: nil)])
            // The next page starts after the last id read, and keeps to the partitions named.
            #expect(try await store.inbox(partitions: [3, 4], after: firstPage[1].id, limit: 2).map(\.work) == [.flush(instances: [7], ignoringBudget: true)])
            #expect(try await store.inbox(partitions: [4], after: three[0].id, limit: 10).map(\.work) == [.cancel(instances: [9], request: nil)])
            #expect(try await store.inbox(partitions: [3], after: three[1].id, limit: 10).isEmpty)
            var consuming = LedgerBatch()
            consuming.consumedInbox = [three[0].id]
            try await store.commit(consuming)
            let left = try await store.inbox(partitions: [3, 4], limit: 10)
            return left.map { "\($0.partition): \($0.work)" }
        }
    }

    @Test func requestIDBlocksDoNotOverlap() async throws {
        try await differential("blocks") { subject in
            let first = try await subject.store.requestIDBlock()
            let second = try await subject.store.requestIDBlock()
            #expect(!first.overlaps(second))
            return ["\(first.count) \(second.count) \(second.lowerBound - first.lowerBound)"]
        }
    }

    @Test func idempotencyKeysReplayConflictAndExpire() async throws {
        try await differential("idempotency") { subject in
            let store = subject.store
            let now = Timestamp(milliseconds: 100_000_000)
            var transcript = ["\(try await store.idempotentAnswer(app: subject.app.id, key: "k", bodyHash: [1], now: now))"]
            var batch = LedgerBatch()
            batch.idempotentAnswers = [
                IdempotentAnswer(app: subject.app.id, key: "k", bodyHash: [1], status: 202, response: "{}", createdAt: now)
            ]
            try await store.commit(batch)
            // Another gateway's batch with the same key (it looked the key up before the first committed):
            // nothing of it is written.
            var second = LedgerBatch()
            second.requests = [Self.request(7_000, app: subject.app)]
            second.idempotentAnswers = [
                IdempotentAnswer(app: subject.app.id, key: "k", bodyHash: [1], status: 202, response: "{\"again\":1}", createdAt: now)
            ]
            do {
                try await store.commit(second)
                Issue.record("a second answer to a live key was written")
            } catch let error as StoreError {
                #expect(error == .keyAnsweredMeanwhile(key: "k"))
                #expect(error.isTransient)
            }
            #expect(try await store.lastRequestID() == 0)
            transcript.append("\(try await store.idempotentAnswer(app: subject.app.id, key: "k", bodyHash: [1], now: now))")
            transcript.append("\(try await store.idempotentAnswer(app: subject.app.id, key: "k", bodyHash: [2], now: now))")
            let later = Timestamp(milliseconds: now.milliseconds + 86_400_001)
            transcript.append("\(try await store.idempotentAnswer(app: subject.app.id, key: "k", bodyHash: [2], now: later))")
            #expect(transcript == ["new", "replay(status: 202, response: \"{}\")", "conflict", "new"])
            return transcript
        }
    }

    @Test func adoptionRegistersOneImplicitWidgetOnce() async throws {
        try await differential("adoption") { subject in
            let store = subject.store
            let first = try await store.adoptDevice(app: subject.app, token: try DeviceToken(Self.token(7)), now: Date())
            let again = try await store.adoptDevice(app: subject.app, token: try DeviceToken(Self.token(7)), now: Date())
            #expect(first == again)
            let registered = try await store.registeredInstances(devices: [first.device])
            #expect(registered.map(\.instance) == [first.instance])
            // Several devices in one read, by instance id: a device named twice and one unknown add nothing.
            let second = try await store.adoptDevice(app: subject.app, token: try DeviceToken(Self.token(8)), now: Date())
            let both = try await store.registeredInstances(devices: [second.device, first.device, second.device, first.device + 1000])
            #expect(both.map(\.instance) == [first.instance, second.instance])
            #expect(try await store.device(ofInstance: first.instance) == first.device)
            #expect(try await store.device(ofInstance: first.instance + 1000) == nil)
            return registered.map { "\($0.device) \($0.instance) \($0.kind)" }
        }
    }

    /// An adoption that adds the implicit instance to a device registered before tells the device's owner,
    /// as one that creates the device does (the owner reads the device again: its instances changed); one
    /// that adds nothing tells no one.
    @Test func anAdoptionThatAddsTheImplicitInstanceNoticesTheOwner() async throws {
        try await differential("adoption-notice") { subject in
            let store = subject.store
            let token = try DeviceToken(Self.token(8))
            let registered = try await subject.register(Self.token(8), ["scores"])
            let partition = DevicePartition.of(device: registered.device)
            let before = try await store.inbox(partitions: [partition], limit: 10).count
            let adopted = try await store.adoptDevice(app: subject.app, token: token, now: Date())
            #expect(adopted.device == registered.device)
            let afterAdding = try await store.inbox(partitions: [partition], limit: 10)
            #expect(afterAdding.count == before + 1, "the adoption added an instance and told no one")
            _ = try await store.adoptDevice(app: subject.app, token: token, now: Date())
            let afterAgain = try await store.inbox(partitions: [partition], limit: 10).count
            #expect(afterAgain == afterAdding.count, "an adoption that added nothing told the owner")
            return afterAdding.map { "\($0.work)" } + ["again: \(afterAgain)"]
        }
    }

    @Test func partitionWiseLoadingSeesOnlyThosePartitions() async throws {
        try await differential("partitions") { subject in
            let store = subject.store
            let one = try await subject.register(Self.token(1), ["scores", "news"])
            let two = try await subject.register(Self.token(2), ["scores"])
            var batch = LedgerBatch()
            let snapshot = InstanceSnapshot(bucketFullAt: 5, lastReload: Timestamp(milliseconds: 2_000), plannedReload: nil, pending: nil)
            batch.instanceStates = [(one.instances[0], snapshot), (two.instances[0], snapshot)]
            batch.deliveries = [
                RecordedDelivery(
                    apnsID: "00000000-0000-7000-8000-000000000001", device: two.device, released: Timestamp(milliseconds: 2_000),
                    instances: CompactList(two.instances), requests: [1], priority: .high, expiration: nil, state: .pending
                )
            ]
            try await store.commit(batch)
            let partition = DevicePartition.of(device: two.device)
            let instances = try await store.registeredInstances(partitions: [partition])
            let snapshots = try await store.instanceSnapshots(partitions: [partition])
            let deliveries = try await store.deliveries(in: [.pending, .sending], partitions: [partition])
            #expect(instances.map(\.instance) == two.instances)
            #expect(snapshots.map(\.instance) == [two.instances[0]])
            #expect(deliveries.map(\.device) == [two.device])
            // A snapshot written as nil is deleted.
            var clearing = LedgerBatch()
            clearing.instanceStates = [(two.instances[0], nil)]
            try await store.commit(clearing)
            #expect(try await store.instanceSnapshots(partitions: [partition]).isEmpty)
            let all = try await store.registeredInstances()
            return [
                "instances \(instances.map { "\($0.instance):\($0.kind)" })",
                "snapshots \(snapshots.map { "\($0.instance):\($0.snapshot.bucketFullAt ?? -1)" })",
                "deliveries \(deliveries.map(\.apnsID))",
                "all \(all.map(\.instance))",
                "other partition \(try await store.instanceSnapshots(partitions: [DevicePartition.of(device: one.device)]).map(\.instance))",
            ]
        }
    }
}
