/// An APNs device token: 64 to 200 hexadecimal digits (docs/APNS.md, `BadDeviceToken`), kept in lower case.
public struct DeviceToken: Hashable, Sendable, CustomStringConvertible {
    /// The token in lower-case hex.
    public let hex: String

    /// Parses a token, accepting either case.
    /// - Throws: ``ParseError`` when it is not 64 to 200 hex digits.
    public init(_ text: String) throws(ParseError) {
        guard (64...200).contains(text.utf8.count) else { throw .length(text.utf8.count) }
        // Over the bytes in place: every push, registration and delivery reads a token. A token in lower
        // case (as apps send them, and as every stored one is) is kept as given, without a copy.
        var text = text
        guard text.withUTF8({ $0.allSatisfy(\.isASCIIHexDigit) }) else { throw .notHex }
        hex = text.lowercasedIfNeeded
    }

    /// The first 8 digits and an ellipsis: what logs show (docs/DESIGN.md, Security).
    public var shortened: String { String(hex.prefix(8)) + "…" }

    public var description: String { shortened }

    /// Why a text is not a device token.
    public enum ParseError: Error, Equatable, CustomStringConvertible {
        case length(Int)
        case notHex

        public var description: String {
            switch self {
            case .length(let count): "a device token has 64 to 200 hexadecimal digits, not \(count) characters"
            case .notHex: "a device token holds only hexadecimal digits"
            }
        }
    }
}
