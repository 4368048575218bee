import Foundation
import NIOCore
import NIOPosix
import Synchronization

/// A TCP proxy on 127.0.0.1 in front of a server (a test's PostgreSQL): every byte goes through, until the
/// test says that the server's answers are lost (``swallowReplies()``). From then on what the client sends
/// still reaches the server, which acts on it (a commit is made), but nothing the server answers comes
/// back: the outcome of whatever was in flight is unknown to the client, as in a network partition that
/// began just after a request left. ``heal()`` ends it the way such a partition usually ends: every
/// connection is reset, and new ones work. ``endAfterFirstRow(onceClientSends:)`` instead ends a connection
/// in the middle of a result, as a database server that crashes while it sends one.
public final class TCPProxy: Sendable {
    /// The port clients connect to.
    public let port: Int
    private let listener: any Channel
    private let state = Mutex(State())

    private struct State {
        var swallowing = false
        /// Swallowing begins once a client sends bytes this says yes to (``swallowReplies(onceClientBinds:)``).
        var trigger: (@Sendable (Sent) -> Bool)?
        /// The client connection whose buffer fired the trigger.
        var triggeredBy: (any Channel)?
        var connections: [any Channel] = []
        /// ``endAfterFirstRow(onceClientSends:)``: what a client's buffer contains to arm the cut, and
        /// whether it is armed.
        var cutMarker: [UInt8]?
        var cutArmed = false
    }

    private init(port: Int, listener: any Channel) {
        self.port = port
        self.listener = listener
    }

    /// Starts a proxy to `targetPort` on 127.0.0.1, on a port the system picks.
    public static func start(to targetPort: Int) async throws -> TCPProxy {
        let box = Mutex<TCPProxy?>(nil)
        let listener = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { client in
                guard let proxy = box.withLock({ $0 }) else { return client.close() }
                return proxy.relay(client, to: targetPort)
            }
            .bind(host: "127.0.0.1", port: 0).get()
        guard let port = listener.localAddress?.port else {
            try await listener.close()
            throw ChannelError.unknownLocalAddress
        }
        let proxy = TCPProxy(port: port, listener: listener)
        box.withLock { $0 = proxy }
        return proxy
    }

    /// A proxy in front of the server of `url` (a test database's, `postgres://...`), and `url` with the
    /// proxy's port: a client given it goes through the proxy. The caller stops the proxy.
    public static func inFront(of url: String) async throws -> (proxy: TCPProxy, url: String) {
        guard var target = URLComponents(string: url), let port = target.port else { throw TCPProxyError.noPort(url) }
        let proxy = try await start(to: port)
        target.port = proxy.port
        guard let proxied = target.string else {
            await proxy.stop()
            throw TCPProxyError.noPort(url)
        }
        return (proxy, proxied)
    }

    /// From now on nothing the server sends reaches a client (what clients send still reaches the server).
    public func swallowReplies() {
        state.withLock { $0.swallowing = true }
    }

    /// From the moment a PostgreSQL client binds the prepared statement `name` to run it (its Bind message:
    /// `B`, a length, an empty portal name, then `name`), nothing the server sends reaches a client: the
    /// server runs the statement, and its answer is lost. The statement's preparation (its Parse message,
    /// which names it too) is let through with its answer: a client prepares on a new connection first and
    /// binds only after.
    public func swallowReplies(onceClientBinds name: String) {
        let marker = [0] + Array(name.utf8) + [0]
        state.withLock { state in
            state.triggeredBy = nil
            state.trigger = { sent in
                let bytes = sent.bytes
                // Ending in the new bytes: a Bind the last read already carried has been seen.
                let first = max(5, sent.carried - marker.count + 1)
                guard bytes.count - marker.count >= first else { return false }
                for start in first...(bytes.count - marker.count) where bytes[start - 5] == UInt8(ascii: "B") {
                    if bytes[start..<(start + marker.count)].elementsEqual(marker) { return true }
                }
                return false
            }
        }
    }

