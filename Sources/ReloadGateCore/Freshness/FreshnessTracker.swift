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

    struct Instance: Sendable {
        var key: FreshnessBook.Key
        var objective: FreshnessObjective
        var waiting: [Waiting] = []
        /// Requests past ``listed``, counted as the last kept one.
        var unlisted = 0
    }

    private var instances: [Int32: Instance] = [:]
    public private(set) var book: FreshnessBook

    /// A tracker; with `journal`, its book lists each request it records (``takeJournal()``).
    public init(journal: Bool = false) {
        book = FreshnessBook(journal: journal)
    }

    /// The requests recorded since the last call (``FreshnessBook/takeJournal()``).
    public mutating func takeJournal() -> [FreshnessBook.Entry] { book.takeJournal() }

    /// Requests waiting to be served, kept with their arrival.
    public var waitingCount: Int { instances.values.reduce(0) { $0 + $1.waiting.count } }

    /// Whether the instance's app and kind are known (``register(_:key:objective:)``).
    public func knows(_ instance: InstanceHandle) -> Bool { instances[instance.rawValue] != nil }

    /// Instances known with their app and kind.
    public var knownCount: Int { instances.count }

    /// Forgets the instances nothing waits for (they are named again before their next decision), and
    /// those whose first request still waits after `longest`: its outcome happened where the tracker
    /// cannot see it (another gateway took the partition over, or the facts were lost), so it is not
    /// counted either way. Memory follows the requests in flight, not the registry. Returns the requests
    /// forgotten so.
    @discardableResult
    public mutating func sweep(now: Timestamp, longest: Int64 = 86_400_000) -> Int {
        defer { book.forget(before: now) }
        var forgotten = 0
        for (raw, instance) in instances {
            if instance.waiting.isEmpty {
                instances[raw] = nil
            } else if let first = instance.waiting.first, now.milliseconds - first.received > longest {
                forgotten += instance.waiting.count + instance.unlisted
                instances[raw] = nil
            }
        }
        return forgotten
    }

    /// Names an instance's app and kind, and its kind's objective (before its first decision).
    public mutating func register(_ instance: InstanceHandle, key: FreshnessBook.Key, objective: FreshnessObjective) {
        if var known = instances[instance.rawValue] {
            known.key = key
            known.objective = objective
            instances[instance.rawValue] = known
        } else {
            instances[instance.rawValue] = Instance(key: key, objective: objective)
        }
    }

    /// The decisions of a request received at `received`.
    public mutating func decided<Decisions: Collection<Decision>>(_ decisions: Decisions, received: Timestamp) {
        for decision in decisions {
            // The instance is changed in place (through its index): a copy would copy its waiting list.
            guard let handle = decision.instance, let index = instances.index(forKey: handle.rawValue) else { continue }
            switch decision.kind {
            case .scheduled, .deferred:
                Self.add(&instances.values[index], Waiting(received: received.milliseconds, cause: FreshnessCause(waitingFor: decision.reason), absorbed: false))
            case .merged:
                // The pending reload's own cause: what the request it was made for waits for.
                let cause = instances.values[index].waiting.first { !$0.absorbed }?.cause ?? .merge
                Self.add(&instances.values[index], Waiting(received: received.milliseconds, cause: cause, absorbed: false))
            case .absorbed:
                Self.add(&instances.values[index], Waiting(received: received.milliseconds, cause: .timeline, absorbed: true))
            case .expired:
                book.missed(instances.values[index].key, at: received, cause: .expired)
            case .cancelled:
                book.missed(instances.values[index].key, at: received, cause: .cancelled)
            case .noMatch, .forwarded, .outdated, .afterEnd:
                break
            }
        }
    }

    private static func add(_ instance: inout Instance, _ waiting: Waiting) {
        if instance.waiting.count < Self.listed {
            instance.waiting.append(waiting)
        } else {
            instance.unlisted += 1
        }
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
    }

    private mutating func serve(_ handle: InstanceHandle, at: Timestamp, arrivedBy released: Timestamp? = nil) {
        guard var instance = instances[handle.rawValue], !instance.waiting.isEmpty else { return }
        let limit = released?.milliseconds ?? .max
        var kept: [Waiting] = []
        for waiting in instance.waiting {
            guard waiting.received <= limit else {
                kept.append(waiting)
                continue
            }
            book.served(instance.key, wait: at.milliseconds - waiting.received, at: at, objective: instance.objective, cause: waiting.cause)
        }
        // The unlisted ones arrived after the last listed one: served with it, or kept with it.
        if instance.unlisted > 0, let last = instance.waiting.last, last.received <= limit {
            for _ in 0..<instance.unlisted {
                book.served(instance.key, wait: at.milliseconds - last.received, at: at, objective: instance.objective, cause: last.cause)
            }
            instance.unlisted = 0
        }
        instance.waiting = kept
        instances[handle.rawValue] = instance
    }

    private mutating func drop(
        _ handle: InstanceHandle, at: Timestamp, cause: FreshnessCause, keepingAbsorbed: Bool, arrivedBy released: Timestamp? = nil
    ) {
        guard var instance = instances[handle.rawValue], !instance.waiting.isEmpty else { return }
        let limit = released?.milliseconds ?? .max
        func keeps(_ waiting: Waiting) -> Bool { (keepingAbsorbed && waiting.absorbed) || waiting.received > limit }
        var kept: [Waiting] = []
        for waiting in instance.waiting {
            if keeps(waiting) {
                kept.append(waiting)
            } else {
                book.missed(instance.key, at: at, cause: cause)
            }
        }
        // The unlisted ones go (or stay) with the last listed one.
        if instance.unlisted > 0, let last = instance.waiting.last, !keeps(last) {
            for _ in 0..<instance.unlisted { book.missed(instance.key, at: at, cause: cause) }
            instance.unlisted = 0
        }
        instance.waiting = kept
        instances[handle.rawValue] = instance
    }
}
