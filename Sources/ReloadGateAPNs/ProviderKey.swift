public import Crypto
public import ReloadGateCore

/// A push sender's provider key as the gateway knows it: only the public half (DESIGN.md, Security).
public struct ProviderKey: Sendable {
    /// The environments a key is registered for.
    public enum Environments: String, Sendable, CaseIterable {
        case sandbox, production, both

        /// Whether a key for these environments may push to a gateway of `environment`.
        public func allows(_ environment: DeploymentEnvironment) -> Bool {
            self == .both || rawValue == environment.rawValue
        }
    }

    /// The 10-character key id (`kid`).
    public var keyID: String
    /// The team id the key belongs to (the token's `iss`).
    public var teamID: String
    public var publicKey: P256.Signing.PublicKey
    /// The bundles the key may push to; empty: any bundle.
    public var topics: [BundleID]
    public var environments: Environments

    public init(keyID: String, teamID: String, publicKey: P256.Signing.PublicKey, topics: [BundleID], environments: Environments) {
        self.keyID = keyID
        self.teamID = teamID
        self.publicKey = publicKey
        self.topics = topics
        self.environments = environments
    }

    /// Whether the key may push to `bundle`.
    public func allows(_ bundle: BundleID) -> Bool {
        topics.isEmpty || topics.contains(bundle)
    }
}
