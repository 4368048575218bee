import Logging
import NIOCore
import NIOTLS

/// Closes a connection that has not finished its TLS handshake (and, on the APNs listener, chosen its
/// HTTP version) within `listen.headerTimeout` from its start: a peer that sends its ClientHello a byte
/// at a time, or nothing at all, is not kept. Sits right after the TLS handler.
///
/// It ends its watch on the handshake's completion, or, with `untilProtocolChosen`, when the handlers of
/// the HTTP version the connection speaks announce themselves (``ProtocolChosen``, an outbound event:
/// the APNs listener tells a connection without ALPN apart by its first bytes after the handshake).
final class HandshakeTimeoutHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny
    typealias OutboundIn = NIOAny

    /// Sent (outbound) by the HTTP handlers once they run the connection.
    struct ProtocolChosen: Sendable {}

    private let timeout: TimeAmount
    private let untilProtocolChosen: Bool
    private let logger: Logger
    private var task: Scheduled<Void>?

    init(timeout: TimeAmount, untilProtocolChosen: Bool, logger: Logger) {
        self.timeout = timeout
        self.untilProtocolChosen = untilProtocolChosen
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
        task?.cancel()
        task = nil
    }

    private func start(context: ChannelHandlerContext) {
        guard task == nil else { return }
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        task = context.eventLoop.scheduleTask(in: timeout) {
            let (handler, context) = bound.value
            handler.logger.debug(
                "connection closed: handshake timeout",
                metadata: ["peer": "\(context.channel.remoteAddress?.description ?? "-")"]
            )
            context.close(promise: nil)
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        // Passed on first: the ALPN handler behind this one acts on the handshake's completion.
        context.fireUserInboundEventTriggered(event)
        if case TLSUserEvent.handshakeCompleted = event, !untilProtocolChosen { done(context: context) }
    }

    func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?) {
        if event is ProtocolChosen {
            done(context: context)
            promise?.succeed()
            return
        }
        context.triggerUserOutboundEvent(event, promise: promise)
    }

    private func done(context: ChannelHandlerContext) {
        task?.cancel()
        task = nil
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }
}
