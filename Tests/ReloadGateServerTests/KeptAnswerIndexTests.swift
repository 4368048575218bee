import ReloadGateCore
import ReloadGateStore
import Testing

@testable import ReloadGateServer

/// The engine's index of answers kept in request rows: names the requests a key's answer may be in, holds
/// no more than its capacity (then the engine uses the idempotency table), and forgets keys in the order
/// they came once they expire.
struct KeptAnswerIndexTests {
    static func key(_ text: String) -> IdempotencyKey { IdempotencyKey(app: 1, key: text) }
    static func at(_ milliseconds: Int64) -> Timestamp { Timestamp(milliseconds: milliseconds) }

    @Test func aKeyNamesItsRequestUntilItExpires() {
        var index = KeptAnswerIndex(capacity: 10)
        index.add(Self.key("a"), request: 7, expiresAt: Self.at(1_000))
        index.add(Self.key("b"), request: 8, expiresAt: Self.at(2_000))
        #expect(index.candidates(for: Self.key("a")) == [7])
        #expect(index.candidates(for: Self.key("b")) == [8])
        #expect(index.candidates(for: Self.key("c")) == [])
        #expect(IdempotencyKey(app: 2, key: "a") != Self.key("a"))
        #expect(index.candidates(for: IdempotencyKey(app: 2, key: "a")) == [])

        index.forgetExpired(at: Self.at(999))
        #expect(index.count == 2)
        index.forgetExpired(at: Self.at(1_000))
        #expect(index.candidates(for: Self.key("a")) == [])
        #expect(index.candidates(for: Self.key("b")) == [8])
        #expect(index.count == 1)
        index.forgetExpired(at: Self.at(5_000))
        #expect(index.count == 0)
    }

    @Test func aFullIndexHasNoRoomUntilKeysExpire() {
        var index = KeptAnswerIndex(capacity: 2)
        #expect(index.hasRoom)
        index.add(Self.key("a"), request: 1, expiresAt: Self.at(100))
        index.add(Self.key("b"), request: 2, expiresAt: Self.at(200))
        #expect(!index.hasRoom)
        index.forgetExpired(at: Self.at(150))
        #expect(index.hasRoom)
        #expect(!KeptAnswerIndex(capacity: 0).hasRoom)
    }

    /// Keys with one fingerprint (every key, here) are all named; each leaves when it expires, whichever
    /// of them came first.
    @Test func keysOfOneFingerprintAreAllFoundAndLeaveOneByOne() {
        var index = KeptAnswerIndex(capacity: 10, fingerprint: { _ in 42 })
        index.add(Self.key("a"), request: 1, expiresAt: Self.at(100))
        index.add(Self.key("b"), request: 2, expiresAt: Self.at(200))
        index.add(Self.key("c"), request: 3, expiresAt: Self.at(300))
        #expect(index.candidates(for: Self.key("b")) == [1, 2, 3])
        index.forgetExpired(at: Self.at(100))
        #expect(index.candidates(for: Self.key("x")) == [2, 3])
        index.forgetExpired(at: Self.at(200))
        #expect(index.candidates(for: Self.key("x")) == [3])
        index.forgetExpired(at: Self.at(300))
        #expect(index.candidates(for: Self.key("x")) == [])
        #expect(index.count == 0)
    }

    /// A key added after another with a later expiry waits for it (the answer read from its row says it
    /// expired): the index never holds more than its capacity and the keys in order.
    @Test func aKeyThatExpiresEarlierThanOneBeforeItWaitsForIt() {
        var index = KeptAnswerIndex(capacity: 10)
        index.add(Self.key("late"), request: 1, expiresAt: Self.at(500))
        index.add(Self.key("early"), request: 2, expiresAt: Self.at(400))
        index.forgetExpired(at: Self.at(450))
        #expect(index.candidates(for: Self.key("early")) == [2])
        index.forgetExpired(at: Self.at(500))
        #expect(index.count == 0)
    }
}
