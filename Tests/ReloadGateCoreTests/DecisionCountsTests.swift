import ReloadGateCore
import Testing

struct DecisionCountsTests {
    @Test func eachKindIsCountedApart() {
        let decisions = [DecisionKind.scheduled, .merged, .scheduled, .noMatch, .afterEnd, .scheduled].map {
            Decision(request: 1, instance: nil, kind: $0, due: nil, reason: .noMatchingWidget)
        }
        let counts = DecisionCounts(decisions)
        #expect(counts[.scheduled] == 3)
        #expect(counts[.merged] == 1)
        #expect(counts[.noMatch] == 1)
        #expect(counts[.afterEnd] == 1)
        #expect(DecisionKind.allCases.map { counts[$0] }.reduce(0, +) == decisions.count)
    }
}
