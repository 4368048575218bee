public import ReloadGateCore

/// Where a request of a trace came from.
public enum TraceSource: String, Sendable, CaseIterable {
    case push, webhook
}

/// What a request of a trace targets.
public enum TraceTargets: Sendable, Hashable {
    /// These widget instances (an exported trace names every target).
    case instances([InstanceHandle])
    /// The widgets of one device, of one kind or all of them (a push as a sender writes it).
    case device(DeviceHandle, kind: String?)
    /// Every widget of a kind on every device (a webhook call to a whole kind).
    case kind(String)
}

/// One reload request of a trace: what the scheduler receives, and, in an exported trace, what the
/// gateway decided for it.
public struct TraceRequest: Sendable, Hashable {
    public var at: Timestamp
    public var source: TraceSource
    public var targets: TraceTargets
    public var priority: Priority
    public var expiration: Timestamp?
    public var collapseID: String?
    /// The scope of the collapse id (the gateway's team, or the app for a webhook call): a collapse id
    /// replaces only one of the same scope.
    public var team: String?
    public var exempt: Bool
    /// The gateway's decisions (exported traces): one per target of ``TraceTargets/instances(_:)`` in
    /// that order, or one `no-match`.
    public var recorded: [DecisionKind]?
    /// A Live Activity update's event, timestamp and whether it has an alert.
    public var activity: ActivityContent?

    public init(
        at: Timestamp,
        source: TraceSource = .push,
        targets: TraceTargets,
        priority: Priority = .high,
        expiration: Timestamp? = nil,
        collapseID: String? = nil,
        team: String? = nil,
        exempt: Bool = false,
        recorded: [DecisionKind]? = nil,
        activity: ActivityContent? = nil
    ) {
        self.activity = activity
        self.at = at
        self.source = source
        self.targets = targets
        self.priority = priority
        self.expiration = expiration
        self.collapseID = collapseID
        self.team = team
        self.exempt = exempt
        self.recorded = recorded
    }
}

/// One widget of a device's registration (or the one instance of a control's token).
public struct TraceWidget: Sendable, Hashable {
    public var instance: InstanceHandle
    public var kind: String
    /// A widget, or a control (scheduled by the controls' policies; reports name its kind `control:<kind>`).
    public var pushType: PushType
    /// The family of an instance that is not a widget (an activity's says whether it has frequent updates or
    /// is a push-to-start token); empty for widgets.
    public var family: String

    public init(instance: InstanceHandle, kind: String, pushType: PushType = .widgets, family: String = "") {
        self.instance = instance
        self.kind = kind
        self.pushType = pushType
        self.family = family
    }

    /// How the scheduler files it.
    public var scheduling: SchedulingKind { pushType.descriptor.scheduling(kind: kind, family: family) }

    /// The kind as reports and a trace's `kind` targets name it: `garage` for a widget, `control:garage`
    /// for a control.
    public var reportedKind: String { pushType.descriptor.kindPrefix + kind }
}

/// One event of a trace, in time order: a device's widgets (replacing what it had; none unregisters
/// it), an instance's timeline (its planned reload), or a reload request.
public enum TraceEvent: Sendable, Hashable {
    case registration(at: Timestamp, device: DeviceHandle, widgets: [TraceWidget])
    case timeline(at: Timestamp, instance: InstanceHandle, plannedReload: Timestamp?)
    case request(TraceRequest)

    public var at: Timestamp {
        switch self {
        case .registration(let at, _, _), .timeline(let at, _, _): at
        case .request(let request): request.at
        }
    }
}

/// The names of a trace (device pseudonyms or tokens, widget ids) and the handles the simulator uses:
/// a device is numbered when first named, an instance by its device and widget id.
public struct TraceNames: Sendable {
    private var deviceNumbers: [String: Int32] = [:]
    public private(set) var deviceNames: [String] = []
    private var instanceNumbers: [InstanceKey: Int32] = [:]
    public private(set) var instanceNames: [(device: Int32, widget: String)] = []

    private struct InstanceKey: Hashable, Sendable {
        var device: Int32
        var widget: String
    }

    public init() {}

    /// The handle of a device name (a new one when first seen).
    public mutating func device(_ name: String) -> DeviceHandle {
        if let number = deviceNumbers[name] { return DeviceHandle(number) }
        let number = Int32(deviceNames.count)
        deviceNumbers[name] = number
        deviceNames.append(name)
        return DeviceHandle(number)
    }

    /// The handle of a device's widget (a new one when first seen).
    public mutating func instance(device: DeviceHandle, widget: String) -> InstanceHandle {
        let key = InstanceKey(device: device.rawValue, widget: widget)
        if let number = instanceNumbers[key] { return InstanceHandle(number) }
        let number = Int32(instanceNames.count)
        instanceNumbers[key] = number
        instanceNames.append((device.rawValue, widget))
        return InstanceHandle(number)
    }

    /// The device's name and the widget id of an instance named here.
    public func name(of instance: InstanceHandle) -> (device: String, widget: String)? {
        let i = Int(instance.rawValue)
        guard i >= 0, i < instanceNames.count else { return nil }
        return (deviceNames[Int(instanceNames[i].device)], instanceNames[i].widget)
    }

    /// The name of a device named here.
    public func name(of device: DeviceHandle) -> String? {
        let d = Int(device.rawValue)
        return d >= 0 && d < deviceNames.count ? deviceNames[d] : nil
    }

    /// How many names a trace may hold: handles are 32-bit.
    public static let limit = Int(Int32.max) - 1
}
