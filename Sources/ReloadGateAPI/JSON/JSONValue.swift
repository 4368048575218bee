/// Any JSON value, for the parts of a body whose shape is the sender's: a widget's configuration, a
/// request's target as it was sent. Everything else in a body is a field of a type.
public enum JSONValue: Codable, Sendable, Hashable {
    case null
    case bool(Bool)
    /// A whole number that fits 64 bits, kept exact (a double holds integers exactly only to 2^53).
    case integer(Int64)
    /// Any other number.
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        // The decoder keeps booleans and numbers apart (`1` is not `true`).
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Int64.self) {
            self = .integer(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .integer(let value): try container.encode(value)
        case .number(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }

    /// The value as a number, if it is one and finite: an integer, or a number within a double's range
    /// (``JSONParser`` keeps `1e400` as infinite, for the field that reads it to refuse by name). A boolean
    /// is not a number. Every reader of a number from a body or a trace line goes through this.
    public var finiteNumber: Double? {
        switch self {
        case .integer(let integer): return Double(integer)
        case .number(let number) where number.isFinite: return number
        default: return nil
        }
    }

    /// Whether every number in the value is finite (see ``finiteNumber``).
    public var numbersAreFinite: Bool {
        switch self {
        case .number: return finiteNumber != nil
        case .array(let items): return items.allSatisfy(\.numbersAreFinite)
        case .object(let fields): return fields.values.allSatisfy(\.numbersAreFinite)
        case .null, .bool, .integer, .string: return true
        }
    }

    /// `text` parsed as JSON (any value, not only an object), or the text itself when it is not JSON or
    /// holds a number beyond a double's range (which no encoder writes): how the admin API shows stored
    /// JSON text (a configuration, a request's target).
    public static func parsedOrText(_ text: String) -> JSONValue {
        guard let value = try? JSONParser.parse(text.utf8), value.numbersAreFinite else { return .string(text) }
        return value
    }
}
