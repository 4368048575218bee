import HummingbirdCore
import HummingbirdHTTP2
import Logging
import NIOCore
import NIOSSL

/// Hummingbird's TLS child channel (ALPN h2, HTTP/1.1 fallback) with the gateway's deadlines: the
/// handshake within `header` (``HandshakeTimeoutHandler``, after the TLS handler), and, through the
/// channel's stream configuration, a ``RequestTimeoutHandler`` on every HTTP/1.1 connection and HTTP/2
/// stream. Idle connections are Hummingbird's to close (its `idleTimeout`).
struct TimedHTTP2UpgradeChannel: ServerChildChannel {
    typealias Value = HTTP2UpgradeChannel.Value

    let base: HTTP2UpgradeChannel
    let timeouts: ConnectionTimeouts
    let logger: Logger

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        base.setup(channel: channel, logger: logger).flatMapThrowing { value in
            let tls = try channel.pipeline.syncOperations.handler(type: NIOSSLServerHandler.self)
            try channel.pipeline.syncOperations.addHandler(
                HandshakeTimeoutHandler(timeout: timeouts.header, untilProtocolChosen: false, logger: self.logger),
                position: .after(tls)
            )
            return value
        }
    }

    func handle(value: Value, logger: Logger) async {
        await base.handle(value: value, logger: logger)
    }
}

extension HTTPServerBuilder {
    /// HTTP/2 with HTTP/1.1 fallback over TLS, with the gateway's deadlines on every connection and request.
    static func timedHTTP2Upgrade(
        tlsConfiguration: TLSConfiguration,
        configuration: HTTP2UpgradeChannel.Configuration,
        timeouts: ConnectionTimeouts,
        logger: Logger
    ) throws -> HTTPServerBuilder {
        var timed = configuration
        timed.streamConfiguration.additionalChannelHandlers = {
            [RequestTimeoutHandler<HTTPTypesParts>(timeouts: timeouts, logger: logger)]
        }
        let configuration = timed
        // Validates the TLS configuration now, so that a bad one is a configuration error before start.
        _ = try HTTP2UpgradeChannel(tlsConfiguration: tlsConfiguration, configuration: configuration, responder: { _, _, _ in })
        return HTTPServerBuilder { responder in
            TimedHTTP2UpgradeChannel(
                base: try HTTP2UpgradeChannel(tlsConfiguration: tlsConfiguration, configuration: configuration, responder: responder),
                timeouts: timeouts,
                logger: logger
            )
        }
    }
}
