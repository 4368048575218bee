import Foundation
import Logging
import ReloadGateCore
import ReloadGateStore
import ServiceLifecycle

/// Runs the scheduler: the commit loop (group commits of requests and of whatever falls due), the timer
/// loop (wakes the commit loop when the next timer is due) and the delivery worker.
///
/// It starts after the store and stops before it; the listener stops first, so every request that got
/// in is committed before the store closes. Deliveries that are still pending then are sent on the next
/// start.
struct SchedulerService: Service {
    let engine: SchedulerEngine
    let worker: DeliveryWorker
    let readiness: Readiness
    let logger: Logger
    /// The longest the timer loop sleeps before it looks at the clock again.
    var timerResolution: Duration = .milliseconds(100)

    func run() async throws {
        // Deliveries left by the last run (released but not sent, or sending when it stopped) go first.
        let unfinished = try worker.store.deliveries(in: [.sending, .pending])
        if !unfinished.isEmpty {
            logger.info("sending deliveries left by the last run", metadata: ["count": "\(unfinished.count)"])
        }
        worker.metrics.deliveriesQueued(unfinished.count)
        readiness.markReady(.scheduler)
        let states = worker.states
        let stateWriter = Task { await states.run() }
        await withTaskGroup(of: Void.self) { group in
            let engine = engine
            group.addTask {
                for await _ in engine.commitRequests {
                    await engine.commitPending()
                }
                await engine.commitPending()
                await engine.finishDeliveries()
            }
            group.addTask { [worker] in
                await worker.run(unfinished: unfinished, engine.releasedDeliveries, isStopping: { await engine.isStopping })
            }
            group.addTask { [timerResolution] in
                while await !engine.isStopping {
                    var sleep = timerResolution
                    if let wait = await engine.millisecondsUntilNextTimer() {
                        if wait == 0 { await engine.wake() } else { sleep = min(sleep, .milliseconds(wait)) }
                    }
                    try? await Task.sleep(for: sleep)
                }
            }
            try? await gracefulShutdown()
            readiness.markNotReady(.scheduler)
            await engine.stop()
        }
        // The worker has stopped: write its last state changes before the store closes.
        states.finish()
        await stateWriter.value
        await worker.upstream.close()
        logger.info("scheduler stopped")
    }
}
