import Crypto
import Foundation
import Logging
import ReloadGateAPNs
import ReloadGateStore
import Synchronization

/// The registered provider keys, read from the store into a ``ProviderKeySet``: at start, after every
/// change made through the admin API (`reloadgate keys add` and `remove` while the gateway runs: the next
/// push sees it), every second (a change made in the data directory by another process), and when a token names
/// a key id not known yet (that push is refused; the read starts at once, at most once a second, so
/// unknown ids cannot make it hammer the store).
final class ProviderKeyDirectory: ProviderKeySource {
    private let store: any GatewayStoreReading
    private let logger: Logger
    private let keys = ProviderKeySet()
    private let lastRefresh = Mutex(ContinuousClock.Instant.now - .seconds(10))
    /// The last refresh failed (logged once until one succeeds).
    private let failing = Mutex(false)

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
        // Called on an event loop: the store is read by a task, and this push is answered without the
        // key (the next one, a moment later, finds it).
        Task { await refresh() }
        return nil
    }

    var generation: UInt64 { keys.generation }

    /// Reads the keys again. A stored key that cannot be parsed is logged and skipped.
    func refresh() async {
        let stored: [StoredProviderKey]
        do {
            stored = try await store.providerKeys()
            if failing.withLock({ $0 }) { logger.notice("the provider keys are read again") }
            failing.withLock { $0 = false }
        } catch {
            // Logged once per failing run (every second while a database is away would flood the log).
            if !failing.withLock({ $0 }), !(error is CancellationError) {
                logger.error("cannot read the provider keys", metadata: ["error": "\(error)"])
            }
            failing.withLock { $0 = true }
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
