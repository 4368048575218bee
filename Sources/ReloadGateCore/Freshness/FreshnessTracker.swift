/// Follows each request from its decision to the reload that serves it and writes its wait into a
/// ``FreshnessBook``: what the scheduler decided (``decided(_:received:)``), the deliveries the push
/// service (or the outbox) took (``delivered(_:at:)``), the timeline reloads (``timelineReloaded(_:at:)``),
/// and the pending reloads that expired or were dropped.
///
/// - A scheduled, deferred or merged request waits for the next delivery to its instance: its whole wait
///   counts, from its arrival to the delivery's acceptance (a merged one included).
/// - An absorbed request waits for the instance's timeline reload (or a delivery, if one comes first).
/// - An expired request, at once or while waiting, and one whose pending reload was dropped, is never
///   served: a miss of `expired` or `cancelled`.
///
/// A request's cause is what it waited for (its decision's reason); a merged one takes the cause of the
/// request its pending reload was made for. Per instance at most ``listed`` requests are kept with their
/// arrival times (as a pending reload lists its requests); more are counted with the arrival time of the
/// last kept one, whose wait is at least theirs, so memory follows the pending reloads, not the traffic.
public struct FreshnessTracker: Sendable {
    /// Requests kept with their arrival per instance.
    public static let listed = 100

    struct Waiting: Sendable {
        var received: Int64
        var cause: FreshnessCause?
        var absorbed: Bool
    }

    /// An instance the tracker knows, in 16 bytes: its name (an index into ``names``), and the first
    /// request waiting for it. A fan-out's instances wait for one request each, and a million of them
    /// are held until they are served; the requests after the first wait in ``more``.
    struct Instance: Sendable {
        var first: Waiting?
        var name: UInt32
    }

    /// An instance's requests after its first one, and those past ``listed``.
    struct More: Sendable {
        var waiting: [Waiting] = []
        /// Requests past ``listed``, counted as the last kept one.
        var unlisted = 0
    }

    /// An app and kind with its objective, held once however many instances it names.
    public struct Name: Hashable, Sendable {
        public var key: FreshnessBook.Key
        public var objective: FreshnessObjective

        public init(key: FreshnessBook.Key, objective: FreshnessObjective) {
            self.key = key
            self.objective = objective
        }
    }

    private var instances: [Int32: Instance] = [:]
    private var more: [Int32: More] = [:]
    private var names: [Name] = []
    private var nameIndex: [Name: UInt32] = [:]
    public private(set) var book: FreshnessBook

    /// A tracker; with `journal`, its book lists each request it records (``takeJournal()``).
    public init(journal: Bool = false) {
        book = FreshnessBook(journal: journal)
    }

    /// The requests recorded since the last call (``FreshnessBook/takeJournal()``).
    public mutating func takeJournal() -> [FreshnessBook.Entry] { book.takeJournal() }

    /// Requests waiting to be served, kept with their arrival.
    public var waitingCount: Int {
        instances.values.reduce(0) { $0 + ($1.first == nil ? 0 : 1) } + more.values.reduce(0) { $0 + $1.waiting.count }
    }

    /// Whether the instance's app and kind are known (``register(_:key:objective:)``).
    public func knows(_ instance: InstanceHandle) -> Bool { instances[instance.rawValue] != nil }

    /// Instances known with their app and kind.
    public var knownCount: Int { instances.count }

    /// Apps and kinds (with their objectives) the known instances are named with.
    public var nameCount: Int { names.count }

    /// The app and kind an instance is named with, and its objective: `nil` when it is not known.
    public func name(of instance: InstanceHandle) -> Name? {
        instances[instance.rawValue].map { names[Int($0.name)] }
    }

    /// Forgets the instances nothing waits for (they are named again before their next decision), and
    /// those whose first request still waits after `longest`: its outcome happened where the tracker
    /// cannot see it (another gateway took the partition over, or the facts were lost), so it is not
    /// counted either way. Memory follows the requests in flight, not the registry: the tables are made
    /// anew with what is kept (a dictionary keeps the room of what is removed from it), and names no
    /// instance holds go. Returns the requests forgotten so.
    @discardableResult
    public mutating func sweep(now: Timestamp, longest: Int64 = 86_400_000) -> Int {
        defer { book.forget(before: now) }
        var forgotten = 0
        let more = more
        instances = instances.filter { raw, instance in
            guard let first = instance.first else { return false }
            guard now.milliseconds - first.received > longest else { return true }
            forgotten += 1 + (more[raw].map { $0.waiting.count + $0.unlisted } ?? 0)
            return false
        }
        let instances = instances
        self.more = more.filter { raw, _ in instances[raw] != nil }
        keepNamesInUse()
        return forgotten
    }

