import ArgumentParser
import Crypto
import Foundation
import NIOHTTP1
import ReloadGateAPI
import ReloadGateAPNs
import ReloadGateCore
import ReloadGateServer
import ReloadGateStore

/// `reloadgate keys`: the provider keys (public halves) push senders sign their tokens with.
struct Keys: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Register, list and remove push senders' provider keys (public keys only).",
        subcommands: [Add.self, List.self, Remove.self]
    )

    /// `reloadgate keys add --kid ID --team ID --public-key FILE`.
    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Register a provider key's public key.",
            discussion: """
                The sender keeps its .p8 private key; the gateway needs only the public key, for example \
                `openssl ec -in AuthKey_ABC123DEFG.p8 -pubout -out ABC123DEFG.pem`. With a gateway running, \
                this goes through its admin socket and the very next push can use the key; without one, it \
                changes the data directory. The key may push to the apps of its team (apps add --team) only, \
                and with --topic to those bundles only.
                """
        )

        @Option(name: .long, help: "The key id (the token's kid).")
        var kid: String

        @Option(name: .long, help: "The team id (the token's iss).")
        var team: String

        @Option(name: .customLong("public-key"), help: ArgumentHelp("The P-256 public key, PEM.", valueName: "file"))
        var publicKey: String

        @Option(name: .customLong("topic"), help: ArgumentHelp("A bundle the key may push to (repeat; none: any).", valueName: "bundle"))
        var topics: [String] = []

        @Option(name: .long, help: "sandbox, production or both.")
        var environment: String = "both"

        @OptionGroup var admin: AdminOptions

        func run() async throws {
            guard ProviderKey.isValidIdentifier(kid) else {
                throw CommandFailure.exit("--kid must be 1 to 64 letters or digits, not '\(kid)'", status: 2)
            }
            guard ProviderKey.isValidIdentifier(team) else {
                throw CommandFailure.exit("--team must be 1 to 64 letters or digits, not '\(team)'", status: 2)
            }
            guard ["sandbox", "production", "both"].contains(environment) else {
                throw CommandFailure.exit("--environment must be sandbox, production or both, not '\(environment)'", status: 2)
            }
            let bundles: [BundleID]
            do {
                bundles = try topics.map { try BundleID($0) }
            } catch {
                throw CommandFailure.exit("--topic: \(error)", status: 2)
            }
            let pem: String
            do {
                pem = try String(contentsOfFile: publicKey, encoding: .utf8)
            } catch {
                throw CommandFailure.exit("--public-key: cannot read \(publicKey)", status: 2)
            }
            if pem.contains("PRIVATE KEY") {
                throw CommandFailure.exit(
                    "--public-key: \(publicKey) holds a private key; give the public key "
                        + "(openssl ec -in KEY.p8 -pubout -out KEY.pem): the gateway never stores private keys",
                    status: 2
                )
            }
            let parsed: P256.Signing.PublicKey
            do {
                parsed = try P256.Signing.PublicKey(pemRepresentation: pem)
            } catch {
                throw CommandFailure.exit("--public-key: \(publicKey) is not a P-256 public key in PEM", status: 2)
            }
            let scope = bundles.isEmpty ? "any bundle of team \(team)" : bundles.map(\.rawValue).joined(separator: ", ")
            let body = AdminAPI.KeyRequest(
                kid: kid, team: team, publicKey: parsed.pemRepresentation, environment: environment, topics: bundles.map(\.rawValue)
            )
            if try await admin.callIfRunning(.POST, "/v1/keys", body: body, as: AdminAPI.KeyAdded.self) != nil {
                printLine("key \(kid) of team \(team) registered for \(scope) (\(environment)); the running gateway uses it now")
                return
            }
            let store = try await StoreOptions.openStore(config: admin.config)
            defer { try? store.close() }
            do {
                try await OfflineDoor(store: store).execute(AddProviderKey(
                    StoredProviderKey(
                        keyID: kid,
                        teamID: team,
                        publicKeyPEM: parsed.pemRepresentation,
                        topics: bundles,
                        environments: environment,
                        createdAt: Date()
                    )
                ))
            } catch let error as StoreError {
                throw CommandFailure.exit(error.description, status: 1)
            }
            printLine("key \(kid) of team \(team) registered for \(scope) (\(environment))")
        }
    }

    /// `reloadgate keys list`.
    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the registered provider keys.")

        /// A key in `--json`'s array.
        struct Listing: Encodable {
            var kid: String
            var team: String
            var topics: [String]
            var environment: String
            var createdAt: String
        }

        @Flag(name: .long, help: "Print a JSON array.")
        var json = false

        @OptionGroup var storeOptions: StoreOptions

        func run() async throws {
            let store = try await storeOptions.openStore()
            defer { try? store.close() }
            let keys = try await store.providerKeys()
            if json {
                try printJSON(keys.map {
                    Listing(
                        kid: $0.keyID, team: $0.teamID, topics: $0.topics.map(\.rawValue), environment: $0.environments,
                        createdAt: ISO8601DateFormatter().string(from: $0.createdAt)
                    )
                })
                return
            }
            guard !keys.isEmpty else {
                printLine("no provider keys registered (add one with `reloadgate keys add`)")
                return
            }
            printLine(
                AdminText.table(
                    ["KID", "TEAM", "ENVIRONMENT", "TOPICS"],
                    keys.map { key in
                        [key.keyID, key.teamID, key.environments,
                         key.topics.isEmpty ? "any" : key.topics.map(\.rawValue).joined(separator: " ")]
                    }
                )
            )
        }
    }

    /// `reloadgate keys remove KID`.
    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Remove a provider key; the next push signed with it is refused.",
            discussion: """
                With a gateway running, this goes through its admin socket and takes effect for the next \
                push; without one, it changes the data directory.
                """
        )

        @Argument(help: "The key id.")
        var kid: String

        @OptionGroup var admin: AdminOptions

        func run() async throws {
            let path = "/v1/keys/\(kid.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? kid)"
            if try await admin.callIfRunning(.DELETE, path, as: AdminAPI.KeyRemoved.self) != nil {
                printLine("key \(kid) removed; the running gateway refuses it now")
                return
            }
            let store = try await StoreOptions.openStore(config: admin.config)
            defer { try? store.close() }
            guard try await OfflineDoor(store: store).execute(RemoveProviderKey(keyID: kid)) else {
                throw CommandFailure.exit("no provider key \(kid) is registered", status: 1)
            }
            printLine("key \(kid) removed")
        }
    }
}
