import Foundation
import ReloadGateCore
import ReloadGateStore
import Synchronization

/// The gateway's live freshness (docs/DECISIONS.md, "Freshness is measured where requests are served"):
/// how long each request (a push, a webhook call) waited from its arrival to the delivery that served it,
/// per app and kind, against the kind's objective (`<prefix>.freshness.*`).
///
/// The commit loop and the delivery worker only hand facts over (``committed(requests:forwarded:decisions:timelineReloads:at:)``,
/// ``delivered(instances:at:failed:)``): a committed batch's decisions and the timeline reloads its tick made,
/// a delivery the push service (or the outbox) took. ``FreshnessService`` applies them in that order
/// once a second, after naming the instances' apps and kinds from the registry, so that the commit loop
/// never waits for the accounting. Facts of at most ``queueLimit`` rows wait; more are counted as lost
/// (`reloadgate_freshness_facts_lost_total`) rather than held. A fact heavier than that alone (a
/// fan-out over a million instances) is taken into an empty queue: its rows are the commit's own, already
/// in memory, and the queue holds them until the next turn.
final class FreshnessMonitor: Sendable {
    /// One fact, in the order the gateway learned it.
    enum Fact: Sendable {
        /// A batch sealed at `at` and committed: the arrival of each request it decided (its own and
        /// those forwarded to it), every decision, the timeline reloads.
        case committed(
            requests: [RecordedRequest], forwarded: [(id: RequestID, received: Timestamp)], decisions: [Decision],
            timelineReloads: [TimelineReload], at: Timestamp
        )
        /// A delivery to `instances` was taken by the upstream at `at` (`failed`: refused for good).
        case delivered(instances: CompactList<Int64>, released: Timestamp?, at: Timestamp, failed: Bool)

        var weight: Int {
            switch self {
            case .committed(let requests, let forwarded, let decisions, let reloads, _): 1 + requests.count + forwarded.count + decisions.count + reloads.count
            case .delivered(let instances, _, _, _): 1 + instances.count
            }
        }
    }

    struct State: Sendable {
        var tracker = FreshnessTracker(journal: true)
        var facts: [Fact] = []
        var weight = 0
        var lost = 0
    }

    /// Facts (weighed by the rows they carry) that may wait for the service.
    static let queueLimit = 1_000_000

    private let state = Mutex(State())
    /// Whether an ``apply(describe:)`` is under way: one at a time, so that facts are applied in order.
    private let applying = Mutex(false)
    let scheduling: SchedulerConfiguration
    /// Where each recorded wait and miss is counted.
    let metrics: GatewayMetrics

    init(scheduling: SchedulerConfiguration, metrics: GatewayMetrics = GatewayMetrics()) {
        self.scheduling = scheduling
        self.metrics = metrics
        metrics.freshnessObjectives(scheduling.objectives)
    }

    // MARK: Facts (the commit loop, the worker)

    /// A batch sealed at `at` committed (called on the commit loop: only queues).
    func committed(
        requests: [RecordedRequest], forwarded: [(id: RequestID, received: Timestamp)], decisions: [Decision],
        timelineReloads: [TimelineReload], at: Timestamp
    ) {
        guard !decisions.isEmpty || !timelineReloads.isEmpty else { return }
        add(.committed(requests: requests, forwarded: forwarded, decisions: decisions, timelineReloads: timelineReloads, at: at))
    }

    /// A delivery was taken by the push service or the outbox, or (`failed`) refused for good.
    func delivered(instances: CompactList<Int64>, released: Timestamp? = nil, at: Timestamp, failed: Bool = false) {
        guard !instances.isEmpty else { return }
        add(.delivered(instances: instances, released: released, at: at, failed: failed))
    }

    private func add(_ fact: Fact) {
        let weight = fact.weight
        state.withLock { state in
            guard state.weight == 0 || state.weight + weight <= Self.queueLimit else {
                state.lost += 1
                return
            }
            state.facts.append(fact)
            state.weight += weight
        }
    }

    // MARK: Applying (the service)

    /// Facts lost to a full queue since the last call.
    func takeLost() -> Int {
        state.withLock { state in
            defer { state.lost = 0 }
            return state.lost
        }
    }

