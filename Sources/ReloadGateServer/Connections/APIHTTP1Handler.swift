import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPTypesHTTP1

/// The API listener's HTTP/1.1 path (ALPN `http/1.1`, or no ALPN: curl and most webhook senders), handled on
/// the connection's event loop as ``APIHTTP2Handler`` handles HTTP/2, in front of the same router, with no
/// async sequence between the socket and the route.
///
/// One request at a time: NIO's pipelining handler in front holds the next request until this one's
/// answer has ended, and when the server quiesces it closes the connection after the answer in flight
/// (with `connection: close`). The deadlines (headers, body, idle) are the ``RequestTimeoutHandler`` in
/// front; a head NIO cannot parse is answered `400` and the connection closed.
///
/// A request that sends `expect: 100-continue` is answered `100 Continue` at its head. A body is gathered
/// up to ``APIHTTP2Handler/bodyCap`` (one byte more than the routes take): a larger one is handed to the
/// route at the cap, which answers `413`, and the rest of it is read and dropped, so the connection stays
/// usable and the client reads the answer before any reset.
final class APIHTTP1Handler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    /// Where the connection is in the current request.
    private enum Phase {
        /// Between requests.
        case idle
        /// Reading the body of a request the route has not had yet.
        case reading(HTTPRequest)
        /// The route has the request (``requestEnded``: whether its end has been read).
        case routing
        /// Answered before the request ended: what is left of it is dropped until its end.
        case draining
        /// A head that is not a request the router can take: answered `400`; the connection closes.
        case refused
    }

    private let responders: RouterResponderBox
    private var logger: Logger
    private var phase = Phase.idle
    private var body = ByteBuffer()
    private var requestEnded = false
    private var keepAlive = true
    /// An HTTP/1.0 request that asked to keep the connection: its answer must say so too, or the client
    /// (ApacheBench's `-k`, for one) waits for the close that marks the answer's end.
    private var http10KeepAlive = false
    /// The route's task, cancelled when the connection closes.
    private var routing: Task<Void, Never>?
    /// Where the routes' tasks run: this connection's event loop (made when the first request comes).
    private var executor: EventLoopTaskExecutor?

    init(responders: RouterResponderBox, logger: Logger) {
        self.responders = responders
        self.logger = logger
    }

    func handlerAdded(context: ChannelHandlerContext) {
        logger[metadataKey: "connection"] = "\(context.channel.remoteAddress?.description ?? "-")"
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        routing?.cancel()
        routing = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        routing?.cancel()
        routing = nil
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            requestEnded = false
            keepAlive = head.isKeepAlive
            http10KeepAlive = keepAlive && head.version == .http1_0
            body.clear()
            guard let request = Self.request(head) else {
                phase = .refused
                keepAlive = false
                logger.debug("malformed request head: 400")
                return write(HTTPResponse(status: .badRequest), ByteBuffer(), isHead: false, context: context)
            }
            phase = .reading(request)
            // A client that waits to be asked for the body (curl does for bodies over 1 KiB) is asked at
            // once, instead of after its own wait (RFC 9110 10.1.1).
            if head.version.minor >= 1, head.headers[canonicalForm: "expect"].contains(where: { $0.lowercased() == "100-continue" }) {
                context.writeAndFlush(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .continue))), promise: nil)
            }
        case .body(var part):
            guard case .reading(let request) = phase else { return }
            let room = APIHTTP2Handler.bodyCap - body.readableBytes
            guard part.readableBytes <= room else {
                // Past the routes' limit: the route answers it (413) from what is here; the rest is dropped.
                var kept = part.readSlice(length: room)!
                body.writeBuffer(&kept)
                return dispatch(request, context: context)
            }
            body.writeBuffer(&part)
        case .end:
            requestEnded = true
            switch phase {
            case .reading(let request): dispatch(request, context: context)
            case .draining: phase = .idle
            case .idle, .routing, .refused: break
            }
        }
    }

    /// The head as the router's request: an origin-form target (`/v1/...`) as it is, any other form as
    /// swift-nio-extras converts it (which parses it as a URL). `nil`: a method HTTP types refuse.
    private static func request(_ head: HTTPRequestHead) -> HTTPRequest? {
        guard head.uri.utf8.first == UInt8(ascii: "/") else { return try? HTTPRequest(head, secure: true, splitCookie: false) }
        guard let method = try? HTTPRequest.Method(head.method) else { return nil }
        return HTTPRequest(
            method: method, scheme: "https", authority: head.headers.first(name: "host"), path: head.uri,
            headerFields: HTTPFields(head.headers, splitCookie: false)
        )
    }

    /// Hands the request to the router in a task on the loop; its answer is written on the loop.
    private func dispatch(_ head: HTTPRequest, context: ChannelHandlerContext) {
        guard let responder = responders.responder else {
            phase = .refused
            keepAlive = false
            return write(HTTPResponse(status: .serviceUnavailable), ByteBuffer(), isHead: false, context: context)
        }
        phase = .routing
        let request = Request(head: head, body: RequestBody(buffer: body))
        body = ByteBuffer()
        let channel = context.channel
        let logger = logger
        let handler = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        let executor = executor ?? EventLoopTaskExecutor(context.eventLoop)
        self.executor = executor
        routing = Task(executorPreference: executor) {
            let answer = await RouteAnswer.answer(request, responder: responder, channel: channel, logger: logger)
            // On the loop already when the task ran where it was started (``EventLoopTaskExecutor``).
            guard handler.eventLoop.inEventLoop else {
                return handler.eventLoop.execute {
                    let (connection, context) = handler.value
                    connection.respond(answer.head, answer.body, isHead: head.method == .head, context: context)
                }
            }
            let (connection, context) = handler.value
            connection.respond(answer.head, answer.body, isHead: head.method == .head, context: context)
        }
    }

    private func respond(_ head: HTTPResponse, _ body: ByteBuffer, isHead: Bool, context: ChannelHandlerContext) {
        routing = nil
        guard case .routing = phase else { return }
        // A request whose end has not been read (its body passed the cap) is read to its end first.
        phase = requestEnded ? .idle : .draining
        write(head, body, isHead: isHead, context: context)
    }

    /// Writes an answer: its fields, `content-length` and `date` where the route gave none, `connection:
    /// close` when the connection closes after it; a HEAD request's answer has no body (RFC 9110 9.3.2).
    private func write(_ response: HTTPResponse, _ body: ByteBuffer, isHead: Bool, context: ChannelHandlerContext) {
        var headers = HTTPHeaders()
        headers.reserveCapacity(response.headerFields.count + 3)
        RouteAnswer.fields(of: response, bodyBytes: body.readableBytes, date: HTTPDateField.now) { headers.add(name: $0, value: $1) }
        let close = !keepAlive
        if close {
            headers.add(name: "connection", value: "close")
        } else if http10KeepAlive {
            headers.add(name: "connection", value: "keep-alive")
        }
        let status = HTTPResponseStatus(statusCode: response.status.code, reasonPhrase: response.status.reasonPhrase)
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers))), promise: nil)
        if body.readableBytes > 0, !isHead { context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil) }
        guard close else { return context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil) }
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in
            let (handler, context) = bound.value
            handler.closeOurSide(context: context)
        }
    }

    /// Ends the connection from our side: TLS close_notify, then the TCP half-close, as Hummingbird's
    /// channel closed it. The client then closes its own at once, and so the whole connection
    /// (``userInboundEventTriggered``). A full close would wait up to NIOSSL's 5 s for the client's
    /// close_notify.
    private func closeOurSide(context: ChannelHandlerContext) {
        let closed = context.eventLoop.makePromise(of: Void.self)
        context.close(mode: .output, promise: closed)
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        closed.futureResult.whenFailure { _ in bound.value.close(promise: nil) }
    }

    /// A client that closed its side (TLS close_notify, or a TCP half-close; the server channel allows
    /// half-closure) sends nothing more: the connection closes now, or after the answer the route is making.
    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard case ChannelEvent.inputClosed = event else { return context.fireUserInboundEventTriggered(event) }
        switch phase {
        case .routing: keepAlive = false
        case .idle, .reading, .draining, .refused: context.close(promise: nil)
        }
    }

    /// A head (or chunk) NIO cannot parse is answered `400` and the connection closed after it; when the
    /// request already has its answer, or the route is making it, there is no second one: nothing more can
    /// be read, so the connection closes after that answer. Any other error closes the connection.
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard error is HTTPParserError, context.channel.isActive else {
            logger.debug("API connection closed on an error", metadata: ["error": "\(error)"])
            return context.close(promise: nil)
        }
        logger.debug("unreadable HTTP/1.1 request: 400", metadata: ["error": "\(error)"])
        keepAlive = false
        switch phase {
        case .routing: break
        case .refused, .draining: closeOurSide(context: context)
        case .idle, .reading:
            phase = .refused
            write(HTTPResponse(status: .badRequest), ByteBuffer(), isHead: false, context: context)
        }
    }
}
