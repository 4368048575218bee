import ArgumentParser
import Foundation
import Logging
import NIOHTTP1
import ReloadGateAPI
import ReloadGateAPNs
import ReloadGateCore
import ReloadGateServer
import ReloadGateStore

/// The options of commands that work on the data directory directly (also while the server runs).
struct StoreOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("YAML configuration file (for data.directory and environment).", valueName: "file"))
    var config: String?

    /// Opens the store the configuration names (the current folder's `data/` by default).
    func openStore() async throws -> any GatewayStore {
        try await Self.openStore(config: config)
    }

    /// Opens the store the configuration file `config` names (the current folder's `data/` by default, or
    /// the PostgreSQL database of `store.url`).
    static func openStore(config: String?) async throws -> any GatewayStore {
        let configuration: GatewayConfiguration
        do {
            configuration = try GatewayConfiguration.load(file: config, environment: ProcessInfo.processInfo.environment)
            _ = try GatewayStoreOpener.location(of: configuration)
        } catch {
            throw CommandFailure.exit(error.description, status: 2)
        }
        var logger = Logger(label: "reloadgate")
        logger.logLevel = .warning
        do {
            return try await GatewayStoreOpener.open(configuration, now: Date(), logger: logger)
        } catch {
            throw CommandFailure.exit("\(error)", status: 1)
        }
    }
}

