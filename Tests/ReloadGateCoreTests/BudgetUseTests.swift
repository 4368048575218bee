import ReloadGateCore
import Testing

/// The dashboard's view of the budgets: per policy the instances, their tokens and the empty ones, and
/// the instances with the fewest tokens, fewest first.
struct BudgetUseTests {
    @Test func budgetsAreSummedByPolicyAndTheEmptiestComeFirst() {
        var scores = SchedulingPolicy()
        scores.dailyBudget = 24
        scores.burst = 2
        var harness = SchedulerHarness(configuration: SchedulerConfiguration(policiesByKind: ["scores": scores]))
        harness.register(1, device: 1, kind: "scores")
        harness.register(2, device: 2, kind: "scores")
        harness.register(3, device: 3, kind: "news")
        // Instance 1 spends its two tokens (0 and 5 minutes), instance 3 one of its six.
        harness.push([1], atMinutes: 0)
        harness.push([1], atMinutes: 5)
        harness.push([3], atMinutes: 5)
        harness.tick(toMinutes: 6)
        let use = harness.scheduler.budgetUse(at: SchedulerHarness.at(minutes: 6), lowest: 2)
        #expect(use.policies.map(\.kind) == [nil, "scores"])
        #expect(use.policies.map(\.instances) == [1, 2])
        #expect(use.policies.map(\.tokens) == [5, 2])
        #expect(use.policies.map(\.empty) == [0, 1])
        #expect(use.lowest.map(\.instance) == [InstanceHandle(1), InstanceHandle(2)])
        #expect(use.lowest.map(\.tokens) == [0, 2])
        // 24 a day: a token each hour; the first spent at 0 comes back at 60 minutes.
        #expect(use.lowest.first?.nextToken == SchedulerHarness.at(minutes: 60))
        #expect(use.lowest.last?.nextToken == nil)
        #expect(harness.scheduler.budgetUse(at: SchedulerHarness.at(minutes: 6), lowest: 0).lowest.isEmpty)
    }
}
