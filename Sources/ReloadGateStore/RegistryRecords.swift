public import Foundation
public import ReloadGateCore

// What the registry and the push path read and write, the same for both stores.

/// The result of registering a device's widgets (`PUT .../devices/<token>`).
public struct DeviceRegistration: Sendable {
    /// The device's id: the scheduler's device handle.
    public var device: Int64
    /// Whether the token is a device's (for its widgets) or a control's.
    public var pushType: PushType = .widgets
    /// The device's widget instances now (a control's: its one instance), by instance id (the scheduler's
    /// instance handle).
    public var instances: [(id: Int64, widget: InstanceRegistration)]
    /// Instances that the new set no longer has.
    public var removedInstances: [Int64]
    /// The device retired by `previousToken`, and its removed instances.
    public var retired: (device: Int64, instances: [Int64])?

    /// The devices the registration changed: the device, and the one it retired.
    public var devices: [Int64] { [device] + (retired.map { [$0.device] } ?? []) }
}

/// One instance as the registry writes it: a widget, or a control's one instance (widget id `control`,
/// family `control`).
public struct InstanceRegistration: Hashable, Sendable {
    /// The widget id (the app's id of the widget instance, or ``ControlRegistration/instanceID``).
    public var id: String
    public var kind: String
    /// A ``WidgetFamily`` name, or ``ControlRegistration/family``.
    public var family: String
    public var configuration: WidgetConfiguration
    public var pushEnabled: Bool

    public init(_ widget: WidgetRegistration) {
        self.id = widget.id
        self.kind = widget.kind
        self.family = widget.family.rawValue
        self.configuration = widget.configuration
        self.pushEnabled = widget.pushEnabled
    }

    public init(_ activity: ActivityRegistration) {
        self.id = activity.instance.widgetID
        self.kind = activity.attributesType
        self.family = activity.instance.family
        self.configuration = activity.attributes
        self.pushEnabled = true
    }

    public init(_ control: ControlRegistration) {
        self.id = ControlRegistration.instanceID
        self.kind = control.kind
        self.family = ControlRegistration.family
        self.configuration = control.configuration
        self.pushEnabled = true
    }
}

/// One distinct (kind, family, configuration) in use and how many instances show it.
public struct ConfigurationUsage: Hashable, Sendable {
    public var kind: String
    public var family: String
    /// Canonical JSON.
    public var configuration: String
    public var count: Int

    public init(kind: String, family: String, configuration: String, count: Int) {
        self.kind = kind
        self.family = family
        self.configuration = configuration
        self.count = count
    }
}

/// Why a registry change was refused.
public enum RegistryError: Error, Equatable, CustomStringConvertible {
    case deviceNotFound(DeviceToken)
    case widgetNotFound(DeviceToken, String)
    case deviceUnregistered(DeviceToken)
    /// The token is registered with another push type (a widgets device's token named as a control's, or
    /// the other way round).
    case otherPushType(DeviceToken, registered: PushType)

    public var description: String {
        switch self {
        case .deviceNotFound(let token): "no device \(token.shortened) is registered for this app"
        case .widgetNotFound(let token, let id): "device \(token.shortened) has no widget '\(id)'"
        case .deviceUnregistered(let token): "device \(token.shortened) is unregistered; register its new token"
        case .otherPushType(let token, let registered):
            "token \(token.shortened) is registered for \(registered.rawValue) (PUT .../\(registered.descriptor.registryPath)/<token>)"
        }
    }
}

/// A widget instance as the scheduler is loaded with it on start.
public struct RegisteredInstance: Hashable, Sendable {
    /// The instance id (the scheduler's instance handle).
    public var instance: Int64
    /// The device id (the scheduler's device handle).
    public var device: Int64
    public var kind: String
    /// Whether it is a widget or a control (whose policies are apart).
    public var pushType: PushType
    /// The planned reload of the instance's last reported timeline, if any.
    public var plannedReload: Timestamp?
    /// The family of an instance that is not a widget (a control's, an activity's); empty for widgets.
    public var family = ""

    /// How the scheduler files it.
    public var scheduling: SchedulingKind { pushType.descriptor.scheduling(kind: kind, family: family) }

    public init(instance: Int64, device: Int64, kind: String, pushType: PushType = .widgets, plannedReload: Timestamp?, family: String = "") {
        self.family = family
        self.instance = instance
        self.device = device
        self.kind = kind
        self.pushType = pushType
        self.plannedReload = plannedReload
    }
}

/// Where a delivery goes: the app and device token, and the widget ids it reloads.
public struct PushAddress: Hashable, Sendable {
    public var bundle: BundleID
    public var token: DeviceToken
    /// A device's widgets, or a control (`apns-push-type: controls`).
    public var pushType: PushType = .widgets
    /// Widget ids of the delivery's instances that are still registered, in instance order.
    public var widgetIDs: [String]
}

/// What a push's device token is for the app it is addressed to.
public enum PushDeviceStatus: Hashable, Sendable {
    /// Registered and active: its device id, and whether the token is a device's (widgets) or a control's.
    case active(device: Int64, pushType: PushType)
    /// Registered once and retired (a newer token replaced it, or Apple said it is invalid), since then.
    case unregistered(since: Date)
    /// Registered only for other apps.
    case otherApp
    /// Never registered.
    case unknown
}
