/// Every reason the push endpoint answers with (docs/APNS.md, "Response"), mapped to its HTTP status in one
/// place. The raw value is the `reason` of the JSON error body, exactly as Apple spells it.
public enum APNsReason: String, Error, Sendable, CaseIterable, CustomStringConvertible {
    case badCollapseId = "BadCollapseId"
    case badDeviceToken = "BadDeviceToken"
    case badExpirationDate = "BadExpirationDate"
    case badMessageId = "BadMessageId"
    case badPriority = "BadPriority"
    case badTopic = "BadTopic"
    case deviceTokenNotForTopic = "DeviceTokenNotForTopic"
    case duplicateHeaders = "DuplicateHeaders"
    case invalidPushType = "InvalidPushType"
    case missingDeviceToken = "MissingDeviceToken"
    case missingTopic = "MissingTopic"
    case payloadEmpty = "PayloadEmpty"
    /// ReloadGate's addition: the body is not JSON, not an object, or `aps.content-changed` is not `true`.
    case invalidPayload = "InvalidPayload"
    case topicDisallowed = "TopicDisallowed"
    case badCertificate = "BadCertificate"
    case badEnvironmentKeyIdInToken = "BadEnvironmentKeyIdInToken"
    case expiredProviderToken = "ExpiredProviderToken"
    case invalidProviderToken = "InvalidProviderToken"
    case missingProviderToken = "MissingProviderToken"
    case badPath = "BadPath"
    case methodNotAllowed = "MethodNotAllowed"
    case unregistered = "Unregistered"
    case payloadTooLarge = "PayloadTooLarge"
    case tooManyProviderTokenUpdates = "TooManyProviderTokenUpdates"
    case tooManyRequests = "TooManyRequests"
    case internalServerError = "InternalServerError"
    case serviceUnavailable = "ServiceUnavailable"
    case shutdown = "Shutdown"

    /// The HTTP status Apple answers with for this reason.
    public var status: Int {
        switch self {
        case .badCollapseId, .badDeviceToken, .badExpirationDate, .badMessageId, .badPriority, .badTopic,
            .deviceTokenNotForTopic, .duplicateHeaders, .invalidPushType, .missingDeviceToken, .missingTopic,
            .payloadEmpty, .invalidPayload, .topicDisallowed:
            400
        case .badCertificate, .badEnvironmentKeyIdInToken, .expiredProviderToken, .invalidProviderToken,
            .missingProviderToken:
            403
        case .badPath: 404
        case .methodNotAllowed: 405
        case .unregistered: 410
        case .payloadTooLarge: 413
        case .tooManyProviderTokenUpdates, .tooManyRequests: 429
        case .internalServerError: 500
        case .serviceUnavailable, .shutdown: 503
        }
    }

    public var description: String { rawValue }
}

/// A refusal: the reason and, for `Unregistered`, the time the token stopped being valid.
///
/// `detail` says why in words for the gateway's debug log ("key ABC123DEFG belongs to team X, not Y");
/// it never reaches the sender (Apple's answers carry only the reason) and is not part of the identity:
/// two failures with the same reason and timestamp are equal.
public struct APNsFailure: Error, Hashable, Sendable {
    public var reason: APNsReason
    /// Milliseconds since the epoch (only for `410 Unregistered`).
    public var timestamp: Int64?
    /// Why, for the log; never sent.
    public var detail: String?

    public init(_ reason: APNsReason, timestamp: Int64? = nil, detail: String? = nil) {
        self.reason = reason
        self.timestamp = timestamp
        self.detail = detail
    }

    public static func == (lhs: APNsFailure, rhs: APNsFailure) -> Bool {
        lhs.reason == rhs.reason && lhs.timestamp == rhs.timestamp
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(reason)
        hasher.combine(timestamp)
    }

    /// The JSON body: `{"reason":"..."}`, with `"timestamp"` for a 410.
    public var body: String {
        if let timestamp { return #"{"reason":"\#(reason.rawValue)","timestamp":\#(timestamp)}"# }
        return #"{"reason":"\#(reason.rawValue)"}"#
    }
}