/// `reloadgate apps`: the apps whose devices and widgets the gateway knows.
struct Apps: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Register, list and rotate the credentials of apps.",
        subcommands: [Add.self, List.self, SetTeam.self, RotateKey.self]
    )

    /// `reloadgate apps add BUNDLE`.
    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Register an app and print its API key, webhook secret and registration key (shown once).",
            discussion: """
                The API key authenticates the app's backend to the registry API (authorization: bearer KEY); \
                the webhook secret signs its reload webhook calls; the registration key may ship inside the \
                app itself: it may only put and delete the app's devices, controls, activities and timelines. \
                None is stored in the clear: keep them now. --team binds the app to its Apple developer team: provider keys of that team may push to \
                it, keys of other teams may not; without a team no provider token can push to it (client \
                certificates and the APIs still work; add one later with `reloadgate apps set-team`). Bundle \
                ids are unique regardless of case. Works on the data directory of the configuration (data/ in \
                the current folder by default), also while the server runs, which sees the new app at once.
                """
        )

        @Argument(help: "The app's bundle id, e.g. com.example.scores.")
        var bundle: String

        @Option(name: .long, help: "The app's environment; must be the gateway's (sandbox or production).")
        var environment: String?

        @Option(name: .long, help: "The app's Apple developer team id (its provider keys' team).")
        var team: String?

        @Flag(name: .long, help: "Allow the app's credentials to claim budget exemptions (rule 9).")
        var allowExemptions = false

        @Flag(name: .long, help: "Print {\"bundle\",\"environment\",\"apiKey\",\"webhookSecret\",\"registrationKey\"} as JSON.")
        var json = false

        @OptionGroup var storeOptions: StoreOptions

        func run() async throws {
            let bundleID = try Apps.bundleID(bundle)
            if let team { try Apps.checkTeam(team) }
            let store = try await storeOptions.openStore()
            defer { try? store.close() }
            if let environment, environment != store.environment.rawValue {
                guard DeploymentEnvironment(rawValue: environment) != nil else {
                    throw CommandFailure.exit("--environment must be sandbox or production, not '\(environment)'", status: 2)
                }
                throw CommandFailure.exit(
                    "this gateway's data directory is for \(store.environment) apps, not \(environment): "
                        + "use the configuration (data.directory, environment) of a \(environment) gateway",
                    status: 2
                )
            }
            let credentials: AppCredentials
            do {
                credentials = try await OfflineDoor(store: store).execute(AddApp(bundle: bundleID, team: team, allowsExemptions: allowExemptions))
            } catch let error as StoreError {
                throw CommandFailure.exit(error.description, status: 1)
            }
            if json {
                var object: [String: String] = [
                    "bundle": credentials.app.bundle.rawValue,
                    "environment": credentials.app.environment.rawValue,
                    "apiKey": credentials.apiKey,
                    "webhookSecret": credentials.webhookSecret,
                    "registrationKey": credentials.registrationKey,
                ]
                object["team"] = credentials.app.teamID  // left out when the app has none: all strings
                try printJSON(object)
            } else {
                let teamText = credentials.app.teamID.map { "team \($0)" } ?? "no team: provider tokens cannot push to it (--team)"
                printLine("app \(credentials.app.bundle) (\(credentials.app.environment), \(teamText)) registered")
                printLine("API key:          \(credentials.apiKey)")
                printLine("webhook secret:   \(credentials.webhookSecret)")
                printLine("registration key: \(credentials.registrationKey)")
                printLine("All three are shown only now: the gateway keeps hashes of the keys and the secret sealed.")
                printLine("The registration key may ship inside the app: it may only register the app's devices, controls, activities and timelines.")
            }
        }
    }

    /// `reloadgate apps list`.
    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the registered apps.")

        /// An app in `--json`'s array.
        struct Listing: Encodable {
            var bundle: String
            var environment: String
            @Nullable var team: String?
            var allowsExemptions: Bool
            var createdAt: String
        }

        @Flag(name: .long, help: "Print a JSON array.")
        var json = false

        @OptionGroup var storeOptions: StoreOptions

        func run() async throws {
            let store = try await storeOptions.openStore()
            defer { try? store.close() }
            let apps = try await store.apps()
            if json {
                try printJSON(apps.map {
                    Listing(
                        bundle: $0.bundle.rawValue, environment: $0.environment.rawValue, team: $0.teamID,
                        allowsExemptions: $0.allowsExemptions, createdAt: ISO8601DateFormatter().string(from: $0.createdAt)
                    )
                })
                return
            }
            guard !apps.isEmpty else {
                printLine("no apps registered (add one with `reloadgate apps add BUNDLE`)")
                return
            }
            printLine(
                AdminText.table(
                    ["BUNDLE", "ENVIRONMENT", "TEAM", "EXEMPTIONS", "CREATED"],
                    apps.map { app in
                        [app.bundle.rawValue, app.environment.rawValue, app.teamID ?? "-", app.allowsExemptions ? "allowed" : "no",
                         ISO8601DateFormatter().string(from: app.createdAt)]
                    }
                )
            )
        }
    }

    /// The bundle id of an argument; exits 2 when it is not one.
    static func bundleID(_ text: String) throws -> BundleID {
        do {
            return try BundleID(text)
        } catch {
            throw CommandFailure.exit("\(text): \(error)", status: 2)
        }
    }

    /// Exits 2 unless `team` can be an Apple team id.
    static func checkTeam(_ team: String) throws {
        guard ProviderKey.isValidIdentifier(team) else {
            throw CommandFailure.exit("--team must be 1 to 64 letters or digits, not '\(team)'", status: 2)
        }
    }

    /// `reloadgate apps set-team BUNDLE --team T`.
    struct SetTeam: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "set-team",
            abstract: "Bind an app to its Apple developer team: only that team's provider keys may push to it.",
            discussion: """
                For apps registered without --team, or by a version before teams (docs/DECISIONS.md, "Apps \
                belong to a team", says which team such apps were given). With a gateway running, this goes \
                through its admin socket and takes effect for the next push; without one, it changes the \
                data directory.
                """
        )

        @Argument(help: "The app's bundle id.")
        var bundle: String

        @Option(name: .long, help: "The team id.")
        var team: String

        @OptionGroup var admin: AdminOptions

        func run() async throws {
            let bundleID = try Apps.bundleID(bundle)
            try Apps.checkTeam(team)
            if try await admin.callIfRunning(.POST, "/v1/apps/\(bundle)/team", body: AdminAPI.TeamRequest(team: team), as: AdminAPI.TeamBound.self) == nil {
                let store = try await StoreOptions.openStore(config: admin.config)
                defer { try? store.close() }
                guard try await OfflineDoor(store: store).execute(ReloadGateServer.SetTeam(bundle: bundleID, team: team)) != nil else {
                    throw CommandFailure.exit("no app \(bundle)", status: 1)
                }
            }
            printLine("app \(bundle) belongs to team \(team): its provider keys may push to it")
        }
    }

    /// `reloadgate apps rotate-key BUNDLE`.
    struct RotateKey: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rotate-key",
            abstract: "Replace an app's API key (and with --webhook-secret its webhook secret), or with --registration its registration key alone; print the new ones once.",
            discussion: """
                The old key stops working at once. With a gateway running, this goes through its admin \
                socket (so the gateway forgets the old key); without one, it changes the data directory.
                """
        )

        @Argument(help: "The app's bundle id.")
        var bundle: String

        @Flag(name: .customLong("webhook-secret"), help: "Replace the webhook secret too.")
        var webhookSecret = false

        @Flag(name: .long, help: "Replace only the registration key (the one an app ships with).")
        var registration = false

        func validate() throws {
            if registration && webhookSecret {
                throw ValidationError("--registration replaces the registration key alone; rotate the webhook secret in another call")
            }
        }

        @OptionGroup var admin: AdminOptions

        func run() async throws {
            let bundleID = try Apps.bundleID(bundle)
            let answer: AdminAPI.Credentials
            if FileManager.default.fileExists(atPath: try admin.socketPath()) {
                answer = try await admin.call(
                    .POST, "/v1/apps/\(bundle)/rotate-key", body: AdminAPI.RotateKeyRequest(webhookSecret: webhookSecret, registration: registration),
                    as: AdminAPI.Credentials.self
                )
            } else {
                let store = try await StoreOptions.openStore(config: admin.config)
                defer { try? store.close() }
                let command = ReloadGateServer.RotateCredentials(bundle: bundleID, webhookSecret: webhookSecret, registration: registration)
                guard let credentials = try await OfflineDoor(store: store).execute(command) else {
                    throw CommandFailure.exit("no app \(bundle)", status: 1)
                }
                answer = AdminAPI.Credentials(credentials, bundle: bundle, webhookSecret: webhookSecret, registration: registration)
            }
            if admin.json { return try printJSON(answer) }
            printLine("app \(bundle): new credentials (shown only now; the old ones no longer work)")
            if let key = answer.apiKey { printLine("API key:          \(key)") }
            if let secret = answer.webhookSecret { printLine("webhook secret:   \(secret)") }
            if let key = answer.registrationKey { printLine("registration key: \(key)") }
        }
    }
}
