import Foundation
import Logging
import ReloadGateCore
import ReloadGateHostileInput
import ReloadGateServer
import ReloadGateTesting
import Testing

/// The configuration table: defaults, file, environment over file, and every error with its message.
@Suite(.offThePool, .timeLimit(.minutes(5)))
struct ConfigurationTests {
    struct Valid: Sendable, CustomTestStringConvertible {
        let name: String
        let yaml: String?
        let environment: [String: String]
        let expected: @Sendable (inout GatewayConfiguration) -> Void
        var testDescription: String { name }
    }

    static let validCases: [Valid] = [
        Valid(name: "no file, no variables: the embedded default", yaml: nil, environment: [:]) { _ in },
        Valid(
            name: "every key from a file",
            yaml: """
                listen:
                  host: 0.0.0.0
                  port: 9443
                  idleTimeout: 60
                  shutdownGracePeriod: 5
                tls:
                  certificate: /etc/reloadgate/server.pem
                  key: /etc/reloadgate/server-key.pem
                  clientCA: /etc/reloadgate/senders-ca.pem
                  developmentDirectory: /tmp/certs
                data:
                  directory: /var/lib/reloadgate
                environment: production
                log:
                  level: debug
                  format: json
                """,
            environment: [:]
        ) { configuration in
            configuration.listen = .init()
            configuration.listen.host = "0.0.0.0"
            configuration.listen.port = 9443
            configuration.listen.idleTimeout = 60
            configuration.listen.shutdownGracePeriod = 5
            configuration.tls.certificate = "/etc/reloadgate/server.pem"
            configuration.tls.key = "/etc/reloadgate/server-key.pem"
            configuration.tls.clientCA = "/etc/reloadgate/senders-ca.pem"
            configuration.tls.developmentDirectory = "/tmp/certs"
            configuration.dataDirectory = "/var/lib/reloadgate"
            configuration.environment = .production
            configuration.log.level = .debug
            configuration.log.format = .json
        },
        Valid(
            name: "environment variables override the file, key by key",
            yaml: "listen:\n  port: 9443\n  host: 0.0.0.0\nlog:\n  level: debug\n",
            environment: [
                "RELOADGATE_LISTEN_PORT": "10443",
                "RELOADGATE_LOG_LEVEL": "trace",
                "RELOADGATE_TLS_CLIENT_CA": "/ca.pem",
                "RELOADGATE_DATA_DIRECTORY": "/srv/data",
                "HOME": "/root",
                "LOG_LEVEL": "not ours",
            ]
        ) { configuration in
            configuration.listen.port = 10443
            configuration.listen.host = "0.0.0.0"
            configuration.log.level = .trace
            configuration.tls.clientCA = "/ca.pem"
            configuration.dataDirectory = "/srv/data"
        },
        Valid(name: "an empty file changes nothing", yaml: "# nothing here\n", environment: [:]) { _ in },
        Valid(name: "an empty section changes nothing", yaml: "tls:\n  # certificate: x\nlisten:\n", environment: [:]) { _ in },
        Valid(
            name: "null or empty unsets an optional path",
            yaml: "tls:\n  certificate: ~\n  key: ''\n",
            environment: ["RELOADGATE_TLS_CLIENT_CA": ""]
        ) { _ in },
    ]

    @Test(arguments: validCases)
    func validConfigurations(_ valid: Valid) throws {
        let directory = try TemporaryDirectory("config")
        defer { directory.remove() }
        let file = try Self.write(valid.yaml, in: directory)
        var expected = GatewayConfiguration()
        valid.expected(&expected)
        #expect(try GatewayConfiguration.load(file: file, environment: valid.environment) == expected)
    }

    struct Invalid: Sendable, CustomTestStringConvertible {
        let name: String
        let yaml: String?
        var environment: [String: String] = [:]
        /// The whole message; `FILE` stands for the configuration file's path.
        let message: String
        var testDescription: String { name }
    }

