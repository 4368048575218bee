/// A widget instance's configuration: the flat object of its intent's parameters (docs/DESIGN.md, Concepts),
/// e.g. `{"team":"42","league":"nba"}`. Values are strings, numbers or booleans.
public struct WidgetConfiguration: Hashable, Sendable {
    /// One parameter value.
    public enum Value: Hashable, Sendable, CustomStringConvertible {
        case string(String)
        case number(Double)
        case bool(Bool)

        /// The value as JSON.
        public var description: String {
            switch self {
            case .string(let text): JSONText.quoted(text)
            case .number(let number):
                number.rounded() == number && abs(number) < 1e15 ? String(Int64(number)) : String(number)
            case .bool(let flag): flag ? "true" : "false"
            }
        }

        /// Appends the value as JSON (``description``'s bytes) to `text`.
        func append(to text: inout String) {
            switch self {
            case .string(let string): JSONText.append(quoted: string, to: &text)
            case .number, .bool: text += description
            }
        }
    }

    public var values: [String: Value]

    public init(_ values: [String: Value] = [:]) {
        self.values = values
    }

    /// JSON with sorted keys and no spaces: the same configuration always has the same text, so the store
    /// can group and compare by it (`GET .../configurations`).
    ///
    /// Written into one string, without one for each parameter: a registration reads it for its size
    /// check and again for its row.
    public var canonicalJSON: String {
        guard !values.isEmpty else { return "{}" }
        var text = "{"
        for (index, parameter) in values.sorted(by: { $0.key < $1.key }).enumerated() {
            if index > 0 { text += "," }
            JSONText.append(quoted: parameter.key, to: &text)
            text += ":"
            parameter.value.append(to: &text)
        }
        text += "}"
        return text
    }

    /// Whether every parameter of `match` has the same value here (the webhook's `match`).
    public func matches(_ match: [String: Value]) -> Bool {
        match.allSatisfy { key, value in values[key] == value }
    }
}
