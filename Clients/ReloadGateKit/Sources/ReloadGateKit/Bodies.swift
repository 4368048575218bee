import Foundation

/// A value of a flat configuration object: what a widget's or control's configuration intent is turned
/// into (the gateway matches a push's `reloadgate.match` against it).
public enum FlatValue: Sendable, Hashable, Codable {
    case string(String)
    case number(Double)
    case bool(Bool)

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .string(let value): try container.encode(value)
        case .number(let value): try container.encode(value)
        case .bool(let value): try container.encode(value)
        }
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        // A JSON boolean is tried first: Foundation decodes `true` as the number 1 too.
        if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else {
            self = .string(try container.decode(String.self))
        }
    }
}

/// One widget as `PUT /v1/apps/<bundle>/devices/<token>` takes it.
public struct WidgetRegistration: Sendable, Hashable, Codable {
    /// Stable while the widget is on the device (the gateway keeps its budget under it):
    /// ``WidgetIdentity/id(kind:family:configuration:)``, so that a timeline provider names the same widget.
    public var id: String
    /// The widget's `kind` (its `Widget`'s `kind` string).
    public var kind: String
    /// `systemSmall`, `systemMedium`, `accessoryCircular`, ... (WidgetKit's `WidgetFamily` names).
    public var family: String
    public var configuration: [String: FlatValue]?
    public var pushEnabled: Bool?

    public init(id: String, kind: String, family: String, configuration: [String: FlatValue]? = nil, pushEnabled: Bool? = nil) {
        self.id = id
        self.kind = kind
        self.family = family
        self.configuration = configuration
        self.pushEnabled = pushEnabled
    }
}

/// `PUT /v1/apps/<bundle>/devices/<token>`: every widget of the app on the device (the set replaces
/// the last one).
public struct DeviceRegistration: Sendable, Hashable, Codable {
    public var widgets: [WidgetRegistration]
    /// The token this one replaces (pushes to it answer 410 from then on).
    public var previousToken: String?
    /// `sandbox` or `production`; the gateway refuses another than the app's (409).
    public var environment: String?

    public init(widgets: [WidgetRegistration], previousToken: String? = nil, environment: String? = nil) {
        self.widgets = widgets
        self.previousToken = previousToken
        self.environment = environment
    }
}

/// `PUT /v1/apps/<bundle>/controls/<token>`: one control (WidgetKit gives each control its own token).
public struct ControlRegistration: Sendable, Hashable, Codable {
    public var kind: String
    public var configuration: [String: FlatValue]?
    public var previousToken: String?
    public var environment: String?

    public init(kind: String, configuration: [String: FlatValue]? = nil, previousToken: String? = nil, environment: String? = nil) {
        self.kind = kind
        self.configuration = configuration
        self.previousToken = previousToken
        self.environment = environment
    }
}

/// How a timeline ends, as WidgetKit's `TimelineReloadPolicy` says it.
public enum ReloadPolicy: Sendable, Hashable {
    /// `.atEnd`: a reload after the last entry.
    case atEnd
    /// `.after(date)`.
    case after(Date)
    /// `.never`.
    case never
}

/// `PUT .../devices/<token>/widgets/<id>/timeline`: the entries' dates and the reload policy the timeline
/// provider returned, so that the gateway knows when WidgetKit reloads the widget by itself. Dates go as
/// UNIX seconds (the gateway takes 1970 to 9999).
public struct TimelineReport: Sendable, Hashable, Codable {
    public var entries: [Date]
    public var policy: ReloadPolicy

    public init(entries: [Date], policy: ReloadPolicy) {
        self.entries = entries
        self.policy = policy
    }

    private enum Keys: String, CodingKey { case entries, policy, date, after }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Keys.self)
        var list = container.nestedUnkeyedContainer(forKey: .entries)
        for entry in entries {
            var item = list.nestedContainer(keyedBy: Keys.self)
            try item.encode(entry.timeIntervalSince1970, forKey: .date)
        }
        switch policy {
        case .atEnd: try container.encode("atEnd", forKey: .policy)
        case .never: try container.encode("never", forKey: .policy)
        case .after(let date):
            var after = container.nestedContainer(keyedBy: Keys.self, forKey: .policy)
            try after.encode(date.timeIntervalSince1970, forKey: .after)
        }
    }

    /// Reads what the gateway documents: dates as UNIX seconds or RFC 3339 text.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: Keys.self)
        var list = try container.nestedUnkeyedContainer(forKey: .entries)
        var entries: [Date] = []
        while !list.isAtEnd {
            entries.append(try Self.date(try list.nestedContainer(keyedBy: Keys.self), .date))
        }
        self.entries = entries
        switch try? container.decode(String.self, forKey: .policy) {
        case "atEnd": policy = .atEnd
        case "never": policy = .never
        case nil: policy = .after(try Self.date(try container.nestedContainer(keyedBy: Keys.self, forKey: .policy), .after))
        case let other?:
            throw DecodingError.dataCorruptedError(forKey: .policy, in: container, debugDescription: "unknown policy \(other)")
        }
    }

    private static func date(_ container: KeyedDecodingContainer<Keys>, _ key: Keys) throws -> Date {
        if let seconds = try? container.decode(Double.self, forKey: key) { return Date(timeIntervalSince1970: seconds) }
        let text = try container.decode(String.self, forKey: key)
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let date = formatter.date(from: text) { return date }
        formatter.formatOptions = [.withInternetDateTime]
        guard let date = formatter.date(from: text) else {
            throw DecodingError.dataCorruptedError(forKey: key, in: container, debugDescription: "not an RFC 3339 date: \(text)")
        }
        return date
    }
}

extension Data {
    /// A push token as the gateway names it: lowercase hex, two digits a byte.
    public var pushTokenHex: String {
        let digits = Array("0123456789abcdef".utf8)
        var text = [UInt8]()
        text.reserveCapacity(count * 2)
        for byte in self {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: text, as: UTF8.self)
    }
}
