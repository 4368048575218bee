import Foundation
import ReloadGateCore
import Yams

extension GatewayConfiguration {
    /// Builds the configuration from the embedded default, then the YAML `file` (if any), then the
    /// `RELOADGATE_*` variables of `environment`, each overriding the one before, key by key.
    ///
    /// Nothing is partially applied: any unknown key, wrong type or unreadable file throws, naming the
    /// key (and file or variable) at fault.
    /// - Parameters:
    ///   - file: path of a YAML file, or `nil` for none.
    ///   - environment: the process environment (only `RELOADGATE_*` variables are read).
    public static func load(file: String?, environment: [String: String]) throws(ConfigurationError) -> Self {
        var configuration = GatewayConfiguration()
        if let file {
            try configuration.apply(yamlFile: file)
        }
        try configuration.apply(environment: environment)
        return configuration
    }

    /// Applies a YAML file over this configuration.
    mutating func apply(yamlFile path: String) throws(ConfigurationError) {
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw .unreadableFile(path: path, reason: Self.reason(error))
        }
        try apply(yaml: text, source: path)
    }

    /// Applies YAML text over this configuration; `source` names it in errors.
    mutating func apply(yaml text: String, source: String) throws(ConfigurationError) {
        let root: Node?
        do {
            root = try Yams.compose(yaml: text)
        } catch {
            throw .malformedFile(path: source, reason: String(describing: error))
        }
        guard let root else { return }  // an empty file (or only comments) changes nothing
        guard case .mapping(let mapping) = root else {
            throw .malformedFile(path: source, reason: "the top level must be a mapping of keys")
        }
        var updated = self
        try updated.apply(mapping: mapping, prefix: "", source: source)
        self = updated
    }

    private mutating func apply(mapping: Node.Mapping, prefix: String, source: String) throws(ConfigurationError) {
        for (keyNode, value) in mapping {
            guard let key = keyNode.string, !key.isEmpty else {
                throw .malformedFile(path: source, reason: "line \(keyNode.mark?.line ?? 0): a key must be a word")
            }
            let name = prefix + key
            let origin = ConfigurationError.Origin.file(path: source, line: keyNode.mark?.line)
            switch value {
            case .mapping(let child) where Self.pushType(ofKinds: name) != nil:
                try apply(kinds: child, of: Self.pushType(ofKinds: name)!, source: source)
            case _ where Self.pushType(ofKinds: name) != nil:
                // `kinds:` with every kind commented out is empty; anything else is the wrong shape.
                if value.null != nil { continue }
                throw .wrongShape(
                    key: name, origin: origin, found: "a single value or list",
                    expected: "a mapping of \(Self.pushType(ofKinds: name)!.descriptor.label) kinds"
                )
            case .mapping(let child):
                guard ConfigurationKey.isSection(name) else {
                    if ConfigurationKey.named(name) != nil {
                        throw .wrongShape(key: name, origin: origin, found: "a mapping", expected: Self.expected(name))
                    }
                    throw .unknownKey(key: name, origin: origin)
                }
                try apply(mapping: child, prefix: name + ".", source: source)
            case .scalar(let scalar):
                guard let key = ConfigurationKey.named(name) else {
                    // `tls:` with every key below it commented out is an empty section, not an error.
                    if ConfigurationKey.isSection(name), value.null != nil { continue }
                    if ConfigurationKey.isSection(name) {
                        throw .wrongShape(key: name, origin: origin, found: "'\(scalar.string)'", expected: "a mapping of keys")
                    }
                    throw .unknownKey(key: name, origin: origin)
                }
                let text: String? = value.null != nil ? nil : scalar.string
                guard key.apply(text, to: &self) else {
                    throw .invalidValue(key: name, origin: origin, value: text ?? "null", expected: key.expected)
                }
            case .sequence, .alias:
                guard ConfigurationKey.named(name) != nil || ConfigurationKey.isSection(name) else {
                    throw .unknownKey(key: name, origin: origin)
                }
                throw .wrongShape(key: name, origin: origin, found: "a list", expected: Self.expected(name))
            }
        }
    }

    /// The push type whose kinds the key `name` lists (`<prefix>.kinds`), if it is such a key.
    private static func pushType(ofKinds name: String) -> PushType? {
        PushType.allCases.first { $0.descriptor.configurationPrefix + ".kinds" == name }
    }

    /// `<prefix>.kinds` of `pushType` (its ``PushTypeDescriptor/configurationPrefix``): a mapping of its
    /// kinds to mappings of scheduling fields.
    private mutating func apply(kinds: Node.Mapping, of pushType: PushType, source: String) throws(ConfigurationError) {
        let type = pushType.descriptor
        for (kindNode, value) in kinds {
            let origin = ConfigurationError.Origin.file(path: source, line: kindNode.mark?.line)
            guard let kind = kindNode.string, !kind.isEmpty else {
                throw .malformedFile(
                    path: source, reason: "line \(kindNode.mark?.line ?? 0): a \(type.label) kind must be a word"
                )
            }
            let prefix = "\(type.configurationPrefix).kinds.\(kind)"
            guard case .mapping(let fields) = value else {
                throw .wrongShape(key: prefix, origin: origin, found: "a single value", expected: "a mapping of scheduling fields")
            }
            var overrides = scheduling[pushType].kindOverrides[kind] ?? [:]
            // A group of fields (`freshness: {quantile: 0.9, within: 5m}`) stands for its dotted names.
            var named: [(name: String, node: Node, value: Node)] = []
            for (fieldNode, fieldValue) in fields {
                let fieldName = fieldNode.string ?? ""
                if SchedulingField.isGroup(fieldName), case .mapping(let group) = fieldValue {
                    for (memberNode, memberValue) in group { named.append((fieldName + "." + (memberNode.string ?? ""), memberNode, memberValue)) }
                } else {
                    named.append((fieldName, fieldNode, fieldValue))
                }
            }
            for (fieldName, fieldNode, fieldValue) in named {
                let fieldOrigin = ConfigurationError.Origin.file(path: source, line: fieldNode.mark?.line)
                guard let field = SchedulingField.named(fieldName) else {
                    throw .unknownKey(key: "\(prefix).\(fieldName)", origin: fieldOrigin)
                }
                guard case .scalar(let scalar) = fieldValue else {
                    throw .wrongShape(key: "\(prefix).\(fieldName)", origin: fieldOrigin, found: "a mapping or list", expected: field.expected)
                }
                var probe = SchedulingPolicy()
                guard field.apply(scalar.string, to: &probe) else {
                    throw .invalidValue(key: "\(prefix).\(fieldName)", origin: fieldOrigin, value: scalar.string, expected: field.expected)
                }
                overrides[field.name] = scalar.string
            }
            scheduling[pushType].kindOverrides[kind] = overrides
        }
    }

    /// Applies `RELOADGATE_*` variables over this configuration.
    mutating func apply(environment: [String: String]) throws(ConfigurationError) {
        var updated = self
        for (variable, value) in environment.sorted(by: { $0.key < $1.key }) where variable.hasPrefix("RELOADGATE_") {
            guard let key = ConfigurationKey.all.first(where: { $0.environmentVariable == variable }) else {
                throw .unknownKey(key: variable, origin: .environment(variable: variable))
            }
            guard key.apply(value, to: &updated) else {
                throw .invalidValue(
                    key: key.name,
                    origin: .environment(variable: variable),
                    value: value,
                    expected: key.expected
                )
            }
        }
        self = updated
    }

    private static func expected(_ name: String) -> String {
        ConfigurationKey.named(name)?.expected ?? "a mapping of keys"
    }

    static func reason(_ error: any Error) -> String {
        if let error = error as? CocoaError, let underlying = error.userInfo[NSUnderlyingErrorKey] as? POSIXError {
            return String(cString: strerror(underlying.code.rawValue))
        }
        if let error = error as? CocoaError, error.code == .fileReadNoSuchFile {
            return "no such file"
        }
        return (error as NSError).localizedDescription
    }
}

extension ConfigurationKey {
    /// Whether `name` is a section (`listen`, `tls`, ...) that holds keys.
    static func isSection(_ name: String) -> Bool {
        all.contains { $0.name.hasPrefix(name + ".") }
    }
}
