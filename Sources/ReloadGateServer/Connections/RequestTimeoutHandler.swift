import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPTypes

/// How a pipeline's HTTP parts map to ``RequestDeadlines``' events: NIO's HTTP/1 parts on the APNs
/// listener, swift-http-types' parts behind Hummingbird's codec (its HTTP/1.1 connections and HTTP/2
/// streams).
protocol TimedHTTPParts: SendableMetatype {
    associatedtype Request
    associatedtype Response
    /// `true` for a request's head, `false` for its end, `nil` for a body part.
    static func startsOrEnds(_ part: Request) -> Bool?
    static func isEnd(_ part: Response) -> Bool
}

enum NIOHTTP1Parts: TimedHTTPParts {
    static func startsOrEnds(_ part: HTTPServerRequestPart) -> Bool? {
        switch part {
        case .head: true
        case .body: nil
        case .end: false
        }
    }

    static func isEnd(_ part: HTTPServerResponsePart) -> Bool {
        if case .end = part { return true }
        return false
    }
}

enum HTTPTypesParts: TimedHTTPParts {
    static func startsOrEnds(_ part: HTTPRequestPart) -> Bool? {
        switch part {
        case .head: true
        case .body: nil
        case .end: false
        }
    }

    static func isEnd(_ part: HTTPResponsePart) -> Bool {
        if case .end = part { return true }
        return false
    }
}

/// Closes a connection (or an HTTP/2 stream: reset) whose peer misses a deadline of
/// ``RequestDeadlines``. It sits after the HTTP decoder; a socket read that yields no part (a header
/// line of an unfinished request) still passes it as `channelReadComplete`, which is how it sees the
/// first bytes of a request.
///
/// One scheduled task at a time, moved only when a deadline comes earlier than the one it waits for.
final class RequestTimeoutHandler<Parts: TimedHTTPParts>: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = Parts.Request
    typealias InboundOut = Parts.Request
    typealias OutboundIn = Parts.Response
    typealias OutboundOut = Parts.Response

    private let timeouts: ConnectionTimeouts
    private let logger: Logger
    private var deadlines: RequestDeadlines?
    private var scheduled: (task: Scheduled<Void>, at: NIODeadline)?
    /// Between `channelRead` and `channelReadComplete` of one socket read.
    private var inRead = false
    /// An answer ended within the current read: its `channelReadComplete` brings no new request.
    private var answeredInRead = false

    init(timeouts: ConnectionTimeouts, logger: Logger) {
        self.timeouts = timeouts
        self.logger = logger
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { start(context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        start(context: context)
        context.fireChannelActive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        scheduled?.task.cancel()
        scheduled = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        scheduled?.task.cancel()
        scheduled = nil
        context.fireChannelInactive()
    }

    private func start(context: ChannelHandlerContext) {
        guard deadlines == nil else { return }
        deadlines = RequestDeadlines(header: timeouts.header, body: timeouts.body, idle: timeouts.idle, now: .now())
        reschedule(context: context)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        inRead = true
        switch Parts.startsOrEnds(unwrapInboundIn(data)) {
        case true?: deadlines?.headReceived(at: .now())
        case false?: deadlines?.requestEnded(at: .now())
        case nil: break
        }
        reschedule(context: context)
        context.fireChannelRead(data)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if !answeredInRead { deadlines?.bytesArrived(at: .now()) }
        inRead = false
        answeredInRead = false
        reschedule(context: context)
        context.fireChannelReadComplete()
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if Parts.isEnd(unwrapOutboundIn(data)) {
            deadlines?.answerEnded(at: .now())
            if inRead { answeredInRead = true }
            reschedule(context: context)
        }
        context.write(data, promise: promise)
    }

    /// Makes sure a task runs at or before the current deadline.
    private func reschedule(context: ChannelHandlerContext) {
        guard let deadline = deadlines?.deadline else { return }
        if let scheduled, scheduled.at <= deadline { return }
        scheduled?.task.cancel()
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        let task = context.eventLoop.scheduleTask(deadline: deadline) {
            let (handler, context) = bound.value
            handler.fired(context: context)
        }
        scheduled = (task, deadline)
    }

    private func fired(context: ChannelHandlerContext) {
        scheduled = nil
        guard let deadlines else { return }
        if let expiry = deadlines.expiry(at: .now()) {
            logger.debug(
                "connection closed: \(expiry.rawValue) timeout",
                metadata: ["peer": "\(context.channel.remoteAddress?.description ?? "-")", "phase": "\(deadlines.phase)"]
            )
            context.close(promise: nil)
        } else {
            reschedule(context: context)
        }
    }
}
