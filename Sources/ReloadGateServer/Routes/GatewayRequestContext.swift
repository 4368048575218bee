public import Hummingbird
public import NIOCore

/// The request context of the gateway's HTTP APIs: Hummingbird's, and the client's address (the
/// registration key's per-address limit, ``RegistrationGuard``).
public struct GatewayRequestContext: RequestContext, RemoteAddressRequestContext {
    public var coreContext: CoreRequestContextStorage
    /// The connection's peer (a proxy's address when the gateway is behind one).
    public let remoteAddress: SocketAddress?

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        remoteAddress = source.channel.remoteAddress
    }
}
