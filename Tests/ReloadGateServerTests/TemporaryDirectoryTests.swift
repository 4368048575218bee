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
}
