/// A reason a reload does not count against the widget's budget (docs/DESIGN.md, rule 9): the situations in
/// which WidgetKit itself does not charge a reload. Only credentials allowed to claim exemptions may.
public enum Exemption: String, Sendable, CaseIterable, Hashable {
    case appForeground
    case audioSession
    case navigationSession
    case appIntent
    case animation
    case localeChange
    case accessibilityChange
}
