/// What a push token reaches (`apns-push-type`): the widgets of an app on a device, one control
/// (WidgetKit controls: one push token per control, handed to the app's `ControlPushHandler`), or one Live
/// Activity (ActivityKit: a token per activity, and a push-to-start token per app and device). What
/// differs between the types is data, in ``descriptor``: the rest of the gateway reads it rather than
/// asking which type it has.
public enum PushType: String, Sendable, CaseIterable, Hashable {
    case widgets
    case controls
    case liveactivity

    /// The topic's suffix for this push type: `<bundle-id>.push-type.widgets` / `.push-type.controls`.
    public var topicSuffix: String { descriptor.topicSuffix }

    /// The type's position in ``allCases`` (tables kept per type are arrays in that order).
    public var ordinal: Int {
        switch self {
        case .widgets: 0
        case .controls: 1
        case .liveactivity: 2
        }
    }

    /// What this push type is, in one value.
    public var descriptor: PushTypeDescriptor {
        switch self {
        case .widgets: .widgets
        case .controls: .controls
        case .liveactivity: .liveActivities
        }
    }
}

/// How the scheduler files an instance: its push type, the kind its policy is looked up by, and whether
/// its app asked for frequent updates (``PushTypeDescriptor/scheduling(kind:family:)``).
public struct SchedulingKind: Hashable, Sendable {
    public let pushType: PushType
    public var kind: String
    public var frequentUpdates: Bool

    public init(pushType: PushType, kind: String, frequentUpdates: Bool = false) {
        self.pushType = pushType
        self.kind = kind
        self.frequentUpdates = frequentUpdates
    }
}

/// Everything the gateway knows of one push type: its names, what its token stands for, how its pushes
/// are delivered, where its policies are configured and how operators see it. One shared instance per
/// type (a class: reading it on the push path costs a reference, not a copy of every field).
public final class PushTypeDescriptor: Sendable {
    /// What one token of the type stands for.
    public enum TokenScope: String, Sendable {
        /// An app on a device: the token reaches every widget of that app there.
        case appOnDevice
        /// One control: the token reaches that control only.
        case control
        /// One Live Activity (its update token), or an app's push-to-start token on a device.
        case activity
    }

    /// What a push's body must be (Apple's rules for the type).
    public enum PayloadRule: Sendable {
        /// `{"aps":{"content-changed":true}}`, with ReloadGate's optional targeting.
        case contentChanged
        /// ActivityKit's: `aps.event` and `aps.timestamp`, content, alert, attributes for a start.
        case liveActivity
    }

    /// What a delivery carries when several requests merged into it.
    public enum MergeRule: Sendable {
        /// The type's fixed body: a reload needs nothing more.
        case reload
        /// The newest content (``ContentStamp``) with the newest alert among the merged requests.
        case newestContent
    }

    /// The `apns-push-type` value.
    public let pushType: PushType
    /// The topic's suffix: `<bundle-id>` + this.
    public let topicSuffix: String
    /// What a token of this type stands for.
    public let tokenScope: TokenScope
    /// The registry's collection of its tokens: `/v1/apps/<bundle>/<registryPath>/<token>`.
    public let registryPath: String
    /// The widget id and family of the instance a token gets when a push adopts it before the app
    /// registered it (``ImplicitInstance``).
    public let implicitInstance: (widgetID: String, family: String)
    /// The priority every delivery of this type is sent at, whatever its requests asked (`nil`: the
    /// decided one).
    public let deliveryPriority: Priority?
    /// Whether every delivery of this type is sent now or never (`apns-expiration: 0`), whatever its
    /// requests asked.
    public let deliversNowOrNever: Bool
    /// Where its scheduling policies are configured: `<prefix>.<field>` and `<prefix>.kinds.<kind>.<field>`.
    public let configurationPrefix: String
    /// One instance's name in logs, the CLI and the dashboard: `widget`, `control`.
    public let label: String
    /// Put before a kind where kinds of several types are listed together (`control:` + kind).
    public let kindPrefix: String
    /// ``label`` for several: `controls`, `activities`.
    public var pluralLabel: String { label.hasSuffix("y") ? label.dropLast() + "ies" : label + "s" }
    /// The policy of its kinds that the configuration names none for.
    public let defaultPolicy: SchedulingPolicy
    /// Kinds with a policy of their own by default (a push-to-start token's kind).
    public let kindPolicies: [String: SchedulingPolicy]
    /// How many times the budget (daily and burst) of an instance whose app asked for frequent updates is
    /// its kind's (`NSSupportsLiveActivitiesFrequentUpdates`); 1: the type has no such thing.
    public let frequentUpdatesFactor: Int
    /// Whether a push may come over a client certificate's connection (Apple: not for Live Activities).
    public let allowsCertificates: Bool
    public let payloadRule: PayloadRule
    public let mergeRule: MergeRule
    /// Whether priority 5 draws on the budget (ActivityKit: only priority 10 does).
    public let chargesLowPriority: Bool
    /// The `apns-priority` values Apple takes for the type (Live Activities: 5 and 10).
    public let priorities: [Priority]
    /// The widget id and family of a push-to-start token's one instance (`nil`: the type has none).
    public let pushToStartInstance: (widgetID: String, family: String)?
    /// The family of an instance whose app asked for frequent updates (`nil`: the type has none).
    public let frequentFamily: String?

