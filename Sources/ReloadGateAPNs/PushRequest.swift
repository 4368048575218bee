public import ReloadGateCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A push as it arrives: method, path and headers (names in lower case), before any check.
public struct PushRequestHead: Sendable {
    public var method: String
    public var path: String
    public var headers: [(name: String, value: String)]

    public init(method: String, path: String, headers: [(name: String, value: String)]) {
        self.method = method
        self.path = path
        self.headers = headers
    }
}

/// The headers of a push, checked (docs/APNS.md, "Request"), in the order docs/APNS.md gives: duplicates, apns-id,
/// expiration, priority, collapse id, push type, topic.
public struct PushHeaders: Sendable {
    /// `apns-id` as sent, or `nil` (the gateway then makes one).
    public var apnsID: String?
    /// `apns-expiration`, UNIX seconds from 0 to 9999-12-31 (`0`: now or never).
    public var expiration: Int64?
    public var priority: Priority
    public var collapseID: String?
    /// The topic's bundle.
    public var bundle: BundleID
    /// What the push reloads: widgets, or one control (docs/APNS.md, `apns-push-type`).
    public var pushType: PushType
    /// The token of `authorization: bearer <token>`, if any.
    public var bearerToken: Substring?

    /// The path prefix of the push endpoint.
    public static let pathPrefix = "/3/device/"
    /// The topic suffix of widget pushes.
    public static let widgetsSuffix = PushType.widgets.topicSuffix

    /// Checks method and path first: any path but `/3/device/...` is `BadPath`, any method but POST on it
    /// `MethodNotAllowed`.
    /// - Returns: the device token text from the path (possibly empty; checked last, as docs/APNS.md orders).
    public static func deviceTokenText(method: String, path: String) throws(APNsFailure) -> Substring {
        // Over the path's bytes in place: this runs for every push, and a substring's UTF-8 view, stepped
        // index by index, costs several times as much (docs/BENCHMARKS.md).
        var text = path
        let scanned: (token: Range<Int>, hasSlash: Bool)? = text.withUTF8 { bytes in
            let beforeQuery = UnsafeBufferPointer(rebasing: bytes[..<(bytes.firstIndex(of: UInt8(ascii: "?")) ?? bytes.count)])
            guard beforeQuery.starts(with: pathPrefix.utf8) else { return nil }
            let token = pathPrefix.utf8.count..<beforeQuery.count
            return (token, beforeQuery[token].contains(UInt8(ascii: "/")))
        }
        guard let scanned else { throw APNsFailure(.badPath) }
        guard method == "POST" else { throw APNsFailure(.methodNotAllowed) }
        guard !scanned.hasSlash else { throw APNsFailure(.badPath) }
        let utf8 = text.utf8
        let start = utf8.index(utf8.startIndex, offsetBy: scanned.token.lowerBound)
        return Substring(utf8[start..<utf8.index(start, offsetBy: scanned.token.count)])
    }

    /// Checks the headers.
    /// - Parameter certificateTopics: the topics of the connection's client certificate, or `nil` when
    ///   it has none (token authentication: the topic is required).
    public init(_ headers: [(name: String, value: String)], certificateTopics: [String]?) throws(APNsFailure) {
        var apnsID: String?
        var expiration: String?
        var priority: String?
        var collapseID: String?
        var pushType: String?
        var topic: String?
        var authorization: String?
        func set(_ slot: inout String?, _ value: String) throws(APNsFailure) {
            guard slot == nil else { throw APNsFailure(.duplicateHeaders) }
            slot = value
        }
        for (name, value) in headers {
            switch name {
            case "apns-id": try set(&apnsID, value)
            case "apns-expiration": try set(&expiration, value)
            case "apns-priority": try set(&priority, value)
            case "apns-collapse-id": try set(&collapseID, value)
            case "apns-push-type": try set(&pushType, value)
            case "apns-topic": try set(&topic, value)
            case "authorization": try set(&authorization, value)
            default:
                // Other apns-* headers (apns-unique-id, ...) may appear once too.
                if name.hasPrefix("apns-"), headers.lazy.filter({ $0.name == name }).count > 1 {
                    throw APNsFailure(.duplicateHeaders)
                }
            }
        }
        if let apnsID, !Self.isCanonicalUUID(apnsID) { throw APNsFailure(.badMessageId) }
        var expirationSeconds: Int64?
        if let expiration {
            // UNIX seconds from 0 to 9999-12-31: anything else (a fraction, 20 digits, Int64.max, whose
            // milliseconds overflow) is refused here, before any arithmetic.
            guard let value = Int64(expiration), Timestamp(unixSeconds: value) != nil else {
                throw APNsFailure(.badExpirationDate, detail: "apns-expiration must be UNIX seconds from 0 to 253402300799")
            }
            expirationSeconds = value
        }
        var level = Priority.high
        if let priority {
            guard let number = Int(priority), let parsed = Priority(rawValue: number) else { throw APNsFailure(.badPriority) }
            level = parsed
        }
        if let collapseID, collapseID.utf8.count > 64 { throw APNsFailure(.badCollapseId) }

        // The push type: as sent, else from the topic's suffix (docs/APNS.md: `widgets` or `controls`).
        var type: PushType?
        if let pushType {
            guard let named = PushType(rawValue: pushType) else { throw APNsFailure(.invalidPushType) }
            type = named
        } else if let topic {
            guard let suffixed = PushType.allCases.first(where: { topic.hasSuffix($0.topicSuffix) }) else {
                throw APNsFailure(.invalidPushType)
            }
            type = suffixed
        }
        // A certificate naming exactly one topic lets the sender omit apns-topic.
        if topic == nil, let certificateTopics, certificateTopics.count == 1 {
            topic = certificateTopics[0] + (type ?? .widgets).topicSuffix
        }
        guard let topic else { throw APNsFailure(.missingTopic) }
        let kind = type ?? .widgets
        // A suffix that is not the push type's (a controls push to `.push-type.widgets`, say) is BadTopic.
        guard topic.hasSuffix(kind.topicSuffix),
            let bundle = try? BundleID(String(decoding: topic.utf8.dropLast(kind.topicSuffix.utf8.count), as: UTF8.self))
        else { throw APNsFailure(.badTopic) }
        guard kind.descriptor.priorities.contains(level) else {
            throw APNsFailure(.badPriority, detail: "\(kind.rawValue) pushes take apns-priority \(kind.descriptor.priorities.map { "\($0.rawValue)" }.joined(separator: " or "))")
        }
        self.pushType = kind

        self.apnsID = apnsID
        self.expiration = expirationSeconds
        self.priority = level
        self.collapseID = collapseID
        self.bundle = bundle
        // Another scheme is an empty token: refused as `authorization is not bearer <token>`.
        self.bearerToken = authorization.map { HeaderValue.bearerCredential($0) ?? "" }
    }

