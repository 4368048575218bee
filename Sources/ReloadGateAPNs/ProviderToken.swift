public import Crypto
import Foundation
import ReloadGateCore

/// An APNs provider token (a JWT) taken apart: Apple's header `{"alg":"ES256","kid":...}` and claims
/// `{"iss":<team>,"iat":<seconds>}`, and the signature over `header.claims`.
///
/// Written here rather than with a JWT library because APNs tokens differ from what JWT libraries accept:
/// `iat` may have a fraction or be a numeric string, and Apple's own recipe (`openssl dgst -sha256
/// -sign`) produces a DER signature where JWS wants 64 raw bytes. Everything else is refused: only ES256.
public struct ProviderToken: Sendable {
    public var keyID: String
    public var teamID: String
    /// Issued-at, UNIX seconds (a fraction floored), 1970 to 9999.
    public var issuedAt: Int64
    /// The bytes that were signed: `base64url(header).base64url(claims)`.
    var signingInput: Data
    var signature: Data

    /// Parses a token; any malformed part, an algorithm other than ES256, a missing `kid`, `iss` or `iat`,
    /// or an `iat` that is no time between 1970 and 9999 is `InvalidProviderToken` (with a detail for the
    /// log).
    public init(_ text: Substring) throws(APNsFailure) {
        func invalid(_ detail: String) -> APNsFailure { APNsFailure(.invalidProviderToken, detail: detail) }
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw invalid("the token has \(parts.count) parts, not header.claims.signature") }
        guard let headerData = Self.base64URL(parts[0]), let claimsData = Self.base64URL(parts[1]),
            let signature = Self.base64URL(parts[2])
        else { throw invalid("a part of the token is not base64url") }
        guard let header = (try? JSONSerialization.jsonObject(with: headerData)) as? [String: Any],
            let claims = (try? JSONSerialization.jsonObject(with: claimsData)) as? [String: Any]
        else { throw invalid("the header or the claims are not a JSON object") }
        guard let algorithm = header["alg"] as? String, algorithm == "ES256" else {
            throw invalid("alg is \(header["alg"].map { "\($0)" } ?? "missing"), not ES256")
        }
        guard let keyID = header["kid"] as? String, !keyID.isEmpty else { throw invalid("the header has no kid") }
        guard let teamID = claims["iss"] as? String, !teamID.isEmpty else { throw invalid("the claims have no iss (team id)") }
        guard let issuedAt = Self.seconds(claims["iat"]) else {
            throw invalid("iat \(claims["iat"].map { "\($0)" } ?? "missing") is not a time in UNIX seconds (1970 to 9999)")
        }
        self.keyID = keyID
        self.teamID = teamID
        self.issuedAt = issuedAt
        self.signingInput = Data(text[text.startIndex..<parts[1].endIndex].utf8)
        self.signature = signature
    }

    /// The key id and team a token claims, read without verifying anything (for log lines about a
    /// refused token; the token itself is never logged). `nil` when the token cannot be read at all.
    public static func claimedIdentity(_ text: Substring) -> (keyID: String?, teamID: String?)? {
        let parts = text.split(separator: ".", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count >= 2 else { return nil }
        let header = base64URL(parts[0]).flatMap { try? JSONSerialization.jsonObject(with: $0) } as? [String: Any]
        let claims = base64URL(parts[1]).flatMap { try? JSONSerialization.jsonObject(with: $0) } as? [String: Any]
        guard header != nil || claims != nil else { return nil }
        // Bounded, in case a sender puts something long there.
        return ((header?["kid"] as? String).map { String($0.prefix(64)) }, (claims?["iss"] as? String).map { String($0.prefix(64)) })
    }

    /// Whether `key` signed the token; the signature may be 64 raw bytes (JWS) or DER (openssl).
    public func isSigned(by key: P256.Signing.PublicKey) -> Bool {
        let parsed: P256.Signing.ECDSASignature?
        if signature.count == 64 {
            parsed = try? P256.Signing.ECDSASignature(rawRepresentation: signature)
        } else {
            parsed = try? P256.Signing.ECDSASignature(derRepresentation: signature)
        }
        guard let parsed else { return false }
        return key.isValidSignature(parsed, for: signingInput)
    }

    /// The largest `iat` accepted: 9999-12-31T23:59:59Z.
    static let latestIssuedAt = Timestamp.acceptedRange.upperBound / 1000

    /// `iat` as a JSON number, whole or with a fraction (`time.time()` gives one; floored), or as a
    /// numeric string (`"1795538615"`, `"1795538615.42"`); `nil` unless it is a time from 1970 to 9999.
    static func seconds(_ value: Any?) -> Int64? {
        let seconds: Double
        if let text = value as? String {
            // Digits with an optional fraction, nothing else (no sign, exponent, hex or "inf").
            let bytes = text.utf8
            guard (1...40).contains(bytes.count), bytes.first != UInt8(ascii: "."), bytes.last != UInt8(ascii: "."),
                bytes.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || $0 == UInt8(ascii: ".") }),
                bytes.filter({ $0 == UInt8(ascii: ".") }).count <= 1
            else { return nil }
            if let whole = Int64(text) { return (0...latestIssuedAt).contains(whole) ? whole : nil }
            guard let parsed = Double(text) else { return nil }
            seconds = parsed
        } else if let number = value as? NSNumber, String(cString: number.objCType) != "c" {  // "c": a JSON boolean
            seconds = number.doubleValue
        } else {
            return nil
        }
        let floored = seconds.rounded(.down)
        guard floored.isFinite, floored >= 0, floored <= Double(latestIssuedAt) else { return nil }
        return Int64(floored)
    }

    static func base64URL(_ text: Substring) -> Data? {
        guard !text.isEmpty, !text.contains("=") || text.allSatisfy({ $0 != "+" && $0 != "/" }) else { return nil }
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 = base64.trimmingCharacters(in: CharacterSet(charactersIn: "="))
        while base64.count % 4 != 0 { base64.append("=") }
        return Data(base64Encoded: base64)
    }
}
