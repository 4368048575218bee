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
