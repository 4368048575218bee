import Foundation
import PropertyBased
import ReloadGateAPI
import ReloadGateCore
import ReloadGateHostileInput
import Testing

/// Every number the registry API and the webhook take from outside, fed with hostile spellings (the ends
/// of Int64 and one past them, 1e300, 20-digit strings, -0, NaN and infinity as people write them) and
/// random numbers: each is accepted with a value in range or refused with a 4xx, never a trap.
struct HostileNumberTests {
    static let received = Timestamp(seconds: 1_790_000_000)

    /// Hostile spellings first, then random ones.
    static let spellings = Gen<String>.oneOf(
        Gen.element(of: HostileNumbers.all).map { $0 ?? "0" },
        Gen.int64().map { String($0) },
        Gen.uint64().map { String(Double(bitPattern: $0)) },
        Gen.number.string(of: 15...25)
    )

    /// The JSON number `spelling` is, if it is one (JSON allows surrounding spaces; `true` is no number).
    static func jsonNumber(_ spelling: String) -> Double? {
        guard let number = try? JSONSerialization.jsonObject(with: Data(spelling.utf8), options: .fragmentsAllowed) as? NSNumber,
            String(cString: number.objCType) != "c"
        else { return nil }
        return number.doubleValue
    }

    /// Parses `parse`'s body and returns the outcome; a refusal must be a 4xx.
    static func outcome<T>(_ parse: () throws(APIError) -> T) -> T? {
        do {
            return try parse()
        } catch {
            #expect((400..<500).contains(error.status), "\(error)")
            return nil
        }
    }

    @Test func theReportedTimelineDatesAreRefusedWith422() throws {
        for date in ["1e300", "-1e18", "-1", "253402300800"] {
            for body in [#"{"entries":[{"date":\#(date)}],"policy":"atEnd"}"#, #"{"entries":[],"policy":{"after":\#(date)}}"#] {
                #expect(throws: APIError.self) { try TimelineBody.timeline(json: Data(body.utf8), limits: RegistryLimits()) }
                do {
                    _ = try TimelineBody.timeline(json: Data(body.utf8), limits: RegistryLimits())
                } catch {
                    #expect(error.status == 422 && error.message.contains("9999-12-31"), "\(body): \(error)")
                }
            }
        }
    }

