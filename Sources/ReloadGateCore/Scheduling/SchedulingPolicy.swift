/// The numbers of the scheduling rules (DESIGN.md, "Scheduling rules") for one widget kind.
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

    public init() {}

    /// Milliseconds to refill one token.
    var emissionInterval: Int64 { 86_400_000 / Int64(max(dailyBudget, 1)) }
}

/// The default policy and the per-kind overrides.
public struct SchedulerConfiguration: Hashable, Sendable {
    /// The policy of kinds without an override.
    public var defaultPolicy = SchedulingPolicy()
    /// Overrides by widget kind.
    public var policiesByKind: [String: SchedulingPolicy] = [:]

    public init(defaultPolicy: SchedulingPolicy = SchedulingPolicy(), policiesByKind: [String: SchedulingPolicy] = [:]) {
        self.defaultPolicy = defaultPolicy
        self.policiesByKind = policiesByKind
    }
}
