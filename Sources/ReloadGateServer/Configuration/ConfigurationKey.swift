import Logging
import ReloadGateCore

/// One configuration key: its dotted name in the YAML file, its environment variable and how a value
/// is parsed into a ``GatewayConfiguration``.
///
/// The table ``all`` is the single source of truth: the file parser, the environment parser, the
/// error messages and the documentation test all read it.
public struct ConfigurationKey: Sendable {
    /// The dotted name, e.g. `listen.port` (YAML: `listen:` then `port:`).
    public let name: String
    /// What the value means, for `--help` and docs.
    public let summary: String
    /// What a value must look like, used in error messages ("an integer from 0 to 65535").
    public let expected: String
    /// Parses a textual value (`nil`: YAML null) into the configuration; `false` when it does not parse.
    private let set: @Sendable (inout GatewayConfiguration, String?) -> Bool

    /// The environment variable that sets this key: `RELOADGATE_` and the name in upper snake case
    /// (`listen.idleTimeout` -> `RELOADGATE_LISTEN_IDLE_TIMEOUT`, `tls.clientCA` -> `RELOADGATE_TLS_CLIENT_CA`).
    public var environmentVariable: String {
        var result = "RELOADGATE_"
        var previous: Character = "."
        for character in name {
            if character == "." {
                result.append("_")
            } else {
                // A word starts at an upper-case letter after a lower-case one: `clientCA` -> `CLIENT_CA`.
                if character.isUppercase, previous.isLowercase { result.append("_") }
                result.append(contentsOf: character.uppercased())
            }
            previous = character
        }
        return result
    }

