import Foundation
import ReloadGateCore
import ReloadGateStore
import ReloadGateTesting
import Testing

/// The outbox writes a herd's lines in groups (one write and one sync per group) and keeps its promise
/// across a SIGKILL in the middle of the herd: no delivery is `sent` without its line, none is marked
/// `sending` (the line is the outbox's record), a line exists only for a delivery in the ledger, every
/// line is whole, and after a restart every delivery is `sent` with exactly one line (those left
/// `pending` at the kill whose line was written are found in the outbox and marked `sent`, the others
/// written then).
@Suite(.timeLimit(.minutes(10)), .heavy)
struct OutboxDurabilityTests {
    static let bundle = "com.example.herd"

    /// The outbox's lines (each must parse) by apns-id, counting repeats. At the kill the last line may be
    /// torn (a group's one write cut short by SIGKILL; the gateway cuts it when it opens the outbox again):
    /// it is not counted; after a restart every line must be whole.
    static func lines(_ directory: TemporaryDirectory, tornEndAllowed: Bool = false) throws -> [String: Int] {
        let text = (try? String(contentsOfFile: directory.path("data/outbox.jsonl"), encoding: .utf8)) ?? ""
        var counts: [String: Int] = [:]
        for line in text.split(separator: "\n", omittingEmptySubsequences: false).dropLast() {
            let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "a torn line: \(line)")
            counts[try #require(object["apnsId"] as? String), default: 0] += 1
        }
        #expect(tornEndAllowed || text.isEmpty || text.hasSuffix("\n"), "the last line is torn")
        return counts
    }

    @Test func aSIGKILLInTheMiddleOfAHerdLeavesNoSentDeliveryWithoutItsLine() async throws {
        let directory = try TemporaryDirectory("outbox-herd")
        defer { directory.remove() }
        let devices = 50_000   // a herd long enough that the kill lands in it on a loaded machine (20,000 drained first once)
        let secret: String
        do {
            let store = try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: Date())
            defer { try? store.close() }
            let credentials = try await store.createApp(bundle: try BundleID(Self.bundle), now: Date())
            secret = credentials.webhookSecret
            let widget = [WidgetRegistration(id: "w", kind: "scores", family: .systemSmall, configuration: WidgetConfiguration())]
            let writes = try (0..<devices).map { index in
                RegistryWrite.putDevice(app: credentials.app, token: try DeviceToken(String(format: "%08x", index) + String(repeating: "d", count: 56)), widgets: widget, previousToken: nil)
            }
            _ = try await store.writeRegistry(writes, now: Date())
        }
        let environment = ["RELOADGATE_LISTEN_PORT": "0", "RELOADGATE_INGRESS_PORT": "0", "RELOADGATE_LOG_LEVEL": "warning"]
        let (first, port) = try await CrashRecoveryTests.serve(in: directory, environment: environment)
        // Killed once the herd has begun to reach the outbox, by a thread of its own started before the
        // webhook call: a task polling the file shares the test process's two cooperative threads with
        // every other test of a parallel run, and the herd (released when the call's decisions commit,
        // as its 202 leaves) once drained completely before the test had even read the 202.
        let outbox = directory.path("data/outbox.jsonl")
        let killer = Thread {
            // (A `for ... where` would go on testing the file for every remaining turn after it appeared.)
            var turns = 0
            while turns < 300_000, ((try? FileManager.default.attributesOfItem(atPath: outbox)[.size] as? Int) ?? 0) == 0 {
                usleep(100)
                turns += 1
            }
            first.send(SIGKILL)
        }
        killer.start()
        // The kill may land before the answer is read: then the store says what was accepted (below).
        let answer = try? await CrashRecoveryTests.withClient(directory, port: port) { api in
            try await api.reload(bundle: Self.bundle, body: #"{"kind":"scores"}"#, secret: secret)
        }
        if let answer {
            #expect(answer.status == 202, "\(answer.body)")
            #expect((answer.json["decisions"] as? [String: Int])?["scheduled"] == devices)
        }
        _ = try await first.waitForExit()

        let atKill = try Self.lines(directory, tornEndAllowed: true)
        do {
            let store = try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: Date())
            defer { try? store.close() }
            let sent = Set(try await store.deliveries(in: [.sent]).map(\.apnsID))
            let sending = Set(try await store.deliveries(in: [.sending]).map(\.apnsID))
            let pending = Set(try await store.deliveries(in: [.pending]).map(\.apnsID))
            #expect(sent.count + sending.count + pending.count == devices)
            #expect(sent.subtracting(atKill.keys).isEmpty, "sent without its line: \(sent.subtracting(atKill.keys).count)")
            #expect(sending.isEmpty, "the outbox needs no sending mark: \(sending.count)")
            #expect(Set(atKill.keys).isSubset(of: sent.union(pending)), "a line for a delivery not in the ledger")
            #expect(pending.count > 0, "the kill came after the herd: the test proved nothing about it")
            print("outbox herd: \(atKill.count) lines at the kill, \(sent.count) sent, \(sending.count) sending, \(pending.count) pending")
        }

        // Restarted: every delivery reaches the outbox, once.
        let (second, _) = try await CrashRecoveryTests.serve(in: directory, environment: environment)
        // (Counted by newlines while it drains: parsing every line at each look costs more than the drain.)
        func lineCount() -> Int {
            let data = (try? Data(contentsOf: URL(fileURLWithPath: directory.path("data/outbox.jsonl")))) ?? Data()
            return data.withUnsafeBytes { bytes -> Int in
                guard var at = bytes.baseAddress else { return 0 }
                let end = at + bytes.count
                var count = 0
                while at < end, let found = memchr(at, 10, end - at) {
                    count += 1
                    at = UnsafeRawPointer(found) + 1
                }
                return count
            }
        }
        // (A while loop: `for ... where` would read the whole file again for every remaining turn once it
        // is complete, blocking one of the test process's two cooperative threads for many seconds.)
        var turns = 0
        while turns < 3600, lineCount() < devices {
            try await Task.sleep(for: .milliseconds(50))
            turns += 1
        }
        second.send(SIGTERM)
        #expect(try await second.waitForExit() == 0)
        let after = try Self.lines(directory)
        #expect(after.count == devices)
        let twice = Set(after.filter { $0.value > 1 }.keys)
        #expect(twice.isEmpty, "written twice: \(twice.count)")
        let store = try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: Date())
        defer { try? store.close() }
        #expect(try await store.deliveries(in: [.pending, .sending]).isEmpty)
        #expect(try await store.deliveries(in: [.sent]).count == devices)
    }
}