    /// Applies what is queued: names the instances the tracker does not know (`describe` reads the
    /// registry), then feeds the facts to the tracker in order and counts what the book recorded in the
    /// metrics. Instances no longer registered are left out. Returns what was recorded, or `nil` when
    /// another call is applying (it has the facts queued before this call; try again).
    @discardableResult
    func apply(describe: ([Int64]) async throws -> [InstanceDescription]) async throws -> [FreshnessBook.Entry]? {
        let mine = applying.withLock { busy in
            defer { busy = true }
            return !busy
        }
        guard mine else { return nil }
        defer { applying.withLock { $0 = false } }
        let (facts, unknown) = state.withLock { state -> ([Fact], [Int64]) in
            let facts = state.facts
            state.facts = []
            state.weight = 0
            var unknown = Set<Int64>()
            for fact in facts {
                switch fact {
                case .committed(_, _, let decisions, let reloads, _):
                    for decision in decisions {
                        if let instance = decision.instance, !state.tracker.knows(instance) { unknown.insert(Int64(instance.rawValue)) }
                    }
                    for reload in reloads where !state.tracker.knows(reload.instance) { unknown.insert(Int64(reload.instance.rawValue)) }
                case .delivered:
                    break  // a delivery serves only what waits, which is known
                }
            }
            return (facts, unknown.sorted())
        }
        guard !facts.isEmpty else { return [] }
        do {
            // Each part named is registered at once: a turn abandoned past its deadline (a fan-out's
            // million instances) leaves what it named known, and the next turn names only the rest.
            for part in unknown.chunks(of: 500) {
                let named = try await describe(Array(part))
                state.withLock { state in
                    for description in named {
                        state.tracker.register(InstanceHandle(Int32(truncatingIfNeeded: description.instance)), name: name(description))
                    }
                }
            }
        } catch {
            // The registry did not answer: the facts go back to the front, for the next call.
            state.withLock { state in
                state.facts = facts + state.facts
                state.weight += facts.reduce(0) { $0 + $1.weight }
            }
            throw error
        }
        return state.withLock { state in
            for fact in facts { Self.apply(fact, to: &state.tracker) }
            let entries = state.tracker.takeJournal()
            metrics.freshnessRecorded(entries)
            return entries
        }
    }

    /// The name an instance's freshness is counted under: its app and kind (``key(bundle:kind:pushType:)``)
    /// with the kind's objective. The tracker holds each name once.
    func name(_ description: InstanceDescription) -> FreshnessTracker.Name {
        let pushType = PushType(rawValue: description.pushType) ?? .widgets
        return FreshnessTracker.Name(
            key: Self.key(bundle: description.bundle, kind: description.kind, pushType: pushType),
            objective: objective(kind: description.kind, pushType: pushType)
        )
    }

    /// Applies what is queued now, for an answer that must include what happened before it
    /// (`reloadgate freshness`): waits for another call's turn, and for the registry, at most `deadline`;
    /// past it the answer goes with what is applied so far (the facts stay queued, in order).
    func applyNow(within deadline: Duration = .seconds(2), describe: @escaping @Sendable ([Int64]) async throws -> [InstanceDescription]) async {
        let end = ContinuousClock.now + deadline
        _ = try? await abandoning(after: deadline, timedOut: { CancellationError() }) { [self] in
            while try await apply(describe: describe) == nil, ContinuousClock.now < end {
                try await Task.sleep(for: .milliseconds(5))
            }
        }
    }

