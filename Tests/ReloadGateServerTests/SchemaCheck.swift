import Foundation

/// Checks a JSON value against a schema of the OpenAPI document (JSON Schema 2020-12 as OpenAPI 3.1
/// uses it), for the keywords the document uses. A keyword it does not know is a problem too, so that
/// a schema it cannot read never passes by being skipped.
struct SchemaCheck {
    /// `components/schemas` of the document.
    let schemas: [String: Any]

    /// Keywords that only describe (no rule to check).
    static let annotations: Set<String> = ["description", "default", "example", "examples", "title"]

    /// What is wrong with `value` at `path` (empty: it conforms).
    func problems(_ value: Any, against schema: Any, at path: String = "$") -> [String] {
        // A boolean schema: `true` takes every value, `false` none (`then: false` forbids what `if` matches).
        if let boolean = schema as? NSNumber, Self.isBoolean(boolean) {
            return boolean.boolValue ? [] : ["\(path): \(Self.describe(value)) is not allowed here"]
        }
        guard let schema = schema as? [String: Any] else { return ["\(path): the schema is not an object"] }
        var problems: [String] = []
        for (keyword, rule) in schema {
            switch keyword {
            case _ where Self.annotations.contains(keyword):
                continue
            case "$ref":
                guard let reference = rule as? String, reference.hasPrefix("#/components/schemas/"),
                    let target = schemas[String(reference.dropFirst("#/components/schemas/".count))]
                else {
                    problems.append("\(path): unknown $ref \(rule)")
                    continue
                }
                problems += self.problems(value, against: target, at: path)
            case "type":
                let allowed = (rule as? [String]) ?? [(rule as? String) ?? "?"]
                if !allowed.contains(where: { Self.has(value, type: $0) }) {
                    problems.append("\(path): \(Self.describe(value)) is not \(allowed.joined(separator: " or "))")
                }
            case "enum":
                let options = (rule as? [Any]) ?? []
                if !options.contains(where: { Self.equal($0, value) }) { problems.append("\(path): \(Self.describe(value)) is not one of \(options)") }
            case "required":
                guard let object = value as? [String: Any] else { continue }
                for name in (rule as? [String]) ?? [] where object[name] == nil { problems.append("\(path): \(name) is missing") }
            case "properties":
                guard let object = value as? [String: Any], let properties = rule as? [String: Any] else { continue }
                for (name, propertySchema) in properties {
                    if let item = object[name] { problems += self.problems(item, against: propertySchema, at: "\(path).\(name)") }
                }
            case "additionalProperties":
                guard let object = value as? [String: Any] else { continue }
                let named = Set(((schema["properties"] as? [String: Any]) ?? [:]).keys)
                for (name, item) in object where !named.contains(name) {
                    if let allowed = rule as? Bool {
                        if !allowed { problems.append("\(path): \(name) is not in the schema") }
                    } else {
                        problems += self.problems(item, against: rule, at: "\(path).\(name)")
                    }
                }
            case "items":
                guard let array = value as? [Any] else { continue }
                for (index, item) in array.enumerated() { problems += self.problems(item, against: rule, at: "\(path)[\(index)]") }
            case "minItems", "maxItems":
                guard let array = value as? [Any], let bound = rule as? Int else { continue }
                if keyword == "minItems" ? array.count < bound : array.count > bound { problems.append("\(path): \(array.count) items (\(keyword) \(bound))") }
            case "minimum", "maximum":
                guard let number = value as? NSNumber, !Self.isBoolean(number), let bound = (rule as? NSNumber)?.doubleValue else { continue }
                if keyword == "minimum" ? number.doubleValue < bound : number.doubleValue > bound { problems.append("\(path): \(number) (\(keyword) \(bound))") }
            case "minLength", "maxLength":
                // JSON Schema counts characters as Unicode scalars.
                guard let text = value as? String, let bound = rule as? Int else { continue }
                let count = text.unicodeScalars.count
                if keyword == "minLength" ? count < bound : count > bound { problems.append("\(path): \(count) characters (\(keyword) \(bound))") }
            case "const":
                if !Self.equal(rule, value) { problems.append("\(path): \(Self.describe(value)) is not \(rule)") }
            case "not":
                if self.problems(value, against: rule, at: path).isEmpty { problems.append("\(path): \(Self.describe(value)) matches what `not` excludes") }
            case "if":
                let branch = self.problems(value, against: rule, at: path).isEmpty ? schema["then"] : schema["else"]
                if let branch { problems += self.problems(value, against: branch, at: path) }
            case "then", "else":
                continue  // read with `if`
            case "pattern":
                guard let text = value as? String, let pattern = rule as? String else { continue }
                if text.range(of: pattern, options: .regularExpression) == nil { problems.append("\(path): \(text) does not match \(pattern)") }
            case "format":
                guard let text = value as? String, (rule as? String) == "date-time" else { continue }
                if (try? Date(text, strategy: .iso8601)) == nil, (try? Date(text, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true))) == nil {
                    problems.append("\(path): \(text) is not an RFC 3339 time")
                }
            case "oneOf", "anyOf":
                let options = (rule as? [Any]) ?? []
                let matching = options.filter { self.problems(value, against: $0, at: path).isEmpty }.count
                if keyword == "oneOf" ? matching != 1 : matching == 0 {
                    problems.append("\(path): \(Self.describe(value)) matches \(matching) of the \(keyword) options")
                }
            case "allOf":
                for option in (rule as? [Any]) ?? [] { problems += self.problems(value, against: option, at: path) }
            default:
                problems.append("\(path): the check does not know the keyword \(keyword)")
            }
        }
        return problems
    }

    static func isBoolean(_ number: NSNumber) -> Bool { String(cString: number.objCType) == "c" }

    static func has(_ value: Any, type: String) -> Bool {
        switch type {
        case "null": return value is NSNull
        case "boolean": return (value as? NSNumber).map(isBoolean) ?? false
        case "number": return (value as? NSNumber).map { !isBoolean($0) } ?? false
        case "integer":
            guard let number = value as? NSNumber, !isBoolean(number) else { return false }
            return number.doubleValue.rounded(.towardZero) == number.doubleValue
        case "string": return value is String
        case "array": return value is [Any]
        case "object": return value is [String: Any]
        default: return false
        }
    }

    static func equal(_ left: Any, _ right: Any) -> Bool {
        switch (left, right) {
        case (let left as String, let right as String): left == right
        case (let left as NSNumber, let right as NSNumber): left == right
        case (is NSNull, is NSNull): true
        default: false
        }
    }

    static func describe(_ value: Any) -> String {
        (try? JSONSerialization.data(withJSONObject: value, options: [.fragmentsAllowed, .sortedKeys]))
            .map { String(decoding: $0.prefix(120), as: UTF8.self) } ?? "\(value)"
    }
}
