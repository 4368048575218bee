public import Foundation
import PostgresNIO
public import ReloadGateCore

// The provider keys push senders sign with.

extension PostgresStore {
    public func addProviderKey(_ key: StoredProviderKey) async throws {
        let inserted = try await rows(
            """
            INSERT INTO provider_key (keyId, teamId, publicKey, topics, environments, createdAt)
            VALUES (\(key.keyID), \(key.teamID), \(key.publicKeyPEM), \(key.topics.map(\.rawValue).joined(separator: " ")),
                \(key.environments), \(key.createdAt.storedMilliseconds))
            ON CONFLICT (keyId) DO NOTHING RETURNING keyId
            """
        )
        if inserted.isEmpty { throw StoreError.keyExists(key.keyID) }
    }

    public func providerKeys() async throws -> [StoredProviderKey] {
        try await rows(
            "SELECT keyId, teamId, publicKey, topics, environments, createdAt FROM provider_key ORDER BY keyId COLLATE \"C\""
        ).map { row in
            let (keyID, teamID, publicKey, topics, environments, created) = try row.decode(
                (String, String, String, String, String, Int64).self
            )
            return StoredProviderKey(
                keyID: keyID, teamID: teamID, publicKeyPEM: publicKey,
                topics: topics.split(separator: " ").compactMap { try? BundleID(String($0)) },
                environments: environments, createdAt: Date(storedMilliseconds: created)
            )
        }
    }

    @discardableResult
    public func removeProviderKey(keyID: String) async throws -> Bool {
        try await !rows("DELETE FROM provider_key WHERE keyId = \(keyID) RETURNING keyId").isEmpty
    }
}
