public import ReloadGateAPI
public import ReloadGateStore

/// The admin API's bodies, one type each, named as their schema in the OpenAPI document
/// (`components/schemas`): the server (``AdminRoutes``, ``DashboardRoutes``) encodes them, the operator's
/// CLI decodes them, and `AdminBodySchemaTests` checks examples of every one against the document.
/// Times are RFC 3339 text in UTC; a field the schema types as `[..., "null"]` is ``Nullable`` (always
/// written, `null` when empty).
public enum AdminAPI {}

// MARK: Pending, explain, budget

extension AdminAPI {
    /// `GET /v1/pending`.
    public struct PendingList: DocumentedBody {
        public static let schema = "PendingList"
        public var now: String
        public var pending: [PendingReload]
    }

    /// A widget instance's pending reload and what it waits for.
    public struct PendingReload: DocumentedBody {
        public static let schema = "PendingReload"
        public var instance: Int64
        public var bundle: String
        public var device: String
        public var widget: String
        public var kind: String
        public var family: String
        public var configuration: JSONValue
        public var due: String
        public var dueInSeconds: Double
        public var priority: Int
        @Nullable public var expiration: String?
        public var requestCount: Int
        public var requests: [Int64]
        public var exempt: Bool
        /// `budget`, `interval`, `low-priority`, `background`, `coalescing` or `due`.
        public var waitsFor: String
    }

    /// A request as the ledger holds it, with its decisions.
    public struct Request: DocumentedBody {
        public static let schema = "Request"
        public var id: Int64
        public var bundle: String
        /// `webhook` or `apns`.
        public var source: String
        public var receivedAt: String
        public var priority: Int
        @Nullable public var expiration: String?
        @Nullable public var collapseId: String?
        public var exempt: Bool
        /// What the request targeted, as it was sent (JSON), or its summary text.
        public var target: JSONValue
        @Nullable public var apnsId: String?
        public var decisions: [Decision]
    }

    /// One decision on a request (about one widget instance, or about the request as a whole).
    public struct Decision: DocumentedBody {
        public static let schema = "Decision"
        @Nullable public var instance: Int64?
        @Nullable public var widget: String?
        @Nullable public var kind: String?
        @Nullable public var device: String?
        public var decision: String
        @Nullable public var due: String?
        public var reason: String
    }

    /// A push released to Apple (or the outbox) and what became of it.
    public struct Delivery: DocumentedBody {
        public static let schema = "Delivery"
        public var apnsId: String
        @Nullable public var bundle: String?
        @Nullable public var device: String?
        public var releasedAt: String
        public var instances: [Int64]
        public var requests: [Int64]
        public var requestCount: Int
        public var priority: Int
        public var state: String
        public var attempts: Int
        public var unknownOutcomes: Int
        /// Apple's reason (or the error) of the last failed or retried attempt.
        @Nullable public var lastError: String?
        @Nullable public var updatedAt: String?
        /// A Live Activity update: which of its requests it took the content and the alert from.
        public var content: DeliveredContent? = nil
    }

    /// Which merged request a Live Activity delivery took its content from, and why.
    public struct DeliveredContent: Codable, Sendable, Hashable {
        /// The request with the newest `aps.timestamp` (at one timestamp, the later request).
        public var request: Int64
        public var timestamp: Int64
        /// The newest request with an alert (`nil`: none had one).
        public var alertRequest: Int64?
        /// Whether one of them was an `end`.
        public var end: Bool
        /// How many Live Activity requests merged into it.
        public var merged: Int
    }

    /// `GET /v1/explain/<request id or a push's apns-id>`.
    public struct RequestExplanation: DocumentedBody {
        public static let schema = "RequestExplanation"
        public var request: Request
        public var pending: [ExplainedPending]
        public var deliveries: [Delivery]
    }

    /// A pending reload that serves the explained request.
    public struct ExplainedPending: DocumentedBody {
        public static let schema = "ExplainedPending"
        public var instance: Int64
        public var widget: String
        public var device: String
        public var due: String
    }

    /// `GET /v1/explain/<a delivery's apns-id>`.
    public struct DeliveryExplanation: DocumentedBody {
        public static let schema = "DeliveryExplanation"
        public var delivery: Delivery
        public var requests: [Request]
    }

    /// What `GET /v1/explain/{id}` answers: one of the two.
    public enum Explanation: Codable, Sendable, Hashable {
        case request(RequestExplanation)
        case delivery(DeliveryExplanation)

        private enum Keys: String, CodingKey { case request }

        public init(from decoder: any Decoder) throws {
            let keys = try decoder.container(keyedBy: Keys.self)
            self = keys.contains(.request) ? .request(try RequestExplanation(from: decoder)) : .delivery(try DeliveryExplanation(from: decoder))
        }

