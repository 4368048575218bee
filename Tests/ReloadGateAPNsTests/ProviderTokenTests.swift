import Crypto
import Foundation
import PropertyBased
import ReloadGateAPNs
import ReloadGateCore
import ReloadGateHostileInput
import ReloadGateTesting
import Testing

/// Provider tokens as real senders write them (a fractional `iat` from `time.time()`, `iat` as a string)
/// and as attackers write them (every hostile number as `iat`), and a key's effect on the very next push.
@Suite(.offThePool)
struct ProviderTokenTests {
    static let sender = ProviderTokenFactory(keyID: "KEY0000001", teamID: "TEAM000001")
    static let now: Int64 = 1_795_538_640

    static func verifier(_ keys: ProviderKeySet) -> ProviderTokenVerifier {
        ProviderTokenVerifier(keys: keys, environment: .sandbox)
    }

    static func key(_ factory: ProviderTokenFactory = sender, topics: [BundleID] = []) -> ProviderKey {
        ProviderKey(keyID: factory.keyID, teamID: factory.teamID, publicKey: factory.privateKey.publicKey, topics: topics, environments: .both)
    }

    @Test(arguments: [
        ("1795538615.42", Int64(1_795_538_615)),
        ("1795538615.999999", 1_795_538_615),
        ("1795538615.0", 1_795_538_615),
        ("1.79553861542e9", 1_795_538_615),
        (#""1795538615""#, 1_795_538_615),
        (#""1795538615.42""#, 1_795_538_615),
    ])
    func anIatWithAFractionOrAsAStringIsFlooredToSeconds(_ iat: String, _ seconds: Int64) throws {
        let token = Self.sender.token(iatJSON: iat)
        let parsed = try ProviderToken(Substring(token))
        #expect(parsed.issuedAt == seconds)
        let verified = try Self.verifier(ProviderKeySet([Self.key()])).verify(Substring(token), now: Self.now)
        #expect(verified.issuedAt == seconds && verified.teamID == "TEAM000001")
    }

    /// Every hostile spelling (bare and quoted) and random numbers as `iat`: a time from 1970 to 9999, or
    /// `InvalidProviderToken`; never a trap.
    @Test func everyIatIsATimeInRangeOrInvalidProviderToken() async {
        let spellings = Gen<String>.oneOf(
            Gen.element(of: HostileNumbers.all).map { $0 ?? "0" },
            Gen.element(of: HostileNumbers.all).map { "\"\($0 ?? "0")\"" },
            Gen.int64().map { String($0) },
            Gen.uint64().map { String(Double(bitPattern: $0)) },
            Gen.number.string(of: 15...25)
        )
        await propertyCheck(count: 2000, input: spellings) { iat in
            let token = Self.sender.token(iatJSON: iat)
            do throws(APNsFailure) {
                let parsed = try ProviderToken(Substring(token))
                #expect((0...253_402_300_799).contains(parsed.issuedAt), "\(iat) read as \(parsed.issuedAt)")
            } catch {
                #expect(error.reason == .invalidProviderToken, "\(iat): \(error)")
            }
        }
    }

    @Test func theEndsOfTheRangeAndOnePastThem() throws {
        #expect(try ProviderToken(Substring(Self.sender.token(iatJSON: "0"))).issuedAt == 0)
        #expect(try ProviderToken(Substring(Self.sender.token(iatJSON: "253402300799.9"))).issuedAt == 253_402_300_799)
        for iat in ["-1", "-0.5", "253402300800", "1e300", "-1e18", "9223372036854775807", "-9223372036854775808", "NaN", #""1e3""#, #""-1""#, "true", "null"] {
            #expect(throws: APNsFailure(.invalidProviderToken), "\(iat)") { try ProviderToken(Substring(Self.sender.token(iatJSON: iat))) }
        }
    }

    /// A token refused because its key was unknown works for the very next verification after the key
    /// is added, and stops working at once when the key is removed.
    @Test func aKeyTakesEffectForTheVeryNextTokenBothWays() throws {
        let keys = ProviderKeySet()
        let verifier = Self.verifier(keys)
        let token = Substring(Self.sender.token(iat: Self.now - 10))
        for _ in 0..<3 {
            #expect(throws: APNsFailure(.invalidProviderToken)) { try verifier.verify(token, now: Self.now) }
        }
        keys.insert(Self.key())
        #expect(try verifier.verify(token, now: Self.now).key.keyID == "KEY0000001")
        keys.remove(id: "KEY0000001")
        #expect(throws: APNsFailure(.invalidProviderToken)) { try verifier.verify(token, now: Self.now) }
        // Replaced by another public key under the same id: the old signature no longer verifies.
        keys.insert(Self.key(ProviderTokenFactory(keyID: "KEY0000001", teamID: "TEAM000001")))
        #expect(throws: APNsFailure(.invalidProviderToken)) { try verifier.verify(token, now: Self.now) }
        keys.replace(with: [Self.key()])
        #expect(try verifier.verify(token, now: Self.now).teamID == "TEAM000001")
    }

    /// `replace` with the same keys (the directory's periodic refresh) keeps the generation, so remembered
    /// refusals stay cheap; any difference moves it.
    @Test func theGenerationMovesOnlyWhenTheKeysDiffer() {
        let keys = ProviderKeySet([Self.key()])
        let start = keys.generation
        keys.replace(with: [Self.key()])
        #expect(keys.generation == start)
        keys.replace(with: [Self.key(topics: [try! BundleID("com.example.scores")])])
        #expect(keys.generation != start)
    }

    /// The identity a refused token claims, for the log: kid and team, bounded, never the token.
    @Test func aRefusedTokensClaimedIdentityIsBounded() {
        let long = String(repeating: "K", count: 500)
        let identity = ProviderToken.claimedIdentity(Substring(Self.sender.token(keyID: long)))
        #expect(identity?.keyID?.count == 64 && identity?.teamID == "TEAM000001")
        #expect(ProviderToken.claimedIdentity("garbage") == nil)
    }
}
