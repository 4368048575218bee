/// The numbers of the scheduling rules (docs/DESIGN.md, "Scheduling rules") for one widget kind.
///
/// The defaults are the design's: a budget of 40 reloads a day with a burst of 6, 5 minutes between two
/// reloads of one instance, a 5-minute absorb window, priority 5 waiting 5 minutes and priority 1 an hour,
/// and a 2-minute coalescing window.
public struct SchedulingPolicy: Hashable, Sendable {
    /// Tokens the budget bucket of an instance refills per 24 hours (rule 1).
    public var dailyBudget: Int = 40
    /// The bucket's capacity (rule 1).
    public var burst: Int = 6
    /// Seconds between two reloads of one instance (rule 2).
    public var minimumInterval: Int64 = 300
    /// A request is absorbed when the instance's planned timeline reload is this close (rule 3).
    public var absorbWindow: Int64 = 300
    /// Seconds a priority-5 request waits at least (rule 5).
    public var lowPriorityDelay: Int64 = 300
    /// Seconds a priority-1 request waits at most before it goes on its own (rule 5).
    public var backgroundDelay: Int64 = 3600
    /// Pending reloads of a device due within this many seconds of the first ride along with it (rule 8).
    public var coalescingWindow: Int64 = 120
    /// How fresh the kind's instances must be: 90% of requests served within 10 minutes by default (the
    /// longest a priority-5 request waits, 5 minutes, after a minimum interval of 5 minutes). It changes no
    /// decision: the gateway measures against it (``FreshnessBook``).
    public var freshness = FreshnessObjective(quantile: 0.9, within: 600_000)

    public init() {}

    /// The default policy of controls (docs/DECISIONS.md, "Controls' default budget"): Apple publishes no
    /// number for control pushes. A control shows a state that changed elsewhere (a door, a light, a
    /// timer), so it may reload more often than a widget and sooner after its last reload: 96 a day (one
    /// every 15 minutes on average) with a burst of 8, a minute apart at least. A control has no timeline
    /// (nothing absorbs) and is alone on its token (nothing coalesces): both windows are 0.
    public static let controlsDefault: SchedulingPolicy = {
        var policy = SchedulingPolicy()
        policy.dailyBudget = 96
        policy.burst = 8
        policy.minimumInterval = 60
        policy.absorbWindow = 0
        policy.coalescingWindow = 0
        policy.freshness = FreshnessObjective(quantile: 0.9, within: 120_000)
        return policy
    }()

    /// The default policy of a Live Activity's update token (docs/DECISIONS.md, "Live Activities' default
    /// budgets"): Apple throttles priority-10 updates per activity and publishes no number. 240 a day (ten
    /// an hour on average) with a burst of 12 covers a match's or a delivery's busy minutes; 5 s between two
    /// updates lets a flurry merge to its newest content. Priority 5 is not charged and does not wait
    /// (Apple paces it itself); an activity has no timeline and is alone on its token: no absorbing, no
    /// coalescing.
    public static let liveActivityDefault: SchedulingPolicy = {
        var policy = SchedulingPolicy()
        policy.dailyBudget = 240
        policy.burst = 12
        policy.minimumInterval = 5
        policy.absorbWindow = 0
        policy.lowPriorityDelay = 0
        policy.backgroundDelay = 0
        policy.coalescingWindow = 0
        policy.freshness = FreshnessObjective(quantile: 0.9, within: 30_000)
        return policy
    }()

    /// The default policy of a push-to-start token: Apple limits how often an app may start activities
    /// remotely; 12 starts a day with a burst of 3. A start waiting for a token is replaced by a newer one.
    public static let pushToStartDefault: SchedulingPolicy = {
        var policy = liveActivityDefault
        policy.dailyBudget = 12
        policy.burst = 3
        policy.minimumInterval = 0
        return policy
    }()

    /// This policy with its budget (daily and burst) `factor` times as large (frequent updates). The
    /// configuration bounds both (burst at most 1,000); the product is bounded again so that the bucket's
    /// arithmetic (burst times the emission interval, in milliseconds) cannot overflow.
    public func raised(by factor: Int) -> SchedulingPolicy {
        let factor = min(max(factor, 1), 16)
        var policy = self
        policy.dailyBudget = min(dailyBudget, 86_400_000) * factor
        policy.burst = min(burst, 1_000_000) * factor
        return policy
    }

    /// Milliseconds to refill one token.
    var emissionInterval: Int64 { 86_400_000 / Int64(max(dailyBudget, 1)) }
}

/// One push type's policies: its default and the overrides by kind.
public struct PolicySet: Hashable, Sendable {
    /// The policy of kinds without an override.
    public var defaultPolicy: SchedulingPolicy
    /// Overrides by kind.
    public var byKind: [String: SchedulingPolicy]

    public init(defaultPolicy: SchedulingPolicy, byKind: [String: SchedulingPolicy] = [:]) {
        self.defaultPolicy = defaultPolicy
        self.byKind = byKind
    }

    /// The policy of `kind` (`nil`: the default).
    public func policy(kind: String?) -> SchedulingPolicy {
        kind.flatMap { byKind[$0] } ?? defaultPolicy
    }
}

/// The policies of every push type (each type's defaults: ``PushTypeDescriptor/defaultPolicy``).
public struct SchedulerConfiguration: Hashable, Sendable {
    /// Per push type, in ``PushType/allCases`` order.
    private var sets: [PolicySet] = PushType.allCases.map {
        PolicySet(defaultPolicy: $0.descriptor.defaultPolicy, byKind: $0.descriptor.kindPolicies)
    }

    /// The widgets' default policy and overrides by widget kind; every other type with its defaults.
    public init(defaultPolicy: SchedulingPolicy = SchedulingPolicy(), policiesByKind: [String: SchedulingPolicy] = [:]) {
        self[.widgets] = PolicySet(defaultPolicy: defaultPolicy, byKind: policiesByKind)
    }

    /// The policies of `pushType`.
    public subscript(pushType: PushType) -> PolicySet {
        get { sets[pushType.ordinal] }
        set { sets[pushType.ordinal] = newValue }
    }

    /// The widgets' default policy.
    public var defaultPolicy: SchedulingPolicy {
        get { self[.widgets].defaultPolicy }
        set { self[.widgets].defaultPolicy = newValue }
    }

    /// The widgets' overrides by kind.
    public var policiesByKind: [String: SchedulingPolicy] {
        get { self[.widgets].byKind }
        set { self[.widgets].byKind = newValue }
    }

    /// The policy of an instance as ``PushTypeDescriptor/scheduling(kind:family:)`` files it: its kind's,
    /// raised when its app asked for frequent updates.
    public func policy(for filed: SchedulingKind) -> SchedulingPolicy {
        let policy = self[filed.pushType].policy(kind: filed.kind)
        return filed.frequentUpdates ? filed.pushType.descriptor.frequentPolicy(policy) : policy
    }

    /// The policy of an instance of `kind` reached by pushes of `pushType`.
    public func policy(kind: String?, pushType: PushType = .widgets) -> SchedulingPolicy {
        self[pushType].policy(kind: kind)
    }
}
