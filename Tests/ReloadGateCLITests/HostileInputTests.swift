import ReloadGateCore
import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOSSL
import ReloadGateHostileInput
import ReloadGateTesting
import Testing

/// The release binary's process, fed what killed it (issue 15) and every hostile spelling of a number at
/// every place a number comes in from the network: the webhook's signature time, priority and
/// expiration; timeline dates and `after`; configuration values; `apns-expiration`, `apns-priority` and a
/// provider token's `iat`; the admin API's `limit` and `dueBefore`. Each answer is a 2xx or a 4xx, and
/// the process is alive and serving at the end. A trap anywhere would end the process (for every tenant),
/// which is what these tests watch for.
@Suite(.serialized, .timeLimit(.minutes(10)), .heavy)
struct HostileInputTests {
    static let bundle = "com.example.scores"
    static let device = String(repeating: "9f", count: 32)
    static let topic = bundle + ".push-type.widgets"
    static let body = Array(#"{"aps":{"content-changed":true}}"#.utf8)

    /// The binary, serving, with an app of team TEAM000001, its provider key added, and one device with
    /// one widget.
    struct Gateway {
        let directory: TemporaryDirectory
        let process: ReloadGateProcess
        let apiPort: Int
        let ingressPort: Int
        let apiKey: String
        let secret: String
        let sender: ProviderTokenFactory
        let tls: TLSConfiguration
        let api: GatewayAPIClient

        /// `/health` answers 200 and the process has not exited.
        func isAlive() async throws -> Bool {
            try await api.send(.GET, "/health").status == 200
        }

        func pushConnection() async throws -> RawHTTP2Client {
            try await RawHTTP2Client.connect(port: ingressPort, tls: tls)
        }

        func fields(_ extra: [(String, String)] = [], token: String? = nil) -> [(String, String)] {
            [("authorization", "bearer \(token ?? sender.token())"), ("apns-topic", HostileInputTests.topic), ("apns-push-type", "widgets")] + extra
        }

        /// A request to the admin API on its Unix socket.
        func admin(_ path: String) async throws -> Int {
            let socket = directory.path("data/admin.sock")
            let url = try #require(URL(httpURLWithSocketPath: socket, uri: path), "\(path)")
            let client = HTTPClient(eventLoopGroupProvider: .singleton)
            defer { _ = client.shutdown() }
            let response = try await client.execute(HTTPClientRequest(url: url.absoluteString), timeout: .seconds(30))
            _ = try await response.body.collect(upTo: 1 << 20)
            return Int(response.status.code)
        }
    }

    static func withGateway(environment: [String: String] = [:], addKey: Bool = true, _ body: (Gateway) async throws -> Void) async throws {
        let directory = try TemporaryDirectory("hostile")
        defer { directory.remove() }
        let added = try await ReloadGateProcess.run(["apps", "add", bundle, "--team", "TEAM000001", "--json"], in: directory.url)
        try #require(added.status == 0, "\(added.stderr)")
        let app = try #require(try JSONSerialization.jsonObject(with: Data(added.stdout.utf8)) as? [String: Any])
        let sender = ProviderTokenFactory(keyID: "KEY0000001", teamID: "TEAM000001")
        try sender.publicKeyPEM.write(toFile: directory.path("key.pem"), atomically: true, encoding: .utf8)

        let process = try ReloadGateProcess(
            ["serve"],
            in: directory.url,
            environment: ["RELOADGATE_LISTEN_PORT": "0", "RELOADGATE_INGRESS_PORT": "0"].merging(environment) { $1 }
        )
        let apnsLine = try await process.waitForOutputLine(containing: "APNs pushes to")
        let apiLine = try await process.waitForOutputLine(containing: "listening on")
        let ingressPort = try #require(apnsLine.firstMatch(of: /127\.0\.0\.1:(\d+)/).flatMap { Int($0.1) })
        let apiPort = try #require(apiLine.firstMatch(of: /127\.0\.0\.1:(\d+)/).flatMap { Int($0.1) })
        if addKey {
            let key = try await ReloadGateProcess.run(
                ["keys", "add", "--kid", sender.keyID, "--team", sender.teamID, "--public-key", "key.pem"], in: directory.url
            )
            try #require(key.status == 0, "\(key.stderr)")
        }

        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(directory.path("certs/ca.pem")))
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: .init(tlsConfiguration: tls))
        let result: Result<Void, any Error>
        do {
            let api = GatewayAPIClient(client: client, baseURL: "https://localhost:\(apiPort)")
            let apiKey = try #require(app["apiKey"] as? String)
            let registered = try await api.putDevice(
                bundle: bundle, token: device, apiKey: apiKey,
                widgets: [["id": "w", "kind": "scores", "family": "systemSmall", "configuration": ["team": "42"]]]
            )
            try #require(registered.status == 200, "\(registered.body)")
            let gateway = Gateway(
                directory: directory, process: process, apiPort: apiPort, ingressPort: ingressPort, apiKey: apiKey,
                secret: try #require(app["webhookSecret"] as? String), sender: sender, tls: tls, api: api
            )
            result = .success(try await body(gateway))
        } catch {
            result = .failure(error)
        }
        try? await client.shutdown()
        process.send(SIGTERM)
        let status = try await process.waitForExit()
        try result.get()
        #expect(status == 0, "\(process.standardError.suffix(2000))")
    }

    /// Whether `status` is an answer a hostile input may get: success or the sender's fault.
    static func isAcceptable(_ status: Int) -> Bool {
        (200..<300).contains(status) || (400..<500).contains(status)
    }

    // MARK: What killed the gateway

    @Test func theInputsThatKilledTheGatewayGetA4xxAndItServesOn() async throws {
        try await Self.withGateway { gateway in
            // The webhook's signature time at Int64.min, without any credential.
            let signed = try await gateway.api.reload(
                bundle: Self.bundle, body: #"{"kind":"scores"}"#, secret: "",
                signature: "t=-9223372036854775808,v1=" + String(repeating: "ab", count: 32)
            )
            #expect(signed.status == 401, "\(signed.body)")
            #expect(try await gateway.isAlive())

            // apns-expiration: Int64.max (its milliseconds overflowed).
            let client = try await gateway.pushConnection()
            let push = try await client.send(
                RawHTTP2Client.push(token: Self.device, gateway.fields([("apns-expiration", "9223372036854775807")])), body: Self.body
            )
            #expect(push.status == 400 && push.reason == "BadExpirationDate", "\(push.body)")
            await client.close()
            #expect(try await gateway.isAlive())

            // Timeline dates and `after` of 1e300 and -1e18 (Double to Int64 trapped).
            let timelinePath = "/v1/apps/\(Self.bundle)/devices/\(Self.device)/widgets/w/timeline"
            for timeline in [
                #"{"entries":[{"date":1e300}],"policy":"atEnd"}"#, #"{"entries":[{"date":-1e18}],"policy":"atEnd"}"#,
                #"{"entries":[],"policy":{"after":1e300}}"#, #"{"entries":[],"policy":{"after":-1e18}}"#,
            ] {
                let answer = try await gateway.api.send(
                    .PUT, timelinePath, body: Data(timeline.utf8), headers: ["authorization": "bearer \(gateway.apiKey)"]
                )
                #expect(answer.status == 422, "\(timeline): \(answer.body)")
            }
            #expect(try await gateway.isAlive())

            // A correctly signed webhook with `expiration` 1e300.
            let expiring = try await gateway.api.reload(bundle: Self.bundle, body: #"{"kind":"scores","expiration":1e300}"#, secret: gateway.secret)
            #expect(expiring.status == 422, "\(expiring.body)")

            // Still serving: a valid push and a valid webhook go through.
            let next = try await gateway.pushConnection()
            #expect(try await next.send(RawHTTP2Client.push(token: Self.device, gateway.fields()), body: Self.body).status == 200)
            await next.close()
            #expect(try await gateway.api.reload(bundle: Self.bundle, body: #"{"kind":"scores"}"#, secret: gateway.secret).status == 202)
        }
    }

    // MARK: Every place a number comes in

    /// Every hostile spelling, and as many random ones from a fixed seed, at each place: never a 5xx,
    /// never a closed connection, and the process serves on.
    @Test func everyHostileNumberAtEveryPlaceGetsA2xxOrA4xx() async throws {
        var generator = SplitMix64(seed: 15)
        let spellings = HostileNumbers.all + (0..<60).map { _ in HostileNumbers.random(using: &generator) }
        try await Self.withGateway(environment: ["RELOADGATE_INGRESS_REQUESTS_PER_SECOND_PER_TOKEN": "100000"]) { gateway in
            var failures: [String] = []
            func check(_ place: String, _ spelling: String, _ status: Int) {
                if !Self.isAcceptable(status) { failures.append("\(place) \(spelling): \(status)") }
            }
            let client = try await gateway.pushConnection()
            defer { Task { await client.close() } }
            let headerSafe = spellings.filter { !$0.contains("\u{0}") }
            for spelling in headerSafe {
                for name in ["apns-expiration", "apns-priority"] {
                    let answer = try await client.send(RawHTTP2Client.push(token: Self.device, gateway.fields([(name, spelling)])), body: Self.body)
                    check(name, spelling, answer.status)
                }
                // The token's iat, bare and quoted: a fresh connection each (a connection keeps its first team's token).
                for iat in [spelling, "\"\(spelling)\""] {
                    let fresh = try await gateway.pushConnection()
                    let answer = try await fresh.send(
                        RawHTTP2Client.push(token: Self.device, gateway.fields(token: gateway.sender.token(iatJSON: iat))), body: Self.body
                    )
                    await fresh.close()
                    check("iat", iat, answer.status)
                }
                let signature = try await gateway.api.reload(
                    bundle: Self.bundle, body: "{}", secret: gateway.secret, signature: "t=\(spelling),v1=" + String(repeating: "0f", count: 32)
                )
                check("signature t", spelling, signature.status)
                if let query = spelling.addingPercentEncoding(withAllowedCharacters: .alphanumerics) {
                    check("admin limit", spelling, try await gateway.admin("/v1/pending?limit=\(query)"))
                    check("admin devices limit", spelling, try await gateway.admin("/v1/devices?limit=\(query)"))
                    check("admin dueBefore", spelling, try await gateway.admin("/v1/pending?dueBefore=\(query)"))
                    check("admin explain", spelling, try await gateway.admin("/v1/explain/\(query)"))
                }
            }
            let timelinePath = "/v1/apps/\(Self.bundle)/devices/\(Self.device)/widgets/w/timeline"
            for spelling in spellings {
                let json = spelling.replacingOccurrences(of: "\u{0}", with: "\\u0000")
                for body in [
                    #"{"kind":"scores","priority":\#(json)}"#, #"{"kind":"scores","expiration":\#(json)}"#,
                    #"{"kind":"scores","match":{"team":\#(json)}}"#,
                ] {
                    check("webhook \(body)", spelling, try await gateway.api.reload(bundle: Self.bundle, body: body, secret: gateway.secret).status)
                }
                for body in [#"{"entries":[{"date":\#(json)}],"policy":"atEnd"}"#, #"{"entries":[],"policy":{"after":\#(json)}}"#] {
                    let answer = try await gateway.api.send(.PUT, timelinePath, body: Data(body.utf8), headers: ["authorization": "bearer \(gateway.apiKey)"])
                    check("timeline \(body)", spelling, answer.status)
                }
                let widgets = #"{"widgets":[{"id":"w","kind":"scores","family":"systemSmall","configuration":{"team":"42","n":\#(json)}}]}"#
                let device = try await gateway.api.send(
                    .PUT, "/v1/apps/\(Self.bundle)/devices/\(Self.device)", body: Data(widgets.utf8), headers: ["authorization": "bearer \(gateway.apiKey)"]
                )
                check("configuration", spelling, device.status)
            }
            #expect(failures.isEmpty, "\(failures.prefix(20).joined(separator: "\n"))")
            #expect(try await gateway.isAlive())
        }
    }

    // MARK: Keys and the debug log

    /// A token refused because its key is unknown works for the very next push once `reloadgate keys add`
    /// returns, and stops at once after `keys remove`. Each refusal is a debug line with the reason, the
    /// detail, the kid, the team and the connection, never the token.
    @Test func aKeyTakesEffectForTheNextPushAndRefusalsAreLoggedWithoutTheToken() async throws {
        try await Self.withGateway(environment: ["RELOADGATE_LOG_LEVEL": "debug"], addKey: false) { gateway in
            let token = gateway.sender.token()
            func push() async throws -> RawHTTP2Client.Answer {
                let client = try await gateway.pushConnection()
                defer { Task { await client.close() } }
                return try await client.send(RawHTTP2Client.push(token: Self.device, gateway.fields(token: token)), body: Self.body)
            }
            for _ in 0..<2 {
                let refused = try await push()
                #expect(refused.status == 403 && refused.reason == "InvalidProviderToken", "\(refused.body)")
            }
            let added = try await ReloadGateProcess.run(
                ["keys", "add", "--kid", gateway.sender.keyID, "--team", gateway.sender.teamID, "--public-key", "key.pem"], in: gateway.directory.url
            )
            #expect(added.status == 0, "\(added.stderr)")
            let accepted = try await push()
            #expect(accepted.status == 200, "\(accepted.body)")
            let removed = try await ReloadGateProcess.run(["keys", "remove", gateway.sender.keyID], in: gateway.directory.url)
            #expect(removed.status == 0, "\(removed.stderr)")
            let gone = try await push()
            #expect(gone.status == 403 && gone.reason == "InvalidProviderToken", "\(gone.body)")

            try await Task.sleep(for: .milliseconds(200))
            let log = gateway.process.standardError
            let refusals = log.split(separator: "\n").filter { $0.contains("push refused") }
            #expect(refusals.count >= 3, "\(log.suffix(3000))")
            for line in refusals {
                #expect(line.contains("InvalidProviderToken"), "\(line)")
                #expect(line.contains("KEY0000001") && line.contains("TEAM000001"), "\(line)")
                #expect(line.contains("connection=") && line.contains("127.0.0.1"), "\(line)")
                #expect(line.contains("no key KEY0000001 is registered"), "\(line)")
            }
            // Neither the token nor its signature appears anywhere in the log.
            let signature = try #require(token.split(separator: ".").last)
            #expect(!log.contains(String(signature)))
            #expect(!log.contains(token))
        }
    }

    // MARK: Fuzz corpora

    /// Each fuzz target's committed corpus, replayed through its entry point in a plain build: the same
    /// code the fuzzer drives, no crash.
    @Test(arguments: ["push-head", "provider-token", "webhook-signature", "api-bodies", "push-payload"])
    func theFuzzCorporaReplayWithoutACrash(_ target: String) async throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let corpus = root.appendingPathComponent("Fuzz/Corpus/\(target)")
        let files = try FileManager.default.contentsOfDirectory(atPath: corpus.path)
        #expect(files.count >= 5)
        let binary = try ReloadGateProcess.binaryURL.deletingLastPathComponent().appendingPathComponent("fuzz-\(target)")
        let result = try await ChildProcess.run(binary.path, [corpus.path], in: root, timeout: .seconds(120))
        #expect(result.status == 0, "\(result.error.suffix(2000))")
        #expect(result.output.contains("replayed \(files.count) input(s)"), "\(result.output)")
    }
}
