import Foundation

/// How fresh an app's widgets of one kind must be: `quantile` of the requests (pushes, webhook calls)
/// served within `within` of their arrival, for example 90% within 5 minutes.
public struct FreshnessObjective: Hashable, Sendable {
    /// The share of requests that must be served within ``within`` (0 to 1, exclusive of 0).
    public var quantile: Double
    /// Milliseconds from a request's arrival to the reload that serves it.
    public var within: Int64

    public init(quantile: Double = 0.9, within: Int64 = 300_000) {
        precondition(quantile > 0 && quantile <= 1 && within >= 0, "an objective is a share in (0, 1] and a duration")
        self.quantile = quantile
        self.within = within
    }
}

extension FreshnessObjective {
    /// "90% in 5m", as the CLI and the log say it.
    public var text: String { "\(Self.percent(quantile)) in \(Self.duration(within))" }

    /// `90%`, `99.5%`.
    public static func percent(_ share: Double) -> String {
        let value = share * 100
        return value == value.rounded() ? "\(Int(value))%" : String(format: "%.1f%%", value)
    }

    /// Milliseconds as `90s`, `5m`, `2h`, `1d` (the largest unit that divides it), `1.5s`, or `40ms`
    /// under a second.
    public static func duration(_ milliseconds: Int64) -> String {
        if milliseconds < 1000 { return "\(max(0, milliseconds))ms" }
        for (unit, length) in [("d", Int64(86_400_000)), ("h", 3_600_000), ("m", 60_000), ("s", 1000)]
        where milliseconds >= length && milliseconds % length == 0 {
            return "\(milliseconds / length)\(unit)"
        }
        return String(format: "%.1fs", Double(milliseconds) / 1000)
    }
}

/// Why a request was not served within its objective: what it waited for, or why it was never served.
public enum FreshnessCause: String, CaseIterable, Hashable, Sendable {
    /// No budget token (rule 1).
    case budget
    /// The minimum interval after the last reload (rule 2).
    case interval
    /// Priority 5 or 1 waits on purpose (rule 5).
    case priority
    /// Merged into a pending reload that waited for something else (the reload's own cause is used when known).
    case merge
    /// Absorbed: the timeline reload that serves it came later than the objective (rule 3).
    case timeline
    /// Due at once, and the push service (or the outbox) took longer than the objective to take it (its
    /// retries), or refused it for good.
    case upstream
    /// It expired while it could not go (rule 7).
    case expired
    /// Its pending reload was dropped (the operator, Apple's 410, the registry).
    case cancelled

    /// The cause a decision's reason names (`nil`: due at once, so a late one is the push service's).
    public init?(waitingFor reason: DecisionReason) {
        switch reason {
        case .waitingForBudget: self = .budget
        case .waitingForInterval: self = .interval
        case .lowPriority, .background: self = .priority
        case .absorbedByTimeline: self = .timeline
        case .mergedIntoPending: self = .merge
        case .expired: self = .expired
        case .cancelledByOperator, .deviceUnregistered, .removedFromRegistry: self = .cancelled
        case .dueNow, .noMatchingWidget, .forwardedToOwner, .outdated, .activityEnded: return nil
        }
    }
}

/// What one app and kind's requests got over a window: how many were served, how many within the
/// objective, the wait's quantiles, and the misses by cause.
public struct FreshnessSummary: Hashable, Sendable {
    /// Requests counted: served ones and ones never served (expired, cancelled).
    public var requests = 0
    public var served = 0
    /// Served within the objective.
    public var within = 0
    /// Waits' 50th, 90th and 99th percentiles in milliseconds (nearest rank, as the bucket's upper edge
    /// that holds it; the largest wait for the last bucket); `nil` when nothing was served.
    public var p50: Int64?
    public var p90: Int64?
    public var p99: Int64?
    /// Requests that missed the objective, by cause.
    public var misses: [FreshnessCause: Int] = [:]

    /// The share within the objective (`nil`: no request).
    public var share: Double? { requests == 0 ? nil : Double(within) / Double(requests) }

    /// Whether the share meets `objective` (`nil`: no request to judge by).
    public func meets(_ objective: FreshnessObjective) -> Bool? { share.map { $0 >= objective.quantile } }
}

/// Freshness kept per app and kind in slots of ``slotLength`` over the last day: per slot, the requests
/// served (with a histogram of their waits) and within the objective, and the misses by cause. Memory is
/// per app and kind, never per request; summaries over the last hour or day add the slots up.
public struct FreshnessBook: Sendable {
    /// One app and kind.
    public struct Key: Hashable, Sendable {
        public var bundle: String
        public var kind: String
        public init(bundle: String, kind: String) {
            self.bundle = bundle
            self.kind = kind
        }
    }

    /// The histogram's upper edges in milliseconds: 1 s to a day (then one bucket past it).
    public static let edges: [Int64] = [1, 5, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21_600, 86_400].map { $0 * 1000 }
    /// Ten minutes.
    public static let slotLength: Int64 = 600_000
    /// A day of slots.
    public static let slotCount = 144

    struct Slot: Sendable {
        var number: Int64 = .min
        var requests = 0
        var within = 0
        var buckets = [Int](repeating: 0, count: FreshnessBook.edges.count + 1)
        var longest: Int64 = 0
        var misses = [Int](repeating: 0, count: FreshnessCause.allCases.count)
    }

    private var slots: [Key: [Slot]] = [:]

