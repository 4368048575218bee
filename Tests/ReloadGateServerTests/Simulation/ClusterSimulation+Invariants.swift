import Foundation
import ReloadGateCore
import ReloadGateStore
import ReloadGateTesting

@testable import ReloadGateServer

/// What the simulation checks: after every event (``checkNow()``) and once the cluster has settled
/// (``checkEnd()``).
extension ClusterSimulation {
    /// Must hold at every moment: nobody is answered twice, and no instance has a pending reload in two
    /// engines that both hold its partition's lease by their own clock.
    func checkNow() async throws {
        for (number, given) in answers.withLock({ $0.given }) where given.count > 1 {
            throw Violation(description: "request \(number) was answered \(given.count) times: \(given)")
        }
        var owners: [Int64: [String]] = [:]
        for gateway in gateways where gateway.isAlive {
            let scheduler = await gateway.engine.scheduler
            for device in devices where gateway.membership.owns(device: device) {
                for instance in store.instances(ofDevice: device) {
                    guard let handle = SchedulerEngine.handle(instance.id), scheduler.pendingReload(of: handle) != nil else { continue }
                    owners[instance.id, default: []].append(gateway.id)
                }
            }
        }
        for (instance, held) in owners where held.count > 1 {
            throw Violation(description: "instance \(instance) has a pending reload in \(held.count) owners: \(held)")
        }
    }

    /// Must hold once the cluster has settled (every fault healed).
    func checkEnd() throws {
        let ledger = store.ledger
        let book = answers.withLock { $0 }
        let answered = book.given
        var bySummary: [String: RecordedRequest] = [:]
        for request in ledger.requests.values { bySummary[request.summary] = request }
        var decisions: [RequestID: [Decision]] = [:]
        for decision in ledger.decisions { decisions[decision.request, default: []].append(decision) }

        for request in requests where !request.lostAtKill {
            // Every request is answered exactly once (checkNow finds the second answer).
            guard let answer = answered[request.number]?.first else {
                throw Violation(description: "request \(request.number) (\(request.kind), at g\(request.gateway)) was never answered")
            }
            guard request.kind == .reload else { continue }
            let recorded = bySummary["sim-\(request.number)"]
            switch answer {
            case .refused(let reason):
                // A refused request is never committed, then or later.
                if let recorded {
                    throw Violation(description: "request \(request.number) was refused (\(reason)) but committed as request \(recorded.id)")
                }
            case .accepted(let id):
                guard recorded?.id == id else {
                    throw Violation(description: "request \(request.number) was accepted as \(id) but the store holds \(recorded.map { "\($0.id)" } ?? "nothing")")
                }
                try checkDecided(request, id: id, decisions[id] ?? [], all: decisions)
            case .replayed, .conflict:
                // Answered from an idempotency key: nothing of it is committed.
                if let recorded {
                    throw Violation(description: "request \(request.number) was answered \(answer) but committed as request \(recorded.id)")
                }
            case .registryDone:
                throw Violation(description: "reload request \(request.number) got a registry answer")
            }
        }
        try checkIdempotency(answered)
        try checkOrder(book, decisions: ledger.decisions)
        try checkSends()
        try checkOwnership()
    }

    /// The kinds of a target's first decision by its owner (`forwarded` is the forwarder's, and a pending
    /// reload's `cancelled` comes later; `expired` is either).
    static let initialKinds: Set<DecisionKind> = [.scheduled, .merged, .absorbed, .deferred, .noMatch, .expired]

    /// Through any gateways, a reload request answered before another was sent is decided first for each
    /// instance both target (their first decisions in the ledger, which is in commit order): as one
    /// gateway would, also when one of them went through an inbox and the gateway took the partition in
    /// between, and when the later one went to the owner itself (decisions 0117 and 0120).
    private func checkOrder(_ book: AnswerBook, decisions: [Decision]) throws {
        var first: [RequestID: [Int64: Int]] = [:]
        for (position, decision) in decisions.enumerated() where Self.initialKinds.contains(decision.kind) {
            guard let instance = decision.instance else { continue }
            if first[decision.request]?[Int64(instance.rawValue)] == nil { first[decision.request, default: [:]][Int64(instance.rawValue)] = position }
        }
        var accepted: [(request: SimulatedRequest, id: RequestID, answeredAt: Int)] = []
        for request in requests where request.kind == .reload && !request.lostAtKill {
            guard case .accepted(let id)? = book.given[request.number]?.first, let answeredAt = book.order[request.number] else { continue }
            accepted.append((request, id, answeredAt))
        }
        for earlier in accepted {
            for later in accepted
            where earlier.answeredAt < later.request.answeredBeforeSending {
                for (instance, before) in first[earlier.id] ?? [:] {
                    guard let after = first[later.id]?[instance], after < before else { continue }
                    throw Violation(
                        description: "request \(later.request.number) (id \(later.id)) was decided for instance \(instance) before request "
                            + "\(earlier.request.number) (id \(earlier.id)), which was answered before it was sent (through g\(earlier.request.gateway), "
                            + "then g\(later.request.gateway))"
                    )
                }
            }
        }
    }