    /// Drops the names no known instance holds, renumbering the others.
    private mutating func keepNamesInUse() {
        var used = [Bool](repeating: false, count: names.count)
        for instance in instances.values { used[Int(instance.name)] = true }
        guard used.contains(false) else { return }
        var renumbered = [UInt32](repeating: 0, count: names.count)
        var kept: [Name] = []
        for (index, name) in names.enumerated() where used[index] {
            renumbered[index] = UInt32(kept.count)
            kept.append(name)
        }
        names = kept
        nameIndex = Dictionary(uniqueKeysWithValues: kept.enumerated().map { ($1, UInt32($0)) })
        for index in instances.values.indices { instances.values[index].name = renumbered[Int(instances.values[index].name)] }
    }

    /// Names an instance's app and kind, and its kind's objective (before its first decision).
    public mutating func register(_ instance: InstanceHandle, key: FreshnessBook.Key, objective: FreshnessObjective) {
        register(instance, name: Name(key: key, objective: objective))
    }

    /// Names an instance (before its first decision); each name is held once.
    public mutating func register(_ instance: InstanceHandle, name: Name) {
        let number: UInt32
        if let known = nameIndex[name] {
            number = known
        } else {
            number = UInt32(names.count)
            names.append(name)
            nameIndex[name] = number
        }
        if let index = instances.index(forKey: instance.rawValue) {
            instances.values[index].name = number
        } else {
            instances[instance.rawValue] = Instance(first: nil, name: number)
        }
    }

    /// The decisions of a request received at `received`.
    public mutating func decided<Decisions: Collection<Decision>>(_ decisions: Decisions, received: Timestamp) {
        for decision in decisions {
            guard let handle = decision.instance, let index = instances.index(forKey: handle.rawValue) else { continue }
            switch decision.kind {
            case .scheduled, .deferred:
                add(Waiting(received: received.milliseconds, cause: FreshnessCause(waitingFor: decision.reason), absorbed: false), to: handle.rawValue, at: index)
            case .merged:
                // The pending reload's own cause: what the request it was made for waits for.
                let cause = firstWaitingForAReload(handle.rawValue, at: index)?.cause ?? .merge
                add(Waiting(received: received.milliseconds, cause: cause, absorbed: false), to: handle.rawValue, at: index)
            case .absorbed:
                add(Waiting(received: received.milliseconds, cause: .timeline, absorbed: true), to: handle.rawValue, at: index)
            case .expired:
                book.missed(names[Int(instances.values[index].name)].key, at: received, cause: .expired)
            case .cancelled:
                book.missed(names[Int(instances.values[index].name)].key, at: received, cause: .cancelled)
            case .noMatch, .forwarded, .outdated, .afterEnd:
                break
            }
        }
    }

    /// The first request waiting for the instance's pending reload (not absorbed by its timeline).
    private func firstWaitingForAReload(_ raw: Int32, at index: Dictionary<Int32, Instance>.Index) -> Waiting? {
        if let first = instances.values[index].first, !first.absorbed { return first }
        return more[raw]?.waiting.first { !$0.absorbed }
    }

    private mutating func add(_ waiting: Waiting, to raw: Int32, at index: Dictionary<Int32, Instance>.Index) {
        guard instances.values[index].first != nil else {
            instances.values[index].first = waiting
            return
        }
        more[raw, default: More()].add(waiting)
    }

    /// A delivery that reloads `instances`, released at `released`, was taken at `at`: the requests waiting
    /// for them that arrived by its release are served. One that arrived later is not in it (it waits for
    /// the instance's next reload: deferred while this delivery was on its way, say); `nil`: all are.
    public mutating func delivered(_ instances: [InstanceHandle], released: Timestamp? = nil, at: Timestamp) {
        for instance in instances { serve(instance, at: at, arrivedBy: released) }
    }

