public import Crypto
public import Foundation
public import ReloadGateStore
import ReloadGateCore

/// Makes APNs provider tokens (ES256 JWTs) the way senders do, and broken ones the way attackers and
/// buggy senders do, for tests.
public struct ProviderTokenFactory: Sendable {
    public let privateKey: P256.Signing.PrivateKey
    public let keyID: String
    public let teamID: String

    public init(keyID: String = "ABC123DEFG", teamID: String = "TEAM123456") {
        self.privateKey = P256.Signing.PrivateKey()
        self.keyID = keyID
        self.teamID = teamID
    }

    /// The public key in PEM, as `reloadgate keys add --public-key` takes it.
    public var publicKeyPEM: String { privateKey.publicKey.pemRepresentation }

    /// A token. `iat` defaults to now; `iatAsString` writes it as `"1700000000"`; `der` signs in DER form
    /// (Apple's openssl recipe) instead of JWS's 64 raw bytes; `header` replaces the header JSON;
    /// `iatJSON` is the claim's JSON text as given (`1795538615.42`, `"1e300"`, ...) instead of `iat`.
    public func token(
        iat: Int64 = Int64(Date().timeIntervalSince1970),
        iatAsString: Bool = false,
        iatJSON: String? = nil,
        der: Bool = false,
        keyID: String? = nil,
        teamID: String? = nil,
        header: String? = nil
    ) -> String {
        let headerJSON = header ?? #"{"alg":"ES256","kid":"\#(keyID ?? self.keyID)"}"#
        let iatJSON = iatJSON ?? (iatAsString ? "\"\(iat)\"" : "\(iat)")
        let claimsJSON = #"{"iss":"\#(teamID ?? self.teamID)","iat":\#(iatJSON)}"#
        let input = Self.base64URL(Data(headerJSON.utf8)) + "." + Self.base64URL(Data(claimsJSON.utf8))
        let signature = try! privateKey.signature(for: Data(input.utf8))
        return input + "." + Self.base64URL(der ? signature.derRepresentation : signature.rawRepresentation)
    }

    /// `alg: none`, no signature.
    public func unsignedToken() -> String {
        Self.base64URL(Data(#"{"alg":"none","kid":"\#(keyID)"}"#.utf8)) + "."
            + Self.base64URL(Data(#"{"iss":"\#(teamID)","iat":\#(Int64(Date().timeIntervalSince1970))}"#.utf8)) + "."
    }

    /// HS256 with the public key's PEM as the HMAC secret (the classic algorithm-confusion attack).
    public func hs256TokenWithPublicKeyAsSecret() -> String {
        let input = Self.base64URL(Data(#"{"alg":"HS256","kid":"\#(keyID)"}"#.utf8)) + "."
            + Self.base64URL(Data(#"{"iss":"\#(teamID)","iat":\#(Int64(Date().timeIntervalSince1970))}"#.utf8))
        let mac = HMAC<SHA256>.authenticationCode(for: Data(input.utf8), using: SymmetricKey(data: Data(publicKeyPEM.utf8)))
        return input + "." + Self.base64URL(Data(mac))
    }

    public static func base64URL(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}

extension ProviderTokenFactory {
    /// Registers an app of this sender's team in a new SQLite store in `directory` and adds this sender's
    /// provider key (the usual start of a test that pushes through a gateway on that directory).
    public func createApp(bundle: String, inStoreAt directory: String) async throws -> AppCredentials {
        let store = try SQLiteStore(directory: directory, environment: .sandbox, now: Date())
        defer { try? store.close() }
        return try await createApp(bundle: bundle, in: store)
    }

    /// Registers an app of this sender's team in `store` and adds this sender's provider key.
    public func createApp(bundle: String, in store: any GatewayStore) async throws -> AppCredentials {
        let credentials = try await store.createApp(bundle: try BundleID(bundle), teamID: teamID, allowsExemptions: false, now: Date())
        try await store.addProviderKey(
            StoredProviderKey(keyID: keyID, teamID: teamID, publicKeyPEM: publicKeyPEM, topics: [], environments: "both", createdAt: Date())
        )
        return credentials
    }
}
