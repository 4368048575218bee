import Foundation
import Hummingbird
import NIOCore
import ReloadGateCore

/// A JSON object read from a request body within a size limit, with typed accessors whose errors name
/// the field (`widgets[2].family must be one of ...`).
struct JSONBody {
    let object: [String: Any]

    /// Reads at most `limit` bytes; a larger body is refused while reading, not after.
    static func read(_ request: Request, limit: Int) async throws -> JSONBody {
        let buffer: ByteBuffer
        do {
            buffer = try await request.body.collect(upTo: limit)
        } catch is NIOTooManyBytesError {
            throw APIError.tooLarge(limit)
        }
        return try parse(Data(buffer.readableBytesView))
    }

    /// Parses a body already read (the webhook reads the bytes first to check their signature).
    static func parse(_ data: Data) throws -> JSONBody {
        guard !data.isEmpty else { throw APIError.invalidJSON("the body is empty; a JSON object is expected") }
        let parsed: Any
        do {
            parsed = try JSONSerialization.jsonObject(with: data, options: [])
        } catch {
            throw APIError.invalidJSON("the body is not JSON")
        }
        guard let object = parsed as? [String: Any] else { throw APIError.invalidJSON("the body must be a JSON object") }
        return JSONBody(object: object)
    }

    static func string(_ value: Any?, _ path: String) throws -> String {
        guard let text = value as? String else { throw APIError.invalidField("\(path) must be a string") }
        return text
    }

    static func optionalString(_ value: Any?, _ path: String) throws -> String? {
        guard let value, !(value is NSNull) else { return nil }
        return try string(value, path)
    }

    static func bool(_ value: Any?, _ path: String, default defaultValue: Bool) throws -> Bool {
        guard let value, !(value is NSNull) else { return defaultValue }
        guard let number = value as? NSNumber, isBoolean(number) else {
            throw APIError.invalidField("\(path) must be true or false")
        }
        return number.boolValue
    }

    static func array(_ value: Any?, _ path: String) throws -> [Any] {
        guard let array = value as? [Any] else { throw APIError.invalidField("\(path) must be an array") }
        return array
    }

    static func object(_ value: Any?, _ path: String) throws -> [String: Any] {
        guard let object = value as? [String: Any] else { throw APIError.invalidField("\(path) must be an object") }
        return object
    }

    /// JSONSerialization gives booleans and numbers both as NSNumber; a boolean's type code is `c`.
    static func isBoolean(_ number: NSNumber) -> Bool {
        String(cString: number.objCType) == "c"
    }

    /// A flat object of strings, numbers and booleans.
    static func configuration(_ value: Any?, _ path: String) throws -> WidgetConfiguration {
        guard let value, !(value is NSNull) else { return WidgetConfiguration() }
        let object = try object(value, path)
        var values: [String: WidgetConfiguration.Value] = [:]
        for (key, item) in object {
            values[key] = try configurationValue(item, "\(path).\(key)")
        }
        return WidgetConfiguration(values)
    }

    static func configurationValue(_ value: Any, _ path: String) throws -> WidgetConfiguration.Value {
        if let text = value as? String { return .string(text) }
        if let number = value as? NSNumber {
            if isBoolean(number) { return .bool(number.boolValue) }
            return .number(number.doubleValue)
        }
        if let flag = value as? Bool { return .bool(flag) }
        throw APIError.invalidField("\(path) must be a string, a number or a boolean (configurations are flat)")
    }

    /// A date: RFC 3339 text (`2026-11-22T14:00:00Z`, fractions allowed) or UNIX seconds.
    static func date(_ value: Any?, _ path: String) throws -> Timestamp {
        if let number = value as? NSNumber, !isBoolean(number) {
            return Timestamp(milliseconds: Int64((number.doubleValue * 1000).rounded()))
        }
        if let text = value as? String {
            if let date = try? Date(text, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true)) {
                return Timestamp(milliseconds: Int64((date.timeIntervalSince1970 * 1000).rounded()))
            }
            if let date = try? Date(text, strategy: .iso8601) {
                return Timestamp(milliseconds: Int64((date.timeIntervalSince1970 * 1000).rounded()))
            }
        }
        throw APIError.invalidField("\(path) must be an RFC 3339 date (2026-11-22T14:00:00Z) or UNIX seconds")
    }
}
