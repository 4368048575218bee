import Foundation
import GRDB
import ReloadGateCore

/// The SQLite store's reading and writing of ``StoreInfo`` (`store_info`).
extension StoreInfo {
    static func read(_ db: Database) throws -> StoreInfo {
        let rows = try Dictionary(
            uniqueKeysWithValues: Row.fetchAll(db, sql: "SELECT key, value FROM store_info").map {
                (($0["key"] as String), ($0["value"] as String))
            }
        )
        guard let environmentText = rows["environment"],
            let environment = DeploymentEnvironment(rawValue: environmentText),
            let createdText = rows["createdAt"], let created = Int64(createdText)
        else {
            throw StoreError.corrupt(reason: "store_info lacks a valid environment or createdAt")
        }
        return StoreInfo(environment: environment, createdAt: Date(storedMilliseconds: created))
    }

    /// Records the environment and creation time in a new store; returns the environment on record.
    static func recordIfNew(environment: DeploymentEnvironment, createdAt: Date, in db: Database) throws
        -> DeploymentEnvironment
    {
        try db.execute(
            sql: "INSERT OR IGNORE INTO store_info (key, value) VALUES ('environment', ?), ('createdAt', ?)",
            arguments: [environment.rawValue, String(createdAt.storedMilliseconds)]
        )
        return try read(db).environment
    }

    /// Whether `sealer`'s key is the one the store's secrets were sealed with: the store's check value
    /// opens with it, or (a store from before the check) the first app's sealed webhook secret does. A store
    /// without a check value gets this key's.
    static func checkSecretsKey(_ sealer: SecretSealer, in db: Database) throws -> Bool {
        if let check = try String.fetchOne(db, sql: "SELECT value FROM store_info WHERE key = 'secretsCheck'") {
            return sealer.opens(checkValue: check)
        }
        if let sealed = try Data.fetchOne(db, sql: "SELECT webhookSecret FROM app ORDER BY id LIMIT 1"), sealer.opens(sealed) == false {
            return false
        }
        try db.execute(sql: "INSERT INTO store_info (key, value) VALUES ('secretsCheck', ?)", arguments: [try sealer.checkValue()])
        return true
    }
}
