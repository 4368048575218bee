import Logging
import ReloadGateStore
import ServiceLifecycle

/// Owns the open store for the life of the service group: marks it ready when the group runs, and on
/// graceful shutdown, after the listener has stopped (services stop in reverse order), marks it not
/// ready and closes it.
struct StoreService: Service {
    let store: SQLiteStore
    let readiness: Readiness
    let logger: Logger

    func run() async throws {
        readiness.markReady(.store)
        // Returns on graceful shutdown or cancellation; either way the store is closed below.
        try? await gracefulShutdown()
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