    /// From the moment a client sends bytes containing `marker` (say, the text of a query), nothing the
    /// server sends reaches a client: the query reaches the server on a connection already leased, and its
    /// answer is lost.
    public func swallowReplies(onceClientSends marker: String) {
        let bytes = Array(marker.utf8)
        state.withLock { state in
            state.triggeredBy = nil
            state.trigger = { sent in sent.contains(bytes) }
        }
    }

    /// Once a client sends bytes containing `marker` (say, the text of a query), the server's answer to it
    /// reaches that client up to the end of its first `DataRow` message, and then the connection to the
    /// client is closed: the client reads part of a result and the end of the stream together, as when the
    /// server goes away (a crash, `pg_ctl stop -m immediate`) while a long result is on its way. Once.
    public func endAfterFirstRow(onceClientSends marker: String) {
        state.withLock { state in
            state.cutMarker = Array(marker.utf8)
            state.cutArmed = false
        }
    }

    /// Resets every connection and lets answers through again: clients reconnect.
    public func heal() async {
        let connections = state.withLock { state in
            state.swallowing = false
            state.trigger = nil
            state.triggeredBy = nil
            defer { state.connections = [] }
            return state.connections
        }
        for connection in connections { try? await connection.close() }
    }

    /// Lets the server's answers through again without resetting any connection (``heal()`` resets them):
    /// what was swallowed stays lost, so a connection that lost an answer must be gone by then.
    public func letRepliesThrough() {
        state.withLock { state in
            state.swallowing = false
            state.trigger = nil
        }
    }

    /// Closes the listener and every connection.
    public func stop() async {
        await heal()
        try? await listener.close()
    }

    /// Whether the server's answers are being swallowed now (a trigger set by
    /// ``swallowReplies(onceClientSends:)`` has fired).
    public var isSwallowing: Bool { state.withLock { $0.swallowing } }

    /// Whether the client connection that sent what began the swallowing (a trigger set by
    /// ``swallowReplies(onceClientSends:)`` or ``swallowReplies(onceClientBinds:)``) is still open; nil
    /// before the trigger fired (and again after ``heal()`` or a new trigger). A client that gives up on
    /// its query and closes its connection makes it false.
    public var triggeringConnectionIsOpen: Bool? {
        state.withLock { $0.triggeredBy }?.isActive
    }

    /// Called with each read of a client's bytes, before they are forwarded (with the end of the reads
    /// before it, so that a marker split across two reads is found): starts swallowing when the trigger
    /// says so.
    private func watch(_ sent: Sent, from client: any Channel) {
        state.withLock { state in
            if let marker = state.cutMarker, sent.contains(marker) {
                state.cutMarker = nil
                state.cutArmed = true
            }
            guard let trigger = state.trigger, trigger(sent) else { return }
            state.swallowing = true
            state.trigger = nil
            state.triggeredBy = client
        }
    }

    /// Whether the server's answers are to be cut after their first row now (and no longer afterwards).
    private func takeCut() -> Bool {
        state.withLock { state in
            defer { state.cutArmed = false }
            return state.cutArmed
        }
    }

    /// Connects `client` to the target, on the client's event loop, and relays both ways.
    private func relay(_ client: any Channel, to targetPort: Int) -> EventLoopFuture<Void> {
        let loop = client.eventLoop
        let toServer = NIOLoopBound(Relay(drop: { false }, watch: { [self] in self.watch($0, from: client) }), eventLoop: loop)
        do {
            try client.pipeline.syncOperations.addHandler(toServer.value)
        } catch {
            return loop.makeFailedFuture(error)
        }
        return ClientBootstrap(group: loop)
            .channelInitializer { [self] server in
                let toClient = Relay(drop: { [self] in self.isSwallowing }, watch: nil, cut: { [self] in self.takeCut() })
                toClient.partner = client
                return server.eventLoop.makeCompletedFuture { try server.pipeline.syncOperations.addHandler(toClient) }
            }
            .connect(host: "127.0.0.1", port: targetPort)
            .map { [self] server in
                toServer.value.connected(to: server)
                state.withLock { $0.connections += [client, server] }
            }
    }
}

