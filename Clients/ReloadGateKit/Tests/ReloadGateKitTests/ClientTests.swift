import Foundation
import ReloadGateKit
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing

/// The client: paths, the key, retries within the deadline, refusals.
struct ClientTests {
    @Test func aCallIsItsPathBodyAndTheRegistrationKey() async throws {
        let transport = ScriptedTransport()
        let client = client(transport)
        try await client.send(try client.call(reporting: TimelineReport(entries: [], policy: .never), token: "ab01", widget: "w/1 x"))
        try await client.send(client.call(deletingControl: "cd02"))
        let sent = transport.sent
        #expect(sent.map(\.httpMethod) == ["PUT", "DELETE"])
        #expect(sent[0].url?.absoluteString == "https://gateway.example:8443/v1/apps/com.example.scores/devices/ab01/widgets/w%2F1%20x/timeline")
        #expect(sent[1].url?.absoluteString == "https://gateway.example:8443/v1/apps/com.example.scores/controls/cd02")
        #expect(sent.allSatisfy { $0.value(forHTTPHeaderField: "authorization") == "bearer rgr_test" })
        #expect(sent[0].value(forHTTPHeaderField: "content-type") == "application/json")
        #expect(sent[1].httpBody == nil)
    }

    /// A gateway away, busy (503) or limiting (429 with `retry-after`) is tried again; the call succeeds
    /// once it answers 2xx.
    @Test func temporaryFailuresAreTriedAgain() async throws {
        let transport = ScriptedTransport([.away, .status(503), .status(429, headers: ["retry-after": "1"])], otherwise: .status(200, body: #"{"ok":true}"#))
        let clock = ContinuousClock()
        let started = clock.now
        let body = try await client(transport, attempts: 4).send(client(transport).call(deletingDevice: "ab"))
        #expect(String(decoding: body, as: UTF8.self) == #"{"ok":true}"#)
        #expect(transport.sent.count == 4)
        // 250 ms, 500 ms, then the 429's second (more than the 1 s the doubling gave).
        #expect(started.duration(to: clock.now) >= .milliseconds(1750))
    }

    /// A refusal for good (422), and a rotated key (401), are not tried again; the gateway's code and
    /// message come with it.
    @Test func refusalsAreNotTriedAgain() async throws {
        for status in [422, 401, 403] {
            let transport = ScriptedTransport([.status(status, body: #"{"code":"c\#(status)","message":"no"}"#)])
            await #expect(throws: ReloadGateError.refused(status: status, code: "c\(status)", message: "no")) {
                try await client(transport).send(client(transport).call(deletingDevice: "ab"))
            }
            #expect(transport.sent.count == 1)
        }
        #expect(ReloadGateError.refused(status: 401, code: "", message: "").isTemporary, "a queue keeps it for the app's update")
        #expect(!ReloadGateError.refused(status: 422, code: "", message: "").isTemporary)
    }

    /// Attempts stop at the deadline: a pause that would end past it is not taken.
    @Test func theDeadlineBoundsTheRetries() async throws {
        let transport = ScriptedTransport(otherwise: .away)
        let clock = ContinuousClock()
        let started = clock.now
        await #expect(throws: ReloadGateError.self) {
            try await client(transport, deadline: .seconds(1), attempts: 10).send(client(transport).call(deletingDevice: "ab"))
        }
        #expect(started.duration(to: clock.now) < .seconds(1))
        #expect(transport.sent.count == 3, "at 0, 250 and 750 ms; the next would be at 1750 ms")
    }
}
