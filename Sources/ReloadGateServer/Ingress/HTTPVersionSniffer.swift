import NIOCore

/// For a TLS connection that negotiated no ALPN protocol: HTTP/2 with prior knowledge (some APNs clients,
/// aioapns among them, send the HTTP/2 preface without offering `h2`, since Apple's service speaks only
/// HTTP/2) or HTTP/1.1 (curl without ALPN, simple webhooks). Looks at the first bytes, sets up the
/// pipeline for what it sees, and hands them on.
final class HTTPVersionSniffer: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    /// The HTTP/2 connection preface (RFC 9113, 3.4).
    static let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

    private let configureHTTP2: (any Channel) throws -> Void
    private let configureHTTP1: (any Channel) -> EventLoopFuture<Void>
    private var buffered: ByteBuffer?
    private var decided = false

    init(http2: @escaping (any Channel) throws -> Void, http1: @escaping (any Channel) -> EventLoopFuture<Void>) {
        self.configureHTTP2 = http2
        self.configureHTTP1 = http1
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var incoming = unwrapInboundIn(data)
        guard !decided else {
            context.fireChannelRead(data)
            return
        }
        if buffered == nil {
            buffered = incoming
        } else {
            buffered!.writeBuffer(&incoming)
        }
        let bytes = buffered!.readableBytesView
        let compared = min(bytes.count, Self.preface.count)
        let isPrefaceSoFar = bytes.prefix(compared).elementsEqual(Self.preface.prefix(compared))
        if isPrefaceSoFar && compared < Self.preface.count { return }  // need more bytes to decide
        decided = true
        let channel = context.channel
        let pending = buffered!
        buffered = nil
        if isPrefaceSoFar {
            do {
                try configureHTTP2(channel)
            } catch {
                context.close(promise: nil)
                return
            }
            handOn(pending, context: context)
        } else {
            let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            configureHTTP1(channel).whenComplete { result in
                let (sniffer, context) = bound.value
                guard case .success = result else { return context.close(promise: nil) }
                sniffer.handOn(pending, context: context)
            }
        }
    }

    /// Passes the bytes read so far to the handlers just added, and leaves the pipeline.
    private func handOn(_ bytes: ByteBuffer, context: ChannelHandlerContext) {
        context.fireChannelRead(wrapInboundOut(bytes))
        context.fireChannelReadComplete()
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }
}
