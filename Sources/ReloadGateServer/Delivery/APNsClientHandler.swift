import Logging
import NIOCore
import NIOHPACK
import NIOHTTP2
import ReloadGateAPNs
import Synchronization

/// What the push service answered to one request.
struct APNsAnswer: Sendable {
    var status: Int
    var headers: HPACKHeaders
    var body: ByteBuffer
}

/// Why a request got no answer. `notSent` means the push service never processed it (safe to send
/// again); the others leave the outcome unknown.
enum APNsTransportError: Error, CustomStringConvertible, Equatable {
    /// Not processed: the connection was closing (GOAWAY below this stream) or the stream was refused.
    case notSent(String)
    /// Not written: the connection chosen for it had begun closing (a GOAWAY read after the pool chose it).
    /// The pool sends such a request again on another connection, without counting an attempt.
    case connectionClosing
    /// The stream was reset with this error code before an answer.
    case reset(String)
    /// The connection closed before an answer.
    case connectionLost
    /// No answer within the deadline.
    case timedOut

    var description: String {
        switch self {
        case .notSent(let why): "not sent: \(why)"
        case .connectionClosing: "not sent: the connection is closing"
        case .reset(let code): "stream reset by the push service (\(code))"
        case .connectionLost: "connection lost before an answer"
        case .timedOut: "no answer in time"
        }
    }

    /// Whether the push service certainly did not process the request.
    var wasNotSent: Bool {
        switch self {
        case .notSent, .connectionClosing: true
        case .reset, .connectionLost, .timedOut: false
        }
    }
}

