import NIOCore
import NIOPosix
import NIOTLS
public import NIOSSL
import Synchronization

/// A bare TCP connection, with TLS when asked, for tests of what a listener does with slow or silent
/// peers: it sends exactly the bytes it is given (a header line at a time, an announced body that never
/// comes) and tells when the server closed the connection.
public final class RawConnection: Sendable {
    private let channel: any Channel
    private let received: Received

    final class Received: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        let bytes = Mutex<[UInt8]>([])

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let buffer = unwrapInboundIn(data)
            bytes.withLock { $0.append(contentsOf: buffer.readableBytesView) }
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            context.close(promise: nil)
        }
    }

    private init(channel: any Channel, received: Received) {
        self.channel = channel
        self.received = received
    }

    /// Connects to `host:port`; with `tls`, completes a TLS handshake offering `alpn` first.
    public static func connect(host: String = "localhost", port: Int, tls: TLSConfiguration? = nil, alpn: [String] = []) async throws -> RawConnection {
        let received = Received()
        let context: NIOSSLContext? = try tls.map { tls in
            var tls = tls
            tls.applicationProtocols = alpn
            return try NIOSSLContext(configuration: tls)
        }
        let handshake = Mutex<EventLoopFuture<Void>?>(nil)
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    if let context {
                        let handler = try NIOSSLClientHandler(context: context, serverHostname: host)
                        try channel.pipeline.syncOperations.addHandler(handler)
                        let done = channel.eventLoop.makePromise(of: Void.self)
                        try channel.pipeline.syncOperations.addHandler(HandshakeWatcher(done: done))
                        handshake.withLock { $0 = done.futureResult }
                    }
                    try channel.pipeline.syncOperations.addHandler(received)
                }
            }
            .connect(host: host, port: port).get()
        try await handshake.withLock { $0 }?.get()
        return RawConnection(channel: channel, received: received)
    }

    /// Writes `bytes` (a string's UTF-8) as they are.
    public func send(_ text: String) async throws {
        try await channel.writeAndFlush(ByteBuffer(string: text)).get()
    }

    /// Writes `bytes` as they are.
    public func send(bytes: [UInt8]) async throws {
        try await channel.writeAndFlush(ByteBuffer(bytes: bytes)).get()
    }

    /// What the server sent so far.
    public var receivedBytes: [UInt8] { received.bytes.withLock { $0 } }

    /// Whether the server has closed the connection.
    public var isClosed: Bool { !channel.isActive }

    /// What the server sent so far, as text.
    public var receivedText: String { String(decoding: received.bytes.withLock { $0 }, as: UTF8.self) }

    /// Waits until the server closes the connection, at most `timeout`. - Returns: whether it did.
    public func waitForClose(timeout: Duration) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while channel.isActive, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(20))
        }
        return !channel.isActive
    }

    public func close() async {
        try? await channel.close()
    }

    /// Completes `done` when the TLS handshake has, and fails it when the connection closes first.
    final class HandshakeWatcher: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        typealias InboundOut = ByteBuffer
        let done: EventLoopPromise<Void>

        init(done: EventLoopPromise<Void>) { self.done = done }

        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            if case TLSUserEvent.handshakeCompleted = event { done.succeed() }
            context.fireUserInboundEventTriggered(event)
        }

        func channelInactive(context: ChannelHandlerContext) {
            done.fail(ChannelError.ioOnClosedChannel)
            context.fireChannelInactive()
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            done.fail(error)
            context.fireErrorCaught(error)
        }
    }
}