    /// Every key the gateway understands.
    public static let all: [ConfigurationKey] = [
        .text("listen.host", "address to bind", \.listen.host),
        .integer("listen.port", "TCP port (0: any free port)", \.listen.port, range: 0...65535),
        .integer("listen.idleTimeout", "seconds before an idle connection is closed", \.listen.idleTimeout, range: 1...86_400),
        .integer(
            "listen.headerTimeout",
            "seconds for a new connection's TLS handshake, and then for each HTTP/1.1 request's headers",
            \.listen.headerTimeout,
            range: 1...3600
        ),
        .integer("listen.bodyTimeout", "seconds from a request's headers to the end of its body", \.listen.bodyTimeout, range: 1...3600),
        .integer(
            "listen.shutdownGracePeriod",
            "seconds in-flight requests get to finish on SIGTERM",
            \.listen.shutdownGracePeriod,
            range: 1...3600
        ),
        .text("ingress.host", "address of the APNs listener (POST /3/device)", \.ingress.host),
        .integer("ingress.port", "TCP port of the APNs listener (0: any free port)", \.ingress.port, range: 0...65535),
        .choice(
            "ingress.unknownDevices",
            "a push for a token never registered: adopt it or reject it (BadDeviceToken)",
            \.ingress.unknownDevices,
            GatewayConfiguration.Ingress.UnknownDevices.allCases.map { ($0.rawValue, $0) }
        ),
        .integer(
            "ingress.tokenUpdateInterval",
            "seconds before a connection may use a new provider token (0: no limit)",
            \.ingress.tokenUpdateInterval,
            range: 0...86_400
        ),
        .integer("ingress.clockSkew", "seconds a provider token's iat may lie in the future", \.ingress.clockSkew, range: 0...3600),
        .integer(
            "ingress.maxConcurrentStreams",
            "HTTP/2 streams a connection may have open at once",
            \.ingress.maxConcurrentStreams,
            range: 1...100_000
        ),
        .integer(
            "ingress.requestsPerSecondPerToken",
            "pushes per second per device token before TooManyRequests",
            \.ingress.requestsPerSecondPerToken,
            range: 1...1_000_000
        ),
        .boolean("ingress.tokenCache", "remember verified provider tokens (off only for benchmarks)", \.ingress.tokenCache),
        .integer(
            "ingress.apnsIdsInMemory",
            "pushes' apns-ids within their retry window indexed in memory (SQLite store; beyond it, rows of the idempotency table)",
            \.ingress.apnsIdsInMemory,
            range: 0...100_000_000
        ),
        ConfigurationKey(
            name: "ingress.revokedCertificateSerials",
            summary: "client certificate serial numbers refused with BadCertificate",
            expected: "hexadecimal serial numbers separated by commas or spaces"
        ) { configuration, text in
            let serials = (text ?? "").split(whereSeparator: { $0 == "," || $0 == " " }).map {
                $0.lowercased().filter { $0 != ":" }
            }
            guard serials.allSatisfy({ !$0.isEmpty && $0.allSatisfy(\.isHexDigit) }) else { return false }
            // Leading zeros do not change a serial number.
            configuration.ingress.revokedCertificateSerials = serials.map { String($0.drop(while: { $0 == "0" })) }
            return true
        },
.choice("upstream.kind", "where deliveries go: outbox (a file) or apns", \.upstream.kind, GatewayConfiguration.Upstream.Kind.allCases.map { ($0.rawValue, $0) }),
        .optionalText("upstream.url", "push service base URL; unset: Apple's for the environment", \.upstream.url),
        .path("upstream.keyFile", "the operator's .p8 signing key (apns)", \.upstream.keyFile),
        .optionalText("upstream.keyID", "the .p8 key's id (apns)", \.upstream.keyID),
        .optionalText("upstream.teamID", "the team id of the key (apns)", \.upstream.teamID),
        .path("upstream.caFile", "CA certificates to trust for the push service instead of the system's", \.upstream.caFile),
        .integer("upstream.maxConcurrentRequests", "deliveries in flight toward the push service at once", \.upstream.maxConcurrentRequests, range: 1...10_000),
        .integer("upstream.maxAttempts", "attempts of one delivery before it fails", \.upstream.maxAttempts, range: 1...1000),
        .integer("upstream.retryDelay", "milliseconds before the first retry (doubled per attempt, up to 60 s)", \.upstream.retryDelay, range: 1...60_000),
        .path("admin.socket", "the admin API's Unix socket (mode 0600); unset: admin.sock in the data directory", \.admin.socket),
        .boolean("admin.tls", "also serve the admin API on a TLS listener, for a bearer token", \.admin.tls),
        .text("admin.host", "address of the admin TLS listener", \.admin.host),
        .integer("admin.port", "TCP port of the admin TLS listener (0: any free port)", \.admin.port, range: 0...65535),
        .path("admin.tokenFile", "the admin TLS listener's bearer token; unset: admin.token in the data directory (made on first start)", \.admin.tokenFile),
        .integer("upstream.requestsPerSecond", "requests per second toward the push service at most; 0: no limit", \.upstream.requestsPerSecond, range: 0...1_000_000),
        .integer("upstream.connections", "HTTP/2 connections to the push service", \.upstream.connections, range: 1...64),
        .integer(
            "upstream.outboxMaxMegabytes", "MiB the outbox file grows to before it rotates (outbox)", \.upstream.outboxMaxMegabytes,
            range: 1...1_048_576
        ),
        .integer("upstream.outboxKeptFiles", "rotated outbox files kept (outbox.jsonl.1 to .N)", \.upstream.outboxKeptFiles, range: 0...1000),
        .path("tls.certificate", "server certificate chain (PEM); unset: development certificate", \.tls.certificate),
        .path("tls.key", "server private key (PEM); set with tls.certificate", \.tls.key),
        .path("tls.clientCA", "CA of push senders' client certificates (PEM); unset: the development CA in development", \.tls.clientCA),
        .text("tls.developmentDirectory", "directory of the development CA and certificates", \.tls.developmentDirectory),
        .text("data.directory", "directory of the SQLite store, the outbox and the secrets key", \.dataDirectory),
        .choice("store.kind", "where the state lives: sqlite (a file in the data directory) or postgres (shared by several gateways)", \.store.kind, GatewayConfiguration.Store.Kind.allCases.map { ($0.rawValue, $0) }),
        .optionalText("store.url", "PostgreSQL URL postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?sslmode=disable|prefer|require|verify-full] (store.kind postgres)", \.store.url),
        .path("store.passwordFile", "file whose first line is the PostgreSQL password (instead of the URL's)", \.store.passwordFile),
        .integer(
            "store.deadline",
            "milliseconds a store operation may take before it is rolled back and its requests are answered 503",
            \.store.deadline,
            range: 100...300_000
        ),
        .integer(
            "ledger.retention",
            "seconds requests, their decisions and finished deliveries are kept before they are pruned (default 7 days)",
            \.ledger.retention,
            range: 60...315_360_000
        ),
        .integer(
            "forecast.threshold",
            "reloads in one minute of the herd forecast above which an app is warned of (0: none)",
            \.forecast.threshold,
            range: 0...100_000_000
        ),
        ConfigurationKey(
            name: "forecast.appThresholds",
            summary: "per app, the forecast's threshold instead of forecast.threshold (bundle=count, comma-separated)",
            expected: "bundle=count pairs separated by commas, each count from 0 to 100000000"
        ) { configuration, text in
            guard let thresholds = GatewayConfiguration.Forecast.appThresholds(text ?? "") else { return false }
            configuration.forecast.appThresholds = thresholds
            return true
        },
        .integer(
            "registration.requestsPerMinute",
            "calls of the registry API one device token may make per minute with the app's registration key (then 429)",
            \.registration.requestsPerMinute,
            range: 1...100_000
        ),
        .integer(
            "registration.requestsPerAddressPerMinute",
            "calls of the registry API one client address may make per minute with registration keys (then 429); 0: no limit by address",
            \.registration.requestsPerAddressPerMinute,
            range: 0...1_000_000
        ),
        .integer(
            "registration.newDevicesPerMinute",
            "devices new to an app that its registration key may add per minute (then 429 with retry-after)",
            \.registration.newDevicesPerMinute,
            range: 1...1_000_000
        ),
        .choice("environment", "APNs environment of this gateway", \.environment, DeploymentEnvironment.allCases.map { ($0.rawValue, $0) }),
        .choice("log.level", "lowest log level written", \.log.level, Logger.Level.allCases.map { ($0.rawValue, $0) }),
        .choice("log.format", "log line format", \.log.format, GatewayConfiguration.Log.Format.allCases.map { ($0.rawValue, $0) }),
    ] + PushType.allCases.flatMap { type in SchedulingField.all.map { ConfigurationKey.scheduling($0, of: type) } }

