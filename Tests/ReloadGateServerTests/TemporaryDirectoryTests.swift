import Foundation
import ReloadGateTesting
import Testing

/// A test's directory is removed, with what it holds, after `remove()` returns (on a thread of its own).
struct TemporaryDirectoryTests {
    @Test func aRemovedDirectoryIsGoneWithWhatItHeld() async throws {
        let directory = try TemporaryDirectory("removal")
        try FileManager.default.createDirectory(atPath: directory.path("data"), withIntermediateDirectories: true)
        try Data(repeating: 1, count: 100_000).write(to: URL(fileURLWithPath: directory.path("data/file")))
        directory.remove()
        #expect(try await eventually { !FileManager.default.fileExists(atPath: directory.url.path) })
    }

    /// What the process's exit waits for (`atexit`): the removals asked for so far, all of them, so that a
    /// test run leaves no directory behind however soon it ends after its last `remove()`.
    @Test func theRemovalsAskedForAreFinishedWhenWaitedFor() throws {
        let directories = try (0..<4).map { _ in try TemporaryDirectory("drain") }
        for directory in directories {
            for index in 0..<1_000 {
                try Data(repeating: 1, count: 64).write(to: URL(fileURLWithPath: directory.path("file-\(index)")))
            }
        }
        for directory in directories { directory.remove() }
        // Right after the drain, not eventually: 4,000 files are not removed in the time a check takes.
        #expect(TemporaryDirectory.finishRemovals(within: .seconds(30)))
        for directory in directories { #expect(!FileManager.default.fileExists(atPath: directory.url.path)) }
    }
}
