import ReloadGateCore

/// One number of the scheduling rules or of the kind's freshness objective, settable for a push type as `<prefix>.<name>` (every kind) and as
/// `<prefix>.kinds.<kind>.<name>` (one kind, YAML file only), where the prefix is the type's
/// ``PushTypeDescriptor/configurationPrefix``.
struct SchedulingField: Sendable {
    /// The key's last part, e.g. `dailyBudget` (the objective's two are `freshness.quantile` and
    /// `freshness.within`).
    let name: String
    let summary: String
    /// What a value must be, as error messages and docs/CONFIGURATION.md say it.
    let expected: String
    private let set: @Sendable (inout SchedulingPolicy, String) -> Bool

    /// A whole number within `range`.
    init(name: String, summary: String, range: ClosedRange<Int>, set: @escaping @Sendable (inout SchedulingPolicy, Int) -> Void) {
        self.name = name
        self.summary = summary
        self.expected = "an integer from \(range.lowerBound) to \(range.upperBound)"
        self.set = { policy, text in
            guard let value = Int(text), range.contains(value) else { return false }
            set(&policy, value)
            return true
        }
    }

    private init(name: String, summary: String, expected: String, set: @escaping @Sendable (inout SchedulingPolicy, String) -> Bool) {
        self.name = name
        self.summary = summary
        self.expected = expected
        self.set = set
    }

    /// Sets the field from text; `false` (and the policy unchanged) when the text is not a value in range.
    func apply(_ text: String?, to policy: inout SchedulingPolicy) -> Bool {
        guard let text else { return false }
        return set(&policy, text)
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
        .init(
            name: "freshness.quantile", summary: "the share of requests the freshness objective wants served within freshness.within",
            expected: "a number from 0.01 to 1"
        ) { policy, text in
            guard let value = Double(text), value.isFinite, (0.01...1).contains(value) else { return false }
            policy.freshness.quantile = value
            return true
        },
        .init(
            name: "freshness.within", summary: "how soon after its arrival the freshness objective wants a request served",
            expected: "a duration from 1s to 1d: seconds, or a number with s, m, h or d (90s, 5m, 2h)"
        ) { policy, text in
            guard let milliseconds = Self.duration(text), (1000...86_400_000).contains(milliseconds) else { return false }
            policy.freshness.within = milliseconds
            return true
        },
    ]

    /// Milliseconds of `90`, `90s`, `5m`, `2h` or `1d` (whole numbers only); `nil` for anything else or a
    /// number past a day's worth of any unit.
    static func duration(_ text: String) -> Int64? {
        let units: [Character: Int64] = ["s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000]
        var digits = Substring(text)
        var unit: Int64 = 1000
        if let last = text.last, let scale = units[last] {
            digits = text.dropLast()
            unit = scale
        }
        guard !digits.isEmpty, digits.count <= 6, digits.allSatisfy(\.isASCII), digits.allSatisfy(\.isNumber),
            let value = Int64(digits)
        else { return nil }
        return value * unit
    }

    /// Whether `name` is a field's name or a group of them (`freshness`, in a kind's mapping).
    static func isGroup(_ name: String) -> Bool { all.contains { $0.name.hasPrefix(name + ".") } }

    static func named(_ name: String) -> SchedulingField? { all.first { $0.name == name } }
}
