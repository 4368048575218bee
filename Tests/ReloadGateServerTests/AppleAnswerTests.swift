import NIOCore
import NIOHPACK
import ReloadGateCore
@testable import ReloadGateServer
import Testing

/// Apple's answer to a refused push is read by the gateway's own JSON parser (``AppleAnswer``): its reason
/// and, with a `410`, its time; and a body on which Foundation's `JSONDecoder` traps (decision 0102) reads
/// as an answer without a body, as any other text that is not a JSON object does.
struct AppleAnswerTests {
    static func outcome(_ status: Int, _ body: String) throws -> DeliveryOutcome {
        let answer = APNsAnswer(status: status, headers: HPACKHeaders(), body: ByteBuffer(string: body))
        return try APNsUpstream.outcome(of: .success(answer)).get()
    }

    @Test func aRefusalsReasonAndTimeAreRead() throws {
        #expect(try Self.outcome(410, #"{"reason":"Unregistered","timestamp":1790000000000}"#)
            == .deviceInvalid(reason: "Unregistered", since: Timestamp(unixSeconds: 1_790_000_000.0)))
        #expect(try Self.outcome(400, #"{"reason":"PayloadTooLarge"}"#) == .failed(reason: "PayloadTooLarge"))
        // A field of another type reads as absent.
        #expect(try Self.outcome(410, #"{"reason":"Unregistered","timestamp":"soon"}"#)
            == .deviceInvalid(reason: "Unregistered", since: nil))
        #expect(try Self.outcome(400, #"{"reason":7}"#) == Self.outcome(400, ""))
    }

    @Test(arguments: [String(repeating: "[", count: 513), #"{"reason":"# + String(repeating: "[", count: 512)])
    func aBodyFoundationTrapsOnReadsAsNone(_ body: String) throws {
        #expect(try Self.outcome(400, body) == Self.outcome(400, ""))
        #expect(try Self.outcome(410, body) == Self.outcome(410, ""))
    }
}