        public func encode(to encoder: any Encoder) throws {
            switch self {
            case .request(let explanation): try explanation.encode(to: encoder)
            case .delivery(let explanation): try explanation.encode(to: encoder)
            }
        }
    }

    /// `GET /v1/budget/<token>`.
    public struct DeviceBudget: DocumentedBody {
        public static let schema = "DeviceBudget"
        public var device: String
        public var now: String
        public var instances: [InstanceBudget]
        public var recentDeliveries: [Delivery]
    }

    /// One widget instance's budget as the scheduler holds it.
    public struct InstanceBudget: DocumentedBody {
        public static let schema = "InstanceBudget"
        public var bundle: String
        public var widget: String
        public var kind: String
        public var family: String
        @Nullable public var timelinePolicy: String?
        public var tokens: Int
        public var burst: Int
        public var dailyBudget: Int
        @Nullable public var nextToken: String?
        @Nullable public var lastReload: String?
        @Nullable public var plannedReload: String?
        @Nullable public var earliestReload: String?
        @Nullable public var pending: PendingInBudget?
    }

    /// The pending reload in an instance's budget (its schema is inline in `InstanceBudget`'s: the
    /// client generator does not take a `oneOf` with `null`).
    public struct PendingInBudget: Codable, Sendable, Hashable {
        public var due: String
        public var priority: Int
        public var requestCount: Int
    }
}

// MARK: Cancel, flush, stats, cluster

extension AdminAPI {
    /// `POST /v1/cancel/<request id>`.
    public struct Cancelled: DocumentedBody {
        public static let schema = "Cancelled"
        public var cancelled: [CancelledReload]
    }

    /// A pending reload dropped, with the requests that were merged into it.
    public struct CancelledReload: DocumentedBody {
        public static let schema = "CancelledReload"
        public var instance: Int64
        public var requests: [Int64]
    }

    /// `POST /v1/flush`'s body: a device or an app (or neither: all).
    public struct FlushRequest: DocumentedBody {
        public static let schema = "FlushRequest"
        public var device: String?
        public var bundle: String?
        public var ignoreBudget: Bool

        public init(device: String? = nil, bundle: String? = nil, ignoreBudget: Bool = false) {
            self.device = device
            self.bundle = bundle
            self.ignoreBudget = ignoreBudget
        }

        private enum CodingKeys: String, CodingKey { case device, bundle, ignoreBudget }

        public init(from decoder: any Decoder) throws {
            let fields = try decoder.container(keyedBy: CodingKeys.self)
            device = try fields.optionalString(.device)
            bundle = try fields.optionalString(.bundle)
            ignoreBudget = try fields.bool(.ignoreBudget, default: false)
        }
    }

    /// `POST /v1/flush`'s answer.
    public struct Flushed: DocumentedBody {
        public static let schema = "Flushed"
        public var flushed: Int
        public var instances: [Int64]
        public var ignoreBudget: Bool
    }

    /// `GET /v1/stats`.
    public struct Stats: DocumentedBody {
        public static let schema = "Stats"
        /// Every decision kind, zeros included.
        public var decisions: [String: Int]
        /// `pending`, `sending`, `sent`, `failed`.
        public var deliveries: [String: Int]
        /// By Apple's reason (or the error).
        public var failures: [String: Int]
        public var pendingReloads: Int
        @Nullable public var oldestPendingDue: String?
        public var deliveryQueue: Int
        @Nullable public var oldestOpenDelivery: String?
        public var unknownOutcomes: Int
    }

    /// `GET /v1/forecast`: the reload herd ahead (``HerdForecast``).
    public struct Forecast: DocumentedBody {
        public static let schema = "Forecast"
        /// The first minute (RFC 3339, a whole minute in UTC).
        public var start: String
        public var minutes: Int
        /// Reloads in the window.
        public var total: Int
        /// The busiest minute (`null`: no reload in the window).
        @Nullable public var peak: ForecastMinute?
        /// The ten busiest minutes, busiest first.
        public var busiest: [ForecastMinute]
        /// Reloads in each minute, all apps and kinds.
        public var perMinute: [Int]
        /// Per app and kind.
        public var series: [ForecastSeries]
        /// Minutes in which an app's reloads pass its threshold (`forecast.threshold`, `forecast.appThresholds`).
        public var breaches: [ForecastBreach]
    }

    public struct ForecastMinute: DocumentedBody {
        public static let schema = "ForecastMinute"
        /// The minute's start (RFC 3339).
        public var minute: String
        public var count: Int
    }

