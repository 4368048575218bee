public import Crypto
public import ReloadGateCore

/// A push sender's provider key as the gateway knows it: only the public half (docs/DESIGN.md, Security).
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

extension ProviderKey {
    /// Whether `text` can be a key id or team id: 1 to 64 ASCII letters or digits (Apple's have 10).
    public static func isValidIdentifier(_ text: String) -> Bool {
        (1...64).contains(text.utf8.count)
            && text.utf8.allSatisfy { (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains($0) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }
    }
}
