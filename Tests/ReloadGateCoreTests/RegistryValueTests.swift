import ReloadGateCore
import Testing

struct RegistryValueTests {
    @Test func deviceTokensAreHexOf64To200DigitsKeptInLowerCase() throws {
        #expect(try DeviceToken(String(repeating: "AB", count: 32)).hex == String(repeating: "ab", count: 32))
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
}