    /// What was recorded since it was last taken, one entry per request, when kept (for counters that
    /// outlive the day: the gateway's metrics).
    public struct Entry: Hashable, Sendable {
        public var key: Key
        /// The wait of a served request (`nil`: never served).
        public var wait: Int64?
        /// Why it missed the objective (`nil`: within it).
        public var miss: FreshnessCause?
    }

    /// The entries since ``takeJournal()``; `nil` when the book keeps none.
    private var journal: [Entry]?

    /// A book; with `journal`, it also lists each request it records until ``takeJournal()``.
    public init(journal: Bool = false) {
        self.journal = journal ? [] : nil
    }

    /// The entries recorded since the last call (none when the book keeps no journal).
    public mutating func takeJournal() -> [Entry] {
        guard let taken = journal else { return [] }
        journal = []
        return taken
    }

    /// The apps and kinds with anything recorded in the last day (``forget(before:)`` drops the others).
    public var keys: [Key] { slots.keys.sorted { ($0.bundle, $0.kind) < ($1.bundle, $1.kind) } }

    /// Drops the apps and kinds with nothing recorded in the day to `now`: memory follows the kinds in use,
    /// not every kind ever seen.
    public mutating func forget(before now: Timestamp) {
        let first = Self.slotNumber(now) - Int64(Self.slotCount) + 1
        slots = slots.filter { _, ring in ring.contains { $0.number >= first } }
    }

    /// A request served at `at` after waiting `wait` milliseconds; a wait past the objective is a miss of
    /// `cause` (``FreshnessCause/upstream`` when it waited for nothing else).
    public mutating func served(_ key: Key, wait: Int64, at: Timestamp, objective: FreshnessObjective, cause: FreshnessCause?) {
        let wait = max(0, wait)
        update(key, at: at) { slot in
            slot.requests += 1
            slot.buckets[Self.edges.firstIndex { wait <= $0 } ?? Self.edges.count] += 1
            slot.longest = max(slot.longest, wait)
            if wait <= objective.within {
                slot.within += 1
            } else {
                slot.misses[FreshnessCause.allCases.firstIndex(of: cause ?? .upstream)!] += 1
            }
        }
        journal?.append(Entry(key: key, wait: wait, miss: wait <= objective.within ? nil : cause ?? .upstream))
    }

    /// A request never served (expired, cancelled) at `at`: a miss of `cause`.
    public mutating func missed(_ key: Key, at: Timestamp, cause: FreshnessCause) {
        update(key, at: at) { slot in
            slot.requests += 1
            slot.misses[FreshnessCause.allCases.firstIndex(of: cause)!] += 1
        }
        journal?.append(Entry(key: key, wait: nil, miss: cause))
    }

    private mutating func update(_ key: Key, at: Timestamp, _ change: (inout Slot) -> Void) {
        let number = Self.slotNumber(at)
        let index = Int(((number % Int64(Self.slotCount)) + Int64(Self.slotCount)) % Int64(Self.slotCount))
        // In place (the dictionary's default subscript modifies its value): a copy of the ring would copy
        // its day of slots for every request.
        Self.update(&slots[key, default: Self.emptyRing], index: index, number: number, change)
    }

    private static let emptyRing = [Slot](repeating: Slot(), count: slotCount)

    private static func update(_ ring: inout [Slot], index: Int, number: Int64, _ change: (inout Slot) -> Void) {
        if ring[index].number != number {
            // A slot a day old (or never used) starts again; an event older than its slot's day is dropped.
            guard ring[index].number < number else { return }
            ring[index] = Slot(number: number)
        }
        change(&ring[index])
    }

    static func slotNumber(_ time: Timestamp) -> Int64 {
        let milliseconds = time.milliseconds
        return (milliseconds - ((milliseconds % slotLength) + slotLength) % slotLength) / slotLength
    }

    /// What `key` got in the slots of the last `window` milliseconds to `now` (whole slots: the current
    /// one and those before it that end after `now - window`).
    public func summary(_ key: Key, window: Int64, now: Timestamp) -> FreshnessSummary {
        var summary = FreshnessSummary()
        guard let ring = slots[key] else { return summary }
        let current = Self.slotNumber(now)
        let first = Self.slotNumber(Timestamp(milliseconds: now.milliseconds - window + 1))
        var buckets = [Int](repeating: 0, count: Self.edges.count + 1)
        var longest: Int64 = 0
        for slot in ring where slot.number >= first && slot.number <= current {
            summary.requests += slot.requests
            summary.within += slot.within
            for (index, count) in slot.buckets.enumerated() { buckets[index] += count }
            longest = max(longest, slot.longest)
            for (index, count) in slot.misses.enumerated() where count > 0 {
                summary.misses[FreshnessCause.allCases[index], default: 0] += count
            }
        }
        summary.served = buckets.reduce(0, +)
        func percentile(_ fraction: Double) -> Int64? {
            guard summary.served > 0 else { return nil }
            let rank = max(1, Int((fraction * Double(summary.served)).rounded(.up)))
            var seen = 0
            for (index, count) in buckets.enumerated() {
                seen += count
                if seen >= rank { return index < Self.edges.count ? min(Self.edges[index], longest) : longest }
            }
            return longest
        }
        summary.p50 = percentile(0.5)
        summary.p90 = percentile(0.9)
        summary.p99 = percentile(0.99)
        return summary
    }
}
