import Logging
import NIOCore
import NIOHPACK
import NIOHTTP2
import ReloadGateAPNs

/// The APNs listener's HTTP/2 path: handles the connection's frames directly on its event loop, with no
/// child channel and no task per stream (docs/DECISIONS.md, "The APNs listener has its own port and its own HTTP/2 handler").
///
/// A stream's headers are checked as soon as they arrive (method, path, headers, authentication); its
/// body is gathered up to 4096 bytes (a larger one is refused at once, without reading the rest); the
/// answer is written when the scheduler's commit says so. Answers that arrive together are flushed
/// together.
final class IngressHTTP2Handler: FrameLevelHTTP2Connection {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    /// A stream's state, changed in place: a reference, so that a look-up in ``streams`` copies (and
    /// retains) one pointer instead of every field of the stream, on every frame.
    private final class Stream {
        var accepted: PushIngress.AcceptedHead?
        var body: [UInt8] = []
        /// The request's `content-length`, which the body must match.
        let contentLength: Int?
        /// The answer was written (a refusal may go before the request's end).
        var responded = false
        /// The client ended its side.
        var requestEnded = false
        /// When the request must have ended.
        let bodyDeadline: NIODeadline

        init(contentLength: Int?, bodyDeadline: NIODeadline) {
            self.contentLength = contentLength
            self.bodyDeadline = bodyDeadline
        }
    }

    private let ingress: PushIngress
    private var authentication: ConnectionAuthentication
    /// The apns-ids of answers to pushes that came without one.
    private var ids = MessageID.Generator()
    private var streams: [HTTP2StreamID: Stream] = [:]
    private var certificate: ClientCertificate??
    /// The window, the flushes, the timer and the drain (``FrameLevelHTTP2Connection``).
    var connectionState = FrameLevelHTTP2State()
    private let timeouts: ConnectionTimeouts
    /// The gateway's logger with this connection's peer, for refusals at `debug`.
    private var connection: Logger
    private var started = false
    /// The answers of the commit loop (and of tasks that read the store), handed to this connection's
    /// loop together.
    private var answers: LoopMailbox<(HTTP2StreamID, PushResponse)>?

    init(ingress: PushIngress, tokenUpdateInterval: Int64, timeouts: ConnectionTimeouts) {
        self.ingress = ingress
        self.authentication = ConnectionAuthentication(tokenUpdateInterval: tokenUpdateInterval)
        self.timeouts = timeouts
        self.connection = ingress.logger
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
        answers?.close()
    }

