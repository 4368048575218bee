import Logging
import NIOCore
import NIOHTTP1
import ReloadGateAPNs

/// The APNs listener's HTTP/1.1 path (ALPN `http/1.1` or no ALPN: curl users and simple senders), on the
/// event loop like the HTTP/2 path. One request at a time per connection (NIO's pipelining handler holds
/// the next); a body over 4096 bytes is answered at once and the connection closed, so it is never read.
/// The deadlines (headers, body, idle) are the ``RequestTimeoutHandler`` in front of it.
final class IngressHTTP1Handler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let ingress: PushIngress
    private var authentication: ConnectionAuthentication
    /// The apns-ids of answers to pushes that came without one.
    private var ids = MessageID.Generator()
    private var certificate: ClientCertificate??
    private var accepted: PushIngress.AcceptedHead?
    private var body: [UInt8] = []
    private var responded = false
    private var keepAlive = true
    private var inFlight = false
    private var draining = false
    /// The gateway's logger with this connection's peer, for refusals at `debug`.
    private var connection: Logger

    init(ingress: PushIngress, tokenUpdateInterval: Int64) {
        self.ingress = ingress
        self.authentication = ConnectionAuthentication(tokenUpdateInterval: tokenUpdateInterval)
        self.connection = ingress.logger
    }

    func handlerAdded(context: ChannelHandlerContext) {
        connection[metadataKey: "connection"] = "\(context.channel.remoteAddress?.description ?? "-")"
        context.triggerUserOutboundEvent(HandshakeTimeoutHandler.ProtocolChosen(), promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            inFlight = true
            responded = false
            accepted = nil
            body = []
            keepAlive = head.isKeepAlive
            if certificate == nil { certificate = .some(IngressConnection.clientCertificate(context.pipeline)) }
            let headers = head.headers.map { (name: $0.name.lowercased(), value: $0.value) }
            switch ingress.checkHead(
                PushRequestHead(method: head.method.rawValue, path: head.uri, headers: headers),
                certificate: certificate ?? nil,
                authentication: &authentication,
                ids: &ids,
                connection: connection
            ) {
            case .success(let head): accepted = head
            case .failure(let response): respond(response, context: context, requestEnded: false)
            }
        case .body(let buffer):
            guard !responded else { return }
            if body.count + buffer.readableBytes > PushPayload.limit {
                keepAlive = false
                respond(PushResponse(APNsFailure(.payloadTooLarge), apnsID: accepted?.apnsID ?? PushIngress.responseID([], ids: &ids)), context: context, requestEnded: false)
                return
            }
            body.append(contentsOf: buffer.readableBytesView)
        case .end:
            guard !responded, let accepted else {
                finish(context: context)
                return
            }
            let loop = context.eventLoop
            let bound = NIOLoopBound((self, context), eventLoop: loop)
            ingress.process(accepted, body: body, connection: connection) { response in
                if loop.inEventLoop {
                    let (handler, context) = bound.value
                    handler.respond(response, context: context, requestEnded: true)
                } else {
                    loop.execute {
                        let (handler, context) = bound.value
                        handler.respond(response, context: context, requestEnded: true)
                    }
                }
            }
        }
    }

    private func respond(_ response: PushResponse, context: ChannelHandlerContext, requestEnded: Bool) {
        guard !responded else { return }
        ingress.metrics.apnsAnswer(status: response.status, reason: response.reason)
        responded = true
        var headers = HTTPHeaders([("apns-id", response.apnsID)])
        for (name, value) in response.extraHeaders { headers.add(name: name, value: value) }
        let bytes = response.body.map { ByteBuffer(string: $0) }
        if bytes != nil { headers.add(name: "content-type", value: "application/json") }
        headers.add(name: "content-length", value: String(bytes?.readableBytes ?? 0))
        if !keepAlive || draining { headers.add(name: "connection", value: "close") }
        let head = HTTPResponseHead(version: .http1_1, status: HTTPResponseStatus(statusCode: response.status), headers: headers)
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        if let bytes { context.write(wrapOutboundOut(.body(.byteBuffer(bytes))), promise: nil) }
        let close = !keepAlive || draining
        context.writeAndFlush(wrapOutboundOut(.end(nil))).assumeIsolated().whenComplete { _ in
            if close { context.close(promise: nil) }
        }
        if requestEnded { finish(context: context) }
    }

    private func finish(context: ChannelHandlerContext) {
        inFlight = false
        accepted = nil
        body = []
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        switch event {
        case is IngressConnection.Drain:
            draining = true
            if !inFlight { context.close(promise: nil) }
        default:
            context.fireUserInboundEventTriggered(event)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        ingress.logger.debug("APNs connection closed on an error", metadata: ["error": "\(error)"])
        context.close(promise: nil)
    }
}
