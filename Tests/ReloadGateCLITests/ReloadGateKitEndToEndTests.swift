import AsyncHTTPClient
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import NIOCore
import NIOHTTP1
import ReloadGateCore
import ReloadGateKit
import ReloadGateServer
import ReloadGateStore
import ReloadGateTesting
import Testing

/// The app-side package against a real gateway over TLS, as an app and its widget extension use it:
/// the registration key registers a device with two widgets and a control and reports a timeline; a push
/// to the device is then decided against those widgets, the one a timeline reload covers `absorbed`.
/// Reports made while the gateway is down arrive once it is back, in order, once each.
///
/// URLSession on Linux trusts only the system's certificates, so the package's client goes through
/// AsyncHTTPClient here (``HTTPClientTransport``), trusting the test's certificate authority; the client's
/// own logic (paths, bodies, key, retries, queue) is the package's.
@Suite(.heavy)
struct ReloadGateKitEndToEndTests {
    static let bundle = "com.example.scores"
    static let deviceToken = Data((0..<32).map { UInt8($0 * 7 & 0xff) })
    static let controlToken = Data((0..<32).map { UInt8(255 - $0) })
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    struct Widget: WidgetDescribing {
        var kind: String
        var familyName: String
        var team: String?
    }

    struct Control: ControlDescribing {
        var kind: String
        var pushTokenData: Data?
    }

    static let mapping = RegistryMapping<Widget, Control>(
        widgetConfiguration: { widget in widget.team.map { ["team": .string($0)] } },
        controlConfiguration: { _ in ["door": .string("left")] }
    )

    @Test func theAppsReportsReachTheSchedulerAndSurviveAGatewayAway() async throws {
        let directory = try TemporaryDirectory("reloadgatekit")
        defer { directory.remove() }
        let sender = ProviderTokenFactory(keyID: "KITKEY0001", teamID: "KITTEAM001")
        let credentials = try await sender.createApp(bundle: Self.bundle, inStoreAt: directory.path("data"))
        let pki = try TestPKI(in: directory)
        let appGroup = URL(fileURLWithPath: directory.path("app-group"))
        let widgets = [Widget(kind: "scores", familyName: "systemSmall", team: "ARS"), Widget(kind: "news", familyName: "systemMedium")]
        let news = WidgetIdentity.id(kind: "news", family: "systemMedium", configuration: nil)
        let scores = WidgetIdentity.id(kind: "scores", family: "systemSmall", configuration: ["team": .string("ARS")])

        let port = try await TestGateway.withRunning(in: directory, pki: pki) { gateway in
            let socket = gateway.configuration.adminSocketPath
            try await gateway.withHTTPClient { http in
                let reporter = try Reporter(client: Self.client(http, gateway.port, key: credentials.registrationKey), directory: appGroup)
                // The widget push handler, the control push handler, the timeline provider of the news widget.
                let device = try await reporter.widgetsChanged(token: Self.deviceToken, device: Self.mapping.device(widgets: widgets))
                #expect(device.sent == 1 && device.kept == 0, "\(String(describing: device.stopped))")
                let controls = try await reporter.controlsChanged(Self.mapping.controls([Control(kind: "garage", pushTokenData: Self.controlToken)]))
                #expect(controls.sent == 1, "\(String(describing: controls.stopped))")
                let now = Date()
                let timeline = try await reporter.timeline(
                    kind: "news", family: "systemMedium", configuration: nil,
                    report: TimelineReport(entryDates: [now], policy: .after(now.addingTimeInterval(120)))
                )
                #expect(timeline?.sent == 1, "\(String(describing: timeline?.stopped))")

                // A push to the device: decided for both widgets; news is covered by its reload in two minutes.
                let push = try await gateway.push(Self.deviceToken.pushTokenHex, bundle: Self.bundle, sender: sender)
                #expect(push.status == 200, "\(push.body)")
                let explained = try await Self.json(["explain", push.apnsID, "--socket", socket])
                let decisions = try #require((explained["request"] as? [String: Any])?["decisions"] as? [[String: Any]], "\(explained)")
                var byWidget: [String: String] = [:]
                for decision in decisions { byWidget[decision["widget"] as? String ?? "?"] = decision["decision"] as? String }
                #expect(byWidget == [scores: "scheduled", news: "absorbed"], "\(decisions)")
                // A push to the control, registered under its own token.
                let control = try await gateway.push(Self.controlToken.pushTokenHex, bundle: Self.bundle, sender: sender, pushType: .controls)
                #expect(control.status == 200 && control.decision == "scheduled", "\(control.body)")
            }
            return gateway.port
        }

        // The gateway is down: the app's reports are kept (the widget set changed, then its timeline).
        let http = HTTPClient(eventLoopGroupProvider: .singleton, configuration: .init(tlsConfiguration: try pki.clientTLSConfiguration()))
        do {
            try await Self.reportWhileAwayThenFlush(http: http, port: port, key: credentials.registrationKey, appGroup: appGroup, pki: pki, in: directory, sender: sender)
            try await http.shutdown()
        } catch {
            try? await http.shutdown()
            throw error
        }
    }

