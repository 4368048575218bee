import Crypto
import Foundation
import Logging
import ReloadGateAPNs
import ReloadGateStore
import Synchronization

/// The registered provider keys, read from the store: at start, every second (so a key added or removed
/// with `reloadgate keys` while the server runs takes effect within a second), and at once when a token
/// names a key id not known yet (at most once a second, so unknown ids cannot make it hammer the store).
final class ProviderKeyDirectory: ProviderKeySource {
    private struct State {
        var keys: [String: ProviderKey] = [:]
        var lastRefresh = ContinuousClock.Instant.now - .seconds(10)
    }

    private let store: SQLiteStore
    private let logger: Logger
    private let state = Mutex(State())

    init(store: SQLiteStore, logger: Logger) {
        self.store = store
        self.logger = logger
    }

    func key(id: String) -> ProviderKey? {
        if let key = state.withLock({ $0.keys[id] }) { return key }
        guard state.withLock({ ContinuousClock.now - $0.lastRefresh > .seconds(1) }) else { return nil }
        refresh()
        return state.withLock { $0.keys[id] }
    }

    /// Reads the keys again. A stored key that cannot be parsed is logged and skipped.
    func refresh() {
        let stored: [StoredProviderKey]
        do {
            stored = try store.providerKeys()
        } catch {
            logger.error("cannot read the provider keys", metadata: ["error": "\(error)"])
            return
        }
        var keys: [String: ProviderKey] = [:]
        for key in stored {
            guard let publicKey = try? P256.Signing.PublicKey(pemRepresentation: key.publicKeyPEM),
                let environments = ProviderKey.Environments(rawValue: key.environments)
            else {
                logger.error("a stored provider key cannot be used", metadata: ["kid": "\(key.keyID)"])
                continue
            }
            keys[key.keyID] = ProviderKey(
                keyID: key.keyID,
                teamID: key.teamID,
                publicKey: publicKey,
                topics: key.topics,
                environments: environments
            )
        }
        state.withLock {
            $0.keys = keys
            $0.lastRefresh = .now
        }
    }
}
