import Logging
import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOPosix
import NIOSSL
import NIOTLS
import ServiceLifecycle
import Synchronization

/// The APNs listener (docs/APNS.md): TLS with ALPN `h2` (frame-level handler) or `http/1.1`, on its own
/// port. On graceful shutdown it stops accepting, sends GOAWAY, lets the pushes in flight get their
/// answers (at most the grace period) and closes.
struct IngressService: Service {
    let configuration: GatewayConfiguration.Ingress
    /// Handshake, header, body and idle deadlines (`listen.*Timeout`): every state of a connection is timed.
    let timeouts: ConnectionTimeouts
    let gracePeriod: Duration
    let tls: NIOSSLContext
    let ingress: PushIngress
    let keys: ProviderKeyDirectory
    let readiness: Readiness
    let logger: Logger
    let onListening: @Sendable (Int) async -> Void

    /// The open connections, to drain them on shutdown.
    final class Connections: Sendable {
        private let channels = Mutex<[ObjectIdentifier: any Channel]>([:])

        func insert(_ channel: any Channel) { channels.withLock { $0[ObjectIdentifier(channel)] = channel } }
        func remove(_ channel: any Channel) { _ = channels.withLock { $0.removeValue(forKey: ObjectIdentifier(channel)) } }
        var all: [any Channel] { channels.withLock { Array($0.values) } }
        var isEmpty: Bool { channels.withLock { $0.isEmpty } }
    }

    func run() async throws {
        await keys.refresh()
        let connections = Connections()
        let server: any Channel
        do {
            server = try await bootstrap(connections).bind(host: configuration.host, port: configuration.port).get()
        } catch let error as IOError where error.errnoCode == EADDRINUSE {
            throw ListenerAddressUnavailable(key: "ingress.port", host: configuration.host, port: configuration.port, reason: nil)
        }
        let port = server.localAddress?.port ?? configuration.port
        logger.info("APNs listener open", metadata: ["host": "\(configuration.host)", "port": "\(port)"])
        readiness.markReady(.ingress)
        await onListening(port)

        // Keys added or removed by `reloadgate keys` take effect within a second.
        await withTaskGroup(of: Void.self) { group in
            group.addTask { [keys] in
                while !Task.isCancelled {
                    try? await Task.sleep(for: .seconds(1))
                    await keys.refresh()
                }
            }
            try? await gracefulShutdown()
            group.cancelAll()
        }

        readiness.markNotReady(.ingress)
        try? await server.close()
        for channel in connections.all {
            channel.pipeline.fireUserInboundEventTriggered(IngressConnection.Drain())
        }
        let deadline = ContinuousClock.now + gracePeriod
        while !connections.isEmpty, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(20))
        }
        for channel in connections.all { try? await channel.close() }
        logger.info("APNs listener closed")
    }

    private func bootstrap(_ connections: Connections) -> ServerBootstrap {
        let tls = tls
        let ingress = ingress
        let timeouts = timeouts
        let logger = logger
        let tokenUpdateInterval = Int64(configuration.tokenUpdateInterval)
        let settings: HTTP2Settings = [
            HTTP2Setting(parameter: .maxConcurrentStreams, value: configuration.maxConcurrentStreams),
            HTTP2Setting(parameter: .maxHeaderListSize, value: 16 * 1024),
        ]
        return ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                connections.insert(channel)
                channel.closeFuture.whenComplete { _ in connections.remove(channel) }
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: tls))
                    // Until the HTTP handlers run the connection (after the handshake, or after the first
                    // bytes when no ALPN was negotiated), the handshake deadline holds.
                    try channel.pipeline.syncOperations.addHandler(
                        HandshakeTimeoutHandler(timeout: timeouts.header, untilProtocolChosen: true, logger: logger)
                    )
                }.flatMap {
                    @Sendable func http2(_ channel: any Channel) throws {
                        // Header blocks and content lengths are checked by IngressHTTP2Handler (HTTP2RequestFields).
                        let handler = NIOHTTP2Handler(
                            mode: .server,
                            initialSettings: settings,
                            headerBlockValidation: .disabled,
                            contentLengthValidation: .disabled
                        )
                        try channel.pipeline.syncOperations.addHandler(handler)
                        try channel.pipeline.syncOperations.addHandler(
                            IngressHTTP2Handler(ingress: ingress, tokenUpdateInterval: tokenUpdateInterval, timeouts: timeouts)
                        )
                    }
                    @Sendable func http1(_ channel: any Channel) -> EventLoopFuture<Void> {
                        channel.pipeline.configureHTTPServerPipeline(withPipeliningAssistance: true, withErrorHandling: true).flatMapThrowing {
                            try channel.pipeline.syncOperations.addHandler(RequestTimeoutHandler<NIOHTTP1Parts>(timeouts: timeouts, logger: logger))
                            try channel.pipeline.syncOperations.addHandler(IngressHTTP1Handler(ingress: ingress, tokenUpdateInterval: tokenUpdateInterval))
                        }
                    }
                    let negotiation = ApplicationProtocolNegotiationHandler { result in
                        switch result {
                        case .negotiated("h2"):
                            return channel.eventLoop.makeCompletedFuture { try http2(channel) }
                        case .negotiated("http/1.1"):
                            return http1(channel)
                        default:
                            // No ALPN: HTTP/2 with prior knowledge or HTTP/1.1, told apart by the first bytes.
                            return channel.eventLoop.makeCompletedFuture {
                                try channel.pipeline.syncOperations.addHandler(HTTPVersionSniffer(http2: http2, http1: http1))
                            }
                        }
                    }
                    return channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(negotiation) }
                }
            }
    }
}
