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
    }

    @Test(arguments: [StoreError.corrupt(reason: "x"), StoreError.keyExists("K")])
    func otherStoreErrorsAreNot(_ error: StoreError) {
        #expect(APIError.refusal(error) == nil)
        #expect(!PushIngress.isUnavailable(error))
    }
}
