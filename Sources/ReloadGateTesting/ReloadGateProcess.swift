public import Foundation

/// The real `reloadgate` binary running as a child process, for tests of the command line: its
/// arguments, exit status, output and signal handling. A ``ChildProcess`` underneath: no pipes, no
/// blocking waits, a deadline on every wait.
public final class ReloadGateProcess: Sendable {
    private let child: ChildProcess

    /// The `reloadgate` binary built beside the test bundle (`swift build` puts both in one directory).
    public static var binaryURL: URL {
        get throws {
            let candidates = [
                URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent(),
                Bundle.main.bundleURL,
                Bundle.main.bundleURL.deletingLastPathComponent(),
            ].map { $0.appendingPathComponent("reloadgate") }
            guard let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0.path) }) else {
                throw BinaryNotFound(paths: candidates.map(\.path))
            }
            return found
        }
    }

    /// Starts `reloadgate ARGUMENTS` in `directory` with `environment` added to a clean environment
    /// (no `RELOADGATE_*` variable of the test process leaks into the child).
    public init(_ arguments: [String], in directory: URL, environment: [String: String] = [:]) throws {
        HeavyTest.expectTurn("the reloadgate binary (ReloadGateProcess)")
        var childEnvironment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("RELOADGATE_") }
        childEnvironment.merge(environment) { _, new in new }
        child = try ChildProcess(try Self.binaryURL, arguments, in: directory, environment: childEnvironment)
    }

    /// What the process wrote to standard output so far.
    public var standardOutput: String { child.standardOutput }
    /// What the process wrote to standard error so far.
    public var standardError: String { child.standardError }

    /// Waits until a line of standard output contains `text` and returns that line.
    /// - Throws: ``ChildProcessError/timedOut(waitingFor:output:)`` after `timeout`, or when the process
    ///   exits first.
    public func waitForOutputLine(containing text: String, timeout: Duration = .seconds(60)) async throws -> String {
        try await child.waitForOutputLine(containing: text, timeout: timeout)
    }

    /// Sends a signal (`SIGTERM`, `SIGINT`, `SIGKILL`).
    public func send(_ signal: Int32) {
        child.send(signal)
    }

    /// Waits for the process to exit and returns its status; kills it after `timeout`.
    public func waitForExit(timeout: Duration = .seconds(60)) async throws -> Int32 {
        try await child.waitForExit(timeout: timeout)
    }

    /// Runs `reloadgate ARGUMENTS` to completion.
    /// - Returns: the exit status, standard output and standard error.
    public static func run(
        _ arguments: [String],
        in directory: URL,
        environment: [String: String] = [:]
    ) async throws -> (status: Int32, stdout: String, stderr: String) {
        let process = try ReloadGateProcess(arguments, in: directory, environment: environment)
        let status = try await process.waitForExit()
        return (status, process.standardOutput, process.standardError)
    }

    /// No `reloadgate` binary beside the tests.
    public struct BinaryNotFound: Error, CustomStringConvertible {
        public let paths: [String]
        public var description: String { "no reloadgate binary at any of \(paths): run `swift build` first" }
    }
}
