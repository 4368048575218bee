public import Foundation
public import ReloadGateAPI
public import ReloadGateCore

/// Typed access to a trace line parsed by `JSONSerialization`, with errors that name the field
/// (`widgets[2].kind must be a string`). A trace file holds millions of lines, and this walk reads a
/// million-line file in 4.9 s where the same checks through `JSONDecoder` took 5.3 (docs/DECISIONS.md,
/// "Every body is a type"). Every number is checked before it is used: a time outside 1970 to 9999, a
/// fraction where a whole number is expected, `1e300` or a 20-digit integer is a
/// ``APIError/invalidField(_:)``, never a trap in a conversion.
public enum TraceFields {
    /// Parses a body already read (at most the route's limit). Foundation's parser refuses nesting deeper
    /// than 512 and numbers that are not finite.
    public static func object(_ data: Data) throws(APIError) -> [String: Any] {
        guard !data.isEmpty else { throw .invalidJSON("the body is empty; a JSON object is expected") }
        let parsed: Any
        do {
            parsed = try JSONSerialization.jsonObject(with: data, options: [])
        } catch {
            throw .invalidJSON("the body is not JSON")
        }
        guard let object = parsed as? [String: Any] else { throw .invalidJSON("the body must be a JSON object") }
        return object
    }

    public static func string(_ value: Any?, _ path: String) throws(APIError) -> String {
        guard let text = value as? String else { throw .invalidField("\(path) must be a string") }
        return text
    }

    public static func optionalString(_ value: Any?, _ path: String) throws(APIError) -> String? {
        guard let value, !(value is NSNull) else { return nil }
        return try string(value, path)
    }

    public static func bool(_ value: Any?, _ path: String, default defaultValue: Bool) throws(APIError) -> Bool {
        guard let value, !(value is NSNull) else { return defaultValue }
        guard let number = value as? NSNumber, isBoolean(number) else { throw .invalidField("\(path) must be true or false") }
        return number.boolValue
    }

    public static func array(_ value: Any?, _ path: String) throws(APIError) -> [Any] {
        guard let array = value as? [Any] else { throw .invalidField("\(path) must be an array") }
        return array
    }

    public static func object(_ value: Any?, _ path: String) throws(APIError) -> [String: Any] {
        guard let object = value as? [String: Any] else { throw .invalidField("\(path) must be an object") }
        return object
    }

    /// A JSON number that is not a boolean, as a `Double` (always finite: the parser refuses others).
    public static func number(_ value: Any?) -> Double? {
        guard let number = value as? NSNumber, !isBoolean(number) else { return nil }
        return number.doubleValue
    }

    /// A whole number within `range`; fractions, booleans and anything outside the range are refused.
    public static func integer(_ value: Any?, _ path: String, in range: ClosedRange<Int>) throws(APIError) -> Int {
        guard let number = number(value), number.rounded(.towardZero) == number,
            number >= Double(range.lowerBound), number <= Double(range.upperBound)
        else { throw .invalidField("\(path) must be a whole number from \(range.lowerBound) to \(range.upperBound)") }
        return Int(number)
    }

    /// JSONSerialization gives booleans and numbers both as NSNumber; a boolean's type code is `c`.
    public static func isBoolean(_ number: NSNumber) -> Bool {
        String(cString: number.objCType) == "c"
    }

    /// A time: RFC 3339 text (`2026-11-22T14:00:00Z`, fractions allowed) or UNIX seconds (a fraction is
    /// floored to the millisecond), from 1970-01-01 to 9999-12-31 (``Timestamp/acceptedRange``).
    public static func date(_ value: Any?, _ path: String) throws(APIError) -> Timestamp {
        try JSONFields.date(seconds: number(value), text: value as? String, path)
    }

}
