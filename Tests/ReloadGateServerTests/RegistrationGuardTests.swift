import NIOCore
import ReloadGateCore
@testable import ReloadGateServer
import Testing

/// What the registration key's per-address limit counts a client by, and how a bearer key is read.
struct RegistrationGuardTests {
    @Test func anIPv6ClientIsCountedByItsSlash64AndAnIPv4ByItsAddress() throws {
        let a = try SocketAddress(ipAddress: "2001:db8:1:2:aaaa::1", port: 4431)
        let b = try SocketAddress(ipAddress: "2001:db8:1:2:ffff:1:2:3", port: 80)
        let c = try SocketAddress(ipAddress: "2001:db8:1:3::1", port: 80)
        #expect(RegistrationGuard.addressKey(a) == "2001:db8:1:2::/64")
        #expect(RegistrationGuard.addressKey(a) == RegistrationGuard.addressKey(b), "one /64")
        #expect(RegistrationGuard.addressKey(a) != RegistrationGuard.addressKey(c))
        #expect(RegistrationGuard.addressKey(try SocketAddress(ipAddress: "192.0.2.7", port: 1)) == "192.0.2.7")
        #expect(RegistrationGuard.addressKey(try SocketAddress(ipAddress: "::ffff:192.0.2.7", port: 1)) == "192.0.2.7")
        #expect(RegistrationGuard.addressKey(nil) == nil)
    }

    /// The registry API reads a key as every listener reads a bearer credential (``HeaderValue``), without
    /// the spaces and tabs around it; a registration key is known by its look.
    @Test func aRegistrationKeyIsKnownInABearerFieldOfAnyCase() {
        #expect(KeyScope(key: HeaderValue.trimmed(HeaderValue.bearerCredential("Bearer   rgr_x")!)) == .registration)
        #expect(KeyScope(key: HeaderValue.trimmed(HeaderValue.bearerCredential("BEARER rgr_x\t")!)) == .registration)
    }
}
