import Crypto
public import Foundation
import GRDB
public import ReloadGateCore

extension SQLiteStore {
    /// Registers an app and creates its API key and webhook secret, returned once in the clear.
    ///
    /// The API key is stored as its SHA-256 (it is a random 256-bit value, so a plain hash is enough to
    /// make a copy of the database useless for authenticating); the webhook secret is sealed with the
    /// data directory's key, because verifying a signature needs it back.
    /// - Parameter teamID: the Apple team the app belongs to (its provider keys' team); `nil`: no provider
    ///   token may push to it until one is set.
    /// - Throws: ``StoreError/appExists(_:)`` when the bundle is registered already, in any case.
    public func createApp(bundle: BundleID, teamID: String?, allowsExemptions: Bool, now: Date) throws -> AppCredentials {
        let apiKey = "rgk_" + AppCredentials.randomToken()
        let webhookSecret = "rgs_" + AppCredentials.randomToken()
        let sealedSecret = try sealer.seal(webhookSecret)
        let id: Int64 = try writer.write { db in
            if let existing = try String.fetchOne(db, sql: "SELECT bundle FROM app WHERE bundle = ? COLLATE NOCASE", arguments: [bundle.rawValue]) {
                throw StoreError.appExists((try? BundleID(existing)) ?? bundle)
            }
            try db.execute(
                sql: """
                    INSERT INTO app (bundle, environment, teamId, apiKeyHash, webhookSecret, allowsExemptions, createdAt)
                    VALUES (?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    bundle.rawValue, environment.rawValue, teamID, AppCredentials.hash(apiKey), sealedSecret, allowsExemptions,
                    now.storedMilliseconds,
                ]
            )
            return db.lastInsertedRowID
        }
        let app = App(id: id, bundle: bundle, environment: environment, teamID: teamID, allowsExemptions: allowsExemptions, createdAt: now)
        return AppCredentials(app: app, apiKey: apiKey, webhookSecret: webhookSecret)
    }

    /// The app whose API key this is, or `nil`. Reads the database each time, so an app added by
    /// another process (`reloadgate apps add` while the server runs) is seen at once.
    public func app(forAPIKey apiKey: String) throws -> App? {
        try writer.read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM app WHERE apiKeyHash = ?", arguments: [AppCredentials.hash(apiKey)])
                .flatMap(Self.app)
        }
    }

    /// The app registered for `bundle`, or `nil`.
    public func app(bundle: BundleID) throws -> App? {
        try writer.read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM app WHERE bundle = ?", arguments: [bundle.rawValue]).flatMap(Self.app)
        }
    }

    /// Every app, by bundle.
    public func apps() throws -> [App] {
        try writer.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM app ORDER BY bundle").compactMap(Self.app)
        }
    }

    /// The app's webhook secret in the clear, to verify a signature.
    public func webhookSecret(of app: App) throws -> String? {
        let sealed = try writer.read { db in
            try Data.fetchOne(db, sql: "SELECT webhookSecret FROM app WHERE id = ?", arguments: [app.id])
        }
        return try sealed.map { try sealer.unseal($0) }
    }

    private static func app(_ row: Row) -> App? {
        guard let bundle = try? BundleID(row["bundle"] as String),
            let environment = DeploymentEnvironment(rawValue: row["environment"])
        else { return nil }
        return App(
            id: row["id"],
            bundle: bundle,
            environment: environment,
            teamID: row["teamId"],
            allowsExemptions: row["allowsExemptions"],
            createdAt: Date(storedMilliseconds: row["createdAt"])
        )
    }

}

extension SQLiteStore {
    /// Binds the app to a team (`reloadgate apps set-team`): from then on only that team's provider keys
    /// may push to it. A running gateway must forget what it kept of the app (the admin API does so).
    /// - Returns: the app as it is now, or `nil` when no app has this bundle.
    public func setTeam(bundle: BundleID, teamID: String) throws -> App? {
        try writer.write { db -> App? in
            try db.execute(sql: "UPDATE app SET teamId = ? WHERE bundle = ?", arguments: [teamID, bundle.rawValue])
            guard db.changesCount > 0 else { return nil }
            return try Row.fetchOne(db, sql: "SELECT * FROM app WHERE bundle = ?", arguments: [bundle.rawValue]).flatMap(Self.app)
        }
    }

    /// Replaces the app's API key (and, when `webhookSecret`, its webhook secret), returning the new
    /// ones in the clear once; the old ones stop working. A running gateway must forget what it kept of
    /// the app (the admin API does so).
    /// - Returns: the credentials; `webhookSecret` is empty when it was kept.
    public func rotateCredentials(bundle: BundleID, webhookSecret rotateSecret: Bool) throws -> AppCredentials? {
        let apiKey = "rgk_" + AppCredentials.randomToken()
        let secret = rotateSecret ? "rgs_" + AppCredentials.randomToken() : ""
        let sealed = rotateSecret ? try sealer.seal(secret) : nil
        return try writer.write { db -> AppCredentials? in
            guard let app = try Row.fetchOne(db, sql: "SELECT * FROM app WHERE bundle = ?", arguments: [bundle.rawValue]).flatMap(Self.app)
            else { return nil }
            try db.execute(sql: "UPDATE app SET apiKeyHash = ? WHERE id = ?", arguments: [AppCredentials.hash(apiKey), app.id])
            if let sealed {
                try db.execute(sql: "UPDATE app SET webhookSecret = ? WHERE id = ?", arguments: [sealed, app.id])
            }
            return AppCredentials(app: app, apiKey: apiKey, webhookSecret: secret)
        }
    }
}
