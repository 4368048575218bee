public import Logging
public import ReloadGateCore

/// Everything `reloadgate serve` can be told, with the embedded default for every field.
///
/// `GatewayConfiguration()` is the embedded default: a TLS listener on 127.0.0.1:8443 with a development
/// certificate under `certs/`, SQLite under `data/`, the sandbox environment. A YAML file and
/// `RELOADGATE_*` environment variables override it key by key (see ``load(file:environment:)`` and
/// ``ConfigurationKey/all`` for the keys).
public struct GatewayConfiguration: Sendable, Equatable {
    /// The public listener (APNs ingress, registry API, webhook, health).
    public struct Listen: Sendable, Equatable {
        /// Address to bind. `0.0.0.0` or `::` for every interface.
        public var host: String = "127.0.0.1"
        /// TCP port; 0 picks a free one (tests).
        public var port: Int = 8443
        /// Seconds a connection without a request in progress is kept open before it is closed (GOAWAY
        /// on HTTP/2). On every listener.
        public var idleTimeout: Int = 300
        /// Seconds a new connection has for its TLS handshake and first request's headers, and a request
        /// for its headers once their first byte arrived (HTTP/1.1). On every listener.
        public var headerTimeout: Int = 10
        /// Seconds from a request's headers to the end of its body (HTTP/1.1, and each HTTP/2 stream).
        /// On every listener.
        public var bodyTimeout: Int = 30
        /// Seconds that requests in flight get to finish on SIGTERM before connections are closed.
        public var shutdownGracePeriod: Int = 30

        public init() {}
    }

    /// The APNs listener (docs/APNS.md): `POST /3/device/<token>` over HTTP/2 (and HTTP/1.1) with TLS, on
    /// its own port, as Apple's service listens on 443 and 2197.
    public struct Ingress: Sendable, Equatable {
        /// What happens to a push for a token never registered (docs/APNS.md).
        public enum UnknownDevices: String, Sendable, CaseIterable {
            /// Record the device with one implicit widget instance of kind `*` until its widgets are registered.
            case adopt
            /// `400 BadDeviceToken`.
            case reject
        }

        /// Address to bind.
        public var host: String = "127.0.0.1"
        /// TCP port; Apple's service listens on 443 and 2197. 0 picks a free one (tests).
        public var port: Int = 2197
        public var unknownDevices: UnknownDevices = .adopt
        /// Seconds a connection must keep a token before it may switch to another
        /// (`TooManyProviderTokenUpdates`); 0 turns the check off.
        public var tokenUpdateInterval: Int = 1200
        /// Seconds a token's `iat` may lie in the future.
        public var clockSkew: Int = 60
        /// HTTP/2 streams a connection may have open at once (SETTINGS_MAX_CONCURRENT_STREAMS).
        public var maxConcurrentStreams: Int = 1000
        /// Pushes per second one device token may send before `429 TooManyRequests` (burst: twice that).
        public var requestsPerSecondPerToken: Int = 200
        /// Whether verified provider tokens are remembered (off only to measure the cost of ES256).
        public var tokenCache: Bool = true
        /// How many pushes' apns-ids (within their 15-minute retry window) the embedded store's gateway
        /// indexes in memory, their answers kept in the pushes' own rows; beyond it, and on PostgreSQL,
        /// each is a row of the idempotency table (docs/APNS.md, "A retried apns-id").
        public var apnsIdsInMemory: Int = SchedulerEngine.defaultKeptAnswerCapacity
        /// Serial numbers (lower-case hex, no separators) of client certificates that are refused with
        /// `403 BadCertificate` although their CA signed them.
        public var revokedCertificateSerials: [String] = []

        public init() {}
    }

    /// Where released deliveries go (docs/DESIGN.md, "Delivery").
    public struct Upstream: Sendable, Equatable {
        public enum Kind: String, Sendable, CaseIterable {
            /// Append to `outbox.jsonl` in the data directory (the embedded default).
            case outbox
            /// Send to Apple's push service (or `url`).
            case apns
        }

