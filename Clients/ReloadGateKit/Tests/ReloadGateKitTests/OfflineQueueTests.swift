import Foundation
import ReloadGateKit
import Testing

/// Reports made while the gateway is away are kept on disk and go once it is back, in order, once each.
struct OfflineQueueTests {
    @Test func reportsMadeWhileAwayGoInOrderOnceEachWhenBack() async throws {
        let directory = temporaryDirectory("queue")
        defer { try? FileManager.default.removeItem(at: directory) }
        let transport = ScriptedTransport(otherwise: .away)
        let client = client(transport, deadline: .seconds(1), attempts: 1)
        let reporter = try Reporter(client: client, directory: directory)

        let mapping = RegistryMapping<StandInWidget, StandInControl>()
        let first = try await reporter.widgetsChanged(token: Data([0xaa]), device: mapping.device(widgets: [StandInWidget(kind: "scores", familyName: "systemSmall")]))
        #expect(first.sent == 0 && first.kept == 1 && first.stopped != nil)
        try await reporter.controlsChanged(mapping.controls([StandInControl(kind: "garage", pushTokenData: Data([0xcc]))]))
        let timeline = try await reporter.timeline(kind: "scores", family: "systemSmall", configuration: nil, report: TimelineReport(entries: [], policy: .never))
        #expect(timeline?.kept == 3)

        // The process ends; another (the app opened again) finds the reports and the gateway is back.
        transport.answerAll(.status(200))
        let sentBefore = transport.sent.count
        let again = try Reporter(client: client, directory: directory)
        #expect(again.deviceToken == "aa")
        // Two flushes at once (the app and a push handler): each call still goes once.
        async let one = again.flush()
        async let two = again.flush()
        let (a, b) = try await (one, two)
        #expect(a.sent + b.sent == 3)
        let widget = WidgetIdentity.id(kind: "scores", family: "systemSmall", configuration: nil)
        #expect(
            transport.sent.dropFirst(sentBefore).map { $0.url!.path } == [
                "/v1/apps/com.example.scores/devices/aa", "/v1/apps/com.example.scores/controls/cc",
                "/v1/apps/com.example.scores/devices/aa/widgets/\(widget)/timeline",
            ]
        )
        #expect(try await again.queue.calls().isEmpty)
        #expect(try await again.flush().sent == 0)
    }

    /// A call refused for good is dropped (and said); the calls after it still go. A temporary failure
    /// keeps it and every later one.
    @Test func aRefusedCallIsDroppedAndATemporaryOneKeepsTheRest() async throws {
        let directory = temporaryDirectory("refused")
        defer { try? FileManager.default.removeItem(at: directory) }
        let transport = ScriptedTransport([.status(422, body: #"{"code":"invalid-field","message":"bad"}"#), .status(200), .status(503)], otherwise: .status(200))
        let client = client(transport, deadline: .seconds(1), attempts: 1)
        let queue = try OfflineQueue(directory: directory)
        try await queue.enqueue([client.call(deletingDevice: "01"), client.call(deletingDevice: "02"), client.call(deletingDevice: "03"), client.call(deletingDevice: "04")])
        let outcome = try await queue.flush(client)
        #expect(outcome.sent == 1 && outcome.refused.map(\.call.path) == ["/v1/apps/com.example.scores/devices/01"])
        #expect(outcome.kept == 2 && outcome.stopped == .refused(status: 503, code: "http-503", message: "{}"))
        #expect(try await queue.calls().map(\.path) == ["/v1/apps/com.example.scores/devices/03", "/v1/apps/com.example.scores/devices/04"])
        #expect(try await queue.flush(client).sent == 2)
    }

    /// A damaged file in the queue (a full disk, another writer) is removed and does not hold the calls
    /// after it.
    @Test func aFileThatIsNotACallIsRemovedAndTheRestGo() async throws {
        let directory = temporaryDirectory("damaged")
        defer { try? FileManager.default.removeItem(at: directory) }
        let transport = ScriptedTransport()
        let client = client(transport)
        let queue = try OfflineQueue(directory: directory)
        try Data("{not json".utf8).write(to: directory.appendingPathComponent("000000000001-damaged.call"))
        try await queue.enqueue([client.call(deletingDevice: "01")])
        #expect(try await queue.calls().map(\.path) == ["/v1/apps/com.example.scores/devices/01"])
        let outcome = try await queue.flush(client)
        #expect(outcome.sent == 1 && outcome.unreadable == 1)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).isEmpty)
    }

    /// A new token names the one it replaces; a timeline provider has nothing to report under before the
    /// device has a token.
    @Test func aNewTokenNamesTheOneItReplaces() async throws {
        let directory = temporaryDirectory("token")
        defer { try? FileManager.default.removeItem(at: directory) }
        let transport = ScriptedTransport()
        let reporter = try Reporter(client: client(transport), directory: directory)
        #expect(try await reporter.timeline(kind: "scores", family: "systemSmall", configuration: nil, report: TimelineReport(entries: [], policy: .never)) == nil)
        try await reporter.widgetsChanged(token: Data([0x01]), device: DeviceRegistration(widgets: []))
        try await reporter.widgetsChanged(token: Data([0x02]), device: DeviceRegistration(widgets: []))
        try await reporter.widgetsChanged(token: Data([0x02]), device: DeviceRegistration(widgets: []))
        let bodies = transport.sent.map { String(decoding: $0.httpBody ?? Data(), as: UTF8.self) }
        #expect(bodies == [#"{"widgets":[]}"#, #"{"previousToken":"01","widgets":[]}"#, #"{"widgets":[]}"#])
    }
}