    /// An idempotency key is accepted once, whichever gateways its calls reached; a replay answers with an
    /// accepted call of the same body, a conflict follows a call with another.
    private func checkIdempotency(_ answered: [Int: [Answer]]) throws {
        var accepted: [String: SimulatedRequest] = [:]
        let committed = Set(store.ledger.requests.values.map(\.summary))
        for request in requests {
            guard let key = request.idempotency?.key else { continue }
            // Accepted: answered so, or committed by a gateway killed before it answered.
            if request.lostAtKill {
                guard committed.contains("sim-\(request.number)") else { continue }
            } else {
                guard case .accepted? = answered[request.number]?.first else { continue }
            }
            if let first = accepted[key] {
                throw Violation(description: "idempotency key \(key) was accepted twice: requests \(first.number) and \(request.number)")
            }
            accepted[key] = request
        }
        for request in requests where !request.lostAtKill {
            guard let idempotency = request.idempotency, let answer = answered[request.number]?.first else { continue }
            let others = requests.filter { $0.number != request.number && $0.idempotency?.key == idempotency.key }
            switch answer {
            case .replayed:
                // The call it replays was accepted (in either order: calls in flight together are ordered
                // by the commits that decide them).
                guard let first = accepted[idempotency.key], first.idempotency?.bodyHash == idempotency.bodyHash else {
                    throw Violation(description: "request \(request.number) was answered as a replay of key \(idempotency.key), which no call of its body was accepted with")
                }
            case .conflict where !others.contains(where: { $0.idempotency?.bodyHash != idempotency.bodyHash }):
                throw Violation(description: "request \(request.number) was answered as a conflict of key \(idempotency.key) with no call of another body")
            default:
                break
            }
        }
    }

    /// An accepted request is decided for each target exactly once, by one owner, and what was scheduled
    /// was delivered (or dropped with the widget).
    private func checkDecided(_ request: SimulatedRequest, id: RequestID, _ made: [Decision], all: [RequestID: [Decision]]) throws {
        for target in request.targets {
            let handle = SchedulerEngine.handle(target)
            let first = made.filter { $0.instance == handle && Self.initialKinds.contains($0.kind) }
            // A widget removed before its owner decided the request is left out of its decisions (the
            // scheduler decides registered targets only; `no-match` when none is).
            if removed.contains(target), first.count <= 1 { continue }
            guard first.count == 1 else {
                throw Violation(description: "request \(request.number) (id \(id)) was decided \(first.count) times for instance \(target): \(first.map(\.kind))")
            }
            let kind = first[0].kind
            guard kind == .scheduled || kind == .merged || kind == .deferred else { continue }
            if made.contains(where: { $0.instance == handle && $0.kind == .cancelled }) { continue }
            // A delivery to the instance that lists the request (it lists the first 100 of each instance;
            // past those, one sent after the request).
            let delivered = sends.contains { send in
                send.delivery.instances.contains(target)
                    && (send.delivery.requests.contains(id)
                        || (send.delivery.requestCount > send.delivery.requests.count && send.at >= request.sentAt))
            }
            if !delivered {
                throw Violation(description: "request \(request.number) (id \(id)) was \(kind) for instance \(target) but no reload reached it")
            }
        }
    }

    /// No delivery was sent twice, except those whose `sent` state could not be written before their
    /// gateway died or lost the lease; a widget's deliveries keep its minimum interval across owners.
    private func checkSends() throws {
        var byID: [String: [Send]] = [:]
        for send in sends { byID[send.delivery.apnsID, default: []].append(send) }
        for (apnsID, copies) in byID where copies.count > 1 && !mayBeResent.contains(apnsID) {
            throw Violation(description: "delivery \(apnsID) was sent \(copies.count) times: by \(copies.map(\.gateway))")
        }
        var releases: [Int64: [Send]] = [:]
        for copies in byID.values {
            for instance in copies[0].delivery.instances { releases[instance, default: []].append(copies[0]) }
        }
        for (instance, sent) in releases where !flushedIgnoringBudget.contains(instance) {
            // A control's interval is the controls' policy's.
            let pushType = store.instance(instance).map { store.pushType(ofDevice: $0.device) } ?? .widgets
            let interval = configuration.policy(kind: nil, pushType: pushType).minimumInterval * 1000
            let sorted = sent.sorted { $0.delivery.released < $1.delivery.released }
            for (earlier, later) in zip(sorted, sorted.dropFirst())
            where later.delivery.released.milliseconds - earlier.delivery.released.milliseconds < interval {
                throw Violation(
                    description: "instance \(instance) was reloaded less than the minimum interval apart: released at "
                        + "\(earlier.delivery.released.milliseconds) (\(earlier.delivery.apnsID), sent by \(earlier.gateway)) and at "
                        + "\(later.delivery.released.milliseconds) (\(later.delivery.apnsID), sent by \(later.gateway))"
                )
            }
        }
    }

    /// Every device's partition is held by one gateway, whose scheduler knows exactly the device's registered widgets.
    private func checkOwnership() throws {
        for device in devices {
            let owners = gateways.filter { $0.isAlive && $0.membership.owns(device: device) }
            guard owners.count == 1 else {
                throw Violation(description: "device \(device) has \(owners.count) owners: \(owners.map(\.id))")
            }
        }
    }

    /// After things settle, the owner's scheduler holds exactly the registered widgets of each device: a
    /// registry change takes effect where it matters, also when the gateway that made it was refused its
    /// next commit or died with its answer unsent (the store told the owner in the change's own
    /// transaction, ``SharedSchedulingStore``).
    func checkRegistryMirrored() async throws {
        for device in devices {
            guard let owner = gateways.first(where: { $0.isAlive && $0.membership.owns(device: device) }),
                let handle = SchedulerEngine.deviceHandle(device)
            else { continue }
            let known = await owner.engine.scheduler.instances(ofDevice: handle).map { Int64($0.rawValue) }.sorted()
            let registered = store.instances(ofDevice: device).filter { store.isRegistered(instance: $0.id) }.map(\.id).sorted()
            if known != registered {
                throw Violation(description: "device \(device): \(owner.id) schedules instances \(known), the registry holds \(registered)")
            }
        }
    }
}
