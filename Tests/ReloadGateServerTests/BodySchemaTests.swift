import Foundation
import ReloadGateAPI
import ReloadGateCore
import ReloadGateTesting
import Testing

@testable import ReloadGateServer

/// Every body type and the OpenAPI document say the same: examples of each type (every optional field
/// once empty, once set) are encoded as the server encodes them and checked against the type's schema
/// (``SchemaCheck``), then decoded as the CLI decodes them and compared with the example. A field added
/// to a type and not to the document, or the other way round, fails here (the schemas list their fields
/// as `required` and refuse others).
@Suite(.offThePool) struct BodySchemaTests {
    nonisolated(unsafe) static let schemas: [String: Any] = {
        let components = OpenAPIDocument.object["components"] as? [String: Any] ?? [:]
        return components["schemas"] as? [String: Any] ?? [:]
    }()

    nonisolated(unsafe) static let check = SchemaCheck(schemas: schemas)

    /// The problems of `examples` (encoded with ``BodyJSON``) against `Body`'s schema, and whether each
    /// decodes back to itself.
    static func problems<Body: DocumentedBody>(_ examples: [Body]) throws -> [String] {
        guard let schema = schemas[Body.schema] else { return ["no schema \(Body.schema) in the document"] }
        var problems: [String] = []
        for (index, example) in examples.enumerated() {
            let data = try BodyJSON.encode(example)
            let value = try JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])
            problems += check.problems(value, against: schema, at: "\(Body.schema)#\(index)")
            let decoded = try JSONDecoder().decode(Body.self, from: data)
            if decoded != example { problems.append("\(Body.schema)#\(index) does not decode to itself: \(String(decoding: data, as: UTF8.self))") }
        }
        return problems
    }

    // MARK: Examples

    static let time = "2026-11-22T10:00:00.000Z"
    static let token = String(repeating: "ab", count: 32)

    static let decisions = [
        AdminAPI.Decision(instance: 3, widget: "w1", kind: "scores", device: token, decision: "scheduled", due: time, reason: "due now"),
        AdminAPI.Decision(instance: nil, widget: nil, kind: nil, device: nil, decision: "no-match", due: nil, reason: "no widget of kind news"),
    ]

    static let requests = [
        AdminAPI.Request(
            id: 7, bundle: "com.example.app", source: "webhook", receivedAt: time, priority: 10, expiration: nil, collapseId: nil,
            exempt: false, target: .object(["kind": .string("scores"), "match": .object(["team": .integer(42), "ratio": .number(0.5), "big": .integer(Int64.max)])]), apnsId: nil,
            decisions: decisions
        ),
        AdminAPI.Request(
            id: 8, bundle: "com.example.app", source: "apns", receivedAt: time, priority: 5, expiration: time, collapseId: "c/1",
            exempt: true, target: .string("widgets of com.example.app"), apnsId: "9A1F3E2B-1C4D-4E5F-8A9B-0C1D2E3F4A5B", decisions: []
        ),
    ]

    static let deliveries = [
        AdminAPI.Delivery(
            apnsId: "9A1F3E2B-1C4D-4E5F-8A9B-0C1D2E3F4A5B", bundle: "com.example.app", device: token, releasedAt: time, instances: [3, 4],
            requests: [7, 8], requestCount: 2, priority: 10, state: "sent", attempts: 1, unknownOutcomes: 0, lastError: nil, updatedAt: time
        ),
        AdminAPI.Delivery(
            apnsId: "0A1F3E2B-1C4D-4E5F-8A9B-0C1D2E3F4A5B", bundle: nil, device: nil, releasedAt: time, instances: [], requests: [],
            requestCount: 0, priority: 5, state: "failed", attempts: 3, unknownOutcomes: 1, lastError: "BadDeviceToken", updatedAt: nil
        ),
        AdminAPI.Delivery(
            apnsId: "1A1F3E2B-1C4D-4E5F-8A9B-0C1D2E3F4A5B", bundle: "com.example.app", device: token, releasedAt: time, instances: [9],
            requests: [11, 12, 13], requestCount: 3, priority: 10, state: "sent", attempts: 1, unknownOutcomes: 0, lastError: nil, updatedAt: time,
            content: AdminAPI.DeliveredContent(request: 12, timestamp: 1_795_000_000, alertRequest: 11, end: false, merged: 3)
        ),
        AdminAPI.Delivery(
            apnsId: "2A1F3E2B-1C4D-4E5F-8A9B-0C1D2E3F4A5B", bundle: "com.example.app", device: token, releasedAt: time, instances: [9],
            requests: [14], requestCount: 1, priority: 10, state: "pending", attempts: 0, unknownOutcomes: 0, lastError: nil, updatedAt: nil,
            content: AdminAPI.DeliveredContent(request: 14, timestamp: 1_795_000_100, alertRequest: nil, end: true, merged: 1)
        ),
    ]

    static let pending = [
        AdminAPI.PendingReload(
            instance: 3, bundle: "com.example.app", device: token, widget: "w1", kind: "scores", family: "systemSmall",
            configuration: .object(["team": .string("42")]), due: time, dueInSeconds: 61.5, priority: 10, expiration: nil, requestCount: 2,
            requests: [7, 8], exempt: false, waitsFor: "budget"
        ),
        AdminAPI.PendingReload(
            instance: 4, bundle: "com.example.app", device: token, widget: "garage", kind: "garage", family: "control",
            configuration: .object([:]), due: time, dueInSeconds: -2, priority: 5, expiration: time, requestCount: 1, requests: [9],
            exempt: true, waitsFor: "low-priority"
        ),
    ]

    static let budgets = [
        AdminAPI.InstanceBudget(
            bundle: "com.example.app", widget: "w1", kind: "scores", family: "systemSmall", timelinePolicy: "atEnd", tokens: 0, burst: 6,
            dailyBudget: 40, nextToken: time, lastReload: time, plannedReload: time, earliestReload: time,
            pending: AdminAPI.PendingInBudget(due: time, priority: 10, requestCount: 2)
        ),
        AdminAPI.InstanceBudget(
            bundle: "com.example.app", widget: "w2", kind: "news", family: "systemMedium", timelinePolicy: nil, tokens: 6, burst: 6,
            dailyBudget: 40, nextToken: nil, lastReload: nil, plannedReload: nil, earliestReload: nil, pending: nil
        ),
    ]

    static let widgets = [
        AdminAPI.Widget(id: "w1", kind: "scores", family: "systemSmall", configuration: .object(["team": .string("42")]), timelinePolicy: "never"),
        AdminAPI.Widget(id: "w2", kind: "news", family: "systemMedium", configuration: .object([:]), timelinePolicy: nil),
    ]

    static func device<Widgets>(_ widgets: Widgets, active: Bool) -> AdminAPI.Device<Widgets> {
        AdminAPI.Device(
            bundle: "com.example.app", device: token, pushType: active ? "widgets" : "controls", active: active, registeredAt: time,
            unregisteredAt: active ? nil : time, widgets: widgets, pendingReloads: 1
        )
    }

    static let dashboard: AdminAPI.DashboardFigures = {
        typealias Figures = AdminAPI.DashboardFigures
        return Figures(
            now: time, bundle: nil, bundles: ["com.example.app"], decisions: ["scheduled": 3, "merged": 0],
            decisionsByHour: (0..<24).map { _ in Figures.HourDecisions(hour: time, decisions: ["scheduled": 1]) },
            deliveries: ["sent": 2, "pending": 0], failures: ["BadDeviceToken": 1], deliveryQueue: 0, oldestOpenDelivery: nil, retries: 1,
            unknownOutcomes: 0, pendingReloads: 1, pendingDueNow: 0, pendingByHour: (0..<24).map { _ in Figures.HourCount(from: time, count: 0) },
            pendingLater: 0,
            pending: [
                Figures.DashboardPending(
                    instance: 3, bundle: "com.example.app", device: token, widget: "w1", kind: "scores", pushType: "widgets", due: time,
                    priority: 10, requestCount: 2
                ),
            ],
            budgets: Figures.Budgets(
                scope: "all",
                policies: [
                    Figures.Policy(pushType: "widgets", kind: nil, burst: 6, dailyBudget: 40, instances: 2, tokens: 6, empty: 1),
                    Figures.Policy(pushType: "controls", kind: "garage", burst: 8, dailyBudget: 96, instances: 1, tokens: 8, empty: 0),
                ],
                lowest: [
                    Figures.Lowest(
                        instance: 3, bundle: "com.example.app", device: token, widget: "w1", kind: "scores", pushType: "widgets", tokens: 0,
                        burst: 6, nextToken: time
                    ),
                    Figures.Lowest(instance: 9, bundle: nil, device: nil, widget: nil, kind: nil, pushType: "controls", tokens: 8, burst: 8, nextToken: nil),
                ]
            ),
            unregistered: Figures.Unregistered(count: 1, recent: [.init(bundle: "com.example.app", device: token, since: time)]),
            pushTypes: [
                "widgets": Figures.PushTypeNames(label: "widget", plural: "widgets", kindPrefix: ""),
                "controls": Figures.PushTypeNames(label: "control", plural: "controls", kindPrefix: "control:"),
                "liveactivity": Figures.PushTypeNames(label: "activity", plural: "activities", kindPrefix: "activity:"),
            ]
        )
    }()

    /// Strings a hand-written encoding could get wrong: quotes, backslashes, slashes, control
    /// characters (backspace and form feed have short escapes), non-ASCII.
    static let awkward = "a\"b\\c/d\u{8}e\u{c}f\u{1}g\u{1f}h\ni\tj\u{7f}k\u{2028}lé😀"

    static let registrations = [
        RegistryAPI.DeviceRegistered(
            device: token, widgets: [.init(id: "w1", instance: 3), .init(id: awkward, instance: Int64.max)], removedWidgets: 1,
            retiredPreviousToken: false
        ),
        RegistryAPI.DeviceRegistered(device: token, widgets: [], removedWidgets: 0, retiredPreviousToken: true),
    ]

    static let controls = [
        RegistryAPI.ControlRegistered(control: token, instance: 9, kind: "garage", retiredPreviousToken: false),
        RegistryAPI.ControlRegistered(control: token, instance: 0, kind: awkward, retiredPreviousToken: true),
    ]

    static let activities = [
        RegistryAPI.ActivityRegistered(activity: token, instance: 7, attributesType: "AdventureAttributes", frequentUpdates: true, pushToStart: false, retiredPreviousToken: false),
        RegistryAPI.ActivityRegistered(activity: token, instance: 0, attributesType: awkward, frequentUpdates: false, pushToStart: true, retiredPreviousToken: true),
    ]

    static let accepted = [
        RegistryAPI.ReloadAccepted(requestId: 41, targets: 2, decisions: ["scheduled": 1, "merged": 1, "no-match": 0]),
        RegistryAPI.ReloadAccepted(requestId: UInt64.max, targets: 0, decisions: [:]),
    ]

    /// The schemas the examples below check.
    static func checkedSchemas() throws -> (names: Set<String>, problems: [String]) {
        var names: Set<String> = []
        var problems: [String] = []
        func add<Body: DocumentedBody>(_ examples: [Body]) throws {
            names.insert(Body.schema)
            problems += try Self.problems(examples)
        }
        try add([AdminAPI.PendingList(now: time, pending: pending), AdminAPI.PendingList(now: time, pending: [])])
        try add(pending)
        try add(decisions)
        try add(requests)
        try add(deliveries)
        try add([AdminAPI.RequestExplanation(
            request: requests[0], pending: [AdminAPI.ExplainedPending(instance: 3, widget: "w1", device: token, due: time)], deliveries: deliveries
        )])
        try add([AdminAPI.ExplainedPending(instance: 3, widget: "w1", device: token, due: time)])
        try add([AdminAPI.DeliveryExplanation(delivery: deliveries[0], requests: requests)])
        try add([AdminAPI.DeviceBudget(device: token, now: time, instances: budgets, recentDeliveries: deliveries)])
        try add(budgets)
        try add([AdminAPI.Cancelled(cancelled: [AdminAPI.CancelledReload(instance: 3, requests: [7, 8])]), AdminAPI.Cancelled(cancelled: [])])
        try add([AdminAPI.CancelledReload(instance: 3, requests: [7])])
        try add([AdminAPI.FlushRequest(), AdminAPI.FlushRequest(device: token, bundle: nil, ignoreBudget: true)])
        try add([AdminAPI.Flushed(flushed: 2, instances: [3, 4], ignoreBudget: false)])
        try add([AdminAPI.Stats(
            decisions: ["scheduled": 1, "no-match": 0], deliveries: ["sent": 1], failures: [:], pendingReloads: 1, oldestPendingDue: time,
            deliveryQueue: 0, oldestOpenDelivery: nil, unknownOutcomes: 0
        )])
        let minute = AdminAPI.ForecastMinute(minute: time, count: 10_000)
        let series = [
            AdminAPI.ForecastSeries(bundle: "com.example.app", kind: "scores", total: 10_400, perHour: [10_400], peak: minute),
            AdminAPI.ForecastSeries(bundle: "com.example.app", kind: "news", total: 0, perHour: [0], peak: nil),
        ]
        let breach = AdminAPI.ForecastBreach(bundle: "com.example.app", minute: time, count: 10_000, threshold: 5_000)
        try add([
            AdminAPI.Forecast(start: time, minutes: 60, total: 10_400, peak: minute, busiest: [minute], perMinute: [10_000, 400], series: series, breaches: [breach]),
            AdminAPI.Forecast(start: time, minutes: 60, total: 0, peak: nil, busiest: [], perMinute: [0], series: [], breaches: []),
        ])
        try add([minute])
        try add(series)
        try add([breach])
        let missed = [AdminAPI.FreshnessMiss(cause: "interval", count: 3), AdminAPI.FreshnessMiss(cause: "expired", count: 1)]
        let window = AdminAPI.FreshnessWindow(requests: 10, served: 9, within: 6, share: 0.6, met: false, p50: 1000, p90: 300_000, p99: 301_250, misses: missed)
        let empty = AdminAPI.FreshnessWindow(requests: 0, served: 0, within: 0, share: nil, met: nil, p50: nil, p90: nil, p99: nil, misses: [])
        let kinds = [
            AdminAPI.FreshnessKind(
                bundle: "com.example.app", kind: "scores", objectiveQuantile: 0.9, objectiveWithin: 300_000, hour: empty, day: window,
                hourlyRequests: Array(repeating: 0, count: 23) + [10], hourlyWithin: Array(repeating: 0, count: 23) + [6]
            ),
            AdminAPI.FreshnessKind(
                bundle: "com.example.app", kind: "control:garage", objectiveQuantile: 1, objectiveWithin: 1000, hour: window, day: window,
                hourlyRequests: Array(repeating: 1, count: 24), hourlyWithin: Array(repeating: 1, count: 24)
            ),
        ]
        try add([AdminAPI.Freshness(at: time, kinds: kinds), AdminAPI.Freshness(at: time, kinds: [])])
        try add(kinds)
        try add([window, empty])
        try add(missed)
        let gateway = AdminAPI.ClusterGateway(id: "g1", address: "10.0.0.1:8443", partitions: 64, startedAt: time, heartbeatAgeMilliseconds: 120)
        let ranges = [
            AdminAPI.PartitionRange(first: 0, last: 63, owner: "g1", leaseAgeSeconds: 30, expiresInMilliseconds: 4200),
            AdminAPI.PartitionRange(first: 64, last: 127, owner: nil, leaseAgeSeconds: nil, expiresInMilliseconds: nil),
        ]
        try add([
            AdminAPI.Cluster(store: "sqlite", this: "", gateways: [], partitions: []),
            AdminAPI.Cluster(store: "postgres", this: "g1", gateways: [gateway], partitions: ranges),
        ])
        try add([gateway, AdminAPI.ClusterGateway(id: "g2", address: nil, partitions: 0, startedAt: time, heartbeatAgeMilliseconds: 0)])
        try add(ranges)
        try add([AdminAPI.DeviceList(devices: [device(2, active: true), device(0, active: false)])])
        try add([AdminAPI.DeviceDetails(devices: [device(widgets, active: true), device([], active: false)])])
        try add([device(2, active: true)])
        try add([device(widgets, active: true)])
        try add(widgets)
        try add([AdminAPI.DeviceRemoved(removed: .init(bundle: "com.example.app", device: token, widgets: 2))])
        try add([AdminAPI.RotateKeyRequest(webhookSecret: true), AdminAPI.RotateKeyRequest(webhookSecret: false, registration: true)])
        try add([
            AdminAPI.Credentials(bundle: "com.example.app", apiKey: "rgk_x", webhookSecret: nil),
            AdminAPI.Credentials(bundle: "com.example.app", apiKey: "rgk_x", webhookSecret: "rgs_y"),
            AdminAPI.Credentials(bundle: "com.example.app", apiKey: nil, webhookSecret: nil, registrationKey: "rgr_z"),
        ])
        try add([AdminAPI.TeamRequest(team: "ABCDE12345")])
        try add([AdminAPI.TeamBound(bundle: "com.example.app", team: "ABCDE12345")])
        try add([
            AdminAPI.KeyRequest(kid: "KEY1", team: "ABCDE12345", publicKey: "-----BEGIN PUBLIC KEY-----", environment: "both", topics: ["com.example.app"]),
            AdminAPI.KeyRequest(kid: "KEY1", team: "ABCDE12345", publicKey: "-----BEGIN PUBLIC KEY-----", environment: nil, topics: []),
        ])
        try add([AdminAPI.KeyAdded(kid: "KEY1", team: "ABCDE12345", topics: [], environment: "sandbox")])
        try add([AdminAPI.KeyRemoved(removed: "KEY1")])
        try add([dashboard])
        try add([RegistryAPI.TimelineRecorded(plannedReload: time), RegistryAPI.TimelineRecorded(plannedReload: nil)])
        let uses = [
            RegistryAPI.ConfigurationUse(kind: "scores", family: "systemSmall", configuration: .object(["team": .string("42")]), count: 3),
            RegistryAPI.ConfigurationUse(kind: "garage", family: "control", configuration: .object(["door": .string("front"), "n": .number(1.5)]), count: 1),
        ]
        try add([RegistryAPI.ConfigurationList(configurations: uses)])
        try add(uses)
        try add(registrations)
        try add(controls)
        try add(activities)
        // The webhook's 202 as the route renders it.
        let accepted = WebhookRoutes.render(RequestID(41), [])
        try add([try JSONDecoder().decode(RegistryAPI.ReloadAccepted.self, from: Data(accepted.body.utf8))])
        try add([APIError.Body(code: "invalid-field", message: "kind must be a string")])
        return (names, problems)
    }

    // MARK: Tests

    @Test func everyBodyTypeConformsToItsSchemaAndDecodesToItself() throws {
        let (names, problems) = try Self.checkedSchemas()
        #expect(problems.isEmpty, "\(problems.joined(separator: "\n"))")
        #expect(names.count >= 39, "\(names.sorted())")
    }

    /// The busiest routes' answers are written by hand: byte for byte what the encoder writes.
    @Test func theHandWrittenAnswersAreTheEncodersBytes() throws {
        for example in Self.registrations {
            #expect(example.jsonText == String(decoding: try BodyJSON.encode(example), as: UTF8.self))
        }
        for example in Self.controls {
            #expect(example.jsonText == String(decoding: try BodyJSON.encode(example), as: UTF8.self))
        }
        #expect(try Self.problems(Self.accepted).isEmpty)
        // The webhook's 202 is written from the counts: the same bytes as the encoder's, for no decision, for
        // every kind once, and for kinds listed only when they were made (cancelled, forwarded).
        let kinds: [[DecisionKind]] = [[], DecisionKind.allCases, [.scheduled, .scheduled, .merged, .noMatch], [.forwarded, .afterEnd]]
        for (index, made) in kinds.enumerated() {
            let counts = DecisionCounts(made.map { Decision(request: 1, instance: nil, kind: $0, due: nil, reason: .noMatchingWidget) })
            let answer = RegistryAPI.ReloadAccepted(requestId: RequestID(index) * 1_000_003, targets: made.count, counts: counts)
            let encoded = String(decoding: try BodyJSON.encode(answer), as: UTF8.self)
            #expect(RegistryAPI.ReloadAccepted.jsonText(requestId: answer.requestId, targets: made.count, counts: counts) == encoded)
            #expect(answer.decisions.keys.contains("forwarded") == made.contains(.forwarded))
            for kind in DecisionKind.onArrival {
                #expect(answer.decisions[kind.rawValue] == made.count { $0 == kind })
            }
        }
        // Canonical configurations keep their long escapes (they are stored).
        #expect(JSONText.quoted("\u{8}") == #""\u0008""#)
    }

    /// The other way round: every answer of the admin and registry APIs, and every admin request body,
    /// that the document names is a type checked above.
    @Test func everyDocumentedAnswerIsAType() throws {
        let (names, _) = try Self.checkedSchemas()
        var referenced: Set<String> = []
        let paths = OpenAPIDocument.object["paths"] as? [String: Any] ?? [:]
        for (path, item) in paths {
            guard path.hasPrefix("/v1/"), let item = item as? [String: Any] else { continue }
            for method in ["get", "put", "post", "delete"] {
                guard let operation = item[method] as? [String: Any] else { continue }
                let responses = operation["responses"] as? [String: Any] ?? [:]
                var schemas = (["200", "202"] as [String]).compactMap { Self.schema(in: responses[$0]) }
                if (operation["tags"] as? [String])?.contains("admin") == true, let body = operation["requestBody"] {
                    schemas += [Self.schema(in: body)].compactMap { $0 }
                }
                for schema in schemas {
                    for option in (schema["oneOf"] as? [[String: Any]]) ?? [schema] {
                        guard let reference = option["$ref"] as? String else {
                            Issue.record("\(method.uppercased()) \(path): an answer without a named schema")
                            continue
                        }
                        referenced.insert(String(reference.split(separator: "/").last!))
                    }
                }
            }
        }
        #expect(referenced.subtracting(names).isEmpty, "documented without a type: \(referenced.subtracting(names).sorted())")
        #expect(referenced.contains("PendingList") && referenced.contains("ReloadAccepted"))
    }

    /// `content/application/json/schema` of a response or request body.
    static func schema(in body: Any?) -> [String: Any]? {
        let content = (body as? [String: Any])?["content"] as? [String: Any]
        return (content?["application/json"] as? [String: Any])?["schema"] as? [String: Any]
    }

    /// The check can fail: a field left out, a field too many, a null where a value must be.
    @Test func theCheckFindsWhatDisagrees() throws {
        let schema = try #require(Self.schemas["Delivery"])
        let data = try BodyJSON.encode(Self.deliveries[0])
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect(Self.check.problems(object, against: schema).isEmpty)
        var missing = object
        missing["lastError"] = nil
        #expect(Self.check.problems(missing, against: schema) == ["$: lastError is missing"])
        var extra = object
        extra["colour"] = "blue"
        #expect(Self.check.problems(extra, against: schema) == ["$: colour is not in the schema"])
        var null = object
        null["apnsId"] = NSNull()
        #expect(Self.check.problems(null, against: schema) == ["$.apnsId: null is not string"])
        #expect(!Self.check.problems(["x": 1], against: ["type": "object", "unknownKeyword": true]).isEmpty)
    }

    /// The flush request's rule (at most one of `device` and `bundle`, an empty bundle being none) is
    /// written as `if` both `then: false`; the check reads it as the server does.
    @Test func aFlushNamesADeviceOrABundleNotBoth() throws {
        let schema = try #require(Self.schemas["FlushRequest"])
        let device = String(repeating: "ab", count: 32)
        #expect(Self.check.problems(["device": device], against: schema).isEmpty)
        #expect(Self.check.problems(["bundle": "com.example.app"], against: schema).isEmpty)
        #expect(Self.check.problems(["device": device, "bundle": ""], against: schema).isEmpty)
        #expect(Self.check.problems(["device": device, "bundle": NSNull()], against: schema).isEmpty)
        #expect(Self.check.problems([String: Any](), against: schema).isEmpty)
        #expect(!Self.check.problems(["device": device, "bundle": "com.example.app"], against: schema).isEmpty)
    }

    /// A sender's JSON (a request's target, a configuration) comes back with its numbers as they were:
    /// integers past 2^53 keep every digit, fractions stay fractions.
    @Test func aSendersNumbersKeepTheirDigits() throws {
        let text = #"{"big":9007199254740993,"max":9223372036854775807,"min":-9223372036854775808,"ratio":0.5,"huge":1e300}"#
        let value = JSONValue.parsedOrText(text)
        #expect(value == .object([
            "big": .integer(9_007_199_254_740_993), "max": .integer(.max), "min": .integer(.min), "ratio": .number(0.5), "huge": .number(1e300),
        ]))
        let written = String(decoding: try BodyJSON.encode(value), as: UTF8.self)
        #expect(written.contains(#""big":9007199254740993"#) && written.contains(#""max":9223372036854775807"#), "\(written)")
        #expect(JSONValue.parsedOrText("not json") == .string("not json"))
    }

    /// Optional fields of a type are written as `null`, never left out (the schemas require them).
    @Test func emptyOptionalFieldsAreWrittenAsNull() throws {
        let text = String(decoding: try BodyJSON.encode(Self.deliveries[1]), as: UTF8.self)
        #expect(text.contains(#""bundle":null"#) && text.contains(#""lastError":"BadDeviceToken""#) && text.contains(#""updatedAt":null"#))
        let decoded = try JSONDecoder().decode(AdminAPI.Delivery.self, from: Data(#"{"apnsId":"a","releasedAt":"t","instances":[],"requests":[],"requestCount":0,"priority":10,"state":"sent","attempts":1,"unknownOutcomes":0}"#.utf8))
        #expect(decoded.bundle == nil && decoded.lastError == nil)
    }
}
