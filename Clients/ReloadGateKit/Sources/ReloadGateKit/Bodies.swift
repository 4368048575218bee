import Foundation

/// A value of a flat configuration object: what a widget's or control's configuration intent is turned
/// into (the gateway matches a push's `reloadgate.match` against it).
public enum FlatValue: Sendable, Hashable, Encodable {
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
}

/// One widget as `PUT /v1/apps/<bundle>/devices/<token>` takes it.
public struct WidgetRegistration: Sendable, Hashable, Encodable {
    /// Stable while the widget is on the device (the gateway keeps its budget under it).
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
public struct DeviceRegistration: Sendable, Hashable, Encodable {
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
public struct ControlRegistration: Sendable, Hashable, Encodable {
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
/// provider returned, so that the gateway knows when WidgetKit reloads the widget by itself.
public struct TimelineReport: Sendable, Hashable, Encodable {
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
