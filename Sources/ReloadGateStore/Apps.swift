public import Foundation
public import ReloadGateCore

// Apps, their teams and credentials, and the provider keys push senders sign with.

extension SQLStore {
    /// Registers an app and creates its API key and webhook secret, returned once in the clear.
    ///
    /// The API key is stored as its SHA-256 (it is a random 256-bit value, so a plain hash is enough to
    /// make a copy of the database useless for authenticating); the webhook secret is sealed with the
    /// data directory's key, because verifying a signature needs it back.
    /// - Parameter teamID: the Apple team the app belongs to (its provider keys' team); `nil`: no provider
    ///   token may push to it until one is set.
    /// - Throws: ``StoreError/appExists(_:)`` when the bundle is registered already, in any case.
    public func createApp(bundle: BundleID, teamID: String?, allowsExemptions: Bool, now: Date) async throws -> AppCredentials {
        let apiKey = "rgk_" + AppCredentials.randomToken()
        let webhookSecret = "rgs_" + AppCredentials.randomToken()
        let registrationKey = AppCredentials.registrationKeyPrefix + AppCredentials.randomToken()
        let sealed = try seal(webhookSecret)
        let environment = environment
        let app = try await writing { session in
            if let existing = try await session.row("SELECT bundle FROM app WHERE lower(bundle) = lower(\(bundle.rawValue))") {
                throw StoreError.appExists((try? BundleID(try existing.string("bundle"))) ?? bundle)
            }
            let app = try await session.row("""
                INSERT INTO app (bundle, environment, teamId, apiKeyHash, webhookSecret, allowsExemptions, createdAt, registrationKeyHash)
                VALUES (\(bundle.rawValue), \(environment.rawValue), \(teamID), \(AppCredentials.hash(apiKey)), \(sealed),
                    \(allowsExemptions), \(now.storedMilliseconds), \(AppCredentials.hash(registrationKey)))
                RETURNING \(unescaped: App.columns)
                """).flatMap(App.init)
            return try await session.told(.apps, app)
        }
        guard let app else { throw StoreError.corrupt(reason: "registering an app returned no row") }
        return AppCredentials(app: app, apiKey: apiKey, webhookSecret: webhookSecret, registrationKey: registrationKey)
    }

    /// The app whose API key this is, or `nil`. Reads the database each time, so an app added by
    /// another process (`reloadgate apps add` while the server runs) is seen at once.
    public func app(forAPIKey apiKey: String) async throws -> App? {
        try await reading { session in
            try await session.row("SELECT \(unescaped: App.columns) FROM app WHERE apiKeyHash = \(AppCredentials.hash(apiKey))").flatMap(App.init)
        }
    }

    /// The app whose registration key this is, or `nil` (read each time, as ``app(forAPIKey:)``).
    public func app(forRegistrationKey key: String) async throws -> App? {
        try await reading { session in
            try await session.row(
                "SELECT \(unescaped: App.columns) FROM app WHERE registrationKeyHash = \(AppCredentials.hash(key))"
            ).flatMap(App.init)
        }
    }

    /// Replaces the app's registration key (and only it), returning the new one in the clear once; the
    /// old one stops working at once for a gateway that forgets what it kept (the admin API does so).
    /// - Returns: the credentials with only ``AppCredentials/registrationKey`` set, or `nil`: no such app.
    public func rotateRegistrationKey(bundle: BundleID) async throws -> AppCredentials? {
        let key = AppCredentials.registrationKeyPrefix + AppCredentials.randomToken()
        let app = try await writing { session in
            try await session.told(.apps, try await session.row("""
                UPDATE app SET registrationKeyHash = \(AppCredentials.hash(key))
                WHERE bundle = \(bundle.rawValue) RETURNING \(unescaped: App.columns)
                """).flatMap(App.init))
        }
        return app.map { AppCredentials(app: $0, apiKey: "", webhookSecret: "", registrationKey: key) }
    }

    /// The app registered for `bundle`, or `nil`.
    public func app(bundle: BundleID) async throws -> App? {
        try await reading { session in
            try await session.row("SELECT \(unescaped: App.columns) FROM app WHERE bundle = \(bundle.rawValue)").flatMap(App.init)
        }
    }

    /// Every app, by bundle.
    public func apps() async throws -> [App] {
        try await reading { session in
            try await session.rows("SELECT \(unescaped: App.columns) FROM app ORDER BY bundle\(SQLCollation.binary)").compactMap(App.init)
        }
    }

    /// The app's webhook secret in the clear, to verify a signature.
    public func webhookSecret(of app: App) async throws -> String? {
        let sealed = try await reading { session in
            try await session.row("SELECT webhookSecret FROM app WHERE id = \(app.id)")?.optionalData("webhookSecret")
        }
        return try sealed.map { try unseal($0) }
    }

