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
        var bytes: [UInt8] = []
        bytes.reserveCapacity(2 + values.count * 12)
        bytes.append(UInt8(ascii: "["))
        var digits: [UInt8] = Array(repeating: 0, count: 20)
        for (index, value) in values.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            var magnitude = value.magnitude
            if value < 0 { bytes.append(UInt8(ascii: "-")) }
            var count = 0
            repeat {
                digits[count] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
                count += 1
            } while magnitude > 0
            while count > 0 {
                count -= 1
                bytes.append(digits[count])
            }
        }
        bytes.append(UInt8(ascii: "]"))
        return String(decoding: bytes, as: UTF8.self)
    }
}
