public import Foundation

/// A directory of its own for one test, removed by ``remove()``.
public struct TemporaryDirectory: Sendable {
    /// The directory.
    public let url: URL

    /// Creates `$TMPDIR/reloadgate-<label>-<uuid>`.
    public init(_ label: String = "test") throws {
        url = FileManager.default.temporaryDirectory
            .appendingPathComponent("reloadgate-\(label)-\(UUID().uuidString.prefix(8))", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    /// The path of `name` inside the directory.
    public func path(_ name: String) -> String {
        url.appendingPathComponent(name).path
    }

    /// Removes the directory and everything in it, on a thread of its own. Removing files can wait for the
    /// disk (a filesystem mounted with `discard` discards their blocks at once), and the caller is usually a
    /// test's task on the concurrency pool, which every test of a run shares (docs/TESTING.md, "Heavy
    /// tests"). What is still being removed when the process exits is removed before it exits, waiting
    /// at most ``exitDeadline`` for it.
    public func remove() {
        let url = url
        Self.removals.async { try? FileManager.default.removeItem(at: url) }
    }

    /// How long the process's exit waits for removals still queued: a disk that hangs must not hang the
    /// test run's end.
    static let exitDeadline: DispatchTimeInterval = .seconds(30)

    /// Waits until every removal asked for so far has ended, at most `timeout`; `false` when it had not.
    /// The process's exit runs this with ``exitDeadline``.
    @discardableResult
    public static func finishRemovals(within timeout: DispatchTimeInterval) -> Bool {
        let drained = DispatchGroup()
        removals.async(group: drained) {}
        return drained.wait(timeout: .now() + timeout) == .success
    }

    private static let removals: DispatchQueue = {
        let queue = DispatchQueue(label: "reloadgate.temporary-directory-removals")
        atexit { TemporaryDirectory.finishRemovals(within: TemporaryDirectory.exitDeadline) }
        return queue
    }()
}
