import Dispatch
import Logging
import ReloadGateStore
import ServiceLifecycle

/// Owns the open store for the life of the service group: marks it ready when the group runs, and on
/// graceful shutdown, after the listener has stopped (services stop in reverse order), marks it not
/// ready and closes it.
///
/// While it runs it also calls `upkeep` every `upkeepInterval`: for SQLite, copying the WAL into the
/// database file (``SQLiteStore/checkpointWAL()``), so that group commits never wait for a checkpoint.
struct StoreService: Service {
    let store: any GatewayStore
    let readiness: Readiness
    let logger: Logger
    /// Blocking upkeep of the store, run on a queue of its own; `nil`: none (PostgreSQL does its own).
    var upkeep: (@Sendable () throws -> Void)?
    var upkeepInterval: Duration = .milliseconds(100)

    init(store: any GatewayStore, readiness: Readiness, logger: Logger) {
        self.store = store
        self.readiness = readiness
        self.logger = logger
        upkeep = store.periodicUpkeep
    }

    /// How often the store's reachability is checked (a database server; SQLite always is).
    var healthInterval: Duration = .seconds(1)

    func run() async throws {
        readiness.markReady(.store)
        await withTaskGroup(of: Void.self) { group in
            // `/ready` reports the store not ready while it does not answer (a database that is down or
            // unreachable), so that a load balancer sends requests elsewhere.
            group.addTask { [store, readiness, logger, healthInterval] in
                var reachable = true
                var failures = 0
                while !Task.isCancelled {
                    try? await Task.sleep(for: healthInterval)
                    if Task.isCancelled { break }
                    // Two checks in a row without an answer in 5 s: a busy server is not an absent one.
                    let answered = await store.isReachable(within: .seconds(5))
                    failures = answered ? 0 : failures + 1
                    let now = answered || failures < 2
                    guard now != reachable, !Task.isCancelled else { continue }
                    reachable = now
                    if now {
                        readiness.markReady(.store)
                        logger.notice("the store answers again", metadata: ["path": "\(store.path)"])
                    } else {
                        readiness.markNotReady(.store)
                        logger.error("the store does not answer; not ready until it does", metadata: ["path": "\(store.path)"])
                    }
                }
            }
            group.addTask { [upkeep, logger, upkeepInterval] in
                guard let upkeep else { return }
                // A checkpoint copies megabytes: it runs on a queue of its own, never on a thread of the
                // concurrency pool (two on a 2-core machine).
                let queue = DispatchQueue(label: "reloadgate.checkpoint")
                var failing = false
                while !Task.isCancelled {
                    try? await Task.sleep(for: upkeepInterval)
                    let result = await withCheckedContinuation { continuation in
                        queue.async { continuation.resume(returning: Result { try upkeep() }) }
                    }
                    switch result {
                    case .success:
                        failing = false
                    case .failure(let error):
                        // Not fatal: the writer checkpoints past its own limit. Logged once per failing run.
                        if !failing { logger.warning("WAL checkpoint failed", metadata: ["error": "\(error)"]) }
                        failing = true
                    }
                }
            }
            // Returns on graceful shutdown or cancellation; either way the store is closed below.
            try? await gracefulShutdown()
            group.cancelAll()
        }
        readiness.markNotReady(.store)
        do {
            try store.close()
            logger.info("store closed", metadata: ["path": "\(store.path)"])
        } catch {
            logger.error("store did not close cleanly", metadata: ["path": "\(store.path)", "error": "\(error)"])
            throw error
        }
    }
}
