/// A configuration that cannot be used. `reloadgate serve` prints the description and exits with
/// status 2 before starting anything.
public enum ConfigurationError: Error, Equatable, CustomStringConvertible {
    /// Where a value came from.
    public enum Origin: Equatable, Sendable {
        case file(path: String, line: Int?)
        case environment(variable: String)
    }

    /// The configuration file cannot be read.
    case unreadableFile(path: String, reason: String)
    /// The configuration file is not YAML, or not a mapping.
    case malformedFile(path: String, reason: String)
    /// A key (or `RELOADGATE_*` variable) that the gateway does not know.
    case unknownKey(key: String, origin: Origin)
    /// A value of the wrong type or out of range.
    case invalidValue(key: String, origin: Origin, value: String?, expected: String)
    /// A mapping or list where a single value is expected, or a single value where a mapping is.
    case wrongShape(key: String, origin: Origin, found: String, expected: String)
    /// A file named by a key cannot be used (missing, unreadable, not PEM, key does not match).
    case unusableFile(key: String, path: String, reason: String)
    /// Keys that must be set together are not.
    case inconsistent(key: String, reason: String)

    /// A stable identifier for logs and tests.
    public var code: String {
        switch self {
        case .unreadableFile: "config.unreadable-file"
        case .malformedFile: "config.malformed-file"
        case .unknownKey: "config.unknown-key"
        case .invalidValue, .wrongShape: "config.invalid-value"
        case .unusableFile: "config.unusable-file"
        case .inconsistent: "config.inconsistent"
        }
    }

    public var description: String {
        switch self {
        case .unreadableFile(let path, let reason):
            return "cannot read the configuration file \(path): \(reason)"
        case .malformedFile(let path, let reason):
            return "the configuration file \(path) is not valid: \(reason)"
        case .unknownKey(let key, let origin):
            var text = "\(Self.describe(origin)): unknown key '\(key)'"
            if case .environment = origin {
                text = "\(Self.describe(origin)): unknown variable (no configuration key is named so)"
            }
            if let suggestion = Self.suggestion(for: key, origin: origin) {
                text += "; did you mean '\(suggestion)'?"
            }
            return text
        case .invalidValue(let key, let origin, let value, let expected):
            let shown = value.map { "'\($0)'" } ?? "nothing"
            return "\(Self.describe(origin)): \(key) must be \(expected), not \(shown)"
        case .wrongShape(let key, let origin, let found, let expected):
            return "\(Self.describe(origin)): \(key) must be \(expected), not \(found)"
        case .unusableFile(let key, let path, let reason):
            return "\(key): cannot use \(path): \(reason)"
        case .inconsistent(let key, let reason):
            return "\(key): \(reason)"
        }
    }

    private static func describe(_ origin: Origin) -> String {
        switch origin {
        case .file(let path, let line?): "\(path):\(line)"
        case .file(let path, nil): path
        case .environment(let variable): "environment variable \(variable)"
        }
    }

    /// The closest known key or variable, when one is close enough to be a likely typo.
    private static func suggestion(for key: String, origin: Origin) -> String? {
        var candidates: [String] =
            switch origin {
            case .file: ConfigurationKey.all.map(\.name)
            case .environment: ConfigurationKey.all.map(\.environmentVariable)
            }
        if key.hasPrefix("scheduling.kinds."), let dot = key.lastIndex(of: ".") {
            // scheduling.kinds.<kind>.<field>: suggest a field of the same kind.
            candidates = SchedulingField.all.map { key[...dot] + $0.name }
        }
        let scored = candidates.map { ($0, editDistance($0.lowercased(), key.lowercased())) }
        guard let best = scored.min(by: { $0.1 < $1.1 }), best.1 <= max(2, key.count / 4) else { return nil }
        return best.0
    }

    /// Levenshtein distance, for "did you mean" suggestions.
    private static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a.utf8)
        let b = Array(b.utf8)
        guard !a.isEmpty else { return b.count }
        guard !b.isEmpty else { return a.count }
        var previous = Array(0...b.count)
        for i in 1...a.count {
            var current = [i] + Array(repeating: 0, count: b.count)
            for j in 1...b.count {
                let substitution = previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)
                current[j] = min(previous[j] + 1, current[j - 1] + 1, substitution)
            }
            previous = current
        }
        return previous[b.count]
    }
}
