/// One Live Activity's token as the app reports it (`Activity.pushTokenUpdates`), or an app's push-to-start
/// token for an attributes type (`Activity<Attributes>.pushToStartTokenUpdates`). The token names the
/// activity: it is the registry's key, and the activity is the one instance behind it.
public struct ActivityRegistration: Hashable, Sendable {
    /// The activity's `ActivityAttributes` type: its kind (budgets are configured per attributes type).
    public var attributesType: String
    /// The activity's attributes, a flat object as a widget's configuration: a webhook can reach the
    /// activities whose attributes have a value.
    public var attributes: WidgetConfiguration
    /// Whether the app's Info.plist has `NSSupportsLiveActivitiesFrequentUpdates` (the budget is raised).
    public var frequentUpdates: Bool
    /// Whether the token is a push-to-start token (its `start` pushes have their own budget).
    public var pushToStart: Bool

    public init(attributesType: String, attributes: WidgetConfiguration = WidgetConfiguration(), frequentUpdates: Bool = false, pushToStart: Bool = false) {
        self.attributesType = attributesType
        self.attributes = attributes
        self.frequentUpdates = frequentUpdates
        self.pushToStart = pushToStart
    }

    /// The widget id and family of its one instance in the registry: the descriptor's (an activity's,
    /// with frequent updates or not, or a push-to-start token's).
    public var instance: (widgetID: String, family: String) {
        let descriptor = PushTypeDescriptor.liveActivities
        if pushToStart, let start = descriptor.pushToStartInstance { return start }
        let plain = descriptor.implicitInstance
        return (plain.widgetID, frequentUpdates ? descriptor.frequentFamily ?? plain.family : plain.family)
    }
}

extension RegistryLimits {
    /// Checks an activity; returns the first problem as a sentence, or `nil`.
    public func problem(with activity: ActivityRegistration) -> String? {
        problem(kind: activity.attributesType, configuration: activity.attributes, at: "", names: ("attributesType", "attributes"))
    }
}