    static let invalidCases: [Invalid] = [
        Invalid(
            name: "unknown key, with a suggestion",
            yaml: "listen:\n  prot: 9443\n",
            message: "FILE:2: unknown key 'listen.prot'; did you mean 'listen.port'?"
        ),
        Invalid(name: "unknown top-level key", yaml: "colour: blue\n", message: "FILE:1: unknown key 'colour'"),
        Invalid(name: "unknown section", yaml: "metrics:\n  port: 9090\n", message: "FILE:1: unknown key 'metrics'"),
        Invalid(
            name: "unknown environment variable",
            yaml: nil,
            environment: ["RELOADGATE_LISTN_PORT": "1"],
            message: "environment variable RELOADGATE_LISTN_PORT: unknown variable (no configuration key is named so); did you mean 'RELOADGATE_LISTEN_PORT'?"
        ),
        Invalid(
            name: "bad type: text for an integer",
            yaml: "listen:\n  port: abc\n",
            message: "FILE:2: listen.port must be an integer from 0 to 65535, not 'abc'"
        ),
        Invalid(
            name: "bad type from the environment: out of range",
            yaml: nil,
            environment: ["RELOADGATE_LISTEN_PORT": "70000"],
            message: "environment variable RELOADGATE_LISTEN_PORT: listen.port must be an integer from 0 to 65535, not '70000'"
        ),
        Invalid(
            name: "bad choice",
            yaml: "environment: staging\n",
            message: "FILE:1: environment must be one of sandbox, production, not 'staging'"
        ),
        Invalid(
            name: "a value where a section belongs",
            yaml: "listen: 8443\n",
            message: "FILE:1: listen must be a mapping of keys, not '8443'"
        ),
        Invalid(
            name: "a list where a value belongs",
            yaml: "log:\n  format: [json]\n",
            message: "FILE:2: log.format must be one of text, json, not a list"
        ),
        Invalid(
            name: "a mapping where a value belongs",
            yaml: "data:\n  directory:\n    path: x\n",
            message: "FILE:2: data.directory must be a non-empty string, not a mapping"
        ),
        Invalid(
            name: "a scheduling field out of range",
            yaml: "scheduling:\n  burst: 0\n",
            message: "FILE:2: scheduling.burst must be an integer from 1 to 1000, not '0'"
        ),
        Invalid(
            name: "an unknown field of a kind, with a suggestion",
            yaml: "scheduling:\n  kinds:\n    scores:\n      dailyBudgt: 70\n",
            message: "FILE:4: unknown key 'scheduling.kinds.scores.dailyBudgt'; did you mean 'scheduling.kinds.scores.dailyBudget'?"
        ),
        Invalid(
            name: "a kind's field out of range",
            yaml: "scheduling:\n  kinds:\n    scores:\n      minimumInterval: -5\n",
            message: "FILE:4: scheduling.kinds.scores.minimumInterval must be an integer from 0 to 86400, not '-5'"
        ),
        Invalid(
            name: "not a mapping at the top",
            yaml: "- listen\n",
            message: "the configuration file FILE is not valid: the top level must be a mapping of keys"
        ),
    ]

    @Test(arguments: invalidCases)
    func invalidConfigurationsNameTheKeyAndSource(_ invalid: Invalid) throws {
        let directory = try TemporaryDirectory("config")
        defer { directory.remove() }
        let file = try Self.write(invalid.yaml, in: directory)
        do {
            let configuration = try GatewayConfiguration.load(file: file, environment: invalid.environment)
            Issue.record("loaded \(configuration)")
        } catch {
            #expect(error.description == invalid.message.replacingOccurrences(of: "FILE", with: file ?? "-"))
        }
    }

