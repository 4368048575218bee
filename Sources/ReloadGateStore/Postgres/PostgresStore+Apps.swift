public import Foundation
import PostgresNIO
public import ReloadGateCore

// Apps, their teams and credentials.

extension PostgresStore {
    static let appColumns = "id, bundle, environment, teamId, allowsExemptions, createdAt"

    /// Registers an app (the rules of ``SQLiteStore/createApp(bundle:teamID:allowsExemptions:now:)``).
    public func createApp(bundle: BundleID, teamID: String?, allowsExemptions: Bool, now: Date) async throws -> AppCredentials {
        let apiKey = "rgk_" + AppCredentials.randomToken()
        let webhookSecret = "rgs_" + AppCredentials.randomToken()
        let sealed = try sealer.seal(webhookSecret)
        let environment = environment.rawValue
        let id: Int64 = try await transaction { connection in
            if let existing = try await connection.rows(
                "SELECT bundle FROM app WHERE lower(bundle) = lower(\(bundle.rawValue))", logger: self.logger
            ).first?.decode(String.self) {
                throw StoreError.appExists((try? BundleID(existing)) ?? bundle)
            }
            return try await connection.rows(
                """
                INSERT INTO app (bundle, environment, teamId, apiKeyHash, webhookSecret, allowsExemptions, createdAt)
                VALUES (\(bundle.rawValue), \(environment), \(teamID), \(ByteBuffer(bytes: Array(AppCredentials.hash(apiKey)))),
                    \(ByteBuffer(bytes: Array(sealed))), \(allowsExemptions), \(now.storedMilliseconds))
                RETURNING id
                """,
                logger: self.logger
            ).first!.decode(Int64.self)
        }
        let app = App(id: id, bundle: bundle, environment: self.environment, teamID: teamID, allowsExemptions: allowsExemptions, createdAt: now)
        return AppCredentials(app: app, apiKey: apiKey, webhookSecret: webhookSecret)
    }

    public func app(forAPIKey apiKey: String) async throws -> App? {
        try await rows(
            "SELECT \(unescaped: Self.appColumns) FROM app WHERE apiKeyHash = \(ByteBuffer(bytes: Array(AppCredentials.hash(apiKey))))"
        ).first.flatMap(Self.app)
    }

    public func app(bundle: BundleID) async throws -> App? {
        try await rows("SELECT \(unescaped: Self.appColumns) FROM app WHERE bundle = \(bundle.rawValue)").first.flatMap(Self.app)
    }

    public func apps() async throws -> [App] {
        try await rows("SELECT \(unescaped: Self.appColumns) FROM app ORDER BY bundle COLLATE \"C\"").compactMap(Self.app)
    }

    public func webhookSecret(of app: App) async throws -> String? {
        guard let sealed = try await rows("SELECT webhookSecret FROM app WHERE id = \(app.id)").first?.decode(ByteBuffer.self) else {
            return nil
        }
        return try sealer.unseal(Data(sealed.readableBytesView))
    }

    private static func app(_ row: PostgresRow) throws -> App? {
        let (id, bundleText, environmentText, team, exemptions, created) = try row.decode(
            (Int64, String, String, String?, Bool, Int64).self
        )
        guard let bundle = try? BundleID(bundleText), let environment = DeploymentEnvironment(rawValue: environmentText) else {
            return nil
        }
        return App(
            id: id, bundle: bundle, environment: environment, teamID: team, allowsExemptions: exemptions,
            createdAt: Date(storedMilliseconds: created)
        )
    }

    public func setTeam(bundle: BundleID, teamID: String) async throws -> App? {
        try await rows(
            "UPDATE app SET teamId = \(teamID) WHERE bundle = \(bundle.rawValue) RETURNING \(unescaped: Self.appColumns)"
        ).first.flatMap(Self.app)
    }

    public func rotateCredentials(bundle: BundleID, webhookSecret rotateSecret: Bool) async throws -> AppCredentials? {
        let apiKey = "rgk_" + AppCredentials.randomToken()
        let secret = rotateSecret ? "rgs_" + AppCredentials.randomToken() : ""
        let sealed = rotateSecret ? try sealer.seal(secret) : nil
        let hash = ByteBuffer(bytes: Array(AppCredentials.hash(apiKey)))
        let updated: PostgresQuery =
            if let sealed {
                """
                UPDATE app SET apiKeyHash = \(hash), webhookSecret = \(ByteBuffer(bytes: Array(sealed))) WHERE bundle = \(bundle.rawValue)
                RETURNING \(unescaped: Self.appColumns)
                """
            } else {
                "UPDATE app SET apiKeyHash = \(hash) WHERE bundle = \(bundle.rawValue) RETURNING \(unescaped: Self.appColumns)"
            }
        guard let app = try await rows(updated).first.flatMap(Self.app) else { return nil }
        return AppCredentials(app: app, apiKey: apiKey, webhookSecret: secret)
    }


}