    public struct ForecastSeries: DocumentedBody {
        public static let schema = "ForecastSeries"
        public var bundle: String
        public var kind: String
        public var total: Int
        /// Reloads in each hour of the window.
        public var perHour: [Int]
        @Nullable public var peak: ForecastMinute?
    }

    public struct ForecastBreach: DocumentedBody {
        public static let schema = "ForecastBreach"
        public var bundle: String
        public var minute: String
        public var count: Int
        public var threshold: Int
    }

    /// `GET /v1/freshness`: how long requests waited for the reload that served them, per app and kind,
    /// against the kind's objective (``FreshnessBook``), as this gateway served them.
    public struct Freshness: DocumentedBody {
        public static let schema = "Freshness"
        /// When the figures were read (RFC 3339).
        public var at: String
        /// Per app and kind with a request in the last day, by bundle then kind.
        public var kinds: [FreshnessKind]
    }

    public struct FreshnessKind: DocumentedBody {
        public static let schema = "FreshnessKind"
        public var bundle: String
        /// The kind; a control's or an activity's with its prefix (`control:garage`).
        public var kind: String
        /// The share of requests the objective wants served within `objectiveWithin`.
        public var objectiveQuantile: Double
        /// Milliseconds.
        public var objectiveWithin: Int64
        public var hour: FreshnessWindow
        public var day: FreshnessWindow
        /// Each of the last 24 hours, oldest first: requests counted.
        public var hourlyRequests: [Int]
        /// Each of the last 24 hours, oldest first: requests served within the objective.
        public var hourlyWithin: [Int]
    }

    public struct FreshnessWindow: DocumentedBody {
        public static let schema = "FreshnessWindow"
        /// Requests counted: served ones and ones never served (expired, cancelled).
        public var requests: Int
        public var served: Int
        /// Served within the objective.
        public var within: Int
        /// `within / requests` (`null`: no request).
        @Nullable public var share: Double?
        /// Whether the share meets the objective (`null`: no request).
        @Nullable public var met: Bool?
        /// The served waits' percentiles in milliseconds (`null`: nothing served).
        @Nullable public var p50: Int64?
        @Nullable public var p90: Int64?
        @Nullable public var p99: Int64?
        /// Misses of the objective by cause, most first.
        public var misses: [FreshnessMiss]
    }

    public struct FreshnessMiss: DocumentedBody {
        public static let schema = "FreshnessMiss"
        /// `budget`, `interval`, `priority`, `merge`, `timeline`, `upstream`, `expired` or `cancelled`.
        public var cause: String
        public var count: Int
    }

    /// `GET /v1/cluster`.
    public struct Cluster: DocumentedBody {
        public static let schema = "Cluster"
        /// `sqlite` (one gateway) or `postgres`.
        public var store: String
        /// This gateway's id (empty on SQLite).
        public var this: String
        public var gateways: [ClusterGateway]
        public var partitions: [PartitionRange]
    }

    /// A gateway with a live heartbeat.
    public struct ClusterGateway: DocumentedBody {
        public static let schema = "ClusterGateway"
        public var id: String
        @Nullable public var address: String?
        public var partitions: Int
        public var startedAt: String
        public var heartbeatAgeMilliseconds: Int64
    }

    /// Consecutive partitions of one owner (or of none).
    public struct PartitionRange: DocumentedBody {
        public static let schema = "PartitionRange"
        public var first: Int
        public var last: Int
        @Nullable public var owner: String?
        @Nullable public var leaseAgeSeconds: Int64?
        @Nullable public var expiresInMilliseconds: Int64?
    }
}

// MARK: Devices

extension AdminAPI {
    /// `GET /v1/devices`.
    public struct DeviceList: DocumentedBody {
        public static let schema = "DeviceList"
        public var devices: [Device<Int>]
    }

    /// `GET /v1/devices/<token>`: the token's device of each app that registered it, with its widgets.
    public struct DeviceDetails: DocumentedBody {
        public static let schema = "DeviceDetails"
        public var devices: [Device<[Widget]>]
    }

    /// A registered device (or control); `Widgets` is how many widgets it has in a list, the widgets
    /// themselves when it is shown.
    public struct Device<Widgets: Codable & Sendable & Hashable>: Codable, Sendable, Hashable {
        public var bundle: String
        public var device: String
        /// `widgets` (a device's token) or `controls` (a control's).
        public var pushType: String
        public var active: Bool
        public var registeredAt: String
        @Nullable public var unregisteredAt: String?
        public var widgets: Widgets
        public var pendingReloads: Int
    }

    /// A widget of a shown device.
    public struct Widget: DocumentedBody {
        public static let schema = "DeviceWidget"
        public var id: String
        public var kind: String
        public var family: String
        public var configuration: JSONValue
        @Nullable public var timelinePolicy: String?
    }

