public import Foundation
import Crypto
public import ReloadGateCore

/// A registered app: a bundle id in one environment, with its API key (stored as a hash) and webhook
/// secret (stored sealed).
public struct App: Hashable, Sendable {
    /// The store's id of the app.
    public var id: Int64
    public var bundle: BundleID
    public var environment: DeploymentEnvironment
    /// The Apple developer team the app belongs to: provider keys of this team (and no other) may push
    /// to it. `nil`: no provider token may (client certificates and the APIs still work).
    public var teamID: String?
    /// Whether the app's credentials may claim budget exemptions (docs/DESIGN.md, rule 9).
    public var allowsExemptions: Bool
    public var createdAt: Date

    public init(
        id: Int64, bundle: BundleID, environment: DeploymentEnvironment, teamID: String?, allowsExemptions: Bool, createdAt: Date
    ) {
        self.id = id
        self.bundle = bundle
        self.environment = environment
        self.teamID = teamID
        self.allowsExemptions = allowsExemptions
        self.createdAt = createdAt
    }
}

/// What `reloadgate apps add` prints once: the app and its two secrets in the clear.
public struct AppCredentials: Sendable {
    public var app: App
    /// The registry API's bearer token for this app.
    public var apiKey: String
    /// The HMAC-SHA256 key of the app's reload webhook.
    public var webhookSecret: String
    /// The key that may only register the app's devices, controls, activities and timelines, and may ship
    /// inside the app (empty when it was not made or not changed).
    public var registrationKey: String = ""

    public init(app: App, apiKey: String, webhookSecret: String, registrationKey: String = "") {
        self.app = app
        self.apiKey = apiKey
        self.webhookSecret = webhookSecret
        self.registrationKey = registrationKey
    }
}

/// A push sender's provider key as stored: only the public key (PEM), never the private one.
public struct StoredProviderKey: Hashable, Sendable {
    public var keyID: String
    public var teamID: String
    /// The P-256 public key, PEM.
    public var publicKeyPEM: String
    /// Bundles the key may push to; empty: any.
    public var topics: [BundleID]
    /// `sandbox`, `production` or `both`.
    public var environments: String
    public var createdAt: Date

    public init(keyID: String, teamID: String, publicKeyPEM: String, topics: [BundleID], environments: String, createdAt: Date) {
        self.keyID = keyID
        self.teamID = teamID
        self.publicKeyPEM = publicKeyPEM
        self.topics = topics
        self.environments = environments
        self.createdAt = createdAt
    }
}

extension AppCredentials {
    /// A registration key's prefix (an API key's is `rgk_`, a webhook secret's `rgs_`): it tells a key
    /// that may only register apart at a glance, in a log or a leaked app alike.
    public static let registrationKeyPrefix = "rgr_"

    /// What the stores keep of an API key: its SHA-256 (the key itself is shown once).
    static func hash(_ apiKey: String) -> Data {
        Data(SHA256.hash(data: Data(apiKey.utf8)))
    }

    /// 256 random bits, base64url without padding.
    static func randomToken() -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        return Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
