import Foundation
public import ReloadGateCore

/// A time's check, which ``FieldRule/date(_:_:)`` applies to a field's value: RFC 3339 text or UNIX
/// seconds from 1970 to 9999, refused by the field's name otherwise, never a trap in a conversion.
public enum JSONFields {
    /// A time given as a number of UNIX seconds (a fraction floored to the millisecond) or as RFC 3339 text
    /// (`2026-11-22T14:00:00Z`, fractions allowed), whichever the field was, from 1970-01-01 to 9999-12-31
    /// (``Timestamp/acceptedRange``).
    public static func date(seconds: Double?, text: String?, _ path: String) throws(APIError) -> Timestamp {
        let outOfRange = APIError.invalidField(
            "\(path) must be a time from 1970-01-01T00:00:00Z to 9999-12-31T23:59:59Z (RFC 3339 or UNIX seconds)"
        )
        if let seconds {
            guard let time = Timestamp(unixSeconds: seconds) else { throw outOfRange }
            return time
        }
        if let text {
            if let time = Timestamp(rfc3339: text) { return time }
            if Timestamp.isRFC3339(text) { throw outOfRange }
        }
        throw .invalidField("\(path) must be an RFC 3339 date (2026-11-22T14:00:00Z) or UNIX seconds")
    }
}
