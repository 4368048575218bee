public import ReloadGateCore

/// A registry change written by ``GatewayStore/writeRegistry(_:now:)``, many in one transaction (the
/// registry's group commit).
public enum RegistryWrite: Sendable {
    /// `PUT .../devices/<token>`: the device's whole widget set (``SQLStore/putDevice(app:token:widgets:previousToken:now:)``).
    case putDevice(app: App, token: DeviceToken, widgets: [WidgetRegistration], previousToken: DeviceToken?)
    /// `PUT .../controls/<token>`: a control's token, kind and configuration (``SQLStore/putControl(app:token:control:previousToken:now:)``).
    case putControl(app: App, token: DeviceToken, control: ControlRegistration, previousToken: DeviceToken?)
    /// `PUT .../activities/<token>`: a Live Activity's token (or a push-to-start token) and its attributes.
    case putActivity(app: App, token: DeviceToken, activity: ActivityRegistration, previousToken: DeviceToken?)
    /// `PUT .../widgets/<id>/timeline` (``SQLStore/putTimeline(app:token:widgetID:timeline:now:)``).
    case putTimeline(app: App, token: DeviceToken, widgetID: String, timeline: Timeline)
    /// A push to a token never registered (`ingress.unknownDevices: adopt`): the device (or control, or
    /// Live Activity, or push-to-start token) with one implicit instance of kind `*`
    /// (``SQLStore/adoptDevice(app:token:pushType:pushToStart:now:)``).
    case adoptDevice(app: App, token: DeviceToken, pushType: PushType, pushToStart: Bool)
}

/// What a ``RegistryWrite`` wrote.
public enum RegistryWritten: Sendable {
    case device(DeviceRegistration)
    /// The instance whose timeline was recorded.
    case timeline(instance: Int64)
    case adopted(AdoptedDevice)
}

/// A device adopted by a push: its id and its implicit instance's.
public struct AdoptedDevice: Sendable, Equatable {
    public var device: Int64
    public var instance: Int64
    /// Whether this write created the device: its one instance is the implicit one. Otherwise another
    /// push, gateway or registration had written the token first, and it may have more.
    public var created: Bool
    /// Whether this write added the implicit instance (false: an earlier adoption had).
    public var instanceAdded: Bool

    public init(device: Int64, instance: Int64, created: Bool, instanceAdded: Bool) {
        self.device = device
        self.instance = instance
        self.created = created
        self.instanceAdded = instanceAdded
    }
}

extension RegistryWrite {
    /// What a store does for a write: a token's instances (a device's widgets, or a control's one
    /// instance) or a timeline. Both stores switch over this, so that a new kind of write is one case here.
    public enum Step: Sendable {
        case instances(app: App, token: DeviceToken, pushType: PushType, instances: [InstanceRegistration], previousToken: DeviceToken?)
        case timeline(app: App, token: DeviceToken, widgetID: String, timeline: Timeline)
        case adopt(app: App, token: DeviceToken, pushType: PushType, pushToStart: Bool)
    }

    /// The tokens whose device this write may change: its own, and the one a registration replaces.
    public var tokens: [DeviceToken] {
        switch step {
        case .instances(_, let token, _, _, let previousToken): [token] + (previousToken.map { [$0] } ?? [])
        case .timeline(_, let token, _, _), .adopt(_, let token, _, _): [token]
        }
    }

    /// The tokens the other gateways' device caches forget once this write, which wrote `written`,
    /// commits: a registration's (``tokens``). An adoption writes a token no gateway keeps an entry of, and
    /// a timeline changes nothing a push finds.
    public func announced(_ written: RegistryWritten) -> [DeviceToken] {
        if case .device = written { tokens } else { [] }
    }

    public var step: Step {
        switch self {
        case .putDevice(let app, let token, let widgets, let previousToken):
            .instances(app: app, token: token, pushType: .widgets, instances: widgets.map(InstanceRegistration.init), previousToken: previousToken)
        case .putControl(let app, let token, let control, let previousToken):
            .instances(app: app, token: token, pushType: .controls, instances: [InstanceRegistration(control)], previousToken: previousToken)
        case .putActivity(let app, let token, let activity, let previousToken):
            .instances(app: app, token: token, pushType: .liveactivity, instances: [InstanceRegistration(activity)], previousToken: previousToken)
        case .putTimeline(let app, let token, let widgetID, let timeline):
            .timeline(app: app, token: token, widgetID: widgetID, timeline: timeline)
        case .adoptDevice(let app, let token, let pushType, let pushToStart):
            .adopt(app: app, token: token, pushType: pushType, pushToStart: pushToStart)
        }
    }
}

extension Result where Success == RegistryWritten, Failure == RegistryError {
    /// What one write of a group wrote, or its refusal: a ``RegistryError`` refuses that write alone (it
    /// comes from a check before the write's first change); any other error ends the transaction.
    static func of(_ write: () throws -> RegistryWritten) rethrows -> Self {
        do {
            return .success(try write())
        } catch let error as RegistryError {
            return .failure(error)
        }
    }

    /// ``of(_:)`` for a store that writes asynchronously.
    static func of(_ write: () async throws -> RegistryWritten) async rethrows -> Self {
        do {
            return .success(try await write())
        } catch let error as RegistryError {
            return .failure(error)
        }
    }
}
