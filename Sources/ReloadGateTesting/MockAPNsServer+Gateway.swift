import Crypto
import Foundation
public import ReloadGateMockAPNs
public import ReloadGateServer
import Synchronization

extension MockAPNsServer {
    /// Starts the mock with the test server certificate, checking tokens of a new operator key whose
    /// `.p8` is written to `keyFile` (what a gateway's `upstream.keyFile` names).
    public static func start(pki: TestPKI, operatorKeyFile keyFile: String, keyID: String, teamID: String) async throws -> MockAPNsServer {
        HeavyTest.expectTurn("the mock of Apple (MockAPNsServer.start)")
        let key = P256.Signing.PrivateKey()
        try key.pemRepresentation.write(toFile: keyFile, atomically: true, encoding: .utf8)
        return try await start(tls: try pki.serverTLSConfiguration(), key: .init(publicKey: key.publicKey, keyID: keyID, teamID: teamID))
    }

    /// The gateway's `upstream` section for delivering to this mock: `apns` at its URL, the operator key
    /// in `keyFile`, trusting `caFile`.
    public func upstream(keyFile: String, caFile: String) -> GatewayConfiguration.Upstream {
        var upstream = GatewayConfiguration.Upstream()
        upstream.kind = .apns
        upstream.url = url
        upstream.keyFile = keyFile
        upstream.keyID = tokenKey.keyID
        upstream.teamID = tokenKey.teamID
        upstream.caFile = caFile
        return upstream
    }

    /// The same as `RELOADGATE_UPSTREAM_*` variables, for a `reloadgate serve` process.
    public func upstreamEnvironment(keyFile: String, caFile: String) -> [String: String] {
        [
            "RELOADGATE_UPSTREAM_KIND": "apns", "RELOADGATE_UPSTREAM_URL": url, "RELOADGATE_UPSTREAM_KEY_FILE": keyFile,
            "RELOADGATE_UPSTREAM_KEY_ID": tokenKey.keyID, "RELOADGATE_UPSTREAM_TEAM_ID": tokenKey.teamID,
            "RELOADGATE_UPSTREAM_CA_FILE": caFile,
        ]
    }
}

/// A counter shared between a test and a mock's answer rule (which runs on the mock's event loop).
public final class SharedCounter: Sendable {
    private let value = Mutex(0)

    public init() {}

    /// 0, 1, 2, ...
    public func next() -> Int {
        value.withLock { value in
            defer { value += 1 }
            return value
        }
    }
}
