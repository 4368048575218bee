extension UnsafeMutableBufferPointer<UInt8> {
    /// Writes `value`'s decimal digits from `end` and moves `end` past them (20 bytes at most; the caller
    /// makes the room). The texts built byte by byte (a stored integer list, the webhook's `202`) write
    /// their numbers with it.
    @inlinable
    public func writeDecimal(_ value: UInt64, at end: inout Int) {
        // The digits are written backwards from where the number ends, then it ends there.
        end += UInt64.decimalDigitCount(value)
        var position = end
        var magnitude = value
        repeat {
            position -= 1
            self[position] = UInt8(ascii: "0") + UInt8(magnitude % 10)
            magnitude /= 10
        } while magnitude > 0
    }
}

extension UInt64 {
    /// How many decimal digits `value` has (1 for 0): what ``Swift/UnsafeMutableBufferPointer/writeDecimal(_:at:)``
    /// writes for it.
    @inlinable
    public static func decimalDigitCount(_ value: UInt64) -> Int {
        var digits = 1
        var rest = value / 10
        while rest > 0 {
            digits += 1
            rest /= 10
        }
        return digits
    }
}
