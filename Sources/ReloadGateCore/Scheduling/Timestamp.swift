/// A point in time: milliseconds since the Unix epoch, UTC.
///
/// The scheduler works on plain integers so that its per-instance state stays small and its arithmetic
/// cheap; the wall clock is injected by the caller, never read here.
public struct Timestamp: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// Milliseconds since 1970-01-01T00:00:00Z.
    public var milliseconds: Int64

    public init(milliseconds: Int64) {
        self.milliseconds = milliseconds
    }

    public init(seconds: Int64) {
        self.milliseconds = seconds * 1000
    }

    /// This time plus `seconds` seconds.
    public func adding(seconds: Int64) -> Timestamp {
        Timestamp(milliseconds: milliseconds + seconds * 1000)
    }

    /// This time plus `milliseconds` milliseconds.
    public func adding(milliseconds delta: Int64) -> Timestamp {
        Timestamp(milliseconds: milliseconds + delta)
    }

    public static func < (lhs: Timestamp, rhs: Timestamp) -> Bool { lhs.milliseconds < rhs.milliseconds }

    /// `HH:mm:ss` in UTC, as the explanations show times.
    public var timeOfDay: String {
        let secondsOfDay = ((milliseconds / 1000) % 86_400 + 86_400) % 86_400
        func two(_ value: Int64) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(two(secondsOfDay / 3600)):\(two(secondsOfDay / 60 % 60)):\(two(secondsOfDay % 60))"
    }

    public var description: String { timeOfDay }
}