    init(
        pushType: PushType, topicSuffix: String, tokenScope: TokenScope, registryPath: String,
        implicitInstance: (widgetID: String, family: String), deliveryPriority: Priority?, deliversNowOrNever: Bool,
        configurationPrefix: String, label: String, kindPrefix: String, defaultPolicy: SchedulingPolicy,
        kindPolicies: [String: SchedulingPolicy] = [:], frequentUpdatesFactor: Int = 1, allowsCertificates: Bool = true,
        payloadRule: PayloadRule = .contentChanged, mergeRule: MergeRule = .reload, chargesLowPriority: Bool = true,
        priorities: [Priority] = Priority.allCases, pushToStartInstance: (widgetID: String, family: String)? = nil,
        frequentFamily: String? = nil
    ) {
        self.pushType = pushType
        self.topicSuffix = topicSuffix
        self.tokenScope = tokenScope
        self.registryPath = registryPath
        self.implicitInstance = implicitInstance
        self.deliveryPriority = deliveryPriority
        self.deliversNowOrNever = deliversNowOrNever
        self.configurationPrefix = configurationPrefix
        self.label = label
        self.kindPrefix = kindPrefix
        self.defaultPolicy = defaultPolicy
        self.kindPolicies = kindPolicies
        self.frequentUpdatesFactor = frequentUpdatesFactor
        self.allowsCertificates = allowsCertificates
        self.payloadRule = payloadRule
        self.mergeRule = mergeRule
        self.chargesLowPriority = chargesLowPriority
        self.priorities = priorities
        self.pushToStartInstance = pushToStartInstance
        self.frequentFamily = frequentFamily
    }

    /// The families of the type's instances other than widgets' (a control's; an activity's, plain or
    /// with frequent updates, and a push-to-start token's).
    public var families: [String] {
        [implicitInstance.family] + [pushToStartInstance?.family, frequentFamily].compactMap(\.self)
    }

    /// The policy of an instance whose app asked for frequent updates: `policy` raised by
    /// ``frequentUpdatesFactor``.
    public func frequentPolicy(_ policy: SchedulingPolicy) -> SchedulingPolicy {
        policy.raised(by: frequentUpdatesFactor)
    }

    /// How the scheduler files an instance of this type with `kind` and `family`: a push-to-start token
    /// under ``pushToStartKind``, frequent updates when its family says so.
    public func scheduling(kind: String, family: String) -> SchedulingKind {
        SchedulingKind(
            pushType: pushType,
            kind: family == pushToStartInstance?.family ? Self.pushToStartKind : kind,
            frequentUpdates: family == frequentFamily
        )
    }

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

    /// Live Activities (ActivityKit). A token is an activity's update token (kind: the attributes type) or an
    /// app's push-to-start token (kind ``pushToStartKind``); priorities 10 and 5, the decided one; updates
    /// merge to the newest content. Policies: docs/DECISIONS.md, "Live Activities' default budgets".
    public static let liveActivities = PushTypeDescriptor(
        pushType: .liveactivity, topicSuffix: ".push-type.liveactivity", tokenScope: .activity, registryPath: "activities",
        implicitInstance: ("activity", "activity"), deliveryPriority: nil, deliversNowOrNever: false,
        configurationPrefix: "scheduling.liveactivity", label: "activity", kindPrefix: "activity:", defaultPolicy: .liveActivityDefault,
        kindPolicies: [pushToStartKind: .pushToStartDefault], frequentUpdatesFactor: 4, allowsCertificates: false,
        payloadRule: .liveActivity, mergeRule: .newestContent, chargesLowPriority: false, priorities: [.low, .high],
        pushToStartInstance: ("push-to-start", "push-to-start"), frequentFamily: "activity-frequent"
    )

    /// The kind of a push-to-start token's instance (its starts draw on their own budget).
    public static let pushToStartKind = "push-to-start"

    /// The descriptor of the type whose implicit instance has `family` (a control's instance has the
    /// controls' family); widgets for any other family.
    public static func of(family: String) -> PushTypeDescriptor {
        PushType.allCases.map(\.descriptor).first { $0.tokenScope != .appOnDevice && $0.families.contains(family) } ?? .widgets
    }
}
