import NIOCore
import NIOHPACK
public import NIOHTTP2
import NIOPosix
public import NIOSSL
import Synchronization

/// A bare HTTP/2 client on one TLS connection that sends exactly the header fields it is given (no
/// `:authority` unless asked, repeated fields as they are), for conformance tests of the APNs listener
/// that a regular client cannot express: header order and duplicates, many streams on one connection,
/// several tokens on one connection.
public final class RawHTTP2Client: Sendable {
    /// An answer: status, header fields (lower-case names) and body text.
    public struct Answer: Sendable {
        public var status: Int
        public var headers: [(String, String)]
        public var body: String
        /// The error code of the server's RST_STREAM, when it reset the stream instead of answering.
        public var reset: HTTP2ErrorCode?

        public func header(_ name: String) -> String? { headers.first { $0.0 == name }?.1 }
        /// The `reason` of an error body.
        public var reason: String? {
            body.firstMatch(of: /"reason":"([A-Za-z]+)"/).map { String($0.1) }
        }
    }

    private let channel: any Channel
    private let handler: NIOLoopBound<ResponseHandler>

    private init(channel: any Channel, handler: NIOLoopBound<ResponseHandler>) {
        self.channel = channel
        self.handler = handler
    }

    /// Connects to `host:port` with `tls` (ALPN `h2` is added).
    /// - Parameter validating: `false` lets the client send malformed header blocks and bodies that do not
    ///   match their `content-length` (NIOHTTP2Handler refuses to send them otherwise).
    public static func connect(
        host: String = "localhost",
        port: Int,
        tls: TLSConfiguration,
        validating: Bool = true
    ) async throws -> RawHTTP2Client {
        var tls = tls
        tls.applicationProtocols = ["h2"]
        let context = try NIOSSLContext(configuration: tls)
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLClientHandler(context: context, serverHostname: host))
                    let validation: NIOHTTP2Handler.ValidationState = validating ? .enabled : .disabled
                    try channel.pipeline.syncOperations.addHandler(
                        NIOHTTP2Handler(mode: .client, headerBlockValidation: validation, contentLengthValidation: validation)
                    )
                    try channel.pipeline.syncOperations.addHandler(ResponseHandler())
                }
            }
            .connect(host: host, port: port).get()
        let handler = try await channel.eventLoop.submit {
            NIOLoopBound(try channel.pipeline.syncOperations.handler(type: ResponseHandler.self), eventLoop: channel.eventLoop)
        }.get()
        return RawHTTP2Client(channel: channel, handler: handler)
    }

    /// Sends one request on a new stream and waits for its answer.
    /// - Parameters:
    ///   - headers: every field, pseudo-headers first (`:method`, `:scheme`, `:path`, maybe `:authority`).
    ///   - body: the body, sent in one DATA frame; `nil` ends the stream with the headers.
    ///   - endingStream: `false` leaves the stream open after the headers and body (a body that never
    ///     ends): the answer is whatever the server does about it (an answer, or a reset).
    public func send(_ headers: [(String, String)], body: [UInt8]? = nil, endingStream: Bool = true) async throws -> Answer {
        let promise = channel.eventLoop.makePromise(of: Answer.self)
        channel.eventLoop.execute { [handler, channel] in
            handler.value.send(headers: headers, body: body, endStream: endingStream, promise: promise, channel: channel)
        }
        return try await promise.futureResult.get()
    }

    /// Sends a PING (the server answers it; it is no request).
    public func ping() async throws {
        let frame = HTTP2Frame(streamID: .rootStream, payload: .ping(HTTP2PingData(withInteger: 1), ack: false))
        try await channel.writeAndFlush(frame).get()
    }

    /// Whether the server has closed the connection.
    public var isClosed: Bool { !channel.isActive }

    /// A push's usual fields: `POST /3/device/<token>` with `:authority`, the given extra fields after them.
    public static func push(token: String, authority: String? = "localhost", _ fields: [(String, String)]) -> [(String, String)] {
        var headers = [(":method", "POST"), (":scheme", "https"), (":path", "/3/device/\(token)")]
        if let authority { headers.append((":authority", authority)) }
        return headers + fields
    }

    public func close() async {
        try? await channel.close()
    }

    final class ResponseHandler: ChannelInboundHandler {
        typealias InboundIn = HTTP2Frame
        typealias OutboundOut = HTTP2Frame

        private struct Pending {
            var promise: EventLoopPromise<Answer>
            var status = 0
            var headers: [(String, String)] = []
            var body: [UInt8] = []
            var reset: HTTP2ErrorCode?
        }

        private var nextStreamID = HTTP2StreamID(1)
        private var pending: [HTTP2StreamID: Pending] = [:]

        func send(headers: [(String, String)], body: [UInt8]?, endStream: Bool, promise: EventLoopPromise<Answer>, channel: any Channel) {
            // A connection already closed (a refused handshake) answers nothing: fail now rather than wait.
            guard channel.isActive else { return promise.fail(ChannelError.ioOnClosedChannel) }
            let id = nextStreamID
            nextStreamID = HTTP2StreamID(Int(id) + 2)
            pending[id] = Pending(promise: promise)
            let block = HPACKHeaders(headers)
            channel.write(HTTP2Frame(streamID: id, payload: .headers(.init(headers: block, endStream: body == nil && endStream))), promise: nil)
            if let body {
                let data = HTTP2Frame.FramePayload.Data(data: .byteBuffer(ByteBuffer(bytes: body)), endStream: endStream)
                channel.write(HTTP2Frame(streamID: id, payload: .data(data)), promise: nil)
            }
            channel.flush()
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let frame = unwrapInboundIn(data)
            guard var entry = pending[frame.streamID] else { return }
            var ended = false
            switch frame.payload {
            case .headers(let headers):
                for (name, value, _) in headers.headers {
                    if name == ":status" { entry.status = Int(value) ?? 0 } else { entry.headers.append((name, value)) }
                }
                ended = headers.endStream
            case .data(let data):
                if case .byteBuffer(let buffer) = data.data { entry.body.append(contentsOf: buffer.readableBytesView) }
                ended = data.endStream
            case .rstStream(let code):
                entry.reset = code
                ended = true
            default:
                break
            }
            pending[frame.streamID] = entry
            if ended {
                pending[frame.streamID] = nil
                entry.promise.succeed(
                    Answer(status: entry.status, headers: entry.headers, body: String(decoding: entry.body, as: UTF8.self), reset: entry.reset)
                )
            }
        }

        func channelInactive(context: ChannelHandlerContext) {
            for (_, entry) in pending { entry.promise.fail(ChannelError.ioOnClosedChannel) }
            pending = [:]
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            for (_, entry) in pending { entry.promise.fail(error) }
            pending = [:]
            context.close(promise: nil)
        }
    }
}
