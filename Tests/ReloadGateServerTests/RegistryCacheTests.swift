import Foundation
import ReloadGateCore
import ReloadGateStore
import Synchronization
import Testing

@testable import ReloadGateServer

/// The push path's device entries and the webhook's kept targets: a read that a registry change overtook
/// is not kept, a change of one token leaves the other tokens' entries, and what is kept is bounded by the
/// instances it lists, not by the calls seen.
struct RegistryCacheTests {
    let target = ReloadTarget(kind: "scores")
    let a = String(repeating: "a", count: 64), b = String(repeating: "b", count: 64)

    func device(_ id: Int64) -> RegistryCache.Entry {
        RegistryCache.Entry(status: .active(device: id, pushType: .widgets), allTargets: [id])
    }

    @Test func aChangedTokenIsForgottenAndTheOthersKept() {
        let cache = RegistryCache()
        cache.store(device(1), app: 1, token: a, generation: cache.generation)
        cache.store(device(2), app: 1, token: b, generation: cache.generation)
        cache.storeTargets([(1, 1)], app: 1, target: target, generation: cache.generation)
        let before = cache.generation
        cache.forget(tokens: [a])
        #expect(cache.entry(app: 1, token: a) == nil)
        #expect(cache.entry(app: 1, token: b)?.allTargets == [2])
        // Any device change may change what a target selects.
        #expect(cache.targets(app: 1, target: target) == nil)
        // A read of the changed token that began before the change is not kept; one of another token is.
        cache.store(device(3), app: 1, token: a, generation: before)
        #expect(cache.entry(app: 1, token: a) == nil)
        cache.store(device(4), app: 1, token: b, generation: before)
        #expect(cache.entry(app: 1, token: b)?.allTargets == [4])
        // Nor is a target read from before any change.
        cache.storeTargets([(1, 1)], app: 1, target: target, generation: before)
        #expect(cache.targets(app: 1, target: target) == nil)
        // An entry is the app's it was read for.
        #expect(cache.entry(app: 2, token: a) == nil)
    }

    @Test func forgettingEverythingDropsReadsFromBefore() {
        let cache = RegistryCache()
        cache.store(device(1), app: 1, token: a, generation: cache.generation)
        let before = cache.generation
        cache.invalidate()
        #expect(cache.entry(app: 1, token: a) == nil)
        expectOnlyAFreshRead(of: b, keptIn: cache, since: before)
    }

    @Test func theRecordOfChangedTokensIsBounded() {
        let cache = RegistryCache()
        let before = cache.generation
        // More changed tokens than are recorded: the record starts over, and a read from before it of
        // a token never changed is not kept either, since it cannot be told from one whose change was dropped.
        for token in 0...RegistryCache.changesKept {
            cache.forget(tokens: [String(format: "%064x", token)])
        }
        expectOnlyAFreshRead(of: a, keptIn: cache, since: before)
    }

    /// A read of `token` that began at `before` is not kept; one that begins now is.
    func expectOnlyAFreshRead(of token: String, keptIn cache: RegistryCache, since before: Int, sourceLocation: SourceLocation = #_sourceLocation) {
        cache.store(device(1), app: 1, token: token, generation: before)
        #expect(cache.entry(app: 1, token: token) == nil, sourceLocation: sourceLocation)
        cache.store(device(1), app: 1, token: token, generation: cache.generation)
        #expect(cache.entry(app: 1, token: token) != nil, sourceLocation: sourceLocation)
    }

    /// Reads of a device as the push path makes them on a miss: each counted, each held until `released`,
    /// the `n`th answering `device(n)`.
    final class HeldReads: Sendable {
        let begun = Mutex(0)
        let released = Mutex(false)

        func read() async throws -> (entry: RegistryCache.Entry, keep: Bool) {
            let number = begun.withLock { $0 += 1; return $0 }
            while !released.withLock({ $0 }) { try await Task.sleep(for: .milliseconds(5)) }
            return (RegistryCacheTests().device(Int64(number)), true)
        }