    /// The key with this dotted name.
    public static func named(_ name: String) -> ConfigurationKey? {
        all.first { $0.name == name }
    }

    /// Applies a textual value; `false` (and the configuration unchanged) when it does not have the
    /// expected form.
    func apply(_ text: String?, to configuration: inout GatewayConfiguration) -> Bool {
        set(&configuration, text)
    }
}

extension ConfigurationKey {
    /// `<prefix>.<field>`: a number of the push type's default policy, under the type's
    /// ``PushTypeDescriptor/configurationPrefix``.
    static func scheduling(_ field: SchedulingField, of pushType: PushType) -> ConfigurationKey {
        let type = pushType.descriptor
        return ConfigurationKey(
            name: type.configurationPrefix + "." + field.name,
            summary: type.tokenScope == .appOnDevice ? field.summary : type.pluralLabel + ": " + field.summary,
            expected: field.expected
        ) { configuration, text in
            field.apply(text, to: &configuration.scheduling[pushType].defaultPolicy)
        }
    }

    /// A non-empty string.
    static func text(
        _ name: String,
        _ summary: String,
        _ keyPath: any WritableKeyPath<GatewayConfiguration, String> & Sendable
    ) -> ConfigurationKey {
        ConfigurationKey(name: name, summary: summary, expected: "a non-empty string") { configuration, text in
            guard let text, !text.isEmpty else { return false }
            configuration[keyPath: keyPath] = text
            return true
        }
    }

    /// An integer within `range`.
    static func integer(
        _ name: String,
        _ summary: String,
        _ keyPath: any WritableKeyPath<GatewayConfiguration, Int> & Sendable,
        range: ClosedRange<Int>
    ) -> ConfigurationKey {
        ConfigurationKey(
            name: name,
            summary: summary,
            expected: "an integer from \(range.lowerBound) to \(range.upperBound)"
        ) { configuration, text in
            guard let text, let value = Int(text), range.contains(value) else { return false }
            configuration[keyPath: keyPath] = value
            return true
        }
    }

    /// `true` or `false`.
    static func boolean(
        _ name: String,
        _ summary: String,
        _ keyPath: any WritableKeyPath<GatewayConfiguration, Bool> & Sendable
    ) -> ConfigurationKey {
        ConfigurationKey(name: name, summary: summary, expected: "true or false") { configuration, text in
            switch text {
            case "true": configuration[keyPath: keyPath] = true
            case "false": configuration[keyPath: keyPath] = false
            default: return false
            }
            return true
        }
    }

    /// Optional text; empty or null unsets it.
    static func optionalText(
        _ name: String,
        _ summary: String,
        _ keyPath: any WritableKeyPath<GatewayConfiguration, String?> & Sendable
    ) -> ConfigurationKey {
        ConfigurationKey(name: name, summary: summary, expected: "a string") { configuration, text in
            configuration[keyPath: keyPath] = (text?.isEmpty ?? true) ? nil : text
            return true
        }
    }

    /// An optional file path.
    static func path(
        _ name: String,
        _ summary: String,
        _ keyPath: any WritableKeyPath<GatewayConfiguration, String?> & Sendable
    ) -> ConfigurationKey {
        ConfigurationKey(name: name, summary: summary, expected: "a file path") { configuration, text in
            // An empty value or YAML null unsets the key (back to the default).
            configuration[keyPath: keyPath] = (text?.isEmpty ?? true) ? nil : text
            return true
        }
    }

    /// One of a fixed set of words.
    static func choice<Value: Sendable>(
        _ name: String,
        _ summary: String,
        _ keyPath: any WritableKeyPath<GatewayConfiguration, Value> & Sendable,
        _ choices: [(String, Value)]
    ) -> ConfigurationKey {
        ConfigurationKey(
            name: name,
            summary: summary,
            expected: "one of " + choices.map(\.0).joined(separator: ", ")
        ) { configuration, text in
            guard let match = choices.first(where: { $0.0 == text }) else { return false }
            configuration[keyPath: keyPath] = match.1
            return true
        }
    }
}
