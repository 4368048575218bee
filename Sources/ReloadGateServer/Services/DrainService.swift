import Logging
import ServiceLifecycle

/// The first service to stop on graceful shutdown (it runs after the listener in the service group, and
/// services stop in reverse order): reports not ready, refuses new requests with `503 Shutdown`, and
/// waits up to `gracePeriod` for the requests in flight before letting the listener close.
struct DrainService: Service {
    let drain: RequestDrain
    let readiness: Readiness
    let gracePeriod: Duration
    let logger: Logger

    func run() async throws {
        readiness.markReady(.listener)
        try? await gracefulShutdown()
        readiness.markNotReady(.listener)
        let inFlight = drain.inFlight
        logger.info("draining: refusing new requests", metadata: ["inFlight": "\(inFlight)"])
        let finished = await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                await drain.drain()
                return true
            }
            group.addTask {
                try? await Task.sleep(for: gracePeriod)
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
        if finished {
            logger.info("drained: no request in flight")
        } else {
            logger.warning(
                "grace period over with requests still in flight; closing anyway",
                metadata: ["inFlight": "\(drain.inFlight)", "gracePeriod": "\(gracePeriod)"]
            )
        }
    }
}
