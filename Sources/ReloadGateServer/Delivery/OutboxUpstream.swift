import Foundation
import Logging
public import ReloadGateCore
import ReloadGateStore

/// The embedded default upstream: every push is appended as one JSON line to `outbox.jsonl` in the data
/// directory (and logged), so the gateway's output is visible without an Apple account.
///
/// Each line is written with one `write(2)` to a file opened with `O_APPEND` and synced before `send`
/// returns, so a line is either whole in the file or not there, also after a crash.
public actor OutboxUpstream: DeliveryUpstream {
    /// The file name inside the data directory.
    public static let fileName = "outbox.jsonl"

    private let path: String
    private let descriptor: Int32
    private let logger: Logger

    /// Opens (creating, mode 0600) `outbox.jsonl` in `dataDirectory`.
    public init(dataDirectory: String, logger: Logger) throws {
        let path = URL(fileURLWithPath: dataDirectory).appendingPathComponent(Self.fileName).path
        let descriptor = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw OutboxError(path: path, reason: String(cString: strerror(errno)))
        }
        self.path = path
        self.descriptor = descriptor
        self.logger = logger
    }

    deinit {
        Glibc.close(descriptor)
    }

    public func send(_ push: OutgoingPush) async throws -> DeliveryOutcome {
        let line = Self.line(for: push) + "\n"
        let bytes = Array(line.utf8)
        let written = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        guard written == bytes.count else {
            throw OutboxError(path: path, reason: written < 0 ? String(cString: strerror(errno)) : "short write")
        }
        guard fsync(descriptor) == 0 else { throw OutboxError(path: path, reason: String(cString: strerror(errno))) }
        logger.info(
            "outbox: widget push",
            metadata: [
                "apns-id": "\(push.apnsID)", "device": "\(push.deviceToken.shortened)", "bundle": "\(push.bundle)",
                "widgets": "\(push.widgetIDs.count)", "request-count": "\(push.requestCount)",
                "requests": "\(push.requests.prefix(10).map(String.init).joined(separator: ","))\(push.requestCount > 10 ? ",…" : "")",
            ]
        )
        return .sent
    }

    /// The JSON line of a push (keys sorted, times in RFC 3339 UTC).
    static func line(for push: OutgoingPush) -> String {
        func time(_ timestamp: Timestamp) -> String {
            timestamp.date
                .formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
        }
        let fields: [(String, String)] = [
            ("apnsId", JSONText.quoted(push.apnsID)),
            ("at", JSONText.quoted(time(push.releasedAt))),
            ("bundle", JSONText.quoted(push.bundle.rawValue)),
            ("deviceToken", JSONText.quoted(push.deviceToken.hex)),
            ("expiration", push.expiration.map { JSONText.quoted(time($0)) } ?? "null"),
            ("priority", String(push.priority.rawValue)),
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
