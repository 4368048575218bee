public import Crypto
import Foundation
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
public import NIOSSL
import Synchronization

/// A stand-in for Apple's push service: HTTP/2 over TLS on loopback, checking requests as Apple does
/// (provider token signed by the configured key, widgets topic and push type, body), recording what it
/// received, and answering as it is told (any status and reason, a delay, a reset stream, a GOAWAY).
public final class MockAPNsServer: Sendable {
    /// One request as the mock received it.
    public struct Received: Sendable {
        public var path: String
        public var headers: [String: String]
        public var body: String
        /// When the request's last frame arrived.
        public var receivedAt: ContinuousClock.Instant
        /// The connection it came on: 1 for the first the mock accepted, then counting up.
        public var connection: Int
        /// The device token of the path.
        public var deviceToken: String { String(path.dropFirst("/3/device/".count)) }
    }

    /// How to answer a request that passed the checks.
    public indirect enum Answer: Sendable {
        /// `200` (or any status) with an optional reason, `timestamp` (410) and `retry-after`.
        case status(Int, reason: String? = nil, timestamp: Int64? = nil, retryAfter: Int? = nil)
        /// Any status with this JSON body and extra headers, as given: hostile answers (a `timestamp` of
        /// 1e300, a `retry-after` of 20 digits).
        case raw(Int, String, headers: [(String, String)] = [])
        /// Reset the stream without an answer.
        case reset
        /// Send GOAWAY and close the connection without an answer.
        case goAway
        /// Answer after a while.
        case delayed(Duration, Answer)
    }

    /// The key provider tokens must be signed with, and its ids.
    public struct TokenKey: Sendable {
        public var publicKey: P256.Signing.PublicKey
        public var keyID: String
        public var teamID: String

        public init(publicKey: P256.Signing.PublicKey, keyID: String, teamID: String) {
            self.publicKey = publicKey
            self.keyID = keyID
            self.teamID = teamID
        }
    }

    struct State {
        var received: [Received] = []
        var answer: @Sendable (Received) -> Answer = { _ in .status(200) }
        /// The newest `aps.timestamp` accepted per Live Activity token.
        var activityTimestamps: [String: Int64] = [:]
        /// Live Activity pushes whose timestamp was older than one accepted before for the same token.
        var timestampsWentBack: [Received] = []
    }

    private let channel: any Channel
    private let box: StateBox
    /// The port it listens on (127.0.0.1).
    public let port: Int
    /// The key and ids it checks provider tokens against.
    public let tokenKey: TokenKey

    private init(channel: any Channel, box: StateBox, tokenKey: TokenKey) {
        self.channel = channel
        self.box = box
        self.tokenKey = tokenKey
        self.port = channel.localAddress?.port ?? 0
    }

