extension String {
    /// `lowercased()`, returning the text itself when nothing in it would change: ASCII with no upper-case
    /// letter (an `apns-id` or a token as senders and the gateway write them). Any other text is
    /// `lowercased()`. Used where every push lower-cases an id, which is nearly always lower case already.
    public var lowercasedIfNeeded: String {
        var text = self
        let unchanged = text.withUTF8 { bytes in
            bytes.allSatisfy { $0 < 0x80 && !(UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) }
        }
        return unchanged ? text : text.lowercased()
    }
}
