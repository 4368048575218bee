import Foundation
import ReloadGateCore
import Testing

@testable import ReloadGateServer

/// The webhook's kept targets: a read that a registry change overtook is not kept, and what is kept is
/// bounded by the instances it lists, not by the calls seen.
struct RegistryCacheTests {
    let target = ReloadTarget(kind: "scores")

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
