import Foundation
public import ReloadGateCore

/// A Live Activity push's body, by Apple's rules ("Starting and updating Live Activities with ActivityKit
/// push notifications"): `aps.event` (`start`, `update`, `end`) and `aps.timestamp` are required;
/// `content-state`, `stale-date`, `dismissal-date`, `relevance-score` and `alert` are optional and checked
/// for their type; a `start` also needs `attributes-type` and `attributes`, and may carry
/// `input-push-token`. Other keys pass, as at Apple.
public enum ActivityPayload {
    /// UNIX seconds from 0 to 9999-12-31T23:59:59, the range every date from outside is held to.
    static let seconds: ClosedRange<Int64> = 0...253_402_300_799

    /// Checks a body (at most ``PushPayload/limit`` bytes) and returns what the scheduler decides on.
    public static func check(_ body: some Collection<UInt8>) throws(APNsFailure) -> ActivityContent {
        guard let object = (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] else {
            throw APNsFailure(.invalidPayload, detail: "a Live Activity's body is a JSON object with an `aps` object")
        }
        return try check(object)
    }

    /// ``check(_:)`` of a parsed body.
    static func check(_ object: [String: Any]) throws(APNsFailure) -> ActivityContent {
        guard let aps = object["aps"] as? [String: Any] else {
            throw APNsFailure(.invalidPayload, detail: "a Live Activity's body is a JSON object with an `aps` object")
        }
        guard let name = aps["event"] as? String, let event = ActivityContent.Event(rawValue: name) else {
            throw APNsFailure(.invalidPayload, detail: "aps.event must be start, update or end")
        }
        guard let timestamp = aps["timestamp"].flatMap(Self.unixSeconds) else {
            throw APNsFailure(.invalidPayload, detail: "aps.timestamp must be UNIX seconds from 0 to 253402300799")
        }
        if let state = aps["content-state"], !(state is [String: Any]) {
            throw APNsFailure(.invalidPayload, detail: "aps.content-state must be an object")
        }
        for key in ["stale-date", "dismissal-date"] where aps[key] != nil && Self.unixSeconds(aps[key]!) == nil {
            throw APNsFailure(.invalidPayload, detail: "aps.\(key) must be UNIX seconds from 0 to 253402300799")
        }
        if let score = aps["relevance-score"], !Self.isNumber(score) {
            throw APNsFailure(.invalidPayload, detail: "aps.relevance-score must be a number")
        }
        if let alert = aps["alert"], !(alert is [String: Any] || alert is String) {
            throw APNsFailure(.invalidPayload, detail: "aps.alert must be an object or a string")
        }
        if event == .start {
            guard let type = aps["attributes-type"] as? String, !type.isEmpty, aps["attributes"] is [String: Any] else {
                throw APNsFailure(.invalidPayload, detail: "a start needs aps.attributes-type (a string) and aps.attributes (an object)")
            }
        }
        return ActivityContent(event: event, timestamp: timestamp, hasAlert: aps["alert"] != nil)
    }

    /// The body delivered for merged requests (the merge rule ``PushTypeDescriptor/MergeRule/newestContent``):
    /// the newest content's body (``ContentStamp``: newest timestamp, then the later request), with the
    /// newest alert among them (or none), and `end` with its dismissal date if one of them is an end.
    /// A request's recorded body is a push's, or a webhook call's whose `payload` is the push's. `nil` when
    /// no body is a Live Activity's.
    /// Should the newest alert, taken from another request, make the body larger than Apple's limit, the
    /// newest content's own alert (or none) goes instead.
    public static func merged(_ requests: [(request: RequestID, body: String)]) -> [UInt8]? {
        winners(requests).flatMap(merged)
    }

    /// ``merged(_:)`` of the winners found already (the delivery also needs the newest content's timestamp).
    public static func merged(_ winners: Winners) -> [UInt8]? {
        guard let own = winners.content.object["aps"] as? [String: Any] else { return nil }
        func body(alert: Any?) -> [UInt8]? {
            var aps = own
            aps["alert"] = alert
            if let end = winners.end {
                aps["event"] = ActivityContent.Event.end.rawValue
                if let dismissal = end["dismissal-date"] { aps["dismissal-date"] = dismissal }
            }
            var object = winners.content.object
            object["aps"] = aps
            return (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])).map(Array.init)
        }
        let merged = body(alert: winners.alert?.alert)
        if let merged, merged.count > PushPayload.limit { return body(alert: own["alert"]) }
        return merged
    }

    /// A recorded request's Live Activity content (a push's body, or a webhook call's `payload`); `nil`
    /// for any other request.
    public static func content(ofRecorded body: String) -> ActivityContent? {
        recorded(body).flatMap { try? check($0) }
    }

    /// The payload a recorded request carries: a push's body, or a webhook call's `payload`.
    static func recorded(_ body: String) -> [String: Any]? {
        guard body.utf8.contains(UInt8(ascii: "{")), let object = (try? JSONSerialization.jsonObject(with: Data(body.utf8))) as? [String: Any] else {
            return nil
        }
        return object["aps"] == nil ? object["payload"] as? [String: Any] ?? object : object
    }

    /// Which of merged requests a delivery takes what from: the newest content, the newest alert, an end
    /// (the `aps` of the last one); and how many of the bodies are a Live Activity's. `nil` when none is.
    public static func winners(_ requests: [(request: RequestID, body: String)]) -> Winners? {
        var winners: Winners?
        for (request, body) in requests {
            guard let object = recorded(body), let content = try? check(object), let aps = object["aps"] as? [String: Any] else { continue }
            let stamp = ContentStamp(timestamp: content.timestamp, request: request)
            guard var found = winners else {
                winners = Winners(content: (stamp, object), alert: aps["alert"].map { (stamp, $0) }, end: content.event == .end ? aps : nil, merged: 1)
                continue
            }
            if found.content.stamp < stamp { found.content = (stamp, object) }
            if let value = aps["alert"], found.alert.map({ $0.stamp < stamp }) ?? true { found.alert = (stamp, value) }
            if content.event == .end { found.end = aps }
            found.merged += 1
            winners = found
        }
        return winners
    }

    /// What ``winners(_:)`` found.
    public struct Winners {
        /// The request with the newest content, and its body's payload.
        public var content: (stamp: ContentStamp, object: [String: Any])
        /// The newest request with an alert, and the alert.
        public var alert: (stamp: ContentStamp, alert: Any)?
        /// The `aps` of an end among them.
        public var end: [String: Any]?
        /// How many of the bodies are a Live Activity's.
        public var merged: Int
    }

    /// A whole number of seconds in ``seconds`` (JSON gives numbers as NSNumber; a boolean is not one).
    static func unixSeconds(_ value: Any) -> Int64? {
        guard isNumber(value), let number = value as? NSNumber else { return nil }
        let double = number.doubleValue
        guard double.rounded() == double, double >= Double(seconds.lowerBound), double <= Double(seconds.upperBound) else { return nil }
        return Int64(double)
    }

    static func isNumber(_ value: Any) -> Bool {
        guard let number = value as? NSNumber, !(value is String) else { return false }
        return !PushPayload.isBoolean(number) && number.doubleValue.isFinite
    }
}
