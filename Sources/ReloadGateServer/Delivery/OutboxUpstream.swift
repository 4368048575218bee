import Foundation
import Logging
public import ReloadGateCore
import ReloadGateStore

/// The embedded default upstream: every push is appended as one JSON line to `outbox.jsonl` in the data
/// directory (and logged), so the gateway's output is visible without an Apple account.
///
/// Lines are appended with one `write(2)` per group to a file opened with `O_APPEND` and synced before
/// `send` returns, so a delivery counts as sent only once its line is on the disk. A group (``send(batch:)``,
/// the delivery worker's first attempts) costs one write and one `fsync` whatever its size: a herd of
/// reloads falling due together drains at the disk's pace of syncs times the group size, not one sync a
/// line. A crash in the middle of a write can leave a torn last line (no newline, never synced, so its
/// delivery is not `sent`): opening the outbox cuts it off, so a torn line is never followed by others.
///
/// The line is the delivery's record (``recordsWhatItTakes``): the worker writes no `sending` mark before
/// a group, so a group costs this one write and sync and no commit. After a crash, a delivery an earlier
/// run released and left unfinished whose line is in the outbox (written and synced, the crash came before
/// its `sent` mark) is found by ``alreadySent(_:)`` and marked `sent` instead of being written again: every
/// delivery has exactly one line.
///
/// The file rotates by size (``Rotation``): before a group would take it past its limit, `outbox.jsonl`
/// becomes `outbox.jsonl.1` (the older ones move up, `.1` to `.2` and so on, the oldest beyond the kept
/// count is deleted) and a new `outbox.jsonl` is begun; the directory is synced. A group is never split
/// between files. Readers take the files oldest first (`outbox.jsonl.N` ... `.1`, then `outbox.jsonl`);
/// `tail -F outbox.jsonl` follows the rotation. After a crash ``alreadySent(_:)`` looks in `outbox.jsonl`
/// and, when that is shorter than its window, in `outbox.jsonl.1`: the group written last before a
/// rotation is there.
///
/// The actor runs on a queue of its own (``DispatchQueueExecutor``): its writes and syncs wait for the disk
/// there, not on the concurrency pool's threads.
public actor OutboxUpstream: DeliveryUpstream {
    /// The file name inside the data directory.
    public static let fileName = "outbox.jsonl"

    private let executor = DispatchQueueExecutor(label: "reloadgate.outbox")
    public nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    /// When the file rotates, and how many rotated files are kept.
    public struct Rotation: Sendable, Equatable {
        /// The most bytes `outbox.jsonl` grows to (a single group larger than this is written whole, alone
        /// in its file).
        public var maxBytes: Int
        /// Rotated files kept (`outbox.jsonl.1` to `.N`); 0: a rotated file is deleted at once (and with it
        /// the lines ``alreadySent(_:)`` would find of the group written just before the rotation).
        public var keptFiles: Int

        public init(maxBytes: Int, keptFiles: Int) {
            self.maxBytes = maxBytes
            self.keptFiles = keptFiles
        }

        /// 64 MiB a file, four rotated files kept: about 320 MB of the latest deliveries at most.
        public static let `default` = Rotation(maxBytes: 64 << 20, keptFiles: 4)
    }

    private let path: String
    private var descriptor: Int32
    private let rotation: Rotation
    private let logger: Logger
    /// `write(2)`, or a stand-in that fails part way (tests of a full disk).
    private let writeBytes: @Sendable (Int32, UnsafeRawPointer, Int) -> Int
    /// Where the last whole line ends when a failed write could not be cut back at once (the next write
    /// cuts the file there first); `nil` when the file ends with a whole line.
    private var cutBackTo: off_t?

    /// Opens (creating, mode 0600) `outbox.jsonl` in `dataDirectory`.
    public init(dataDirectory: String, rotation: Rotation = .default, logger: Logger) throws {
        try self.init(dataDirectory: dataDirectory, rotation: rotation, logger: logger, write: { Glibc.write($0, $1, $2) })
    }

    /// Opens the outbox with `write` in place of `write(2)` (tests: a disk that fills in the middle of a write).
    init(
        dataDirectory: String, rotation: Rotation = .default, logger: Logger,
        write: @escaping @Sendable (Int32, UnsafeRawPointer, Int) -> Int
    ) throws {
        let path = URL(fileURLWithPath: dataDirectory).appendingPathComponent(Self.fileName).path
        let descriptor = try Self.open(path)
        self.path = path
        self.descriptor = descriptor
        self.rotation = rotation
        self.logger = logger
        self.writeBytes = write
        try Self.cutTornLine(descriptor: descriptor, path: path, logger: logger)
    }

    /// Opens (creating, mode 0600) the outbox file for appending; read too: recovery after a crash.
    private static func open(_ path: String) throws -> Int32 {
        let descriptor = Glibc.open(path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw OutboxError(path: path, reason: String(cString: strerror(errno))) }
        return descriptor
    }

    /// The path of rotated file `number` (`outbox.jsonl.1` is the newest).
    private func rotated(_ number: Int) -> String { "\(path).\(number)" }

    /// Rotates when `bytes` more would take a non-empty `outbox.jsonl` past ``Rotation/maxBytes``: the
    /// rotated files move up one (the oldest beyond ``Rotation/keptFiles`` is deleted), `outbox.jsonl`
    /// becomes `.1`, a new one is opened, and the directory is synced so the renames survive a crash.
    private func rotateIfFull(adding bytes: Int) throws {
        let size = lseek(descriptor, 0, SEEK_END)
        guard size > 0, Int(size) + bytes > rotation.maxBytes else { return }
        func fail(_ what: String) -> OutboxError {
            OutboxError(path: path, reason: "cannot rotate (\(what)): \(String(cString: strerror(errno)))")
        }
        if rotation.keptFiles == 0 {
            guard unlink(path) == 0 || errno == ENOENT else { throw fail("delete") }
        } else {
            if unlink(rotated(rotation.keptFiles)) != 0, errno != ENOENT { throw fail("delete the oldest") }
            for number in stride(from: rotation.keptFiles - 1, through: 1, by: -1) {
                if rename(rotated(number), rotated(number + 1)) != 0, errno != ENOENT { throw fail("move up") }
            }
            // Absent: a rotation that renamed it and then failed to open the new one (this finishes it).
            guard rename(path, rotated(1)) == 0 || errno == ENOENT else { throw fail("rename") }
        }
        let fresh = try Self.open(path)
        Glibc.close(descriptor)
        descriptor = fresh
        let directory = Glibc.open((path as NSString).deletingLastPathComponent, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if directory >= 0 {
            defer { Glibc.close(directory) }
            guard fsync(directory) == 0 else { throw fail("sync the directory") }
        }
        logger.info("outbox: rotated", metadata: ["bytes": "\(size)", "kept": "\(rotation.keptFiles)"])
    }

    /// How far back from the end ``alreadySent(_:)`` looks: the deliveries in flight at a crash are in
    /// the last groups written (one group of at most ``DeliveryWorker/outboxGroup`` lines at a time).
    static let recoveryWindow = 16 << 20

    /// Cuts a last line without its newline (a write torn by a crash or a power loss; never synced).
    private static func cutTornLine(descriptor: Int32, path: String, logger: Logger) throws {
        let size = lseek(descriptor, 0, SEEK_END)
        guard size > 0 else { return }
        var last: UInt8 = 0
        guard pread(descriptor, &last, 1, size - 1) == 1, last != UInt8(ascii: "\n") else { return }
        let window = min(Int(size), 1 << 20)
        var tail = [UInt8](repeating: 0, count: window)
        let read = tail.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress!, window, off_t(Int(size) - window)) }
        guard read == window else { throw OutboxError(path: path, reason: "cannot read its end") }
        let keep = tail.lastIndex(of: UInt8(ascii: "\n")).map { off_t(Int(size) - window + $0 + 1) } ?? off_t(Int(size) - window)
        guard ftruncate(descriptor, keep) == 0, fsync(descriptor) == 0 else {
            throw OutboxError(path: path, reason: String(cString: strerror(errno)))
        }
        logger.warning("outbox: a torn last line was cut off (a crash in the middle of a write)", metadata: ["bytes": "\(Int(size - keep))"])
    }

    /// True: a delivery's line, synced before ``send(_:)`` returns, is the record of what the outbox took.
    public nonisolated var recordsWhatItTakes: Bool { true }

    /// True: a delivery's line names its widgets.
    public nonisolated var namesWidgets: Bool { true }

    /// The apns-ids among `apnsIDs` that have a whole line in the outbox's last ``recoveryWindow`` bytes:
    /// in `outbox.jsonl`, and in `outbox.jsonl.1` for what the window holds beyond it.
    public func alreadySent(_ apnsIDs: Set<String>) async -> Set<String> {
        guard !apnsIDs.isEmpty else { return [] }
        var found = Self.lines(in: descriptor, last: Self.recoveryWindow, among: apnsIDs)
        let size = Int(max(lseek(descriptor, 0, SEEK_END), 0))
        if size < Self.recoveryWindow {
            let previous = Glibc.open(rotated(1), O_RDONLY | O_CLOEXEC)
            if previous >= 0 {
                defer { Glibc.close(previous) }
                found.formUnion(Self.lines(in: previous, last: Self.recoveryWindow - size, among: apnsIDs))
            }
        }
        return found
    }

    /// The apns-ids among `apnsIDs` with a whole line in the last `limit` bytes of the file `descriptor`.
    private static func lines(in descriptor: Int32, last limit: Int, among apnsIDs: Set<String>) -> Set<String> {
        let size = lseek(descriptor, 0, SEEK_END)
        guard size > 0 else { return [] }
        let window = min(Int(size), limit)
        var tail = [UInt8](repeating: 0, count: window)
        let read = tail.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress!, window, off_t(Int(size) - window)) }
        guard read == window else { return [] }
        // Every line begins with `{"apnsId":"<id>"` (``line(for:)``; keys sorted).
        let prefix = Array(#"{"apnsId":""#.utf8)
        var found: Set<String> = []
        for line in tail.split(separator: UInt8(ascii: "\n")) where line.starts(with: prefix) {
            let rest = line.dropFirst(prefix.count)
            guard let end = rest.firstIndex(of: UInt8(ascii: "\"")) else { continue }
            let id = String(decoding: rest[..<end], as: UTF8.self)
            if apnsIDs.contains(id) { found.insert(id) }
        }
        return found
    }

    deinit {
        Glibc.close(descriptor)
    }

    public func send(_ push: OutgoingPush) async throws -> DeliveryOutcome {
        try append([push])
        return .sent
    }

    /// Appends the group's lines with one write and one sync: all of them are sent, or (the write or the
    /// sync failed) none is known to be, and each is tried again.
    public func send(batch pushes: [OutgoingPush]) async -> [Result<DeliveryOutcome, any Error>] {
        do {
            try append(pushes)
            return pushes.map { _ in .success(.sent) }
        } catch {
            return pushes.map { _ in .failure(error) }
        }
    }

    /// Writes the lines of `pushes` (one `write(2)`, repeated only for a short write) and syncs them.
    ///
    /// All or nothing: when the write or the sync fails (a full disk, an I/O error), the file is cut back
    /// to where it ended before, so that no partial line stays behind for the next lines to follow, and
    /// no line is left of a delivery that does not count as sent (each is tried again). When even the cut
    /// fails, the next write makes it first.
    private func append(_ pushes: [OutgoingPush]) throws {
        guard !pushes.isEmpty else { return }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(pushes.count * 400)
        for push in pushes {
            bytes.append(contentsOf: Self.line(for: push).utf8)
            bytes.append(UInt8(ascii: "\n"))
        }
        if let end = cutBackTo {
            guard ftruncate(descriptor, end) == 0, fsync(descriptor) == 0 else {
                throw OutboxError(path: path, reason: "cannot cut a failed write back: \(String(cString: strerror(errno)))")
            }
            cutBackTo = nil
        }
        try rotateIfFull(adding: bytes.count)
        let start = lseek(descriptor, 0, SEEK_END)
        guard start >= 0 else { throw OutboxError(path: path, reason: String(cString: strerror(errno))) }
        var offset = 0
        var failure: String?
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { writeBytes(descriptor, $0.baseAddress! + offset, $0.count - offset) }
            if written < 0 {
                if errno == EINTR { continue }
                failure = String(cString: strerror(errno))
                break
            }
            if written == 0 {
                failure = "the write made no progress"
                break
            }
            offset += written
        }
        if failure == nil, fsync(descriptor) != 0 { failure = String(cString: strerror(errno)) }
        if let failure {
            if ftruncate(descriptor, start) != 0 || fsync(descriptor) != 0 { cutBackTo = start }
            logger.error(
                "outbox: a write failed; the file was cut back to its last whole line and the deliveries are tried again",
                metadata: ["error": "\(failure)", "deliveries": "\(pushes.count)"]
            )
            throw OutboxError(path: path, reason: failure)
        }
        for push in pushes {
            logger.info(
                "outbox: \(push.pushType.descriptor.label) push",
                metadata: [
                    "apns-id": "\(push.apnsID)", "device": "\(push.deviceToken.shortened)", "bundle": "\(push.bundle)",
                    "widgets": "\(push.widgetIDs.count)", "request-count": "\(push.requestCount)",
                    "requests": "\(push.requests.prefix(10).map(String.init).joined(separator: ","))\(push.requestCount > 10 ? ",…" : "")",
                ]
            )
        }
    }

    /// The JSON line of a push (keys sorted, times in RFC 3339 UTC; an expiration of now or never is `0`).
    static func line(for push: OutgoingPush) -> String {
        func time(_ timestamp: Timestamp) -> String {
            timestamp.date
                .formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
        }
        var fields: [(String, String)] = [
            ("apnsId", JSONText.quoted(push.apnsID)),
            ("at", JSONText.quoted(time(push.releasedAt))),
            ("bundle", JSONText.quoted(push.bundle.rawValue)),
            ("deviceToken", JSONText.quoted(push.deviceToken.hex)),
            // A time, null (none), or 0: now or never, as `apns-expiration` says it.
            ("expiration", push.expiration.map { $0.isNowOrNever ? "0" : JSONText.quoted(time($0)) } ?? "null"),
        ]
        // The body a push that carries content would send (JSON on one line: the merge writes it so).
        if let payload = push.payload { fields.append(("payload", String(decoding: payload, as: UTF8.self))) }
        fields += [
            ("priority", String(push.priority.rawValue)),
            ("pushType", JSONText.quoted(push.pushType.rawValue)),
            ("requestCount", String(push.requestCount)),
            ("requests", "[" + push.requests.map(String.init).joined(separator: ",") + "]"),
            ("topic", JSONText.quoted(push.topic)),
            ("widgets", "[" + push.widgetIDs.map(JSONText.quoted).joined(separator: ",") + "]"),
        ]
        return "{" + fields.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}"
    }
}

/// The outbox file cannot be opened or written.
public struct OutboxError: Error, CustomStringConvertible {
    public let path: String
    public let reason: String
    public var description: String { "cannot write the outbox \(path): \(reason)" }
}
