/// Which widget instances (or controls) a reload request concerns (docs/DESIGN.md, Interfaces 3 and "Targeting").
public struct ReloadTarget: Hashable, Sendable {
    /// Widgets (`reloadTimelines(ofKind:)`, `reloadAllTimelines()`) or controls (`reloadControls(ofKind:)`,
    /// `reloadAllControls()`).
    public var pushType: PushType
    /// Only widgets (or controls) of this kind; `nil`: every kind.
    public var kind: String?
    /// Only widgets whose configuration has these values.
    public var match: [String: WidgetConfiguration.Value]
    /// Only these devices (for controls: these control tokens); `nil`: every active one of the app.
    public var devices: [DeviceToken]?

    public init(
        pushType: PushType = .widgets,
        kind: String? = nil,
        match: [String: WidgetConfiguration.Value] = [:],
        devices: [DeviceToken]? = nil
    ) {
        self.pushType = pushType
        self.kind = kind
        self.match = match
        self.devices = devices
    }
}
