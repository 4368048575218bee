// Group-commit benchmark: the store's cost per push, without the network. Not part of the tests.
// Run: swift run -c release reloadgate-bench-store [batches] [pushes per batch] [devices]
//      STORE_URL=postgres://... swift run -c release reloadgate-bench-store ...   (PostgreSQL; an empty database)
//
// Each batch is shaped like a group commit of the ingress benchmark (scripts/bench-ingress): its pushes
// spread over the devices, one request and one `merged` decision each, and the new state of every
// device's instance with a pending reload listing its first 100 requests. Commits are durable
// (`synchronous = FULL`), one after the other, as the scheduler makes them. The reference, measured in the
// same run on another file: the same number of transactions, each inserting one row per push into a
// table without indexes (the least a durable ledger must write). With STORE_URL the store is PostgreSQL,
// its commits fenced by the partition leases as a gateway's are, and the reference is the same table in
// that database, each commit one statement.
//
// To see what each part of a commit costs, leave parts out (environment, any value): NO_DECISIONS,
// NO_INSTANCE_STATES, NO_REQUEST_LISTS (pending reloads with empty request lists), NO_FENCE (PostgreSQL:
// commits not fenced by the leases).

import Foundation
import Logging
import ReloadGateAPNs
import ReloadGateCore
import ReloadGateStore

func seconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
}

/// User + system CPU time of this process, in seconds.
func processCPU() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    let user = Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
    let system = Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
    return user + system
}

func main() async throws {
    let arguments = CommandLine.arguments
    let batchCount = arguments.count > 1 ? Int(arguments[1]) ?? 400 : 400
    let perBatch = arguments.count > 2 ? Int(arguments[2]) ?? 256 : 256
    let deviceCount = arguments.count > 3 ? Int(arguments[3]) ?? 100 : 100
    let environment = ProcessInfo.processInfo.environment
    let withDecisions = environment["NO_DECISIONS"] == nil
    let withInstanceStates = environment["NO_INSTANCE_STATES"] == nil
    let withRequestLists = environment["NO_REQUEST_LISTS"] == nil

    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("reloadgate-bench-store-\(getpid())")
    defer { try? FileManager.default.removeItem(at: directory) }
    let now = Date(timeIntervalSince1970: 1_790_172_000)
    let url = environment["STORE_URL"].flatMap { $0.isEmpty ? nil : $0 }
    let store: any GatewayStore
    var postgres: PostgresStore?
    if let url {
        var logger = Logger(label: "bench-store")
        logger.logLevel = .warning
        postgres = try await PostgresStore(
            location: try PostgresLocation(url: url), secretsDirectory: directory.appendingPathComponent("data").path,
            environment: .sandbox, now: now, logger: logger
        )
        store = postgres!
    } else {
        store = try SQLiteStore(directory: directory.appendingPathComponent("data").path, environment: .sandbox, now: now)
    }
    defer { try? store.close() }
    let app = try await store.createApp(bundle: try BundleID("com.example.bench"), teamID: nil, allowsExemptions: false, now: now).app
    // On PostgreSQL the commits are fenced like a gateway's: every partition leased to this process.
    let leases = environment["NO_FENCE"] != nil ? nil : try await postgres?.heartbeat(gateway: "bench", address: nil, startedAt: 0, leaseMilliseconds: 3_600_000, now: nil)
    var instances: [Int64] = []
    for device in 0..<deviceCount {
        let token = try DeviceToken(String(format: "%08x", device) + String(repeating: "c", count: 56))
        let registration = try await store.putDevice(
            app: app,
            token: token,
            widgets: [WidgetRegistration(id: "w", kind: "scores", family: .systemSmall, configuration: WidgetConfiguration())],
            previousToken: nil,
            now: now
        )
        instances.append(registration.instances[0].id)
    }

    let due = Timestamp(seconds: 1_790_172_300)
    var ids = MessageID.Generator()
    var batches: [LedgerBatch] = []
    var nextRequest: RequestID = 1
    var listed: [Int64: [RequestID]] = [:]
    var counts: [Int64: Int] = [:]
    for _ in 0..<batchCount {
        var batch = LedgerBatch()
        var changed: [Int64] = []
        for index in 0..<perBatch {
            let instance = instances[(Int(nextRequest) &+ index) % instances.count]
            batch.requests.append(
                RecordedRequest(
                    id: nextRequest, app: app.id, source: .push, received: Timestamp(seconds: 1_790_172_000), priority: .high,
                    expiration: nil, collapseID: nil, exempt: false, summary: #"{"aps":{"content-changed":true}}"#, apnsID: ids.next()
                )
            )
            counts[instance, default: 0] += 1
            if listed[instance, default: []].count < 100 { listed[instance, default: []].append(nextRequest) }
            if withDecisions {
                batch.decisions.append(
                    Decision(
                        request: nextRequest, instance: InstanceHandle(Int32(instance)), kind: .merged, due: due,
                        reason: .mergedIntoPending(due: due, requests: counts[instance]!)
                    )
                )
            }
            if !changed.contains(instance) { changed.append(instance) }
            nextRequest += 1
        }
        for instance in changed where withInstanceStates {
            let pending = PendingSnapshot(
                due: due, priority: .high, expiration: nil, requests: withRequestLists ? listed[instance]! : [],
                requestCount: counts[instance]!, collapseID: nil, team: "TEAM000001", exempt: false
            )
            batch.instanceStates.append((instance, InstanceSnapshot(bucketFullAt: 1_790_172_000_000, lastReload: nil, plannedReload: nil, pending: pending)))
        }
        if let leases { batch.fence = LeaseFence(gateway: "bench", generation: leases.generation) }
        batches.append(batch)
    }

    let clock = ContinuousClock()
    let cpuStarted = processCPU()
    let started = clock.now
    for batch in batches { try await store.commit(batch) }
    let elapsed = seconds(started.duration(to: clock.now))
    let cpu = processCPU() - cpuStarted
    let pushes = Double(batchCount * perBatch)

    let reference: any Reference = if let url {
        try await PostgresReference(url: url)
    } else {
        try ReferenceLedger(directory: directory.appendingPathComponent("reference").path)
    }
    let referenceCPUStarted = processCPU()
    let referenceStarted = clock.now
    for _ in 0..<batchCount { try await reference.insert(rows: perBatch) }
    let referenceElapsed = seconds(referenceStarted.duration(to: clock.now))
    let referenceCPU = processCPU() - referenceCPUStarted

    try await reference.close()
    print("reloadgate store benchmark (\(url == nil ? "SQLite" : "PostgreSQL")): \(batchCount) group commits of \(perBatch) pushes over \(deviceCount) devices")
    print(String(
        format: "group commit:  %8.0f pushes/s  %6.2f us/push (CPU %5.2f)  %6.2f ms/commit",
        pushes / elapsed, elapsed / pushes * 1e6, cpu / pushes * 1e6, elapsed / Double(batchCount) * 1e3
    ))
    print(String(
        format: "reference:     %8.0f rows/s    %6.2f us/row  (CPU %5.2f)  %6.2f ms/commit",
        pushes / referenceElapsed, referenceElapsed / pushes * 1e6, referenceCPU / pushes * 1e6, referenceElapsed / Double(batchCount) * 1e3
    ))
    print(String(format: "ratio (group commit / reference, per push): %.2f", elapsed / referenceElapsed))
}

try await main()
