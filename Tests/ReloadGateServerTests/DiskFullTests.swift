import AsyncHTTPClient
import Foundation
import Logging
import NIOHTTP1
import ReloadGateCore
import ReloadGateServer
import ReloadGateStore
import ReloadGateTesting
import Testing

/// The embedded default on a disk that fills up (a tmpfs of its own, which needs root: CI runs as root):
/// pushes are refused with `503` while nothing can be written, `/ready` says `503`, and once space is freed
/// the gateway comes back by itself (the WAL is truncated; it would otherwise keep the space freed) and the
/// outbox holds whole lines only.
@Suite(.timeLimit(.minutes(10)), .enabled(if: Tmpfs.canMount), .heavy)
struct DiskFullTests {
    static let bundle = "com.example.scores"
    static let token = String(repeating: "f6", count: 32)

    @Test func aFullDiskIsRefusedWith503AndTheGatewayComesBackWhenSpaceReturns() async throws {
        let directory = try TemporaryDirectory("disk-full")
        defer { directory.remove() }
        let disk = directory.path("disk")
        try FileManager.default.createDirectory(atPath: disk, withIntermediateDirectories: true)
        try #require(Tmpfs.run("/bin/mount", ["-t", "tmpfs", "-o", "size=16m", "tmpfs", disk]))
        defer { Tmpfs.run("/bin/umount", ["-l", disk]) }
        let data = disk + "/data"

        let sender = ProviderTokenFactory(keyID: "DISKFULL01", teamID: "DISKTEAM01")
        do {
            let store = try SQLiteStore(directory: data, environment: .sandbox, now: Date())
            let credentials = try await store.createApp(bundle: try BundleID(Self.bundle), teamID: sender.teamID, allowsExemptions: false, now: Date())
            try await store.addProviderKey(
                StoredProviderKey(keyID: sender.keyID, teamID: sender.teamID, publicKeyPEM: sender.publicKeyPEM, topics: [], environments: "both", createdAt: Date())
            )
            let widgets = [WidgetRegistration(id: "w1", kind: "scores", family: .systemSmall, configuration: WidgetConfiguration())]
            _ = try await store.putDevice(app: credentials.app, token: try DeviceToken(Self.token), widgets: widgets, previousToken: nil, now: Date())
            try store.close()
        }

        try await TestGateway.withRunning(in: directory, configure: { configuration in
            configuration.dataDirectory = data
        }) { gateway in
            @Sendable func push(priority: Int = 5) async throws -> PushAnswer {
                try await gateway.push(Self.token, bundle: Self.bundle, sender: sender, priority: priority)
            }
            try await gateway.withHTTPClient { client in
                let api = GatewayAPIClient(client: client, baseURL: gateway.baseURL)
                // The first push goes to the outbox at once.
                let first = try await push(priority: 10)
                #expect(first.status == 200, "\(first.body)")
                _ = try await eventually(every: .milliseconds(50)) {
                    !((try? String(contentsOfFile: data + "/outbox.jsonl", encoding: .utf8)) ?? "").isEmpty
                }

                // The WAL gives its space back first (a truncating checkpoint, as the gateway's own probe makes
                // once a commit failed): the disk that fills next stays full until the filler goes.
                do {
                    let operatorStore = try SQLiteStore(directory: data, environment: .sandbox, now: Date())
                    defer { try? operatorStore.close() }
                    for _ in 0..<50 {
                        if (try? operatorStore.checkpointWAL(truncating: true)) != nil { break }
                        try await Task.sleep(for: .milliseconds(20))
                    }
                }
                // The disk fills up: a file takes every byte left.
                let filler = disk + "/filler"
                #expect(FileManager.default.createFile(atPath: filler, contents: nil))
                let handle = try #require(FileHandle(forWritingAtPath: filler))
                // Large writes, then page by page for what a large one could not take.
                for size in [1 << 20, 4 << 10, 1] {
                    let chunk = Data(repeating: 0x5a, count: size)
                    while (try? handle.write(contentsOf: chunk)) != nil {}
                }
                try? handle.close()

                // Pushes until the WAL has no room left: each is answered, a refusal is 503.
                var refused: [PushAnswer] = []
                var accepted: [String] = []
                for _ in 0..<400 where refused.isEmpty {
                    let answer = try await push()
                    if answer.status == 200 { accepted.append(answer.apnsID) } else { refused.append(answer) }
                }
                try #require(!refused.isEmpty, "the full disk never refused a push")
                for _ in 0..<3 { refused.append(try await push()) }
                for answer in refused {
                    #expect(answer.status == 503, "\(answer.body)")
                    #expect(answer.body.contains("ServiceUnavailable"), "\(answer.body)")
                }
                #expect(try await api.waitForReadiness(503, within: .seconds(30)), "/ready did not turn 503 while the disk was full")

                // Space comes back: the gateway accepts pushes again by itself.
                try FileManager.default.removeItem(atPath: filler)
                #expect(try await api.waitForReadiness(200, within: .seconds(30)), "the gateway did not become ready within 30 s of the space's return")
                let after = try await push()
                #expect(after.status == 200, "\(after.body)")

                let store = try SQLiteStore(directory: data, environment: .sandbox, now: Date())
                defer { try? store.close() }
                for answer in refused {
                    #expect(try await store.requests(apnsID: answer.apnsID).isEmpty, "\(answer.apnsID) was stored after its 503")
                }
                for apnsID in accepted + [first.apnsID, after.apnsID] {
                    #expect(try await store.requests(apnsID: apnsID).count == 1, "\(apnsID) answered 200 is not stored")
                }
            }
        }
        // The outbox: whole lines only.
        let outbox = try String(contentsOfFile: data + "/outbox.jsonl", encoding: .utf8)
        #expect(outbox.isEmpty || outbox.hasSuffix("\n"))
        for line in outbox.split(separator: "\n") {
            #expect((try? JSONSerialization.jsonObject(with: Data(line.utf8))) is [String: Any], "a torn line: \(line)")
        }
    }
}

/// Mounting a small tmpfs: a disk of the test's own that fills in seconds.
enum Tmpfs {
    /// Whether a tmpfs can be mounted here (root with the right to mount).
    static let canMount: Bool = {
        guard getuid() == 0, let directory = try? TemporaryDirectory("mount-probe") else { return false }
        defer { directory.remove() }
        guard run("/bin/mount", ["-t", "tmpfs", "-o", "size=1m", "tmpfs", directory.url.path]) else { return false }
        return run("/bin/umount", [directory.url.path])
    }()

    @discardableResult
    static func run(_ tool: String, _ arguments: [String]) -> Bool {
        guard let child = try? ChildProcess(URL(fileURLWithPath: tool), arguments, in: URL(fileURLWithPath: "/")) else { return false }
        return child.waitUntilExit() == 0
    }
}
