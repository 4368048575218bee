import Foundation
import ReloadGateCore
import ReloadGateStore
import ReloadGateTesting
import Synchronization

@testable import ReloadGateServer

/// Several gateways on one shared store, simulated (docs/TESTING.md, "The cluster simulation"): the real
/// engines, cluster memberships and scheduling rules over ``InMemorySharedStore``, a virtual clock, and a
/// list of events a seed made. After every event it checks what must hold at every moment; after the
/// events it heals every fault, lets the cluster settle, and checks what must hold in the end.
///
/// Everything runs on the caller's task, one event after the other, and every store call completes at
/// once: a seed gives the same run every time.
final class ClusterSimulation {
    let store: InMemorySharedStore
    let clock = VirtualClock()
    var gateways: [SimulatedGateway] = []
    /// Registered devices, by the index events use (adopted devices join the list).
    var devices: [Int64] = []
    /// Requests and registry changes sent, by number.
    var requests: [SimulatedRequest] = []
    let answers = Shared(AnswerBook())
    /// Instances an operator flushed ignoring the budget (their minimum interval is not checked).
    var flushedIgnoringBudget = Set<Int64>()
    /// Instances removed from the registry (a request for them may be decided `no-match`).
    var removed = Set<Int64>()
    /// Every send to the push service: apns-id, device, release time, instances, gateway.
    var sends: [Send] = []
    /// apns-ids a new owner may send again: sent by a gateway killed (or whose lease was taken) before the
    /// `sent` state was written.
    var mayBeResent = Set<String>()
    /// How many deliveries were in flight at a kill (sent, their state not written).
    var inFlightAtKills = 0
    var restarts = 0
    var eventsRun = 0
    /// Adopted devices by token.
    var devicesByToken: [String: Int64] = [:]
    let app: App
    let configuration: SchedulerConfiguration

    struct SimulatedRequest {
        var number: Int
        var gateway: Int
        var kind: Kind
        /// The instances it targets (for an adopted device: once adopted).
        var targets: [Int64]
        /// The device a registry change or an adoption wrote.
        var changed: Int64?
        /// A webhook call's idempotency key and body.
        var idempotency: ReloadCommand.Idempotency?
        var sentAt: Int64
        /// How many requests had been answered when it was sent (``AnswerBook/order``).
        var answeredBeforeSending: Int
        /// Lost with its gateway's process (no answer; it may or may not have been committed).
        var lostAtKill = false

        enum Kind: Equatable { case reload, registry, operatorCommand }
    }

    enum Answer: Equatable, Sendable {
        case accepted(RequestID)
        /// An idempotency key's earlier answer, again.
        case replayed
        /// The idempotency key came with another body.
        case conflict
        case registryDone
        case refused(String)
    }

    /// The answers given, by request number, and the order in which the requests were first answered.
    struct AnswerBook: Sendable {
        var given: [Int: [Answer]] = [:]
        /// Request number -> how many requests had been answered before it.
        var order: [Int: Int] = [:]

        mutating func add(_ answer: Answer, to number: Int) {
            if given[number] == nil { order[number] = order.count }
            given[number, default: []].append(answer)
        }
    }

    struct Send {
        var delivery: RecordedDelivery
        var gateway: String
        var at: Int64
    }

    /// Something that must hold and did not.
    struct Violation: Error, CustomStringConvertible {
        var description: String
    }

    init(gateways count: Int, devices deviceCount: Int) throws {
        let clock = clock
        store = InMemorySharedStore(clock: { clock.milliseconds }, deviceIDStride: 131)
        app = App(
            id: 1, bundle: try BundleID("com.example.simulated"), environment: .production, teamID: "TEAM123456",
            allowsExemptions: false, createdAt: clock.date
        )
        var policy = SchedulingPolicy()
        policy.dailyBudget = 1000
        policy.burst = 50
        policy.minimumInterval = 2
        policy.lowPriorityDelay = 3
        policy.backgroundDelay = 10
        policy.coalescingWindow = 1
        // Controls (adopted tokens 1003-1005) have a policy of their own, with another interval: an owner
        // that scheduled a control by the widgets' policy would break the interval invariant.
        var controls = policy
        controls.minimumInterval = 3
        controls.coalescingWindow = 0
        var configuration = SchedulerConfiguration(defaultPolicy: policy)
        configuration[.controls].defaultPolicy = controls
        self.configuration = configuration
        for index in 0..<deviceCount {
            let kinds = index % 3 == 0 ? ["scores", "news"] : ["scores"]
            devices.append(try store.register(app: app.id, token: Self.token(index), kinds: kinds, now: Timestamp(clock.date)).device)
        }
        for index in 0..<count {
            gateways.append(SimulatedGateway(index: index, id: "g\(index)", store: store, clock: clock, configuration: configuration))
        }
    }

