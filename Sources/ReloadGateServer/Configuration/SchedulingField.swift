import ReloadGateCore

/// One number of the scheduling rules, settable for a push type as `<prefix>.<name>` (every kind) and as
/// `<prefix>.kinds.<kind>.<name>` (one kind, YAML file only), where the prefix is the type's
/// ``PushTypeDescriptor/configurationPrefix``.
struct SchedulingField: Sendable {
    /// The key's last part, e.g. `dailyBudget`.
    let name: String
    let summary: String
    let range: ClosedRange<Int>
    private let set: @Sendable (inout SchedulingPolicy, Int) -> Void

    var expected: String { "an integer from \(range.lowerBound) to \(range.upperBound)" }

    /// Sets the field from text; `false` when the text is not an integer in range.
    func apply(_ text: String?, to policy: inout SchedulingPolicy) -> Bool {
        guard let text, let value = Int(text), range.contains(value) else { return false }
        set(&policy, value)
        return true
    }

    static let all: [SchedulingField] = [
        .init(name: "dailyBudget", summary: "budget tokens an instance gets per 24 h (rule 1)", range: 1...10_000) {
            $0.dailyBudget = $1
        },
        .init(name: "burst", summary: "budget bucket capacity (rule 1)", range: 1...1000) { $0.burst = $1 },
        .init(name: "minimumInterval", summary: "seconds between two reloads of one instance (rule 2)", range: 0...86_400) {
            $0.minimumInterval = Int64($1)
        },
        .init(name: "absorbWindow", summary: "seconds before a timeline reload that absorb pushes (rule 3)", range: 0...86_400) {
            $0.absorbWindow = Int64($1)
        },
        .init(name: "lowPriorityDelay", summary: "seconds a priority-5 request waits (rule 5)", range: 0...86_400) {
            $0.lowPriorityDelay = Int64($1)
        },
        .init(name: "backgroundDelay", summary: "seconds a priority-1 request waits at most (rule 5)", range: 0...86_400) {
            $0.backgroundDelay = Int64($1)
        },
        .init(name: "coalescingWindow", summary: "seconds within which a device's reloads leave together (rule 8)", range: 0...86_400) {
            $0.coalescingWindow = Int64($1)
        },
    ]

    static func named(_ name: String) -> SchedulingField? { all.first { $0.name == name } }
}