        /// Waits until `count` reads have begun (at most 10 s).
        func waitForBegun(_ count: Int) async throws {
            for _ in 0..<2_000 where begun.withLock({ $0 }) < count { try await Task.sleep(for: .milliseconds(5)) }
        }
    }

    @Test func concurrentMissesOfATokenShareOneRead() async throws {
        let cache = RegistryCache()
        let reads = HeldReads()
        let misses = (0..<8).map { _ in Task { try await cache.entry(app: 1, token: a, orRead: reads.read) } }
        try await reads.waitForBegun(1)
        // The other misses come while the first read is held.
        try await Task.sleep(for: .milliseconds(300))
        reads.released.withLock { $0 = true }
        for miss in misses { #expect(try await miss.value.allTargets == [1]) }
        #expect(reads.begun.withLock { $0 } == 1)
        #expect(cache.entry(app: 1, token: a)?.allTargets == [1])
        // Another app's miss of the same token is its own read.
        _ = try await cache.entry(app: 2, token: a, orRead: reads.read)
        #expect(reads.begun.withLock { $0 } == 2)
    }

    @Test func aMissAfterAChangeDoesNotShareAReadFromBefore() async throws {
        let cache = RegistryCache()
        let reads = HeldReads()
        let before = Task { try await cache.entry(app: 1, token: a, orRead: reads.read) }
        try await reads.waitForBegun(1)
        cache.forget(tokens: [a])
        let after = Task { try await cache.entry(app: 1, token: a, orRead: reads.read) }
        try await reads.waitForBegun(2)
        reads.released.withLock { $0 = true }
        #expect(try await before.value.allTargets == [1])
        #expect(try await after.value.allTargets == [2])
        // The read the change overtook is not kept; the one after it is.
        #expect(cache.entry(app: 1, token: a)?.allTargets == [2])
        #expect(reads.begun.withLock { $0 } == 2)
    }

    @Test func aReadFromBeforeAChangeIsNotKept() {
        let cache = RegistryCache()
        let generation = cache.generation
        cache.invalidate()
        cache.storeTargets([(1, 1)], app: 1, target: target, generation: generation)
        #expect(cache.targets(app: 1, target: target) == nil)

        cache.storeTargets([(1, 1)], app: 1, target: target, generation: cache.generation)
        #expect(cache.targets(app: 1, target: target)?.map(\.instance) == [1])
        // Another app's same target is its own.
        #expect(cache.targets(app: 2, target: target) == nil)
        cache.invalidate()
        #expect(cache.targets(app: 1, target: target) == nil)
    }

    @Test func keptTargetsStayWithinTheirCapacity() {
        let cache = RegistryCache(targetCapacity: 10)
        // A target listing more than the capacity is never kept.
        cache.storeTargets((0..<10).map { ($0, $0) }, app: 1, target: target, generation: cache.generation)
        #expect(cache.targets(app: 1, target: target) == nil)
        // Many targets of a few instances each: the cache starts over instead of growing. Each weighs 4
        // (itself, two instances, one token): two fit in 10.
        for device in 0..<1_000 {
            let listed = ReloadTarget(kind: "scores", devices: [try! DeviceToken(String(format: "%064x", device))])
            cache.storeTargets([(Int64(device), Int64(device)), (Int64(device) + 10_000, Int64(device))], app: 1, target: listed, generation: cache.generation)
            #expect(cache.targetCount <= 2)
            #expect(cache.targets(app: 1, target: listed)?.count == 2)
        }
        // Tokens named weigh as much as instances listed: a target naming 10 devices that selects none is not kept.
        let named = ReloadTarget(kind: "scores", devices: (0..<10).map { try! DeviceToken(String(format: "%064x", $0)) })
        cache.storeTargets([], app: 1, target: named, generation: cache.generation)
        #expect(cache.targets(app: 1, target: named) == nil)
    }
}
