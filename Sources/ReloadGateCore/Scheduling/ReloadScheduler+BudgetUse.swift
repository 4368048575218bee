/// How full the budgets are (the dashboard): per scheduling policy, the instances and their tokens, and the
/// instances with the fewest tokens.
public struct BudgetUse: Hashable, Sendable {
    /// The instances of one policy: a kind configured with its own (`scheduling.kinds`), or `nil` for the
    /// default policy that every other kind has.
    public struct Policy: Hashable, Sendable {
        /// The push type whose policies these are (each type's apart: ``PushTypeDescriptor/configurationPrefix``).
        public var pushType: PushType
        public var kind: String?
        public var burst: Int
        public var dailyBudget: Int
        public var instances: Int
        /// Whole tokens in all their buckets now.
        public var tokens: Int
        /// Instances with no token now (a push to them is deferred, or predicted throttled when exempt).
        public var empty: Int
    }

    /// One instance with few tokens.
    public struct Instance: Hashable, Sendable {
        public var instance: InstanceHandle
        public var pushType: PushType
        public var kind: String?
        public var tokens: Int
        public var burst: Int
        /// When its next token comes (`nil`: full).
        public var nextToken: Timestamp?
    }

    /// The policies that have instances: widgets' default policy first, then widget kinds, then the
    /// controls' default policy and control kinds.
    public var policies: [Policy]
    /// The instances with the fewest tokens, fewest first (then the one whose next token comes last).
    public var lowest: [Instance]
}

extension ReloadScheduler {
    /// The budgets of every registered instance at `now`, by policy, with the `lowest` instances that
    /// have the fewest tokens. O(instances): for the dashboard, not for a hot path.
    public func budgetUse(at now: Timestamp, lowest count: Int) -> BudgetUse {
        var kinds = [String?](repeating: nil, count: policies.count)
        for index in policyIndexes {
            for (kind, position) in index.byKind { kinds[Int(position)] = kind }
        }
        func pushType(_ index: Int) -> PushType { policyPushTypes[index] }
        var totals = policies.indices.map { index in
            BudgetUse.Policy(
                pushType: pushType(index), kind: kinds[index], burst: policies[index].burst, dailyBudget: policies[index].dailyBudget, instances: 0, tokens: 0, empty: 0
            )
        }
        var lowest: [BudgetUse.Instance] = []
        func ranksBefore(_ a: BudgetUse.Instance, _ b: BudgetUse.Instance) -> Bool {
            if a.tokens != b.tokens { return a.tokens < b.tokens }
            return (a.nextToken?.milliseconds ?? .min) > (b.nextToken?.milliseconds ?? .min)
        }
        for i in 0..<Int32(instances.count) where isRegistered(i) {
            let handle = InstanceHandle(i)
            let index = Int(instances[Int(i)].policy)
            let tokens = self.tokens(of: handle, at: now)
            totals[index].instances += 1
            totals[index].tokens += tokens
            if tokens == 0 { totals[index].empty += 1 }
            guard count > 0 else { continue }
            let entry = BudgetUse.Instance(
                instance: handle, pushType: pushType(index), kind: kinds[index], tokens: tokens, burst: policies[index].burst, nextToken: nextToken(of: i, holding: tokens)
            )
            // A short list kept sorted: most instances are full and never enter it.
            if lowest.count < count || ranksBefore(entry, lowest[lowest.count - 1]) {
                let position = lowest.firstIndex { ranksBefore(entry, $0) } ?? lowest.count
                lowest.insert(entry, at: position)
                if lowest.count > count { lowest.removeLast() }
            }
        }
        return BudgetUse(policies: totals.filter { $0.instances > 0 }, lowest: lowest)
    }
}
