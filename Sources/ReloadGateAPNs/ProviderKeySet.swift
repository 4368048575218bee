import Crypto
import Synchronization

/// Provider keys by key id, in memory, with a generation that changes whenever the set changes. The
/// verifier remembers a refused token only for the generation it was refused in, so that a key added
/// (or changed) takes effect for the very next push (docs/APNS.md, Authentication).
public final class ProviderKeySet: ProviderKeySource {
    private struct State {
        var keys: [String: ProviderKey] = [:]
        var generation: UInt64 = 0
    }

    private let state = Mutex(State())

    public init(_ keys: [ProviderKey] = []) {
        state.withLock { $0.keys = Dictionary(keys.map { ($0.keyID, $0) }, uniquingKeysWith: { $1 }) }
    }

    public func key(id: String) -> ProviderKey? {
        state.withLock { $0.keys[id] }
    }

    public var generation: UInt64 {
        state.withLock { $0.generation }
    }

    /// Every key, by key id.
    public var all: [ProviderKey] {
        state.withLock { $0.keys.values.sorted { $0.keyID < $1.keyID } }
    }

    /// Replaces the whole set; the generation moves only when something differs.
    public func replace(with keys: [ProviderKey]) {
        let new = Dictionary(keys.map { ($0.keyID, $0) }, uniquingKeysWith: { $1 })
        state.withLock { state in
            guard state.keys.count != new.count || state.keys.contains(where: { id, key in new[id].map { !$0.isSame(as: key) } ?? true })
            else { return }
            state.keys = new
            state.generation &+= 1
        }
    }

    /// Adds or replaces one key.
    public func insert(_ key: ProviderKey) {
        state.withLock { state in
            state.keys[key.keyID] = key
            state.generation &+= 1
        }
    }

    /// Removes one key. - Returns: whether it was there.
    @discardableResult
    public func remove(id: String) -> Bool {
        state.withLock { state in
            guard state.keys.removeValue(forKey: id) != nil else { return false }
            state.generation &+= 1
            return true
        }
    }
}

extension ProviderKey {
    /// The same key id, team, public key, topics and environments.
    func isSame(as other: ProviderKey) -> Bool {
        keyID == other.keyID && teamID == other.teamID && topics == other.topics && environments == other.environments
            && publicKey.rawRepresentation == other.publicKey.rawRepresentation
    }
}