        public var kind: Kind = .outbox
        /// The push service's base URL; unset: Apple's for the gateway's environment
        /// (`https://api.sandbox.push.apple.com` or `https://api.push.apple.com`).
        public var url: String?
        /// The operator's `.p8` signing key (PKCS#8 PEM).
        public var keyFile: String?
        public var keyID: String?
        public var teamID: String?
        /// CA certificates (PEM) to trust instead of the system's: for a mock or a proxy.
        public var caFile: String?
        /// Deliveries in flight toward the push service at once.
        public var maxConcurrentRequests: Int = 256
        /// Attempts of one delivery before it is `failed` with the last reason.
        public var maxAttempts: Int = 10
        /// Milliseconds before the first retry; doubled per attempt up to 60 s.
        public var retryDelay: Int = 1000
        /// Requests per second toward the push service at most (a burst of a tenth of a second's
        /// worth); 0: no limit.
        public var requestsPerSecond: Int = 0
        /// HTTP/2 connections to the push service; requests are spread over them.
        public var connections: Int = 2
        /// The outbox (`kind: outbox`) rotates before it grows past this many MiB.
        public var outboxMaxMegabytes: Int = OutboxUpstream.Rotation.default.maxBytes >> 20
        /// Rotated outbox files kept (`outbox.jsonl.1` to `.N`); 0: none.
        public var outboxKeptFiles: Int = OutboxUpstream.Rotation.default.keptFiles

        public init() {}
    }

    /// The admin API (pending reloads, explain, budget, cancel, flush, stats): HTTP on a Unix domain
    /// socket with mode 0600, never on the public listener.
    public struct Admin: Sendable, Equatable {
        /// The socket's path; unset: `admin.sock` in the data directory.
        public var socket: String?
        /// Also serve the admin API on its own TLS listener (HTTP/2 and HTTP/1.1), for a bearer token.
        public var tls = false
        /// The TLS listener's address and port (0: any free port).
        public var host = "127.0.0.1"
        public var port = 8444
        /// The file with the bearer token; unset: `admin.token` in the data directory (created on first
        /// start with mode 0600).
        public var tokenFile: String?

        public init() {}
    }

    /// TLS material of the listener.
    public struct TLS: Sendable, Equatable {
        /// PEM file with the server certificate (and its chain). `nil`: the development certificate.
        public var certificate: String?
        /// PEM file with the server certificate's private key. Set together with `certificate`.
        public var key: String?
        /// PEM file with the CA that signs push senders' client certificates. `nil`: the development CA
        /// when the development certificate is used, otherwise client certificates are not requested.
        public var clientCA: String?
        /// Where the development CA and certificate live (created on first run).
        public var developmentDirectory: String = "certs"

        public init() {}

        /// Whether the listener uses the development certificate (no certificate configured).
        public var usesDevelopmentCertificate: Bool { certificate == nil && key == nil }
    }

    /// Logging.
    public struct Log: Sendable, Equatable {
        /// Lowest level written.
        public var level: Logger.Level = .info
        /// Line format.
        public var format: Format = .text

        /// How log lines look.
        public enum Format: String, Sendable, CaseIterable {
            /// `2026-11-22T10:00:00Z info reloadgate: message key=value`
            case text
            /// One JSON object a line, for log collectors.
            case json
        }

        public init() {}
    }

    /// The numbers of the scheduling rules (docs/DESIGN.md, "Scheduling rules"), per push type under its
    /// ``PushTypeDescriptor/configurationPrefix``.
    public struct Scheduling: Sendable, Equatable {
        /// One push type's numbers.
        public struct TypePolicies: Sendable, Equatable {
            /// The policy of every kind, unless overridden (`<prefix>.<field>`).
            public var defaultPolicy: SchedulingPolicy
            /// Per kind, the fields set for it (`<prefix>.kinds.<kind>.<field>`), as text already checked.
            /// Unset fields follow ``defaultPolicy``, whatever order the keys were given in.
            public var kindOverrides: [String: [String: String]] = [:]
        }

        /// Per push type, in ``PushType/allCases`` order, each from its descriptor's defaults.
        private var types: [TypePolicies] = PushType.allCases.map { TypePolicies(defaultPolicy: $0.descriptor.defaultPolicy) }

        public init() {}

        /// The numbers of `pushType`.
        public subscript(pushType: PushType) -> TypePolicies {
            get { types[pushType.ordinal] }
            set { types[pushType.ordinal] = newValue }
        }