    static func token(_ number: Int) -> String {
        String(repeating: "0", count: 48) + String(format: "%016x", number)
    }

    /// Loads every gateway and lets the leases settle (each gateway with its share), as a cluster that
    /// has been running for a while.
    func start() async throws {
        for gateway in gateways { try await gateway.engine.load() }
        for _ in 0..<4 {
            for gateway in gateways { try await run(.heartbeat(gateway: gateway.index)) }
            try await settleCommits()
            clock.advance(by: 300)
        }
    }

    /// Runs `events`, checking after each; then heals, settles and checks the end.
    func run(_ events: [SimulatedEvent]) async throws {
        for event in events {
            try await run(event)
            try await checkNow()
            if tracing { await tracePending() }
        }
        try await settle()
        try checkEnd()
        try await checkRegistryMirrored()
    }

    // MARK: Events

    /// Prints every event, commit, heartbeat that changed something, and send.
    var tracing = false

    func trace(_ line: @autoclosure () -> String) {
        if tracing { print("[\(clock.milliseconds - VirtualClock.epoch) ms] \(line())") }
    }

    /// Each gateway's pending reloads and the partitions it waits to load (traced after each event).
    func tracePending() async {
        for gateway in gateways where gateway.isAlive {
            let scheduler = await gateway.engine.scheduler
            let awaiting = await gateway.engine.awaitingLoad.count
            var pending: [String] = []
            for device in devices {
                for instance in store.instances(ofDevice: device) {
                    if let handle = SchedulerEngine.handle(instance.id), let reload = scheduler.pendingReload(of: handle) {
                        pending.append("\(instance.id)@\(reload.due.milliseconds - VirtualClock.epoch)")
                    }
                }
            }
            trace("  \(gateway.id): pending \(pending), awaiting load \(awaiting), released \(gateway.released.withLock { $0.count })")
        }
    }

    func run(_ event: SimulatedEvent) async throws {
        eventsRun += 1
        trace("\(event)")
        switch event {
        case .push(let g, let device, let priority):
            guard gateways[g].isRunning else { return }
            submitReload(at: g, devices: [devices[device % devices.count]], priority: Priority(rawValue: priority) ?? .high, source: .push)
        case .webhook(let g, let indexes, let key):
            guard gateways[g].isRunning else { return }
            let picked = indexes.map { devices[$0 % devices.count] }
            submitReload(
                at: g, devices: picked, priority: .high, source: .webhook,
                idempotency: key.map { ReloadCommand.Idempotency(key: "k\($0)", bodyHash: Array("\(picked)".utf8)) }
            )
        case .pushToUnknownDevice(let g, let token):
            guard gateways[g].isRunning else { return }
            await adoptAndPush(at: g, token: 1000 + token)
        case .addWidget(let g, let device):
            guard gateways[g].isRunning else { return }
            await changeRegistry(at: g, device: devices[device % devices.count], adding: true)
        case .removeWidget(let g, let device):
            guard gateways[g].isRunning else { return }
            await changeRegistry(at: g, device: devices[device % devices.count], adding: false)
        case .cancel(let g, let device):
            guard gateways[g].isRunning else { return }
            await operatorCommand(at: g, device: devices[device % devices.count], flush: nil)
        case .flush(let g, let device, let ignoringBudget):
            guard gateways[g].isRunning else { return }
            await operatorCommand(at: g, device: devices[device % devices.count], flush: ignoringBudget)
        case .turn(let g):
            guard gateways[g].isRunning else { return }
            await turn(gateways[g])
        case .endCommit(let g, let fails):
            guard gateways[g].isRunning else { return }
            await endCommit(gateways[g], fails: fails)
        case .heartbeat(let g):
            guard gateways[g].isRunning else { return }
            await heartbeat(gateways[g])
        case .send(let g):
            guard gateways[g].isRunning else { return }
            send(gateways[g])
        case .advance(let milliseconds):
            clock.advance(by: Int64(milliseconds))
        case .storeFault(let down):
            store.fault = down.map { $0 ? .down : .locked }
        case .kill(let g, let landed):
            await kill(gateways[g], commitLanded: landed)
        case .restart(let g):
            guard !gateways[g].isAlive else { return }
            restarts += 1
            let gateway = SimulatedGateway(index: g, id: "g\(g)-r\(restarts)", store: store, clock: clock, configuration: configuration)
            gateways[g] = gateway
            // A start that cannot load fails; the next restart event tries again.
            do { try await gateway.engine.load() } catch { gateway.isAlive = false }
        case .pause(let g):
            gateways[g].isPaused = true
        case .resume(let g):
            gateways[g].isPaused = false
        }
    }

