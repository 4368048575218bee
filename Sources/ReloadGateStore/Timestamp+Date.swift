public import Foundation
public import ReloadGateCore

extension Timestamp {
    /// The one conversion from a `Date` (the wall clock, a time read from outside): milliseconds, floored,
    /// clamped to the years 1970 to 9999, by ``Timestamp/init(clampingUnixSeconds:)``'s rule. Every time
    /// the gateway stores is in these milliseconds (SQL: INTEGER milliseconds since 1970, migration
    /// `v14-times-in-milliseconds`).
    public init(_ date: Date) {
        self.init(clampingUnixSeconds: date.timeIntervalSince1970)
    }

    /// The instant as a `Date` (exact: a millisecond count fits a Double).
    public var date: Date { Date(timeIntervalSince1970: Double(milliseconds) / 1000) }
}

extension Date {
    /// The time as it is stored: ``Timestamp``'s milliseconds.
    var storedMilliseconds: Int64 { Timestamp(self).milliseconds }

    /// A stored time (milliseconds) as a `Date`.
    init(storedMilliseconds: Int64) {
        self = Timestamp(milliseconds: storedMilliseconds).date
    }
}
