import ReloadGateCore
import ReloadGateHostileInput
import ReloadGateTesting
import Testing

/// Random request sequences over a fake clock, checked against the invariants of the rules.
@Suite(.offThePool)
struct SchedulingPropertyTests {

    /// A restart in the middle: every changed instance's snapshot is restored into a fresh scheduler,
    /// which must then decide and release exactly what the original does.
    @Test(arguments: 0..<50)
    func aRestoredSchedulerContinuesExactlyLikeTheOriginal(seed: UInt64) {
        var random = SplitMix64(seed: seed &+ 10_000)
        var original = SchedulerHarness()
        var written: [Int32: InstanceSnapshot] = [:]
        let instances: [Int32] = [10, 11, 20, 21, 22, 30]
        for instance in instances { original.register(instance, device: instance / 10) }
        var minute = 0.0
        func step(_ harness: inout SchedulerHarness, _ random: inout SplitMix64, _ minute: inout Double) -> [Decision] {
            minute += [0, 0.5, 1, 3, 7].randomElement(using: &random)!
            if Int.random(in: 0..<8, using: &random) == 0 {
                harness.tick(toMinutes: minute)
                let planned = SchedulerHarness.at(minutes: minute + Double.random(in: 0...30, using: &random))
                harness.scheduler.setTimeline(InstanceHandle(instances.randomElement(using: &random)!), Timeline(entries: [planned], policy: .atEnd))
                return []
            }
            return harness.push(
                instances.filter { _ in Int.random(in: 0..<3, using: &random) == 0 },
                atMinutes: minute,
                priority: Priority.allCases.randomElement(using: &random)!,
                expiration: Bool.random(using: &random) ? nil : SchedulerHarness.at(minutes: minute + Double.random(in: 0...20, using: &random)),
                collapseID: Bool.random(using: &random) ? nil : "c"
            )
        }
        for _ in 0..<100 {
            _ = step(&original, &random, &minute)
        }
        // Write-through, as the store does: the snapshots every tick returned.
        original.tick(toMinutes: minute)
        for (instance, snapshot) in original.written { written[instance] = snapshot }

        var restored = SchedulerHarness()
        for instance in instances {
            restored.register(instance, device: instance / 10)
            if let snapshot = written[instance] { restored.scheduler.restore(InstanceHandle(instance), snapshot) }
        }
        restored.nextID = original.nextID
        let deliveredBefore = original.deliveries.count
        var randomCopy = random
        var minuteCopy = minute
        for _ in 0..<100 {
            let expected = step(&original, &random, &minute)
            let actual = step(&restored, &randomCopy, &minuteCopy)
            #expect(actual == expected, "seed \(seed)")
        }
        original.tick(toMinutes: minute + 24 * 60)
        restored.tick(toMinutes: minute + 24 * 60)
        // The same deliveries; the order among equal times (and of the instances in one push) may differ,
        // since the restored heap was built in another order.
        func canonical(_ deliveries: some Sequence<Delivery>) -> [String] {
            deliveries.map { delivery in
                let reloaded = delivery.reloaded.sorted { $0.instance < $1.instance }.map { "\($0.instance.rawValue):\($0.charged)" }
                return "\(delivery.at.milliseconds) \(delivery.device.rawValue) \(reloaded) \(delivery.requests.sorted()) \(delivery.priority) \(String(describing: delivery.expiration))"
            }.sorted()
        }
        let expected = canonical(original.deliveries.dropFirst(deliveredBefore))
        let actual = canonical(restored.deliveries)
        #expect(expected.count == actual.count, "seed \(seed)")
        #expect(zip(expected, actual).filter { $0 != $1 }.count == 0, "seed \(seed): \(zip(expected, actual).first { $0 != $1 }.map { "\($0) vs \($1)" } ?? "")")
        #expect(original.scheduler.pendingCount == restored.scheduler.pendingCount)
    }

