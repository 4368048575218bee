import HummingbirdCore
import HummingbirdHTTP2
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOSSL
import NIOTLS

/// The API listener's connections: TLS with ALPN, then HTTP/2 or HTTP/1.1 (the ALPN fallback), each served
/// on the connection's event loop by a frame-level handler (``APIHTTP2Handler``, ``APIHTTP1Handler``) in
/// front of the router. The handshake deadline holds until the HTTP handlers take the connection.
struct APIChannel: ServerChildChannel {
    /// What the connection turned out to speak, once ALPN has chosen.
    enum Negotiated: Sendable {
        case http1
        case http2
        /// ALPN failed: the channel is closing.
        case refused
    }

    struct Value: ServerChildChannelValue {
        let negotiated: EventLoopFuture<Negotiated>
        let channel: any Channel
    }

    let sslContext: NIOSSLContext
    /// NIO's HTTP/1.1 decoder's limits (a field, all fields, how many).
    let http1Limits: NIOHTTPDecoderLimitConfiguration
    let responders: RouterResponderBox
    let settings: HTTP2Settings
    let timeouts: ConnectionTimeouts
    let gracePeriod: TimeAmount
    let logger: Logger

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        let http1Limits = http1Limits
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
                    return channel.eventLoop.makeCompletedFuture {
                        let sync = channel.pipeline.syncOperations
                        // One request at a time (the pipelining handler holds the next); a head NIO cannot
                        // parse is answered by APIHTTP1Handler.
                        try sync.configureHTTPServerPipeline(
                            withPipeliningAssistance: true,
                            withErrorHandling: false,
                            withOutboundHeaderValidation: false,
                            withEncoderConfiguration: .init(),
                            withDecoderLimitConfiguration: http1Limits
                        )
                        try sync.addHandler(RequestTimeoutHandler<NIOHTTP1Parts>(timeouts: timeouts, logger: handlerLogger))
                        try sync.addHandler(APIHTTP1Handler(responders: responders, logger: handlerLogger))
                        channel.pipeline.triggerUserOutboundEvent(HandshakeTimeoutHandler.ProtocolChosen(), promise: nil)
                        return .http1
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

    /// The handlers answer on the loop; the connection's task waits for it to close.
    func handle(value: Value, logger: Logger) async {
        try? await value.channel.closeFuture.get()
    }
}

extension HTTPServerBuilder {
    /// The server of the API listener and of the admin API's TLS listener: their TLS, 100 streams a connection,
    /// `listen`'s deadlines (the idle one kept by the HTTP/2 handler, or over HTTP/1.1 by
    /// `RequestTimeoutHandler`) and drain grace period.
    static func frameLevelHTTP2(
        tls: ListenerTLS,
        listen: GatewayConfiguration.Listen,
        responders: RouterResponderBox,
        logger: Logger
    ) throws -> HTTPServerBuilder {
        try frameLevelHTTP2(
            tlsConfiguration: tls.configuration,
            maxConcurrentStreams: 100,
            timeouts: ConnectionTimeouts(listen, keepsIdle: true),
            gracePeriod: .seconds(Int64(listen.shutdownGracePeriod)),
            responders: responders,
            logger: logger
        )
    }

    /// The API listener's server: ``APIChannel`` (HTTP/2 and HTTP/1.1 frame by frame), with the
    /// gateway's deadlines on every connection and request. `responders` is set once the routes are built.
    static func frameLevelHTTP2(
        tlsConfiguration: TLSConfiguration,
        maxConcurrentStreams: Int,
        timeouts: ConnectionTimeouts,
        gracePeriod: TimeAmount,
        responders: RouterResponderBox,
        logger: Logger
    ) throws -> HTTPServerBuilder {
        var tls = tlsConfiguration
        tls.applicationProtocols = ["h2", "http/1.1"]
        let context = try NIOSSLContext(configuration: tls)
        // HTTP/1.1 heads: the limits Hummingbird's HTTP/1.1 channel had (80 KiB a field and in all, 1000 fields).
        let decoder = HTTP1Channel.Configuration.DecoderConfiguration()
        var limits = NIOHTTPDecoderLimitConfiguration()
        limits.maxHeaderFieldSize = decoder.maxHeaderFieldSize
        limits.maxHeaderListSize = decoder.maxHeaderListSize
        limits.maxHeaderFieldCount = decoder.maxHeaderFieldCount
        let http1Limits = limits
        let settings: HTTP2Settings = [
            HTTP2Setting(parameter: .maxConcurrentStreams, value: maxConcurrentStreams),
            HTTP2Setting(parameter: .maxHeaderListSize, value: 16 * 1024),
            // A whole body (64 KiB and the byte past it) fits in a stream's window: no WINDOW_UPDATE per stream.
            HTTP2Setting(parameter: .initialWindowSize, value: 128 * 1024),
        ]
        return HTTPServerBuilder { responder in
            APIChannel(
                sslContext: context,
                http1Limits: http1Limits,
                responders: responders,
                settings: settings,
                timeouts: timeouts,
                gracePeriod: gracePeriod,
                logger: logger
            )
        }
    }
}
