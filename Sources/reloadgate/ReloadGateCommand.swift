import ArgumentParser
import Foundation

/// `reloadgate`: the gateway and its operator commands. Thin on purpose: each subcommand parses its
/// arguments and calls into the library modules, which tests call too.
@main
struct ReloadGateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reloadgate",
        abstract: "A push-notification reload gateway for WidgetKit widgets.",
        discussion: """
            Exit status: 0 success, 1 failure while running, 2 bad arguments or configuration.
            """,
        subcommands: [
            Serve.self, Pending.self, Explain.self, Budget.self, Cancel.self, Flush.self, Stats.self, Forecast.self, Freshness.self, Cluster.self, Devices.self, Apps.self, Keys.self,
            Dashboard.self, Export.self, Simulate.self, OpenAPI.self, Health.self, Certs.self, MockAPNs.self,
        ]
    )

    /// Parses and runs the command, exiting with status 2 (not argument-parser's 64) on bad arguments,
    /// so that every "you asked for something wrong" ends the same way.
    static func main() async {
        do {
            var command = try parseAsRoot()
            if var command = command as? any AsyncParsableCommand {
                try await command.run()
            } else {
                try command.run()
            }
        } catch {
            if exitCode(for: error) == .validationFailure {
                FileHandle.standardError.write(Data((usageError(error) + "\n").utf8))
                Foundation.exit(2)
            }
            exit(withError: error)
        }
    }

    /// A usage error in the style of every other error of the command line: `reloadgate: error: ...`,
    /// with where to find help (argument-parser's own text starts "Error: " over three lines).
    static func usageError(_ error: any Error) -> String {
        var text = message(for: error)
        if let first = text.first, first.isUppercase, text.dropFirst().first?.isLowercase ?? false {
            text = first.lowercased() + text.dropFirst()
        }
        let help = fullMessage(for: error).split(separator: "\n").first { $0.contains("--help'") }
            .flatMap { $0.firstMatch(of: /'([^']*--help)'/).map { String($0.1) } } ?? "reloadgate --help"
        return "reloadgate: error: \(text) (see '\(help)')"
    }
}
