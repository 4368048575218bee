import Foundation

/// What the gateway needs of a widget WidgetKit reports (`WidgetInfo`): the WidgetKit layer conforms
/// Apple's type to it, and the tests use stand-ins.
public protocol WidgetDescribing {
    var kind: String { get }
    /// The family's name as WidgetKit spells it (`systemSmall`).
    var familyName: String { get }
    /// A stable identity of this widget on the device (WidgetKit's `WidgetInfo.id`).
    var widgetID: String { get }
}

/// What the gateway needs of a control WidgetKit reports (`ControlInfo`).
public protocol ControlDescribing {
    var kind: String { get }
    /// The control's push token.
    var pushTokenData: Data? { get }
}

/// Turns what WidgetKit hands the app into the registry's bodies; the app supplies `configuration`,
/// which turns a widget's (or control's) configuration into the flat object the gateway matches pushes
/// against (`nil`: none).
public struct RegistryMapping<Widget: WidgetDescribing, Control: ControlDescribing>: Sendable {
    public typealias WidgetConfiguration = @Sendable (Widget) -> [String: FlatValue]?
    public typealias ControlConfiguration = @Sendable (Control) -> [String: FlatValue]?

    public var widgetConfiguration: WidgetConfiguration
    public var controlConfiguration: ControlConfiguration

    public init(widgetConfiguration: @escaping WidgetConfiguration = { _ in nil }, controlConfiguration: @escaping ControlConfiguration = { _ in nil }) {
        self.widgetConfiguration = widgetConfiguration
        self.controlConfiguration = controlConfiguration
    }

    /// A widget push handler's `pushTokenDidChange(_:widgets:)`: the device's registration, every widget
    /// once (WidgetKit may list a widget twice while it is being reconfigured: the last one counts).
    public func device(widgets: [Widget], previousToken: Data? = nil) -> DeviceRegistration {
        var seen: [String: Int] = [:]
        var registrations: [WidgetRegistration] = []
        for widget in widgets {
            let registration = WidgetRegistration(
                id: widget.widgetID, kind: widget.kind, family: widget.familyName, configuration: widgetConfiguration(widget)
            )
            if let index = seen[widget.widgetID] {
                registrations[index] = registration
            } else {
                seen[widget.widgetID] = registrations.count
                registrations.append(registration)
            }
        }
        return DeviceRegistration(widgets: registrations, previousToken: previousToken?.pushTokenHex)
    }

    /// A control push handler's `pushTokensDidChange(controls:)`: each control with a token, by token.
    public func controls(_ controls: [Control]) -> [(token: String, registration: ControlRegistration)] {
        controls.compactMap { control in
            guard let token = control.pushTokenData, !token.isEmpty else { return nil }
            return (token.pushTokenHex, ControlRegistration(kind: control.kind, configuration: controlConfiguration(control)))
        }
    }
}

extension TimelineReport {
    /// A timeline provider's `Timeline`: its entries' dates and its policy. At most `limit` entries go
    /// (the gateway's limit), the earliest first; what follows the last one sent changes nothing the
    /// gateway schedules by.
    public init(entryDates: [Date], policy: ReloadPolicy, limit: Int = 1000) {
        self.init(entries: Array(entryDates.sorted().prefix(limit)), policy: policy)
    }
}
