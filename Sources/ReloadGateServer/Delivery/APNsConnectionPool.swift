import Logging
import NIOCore
import NIOHTTP2
import NIOPosix
import NIOSSL
import NIOTLS
import Synchronization

/// One request of a batch: its path and headers (without the pseudo-headers and content-length).
struct APNsRequest: Sendable {
    var path: String
    var headers: [(String, String)]
    /// Its own body (a push that carries content); `nil`: the batch's.
    var body: ByteBuffer? = nil
}

/// The HTTP/2 connections to the push service: `count` connections, opened when first needed and again
/// when one closes or receives GOAWAY; requests go round-robin to the open ones. Apple's advice is to
/// keep connections open and send many streams on each.
final class APNsConnectionPool: Sendable {
    private let host: String
    private let port: Int
    private let authority: String
    private let context: NIOSSLContext
    private let group: any EventLoopGroup
    private let logger: Logger
    private let slots: [Slot]
    private let next = Atomic<Int>(0)
    private let isShutDown = Atomic<Bool>(false)

    /// One connection and the state of its opening.
    final class Slot: Sendable {
        let state = Mutex<State>(.idle)

        enum State {
            case idle
            case connecting(EventLoopFuture<Connection>)
            case open(Connection)
        }
    }

    /// An open connection: its channel and its frame handler (used on the channel's event loop only).
    struct Connection: Sendable {
        let channel: any Channel
        let handler: NIOLoopBound<APNsClientHandler>
        /// Set by the handler on GOAWAY: no new request goes to this connection.
        let closing: APNsClientHandler.ClosingFlag

        var isUsable: Bool { channel.isActive && !closing.isSet }
    }

    init(host: String, port: Int, tls: TLSConfiguration, connections: Int, group: any EventLoopGroup, logger: Logger) throws {
        var tls = tls
        tls.applicationProtocols = ["h2"]
        self.context = try NIOSSLContext(configuration: tls)
        self.host = host
        self.port = port
        self.authority = port == 443 ? host : "\(host):\(port)"
        self.group = group
        self.logger = logger
        self.slots = (0..<max(1, connections)).map { _ in Slot() }
    }

    /// Sends one request and returns the answer. Throws ``APNsTransportError`` (or a connection error,
    /// which means it was not sent).
    func send(path: String, headers: [(String, String)], body: ByteBuffer, timeout: TimeAmount) async throws -> APNsAnswer {
        let request = APNsRequest(path: path, headers: headers)
        return try await send(batch: [request], body: body, timeout: timeout)[0].get()
    }

    /// Sends requests on one connection, all written in one event-loop turn (and flushed together), and
    /// returns their answers in order: an ``APNsTransportError`` (or a connection error, which means
    /// not sent) in place of a missing one. Requests the chosen connection refused to write because it
    /// had begun closing (a GOAWAY read after the choice) are sent once more, on the connection that
    /// replaces it: they never left, so they cost their delivery no attempt.
    func send(batch requests: [APNsRequest], body: ByteBuffer, timeout: TimeAmount) async -> [Result<APNsAnswer, any Error>] {
        var answers = await sendOnce(batch: requests, body: body, timeout: timeout)
        let unwritten = answers.indices.filter { index in
            if case .failure(APNsTransportError.connectionClosing) = answers[index] { return true }
            return false
        }
        guard !unwritten.isEmpty else { return answers }
        let again = await sendOnce(batch: unwritten.map { requests[$0] }, body: body, timeout: timeout)
        for (index, answer) in zip(unwritten, again) { answers[index] = answer }
        return answers
    }

    private func sendOnce(batch requests: [APNsRequest], body: ByteBuffer, timeout: TimeAmount) async -> [Result<APNsAnswer, any Error>] {
        let connection: Connection
        do {
            connection = try await self.connection().get()
        } catch {
            // A connection refused as not sent already (the handshake's protocol) says why once.
            let why = if let refused = error as? APNsTransportError, case .notSent(let reason) = refused { reason } else { "\(error)" }
            return Array(repeating: .failure(APNsTransportError.notSent("cannot connect to \(host):\(port): \(why)")), count: requests.count)
        }
        let eventLoop = connection.channel.eventLoop
        let answers = eventLoop.makePromise(of: [Result<APNsAnswer, any Error>].self)
        let deadline = NIODeadline.now() + timeout
        let authority = authority
        eventLoop.execute {
            let handler = connection.handler.value
            let futures = requests.map { request in
                let promise = eventLoop.makePromise(of: APNsAnswer.self)
                handler.send(
                    path: request.path, authority: authority, headers: request.headers, body: request.body ?? body, deadline: deadline, promise: promise
                )
                return promise.futureResult
            }
            EventLoopFuture.whenAllComplete(futures, on: eventLoop).cascade(to: answers)
        }
        do {
            return try await answers.futureResult.get()
        } catch {
            return Array(repeating: .failure(error), count: requests.count)
        }
    }

    /// Closes every connection; later sends fail.
    func shutdown() async {
        isShutDown.store(true, ordering: .sequentiallyConsistent)
        for slot in slots {
            let channel: (any Channel)? = slot.state.withLock { state in
                defer { state = .idle }
                if case .open(let connection) = state { return connection.channel }
                return nil
            }
            try? await channel?.close()
        }
    }

    /// Opens every connection that is not open yet and waits for them (failures are left to the next
    /// send). Pacing waits for this first: requests paced while a connection opens would otherwise
    /// leave together the moment it is up.
    func ready() async {
        for slot in slots { _ = try? await connection(of: slot).get() }
    }

