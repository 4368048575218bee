public import Foundation
public import ReloadGateCore

// What the store tells the operator (the admin API, `reloadgate pending`, `explain`, `budget`, `stats`,
// `devices`): plain values the operator's queries read (OperatorQueries.swift).

/// A pending reload as the operator sees it (`reloadgate pending`).
public struct PendingReloadRow: Sendable, Hashable {
    public var instance: Int64
    public var bundle: String
    public var deviceToken: String
    public var widgetID: String
    public var kind: String
    public var family: String
    /// The widget's configuration (JSON text).
    public var configuration: String
    public var due: Timestamp
    public var priority: Int
    public var expiration: Timestamp?
    /// Requests merged into it.
    public var requestCount: Int
    /// The first 100 of them.
    public var requests: [Int64]
    /// Exempt from the budget (exemption or operator override).
    public var exempt: Bool
}

/// What `reloadgate pending` filters on.
public struct PendingFilter: Sendable, Hashable {
    public var bundle: String?
    public var kind: String?
    public var deviceToken: String?
    public var dueBefore: Timestamp?
    public var limit: Int

    public init(bundle: String? = nil, kind: String? = nil, deviceToken: String? = nil, dueBefore: Timestamp? = nil, limit: Int = 100) {
        self.bundle = bundle
        self.kind = kind
        self.deviceToken = deviceToken
        self.dueBefore = dueBefore
        self.limit = limit
    }
}

/// Everything the store knows about one request (`reloadgate explain`).
public struct RequestRecord: Sendable, Hashable {
    public struct DecisionRow: Sendable, Hashable {
        public var instance: Int64?
        public var widgetID: String?
        public var kind: String?
        public var deviceToken: String?
        public var decision: String
        public var due: Timestamp?
        public var reason: String
    }

    public var id: Int64
    public var bundle: String
    /// `webhook` or `apns`.
    public var source: String
    public var receivedAt: Timestamp
    public var priority: Int
    public var expiration: Timestamp?
    public var collapseID: String?
    public var exempt: Bool
    /// What the request targeted (JSON text, as recorded).
    public var summary: String
    /// A push's apns-id.
    public var apnsID: String?
    public var decisions: [DecisionRow]
}

/// One delivery with its device and history (`reloadgate explain`, `reloadgate budget`).
public struct DeliveryRecord: Sendable, Hashable {
    public var delivery: RecordedDelivery
    public var bundle: String?
    public var deviceToken: String?
    public var updatedAt: Timestamp?
}

/// One widget instance of a device with its timeline (`reloadgate budget`).
public struct InstanceRecord: Sendable, Hashable {
    public var instance: Int64
    public var widgetID: String
    public var kind: String
    public var family: String
    public var configuration: String
    /// The timeline policy last reported (`atEnd`, `after`, `never`), if any.
    public var timelinePolicy: String?
    public var timelineReportedAt: Date?
}

/// Counts for `reloadgate stats`.
public struct LedgerStatistics: Sendable, Hashable {
    public var decisionsByKind: [String: Int]
    public var deliveriesByState: [String: Int]
    /// Deliveries that failed, by their last reason.
    public var failuresByReason: [String: Int]
    public var pendingReloads: Int
    public var oldestPendingDue: Timestamp?
    /// The release time of the oldest delivery not yet sent or failed.
    public var oldestOpenDelivery: Timestamp?
    public var unknownOutcomes: Int
}

/// A device as `reloadgate devices list` shows it.
public struct DeviceRecord: Sendable, Hashable {
    public var bundle: String
    public var token: String
    public var active: Bool
    public var registeredAt: Date
    /// When Apple (410) or a new token retired it.
    public var unregisteredAt: Date?
    public var widgets: Int
    public var pendingReloads: Int
    /// A device's token (for its widgets), or a control's.
    public var pushType: PushType = .widgets
}

/// How many rows the ledger holds: for operators' statistics and for tests that check a refused
/// request changed nothing.
public struct LedgerCounts: Hashable, Sendable {
    public var requests: Int
    public var decisions: Int
    public var pendingReloads: Int
    public var deliveries: Int
    public var idempotencyKeys: Int
}
