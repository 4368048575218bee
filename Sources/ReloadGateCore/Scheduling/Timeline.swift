/// What a widget instance last generated (docs/DESIGN.md, Concepts): its entry dates and reload policy, which
/// give the instance's planned reload, the time WidgetKit reloads it without any push.
public struct Timeline: Hashable, Sendable {
    /// WidgetKit's `TimelineReloadPolicy`.
    public enum Policy: Hashable, Sendable {
        /// Reload after the last entry.
        case atEnd
        /// Reload at a date.
        case after(Timestamp)
        /// Never reload on its own: the instance depends on pushes alone.
        case never
    }

    public var entries: [Timestamp]
    public var policy: Policy

    public init(entries: [Timestamp], policy: Policy) {
        self.entries = entries
        self.policy = policy
    }

    /// The planned reload: the last entry (`atEnd`), the date (`after`), or none (`never`, or `atEnd`
    /// without entries).
    public var plannedReload: Timestamp? {
        switch policy {
        case .atEnd: entries.max()
        case .after(let date): date
        case .never: nil
        }
    }
}
