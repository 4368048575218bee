extension UInt8 {
    /// An ASCII hexadecimal digit, in either case (`0-9`, `a-f`, `A-F`): what a device token and a UUID
    /// are written in.
    @inlinable
    public var isASCIIHexDigit: Bool {
        switch self {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"), UInt8(ascii: "A")...UInt8(ascii: "F"): true
        default: false
        }
    }
}
