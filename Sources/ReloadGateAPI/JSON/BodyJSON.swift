public import Foundation

/// How every body of the gateway's APIs is written and read: one encoder (sorted keys, slashes as they
/// are) and a decoder whose failures are the API's refusals, with the same messages as the fields'
/// own checks (BodyFields.swift).
public enum BodyJSON {
    /// Sorted keys, `/` unescaped: the admin API's answers byte for byte as they were written with
    /// `JSONSerialization` before they were types.
    public static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()

    /// `value` as JSON bytes.
    public static func encode(_ value: some Encodable) throws -> Data {
        try encoder.encode(value)
    }

    /// A request body as `Body`: an empty body or text that is not JSON is `400 invalid-json` saying where
    /// it stops being JSON, JSON that is not an object is `400 invalid-json`, a field of the wrong type is
    /// `422 invalid-field` naming it (a type's own ``APIError`` from its `init(from:)` passes through as it
    /// is). The text is read by ``JSONParser`` and the type by its `init(from:)` over ``JSONValueDecoder``.
    public static func decode<Body: Decodable>(
        _ type: Body.Type,
        from data: Data,
        userInfo: [CodingUserInfoKey: any Sendable] = [:]
    ) throws(APIError) -> Body {
        let value = try parse(data)
        do {
            return try JSONValueDecoder.decode(type, value, [], userInfo)
        } catch let error as APIError {
            throw error
        } catch let error as DecodingError {
            throw refusal(error)
        } catch {
            throw .invalidJSON("the body is not JSON")
        }
    }

    /// `data` parsed by ``JSONParser``: an empty body, or text that is not JSON, is `400 invalid-json`
    /// saying where it stops being JSON.
    public static func parse(_ data: Data) throws(APIError) -> JSONValue {
        guard !data.isEmpty else { throw .invalidJSON("the body is empty; a JSON object is expected") }
        do {
            return try JSONParser.parse(data)
        } catch {
            throw .invalidJSON("the body is not JSON: \(error)")
        }
    }

    /// A ``DecodingError`` as the refusal the API gives.
    static func refusal(_ error: DecodingError) -> APIError {
        switch error {
        case .dataCorrupted(let context) where context.codingPath.isEmpty:
            return .invalidJSON("the body is not JSON")
        case .typeMismatch(_, let context) where context.codingPath.isEmpty, .valueNotFound(_, let context) where context.codingPath.isEmpty:
            // `null`, an array, a string or a number where the body's object should be.
            return .invalidJSON("the body must be a JSON object")
        case .typeMismatch(let type, let context), .valueNotFound(let type, let context):
            return .invalidField("\(path(context.codingPath)) must be \(article(type))")
        case .keyNotFound(let key, let context):
            return .invalidField("\(path(context.codingPath + [key])) must be given")
        case .dataCorrupted(let context):
            return .invalidField("\(path(context.codingPath)): \(context.debugDescription)")
        @unknown default:
            return .invalidJSON("the body is not JSON")
        }
    }

    /// `widgets[2].family` from a decoder's coding path.
    static func path(_ keys: [any CodingKey]) -> String {
        var text = ""
        for key in keys {
            if let index = key.intValue {
                text += "[\(index)]"
            } else {
                text += text.isEmpty ? key.stringValue : "." + key.stringValue
            }
        }
        return text
    }

    static func article(_ type: Any.Type) -> String {
        let name = String(describing: type)
        switch type {
        case is String.Type: return "a string"
        case is Bool.Type: return "true or false"
        case is Double.Type, is Int.Type, is Int64.Type: return "a number"
        default:
            if name.hasPrefix("Dictionary") { return "an object" }
            if name.hasPrefix("Array") { return "an array" }
            return "a value of the field's type"
        }
    }
}
