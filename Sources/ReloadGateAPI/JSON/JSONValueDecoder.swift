/// A `Decoder` over a parsed ``JSONValue``: the second half of reading a request body, so that each body's
/// `init(from:)` keeps its checks whichever parser read the text (``JSONParser`` is the first half).
///
/// It answers as Foundation's `JSONDecoder` answers the bodies' questions: the same `DecodingError` cases
/// with the same coding paths, so ``BodyJSON``'s refusals name the same fields. A number reads as an
/// integer type when it is a whole number in the type's range (`1.0` and `1e2` too), and as a `Double` when
/// it is finite; a boolean is never a number. `JSONValue` itself is handed over as parsed.
struct JSONValueDecoder: Decoder {
    let value: JSONValue
    let codingPath: [any CodingKey]
    let userInfo: [CodingUserInfoKey: Any]

    init(_ value: JSONValue, codingPath: [any CodingKey] = [], userInfo: [CodingUserInfoKey: Any] = [:]) {
        self.value = value
        self.codingPath = codingPath
        self.userInfo = userInfo
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard case .object(let fields) = value else { throw Self.mismatch([String: Any].self, value, codingPath) }
        return KeyedDecodingContainer(KeyedContainer(fields: fields, codingPath: codingPath, userInfo: userInfo))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        guard case .array(let items) = value else { throw Self.mismatch([Any].self, value, codingPath) }
        return UnkeyedContainer(items: items, codingPath: codingPath, userInfo: userInfo)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer { self }

    /// `typeMismatch` for a value that is there, `valueNotFound` for `null` (as `JSONDecoder`).
    static func mismatch(_ type: Any.Type, _ value: JSONValue, _ path: [any CodingKey]) -> DecodingError {
        if case .null = value {
            return .valueNotFound(type, .init(codingPath: path, debugDescription: "Expected \(type) value but found null instead."))
        }
        return .typeMismatch(type, .init(codingPath: path, debugDescription: "Expected to decode \(type) but found another value."))
    }

    /// `value` as a `T`: the primitives straight from the tree, any other type through its `init(from:)`.
    static func decode<T: Decodable>(_ type: T.Type, _ value: JSONValue, _ path: [any CodingKey], _ userInfo: [CodingUserInfoKey: Any]) throws -> T {
        // Each cast is between a type and itself, which `as!` would check at run time.
        if T.self == JSONValue.self { return unsafeBitCast(value, to: T.self) }
        if T.self == String.self { return unsafeBitCast(try string(value, path), to: T.self) }
        if T.self == Bool.self { return unsafeBitCast(try bool(value, path), to: T.self) }
        if T.self == Double.self { return unsafeBitCast(try double(value, path), to: T.self) }
        if T.self == Int.self { return unsafeBitCast(try integer(Int.self, value, path), to: T.self) }
        if T.self == Int64.self { return unsafeBitCast(try integer(Int64.self, value, path), to: T.self) }
        return try T(from: JSONValueDecoder(value, codingPath: path, userInfo: userInfo))
    }

    static func string(_ value: JSONValue, _ path: [any CodingKey]) throws -> String {
        guard case .string(let text) = value else { throw mismatch(String.self, value, path) }
        return text
    }

    static func bool(_ value: JSONValue, _ path: [any CodingKey]) throws -> Bool {
        guard case .bool(let flag) = value else { throw mismatch(Bool.self, value, path) }
        return flag
    }

    static func double(_ value: JSONValue, _ path: [any CodingKey]) throws -> Double {
        if let number = value.finiteNumber { return number }
        switch value {
        case .number:
            throw DecodingError.dataCorrupted(.init(codingPath: path, debugDescription: "the number is beyond a double's range"))
        default: throw mismatch(Double.self, value, path)
        }
    }

    static func integer<T: FixedWidthInteger>(_ type: T.Type, _ value: JSONValue, _ path: [any CodingKey]) throws -> T {
        let result: T?
        switch value {
        case .integer(let integer): result = T(exactly: integer)
        case .number(let number): result = T(exactly: number)
        default: throw mismatch(T.self, value, path)
        }
        guard let result else {
            throw DecodingError.dataCorrupted(.init(codingPath: path, debugDescription: "the number does not fit \(T.self)"))
        }
        return result
    }
}

extension JSONValueDecoder: SingleValueDecodingContainer {
    func decodeNil() -> Bool {
        if case .null = value { return true }
        return false
    }

