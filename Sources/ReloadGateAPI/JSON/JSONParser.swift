/// RFC 8259 JSON, UTF-8 bytes to a ``JSONValue``: the first half of reading a request body
/// (``BodyJSON/decode(_:from:userInfo:)``; ``JSONValueDecoder`` is the second).
///
/// Written by hand because Foundation's `JSONDecoder` took 4.3 us to read the webhook's usual three-field
/// body into a synthesized `Decodable` struct with no checks on this project's machines; this parser reads
/// it in 0.6 us, and the body with every check of its `init(from:)` takes 2.6 us (decision 0097).
///
/// Strict where JSON is strict, and as `JSONDecoder` was where the text is valid:
/// - a leading zero, `.5`, a raw control character in a string, an unpaired `\uD800` surrogate, invalid
///   UTF-8 and a byte after the value are refused;
/// - one comma before an array's or an object's end is let through (`[1,]`), as Foundation's parsers do;
/// - only UTF-8 is read (RFC 8259 section 8.1); a leading byte-order mark is skipped;
/// - a key given twice keeps its first value, as `JSONDecoder` did;
/// - at most ``depthLimit`` arrays and objects inside each other;
/// - a number without a fraction or exponent that fits 64 bits is an ``JSONValue/integer(_:)``, any other
///   a ``JSONValue/number(_:)``, which may be infinite (`1e400`): whoever reads it as a number refuses it
///   by the field's name.
public struct JSONParser: ~Copyable {
    /// Most arrays and objects inside each other, as `JSONDecoder`'s limit.
    public static let depthLimit = 512
    /// The reason of the refusal of a text nested deeper than ``depthLimit``.
    public static let tooDeep = "more than \(depthLimit) arrays and objects inside each other"

    /// Text that is not JSON: where it stops being JSON, and why.
    public struct SyntaxError: Error, Equatable, CustomStringConvertible {
        /// The byte offset at which the text stopped being JSON.
        public var offset: Int
        public var reason: String
        public var description: String { "\(reason) at byte \(offset)" }
    }

    private let bytes: UnsafeBufferPointer<UInt8>
    private var index = 0
    private var depth = 0

