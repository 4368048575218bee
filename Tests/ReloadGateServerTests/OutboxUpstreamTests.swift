import Foundation
import Logging
import ReloadGateCore
@testable import ReloadGateServer
import ReloadGateTesting
import Synchronization
import Testing

@Suite(.timeLimit(.minutes(10)), .heavy)
struct OutboxUpstreamTests {
    func push(_ index: Int, expiration: Timestamp? = nil) throws -> OutgoingPush {
        OutgoingPush(
            apnsID: String(format: "00000000-0000-4000-8000-%012d", index),
            bundle: try BundleID("com.example.scores"),
            deviceToken: try DeviceToken(String(repeating: "ab", count: 32)),
            widgetIDs: ["w1", "w\"2"],
            requests: [RequestID(index), RequestID(index + 1000)],
            priority: .high,
            expiration: expiration,
            releasedAt: Timestamp(milliseconds: 1_790_172_000_250)
        )
    }

    @Test func eachPushIsOneWholeJSONLineEvenWhenSentConcurrently() async throws {
        let directory = try TemporaryDirectory("outbox")
        defer { directory.remove() }
        let outbox = try OutboxUpstream(dataDirectory: directory.url.path, logger: Logger(label: "test"))
        let outcomes = try await withThrowingTaskGroup(of: DeliveryOutcome.self) { group in
            for index in 0..<50 {
                let push = try push(index, expiration: index == 0 ? Timestamp(seconds: 1_790_175_600) : nil)
                group.addTask { try await outbox.send(push) }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(outcomes.allSatisfy { $0 == .sent })

        let text = try String(contentsOfFile: directory.path("outbox.jsonl"), encoding: .utf8)
        let lines = text.split(separator: "\n")
        #expect(lines.count == 50)
        var apnsIDs = Set<String>()
        for line in lines {
            let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            apnsIDs.insert(try #require(object["apnsId"] as? String))
            #expect(object["bundle"] as? String == "com.example.scores")
            #expect(object["topic"] as? String == "com.example.scores.push-type.widgets")
            #expect(object["deviceToken"] as? String == String(repeating: "ab", count: 32))
            #expect(object["widgets"] as? [String] == ["w1", "w\"2"])
            #expect((object["requests"] as? [Int])?.count == 2)
            #expect(object["priority"] as? Int == 10)
            #expect(object["at"] as? String == "2026-09-23T14:00:00.250Z")
        }
        #expect(apnsIDs.count == 50)
        let first = try #require(lines.first { $0.contains("-000000000000") })
        #expect(first.contains(#""expiration":"2026-09-23T15:00:00.000Z""#))
        let mode = try FileManager.default.attributesOfItem(atPath: directory.path("outbox.jsonl"))[.posixPermissions] as? NSNumber
        #expect(mode?.intValue == 0o600)
    }

    /// A slow disk holds the outbox's own thread, not the concurrency pool's: with more outboxes waiting
    /// in a `write(2)` than the machine has cores, a task still runs. The writes wait until the test lets
    /// them go (or 60 s at most), and the test's own task must see every one of them waiting: on the pool
    /// they held every thread it could run on until they ended, and it saw them only after.
    @Test func aSlowDiskHoldsNoThreadOfTheConcurrencyPool() async throws {
        let directory = try TemporaryDirectory("outbox-slow")
        defer { directory.remove() }
        let disk = SlowDisk(limit: .seconds(60))
        let outboxes = try (0...ProcessInfo.processInfo.activeProcessorCount).map { index in
            let path = directory.path("outbox-\(index)")
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
            return try OutboxUpstream(dataDirectory: path, logger: Logger(label: "test"), write: disk.write)
        }
        let sends = try outboxes.enumerated().map { index, outbox in
            let push = try push(index)
            return Task { try await outbox.send(push) }
        }
        // This task runs on the pool: it sees the writes waiting only if they hold none of its threads.
        while disk.waiting < outboxes.count, !disk.isOpen {
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(!disk.isOpen, "the test's task ran only after the slow writes ended (\(disk.waiting) of \(outboxes.count) were waiting)")
        disk.open()
        for send in sends { #expect(try await send.value == .sent) }
    }

    /// A disk whose writes wait until ``open()`` is called, or `limit` at most.
    final class SlowDisk: Sendable {
        private let state = Mutex((waiting: 0, open: false))
        private let limit: Duration

        init(limit: Duration) { self.limit = limit }

        /// How many writes are waiting now.
        var waiting: Int { state.withLock { $0.waiting } }
        /// The writes were let go (by ``open()`` or at the limit).
        var isOpen: Bool { state.withLock { $0.open } }

        func open() { state.withLock { $0.open = true } }

        /// `write(2)`, after the wait.
        var write: @Sendable (Int32, UnsafeRawPointer, Int) -> Int {
            { [self] descriptor, bytes, count in
                state.withLock { $0.waiting += 1 }
                let until = ContinuousClock.now + limit
                while !isOpen {
                    if ContinuousClock.now >= until { open() }
                    Thread.sleep(forTimeInterval: 0.01)
                }
                state.withLock { $0.waiting -= 1 }
                return Glibc.write(descriptor, bytes, count)
            }
        }
    }

    /// After a crash: a torn last line (a write cut short, never synced) is cut off when the outbox opens,
    /// so the next line starts on its own; the lines written are found by apns-id (the deliveries left
    /// `sending` whose line is there are `sent`), a torn one is not.
    @Test func aTornLastLineIsCutOffAndWrittenLinesAreFoundAfterACrash() async throws {
        let directory = try TemporaryDirectory("outbox")
        defer { directory.remove() }
        let written = try push(1)
        let torn = try push(2)
        do {
            let outbox = try OutboxUpstream(dataDirectory: directory.url.path, logger: Logger(label: "test"))
            _ = try await outbox.send(written)
        }
        let path = directory.path("outbox.jsonl")
        let handle = try #require(FileHandle(forWritingAtPath: path))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data("{\"apnsId\":\"\(torn.apnsID)\",\"at\":\"2026".utf8))
        try handle.close()

        let outbox = try OutboxUpstream(dataDirectory: directory.url.path, logger: Logger(label: "test"))
        #expect(try String(contentsOfFile: path, encoding: .utf8).hasSuffix("}\n"), "the torn line is still there")
        #expect(await outbox.alreadySent([written.apnsID, torn.apnsID, "not-an-id"]) == [written.apnsID])
        _ = try await outbox.send(torn)
        let lines = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n")
        #expect(lines.count == 2)
        for line in lines { #expect(try JSONSerialization.jsonObject(with: Data(line.utf8)) is [String: Any]) }
        #expect(await outbox.alreadySent([written.apnsID, torn.apnsID]) == [written.apnsID, torn.apnsID])
    }

    /// A full disk in the middle of a group: the write stops part way through a line (ENOSPC). The group
    /// fails (none of its deliveries counts as sent), the file is cut back to its last whole line, and once
    /// the disk has room again the group is written whole: the outbox holds whole lines only, one per
    /// delivery sent.
    @Test func aWriteThatFailsPartWayLeavesNoPartialLine() async throws {
        let directory = try TemporaryDirectory("outbox")
        defer { directory.remove() }
        // Room for the first group and 100 bytes more; then every write fails until the disk is freed.
        let room = Mutex<Int?>(nil)
        let outbox = try OutboxUpstream(dataDirectory: directory.url.path, logger: Logger(label: "test")) { descriptor, bytes, count in
            let allowed = room.withLock { room -> Int in
                guard let left = room else { return count }
                let allowed = min(left, count)
                room = left - allowed
                return allowed
            }
            if allowed == 0 {
                errno = ENOSPC
                return -1
            }
            return Glibc.write(descriptor, bytes, allowed)
        }
        let first = try (0..<3).map { try push($0) }
        #expect(await outbox.send(batch: first).allSatisfy { (try? $0.get()) == .sent })
        let path = directory.path("outbox.jsonl")
        let before = try Data(contentsOf: URL(fileURLWithPath: path))

        room.withLock { $0 = 100 }
        let second = try (3..<6).map { try push($0) }
        let failed = await outbox.send(batch: second)
        #expect(failed.allSatisfy { if case .failure = $0 { true } else { false } })
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before, "the partial line was left behind")
        #expect(await outbox.alreadySent(Set(second.map(\.apnsID))).isEmpty)
        await #expect(throws: OutboxError.self) { try await outbox.send(try push(9)) }

        room.withLock { $0 = nil }
        #expect(await outbox.send(batch: second).allSatisfy { (try? $0.get()) == .sent })
        let lines = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.last == "", "the file does not end with a whole line")
        let ids = try lines.dropLast().map { line in
            try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])["apnsId"] as? String
        }
        #expect(ids == (first + second).map(\.apnsID))
    }

    /// The apns-ids of the whole lines of the outbox file at `path` (none when it does not exist), in order.
    func ids(in path: String) throws -> [String] {
        guard FileManager.default.fileExists(atPath: path) else { return [] }
        let text = try String(contentsOfFile: path, encoding: .utf8)
        #expect(text.isEmpty || text.hasSuffix("\n"), "\(path) does not end with a whole line")
        return try text.split(separator: "\n").map { line in
            try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])["apnsId"] as? String ?? ""
        }
    }

