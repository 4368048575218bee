import GRDB
import Synchronization

extension SQLiteStore {
    /// Above this many WAL pages (64 MiB) the writer checkpoints after its commit, as SQLite does by
    /// default at 1,000; below it, ``checkpointWAL()`` keeps the database file up to date.
    static let writerCheckpointPages = 16_384

    /// Copies the committed pages of the WAL into the database file (a passive checkpoint) from a
    /// connection of its own, so that group commits do not wait for it.
    ///
    /// With SQLite's default the writer checkpoints every 1,000 pages inside the commit that crosses the
    /// mark: under a steady load of pushes that is a 5-9 ms stall of every push in flight about twenty
    /// times a second (docs/DECISIONS.md, "WAL checkpoints off the commit path"). The server calls this
    /// periodically (``StoreService``); the writer still checkpoints past ``writerCheckpointPages``, which
    /// bounds the WAL when this falls behind. Safe beside the writer and readers: a passive checkpoint
    /// waits for no one.
    /// - Returns: the WAL's frames and how many of them are in the database file now.
    @discardableResult
    public func checkpointWAL() throws -> (walFrames: Int, checkpointed: Int) {
        try checkpointer.withLock { connection in
            if connection == nil {
                var configuration = Configuration()
                configuration.label = "reloadgate-checkpoint"
                configuration.busyMode = .timeout(10)
                connection = try DatabaseQueue(path: path, configuration: configuration)
            }
            let result = try connection!.writeWithoutTransaction { db in try db.checkpoint(.passive) }
            return (result.walFrameCount, result.checkpointedFrameCount)
        }
    }
}
