@testable import ReloadGateCore
import Testing

/// The scheduler's instance table behaves like an array of values: growth keeps what was written,
/// fresh entries are unregistered, and a copy is independent of the original.
struct InstanceTableTests {
    @Test func growthKeepsEntriesAndAddsUnregisteredOnes() {
        var table = InstanceTable()
        #expect(table.count == 0)
        table.grow(to: 3)
        table[1].device = 7
        table[1].lastReload = 1_000
        // Past the huge-page size (2 MiB), through several reallocations.
        table.grow(to: 200_000)
        #expect(table.count == 200_000)
        #expect(table[1].device == 7 && table[1].lastReload == 1_000)
        #expect(table[0].device == -1 && table[199_999].device == -1)
        #expect(table[199_999].plannedReload == ReloadScheduler.InstanceState.none)
        table.grow(to: 10)
        #expect(table.count == 200_000, "it never shrinks")
    }

    @Test func aCopyIsIndependent() {
        var original = InstanceTable()
        original.grow(to: 100_000)
        original[5].device = 1
        var copy = original
        copy[5].device = 2
        copy.grow(to: 100_001)
        original[6].device = 3
        #expect(original[5].device == 1 && copy[5].device == 2)
        #expect(original[6].device == 3 && copy[6].device == -1)
        #expect(original.count == 100_000 && copy.count == 100_001)
    }

    @Test func aSchedulerCopyDecidesOnItsOwn() {
        var first = ReloadScheduler()
        first.register(InstanceHandle(0), device: DeviceHandle(0), kind: "scores")
        let second = first
        let now = Timestamp(seconds: 1_000)
        _ = first.receive(ReloadRequest(id: RequestID(1), targets: [InstanceHandle(0)], priority: .high, received: now))
        #expect(first.tick(now: now).deliveries.count == 1)
        #expect(first.instances[0].lastReload == now.milliseconds)
        #expect(second.instances[0].lastReload == ReloadScheduler.InstanceState.never)
        #expect(second.pendingCount == 0)
    }
}
