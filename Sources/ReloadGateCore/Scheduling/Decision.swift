/// What the scheduler decided for one target of a request (rules 1-10).
public enum DecisionKind: String, Sendable, CaseIterable {
    /// A new pending reload, due now.
    case scheduled
    /// Joined the instance's pending reload.
    case merged
    /// The instance's timeline reload will fetch fresh data anyway (rule 3).
    case absorbed
    /// A new pending reload, due later (budget, interval or priority).
    case deferred
    /// It could not go before its expiration (rule 7).
    case expired
    /// The request matched no widget instance.
    case noMatch = "no-match"
    /// Later, not when the request arrived: the pending reload that was to serve it was dropped, by the
    /// operator (`reloadgate cancel`), because Apple answered that the device is unregistered (410), or
    /// because the widget or device left the registry.
    case cancelled
    /// The gateway that accepted the request does not schedule the instance's device (several gateways
    /// on one database: another one holds the device's partition); it was handed to that gateway, whose
    /// decision follows in the ledger.
    case forwarded
    /// A Live Activity update older than the content the activity was sent already: the device would
    /// ignore it (Apple: the newer timestamp wins).
    case outdated
    /// A Live Activity update after the activity's end (sent or pending).
    case afterEnd = "after-end"

    /// The kinds a request gets when it is decided by the scheduler (all but ``cancelled`` and
    /// ``forwarded``).
    public static let onArrival: [DecisionKind] = allCases.filter { $0 != .cancelled && $0 != .forwarded }

    /// The kind's place in ``allCases`` (0 to 9), for counting in an array instead of a dictionary.
    public var index: Int {
        switch self {
        case .scheduled: 0
        case .merged: 1
        case .absorbed: 2
        case .deferred: 3
        case .expired: 4
        case .noMatch: 5
        case .cancelled: 6
        case .forwarded: 7
        case .outdated: 8
        case .afterEnd: 9
        }
    }
}

/// How many decisions of each kind, counted in an array by ``DecisionKind/index`` rather than a
/// dictionary: a fan-out's answer and its commit's metrics each count a million decisions.
public struct DecisionCounts: Sendable {
    private var counts = Array(repeating: 0, count: DecisionKind.allCases.count)

    public init(_ decisions: some Sequence<Decision>) {
        for decision in decisions { counts[decision.kind.index] += 1 }
    }

    public subscript(kind: DecisionKind) -> Int { counts[kind.index] }
}

/// Why, with the numbers (rule 10). The description is what the CLI and the response headers show.
public enum DecisionReason: Hashable, Sendable, CustomStringConvertible {
    case dueNow
    case waitingForBudget(until: Timestamp, dailyBudget: Int, burst: Int)
    case waitingForInterval(until: Timestamp, lastReload: Timestamp, minimumInterval: Int64)
    case lowPriority(until: Timestamp, delay: Int64)
    case background(until: Timestamp)
    case absorbedByTimeline(plannedReload: Timestamp)
    case mergedIntoPending(due: Timestamp, requests: Int)
    case expired(earliest: Timestamp, expiration: Timestamp)
    case noMatchingWidget
    case cancelledByOperator
    case deviceUnregistered(since: Timestamp)
    case removedFromRegistry
    case forwardedToOwner(partition: Int)
    case outdated(timestamp: Int64, delivered: Int64)
    case activityEnded

    public var description: String {
        switch self {
        case .dueNow: "scheduled: due now"
        case .waitingForBudget(let until, let daily, let burst):
            "deferred: no budget token until \(until) (daily \(daily), burst \(burst))"
        case .waitingForInterval(let until, let last, let interval):
            "deferred: last reload at \(last), next allowed at \(until) (minimum interval \(interval) s)"
        case .lowPriority(let until, let delay): "deferred: priority 5 waits \(delay) s, until \(until)"
        case .background(let until): "deferred: priority 1 waits for another delivery to the device, at the latest \(until)"
        case .absorbedByTimeline(let planned): "absorbed by timeline reload at \(planned)"
        case .mergedIntoPending(let due, let requests): "merged: pending reload due \(due) now serves \(requests) requests"
        case .expired(let earliest, let expiration):
            expiration.isNowOrNever
                ? "expired: expiration 0 (now or never), and the earliest it could go is \(earliest)"
                : "expired: earliest \(earliest) > expiration \(expiration)"
        case .noMatchingWidget: "no-match: the device shows no widget the request targets"
        case .cancelledByOperator: "cancelled: the operator dropped the pending reload (reloadgate cancel)"
        case .deviceUnregistered(let since): "cancelled: Apple answered 410 Unregistered for the device (unregistered since \(since))"
        case .removedFromRegistry: "cancelled: the widget or its device was removed from the registry"
        case .forwardedToOwner(let partition):
            "forwarded: partition \(partition) of the device is scheduled by another gateway, which decides it"
        case .outdated(let timestamp, let delivered):
            "outdated: timestamp \(timestamp) is older than \(delivered), the content the activity was sent already"
        case .activityEnded: "after-end: the activity's end was sent or is pending"
        }
    }
}

/// One decision: the request, the instance (none for `no-match`), the kind, the due time of the pending
/// reload that will serve it (scheduled, deferred, merged), and the reason.
public struct Decision: Hashable, Sendable {
    public var request: RequestID
    public var instance: InstanceHandle?
    public var kind: DecisionKind
    public var due: Timestamp?
    public var reason: DecisionReason

    public init(request: RequestID, instance: InstanceHandle?, kind: DecisionKind, due: Timestamp?, reason: DecisionReason) {
        self.request = request
        self.instance = instance
        self.kind = kind
        self.due = due
        self.reason = reason
    }
}
