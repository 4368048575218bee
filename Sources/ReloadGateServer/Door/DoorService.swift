import Foundation
import Logging
import ReloadGateCore
import ReloadGateStore
import ServiceLifecycle
import Synchronization

/// Runs the door's loops: the commit loop (group commits of requests, registry changes and whatever
/// falls due), the timer loop (sleeps until the next timer, woken early by a commit that sets an earlier
/// one, and wakes the commit loop when it is due), the delivery state log and the delivery worker.
///
/// It starts after the store and stops before it; the listener stops first, so every request that got
/// in is committed before the store closes. Deliveries that are still pending then are sent on the next
/// start.
struct DoorService: Service {
    let door: GatewayDoor
    let worker: DeliveryWorker
    let readiness: Readiness
    let logger: Logger
    /// The longest the timer loop sleeps before it looks at the clock again. It sleeps until the next
    /// timer and is woken by the engine when a commit sets an earlier one; this bound catches what no
    /// event announces (the wall clock moved; a degraded engine's rebuild and a partitioned engine's
    /// inbox read, once a second each).
    var timerResolution: Duration = .seconds(1)
    /// The clock the timer loop sleeps on (the scheduler's time is the door's wall clock).
    var clock: any Clock<Duration> = ContinuousClock()

    func run() async throws {
        // Deliveries left by the last run (released but not sent, or sending when it stopped) go first.
        // (On a shared store each partition's are handed over when its lease is taken.)
        let unfinished = door.partitioning == nil ? try await door.reader.deliveries(in: [.sending, .pending]) : []
        if !unfinished.isEmpty {
            logger.info("sending deliveries left by the last run", metadata: ["count": "\(unfinished.count)"])
        }
        worker.metrics.deliveriesQueued(unfinished.count)
        readiness.markReady(.scheduler)
        let states = door.deliveryStates
        let registry = door.registry
        let engine = door.engine
        await withDiscardingTaskGroup { outer in
            outer.addTask { await states.run() }
            await withDiscardingTaskGroup { group in
                group.addTask { await Self.commitLoop(engine: engine, readiness: readiness) }
                group.addTask { await registry.run() }
                group.addTask { [worker] in
                    await worker.run(unfinished: unfinished, engine.releasedDeliveries)
                }
                // The timer loop ends by cancellation when the gateway shuts down.
                await withDiscardingTaskGroup { timers in
                    timers.addTask { [timerResolution, clock] in
                        while !Task.isCancelled {
                            let sleep = await engine.timerTurn(longest: timerResolution)
                            await engine.timerNudge.wait(for: sleep, on: clock)
                        }
                    }
                    try? await gracefulShutdown()
                    timers.cancelAll()
                }
                readiness.markNotReady(.scheduler)
                await engine.stop()
                registry.finish()
            }
            // The worker has stopped: its last state changes are written before the store closes.
            states.finish()
        }
        await worker.upstream.close()
        logger.info("scheduler stopped")
    }

    /// The commit loop: a turn of the engine whenever there is something to commit or a commit ended,
    /// each commit in a child task of the loop (one at a time: the engine seals the next batch only after
    /// the one in flight ended). When the gateway stops (the engine's inbox closes), what was queued and
    /// gathered still commits, one batch after the other, and then the engine's pipeline ends: whoever
    /// still waits is answered.
    static func commitLoop(engine: SchedulerEngine, readiness: Readiness) async {
        await withTaskGroup(of: Void.self) { commits in
            for await _ in engine.commitRequests {
                let turn = await engine.commitTurn()
                if let commit = turn.commit {
                    // The commit before it has ended (the engine hands out the next only then): its child
                    // task is collected first. A finished child of a task group is kept, with its task
                    // allocator's memory, until the group collects it, so an uncollected child per commit
                    // would grow with the traffic
                    // (docs/DECISIONS.md, "The commit loop collects each commit's child task").
                    while await commits.next() != nil { engine.uncollectedCommits.subtract(1, ordering: .relaxed) }
                    commits.addTask { await engine.perform(commit) }
                    engine.uncollectedCommits.add(1, ordering: .relaxed)
                }
                turn.answer()
                // Not ready while the state cannot be reloaded from the store (a database down).
                if !turn.isStopping {
                    if turn.isDegraded { readiness.markNotReady(.scheduler) } else { readiness.markReady(.scheduler) }
                }
            }
            while true {
                await commits.waitForAll()
                engine.uncollectedCommits.store(0, ordering: .relaxed)
                let turn = await engine.commitTurn()
                if let commit = turn.commit {
                    commits.addTask { await engine.perform(commit) }
                    engine.uncollectedCommits.add(1, ordering: .relaxed)
                }
                turn.answer()
                if turn.commit == nil { break }
            }
            await engine.endWorkBesideTheLoop()
            let finished = await engine.finish()
            assert(finished, "the pipeline ended with a commit in flight")
        }
    }
}
