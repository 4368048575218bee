/// What the gateway does when Apple's push service refuses one of the gateway's own deliveries.
public enum UpstreamAction: String, Sendable, CaseIterable {
    /// Not sent now: tried again after a backoff (honouring `retry-after`).
    case retry
    /// The provider token is too old: a new one (at most once in 20 minutes), and one more try.
    case newToken = "new-token"
    /// The connection is not to be used again (idle, shutting down, bound to another key): a new one is
    /// opened, and the delivery tried again after a backoff.
    case newConnection = "new-connection"
    /// The device token is no longer valid: not tried again, and the device is marked unregistered (unless
    /// it registered again after Apple's timestamp).
    case retireToken = "retire-token"
    /// Refused for good, for this delivery alone: recorded as failed, not tried again.
    case drop
    /// Refused because of the gateway's own setup (its key, team or environment, a topic, a header it
    /// should not send): recorded as failed and logged as an error for the operator, since every delivery
    /// like it will be refused the same way until the setup is fixed.
    case alert
}

/// One refusal of Apple's: its status, its reason as Apple spelled it, and the action it calls for
/// (docs/APNS.md, "What Apple answers the gateway"). Every reason Apple's documentation lists is in
/// ``known``, with the spellings APNs and client libraries use; an unknown one gets the action of its status.
public struct UpstreamRefusal: Sendable, Hashable {
    public var status: Int
    /// Apple's `reason`, or `HTTP <status>` when the answer had none.
    public var reason: String
    public var action: UpstreamAction

    /// The refusal of an answer with `status` and `reason` (from its JSON body, if any).
    public init(status: Int, reason: String?) {
        self.status = status
        self.reason = reason ?? "HTTP \(status)"
        action = reason.flatMap { Self.known[$0]?.action } ?? Self.action(ofStatus: status)
    }

    /// A reason of Apple's documentation: the status Apple sends it with, and the action it calls for.
    public struct Documented: Sendable, Hashable {
        public var status: Int
        public var action: UpstreamAction

        init(_ status: Int, _ action: UpstreamAction) {
            self.status = status
            self.action = action
        }
    }

    /// Apple's reasons ("Handling notification responses from APNs"), with their statuses and actions.
    public static let known: [String: Documented] = [
        // 400
        "BadCollapseId": .init(400, .drop),
        "BadDeviceToken": .init(400, .retireToken),
        "BadExpirationDate": .init(400, .drop),
        "BadMessageId": .init(400, .drop),
        "BadPriority": .init(400, .drop),
        "BadTopic": .init(400, .alert),
        "DeviceTokenNotForTopic": .init(400, .alert),
        "DuplicateHeaders": .init(400, .alert),
        "IdleTimeout": .init(400, .newConnection),
        "InvalidPushType": .init(400, .alert),
        "MissingDeviceToken": .init(400, .alert),
        "MissingTopic": .init(400, .alert),
        "PayloadEmpty": .init(400, .alert),
        "TopicDisallowed": .init(400, .alert),
        // 403
        "BadCertificate": .init(403, .alert),
        "BadCertificateEnvironment": .init(403, .alert),
        "ExpiredProviderToken": .init(403, .newToken),
        "Forbidden": .init(403, .alert),
        "InvalidProviderToken": .init(403, .alert),
        "MissingProviderToken": .init(403, .alert),
        "UnrelatedKeyIdInToken": .init(403, .newConnection),
        // Apple's documentation spells it BadEnvironmentKeyIdInToken; the service answers
        // BadEnvironmentKeyInToken (APNSwift knows both).
        "BadEnvironmentKeyIdInToken": .init(403, .alert),
        "BadEnvironmentKeyInToken": .init(403, .alert),
        // 404, 405
        "BadPath": .init(404, .alert),
        "MethodNotAllowed": .init(405, .alert),
        // 410
        "ExpiredToken": .init(410, .retireToken),
        "Unregistered": .init(410, .retireToken),
        // 413
        "PayloadTooLarge": .init(413, .drop),
        // 429: the token is not refreshed again (that is what Apple counts), the delivery waits.
        "TooManyProviderTokenUpdates": .init(429, .retry),
        "TooManyRequests": .init(429, .retry),
        // 500, 503
        "InternalServerError": .init(500, .retry),
        "ServiceUnavailable": .init(503, .retry),
        "Shutdown": .init(503, .newConnection),
    ]

    /// The action for a reason not in ``known``: by its status, the safe one.
    public static func action(ofStatus status: Int) -> UpstreamAction {
        switch status {
        case 410: .retireToken
        case 429, 500...599: .retry
        case 403: .alert
        default: .drop
        }
    }
}