    /// A delivery that would reload `instances`, released at `released`, failed for good at `at` (the push
    /// service refused it): the requests waiting for them that arrived by its release are misses of
    /// ``FreshnessCause/upstream``.
    public mutating func failed(_ instances: [InstanceHandle], released: Timestamp? = nil, at: Timestamp) {
        for instance in instances { drop(instance, at: at, cause: .upstream, keepingAbsorbed: false, arrivedBy: released) }
    }

    /// The instance's timeline reload happened at `at`: its absorbed requests, and any pending, are served.
    public mutating func timelineReloaded(_ instance: InstanceHandle, at: Timestamp) {
        serve(instance, at: at)
    }

    /// The instance's pending reload expired at `at`: its waiting requests are misses (absorbed ones still
    /// wait for the timeline reload).
    public mutating func pendingExpired(_ instance: InstanceHandle, at: Timestamp) {
        drop(instance, at: at, cause: .expired, keepingAbsorbed: true)
    }

    /// The instance's pending reload was dropped at `at` (cancelled, unregistered, removed): misses.
    public mutating func pendingDropped(_ instance: InstanceHandle, at: Timestamp) {
        drop(instance, at: at, cause: .cancelled, keepingAbsorbed: false)
    }

    /// Forgets an instance that left the registry (what waited for it is dropped first).
    public mutating func remove(_ instance: InstanceHandle, at: Timestamp) {
        pendingDropped(instance, at: at)
        instances[instance.rawValue] = nil
        more[instance.rawValue] = nil
    }

    private mutating func serve(_ handle: InstanceHandle, at: Timestamp, arrivedBy released: Timestamp? = nil) {
        let limit = released?.milliseconds ?? .max
        settle(handle, keeps: { $0.received > limit }) { book, name, waiting in
            book.served(name.key, wait: at.milliseconds - waiting.received, at: at, objective: name.objective, cause: waiting.cause)
        }
    }

    private mutating func drop(
        _ handle: InstanceHandle, at: Timestamp, cause: FreshnessCause, keepingAbsorbed: Bool, arrivedBy released: Timestamp? = nil
    ) {
        let limit = released?.milliseconds ?? .max
        settle(handle, keeps: { (keepingAbsorbed && $0.absorbed) || $0.received > limit }) { book, name, _ in
            book.missed(name.key, at: at, cause: cause)
        }
    }

    /// Records (`record`) each request waiting for `handle` that it does not keep (`keeps`), and keeps the
    /// rest waiting in their order. The unlisted ones arrived after the last listed one: recorded with it,
    /// or kept with it.
    private mutating func settle(
        _ handle: InstanceHandle, keeps: (Waiting) -> Bool, record: (inout FreshnessBook, Name, Waiting) -> Void
    ) {
        let raw = handle.rawValue
        guard let index = instances.index(forKey: raw), let first = instances.values[index].first else { return }
        let name = names[Int(instances.values[index].name)]
        guard let extra = more.removeValue(forKey: raw) else {
            // One request waits (a fan-out's instances): no list to make.
            if !keeps(first) {
                record(&book, name, first)
                instances.values[index].first = nil
            }
            return
        }
        var kept: [Waiting] = []
        for waiting in CollectionOfOne(first) + extra.waiting {
            if keeps(waiting) { kept.append(waiting) } else { record(&book, name, waiting) }
        }
        var unlisted = extra.unlisted
        if unlisted > 0, case let last = extra.waiting.last ?? first, !keeps(last) {
            for _ in 0..<unlisted { record(&book, name, last) }
            unlisted = 0
        }
        instances.values[index].first = kept.first
        if kept.count > 1 || unlisted > 0 { more[raw] = More(waiting: Array(kept.dropFirst()), unlisted: unlisted) }
    }
}

extension FreshnessTracker.More {
    /// A request after the instance's first: listed up to ``FreshnessTracker/listed`` in all, counted past it.
    mutating func add(_ waiting: FreshnessTracker.Waiting) {
        if 1 + self.waiting.count < FreshnessTracker.listed {
            self.waiting.append(waiting)
        } else {
            unlisted += 1
        }
    }
}
