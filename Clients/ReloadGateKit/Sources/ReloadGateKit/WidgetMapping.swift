import Foundation

/// What the gateway needs of a widget WidgetKit reports (`WidgetInfo`): the WidgetKit layer conforms
/// Apple's type to it, and the tests use stand-ins.
public protocol WidgetDescribing: SendableMetatype {
    /// The widget's `kind` string.
    var kind: String { get }
    /// The family's name as WidgetKit spells it (`systemSmall`).
    var familyName: String { get }
}

/// What the gateway needs of a control WidgetKit reports (`ControlInfo`).
public protocol ControlDescribing: SendableMetatype {
    var kind: String { get }
    /// The control's push token (`ControlInfo.pushInfo?.token`), `nil` while it has none.
    var pushTokenData: Data? { get }
}

/// The id a widget is registered under. WidgetKit's `WidgetInfo.id` is not a string and is not known to a
/// timeline provider, which gets only the widget's kind, family and configuration; so the id is made of
/// those three: the push handler and the timeline provider name the same widget without talking to each
/// other. Two widgets alike in all three show the same timeline and are one instance for the gateway.
public enum WidgetIdentity {
    /// `w` and 16 hex digits: 64-bit FNV-1a of the kind, the family and the configuration's keys and values
    /// in key order (the same on every platform and in every process).
    public static func id(kind: String, family: String, configuration: [String: FlatValue]?) -> String {
        var text = kind + "\u{0}" + family
        for key in (configuration ?? [:]).keys.sorted() {
            text += "\u{0}" + key + "="
            switch configuration![key]! {
            case .string(let value): text += "s" + value
            case .number(let value): text += "n" + String(describing: value)
            case .bool(let value): text += value ? "t" : "f"
            }
        }
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        let hex = String(hash, radix: 16)
        return "w" + String(repeating: "0", count: 16 - hex.count) + hex
    }
}

/// The families the gateway knows, by WidgetKit's case names.
public enum WidgetFamilyName {
    public static let known: Set<String> = [
        "systemSmall", "systemMedium", "systemLarge", "systemExtraLarge",
        "accessoryCircular", "accessoryRectangular", "accessoryInline", "accessoryCorner",
    ]

    /// The case name in `text`, a family as `String(describing:)` prints it (`systemSmall`, or qualified:
    /// `WidgetFamily.systemSmall`), or `nil` for one the gateway does not know (a family newer than it).
    public static func normalized(_ text: String) -> String? {
        let name = text.split(separator: ".").last.map(String.init) ?? text
        return known.contains(name) ? name : nil
    }
}

/// Turns what WidgetKit hands the app into the registry's bodies. The app supplies `widgetConfiguration`
/// and `controlConfiguration`, which turn a widget's (or control's) configuration intent into the flat
/// object the gateway matches pushes against (`nil`: none).
public struct RegistryMapping<Widget: WidgetDescribing, Control: ControlDescribing>: Sendable {
    public typealias WidgetConfiguration = @Sendable (Widget) -> [String: FlatValue]?
    public typealias ControlConfiguration = @Sendable (Control) -> [String: FlatValue]?

    public var widgetConfiguration: WidgetConfiguration
    public var controlConfiguration: ControlConfiguration

    public init(
        widgetConfiguration: @escaping WidgetConfiguration = { _ in nil },
        controlConfiguration: @escaping ControlConfiguration = { _ in nil }
    ) {
        self.widgetConfiguration = widgetConfiguration
        self.controlConfiguration = controlConfiguration
    }

    /// A widget push handler's `pushTokenDidChange(_:widgets:)`: the device's registration, each widget
    /// once under ``WidgetIdentity``, in the order WidgetKit listed them. A widget of a family the gateway
    /// does not know is left out (the gateway would refuse the whole device for it).
    public func device(widgets: [Widget]) -> DeviceRegistration {
        var seen = Set<String>()
        var registrations: [WidgetRegistration] = []
        for widget in widgets {
            guard let family = WidgetFamilyName.normalized(widget.familyName) else { continue }
            let configuration = widgetConfiguration(widget)
            let id = WidgetIdentity.id(kind: widget.kind, family: family, configuration: configuration)
            guard seen.insert(id).inserted else { continue }
            registrations.append(WidgetRegistration(id: id, kind: widget.kind, family: family, configuration: configuration))
        }
        return DeviceRegistration(widgets: registrations)
    }

    /// A control push handler's `pushTokensDidChange(controls:)`: each control that has a token, by token
    /// (WidgetKit lists every control each time, changed or not).
    public func controls(_ controls: [Control]) -> [(token: String, registration: ControlRegistration)] {
        controls.compactMap { control in
            guard let token = control.pushTokenData, !token.isEmpty else { return nil }
            return (token.pushTokenHex, ControlRegistration(kind: control.kind, configuration: controlConfiguration(control)))
        }
    }
}

extension TimelineReport {
    /// A timeline provider's `Timeline`: its entries' dates and its policy. At most `limit` entries go
    /// (the gateway's limit), the earliest first; WidgetKit reloads `.atEnd` after the last entry of the
    /// whole list, so a cut list says `.after` that entry's date, not the last one kept.
    public init(entryDates: [Date], policy: ReloadPolicy, limit: Int = 1000) {
        let sorted = entryDates.sorted()
        guard sorted.count > limit, limit > 0 else {
            self.init(entries: sorted, policy: policy)
            return
        }
        let kept = Array(sorted.prefix(limit))
        self.init(entries: kept, policy: policy == .atEnd ? .after(sorted[sorted.count - 1]) : policy)
    }
}
