import Foundation
import ReloadGateAPI
import ReloadGateCore
import Testing

/// The bodies of the registry API and the webhook, parsed without a server: limits and field errors.
struct BodyParsingTests {
    @Test func aDeviceBodyWithTooManyWidgetsNamesTheirCount() {
        let widget = #"{"id":"w","kind":"k","family":"systemSmall"}"#
        let body = #"{"widgets":[\#(Array(repeating: widget, count: 500).joined(separator: ","))]}"#
        #expect(throws: APIError.invalidField("a device has at most 64 widgets, not 500")) {
            try DeviceRegistrationBody(json: Data(body.utf8), limits: RegistryLimits())
        }
    }

    /// A device body's optional fields: missing and `null` read as their default, a value of another type
    /// is refused naming the field; a widget id given twice is refused, once is not.
    @Test func aDeviceBodysOptionalFieldsAreMissingNullOrOfTheirType() throws {
        func parse(_ widget: String, environment: String = "") throws -> DeviceRegistrationBody {
            try DeviceRegistrationBody(json: Data(#"{\#(environment)"widgets":[{"id":"w","kind":"k","family":"systemSmall"\#(widget)}]}"#.utf8), limits: RegistryLimits())
        }
        let plain = try parse("")
        #expect(plain.environment == nil)
        #expect(plain.widgets[0].pushEnabled)
        #expect(plain.widgets[0].configuration == WidgetConfiguration())
        let nulls = try parse(#","pushEnabled":null,"configuration":null"#, environment: #""environment":null,"#)
        #expect(nulls.environment == nil)
        #expect(nulls.widgets == plain.widgets)
        let given = try parse(#","pushEnabled":false,"configuration":{"team":"42","n":1}"#, environment: #""environment":"sandbox","#)
        #expect(given.environment == "sandbox")
        #expect(!given.widgets[0].pushEnabled)
        #expect(given.widgets[0].configuration.canonicalJSON == #"{"n":1,"team":"42"}"#)
        for (widget, environment, message) in [
            ("", #""environment":5,"#, "environment must be a string"),
            (#","pushEnabled":"yes""#, "", "widgets[0].pushEnabled must be true or false"),
            (#","configuration":5"#, "", "widgets[0].configuration must be an object"),
            (#","configuration":["a"]"#, "", "widgets[0].configuration must be an object"),
        ] {
            #expect(throws: APIError.invalidField(message)) { try parse(widget, environment: environment) }
        }
        let twice = #"{"widgets":[{"id":"w","kind":"k","family":"systemSmall"},{"id":"w","kind":"k","family":"systemLarge"}]}"#
        #expect(throws: APIError.invalidField("widgets[1].id 'w' appears twice")) {
            try DeviceRegistrationBody(json: Data(twice.utf8), limits: RegistryLimits())
        }
    }

    /// A refusal inside an array's item names the item by its index and the field by its path from the
    /// body's top, in every body that has items (the routes' reading and the decoder's share these names,
    /// so the comparison with Foundation does not check them).
    @Test func refusalsInsideItemsNameTheirPath() {
        let token = String(repeating: "ab", count: 32)
        let widget = #"{"id":"w","kind":"k","family":"systemSmall"}"#
        for (body, message) in [
            (#"{"widgets":[\#(widget),5]}"#, "widgets[1] must be an object"),
            (#"{"widgets":[\#(widget),{"id":"v","kind":"k","family":"huge"}]}"#, "widgets[1].family must be one of systemSmall"),
            (#"{"widgets":[{"id":"w","kind":"k","family":"systemSmall","configuration":{"team":[1]}}]}"#,
             "widgets[0].configuration.team must be a string, a number or a boolean (configurations are flat)"),
            (#"{"widgets":[\#(widget)],"previousToken":"xyz"}"#, "previousToken: "),
        ] {
            #expect(Self.refusal { () throws(APIError) in try DeviceRegistrationBody(json: Data(body.utf8), limits: RegistryLimits()) }?.hasPrefix(message) == true, "\(body)")
        }
        for (body, message) in [
            (#"{"devices":["\#(token)",7]}"#, "devices[1] must be a string"),
            (#"{"devices":["\#(token)","zz"]}"#, "devices[1]: "),
            (#"{"match":{"team":{}}}"#, "match.team must be a string, a number or a boolean"),
        ] {
            #expect(Self.refusal { () throws(APIError) in try WebhookBody(json: Data(body.utf8), received: Timestamp(seconds: 0)) }?.hasPrefix(message) == true, "\(body)")
        }
        for (body, message) in [
            (#"{"entries":[{"date":0},[]],"policy":"atEnd"}"#, "entries[1] must be an object"),
            (#"{"entries":[{"date":true}],"policy":"atEnd"}"#, "entries[0].date must be an RFC 3339 date"),
            (#"{"entries":[],"policy":{"after":"soon"}}"#, "policy.after must be an RFC 3339 date"),
        ] {
            #expect(Self.refusal { () throws(APIError) in try TimelineBody.timeline(json: Data(body.utf8), limits: RegistryLimits()) }?.hasPrefix(message) == true, "\(body)")
        }
    }

    /// The message of the `invalidField` refusal `parse` throws; nil when it throws none or another.
    static func refusal<T>(_ parse: () throws(APIError) -> T) -> String? {
        do {
            _ = try parse()
            return nil
        } catch {
            return error.code == "invalid-field" ? error.message : nil
        }
    }

    @Test func deeplyNestedJSONIsRefusedAsInvalidJSON() {
        let body = "{\"widgets\":" + String(repeating: "[", count: 5000) + String(repeating: "]", count: 5000) + "}"
        #expect(throws: APIError.invalidJSON("the body is not JSON: more than 512 arrays and objects inside each other at byte 522")) {
            try DeviceRegistrationBody(json: Data(body.utf8), limits: RegistryLimits())
        }
    }

    /// JSON that is not an object, and text that is not JSON, are refused as before the bodies were
    /// `Decodable` (400 invalid-json), whichever body.
    @Test func aBodyThatIsNotAnObjectIsInvalidJSON() {
        for body in ["null", "[1]", #""x""#, "1", "true"] {
            #expect(throws: APIError.invalidJSON("the body must be a JSON object"), "\(body)") {
                try WebhookBody(json: Data(body.utf8), received: Timestamp(seconds: 0))
            }
            #expect(throws: APIError.invalidJSON("the body must be a JSON object"), "\(body)") {
                try DeviceRegistrationBody(json: Data(body.utf8), limits: RegistryLimits())
            }
        }
        for (body, problem) in [
            ("{", "a field name in quotes was expected at byte 1"), ("nope", "a value was expected at byte 0"),
            (#"{"kind":}"#, "a value was expected at byte 8"), (#"{"kind":"k",,}"#, "a field name in quotes was expected at byte 12"),
        ] {
            #expect(throws: APIError.invalidJSON("the body is not JSON: \(problem)"), "\(body)") {
                try TimelineBody.timeline(json: Data(body.utf8), limits: RegistryLimits())
            }
        }
        #expect(throws: APIError.invalidJSON("the body is empty; a JSON object is expected")) {
            try ControlRegistrationBody(json: Data(), limits: RegistryLimits())
        }
    }

    @Test func aWebhookBodyWithEveryFieldParses() throws {
        let token = String(repeating: "ab", count: 32)
        let body = #"{"kind":"scores","match":{"team":"42","live":true,"n":3},"devices":["\#(token)"],"priority":5,"expiration":"2026-11-22T14:00:00Z","collapseId":"c","exempt":"appIntent"}"#
        let parsed = try WebhookBody(json: Data(body.utf8), received: Timestamp(seconds: 0))
        #expect(parsed.target.kind == "scores")
        #expect(parsed.target.match == ["team": .string("42"), "live": .bool(true), "n": .number(3)])
        #expect(parsed.target.devices?.map(\.hex) == [token])
        #expect(parsed.priority == .low)
        #expect(parsed.expiration == Timestamp(seconds: 1_795_356_000))
        #expect(parsed.collapseID == "c")
        #expect(parsed.exemption == .appIntent)
    }

    @Test(arguments: [
        (#"{"priority":true}"#, "priority must be 10, 5 or 1"),
        (#"{"priority":7}"#, "priority must be 10, 5 or 1"),
        (#"{"collapseId":""}"#, "collapseId must be 1 to 64 characters"),
        (#"{"exempt":"always"}"#, "exempt must be one of appForeground, audioSession, navigationSession, appIntent, animation, localeChange, accessibilityChange"),
        (#"{"kinds":"x"}"#, "unknown field 'kinds'; the fields are collapseId, devices, exempt, expiration, kind, match, payload, priority, pushType"),
    ])
    func webhookFieldErrorsNameTheField(_ body: String, _ message: String) {
        #expect(throws: APIError.invalidField(message)) { try WebhookBody(json: Data(body.utf8), received: Timestamp(seconds: 0)) }
    }

    /// Lengths count characters as JSON Schema's maxLength does (Unicode scalars), not bytes: 64 `é`s
    /// (128 bytes) are a collapse id, 65 are not; 128 of them are a kind, 129 are not.
    @Test func webhookLengthsCountCharactersNotBytes() throws {
        func parse(_ field: String, _ value: String) throws -> WebhookBody {
            try WebhookBody(json: Data(#"{"\#(field)":"\#(value)"}"#.utf8), received: Timestamp(seconds: 0))
        }
        #expect(try parse("collapseId", String(repeating: "é", count: 64)).collapseID?.utf8.count == 128)
        #expect(throws: APIError.invalidField("collapseId must be 1 to 64 characters")) { try parse("collapseId", String(repeating: "é", count: 65)) }
        #expect(try parse("kind", String(repeating: "é", count: 128)).target.kind?.unicodeScalars.count == 128)
        #expect(throws: APIError.invalidField("kind must be 1 to 128 characters")) { try parse("kind", String(repeating: "é", count: 129)) }
    }

    @Test func aWebhookBodyForControlsTargetsControls() throws {
        let parsed = try WebhookBody(json: Data(#"{"pushType":"controls","kind":"garage","match":{"door":"front"}}"#.utf8), received: Timestamp(seconds: 0))
        #expect(parsed.target == ReloadTarget(pushType: .controls, kind: "garage", match: ["door": .string("front")]))
        #expect(try WebhookBody(json: Data("{}".utf8), received: Timestamp(seconds: 0)).target.pushType == .widgets)
        #expect(throws: APIError.invalidField("pushType must be one of widgets, controls, liveactivity")) {
            try WebhookBody(json: Data(#"{"pushType":"alert"}"#.utf8), received: Timestamp(seconds: 0))
        }
    }

    @Test func aControlBodyParsesAndNamesWhatIsWrong() throws {
        let token = String(repeating: "cd", count: 32)
        let parsed = try ControlRegistrationBody(
            json: Data(#"{"kind":"garage","configuration":{"door":"front"},"environment":"sandbox","previousToken":"\#(token)"}"#.utf8),
            limits: RegistryLimits()
        )
        #expect(parsed.control == ControlRegistration(kind: "garage", configuration: WidgetConfiguration(["door": .string("front")])))
        #expect(parsed.environment == "sandbox")
        #expect(parsed.previousToken?.hex == token)
        for (body, message) in [
            (#"{}"#, "kind must be a string"),
            (#"{"kind":"garage door"}"#, "kind must have 1 to 128 letters, digits, '.', '_' or '-'"),
            (#"{"kind":"g","configuration":{"a":{"b":1}}}"#, "configuration.a must be a string, a number or a boolean (configurations are flat)"),
            (#"{"kind":"g","widgets":[]}"#, "unknown field 'widgets'; the fields are configuration, environment, kind, previousToken"),
        ] {
            #expect(throws: APIError.invalidField(message)) { try ControlRegistrationBody(json: Data(body.utf8), limits: RegistryLimits()) }
        }
    }

    @Test func expirationZeroMeansNowOrNever() throws {
        let received = Timestamp(seconds: 1_790_000_000)
        #expect(try WebhookBody(json: Data(#"{"expiration":0}"#.utf8), received: received).expiration == .nowOrNever)
        #expect(try WebhookBody(json: Data(#"{"expiration":-0.0}"#.utf8), received: received).expiration == .nowOrNever)
    }

    /// A timeline entry's relevance is a number or absent (null too); anything else is refused naming it.
    @Test func aTimelineEntrysRelevanceMustBeANumber() throws {
        for relevance in ["0.5", "null", "1e3"] {
            let body = #"{"entries":[{"date":0,"relevance":"# + relevance + #"}],"policy":"atEnd"}"#
            _ = try TimelineBody.timeline(json: Data(body.utf8), limits: RegistryLimits())
        }
        for relevance in ["{}", "\"high\"", "true", "[1]"] {
            let body = #"{"entries":[{"date":0,"relevance":"# + relevance + #"}],"policy":"atEnd"}"#
            #expect(throws: APIError.invalidField("entries[0].relevance must be a number"), "\(relevance)") {
                try TimelineBody.timeline(json: Data(body.utf8), limits: RegistryLimits())
            }
        }
    }
}
