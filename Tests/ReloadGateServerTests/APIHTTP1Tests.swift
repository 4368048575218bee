import Foundation
import ReloadGateCore
import ReloadGateServer
import ReloadGateStore
import ReloadGateTesting
import Testing

/// The API listener's HTTP/1.1 connections (``APIHTTP1Handler``), spoken to byte by byte over TLS: requests
/// sent together are answered in order on one connection, a body past the routes' limit is answered and
/// the connection goes on, and the connection closes when the request asks for it.
@Suite(.timeLimit(.minutes(10)), .heavy)
struct APIHTTP1Tests {
    static let bundle = "com.example.scores"
    static let token = String(repeating: "ab", count: 32)

    static func withGateway(_ body: @Sendable (TestGateway, AppCredentials) async throws -> Void) async throws {
        try await TestGateway.withRunningApp(bundle, directoryNamed: "api-http1", body)
    }

    /// A TLS connection to the API listener that offers only HTTP/1.1.
    static func connect(to gateway: TestGateway) async throws -> RawConnection {
        try await RawConnection.connect(port: gateway.port, tls: try gateway.pki.clientTLSConfiguration(), alpn: ["http/1.1"])
    }

    /// The start of a device registration's head, up to the fields each test adds.
    static func registrationHead(_ credentials: AppCredentials) -> String {
        "PUT /v1/apps/\(bundle)/devices/\(token) HTTP/1.1\r\nhost: localhost\r\nauthorization: bearer \(credentials.apiKey)\r\n"
            + "content-type: application/json\r\n"
    }

    /// One answer as read off the wire.
    struct Answer {
        var status: Int
        var fields: [String: String]
        var body: String
    }

    /// The first `count` answers in `bytes`, each read by its `content-length`; `nil` until they are all there.
    static func answers(_ bytes: [UInt8], count: Int, heads: [Bool] = []) -> [Answer]? {
        var answers: [Answer] = []
        var rest = bytes[...]
        let end: [UInt8] = Array("\r\n\r\n".utf8)
        while answers.count < count {
            guard let split = rest.firstRange(of: end) else { return nil }
            let lines = String(decoding: rest[..<split.lowerBound], as: UTF8.self).components(separatedBy: "\r\n")
            guard let statusLine = lines.first?.split(separator: " "), statusLine.count >= 2, let status = Int(statusLine[1]) else { return nil }
            var fields: [String: String] = [:]
            for line in lines.dropFirst() {
                guard let colon = line.firstIndex(of: ":") else { continue }
                fields[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            }
            let isHead = answers.count < heads.count && heads[answers.count]
            let length = isHead ? 0 : Int(fields["content-length"] ?? "0") ?? 0
            let bodyStart = split.upperBound
            guard rest.distance(from: bodyStart, to: rest.endIndex) >= length else { return nil }
            let bodyEnd = rest.index(bodyStart, offsetBy: length)
            answers.append(Answer(status: status, fields: fields, body: String(decoding: rest[bodyStart..<bodyEnd], as: UTF8.self)))
            rest = rest[bodyEnd...]
        }
        return answers
    }

    /// Waits (at most 30 s) for `count` answers on `connection`.
    static func read(_ count: Int, from connection: RawConnection, heads: [Bool] = []) async throws -> [Answer] {
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            if let answers = answers(connection.receivedBytes, count: count, heads: heads) { return answers }
            try await Task.sleep(for: .milliseconds(10))
        }
        Issue.record("\(count) answers did not come: \(connection.receivedText)")
        throw CancellationError()
    }

    /// Three requests in one write, a GET, a path that is not there and a HEAD (which the router has no
    /// route for: 405), are answered in that order on the one connection, each with a length and a date; the
    /// HEAD's answer announces its length and has no body.
    @Test func requestsSentTogetherAreAnsweredInOrder() async throws {
        try await Self.withGateway { gateway, _ in
            let connection = try await Self.connect(to: gateway)
            try await connection.send(
                "GET /health HTTP/1.1\r\nhost: localhost\r\n\r\nGET /nothing-here HTTP/1.1\r\nhost: localhost\r\n\r\nHEAD /health HTTP/1.1\r\nhost: localhost\r\n\r\n"
            )
            let answers = try await Self.read(3, from: connection, heads: [false, false, true])
            #expect(answers.map(\.status) == [200, 404, 405])
            #expect(answers[0].body == #"{"status":"alive"}"#)
            #expect(answers[2].fields["content-length"].flatMap { Int($0) } ?? 0 > 0)
            #expect(answers[2].body.isEmpty)
            for answer in answers {
                #expect(answer.fields["date"]?.hasSuffix(" GMT") == true, "\(answer.fields)")
                #expect(answer.fields["connection"] == nil)
            }
            // Nothing more than the three answers: the HEAD's had no body.
            try await Task.sleep(for: .milliseconds(200))
            #expect(Self.answers(connection.receivedBytes, count: 4, heads: [false, false, true]) == nil)
            #expect(!connection.isClosed)
            await connection.close()
        }
    }

