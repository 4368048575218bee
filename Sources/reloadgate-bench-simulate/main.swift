// What-if simulator benchmark: a synthetic day replayed through the scheduler, and the same requests
// through the bare scheduler (the scheduler benchmark's loop: receive, and a tick every 1,000 requests)
// measured in the same run, so that the simulator's bookkeeping shows as a ratio. Not part of the tests.
//
//   swift run -c release reloadgate-bench-simulate [devices] [changes-per-match] [news-per-device]
//
// Defaults: 500,000 devices with 2 widgets each (1,000,000 instances), 1,000 matches with 16 score
// changes each (8,000,000 score pushes) and 4 news pushes per device (2,000,000): 10,000,000 requests.

import Foundation
import ReloadGateCore
import ReloadGateSimulation

func seconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
}

/// Resident set size in bytes, from /proc/self/statm.
func residentBytes() -> Int {
    guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
    let fields = text.split(separator: " ")
    guard fields.count > 1, let pages = Int(fields[1]) else { return 0 }
    return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
}

func main() {
    let arguments = CommandLine.arguments
    func argument(_ index: Int, _ fallback: Int) -> Int { arguments.count > index ? Int(arguments[index]) ?? fallback : fallback }
    var options = TraceGenerator.Options()
    options.devices = argument(1, 500_000)
    options.widgetsPerDevice = 2
    options.matches = 1_000
    options.changesPerMatch = argument(2, 16)
    options.newsPerDevice = argument(3, 4)
    let clock = ContinuousClock()

    var generator: TraceGenerator?
    let generation = clock.measure { generator = TraceGenerator(options) }
    let trace = generator!
    print("trace:          \(trace.requestCount) requests over \(trace.instanceCount) widget instances on \(options.devices) devices (sports-evening)")
    print("generation:     \(String(format: "%.2f", seconds(generation))) s (not in the figures below)")

    // The simulator: every event, with its figures (staleness, reloads per instance, hours, kinds).
    var simulation = Simulation(configuration: SchedulerConfiguration())
    let simulated = clock.measure {
        simulation.replay(trace.events)
        simulation.finish(at: options.day.adding(seconds: 86_400))
    }
    let report = simulation.report()

    // Reference: the same requests through the bare scheduler, as the scheduler benchmark drives it.
    var scheduler = ReloadScheduler()
    var decided: [Decision] = []
    decided.reserveCapacity(4)
    var released = 0
    var count = 0
    var id: RequestID = 0
    let bare = clock.measure {
        for event in trace.events {
            switch event {
            case .registration(_, let device, let widgets):
                for widget in widgets { scheduler.register(widget.instance, device: device, kind: widget.kind) }
            case .timeline(_, let instance, let planned):
                scheduler.setPlannedReload(instance, planned)
            case .request(let request):
                guard case .instances(let targets) = request.targets else { continue }
                id += 1
                decided.removeAll(keepingCapacity: true)
                scheduler.receive(
                    ReloadRequest(id: id, targets: targets, priority: request.priority, received: request.at),
                    into: &decided
                )
                count += 1
                if count % 1000 == 0 { released += scheduler.tick(now: request.at).deliveries.count }
            }
        }
        released += scheduler.tick(now: options.day.adding(seconds: 86_400)).deliveries.count
    }

    let rate = Double(trace.requestCount) / seconds(simulated)
    let reference = Double(trace.requestCount) / seconds(bare)
    print("simulate:       \(String(format: "%.2f", seconds(simulated))) s, \(Int(rate)) requests/s (one core)")
    print("bare scheduler: \(String(format: "%.2f", seconds(bare))) s, \(Int(reference)) requests/s (receive + a tick every 1,000, the scheduler benchmark's loop)")
    print("ratio:          \(String(format: "%.2f", rate / reference)) of the bare scheduler")
    print("RSS:            \(residentBytes() / 1_048_576) MiB")
    print("check:          \(report.devicePushes) APNs pushes simulated, \(released) released by the bare loop")
    for kind in report.kinds {
        print("  \(kind.name): \(kind.requests) requests, \(kind.deliveries) push reloads, \(kind.timelineReloads) timeline reloads, \(kind.merged) merged, \(kind.deferred) deferred")
    }
}

main()
