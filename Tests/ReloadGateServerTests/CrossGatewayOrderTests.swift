import Foundation
import ReloadGateCore
import ReloadGateStore
import ReloadGateTesting
import Testing

@testable import ReloadGateServer

/// Requests answered by one gateway and decided by another keep the order their senders saw: the owner of
/// a partition reads its inbox before it decides the requests it took (decision 0120).
struct CrossGatewayOrderTests {
    typealias Beside = BesideTheCommitLoopTests

    /// The engine's clock of its intervals, stopped: the inbox's once-a-second read never falls due, however
    /// slowly a loaded machine runs the test.
    static let stopped: @Sendable () -> ContinuousClock.Instant = { [start = ContinuousClock.now] in start }

    /// The decisions committed since the `since`-th for the scheduled widget's instance, of `kinds`: by
    /// default the first decision of each push, as the simulation's order check reads them.
    static func decisions(
        in cluster: Beside.Cluster, since: Int, kinds: Set<DecisionKind> = ClusterSimulation.initialKinds
    ) -> [Decision] {
        let instance = Int32(cluster.scheduled.instances[0])
        return cluster.store.ledger.decisions[since...].filter { $0.instance?.rawValue == instance && kinds.contains($0.kind) }
    }

    /// Whether the scheduled device's partition has nothing left in the inbox.
    static func inboxIsEmpty(in cluster: Beside.Cluster) async throws -> Bool {
        try await cluster.store.inbox(partitions: [DevicePartition.of(device: cluster.scheduled.device)], limit: 10).isEmpty
    }

    /// A push another gateway answered (and forwarded here) before a push to the same widget was sent to
    /// this gateway is decided first here, though no notification of the forwarded one has come and the
    /// inbox's once-a-second read is not due.
    @Test func aPushForwardedBeforeOneSentToTheOwnerIsDecidedFirst() async throws {
        let cluster = try await Beside.Cluster(monotonic: Self.stopped)
        let (store, engine) = (cluster.store, cluster.engine)
        let answers = Shared<[String: Beside.Answer]>([:])
        // A first turn reads what the inbox holds (the registrations' notices): the next read is due in a
        // second, and no notification says there is more.
        await Beside.turn(of: engine)
        #expect(await !engine.inboxMayHaveWork)
        let decidedBefore = store.ledger.decisions.count

        let older = try await cluster.forwardFromAnotherGateway(id: 1_000_000_001, to: cluster.scheduled)
        cluster.push(to: cluster.scheduled, "newer", answers: answers)
        // One turn decides and commits both; the next answers the push.
        await Beside.turn(of: engine)
        await Beside.turn(of: engine)
        #expect(answers.withLock { $0["newer"]?.isAccepted } == true)

        #expect(Self.decisions(in: cluster, since: decidedBefore).first?.request == older.id, "the push another gateway answered first is decided first")
        #expect(try await Self.inboxIsEmpty(in: cluster))
    }

    /// An inbox holding more than a page: the turn reads the next page from the last entry read (the
    /// first page is still in the inbox until the batch commits), and decides the request it took after
    /// both pages, each forwarded request once.
    @Test func anInboxOfMoreThanAPageIsReadWholeBeforeTheRequestsTaken() async throws {
        let cluster = try await Beside.Cluster(monotonic: Self.stopped)
        let (store, engine) = (cluster.store, cluster.engine)
        let answers = Shared<[String: Beside.Answer]>([:])
        await Beside.turn(of: engine)
        let decidedBefore = store.ledger.decisions.count
        let count = SchedulerEngine.inboxReadLimit + 10
        var forwarded: [RequestID] = []
        for offset in 0..<count {
            forwarded.append(try await cluster.forwardFromAnotherGateway(id: RequestID(2_000_000_000 + offset), to: cluster.scheduled).id)
        }
        cluster.push(to: cluster.scheduled, "newer", answers: answers)
        await Beside.turn(of: engine)
        await Beside.turn(of: engine)
        #expect(answers.withLock { $0["newer"]?.isAccepted } == true)

        let firsts = Self.decisions(in: cluster, since: decidedBefore)
        #expect(firsts.count == count + 1, "each forwarded request decided once, and the push")
        let inOrder = firsts.prefix(count).map(\.request) == forwarded
        #expect(inOrder, "the forwarded requests first, in their order")
        #expect(try await Self.inboxIsEmpty(in: cluster))
    }

    /// When the read before them does not answer (abandoned at its second), the requests taken go through
    /// the inbox behind what it holds, answered `forwarded`, and are decided after it once a read passes.
    @Test func requestsTakenWhenTheInboxCannotBeReadGoThroughItInOrder() async throws {
        let cluster = try await Beside.Cluster()
        let (store, engine) = (cluster.store, cluster.engine)
        let answers = Shared<[String: Beside.Answer]>([:])
        await Beside.turn(of: engine)
        let decidedBefore = store.ledger.decisions.count

        let older = try await cluster.forwardFromAnotherGateway(id: 1_000_000_003, to: cluster.scheduled)
        store.inboxReadHold.hold()
        cluster.push(to: cluster.scheduled, "newer", answers: answers)
        try await Beside.turns(of: engine, within: .seconds(30)) { answers.withLock { $0["newer"] } != nil }
        #expect(answers.withLock { $0["newer"]?.isAccepted } == true)
        #expect(store.inboxReadHold.begun > 0)
        store.inboxReadHold.release()

        try await Beside.turns(of: engine, within: .seconds(30)) { Self.decisions(in: cluster, since: decidedBefore).count == 2 }
        #expect(Self.decisions(in: cluster, since: decidedBefore).first?.request == older.id, "the push another gateway answered first is decided first")
        #expect(Self.decisions(in: cluster, since: decidedBefore, kinds: [.forwarded]).count == 1, "the newer push went through the inbox")
        #expect(await engine.catchingUp.isEmpty)
    }

    /// With no request taken, a turn reads the inbox only when told or when its read is due, as before:
    /// an idle gateway does not ask the database at every turn.
    @Test func aTurnWithoutRequestsReadsTheInboxOnlyWhenToldOrDue() async throws {
        let cluster = try await Beside.Cluster(monotonic: Self.stopped)
        let (store, engine) = (cluster.store, cluster.engine)
        await Beside.turn(of: engine)
        let forwarded = try await cluster.forwardFromAnotherGateway(id: 1_000_000_002, to: cluster.scheduled)
        await Beside.turn(of: engine)
        #expect(!store.ledger.decisions.contains { $0.request == forwarded.id && $0.kind != .forwarded })
        await engine.inboxChanged()
        await Beside.turn(of: engine)
        await Beside.turn(of: engine)
        #expect(store.ledger.decisions.contains { $0.request == forwarded.id && $0.kind != .forwarded })
    }
}
