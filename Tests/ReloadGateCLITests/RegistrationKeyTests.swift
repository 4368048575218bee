import AsyncHTTPClient
import Foundation
import NIOHTTP1
import ReloadGateCore
import ReloadGateServer
import ReloadGateStore
import ReloadGateTesting
import Testing

/// An app's registration key (the one that may ship inside the app) through a running gateway over TLS:
/// it registers the app's devices, controls, activities and timelines; everything else answers 403 naming
/// its scope; past its limits it answers 429 with `retry-after`; `apps rotate-key --registration` makes
/// the old one 401 at once.
@Suite(.heavy)
struct RegistrationKeyTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let bundle = "com.example.scores"
    static func token(_ byte: String) -> String { String(repeating: byte, count: 32) }

    @Test func theKeyRegistersItsAppAndNothingElseWithinItsLimits() async throws {
        let directory = try TemporaryDirectory("registration-key")
        defer { directory.remove() }
        let credentials = try await ProviderTokenFactory(keyID: "REGKEY0001", teamID: "REGTEAM001")
            .createApp(bundle: Self.bundle, inStoreAt: directory.path("data"))
        let other = try await ProviderTokenFactory(keyID: "REGKEY0002", teamID: "REGTEAM002")
            .createApp(bundle: "com.example.news", inStoreAt: directory.path("data"))
        let key = credentials.registrationKey
        #expect(key.hasPrefix("rgr_") && key.count > 40)
        #expect(other.registrationKey != key)

        try await TestGateway.withRunning(in: directory, configure: { configuration in
            configuration.registration.requestsPerMinute = 3
            configuration.registration.newDevicesPerMinute = 3
        }) { gateway in
            let socket = gateway.configuration.adminSocketPath
            try await gateway.withHTTPClient { client in
                let api = GatewayAPIClient(client: client, baseURL: gateway.baseURL)
                let widgets: [[String: Any]] = [["id": "w1", "kind": "scores", "family": "systemSmall"], ["id": "w2", "kind": "news", "family": "systemMedium"]]
                // What it may do: three new tokens (the app's cap), and a timeline.
                #expect(try await api.putDevice(bundle: Self.bundle, token: Self.token("a1"), apiKey: key, widgets: widgets).status == 200)
                #expect(try await api.putControl(bundle: Self.bundle, token: Self.token("c1"), apiKey: key, kind: "garage").status == 200)
                #expect(try await api.putActivity(bundle: Self.bundle, token: Self.token("d1"), apiKey: key, attributesType: "DeliveryAttributes").status == 200)
                let timeline = try await api.putTimeline(
                    bundle: Self.bundle, token: Self.token("a1"), widget: "w1", apiKey: key, entries: [Date()],
                    policy: ["after": Date().addingTimeInterval(1800).timeIntervalSince1970]
                )
                #expect(timeline.status == 200, "\(timeline.body)")

                // A fourth new token in the minute: 429, nothing written.
                let fourth = try await api.putDevice(bundle: Self.bundle, token: Self.token("e1"), apiKey: key, widgets: widgets)
                #expect(fourth.status == 429, "\(fourth.body)")
                #expect(fourth.body.contains("registration.newDevicesPerMinute"))
                #expect(Int(fourth.header("retry-after") ?? "").map { (1...60).contains($0) } == true, "\(fourth.headers)")
                // The API key is not limited: the same token goes with it.
                #expect(try await api.putDevice(bundle: Self.bundle, token: Self.token("e1"), apiKey: credentials.apiKey, widgets: widgets).status == 200)

                // A third call for one token in the minute is fine, a fourth is 429.
                #expect(try await api.putDevice(bundle: Self.bundle, token: Self.token("a1"), apiKey: key, widgets: widgets).status == 200)
                let again = try await api.putDevice(bundle: Self.bundle, token: Self.token("a1"), apiKey: key, widgets: widgets)
                #expect(again.status == 429, "\(again.body)")
                #expect(again.body.contains("registration.requestsPerMinute"))

                // What it may not do: read, the webhook, another app; each 403 naming the key's scope.
                let read = try await api.send(.GET, "/v1/apps/\(Self.bundle)/configurations", headers: ["authorization": "bearer \(key)"])
                #expect(read.status == 403 && read.body.contains("registration key"), "\(read.body)")
                let hook = try await api.send(
                    .POST, "/v1/apps/\(Self.bundle)/reloads", body: Data(#"{"kind":"scores"}"#.utf8),
                    headers: ["authorization": "bearer \(key)", "content-type": "application/json"]
                )
                #expect(hook.status == 403 && hook.body.contains("registration key"), "\(hook.body)")
                // Refused by its look, without a lookup: a made-up registration key too.
                let madeUp = try await api.send(
                    .POST, "/v1/apps/\(Self.bundle)/reloads", body: Data(#"{"kind":"scores"}"#.utf8),
                    headers: ["authorization": "bearer rgr_made-up", "content-type": "application/json"]
                )
                #expect(madeUp.status == 403 && madeUp.body.contains("webhook is signed"), "\(madeUp.body)")
                let elsewhere = try await api.putDevice(bundle: "com.example.news", token: Self.token("f1"), apiKey: key, widgets: widgets)
                #expect(elsewhere.status == 403 && elsewhere.body.contains("registration key belongs to another app"), "\(elsewhere.body)")
                // The device it made is there, as registered (read with the API key).
                let listed = try await api.send(.GET, "/v1/apps/\(Self.bundle)/configurations", headers: ["authorization": "bearer \(credentials.apiKey)"])
                #expect(listed.status == 200 && listed.body.contains("garage"), "\(listed.body)")

                // A new registration key: the old one is 401 at once, the new one registers.
                let rotated = try await ReloadGateProcess.run(["apps", "rotate-key", Self.bundle, "--registration", "--json", "--socket", socket], in: Self.root)
                try #require(rotated.status == 0, "\(rotated.stderr)")
                let answer = try #require(try JSONSerialization.jsonObject(with: Data(rotated.stdout.utf8)) as? [String: Any])
                let newKey = try #require(answer["registrationKey"] as? String)
                #expect(answer["apiKey"] is NSNull, "the API key is kept: \(answer)")
                #expect(newKey.hasPrefix("rgr_") && newKey != key)
                #expect(try await api.putDevice(bundle: Self.bundle, token: Self.token("b1"), apiKey: key, widgets: widgets).status == 401)
                #expect(try await api.putDevice(bundle: Self.bundle, token: Self.token("b1"), apiKey: credentials.apiKey, widgets: widgets).status == 200, "the API key still works")
                #expect(try await api.send(.DELETE, "/v1/apps/\(Self.bundle)/devices/\(Self.token("b1"))", headers: ["authorization": "bearer \(newKey)"]).status == 204)
            }
        }
    }

    /// One client address walking through made-up tokens is stopped by the per-address limit, whatever
    /// the tokens; the API key is not limited by it.
    @Test func oneAddressIsLimitedWhateverTheTokens() async throws {
        let directory = try TemporaryDirectory("registration-address")
        defer { directory.remove() }
        let credentials = try await ProviderTokenFactory(keyID: "REGKEY0003", teamID: "REGTEAM003")
            .createApp(bundle: Self.bundle, inStoreAt: directory.path("data"))
        try await TestGateway.withRunning(in: directory, configure: { configuration in
            configuration.registration.requestsPerAddressPerMinute = 4
        }) { gateway in
            try await gateway.withHTTPClient { client in
                let api = GatewayAPIClient(client: client, baseURL: gateway.baseURL)
                let widgets: [[String: Any]] = [["id": "w1", "kind": "scores", "family": "systemSmall"]]
                for byte in ["01", "02", "03", "04"] {
                    let put = try await api.putDevice(bundle: Self.bundle, token: Self.token(byte), apiKey: credentials.registrationKey, widgets: widgets)
                    #expect(put.status == 200, "\(put.body)")
                }
                let fifth = try await api.putDevice(bundle: Self.bundle, token: Self.token("05"), apiKey: credentials.registrationKey, widgets: widgets)
                #expect(fifth.status == 429 && fifth.body.contains("registration.requestsPerAddressPerMinute"), "\(fifth.body)")
                #expect(Int(fifth.header("retry-after") ?? "").map { (1...60).contains($0) } == true, "\(fifth.headers)")
                let listed = try await api.send(.GET, "/v1/apps/\(Self.bundle)/configurations", headers: ["authorization": "bearer \(credentials.apiKey)"])
                #expect(listed.status == 200)
                #expect(try await api.putDevice(bundle: Self.bundle, token: Self.token("05"), apiKey: credentials.apiKey, widgets: widgets).status == 200)
            }
        }
    }
}
