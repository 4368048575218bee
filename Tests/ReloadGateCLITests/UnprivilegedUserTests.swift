import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOSSL
import ReloadGateMockAPNs
import ReloadGateTesting
import Testing

/// The gateway as operators run it: as a user without privileges (the systemd unit's, the container
/// image's 10001). The tests otherwise run as root (CI), which hid a socket option that only root may set:
/// the APNs listener closed every connection after accepting it and the delivery pool could not connect to
/// Apple. Here `reloadgate serve` runs as `nobody` (setpriv) when the tests run as root, and as the tests'
/// own user otherwise; a push through the APNs listener with a provider token is answered 200 and reaches
/// the mock of Apple through the upstream connection.
@Suite(.timeLimit(.minutes(10)), .heavy)
struct UnprivilegedUserTests {
    static let bundle = "com.example.unprivileged"

    @Test func aGatewayRunAsAnUnprivilegedUserTakesPushesAndDeliversThemToApple() async throws {
        let directory = try TemporaryDirectory("unprivileged")
        defer { directory.remove() }
        let pki = try TestPKI(in: directory)
        let keyFile = directory.path("AuthKey.p8")
        let mock = try await MockAPNsServer.start(pki: pki, operatorKeyFile: keyFile, keyID: "NOBODYKEY1", teamID: "NOBODYTEAM")
        defer { Task { await mock.stop() } }

        let sender = ProviderTokenFactory(keyID: "SENDERKEY1", teamID: "SENDERTEAM")
        let senderKey = directory.path("sender.pem")
        try sender.publicKeyPEM.write(toFile: senderKey, atomically: true, encoding: .utf8)
        for arguments in [
            ["apps", "add", Self.bundle, "--team", sender.teamID],
            ["keys", "add", "--kid", sender.keyID, "--team", sender.teamID, "--public-key", senderKey],
        ] {
            let result = try await ReloadGateProcess.run(arguments, in: directory.url)
            try #require(result.status == 0, "\(arguments): \(result.stderr)")
        }

        var environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("RELOADGATE_") }
        environment.merge(mock.upstreamEnvironment(keyFile: keyFile, caFile: pki.caCertificatePath)) { $1 }
        environment.merge(["RELOADGATE_LISTEN_PORT": "0", "RELOADGATE_INGRESS_PORT": "0"]) { $1 }
        let binary = try ReloadGateProcess.binaryURL
        let child: ChildProcess
        if geteuid() == 0 {
            // Everything the gateway reads and writes belongs to nobody, as /var/lib/reloadgate belongs to
            // the image's user.
            let chown = try ChildProcess(URL(fileURLWithPath: "/bin/chown"), ["-R", "65534:65534", directory.url.path], in: directory.url)
            try #require(try await chown.waitForExit() == 0, "chown: \(chown.standardError)")
            let setpriv = URL(fileURLWithPath: "/usr/bin/setpriv")
            try #require(FileManager.default.isExecutableFile(atPath: setpriv.path), "util-linux's setpriv is needed")
            child = try ChildProcess(
                setpriv, ["--reuid=65534", "--regid=65534", "--clear-groups", "--", binary.path, "serve"], in: directory.url, environment: environment
            )
        } else {
            child = try ChildProcess(binary, ["serve"], in: directory.url, environment: environment)
        }
        defer { child.send(SIGKILL) }
        let apiLine = try await child.waitForOutputLine(containing: "listening on")
        let apnsLine = try await child.waitForOutputLine(containing: "APNs pushes to")
        let api = try #require(apiLine.firstMatch(of: /127\.0\.0\.1:(\d+)/).map { String($0.1) })
        let apns = try #require(apnsLine.firstMatch(of: /127\.0\.0\.1:(\d+)/).map { String($0.1) })

        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(directory.path("certs/ca.pem")))
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: .init(tlsConfiguration: tls))
        do {
            let health = try await client.execute(HTTPClientRequest(url: "https://localhost:\(api)/health"), timeout: .seconds(30))
            #expect(health.status == .ok)

            let token = String(repeating: "ab", count: 32)
            var push = HTTPClientRequest(url: "https://localhost:\(apns)/3/device/\(token)")
            push.method = .POST
            push.headers.add(name: "authorization", value: "bearer \(sender.token())")
            push.headers.add(name: "apns-topic", value: "\(Self.bundle).push-type.widgets")
            push.headers.add(name: "apns-push-type", value: "widgets")
            push.body = .bytes(ByteBuffer(string: #"{"aps":{"content-changed":true}}"#))
            let answer = try await client.execute(push, timeout: .seconds(30))
            let body = try await answer.body.collect(upTo: 1 << 16)
            #expect(answer.status == .ok, "\(String(buffer: body)); \(child.standardError)")
        } catch {
            try? await client.shutdown()
            Issue.record("\(error); the gateway's log: \(child.standardError)")
            return
        }
        try await client.shutdown()

        // The push's reload reaches Apple (the mock) over the gateway's own upstream connection.
        _ = try await eventually(every: .milliseconds(50)) { !mock.received.isEmpty }
        #expect(mock.received.count == 1, "nothing reached the mock; the gateway's log: \(child.standardError)")
        #expect(mock.received.first?.path == "/3/device/" + String(repeating: "ab", count: 32))

        child.send(SIGTERM)
        #expect(try await child.waitForExit() == 0)
    }
}
