/// The rules of RFC 9113 (sections 8.2 and 8.3) for a request's header block, checked field by field
/// in the one pass the APNs listener makes over the fields anyway.
///
/// NIOHTTP2Handler checks the same rules when its header validation is on; the listener turns that off
/// (with its content-length check, which ``IngressHTTP2Handler`` does itself) because for a push it cost
/// about a tenth of an event loop's time: it scans every value, the 200-byte `authorization` among them,
/// through generic string views, and validates every answer the listener writes too
/// (docs/DECISIONS.md, "The listener checks header blocks itself"). A block that breaks a rule is
/// malformed: the stream is reset with PROTOCOL_ERROR, as NIOHTTP2Handler does.
public struct HTTP2RequestFields: Sendable {
    private var method = false
    private var scheme = false
    private var path = false
    private var authority = false
    private var isConnect = false
    private var regularSeen = false
    /// `content-length`, when the request has one.
    public private(set) var contentLength: Int?
    /// A `content-length` that is no number, or a second one with another value.
    private var badContentLength = false

    public init() {}

    /// Checks the next field; `false` when it makes the block malformed.
    public mutating func accept(name: String, value: String) -> Bool {
        guard let first = name.utf8.first else { return false }
        if first == UInt8(ascii: ":") {
            guard !regularSeen, Self.isValidPseudoValue(value) else { return false }
            switch name {
            case ":method":
                guard !method else { return false }
                method = true
                isConnect = value == "CONNECT"
            case ":scheme":
                guard !scheme else { return false }
                scheme = true
            case ":path":
                guard !path, !value.isEmpty else { return false }
                path = true
            case ":authority":
                guard !authority else { return false }
                authority = true
            default:
                return false  // :status, :protocol (extended CONNECT is not offered), unknown ones
            }
            return true
        }
        regularSeen = true
        guard Self.isFieldName(name) else { return false }
        switch name {
        case "connection", "transfer-encoding", "proxy-connection", "keep-alive", "upgrade":
            return false
        case "te":
            return value == "trailers"
        case "content-length":
            guard let length = Int(value), length >= 0, contentLength == nil || contentLength == length else {
                badContentLength = true
                return false
            }
            contentLength = length
        default:
            break
        }
        return Self.isValidValue(value)
    }

    /// Whether the block as a whole holds the pseudo-header fields a request needs (and no others).
    public var isComplete: Bool {
        guard method, !badContentLength else { return false }
        if isConnect { return authority && !scheme && !path }
        return scheme && path
    }

    /// A field name: RFC 9110 `tchar`s, in lower case as HTTP/2 requires.
    private static func isFieldName(_ name: String) -> Bool {
        var name = name
        return name.withUTF8 { bytes in
            bytes.allSatisfy { byte in
                switch byte {
                case 0x21, 0x23...0x27, 0x2A, 0x2B, 0x2D, 0x2E, 0x30...0x39, 0x5E...0x7A, 0x7C, 0x7E: true
                default: false
                }
            }
        }
    }

    /// No control character, space or DEL in a pseudo-header value.
    private static func isValidPseudoValue(_ value: String) -> Bool {
        var value = value
        return value.withUTF8 { bytes in !bytes.contains { $0 <= 0x20 || $0 == 0x7F } }
    }

    /// No NUL, CR or LF in a field value.
    private static func isValidValue(_ value: String) -> Bool {
        var value = value
        return value.withUTF8 { bytes in !bytes.contains { $0 == 0x00 || $0 == 0x0A || $0 == 0x0D } }
    }
}
