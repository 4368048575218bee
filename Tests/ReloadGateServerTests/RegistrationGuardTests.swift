import NIOCore
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

    /// The scheme's name in any case followed by one space, then the credential as sent; the registry API
    /// drops spaces and tabs around its key.
    @Test func aBearerCredentialFollowsTheSchemeInAnyCase() {
        #expect(KeyScope.bearerCredential("bearer rg_abc") == "rg_abc")
        #expect(KeyScope.bearerCredential("Bearer rg_abc") == "rg_abc")
        #expect(KeyScope.bearerCredential("BEARER  rg_abc\t") == " rg_abc\t")
        #expect(KeyScope.bearerCredential("bEaReR ") == "")
        // (A NUL byte is one bit from the space: only a letter is read in the other case.)
        for refused in [nil, "", "bearer", "bearerrg_abc", "bearer\trg_abc", "basic cmc6YWJj", "bearer\u{0}rg", "béarer rg_abc"] {
            #expect(KeyScope.bearerCredential(refused) == nil, "\(String(describing: refused))")
        }
        #expect(KeyScope.trimmed(" \t rg_abc \t") == "rg_abc")
        #expect(KeyScope.trimmed("rg_a b") == "rg_a b")
        #expect(KeyScope.trimmed(" \t ") == "")
        #expect(KeyScope.trimmed("") == "")
        #expect(KeyScope.trimmed(" é ") == "é")
        #expect(KeyScope(key: KeyScope.trimmed(KeyScope.bearerCredential("Bearer   rgr_x")!)) == .registration)
    }
}
