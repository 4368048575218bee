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
    }

    public var values: [String: Value]

    public init(_ values: [String: Value] = [:]) {
        self.values = values
    }

    /// JSON with sorted keys and no spaces: the same configuration always has the same text, so the store
    /// can group and compare by it (`GET .../configurations`).
    public var canonicalJSON: String {
        "{" + values.sorted { $0.key < $1.key }.map { "\(JSONText.quoted($0.key)):\($0.value)" }.joined(separator: ",") + "}"
    }

    /// Whether every parameter of `match` has the same value here (the webhook's `match`).
    public func matches(_ match: [String: Value]) -> Bool {
        match.allSatisfy { key, value in values[key] == value }
    }
}