    @Test func theReportedWebhookExpirationIsRefusedWith422() {
        for value in ["1e300", "-1e300", "-1", "9223372036854775807", #""+275760-09-13T00:00:00Z""#] {
            let body = Data(#"{"expiration":\#(value)}"#.utf8)
            #expect(throws: APIError.self) { try WebhookBody(json: body, received: Self.received) }
        }
    }

    @Test func datesAtTheEndsOfTheAcceptedRangeAreAccepted() throws {
        let body = #"{"entries":[{"date":0},{"date":"9999-12-31T23:59:59.999Z"},{"date":1795538615.42}],"policy":{"after":253402300799}}"#
        let timeline = try TimelineBody.timeline(json: Data(body.utf8), limits: RegistryLimits())
        #expect(timeline.entries.map(\.milliseconds) == [0, 253_402_300_799_999, 1_795_538_615_420])
        #expect(timeline.policy == .after(Timestamp(seconds: 253_402_300_799)))
    }

    @Test func webhookPriorityIsTenFiveOrOneWhateverTheSpelling() async {
        await propertyCheck(count: 3000, input: Self.spellings) { spelling in
            let parsed = Self.outcome { () throws(APIError) in
                try WebhookBody(json: Data(#"{"priority":\#(spelling)}"#.utf8), received: Self.received)
            }
            if let parsed {
                // JSON null is an absent field: the default priority.
                let expected = spelling == "null" ? 10.0 : Self.jsonNumber(spelling)
                #expect(expected == Double(parsed.priority.rawValue), "\(spelling) accepted as \(parsed.priority)")
            }
        }
    }

    @Test func webhookExpirationIsATimeInRangeOrRefused() async {
        await propertyCheck(count: 3000, input: Self.spellings) { spelling in
            let parsed = Self.outcome { () throws(APIError) in
                try WebhookBody(json: Data(#"{"expiration":\#(spelling)}"#.utf8), received: Self.received)
            }
            if let expiration = parsed?.expiration {
                #expect(Timestamp.acceptedRange.contains(expiration.milliseconds), "\(spelling)")
            }
        }
    }

    @Test func timelineDatesAreTimesInRangeOrRefused() async {
        await propertyCheck(count: 3000, input: Self.spellings) { spelling in
            let body = #"{"entries":[{"date":\#(spelling)}],"policy":{"after":\#(spelling)}}"#
            let parsed = Self.outcome { () throws(APIError) in try TimelineBody.timeline(json: Data(body.utf8), limits: RegistryLimits()) }
            if let parsed {
                #expect(parsed.entries.allSatisfy { Timestamp.acceptedRange.contains($0.milliseconds) }, "\(spelling)")
                #expect(parsed.plannedReload.map { Timestamp.acceptedRange.contains($0.milliseconds) } ?? true)
            }
        }
    }

    /// A configuration keeps any finite number, and its canonical text (what the store groups by and
    /// gives back in `GET .../configurations`) is JSON that reads back to the same value. (Foundation's
    /// JSON parser on Linux is not correctly rounded: `1.0000000000000001e-112` reads as
    /// `1.000000000000001e-112`; the value kept is the one the parser gave, and within 1e-14 of the text.)
    @Test func configurationNumbersRoundTripThroughTheirCanonicalJSON() async throws {
        await propertyCheck(count: 3000, input: Self.spellings) { spelling in
            let body = #"{"widgets":[{"id":"w","kind":"k","family":"systemSmall","configuration":{"n":\#(spelling)}}]}"#
            guard let parsed = Self.outcome({ () throws(APIError) in try DeviceRegistrationBody(json: Data(body.utf8), limits: RegistryLimits()) })
            else { return }
            guard case .number(let kept) = parsed.widgets[0].configuration.values["n"] else { return }  // a string or boolean
            guard let sent = Self.jsonNumber(spelling) else {
                Issue.record("\(spelling) was kept as the number \(kept)")
                return
            }
            #expect(sent == kept || abs(sent - kept) <= 1e-14 * abs(sent), "\(spelling) kept as \(kept)")
            let text = parsed.widgets[0].configuration.canonicalJSON
            let reread = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]
            let back = (reread?["n"] as? NSNumber)?.doubleValue
            #expect(back.map { $0 == kept || abs($0 - kept) <= 1e-14 * abs(kept) } == true, "\(spelling) -> \(text)")
        }
    }

    @Test func theReportedSignatureTimeIsStaleNotATrap() throws {
        let signature = try WebhookSignature(header: "t=-9223372036854775808,v1=" + String(repeating: "ab", count: 32))
        #expect(throws: WebhookSignature.Failure.outsideWindow(signedAt: .min, now: 1_790_000_000)) {
            try signature.verify(body: Data(), secret: "s", now: Date(timeIntervalSince1970: 1_790_000_000))
        }
    }

    @Test func signatureTimesAreMalformedStaleOrCheckedNeverATrap() async {
        await propertyCheck(count: 3000, input: Self.spellings) { spelling in
            let header = "t=\(spelling),v1=" + String(repeating: "0f", count: 32)
            do throws(WebhookSignature.Failure) {
                let signature = try WebhookSignature(header: header)
                #expect(Int64(spelling.trimmingCharacters(in: .init(charactersIn: " "))) == signature.timestamp)
                try signature.verify(body: Data("{}".utf8), secret: "s", now: Date(timeIntervalSince1970: 1_790_000_000))
                Issue.record("a made-up signature verified: \(header)")
            } catch {
                switch error {
                case .malformed, .outsideWindow, .mismatch: break
                case .missing: #expect(spelling.isEmpty)
                }
            }
        }
    }
}
