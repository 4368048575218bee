public import ReloadGateCore

/// A what-if replay: a trace's events through the gateway's own ``ReloadScheduler`` on a virtual clock
/// (each event's time; no network, no store), counting what the scheduler decides and releases.
///
/// Per widget kind it counts the decisions, the reloads (by push and by timeline), the pushes predicted
/// to be throttled on the device (released with an empty budget bucket), the requests that expired or
/// were cancelled, and it measures staleness: for every request and target, the time from the request to
/// the reload that served it (a push delivery, or a timeline reload for an absorbed request or one that
/// was still waiting when the timeline reloaded).
public struct Simulation: Sendable {
    public private(set) var scheduler: ReloadScheduler
    let configuration: SchedulerConfiguration

    // Kinds and the instances of each (for requests to a whole kind).
    var kindNames: [String] = []
    /// How the scheduler files each reported kind (its push type, policy kind and frequent updates): the
    /// report shows that policy.
    var kindScheduling: [SchedulingKind] = []
    var kindIndex: [String: Int] = [:]
    /// The kind of each instance handle, or -1 when not registered.
    var instanceKind: [Int32] = []
    /// The registered instances of each kind, and each instance's place in its kind's list.
    var members: [[Int32]] = []
    var memberPosition: [Int32] = []
    /// Whether each instance's pending reload serves an exempt request (not charged, not throttled).
    var pendingExempt: [Bool] = []

    // Figures.
    var tallies: [KindTally] = []
    /// Requests that matched no registered widget (no kind to count them under).
    public private(set) var unmatchedRequests = 0
    public private(set) var requests = 0
    public private(set) var requestsBySource: [TraceSource: Int] = [:]
    /// APNs pushes the gateway would send (one per device delivery, rule 8).
    public private(set) var devicePushes = 0
    var reloadsOfInstance: [UInt32] = []
    var firstTime: Int64?
    var lastTime: Int64 = 0
    /// Reloads (by push and by timeline, all kinds) in each minute from the first event's minute: the
    /// herd the trace made, as `reloadgate forecast` draws one ahead.
    var reloadsByMinute: [Int32] = []

    // Requests waiting for a reload, per instance: a pool of entries in singly linked lists.
    var waitingHead: [Int32] = []
    var entryReceived: [Int64] = []
    var entryNext: [Int32] = []
    var entryAbsorbed: [Bool] = []
    var freeEntry: Int32 = -1

    // Comparison with the decisions an exported trace recorded.
    public private(set) var compared = 0
    public private(set) var mismatchCount = 0
    public private(set) var mismatches: [Mismatch] = []

    /// Whether ``deliveryTimes`` is kept (tests: the time of every device delivery, in order).
    public var keepsDeliveryTimes = false
    public private(set) var deliveryTimes: [Timestamp] = []

    var nextRequest: RequestID = 1
    var decisions: [Decision] = []
    var resolved: [InstanceHandle] = []

    /// A decision the replay made differently from the gateway.
    public struct Mismatch: Sendable, Hashable {
        /// The request's number in the trace (from 1, requests only).
        public var request: Int
        public var instance: InstanceHandle?
        public var recorded: DecisionKind
        public var simulated: DecisionKind
    }

    public init(configuration: SchedulerConfiguration = SchedulerConfiguration()) {
        self.configuration = configuration
        self.scheduler = ReloadScheduler(configuration: configuration)
        decisions.reserveCapacity(16)
    }

    /// Replays events in order (times never go back: an earlier time is taken as the latest seen).
    public mutating func replay<Events: Sequence<TraceEvent>>(_ events: Events) {
        for event in events { apply(event) }
    }

    /// Replays one event.
    public mutating func apply(_ event: TraceEvent) {
        let at = max(event.at.milliseconds, lastTime)
        if firstTime == nil { firstTime = at }
        lastTime = at
        collect(upTo: at)
        switch event {
        case .registration(_, let device, let widgets):
            register(device, widgets)
        case .timeline(_, let instance, let planned):
            scheduler.setPlannedReload(instance, planned)
        case .request(let request):
            receive(request, at: at)
        }
    }

    /// Runs the clock to `end` (by default the last event's time), releasing what falls due by then.
    public mutating func finish(at end: Timestamp? = nil) {
        let time = max(end?.milliseconds ?? lastTime, lastTime)
        if firstTime == nil { firstTime = time }
        lastTime = time
        record(scheduler.release(now: Timestamp(milliseconds: time)))
    }

