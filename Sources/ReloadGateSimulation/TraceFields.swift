public import Foundation
public import ReloadGateAPI
public import ReloadGateCore

/// Typed access to a trace line parsed by ``JSONParser`` (as the request bodies are, decision 0097), with
/// errors that name the field (`widgets[2].kind must be a string`). A trace file holds millions of lines;
/// walking the parsed value reads them faster than a `Decodable` type would (docs/DECISIONS.md, "Every
/// body is a type"). The checks are the request bodies' (``FieldRule``): every number is checked before it
/// is used: a time outside 1970 to 9999, a fraction where a whole number is expected, `1e300`, `1e400` or a
/// 20-digit integer is a ``APIError/invalidField(_:)``, never a trap in a conversion.
public enum TraceFields {
    /// Parses a line already read, refused as a request body would be.
    public static func object(_ data: Data) throws(APIError) -> [String: JSONValue] {
        guard case .object(let object) = try BodyJSON.parse(data) else { throw .invalidJSON("the body must be a JSON object") }
        return object
    }

    /// `value`, or nil when it is missing or `null`.
    public static func present(_ value: JSONValue?) -> JSONValue? {
        FieldRule.present(value)
    }

    public static func string(_ value: JSONValue?, _ path: String) throws(APIError) -> String {
        try FieldRule.string(value, path)
    }

    public static func optionalString(_ value: JSONValue?, _ path: String) throws(APIError) -> String? {
        try FieldRule.optionalString(value, path)
    }

    public static func bool(_ value: JSONValue?, _ path: String, default defaultValue: Bool) throws(APIError) -> Bool {
        try FieldRule.bool(value, path, default: defaultValue)
    }

    public static func array(_ value: JSONValue?, _ path: String) throws(APIError) -> [JSONValue] {
        try FieldRule.array(value, path)
    }

    public static func object(_ value: JSONValue?, _ path: String) throws(APIError) -> [String: JSONValue] {
        try FieldRule.object(value, path)
    }

    /// A finite JSON number that is not a boolean, as a `Double` (``JSONValue/finiteNumber``).
    public static func number(_ value: JSONValue?) -> Double? {
        FieldRule.number(value)
    }

    /// A whole number within `range`; fractions, booleans and anything outside the range are refused.
    public static func integer(_ value: JSONValue?, _ path: String, in range: ClosedRange<Int>) throws(APIError) -> Int {
        guard let number = number(value), number.rounded(.towardZero) == number,
            number >= Double(range.lowerBound), number <= Double(range.upperBound)
        else { throw .invalidField("\(path) must be a whole number from \(range.lowerBound) to \(range.upperBound)") }
        return Int(number)
    }

    /// A time: RFC 3339 text (`2026-11-22T14:00:00Z`, fractions allowed) or UNIX seconds (a fraction is
    /// floored to the millisecond), from 1970-01-01 to 9999-12-31 (``Timestamp/acceptedRange``).
    public static func date(_ value: JSONValue?, _ path: String) throws(APIError) -> Timestamp {
        try FieldRule.date(value, path)
    }
}
