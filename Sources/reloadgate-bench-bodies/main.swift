// What parsing a request body costs (issue 31: the registry and webhook bodies became `Decodable` types
// whose `init(from:)` holds the field checks), beside the reference of `JSONSerialization` parsing the same
// bytes into a dictionary (what the bodies were read from before, the checks then walking the dictionary).
//
//   swift build -c release --product reloadgate-bench-bodies && .build/release/reloadgate-bench-bodies [CALLS]
//
// Prints nanoseconds per parse (the best of five rounds) and each one's ratio to its reference; then the
// webhook body's parse as it was before (kept below as a function) and the webhook's 202 text both ways.
import Foundation
import ReloadGateAPI
import ReloadGateCore

let calls = CommandLine.arguments.dropFirst().first.flatMap { Int($0) }.map { min(max($0, 1000), 10_000_000) } ?? 200_000
let token = String(repeating: "ab", count: 32)
let webhook = Data(#"{"kind":"scores","match":{"team":"42"},"priority":10}"#.utf8)
let webhookFull = Data(#"{"kind":"scores","match":{"team":"42","live":true},"devices":["\#(token)"],"priority":5,"expiration":1795356000,"collapseId":"c1"}"#.utf8)
let registration = Data(
    #"{"widgets":[{"id":"w1","kind":"scores","family":"systemSmall","configuration":{"team":"42"}},{"id":"w2","kind":"news","family":"systemMedium"},{"id":"w3","kind":"scores","family":"accessoryCircular","configuration":{"team":"7","live":true}}]}"#.utf8
)
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


/// The webhook body's parse before issue 31 (JSONSerialization, then the checks over the dictionary),
/// kept here as the reference the Decodable type is compared with.
func webhookBefore(_ data: Data, received: Timestamp) throws(APIError) -> Int {
        let object = try JSONFields.object(data)
    if let unknown = object.keys.sorted().first(where: { !WebhookBody.fieldNames.contains($0) }) {
        throw .invalidField("unknown field '\(unknown)'; the fields are \(WebhookBody.fieldNames.sorted().joined(separator: ", "))")
    }
    var target = ReloadTarget()
    if let text = try JSONFields.optionalString(object["pushType"], "pushType") {
        // `widgets` (the default): reloadTimelines(ofKind:) / reloadAllTimelines(); `controls`:
        // reloadControls(ofKind:) / reloadAllControls().
        guard let pushType = PushType(rawValue: text) else {
            throw .invalidField("pushType must be one of \(PushType.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        target.pushType = pushType
    }
    if let kind = try JSONFields.optionalString(object["kind"], "kind") {
        let limit = RegistryLimits().identifierLength
        guard !kind.isEmpty, kind.count <= limit else { throw .invalidField("kind must be 1 to \(limit) characters") }
        target.kind = kind
    }
    if let match = object["match"], !(match is NSNull) {
        for (key, value) in try JSONFields.object(match, "match") {
            target.match[key] = try JSONFields.configurationValue(value, "match.\(key)")
        }
    }
    if let devices = object["devices"], !(devices is NSNull) {
        let list = try JSONFields.array(devices, "devices")
        guard list.count <= WebhookBody.deviceLimit else {
            throw .invalidField("devices names at most \(WebhookBody.deviceLimit) tokens, not \(list.count)")
        }
        var tokens: [DeviceToken] = []
        tokens.reserveCapacity(list.count)
        for (index, item) in list.enumerated() {
            let text = try JSONFields.string(item, "devices[\(index)]")
            do {
                tokens.append(try DeviceToken(text))
            } catch {
                throw .invalidField("devices[\(index)]: \(error)")
            }
        }
        target.devices = tokens
    }

    var priority = Priority.high
    if let value = object["priority"], !(value is NSNull) {
        guard let number = JSONFields.number(value), let level = Priority.allCases.first(where: { Double($0.rawValue) == number })
        else { throw .invalidField("priority must be 10, 5 or 1") }
        priority = level
    }

    if let value = object["expiration"], !(value is NSNull) {
        if JSONFields.number(value) == 0 {
            _ = received  // 0: only if it can go now (rule 7)
        } else {
            _ = try JSONFields.date(value, "expiration")
        }
    }

    let collapseID = try JSONFields.optionalString(object["collapseId"], "collapseId")
    if let collapseID, collapseID.isEmpty || collapseID.utf8.count > WebhookBody.collapseIDLength {
        throw .invalidField("collapseId must be 1 to \(WebhookBody.collapseIDLength) bytes")
    }

    if let text = try JSONFields.optionalString(object["exempt"], "exempt") {
        guard let exemption = Exemption(rawValue: text) else {
            throw .invalidField("exempt must be one of \(Exemption.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        _ = exemption
    }
    _ = target
    return priority.rawValue
}

func reference(_ data: Data) throws -> Int {
    (try JSONSerialization.jsonObject(with: data) as? [String: Any])?.count ?? 0
}

print("reloadgate body parsing: \(calls) parses a round, best of 5; 1 core")
for (name, data, parse) in [
    ("webhook {kind, match, priority}", webhook, { (data: Data) throws -> Int in try WebhookBody(json: data, received: received).priority.rawValue }),
    ("webhook, every field", webhookFull, { (data: Data) throws -> Int in try WebhookBody(json: data, received: received).priority.rawValue }),
    ("registration, 3 widgets", registration, { (data: Data) throws -> Int in try DeviceRegistrationBody(json: data, limits: limits).widgets.count }),
] as [(String, Data, (Data) throws -> Int)] {
    let typed = try measure(name) { try parse(data) }
    let dictionary = try measure(name) { try reference(data) }
    print(
        name.padding(toLength: 34, withPad: " ", startingAt: 0)
            + String(format: "%8.0f ns   JSONSerialization alone %8.0f ns   ratio %.2f", typed, dictionary, typed / dictionary)
    )
}

let counts = Dictionary(uniqueKeysWithValues: DecisionKind.onArrival.map { ($0.rawValue, 1) })
let r1 = try measure("") { RegistryAPI.ReloadAccepted(requestId: 12345, targets: 1, decisions: counts).jsonText.utf8.count }
let r2 = try measure("") {
    let countsText = counts.sorted { $0.key < $1.key }.map { "\"\($0.key)\":\($0.value)" }.joined(separator: ",")
    return #"{"decisions":{\#(countsText)},"requestId":\#(12345),"targets":\#(1)}"#.utf8.count
}
print(String(format: "the 202's text: ReloadAccepted.jsonText %.0f ns, the string as built before %.0f ns", r1, r2))
let o1 = try measure("") { try webhookBefore(webhook, received: received) }
let o2 = try measure("") { try webhookBefore(webhookFull, received: received) }
print(String(format: "webhook parse as before issue 31 (JSONSerialization, then the dictionary walked): %.0f ns, every field %.0f ns", o1, o2))
