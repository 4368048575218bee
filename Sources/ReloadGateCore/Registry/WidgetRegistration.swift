/// WidgetKit's widget families.
public enum WidgetFamily: String, Sendable, CaseIterable, Hashable {
    case systemSmall, systemMedium, systemLarge, systemExtraLarge
    case accessoryCircular, accessoryRectangular, accessoryInline, accessoryCorner
}

/// One widget the person added, as the app reports it (WidgetKit's `WidgetInfo`).
public struct WidgetRegistration: Hashable, Sendable {
    /// The app's stable id of the widget instance.
    public var id: String
    public var kind: String
    public var family: WidgetFamily
    public var configuration: WidgetConfiguration
    /// Whether the widget takes pushes (WidgetKit: a widget with a push handler).
    public var pushEnabled: Bool

    public init(id: String, kind: String, family: WidgetFamily, configuration: WidgetConfiguration, pushEnabled: Bool = true) {
        self.id = id
        self.kind = kind
        self.family = family
        self.configuration = configuration
        self.pushEnabled = pushEnabled
    }
}

/// Limits on registry input (docs/DESIGN.md, Security): over a limit, a clear 4xx and nothing stored.
public struct RegistryLimits: Sendable, Hashable {
    public var widgetsPerDevice = 64
    /// Bytes of a configuration's canonical JSON.
    public var configurationBytes = 2048
    public var timelineEntries = 1000
    /// Characters of a widget id or kind.
    public var identifierLength = 128

    public init() {}

    /// Checks a device's widget set; returns the first problem as a sentence, or `nil`.
    public func problem(with widgets: [WidgetRegistration]) -> String? {
        if widgets.count > widgetsPerDevice {
            return "a device has at most \(widgetsPerDevice) widgets, not \(widgets.count)"
        }
        // The ids seen, for two widgets or more (one widget's id has nothing to repeat, and the set
        // would be an allocation and a hash for each registration).
        var ids = Set<String>()
        if widgets.count > 1 { ids.reserveCapacity(widgets.count) }
        for (index, widget) in widgets.enumerated() {
            // Characters as JSON Schema counts them (Unicode scalars): the OpenAPI document's maxLength.
            if widget.id.isEmpty || widget.id.unicodeScalars.count > identifierLength {
                return "widgets[\(index)].id must have 1 to \(identifierLength) characters"
            }
            if widgets.count > 1, !ids.insert(widget.id).inserted {
                return "widgets[\(index)].id '\(widget.id)' appears twice"
            }
            if let problem = problem(kind: widget.kind, configuration: widget.configuration, at: "widgets[\(index)].") {
                return problem
            }
        }
        return nil
    }
}
