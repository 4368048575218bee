/// One control of the app's widget extension, as its `ControlPushHandler` reports it
/// (`pushTokensDidChange(controls:)` hands over a `ControlInfo` per control: its kind and push token). The
/// token names the control: it is the registry's key, and the control is the one instance behind it.
public struct ControlRegistration: Hashable, Sendable {
    /// The control's kind (`ControlInfo.kind`).
    public var kind: String
    /// The control's configuration, a flat object as for widgets (empty for a static control).
    public var configuration: WidgetConfiguration

    public init(kind: String, configuration: WidgetConfiguration = WidgetConfiguration()) {
        self.kind = kind
        self.configuration = configuration
    }

    /// The widget id of a control's one instance in the registry (stable, so a control registered again
    /// keeps its budget, and an adopted control token keeps it when the app registers its kind).
    public static let instanceID = "control"
    /// The family the registry shows for a control's instance.
    public static let family = "control"
}

extension RegistryLimits {
    /// Checks a control; returns the first problem as a sentence, or `nil`.
    public func problem(with control: ControlRegistration) -> String? {
        problem(kind: control.kind, configuration: control.configuration, at: "")
    }

    /// The kind and configuration rules a widget and a control share; `path` prefixes the field names
    /// (made only for a problem). `names`: the two fields' names in the body.
    func problem(
        kind: String, configuration: WidgetConfiguration, at path: @autoclosure () -> String,
        names: (kind: String, configuration: String) = ("kind", "configuration")
    ) -> String? {
        // ASCII only, so the bytes are the characters.
        let kindIsValid = !kind.isEmpty && kind.utf8.count <= identifierLength && kind.utf8.allSatisfy(Self.isKindByte)
        if !kindIsValid {
            return "\(path())\(names.kind) must have 1 to \(identifierLength) letters, digits, '.', '_' or '-'"
        }
        let size = configuration.canonicalJSON.utf8.count
        if size > configurationBytes {
            return "\(path())\(names.configuration) has \(size) bytes, more than \(configurationBytes)"
        }
        return nil
    }

    /// An ASCII letter, a digit, `.`, `_` or `-`: what a kind is made of.
    static func isKindByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
        case UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"): true
        default: false
        }
    }
}
