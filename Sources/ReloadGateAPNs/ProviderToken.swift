public import Crypto
public import Foundation

/// An APNs provider token (a JWT) taken apart: Apple's header `{"alg":"ES256","kid":...}` and claims
/// `{"iss":<team>,"iat":<seconds>}`, and the signature over `header.claims`.
///
/// Written here rather than with a JWT library because APNs tokens differ from what JWT libraries accept:
/// `iat` may be a numeric string, and Apple's own recipe (`openssl dgst -sha256 -sign`) produces a DER
/// signature where JWS wants 64 raw bytes. Everything else is refused: only ES256.
public struct ProviderToken: Sendable {
    public var keyID: String
    public var teamID: String
    /// Issued-at, UNIX seconds.
    public var issuedAt: Int64
    /// The bytes that were signed: `base64url(header).base64url(claims)`.
    var signingInput: Data
    var signature: Data

    /// Parses a token; any malformed part, an algorithm other than ES256 or a missing `kid`, `iss` or `iat`
    /// is `InvalidProviderToken`.
    public init(_ text: Substring) throws(APNsFailure) {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3,
            let headerData = Self.base64URL(parts[0]),
            let claimsData = Self.base64URL(parts[1]),
            let signature = Self.base64URL(parts[2]),
            let header = (try? JSONSerialization.jsonObject(with: headerData)) as? [String: Any],
            let claims = (try? JSONSerialization.jsonObject(with: claimsData)) as? [String: Any]
        else { throw APNsFailure(.invalidProviderToken) }
        guard header["alg"] as? String == "ES256",
            let keyID = header["kid"] as? String, !keyID.isEmpty,
            let teamID = claims["iss"] as? String, !teamID.isEmpty,
            let issuedAt = Self.seconds(claims["iat"])
        else { throw APNsFailure(.invalidProviderToken) }
        self.keyID = keyID
        self.teamID = teamID
        self.issuedAt = issuedAt
        self.signingInput = Data(text[text.startIndex..<parts[1].endIndex].utf8)
        self.signature = signature
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

    /// `iat` as a JSON integer or a numeric string.
    static func seconds(_ value: Any?) -> Int64? {
        if let text = value as? String { return Int64(text) }
        if let number = value as? NSNumber, String(cString: number.objCType) != "c" {  // "c": a JSON boolean
            let double = number.doubleValue
            guard double.isFinite, double == double.rounded(.towardZero), abs(double) < 1e15 else { return nil }
            return Int64(double)
        }
        return nil
    }

    static func base64URL(_ text: Substring) -> Data? {
        guard !text.isEmpty, !text.contains("=") || text.allSatisfy({ $0 != "+" && $0 != "/" }) else { return nil }
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 = base64.trimmingCharacters(in: CharacterSet(charactersIn: "="))
        while base64.count % 4 != 0 { base64.append("=") }
        return Data(base64Encoded: base64)
    }
}
