import ReloadGateStore
import Synchronization

/// What the push path needs to know of a device, kept in memory: its status for the app and, when
/// active, the instances a push without `reloadgate` targeting reloads. Saves two SQLite reads per push.
///
/// Entries are valid for one generation of the registry: every change to devices or widgets in this
/// process (registry API, adoption) starts a new generation, so nothing stale is used. Devices are changed
/// only through this process (no command changes them behind its back).
final class PushDeviceCache: Sendable {
    struct Entry: Sendable {
        var status: PushDeviceStatus
        /// The push targets of an active device without narrowing (all push-enabled widgets).
        var allTargets: [Int64]
    }

    private struct Key: Hashable {
        var app: Int64
        var token: String
    }

    private struct State {
        var generation = 0
        var entries: [Key: Entry] = [:]
    }

    private let state = Mutex(State())
    /// Entries kept at most; the cache starts over beyond it.
    private let capacity: Int

    init(capacity: Int = 500_000) {
        self.capacity = capacity
    }

    /// The current generation, to hand back to ``store(_:app:token:generation:)``.
    var generation: Int { state.withLock { $0.generation } }

    func entry(app: Int64, token: String) -> Entry? {
        state.withLock { $0.entries[Key(app: app, token: token)] }
    }

    /// Keeps an entry read from the store, unless the registry changed since `generation`.
    func store(_ entry: Entry, app: Int64, token: String, generation: Int) {
        state.withLock { state in
            guard state.generation == generation else { return }
            if state.entries.count >= capacity { state.entries.removeAll(keepingCapacity: true) }
            state.entries[Key(app: app, token: token)] = entry
        }
    }

    /// The registry changed: forget everything.
    func invalidate() {
        state.withLock { state in
            state.generation += 1
            state.entries.removeAll(keepingCapacity: true)
        }
    }
}
