import Foundation
import ReloadGateAPI
import ReloadGateCore
import ReloadGateKit
import ReloadGateServer
import Testing

/// The app-side package (Clients/ReloadGateKit) and the gateway read the registry's bodies alike: what
/// the package sends, the server decodes to the same registration and the OpenAPI document accepts; what
/// the server accepts, the package reads back to the same values.
@Suite struct ReloadGateKitContractTests {
    static let token = String(repeating: "ab", count: 32)
    static let client = ReloadGateClient(
        GatewayConfiguration(baseURL: URL(string: "https://localhost:8443")!, bundle: "com.example.scores", registrationKey: "rgr_x")
    )
    static func schema(_ name: String) throws -> Any {
        let components = try #require(OpenAPIDocument.object["components"] as? [String: Any])
        return try #require((components["schemas"] as? [String: Any])?[name])
    }
    nonisolated(unsafe) static let check: SchemaCheck = {
        let components = OpenAPIDocument.object["components"] as? [String: Any] ?? [:]
        return SchemaCheck(schemas: components["schemas"] as? [String: Any] ?? [:])
    }()

    static func problems(_ body: Data, schema name: String) throws -> [String] {
        check.problems(try JSONSerialization.jsonObject(with: body), against: try schema(name), at: name)
    }

    static func decoded<Body: RegistryBody>(_ type: Body.Type, _ body: Data) throws -> Body {
        try Body(json: body, limits: RegistryLimits())
    }

    @Test func whatThePackageSendsTheServerDecodesAndTheDocumentAccepts() throws {
        let mapping = RegistryMapping<Widget, Control>(widgetConfiguration: { $0.configuration })
        var device = mapping.device(widgets: [
            Widget(kind: "scores", familyName: "systemSmall", configuration: ["team": .string("ARS"), "live": .bool(true), "league": .number(39)]),
            Widget(kind: "news", familyName: "accessoryRectangular", configuration: nil),
        ])
        device.previousToken = String(repeating: "cd", count: 32)
        device.environment = "sandbox"
        let body = try #require(try Self.client.call(registering: device, token: Self.token).body)
        #expect(try Self.problems(body, schema: "DeviceRegistration") == [])
        let server = try Self.decoded(DeviceRegistrationBody.self, body)
        #expect(server.environment == "sandbox")
        #expect(server.previousToken?.hex == device.previousToken)
        #expect(server.widgets.map(\.id) == device.widgets.map(\.id))
        #expect(server.widgets.map(\.kind) == ["scores", "news"])
        #expect(server.widgets.map(\.family) == [.systemSmall, .accessoryRectangular])
        #expect(server.widgets[0].configuration == WidgetConfiguration(["team": .string("ARS"), "live": .bool(true), "league": .number(39)]))
        #expect(server.widgets[1].configuration == WidgetConfiguration())
        #expect(server.widgets.allSatisfy { $0.pushEnabled })

        let control = ControlRegistration(kind: "garage", configuration: ["door": .number(2)], environment: "production")
        let controlBody = try #require(try Self.client.call(registering: control, token: Self.token).body)
        #expect(try Self.problems(controlBody, schema: "ControlRegistration") == [])
        let serverControl = try Self.decoded(ControlRegistrationBody.self, controlBody)
        #expect(serverControl.control.kind == "garage" && serverControl.control.configuration == WidgetConfiguration(["door": .number(2)]))
        #expect(serverControl.environment == "production")

        let dates = [Date(timeIntervalSince1970: 1_800_000_000.25), Date(timeIntervalSince1970: 1_800_000_060)]
        for (policy, expected) in [
            (ReloadPolicy.atEnd, Timeline.Policy.atEnd), (.never, .never),
            (.after(Date(timeIntervalSince1970: 1_800_001_800)), .after(Timestamp(milliseconds: 1_800_001_800_000))),
        ] {
            let report = TimelineReport(entryDates: dates, policy: policy)
            let timelineBody = try #require(try Self.client.call(reporting: report, token: Self.token, widget: "w1").body)
            #expect(try Self.problems(timelineBody, schema: "Timeline") == [])
            let timeline = try TimelineBody.timeline(json: timelineBody, limits: RegistryLimits())
            #expect(timeline.entries == [Timestamp(milliseconds: 1_800_000_000_250), Timestamp(milliseconds: 1_800_000_060_000)])
            #expect(timeline.policy == expected)
        }
    }

    @Test func whatTheServerAcceptsThePackageReadsAlike() throws {
        let device = Data(
            #"{"widgets":[{"id":"w-1","kind":"scores","family":"systemLarge","configuration":{"team":"CHE","n":1.5,"on":false},"pushEnabled":false}],"previousToken":"\#(String(repeating: "ef", count: 32))"}"#.utf8
        )
        let server = try Self.decoded(DeviceRegistrationBody.self, device)
        let kit = try JSONDecoder().decode(DeviceRegistration.self, from: device)
        #expect(kit.widgets.map(\.id) == server.widgets.map(\.id))
        #expect(kit.widgets.map(\.family) == server.widgets.map(\.family.rawValue))
        #expect(kit.widgets[0].configuration == ["team": .string("CHE"), "n": .number(1.5), "on": .bool(false)])
        #expect(kit.widgets[0].pushEnabled == server.widgets[0].pushEnabled)
        #expect(kit.previousToken == server.previousToken?.hex)

        let timeline = Data(#"{"entries":[{"date":"2027-01-15T08:00:00Z"},{"date":1800000000.5,"relevance":0.3}],"policy":{"after":"2027-01-15T09:00:00.250Z"}}"#.utf8)
        let serverTimeline = try TimelineBody.timeline(json: timeline, limits: RegistryLimits())
        let kitTimeline = try JSONDecoder().decode(TimelineReport.self, from: timeline)
        #expect(kitTimeline.entries.map { Int64(($0.timeIntervalSince1970 * 1000).rounded()) } == serverTimeline.entries.map(\.milliseconds))
        guard case .after(let at) = kitTimeline.policy, case .after(let serverAt) = serverTimeline.policy else {
            Issue.record("not .after: \(kitTimeline.policy), \(serverTimeline.policy)")
            return
        }
        #expect(Int64((at.timeIntervalSince1970 * 1000).rounded()) == serverAt.milliseconds)

        let control = Data(#"{"kind":"garage","configuration":{"door":"left"}}"#.utf8)
        let serverControl = try Self.decoded(ControlRegistrationBody.self, control)
        let kitControl = try JSONDecoder().decode(ControlRegistration.self, from: control)
        #expect(kitControl.kind == serverControl.control.kind)
        #expect(kitControl.configuration == ["door": .string("left")])
    }

    struct Widget: WidgetDescribing {
        var kind: String
        var familyName: String
        var configuration: [String: FlatValue]?
    }

    struct Control: ControlDescribing {
        var kind: String
        var pushTokenData: Data?
    }
}
