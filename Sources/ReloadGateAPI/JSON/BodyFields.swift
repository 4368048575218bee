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

/// The checks of a body's fields inside its `init(from:)`, each refusal an ``APIError/invalidField(_:)``
/// that names the field by its path (`widgets[2].family`), with the words the bodies used before they were
/// types (`... must be a string`, `... must be true or false`). Every number is checked before it is used:
/// a time outside 1970 to 9999, a fraction where a whole number is expected, `1e300` or a 20-digit integer
/// is refused, never a trap in a conversion.
extension KeyedDecodingContainer {
    /// The field's name in a refusal: its path from the body's top.
    func name(_ key: Key) -> String { BodyJSON.path(codingPath + [key]) }

    /// A string field that must be there.
    public func string(_ key: Key) throws(APIError) -> String {
        guard let value = (try? decodeIfPresent(String.self, forKey: key)) ?? nil else { throw .invalidField("\(name(key)) must be a string") }
        return value
    }

    /// A string field that may be missing or `null`. One look-up: `decodeIfPresent` is `nil` for a missing
    /// field and for `null`, and throws for any other value (each look-up in the decoder costs).
    public func optionalString(_ key: Key) throws(APIError) -> String? {
        do {
            return try decodeIfPresent(String.self, forKey: key)
        } catch {
            throw .invalidField("\(name(key)) must be a string")
        }
    }

    /// `true` or `false`, `defaultValue` when missing or `null`.
    public func bool(_ key: Key, default defaultValue: Bool) throws(APIError) -> Bool {
        do {
            return try decodeIfPresent(Bool.self, forKey: key) ?? defaultValue
        } catch {
            throw .invalidField("\(name(key)) must be true or false")
        }
    }

    /// An array of strings, empty when missing or `null`.
    public func strings(_ key: Key) throws(APIError) -> [String] {
        guard contains(key), (try? decodeNil(forKey: key)) == false else { return [] }
        guard let value = try? decode([JSONValue].self, forKey: key) else { throw .invalidField("\(name(key)) must be an array") }
        return try value.enumerated().map { index, item throws(APIError) in
            guard case .string(let text) = item else { throw .invalidField("\(name(key))[\(index)] must be a string") }
            return text
        }
    }

    /// No such field, or `null`.
    public func isAbsent(_ key: Key) -> Bool {
        !contains(key) || (try? decodeNil(forKey: key)) != false
    }

    /// An array field that must be there, to be read item by item.
    public func array(_ key: Key) throws(APIError) -> any UnkeyedDecodingContainer {
        guard let list = try? nestedUnkeyedContainer(forKey: key) else { throw .invalidField("\(name(key)) must be an array") }
        return list
    }

    /// A JSON number that is not a boolean (the decoder keeps them apart), if the field is one.
    public func number(_ key: Key) -> Double? {
        (try? decode(Double.self, forKey: key)).flatMap { $0.isFinite ? $0 : nil }
    }

    /// A string, a number or a boolean: a value of a flat configuration.
    public func configurationValue(_ key: Key) throws(APIError) -> WidgetConfiguration.Value {
        try Self.configurationValue((try? decode(JSONValue.self, forKey: key)) ?? .null, name(key))
    }

    /// `value` as a configuration's value, or the refusal naming it `name`.
    static func configurationValue(_ value: JSONValue, _ name: @autoclosure () -> String) throws(APIError) -> WidgetConfiguration.Value {
        switch value {
        case .string(let text): return .string(text)
        case .bool(let flag): return .bool(flag)
        default:
            guard let number = value.finiteNumber else {
                throw .invalidField("\(name()) must be a string, a number or a boolean (configurations are flat)")
            }
            return .number(number)
        }
    }

    /// A flat object of strings, numbers and booleans; empty when missing or `null` (one look-up).
    public func configuration(_ key: Key) throws(APIError) -> WidgetConfiguration {
        let value: JSONValue?
        do {
            value = try decodeIfPresent(JSONValue.self, forKey: key)
        } catch {
            throw .invalidField("\(name(key)) must be an object")
        }
        guard let value else { return WidgetConfiguration() }
        return WidgetConfiguration(try flatObject(value, key))
    }

    /// A flat object's values, read from the object as parsed (a keyed container's `allKeys` casts its
    /// array of keys element by element, the largest cost of a webhook call's body).
    public func flatObject(_ key: Key) throws(APIError) -> [String: WidgetConfiguration.Value] {
        try flatObject((try? decode(JSONValue.self, forKey: key)) ?? .null, key)
    }

    /// `value`, the field `key`'s, as a flat object's values.
    private func flatObject(_ value: JSONValue, _ key: Key) throws(APIError) -> [String: WidgetConfiguration.Value] {
        guard case .object(let fields) = value else { throw .invalidField("\(name(key)) must be an object") }
        var values: [String: WidgetConfiguration.Value] = [:]
        values.reserveCapacity(fields.count)
        for (field, value) in fields {
            values[field] = try Self.configurationValue(value, BodyJSON.path(codingPath + [key, AnyKey(field)]))
        }
        return values
    }

    /// A time: RFC 3339 text or UNIX seconds, from 1970 to 9999 (``JSONFields/date(seconds:text:_:)``).
    public func date(_ key: Key) throws(APIError) -> Timestamp {
        // Text first: most times are written as text, and a failed decode (an error made and dropped)
        // costs more than the decode.
        if let text = try? decode(String.self, forKey: key) { return try JSONFields.date(seconds: nil, text: text, name(key)) }
        return try JSONFields.date(seconds: number(key), text: nil, name(key))
    }

    /// A device token (64 hex digits) that may be missing or `null`.
    public func optionalDeviceToken(_ key: Key) throws(APIError) -> DeviceToken? {
        guard let text = try optionalString(key) else { return nil }
        do {
            return try DeviceToken(text)
        } catch {
            throw .invalidField("\(name(key)): \(error)")
        }
    }
}

extension Decoder {
    /// Refuses a field of the body's object not in `names`, naming it (the first in sorted order) and the
    /// fields there are. Reads the object as parsed, not a keyed container's `allKeys` (see `flatObject`).
    public func refuseUnknownFields(_ names: Set<String>) throws {
        guard case .object(let fields) = try singleValueContainer().decode(JSONValue.self) else { return }
        var unknown: String?
        for key in fields.keys where !names.contains(key) {
            if unknown == nil || key < unknown! { unknown = key }
        }
        if let unknown {
            throw APIError.invalidField("unknown field '\(unknown)'; the fields are \(names.sorted().joined(separator: ", "))")
        }
    }
}

extension CodingUserInfoKey {
    /// The ``RegistryLimits`` a registration body is checked against.
    static let registryLimits = CodingUserInfoKey(rawValue: "reloadgate.registryLimits")!
}
