import Foundation

/// Registry calls kept on disk until the gateway took them: a report made while the network (or the
/// gateway) is away survives the process and goes, in order, once each, when ``flush(_:)`` next runs.
///
/// Each call is a file named by its sequence number (and a random part) in `directory` (in an app group container, so that
/// the app and its extensions share it). A call the gateway took, or refused for good (a malformed body,
/// another app's path), is removed; a temporary failure (unreachable, 408, 429, 5xx, a rotated key) stops
/// the flush and keeps it and every later call. Flushes in one process run one at a time, so each call
/// goes once; the app and its extension flushing at the same moment may both send one, which the
/// registry takes as the same change (its PUTs replace, a DELETE of what is gone changes nothing).
public actor OfflineQueue {
    public nonisolated let directory: URL
    private var flushing = false
    private var waiting: [CheckedContinuation<Void, Never>] = []

    /// What one flush did.
    public struct Outcome: Sendable {
        /// Calls the gateway took.
        public var sent = 0
        /// Calls refused for good (removed), with the refusal.
        public var refused: [(call: RegistryCall, error: ReloadGateError)] = []
        /// Why the flush stopped with calls still kept, if it did.
        public var stopped: ReloadGateError?
        /// Calls still kept.
        public var kept = 0
        /// Files that were not a call (written by something else, or damaged): removed, never sent.
        public var unreadable = 0
    }

    public init(directory: URL) throws {
        self.directory = directory
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    /// Keeps `calls` after every call kept before them. Each file's name is its sequence number and a
    /// random part, so that the app and its extension enqueueing at the same moment never take one name.
    public func enqueue(_ calls: [RegistryCall]) throws {
        var number = (try pending().last.map { $0.number + 1 }) ?? 1
        for call in calls {
            let data = try JSONEncoder().encode(call)
            let name = String(format: "%012ld", number) + "-" + UUID().uuidString + ".call"
            // Written whole under a temporary name, then renamed: a crash never leaves half a call.
            let temporary = directory.appendingPathComponent("." + name + ".tmp")
            try data.write(to: temporary, options: .atomic)
            try FileManager.default.moveItem(at: temporary, to: directory.appendingPathComponent(name))
            number += 1
        }
    }

    /// The calls waiting, oldest first (a file that is not a call is left out).
    public func calls() throws -> [RegistryCall] {
        try pending().compactMap { Self.call(in: $0.file) }
    }

    /// The call a file holds, or `nil` when it holds none.
    private static func call(in file: URL) -> RegistryCall? {
        (try? Data(contentsOf: file)).flatMap { try? JSONDecoder().decode(RegistryCall.self, from: $0) }
    }

    /// Sends the calls waiting, oldest first, until one fails for now.
    @discardableResult
    public func flush(_ client: ReloadGateClient) async throws -> Outcome {
        await takeTurn()
        defer { passTurn() }
        var outcome = Outcome()
        let entries = try pending()
        for (index, entry) in entries.enumerated() {
            // A file that is not a call can never be sent: removed, so that it does not hold the rest.
            guard let call = Self.call(in: entry.file) else {
                outcome.unreadable += 1
                try? FileManager.default.removeItem(at: entry.file)
                continue
            }
            do {
                try await client.send(call)
                outcome.sent += 1
            } catch {
                guard !error.isTemporary else {
                    outcome.stopped = error
                    outcome.kept = entries.count - index
                    break
                }
                outcome.refused.append((call, error))
            }
            try FileManager.default.removeItem(at: entry.file)
        }
        return outcome
    }

    private func takeTurn() async {
        guard flushing else {
            flushing = true
            return
        }
        await withCheckedContinuation { waiting.append($0) }
    }

    private func passTurn() {
        if waiting.isEmpty { flushing = false } else { waiting.removeFirst().resume() }
    }

    /// The calls' files, oldest first (by sequence number, then name).
    private func pending() throws -> [(number: Int, file: URL)] {
        try FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil)
            .compactMap { file in
                let name = file.lastPathComponent
                guard !name.hasPrefix("."), name.hasSuffix(".call"), let number = Int(name.prefix(12)) else { return nil }
                return (number, file)
            }
            .sorted { ($0.number, $0.file.lastPathComponent) < ($1.number, $1.file.lastPathComponent) }
    }
}
