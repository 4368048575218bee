/// What a push token reloads (`apns-push-type`): the widgets of an app on a device, or one control
/// (WidgetKit controls: one push token per control, handed to the app's `ControlPushHandler`).
public enum PushType: String, Sendable, CaseIterable, Hashable {
    case widgets
    case controls

    /// The topic's suffix for this push type: `<bundle-id>.push-type.widgets` / `.push-type.controls`.
    public var topicSuffix: String { ".push-type." + rawValue }
}
