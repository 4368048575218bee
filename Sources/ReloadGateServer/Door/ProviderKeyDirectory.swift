import Crypto
import Foundation
import Logging
import ReloadGateAPNs
import ReloadGateStore
import Synchronization

/// The registered provider keys, read from the store into a ``ProviderKeySet``: at start, after every
/// change made through the admin API (`reloadgate keys add` and `remove` while the gateway runs: the next
/// push sees it), every second (a change made in the data directory by another process), and at once when
/// a token names a key id not known yet (at most once a second, so unknown ids cannot make it hammer
/// the store).
final class ProviderKeyDirectory: ProviderKeySource {
    private let store: any GatewayStoreReading
    private let logger: Logger
    private let keys = ProviderKeySet()
    private let lastRefresh = Mutex(ContinuousClock.Instant.now - .seconds(10))

    init(store: any GatewayStoreReading, logger: Logger) {
        self.store = store
        self.logger = logger
    }

    func key(id: String) -> ProviderKey? {
        if let key = keys.key(id: id) { return key }
        let due = lastRefresh.withLock { last in
            guard ContinuousClock.now - last > .seconds(1) else { return false }
            last = .now
            return true
        }
        guard due else { return nil }
        refresh()
        return keys.key(id: id)
    }

    var generation: UInt64 { keys.generation }

    /// Reads the keys again. A stored key that cannot be parsed is logged and skipped.
    func refresh() {
        let stored: [StoredProviderKey]
        do {
            stored = try store.providerKeys()
        } catch {
            logger.error("cannot read the provider keys", metadata: ["error": "\(error)"])
            return
        }
        var parsed: [ProviderKey] = []
        for key in stored {
            guard let publicKey = try? P256.Signing.PublicKey(pemRepresentation: key.publicKeyPEM),
                let environments = ProviderKey.Environments(rawValue: key.environments)
            else {
                logger.error("a stored provider key cannot be used", metadata: ["kid": "\(key.keyID)"])
                continue
            }
            parsed.append(
                ProviderKey(keyID: key.keyID, teamID: key.teamID, publicKey: publicKey, topics: key.topics, environments: environments)
            )
        }
        keys.replace(with: parsed)
        lastRefresh.withLock { $0 = .now }
    }
}