    /// Binds the app to a team (`reloadgate apps set-team`): from then on only that team's provider keys
    /// may push to it. A running gateway must forget what it kept of the app (the admin API does so).
    /// - Returns: the app as it is now, or `nil` when no app has this bundle.
    public func setTeam(bundle: BundleID, teamID: String) async throws -> App? {
        try await writing { session in
            try await session.told(.apps, try await session.row(
                "UPDATE app SET teamId = \(teamID) WHERE bundle = \(bundle.rawValue) RETURNING \(unescaped: App.columns)"
            ).flatMap(App.init))
        }
    }

    /// Replaces the app's API key (and, when `webhookSecret`, its webhook secret), returning the new
    /// ones in the clear once; the old ones stop working. A running gateway must forget what it kept of
    /// the app (the admin API does so).
    /// - Returns: the credentials; `webhookSecret` is empty when it was kept.
    public func rotateCredentials(bundle: BundleID, webhookSecret rotateSecret: Bool) async throws -> AppCredentials? {
        let apiKey = "rgk_" + AppCredentials.randomToken()
        let secret = rotateSecret ? "rgs_" + AppCredentials.randomToken() : ""
        let sealed = rotateSecret ? try seal(secret) : nil
        let app = try await writing { session in
            try await session.told(.apps, try await session.row("""
                UPDATE app SET apiKeyHash = \(AppCredentials.hash(apiKey)), webhookSecret = COALESCE(\(sealed), webhookSecret)
                WHERE bundle = \(bundle.rawValue) RETURNING \(unescaped: App.columns)
                """).flatMap(App.init))
        }
        return app.map { AppCredentials(app: $0, apiKey: apiKey, webhookSecret: secret) }
    }

    /// Registers a provider key. Works while the server runs; the server sees it within a second.
    /// - Throws: ``StoreError/keyExists(_:)`` when the key id is registered already.
    public func addProviderKey(_ key: StoredProviderKey) async throws {
        let inserted = try await writing { session in
            try await session.told(.keys, try await session.row("""
                INSERT INTO provider_key (keyId, teamId, publicKey, topics, environments, createdAt)
                VALUES (\(key.keyID), \(key.teamID), \(key.publicKeyPEM), \(key.topics.map(\.rawValue).joined(separator: " ")),
                    \(key.environments), \(key.createdAt.storedMilliseconds))
                ON CONFLICT (keyId) DO NOTHING RETURNING keyId
                """)) != nil
        }
        if !inserted { throw StoreError.keyExists(key.keyID) }
    }

    /// Every registered provider key, by key id.
    public func providerKeys() async throws -> [StoredProviderKey] {
        try await reading { session in
            try await session.rows(
                "SELECT keyId, teamId, publicKey, topics, environments, createdAt FROM provider_key ORDER BY keyId\(SQLCollation.binary)"
            ).map { row in
                StoredProviderKey(
                    keyID: try row.string("keyId"), teamID: try row.string("teamId"), publicKeyPEM: try row.string("publicKey"),
                    topics: try row.string("topics").split(separator: " ").compactMap { try? BundleID(String($0)) },
                    environments: try row.string("environments"), createdAt: Date(storedMilliseconds: try row.int64("createdAt"))
                )
            }
        }
    }

    /// Removes a provider key. - Returns: whether it was registered.
    @discardableResult
    public func removeProviderKey(keyID: String) async throws -> Bool {
        try await writing { session in
            try await session.told(.keys, try await session.row("DELETE FROM provider_key WHERE keyId = \(keyID) RETURNING keyId")) != nil
        }
    }
}

extension SQLSession {
    /// `changed`, once the other gateways are told of `change` at the commit when it is not `nil` (a row
    /// the write changed; ``catalogChanged(_:)``).
    func told<T>(_ change: ClusterChange, _ changed: T?) async throws -> T? {
        if changed != nil { try await catalogChanged(change) }
        return changed
    }
}

extension App {
    /// The columns ``init(_:)`` reads.
    static let columns = "id, bundle, environment, teamId, allowsExemptions, createdAt"

    /// An app row (`nil`: a bundle or environment this version cannot read).
    init?(_ row: SQLRow) throws {
        guard let bundle = try? BundleID(try row.string("bundle")),
            let environment = DeploymentEnvironment(rawValue: try row.string("environment"))
        else { return nil }
        self.init(
            id: try row.int64("id"), bundle: bundle, environment: environment, teamID: try row.optionalString("teamId"),
            allowsExemptions: try row.bool("allowsExemptions"), createdAt: Date(storedMilliseconds: try row.int64("createdAt"))
        )
    }
}

extension GatewayStore {
    /// A new app without a team and without exemptions.
    public func createApp(bundle: BundleID, now: Date) async throws -> AppCredentials {
        try await createApp(bundle: bundle, teamID: nil, allowsExemptions: false, now: now)
    }

    /// A new app of `teamID`, without exemptions.
    public func createApp(bundle: BundleID, teamID: String?, now: Date) async throws -> AppCredentials {
        try await createApp(bundle: bundle, teamID: teamID, allowsExemptions: false, now: now)
    }

    /// A new app without a team.
    public func createApp(bundle: BundleID, allowsExemptions: Bool, now: Date) async throws -> AppCredentials {
        try await createApp(bundle: bundle, teamID: nil, allowsExemptions: allowsExemptions, now: now)
    }
}
