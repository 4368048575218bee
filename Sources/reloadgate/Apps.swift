import ArgumentParser
import Foundation
import ReloadGateCore
import ReloadGateServer
import ReloadGateStore

/// The options of commands that work on the data directory directly (also while the server runs).
struct StoreOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("YAML configuration file (for data.directory and environment).", valueName: "file"))
    var config: String?

    /// Opens the store the configuration names (the current folder's `data/` by default).
    func openStore() throws -> SQLiteStore {
        let configuration: GatewayConfiguration
        do {
            configuration = try GatewayConfiguration.load(file: config, environment: ProcessInfo.processInfo.environment)
        } catch {
            throw CommandFailure.exit(error.description, status: 2)
        }
        do {
            return try SQLiteStore(
                directory: configuration.dataDirectory,
                environment: configuration.environment,
                now: Date()
            )
        } catch {
            throw CommandFailure.exit(error.description, status: 1)
        }
    }
}

/// `reloadgate apps`: the apps whose devices and widgets the gateway knows.
struct Apps: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Register and list apps.",
        subcommands: [Add.self, List.self]
    )

    /// `reloadgate apps add BUNDLE`.
    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Register an app and print its API key and webhook secret (shown once).",
            discussion: """
                The API key authenticates the app's calls to the registry API (authorization: bearer KEY); \
                the webhook secret signs its reload webhook calls. Neither is stored in the clear: keep them \
                now. Works on the data directory of the configuration (data/ in the current folder by \
                default), also while the server runs, which sees the new app at once.
                """
        )

        @Argument(help: "The app's bundle id, e.g. com.example.scores.")
        var bundle: String

        @Option(name: .long, help: "The app's environment; must be the gateway's (sandbox or production).")
        var environment: String?

        @Flag(name: .long, help: "Allow the app's credentials to claim budget exemptions (rule 9).")
        var allowExemptions = false

        @Flag(name: .long, help: "Print {\"bundle\",\"environment\",\"apiKey\",\"webhookSecret\"} as JSON.")
        var json = false

        @OptionGroup var storeOptions: StoreOptions

        func run() async throws {
            let bundleID: BundleID
            do {
                bundleID = try BundleID(bundle)
            } catch {
                throw CommandFailure.exit("\(bundle): \(error)", status: 2)
            }
            let store = try storeOptions.openStore()
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
                credentials = try store.createApp(bundle: bundleID, allowsExemptions: allowExemptions, now: Date())
            } catch let error as StoreError {
                throw CommandFailure.exit(error.description, status: 1)
            }
            if json {
                let object: [String: String] = [
                    "bundle": credentials.app.bundle.rawValue,
                    "environment": credentials.app.environment.rawValue,
                    "apiKey": credentials.apiKey,
                    "webhookSecret": credentials.webhookSecret,
                ]
                try printJSON(object)
            } else {
                printLine("app \(credentials.app.bundle) (\(credentials.app.environment)) registered")
                printLine("API key:        \(credentials.apiKey)")
                printLine("webhook secret: \(credentials.webhookSecret)")
                printLine("Both are shown only now: the gateway keeps a hash of the key and the secret sealed.")
            }
        }
    }

    /// `reloadgate apps list`.
    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the registered apps.")

        @Flag(name: .long, help: "Print a JSON array.")
        var json = false

        @OptionGroup var storeOptions: StoreOptions

        func run() async throws {
            let store = try storeOptions.openStore()
            defer { try? store.close() }
            let apps = try store.apps()
            if json {
                let objects: [[String: Any]] = apps.map {
                    [
                        "bundle": $0.bundle.rawValue, "environment": $0.environment.rawValue,
                        "allowsExemptions": $0.allowsExemptions,
                        "createdAt": ISO8601DateFormatter().string(from: $0.createdAt),
                    ]
                }
                try printJSON(objects)
                return
            }
            guard !apps.isEmpty else {
                printLine("no apps registered (add one with `reloadgate apps add BUNDLE`)")
                return
            }
            let width = max(6, apps.map(\.bundle.rawValue.count).max() ?? 0)
            printLine("BUNDLE".padding(toLength: width, withPad: " ", startingAt: 0) + "  ENVIRONMENT  EXEMPTIONS  CREATED")
            for app in apps {
                printLine(
                    app.bundle.rawValue.padding(toLength: width, withPad: " ", startingAt: 0) + "  "
                        + app.environment.rawValue.padding(toLength: 11, withPad: " ", startingAt: 0) + "  "
                        + (app.allowsExemptions ? "allowed   " : "no        ") + "  "
                        + ISO8601DateFormatter().string(from: app.createdAt)
                )
            }
        }
    }
}
