/// The instance a device (or a control, an activity, a push-to-start token) gets when a push adopts its token before the app
/// registered it (docs/APNS.md: `unknown-devices = adopt`): one instance of kind `*`, which every push
/// to the device reaches until the app registers its real widgets. Both stores and the scheduler use it.
public enum ImplicitInstance {
    /// The kind (and, for a device, the widget id and family) of the implicit instance.
    public static let kind = "*"

    /// The widget id and family of the implicit instance of a token adopted for `pushType`: a device's
    /// (`*`, `*`, standing for widgets not registered yet), a control's or an activity's (its one instance,
    /// of kind `*` until the app registers it), or with `pushToStart` a push-to-start token's.
    public static func of(_ pushType: PushType, pushToStart: Bool = false) -> (widgetID: String, family: String) {
        pushToStart ? pushType.descriptor.pushToStartInstance ?? pushType.descriptor.implicitInstance : pushType.descriptor.implicitInstance
    }
}