    /// An open connection of the next slot, opening it if needed (one opening per slot at a time).
    private func connection() -> EventLoopFuture<Connection> {
        connection(of: slots[next.wrappingAdd(1, ordering: .relaxed).oldValue % slots.count])
    }

    private func connection(of slot: Slot) -> EventLoopFuture<Connection> {
        let eventLoop = group.next()
        if isShutDown.load(ordering: .sequentiallyConsistent) {
            return eventLoop.makeFailedFuture(APNsTransportError.notSent("the upstream is shut down"))
        }
        return slot.state.withLock { state -> EventLoopFuture<Connection> in
            switch state {
            case .open(let connection):
                // GOAWAY or closed: replace it (the old one finishes its streams and closes itself).
                if connection.isUsable { return eventLoop.makeSucceededFuture(connection) }
            case .connecting(let future):
                return future
            case .idle:
                break
            }
            let future = connect(on: eventLoop)
            state = .connecting(future)
            future.whenComplete { result in
                slot.state.withLock { state in
                    guard case .connecting = state else { return }
                    switch result {
                    case .success(let connection): state = .open(connection)
                    case .failure: state = .idle
                    }
                }
            }
            return future
        }
    }

    private func connect(on eventLoop: any EventLoop) -> EventLoopFuture<Connection> {
        let context = context
        let host = host
        let logger = logger
        // The connection, once HTTP/2 is set up on it at the TLS handshake's end.
        let ready = eventLoop.makePromise(of: Connection.self)
        let connected = ClientBootstrap(group: eventLoop)
            .connectTimeout(.seconds(10))
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let tls = try NIOSSLClientHandler(context: context, serverHostname: host.first?.isNumber == true ? nil : host)
                    let handshakeEnd = HandshakeEnd(promise: ready)
                    // HTTP/2 is set up at the handshake's end, on the channel's loop, and NIO's negotiation
                    // handler holds what is read until it is: a frame of the server's read before HTTP/2 is
                    // there would be dropped (its SETTINGS lost, its ACK then refused as bad settings, and
                    // the request written meanwhile failed with an unknown outcome).
                    let negotiation = ApplicationProtocolNegotiationHandler { result, channel in
                        channel.eventLoop.makeCompletedFuture {
                            // Apple speaks HTTP/2 only: the TLS handshake must agree on h2.
                            guard case .negotiated("h2") = result else {
                                let agreed = if case .negotiated(let name) = result { name } else { "none" }
                                throw APNsTransportError.notSent("the push service did not agree on HTTP/2 (ALPN: \(agreed))")
                            }
                            let connection = try Self.startHTTP2(on: channel, logger: logger)
                            channel.pipeline.syncOperations.removeHandler(handshakeEnd, promise: nil)
                            logger.info("connected to the push service", metadata: ["host": "\(host)"])
                            ready.succeed(connection)
                        }
                    }
                    try channel.pipeline.syncOperations.addHandlers([tls, negotiation, handshakeEnd])
                }
            }
            .connect(host: host, port: port)
        connected.whenFailure { ready.fail($0) }
        return ready.futureResult
    }

    /// Adds HTTP/2 and the requests' handler to a connection whose TLS handshake agreed on h2.
    private static func startHTTP2(on channel: any Channel, logger: Logger) throws -> Connection {
        let handler = APNsClientHandler(logger: logger)
        var connection = NIOHTTP2Handler.ConnectionConfiguration()
        connection.initialSettings = [
            HTTP2Setting(parameter: .maxConcurrentStreams, value: 100),
            HTTP2Setting(parameter: .initialWindowSize, value: 1 << 20),
            HTTP2Setting(parameter: .enablePush, value: 0),
        ]
        // The header blocks sent are built by APNsClientHandler (always valid); the answers'
        // are read for `:status` and two headers only: NIO's check of every block would be work
        // for nothing on every delivery.
        connection.headerBlockValidation = .disabled
        // The peer is the push service, not an attacker: streams it resets under load (or that
        // fail) must not make NIO close the connection as a denial-of-service defence (it did,
        // after 200 resets in 30 s, in the chaos test).
        var stream = NIOHTTP2Handler.StreamConfiguration()
        stream.streamResetFrameRateLimit.maximumCount = 1 << 30
        stream.streamErrorRateLimit.maximumCount = 1 << 30
        try channel.pipeline.syncOperations.addHandler(
            NIOHTTP2Handler(mode: .client, connectionConfiguration: connection, streamConfiguration: stream)
        )
        try channel.pipeline.syncOperations.addHandler(handler)
        return Connection(channel: channel, handler: NIOLoopBound(handler, eventLoop: channel.eventLoop), closing: handler.closing)
    }

    /// Until HTTP/2 is set up: fails the connection's promise when the handshake fails (or the negotiation
    /// refuses the protocol) or the connection closes, and closes it.
    private final class HandshakeEnd: ChannelInboundHandler, RemovableChannelHandler {
        typealias InboundIn = Any
        let promise: EventLoopPromise<Connection>

        init(promise: EventLoopPromise<Connection>) {
            self.promise = promise
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            promise.fail(error)
            context.close(promise: nil)
        }

        func channelInactive(context: ChannelHandlerContext) {
            promise.fail(APNsTransportError.notSent("the connection closed during the TLS handshake"))
            context.fireChannelInactive()
        }
    }
}