/// The client side of one HTTP/2 connection to the push service, at frame level on the connection's
/// event loop: no child channel, no task per request (docs/DECISIONS.md, "Delivery uses a frame-level
/// HTTP/2 client, not async-http-client"). Requests are written as HEADERS + DATA frames on the next odd stream id; requests
/// written in one event-loop tick are flushed together; answers complete their promise.
///
/// GOAWAY: streams above its last stream id were not processed (`notSent`); the ones below still get
/// their answers; no new stream starts. A reset stream or a lost connection leaves the outcome unknown.
final class APNsClientHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    private struct Stream {
        var promise: EventLoopPromise<APNsAnswer>
        var deadline: NIODeadline
        var status: Int?
        var headers = HPACKHeaders()
        var body: ByteBuffer?
    }

    private let logger: Logger
    private var context: ChannelHandlerContext?
    private var streams: [HTTP2StreamID: Stream] = [:]
    private var nextStreamID = HTTP2StreamID(1)
    private var flushScheduled = false
    /// Set by GOAWAY or when the stream ids run out: no new stream.
    private(set) var isClosing = false {
        didSet { if isClosing { closing.set() } }
    }
    /// ``isClosing``, readable from any thread (the pool's choice of connection).
    let closing = ClosingFlag()

    final class ClosingFlag: Sendable {
        private let value = Atomic<Bool>(false)
        var isSet: Bool { value.load(ordering: .relaxed) }
        func set() { value.store(true, ordering: .relaxed) }
    }
    private var timeoutSweep: RepeatedTask?
    /// The receive window the handler keeps open for answers.
    private let connectionWindow = 1 << 20

    /// Requests in flight.
    var openStreams: Int { streams.count }

    init(logger: Logger) {
        self.logger = logger
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        if context.channel.isActive { start(context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        start(context: context)
        context.fireChannelActive()
    }

    private func start(context: ChannelHandlerContext) {
        guard timeoutSweep == nil else { return }
        let increment = connectionWindow - 65_535
        context.writeAndFlush(wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: increment))), promise: nil)
        let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
        timeoutSweep = context.eventLoop.scheduleRepeatedTask(initialDelay: .milliseconds(500), delay: .milliseconds(500)) { _ in
            loopBound.value.sweepTimeouts()
        }
    }

    /// Writes one request (on the event loop). `headers` are the request headers without `:method`,
    /// `:scheme`, `:path`, `:authority` and `content-length`, which are added here.
    func send(
        path: String,
        authority: String,
        headers: [(String, String)],
        body: ByteBuffer,
        deadline: NIODeadline,
        promise: EventLoopPromise<APNsAnswer>
    ) {
        guard let context, !isClosing, context.channel.isActive else {
            promise.fail(APNsTransportError.connectionClosing)
            return
        }
        let id = nextStreamID
        guard Int(id) < Int(Int32.max) - 2 else {
            isClosing = true
            promise.fail(APNsTransportError.notSent("stream ids used up"))
            return
        }
        nextStreamID = HTTP2StreamID(Int(id) + 2)
        var fields = HPACKHeaders()
        fields.reserveCapacity(headers.count + 5)
        fields.add(name: ":method", value: "POST")
        fields.add(name: ":scheme", value: "https")
        // Values unique to one request (the path's device token, apns-id, apns-expiration) stay out of
        // HPACK's dynamic table: they would only push the constant ones (authorization, topic) out and
        // make every lookup in the table longer.
        fields.add(name: ":path", value: path, indexing: .nonIndexable)
        fields.add(name: ":authority", value: authority)
        for (name, value) in headers {
            fields.add(name: name, value: value, indexing: name == "apns-id" || name == "apns-expiration" ? .nonIndexable : .indexable)
        }
        fields.add(name: "content-length", value: String(body.readableBytes))
        streams[id] = Stream(promise: promise, deadline: deadline)
        context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .headers(.init(headers: fields)))), promise: nil)
        let data = HTTP2Frame.FramePayload.Data(data: .byteBuffer(body), endStream: true)
        context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .data(data))), promise: nil)
        scheduleFlush(context: context)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        let id = frame.streamID
        switch frame.payload {
        case .headers(let payload):
            guard var stream = streams[id] else { return }
            if let status = payload.headers.first(name: ":status").flatMap({ Int($0) }) {
                // Informational answers (1xx) are skipped; the final one counts.
                guard status >= 200 else { return }
                stream.status = status
                stream.headers = payload.headers
            }
            streams[id] = stream
            if payload.endStream { complete(id) }
        case .data(let payload):
            guard streams[id] != nil else { return }
            if case .byteBuffer(var buffer) = payload.data, buffer.readableBytes > 0 {
                if streams[id]!.body == nil {
                    streams[id]!.body = buffer
                } else if (streams[id]!.body?.readableBytes ?? 0) < 64 * 1024 {
                    streams[id]!.body!.writeBuffer(&buffer)
                }
            }
            if payload.endStream { complete(id) }
        case .rstStream(let code):
            guard let stream = streams.removeValue(forKey: id) else { return }
            // REFUSED_STREAM: the server did not process it (RFC 9113, 8.7).
            stream.promise.fail(code == .refusedStream ? APNsTransportError.notSent("stream refused") : APNsTransportError.reset("\(code)"))
        case .goAway(let lastStreamID, let code, _):
            isClosing = true
            for (streamID, stream) in streams where streamID > lastStreamID {
                streams[streamID] = nil
                stream.promise.fail(APNsTransportError.notSent("GOAWAY (\(code))"))
            }
            if streams.isEmpty { context.close(promise: nil) }
        default:
            break
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        // Keeps the connection's receive window open (without a stream multiplexer NIO leaves it to us).
        if let update = event as? NIOHTTP2WindowUpdatedEvent, update.streamID == .rootStream,
            let inbound = update.inboundWindowSize, inbound < connectionWindow / 2
        {
            context.write(
                wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: connectionWindow - inbound))),
                promise: nil
            )
            scheduleFlush(context: context)
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        isClosing = true
        timeoutSweep?.cancel()
        let open = streams
        streams.removeAll()
        for (_, stream) in open { stream.promise.fail(APNsTransportError.connectionLost) }
        self.context = nil
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // An error of one stream (for example a frame for a stream the server already reset) ends that
        // stream only, if it is still open.
        if let streamError = error as? NIOHTTP2Errors.StreamError {
            if let stream = streams.removeValue(forKey: streamError.streamID) {
                stream.promise.fail(APNsTransportError.reset("\(streamError.baseError)"))
            }
            return
        }
        // A protocol or TLS error ends the connection; open requests fail in channelInactive.
        logger.warning("connection to the push service failed", metadata: ["error": "\(error)", "open-requests": "\(streams.count)"])
        isClosing = true
        context.close(promise: nil)
    }

    private func complete(_ id: HTTP2StreamID) {
        guard let stream = streams.removeValue(forKey: id) else { return }
        guard let status = stream.status else {
            stream.promise.fail(APNsTransportError.reset("the answer had no status"))
            return
        }
        let answer = APNsAnswer(status: status, headers: stream.headers, body: stream.body ?? ByteBuffer())
        // Apple says this connection is not to be used again (IdleTimeout, Shutdown, UnrelatedKeyIdInToken):
        // no new request goes to it, and the pool opens another one.
        if status != 200, APNsUpstream.refusal(of: answer).action == .newConnection { isClosing = true }
        stream.promise.succeed(answer)
        if isClosing, streams.isEmpty { context?.close(promise: nil) }
    }

    /// Fails requests past their deadline and resets their streams.
    private func sweepTimeouts() {
        guard let context, !streams.isEmpty else { return }
        let now = NIODeadline.now()
        for (id, stream) in streams where stream.deadline < now {
            streams[id] = nil
            context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .rstStream(.cancel))), promise: nil)
            stream.promise.fail(APNsTransportError.timedOut)
        }
        scheduleFlush(context: context)
    }

    /// Flushes once at the end of this event-loop tick: requests written together leave together.
    private func scheduleFlush(context: ChannelHandlerContext) {
        guard !flushScheduled else { return }
        flushScheduled = true
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        context.eventLoop.execute {
            let (handler, context) = loopBound.value
            handler.flushScheduled = false
            context.flush()
        }
    }
}