    /// Starts the mock on 127.0.0.1 (`port` 0: any free port) with the TLS server settings given (ALPN
    /// `h2` is added) and checking tokens against `key`.
    public static func start(port: Int = 0, tls: TLSConfiguration, key: TokenKey) async throws -> MockAPNsServer {
        var tls = tls
        tls.applicationProtocols = ["h2"]
        let context = try NIOSSLContext(configuration: tls)
        let box = StateBox()
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context))
                    try channel.pipeline.syncOperations.addHandler(NIOHTTP2Handler(mode: .server))
                    try channel.pipeline.syncOperations.addHandler(Handler(box: box, key: key))
                }
            }
            .bind(host: "127.0.0.1", port: port).get()
        return MockAPNsServer(channel: channel, box: box, tokenKey: key)
    }

    /// `https://localhost:<port>`.
    public var url: String { "https://localhost:\(port)" }

    /// Sets how requests that pass the checks are answered from now on.
    public func answer(with rule: @escaping @Sendable (Received) -> Answer) {
        box.state.withLock { $0.answer = rule }
    }

    /// Everything received so far (also requests that failed the checks).
    public var received: [Received] { box.state.withLock { $0.received } }

    /// The Live Activity pushes that passed the checks with an `aps.timestamp` older than one the mock
    /// accepted before for the same token: a device would show older content after newer (Apple drops
    /// them; a gateway that merges by timestamp should never send one).
    public var timestampsWentBack: [Received] { box.state.withLock { $0.timestampsWentBack } }

    public func stop() async {
        try? await channel.close()
    }

    /// A Live Activity body's `aps.timestamp` when the body is one (an object whose `aps` has an
    /// `event` of start, update or end and a whole-number timestamp).
    public static func activityTimestamp(_ body: String) -> Int64? {
        guard let object = (try? JSONSerialization.jsonObject(with: Data(body.utf8))) as? [String: Any],
            let aps = object["aps"] as? [String: Any],
            let event = aps["event"] as? String, ["start", "update", "end"].contains(event),
            let timestamp = aps["timestamp"] as? NSNumber, timestamp.doubleValue == timestamp.doubleValue.rounded()
        else { return nil }
        return timestamp.int64Value
    }

    /// The state, shared with the connection handlers.
    final class StateBox: Sendable {
        let state = Mutex(State())
        /// Provider tokens whose signature verified, with their `iat` (Apple checks a token once per
        /// connection, not per request; the mock remembers them for all connections).
        let verifiedTokens = Mutex<[Substring: Int]>([:])
        /// The connections accepted so far (each handler takes the next number).
        let connections = Atomic(0)

        func record(_ request: Received) -> @Sendable (Received) -> Answer {
            state.withLock {
                $0.received.append(request)
                return $0.answer
            }
        }
    }

    final class Handler: ChannelInboundHandler {
        typealias InboundIn = HTTP2Frame
        typealias OutboundOut = HTTP2Frame

        private let box: StateBox
        private let key: TokenKey
        private let connection: Int
        private var streams: [HTTP2StreamID: (headers: [String: String], body: [UInt8])] = [:]

        init(box: StateBox, key: TokenKey) {
            self.box = box
            self.key = key
            connection = box.connections.add(1, ordering: .relaxed).newValue
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let frame = unwrapInboundIn(data)
            switch frame.payload {
            case .headers(let headers):
                var fields: [String: String] = [:]
                for (name, value, _) in headers.headers { fields[name] = value }
                streams[frame.streamID] = (fields, [])
                if headers.endStream { finish(frame.streamID, context: context) }
            case .data(let data):
                if case .byteBuffer(let buffer) = data.data { streams[frame.streamID]?.body.append(contentsOf: buffer.readableBytesView) }
                if data.endStream { finish(frame.streamID, context: context) }
            default:
                break
            }
        }

        /// Keeps the connection's receive window open (without a stream multiplexer NIO leaves it to us).
        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            if let update = event as? NIOHTTP2WindowUpdatedEvent, update.streamID == .rootStream,
                let inbound = update.inboundWindowSize, inbound < 32_768
            {
                let frame = HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: 65_535 - inbound))
                context.writeAndFlush(wrapOutboundOut(frame), promise: nil)
            }
            context.fireUserInboundEventTriggered(event)
        }

        private func finish(_ id: HTTP2StreamID, context: ChannelHandlerContext) {
            guard let stream = streams.removeValue(forKey: id) else { return }
            let request = Received(
                path: stream.headers[":path"] ?? "",
                headers: stream.headers,
                body: String(decoding: stream.body, as: UTF8.self),
                receivedAt: .now,
                connection: connection
            )
            let rule = box.record(request)
            // Apple's own checks first.
            if let reason = check(request) {
                write(id, status: reason == "MissingProviderToken" || reason == "InvalidProviderToken" || reason == "ExpiredProviderToken" ? 403 : 400,
                      reason: reason, timestamp: nil, retryAfter: nil, apnsID: request.headers["apns-id"], context: context)
                return
            }
            if request.headers["apns-push-type"] == "liveactivity", let timestamp = MockAPNsServer.activityTimestamp(request.body) {
                box.state.withLock { state in
                    if let newest = state.activityTimestamps[request.deviceToken], timestamp < newest {
                        state.timestampsWentBack.append(request)
                    } else {
                        state.activityTimestamps[request.deviceToken] = timestamp
                    }
                }
            }
            answer(id, rule(request), apnsID: request.headers["apns-id"], context: context)
        }

        private func answer(_ id: HTTP2StreamID, _ answer: Answer, apnsID: String?, context: ChannelHandlerContext) {
            switch answer {
            case .status(let status, let reason, let timestamp, let retryAfter):
                write(id, status: status, reason: reason, timestamp: timestamp, retryAfter: retryAfter, apnsID: apnsID, context: context)
            case .raw(let status, let body, let extra):
                var headers = HPACKHeaders([(":status", String(status)), ("content-type", "application/json")])
                headers.add(name: "apns-id", value: apnsID ?? UUID().uuidString.lowercased())
                for (name, value) in extra { headers.add(name: name, value: value) }
                context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .headers(.init(headers: headers)))), promise: nil)
                let data = HTTP2Frame.FramePayload.Data(data: .byteBuffer(ByteBuffer(string: body)), endStream: true)
                context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .data(data))), promise: nil)
            case .reset:
                context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .rstStream(.internalError))), promise: nil)
            case .goAway:
                let frame = HTTP2Frame(streamID: .rootStream, payload: .goAway(lastStreamID: .rootStream, errorCode: .noError, opaqueData: nil))
                context.writeAndFlush(wrapOutboundOut(frame), promise: nil)
                context.close(promise: nil)
            case .delayed(let delay, let then):
                let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
                context.eventLoop.scheduleTask(in: .nanoseconds(delay.components.seconds * 1_000_000_000 + delay.components.attoseconds / 1_000_000_000)) {
                    let (handler, context) = loopBound.value
                    handler.answer(id, then, apnsID: apnsID, context: context)
                    context.flush()
                }
            }
        }

        /// Answers written while reading leave together.
        func channelReadComplete(context: ChannelHandlerContext) {
            context.flush()
            context.fireChannelReadComplete()
        }

        /// Apple's checks of a push: token, topic, push type (the topic's suffix names it), body; a
        /// control's push also has priority 10 and `apns-expiration: 0`, a Live Activity's priority 5 or 10.
        /// The push types the mock accepts, with the `apns-priority` values and `apns-expiration` Apple
        /// requires of each (`nil`: any). Written from Apple's documentation, not from the gateway's own
        /// table, so that the mock checks the gateway rather than repeating it.
        private static let pushTypes: [String: (priorities: Set<String>?, expiration: String?)] = [
            "widgets": (nil, nil),
            "controls": (["10"], "0"),
            "liveactivity": (["5", "10"], nil),
        ]

        private func check(_ request: Received) -> String? {
            guard let authorization = request.headers["authorization"], authorization.hasPrefix("bearer ") else { return "MissingProviderToken" }
            let token = authorization.dropFirst(7)
            let known = box.verifiedTokens.withLock { $0[token] }
            guard let iat = known ?? verify(token) else { return "InvalidProviderToken" }
            if known == nil { box.verifiedTokens.withLock { $0[token] = iat } }
            if iat < Int(Date().timeIntervalSince1970) - 3600 { return "ExpiredProviderToken" }
            guard let topic = request.headers["apns-topic"],
                let pushType = Self.pushTypes.keys.first(where: { topic.hasSuffix(".push-type." + $0) })
            else { return "BadTopic" }
            guard let sentType = request.headers["apns-push-type"], let rules = Self.pushTypes[sentType] else { return "InvalidPushType" }
            guard sentType == pushType else { return "BadTopic" }
            if let priorities = rules.priorities, !priorities.contains(request.headers["apns-priority"] ?? "10") { return "BadPriority" }
            if let expiration = rules.expiration, request.headers["apns-expiration"] != expiration { return "BadExpirationDate" }
            if sentType == "liveactivity" {
                guard MockAPNsServer.activityTimestamp(request.body) != nil else { return "BadPayload" }
            } else {
                guard request.body == #"{"aps":{"content-changed":true}}"# else { return "BadPayload" }
            }
            return nil
        }

        /// The token's `iat` when its header, claims and ES256 signature (raw or DER) are right.
        private func verify(_ token: Substring) -> Int? {
            let parts = token.split(separator: ".", omittingEmptySubsequences: false)
            guard parts.count == 3,
                let header = decode(parts[0]), let claims = decode(parts[1]), let signature = decode(parts[2]),
                (try? JSONSerialization.jsonObject(with: header)) as? [String: String] == ["alg": "ES256", "kid": key.keyID],
                let claimsObject = (try? JSONSerialization.jsonObject(with: claims)) as? [String: Any],
                claimsObject["iss"] as? String == key.teamID, let iat = claimsObject["iat"] as? Int,
                let parsed = (try? P256.Signing.ECDSASignature(rawRepresentation: signature))
                    ?? (try? P256.Signing.ECDSASignature(derRepresentation: signature)),
                key.publicKey.isValidSignature(parsed, for: Data("\(parts[0]).\(parts[1])".utf8))
            else { return nil }
            return iat
        }

        private func decode(_ text: Substring) -> Data? {
            var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
            while base64.count % 4 != 0 { base64.append("=") }
            return Data(base64Encoded: base64)
        }

        private func write(
            _ id: HTTP2StreamID,
            status: Int,
            reason: String?,
            timestamp: Int64?,
            retryAfter: Int?,
            apnsID: String?,
            context: ChannelHandlerContext
        ) {
            var headers = HPACKHeaders([(":status", String(status))])
            headers.add(name: "apns-id", value: apnsID ?? UUID().uuidString.lowercased())
            if let retryAfter { headers.add(name: "retry-after", value: String(retryAfter)) }
            guard let reason else {
                context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .headers(.init(headers: headers, endStream: true)))), promise: nil)
                return
            }
            let body = timestamp.map { #"{"reason":"\#(reason)","timestamp":\#($0)}"# } ?? #"{"reason":"\#(reason)"}"#
            headers.add(name: "content-type", value: "application/json")
            context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .headers(.init(headers: headers)))), promise: nil)
            let data = HTTP2Frame.FramePayload.Data(data: .byteBuffer(ByteBuffer(string: body)), endStream: true)
            context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .data(data))), promise: nil)
        }
    }
}