    /// `DELETE /v1/devices/<token>`.
    public struct DeviceRemoved: DocumentedBody {
        public static let schema = "DeviceRemoved"
        public var removed: Removed

        public struct Removed: Codable, Sendable, Hashable {
            public var bundle: String
            public var device: String
            /// How many widgets went with it.
            public var widgets: Int
        }
    }
}

extension AdminAPI.Device: DocumentedBody {
    public static var schema: String { Widgets.self == Int.self ? "Device" : "DeviceWithWidgets" }
}

// MARK: Apps and keys

extension AdminAPI {
    /// `POST /v1/apps/<bundle>/rotate-key`'s body (optional).
    public struct RotateKeyRequest: DocumentedBody {
        public static let schema = "RotateKeyRequest"
        /// Replace the webhook secret too.
        public var webhookSecret: Bool
        /// Replace only the registration key (the API key and webhook secret are kept).
        public var registration: Bool

        public init(webhookSecret: Bool, registration: Bool = false) {
            self.webhookSecret = webhookSecret
            self.registration = registration
        }

        private enum CodingKeys: String, CodingKey { case webhookSecret, registration }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            webhookSecret = try container.bool(.webhookSecret, default: false)
            registration = try container.bool(.registration, default: false)
            if webhookSecret && registration {
                throw APIError.invalidField("registration replaces the registration key alone: leave webhookSecret out, or rotate them in two calls")
            }
        }
    }

    /// New credentials, shown once: the API key, and the webhook secret when it was replaced; or the
    /// registration key alone.
    public struct Credentials: DocumentedBody {
        public static let schema = "Credentials"
        public var bundle: String
        /// The new API key (`null`: kept, only the registration key was replaced).
        @Nullable public var apiKey: String?
        @Nullable public var webhookSecret: String?
        /// The new registration key (`null`: kept).
        @Nullable public var registrationKey: String?

        public init(bundle: String, apiKey: String?, webhookSecret: String?, registrationKey: String? = nil) {
            self.bundle = bundle
            self.apiKey = apiKey
            self.webhookSecret = webhookSecret
            self.registrationKey = registrationKey
        }
    }

    /// `POST /v1/apps/<bundle>/team`'s body.
    public struct TeamRequest: DocumentedBody {
        public static let schema = "TeamRequest"
        public var team: String

        public init(team: String) {
            self.team = team
        }

        private enum CodingKeys: String, CodingKey { case team }

        public init(from decoder: any Decoder) throws {
            team = try decoder.container(keyedBy: CodingKeys.self).string(.team)
        }
    }

    /// `POST /v1/apps/<bundle>/team`'s answer.
    public struct TeamBound: DocumentedBody {
        public static let schema = "TeamBound"
        public var bundle: String
        public var team: String
    }

    /// `POST /v1/keys`'s body: a push sender's public key.
    public struct KeyRequest: DocumentedBody {
        public static let schema = "KeyRequest"
        public var kid: String
        public var team: String
        /// PEM.
        public var publicKey: String
        /// `sandbox`, `production` or `both` (the default).
        public var environment: String?
        /// The bundles it may push to; none: any bundle of its team.
        public var topics: [String]

        public init(kid: String, team: String, publicKey: String, environment: String?, topics: [String]) {
            self.kid = kid
            self.team = team
            self.publicKey = publicKey
            self.environment = environment
            self.topics = topics
        }

        private enum CodingKeys: String, CodingKey { case kid, team, publicKey, environment, topics }

        public init(from decoder: any Decoder) throws {
            let fields = try decoder.container(keyedBy: CodingKeys.self)
            kid = try fields.string(.kid)
            team = try fields.string(.team)
            publicKey = try fields.string(.publicKey)
            environment = try fields.optionalString(.environment)
            topics = try fields.strings(.topics)
        }
    }

    /// `POST /v1/keys`'s answer.
    public struct KeyAdded: DocumentedBody {
        public static let schema = "KeyAdded"
        public var kid: String
        public var team: String
        public var topics: [String]
        public var environment: String
    }

    /// `DELETE /v1/keys/<kid>`'s answer.
    public struct KeyRemoved: DocumentedBody {
        public static let schema = "KeyRemoved"
        public var removed: String
    }
}

extension AdminAPI.Credentials {
    /// What a rotation replaced: the registration key alone, or the API key (and the webhook secret).
    public init(_ credentials: AppCredentials, bundle: String, webhookSecret: Bool, registration: Bool) {
        self.init(
            bundle: bundle,
            apiKey: registration ? nil : credentials.apiKey,
            webhookSecret: webhookSecret && !registration ? credentials.webhookSecret : nil,
            registrationKey: registration ? credentials.registrationKey : nil
        )
    }
}