    /// The outbox rotates before a group would take it past its size: the files hold whole lines, a group
    /// is never split, at most the kept number of rotated files stays, and read oldest first they hold the
    /// latest deliveries in the order they were sent, each once.
    @Test func theOutboxRotatesAtItsSizeAndKeepsAtMostItsFiles() async throws {
        let directory = try TemporaryDirectory("outbox")
        defer { directory.remove() }
        // Three lines a file (the longest line's size; a line with a shorter index is a byte shorter); two
        // rotated files kept.
        let lineBytes = OutboxUpstream.line(for: try push(12)).utf8.count + 1
        let rotation = OutboxUpstream.Rotation(maxBytes: 3 * lineBytes, keptFiles: 2)
        let outbox = try OutboxUpstream(dataDirectory: directory.url.path, rotation: rotation, logger: Logger(label: "test"))
        var sent: [String] = []
        for index in 0..<10 {
            let pushed = try push(index)
            #expect(try await outbox.send(pushed) == .sent)
            sent.append(pushed.apnsID)
        }
        // A group of three that does not fit in what is left begins a file of its own.
        let group = try [push(10), push(11), push(12)]
        #expect(await outbox.send(batch: group).allSatisfy { (try? $0.get()) == .sent })
        sent += group.map(\.apnsID)

        let path = directory.path("outbox.jsonl")
        let files = [path + ".2", path + ".1", path]
        let kept = try files.flatMap { try ids(in: $0) }
        #expect(!FileManager.default.fileExists(atPath: path + ".3"))
        for file in files {
            let size = try #require(try FileManager.default.attributesOfItem(atPath: file)[.size] as? Int)
            #expect(size <= rotation.maxBytes, "\(file) holds \(size) bytes")
        }
        // 13 lines, three a file, the group alone in the last: 0-2, 3-5, 6-8, 9, 10-12; the first two
        // files were deleted by the third and fourth rotations.
        #expect(try ids(in: path) == Array(sent.suffix(3)))
        #expect(try ids(in: path + ".1") == [sent[9]])
        #expect(kept == Array(sent.suffix(7)))
        let mode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber
        #expect(mode?.intValue == 0o600)
    }