/// Writes what its channel reads to the partner channel (unless `drop` says otherwise), and closes the
/// partner when its channel closes. Used on its channel's event loop only.
/// What a client sent in one read, after the last ``carried`` bytes of its reads before (a marker split
/// between two reads is whole here).
struct Sent {
    /// How many bytes of the earlier reads are kept in front of the next: longer than any marker.
    static let carry = 256
    var bytes: [UInt8]
    var carried: Int

    /// Whether `marker` ends in this read's own bytes (one that ended in the reads before was seen then).
    func contains(_ marker: [UInt8]) -> Bool {
        var rest = bytes[...]
        while let found = rest.firstRange(of: marker) {
            if found.upperBound > carried { return true }
            rest = bytes[(found.lowerBound + 1)...]
        }
        return false
    }
}

private final class Relay: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    let drop: @Sendable () -> Bool
    /// Sees every read, with the end of the reads before it, before it is forwarded (`nil`: the server's side).
    let watch: (@Sendable (Sent) -> Void)?
    /// The last ``Sent/carry`` bytes read.
    private var tail: [UInt8] = []
    /// Asked at each buffer from the server: whether to begin cutting the answer after its first row.
    let cut: @Sendable () -> Bool
    var partner: (any Channel)?
    /// What arrived before the partner was connected.
    private var waiting: [ByteBuffer] = []
    /// Cutting: the PostgreSQL messages read so far of the answer (from a message boundary: the client sent
    /// its query and waits).
    private var cutting: BackendMessages?

    init(
        drop: @escaping @Sendable () -> Bool,
        watch: (@Sendable (Sent) -> Void)?,
        cut: @escaping @Sendable () -> Bool = { false }
    ) {
        self.drop = drop
        self.watch = watch
        self.cut = cut
    }

    func connected(to partner: any Channel) {
        self.partner = partner
        for buffer in waiting { partner.write(buffer, promise: nil) }
        waiting = []
        partner.flush()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = unwrapInboundIn(data)
        if let watch {
            let sent = Sent(bytes: tail + buffer.readableBytesView, carried: tail.count)
            tail = Array(sent.bytes.suffix(Sent.carry))
            watch(sent)
        }
        if drop() { return }
        if cutting == nil, cut() { cutting = BackendMessages() }
        if cutting != nil, let partner {
            if let end = cutting!.endOfFirstDataRow(in: buffer) {
                // The answer up to its first row, then the end of the stream.
                let head = buffer.readSlice(length: end)!
                partner.writeAndFlush(head).whenComplete { _ in partner.close(promise: nil) }
                cutting = nil
                context.close(promise: nil)
            } else {
                partner.writeAndFlush(buffer, promise: nil)
            }
            return
        }
        if let partner {
            partner.writeAndFlush(buffer, promise: nil)
        } else {
            waiting.append(buffer)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        partner?.close(promise: nil)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}

/// Reads PostgreSQL backend messages (a type byte, then a 4-byte length that counts itself) across the buffers
/// of a stream, to find where the first `DataRow` (`D`) ends.
private struct BackendMessages {
    /// Bytes of the current message's header read so far (at most 5).
    private var header: [UInt8] = []
    /// Bytes of the current message's body still to come.
    private var remaining = 0
    private var inDataRow = false

    /// The offset in `buffer` just past the end of the first `DataRow`, or `nil` when it does not end in it.
    mutating func endOfFirstDataRow(in buffer: ByteBuffer) -> Int? {
        let bytes = Array(buffer.readableBytesView)
        var index = 0
        while index < bytes.count {
            if remaining > 0 {
                let taken = min(remaining, bytes.count - index)
                remaining -= taken
                index += taken
                if remaining == 0, inDataRow { return index }
                continue
            }
            header.append(bytes[index])
            index += 1
            guard header.count == 5 else { continue }
            let length = Int(header[1]) << 24 | Int(header[2]) << 16 | Int(header[3]) << 8 | Int(header[4])
            inDataRow = header[0] == UInt8(ascii: "D")
            remaining = length - 4
            header = []
            if remaining == 0, inDataRow { return index }
        }
        return nil
    }
}

/// A proxy that cannot be put in front of a server.
public enum TCPProxyError: Error {
    /// The URL names no port to proxy.
    case noPort(String)
}
