import NIOCore

/// The listeners' timeouts (`listen.headerTimeout`, `listen.bodyTimeout`, `listen.idleTimeout`), as NIO
/// time amounts (docs/DECISIONS.md, "Every connection state has a deadline").
struct ConnectionTimeouts: Sendable {
    /// A new connection's TLS handshake and first request headers; a later request's headers.
    var header: TimeAmount
    /// From a request's headers to the end of its body.
    var body: TimeAmount
    /// Between requests, when the handler that knows it keeps it (`nil`: the framework's own).
    var idle: TimeAmount?

    init(_ listen: GatewayConfiguration.Listen, keepsIdle: Bool) {
        header = .seconds(Int64(listen.headerTimeout))
        body = .seconds(Int64(listen.bodyTimeout))
        idle = keepsIdle ? .seconds(Int64(listen.idleTimeout)) : nil
    }

    init(header: TimeAmount, body: TimeAmount, idle: TimeAmount?) {
        self.header = header
        self.body = body
        self.idle = idle
    }
}