    /// 8-4-4-4-12 hexadecimal digits, read over the text's bytes in place: every push with an apns-id is
    /// checked.
    public static func isCanonicalUUID(_ text: String) -> Bool {
        guard text.utf8.count == 36 else { return false }
        var text = text
        return text.withUTF8 { bytes in
            bytes.enumerated().allSatisfy { index, byte in
                index == 8 || index == 13 || index == 18 || index == 23 ? byte == UInt8(ascii: "-") : byte.isASCIIHexDigit
            }
        }
    }
}

/// The connection's authentication state (docs/APNS.md, "Authentication"): the team it is bound to and the
/// last token it used. One per HTTP/2 (or HTTP/1.1) connection.
public struct ConnectionAuthentication: Sendable {
    public private(set) var boundTeam: String?
    private var lastToken: String?
    /// What `lastToken` verified as (rechecked, not verified again, while the connection reuses it).
    private var lastVerified: VerifiedToken?
    private var lastTokenChange: Int64 = 0
    /// Seconds before a connection may switch to a new token (Apple: 20 minutes); 0 turns the check off.
    public var tokenUpdateInterval: Int64

    public init(tokenUpdateInterval: Int64 = 1200) {
        self.tokenUpdateInterval = tokenUpdateInterval
    }

    /// Authenticates a push by its bearer token, binding the connection to the token's team.
    public mutating func authenticate(
        bearer token: Substring?,
        verifier: ProviderTokenVerifier,
        now: Int64
    ) throws(APNsFailure) -> VerifiedToken {
        guard let token else { throw APNsFailure(.missingProviderToken, detail: "no authorization header and no client certificate") }
        guard !token.isEmpty else { throw APNsFailure(.invalidProviderToken, detail: "authorization is not `bearer <token>`") }
        let sameToken = lastToken.map { Self.sameBytes(token, $0) } ?? false
        var rechecked: VerifiedToken?
        if sameToken, let lastVerified {
            rechecked = try verifier.recheck(lastVerified, now: now)
        }
        let accepted: VerifiedToken
        if let rechecked {
            accepted = rechecked
        } else {
            accepted = try verifier.verify(token, now: now)
        }
        if let boundTeam, boundTeam != accepted.teamID {
            throw APNsFailure(.invalidProviderToken, detail: "the connection is bound to team \(boundTeam); this token is of team \(accepted.teamID)")
        }
        if lastToken != nil, !sameToken {
            if tokenUpdateInterval > 0, now - lastTokenChange < tokenUpdateInterval {
                throw APNsFailure(
                    .tooManyProviderTokenUpdates,
                    detail: "a new token \(now - lastTokenChange) s after the connection's last one (ingress.tokenUpdateInterval \(tokenUpdateInterval) s)"
                )
            }
            self.lastToken = String(token)
            lastTokenChange = now
        } else if lastToken == nil {
            lastToken = String(token)
            lastTokenChange = now
        }
        boundTeam = accepted.teamID
        lastVerified = accepted
        return accepted
    }

    /// Byte equality (memcmp when both are contiguous UTF-8, as tokens from the wire are).
    static func sameBytes(_ token: Substring, _ other: String) -> Bool {
        guard token.utf8.count == other.utf8.count else { return false }
        let compared = token.utf8.withContiguousStorageIfAvailable { left in
            other.utf8.withContiguousStorageIfAvailable { right in
                left.count == 0 || memcmp(left.baseAddress!, right.baseAddress!, left.count) == 0
            }
        }
        return (compared ?? nil) ?? token.utf8.elementsEqual(other.utf8)
    }
}
