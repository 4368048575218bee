import PropertyBased
import ReloadGateAPNs
import ReloadGateCore
import ReloadGateHostileInput
import Testing

/// The numbers in a push's headers (`apns-expiration`, `apns-priority`) in every hostile spelling: a
/// value in range or the APNs reason for that header, never a trap and never a number out of range.
struct PushHeadersTests {
    static func headers(_ extra: [(String, String)]) -> [(name: String, value: String)] {
        ([("apns-topic", "com.example.scores.push-type.widgets"), ("apns-push-type", "widgets")] + extra).map { (name: $0.0, value: $0.1) }
    }

    static let spellings = Gen<String>.oneOf(
        Gen.element(of: HostileNumbers.all).map { $0 ?? "0" },
        Gen.int64().map { String($0) },
        Gen.int64(in: 0...300_000_000_000).map { String($0) },
        Gen.uint64().map { String(Double(bitPattern: $0)) },
        Gen.number.string(of: 15...25)
    )

    @Test(arguments: ["9223372036854775807", "-9223372036854775808", "9223372036854775808", "253402300800", "-1", "1e300", "1.5", " 5", "", "NaN"])
    func anExpirationOutsideTheYears1970To9999IsBadExpirationDate(_ value: String) {
        #expect(throws: APNsFailure(.badExpirationDate)) {
            try PushHeaders(Self.headers([("apns-expiration", value)]), certificateTopics: nil)
        }
    }

    @Test func theEndsOfTheExpirationRangeAreAccepted() throws {
        #expect(try PushHeaders(Self.headers([("apns-expiration", "0")]), certificateTopics: nil).expiration == 0)
        #expect(try PushHeaders(Self.headers([("apns-expiration", "253402300799")]), certificateTopics: nil).expiration == 253_402_300_799)
    }

    @Test func everyExpirationIsInRangeOrBadExpirationDate() async {
        await propertyCheck(count: 3000, input: Self.spellings) { value in
            do throws(APNsFailure) {
                let parsed = try PushHeaders(Self.headers([("apns-expiration", value)]), certificateTopics: nil)
                #expect(parsed.expiration.map { (0...253_402_300_799).contains($0) } == true, "\(value)")
                // The milliseconds the scheduler computes from it cannot overflow.
                #expect(parsed.expiration.flatMap { Timestamp(unixSeconds: $0) } != nil)
            } catch {
                #expect(error.reason == .badExpirationDate, "\(value): \(error)")
            }
        }
    }

    @Test func everyPriorityIsTenFiveOrOneOrBadPriority() async {
        await propertyCheck(count: 3000, input: Self.spellings) { value in
            do throws(APNsFailure) {
                let parsed = try PushHeaders(Self.headers([("apns-priority", value)]), certificateTopics: nil)
                #expect([10, 5, 1].contains(parsed.priority.rawValue) && Int(value) == parsed.priority.rawValue, "\(value)")
            } catch {
                #expect(error.reason == .badPriority, "\(value): \(error)")
            }
        }
    }

    static func named(_ pairs: [(String, String)]) -> [(name: String, value: String)] {
        pairs.map { (name: $0.0, value: $0.1) }
    }

    @Test func aControlsPushNamesItsTypeOrItsTopicSuffix() throws {
        let both = try PushHeaders(Self.named([("apns-topic", "com.example.app.push-type.controls"), ("apns-push-type", "controls")]), certificateTopics: nil)
        #expect(both.pushType == .controls && both.bundle.rawValue == "com.example.app")
        let bySuffix = try PushHeaders(Self.named([("apns-topic", "com.example.app.push-type.controls")]), certificateTopics: nil)
        #expect(bySuffix.pushType == .controls)
        let widgets = try PushHeaders(Self.named([("apns-topic", "com.example.app.push-type.widgets")]), certificateTopics: nil)
        #expect(widgets.pushType == .widgets)
    }

    @Test func aPushTypeAndATopicSuffixThatDisagreeAreBadTopic() {
        #expect(throws: APNsFailure(.badTopic)) {
            try PushHeaders(Self.named([("apns-topic", "com.example.app.push-type.widgets"), ("apns-push-type", "controls")]), certificateTopics: nil)
        }
        #expect(throws: APNsFailure(.badTopic)) {
            try PushHeaders(Self.named([("apns-topic", "com.example.app.push-type.controls"), ("apns-push-type", "widgets")]), certificateTopics: nil)
        }
        #expect(throws: APNsFailure(.badTopic)) {
            try PushHeaders(Self.named([("apns-topic", "com.example.app"), ("apns-push-type", "controls")]), certificateTopics: nil)
        }
    }

    @Test func anotherPushTypeOrATopicWithoutASuffixIsInvalidPushType() {
        #expect(throws: APNsFailure(.invalidPushType)) {
            try PushHeaders(Self.named([("apns-topic", "com.example.app.push-type.controls"), ("apns-push-type", "alert")]), certificateTopics: nil)
        }
        #expect(throws: APNsFailure(.invalidPushType)) {
            try PushHeaders(Self.named([("apns-topic", "com.example.app")]), certificateTopics: nil)
        }
    }

    @Test func aControlsPushWithoutATopicNeedsACertificateOfOneTopic() throws {
        #expect(throws: APNsFailure(.missingTopic)) {
            try PushHeaders(Self.named([("apns-push-type", "controls")]), certificateTopics: nil)
        }
        let derived = try PushHeaders(Self.named([("apns-push-type", "controls")]), certificateTopics: ["com.example.app"])
        #expect(derived.pushType == .controls && derived.bundle.rawValue == "com.example.app")
        #expect(throws: APNsFailure(.missingTopic)) {
            try PushHeaders(Self.named([("apns-push-type", "controls")]), certificateTopics: ["com.example.app", "com.example.other"])
        }
    }
}

