import Foundation
import NIOCore
import NIOPosix

/// A listener cannot have its address: taken (another gateway?) or not an address of this host. Names the
/// configuration key to change.
public struct ListenerAddressUnavailable: Error, CustomStringConvertible {
    public let key: String
    public let host: String
    public let port: Int
    /// `nil`: the address is in use.
    public let reason: String?

    public init(key: String, host: String, port: Int, reason: String?) {
        self.key = key
        self.host = host
        self.port = port
        self.reason = reason
    }

    public var description: String {
        let variable = ConfigurationKey.named(key)?.environmentVariable ?? key
        let why = reason ?? "the address is in use (another gateway?)"
        return "cannot listen on \(host):\(port): \(why); set \(key) or \(variable)"
    }
}

/// Checks, before anything starts, that every configured TCP listener can bind its address: each is
/// bound once (as the listener will be, with SO_REUSEADDR) and let go. So a taken port is one clear error
/// and exit status 1, not a gateway that announced some listeners, started its services and tore them down
/// again. (The listeners still handle a port taken in the moment between.)
enum ListenerAddresses {
    static func check(_ configuration: GatewayConfiguration) async throws(ListenerAddressUnavailable) {
        var addresses = [
            ("listen.port", configuration.listen.host, configuration.listen.port),
            ("ingress.port", configuration.ingress.host, configuration.ingress.port),
        ]
        if configuration.admin.tls { addresses.append(("admin.port", configuration.admin.host, configuration.admin.port)) }
        for (key, host, port) in addresses where port != 0 {
            do {
                let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                    .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                    .bind(host: host, port: port)
                    .get()
                try? await channel.close()
            } catch let error as IOError where error.errnoCode == EADDRINUSE {
                throw ListenerAddressUnavailable(key: key, host: host, port: port, reason: nil)
            } catch {
                let hostKey = key.replacingOccurrences(of: ".port", with: ".host")
                let reason = (error as? IOError).map { String(cString: strerror($0.errnoCode)).lowercased() } ?? "\(error)"
                throw ListenerAddressUnavailable(key: hostKey, host: host, port: port, reason: reason)
            }
        }
    }
}
