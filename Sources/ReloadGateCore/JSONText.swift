/// Small JSON text helpers for the places that write JSON by hand (canonical configurations, log
/// lines), where the output must be byte-for-byte stable.
public enum JSONText {
    /// `text` as a JSON string literal, with quotes, backslashes and control characters escaped
    /// (backspace and form feed as `\u0008` and `\u000c`, as canonical configurations have always been
    /// stored).
    public static func quoted(_ text: String) -> String { quoted(text, shortEscapes: false) }

    /// `text` as `JSONEncoder` writes a string (backspace and form feed as `\b` and `\f`), for answers
    /// that must be the encoder's bytes.
    public static func encoderQuoted(_ text: String) -> String { quoted(text, shortEscapes: true) }

    private static func quoted(_ text: String, shortEscapes: Bool) -> String {
        var result = ""
        result.reserveCapacity(text.utf8.count + 2)
        append(quoted: text, shortEscapes: shortEscapes, to: &result)
        return result
    }

    /// Appends `text` as a JSON string literal (``quoted(_:)``'s bytes) to `result`, for a writer that
    /// builds one text from many strings without a string for each.
    static func append(quoted text: String, to result: inout String) {
        append(quoted: text, shortEscapes: false, to: &result)
    }

    /// Appends `text` as ``encoderQuoted(_:)`` writes it to `result`.
    public static func append(encoderQuoted text: String, to result: inout String) {
        append(quoted: text, shortEscapes: true, to: &result)
    }

    private static func append(quoted text: String, shortEscapes: Bool, to result: inout String) {
        // Most text (tokens in hex, ids, kinds) has nothing to escape: one pass over its bytes, and the
        // quotes put around it whole, instead of appending it scalar by scalar.
        if !text.utf8.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) {
            result += "\""
            result += text
            result += "\""
            return
        }
        result += "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\t": result += "\\t"
            case "\u{8}" where shortEscapes: result += "\\b"
            case "\u{c}" where shortEscapes: result += "\\f"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                result += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: result.unicodeScalars.append(scalar)
            }
        }
        result += "\""
    }
}
