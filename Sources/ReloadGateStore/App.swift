public import Foundation
public import ReloadGateCore

/// A registered app: a bundle id in one environment, with its API key (stored as a hash) and webhook
/// secret (stored sealed).
public struct App: Hashable, Sendable {
    /// The store's id of the app.
    public var id: Int64
    public var bundle: BundleID
    public var environment: DeploymentEnvironment
    /// Whether the app's credentials may claim budget exemptions (DESIGN.md, rule 9).
    public var allowsExemptions: Bool
    public var createdAt: Date
}

/// What `reloadgate apps add` prints once: the app and its two secrets in the clear.
public struct AppCredentials: Sendable {
    public var app: App
    /// The registry API's bearer token for this app.
    public var apiKey: String
    /// The HMAC-SHA256 key of the app's reload webhook.
    public var webhookSecret: String
}
