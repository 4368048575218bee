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
        /// Its family (a control's, an activity's and how it is scheduled: ``PushTypeDescriptor/scheduling(kind:family:)``).
        public var family: String = ""
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
        /// The request as recorded (a Live Activity's content is in it).
        public var summary: String = ""
        /// The decisions on arrival, in the order they were made: the instance (`nil`: `no-match`) and kind.
        public var decisions: [(instance: Int64?, kind: String)]
    }

    public var devices: [Device]
    public var timelines: [Timeline]
    public var requests: [Request]
}

extension LedgerExport {
    /// Puts an export together from rows in the order both stores read them (devices, widgets,
    /// timelines, requests, then their later decisions): what belongs to no exported device or request is
    /// left out, and only decisions on arrival are kept (a later `cancelled` is not the scheduler's
    /// answer to the request). Each store only reads its rows.
    struct Builder {
        /// Told the rows read so far after each row (`reloadgate export`'s progress line).
        private let progress: (@Sendable (Int) -> Void)?
        private var rows = 0
        private var devices: [Device] = []
        private var deviceIndex: [Int64: Int] = [:]
        private var widgetIDs = Set<Int64>()
        private var timelines: [Timeline] = []
        private var requests: [Request] = []
        private var requestIndex: [Int64: Int] = [:]
        private let onArrival = Set(DecisionKind.onArrival.map(\.rawValue))

        init(progress: (@Sendable (Int) -> Void)? = nil) {
            self.progress = progress
        }

        private mutating func read() {
            rows += 1
            progress?(rows)
        }

        /// An active device (of the exported app).
        mutating func add(device id: Int64, bundle: String, token: String, pushType: String) {
            read()
            deviceIndex[id] = devices.count
            devices.append(Device(id: id, bundle: bundle, token: token, pushType: PushType(rawValue: pushType) ?? .widgets, widgets: []))
        }

        /// A widget instance, kept when its device is exported.
        mutating func add(widget id: Int64, device: Int64, widgetID: String, kind: String, family: String = "") {
            read()
            guard let index = deviceIndex[device] else { return }
            devices[index].widgets.append(Widget(id: id, widgetID: widgetID, kind: kind, family: family))
            widgetIDs.insert(id)
        }

        /// A timeline, kept when its widget is exported.
        mutating func add(timeline widget: Int64, plannedReload: Int64?, reportedAt: Int64) {
            read()
            guard widgetIDs.contains(widget) else { return }
            timelines.append(
                Timeline(widget: widget, plannedReload: plannedReload.map(Timestamp.init(milliseconds:)), reportedAt: Timestamp(milliseconds: reportedAt))
            )
        }

        /// A request with the first decision its row holds (if any).
        mutating func add(request: Request, firstDecision: (instance: Int64?, kind: String?)) {
            read()
            var request = request
            request.decisions = []
            if let kind = firstDecision.kind, onArrival.contains(kind) { request.decisions.append((firstDecision.instance, kind)) }
            requestIndex[request.id] = requests.count
            requests.append(request)
        }

        /// The first exported request's id: later decisions are read from there on.
        var firstRequest: Int64? { requests.first?.id }

        /// A later decision of a request (`instance` nil: `no-match`), in the order they were made.
        mutating func add(decision kind: String, request: Int64, instance: Int64?) {
            read()
            guard let index = requestIndex[request], onArrival.contains(kind) else { return }
            requests[index].decisions.append((instance, kind))
        }

        var export: LedgerExport { LedgerExport(devices: devices, timelines: timelines, requests: requests) }
    }
}
