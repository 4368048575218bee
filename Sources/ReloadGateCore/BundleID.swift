/// An app's bundle identifier, such as `com.example.scores`.
///
/// Parsed once at the edge (configuration, certificates, request paths); inside the gateway a `BundleID`
/// is known to be well formed: 1 to 155 characters of ASCII letters, digits, `-` and `.`, made of
/// non-empty dot-separated parts.
public struct BundleID: Hashable, Sendable, Comparable, CustomStringConvertible {
    /// The identifier as written, for example `com.example.scores`.
    public let rawValue: String

    /// The longest identifier accepted. Apple's own limit is 155 characters.
    public static let maximumLength = 155

    /// Parses a bundle identifier.
    /// - Throws: ``BundleID/ParseError`` naming what is wrong with `text`.
    public init(_ text: String) throws(ParseError) {
        guard !text.isEmpty else { throw .empty }
        guard text.utf8.count <= Self.maximumLength else { throw .tooLong(text.utf8.count) }
        // One pass over the bytes in place (every push's topic is parsed): a character error wins over an
        // empty part wherever they are.
        let dot = UInt8(ascii: ".")
        var text = text
        // The first byte that is not a letter, a digit, `-` or `.`; then whether a part is empty.
        let (invalid, emptyComponent) = text.withUTF8 { bytes -> (UInt8?, Bool) in
            var previous = dot  // a leading dot makes an empty first part
            var emptyComponent = false
            for byte in bytes {
                switch byte {
                case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                    UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"):
                    break
                case dot:
                    if previous == dot { emptyComponent = true }
                default:
                    return (byte, emptyComponent)
                }
                previous = byte
            }
            return (nil, emptyComponent || previous == dot)
        }
        if let invalid { throw .invalidCharacter(Character(Unicode.Scalar(invalid))) }
        guard !emptyComponent else { throw .emptyComponent }
        self.rawValue = text
    }

    /// The APNs topic of widget pushes for this app: `<bundle>.push-type.widgets`.
    public var widgetsTopic: String { topic(for: .widgets) }

    /// The APNs topic of pushes of `pushType` for this app: the bundle and the type's topic suffix.
    public func topic(for pushType: PushType) -> String { rawValue + pushType.topicSuffix }

    public var description: String { rawValue }

    public static func < (lhs: BundleID, rhs: BundleID) -> Bool { lhs.rawValue < rhs.rawValue }

    /// Why a text is not a bundle identifier.
    public enum ParseError: Error, Equatable, CustomStringConvertible {
        case empty
        case tooLong(Int)
        case invalidCharacter(Character)
        case emptyComponent

        public var description: String {
            switch self {
            case .empty: "a bundle identifier cannot be empty"
            case .tooLong(let count): "a bundle identifier has at most \(BundleID.maximumLength) characters, not \(count)"
            case .invalidCharacter(let character):
                "a bundle identifier holds only letters, digits, '-' and '.', not \(String(reflecting: String(character)))"
            case .emptyComponent: "a bundle identifier cannot start or end with '.' or contain '..'"
            }
        }
    }
}
