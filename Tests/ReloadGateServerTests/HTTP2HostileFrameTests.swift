import Foundation
import ReloadGateCore
import ReloadGateServer
import ReloadGateStore
import ReloadGateTesting
import Testing

/// What a hostile HTTP/2 peer writes frame by frame, against both listeners (the APNs listener and the API
/// listener share the frame-level handling since issue 30): rapid reset, a CONTINUATION flood, an HPACK
/// bomb, more streams than announced, a zero window, an oversize header block, DATA past the window. Each
/// case checks the connection's fate and that the gateway then answers a new connection. Slow and silent
/// peers are ConnectionTimeoutTests' (both listeners too). Over real TLS.
@Suite(.timeLimit(.minutes(10)), .heavy)
struct HTTP2HostileFrameTests {
    enum Listener: String, CaseIterable, Sendable {
        case api, apns
    }

    static let bundle = "com.example.scores"
    static let token = String(repeating: "ab", count: 32)

    /// A gateway with a 10 s body deadline (a loaded machine once took over 2 s between two writes of a
    /// test, and the streams it had opened were reset) and `idle` (30 s unless the test is about it: a loaded machine
    /// running every suite at once must not close a connection as idle while a test sets it up), and the
    /// app registered.
    static func withGateway(idle: Int = 30, _ body: @Sendable (TestGateway) async throws -> Void) async throws {
        let directory = try TemporaryDirectory("h2-hostile")
        defer { directory.remove() }
        do {
            let store = try SQLiteStore(directory: directory.path("data"), environment: .sandbox, now: Date())
            defer { try? store.close() }
            _ = try await store.createApp(bundle: try BundleID(bundle), now: Date())
        }
        try await TestGateway.withRunning(in: directory, configure: { configuration in
            configuration.listen.bodyTimeout = 10
            configuration.listen.idleTimeout = idle
        }, body)
    }

    static func port(_ listener: Listener, of gateway: TestGateway) -> Int {
        listener == .api ? gateway.port : gateway.ingressPort
    }

    /// A request each listener answers with a body: `/health` on the API listener, a push without a
    /// provider token on the APNs listener (403 with its reason).
    static func request(_ listener: Listener, _ extra: [(String, String)] = []) -> [(String, String)] {
        switch listener {
        case .api: RawHTTP2Peer.request("GET", "/health", extra)
        case .apns: RawHTTP2Peer.request("POST", "/3/device/\(token)", [("apns-topic", "\(bundle).push-type.widgets")] + extra)
        }
    }

    static func connect(_ listener: Listener, _ gateway: TestGateway, settings: [(UInt16, UInt32)] = []) async throws -> RawHTTP2Peer {
        try await RawHTTP2Peer.connect(port: port(listener, of: gateway), tls: try gateway.pki.clientTLSConfiguration(), settings: settings)
    }

    /// A new connection's request is answered: the gateway is still serving.
    static func expectAnswered(_ listener: Listener, _ gateway: TestGateway, _ comment: String) async throws {
        let peer: RawHTTP2Peer
        do {
            peer = try await connect(listener, gateway)
        } catch {
            Issue.record("\(listener): after \(comment), a new connection failed: \(error)")
            return
        }
        defer { Task { await peer.close() } }
        do {
            try await peer.send([RawHTTP2Peer.headers(stream: 1, RawHTTP2Peer.block(request(listener)))])
        } catch {
            Issue.record("\(listener): after \(comment), a new connection's request could not be sent: \(error); GOAWAY \(String(describing: peer.goAway))")
            return
        }
        let answered = await peer.wait(timeout: .seconds(30)) { _ in peer.statuses[1] != nil }
        #expect(answered, "\(listener): after \(comment), a new connection is not answered")
        #expect(peer.statuses[1] == (listener == .api ? 200 : 403), "\(listener): after \(comment)")
    }

    /// Streams opened and reset at once, a thousand of them (CVE-2023-44487): the connection is ended with
    /// ENHANCE_YOUR_CALM long before the thousandth, and the gateway goes on.
    @Test(arguments: Listener.allCases)
    func rapidResetEndsTheConnection(_ listener: Listener) async throws {
        try await Self.withGateway { gateway in
            let peer = try await Self.connect(listener, gateway)
            defer { Task { await peer.close() } }
            let block = RawHTTP2Peer.block(Self.request(listener))
            for batch in 0..<10 {
                let frames = (0..<100).flatMap { index -> [RawHTTP2Peer.Frame] in
                    let stream = UInt32((batch * 100 + index) * 2 + 1)
                    return [RawHTTP2Peer.headers(stream: stream, block), RawHTTP2Peer.resetStream(stream)]
                }
                try? await peer.send(frames)
            }
            let ended = await peer.wait(timeout: .seconds(30)) { _ in peer.goAway != nil }
            #expect(ended, "\(listener): no GOAWAY after a thousand resets")
            #expect(peer.goAway?.code == RawHTTP2Peer.ErrorCode.enhanceYourCalm.rawValue, "\(listener): \(String(describing: peer.goAway))")
            #expect(await peer.waitForClose(timeout: .seconds(30)), "\(listener): the connection stays open")
            try await Self.expectAnswered(listener, gateway, "a rapid reset")
        }
    }

