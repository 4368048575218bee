import NIOCore

/// A task executor that runs a task's jobs on one event loop. A connection's handler starts each route's
/// task with it as the preferred executor: the route then runs on the loop that read the request and writes
/// its answer, instead of on the global executor's threads, which cost a thread hand-off there and another
/// back for every request. Routes never block: what waits (the store, the engine's commit) is awaited, and
/// the loop serves its other connections meanwhile. (Package-wide: the tests' `.offThePool` trait runs
/// CPU-bound tests on a loop of their own with it.)
package final class EventLoopTaskExecutor: TaskExecutor {
    package let eventLoop: any EventLoop

    package init(_ eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
    }

    package func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        eventLoop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