    /// Every integer key, given every hostile spelling of a number through the environment (the ends of
    /// `Int64` and past them, 20 digits, `1e300`, NaN, ...): a value in the key's range is taken as it is,
    /// anything else is refused with one line naming the variable, the key, its range and the text.
    @Test func everyIntegerKeyTakesOnlyWholeNumbersInItsRange() {
        let keys = ConfigurationKey.all.filter { $0.expected.hasPrefix("an integer from ") }
        #expect(keys.count >= 15, "the integer keys are found by their expected text")
        for key in keys {
            let bounds = key.expected.dropFirst("an integer from ".count).split(separator: " to ").compactMap { Int($0) }
            guard bounds.count == 2 else {
                Issue.record("\(key.name): cannot read its range from '\(key.expected)'")
                continue
            }
            for spelling in HostileNumbers.all {
                let environment = [key.environmentVariable: spelling]
                if let value = Int(spelling), (bounds[0]...bounds[1]).contains(value) {
                    // (Another key's rule may still refuse the whole configuration; no crash either way.)
                    _ = try? GatewayConfiguration.load(file: nil, environment: environment)
                    continue
                }
                do {
                    let configuration = try GatewayConfiguration.load(file: nil, environment: environment)
                    Issue.record("\(key.name) took '\(spelling)': \(configuration)")
                } catch {
                    #expect(
                        error.description == "environment variable \(key.environmentVariable): \(key.name) must be \(key.expected), not '\(spelling)'"
                    )
                }
            }
        }
    }

    /// Writes `yaml` (if any) as `reloadgate.yaml` in `directory` and returns its path.
    static func write(_ yaml: String?, in directory: TemporaryDirectory) throws -> String? {
        guard let yaml else { return nil }
        let file = directory.path("reloadgate.yaml")
        try yaml.write(toFile: file, atomically: true, encoding: .utf8)
        return file
    }

    @Test func aMissingConfigurationFileIsNamed() {
        #expect(throws: ConfigurationError.unreadableFile(path: "/nonexistent/reloadgate.yaml", reason: "No such file or directory")) {
            try GatewayConfiguration.load(file: "/nonexistent/reloadgate.yaml", environment: [:])
        }
    }

    @Test func aKindsOverridesFollowTheDefaultPolicyForFieldsTheyDoNotSet() throws {
        let directory = try TemporaryDirectory("config")
        defer { directory.remove() }
        // The kind comes before the default in the file, and the environment changes the default last.
        let file = try Self.write(
            "scheduling:\n  kinds:\n    scores:\n      dailyBudget: 70\n  minimumInterval: 600\n",
            in: directory
        )
        let configuration = try GatewayConfiguration.load(
            file: file,
            environment: ["RELOADGATE_SCHEDULING_BURST": "3"]
        )
        let resolved = configuration.scheduling.resolved
        #expect(resolved.defaultPolicy.minimumInterval == 600)
        #expect(resolved.defaultPolicy.burst == 3)
        #expect(resolved.defaultPolicy.dailyBudget == 40)
        let scores = try #require(resolved.policiesByKind["scores"])
        #expect(scores.dailyBudget == 70)
        #expect(scores.minimumInterval == 600)
        #expect(scores.burst == 3)
    }

    /// Controls' policies (issue 29): their own defaults, `scheduling.controls.<field>` from the file or the
    /// environment, `scheduling.controls.kinds.<kind>` following the controls' default, apart from widgets'.
    @Test func controlsHaveTheirOwnPoliciesInTheFileAndTheEnvironment() throws {
        let directory = try TemporaryDirectory("config")
        defer { directory.remove() }
        let file = try Self.write(
            "scheduling:\n  kinds:\n    garage:\n      dailyBudget: 10\n  controls:\n    burst: 4\n    kinds:\n      garage:\n        minimumInterval: 5\n",
            in: directory
        )
        let configuration = try GatewayConfiguration.load(file: file, environment: ["RELOADGATE_SCHEDULING_CONTROLS_DAILY_BUDGET": "200"])
        let resolved = configuration.scheduling.resolved
        #expect(resolved.defaultPolicy == SchedulingPolicy())
        #expect(resolved[.controls].defaultPolicy.burst == 4)
        #expect(resolved[.controls].defaultPolicy.dailyBudget == 200)
        #expect(resolved[.controls].defaultPolicy.minimumInterval == 60)
        let garage = try #require(resolved[.controls].byKind["garage"])
        #expect(garage.minimumInterval == 5)
        #expect(garage.burst == 4)
        #expect(garage.dailyBudget == 200)
        #expect(resolved.policiesByKind["garage"]?.dailyBudget == 10)
        #expect(resolved.policy(kind: "garage", pushType: .controls) == garage)
        #expect(resolved.policy(kind: "lights", pushType: .controls) == resolved[.controls].defaultPolicy)

        let wrong = try Self.write("scheduling:\n  controls:\n    kinds:\n      garage:\n        dailyBudjet: 5\n", in: directory)
        #expect(throws: ConfigurationError.self) { try GatewayConfiguration.load(file: wrong, environment: [:]) }
        #expect(throws: ConfigurationError.self) {
            try GatewayConfiguration.load(file: nil, environment: ["RELOADGATE_SCHEDULING_CONTROLS_BURST": "0"])
        }

        // `reloadgate simulate --set`: control:FIELD and control:KIND.FIELD.
        var scheduling = GatewayConfiguration.Scheduling()
        #expect(scheduling.set("control:daily=12") == nil)
        #expect(scheduling.set("control:garage.interval=7") == nil)
        #expect(scheduling.set("control:garage.burst=x") != nil)
        #expect(scheduling.resolved[.controls].defaultPolicy.dailyBudget == 12)
        #expect(scheduling.resolved[.controls].byKind["garage"]?.minimumInterval == 7)
        #expect(scheduling.resolved.defaultPolicy.dailyBudget == 40)
    }

    @Test func environmentVariableNamesFollowTheKeys() {
        let names = Dictionary(uniqueKeysWithValues: ConfigurationKey.all.map { ($0.name, $0.environmentVariable) })
        #expect(names["listen.port"] == "RELOADGATE_LISTEN_PORT")
        #expect(names["listen.idleTimeout"] == "RELOADGATE_LISTEN_IDLE_TIMEOUT")
        #expect(names["tls.clientCA"] == "RELOADGATE_TLS_CLIENT_CA")
        #expect(names["data.directory"] == "RELOADGATE_DATA_DIRECTORY")
        #expect(names["scheduling.lowPriorityDelay"] == "RELOADGATE_SCHEDULING_LOW_PRIORITY_DELAY")
        #expect(Set(names.values).count == names.count)
    }
}

