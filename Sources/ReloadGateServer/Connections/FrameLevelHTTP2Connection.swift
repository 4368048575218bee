import NIOCore
import NIOHTTP2

/// What the two frame-level HTTP/2 handlers (the APNs listener's ``IngressHTTP2Handler`` and the API
/// listener's ``APIHTTP2Handler``) do alike on a connection's event loop: the connection's receive window
/// opened wide, one flush for every answer written in a turn of the loop, one timer for all of the
/// connection's deadlines, GOAWAY once. Each handler keeps its own streams and decides what a request is and
/// what a passed deadline means (``timerFired(context:)``). A protocol with its parts in an extension, not a
/// handler both wrap: the handlers' calls are resolved at compile time, nothing is added per frame.
protocol FrameLevelHTTP2Connection: ChannelInboundHandler, SendableMetatype where InboundIn == HTTP2Frame, OutboundOut == HTTP2Frame {
    /// The connection's shared state; only the extension's parts change it.
    var connectionState: FrameLevelHTTP2State { get set }
    /// The timer set with ``schedule(at:context:)`` fired: reset the streams that are late, close an idle
    /// connection, schedule the next deadline.
    func timerFired(context: ChannelHandlerContext)
}

/// The state of ``FrameLevelHTTP2Connection``'s parts, one per connection.
struct FrameLevelHTTP2State {
    /// The connection's receive window: wide, for many small requests in flight at once.
    static let connectionWindow = 1 << 20

    /// The highest stream the client opened (the GOAWAY's last stream).
    var lastStreamID = HTTP2StreamID.rootStream
    /// GOAWAY was sent: the connection closes when its last stream is done.
    var draining = false
    var flushScheduled = false
    /// When the connection last had no stream open (the idle deadline counts from it).
    var lastActivity = NIODeadline.now()
    var timer: (task: Scheduled<Void>, at: NIODeadline)?
}

extension FrameLevelHTTP2Connection {
    /// The connection starts being served: the handshake deadline ends, the receive window opens wide (the
    /// stream windows are the handlers' settings), and the idle deadline (`idle`, else 300 s) starts.
    func startConnection(idle: TimeAmount?, context: ChannelHandlerContext) {
        context.triggerUserOutboundEvent(HandshakeTimeoutHandler.ProtocolChosen(), promise: nil)
        let increment = FrameLevelHTTP2State.connectionWindow - 65_535
        context.writeAndFlush(wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: increment))), promise: nil)
        connectionState.lastActivity = .now()
        schedule(at: connectionState.lastActivity + (idle ?? .seconds(300)), context: context)
    }

    /// Tops the connection's window up when it is half used (NIO leaves it to a handler without a
    /// multiplexer). - Returns: whether `event` was the connection's window update.
    func connectionWindowUpdated(_ event: Any, context: ChannelHandlerContext) -> Bool {
        guard let update = event as? NIOHTTP2WindowUpdatedEvent, update.streamID == .rootStream else { return false }
        let window = FrameLevelHTTP2State.connectionWindow
        if let inbound = update.inboundWindowSize, inbound < window / 2 {
            context.write(wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: window - inbound))), promise: nil)
            scheduleFlush(context: context)
        }
        return true
    }

    /// One flush for all the answers written in this turn of the event loop.
    func scheduleFlush(context: ChannelHandlerContext) {
        guard !connectionState.flushScheduled else { return }
        connectionState.flushScheduled = true
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        context.eventLoop.execute {
            let (handler, context) = bound.value
            handler.connectionState.flushScheduled = false
            context.flush()
        }
    }

    /// Sets the connection's one timer to `deadline` (replacing an earlier one).
    func schedule(at deadline: NIODeadline, context: ChannelHandlerContext) {
        connectionState.timer?.task.cancel()
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        let task = context.eventLoop.scheduleTask(deadline: deadline) {
            let (handler, context) = bound.value
            handler.connectionState.timer = nil
            handler.timerFired(context: context)
        }
        connectionState.timer = (task, deadline)
    }

    /// Sets the timer to `deadline` unless it is set to fire earlier already.
    func scheduleIfEarlier(_ deadline: NIODeadline, context: ChannelHandlerContext) {
        if let timer = connectionState.timer, timer.at <= deadline { return }
        schedule(at: deadline, context: context)
    }

    /// The connection has no stream open (again): idle from now. The timer stops when every open stream has
    /// ended its request and waits for its answer (no body deadline is left); it restarts here, for the idle
    /// deadline.
    func noStreamOpen(idle: TimeAmount?, context: ChannelHandlerContext) {
        connectionState.lastActivity = .now()
        if connectionState.timer == nil, let idle, context.channel.isActive {
            schedule(at: connectionState.lastActivity + idle, context: context)
        }
    }

    func cancelTimer() {
        connectionState.timer?.task.cancel()
        connectionState.timer = nil
    }

    /// Sends GOAWAY (no error, the last stream opened) once. - Returns: whether it was sent now.
    func sendGoAway(context: ChannelHandlerContext) -> Bool {
        guard !connectionState.draining else { return false }
        connectionState.draining = true
        let frame = HTTP2Frame(
            streamID: .rootStream, payload: .goAway(lastStreamID: connectionState.lastStreamID, errorCode: .noError, opaqueData: nil)
        )
        context.writeAndFlush(wrapOutboundOut(frame), promise: nil)
        return true
    }

    /// Resets `stream` with `code`; the handler forgets it.
    func writeReset(_ stream: HTTP2StreamID, _ code: HTTP2ErrorCode, context: ChannelHandlerContext) {
        context.write(wrapOutboundOut(HTTP2Frame(streamID: stream, payload: .rstStream(code))), promise: nil)
        scheduleFlush(context: context)
    }
}