    private init(_ bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    /// The one JSON value `bytes` hold, with nothing but whitespace after it.
    public static func parse(_ bytes: some Collection<UInt8>) throws(SyntaxError) -> JSONValue {
        let parsed: Result<JSONValue, SyntaxError>? = bytes.withContiguousStorageIfAvailable { buffer in
            Result { () throws(SyntaxError) in try parse(buffer: buffer) }
        }
        if let parsed { return try parsed.get() }
        return try Array(bytes).withUnsafeBufferPointer { buffer throws(SyntaxError) in try parse(buffer: buffer) }
    }

    private static func parse(buffer: UnsafeBufferPointer<UInt8>) throws(SyntaxError) -> JSONValue {
        var parser = JSONParser(buffer)
        if buffer.starts(with: [0xEF, 0xBB, 0xBF]) { parser.index = 3 }
        let value = try parser.value()
        parser.skipWhitespace()
        guard parser.index == buffer.count else { throw parser.failure("text after the value") }
        return value
    }

    private func failure(_ reason: String) -> SyntaxError { SyntaxError(offset: index, reason: reason) }

    private var current: UInt8? { index < bytes.count ? bytes[index] : nil }

    private mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case UInt8(ascii: " "), UInt8(ascii: "\n"), UInt8(ascii: "\r"), UInt8(ascii: "\t"): index += 1
            default: return
            }
        }
    }

    private mutating func value() throws(SyntaxError) -> JSONValue {
        skipWhitespace()
        guard let byte = current else { throw failure("a value was expected") }
        switch byte {
        case UInt8(ascii: "{"): return try object()
        case UInt8(ascii: "["): return try array()
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"): try word("true"); return .bool(true)
        case UInt8(ascii: "f"): try word("false"); return .bool(false)
        case UInt8(ascii: "n"): try word("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try number()
        default: throw failure("a value was expected")
        }
    }

    private mutating func word(_ text: StaticString) throws(SyntaxError) {
        let count = text.utf8CodeUnitCount
        guard bytes.count - index >= count, (0..<count).allSatisfy({ bytes[index + $0] == text.utf8Start[$0] }) else {
            throw failure("a value was expected")
        }
        index += count
    }

    private mutating func nest() throws(SyntaxError) {
        depth += 1
        guard depth <= Self.depthLimit else { throw failure(Self.tooDeep) }
    }

    /// Whether the next byte after whitespace is `bracket`, the end of the array or object being read;
    /// if so, past it.
    private mutating func closes(_ bracket: UInt8) -> Bool {
        skipWhitespace()
        guard current == bracket else { return false }
        index += 1
        depth -= 1
        return true
    }

    private mutating func object() throws(SyntaxError) -> JSONValue {
        try nest()
        index += 1  // {
        var fields: [String: JSONValue] = [:]
        if closes(UInt8(ascii: "}")) { return .object(fields) }
        while true {
            skipWhitespace()
            guard current == UInt8(ascii: "\"") else { throw failure("a field name in quotes was expected") }
            let key = try string()
            skipWhitespace()
            guard current == UInt8(ascii: ":") else { throw failure("':' was expected after a field name") }
            index += 1
            let value = try value()
            if fields[key] == nil { fields[key] = value }  // the first of a repeated key, as JSONDecoder
            if closes(UInt8(ascii: "}")) { return .object(fields) }
            guard current == UInt8(ascii: ",") else { throw failure("',' or '}' was expected") }
            index += 1
            if closes(UInt8(ascii: "}")) { return .object(fields) }  // after a trailing comma
        }
    }

    private mutating func array() throws(SyntaxError) -> JSONValue {
        try nest()
        index += 1  // [
        var items: [JSONValue] = []
        if closes(UInt8(ascii: "]")) { return .array(items) }
        while true {
            items.append(try value())
            if closes(UInt8(ascii: "]")) { return .array(items) }
            guard current == UInt8(ascii: ",") else { throw failure("',' or ']' was expected") }
            index += 1
            if closes(UInt8(ascii: "]")) { return .array(items) }  // after a trailing comma
        }
    }

    /// A string from its opening quote: the bytes up to the closing one, unescaped, as valid UTF-8.
    private mutating func string() throws(SyntaxError) -> String {
        index += 1  // "
        let start = index
        // Most strings have no escape: their bytes are the string.
        var ascii = true
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                let string = try Self.utf8(UnsafeBufferPointer(rebasing: bytes[start..<index]), ascii: ascii, at: start)
                index += 1
                return string
            }
            ascii = ascii && byte < 0x80
            if byte == UInt8(ascii: "\\") { break }
            guard byte >= 0x20 else { throw failure("a control character in a string") }
            index += 1
        }
        var unescaped = Array(bytes[start..<index])
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                let string = try unescaped.withUnsafeBufferPointer { text throws(SyntaxError) in try Self.utf8(text, ascii: false, at: start) }
                index += 1
                return string
            case UInt8(ascii: "\\"):
                index += 1
                guard let escaped = current else { break }
                index += 1
                switch escaped {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): unescaped.append(escaped)
                case UInt8(ascii: "b"): unescaped.append(0x08)
                case UInt8(ascii: "f"): unescaped.append(0x0C)
                case UInt8(ascii: "n"): unescaped.append(0x0A)
                case UInt8(ascii: "r"): unescaped.append(0x0D)
                case UInt8(ascii: "t"): unescaped.append(0x09)
                case UInt8(ascii: "u"): unescaped.append(contentsOf: try unicodeEscape().utf8)
                default:
                    index -= 1
                    throw failure("an unknown escape in a string")
                }
            default:
                guard byte >= 0x20 else { throw failure("a control character in a string") }
                unescaped.append(byte)
                index += 1
            }
        }
        throw failure("a string without its closing quote")
    }

    /// `text` as a string if it is UTF-8. (`String(validating:as:)` is generic and not specialized in the
    /// standard library: it looked up type metadata for every string, a third of a body's parse.)
    private static func utf8(_ text: UnsafeBufferPointer<UInt8>, ascii: Bool, at offset: Int) throws(SyntaxError) -> String {
        let string = String(decoding: text, as: UTF8.self)
        // Decoding replaces what is not UTF-8 with U+FFFD, so the text was UTF-8 when it comes back whole.
        guard ascii || string.utf8.elementsEqual(text) else { throw SyntaxError(offset: offset, reason: "a string that is not UTF-8") }
        return string
    }

    /// The character of a `\uXXXX` escape (after its `\u`), a surrogate pair's two escapes as one.
    private mutating func unicodeEscape() throws(SyntaxError) -> String {
        let first = try hexQuad()
        var scalar: Unicode.Scalar?
        switch first {
        case 0xD800...0xDBFF:
            guard bytes.count - index >= 2, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else { break }
            index += 2
            let second = try hexQuad()
            guard (0xDC00...0xDFFF).contains(second) else { break }
            scalar = Unicode.Scalar(0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00))
        default:
            scalar = Unicode.Scalar(first)  // nil for an unpaired low surrogate
        }
        guard let scalar else { throw failure("a \\u escape of an unpaired surrogate") }
        return String(Character(scalar))
    }

    private mutating func hexQuad() throws(SyntaxError) -> UInt32 {
        guard bytes.count - index >= 4 else { throw failure("a \\u escape needs four hex digits") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw failure("a \\u escape needs four hex digits")
            }
            value = value << 4 | UInt32(digit)
            index += 1
        }
        return value
    }

    /// A number by JSON's grammar: `-`, then `0` or digits not starting with `0`, then an optional fraction
    /// and exponent.
    private mutating func number() throws(SyntaxError) -> JSONValue {
        let start = index
        if current == UInt8(ascii: "-") { index += 1 }
        guard let first = current, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first) else { throw failure("a digit was expected") }
        index += 1
        if first != UInt8(ascii: "0") { skipDigits() }
        var whole = true
        if current == UInt8(ascii: ".") {
            whole = false
            index += 1
            guard digitsFollow() else { throw failure("a digit was expected after '.'") }
        }
        if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
            whole = false
            index += 1
            if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { index += 1 }
            guard digitsFollow() else { throw failure("a digit was expected in an exponent") }
        }
        let text = UnsafeBufferPointer(rebasing: bytes[start..<index])
        if whole, let integer = Self.integer(text) { return .integer(integer) }
        // The grammar above is a subset of what Double's parser reads, so this does not fail; beyond a
        // double's range it gives infinity.
        guard let double = Double(String(decoding: text, as: UTF8.self)) else { throw SyntaxError(offset: start, reason: "a number out of range") }
        return .number(double)
    }

    private mutating func skipDigits() {
        while let byte = current, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) { index += 1 }
    }

    private mutating func digitsFollow() -> Bool {
        guard let byte = current, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return false }
        skipDigits()
        return true
    }

    /// An optional minus and decimal digits as an Int64, or nil when it does not fit.
    private static func integer(_ text: UnsafeBufferPointer<UInt8>) -> Int64? {
        let negative = text.first == UInt8(ascii: "-")
        var value: Int64 = 0
        for byte in text.dropFirst(negative ? 1 : 0) {
            let digit = Int64(byte - UInt8(ascii: "0"))
            // Accumulated as a negative number, whose range is one larger.
            let (times, overflowA) = value.multipliedReportingOverflow(by: 10)
            let (next, overflowB) = times.subtractingReportingOverflow(digit)
            guard !overflowA, !overflowB else { return nil }
            value = next
        }
        if negative { return value }
        return value == .min ? nil : -value
    }
}