/// `forecast.appThresholds`: `bundle=count` pairs, from the file or the environment; anything else (a
/// count out of range or past Int64, a bad bundle, a bundle twice, a pair without `=`) is refused naming
/// the key, and the configuration is not used.
struct ForecastThresholdTests {
    @Test func pairsAreReadAndAnAppWithoutOneTakesTheDefault() throws {
        let configuration = try GatewayConfiguration.load(file: nil, environment: [
            "RELOADGATE_FORECAST_THRESHOLD": "800",
            "RELOADGATE_FORECAST_APP_THRESHOLDS": " com.example.scores=5000 ,com.example.news=0",
        ])
        #expect(configuration.forecast.appThresholds == ["com.example.scores": 5000, "com.example.news": 0])
        #expect(configuration.forecast.threshold(of: "com.example.scores") == 5000)
        #expect(configuration.forecast.threshold(of: "com.example.news") == nil, "0 turns the app's warning off")
        #expect(configuration.forecast.threshold(of: "com.example.other") == 800)
        #expect(try GatewayConfiguration.load(file: nil, environment: ["RELOADGATE_FORECAST_APP_THRESHOLDS": ""]).forecast.appThresholds == [:])
    }

    @Test(arguments: [
        "com.example.scores=100000001", "com.example.scores=-1", "com.example.scores=99999999999999999999",
        "com.example.scores=1e3", "a..b=5", "com.example.scores", "com.example.scores=5=6", "a=1,a=2", "=5",
    ])
    func aBadPairIsRefusedNamingTheKey(_ text: String) {
        #expect(throws: ConfigurationError.self) {
            try GatewayConfiguration.load(file: nil, environment: ["RELOADGATE_FORECAST_APP_THRESHOLDS": text])
        }
        do {
            _ = try GatewayConfiguration.load(file: nil, environment: ["RELOADGATE_FORECAST_APP_THRESHOLDS": text])
        } catch {
            #expect("\(error)".contains("RELOADGATE_FORECAST_APP_THRESHOLDS") || "\(error)".contains("forecast.appThresholds"), "\(error)")
        }
    }
}
