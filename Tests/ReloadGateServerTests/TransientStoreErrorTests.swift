import ReloadGateAPI
import ReloadGateStore
import Testing

@testable import ReloadGateServer

/// Requests refused for the store's state (the database away, a batch fenced by another gateway's
/// takeover, an idempotency key another gateway answered meanwhile) are answered 503 (retry), every other
/// store error is not.
@Suite struct TransientStoreErrorTests {
    @Test(arguments: [
        StoreError.unavailable(reason: "no connection"), StoreError.fenced(generation: 3, held: [1, 2]),
        StoreError.keyAnsweredMeanwhile(key: "k"),
    ])
    func aRefusalForTheStoresStateIs503(_ error: StoreError) {
        #expect(APIError.refusal(error)?.status == 503)
        #expect(APIError.refusal(error)?.code == "store-unavailable")
        #expect(PushIngress.isUnavailable(error))
        let push = PushIngress.refusal(error, apnsID: "x")
        #expect(push.status == 503)
        #expect(push.extraHeaders.map(\.1) == ["not-stored"])
    }

    /// A commit whose answer was lost: 503 too, and the answer says the outcome is unknown (the retry with
    /// the same apns-id or idempotency-key is answered from the record, if there is one).
    @Test func aCommitWhoseAnswerWasLostIs503WithAnUnknownOutcome() {
        let error = StoreError.outcomeUnknown(reason: "the connection broke")
        #expect(APIError.refusal(error)?.status == 503)
        #expect(APIError.refusal(error)?.code == "store-outcome-unknown")
        let push = PushIngress.refusal(error, apnsID: "x")
        #expect(push.status == 503)
        #expect(push.reason == "ServiceUnavailable")
        #expect(push.extraHeaders.map(\.0) == ["reloadgate-outcome"])
        #expect(push.extraHeaders.map(\.1) == ["unknown"])
        // A read writes nothing: its lost answer refuses the push as not stored.
        let read = PushIngress.refusal(StoreError.readFailed(error), apnsID: "x")
        #expect(read.status == 503)
        #expect(read.extraHeaders.map(\.1) == ["not-stored"])
    }

    @Test(arguments: [StoreError.corrupt(reason: "x"), StoreError.keyExists("K")])
    func otherStoreErrorsAreNot(_ error: StoreError) {
        #expect(APIError.refusal(error) == nil)
        #expect(!PushIngress.isUnavailable(error))
    }
}
