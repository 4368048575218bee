import Foundation
@testable import ReloadGateCore
import Testing

struct RegistryValueTests {
    /// A device token's and a UUID's digits: every byte is one exactly when it is an ASCII hex digit.
    @Test func aHexDigitIsOneOf0To9AndAToFInEitherCase() {
        for byte in UInt8.min...UInt8.max {
            #expect(byte.isASCIIHexDigit == (byte < 0x80 && Character(Unicode.Scalar(byte)).isHexDigit), "\(byte)")
        }
    }

    /// `lowercasedIfNeeded` is `lowercased()` for any text; lower-case ASCII comes back as it is.
    @Test func lowercasedIfNeededIsLowercased() {
        for text in ["", "3f2504e0-4f89-11d3-9a0c-0305e82c3301", "3F2504E0-4f89-11D3-9A0C-0305E82C3301", "aBc", "ÉTÉ", "été", "Z", "@[`{"] {
            #expect(text.lowercasedIfNeeded == text.lowercased(), "\(text)")
        }
    }

    @Test func deviceTokensAreHexOf64To200DigitsKeptInLowerCase() throws {
        #expect(try DeviceToken(String(repeating: "AB", count: 32)).hex == String(repeating: "ab", count: 32))
        #expect(try DeviceToken(String(repeating: "0f", count: 31) + "aF").hex == String(repeating: "0f", count: 31) + "af")
        #expect(try DeviceToken(String(repeating: "9c", count: 32)).hex == String(repeating: "9c", count: 32))
        #expect(throws: DeviceToken.ParseError.notHex) { try DeviceToken(String(repeating: "a", count: 63) + "é") }
        #expect(throws: DeviceToken.ParseError.length(62)) { try DeviceToken(String(repeating: "a", count: 62)) }
        #expect(throws: DeviceToken.ParseError.length(202)) { try DeviceToken(String(repeating: "a", count: 202)) }
        #expect(throws: DeviceToken.ParseError.notHex) { try DeviceToken(String(repeating: "g", count: 64)) }
        #expect(try DeviceToken(String(repeating: "0", count: 64)).shortened == "00000000…")
    }

    @Test func configurationsHaveOneCanonicalTextAndMatchByValue() {
        let configuration = WidgetConfiguration(["team": .string("42"), "live": .bool(true), "size": .number(3), "a\"b": .string("x\ny")])
        #expect(configuration.canonicalJSON == #"{"a\"b":"x\ny","live":true,"size":3,"team":"42"}"#)
        #expect(configuration.matches(["team": .string("42")]))
        #expect(!configuration.matches(["team": .number(42)]))
        #expect(!configuration.matches(["team": .string("42"), "league": .string("nba")]))
        #expect(configuration.matches([:]))
    }

    @Test func registryLimitsNameTheFirstProblem() {
        let limits = RegistryLimits()
        let ok = WidgetRegistration(id: "w1", kind: "scores", family: .systemSmall, configuration: WidgetConfiguration())
        #expect(limits.problem(with: [ok]) == nil)
        #expect(limits.problem(with: Array(repeating: ok, count: 65)) == "a device has at most 64 widgets, not 65")
        #expect(limits.problem(with: [ok, ok]) == "widgets[1].id 'w1' appears twice")
        var badKind = ok
        badKind.kind = "scores widget"
        #expect(limits.problem(with: [badKind]) == "widgets[0].kind must have 1 to 128 letters, digits, '.', '_' or '-'")
        var big = ok
        big.configuration = WidgetConfiguration(["blob": .string(String(repeating: "x", count: 2100))])
        #expect(limits.problem(with: [big])?.hasPrefix("widgets[0].configuration has 2111 bytes") == true)
    }

    /// The kind rule read byte by byte is the rule as written: 1 to 128 ASCII letters, digits, `.`, `_` or
    /// `-`, over generated kinds of those and of characters just outside them.
    @Test func aKindIsOneTo128AsciiLettersDigitsDotsUnderscoresOrDashes() {
        let limits = RegistryLimits()
        let alphabet: [Character] = ["a", "z", "A", "Z", "0", "9", ".", "_", "-", " ", "/", ":", "@", "[", "`", "{", "é", "ß", "٣", "\u{0}", "\r\n"]
        var random = SplitMix64(seed: 49)
        for length in [0, 1, 2, 5, 127, 128, 129] {
            for _ in 0..<200 {
                let kind = String((0..<length).map { _ in alphabet.randomElement(using: &random)! })
                let expected = !kind.isEmpty && kind.count <= 128
                    && kind.unicodeScalars.allSatisfy { $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || "._-".unicodeScalars.contains($0)) }
                #expect((limits.problem(kind: kind, configuration: WidgetConfiguration(), at: "") == nil) == expected, "\(kind.debugDescription)")
            }
        }
        #expect(limits.problem(kind: String(repeating: "k", count: 128), configuration: WidgetConfiguration(), at: "") == nil)
        #expect(limits.problem(kind: String(repeating: "k", count: 129), configuration: WidgetConfiguration(), at: "") != nil)
    }

    /// Text that needs no escape is quoted whole; the result is always what escaping scalar by scalar
    /// writes, and `encoderQuoted` is what `JSONEncoder` (slashes unescaped) writes.
    @Test func quotedTextIsEscapedScalarByScalar() throws {
        let alphabet: [Unicode.Scalar] = ["a", "Z", "0", " ", "/", "\"", "\\", "\n", "\r", "\t", "\u{0}", "\u{8}", "\u{c}", "\u{1f}", "\u{7f}", "é", "\u{301}", "\u{2028}", "😀"]
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        var random = SplitMix64(seed: 7)
        for length in [0, 1, 2, 3, 8, 64] {
            for _ in 0..<300 {
                var text = String.UnicodeScalarView()
                for _ in 0..<length { text.append(alphabet.randomElement(using: &random)!) }
                let string = String(text)
                #expect(JSONText.quoted(string) == Self.quotedByScalar(string), "\(string.debugDescription)")
                #expect(JSONText.encoderQuoted(string) == String(decoding: try encoder.encode(string), as: UTF8.self), "\(string.debugDescription)")
            }
        }
        #expect(JSONText.quoted(String(repeating: "ab", count: 32)) == "\"" + String(repeating: "ab", count: 32) + "\"")
    }

    /// Every scalar below U+0020, `"` and `\` escaped (control characters as `\u00XX` but for `\n`,
    /// `\r` and `\t`), everything else as it is.
    private static func quotedByScalar(_ text: String) -> String {
        var result = "\""
        for scalar in text.unicodeScalars {
            switch scalar.value {
            case 0x22: result += "\\\""
            case 0x5C: result += "\\\\"
            case 0x0A: result += "\\n"
            case 0x0D: result += "\\r"
            case 0x09: result += "\\t"
            case ..<0x20: result += "\\u00" + (scalar.value < 0x10 ? "0" : "") + String(scalar.value, radix: 16)
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result + "\""
    }
}
