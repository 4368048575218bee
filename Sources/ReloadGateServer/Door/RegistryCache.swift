import ReloadGateCore
import ReloadGateStore
import Synchronization

/// What the push path and the reload webhook need to know of the registry, kept in memory: a device's
/// status for the app and, when active, the instances a push without `reloadgate` targeting reloads (saves
/// two SQLite reads per push); and the instances a webhook call's target selects (saves a store read per
/// call, a tenth of a call's CPU in a profile of `scripts/bench-webhook`; decision 0087).
///
/// Nothing stale is used. Every change to devices or widgets starts a new generation and forgets every kept
/// target. A change of known tokens (a registration, an adoption that added an instance, an operator's
/// removal, Apple's 410; written by this process or told by another gateway's notice) forgets those
/// tokens' entries only (``forget(tokens:)``); anything else (a notice that names no tokens, the
/// listener's reconnect) forgets every entry (``invalidate()``). A read is kept only if nothing it could
/// have missed changed since it began. Timelines do not change what a target selects and start none.
final class RegistryCache: Sendable {
    struct Entry: Sendable {
        var status: PushDeviceStatus
        /// The push targets of an active device without narrowing (all push-enabled widgets).
        var allTargets: [Int64]
    }

    /// An entry with the app it was read for: entries are found by token (an app's other tokens are not
    /// touched when one changes), and a token pushed for two apps keeps the last one read.
    private struct Kept {
        var app: Int64
        var entry: Entry
    }

    /// A webhook call's target: the same target of the same app selects the same instances within a generation.
    private struct TargetKey: Hashable {
        var app: Int64
        var target: ReloadTarget
    }

    /// The instances a target selected, with their devices.
    typealias Targets = [(instance: Int64, device: Int64)]

    /// A read of a token's entry under way, shared by the misses of that token that come while it runs.
    private struct Flight {
        var app: Int64
        /// The generation when the read began.
        var generation: Int
        var read: Task<(entry: Entry, keep: Bool), any Error>
    }

    private struct State {
        var generation = 0
        /// Reads under way, by token: one at a time for each (removed by the miss that began it).
        var flights: [String: Flight] = [:]
        /// The generation of the last change that forgot every entry: a read that began before it is
        /// not kept.
        var forgotAllAt = 0
        /// The generation of each token's last change since ``forgotAllAt`` (at most
        /// ``RegistryCache/changesKept``; past that, the record starts over as if every entry had
        /// been forgotten).
        var changedAt: [String: Int] = [:]
        var entries: [String: Kept] = [:]
        var targets: [TargetKey: Targets] = [:]
        /// What all kept targets weigh (``RegistryCache/weight(of:_:)``), counted against
        /// ``RegistryCache/targetCapacity``.
        var targetWeight = 0
    }

    private let state = Mutex(State())
    /// Entries kept at most; the cache starts over beyond it.
    private let capacity: Int
    /// What the kept targets may weigh at most, in instances listed and device tokens named (a token key
    /// takes about 80 bytes, an instance 16): a few megabytes however many calls come. A fan-out over more
    /// is read each time rather than kept, and the targets start over beyond it.
    private let targetCapacity: Int

    init(capacity: Int = 500_000, targetCapacity: Int = 250_000) {
        self.capacity = capacity
        self.targetCapacity = targetCapacity
    }

    /// The current generation, to hand back to ``store(_:app:token:generation:)``.
    var generation: Int { state.withLock { $0.generation } }

    func entry(app: Int64, token: String) -> Entry? {
        state.withLock { state in
            guard let kept = state.entries[token], kept.app == app else { return nil }
            return kept.entry
        }
    }

    /// Keeps an entry read from the store, unless `token` changed (or every entry was forgotten) since
    /// `generation`, when the read began.
    func store(_ entry: Entry, app: Int64, token: String, generation: Int) {
        state.withLock { state in
            guard Self.unchanged(token, since: generation, in: state) else { return }
            if state.entries.count >= capacity { state.entries.removeAll(keepingCapacity: true) }
            state.entries[token] = Kept(app: app, entry: entry)
        }
    }

