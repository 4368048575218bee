import Foundation
import ReloadGateTesting
import Testing

@testable import ReloadGateServer

/// The cluster simulation (docs/TESTING.md): a fixed number of seeds in every `swift test`;
/// `scripts/simulate-cluster SEEDS [FIRST]` runs more. A failing seed is printed with the shortest list
/// of its events that still fails, and replays alone with `RG_SIM_SEED=<seed>` (`RG_SIM_TRACE=1` prints
/// what the shortest list does, step by step; `RG_SIM_TRACE_ALL=1` every run, the seed's own included, for
/// a failure that a partition load's timing makes depend on the process: docs/TESTING.md).
@Suite(.timeLimit(.minutes(10)), .heavy)
struct ClusterSimulationTests {
    static let environment = ProcessInfo.processInfo.environment
    /// Seeds per run (`RG_SIM_SEEDS`), from `RG_SIM_FIRST_SEED`; or the one seed `RG_SIM_SEED`.
    static var seeds: ClosedRange<UInt64> {
        if let one = environment["RG_SIM_SEED"].flatMap(UInt64.init) { return one...one }
        let first = environment["RG_SIM_FIRST_SEED"].flatMap(UInt64.init) ?? 1
        let count = environment["RG_SIM_SEEDS"].flatMap(UInt64.init).map { max(1, min($0, 10_000_000)) } ?? 64
        return first...(first + count - 1)
    }
    static let gateways = 3
    static let devices = 8
    static let events = 300

    @Test func seedsKeepEveryInvariant() async throws {
        let started = ContinuousClock.now
        var events = 0
        for seed in Self.seeds {
            let list = SimulatedEvent.generate(seed: seed, count: Self.events, gateways: Self.gateways, devices: Self.devices)
            let outcome = await Self.outcome(of: list)
            events += outcome.events
            guard let violation = outcome.violation else { continue }
            let shortest = await Self.shrink(list, failingWith: violation)
            let report = """
                cluster simulation: seed \(seed) fails: \(violation)
                the shortest event list that still fails (\(shortest.events.count) of \(list.count) events; \(shortest.violation)):
                \(shortest.events.enumerated().map { "  \($0.offset): \($0.element)" }.joined(separator: "\n"))
                replay: RG_SIM_SEED=\(seed) swift test --filter ClusterSimulationTests
                """
            print(report)
            if Self.environment["RG_SIM_TRACE"] == "1" {
                print("the shortest list, traced:")
                _ = await Self.outcome(of: shortest.events, tracing: true)
            }
            Issue.record(Comment(rawValue: report))
            return
        }
        let took = started.duration(to: .now)
        let seconds = Double(took.components.seconds) + Double(took.components.attoseconds) / 1e18
        print(
            "cluster simulation: seeds \(Self.seeds.lowerBound)-\(Self.seeds.upperBound) (\(Self.seeds.count)) kept every invariant; "
                + "\(events) events in \(String(format: "%.2f", seconds)) s (\(Int(Double(events) / max(seconds, 0.001))) events/s)"
        )
    }

    /// A gateway forwards a push to another's partition, then takes that partition (the other's lease ran
    /// out) while a webhook call it was sent after the push was answered waits to be decided: the push is
    /// decided first, as one gateway would (seed 31's shortest list: the call was decided first when a
    /// partition's new requests were decided here before its inbox had been read).
    @Test func requestsForwardedBeforeATakeoverAreDecidedFirst() async throws {
        let events: [SimulatedEvent] = [
            .push(gateway: 0, device: 4, priority: 10), .advance(milliseconds: 7000), .turn(gateway: 0),
            .endCommit(gateway: 0, fails: false), .turn(gateway: 0), .webhook(gateway: 0, devices: [1, 2, 4, 7], key: nil),
            .heartbeat(gateway: 0), .storeFault(down: true), .turn(gateway: 0),
        ]
        let outcome = await Self.outcome(of: events)
        #expect(outcome.violation == nil, "\(outcome.violation ?? "")")
    }

    /// The same when the push still waits in the open batch, forwarded to the partition just taken, as
    /// the gateway reads that partition's inbox for the first time: the push is decided there and then,
    /// before the next (seed 222's shortest list, failing when the batch's forwards went on to the inbox).
    @Test func requestsForwardedInTheOpenBatchAreDecidedAtTheFirstInboxRead() async throws {
        let events: [SimulatedEvent] = [
            .push(gateway: 0, device: 7, priority: 10), .advance(milliseconds: 3000), .turn(gateway: 0),
            .endCommit(gateway: 0, fails: false), .storeFault(down: false), .turn(gateway: 2), .endCommit(gateway: 2, fails: false),
            .turn(gateway: 2), .storeFault(down: nil), .advance(milliseconds: 3000), .heartbeat(gateway: 2), .turn(gateway: 2),
            .turn(gateway: 2), .push(gateway: 2, device: 0, priority: 1), .turn(gateway: 2), .endCommit(gateway: 2, fails: false),
            .turn(gateway: 2), .endCommit(gateway: 2, fails: false), .turn(gateway: 2), .push(gateway: 2, device: 0, priority: 5),
        ]
        let outcome = await Self.outcome(of: events)
        #expect(outcome.violation == nil, "\(outcome.violation ?? "")")
    }

    /// Runs one list of events on a new cluster: the violation it found, if any, and how many events ran
    /// (settling included).
    static func outcome(of events: [SimulatedEvent], tracing: Bool = false) async -> (violation: String?, events: Int) {
        do {
            let simulation = try ClusterSimulation(gateways: gateways, devices: devices)
            simulation.tracing = tracing || environment["RG_SIM_TRACE_ALL"] == "1"
            try await simulation.start()
            do {
                try await simulation.run(events)
                return (nil, simulation.eventsRun)
            } catch {
                return ("\(error)", simulation.eventsRun)
            }
        } catch {
            return ("the cluster did not start: \(error)", 0)
        }
    }

    /// The violation without its numbers and ids: shrinking keeps a list only when it fails the same way.
    static func category(_ violation: String) -> String {
        // (Words holding a digit are numbers, ids and gateway names.)
        String(violation.split(separator: " ").filter { !$0.contains(where: \.isNumber) }.joined(separator: " ").prefix(60))
    }

    /// The shortest sub-list of `events` that still fails the same way (delta debugging: drop halves,
    /// quarters, ... single events while the failure stays).
    static func shrink(_ events: [SimulatedEvent], failingWith violation: String) async -> (events: [SimulatedEvent], violation: String) {
        let wanted = category(violation)
        var current = events
        var last = violation
        var chunk = max(1, current.count / 2)
        var runs = 0
        while chunk >= 1, runs < 3000 {
            var start = 0
            var removedAny = false
            while start < current.count, runs < 3000 {
                var candidate = current
                candidate.removeSubrange(start..<min(start + chunk, candidate.count))
                runs += 1
                if let found = await outcome(of: candidate).violation, category(found) == wanted {
                    current = candidate
                    last = found
                    removedAny = true
                } else {
                    start += chunk
                }
            }
            if chunk == 1 && !removedAny { break }
            chunk = chunk == 1 ? 1 : chunk / 2
        }
        return (current, last)
    }
}
