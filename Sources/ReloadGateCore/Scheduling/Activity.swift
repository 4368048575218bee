/// What a Live Activity push carries that the scheduler decides on (Apple's `aps.event`, `aps.timestamp`
/// and whether it has an `alert`); the content itself stays in the request's recorded body.
public struct ActivityContent: Hashable, Sendable, Codable {
    public enum Event: String, Sendable, Codable {
        case start, update, end
    }

    public var event: Event
    /// `aps.timestamp`: UNIX seconds of the content, which the device compares with what it shows.
    public var timestamp: Int64
    public var hasAlert: Bool

    public init(event: Event, timestamp: Int64, hasAlert: Bool) {
        self.event = event
        self.timestamp = timestamp
        self.hasAlert = hasAlert
    }
}

/// A request's content as the merge rule orders it: the newer timestamp wins, and at one timestamp the
/// later request. The scheduler and the delivery's merge (`ActivityPayload.merged`) both order by this, so that
/// the content a delivery carries is the one the decisions named.
public struct ContentStamp: Hashable, Sendable, Comparable {
    public var timestamp: Int64
    public var request: RequestID

    public init(timestamp: Int64, request: RequestID) {
        self.timestamp = timestamp
        self.request = request
    }

    public static func < (lhs: Self, rhs: Self) -> Bool {
        (lhs.timestamp, lhs.request) < (rhs.timestamp, rhs.request)
    }

    /// Whether content with `timestamp` is older than `newest`, content the activity was sent already, and
    /// so dropped (`outdated`): by the scheduler when it decides, by the delivery worker before an attempt.
    /// Content of the same timestamp goes.
    public static func isOutdated(_ timestamp: Int64, newest: Int64) -> Bool {
        timestamp < newest
    }
}

/// The durable state of one Live Activity beyond its instance's: the newest content delivered, whether its
/// end was delivered, and, while an update is pending, which of its requests carries the content and which
/// the alert.
public struct ActivitySnapshot: Hashable, Sendable {
    /// The newest content delivered.
    public var delivered: ContentStamp?
    /// Whether an `end` was delivered.
    public var ended = false
    /// The newest content among the pending requests.
    public var content: ContentStamp?
    /// The newest of the pending requests that have an alert.
    public var alert: ContentStamp?
    /// Whether one of the pending requests is an `end`.
    public var ending = false

    public init(delivered: ContentStamp? = nil, ended: Bool = false, content: ContentStamp? = nil, alert: ContentStamp? = nil, ending: Bool = false) {
        self.delivered = delivered
        self.ended = ended
        self.content = content
        self.alert = alert
        self.ending = ending
    }

    /// Forgets the pending part (its pending reload was delivered, expired, cancelled or served).
    mutating func clearPending() {
        content = nil
        alert = nil
        ending = false
    }

    /// The stored form: `delivered=<timestamp>:<request>;ended;content=...;alert=...;ending`, fields absent
    /// when empty.
    public var text: String {
        var fields: [String] = []
        func stamp(_ name: String, _ value: ContentStamp?) {
            if let value { fields.append("\(name)=\(value.timestamp):\(value.request)") }
        }
        stamp("delivered", delivered)
        if ended { fields.append("ended") }
        stamp("content", content)
        stamp("alert", alert)
        if ending { fields.append("ending") }
        return fields.joined(separator: ";")
    }

    /// Reads ``text``; `nil` for text it does not know (a newer gateway's, or damaged).
    public init?(text: String) {
        for field in text.split(separator: ";") {
            let parts = field.split(separator: "=", maxSplits: 1)
            switch parts.count {
            case 1 where parts[0] == "ended": ended = true
            case 1 where parts[0] == "ending": ending = true
            case 2:
                let pair = parts[1].split(separator: ":")
                guard pair.count == 2, let timestamp = Int64(pair[0]), let request = RequestID(pair[1]) else { return nil }
                let value = ContentStamp(timestamp: timestamp, request: request)
                switch parts[0] {
                case "delivered": delivered = value
                case "content": content = value
                case "alert": alert = value
                default: return nil
                }
            default: return nil
            }
        }
    }
}
