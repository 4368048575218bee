public import Foundation
public import ReloadGateCore

/// Typed access to a JSON object parsed by `JSONSerialization` (the simulator's trace lines), with errors
/// that name the field (`widgets[2].family must be one
/// of ...`). Every number is checked before it is used: a time outside 1970 to 9999, a fraction where a
/// whole number is expected, `1e300` or a 20-digit integer is a ``APIError/invalidField(_:)``, never a
/// trap in a conversion.
public enum JSONFields {
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

    /// A flat object of strings, numbers and booleans.
    public static func configuration(_ value: Any?, _ path: String) throws(APIError) -> WidgetConfiguration {
        guard let value, !(value is NSNull) else { return WidgetConfiguration() }
        let object = try object(value, path)
        var values: [String: WidgetConfiguration.Value] = [:]
        for (key, item) in object {
            values[key] = try configurationValue(item, "\(path).\(key)")
        }
        return WidgetConfiguration(values)
    }

    public static func configurationValue(_ value: Any, _ path: String) throws(APIError) -> WidgetConfiguration.Value {
        if let text = value as? String { return .string(text) }
        if let number = value as? NSNumber {
            return isBoolean(number) ? .bool(number.boolValue) : .number(number.doubleValue)
        }
        throw .invalidField("\(path) must be a string, a number or a boolean (configurations are flat)")
    }

    /// A time: RFC 3339 text (`2026-11-22T14:00:00Z`, fractions allowed) or UNIX seconds (a fraction is
    /// floored to the millisecond), from 1970-01-01 to 9999-12-31 (``Timestamp/acceptedRange``).
    public static func date(_ value: Any?, _ path: String) throws(APIError) -> Timestamp {
        try date(seconds: number(value), text: value as? String, path)
    }

    /// A time given as a number of UNIX seconds or as text (whichever the field was), checked as
    /// ``date(_:_:)`` says.
    public static func date(seconds: Double?, text: String?, _ path: String) throws(APIError) -> Timestamp {
        let outOfRange = APIError.invalidField(
            "\(path) must be a time from 1970-01-01T00:00:00Z to 9999-12-31T23:59:59Z (RFC 3339 or UNIX seconds)"
        )
        if let seconds {
            guard let time = Timestamp(unixSeconds: seconds) else { throw outOfRange }
            return time
        }
        if let text {
            // The spelling the gateway writes, without a formatter (trace files hold millions).
            if let time = Timestamp(canonicalRFC3339: text) { return time }
            let parsed =
                (try? Date(text, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true)))
                ?? (try? Date(text, strategy: .iso8601))
            if let parsed {
                guard let time = Timestamp(unixSeconds: parsed.timeIntervalSince1970) else { throw outOfRange }
                return time
            }
        }
        throw .invalidField("\(path) must be an RFC 3339 date (2026-11-22T14:00:00Z) or UNIX seconds")
    }
}
