/// An optional field that a body always carries: `null` when there is no value, never left out (what
/// the OpenAPI document's `type: [string, "null"]` fields promise). A decoder takes a missing field as
/// `null` too.
@propertyWrapper
public struct Nullable<Wrapped: Codable & Sendable & Hashable>: Codable, Sendable, Hashable {
    public var wrappedValue: Wrapped?

    public init(wrappedValue: Wrapped?) {
        self.wrappedValue = wrappedValue
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        wrappedValue = container.decodeNil() ? nil : try container.decode(Wrapped.self)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        if let wrappedValue { try container.encode(wrappedValue) } else { try container.encodeNil() }
    }
}

extension KeyedDecodingContainer {
    /// A ``Nullable`` field that is missing decodes as `nil` (the synthesized decoder would ask for it).
    public func decode<Wrapped>(_ type: Nullable<Wrapped>.Type, forKey key: Key) throws -> Nullable<Wrapped> {
        try decodeIfPresent(type, forKey: key) ?? Nullable(wrappedValue: nil)
    }
}
