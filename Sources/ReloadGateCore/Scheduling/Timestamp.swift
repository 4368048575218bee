/// A point in time: milliseconds since the Unix epoch, UTC.
///
/// The scheduler works on plain integers so that its per-instance state stays small and its arithmetic
/// cheap; the wall clock is injected by the caller, never read here.
///
/// Times from outside (headers, JSON, stored rows, the clock) come in through the checked initializers,
/// which accept only ``acceptedRange`` (1970 to 9999), so that no later arithmetic on them can overflow;
/// the arithmetic here saturates anyway (docs/DESIGN.md, Security: an extreme value is a 4xx, never a trap).
public struct Timestamp: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// Milliseconds since 1970-01-01T00:00:00Z.
    public var milliseconds: Int64

    /// The times accepted from outside, in milliseconds: 1970-01-01T00:00:00.000Z to
    /// 9999-12-31T23:59:59.999Z (four-digit years, as RFC 3339 writes them).
    public static let acceptedRange: ClosedRange<Int64> = 0...253_402_300_799_999

    /// The earliest and latest accepted times.
    public static let earliest = Timestamp(milliseconds: acceptedRange.lowerBound)
    public static let latest = Timestamp(milliseconds: acceptedRange.upperBound)

    public init(milliseconds: Int64) {
        self.milliseconds = milliseconds
    }

    /// Whole seconds; saturates at the ends of `Int64` instead of trapping.
    public init(seconds: Int64) {
        self.milliseconds = Self.saturating(seconds, times: 1000)
    }

    /// UNIX seconds from outside, or `nil` when the time is not in ``acceptedRange``.
    public init?(unixSeconds seconds: Int64) {
        guard seconds >= 0, seconds <= Self.acceptedRange.upperBound / 1000 else { return nil }
        self.milliseconds = seconds * 1000
    }

    /// UNIX seconds with a fraction from outside (JSON numbers, `Date`), floored to the millisecond, or
    /// `nil` when not finite or not in ``acceptedRange``.
    public init?(unixSeconds seconds: Double) {
        var milliseconds = seconds * 1000
        guard milliseconds.isFinite else { return nil }
        // 1795538615.42 s is 1795538615419.9998 ms in binary: within a few units of the last place of a
        // whole millisecond, take it; otherwise floor.
        let nearest = milliseconds.rounded()
        milliseconds = abs(milliseconds - nearest) <= 4 * milliseconds.ulp ? nearest : milliseconds.rounded(.down)
        guard milliseconds >= Double(Self.acceptedRange.lowerBound), milliseconds <= Double(Self.acceptedRange.upperBound)
        else { return nil }
        self.milliseconds = Int64(milliseconds)
    }

    /// UNIX seconds from a trusted source (the wall clock, a stored time), floored to the millisecond and
    /// clamped into ``acceptedRange`` (NaN: the epoch). The one conversion from `Date` and `Double`.
    public init(clampingUnixSeconds seconds: Double) {
        if let exact = Timestamp(unixSeconds: seconds) {
            self = exact
        } else {
            self = seconds > 0 ? .latest : .earliest
        }
    }

    /// Seconds since the epoch as a `Double` (for `Date`).
    public var unixSeconds: Double { Double(milliseconds) / 1000 }

    /// This time plus `seconds` seconds (saturating).
    public func adding(seconds: Int64) -> Timestamp {
        Timestamp(milliseconds: Self.saturating(milliseconds, plus: Self.saturating(seconds, times: 1000)))
    }

    /// This time plus `milliseconds` milliseconds (saturating).
    public func adding(milliseconds delta: Int64) -> Timestamp {
        Timestamp(milliseconds: Self.saturating(milliseconds, plus: delta))
    }

    /// `value * factor`, or the nearest end of `Int64`.
    public static func saturating(_ value: Int64, times factor: Int64) -> Int64 {
        let (product, overflow) = value.multipliedReportingOverflow(by: factor)
        guard overflow else { return product }
        return (value < 0) == (factor < 0) ? .max : .min
    }

    /// `value + delta`, or the nearest end of `Int64`.
    public static func saturating(_ value: Int64, plus delta: Int64) -> Int64 {
        let (sum, overflow) = value.addingReportingOverflow(delta)
        guard overflow else { return sum }
        return delta > 0 ? .max : .min
    }

    public static func < (lhs: Timestamp, rhs: Timestamp) -> Bool { lhs.milliseconds < rhs.milliseconds }

    /// Parses an RFC 3339 time (section 5.6: `2026-11-22T14:00:00Z`, `2026-11-22t14:00:00.5+05:30`, any
    /// number of fraction digits, offsets from -23:59 to +23:59, a leap second `:60`) without a calendar or
    /// a formatter; `nil` for anything else, a date that does not exist, or a time outside
    /// ``acceptedRange`` once in UTC. Fractions are floored to the millisecond.
    public init?(rfc3339 text: String) {
        guard let milliseconds = Self.rfc3339Milliseconds(text), Self.acceptedRange.contains(milliseconds) else { return nil }
        self.milliseconds = milliseconds
    }

    /// Whether `text` is spelled as RFC 3339 wants, whatever time it names (in range or not).
    public static func isRFC3339(_ text: String) -> Bool { rfc3339Milliseconds(text) != nil }

    /// Milliseconds since 1970 of an RFC 3339 time, not checked against ``acceptedRange`` (years 0000 to
    /// 9999 cannot overflow); `nil` when the text is not one.
    static func rfc3339Milliseconds(_ text: String) -> Int64? {
        var text = text
        return text.withUTF8 { bytes -> Int64? in
            var index = 0
            func digits(_ count: Int) -> Int64? {
                guard index + count <= bytes.count else { return nil }
                var value: Int64 = 0
                for _ in 0..<count {
                    let digit = bytes[index] &- UInt8(ascii: "0")
                    guard digit < 10 else { return nil }
                    value = value * 10 + Int64(digit)
                    index += 1
                }
                return value
            }
            func expect(_ characters: String) -> Bool {
                guard index < bytes.count, characters.utf8.contains(bytes[index]) else { return false }
                index += 1
                return true
            }
            guard let year = digits(4), expect("-"), let month = digits(2), expect("-"), let day = digits(2), expect("Tt"),
                let hour = digits(2), expect(":"), let minute = digits(2), expect(":"), let second = digits(2)
            else { return nil }
            var millis: Int64 = 0
            if expect(".") {
                let first = index
                while index < bytes.count, bytes[index] &- UInt8(ascii: "0") < 10 {
                    // The first three digits are milliseconds; the rest are floored away.
                    if index - first < 3 { millis = millis * 10 + Int64(bytes[index] &- UInt8(ascii: "0")) }
                    index += 1
                }
                let count = index - first
                guard count > 0 else { return nil }
                if count < 3 { for _ in count..<3 { millis *= 10 } }
            }
            var offset: Int64 = 0
            if expect("Zz") {
                offset = 0
            } else if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
                let sign: Int64 = bytes[index] == UInt8(ascii: "-") ? -1 : 1
                index += 1
                guard let offsetHours = digits(2), expect(":"), let offsetMinutes = digits(2), offsetHours < 24, offsetMinutes < 60
                else { return nil }
                offset = sign * (offsetHours * 60 + offsetMinutes) * 60
            } else {
                return nil
            }
            guard index == bytes.count else { return nil }
            let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
            let monthDays: [Int64] = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
            guard (1...12).contains(month), day >= 1, day <= monthDays[Int(month - 1)], hour < 24, minute < 60, second <= 60
            else { return nil }
            // Civil date to days since 1970 (Howard Hinnant's algorithm, as in `rfc3339`).
            let y = month <= 2 ? year - 1 : year
            let era = y >= 0 ? y / 400 : (y - 399) / 400
            let yearOfEra = y - era * 400
            let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
            let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
            let days = era * 146_097 + dayOfEra - 719_468
            // A leap second (`:60`) is the next second's first instant.
            return ((days * 86_400 + hour * 3600 + minute * 60 + second - offset) * 1000) + millis
        }
    }

    /// `HH:mm:ss` in UTC, as the explanations show times.
    public var timeOfDay: String {
        let secondsOfDay = ((milliseconds / 1000) % 86_400 + 86_400) % 86_400
        func two(_ value: Int64) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(two(secondsOfDay / 3600)):\(two(secondsOfDay / 60 % 60)):\(two(secondsOfDay % 60))"
    }

    public var description: String { timeOfDay }

    /// RFC 3339 in UTC with milliseconds, `2026-11-22T14:00:00.000Z`, computed without a calendar
    /// (it is written into every push's answer).
    public var rfc3339: String {
        // Floor divisions written so that no intermediate overflows, whatever the value.
        var seconds = milliseconds / 1000
        if milliseconds % 1000 < 0 { seconds -= 1 }
        let millis = milliseconds - seconds * 1000
        var days = seconds / 86_400
        if seconds % 86_400 < 0 { days -= 1 }
        let secondsOfDay = seconds - days * 86_400
        // Days to civil date (Howard Hinnant's algorithm).
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        guard (0...9999).contains(year) else {
            // Outside four-digit years (never a due time): the same fields, padded as far as they go.
            func pad(_ value: Int64, _ width: Int) -> String {
                let text = String(value)
                return text.count >= width ? text : String(repeating: "0", count: width - text.count) + text
            }
            return "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))T\(pad(secondsOfDay / 3600, 2)):"
                + "\(pad(secondsOfDay / 60 % 60, 2)):\(pad(secondsOfDay % 60, 2)).\(pad(millis, 3))Z"
        }
        // Written byte by byte into one string: this runs for every push answered with `reloadgate-due`.
        return String(unsafeUninitializedCapacity: 24) { buffer in
            func put(_ value: Int64, _ width: Int, at offset: Int) {
                var value = value
                for position in stride(from: offset + width - 1, through: offset, by: -1) {
                    buffer[position] = UInt8(ascii: "0") + UInt8(value % 10)
                    value /= 10
                }
            }
            put(year, 4, at: 0)
            buffer[4] = UInt8(ascii: "-")
            put(month, 2, at: 5)
            buffer[7] = UInt8(ascii: "-")
            put(day, 2, at: 8)
            buffer[10] = UInt8(ascii: "T")
            put(secondsOfDay / 3600, 2, at: 11)
            buffer[13] = UInt8(ascii: ":")
            put(secondsOfDay / 60 % 60, 2, at: 14)
            buffer[16] = UInt8(ascii: ":")
            put(secondsOfDay % 60, 2, at: 17)
            buffer[19] = UInt8(ascii: ".")
            put(millis, 3, at: 20)
            buffer[23] = UInt8(ascii: "Z")
            return 24
        }
    }
}