    /// Whether nothing a read of `token` that began at `generation` could have missed changed since.
    private static func unchanged(_ token: String, since generation: Int, in state: State) -> Bool {
        generation >= state.forgotAllAt && (state.changedAt[token] ?? generation) <= generation
    }

    /// The entry of `token` for `app`: kept, or from a read of it under way that nothing has overtaken,
    /// or read now by `read` (whose `keep` says whether the entry may be kept: an unknown device's is
    /// not) and kept unless overtaken. Concurrent pushes of a device the cache does not hold (each of
    /// a sender's connections walking the same list of devices) make one read, not one each.
    func entry(
        app: Int64, token: String, orRead read: @escaping @Sendable () async throws -> (entry: Entry, keep: Bool)
    ) async throws -> Entry {
        enum Found { case kept(Entry), joined(Task<(entry: Entry, keep: Bool), any Error>), began(Flight) }
        let found: Found = state.withLock { state in
            if let kept = state.entries[token], kept.app == app { return .kept(kept.entry) }
            if let flight = state.flights[token], flight.app == app, Self.unchanged(token, since: flight.generation, in: state) {
                return .joined(flight.read)
            }
            let flight = Flight(app: app, generation: state.generation, read: Task { try await read() })
            state.flights[token] = flight
            return .began(flight)
        }
        switch found {
        case .kept(let entry): return entry
        case .joined(let read): return try await read.value.entry
        case .began(let flight):
            let result = await flight.read.result
            state.withLock { state in
                if state.flights[token]?.read == flight.read { state.flights[token] = nil }
            }
            let (entry, keep) = try result.get()
            if keep { store(entry, app: app, token: token, generation: flight.generation) }
            return entry
        }
    }

    /// Tokens whose change is recorded at most, for reads still under way (a few milliseconds each): about
    /// 100 bytes a token.
    static let changesKept = 4_096

    /// These tokens' devices changed (hex, as the push path names them; written here or told by another
    /// gateway): their entries and every kept target are forgotten, and a read of one of them that began
    /// before is not kept.
    func forget(tokens: some Sequence<String>) {
        state.withLock { state in
            state.generation += 1
            for token in tokens {
                state.entries[token] = nil
                state.changedAt[token] = state.generation
            }
            if state.changedAt.count > Self.changesKept {
                state.changedAt.removeAll()
                state.forgotAllAt = state.generation
            }
            state.targets.removeAll()
            state.targetWeight = 0
        }
    }

    /// The number of targets kept.
    var targetCount: Int { state.withLock { $0.targets.count } }

    /// The instances `target` of `app` selected when last read in this generation, if kept.
    func targets(app: Int64, target: ReloadTarget) -> Targets? {
        state.withLock { $0.targets[TargetKey(app: app, target: target)] }
    }

    /// Keeps what a target selected, read from the store, unless the registry changed since `generation`.
    func storeTargets(_ targets: Targets, app: Int64, target: ReloadTarget, generation: Int) {
        let weight = Self.weight(of: target, targets)
        guard weight <= targetCapacity else { return }
        state.withLock { state in
            guard state.generation == generation else { return }
            let key = TargetKey(app: app, target: target)
            if let kept = state.targets[key] { state.targetWeight -= Self.weight(of: target, kept) }
            if state.targetWeight + weight > targetCapacity {
                state.targets.removeAll()
                state.targetWeight = 0
            }
            state.targetWeight += weight
            state.targets[key] = targets
        }
    }

    /// What a kept target weighs: the instances it lists, the device tokens and configuration values its
    /// key names, and one for the entry itself.
    static func weight(of target: ReloadTarget, _ targets: Targets) -> Int {
        1 + targets.count + (target.devices?.count ?? 0) + target.match.count
    }

    /// The registry changed in a way not known token by token: forget everything.
    func invalidate() {
        state.withLock { state in
            state.generation += 1
            state.forgotAllAt = state.generation
            state.changedAt.removeAll()
            state.entries.removeAll(keepingCapacity: true)
            state.targets.removeAll()
            state.targetWeight = 0
        }
    }
}