    func decode(_ type: Bool.Type) throws -> Bool { try Self.bool(value, codingPath) }
    func decode(_ type: String.Type) throws -> String { try Self.string(value, codingPath) }
    func decode(_ type: Double.Type) throws -> Double { try Self.double(value, codingPath) }
    func decode(_ type: Float.Type) throws -> Float { Float(try Self.double(value, codingPath)) }
    func decode(_ type: Int.Type) throws -> Int { try Self.integer(type, value, codingPath) }
    func decode(_ type: Int8.Type) throws -> Int8 { try Self.integer(type, value, codingPath) }
    func decode(_ type: Int16.Type) throws -> Int16 { try Self.integer(type, value, codingPath) }
    func decode(_ type: Int32.Type) throws -> Int32 { try Self.integer(type, value, codingPath) }
    func decode(_ type: Int64.Type) throws -> Int64 { try Self.integer(type, value, codingPath) }
    func decode(_ type: UInt.Type) throws -> UInt { try Self.integer(type, value, codingPath) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try Self.integer(type, value, codingPath) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try Self.integer(type, value, codingPath) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try Self.integer(type, value, codingPath) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try Self.integer(type, value, codingPath) }
    func decode<T: Decodable>(_ type: T.Type) throws -> T { try Self.decode(type, value, codingPath, userInfo) }
}

extension JSONValueDecoder {
    /// An object's fields by their keys.
    struct KeyedContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
        let fields: [String: JSONValue]
        let codingPath: [any CodingKey]
        let userInfo: [CodingUserInfoKey: Any]

        var allKeys: [Key] {
            var keys: [Key] = []
            keys.reserveCapacity(fields.count)
            for name in fields.keys {
                if let key = Key(stringValue: name) { keys.append(key) }
            }
            return keys
        }

        func contains(_ key: Key) -> Bool { fields[key.stringValue] != nil }

        private func field(_ key: Key) throws -> JSONValue {
            guard let value = fields[key.stringValue] else {
                throw DecodingError.keyNotFound(key, .init(codingPath: codingPath, debugDescription: "No value associated with key \(key.stringValue)."))
            }
            return value
        }

        func decodeNil(forKey key: Key) throws -> Bool {
            if case .null = try field(key) { return true }
            return false
        }

        // The field's path is made only for an error: most reads succeed, and a path is an array.
        func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool {
            let value = try field(key)
            if case .bool(let flag) = value { return flag }
            throw JSONValueDecoder.mismatch(type, value, codingPath + [key])
        }

        func decode(_ type: String.Type, forKey key: Key) throws -> String {
            let value = try field(key)
            if case .string(let text) = value { return text }
            throw JSONValueDecoder.mismatch(type, value, codingPath + [key])
        }

        func decode(_ type: Double.Type, forKey key: Key) throws -> Double {
            let value = try field(key)
            if let number = value.finiteNumber { return number }
            return try JSONValueDecoder.double(value, codingPath + [key])
        }

        // One look-up for a field that may be missing (the protocol's own `decodeIfPresent` makes three).
        func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? {
            switch fields[key.stringValue] {
            case nil, .null?: return nil
            case .string(let text)?: return text
            case let value?: throw JSONValueDecoder.mismatch(type, value, codingPath + [key])
            }
        }

        func decodeIfPresent(_ type: Bool.Type, forKey key: Key) throws -> Bool? {
            switch fields[key.stringValue] {
            case nil, .null?: return nil
            case .bool(let flag)?: return flag
            case let value?: throw JSONValueDecoder.mismatch(type, value, codingPath + [key])
            }
        }

        func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
            switch fields[key.stringValue] {
            case nil, .null?: return nil
            // A value as parsed (how ``FieldRule``'s checks read every field) needs no path.
            case let value? where T.self == JSONValue.self: return unsafeBitCast(value, to: T.self)
            case let value?: return try JSONValueDecoder.decode(type, value, codingPath + [key], userInfo)
            }
        }

