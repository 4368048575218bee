import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOHPACK
import NIOHTTP2
import ReloadGateAPNs
import Synchronization

/// The router a listener's frame-level HTTP/2 handler calls: built once the routes are complete (tests
/// add routes after the gateway's), set before the listener accepts its first connection.
final class RouterResponderBox: Sendable {
    private let value = Mutex<PathResponder<GatewayRequestContext>?>(nil)

    init() {}

    func set(_ responder: PathResponder<GatewayRequestContext>) { value.withLock { $0 = responder } }

    var responder: PathResponder<GatewayRequestContext>? { value.withLock { $0 } }
}

/// The API listener's HTTP/2 path: the connection's frames handled on its event loop, with no child channel
/// and no async channel per stream, in front of the API's router (``PathResponder``, called directly:
/// `reloadgate-bench-router` measures it). The APNs listener's handler
/// (``IngressHTTP2Handler``) is the model: one timer a connection for the body deadlines and the idle
/// timeout, answers flushed together, GOAWAY on drain.
///
/// A stream's body is gathered up to ``bodyCap`` (one byte more than the routes take: a larger body gets
/// the route's own `413`, and the stream is reset after the answer); the route runs in a task once the
/// request ended; its answer is written on the loop.
final class APIHTTP2Handler: FrameLevelHTTP2Connection {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    /// One byte more than the routes' limit (64 KiB): they refuse it with their own answer.
    static let bodyCap = 64 * 1024 + 1

    private struct Stream {
        var head: HTTPRequest
        var body: ByteBuffer
        var contentLength: Int?
        /// The client ended its side.
        var requestEnded = false
        /// Handed to the router (at the request's end, or when the body passed the cap).
        var dispatched = false
        /// When the request must have ended.
        var bodyDeadline: NIODeadline
    }

    private let responders: RouterResponderBox
    private let timeouts: ConnectionTimeouts
    /// After GOAWAY, how long streams in flight may take before the connection is closed (and their routes
    /// cancelled): `listen.shutdownGracePeriod`.
    private let gracePeriod: TimeAmount
    /// The routes' tasks, cancelled when the connection closes.
    private var routing: [HTTP2StreamID: Task<Void, Never>] = [:]
    private var logger: Logger
    /// Where the routes' tasks run: this connection's event loop (made when the first request comes).
    private var executor: EventLoopTaskExecutor?
    private var streams: [HTTP2StreamID: Stream] = [:]
    /// The window, the flushes, the timer and the drain (``FrameLevelHTTP2Connection``).
    var connectionState = FrameLevelHTTP2State()
    private var started = false

    init(responders: RouterResponderBox, timeouts: ConnectionTimeouts, gracePeriod: TimeAmount, logger: Logger) {
        self.responders = responders
        self.timeouts = timeouts
        self.gracePeriod = gracePeriod
        self.logger = logger
    }

