public import Crypto
import Foundation
import Synchronization

/// The gateway's own provider token toward Apple (docs/DESIGN.md, "Delivery"): ES256 with the operator's
/// `.p8` key, its `iat` rounded down to a 50-minute bucket so that several gateway processes present
/// tokens of the same age, refreshed when the bucket changes (every 50 minutes: Apple accepts a token for
/// an hour) and on `ExpiredProviderToken`, but never more than once in 20 minutes.
public final class UpstreamToken: Sendable {
    /// Seconds of one `iat` bucket.
    public static let bucket: Int64 = 3000
    /// Seconds between two forced refreshes at least (Apple: `TooManyProviderTokenUpdates`).
    public static let minimumRefreshInterval: Int64 = 1200

    private struct Current {
        var token: String
        var issuedAt: Int64
        var madeAt: Int64
    }

    private let key: P256.Signing.PrivateKey
    public let keyID: String
    public let teamID: String
    private let current = Mutex<Current?>(nil)

    public init(key: P256.Signing.PrivateKey, keyID: String, teamID: String) {
        self.key = key
        self.keyID = keyID
        self.teamID = teamID
    }

    /// Reads the operator's `.p8` (PKCS#8 PEM, as Apple hands it out).
    public convenience init(p8File path: String, keyID: String, teamID: String) throws {
        let pem = try String(contentsOfFile: path, encoding: .utf8)
        self.init(key: try P256.Signing.PrivateKey(pemRepresentation: pem), keyID: keyID, teamID: teamID)
    }

    /// The token to send at `now` (UNIX seconds).
    public func token(now: Int64) -> String {
        let issuedAt = now - now % Self.bucket
        return current.withLock { current in
            if let current, current.issuedAt == issuedAt { return current.token }
            let made = Current(token: sign(issuedAt: issuedAt), issuedAt: issuedAt, madeAt: now)
            current = made
            return made.token
        }
    }

    /// Apple said `ExpiredProviderToken`: makes a new token with `iat` now, unless one was made in the
    /// last 20 minutes. - Returns: whether a new token was made.
    @discardableResult
    public func refresh(now: Int64) -> Bool {
        current.withLock { current in
            if let existing = current, now - existing.madeAt < Self.minimumRefreshInterval { return false }
            current = Current(token: sign(issuedAt: now), issuedAt: now - now % Self.bucket, madeAt: now)
            return true
        }
    }

    private func sign(issuedAt: Int64) -> String {
        func base64URL(_ data: Data) -> String {
            data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
        }
        let input = base64URL(Data(#"{"alg":"ES256","kid":"\#(keyID)"}"#.utf8)) + "."
            + base64URL(Data(#"{"iss":"\#(teamID)","iat":\#(issuedAt)}"#.utf8))
        // Signing with a valid P-256 key does not fail.
        let signature = try! key.signature(for: Data(input.utf8))
        return input + "." + base64URL(signature.rawRepresentation)
    }
}
