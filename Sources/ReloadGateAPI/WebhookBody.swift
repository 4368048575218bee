public import Foundation
public import ReloadGateCore

/// The body of the reload webhook, `POST /v1/apps/<bundle>/reloads` (docs/DESIGN.md, Interfaces 3): which
/// widget instances (or, with `"pushType":"controls"`, which controls) to reload and how urgently. Every
/// field is optional.
public struct WebhookBody: Sendable {
    public var target: ReloadTarget
    public var priority: Priority
    /// `nil`: no expiration; `expiration: 0` arrives here as the received time (now or never, rule 7).
    public var expiration: Timestamp?
    public var collapseID: String?
    /// The exemption claimed, if any (rule 9; the route checks that the app may claim one).
    public var exemption: Exemption?

    /// The fields a body may have.
    public static let fieldNames: Set<String> = [
        "pushType", "kind", "match", "devices", "priority", "expiration", "collapseId", "exempt",
    ]
    /// Most device tokens one call may name.
    public static let deviceLimit = 1000
    /// Longest `collapseId` (APNs' limit).
    public static let collapseIDLength = 64

    /// Parses and checks the body of a call received at `received`.
    public init(json data: Data, received: Timestamp) throws(APIError) {
        let object = try JSONFields.object(data)
        if let unknown = object.keys.sorted().first(where: { !Self.fieldNames.contains($0) }) {
            throw .invalidField("unknown field '\(unknown)'; the fields are \(Self.fieldNames.sorted().joined(separator: ", "))")
        }
        target = ReloadTarget()
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
            guard list.count <= Self.deviceLimit else {
                throw .invalidField("devices names at most \(Self.deviceLimit) tokens, not \(list.count)")
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

        priority = .high
        if let value = object["priority"], !(value is NSNull) {
            guard let number = JSONFields.number(value), let level = Priority.allCases.first(where: { Double($0.rawValue) == number })
            else { throw .invalidField("priority must be 10, 5 or 1") }
            priority = level
        }

        if let value = object["expiration"], !(value is NSNull) {
            if JSONFields.number(value) == 0 {
                expiration = received  // 0: only if it can go now (rule 7)
            } else {
                expiration = try JSONFields.date(value, "expiration")
            }
        }

        collapseID = try JSONFields.optionalString(object["collapseId"], "collapseId")
        if let collapseID, collapseID.isEmpty || collapseID.utf8.count > Self.collapseIDLength {
            throw .invalidField("collapseId must be 1 to \(Self.collapseIDLength) bytes")
        }

        if let text = try JSONFields.optionalString(object["exempt"], "exempt") {
            guard let exemption = Exemption(rawValue: text) else {
                throw .invalidField("exempt must be one of \(Exemption.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            self.exemption = exemption
        }
    }
}
