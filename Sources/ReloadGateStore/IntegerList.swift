import ReloadGateCore

/// The integer lists the store keeps as JSON arrays of integers (`[1,2,3]`: request ids, instance ids),
/// on SQLite and PostgreSQL alike.
enum IntegerList {
    /// The integers of `text` (a stored list).
    static func parse(_ text: String) -> [Int64] {
        parse(text.utf8)
    }

    /// The integers of `bytes`, skipping anything else (brackets, commas, spaces); a number that does
    /// not fit an Int64 is left out (the store writes only Int64s, ``text(_:)``).
    static func parse<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> [Int64] {
        var values: [Int64] = []
        var magnitude: UInt64 = 0
        var negative = false
        var digits = false
        var overflow = false
        func end() {
            if digits, !overflow {
                if !negative, let value = Int64(exactly: magnitude) {
                    values.append(value)
                } else if negative, magnitude <= UInt64(Int64.max) + 1 {
                    values.append(magnitude == UInt64(Int64.max) + 1 ? .min : -Int64(magnitude))
                }
            }
            magnitude = 0
            negative = false
            digits = false
            overflow = false
        }
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"):
                let (times, o1) = magnitude.multipliedReportingOverflow(by: 10)
                let (sum, o2) = times.addingReportingOverflow(UInt64(byte - UInt8(ascii: "0")))
                magnitude = sum
                overflow = overflow || o1 || o2
                digits = true
            case UInt8(ascii: "-"):
                end()
                negative = true
            default:
                end()
            }
        }
        end()
        return values
    }

    /// `[1,2,3]`, written digit by digit: every group commit writes such lists for every changed
    /// pending reload (up to 100 ids each), and `map(String.init).joined` showed up in profiles.
    static func text(_ values: [Int64]) -> String {
        withText(values, count: values.count) { String(decoding: $0, as: UTF8.self) }
    }

    /// The most bytes ``text(_:)`` writes for `count` integers: the brackets, and each value's sign and
    /// 19 digits with its comma.
    static func maximumLength(count: Int) -> Int { 2 + count * 21 }

    /// Calls `body` with the bytes of ``text(_:)`` for `values` (of which there are `count`), written into
    /// a temporary buffer: a group commit binds such a list for every delivery and changed pending
    /// reload, and building a `String` (with its byte array and the ids mapped to `Int64` first) made
    /// three to five allocations a row.
    static func withText<Values: Sequence<Int64>, Result>(
        _ values: Values, count: Int, _ body: (UnsafeBufferPointer<UInt8>) throws -> Result
    ) rethrows -> Result {
        try withUnsafeTemporaryAllocation(of: UInt8.self, capacity: maximumLength(count: count)) { buffer in
            let end = write(values, count: count, into: buffer, at: 0)
            return try body(UnsafeBufferPointer(rebasing: buffer[..<end]))
        }
    }

    /// The length in bytes of ``text(_:)`` for `values`.
    static func textLength(_ values: some Collection<Int64>) -> Int {
        var length = 2 + max(0, values.count - 1)
        for value in values {
            length += (value < 0 ? 1 : 0) + UInt64.decimalDigitCount(value.magnitude)
        }
        return length
    }

    /// Writes ``text(_:)`` for `values` (of which there are `count`) into `buffer` from `start` and returns
    /// where it ends: the one writer of the lists' text. `buffer` has room for ``maximumLength(count:)``
    /// bytes from `start`, or for ``textLength(_:)`` of the values.
    static func write<Values: Sequence<Int64>>(
        _ values: Values, count: Int, into buffer: UnsafeMutableBufferPointer<UInt8>, at start: Int
    ) -> Int {
        var end = start
        func put(_ byte: UInt8) {
            buffer[end] = byte
            end += 1
        }
        put(UInt8(ascii: "["))
        var written = 0
        for value in values {
            // A sequence longer than it said is cut at `count`, within the buffer.
            guard written < count else { break }
            if written > 0 { put(UInt8(ascii: ",")) }
            written += 1
            if value < 0 { put(UInt8(ascii: "-")) }
            buffer.writeDecimal(value.magnitude, at: &end)
        }
        put(UInt8(ascii: "]"))
        return end
    }
}