    /// A registration whose body is past the routes' 64 KiB gets its 413 (the rest of the body is read and
    /// dropped), and the next request on the same connection is served.
    @Test func aBodyPastTheLimitIsAnsweredAndTheConnectionGoesOn() async throws {
        try await Self.withGateway { gateway, credentials in
            let connection = try await Self.connect(to: gateway)
            let half = String(repeating: " ", count: 100_000)
            try await connection.send(
                Self.registrationHead(credentials) + "content-length: \(2 * half.utf8.count)\r\n\r\n" + half
            )
            // The answer comes before the body has been sent whole.
            let early = try await Self.read(1, from: connection)
            #expect(early[0].status == 413)
            try await connection.send(half)
            try await connection.send("GET /health HTTP/1.1\r\nhost: localhost\r\n\r\n")
            let answers = try await Self.read(2, from: connection)
            #expect(answers[1].status == 200)
            #expect(!connection.isClosed)
            await connection.close()
        }
    }

    /// A body past the limit, sent in chunks, then a chunk that cannot be parsed, after the 413: no second
    /// answer for the same request, and the connection closes.
    @Test func anUnreadableChunkAfterTheAnswerClosesWithoutASecondAnswer() async throws {
        try await Self.withGateway { gateway, credentials in
            let connection = try await Self.connect(to: gateway)
            let chunk = String(repeating: " ", count: 70_000)
            try await connection.send(
                Self.registrationHead(credentials) + "transfer-encoding: chunked\r\n\r\n"
                    + String(chunk.utf8.count, radix: 16) + "\r\n" + chunk + "\r\n"
            )
            let early = try await Self.read(1, from: connection)
            #expect(early[0].status == 413)
            try await connection.send("zz\r\n")
            #expect(await connection.waitForClose(timeout: .seconds(30)))
            #expect(Self.answers(connection.receivedBytes, count: 2) == nil, "a second answer: \(connection.receivedText)")
            await connection.close()
        }
    }

    /// `connection: close`, and HTTP/1.0 without keep-alive: the answer says `connection: close` and the
    /// connection closes after it.
    @Test(arguments: ["GET /health HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n", "GET /health HTTP/1.0\r\n\r\n"])
    func theConnectionClosesWhenTheRequestSaysSo(_ request: String) async throws {
        try await Self.withGateway { gateway, _ in
            let connection = try await Self.connect(to: gateway)
            try await connection.send(request)
            let answers = try await Self.read(1, from: connection)
            #expect(answers[0].status == 200)
            #expect(answers[0].fields["connection"] == "close")
            let started = ContinuousClock.now
            #expect(await connection.waitForClose(timeout: .seconds(30)))
            // At once: the gateway's side closed after the answer, not a full close waiting for the client.
            #expect(ContinuousClock.now - started < .seconds(3))
            await connection.close()
        }
    }

    /// HTTP/1.0 that asks to keep the connection: each answer says `connection: keep-alive` (without it an
    /// HTTP/1.0 client waits for the close to end the answer), and the connection serves the next request.
    @Test func anHTTP10ConnectionKeptAliveSaysSoAndGoesOn() async throws {
        try await Self.withGateway { gateway, _ in
            let connection = try await Self.connect(to: gateway)
            let request = "GET /health HTTP/1.0\r\nconnection: keep-alive\r\n\r\n"
            try await connection.send(request)
            _ = try await Self.read(1, from: connection)
            try await connection.send(request)
            let answers = try await Self.read(2, from: connection)
            #expect(answers.map(\.status) == [200, 200])
            #expect(answers.map { $0.fields["connection"] } == ["keep-alive", "keep-alive"])
            #expect(!connection.isClosed)
            await connection.close()
        }
    }

    /// A client that waits to be asked for its body (`expect: 100-continue`, as curl sends for bodies over
    /// 1 KiB) is asked at once, before any of the body is sent, and then gets its answer.
    @Test func aClientThatWaitsForContinueIsAskedAtOnce() async throws {
        try await Self.withGateway { gateway, credentials in
            let connection = try await Self.connect(to: gateway)
            let body = #"{"widgets":[]}"#
            try await connection.send(
                Self.registrationHead(credentials) + "expect: 100-continue\r\ncontent-length: \(body.utf8.count)\r\n\r\n"
            )
            let asked = try await Self.read(1, from: connection)
            #expect(asked[0].status == 100)
            try await connection.send(body)
            let answers = try await Self.read(2, from: connection)
            #expect((200..<300).contains(answers[1].status), "\(answers[1].status) \(answers[1].body)")
            await connection.close()
        }
    }

    /// A client that closes its side (TLS close_notify) after its answer: the gateway closes the connection
    /// at once. (The client's close waits for the gateway's close_notify; before, it waited its 5 s.)
    @Test func aClientsCloseIsAnsweredAtOnce() async throws {
        try await Self.withGateway { gateway, _ in
            let connection = try await Self.connect(to: gateway)
            try await connection.send("GET /health HTTP/1.1\r\nhost: localhost\r\n\r\n")
            _ = try await Self.read(1, from: connection)
            let started = ContinuousClock.now
            await connection.close()
            #expect(ContinuousClock.now - started < .seconds(3))
        }
    }

    /// A head that is not HTTP: 400 and the connection closes.
    @Test func anUnreadableHeadIsRefusedAndClosed() async throws {
        try await Self.withGateway { gateway, _ in
            let connection = try await Self.connect(to: gateway)
            try await connection.send("GET /health HTTP/1.1\r\nhost localhost\r\n\r\n")
            let answers = try await Self.read(1, from: connection)
            #expect(answers[0].status == 400)
            #expect(answers[0].fields["connection"] == "close")
            let started = ContinuousClock.now
            #expect(await connection.waitForClose(timeout: .seconds(30)))
            #expect(ContinuousClock.now - started < .seconds(3))
            await connection.close()
        }
    }
}
