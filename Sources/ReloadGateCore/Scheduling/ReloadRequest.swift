/// A widget instance as the scheduler knows it: a dense index assigned by the registry.
public struct InstanceHandle: Hashable, Sendable, Comparable {
    public var rawValue: Int32
    public init(_ rawValue: Int32) { self.rawValue = rawValue }
    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// A device (push token) as the scheduler knows it: a dense index assigned by the registry.
public struct DeviceHandle: Hashable, Sendable, Comparable {
    public var rawValue: Int32
    public init(_ rawValue: Int32) { self.rawValue = rawValue }
    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// A request's identity, assigned by the store when the request is recorded.
public typealias RequestID = UInt64

/// APNs priority of a reload request (rule 5).
public enum Priority: Int, Comparable, Sendable, CaseIterable {
    /// `apns-priority: 1`: whenever convenient; rides along with other deliveries, at the latest after an hour.
    case background = 1
    /// `apns-priority: 5`: waits `lowPriorityDelay`.
    case low = 5
    /// `apns-priority: 10` (the default): as soon as the rules allow.
    case high = 10

    public static func < (lhs: Priority, rhs: Priority) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// One push, webhook call or operator command, as the scheduler sees it.
public struct ReloadRequest: Sendable {
    /// The recorded request's id.
    public var id: RequestID
    /// The widget instances it concerns (empty: nothing matched, decision `no-match`).
    public var targets: [InstanceHandle]
    public var priority: Priority
    /// Latest time the reload is still wanted; `nil`: no limit; ``Timestamp/nowOrNever`` for APNs'
    /// `apns-expiration: 0` (and any date already past: ``Timestamp/expiration(_:receivedAt:)``).
    public var expiration: Timestamp?
    /// APNs collapse id; with `team`, a newer request with the same pair replaces the pending one's attributes.
    public var collapseID: String?
    /// The team (or app) the request came from, scoping `collapseID`.
    public var team: String?
    /// Whether the request skips the budget (rule 9). The caller checks the credentials allowed it.
    public var exempt: Bool
    /// When it was received.
    public var received: Timestamp
    /// A Live Activity push's event and timestamp (merged by the newest content); `nil` for other requests.
    public var activity: ActivityContent?

    public init(
        id: RequestID,
        targets: [InstanceHandle],
        priority: Priority = .high,
        expiration: Timestamp? = nil,
        collapseID: String? = nil,
        team: String? = nil,
        exempt: Bool = false,
        received: Timestamp,
        activity: ActivityContent? = nil
    ) {
        self.activity = activity
        self.id = id
        self.targets = targets
        self.priority = priority
        self.expiration = expiration
        self.collapseID = collapseID
        self.team = team
        self.exempt = exempt
        self.received = received
    }
}
