// Scheduler benchmark: decisions per second and resident bytes per widget instance with a million
// instances. Not part of the tests. Run: swift run -c release reloadgate-bench-scheduler [instances] [requests]
//
// It prints a reference measured in the same run (one dictionary update per request, the least any
// scheduler must do) so that figures from noisy machines can be compared as ratios.

import Foundation
import ReloadGateCore
import ReloadGateHostileInput

/// Resident set size in bytes, from /proc/self/statm (second field, in pages).
func residentBytes() -> Int {
    guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
    let fields = text.split(separator: " ")
    guard fields.count > 1, let pages = Int(fields[1]) else { return 0 }
    return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
}

func seconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
}


// Everything runs inside a function: top-level variables are globals, and every access to a global
// is checked for exclusivity at run time, which would be measured too.
func main() {
    let arguments = CommandLine.arguments
    let instanceCount = arguments.count > 1 ? Int(arguments[1]) ?? 1_000_000 : 1_000_000
    let requestCount = arguments.count > 2 ? Int(arguments[2]) ?? 2_000_000 : 2_000_000
    let start = Timestamp(seconds: 1_790_172_000)
    var random = SplitMix64(seed: 42)
    let clock = ContinuousClock()

    // Requests prepared up front: one random instance each, 1 ms apart, a quarter of them priority 5.
    let targets = (0..<requestCount).map { _ in Int32.random(in: 0..<Int32(instanceCount), using: &random) }

    let before = residentBytes()
    var scheduler = ReloadScheduler()
    let registration = clock.measure {
        for instance in 0..<instanceCount {
            scheduler.register(InstanceHandle(Int32(instance)), device: DeviceHandle(Int32(instance / 2)), kind: "scores")
            let planned = start.adding(seconds: Int64.random(in: 600...86_400, using: &random))
            scheduler.setTimeline(InstanceHandle(Int32(instance)), Timeline(entries: [planned], policy: .atEnd))
        }
    }
    let after = residentBytes()
    // The registrations' write-through, taken before the clock starts as the engine takes it in the turn
    // that registered them: the timed loop's ticks snapshot only what its requests changed.
    let registered = scheduler.tick(now: start).instanceStates.count

    // Counted in an array, not a dictionary, to keep the bookkeeping out of the measurement.
    var kindCounts = Array(repeating: 0, count: DecisionKind.allCases.count)
    var deliveries = 0
    var decided: [Decision] = []
    decided.reserveCapacity(4)
    var changedInstances = 0
    // The requests as a caller hands them over, built before the clock starts: what is measured is the
    // scheduler deciding them, not the benchmark making or freeing them.
    let requests = targets.enumerated().map { index, target in
        ReloadRequest(
            id: RequestID(index),
            targets: [InstanceHandle(target)],
            priority: index % 4 == 0 ? .low : .high,
            received: start.adding(milliseconds: Int64(index))
        )
    }
    // Each request is moved out of a second list and handed over as the engine hands over the one it built.
    // Read out of the array, every request was copied (its lists and strings retained) and destroyed again:
    // 6% of the loop's instructions (callgrind). The second list shares the requests' lists with the first,
    // so none is freed in the loop either. The decisions are counted where they lie for the same reason.
    let handedOver = UnsafeMutablePointer<ReloadRequest>.allocate(capacity: requests.count)
    handedOver.initialize(from: requests, count: requests.count)
    defer { handedOver.deallocate() }
    var upcoming: [InstanceHandle] = []
    upcoming.reserveCapacity(100)
    let decisions = clock.measure {
        for index in requests.indices {
            if index % 100 == 0 {
                // The states the next hundred requests read first, asked for together, as the engine asks
                // for those of the requests it drains before it decides them.
                upcoming.removeAll(keepingCapacity: true)
                for ahead in index..<min(index + 100, requests.count) { upcoming.append(contentsOf: handedOver[ahead].targets) }
                scheduler.prefetch(upcoming)
            }
            let request = (handedOver + index).move()
            let now = request.received
            decided.removeAll(keepingCapacity: true)
            scheduler.receive(request, into: &decided)
            for k in decided.indices { kindCounts[decided[k].kind.index] += 1 }
            if index % 1000 == 999 {
                // The tick also returns the snapshots of the instances that changed, for the write-through.
                let output = scheduler.tick(now: now)
                deliveries += output.deliveries.count
                changedInstances += output.instanceStates.count
            }
        }
    }

    // Reference: the same loop updating one dictionary entry per request.
    var reference: [Int32: Int64] = [:]
    reference.reserveCapacity(instanceCount)
    let referenceTime = clock.measure {
        for (index, target) in targets.enumerated() {
            reference[target, default: 0] = max(reference[target, default: 0], Int64(index))
        }
    }

    let perSecond = Double(requestCount) / seconds(decisions)
    let referencePerSecond = Double(requestCount) / seconds(referenceTime)
    print("instances:                \(instanceCount) on \(instanceCount / 2) devices, each with a planned timeline reload")
    print("registration:             \(String(format: "%.2f", seconds(registration))) s, \(registered) snapshots written through before the requests")
    print("resident bytes/instance:  \((after - before) / instanceCount) (RSS \(before / 1_048_576) MiB -> \(after / 1_048_576) MiB)")
    print("requests:                 \(requestCount), 1 ms apart, one target each, 25% priority 5")
    print("decisions/s:              \(Int(perSecond))")
    print("reference dictionary/s:   \(Int(referencePerSecond))  (scheduler at \(String(format: "%.1f", perSecond / referencePerSecond * 100))% of it)")
    print("decisions by kind:        \(zip([DecisionKind.scheduled, .merged, .absorbed, .deferred, .expired, .noMatch], kindCounts).map { "\($0.rawValue) \($1)" }.joined(separator: ", "))")
    print("deliveries released:      \(deliveries), pending at the end: \(scheduler.pendingCount)")
    print("instance states:          \(changedInstances) snapshots returned by tick (every 1,000 requests), as the engine writes them through")
}

main()
