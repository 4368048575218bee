public import ReloadGateCore

/// What `reloadgate export` reads from the ledger: the registry as it stands, the timelines, and the
/// requests received since a time with the decisions the scheduler made for them on arrival.
public struct LedgerExport: Sendable {
    public struct Device: Sendable {
        public var id: Int64
        public var bundle: String
        public var token: String
        /// A device's widgets, or a control's token (its one instance).
        public var pushType: PushType = .widgets
        public var widgets: [Widget]
    }

    public struct Widget: Sendable {
        public var id: Int64
        public var widgetID: String
        public var kind: String
    }

    public struct Timeline: Sendable {
        public var widget: Int64
        public var plannedReload: Timestamp?
        public var reportedAt: Timestamp
    }

    public struct Request: Sendable {
        public var id: Int64
        public var app: Int64
        public var source: String
        public var received: Timestamp
        public var priority: Int
        public var expiration: Timestamp?
        public var collapseID: String?
        public var exempt: Bool
        /// The decisions on arrival, in the order they were made: the instance (`nil`: `no-match`) and kind.
        public var decisions: [(instance: Int64?, kind: String)]
    }

    public var devices: [Device]
    public var timelines: [Timeline]
    public var requests: [Request]
}
