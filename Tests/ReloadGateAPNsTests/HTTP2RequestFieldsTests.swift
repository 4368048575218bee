import ReloadGateAPNs
import Testing

/// The header-block rules the APNs listener checks itself (RFC 9113 8.2-8.3), field by field.
struct HTTP2RequestFieldsTests {
    static let request = [(":method", "POST"), (":scheme", "https"), (":path", "/3/device/ab"), (":authority", "localhost")]

    func check(_ fields: [(String, String)]) -> (accepted: Bool, complete: Bool, contentLength: Int?) {
        var check = HTTP2RequestFields()
        for (name, value) in fields where !check.accept(name: name, value: value) { return (false, false, nil) }
        return (true, check.isComplete, check.contentLength)
    }

    @Test func aWellFormedRequestPasses() {
        let result = check(Self.request + [("authorization", "bearer x.y.z"), ("content-length", "32"), ("te", "trailers"), ("user-agent", "a b\tc")])
        #expect(result.accepted && result.complete)
        #expect(result.contentLength == 32)
        #expect(check([(":method", "POST"), (":scheme", "https"), (":path", "/")]).complete)  // :authority is optional
    }

    @Test(arguments: [
        [("Apns-Topic", "x")], [("", "x")], [("apns topic", "x")], [("connection", "close")], [("keep-alive", "1")],
        [("proxy-connection", "x")], [("transfer-encoding", "chunked")], [("upgrade", "h2c")], [("te", "gzip")],
        [("x", "a\rb")], [("x", "a\u{0}b")], [("content-length", "-1")], [("content-length", "1x")],
        [("content-length", "1"), ("content-length", "2")], [(":authority", "late")],
    ])
    func aRegularFieldCanMakeTheBlockMalformed(_ extra: [(String, String)]) {
        #expect(!check(Self.request + extra).accepted, "\(extra)")
    }

    @Test func theSameContentLengthTwiceIsFine() {
        let result = check(Self.request + [("content-length", "7"), ("content-length", "7")])
        #expect(result.accepted && result.complete && result.contentLength == 7)
    }

    @Test(arguments: [
        [(":method", "POST"), (":path", "/")],  // no :scheme
        [(":scheme", "https"), (":path", "/")],  // no :method
        [(":method", "POST"), (":scheme", "https")],  // no :path
        [(":method", "CONNECT"), (":authority", "h:443"), (":path", "/")],  // CONNECT takes no :path
        [(":method", "CONNECT")],  // CONNECT needs :authority
    ])
    func incompletePseudoHeadersAreMalformed(_ fields: [(String, String)]) {
        let result = check(fields)
        #expect(!(result.accepted && result.complete), "\(fields)")
    }

    @Test(arguments: [
        [(":method", "POST"), (":method", "GET")], [(":path", "")], [(":path", "/a b")], [(":path", "/\u{7F}")],
        [(":protocol", "websocket")], [(":status", "200")], [(":other", "x")],
    ])
    func badPseudoHeadersAreMalformed(_ fields: [(String, String)]) {
        var check = HTTP2RequestFields()
        #expect(!fields.allSatisfy { check.accept(name: $0.0, value: $0.1) }, "\(fields)")
    }

    @Test func aConnectRequestWithAuthorityIsWellFormed() {
        #expect(check([(":method", "CONNECT"), (":authority", "h:443")]).complete)
    }
}
