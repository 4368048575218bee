/// What a push token reloads (`apns-push-type`): the widgets of an app on a device, or one control
/// (WidgetKit controls: one push token per control, handed to the app's `ControlPushHandler`). What
/// differs between the types is data, in ``descriptor``: the rest of the gateway reads it rather than
/// asking which type it has.
public enum PushType: String, Sendable, CaseIterable, Hashable {
    case widgets
    case controls

    /// The topic's suffix for this push type: `<bundle-id>.push-type.widgets` / `.push-type.controls`.
    public var topicSuffix: String { descriptor.topicSuffix }

    /// The type's position in ``allCases`` (tables kept per type are arrays in that order).
    public var ordinal: Int {
        switch self {
        case .widgets: 0
        case .controls: 1
        }
    }

    /// What this push type is, in one value.
    public var descriptor: PushTypeDescriptor {
        switch self {
        case .widgets: .widgets
        case .controls: .controls
        }
    }
}

/// Everything the gateway knows of one push type: its names, what its token stands for, how its pushes
/// are delivered, where its policies are configured and how operators see it.
public struct PushTypeDescriptor: Sendable {
    /// What one token of the type stands for.
    public enum TokenScope: String, Sendable {
        /// An app on a device: the token reaches every widget of that app there.
        case appOnDevice
        /// One control: the token reaches that control only.
        case control
    }

    /// The `apns-push-type` value.
    public var pushType: PushType
    /// The topic's suffix: `<bundle-id>` + this.
    public var topicSuffix: String
    /// What a token of this type stands for.
    public var tokenScope: TokenScope
    /// The registry's collection of its tokens: `/v1/apps/<bundle>/<registryPath>/<token>`.
    public var registryPath: String
    /// The widget id and family of the instance a token gets when a push adopts it before the app
    /// registered it (``ImplicitInstance``).
    public var implicitInstance: (widgetID: String, family: String)
    /// The priority every delivery of this type is sent at, whatever its requests asked (`nil`: the
    /// decided one).
    public var deliveryPriority: Priority?
    /// Whether every delivery of this type is sent now or never (`apns-expiration: 0`), whatever its
    /// requests asked.
    public var deliversNowOrNever: Bool
    /// Where its scheduling policies are configured: `<prefix>.<field>` and `<prefix>.kinds.<kind>.<field>`.
    public var configurationPrefix: String
    /// One instance's name in logs, the CLI and the dashboard: `widget`, `control`.
    public var label: String
    /// Put before a kind where kinds of several types are listed together (`control:` + kind).
    public var kindPrefix: String
    /// The policy of its kinds that the configuration names none for.
    public var defaultPolicy: SchedulingPolicy

    /// A device's widgets.
    public static let widgets = PushTypeDescriptor(
        pushType: .widgets, topicSuffix: ".push-type.widgets", tokenScope: .appOnDevice, registryPath: "devices",
        implicitInstance: (ImplicitInstance.kind, ImplicitInstance.kind), deliveryPriority: nil, deliversNowOrNever: false,
        configurationPrefix: "scheduling", label: "widget", kindPrefix: "", defaultPolicy: SchedulingPolicy()
    )

    /// One control. Apple's contract for `controls`: priority 10, now or never.
    public static let controls = PushTypeDescriptor(
        pushType: .controls, topicSuffix: ".push-type.controls", tokenScope: .control, registryPath: "controls",
        implicitInstance: (ControlRegistration.instanceID, ControlRegistration.family), deliveryPriority: .high,
        deliversNowOrNever: true, configurationPrefix: "scheduling.controls", label: "control", kindPrefix: "control:",
        defaultPolicy: .controlsDefault
    )

    /// The descriptor of the type whose implicit instance has `family` (a control's instance has the
    /// controls' family); widgets for any other family.
    public static func of(family: String) -> PushTypeDescriptor {
        PushType.allCases.map(\.descriptor).first { $0.tokenScope != .appOnDevice && $0.implicitInstance.family == family } ?? .widgets
    }
}
