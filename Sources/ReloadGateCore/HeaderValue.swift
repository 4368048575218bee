/// How the gateway's listeners read an HTTP field's value where they share a rule: the bearer credential
/// of an `authorization` field (the APNs listener's provider token, the registry's and the admin API's
/// keys) and HTTP's optional white space around a value. Byte by byte, without copies: these run on
/// every request.
public enum HeaderValue {
    /// What follows `bearer ` (the scheme's name in any case, as HTTP's schemes are: RFC 9110, 11.1) in
    /// an `authorization` field, as sent; `nil` without the field or for another scheme.
    public static func bearerCredential(_ field: String?) -> Substring? {
        guard let field else { return nil }
        let scheme = "bearer ".utf8
        let bytes = field.utf8
        guard bytes.count >= scheme.count,
            zip(bytes, scheme).allSatisfy({ sent, expected in
                sent == expected || ((UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(sent) && sent | 0x20 == expected)
            })
        else { return nil }
        // The scheme is ASCII, so its end is a scalar boundary: a valid place to cut.
        return field[bytes.index(bytes.startIndex, offsetBy: scheme.count)...]
    }

    /// `text` without the spaces and tabs around it (HTTP's optional white space, RFC 9110, 5.6.3).
    public static func trimmed(_ text: Substring) -> Substring {
        Substring(trimmed(text.utf8))
    }

    /// ``trimmed(_:)-(Substring)`` of bytes (ASCII spaces and tabs end at scalar boundaries): a string's
    /// UTF-8 view or a buffer scanned in place.
    @inlinable
    public static func trimmed<Bytes: BidirectionalCollection>(_ bytes: Bytes) -> Bytes.SubSequence where Bytes.Element == UInt8 {
        let isSpace = { (byte: UInt8) in byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
        guard let first = bytes.firstIndex(where: { !isSpace($0) }), let last = bytes.lastIndex(where: { !isSpace($0) }) else {
            return bytes[bytes.endIndex...]
        }
        return bytes[first...last]
    }
}