        /// The widgets' default policy (`scheduling.<field>`).
        public var defaultPolicy: SchedulingPolicy {
            get { self[.widgets].defaultPolicy }
            set { self[.widgets].defaultPolicy = newValue }
        }

        /// The widgets' fields per kind (`scheduling.kinds.<kind>.<field>`).
        public var kindOverrides: [String: [String: String]] {
            get { self[.widgets].kindOverrides }
            set { self[.widgets].kindOverrides = newValue }
        }

        /// Sets one field from `FIELD=VALUE` (every kind) or `KIND.FIELD=VALUE` (one kind), as
        /// `reloadgate simulate --set` takes it; a push type other than widgets is named by its kind prefix
        /// (`control:FIELD=VALUE`, `control:KIND.FIELD=VALUE`). `daily` and `interval` stand for
        /// `dailyBudget` and `minimumInterval`. Returns what is wrong, or `nil` when it was set.
        public mutating func set(_ assignment: String) -> String? {
            guard let equals = assignment.firstIndex(of: "=") else { return "\(assignment): expected FIELD=VALUE or KIND.FIELD=VALUE" }
            let type = PushType.allCases.map(\.descriptor).first { !$0.kindPrefix.isEmpty && assignment.hasPrefix($0.kindPrefix) } ?? .widgets
            let key = assignment[assignment.index(assignment.startIndex, offsetBy: type.kindPrefix.count)..<equals]
            let value = String(assignment[assignment.index(after: equals)...])
            var kind: String?
            var name = String(key)
            // The field is the key's last part, or its last two for a dotted field (`freshness.within`).
            let dotted = SchedulingField.all.map(\.name).first { $0.contains(".") && (key == $0 || key.hasSuffix("." + $0)) }
            if let dotted {
                name = dotted
                if key.count > dotted.count { kind = String(key.dropLast(dotted.count + 1)) }
            } else if let dot = key.lastIndex(of: ".") {
                kind = String(key[..<dot])
                name = String(key[key.index(after: dot)...])
            }
            let aliases = ["daily": "dailyBudget", "interval": "minimumInterval"]
            name = aliases[name] ?? name
            guard let field = SchedulingField.named(name) else {
                return "\(assignment): unknown field \(name) (one of \(SchedulingField.all.map(\.name).joined(separator: ", ")); daily and interval are short for dailyBudget and minimumInterval)"
            }
            if let kind {
                guard !kind.isEmpty else { return "\(assignment): the kind is empty" }
                var probe = self[type.pushType].defaultPolicy
                guard field.apply(value, to: &probe) else { return "\(assignment): \(name) must be \(field.expected)" }
                self[type.pushType].kindOverrides[kind, default: [:]][name] = value
            } else {
                guard field.apply(value, to: &self[type.pushType].defaultPolicy) else { return "\(assignment): \(name) must be \(field.expected)" }
            }
            return nil
        }

        /// The scheduler's configuration: each push type's default policy and each kind's resolved policy.
        public var resolved: SchedulerConfiguration {
            var configuration = SchedulerConfiguration()
            for pushType in PushType.allCases {
                let numbers = self[pushType]
                // A kind with a default policy of its own (a push-to-start token's) starts from it.
                var byKind = pushType.descriptor.kindPolicies
                for (kind, fields) in numbers.kindOverrides {
                    var policy = byKind[kind] ?? numbers.defaultPolicy
                    for (name, text) in fields { _ = SchedulingField.named(name)?.apply(text, to: &policy) }
                    byKind[kind] = policy
                }
                configuration[pushType] = PolicySet(defaultPolicy: numbers.defaultPolicy, byKind: byKind)
            }
            return configuration
        }
    }

    public var listen = Listen()
    /// The APNs listener.
    public var ingress = Ingress()
    /// Where deliveries go.
    public var upstream = Upstream()
    public var tls = TLS()
    /// The admin API for the operator's CLI.
    public var admin = Admin()
    /// Where the gateway's state lives.
    public struct Store: Sendable, Equatable {
        public enum Kind: String, Sendable, CaseIterable {
            /// One SQLite file in the data directory (the embedded default; one gateway).
            case sqlite
            /// A PostgreSQL database shared by several gateways (`store.url`).
            case postgres
        }

