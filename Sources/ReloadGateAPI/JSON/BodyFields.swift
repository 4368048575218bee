import Foundation
public import ReloadGateCore

/// A key for any field name (`AnyKey("kind")`): the bodies whose fields are checked by name, and a field
/// of a configuration in a refusal's path.
public struct AnyKey: CodingKey, Hashable, Sendable {
    public var stringValue: String
    public var intValue: Int? { nil }

    public init(_ name: String) { stringValue = name }
    public init?(stringValue: String) { self.stringValue = stringValue }
    public init?(intValue: Int) { nil }
}

/// The checks of a body's fields, each over a field's value as parsed (`nil` when the field is missing) and
/// its name in a refusal, its path from the body's top (`widgets[2].family`). Each refusal is an
/// ``APIError/invalidField(_:)`` with the words the bodies used before they were types (`... must be a
/// string`, `... must be true or false`). Every number is checked before it is used: a time outside 1970
/// to 9999, a fraction where a whole number is expected, `1e300` or a 20-digit integer is refused, never a
/// trap in a conversion. The request bodies read their fields through ``BodyObject``, the admin API's
/// bodies through ``KeyedDecodingContainer``'s helpers below, the simulator's trace lines through
/// `TraceFields`: all three apply these.
public enum FieldRule {
    /// The refusal `<name> must be <what>`.
    public static func mustBe(_ what: String, _ name: String) -> APIError {
        .invalidField("\(name) must be \(what)")
    }

    /// `value`, or nil when it is missing or `null`.
    public static func present(_ value: JSONValue?) -> JSONValue? {
        if case .null = value { return nil }
        return value
    }

    /// A string that must be there.
    public static func string(_ value: JSONValue?, _ name: @autoclosure () -> String) throws(APIError) -> String {
        guard case .string(let text)? = value else { throw mustBe("a string", name()) }
        return text
    }

    /// A string that may be missing or `null`.
    public static func optionalString(_ value: JSONValue?, _ name: @autoclosure () -> String) throws(APIError) -> String? {
        guard let value = present(value) else { return nil }
        return try string(value, name())
    }

    /// `true` or `false`, `defaultValue` when missing or `null`.
    public static func bool(_ value: JSONValue?, _ name: @autoclosure () -> String, default defaultValue: Bool) throws(APIError) -> Bool {
        guard let value = present(value) else { return defaultValue }
        guard case .bool(let flag) = value else { throw mustBe("true or false", name()) }
        return flag
    }

    /// An array that must be there.
    public static func array(_ value: JSONValue?, _ name: @autoclosure () -> String) throws(APIError) -> [JSONValue] {
        guard case .array(let items)? = value else { throw mustBe("an array", name()) }
        return items
    }

    /// An object that must be there.
    public static func object(_ value: JSONValue?, _ name: @autoclosure () -> String) throws(APIError) -> [String: JSONValue] {
        guard case .object(let fields)? = value else { throw mustBe("an object", name()) }
        return fields
    }

    /// An array of strings, empty when missing or `null`.
    public static func strings(_ value: JSONValue?, _ name: @autoclosure () -> String) throws(APIError) -> [String] {
        guard let value = present(value) else { return [] }
        return try array(value, name()).enumerated().map { index, item throws(APIError) in
            guard case .string(let text) = item else { throw mustBe("a string", "\(name())[\(index)]") }
            return text
        }
    }

    /// A finite JSON number that is not a boolean (``JSONValue/finiteNumber``), if the value is one.
    public static func number(_ value: JSONValue?) -> Double? {
        value?.finiteNumber
    }

    /// A string, a number or a boolean: a value of a flat configuration.
    public static func configurationValue(_ value: JSONValue?, _ name: @autoclosure () -> String) throws(APIError) -> WidgetConfiguration.Value {
        switch value {
        case .string(let text)?: return .string(text)
        case .bool(let flag)?: return .bool(flag)
        default:
            guard let number = value?.finiteNumber else {
                throw .invalidField("\(name()) must be a string, a number or a boolean (configurations are flat)")
            }
            return .number(number)
        }
    }

    /// A flat object's values (strings, numbers and booleans), each refused by its own name.
    public static func flatObject(_ value: JSONValue?, _ name: @autoclosure () -> String) throws(APIError) -> [String: WidgetConfiguration.Value] {
        let fields = try object(value, name())
        var values: [String: WidgetConfiguration.Value] = [:]
        values.reserveCapacity(fields.count)
        for (field, value) in fields {
            values[field] = try configurationValue(value, "\(name()).\(field)")
        }
        return values
    }

    /// A flat object of strings, numbers and booleans; empty when missing or `null`.
    public static func configuration(_ value: JSONValue?, _ name: @autoclosure () -> String) throws(APIError) -> WidgetConfiguration {
        guard let value = present(value) else { return WidgetConfiguration() }
        return WidgetConfiguration(try flatObject(value, name()))
    }

    /// A time: RFC 3339 text or UNIX seconds, from 1970 to 9999 (``JSONFields/date(seconds:text:_:)``).
    public static func date(_ value: JSONValue?, _ name: @autoclosure () -> String) throws(APIError) -> Timestamp {
        if case .string(let text)? = value { return try JSONFields.date(seconds: nil, text: text, name()) }
        return try JSONFields.date(seconds: number(value), text: nil, name())
    }

    /// A device token (64 to 200 hex digits) that must be there.
    public static func deviceToken(_ value: JSONValue?, _ name: @autoclosure () -> String) throws(APIError) -> DeviceToken {
        let text = try string(value, name())
        do {
            return try DeviceToken(text)
        } catch {
            throw .invalidField("\(name()): \(error)")
        }
    }

