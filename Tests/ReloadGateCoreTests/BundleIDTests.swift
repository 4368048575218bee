import Foundation
import ReloadGateCore
import Testing

struct BundleIDTests {
    @Test(arguments: ["com.example.scores", "com.example.Scores-Widget", "a", "A1.b2.c-3"])
    func acceptsReverseDNSIdentifiers(_ text: String) throws {
        #expect(try BundleID(text).rawValue == text)
    }

    @Test(arguments: [
        ("", BundleID.ParseError.empty),
        ("com.example..scores", .emptyComponent),
        (".com.example", .emptyComponent),
        ("com.example.", .emptyComponent),
        (".", .emptyComponent),
        ("com..exa mple", .invalidCharacter(" ")),  // a character error wins over an empty part before it
        ("com.exa mple", .invalidCharacter(" ")),
        ("com.example/scores", .invalidCharacter("/")),
        ("com.exämple", .invalidCharacter("\u{C3}")),
        (String(repeating: "a", count: 156), .tooLong(156)),
    ])
    func rejectsMalformedIdentifiersWithTheReason(_ text: String, _ expected: BundleID.ParseError) {
        #expect(throws: expected) { try BundleID(text) }
    }

    @Test func widgetsTopicAppendsThePushTypeSuffix() throws {
        #expect(try BundleID("com.example.scores").widgetsTopic == "com.example.scores.push-type.widgets")
    }

    @Test func errorsReadAsSentences() {
        #expect(BundleID.ParseError.emptyComponent.description.contains("'..'"))
        #expect(BundleID.ParseError.tooLong(200).description.contains("155"))
    }
}

struct TimestampTests {
    // Literal expectations: Foundation's formatter rounds milliseconds through a Double (….122Z for .123).
    @Test(arguments: [
        (0, "1970-01-01T00:00:00.000Z"), (1_790_172_000_123, "2026-09-23T14:00:00.123Z"),
        (951_782_400_000, "2000-02-29T00:00:00.000Z"), (4_102_444_799_999, "2099-12-31T23:59:59.999Z"),
        (-1, "1969-12-31T23:59:59.999Z"), (1_709_164_800_500, "2024-02-29T00:00:00.500Z"),
    ] as [(Int64, String)])
    func rfc3339InUTCWithMilliseconds(_ milliseconds: Int64, _ expected: String) {
        #expect(Timestamp(milliseconds: milliseconds).rfc3339 == expected)
    }
}
