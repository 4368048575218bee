public import Foundation
import ReloadGateAPI
import ReloadGateCore

/// A line of a trace file that cannot be read: its number (from 1) and what is wrong with it.
public struct TraceError: Error, Sendable, CustomStringConvertible {
    public var line: Int
    public var message: String

    public init(line: Int, message: String) {
        self.line = line
        self.message = message
    }

    public var description: String { "line \(line): \(message)" }
}

/// Trace files: JSON lines, one event per line (docs/SIMULATION.md has the format).
///
/// ```
/// {"at":"2026-11-25T18:00:00Z","event":"registration","device":"d1","widgets":[{"widget":"w1","kind":"scores"}]}
/// {"at":"2026-11-25T18:00:00Z","event":"timeline","device":"d1","widget":"w1","plannedReload":"2026-11-25T19:00:00Z"}
/// {"at":"2026-11-25T18:02:00Z","event":"push","device":"d1","kind":"scores","priority":10}
/// {"at":"2026-11-25T18:03:00Z","event":"webhook","kind":"scores"}
/// {"at":"2026-11-25T18:04:00Z","event":"push","targets":[["d1","w1"]],"decided":["merged"]}
/// ```
///
/// Times are RFC 3339 text or UNIX seconds (fractions floored to the millisecond), from 1970 to 9999;
/// every number is checked (a priority other than 10, 5 or 1, `1e300` or a 20-digit integer is an error
/// naming the line and field, never a trap).
public enum TraceFile {
    /// The events of a trace file's bytes, in time order (a stable sort: events of one millisecond keep
    /// the order of the file), with the names they use. `progress` is told the bytes read so far after
    /// each line (a command's progress line).
    public static func read(_ data: Data, names: inout TraceNames, progress: ((Int) -> Void)? = nil) throws(TraceError) -> [TraceEvent] {
        var events: [TraceEvent] = []
        // Lines found with memchr over the raw bytes (walking `Data` as a collection costs more than
        // parsing the JSON).
        let result = data.withUnsafeBytes { (raw: UnsafeRawBufferPointer) -> Result<Void, TraceError> in
            guard let base = raw.baseAddress else { return .success(()) }
            var number = 0
            var offset = 0
            while offset < raw.count {
                number += 1
                let found = memchr(base + offset, Int32(UInt8(ascii: "\n")), raw.count - offset)
                let end = found.map { base.distance(to: UnsafeRawPointer($0)) } ?? raw.count
                let line = UnsafeRawBufferPointer(start: base + offset, count: end - offset)
                offset = end + 1
                progress?(min(offset, raw.count))
                if line.allSatisfy({ $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\r") || $0 == UInt8(ascii: "\t") }) { continue }
                do throws(APIError) {
                    events.append(try event(TraceFields.object(Data(line)), names: &names))
                } catch {
                    return .failure(TraceError(line: number, message: error.message))
                }
                if names.deviceNames.count > TraceNames.limit || names.instanceNames.count > TraceNames.limit {
                    return .failure(TraceError(line: number, message: "more than \(TraceNames.limit) devices or widgets"))
                }
            }
            return .success(())
        }
        try result.get()
        let ordered = zip(events, events.dropFirst()).allSatisfy { $0.at <= $1.at }
        if !ordered {
            events = events.enumerated().sorted { a, b in
                a.element.at != b.element.at ? a.element.at < b.element.at : a.offset < b.offset
            }.map(\.element)
        }
        return events
    }

    /// One event from its parsed line.
    static func event(_ object: [String: JSONValue], names: inout TraceNames) throws(APIError) -> TraceEvent {
        let at = try TraceFields.date(object["at"], "at")
        let kind = try TraceFields.string(object["event"], "event")
        switch kind {
        case "registration":
            let device = names.device(try TraceFields.string(object["device"], "device"))
            // `"pushType"` (absent: widgets): the type of the device's token; for a type whose token names
            // one instance (a control), its widget is that instance.
            var pushType = PushType.widgets
            if let text = try TraceFields.optionalString(object["pushType"], "pushType") {
                guard let named = PushType(rawValue: text) else {
                    throw .invalidField("pushType must be one of \(PushType.allCases.map(\.rawValue).joined(separator: ", "))")
                }
                pushType = named
            }
            var widgets: [TraceWidget] = []
            for (index, item) in try TraceFields.array(object["widgets"] ?? .array([]), "widgets").enumerated() {
                let widget = try TraceFields.object(item, "widgets[\(index)]")
                let id = try TraceFields.string(widget["widget"], "widgets[\(index)].widget")
                let kind = try TraceFields.string(widget["kind"], "widgets[\(index)].kind")
                let family = try TraceFields.optionalString(widget["family"], "widgets[\(index)].family") ?? ""
                widgets.append(TraceWidget(instance: names.instance(device: device, widget: id), kind: kind, pushType: pushType, family: family))
            }
            return .registration(at: at, device: device, widgets: widgets)
        case "timeline":
            let device = names.device(try TraceFields.string(object["device"], "device"))
            let instance = names.instance(device: device, widget: try TraceFields.string(object["widget"], "widget"))
            let planned = TraceFields.present(object["plannedReload"])
            return .timeline(at: at, instance: instance, plannedReload: try planned.map { value throws(APIError) in try TraceFields.date(value, "plannedReload") })
        case "push", "webhook":
            let source = TraceSource(rawValue: kind)!
            let targets: TraceTargets
            if let listed = object["targets"] {
                var instances: [InstanceHandle] = []
                for (index, item) in try TraceFields.array(listed, "targets").enumerated() {
                    let pair = try TraceFields.array(item, "targets[\(index)]")
                    guard pair.count == 2 else { throw .invalidField("targets[\(index)] must be [device, widget]") }
                    let device = names.device(try TraceFields.string(pair[0], "targets[\(index)][0]"))
                    instances.append(names.instance(device: device, widget: try TraceFields.string(pair[1], "targets[\(index)][1]")))
                }
                targets = .instances(instances)
            } else if let device = object["device"] {
                let handle = names.device(try TraceFields.string(device, "device"))
                if let widgets = object["widgets"] {
                    var instances: [InstanceHandle] = []
                    for (index, item) in try TraceFields.array(widgets, "widgets").enumerated() {
                        instances.append(names.instance(device: handle, widget: try TraceFields.string(item, "widgets[\(index)]")))
                    }
                    targets = .instances(instances)
                } else {
                    targets = .device(handle, kind: try TraceFields.optionalString(object["kind"], "kind"))
                }
            } else if let kind = object["kind"] {
                targets = .kind(try TraceFields.string(kind, "kind"))
            } else {
                throw .invalidField("a \(kind) needs targets, a device or a kind")
            }
            let priority = TraceFields.present(object["priority"])
            let expiration = TraceFields.present(object["expiration"])
            var recorded: [DecisionKind]?
            if let decided = object["decided"] {
                recorded = []
                for (index, item) in try TraceFields.array(decided, "decided").enumerated() {
                    let text = try TraceFields.string(item, "decided[\(index)]")
                    guard let decision = DecisionKind(rawValue: text) else {
                        throw .invalidField("decided[\(index)] must be one of \(DecisionKind.allCases.map(\.rawValue).joined(separator: ", "))")
                    }
                    recorded?.append(decision)
                }
            }
            return .request(
                TraceRequest(
                    at: at,
                    source: source,
                    targets: targets,
                    priority: try priority.map { value throws(APIError) in try Self.priority(value) } ?? .high,
                    expiration: try expiration.map { value throws(APIError) in try TraceFields.date(value, "expiration") },
                    collapseID: try TraceFields.optionalString(object["collapseId"], "collapseId"),
                    team: try TraceFields.optionalString(object["team"], "team"),
                    exempt: try TraceFields.bool(object["exempt"], "exempt", default: false),
                    recorded: recorded,
                    activity: try TraceFields.present(object["activity"]).map { value throws(APIError) in try Self.activity(value) }
                )
            )
        default:
            throw .invalidField("event must be registration, timeline, push or webhook")
        }
    }

    /// A Live Activity update: `{"event": "start" | "update" | "end", "timestamp": UNIX seconds, "alert": bool}`.
    static func activity(_ value: JSONValue) throws(APIError) -> ActivityContent {
        let object = try TraceFields.object(value, "activity")
        let name = try TraceFields.string(object["event"], "activity.event")
        guard let event = ActivityContent.Event(rawValue: name) else { throw .invalidField("activity.event must be start, update or end") }
        return ActivityContent(
            event: event,
            timestamp: Int64(try TraceFields.integer(object["timestamp"], "activity.timestamp", in: 0...253_402_300_799)),
            hasAlert: try TraceFields.bool(object["alert"], "activity.alert", default: false)
        )
    }

    /// An APNs priority: 10, 5 or 1 (a number or a numeric string, as apns-priority is sent).
    static func priority(_ value: JSONValue) throws(APIError) -> Priority {
        let number: Int
        if case .string(let text) = value, let parsed = Int(text) {
            number = parsed
        } else {
            number = try TraceFields.integer(value, "priority", in: 0...10)
        }
        guard let priority = Priority(rawValue: number) else { throw .invalidField("priority must be 10, 5 or 1") }
        return priority
    }

    // MARK: Writing

    /// One event as a line of a trace file (without the newline).
    public static func line(_ event: TraceEvent, names: TraceNames) -> String {
        var fields: [String] = []
        func add(_ key: String, _ json: String) { fields.append("\(JSONText.quoted(key)):\(json)") }
        func time(_ value: Timestamp) -> String { JSONText.quoted(value.rfc3339) }
        add("at", time(event.at))
        switch event {
        case .registration(_, let device, let widgets):
            add("event", JSONText.quoted("registration"))
            add("device", JSONText.quoted(names.name(of: device) ?? "\(device.rawValue)"))
            if let type = widgets.first(where: { $0.pushType != .widgets })?.pushType { add("pushType", JSONText.quoted(type.rawValue)) }
            let listed = widgets.map { widget in
                "{\"widget\":\(JSONText.quoted(names.name(of: widget.instance)?.widget ?? "\(widget.instance.rawValue)")),\"kind\":\(JSONText.quoted(widget.kind))"
                    + (widget.family.isEmpty ? "" : ",\"family\":\(JSONText.quoted(widget.family))") + "}"
            }
            add("widgets", "[\(listed.joined(separator: ","))]")
        case .timeline(_, let instance, let planned):
            let name = names.name(of: instance)
            add("event", JSONText.quoted("timeline"))
            add("device", JSONText.quoted(name?.device ?? ""))
            add("widget", JSONText.quoted(name?.widget ?? "\(instance.rawValue)"))
            add("plannedReload", planned.map(time) ?? "null")
        case .request(let request):
            add("event", JSONText.quoted(request.source.rawValue))
            switch request.targets {
            case .instances(let instances):
                let pairs = instances.map { instance in
                    let name = names.name(of: instance)
                    return "[\(JSONText.quoted(name?.device ?? "")),\(JSONText.quoted(name?.widget ?? "\(instance.rawValue)"))]"
                }
                add("targets", "[\(pairs.joined(separator: ","))]")
            case .device(let device, let kind):
                add("device", JSONText.quoted(names.name(of: device) ?? "\(device.rawValue)"))
                if let kind { add("kind", JSONText.quoted(kind)) }
            case .kind(let kind):
                add("kind", JSONText.quoted(kind))
            }
            add("priority", "\(request.priority.rawValue)")
            // Now or never as `apns-expiration` says it, 0 (read back as the same).
            if let expiration = request.expiration { add("expiration", expiration.isNowOrNever ? "0" : time(expiration)) }
            if let collapseID = request.collapseID { add("collapseId", JSONText.quoted(collapseID)) }
            if let team = request.team { add("team", JSONText.quoted(team)) }
            if request.exempt { add("exempt", "true") }
            if let activity = request.activity {
                add("activity", "{\"event\":\(JSONText.quoted(activity.event.rawValue)),\"timestamp\":\(activity.timestamp),\"alert\":\(activity.hasAlert)}")
            }
            if let recorded = request.recorded {
                add("decided", "[\(recorded.map { JSONText.quoted($0.rawValue) }.joined(separator: ","))]")
            }
        }
        return "{\(fields.joined(separator: ","))}"
    }
}
