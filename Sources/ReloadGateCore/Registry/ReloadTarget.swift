/// Which widget instances a reload request concerns (DESIGN.md, Interfaces 3 and "Targeting").
public struct ReloadTarget: Hashable, Sendable {
    /// Only widgets of this kind (`reloadTimelines(ofKind:)`); `nil`: every kind (`reloadAllTimelines`).
    public var kind: String?
    /// Only widgets whose configuration has these values.
    public var match: [String: WidgetConfiguration.Value]
    /// Only these devices; `nil`: every active device of the app.
    public var devices: [DeviceToken]?

    public init(kind: String? = nil, match: [String: WidgetConfiguration.Value] = [:], devices: [DeviceToken]? = nil) {
        self.kind = kind
        self.match = match
        self.devices = devices
    }
}
