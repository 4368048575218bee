import Foundation
public import ReloadGateCore
import Synchronization

/// Where the verifier finds provider keys by key id (the gateway's key directory, refreshed from the store).
public protocol ProviderKeySource: Sendable {
    /// The key with this id, or `nil`.
    func key(id: String) -> ProviderKey?
    /// Changes whenever a key is added, removed or changed: refusals remembered in an older generation
    /// are not trusted.
    var generation: UInt64 { get }
}

/// A provider token that verified: who sent it and with which key.
public struct VerifiedToken: Sendable {
    public var teamID: String
    public var key: ProviderKey
    public var issuedAt: Int64
}

/// Verifies provider tokens by docs/APNS.md's rules and remembers the outcome per token string, so that a
/// sender reusing its token (the normal case: a token lives up to an hour) costs a dictionary lookup, not
/// an ES256 verification (about 0.2 ms of CPU).
///
/// A remembered token is still checked on every use for its age (`ExpiredProviderToken` after an hour)
/// and for its key still being registered (a removed key stops working at once). Bad tokens are
/// remembered too, so repeating one is cheap, but only while the keys stay as they were: after any change
/// of keys a refused token is verified anew (a key added takes effect for the very next push). The
/// memory is bounded: when it holds ``capacity`` tokens it starts over.
public final class ProviderTokenVerifier: Sendable {
    /// Seconds a token is valid after its `iat` (Apple: one hour).
    public static let lifetime: Int64 = 3600

    private enum Remembered {
        case verified(teamID: String, keyID: String, issuedAt: Int64)
        case refused(APNsFailure, generation: UInt64)
    }

    private let keys: any ProviderKeySource
    private let environment: DeploymentEnvironment
    private let clockSkew: Int64
    private let cacheEnabled: Bool
    private let capacity: Int
    private let cache = Mutex<[Substring: Remembered]>([:])

    /// - Parameters:
    ///   - keys: where keys are found.
    ///   - environment: the gateway's environment (a key of the other one: `BadEnvironmentKeyIdInToken`).
    ///   - clockSkew: seconds an `iat` may lie in the future.
    ///   - cacheEnabled: `false` verifies every request (for benchmarks).
    public init(
        keys: any ProviderKeySource,
        environment: DeploymentEnvironment,
        clockSkew: Int64 = 60,
        cacheEnabled: Bool = true,
        capacity: Int = 100_000
    ) {
        self.keys = keys
        self.environment = environment
        self.clockSkew = clockSkew
        self.cacheEnabled = cacheEnabled
        self.capacity = capacity
    }

    /// Verifies `token` (the text after `bearer `) at `now` (UNIX seconds).
    public func verify(_ token: Substring, now: Int64) throws(APNsFailure) -> VerifiedToken {
        if cacheEnabled, let remembered = cache.withLock({ $0[token] }) {
            switch remembered {
            case .refused(let failure, let generation):
                if generation == keys.generation { throw failure }
            case .verified(let teamID, let keyID, let issuedAt):
                guard let key = keys.key(id: keyID), key.teamID == teamID else { break }  // key removed: verify anew
                return try check(issuedAt: issuedAt, key: key, now: now)
            }
        }
        // Read before verifying: a key added while this token is checked makes the refusal stale.
        let generation = keys.generation
        do {
            let verified = try verifyWithoutCache(token, now: now)
            remember(token, .verified(teamID: verified.teamID, keyID: verified.key.keyID, issuedAt: verified.issuedAt))
            return verified
        } catch {
            // Time-dependent refusals are not remembered: the same token may become valid (or expire).
            if error.reason == .invalidProviderToken || error.reason == .badEnvironmentKeyIdInToken {
                remember(token, .refused(error, generation: generation))
            }
            throw error
        }
    }

    /// Checks again, at `now`, a token this verifier accepted before (a connection keeps its last one, so
    /// that a sender reusing its token on that connection costs neither the cache's hash of the token nor
    /// its lock): the same age and key checks as a cached token gets.
    /// - Returns: `nil` when the cache is turned off or the key is gone: verify the token anew.
    public func recheck(_ verified: VerifiedToken, now: Int64) throws(APNsFailure) -> VerifiedToken? {
        guard cacheEnabled, let key = keys.key(id: verified.key.keyID), key.teamID == verified.teamID else { return nil }
        return try check(issuedAt: verified.issuedAt, key: key, now: now)
    }

    private func remember(_ token: Substring, _ outcome: Remembered) {
        guard cacheEnabled else { return }
        cache.withLock { cache in
            if cache.count >= capacity { cache.removeAll(keepingCapacity: true) }
            // A copy: the request's buffer must not stay alive through the cache.
            cache[Substring(String(token))] = outcome
        }
    }

    private func verifyWithoutCache(_ token: Substring, now: Int64) throws(APNsFailure) -> VerifiedToken {
        let parsed = try ProviderToken(token)
        guard let key = keys.key(id: parsed.keyID) else {
            throw APNsFailure(.invalidProviderToken, detail: "no key \(parsed.keyID) is registered (reloadgate keys add)")
        }
        guard key.teamID == parsed.teamID else {
            throw APNsFailure(.invalidProviderToken, detail: "key \(key.keyID) belongs to team \(key.teamID), not \(parsed.teamID)")
        }
        guard parsed.isSigned(by: key.publicKey) else {
            throw APNsFailure(.invalidProviderToken, detail: "the signature does not verify with the public key of \(key.keyID)")
        }
        return try check(issuedAt: parsed.issuedAt, key: key, now: now)
    }

    private func check(issuedAt: Int64, key: ProviderKey, now: Int64) throws(APNsFailure) -> VerifiedToken {
        guard key.environments.allows(environment) else {
            throw APNsFailure(
                .badEnvironmentKeyIdInToken,
                detail: "key \(key.keyID) is registered for \(key.environments.rawValue), this gateway is \(environment)"
            )
        }
        // `issuedAt` is 1970 to 9999 (ProviderToken) and `now` the clock: no overflow here.
        if issuedAt > now + clockSkew {
            throw APNsFailure(.invalidProviderToken, detail: "iat \(issuedAt) is \(issuedAt - now) s in the future (ingress.clockSkew \(clockSkew) s)")
        }
        if issuedAt < now - Self.lifetime {
            throw APNsFailure(.expiredProviderToken, detail: "iat \(issuedAt) is \(now - issuedAt) s old (tokens live \(Self.lifetime) s)")
        }
        return VerifiedToken(teamID: key.teamID, key: key, issuedAt: issuedAt)
    }
}
