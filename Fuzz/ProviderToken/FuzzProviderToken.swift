import Crypto
import FuzzDriver
import Foundation
import ReloadGateAPNs
import ReloadGateCore

/// The provider-token parser and verifier: any text after `bearer `, against one registered key, at a
/// fixed time. An accepted token has an `iat` within an hour before that time; nothing traps.
@main
struct FuzzProviderToken {
    /// A fixed key, so that runs are repeatable (the fuzzer cannot forge its signatures; it explores the
    /// parsing around them, and seeds carry real signed tokens).
    static let key = try! P256.Signing.PrivateKey(rawRepresentation: Data(repeating: 7, count: 32))
    static let now: Int64 = 1_790_000_000

    static func main() {
        let keys = ProviderKeySet([
            ProviderKey(keyID: "KEY0000001", teamID: "TEAM000001", publicKey: key.publicKey, topics: [], environments: .both)
        ])
        let cached = ProviderTokenVerifier(keys: keys, environment: .sandbox)
        let uncached = ProviderTokenVerifier(keys: keys, environment: .sandbox, cacheEnabled: false)
        FuzzDriver.run { bytes in
            let text = Substring(String(decoding: bytes, as: UTF8.self))
            _ = ProviderToken.claimedIdentity(text)
            if let token = try? ProviderToken(text) {
                precondition((0...253_402_300_799).contains(token.issuedAt), "iat in range")
            }
            for verifier in [cached, uncached] {
                if let verified = try? verifier.verify(text, now: now) {
                    precondition(verified.issuedAt <= now + 60 && verified.issuedAt >= now - 3600)
                    precondition(verified.teamID == "TEAM000001")
                }
            }
            var connection = ConnectionAuthentication()
            _ = try? connection.authenticate(bearer: text, verifier: cached, now: now)
            _ = try? connection.authenticate(bearer: text, verifier: cached, now: now + 1)
        }
    }
}
