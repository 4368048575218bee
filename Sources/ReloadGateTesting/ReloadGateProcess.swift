public import Foundation
import Synchronization

/// The real `reloadgate` binary running as a child process, for tests of the command line: its
/// arguments, exit status, output and signal handling.
public final class ReloadGateProcess: Sendable {
    private let process: Process
    private let output = CapturedOutput()

    /// Output gathered by the pipes' handlers (which run on their own threads).
    private final class CapturedOutput: Sendable {
        let streams = Mutex((stdout: "", stderr: ""))
    }

    /// The `reloadgate` binary built beside the test bundle (`swift build` puts both in one directory).
    public static var binaryURL: URL {
        get throws {
            let candidates = [
                URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent(),
                Bundle.main.bundleURL,
                Bundle.main.bundleURL.deletingLastPathComponent(),
            ].map { $0.appendingPathComponent("reloadgate") }
            guard let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0.path) }) else {
                throw ProcessError.binaryNotFound(candidates.map(\.path))
            }
            return found
        }
    }

    /// Starts `reloadgate ARGUMENTS` in `directory` with `environment` added to a clean environment
    /// (no `RELOADGATE_*` variable of the test process leaks into the child).
    public init(_ arguments: [String], in directory: URL, environment: [String: String] = [:]) throws {
        process = Process()
        process.executableURL = try Self.binaryURL
        process.arguments = arguments
        process.currentDirectoryURL = directory
        var childEnvironment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("RELOADGATE_") }
        childEnvironment.merge(environment) { _, new in new }
        process.environment = childEnvironment
        let stdout = Pipe()
        let stderr = Pipe()
        process.standardOutput = stdout
        process.standardError = stderr
        process.standardInput = FileHandle.nullDevice
        stdout.fileHandleForReading.readabilityHandler = { [output] handle in
            let text = String(decoding: handle.availableData, as: UTF8.self)
            output.streams.withLock { $0.stdout += text }
        }
        stderr.fileHandleForReading.readabilityHandler = { [output] handle in
            let text = String(decoding: handle.availableData, as: UTF8.self)
            output.streams.withLock { $0.stderr += text }
        }
        try process.run()
    }

    /// What the process wrote to standard output so far.
    public var standardOutput: String { output.streams.withLock { $0.stdout } }
    /// What the process wrote to standard error so far.
    public var standardError: String { output.streams.withLock { $0.stderr } }

    /// Waits until a line of standard output contains `text` and returns that line.
    /// - Throws: ``ProcessError/timedOut(waitingFor:output:)`` after `timeout`, or when the process exits first.
    public func waitForOutputLine(containing text: String, timeout: Duration = .seconds(60)) async throws -> String {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let line = standardOutput.split(separator: "\n").first(where: { $0.contains(text) }) {
                return String(line)
            }
            if !process.isRunning { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw ProcessError.timedOut(waitingFor: text, output: standardOutput + standardError)
    }

    /// Sends a signal (`SIGTERM`, `SIGINT`, `SIGKILL`).
    public func send(_ signal: Int32) {
        kill(process.processIdentifier, signal)
    }

    /// Waits for the process to exit and returns its status; kills it after `timeout`.
    public func waitForExit(timeout: Duration = .seconds(60)) async throws -> Int32 {
        let deadline = ContinuousClock.now + timeout
        while process.isRunning {
            guard ContinuousClock.now < deadline else {
                send(SIGKILL)
                throw ProcessError.timedOut(waitingFor: "exit", output: standardOutput + standardError)
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        // Let the pipe handlers deliver the last bytes.
        try await Task.sleep(for: .milliseconds(100))
        return process.terminationStatus
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

    /// Failures of running the binary.
    public enum ProcessError: Error, CustomStringConvertible {
        case binaryNotFound([String])
        case timedOut(waitingFor: String, output: String)

        public var description: String {
            switch self {
            case .binaryNotFound(let paths): "no reloadgate binary at any of \(paths): run `swift build` first"
            case .timedOut(let text, let output): "timed out waiting for \(text); output so far:\n\(output)"
            }
        }
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }
}
