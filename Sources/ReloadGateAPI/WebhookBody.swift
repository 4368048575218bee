public import Foundation
public import ReloadGateCore

/// The body of the reload webhook, `POST /v1/apps/<bundle>/reloads` (docs/DESIGN.md, Interfaces 3): which
/// widget instances (or, with `pushType` naming another push type, which of its instances) to reload and
/// how urgently. Every field is optional.
public struct WebhookBody: Decodable, Sendable {
    public var target: ReloadTarget
    public var priority: Priority
    /// `nil`: no expiration; ``Timestamp/nowOrNever`` for `expiration: 0` or a date before the call was
    /// received (rule 7).
    public var expiration: Timestamp?
    public var collapseID: String?
    /// The exemption claimed, if any (rule 9; the route checks that the app may claim one).
    public var exemption: Exemption?
    /// A Live Activity update's payload (`pushType` `liveactivity`: required), as a push would carry it;
    /// the route checks it by Apple's rules.
    public var payload: Data?
    /// Whether the body had a `payload`.
    private var payloadSent = false

    /// The fields a body may have.
    public static let fieldNames: Set<String> = [
        "pushType", "kind", "match", "devices", "priority", "expiration", "collapseId", "exempt", "payload",
    ]
    /// Most device tokens one call may name.
    public static let deviceLimit = 1000
    /// Longest `collapseId`, in characters (Unicode scalars, as JSON Schema counts a `maxLength`).
    public static let collapseIDLength = 64

    /// Parses and checks the body of a call received at `received`.
    public init(json data: Data, received: Timestamp) throws(APIError) {
        try self.init(BodyObject(body: BodyJSON.parse(data)))
        expiration = Timestamp.expiration(expiration, receivedAt: received)
        // The payload as sent (a push type's own rule checks it): taken from the body again, since a
        // decoder hands out values, not their JSON.
        if target.pushType.descriptor.mergeRule == .newestContent {
            guard let object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any], let payload = object["payload"] as? [String: Any],
                let bytes = try? JSONSerialization.data(withJSONObject: payload, options: [.sortedKeys])
            else { throw APIError.invalidField("payload must be an object: the \(target.pushType.rawValue) push to deliver (its aps)") }
            self.payload = bytes
        } else if payloadSent {
            throw APIError.invalidField("payload is only for pushType liveactivity")
        }
    }

    /// Reads the body through a `Decoder` (the tests' `JSONDecoder` too): the same checks as
    /// ``init(json:received:)`` before the expiration is taken against the call's time and the payload
    /// is read.
    public init(from decoder: any Decoder) throws {
        try self.init(BodyObject(body: decoder.singleValueContainer().decode(JSONValue.self)))
    }

    /// The body's checks, over its object as parsed.
    init(_ fields: BodyObject) throws(APIError) {
        try fields.refuseUnknownFields(Self.fieldNames)
        target = ReloadTarget()
        if let text = try fields.optionalString("pushType") {
            // `widgets` (the default): reloadTimelines(ofKind:) / reloadAllTimelines(); `controls`:
            // reloadControls(ofKind:) / reloadAllControls().
            guard let pushType = PushType(rawValue: text) else {
                throw APIError.invalidField("pushType must be one of \(PushType.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            target.pushType = pushType
        }
        if let kind = try fields.optionalString("kind") {
            let limit = RegistryLimits().identifierLength
            // Characters as JSON Schema counts them (Unicode scalars), so the OpenAPI document's maxLength is this rule.
            guard !kind.isEmpty, kind.unicodeScalars.count <= limit else { throw APIError.invalidField("kind must be 1 to \(limit) characters") }
            target.kind = kind
        }
        if !fields.isAbsent("match") { target.match = try fields.flatObject("match") }
        payloadSent = !fields.isAbsent("payload")
        if !fields.isAbsent("devices") {
            let items = try fields.array("devices")
            guard items.count <= Self.deviceLimit else {
                throw APIError.invalidField("devices names at most \(Self.deviceLimit) tokens, not \(items.count)")
            }
            var tokens: [DeviceToken] = []
            tokens.reserveCapacity(items.count)
            for (index, item) in items.enumerated() {
                tokens.append(try FieldRule.deviceToken(item, "\(fields.name("devices"))[\(index)]"))
            }
            target.devices = tokens
        }

        priority = .high
        if !fields.isAbsent("priority") {
            guard let number = fields.number("priority"), let level = Priority.allCases.first(where: { Double($0.rawValue) == number })
            else { throw APIError.invalidField("priority must be 10, 5 or 1") }
            priority = level
        }

        if !fields.isAbsent("expiration") {
            if fields.number("expiration") == 0 {
                expiration = .nowOrNever  // 0: only if it can go now (rule 7)
            } else {
                expiration = try fields.date("expiration")
            }
        }

        collapseID = try fields.optionalString("collapseId")
        if let collapseID, collapseID.isEmpty || collapseID.unicodeScalars.count > Self.collapseIDLength {
            throw APIError.invalidField("collapseId must be 1 to \(Self.collapseIDLength) characters")
        }

        if let text = try fields.optionalString("exempt") {
            guard let exemption = Exemption(rawValue: text) else {
                throw APIError.invalidField("exempt must be one of \(Exemption.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            self.exemption = exemption
        }
    }
}