    private func turn(_ gateway: SimulatedGateway) async {
        let turn = await gateway.engine.commitTurn()
        // A partition load or a rebuild the turn began ends before the next event (the order of events
        // stays the seed's).
        await gateway.engine.partitionLoadEnded()
        await gateway.engine.rebuildEnded()
        if let commit = turn.commit {
            precondition(gateway.inFlight == nil, "\(gateway.id) started commit \(commit.number) with one in flight")
            gateway.inFlight = commit
            trace("\(gateway.id) starts commit \(commit.number): \(commit.batch.requests.count) requests, \(commit.batch.decisions.count) decisions, \(commit.batch.deliveries.count) deliveries, fence \(commit.batch.fence.map { "\($0.generation)" } ?? "none")")
            for decision in commit.batch.decisions {
                trace("  decision: request \(decision.request), instance \(decision.instance.map { "\($0.rawValue)" } ?? "-"), \(decision.kind), due \(decision.due.map { "\($0.milliseconds - VirtualClock.epoch)" } ?? "-")")
            }
        }
        turn.answer()
        if let handingBack = gateway.handingBack, handingBack.committed.withLock({ $0 }) {
            gateway.handingBack = nil
            try? await store.release(handingBack.leases, gateway: gateway.id)
        }
    }

    private func endCommit(_ gateway: SimulatedGateway, fails: Bool) async {
        guard let commit = gateway.inFlight else { return }
        gateway.inFlight = nil
        let result: Result<Void, any Error>
        if fails {
            result = .failure(StoreError.unavailable(reason: "simulated: the commit did not finish within its deadline"))
        } else {
            do {
                try await store.commit(commit.batch)
                result = .success(())
            } catch {
                result = .failure(error)
            }
        }
        trace("\(gateway.id) commit \(commit.number) ended: \(result)")
        gateway.engine.commitEnded(commit.number, result, took: .zero)
    }

    private func heartbeat(_ gateway: SimulatedGateway) async {
        // While leases are handed back, the heartbeat waits for that commit (``ClusterMembership/beat()``).
        guard gateway.handingBack == nil else { return }
        do {
            let before = gateway.membership.leases
            let surplus = try await gateway.membership.renew()
            await gateway.engine.partitionLoadEnded()
            let after = gateway.membership.leases
            if before != after || !surplus.isEmpty {
                let lost = before.filter { after[$0.key] != $0.value }.count
                let taken = after.filter { before[$0.key] != $0.value }.count
                trace("\(gateway.id) heartbeat: \(after.count) leases, \(lost) lost, \(taken) taken, \(surplus.count) to hand back")
            }
            guard !surplus.isEmpty else { return }
            await gateway.engine.giveUp(Array(surplus.keys), handingBack: true)
            let committed = Shared(false)
            gateway.handingBack = (surplus, committed)
            await gateway.engine.waitForCommit { _ in committed.withLock { $0 = true } }
        } catch {
            await gateway.membership.heartbeatFailed()
        }
    }