    // MARK: Events

    private mutating func register(_ device: DeviceHandle, _ widgets: [TraceWidget]) {
        let keep = Set(widgets.map(\.instance.rawValue))
        for instance in scheduler.instances(ofDevice: device) where !keep.contains(instance.rawValue) {
            let dropped = scheduler.remove(instance)
            let i = Int(instance.rawValue)
            tallies[Int(instanceKind[i])].cancelled += dropped.count
            dropWaiting(instance.rawValue, keepingAbsorbed: false)
            leaveKind(instance.rawValue)
        }
        for widget in widgets {
            let i = Int(widget.instance.rawValue)
            grow(to: i + 1)
            let kind = kindNumber(widget.reportedKind, scheduling: widget.scheduling)
            if instanceKind[i] != Int32(kind) {
                if instanceKind[i] >= 0 { leaveKind(widget.instance.rawValue) }
                instanceKind[i] = Int32(kind)
                memberPosition[i] = Int32(members[kind].count)
                members[kind].append(widget.instance.rawValue)
            }
            scheduler.register(widget.instance, device: device, widget.scheduling)
        }
    }

    private mutating func receive(_ request: TraceRequest, at: Int64) {
        requests += 1
        requestsBySource[request.source, default: 0] += 1
        resolved.removeAll(keepingCapacity: true)
        switch request.targets {
        case .instances(let instances):
            resolved.append(contentsOf: instances)
        case .device(let device, let kind):
            let wanted = kind.flatMap { kindIndex[$0] }
            if kind == nil || wanted != nil {
                for instance in scheduler.instances(ofDevice: device)
                where kind == nil || instanceKind[Int(instance.rawValue)] == Int32(wanted!) {
                    resolved.append(instance)
                }
                // The ring lists a device's instances in no set order: decide them in handle order.
                if resolved.count > 1 { resolved.sort() }
            }
        case .kind(let kind):
            if let number = kindIndex[kind] { resolved.append(contentsOf: members[number].sorted().map(InstanceHandle.init)) }
        }
        let id = nextRequest
        nextRequest += 1
        decisions.removeAll(keepingCapacity: true)
        scheduler.receive(
            ReloadRequest(
                id: id,
                targets: resolved,
                priority: request.priority,
                expiration: request.expiration,
                collapseID: request.collapseID,
                team: request.team,
                exempt: request.exempt,
                received: Timestamp(milliseconds: at),
                activity: request.activity
            ),
            into: &decisions
        )
        let hour = hourIndex(at)
        for decision in decisions {
            guard let instance = decision.instance?.rawValue else {
                unmatchedRequests += 1
                continue
            }
            let kind = Int(instanceKind[Int(instance)])
            tallies[kind].decisions[decision.kind.index] += 1
            tallies[kind].add(requestAt: hour)
            switch decision.kind {
            case .scheduled, .deferred, .merged:
                addWaiting(instance, received: at, absorbed: false)
                if request.exempt { pendingExempt[Int(instance)] = true }
            case .absorbed:
                addWaiting(instance, received: at, absorbed: true)
            default:
                break
            }
        }
        if let recorded = request.recorded { compare(recorded, request: requests) }
    }

    /// Compares the replay's decisions with the gateway's, target by target.
    private mutating func compare(_ recorded: [DecisionKind], request: Int) {
        func mismatch(_ instance: InstanceHandle?, _ recorded: DecisionKind, _ simulated: DecisionKind) {
            mismatchCount += 1
            if mismatches.count < 20 { mismatches.append(Mismatch(request: request, instance: instance, recorded: recorded, simulated: simulated)) }
        }
        if recorded == [.noMatch] || decisions.first?.kind == .noMatch {
            compared += 1
            let simulated = decisions.first?.kind ?? .noMatch
            let expected = recorded.first ?? .noMatch
            if recorded.count != 1 || decisions.count != 1 || simulated != expected {
                mismatch(decisions.first?.instance, expected, decisions.count == 1 ? simulated : decisions.first?.kind ?? .noMatch)
            }
            return
        }
        // The scheduler decides registered, distinct targets in the order given: as the gateway did.
        for (index, expected) in recorded.enumerated() {
            compared += 1
            guard index < decisions.count else {
                mismatch(nil, expected, .noMatch)
                continue
            }
            if decisions[index].kind != expected { mismatch(decisions[index].instance, expected, decisions[index].kind) }
        }
        if decisions.count > recorded.count {
            for extra in decisions[recorded.count...] { mismatch(extra.instance, .noMatch, extra.kind) }
        }
    }

