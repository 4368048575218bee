import Crypto
import ReloadGateAPNs
import ReloadGateCore
import ReloadGateTesting
import Testing

/// A connection keeps its last verified token and rechecks it instead of verifying it again: the
/// recheck must still refuse an expired token and a token whose key was removed.
struct ConnectionAuthenticationTests {
    static let issued: Int64 = 1_790_000_000

    /// One sender's key, registered, and a verifier over it.
    struct Setup {
        let sender = ProviderTokenFactory(keyID: "KEY0000001", teamID: "TEAM000001")
        let keys = ProviderKeySet()
        let verifier: ProviderTokenVerifier

        init(cache: Bool = true) {
            keys.add(sender)
            verifier = ProviderTokenVerifier(keys: keys, environment: .sandbox, cacheEnabled: cache)
        }
    }

    @Test(arguments: [true, false])
    func aReusedTokenStillExpiresAfterAnHour(cache: Bool) throws {
        let setup = Setup(cache: cache)
        let (sender, verifier) = (setup.sender, setup.verifier)
        var connection = ConnectionAuthentication()
        let token = Substring(sender.token(iat: Self.issued))
        for now in [Self.issued, Self.issued + 60, Self.issued + 3600] {
            #expect(try connection.authenticate(bearer: token, verifier: verifier, now: now).teamID == "TEAM000001")
        }
        #expect(throws: APNsFailure(.expiredProviderToken)) {
            try connection.authenticate(bearer: token, verifier: verifier, now: Self.issued + 3601)
        }
    }

    @Test func aReusedTokenStopsWorkingWhenItsKeyIsRemoved() throws {
        let setup = Setup()
        let (sender, keys, verifier) = (setup.sender, setup.keys, setup.verifier)
        var connection = ConnectionAuthentication()
        let token = Substring(sender.token(iat: Self.issued))
        _ = try connection.authenticate(bearer: token, verifier: verifier, now: Self.issued)
        keys.remove(id: sender.keyID)
        #expect(throws: APNsFailure(.invalidProviderToken)) {
            try connection.authenticate(bearer: token, verifier: verifier, now: Self.issued + 1)
        }
        // Another connection with the same token: refused as well.
        var other = ConnectionAuthentication()
        #expect(throws: APNsFailure(.invalidProviderToken)) {
            try other.authenticate(bearer: token, verifier: verifier, now: Self.issued + 1)
        }
    }

    @Test func aReusedTokenDoesNotLetAnotherTokenThrough() throws {
        let setup = Setup()
        let (sender, verifier) = (setup.sender, setup.verifier)
        var connection = ConnectionAuthentication()
        let token = sender.token(iat: Self.issued)
        _ = try connection.authenticate(bearer: Substring(token), verifier: verifier, now: Self.issued)
        // Same length, one character of the signature changed: not the remembered token, verified and refused.
        var tampered = Array(token.utf8)
        tampered[tampered.count - 2] = tampered[tampered.count - 2] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        #expect(throws: APNsFailure(.invalidProviderToken)) {
            try connection.authenticate(bearer: Substring(String(decoding: tampered, as: UTF8.self)), verifier: verifier, now: Self.issued + 1)
        }
    }
}

extension ProviderKeySet {
    /// Registers the sender's key for any topic and both environments.
    func add(_ factory: ProviderTokenFactory) {
        insert(ProviderKey(keyID: factory.keyID, teamID: factory.teamID, publicKey: factory.privateKey.publicKey, topics: [], environments: .both))
    }
}