        func decode(_ type: Float.Type, forKey key: Key) throws -> Float { Float(try decode(Double.self, forKey: key)) }
        func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try JSONValueDecoder.integer(type, try field(key), codingPath + [key]) }
        func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try JSONValueDecoder.integer(type, try field(key), codingPath + [key]) }
        func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try JSONValueDecoder.integer(type, try field(key), codingPath + [key]) }
        func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try JSONValueDecoder.integer(type, try field(key), codingPath + [key]) }
        func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try JSONValueDecoder.integer(type, try field(key), codingPath + [key]) }
        func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try JSONValueDecoder.integer(type, try field(key), codingPath + [key]) }
        func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try JSONValueDecoder.integer(type, try field(key), codingPath + [key]) }
        func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try JSONValueDecoder.integer(type, try field(key), codingPath + [key]) }
        func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try JSONValueDecoder.integer(type, try field(key), codingPath + [key]) }
        func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try JSONValueDecoder.integer(type, try field(key), codingPath + [key]) }
        func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
            let value = try field(key)
            if T.self == JSONValue.self { return unsafeBitCast(value, to: T.self) }
            return try JSONValueDecoder.decode(type, value, codingPath + [key], userInfo)
        }

        func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
            try JSONValueDecoder(try field(key), codingPath: codingPath + [key], userInfo: userInfo).container(keyedBy: type)
        }

        func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
            try JSONValueDecoder(try field(key), codingPath: codingPath + [key], userInfo: userInfo).unkeyedContainer()
        }

        func superDecoder() throws -> any Decoder {
            JSONValueDecoder(fields["super"] ?? .null, codingPath: codingPath + [AnyKey("super")], userInfo: userInfo)
        }

        func superDecoder(forKey key: Key) throws -> any Decoder {
            JSONValueDecoder(fields[key.stringValue] ?? .null, codingPath: codingPath + [key], userInfo: userInfo)
        }
    }

    /// An array's items in order.
    struct UnkeyedContainer: UnkeyedDecodingContainer {
        let items: [JSONValue]
        let codingPath: [any CodingKey]
        let userInfo: [CodingUserInfoKey: Any]
        private(set) var currentIndex = 0

        init(items: [JSONValue], codingPath: [any CodingKey], userInfo: [CodingUserInfoKey: Any]) {
            self.items = items
            self.codingPath = codingPath
            self.userInfo = userInfo
        }

        var count: Int? { items.count }
        var isAtEnd: Bool { currentIndex >= items.count }

        /// The next item and its path; the index moves on only once the item is read as asked.
        private func next<T>(_ type: T.Type) throws -> (JSONValue, [any CodingKey]) {
            let path = codingPath + [IndexKey(currentIndex)]
            guard !isAtEnd else {
                throw DecodingError.valueNotFound(type, .init(codingPath: path, debugDescription: "Unkeyed container is at end."))
            }
            return (items[currentIndex], path)
        }

        private mutating func read<T>(_ read: (JSONValue, [any CodingKey]) throws -> T) throws -> T {
            let (value, path) = try next(T.self)
            let result = try read(value, path)
            currentIndex += 1
            return result
        }

        mutating func decodeNil() throws -> Bool {
            let (value, _) = try next(Any?.self)
            guard case .null = value else { return false }
            currentIndex += 1
            return true
        }

        mutating func decode(_ type: Bool.Type) throws -> Bool { try read(JSONValueDecoder.bool) }
        mutating func decode(_ type: String.Type) throws -> String { try read(JSONValueDecoder.string) }
        mutating func decode(_ type: Double.Type) throws -> Double { try read(JSONValueDecoder.double) }
        mutating func decode(_ type: Float.Type) throws -> Float { Float(try read(JSONValueDecoder.double)) }
        mutating func decode(_ type: Int.Type) throws -> Int { try read { try JSONValueDecoder.integer(type, $0, $1) } }
        mutating func decode(_ type: Int8.Type) throws -> Int8 { try read { try JSONValueDecoder.integer(type, $0, $1) } }
        mutating func decode(_ type: Int16.Type) throws -> Int16 { try read { try JSONValueDecoder.integer(type, $0, $1) } }
        mutating func decode(_ type: Int32.Type) throws -> Int32 { try read { try JSONValueDecoder.integer(type, $0, $1) } }
        mutating func decode(_ type: Int64.Type) throws -> Int64 { try read { try JSONValueDecoder.integer(type, $0, $1) } }
        mutating func decode(_ type: UInt.Type) throws -> UInt { try read { try JSONValueDecoder.integer(type, $0, $1) } }
        mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try read { try JSONValueDecoder.integer(type, $0, $1) } }
        mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try read { try JSONValueDecoder.integer(type, $0, $1) } }
        mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try read { try JSONValueDecoder.integer(type, $0, $1) } }
        mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try read { try JSONValueDecoder.integer(type, $0, $1) } }
        mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
            let userInfo = userInfo
            return try read { try JSONValueDecoder.decode(type, $0, $1, userInfo) }
        }

        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
            let userInfo = userInfo
            return try read { try JSONValueDecoder($0, codingPath: $1, userInfo: userInfo).container(keyedBy: type) }
        }

        mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
            let userInfo = userInfo
            return try read { try JSONValueDecoder($0, codingPath: $1, userInfo: userInfo).unkeyedContainer() }
        }

        mutating func superDecoder() throws -> any Decoder {
            let userInfo = userInfo
            return try read { JSONValueDecoder($0, codingPath: $1, userInfo: userInfo) }
        }
    }

    /// An array item's place in a coding path (`widgets[2]`).
    struct IndexKey: CodingKey {
        let intValue: Int?
        var stringValue: String { "Index \(intValue ?? 0)" }
        init(_ index: Int) { intValue = index }
        init?(stringValue: String) { nil }
        init?(intValue: Int) { self.intValue = intValue }
    }
}