    /// Releases and records what fell due by `at`, if anything did.
    private mutating func collect(upTo at: Int64) {
        guard let next = scheduler.nextWakeUp, next.milliseconds <= at else { return }
        record(scheduler.release(now: Timestamp(milliseconds: at)))
    }

    private mutating func record(_ output: TickOutput) {
        for delivery in output.deliveries {
            devicePushes += 1
            if keepsDeliveryTimes { deliveryTimes.append(delivery.at) }
            let at = delivery.at.milliseconds
            let hour = hourIndex(at)
            addReloads(delivery.reloaded.count, at: at)
            for reloaded in delivery.reloaded {
                let i = Int(reloaded.instance.rawValue)
                let kind = Int(instanceKind[i])
                tallies[kind].pushReloads += 1
                tallies[kind].add(reloadAt: hour)
                if !reloaded.charged && !pendingExempt[i] { tallies[kind].throttled += 1 }
                pendingExempt[i] = false
                reloadsOfInstance[i] &+= 1
                serveWaiting(reloaded.instance.rawValue, at: at, kind: kind)
            }
        }
        for reload in output.timelineReloads {
            let i = Int(reload.instance.rawValue)
            let kind = Int(instanceKind[i])
            tallies[kind].timelineReloads += 1
            addReloads(1, at: reload.at.milliseconds)
            tallies[kind].add(reloadAt: hourIndex(reload.at.milliseconds))
            reloadsOfInstance[i] &+= 1
            pendingExempt[i] = false
            serveWaiting(reload.instance.rawValue, at: reload.at.milliseconds, kind: kind)
        }
        for expiry in output.expired {
            let i = Int(expiry.instance.rawValue)
            tallies[Int(instanceKind[i])].expiredWaiting += expiry.requests.count
            pendingExempt[i] = false
            dropWaiting(expiry.instance.rawValue, keepingAbsorbed: true)
        }
    }

    // MARK: Waiting requests

    private mutating func addWaiting(_ instance: Int32, received: Int64, absorbed: Bool) {
        let entry: Int32
        if freeEntry >= 0 {
            entry = freeEntry
            freeEntry = entryNext[Int(entry)]
            entryReceived[Int(entry)] = received
            entryAbsorbed[Int(entry)] = absorbed
            entryNext[Int(entry)] = waitingHead[Int(instance)]
        } else {
            entry = Int32(entryReceived.count)
            entryReceived.append(received)
            entryAbsorbed.append(absorbed)
            entryNext.append(waitingHead[Int(instance)])
        }
        waitingHead[Int(instance)] = entry
    }

    private mutating func serveWaiting(_ instance: Int32, at: Int64, kind: Int) {
        var entry = waitingHead[Int(instance)]
        while entry >= 0 {
            let next = entryNext[Int(entry)]
            tallies[kind].staleness.add(milliseconds: at - entryReceived[Int(entry)])
            entryNext[Int(entry)] = freeEntry
            freeEntry = entry
            entry = next
        }
        waitingHead[Int(instance)] = -1
    }

    /// Drops the waiting requests of an instance (its pending reload expired or was removed); absorbed
    /// ones still wait for the timeline reload when `keepingAbsorbed`.
    private mutating func dropWaiting(_ instance: Int32, keepingAbsorbed: Bool) {
        var entry = waitingHead[Int(instance)]
        var kept: Int32 = -1
        while entry >= 0 {
            let next = entryNext[Int(entry)]
            if keepingAbsorbed && entryAbsorbed[Int(entry)] {
                entryNext[Int(entry)] = kept
                kept = entry
            } else {
                entryNext[Int(entry)] = freeEntry
                freeEntry = entry
            }
            entry = next
        }
        waitingHead[Int(instance)] = kept
    }

    /// Requests still waiting for a reload at the end (served by nothing yet).
    public var stillWaiting: Int {
        var count = 0
        for head in waitingHead {
            var entry = head
            while entry >= 0 {
                count += 1
                entry = entryNext[Int(entry)]
            }
        }
        return count
    }

    // MARK: Bookkeeping

    private mutating func grow(to count: Int) {
        guard count > instanceKind.count else { return }
        let added = max(count, instanceKind.count * 2) - instanceKind.count
        instanceKind.append(contentsOf: repeatElement(-1, count: added))
        memberPosition.append(contentsOf: repeatElement(-1, count: added))
        pendingExempt.append(contentsOf: repeatElement(false, count: added))
        reloadsOfInstance.append(contentsOf: repeatElement(0, count: added))
        waitingHead.append(contentsOf: repeatElement(-1, count: added))
    }

