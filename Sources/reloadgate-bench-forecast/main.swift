// Herd forecast benchmark: the forecast's read over N registered timelines, and what it does to the group
// commits that run meanwhile. Not part of the tests.
// Run: swift run -c release reloadgate-bench-forecast [instances]        (default 1,000,000; SQLite)
//      STORE_URL=postgres://... swift run -c release reloadgate-bench-forecast [instances]   (an empty database)
//
// The store gets N widget instances on devices of 64 (registered in batches of group commits), each with a
// planned timeline reload: half `.after` the same minute 30 minutes ahead, half spread over the next 24
// hours, and 10,000 pending reloads. Then:
//   1. the forecast of the next 24 hours (`herdForecastCounts`, laid out by `HerdForecast`), ROUNDS times:
//      each round's time, and the median;
//   2. group commits (one request, its decision and an instance state each, durable) one after another for
//      5 s alone, 5 s while forecasts run back to back on a read connection, and 5 s alone again: the
//      commits' median, 99th percentile and worst time in each. The reference is the commits alone, in
//      the same run, before and after.

import Foundation
import Logging
import ReloadGateCore
import ReloadGateStore
import Synchronization

func seconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
}

func percentile(_ values: [Double], _ fraction: Double) -> Double {
    guard !values.isEmpty else { return 0 }
    let sorted = values.sorted()
    return sorted[min(sorted.count - 1, Int(Double(sorted.count) * fraction))]
}