    /// A restart after a rotation: the deliveries of the group written last before it (now in
    /// `outbox.jsonl.1`) and of the one after it are found, so none is written twice; an id never written
    /// is not.
    @Test func afterARotationARestartFindsTheLinesOfBothFiles() async throws {
        let directory = try TemporaryDirectory("outbox")
        defer { directory.remove() }
        let lineBytes = OutboxUpstream.line(for: try push(0)).utf8.count + 1
        let rotation = OutboxUpstream.Rotation(maxBytes: 2 * lineBytes, keptFiles: 1)
        let before = try [push(1), push(2)]
        let after = try [push(3)]
        do {
            let outbox = try OutboxUpstream(dataDirectory: directory.url.path, rotation: rotation, logger: Logger(label: "test"))
            _ = await outbox.send(batch: before)
            _ = await outbox.send(batch: after)
        }
        #expect(try ids(in: directory.path("outbox.jsonl.1")) == before.map(\.apnsID))
        #expect(try ids(in: directory.path("outbox.jsonl")) == after.map(\.apnsID))
        let outbox = try OutboxUpstream(dataDirectory: directory.url.path, rotation: rotation, logger: Logger(label: "test"))
        let all = Set((before + after).map(\.apnsID))
        #expect(await outbox.alreadySent(all.union(["00000000-0000-4000-8000-999999999999"])) == all)
    }

    @Test func anUnwritableDirectoryIsAnError() throws {
        #expect(throws: OutboxError.self) {
            try OutboxUpstream(dataDirectory: "/nonexistent/data", logger: Logger(label: "test"))
        }
    }
}
