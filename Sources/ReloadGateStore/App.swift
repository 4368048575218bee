public import Foundation
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
}