    /// The delivery worker: sends what its gateway's leases cover by its own clock, leaves the rest behind.
    private func send(_ gateway: SimulatedGateway) {
        gateway.unrecorded = gateway.unrecorded.filter { delivery in
            (try? store.setDeliveryState(delivery.apnsID, .sent)) == nil
        }
        let ready = gateway.held.take(gateway.released.withLock { released in defer { released = [] }; return released })
        for delivery in ready {
            gateway.held.release([delivery])
            guard gateway.membership.owns(delivery) else {
                gateway.membership.leaveBehind([delivery])
                continue
            }
            sends.append(Send(delivery: delivery, gateway: gateway.id, at: clock.milliseconds))
            trace("\(gateway.id) sends \(delivery.apnsID) to device \(delivery.device), instances \(delivery.instances), released at \(delivery.released.milliseconds - VirtualClock.epoch)")
            do {
                try store.setDeliveryState(delivery.apnsID, .sent)
            } catch {
                // Sent, but a new owner will find it pending and may send it again.
                gateway.unrecorded.append(delivery)
                mayBeResent.insert(delivery.apnsID)
            }
        }
    }

    private func kill(_ gateway: SimulatedGateway, commitLanded: Bool) async {
        guard gateway.isAlive else { return }
        if let commit = gateway.inFlight, commitLanded {
            // The database may have committed what the process sent before it died.
            try? await store.commit(commit.batch)
        }
        gateway.inFlight = nil
        gateway.isAlive = false
        inFlightAtKills += gateway.unrecorded.count
        let answered = answers.withLock { $0.given }
        for index in requests.indices where requests[index].gateway == gateway.index && answered[index] == nil {
            requests[index].lostAtKill = true
        }
    }

    // MARK: Settling

    /// Commits whatever is open on every running gateway (the commit loop's turns, commits succeeding).
    func settleCommits() async throws {
        for _ in 0..<3 {
            for gateway in gateways where gateway.isRunning {
                await turn(gateway)
                await endCommit(gateway, fails: false)
                await turn(gateway)
            }
        }
    }

    /// Heals every fault, resumes every paused gateway, starts every killed one, and runs the cluster (heartbeats, commits, sends,
    /// half a second at a time) until nothing waits, nothing is pending and the inbox is empty.
    func settle() async throws {
        store.fault = nil
        for gateway in gateways { gateway.isPaused = false }
        // The orchestrator starts what was killed.
        for gateway in gateways where !gateway.isAlive { try await run(.restart(gateway: gateway.index)) }
        for round in 0..<400 {
            clock.advance(by: 500)
            for gateway in gateways where gateway.isAlive {
                await heartbeat(gateway)
                await turn(gateway)
                await endCommit(gateway, fails: false)
                await turn(gateway)
                send(gateway)
            }
            try await checkNow()
            if round >= 20, try await stillBusy() == nil { return }
        }
        throw Violation(description: "the cluster did not settle within 200 s of simulated time: \(try await stillBusy() ?? "?")")
    }

    /// What still goes on (`nil`: nothing).
    private func stillBusy() async throws -> String? {
        let answered = answers.withLock { $0.given }
        for request in requests where !request.lostAtKill && answered[request.number] == nil {
            return "request \(request.number) (\(request.kind), at g\(request.gateway)) is not answered"
        }
        if let entry = try await store.inbox(partitions: Array(0..<DevicePartition.partitionCount), limit: 1).first {
            return "the inbox of partition \(entry.partition) holds \(entry.work)"
        }
        for gateway in gateways where gateway.isAlive {
            if gateway.inFlight != nil || gateway.handingBack != nil { return "\(gateway.id) commits or hands back" }
            if !gateway.unrecorded.isEmpty || gateway.released.withLock({ !$0.isEmpty }) { return "\(gateway.id) has deliveries to send" }
            let pending = await gateway.engine.scheduler.pendingCount
            if pending > 0 { return "\(gateway.id) has \(pending) pending reloads" }
        }
        return nil
    }
}
