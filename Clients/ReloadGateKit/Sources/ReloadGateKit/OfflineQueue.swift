import Foundation

/// Registry calls kept on disk until the gateway took them: a report made while the network (or the
/// gateway) is away survives the process and goes, in order, once each, when ``flush(_:)`` next runs.
///
/// Each call is a file named by its sequence number in `directory` (an app group container, so that the
/// app and its extensions share it). A call the gateway took, or refused for good (a malformed body, an
/// app it does not know), is removed; a temporary failure (unreachable, 429, 5xx, a key an update of the
/// app will replace) stops the flush and keeps it and every later call.
public final class OfflineQueue: Sendable {
    public let directory: URL

    public init(directory: URL) throws {
        self.directory = directory
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    /// Keeps `call` after every call kept before it.
    public func enqueue(_ call: RegistryCall) throws {
        let number = (try pending().last.map { $0.number + 1 }) ?? 1
        let data = try JSONEncoder().encode(call)
        // Written whole under a temporary name, then renamed: a crash never leaves half a call.
        let temporary = directory.appendingPathComponent(".\(number).tmp")
        try data.write(to: temporary, options: .atomic)
        try FileManager.default.moveItem(at: temporary, to: directory.appendingPathComponent(Self.name(number)))
    }

    /// The calls waiting, oldest first.
    public func calls() throws -> [RegistryCall] {
        try pending().map { try JSONDecoder().decode(RegistryCall.self, from: Data(contentsOf: $0.file)) }
    }

    /// Sends the calls waiting, oldest first, until one fails for now. Returns how many were sent, and
    /// the calls refused for good (removed) with their refusal.
    @discardableResult
    public func flush(_ client: ReloadGateClient) async throws -> (sent: Int, refused: [(RegistryCall, ReloadGateError)]) {
        var sent = 0
        var refused: [(RegistryCall, ReloadGateError)] = []
        for entry in try pending() {
            let call = try JSONDecoder().decode(RegistryCall.self, from: Data(contentsOf: entry.file))
            do {
                try await client.send(call)
                sent += 1
            } catch {
                guard !error.isTemporary else { break }
                refused.append((call, error))
            }
            try FileManager.default.removeItem(at: entry.file)
        }
        return (sent, refused)
    }

    private func pending() throws -> [(number: Int, file: URL)] {
        try FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil)
            .compactMap { file in
                let name = file.lastPathComponent
                guard name.hasSuffix(".call"), let number = Int(name.dropLast(5)) else { return nil }
                return (number, file)
            }
            .sorted { $0.number < $1.number }
    }

    private static func name(_ number: Int) -> String { String(format: "%012d.call", number) }
}