    private static func apply(_ fact: Fact, to tracker: inout FreshnessTracker) {
        switch fact {
        case .committed(let requests, let forwarded, let decisions, let reloads, let at):
            let arrivals = requests.map { ($0.id, $0.received) } + forwarded.map { ($0.id, $0.received) }
            let received = Dictionary(arrivals, uniquingKeysWith: { first, _ in first })
            // A request's decisions come together; a pending reload's expiry or drop comes later, of a
            // request decided before (in an earlier batch, or earlier in this one). One exception: a
            // request this gateway forwarded to a partition it was taking, and then decided as its owner
            // in the same batch (``SchedulerEngine/catchUp(_:)``): the owner's decisions follow the
            // forwarder's, and count as its decision too.
            let decidedAsOwner = Set(forwarded.map(\.id))
            var decided = Set<RequestID>()
            var ownerFollows = Set<RequestID>()
            var index = decisions.startIndex
            while index < decisions.endIndex {
                let request = decisions[index].request
                var end = index + 1
                while end < decisions.endIndex, decisions[end].request == request { end += 1 }
                let group = decisions[index..<end]
                if let arrival = received[request], decided.insert(request).inserted || ownerFollows.remove(request) != nil {
                    tracker.decided(group, received: arrival)
                    if decidedAsOwner.contains(request), group.contains(where: { $0.kind == .forwarded }) { ownerFollows.insert(request) }
                } else {
                    for decision in group {
                        guard let instance = decision.instance else { continue }
                        switch decision.kind {
                        case .expired: tracker.pendingExpired(instance, at: at)
                        case .cancelled: tracker.pendingDropped(instance, at: at)
                        default: break
                        }
                    }
                }
                index = end
            }
            for reload in reloads { tracker.timelineReloaded(reload.instance, at: reload.at) }
        case .delivered(let instances, let released, let at, let failed):
            let handles = instances.map { InstanceHandle(Int32(truncatingIfNeeded: $0)) }
            if failed { tracker.failed(handles, released: released, at: at) } else { tracker.delivered(handles, released: released, at: at) }
        }
    }

    /// Forgets idle instances and requests waiting past a day (``FreshnessTracker/sweep(now:longest:)``);
    /// skipped while facts are being applied (an instance named as known there must stay known). Returns
    /// whether it swept.
    @discardableResult
    func sweep(now: Timestamp) -> Bool {
        let mine = applying.withLock { busy in
            defer { busy = true }
            return !busy
        }
        guard mine else { return false }
        defer { applying.withLock { $0 = false } }
        state.withLock { state in _ = state.tracker.sweep(now: now) }
        return true
    }

    // MARK: Reading

    /// An app and kind as freshness keys them: a control's and an activity's kind carry their push type's
    /// prefix (`control:garage`), so that they never mix with a widget kind of the same name.
    static func key(bundle: String, kind: String, pushType: PushType) -> FreshnessBook.Key {
        FreshnessBook.Key(bundle: bundle, kind: pushType.descriptor.kindPrefix + kind)
    }

    /// The objective of a kind: its own policy's, or its push type's default (the scheduler's lookup).
    func objective(kind: String, pushType: PushType) -> FreshnessObjective {
        scheduling[pushType].policy(kind: kind).freshness
    }

    /// The objective of a key (its kind with the push type's prefix).
    func objective(of key: FreshnessBook.Key) -> FreshnessObjective {
        for pushType in PushType.allCases where !pushType.descriptor.kindPrefix.isEmpty {
            let prefix = pushType.descriptor.kindPrefix
            if key.kind.hasPrefix(prefix) { return objective(kind: String(key.kind.dropFirst(prefix.count)), pushType: pushType) }
        }
        return objective(kind: key.kind, pushType: .widgets)
    }

    /// One app and kind over the last hour and day, with the day's hours.
    struct Report: Sendable {
        var key: FreshnessBook.Key
        var objective: FreshnessObjective
        var hour: FreshnessSummary
        var day: FreshnessSummary
        /// The last 24 hours, oldest first: each hour's summary.
        var hours: [FreshnessSummary]
    }

    /// The apps and kinds with anything in the last day, of one app or kind when given.
    func reports(bundle: String? = nil, kind: String? = nil, now: Timestamp) -> [Report] {
        let book = state.withLock { $0.tracker.book }
        return book.keys.filter { (bundle == nil || $0.bundle == bundle) && (kind == nil || $0.kind == kind) }.map { key in
            let hourLength: Int64 = 3_600_000
            // Hours that end with the current ten-minute slot, six whole slots each, none shared.
            let slot = FreshnessBook.slotLength
            let end = now.milliseconds - ((now.milliseconds % slot) + slot) % slot + slot - 1
            let hours = (0..<24).reversed().map { back in
                book.summary(key, window: hourLength, now: Timestamp(milliseconds: end - Int64(back) * hourLength))
            }
            return Report(
                key: key, objective: objective(of: key),
                hour: book.summary(key, window: hourLength, now: now),
                day: book.summary(key, window: 86_400_000, now: now),
                hours: hours
            )
        }
    }

    /// Requests waiting to be served, and instances named (for tests and the service's log).
    var counts: (waiting: Int, known: Int, queued: Int) {
        state.withLock { ($0.tracker.waitingCount, $0.tracker.knownCount, $0.facts.count) }
    }
}
