import HummingbirdCore
import HummingbirdHTTP2
import Logging
import NIOCore
import NIOHTTP2
import NIOSSL
import NIOTLS

/// The API listener's connections: TLS with ALPN, HTTP/2 served frame by frame by
/// ``APIHTTP2Handler`` in front of the router, HTTP/1.1 (the ALPN fallback) by Hummingbird's HTTP/1.1
/// channel as before. The handshake deadline holds until the HTTP handlers take the connection.
struct APIChannel: ServerChildChannel {
    /// What the connection turned out to speak, once ALPN has chosen.
    enum Negotiated: Sendable {
        case http1(HTTP1Channel.Value)
        case http2
        /// ALPN failed: the channel is closing.
        case refused
    }

    struct Value: ServerChildChannelValue {
        let negotiated: EventLoopFuture<Negotiated>
        let channel: any Channel
    }

    let sslContext: NIOSSLContext
    let http1: HTTP1Channel
    let responders: RouterResponderBox
    let settings: HTTP2Settings
    let timeouts: ConnectionTimeouts
    let gracePeriod: TimeAmount
    let logger: Logger

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        let http1 = http1
        let responders = responders
        let settings = settings
        let timeouts = timeouts
        let gracePeriod = gracePeriod
        let handlerLogger = self.logger
        return channel.eventLoop.makeCompletedFuture {
            let sync = channel.pipeline.syncOperations
            try sync.addHandler(NIOSSLServerHandler(context: sslContext))
            try sync.addHandler(HandshakeTimeoutHandler(timeout: timeouts.header, untilProtocolChosen: true, logger: handlerLogger))
            let negotiation = NIOTypedApplicationProtocolNegotiationHandler<Negotiated> { result in
                switch result {
                case .negotiated("h2"):
                    return channel.eventLoop.makeCompletedFuture {
                        // Header blocks and content lengths are checked by APIHTTP2Handler (HTTP2RequestFields).
                        try channel.pipeline.syncOperations.addHandler(
                            NIOHTTP2Handler(mode: .server, initialSettings: settings, headerBlockValidation: .disabled, contentLengthValidation: .disabled)
                        )
                        try channel.pipeline.syncOperations.addHandler(APIHTTP2Handler(responders: responders, timeouts: timeouts, gracePeriod: gracePeriod, logger: handlerLogger))
                        return .http2
                    }
                case .negotiated("http/1.1"), .fallback:
                    return http1.setup(channel: channel, logger: logger).map { value in
                        channel.pipeline.triggerUserOutboundEvent(HandshakeTimeoutHandler.ProtocolChosen(), promise: nil)
                        return .http1(value)
                    }
                case .negotiated:
                    return channel.close().map { .refused }
                }
            }
            try sync.addHandler(negotiation)
            // Answered at once: the connection is read (and its handshake made) once Hummingbird hands it to
            // `handle`, which waits for the negotiation.
            return Value(negotiated: negotiation.protocolNegotiationResult, channel: channel)
        }
    }

    func handle(value: Value, logger: Logger) async {
        switch try? await value.negotiated.get() {
        case .http1(let connection):
            // On the connection's event loop, as the HTTP/2 handler runs its routes (``EventLoopTaskExecutor``).
            await withTaskExecutorPreference(EventLoopTaskExecutor(value.channel.eventLoop)) {
                await http1.handle(value: connection, logger: logger)
            }
        case .http2, .refused, nil:
            try? await value.channel.closeFuture.get()
        }
    }
}

extension HTTPServerBuilder {
    /// The server of the API listener and of the admin API's TLS listener: their TLS, 100 streams a connection,
    /// `listen`'s deadlines (the idle one kept by the HTTP/2 handler) and drain grace period.
    static func frameLevelHTTP2(
        tls: ListenerTLS,
        http1: HTTP1Channel.Configuration,
        listen: GatewayConfiguration.Listen,
        responders: RouterResponderBox,
        logger: Logger
    ) throws -> HTTPServerBuilder {
        try frameLevelHTTP2(
            tlsConfiguration: tls.configuration,
            http1: http1,
            maxConcurrentStreams: 100,
            timeouts: ConnectionTimeouts(listen, keepsIdle: true),
            gracePeriod: .seconds(Int64(listen.shutdownGracePeriod)),
            responders: responders,
            logger: logger
        )
    }

    /// The API listener's server: ``APIChannel`` (HTTP/2 frame by frame, HTTP/1.1 by Hummingbird), with the
    /// gateway's deadlines on every connection and request. `responders` is set once the routes are built.
    static func frameLevelHTTP2(
        tlsConfiguration: TLSConfiguration,
        http1: HTTP1Channel.Configuration,
        maxConcurrentStreams: Int,
        timeouts: ConnectionTimeouts,
        gracePeriod: TimeAmount,
        responders: RouterResponderBox,
        logger: Logger
    ) throws -> HTTPServerBuilder {
        var tls = tlsConfiguration
        tls.applicationProtocols = ["h2", "http/1.1"]
        let context = try NIOSSLContext(configuration: tls)
        var http1Timed = http1
        http1Timed.additionalChannelHandlers = { [RequestTimeoutHandler<HTTPTypesParts>(timeouts: timeouts, logger: logger)] }
        let configuration = http1Timed
        let settings: HTTP2Settings = [
            HTTP2Setting(parameter: .maxConcurrentStreams, value: maxConcurrentStreams),
            HTTP2Setting(parameter: .maxHeaderListSize, value: 16 * 1024),
            // A whole body (64 KiB and the byte past it) fits in a stream's window: no WINDOW_UPDATE per stream.
            HTTP2Setting(parameter: .initialWindowSize, value: 128 * 1024),
        ]
        return HTTPServerBuilder { responder in
            APIChannel(
                sslContext: context,
                http1: HTTP1Channel(responder: responder, configuration: configuration),
                responders: responders,
                settings: settings,
                timeouts: timeouts,
                gracePeriod: gracePeriod,
                logger: logger
            )
        }
    }
}