func main() async throws {
    let arguments = CommandLine.arguments
    let instanceCount = arguments.count > 1 ? Int(arguments[1]) ?? 1_000_000 : 1_000_000
    let environment = ProcessInfo.processInfo.environment
    let rounds = Int(environment["ROUNDS"] ?? "") ?? 5
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("reloadgate-bench-forecast-\(getpid())")
    // KEEP_STORE (any value): the SQLite store is left in place, and its path printed, to look into.
    defer { if environment["KEEP_STORE"] == nil { try? FileManager.default.removeItem(at: directory) } else { print("store kept in \(directory.path)") } }
    let now = Date()
    let store: any GatewayStore
    if let url = environment["STORE_URL"].flatMap({ $0.isEmpty ? nil : $0 }) {
        var logger = Logger(label: "bench-forecast")
        logger.logLevel = .warning
        store = try await PostgresStore(
            location: try PostgresLocation(url: url), secretsDirectory: directory.appendingPathComponent("data").path,
            environment: .sandbox, now: now, logger: logger
        )
    } else {
        store = try SQLiteStore(directory: directory.appendingPathComponent("data").path, environment: .sandbox, now: now)
    }
    defer { try? store.close() }
    let app = try await store.createApp(bundle: try BundleID("com.example.bench"), teamID: nil, allowsExemptions: false, now: now).app
    let clock = ContinuousClock()

    // The registry: devices of 64 widgets of four kinds, 256 devices a group commit.
    var started = clock.now
    var instances: [Int64] = []
    instances.reserveCapacity(instanceCount)
    let widgets = (0..<64).map { WidgetRegistration(id: "w\($0)", kind: ["scores", "news", "weather", "stocks"][$0 % 4], family: .systemSmall, configuration: WidgetConfiguration()) }
    var device = 0
    while instances.count < instanceCount {
        var writes: [RegistryWrite] = []
        for _ in 0..<256 where instances.count + writes.count * 64 < instanceCount {
            writes.append(.putDevice(app: app, token: try DeviceToken(String(format: "%064x", device + 1)), widgets: widgets, previousToken: nil))
            device += 1
        }
        for result in try await store.writeRegistry(writes, now: now) {
            guard case .success(.device(let registration)) = result else { fatalError("a registration failed: \(result)") }
            instances += registration.instances.map(\.id)
        }
    }
    instances = Array(instances.prefix(instanceCount))
    print("registered \(instances.count) instances on \(device) devices in \(String(format: "%.1f", seconds(started.duration(to: clock.now)))) s")

    // Planned reloads: half in one minute 30 minutes ahead, half spread over 24 hours; 10,000 pending.
    started = clock.now
    let start = HerdForecast.minuteStart(of: Timestamp(now))
    let herd = start.milliseconds + 30 * 60_000 + 15_000
    var batch = LedgerBatch()
    for (index, instance) in instances.enumerated() {
        let planned = index % 2 == 0 ? herd : start.milliseconds + Int64(index) * 86_400_000 / Int64(instances.count)
        var pending: PendingSnapshot?
        if index % (max(1, instances.count / 10_000)) == 1 {
            pending = PendingSnapshot(
                due: Timestamp(milliseconds: start.milliseconds + Int64(index % 600) * 1000), priority: .high, expiration: nil,
                requests: [], requestCount: 0, collapseID: nil, team: nil, exempt: false
            )
        }
        batch.instanceStates.append((instance, InstanceSnapshot(bucketFullAt: nil, lastReload: nil, plannedReload: Timestamp(milliseconds: planned), pending: pending)))
        if batch.instanceStates.count == 50_000 {
            try await store.commit(batch)
            batch = LedgerBatch()
        }
    }
    if !batch.instanceStates.isEmpty { try await store.commit(batch) }
    print("planned reloads written in \(String(format: "%.1f", seconds(started.duration(to: clock.now)))) s")

    // 1. The forecast, ROUNDS times.
    var times: [Double] = []
    var forecast: HerdForecast?
    for _ in 0..<rounds {
        let began = clock.now
        let counts = try await store.herdForecastCounts(start: start, minutes: 24 * 60, bundle: nil, kind: nil)
        forecast = HerdForecast(start: start, minutes: 24 * 60, counts: counts)
        times.append(seconds(began.duration(to: clock.now)))
    }
    guard let forecast, let peak = forecast.peak else { fatalError("the forecast is empty") }
    print(String(
        format: "forecast of 24 h over %d instances: median %.3f s, slowest %.3f s (%d rounds); %d reloads, peak %d at minute %d",
        instances.count, percentile(times, 0.5), times.max() ?? 0, rounds, forecast.total, peak.count,
        Int((peak.start.milliseconds - start.milliseconds) / 60_000)
    ))

    // 2. Group commits alone, then beside forecasts back to back.
    var nextRequest: RequestID = 1
    func commits(for duration: Duration) async throws -> [Double] {
        var took: [Double] = []
        let until = clock.now.advanced(by: duration)
        while clock.now < until {
            let instance = instances[Int(nextRequest) % instances.count]
            var batch = LedgerBatch()
            batch.requests = [RecordedRequest(
                id: nextRequest, app: app.id, source: .webhook, received: Timestamp(now), priority: .high, expiration: nil,
                collapseID: nil, exempt: false, summary: #"{"kind":"scores"}"#
            )]
            batch.decisions = [Decision(request: nextRequest, instance: InstanceHandle(Int32(instance)), kind: .absorbed, due: nil, reason: .absorbedByTimeline(plannedReload: Timestamp(milliseconds: herd)))]
            batch.instanceStates = [(instance, InstanceSnapshot(bucketFullAt: nil, lastReload: nil, plannedReload: Timestamp(milliseconds: herd), pending: nil))]
            nextRequest += 1
            let began = clock.now
            try await store.commit(batch)
            took.append(seconds(began.duration(to: clock.now)) * 1000)
        }
        return took
    }
    let alone = try await commits(for: .seconds(5))
    let finished = Atomic<Int>(0)
    let forecasts = Task {
        while !Task.isCancelled {
            _ = try await store.herdForecastCounts(start: start, minutes: 24 * 60, bundle: nil, kind: nil)
            finished.add(1, ordering: .relaxed)
        }
    }
    let beside = try await commits(for: .seconds(5))
    let forecastCount = finished.load(ordering: .relaxed)
    forecasts.cancel()
    _ = try? await forecasts.value
    let aloneAgain = try await commits(for: .seconds(5))
    print(String(format: "commits alone (before):   %d, median %.2f ms, 99th %.2f ms, worst %.2f ms", alone.count, percentile(alone, 0.5), percentile(alone, 0.99), alone.max() ?? 0))
    print(String(format: "commits beside forecasts: %d, median %.2f ms, 99th %.2f ms, worst %.2f ms (%d forecasts meanwhile)", beside.count, percentile(beside, 0.5), percentile(beside, 0.99), beside.max() ?? 0, forecastCount))
    print(String(format: "commits alone (after):    %d, median %.2f ms, 99th %.2f ms, worst %.2f ms", aloneAgain.count, percentile(aloneAgain, 0.5), percentile(aloneAgain, 0.99), aloneAgain.max() ?? 0))
}

try await main()