    @Test(arguments: 0..<200)
    func invariantsHoldForRandomRequestSequences(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        var harness = SchedulerHarness()
        let devices: [Int32] = [1, 2, 3]
        var instances: [Int32] = []
        for device in devices {
            for slot in 0..<Int32.random(in: 1...3, using: &random) {
                let instance = device * 10 + slot
                instances.append(instance)
                harness.register(instance, device: device, kind: slot == 0 ? "scores" : "news")
            }
        }
        var minute = 0.0
        var decided: [RequestID: [Decision]] = [:]
        var decidedAfterTick: [RequestID: Int] = [:]
        var requestTargets: [RequestID: Set<Int32>] = [:]
        for _ in 0..<Int.random(in: 50...300, using: &random) {
            minute += [0, 0.1, 0.5, 1, 3, 7, 30].randomElement(using: &random)!
            if Int.random(in: 0..<20, using: &random) == 0 {
                // A new timeline for a random instance.
                let instance = instances.randomElement(using: &random)!
                let planned = SchedulerHarness.at(minutes: minute + Double.random(in: 0...120, using: &random))
                let policy: Timeline.Policy = [.atEnd, .after(planned), .never].randomElement(using: &random)!
                harness.tick(toMinutes: minute)
                harness.scheduler.setTimeline(InstanceHandle(instance), Timeline(entries: [planned], policy: policy))
                continue
            }
            let targets = instances.filter { _ in Bool.random(using: &random) } + (Bool.random(using: &random) ? [99] : [])
            let expiration: Timestamp? =
                switch Int.random(in: 0..<4, using: &random) {
                case 0: SchedulerHarness.at(minutes: minute)
                case 1: SchedulerHarness.at(minutes: minute + Double.random(in: 0...90, using: &random))
                default: nil
                }
            let id = harness.nextID
            let decisions = harness.push(
                targets,
                atMinutes: minute,
                priority: Priority.allCases.randomElement(using: &random)!,
                expiration: expiration,
                collapseID: Bool.random(using: &random) ? nil : ["a", "b"].randomElement(using: &random),
                exempt: Int.random(in: 0..<10, using: &random) == 0
            )
            decided[id] = decisions
            decidedAfterTick[id] = harness.ticks
            requestTargets[id] = Set(targets.filter { $0 != 99 })
        }
        harness.tick(toMinutes: minute + 3 * 24 * 60)

        // Every request ends in exactly one decision per distinct known target, or one no-match.
        for (id, decisions) in decided {
            let targets = requestTargets[id]!
            if targets.isEmpty {
                #expect(decisions.map(\.kind) == [.noMatch], "seed \(seed) request \(id)")
            } else {
                #expect(Set(decisions.compactMap(\.instance?.rawValue)) == targets, "seed \(seed) request \(id)")
                #expect(decisions.count == targets.count, "seed \(seed) request \(id)")
            }
        }

        // Every request left waiting on an instance (scheduled, deferred, merged) is released with that
        // instance's next release after its decision: a delivery that reloads the instance (which lists
        // it once, however many of the device's widgets it waited on), a timeline reload or an expiry.
        // And nothing is released that was not waiting.
        var waiting: Set<String> = []
        for (id, decisions) in decided {
            for decision in decisions where [.scheduled, .deferred, .merged].contains(decision.kind) {
                let instance = decision.instance!.rawValue
                waiting.insert("\(id)@\(instance)")
                let next = harness.releases[instance, default: []].first { $0.tick > decidedAfterTick[id]! }
                #expect(next?.requests.contains(id) == true, "seed \(seed) request \(id) on \(instance)")
            }
        }
        for (instance, releases) in harness.releases {
            for release in releases {
                for id in release.requests where !waiting.contains("\(id)@\(instance)") {
                    // A delivery lists the requests of all the instances it reloads.
                    let anyInstance = decided[id]?.contains { [.scheduled, .deferred, .merged].contains($0.kind) } ?? false
                    #expect(anyInstance, "seed \(seed): request \(id) released on \(instance) without waiting")
                }
            }
        }
        for delivery in harness.deliveries {
            #expect(Set(delivery.requests).count == delivery.requests.count, "seed \(seed): a request listed twice")
        }
        #expect(harness.scheduler.pendingCount == 0, "seed \(seed)")

        // Per instance: deliveries keep the minimum interval after any reload; charges stay within the bucket.
        var reloads: [Int32: [(at: Int64, delivery: Bool, charged: Bool)]] = [:]
        for delivery in harness.deliveries {
            for reloaded in delivery.reloaded {
                reloads[reloaded.instance.rawValue, default: []].append((delivery.at.milliseconds, true, reloaded.charged))
            }
        }
        for reload in harness.timelineReloads {
            reloads[reload.instance.rawValue, default: []].append((reload.at.milliseconds, false, reload.charged))
        }
        let policy = SchedulingPolicy()
        for (instance, events) in reloads {
            let sorted = events.sorted { $0.at < $1.at }
            for (previous, next) in zip(sorted, sorted.dropFirst()) where next.delivery {
                #expect(next.at - previous.at >= policy.minimumInterval * 1000, "seed \(seed) instance \(instance)")
            }
            let charges = sorted.filter(\.charged).map(\.at)
            for (index, start) in charges.enumerated() {
                let inWindow = charges[index...].prefix { $0 < start + 86_400_000 }.count
                #expect(inWindow <= policy.burst + policy.dailyBudget, "seed \(seed) instance \(instance)")
            }
        }
    }
}