    static func reportWhileAwayThenFlush(
        http: HTTPClient, port: Int, key: String, appGroup: URL, pki: TestPKI, in directory: TemporaryDirectory, sender: ProviderTokenFactory
    ) async throws {
        let scores = WidgetIdentity.id(kind: "scores", family: "systemSmall", configuration: ["team": .string("ARS")])
        let reporter = try Reporter(client: Self.client(http, port, key: key, deadline: .seconds(2)), directory: appGroup)
        let onlyScores = Self.mapping.device(widgets: [Widget(kind: "scores", familyName: "systemSmall", team: "ARS")])
        let away = try await reporter.widgetsChanged(token: Self.deviceToken, device: onlyScores)
        #expect(away.sent == 0 && away.kept == 1 && away.stopped != nil)
        let later = Date().addingTimeInterval(3600)
        let awayTimeline = try await reporter.timeline(
            kind: "scores", family: "systemSmall", configuration: ["team": .string("ARS")],
            report: TimelineReport(entryDates: [Date()], policy: .after(later))
        )
        #expect(awayTimeline?.kept == 2)
        #expect(try await reporter.queue.calls().map(\.method) == ["PUT", "PUT"])

        // Back, on the same port: the next flush sends both, in order, once each.
        try await TestGateway.withRunning(in: directory, pki: pki, configure: { $0.listen.port = port }) { gateway in
            // The app flushes again while a flush stops with calls kept, as it does on its next wake: the
            // reporter's 2 s deadline can pass beside the whole suite (its client still waiting to connect
            // after the refusals while the gateway was away), and a stopped flush keeps what it did not send.
            var sent = 0
            var refused = 0
            var flushed = try await reporter.flush()
            sent += flushed.sent
            refused += flushed.refused.count
            let since = ContinuousClock.now
            while flushed.kept > 0, since.duration(to: .now) < .seconds(30) {
                try await Task.sleep(for: .milliseconds(500))
                flushed = try await reporter.flush()
                sent += flushed.sent
                refused += flushed.refused.count
            }
            #expect(sent == 2 && refused == 0 && flushed.kept == 0, "\(String(describing: flushed.stopped))")
            #expect(try await reporter.queue.calls().isEmpty)
            #expect(try await reporter.flush().sent == 0, "nothing sent twice")
            // In order: the device has the one widget of the later set (news is gone), with its timeline.
            let budget = try await Self.json(["budget", Self.deviceToken.pushTokenHex, "--socket", gateway.configuration.adminSocketPath])
            let instances = try #require(budget["instances"] as? [[String: Any]], "\(budget)")
            #expect(instances.compactMap { $0["widget"] as? String } == [scores], "\(instances)")
            #expect(instances.first?["timelinePolicy"] is String, "\(instances)")
        }
    }

    static func client(_ http: HTTPClient, _ port: Int, key: String, deadline: Duration = .seconds(20)) -> ReloadGateClient {
        ReloadGateClient(
            GatewayConfiguration(baseURL: URL(string: "https://localhost:\(port)")!, bundle: bundle, registrationKey: key, deadline: deadline, attempts: 2),
            transport: HTTPClientTransport(client: http)
        )
    }

    static func json(_ arguments: [String]) async throws -> [String: Any] {
        let result = try await ReloadGateProcess.run(arguments + ["--json"], in: root)
        try #require(result.status == 0, "\(arguments): \(result.stderr)")
        return try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any], "\(result.stdout)")
    }
}

/// The package's transport over AsyncHTTPClient (HTTP/2 over TLS with the client's trust).
struct HTTPClientTransport: RegistryTransport {
    let client: HTTPClient

    func send(_ request: URLRequest) async throws -> (Data, HTTPURLResponse) {
        var outgoing = HTTPClientRequest(url: request.url!.absoluteString)
        outgoing.method = HTTPMethod(rawValue: request.httpMethod ?? "GET")
        for (name, value) in request.allHTTPHeaderFields ?? [:] { outgoing.headers.add(name: name, value: value) }
        if let body = request.httpBody { outgoing.body = .bytes(ByteBuffer(bytes: body)) }
        let response = try await client.execute(outgoing, timeout: .seconds(Int64(max(1, request.timeoutInterval))))
        let body = try await response.body.collect(upTo: 1 << 20)
        var headers: [String: String] = [:]
        for field in response.headers { headers[field.name] = field.value }
        let answer = HTTPURLResponse(url: request.url!, statusCode: Int(response.status.code), httpVersion: "HTTP/2", headerFields: headers)!
        return (Data(body.readableBytesView), answer)
    }
}