    func channelActive(context: ChannelHandlerContext) {
        start(context: context)
        context.fireChannelActive()
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { start(context: context) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        cancelTimer()
        cancelRoutes()
    }

    func channelInactive(context: ChannelHandlerContext) {
        cancelRoutes()
        context.fireChannelInactive()
    }

    private func cancelRoutes() {
        for task in routing.values { task.cancel() }
        routing = [:]
    }

    private func start(context: ChannelHandlerContext) {
        guard !started else { return }
        started = true
        logger[metadataKey: "connection"] = "\(context.channel.remoteAddress?.description ?? "-")"
        startConnection(idle: timeouts.idle, context: context)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        let id = frame.streamID
        switch frame.payload {
        case .headers(let headers):
            if streams[id] == nil {
                guard id > connectionState.lastStreamID else { return }
                connectionState.lastStreamID = id
                startRequest(id, headers.headers, context: context)
            }
            if headers.endStream { endRequest(id, context: context) }
        case .data(let data):
            // Read and changed in place in the dictionary: a copy of the stream would share its body's
            // storage, and writing to it would then copy the body.
            guard let ended = streams[id]?.requestEnded, !ended, let dispatched = streams[id]?.dispatched else { return }
            guard case .byteBuffer(var buffer) = data.data else { return }
            if !dispatched {
                let buffered = streams[id]?.body.readableBytes ?? 0
                if let declared = streams[id]?.contentLength, buffered + buffer.readableBytes > declared {
                    return reset(id, .protocolError, context: context)  // more than `content-length` says
                }
                let room = Self.bodyCap - buffered
                if buffer.readableBytes > room {
                    // Past the routes' limit: the route answers it (413) from what is here; the rest is not kept.
                    var part = buffer.readSlice(length: room)!
                    streams[id]?.body.writeBuffer(&part)
                    streams[id]?.requestEnded = data.endStream
                    return dispatch(id, context: context)
                }
                streams[id]?.body.writeBuffer(&buffer)
            }
            if data.endStream { endRequest(id, context: context) }
        case .rstStream:
            streams[id] = nil
            closeIfDrained(context: context)
        default:
            break  // SETTINGS, PING, PRIORITY, WINDOW_UPDATE, GOAWAY: NIOHTTP2Handler keeps the state
        }
    }

    private func startRequest(_ id: HTTP2StreamID, _ headers: HPACKHeaders, context: ChannelHandlerContext) {
        var fields = HTTP2RequestFields()
        var method: HTTPRequest.Method?
        var scheme: String?
        var authority: String?
        var path: String?
        var regular = HTTPFields()
        for (name, value, _) in headers {
            guard fields.accept(name: name, value: value) else { return reset(id, .protocolError, context: context) }
            switch name {
            case ":method": method = HTTPRequest.Method(value)
            case ":scheme": scheme = value
            case ":authority": authority = value
            case ":path": path = value
            default:
                guard !name.hasPrefix(":"), let field = HTTPField.Name(name) else {
                    if name.hasPrefix(":") { continue }
                    return reset(id, .protocolError, context: context)
                }
                regular.append(HTTPField(name: field, value: value))
            }
        }
        guard fields.isComplete, let method else { return reset(id, .protocolError, context: context) }
        // A client that names the host in `host` instead of `:authority` (RFC 9113 8.3.1 allows it).
        if authority == nil, let name = HTTPField.Name("host"), let host = regular[name] { authority = host }
        let head = HTTPRequest(method: method, scheme: scheme, authority: authority, path: path, headerFields: regular)
        let bodyDeadline = NIODeadline.now() + timeouts.body
        streams[id] = Stream(
            head: head, body: context.channel.allocator.buffer(capacity: 0), contentLength: fields.contentLength, bodyDeadline: bodyDeadline
        )
        scheduleIfEarlier(bodyDeadline, context: context)
    }

    private func endRequest(_ id: HTTP2StreamID, context: ChannelHandlerContext) {
        guard var stream = streams[id] else { return }
        if let declared = stream.contentLength, !stream.dispatched, stream.body.readableBytes != declared {
            return reset(id, .protocolError, context: context)  // less than `content-length` says
        }
        stream.requestEnded = true
        streams[id] = stream
        if !stream.dispatched { dispatch(id, context: context) }
    }

    /// Hands the request to the router in a task; its answer comes back to the loop.
    private func dispatch(_ id: HTTP2StreamID, context: ChannelHandlerContext) {
        guard var stream = streams[id], let responder = responders.responder else {
            return reset(id, .refusedStream, context: context)
        }
        stream.dispatched = true
        let request = Request(head: stream.head, body: RequestBody(buffer: stream.body))
        stream.body = ByteBuffer()
        streams[id] = stream
        let routed = Routed(
            id: id, request: request, responder: responder, channel: context.channel, logger: logger,
            handler: NIOLoopBound((self, context), eventLoop: context.eventLoop)
        )
        let executor = executor ?? EventLoopTaskExecutor(context.eventLoop)
        self.executor = executor
        routing[id] = Task(executorPreference: executor) { await routed.run() }
    }

    /// A request on its way through the router, and where its answer goes.
    private struct Routed: Sendable {
        let id: HTTP2StreamID
        let request: Request
        let responder: PathResponder<GatewayRequestContext>
        let channel: any Channel
        let logger: Logger
        let handler: NIOLoopBound<(APIHTTP2Handler, ChannelHandlerContext)>

        func run() async {
            let answer = await RouteAnswer.answer(request, responder: responder, channel: channel, logger: logger)
            let handler = handler
            let id = id
            // On the loop already when the task ran where it was started (``EventLoopTaskExecutor``).
            guard handler.eventLoop.inEventLoop else {
                return handler.eventLoop.execute {
                    let (handler, context) = handler.value
                    handler.respond(id, answer.head, answer.body, context: context)
                }
            }
            let (connection, context) = handler.value
            connection.respond(id, answer.head, answer.body, context: context)
        }
    }

    /// Writes an answer, and resets a stream whose request had not ended (its body passed the cap).
    private func respond(_ id: HTTP2StreamID, _ head: HTTPResponse, _ body: ByteBuffer, context: ChannelHandlerContext) {
        routing[id] = nil
        guard let stream = streams[id] else { return }
        streams[id] = nil
        var headers = HPACKHeaders()
        headers.reserveCapacity(head.headerFields.count + 2)
        headers.add(name: ":status", value: String(head.status.code))
        RouteAnswer.fields(of: head, bodyBytes: body.readableBytes, date: HTTPDateField.now) { headers.add(name: $0, value: $1) }
        // A HEAD request's answer has the headers of the GET and no body (RFC 9110 9.3.2).
        let hasBody = body.readableBytes > 0 && stream.head.method != .head
        context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .headers(.init(headers: headers, endStream: !hasBody)))), promise: nil)
        if hasBody {
            // A promise only when the write's completion matters (one allocation less per answer).
            let written = stream.requestEnded ? nil : context.eventLoop.makePromise(of: Void.self)
            context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .data(.init(data: .byteBuffer(body), endStream: true)))), promise: written)
            if let written {
                // A body past the cap: a complete answer, then RST_STREAM NO_ERROR (RFC 9113 8.1).
                let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
                written.futureResult.whenSuccess {
                    let (handler, context) = bound.value
                    context.writeAndFlush(handler.wrapOutboundOut(HTTP2Frame(streamID: id, payload: .rstStream(.noError))), promise: nil)
                }
            }
        } else if !stream.requestEnded {
            context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .rstStream(.noError))), promise: nil)
        }
        scheduleFlush(context: context)
        closeIfDrained(context: context)
    }

    private func reset(_ id: HTTP2StreamID, _ code: NIOHTTP2.HTTP2ErrorCode, context: ChannelHandlerContext) {
        streams[id] = nil
        logger.debug("malformed request: stream reset", metadata: ["stream": "\(id)"])
        writeReset(id, code, context: context)
        closeIfDrained(context: context)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if connectionWindowUpdated(event, context: context) { return }
        switch event {
        case is ChannelShouldQuiesceEvent:
            goAway(context: context)
        default:
            context.fireUserInboundEventTriggered(event)
        }
    }

    private func goAway(context: ChannelHandlerContext) {
        guard sendGoAway(context: context) else { return }
        // Streams in flight get the grace period; then the connection closes and their routes are cancelled.
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        context.eventLoop.scheduleTask(in: gracePeriod) { bound.value.close(promise: nil) }
        closeIfDrained(context: context)
    }

    private func closeIfDrained(context: ChannelHandlerContext) {
        if streams.isEmpty { noStreamOpen(idle: timeouts.idle, context: context) }
        guard connectionState.draining, streams.isEmpty else { return }
        context.close(promise: nil)
    }

    /// Resets the streams whose request did not end in time; closes an idle connection; sets the timer for
    /// the next deadline.
    func timerFired(context: ChannelHandlerContext) {
        let now = NIODeadline.now()
        let late = streams.filter { !$0.value.requestEnded && !$0.value.dispatched && $0.value.bodyDeadline <= now }.map(\.key)
        for id in late {
            streams[id] = nil
            logger.debug("stream reset: body timeout", metadata: ["stream": "\(id)"])
            writeReset(id, .cancel, context: context)
        }
        if !late.isEmpty { closeIfDrained(context: context) }
        if streams.isEmpty, let idle = timeouts.idle, connectionState.lastActivity + idle <= now {
            logger.debug("connection idle: GOAWAY")
            goAway(context: context)
            return
        }
        var next = streams.values.lazy.filter { !$0.requestEnded && !$0.dispatched }.map(\.bodyDeadline).min()
        if streams.isEmpty, let idle = timeouts.idle { next = min(next ?? .distantFuture, connectionState.lastActivity + idle) }
        if let next, context.channel.isActive { schedule(at: next, context: context) }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        logger.debug("API connection closed on an error", metadata: ["error": "\(error)"])
        context.close(promise: nil)
    }
}