    private mutating func kindNumber(_ name: String, scheduling: SchedulingKind) -> Int {
        if let number = kindIndex[name] { return number }
        let number = kindNames.count
        kindIndex[name] = number
        kindNames.append(name)
        kindScheduling.append(scheduling)
        members.append([])
        tallies.append(KindTally())
        return number
    }

    /// Takes an instance out of its kind's list (its figures stay with the kind).
    private mutating func leaveKind(_ instance: Int32) {
        let i = Int(instance)
        let kind = Int(instanceKind[i])
        guard kind >= 0 else { return }
        let position = Int(memberPosition[i])
        let last = members[kind].removeLast()
        if last != instance {
            members[kind][position] = last
            memberPosition[Int(last)] = Int32(position)
        }
        memberPosition[i] = -1
        // The kind is kept: an instance removed while requests wait is counted under it.
    }

    private mutating func addReloads(_ count: Int, at: Int64) {
        guard let first = firstTime else { return }
        let minute = Int(max(0, at - HerdForecast.minuteStart(of: Timestamp(milliseconds: first)).milliseconds) / HerdForecast.minute)
        if minute >= reloadsByMinute.count { reloadsByMinute.append(contentsOf: repeatElement(0, count: minute - reloadsByMinute.count + 1)) }
        reloadsByMinute[minute] &+= Int32(truncatingIfNeeded: count)
    }

    private func hourIndex(_ at: Int64) -> Int {
        guard let first = firstTime else { return 0 }
        return Int(max(0, at - first) / 3_600_000)
    }
}

/// What the replay counted for one widget kind.
struct KindTally: Sendable {
    /// Decisions on arrival, by ``DecisionKind/index``.
    var decisions = [Int](repeating: 0, count: DecisionKind.allCases.count)
    var pushReloads = 0
    var timelineReloads = 0
    var throttled = 0
    var expiredWaiting = 0
    var cancelled = 0
    var staleness = StalenessHistogram()
    /// Per hour of the trace: requests (decisions) and reloads.
    var requestsByHour: [Int] = []
    var reloadsByHour: [Int] = []

    mutating func add(requestAt hour: Int) {
        if hour >= requestsByHour.count { requestsByHour.append(contentsOf: repeatElement(0, count: hour - requestsByHour.count + 1)) }
        requestsByHour[hour] += 1
    }

    mutating func add(reloadAt hour: Int) {
        if hour >= reloadsByHour.count { reloadsByHour.append(contentsOf: repeatElement(0, count: hour - reloadsByHour.count + 1)) }
        reloadsByHour[hour] += 1
    }
}

/// Staleness by the second, exact up to two days (the rest in one bucket, with the maximum kept exactly).
struct StalenessHistogram: Sendable {
    static let seconds = 172_800
    var counts: [Int32] = []
    var overflow = 0
    var total = 0
    var maximum: Int64 = 0

    mutating func add(milliseconds: Int64) {
        let value = max(0, milliseconds)
        total += 1
        maximum = max(maximum, value)
        let second = Int(value / 1000)
        guard second < Self.seconds else {
            overflow += 1
            return
        }
        if counts.isEmpty { counts = [Int32](repeating: 0, count: Self.seconds) }
        counts[second] += 1
    }

    /// The nearest-rank percentile in seconds (`fraction` 0.5: the median), `nil` when empty. Beyond two
    /// days it is the maximum.
    func percentile(_ fraction: Double) -> Double? {
        guard total > 0 else { return nil }
        let rank = max(1, Int((fraction * Double(total)).rounded(.up)))
        var seen = 0
        for (second, count) in counts.enumerated() {
            seen += Int(count)
            if seen >= rank { return Double(second) }
        }
        return Double(maximum) / 1000
    }

    /// Counts within bucket edges in seconds (`[0, e0), [e0, e1), ..., [en, ∞)`).
    func buckets(edges: [Int]) -> [Int] {
        var result = [Int](repeating: 0, count: edges.count + 1)
        var bucket = 0
        for (second, count) in counts.enumerated() where count > 0 {
            while bucket < edges.count && second >= edges[bucket] { bucket += 1 }
            result[bucket] += Int(count)
        }
        result[edges.count] += overflow
        return result
    }
}