    private func start(context: ChannelHandlerContext) {
        guard !started else { return }
        started = true
        connection[metadataKey: "connection"] = "\(context.channel.remoteAddress?.description ?? "-")"
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        answers = LoopMailbox(loop: context.eventLoop) { answers in
            let (handler, context) = bound.value
            for (id, response) in answers { handler.respond(id, response, context: context) }
        }
        startConnection(idle: timeouts.idle, context: context)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        let id = frame.streamID
        switch frame.payload {
        case .headers(let headers):
            if streams[id] == nil {
                connectionState.lastStreamID = max(connectionState.lastStreamID, id)
                startRequest(id, headers.headers, context: context)
            }
            if headers.endStream { endRequest(id, context: context) }
        case .data(let data):
            guard let stream = streams[id] else { return }
            let buffered = stream.body.count
            if !stream.responded, let declared = stream.contentLength, buffered + data.data.readableBytes > declared {
                return reset(id, context: context)  // more than `content-length` says: malformed
            }
            if !stream.responded, case .byteBuffer(let buffer) = data.data {
                if buffered + buffer.readableBytes > PushPayload.limit {
                    // Refused while reading: the rest of the body is never buffered. A stream that has
                    // not ended yet is reset after the answer.
                    stream.requestEnded = data.endStream
                    let apnsID = stream.accepted?.apnsID ?? PushIngress.responseID([], ids: &ids)
                    respond(id, PushResponse(APNsFailure(.payloadTooLarge), apnsID: apnsID), context: context)
                    return
                }
                stream.body.append(contentsOf: buffer.readableBytesView)
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
        var method = ""
        var path = ""
        var regular: [(name: String, value: String)] = []
        regular.reserveCapacity(headers.count)
        var fields = HTTP2RequestFields()
        for (name, value, _) in headers {
            guard fields.accept(name: name, value: value) else { return reset(id, context: context) }
            switch name {
            case ":method": method = value
            case ":path": path = value
            default: if !name.hasPrefix(":") { regular.append((name, value)) }
            }
        }
        guard fields.isComplete else { return reset(id, context: context) }
        if certificate == nil { certificate = .some(IngressConnection.clientCertificate(context.pipeline)) }
        let bodyDeadline = NIODeadline.now() + timeouts.body
        let stream = Stream(contentLength: fields.contentLength, bodyDeadline: bodyDeadline)
        streams[id] = stream
        scheduleIfEarlier(bodyDeadline, context: context)
        switch ingress.checkHead(
            PushRequestHead(method: method, path: path, headers: regular),
            certificate: certificate ?? nil,
            authentication: &authentication,
            ids: &ids,
            connection: connection
        ) {
        case .success(let accepted): stream.accepted = accepted
        case .failure(let response): respond(id, response, context: context)
        }
    }

    private func endRequest(_ id: HTTP2StreamID, context: ChannelHandlerContext) {
        guard let stream = streams[id] else { return }
        if let declared = stream.contentLength, !stream.responded, stream.body.count != declared {
            return reset(id, context: context)  // less than `content-length` says: malformed
        }
        if stream.responded {
            streams[id] = nil
            closeIfDrained(context: context)
            return
        }
        stream.requestEnded = true
        guard let accepted = stream.accepted else { return }
        guard let answers else { return }
        ingress.process(accepted, body: stream.body, connection: connection) { response in
            answers.post((id, response))
        }
    }

    /// Writes the answer.
    private func respond(_ id: HTTP2StreamID, _ response: PushResponse, context: ChannelHandlerContext) {
        // Taken out of the dictionary; put back only for an early refusal, below.
        guard let stream = streams[id], !stream.responded else { return }
        streams[id] = nil
        ingress.metrics.apnsAnswer(status: response.status, reason: response.reason)
        var headers = HPACKHeaders()
        headers.reserveCapacity(4 + response.extraHeaders.count)
        headers.add(name: ":status", value: String(response.status))
        // Values unique to each answer stay out of the HPACK dynamic table (cheaper, and they would only
        // push out the ones that repeat).
        headers.add(name: "apns-id", value: response.apnsID, indexing: .nonIndexable)
        for (name, value) in response.extraHeaders {
            headers.add(name: name, value: value, indexing: name == "reloadgate-due" ? .nonIndexable : .indexable)
        }
        let resetAfterwards = !stream.requestEnded && response.status == 413
        if let body = response.body {
            headers.add(name: "content-type", value: "application/json")
            headers.add(name: "content-length", value: String(body.utf8.count))
            context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .headers(.init(headers: headers)))), promise: nil)
            let data = HTTP2Frame.FramePayload.Data(data: .byteBuffer(ByteBuffer(string: body)), endStream: true)
            let written = context.eventLoop.makePromise(of: Void.self)
            context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .data(data))), promise: written)
            if resetAfterwards {
                // Stop a large body (RFC 9113 8.1: a complete answer, then RST_STREAM NO_ERROR). DATA waits
                // for flow control and RST_STREAM does not, so the reset follows the body's write.
                let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
                written.futureResult.whenSuccess {
                    let (handler, context) = bound.value
                    context.writeAndFlush(handler.wrapOutboundOut(HTTP2Frame(streamID: id, payload: .rstStream(.noError))), promise: nil)
                }
            }
        } else {
            context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .headers(.init(headers: headers, endStream: true)))), promise: nil)
        }
        if !stream.requestEnded && !resetAfterwards {
            // An early refusal: the rest of the (small) request is read and dropped, since some clients
            // drop an answer's body when the stream is reset.
            stream.responded = true
            stream.body = []
            streams[id] = stream
        }
        scheduleFlush(context: context)
        closeIfDrained(context: context)
    }

    /// Resets a malformed request's stream (RFC 9113 8.1.1: PROTOCOL_ERROR) and forgets it.
    private func reset(_ id: HTTP2StreamID, context: ChannelHandlerContext) {
        streams[id] = nil
        ingress.logger.debug("malformed request: stream reset", metadata: ["stream": "\(id)"])
        writeReset(id, .protocolError, context: context)
        closeIfDrained(context: context)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if connectionWindowUpdated(event, context: context) { return }
        switch event {
        case is IngressConnection.Drain:
            goAway(context: context)
        default:
            context.fireUserInboundEventTriggered(event)
        }
    }

    private func goAway(context: ChannelHandlerContext) {
        guard sendGoAway(context: context) else { return }
        closeIfDrained(context: context)
    }

    private func closeIfDrained(context: ChannelHandlerContext) {
        if streams.isEmpty { noStreamOpen(idle: timeouts.idle, context: context) }
        guard connectionState.draining, streams.isEmpty else { return }
        context.close(promise: nil)
    }

    // MARK: Deadlines

    /// Resets the streams whose request did not end in time; closes an idle connection; sets the timer
    /// for the next deadline.
    func timerFired(context: ChannelHandlerContext) {
        let now = NIODeadline.now()
        let late = streams.filter { !$0.value.requestEnded && $0.value.bodyDeadline <= now }.map(\.key)
        for id in late {
            streams[id] = nil
            connection.debug("stream reset: body timeout", metadata: ["stream": "\(id)"])
            writeReset(id, .cancel, context: context)
        }
        if !late.isEmpty { closeIfDrained(context: context) }
        if streams.isEmpty, let idle = timeouts.idle, connectionState.lastActivity + idle <= now {
            connection.debug("connection idle: GOAWAY")
            goAway(context: context)
            return
        }
        var next = streams.values.lazy.filter { !$0.requestEnded }.map(\.bodyDeadline).min()
        if streams.isEmpty, let idle = timeouts.idle { next = min(next ?? .distantFuture, connectionState.lastActivity + idle) }
        if let next, context.channel.isActive { schedule(at: next, context: context) }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        ingress.logger.debug("APNs connection closed on an error", metadata: ["error": "\(error)"])
        // Protocol errors are answered by NIOHTTP2Handler (GOAWAY or RST_STREAM); TLS errors end the connection.
        context.close(promise: nil)
    }
}