        public var kind: Kind = .sqlite
        /// `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?sslmode=...]`; never logged with its password.
        public var url: String?
        /// A file whose first line is the database password (instead of the URL's).
        public var passwordFile: String?
        /// Milliseconds one store operation may take (a commit, a registry write): past it the
        /// transaction is rolled back and its requests are answered `503`; the database's own
        /// `statement_timeout` and `lock_timeout` too. Reads that scan whole tables get 5 minutes.
        public var deadline: Int = 5000
    }

    /// Where the gateway's state lives (SQLite by default).
    public var store = Store()
    /// How long the ledger keeps what it recorded (docs/DESIGN.md, "The ledger").
    public struct Ledger: Sendable, Equatable {
        /// Seconds requests (with their decisions) and finished deliveries are kept: older ones are
        /// deleted in short steps while the gateway runs. Pending reloads, deliveries on their way and
        /// answers a sender's retry may still ask for are kept whatever their age.
        public var retention: Int = 7 * 86_400

        public init() {}
    }

    /// How long the ledger keeps requests, decisions and deliveries.
    public var ledger = Ledger()

    /// The herd forecast's thresholds (`reloadgate forecast`, the dashboard, the warning in the log).
    public struct Forecast: Sendable, Equatable {
        /// Reloads in one minute above which an app's forecast warns (0: no warning).
        public var threshold: Int = 0
        /// Per app, a threshold instead of ``threshold``.
        public var appThresholds: [String: Int] = [:]

        public init() {}

        /// The threshold of `bundle`'s app (`nil`: none).
        public func threshold(of bundle: String) -> Int? {
            let value = appThresholds[bundle] ?? threshold
            return value > 0 ? value : nil
        }

        /// `com.example.a=5000, com.example.b=200` as a mapping; empty text is none; `nil` when a pair is
        /// not a bundle id and a count from 0 to 100,000,000, or a bundle repeats.
        static func appThresholds(_ text: String) -> [String: Int]? {
            func trimmed(_ text: Substring) -> String { String(text.drop { $0 == " " }.reversed().drop { $0 == " " }.reversed()) }
            var thresholds: [String: Int] = [:]
            for pair in text.split(separator: ",") {
                let parts = pair.split(separator: "=", omittingEmptySubsequences: false)
                guard parts.count == 2 else { return nil }
                let bundle = trimmed(parts[0])
                guard (try? BundleID(bundle)) != nil, thresholds[bundle] == nil,
                    let count = Int(trimmed(parts[1])), (0...100_000_000).contains(count)
                else { return nil }
                thresholds[bundle] = count
            }
            return thresholds
        }
    }

    public var forecast = Forecast()

    /// What an app's registration key may spend (the key may ship inside the app, so anybody may hold it).
    public struct Registration: Sendable, Equatable {
        /// Calls one device token may get through a registration key per minute (a burst of as many).
        public var requestsPerMinute: Int = 60
        /// Calls one client address may make through registration keys per minute (a burst of as many);
        /// 0: not limited by address (a gateway behind a proxy sees one address for every client).
        public var requestsPerAddressPerMinute: Int = 600
        /// Devices new to an app that registration keys may add per minute (a burst of as many).
        public var newDevicesPerMinute: Int = 600

        public init() {}
    }

    /// The registration keys' limits.
    public var registration = Registration()
    /// The data directory: the SQLite store, the outbox, the secrets key, the admin socket. Created with
    /// mode 0700.
    public var dataDirectory: String = "data"
    /// The APNs environment of this gateway.
    public var environment: DeploymentEnvironment = .sandbox
    public var log = Log()
    /// The scheduling rules' numbers: a default policy and overrides per widget kind.
    public var scheduling = Scheduling()

    /// The embedded default.
    public init() {}

    /// Where the admin token is: `admin.tokenFile`, or `admin.token` in the data directory.
    public var adminTokenPath: String {
        admin.tokenFile ?? (dataDirectory.hasSuffix("/") ? dataDirectory : dataDirectory + "/") + "admin.token"
    }

    /// Where the admin socket is: `admin.socket`, or `admin.sock` in the data directory.
    public var adminSocketPath: String {
        admin.socket ?? (dataDirectory.hasSuffix("/") ? dataDirectory : dataDirectory + "/") + "admin.sock"
    }
}