    /// A header block that never ends: CONTINUATION frames of 1 KiB, two thousand of them. The connection
    /// is ended (GOAWAY) and closed before the flood is buffered, and the gateway goes on.
    @Test(arguments: Listener.allCases)
    func aContinuationFloodEndsTheConnection(_ listener: Listener) async throws {
        try await Self.withGateway { gateway in
            let peer = try await Self.connect(listener, gateway)
            defer { Task { await peer.close() } }
            try await peer.send([RawHTTP2Peer.headers(stream: 1, RawHTTP2Peer.block(Self.request(listener)), endHeaders: false)])
            let chunk = RawHTTP2Peer.block([("x-flood", String(repeating: "a", count: 1000))])
            for _ in 0..<20 {
                guard !peer.isClosed else { break }
                try? await peer.send(Array(repeating: RawHTTP2Peer.Frame(.continuation, stream: 1, payload: chunk), count: 100))
            }
            let ended = await peer.wait(timeout: .seconds(30)) { _ in peer.goAway != nil }
            #expect(ended, "\(listener): no GOAWAY for a CONTINUATION flood")
            #expect(peer.statuses[1] == nil, "\(listener): the flooded request was answered")
            #expect(await peer.waitForClose(timeout: .seconds(30)), "\(listener): the connection stays open")
            try await Self.expectAnswered(listener, gateway, "a CONTINUATION flood")
        }
    }

    /// An HPACK bomb: one 4,000-byte field put in the dynamic table, then referenced 4,000 times by one
    /// byte each (8 KB on the wire, 16 MB decoded). Refused without being decoded in full: the request is
    /// not served, and the gateway goes on.
    @Test(arguments: Listener.allCases)
    func anHPACKBombIsRefused(_ listener: Listener) async throws {
        try await Self.withGateway { gateway in
            let peer = try await Self.connect(listener, gateway)
            defer { Task { await peer.close() } }
            let value = String(repeating: "b", count: 4000)
            // Literal with incremental indexing, new name (RFC 7541, 6.2.1); then index 62, the newest entry.
            let insert: [UInt8] = [0x40] + RawHTTP2Peer.string("x-bomb") + RawHTTP2Peer.string(value)
            let references = Array(repeating: UInt8(0x80 | 62), count: 4000)
            let block = RawHTTP2Peer.block(Self.request(listener)) + insert + references
            try await peer.send([RawHTTP2Peer.headers(stream: 1, block)])
            let refused = await peer.wait(timeout: .seconds(30)) { _ in peer.goAway != nil || peer.resets[1] != nil || peer.statuses[1] != nil }
            #expect(refused, "\(listener): no answer to an HPACK bomb")
            let status = peer.statuses[1]
            #expect(status == nil || status == 431, "\(listener): an HPACK bomb was served (\(String(describing: status)))")
            try await Self.expectAnswered(listener, gateway, "an HPACK bomb")
        }
    }

    /// Streams up to the limit the listener announces (SETTINGS_MAX_CONCURRENT_STREAMS) open at once are all
    /// served; a peer that opens more than that loses the connection (GOAWAY PROTOCOL_ERROR: NIO treats it as
    /// a connection error, which RFC 9113, 5.1.2 allows to be a stream error; a client that respects the
    /// setting never sees it), and the gateway goes on.
    @Test(arguments: Listener.allCases)
    func streamsUpToTheLimitAreServedAndOneMoreEndsTheConnection(_ listener: Listener) async throws {
        try await Self.withGateway { gateway in
            let block = RawHTTP2Peer.block(Self.request(listener))
            let within = try await Self.connect(listener, gateway)
            defer { Task { await within.close() } }
            let limit = try #require(within.serverSetting(0x3), "\(listener): no SETTINGS_MAX_CONCURRENT_STREAMS")
            #expect(limit >= 1 && limit <= 1000, "\(listener): \(limit)")
            let streams = (0..<limit).map { $0 * 2 + 1 }
            try await within.send(streams.map { RawHTTP2Peer.headers(stream: $0, block, endStream: false) })
            try await within.send(streams.map { RawHTTP2Peer.data(stream: $0, []) })
            let served = await within.wait(timeout: .seconds(20)) { _ in within.statuses.count == streams.count }
            #expect(served, "\(listener): \(within.statuses.count) of \(limit) streams answered")
            #expect(within.goAway == nil && within.resets.isEmpty, "\(listener): \(String(describing: within.goAway)), \(within.resets.count) resets")

            let over = try await Self.connect(listener, gateway)
            defer { Task { await over.close() } }
            try? await over.send((0...limit).map { RawHTTP2Peer.headers(stream: $0 * 2 + 1, block, endStream: false) })
            let ended = await over.wait(timeout: .seconds(30)) { _ in over.goAway != nil }
            #expect(ended, "\(listener): \(limit + 1) streams at once did not end the connection")
            #expect(over.goAway?.code == RawHTTP2Peer.ErrorCode.protocolError.rawValue, "\(listener): \(String(describing: over.goAway))")
            #expect(await over.waitForClose(timeout: .seconds(30)), "\(listener): the connection stays open")
            try await Self.expectAnswered(listener, gateway, "one stream past the limit")
        }
    }

