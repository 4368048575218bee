public import ReloadGateCore

/// What the dashboard shows from the durable state, for one app or all: the decisions (in all and by the
/// hour of their requests), the deliveries and their outcomes, the pending reloads by the hour they fall
/// due, and the devices unregistered. Counted like ``LedgerStatistics`` (the same totals for all apps).
public struct DashboardFigures: Sendable, Equatable {
    /// Decisions by kind (`scheduled`, `merged`, ...).
    public var decisionsByKind: [String: Int] = [:]
    /// Decisions by kind per hour of the requests they decided, for the 24 hours before `now`: element 0 is
    /// the hour that began 23 hours before the current one, element 23 the current hour.
    public var decisionsByHour: [[String: Int]] = Array(repeating: [:], count: 24)
    /// Deliveries by state (`pending`, `sending`, `sent`, `failed`).
    public var deliveriesByState: [String: Int] = [:]
    /// Failed deliveries by their last error (Apple's reason).
    public var failuresByReason: [String: Int] = [:]
    /// When the oldest delivery not yet sent or failed was released (the delivery queue's age).
    public var oldestOpenDelivery: Timestamp?
    /// Attempts beyond the first, over all deliveries.
    public var retries = 0
    /// Attempts whose outcome is unknown (a connection lost while a request was out).
    public var unknownOutcomes = 0
    /// Pending reloads in all.
    public var pendingReloads = 0
    /// Pending reloads due by now (they leave with the next tick).
    public var pendingDueNow = 0
    /// Pending reloads by the hour they fall due: element `i` counts those due from `now + i` hours to
    /// `now + i + 1` hours.
    public var pendingByHour: [Int] = Array(repeating: 0, count: 24)
    /// Pending reloads due 24 hours from now or later.
    public var pendingLater = 0
    /// Devices no longer active (Apple answered 410, or a newer token retired them).
    public var unregisteredDevices = 0
    /// The most recently unregistered devices, latest first.
    public var recentlyUnregistered: [UnregisteredDevice] = []
    /// Every registered app's bundle id, in order.
    public var bundles: [String] = []

    public init() {}

    /// The hour buckets are one hour long.
    public static let hour: Int64 = 3_600_000
}

/// A device that is no longer active.
public struct UnregisteredDevice: Sendable, Equatable {
    public var bundle: String
    public var token: String
    public var since: Timestamp

    public init(bundle: String, token: String, since: Timestamp) {
        self.bundle = bundle
        self.token = token
        self.since = since
    }
}

/// A widget instance by name (the dashboard's list of instances closest to an empty budget).
public struct InstanceDescription: Sendable, Equatable {
    public var instance: Int64
    public var bundle: String
    public var token: String
    public var widgetID: String
    public var kind: String
    /// Its push type's name (`widgets`, `controls`, `liveactivity`).
    public var pushType: String

    public init(instance: Int64, bundle: String, token: String, widgetID: String, kind: String, pushType: String = "widgets") {
        self.instance = instance
        self.bundle = bundle
        self.token = token
        self.widgetID = widgetID
        self.kind = kind
        self.pushType = pushType
    }
}

extension DashboardFigures {
    /// Adds `count` decisions of `kind` whose requests arrived in hour `hour` (milliseconds since 1970
    /// divided by ``hour``) to the 24 buckets that end with the hour of `now`; other hours are left out.
    mutating func addDecisions(hour: Int64, kind: String, count: Int, now: Timestamp) {
        let index = 23 - Int(clamping: now.milliseconds / Self.hour - hour)
        guard (0..<24).contains(index) else { return }
        decisionsByHour[index][kind, default: 0] += count
    }

    /// Adds `count` pending reloads of bucket `bin`: -1 due by now, `i` due `i` to `i + 1` hours from now.
    mutating func addPending(bin: Int64, count: Int) {
        pendingReloads += count
        switch bin {
        case ..<0: pendingDueNow += count
        case 0..<24: pendingByHour[Int(bin)] += count
        default: pendingLater += count
        }
    }

    /// The SQL expression of a pending reload's bucket (``addPending(bin:count:)``) for the time `now` in
    /// milliseconds (an integer, not text from outside).
    static func pendingBin(dueColumn: String, now: Int64) -> String {
        "CASE WHEN \(dueColumn) <= \(now) THEN -1 ELSE (\(dueColumn) - \(now)) / \(hour) END"
    }
}
