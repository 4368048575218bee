/// Spellings of numbers that break naive parsing and arithmetic: the ends of `Int64` and one past them,
/// 20-digit strings, `1e300`, negative zero, NaN and infinity in the ways people write them, the ends
/// of the times the gateway accepts. Property tests send them (and random numbers) to every place that
/// takes a number from outside; the fuzz targets' seed corpora start from them.
///
/// Plain text, no test framework: test targets build their generators from it.
public enum HostileNumbers {
    /// Whole numbers at and around the edges of the integer types and of the accepted times.
    public static let integers: [String] = [
        "0", "-0", "1", "-1", "5", "10", "00000000000000000010",
        "2147483647", "2147483648", "-2147483648", "-2147483649", "4294967295", "4294967296",
        "9223372036854775807", "-9223372036854775808", "9223372036854775808", "-9223372036854775809",
        "18446744073709551615", "18446744073709551616", "99999999999999999999", "-99999999999999999999",
        "253402300799", "253402300800", "253402300799999", "253402300800000", "-62135596800",
        "1795538615", "4102444800", "999999999999999999999999999999",
    ]

    /// Numbers with a fraction or an exponent, finite and not.
    public static let decimals: [String] = [
        "0.0", "-0.0", "0.5", "-0.5", "9.5", "10.0", "1795538615.42", "1795538615.999999", "1e300", "-1e300",
        "1e308", "1.7976931348623157e308", "-1.7976931348623157e308", "1e400", "-1e400", "1e-300", "4.9e-324",
        "-1e18", "1e18", "9.223372036854776e18", "-9.223372036854776e18", "2.53402300800e11", "1E3", "1e+3",
    ]

    /// Texts that look like numbers to some parser or person but are not JSON or decimal integers.
    public static let nonNumbers: [String] = [
        "NaN", "nan", "-NaN", "Infinity", "-Infinity", "inf", "-inf", "+Inf", "0x10", "0b1", "1_000", "1,000",
        " 5", "5 ", "+5", "", "-", "--1", "1e", "e1", ".", "1.", ".5", "\u{0661}\u{0662}", "\u{FF11}\u{FF12}", "5\u{0}",
        "true", "null", "[]", "{}", "\"5\"",
    ]

    /// Every spelling above.
    public static let all: [String] = integers + decimals + nonNumbers

    /// Only those that are valid JSON numbers (`1e400` among them: valid JSON, not a finite double).
    public static let jsonNumbers: [String] = (integers + decimals).filter { !$0.hasPrefix("0") || $0 == "0" || $0.hasPrefix("0.") }

    /// A random spelling: an edge case, a random `Int64`, a random finite `Double`, or a run of digits.
    public static func random(using generator: inout some RandomNumberGenerator) -> String {
        switch Int.random(in: 0..<4, using: &generator) {
        case 0: all.randomElement(using: &generator)!
        case 1: String(Int64.random(in: .min ... .max, using: &generator))
        case 2:
            String(Double(sign: Bool.random(using: &generator) ? .minus : .plus,
                          exponent: Int.random(in: -1074...1023, using: &generator),
                          significand: Double.random(in: 1..<2, using: &generator)))
        default:
            String((0..<Int.random(in: 1...40, using: &generator)).map { _ in "0123456789".randomElement(using: &generator)! })
        }
    }
}
