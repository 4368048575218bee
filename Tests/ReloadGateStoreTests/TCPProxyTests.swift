import ReloadGateTesting
import Testing

/// The test proxy in front of PostgreSQL: a trigger's marker that a client's bytes bring in two reads (a
/// long query read in parts) still starts the swallowing. Before, a marker split between two reads was
/// missed, and a test waiting for it waited its whole limit.
@Suite(.enabled(if: TestPostgres.isEnabled))
struct TCPProxyTests {
    @Test func aMarkerSplitBetweenTwoReadsIsSeen() async throws {
        let (proxy, _) = try await TCPProxy.inFront(of: try #require(TestPostgres.url))
        defer { Task { await proxy.stop() } }
        proxy.swallowReplies(onceClientSends: "device.active AND")
        let connection = try await RawConnection.connect(host: "127.0.0.1", port: proxy.port)
        defer { Task { await connection.close() } }
        // A startup packet's length (10,000 bytes) first: the server waits for the rest of it.
        try await connection.send(bytes: [0, 0, 0x27, 0x10] + Array((String(repeating: "x", count: 100) + "device.act").utf8))
        // Apart in time, so that the proxy reads them apart.
        try await Task.sleep(for: .milliseconds(200))
        #expect(proxy.triggeringConnectionIsOpen == nil, "fired on half of the marker")
        try await connection.send("ive AND")
        let seen = try await eventually(within: .seconds(10), every: .milliseconds(10)) { proxy.triggeringConnectionIsOpen != nil }
        #expect(seen)
        #expect(proxy.isSwallowing)
    }
}