    /// A peer that announces a zero window and never opens it: its answer's headers come, its body cannot.
    /// The gateway answers other connections meanwhile, and closes the stalled one by its idle deadline
    /// (10 s here: a new connection on a machine running every suite at once once took over 4 s to send its
    /// first request) instead of holding it forever.
    @Test(arguments: Listener.allCases)
    func aZeroWindowDoesNotHoldTheGateway(_ listener: Listener) async throws {
        try await Self.withGateway(idle: 10) { gateway in
            let started = ContinuousClock.now
            let peer = try await Self.connect(listener, gateway, settings: [(0x4, 0)])
            defer { Task { await peer.close() } }
            try await peer.send([RawHTTP2Peer.headers(stream: 1, RawHTTP2Peer.block(Self.request(listener)))])
            let headers = await peer.wait(timeout: .seconds(30)) { _ in peer.statuses[1] != nil }
            #expect(headers, "\(listener): no response headers")
            #expect(peer.body(of: 1).isEmpty, "\(listener): DATA past a zero window")
            try await Self.expectAnswered(listener, gateway, "a zero window")
            #expect(await peer.waitForClose(timeout: .seconds(25)), "\(listener): a stalled connection is held past its idle deadline")
            #expect(ContinuousClock.now - started >= .milliseconds(9900), "\(listener): closed before the idle deadline")
        }
    }

    /// A header block of 24 KB (past the 16 KiB announced), in a HEADERS and a CONTINUATION frame: not
    /// served, and the gateway goes on.
    @Test(arguments: Listener.allCases)
    func anOversizeHeaderBlockIsNotServed(_ listener: Listener) async throws {
        try await Self.withGateway { gateway in
            let peer = try await Self.connect(listener, gateway)
            defer { Task { await peer.close() } }
            let filler = (0..<24).map { ("x-filler-\($0)", String(repeating: "c", count: 1000)) }
            let block = RawHTTP2Peer.block(Self.request(listener, filler))
            try await peer.send([
                RawHTTP2Peer.headers(stream: 1, Array(block.prefix(12_000)), endHeaders: false),
                RawHTTP2Peer.Frame(.continuation, flags: RawHTTP2Peer.endHeaders, stream: 1, payload: Array(block.dropFirst(12_000))),
            ])
            let refused = await peer.wait(timeout: .seconds(30)) { _ in peer.goAway != nil || peer.resets[1] != nil || peer.statuses[1] != nil }
            #expect(refused, "\(listener): no answer to an oversize header block")
            let status = peer.statuses[1]
            #expect(status == nil || status == 431, "\(listener): a 24 KB header block was served (\(String(describing: status)))")
            try await Self.expectAnswered(listener, gateway, "an oversize header block")
        }
    }

    /// DATA past the stream's window: a flow-control error ends the connection (RFC 9113, 6.9.1) unless the
    /// request was refused first, and the gateway goes on.
    @Test(arguments: Listener.allCases)
    func dataPastTheWindowIsAFlowControlError(_ listener: Listener) async throws {
        try await Self.withGateway { gateway in
            let peer = try await Self.connect(listener, gateway)
            defer { Task { await peer.close() } }
            let window = Int(peer.serverSetting(0x4) ?? 65_535)
            try await peer.send([RawHTTP2Peer.headers(stream: 1, RawHTTP2Peer.block(Self.request(listener)), endStream: false)])
            let chunk = Array(repeating: UInt8(ascii: " "), count: 16_000)
            let frames = (0..<(window / chunk.count + 2)).map { _ in RawHTTP2Peer.data(stream: 1, chunk, endStream: false) }
            try? await peer.send(frames)
            let ended = await peer.wait(timeout: .seconds(30)) { _ in peer.goAway != nil || peer.resets[1] != nil }
            #expect(ended, "\(listener): \(frames.count * chunk.count) bytes past a window of \(window) accepted")
            // Either the window is enforced (FLOW_CONTROL_ERROR), or the stream's answer came first and the
            // stream was reset, reading no more (the API listener answers /health without reading a body, and
            // refuses a body past 64 KiB with 413), which can win the race.
            let code = peer.goAway?.code ?? peer.resets[1]
            let refusedFirst = peer.statuses[1] != nil && peer.resets[1] != nil
            #expect(code == RawHTTP2Peer.ErrorCode.flowControlError.rawValue || refusedFirst, "\(listener): \(String(describing: code)), \(String(describing: peer.statuses[1]))")
            try await Self.expectAnswered(listener, gateway, "DATA past the window")
        }
    }
}