    /// A device token that may be missing or `null`.
    public static func optionalDeviceToken(_ value: JSONValue?, _ name: @autoclosure () -> String) throws(APIError) -> DeviceToken? {
        guard let value = present(value) else { return nil }
        return try deviceToken(value, name())
    }

    /// Refuses a field of `fields` not in `names`, naming it (the first in sorted order) and the fields
    /// there are.
    public static func refuseUnknownFields(_ fields: [String: JSONValue], _ names: Set<String>) throws(APIError) {
        var unknown: String?
        for key in fields.keys where !names.contains(key) {
            if unknown == nil || key < unknown! { unknown = key }
        }
        if let unknown {
            throw .invalidField("unknown field '\(unknown)'; the fields are \(names.sorted().joined(separator: ", "))")
        }
    }
}

/// A JSON object of a request body, read as parsed: one dictionary look-up a field, where a `Decoder`'s
/// keyed container costs a boxed container, its coding path and a look-up of the field's type for each
/// (decision 0059, amended). The checks are ``FieldRule``'s.
public struct BodyObject: Sendable {
    /// The object's fields.
    public let fields: [String: JSONValue]
    /// Where the object is in the body, for the names in refusals: empty for the body itself.
    private let path: String
    /// The object's index in the array `path` names, when it is an item of one.
    private let index: Int?

    /// The body itself: a body that is not a JSON object is `400 invalid-json`.
    public init(body value: JSONValue) throws(APIError) {
        guard case .object(let fields) = value else { throw .invalidJSON("the body must be a JSON object") }
        self.fields = fields
        path = ""
        index = nil
    }

    /// Item `index` of the array named `array` (its path, `widgets`): refused when it is not an object
    /// (`widgets[2] must be an object`).
    public init(_ value: JSONValue, item index: Int, of array: String) throws(APIError) {
        guard case .object(let fields) = value else { throw FieldRule.mustBe("an object", "\(array)[\(index)]") }
        self.fields = fields
        path = array
        self.index = index
    }

    /// The field's value as parsed; nil when it is missing.
    public func value(_ key: String) -> JSONValue? { fields[key] }

    /// A field's name in a refusal: its path from the body's top (`widgets[2].family`).
    public func name(_ key: String) -> String {
        if let index { return "\(path)[\(index)].\(key)" }
        return path.isEmpty ? key : "\(path).\(key)"
    }

    public func string(_ key: String) throws(APIError) -> String { try FieldRule.string(fields[key], name(key)) }
    public func optionalString(_ key: String) throws(APIError) -> String? { try FieldRule.optionalString(fields[key], name(key)) }
    public func bool(_ key: String, default defaultValue: Bool) throws(APIError) -> Bool {
        try FieldRule.bool(fields[key], name(key), default: defaultValue)
    }
    public func array(_ key: String) throws(APIError) -> [JSONValue] { try FieldRule.array(fields[key], name(key)) }
    public func number(_ key: String) -> Double? { FieldRule.number(fields[key]) }
    public func flatObject(_ key: String) throws(APIError) -> [String: WidgetConfiguration.Value] { try FieldRule.flatObject(fields[key], name(key)) }
    public func configuration(_ key: String) throws(APIError) -> WidgetConfiguration { try FieldRule.configuration(fields[key], name(key)) }
    public func date(_ key: String) throws(APIError) -> Timestamp { try FieldRule.date(fields[key], name(key)) }
    public func optionalDeviceToken(_ key: String) throws(APIError) -> DeviceToken? { try FieldRule.optionalDeviceToken(fields[key], name(key)) }
    /// No such field, or `null`.
    public func isAbsent(_ key: String) -> Bool { FieldRule.present(fields[key]) == nil }
    public func refuseUnknownFields(_ names: Set<String>) throws(APIError) { try FieldRule.refuseUnknownFields(fields, names) }
}

/// ``FieldRule``'s checks inside an `init(from:)` (the admin API's bodies): each reads its field's value as
/// parsed and applies the rule of the same name, so a body read through a `Decoder` (Foundation's too, in
/// the tests) is refused with the same words.
extension KeyedDecodingContainer {
    /// The field's name in a refusal: its path from the body's top.
    func name(_ key: Key) -> String { BodyJSON.path(codingPath + [key]) }

    /// The field's value as parsed; `nil` when it is missing or `null`.
    func value(_ key: Key) -> JSONValue? {
        (try? decodeIfPresent(JSONValue.self, forKey: key)) ?? nil
    }

    /// A string field that must be there.
    public func string(_ key: Key) throws(APIError) -> String { try FieldRule.string(value(key), name(key)) }

    /// A string field that may be missing or `null`.
    public func optionalString(_ key: Key) throws(APIError) -> String? { try FieldRule.optionalString(value(key), name(key)) }

    /// `true` or `false`, `defaultValue` when missing or `null`.
    public func bool(_ key: Key, default defaultValue: Bool) throws(APIError) -> Bool {
        try FieldRule.bool(value(key), name(key), default: defaultValue)
    }

    /// An array of strings, empty when missing or `null`.
    public func strings(_ key: Key) throws(APIError) -> [String] { try FieldRule.strings(value(key), name(key)) }
}

extension CodingUserInfoKey {
    /// The ``RegistryLimits`` a registration body is checked against.
    static let registryLimits = CodingUserInfoKey(rawValue: "reloadgate.registryLimits")!
}
