public import Foundation
import GRDB
public import ReloadGateCore

extension SQLiteStore {
    /// Registers a provider key. Works while the server runs; the server sees it within a second.
    /// - Throws: ``StoreError/keyExists(_:)`` when the key id is registered already.
    public func addProviderKey(_ key: StoredProviderKey) throws {
        try writer.write { db in
            if try Bool.fetchOne(db, sql: "SELECT 1 FROM provider_key WHERE keyId = ?", arguments: [key.keyID]) == true {
                throw StoreError.keyExists(key.keyID)
            }
            try db.execute(
                sql: """
                    INSERT INTO provider_key (keyId, teamId, publicKey, topics, environments, createdAt)
                    VALUES (?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    key.keyID, key.teamID, key.publicKeyPEM, key.topics.map(\.rawValue).joined(separator: " "),
                    key.environments, key.createdAt.storedMilliseconds,
                ]
            )
        }
    }

    /// Every registered provider key, by key id.
    public func providerKeys() throws -> [StoredProviderKey] {
        try writer.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM provider_key ORDER BY keyId").map { row in
                StoredProviderKey(
                    keyID: row["keyId"],
                    teamID: row["teamId"],
                    publicKeyPEM: row["publicKey"],
                    topics: (row["topics"] as String).split(separator: " ").compactMap { try? BundleID(String($0)) },
                    environments: row["environments"],
                    createdAt: Date(storedMilliseconds: row["createdAt"])
                )
            }
        }
    }

    /// Removes a provider key. - Returns: whether it was registered.
    @discardableResult
    public func removeProviderKey(keyID: String) throws -> Bool {
        try writer.write { db in
            try db.execute(sql: "DELETE FROM provider_key WHERE keyId = ?", arguments: [keyID])
            return db.changesCount > 0
        }
    }
}
