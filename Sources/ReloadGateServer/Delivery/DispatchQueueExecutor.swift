import Dispatch

/// A serial executor on a dispatch queue of its own, for an actor whose work blocks a thread: the outbox's
/// `write(2)` and `fsync(2)` take as long as the disk does (a slow or failing one: seconds), and on the Swift
/// concurrency pool (as many threads as cores) such a wait stops every other task of the gateway meanwhile.
/// On this queue it holds one thread that nothing else needs (docs/DECISIONS.md, "SQLite writes wait for the
/// write lock on the store's queue, never on a task's thread").
final class DispatchQueueExecutor: SerialExecutor, @unchecked Sendable {
    private let queue: DispatchQueue

    init(label: String) {
        queue = DispatchQueue(label: label)
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        queue.async { job.runSynchronously(on: self.asUnownedSerialExecutor()) }
    }

    func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }
}
