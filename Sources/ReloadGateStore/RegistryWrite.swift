public import ReloadGateCore

/// A registry change written by ``GatewayStore/writeRegistry(_:now:)``, many in one transaction (the
/// registry's group commit).
public enum RegistryWrite: Sendable {
    /// `PUT .../devices/<token>`: the device's whole widget set (``SQLiteStore/putDevice(app:token:widgets:previousToken:now:)``).
    case putDevice(app: App, token: DeviceToken, widgets: [WidgetRegistration], previousToken: DeviceToken?)
    /// `PUT .../controls/<token>`: a control's token, kind and configuration (``SQLiteStore/putControl(app:token:control:previousToken:now:)``).
    case putControl(app: App, token: DeviceToken, control: ControlRegistration, previousToken: DeviceToken?)
    /// `PUT .../widgets/<id>/timeline` (``SQLiteStore/putTimeline(app:token:widgetID:timeline:now:)``).
    case putTimeline(app: App, token: DeviceToken, widgetID: String, timeline: Timeline)
}

/// What a ``RegistryWrite`` wrote.
public enum RegistryWritten: Sendable {
    case device(DeviceRegistration)
    /// The instance whose timeline was recorded.
    case timeline(instance: Int64)
}