/// The APNs listener reads `authorization` as the registry and admin APIs do (``HeaderValue``): the bearer
/// scheme in any case; another scheme is an empty token, refused as InvalidProviderToken.
struct PushAuthorizationTests {
    @Test(arguments: ["bearer eyJ.a.b", "Bearer eyJ.a.b", "BEARER eyJ.a.b", "bEaReR eyJ.a.b", "basic eyJ", "bearer", "bearer\teyJ", ""])
    func theProviderTokenIsTheBearerCredentialEveryListenerReads(_ field: String) throws {
        let headers = try PushHeaders(PushHeadersTests.headers([("authorization", field)]), certificateTopics: nil)
        #expect(headers.bearerToken == (HeaderValue.bearerCredential(field) ?? ""))
        if field.lowercased().hasPrefix("bearer ") { #expect(headers.bearerToken == "eyJ.a.b") }
    }

    @Test func withoutTheFieldThereIsNoToken() throws {
        #expect(try PushHeaders(PushHeadersTests.headers([]), certificateTopics: nil).bearerToken == nil)
    }
}

/// The device token's text from a push's path: `BadPath` for any path but `/3/device/<token>` (a query is
/// not part of the token), `MethodNotAllowed` for any method but POST on it, the token as sent otherwise
/// (possibly empty: the token's own check comes later).
struct PushPathTests {
    @Test(arguments: [
        ("/3/device/abc", "abc"), ("/3/device/", ""), ("/3/device/abc?x=1", "abc"), ("/3/device/?", ""),
        ("/3/device/ab%2Fc", "ab%2Fc"), ("/3/device/é", "é"), ("/3/device/abc?a/b", "abc"),
    ])
    func aPushPathGivesItsTokenAsSent(_ path: String, _ token: String) throws {
        #expect(try PushHeaders.deviceTokenText(method: "POST", path: path) == token)
    }

    @Test(arguments: ["", "/", "/3/device", "/3/devices/abc", "/3/DEVICE/abc", "3/device/abc", "?/3/device/abc", "/4/device/abc"])
    func anyOtherPathIsBadPathWhateverTheMethod(_ path: String) {
        for method in ["POST", "GET"] {
            #expect(throws: APNsFailure(.badPath)) { try PushHeaders.deviceTokenText(method: method, path: path) }
        }
    }

    @Test(arguments: ["/3/device/ab/c", "/3/device//", "/3/device/abc/"])
    func aTokenWithASlashIsBadPath(_ path: String) {
        #expect(throws: APNsFailure(.badPath)) { try PushHeaders.deviceTokenText(method: "POST", path: path) }
    }

    @Test func aMethodOtherThanPostOnThePushPathIsMethodNotAllowed() {
        for method in ["GET", "PUT", "post", ""] {
            #expect(throws: APNsFailure(.methodNotAllowed)) { try PushHeaders.deviceTokenText(method: method, path: "/3/device/abc") }
        }
        // Under `/3/device/` the method is checked before the token's slashes.
        #expect(throws: APNsFailure(.methodNotAllowed)) { try PushHeaders.deviceTokenText(method: "GET", path: "/3/device/a/b") }
    }
}
