import Dispatch
import Logging
import ReloadGateStore
import ServiceLifecycle

/// Owns the open store for the life of the service group: marks it ready when the group runs, and on
/// graceful shutdown, after the listener has stopped (services stop in reverse order), marks it not
/// ready and closes it.
///
/// While it runs it also copies the WAL into the database file every `checkpointInterval`
/// (``SQLiteStore/checkpointWAL()``), so that group commits never wait for a checkpoint.
struct StoreService: Service {
    let store: any GatewayStore
    let readiness: Readiness
    let logger: Logger
    var checkpointInterval: Duration = .milliseconds(100)

    func run() async throws {
        readiness.markReady(.store)
        await withTaskGroup(of: Void.self) { group in
            group.addTask { [store, logger, checkpointInterval] in
                // A checkpoint copies megabytes: it runs on a queue of its own, never on a thread of the
                // concurrency pool (two on a 2-core machine).
                let queue = DispatchQueue(label: "reloadgate.checkpoint")
                var failing = false
                while !Task.isCancelled {
                    try? await Task.sleep(for: checkpointInterval)
                    let result = await withCheckedContinuation { continuation in
                        queue.async { continuation.resume(returning: Result { try store.checkpointWAL() }) }
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
