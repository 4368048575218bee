// What parsing a request body costs (the registry and webhook bodies are `Decodable` types whose
// `init(from:)` holds the field checks, read by `JSONParser` and `JSONValueDecoder`), beside the parser
// alone and the reference of `JSONSerialization` parsing the same bytes into a dictionary (Foundation's
// way to read them without a decoder).
//
//   swift build -c release --product reloadgate-bench-bodies && .build/release/reloadgate-bench-bodies [CALLS]
//
// Prints nanoseconds per parse (the best of five rounds) and each one's ratio to its reference (a trace
// line is read as `reloadgate simulate` reads a file of them), then the webhook's 202 text both ways, a
// registration's 200 by hand and through the encoder, a device token's parse, a push's head (its path and
// headers), a bundle id's parse, and the webhook's signature check beside a bare HMAC.
import Crypto
import Foundation
import ReloadGateAPI
import ReloadGateAPNs
import ReloadGateCore
import ReloadGateSimulation

let calls = CommandLine.arguments.dropFirst().first.flatMap { Int($0) }.map { min(max($0, 1000), 10_000_000) } ?? 200_000
let token = String(repeating: "ab", count: 32)
let webhook = Data(#"{"kind":"scores","match":{"team":"42"},"priority":10}"#.utf8)
let webhookFull = Data(#"{"kind":"scores","match":{"team":"42","live":true},"devices":["\#(token)"],"priority":5,"expiration":1795356000,"collapseId":"c1"}"#.utf8)
let registration = Data(
    #"{"widgets":[{"id":"w1","kind":"scores","family":"systemSmall","configuration":{"team":"42"}},{"id":"w2","kind":"news","family":"systemMedium"},{"id":"w3","kind":"scores","family":"accessoryCircular","configuration":{"team":"7","live":true}}]}"#.utf8
)
/// scripts/bench-scale's registration body.
let registrationOne = Data(#"{"widgets":[{"id":"w","kind":"scores","family":"systemSmall","configuration":{"group":"b"}}]}"#.utf8)
let traceLine = Data(#"{"at":"2026-11-25T18:02:00.000Z","event":"push","device":"d1","kind":"scores","priority":10}"#.utf8)
let received = Timestamp(seconds: 1_790_000_000)
let limits = RegistryLimits()

func measure(_ name: String, _ parse: () throws -> Int) rethrows -> Double {
    var best = Double.infinity
    var sink = 0
    for _ in 0..<5 {
        let start = ContinuousClock.now
        for _ in 0..<calls { sink &+= try parse() }
        let elapsed = ContinuousClock.now - start
        let nanoseconds = Double(elapsed.components.seconds) * 1e9 + Double(elapsed.components.attoseconds) / 1e9
        best = min(best, nanoseconds / Double(calls))
    }
    if sink == 42 { print("") }
    return best
}


func reference(_ data: Data) throws -> Int {
    (try JSONSerialization.jsonObject(with: data) as? [String: Any])?.count ?? 0
}

print("reloadgate body parsing: \(calls) parses a round, best of 5; 1 core")
for (name, data, parse) in [
    ("webhook {kind, match, priority}", webhook, { (data: Data) throws -> Int in try WebhookBody(json: data, received: received).priority.rawValue }),
    ("webhook, every field", webhookFull, { (data: Data) throws -> Int in try WebhookBody(json: data, received: received).priority.rawValue }),
    ("registration, 3 widgets", registration, { (data: Data) throws -> Int in try DeviceRegistrationBody(json: data, limits: limits).widgets.count }),
    ("registration, 1 widget", registrationOne, { (data: Data) throws -> Int in try DeviceRegistrationBody(json: data, limits: limits).widgets.count }),
    ("trace line, a push", traceLine, { (data: Data) throws -> Int in
        var names = TraceNames()
        return try TraceFile.read(data, names: &names).count
    }),
] as [(String, Data, (Data) throws -> Int)] {
    let typed = try measure(name) { try parse(data) }
    let parser = measure(name) { (try? JSONParser.parse(data)) == nil ? 0 : 1 }
    let dictionary = try measure(name) { try reference(data) }
    print(
        name.padding(toLength: 34, withPad: " ", startingAt: 0)
            + String(format: "%8.0f ns   JSONParser alone %6.0f ns   JSONSerialization alone %6.0f ns   ratio %.2f", typed, parser, dictionary, typed / dictionary)
    )
}

// The webhook's 202 for one scheduled instance: written from the counts (as the route does), and through the
// dictionary the answer's type holds (as the route did).
let oneScheduled = DecisionCounts([Decision(request: 1, instance: nil, kind: .scheduled, due: nil, reason: .dueNow)])
let r1 = measure("") { RegistryAPI.ReloadAccepted.jsonText(requestId: 12345, targets: 1, counts: oneScheduled).utf8.count }
let r2 = measure("") {
    let answer = RegistryAPI.ReloadAccepted(requestId: 12345, targets: 1, counts: oneScheduled)
    let counts = answer.decisions.sorted { $0.key < $1.key }.map { "\(JSONText.encoderQuoted($0.key)):\($0.value)" }
    return #"{"decisions":{\#(counts.joined(separator: ","))},"requestId":\#(answer.requestId),"targets":\#(answer.targets)}"#.utf8.count
}
print(String(format: "the 202's text: from the counts %.0f ns, through the dictionary %.0f ns", r1, r2))

// A registration's 200 (scripts/bench-scale's: one widget), written by hand as the route does, beside the
// encoder's bytes of the same answer.
let registered = RegistryAPI.DeviceRegistered(device: token, widgets: [.init(id: "w", instance: 123_456)], removedWidgets: 0, retiredPreviousToken: false)
let a1 = measure("") { registered.jsonText.utf8.count }
let a2 = try measure("") { try BodyJSON.encode(registered).count }
print(String(format: "a registration's 200: by hand %.0f ns, through the encoder %.0f ns", a1, a2))


// A device token read from its text (every push's path, registration and delivery), in lower case as apps
// send it, beside the same text's UTF-8 count (the least a check reads).
let tokenText = String(repeating: "0123456789abcdef", count: 4)
let t1 = try measure("") { try DeviceToken(tokenText).hex.utf8.count }
let t2 = measure("") { tokenText.utf8.count &+ Int(tokenText.utf8.first ?? 0) }
print(String(format: "a device token from its text: %.0f ns (its byte count %.0f ns)", t1, t2))

// A push's head checked as the APNs listener checks it: the device token's text from the path, then the
// headers a provider library sends (a provider token, topic, push type, apns-id, priority, expiration).
let pushPath = "/3/device/" + tokenText
let pushFields: [(name: String, value: String)] = [
    ("authorization", "bearer " + String(repeating: "e", count: 36) + "." + String(repeating: "p", count: 80) + "." + String(repeating: "s", count: 86)),
    ("apns-topic", "com.example.scores.push-type.widgets"), ("apns-push-type", "widgets"),
    ("apns-id", "0f8e4a2c-9b1d-4c3e-8a7f-2d6b5e4c3a21"), ("apns-priority", "10"), ("apns-expiration", "0"),
]
let h1 = try measure("") { try PushHeaders.deviceTokenText(method: "POST", path: pushPath).utf8.count }
let h2 = try measure("") { try PushHeaders(pushFields, certificateTopics: nil).bundle.rawValue.utf8.count }
print(String(format: "a push's head: the token's text from the path %.0f ns, the headers %.0f ns", h1, h2))

// A bundle id read from its text (every push's topic, every registry and webhook path).
let bundleText = "com.example.scores.widgets"
let b1 = try measure("") { try BundleID(bundleText).rawValue.utf8.count }
print(String(format: "a bundle id from its text: %.0f ns", b1))

// The webhook's signature: its header parsed and the HMAC checked with the app's keyed secret (as the route
// does), beside a bare HMAC-SHA256 of the same message with a key made for it (what any check must do).
let secret = "rgs_" + String(repeating: "k", count: 40)
let signedAt: Int64 = 1_790_000_000
let header = WebhookSignature.header(body: webhookFull, timestamp: signedAt, secret: secret)
let key = WebhookSignature.Key(secret: secret)
let signedNow = Date(timeIntervalSince1970: TimeInterval(signedAt))
let checked = try measure("") {
    let signature = try WebhookSignature(header: header)
    try signature.verify(body: webhookFull, key: key, now: signedNow)
    return signature.signatures.count
}
let bare = measure("") {
    var message = Data("\(signedAt).".utf8)
    message.append(webhookFull)
    return HMAC<SHA256>.authenticationCode(for: message, using: SymmetricKey(data: Data(secret.utf8))).byteCount
}
print(String(format: "the webhook's signature: header and HMAC %.0f ns, a bare HMAC-SHA256 of the message %.0f ns, ratio %.2f", checked, bare, checked / bare))
