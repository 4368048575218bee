public import Foundation

/// A program run by a test, waited for without blocking a thread.
///
/// Standard output and error go to files, not pipes: reading a pipe to its end blocks until every
/// process holding its write end has closed it, and a process spawned at the same moment by another
/// test (`swift test` runs tests in parallel) can inherit that end and keep it open for as long as it
/// runs. A blocked read also holds one of the few threads of Swift's cooperative pool (two on a
/// two-core machine). So the child's exit is polled, every wait has a deadline, and the output is what
/// the files hold.
public final class ChildProcess: Sendable {
    private let process: Process
    private let outputFile: URL
    private let errorFile: URL

    /// Starts `executable ARGUMENTS` in `directory`; `environment` replaces the test process's environment
    /// when given.
    public init(_ executable: URL, _ arguments: [String], in directory: URL, environment: [String: String]? = nil) throws {
        let stem = FileManager.default.temporaryDirectory
            .appendingPathComponent("reloadgate-child-\(UUID().uuidString)").path
        outputFile = URL(fileURLWithPath: stem + ".out")
        errorFile = URL(fileURLWithPath: stem + ".err")
        guard FileManager.default.createFile(atPath: outputFile.path, contents: nil),
              FileManager.default.createFile(atPath: errorFile.path, contents: nil)
        else { throw ChildProcessError.cannotCaptureOutput(stem) }
        let output = try FileHandle(forWritingTo: outputFile)
        let error = try FileHandle(forWritingTo: errorFile)
        defer {
            // The child has its own copies now.
            try? output.close()
            try? error.close()
        }

        process = Process()
        process.executableURL = executable
        process.arguments = arguments
        process.currentDirectoryURL = directory
        if let environment { process.environment = environment }
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = output
        process.standardError = error
        try process.run()
    }

    /// The process id.
    public var processIdentifier: Int32 { process.processIdentifier }
    /// Whether the process still runs.
    public var isRunning: Bool { process.isRunning }
    /// What the process wrote to standard output so far.
    public var standardOutput: String { Self.contents(of: outputFile) }
    /// What the process wrote to standard error so far.
    public var standardError: String { Self.contents(of: errorFile) }

    /// Sends a signal (`SIGTERM`, `SIGINT`, `SIGKILL`).
    public func send(_ signal: Int32) {
        kill(process.processIdentifier, signal)
    }

    /// Waits until a line of standard output contains `text` and returns that line.
    /// - Throws: ``ChildProcessError/timedOut(waitingFor:output:)`` after `timeout`, or when the process
    ///   exits first.
    public func waitForOutputLine(containing text: String, timeout: Duration = .seconds(60)) async throws -> String {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let running = process.isRunning
            if let line = standardOutput.split(separator: "\n").first(where: { $0.contains(text) }) {
                return String(line)
            }
            if !running { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw ChildProcessError.timedOut(waitingFor: text, output: standardOutput + standardError)
    }

    /// Waits for the process to exit and returns its status; kills it after `timeout`.
    public func waitForExit(timeout: Duration = .seconds(60)) async throws -> Int32 {
        let deadline = ContinuousClock.now + timeout
        while process.isRunning {
            guard ContinuousClock.now < deadline else {
                send(SIGKILL)
                throw ChildProcessError.timedOut(waitingFor: "exit", output: standardOutput + standardError)
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        return process.terminationStatus
    }

    /// Runs `executable ARGUMENTS` to completion (killed after `timeout`).
    /// - Returns: the exit status, standard output and standard error.
    public static func run(
        _ executable: String,
        _ arguments: [String],
        in directory: URL,
        timeout: Duration = .seconds(120)
    ) async throws -> (status: Int32, output: String, error: String) {
        let child = try ChildProcess(URL(fileURLWithPath: executable), arguments, in: directory)
        let status = try await child.waitForExit(timeout: timeout)
        return (status, child.standardOutput, child.standardError)
    }

    private static func contents(of file: URL) -> String {
        (try? Data(contentsOf: file)).map { String(decoding: $0, as: UTF8.self) } ?? ""
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        try? FileManager.default.removeItem(at: outputFile)
        try? FileManager.default.removeItem(at: errorFile)
    }
}

/// Failures of running a child process.
public enum ChildProcessError: Error, CustomStringConvertible {
    case cannotCaptureOutput(String)
    case timedOut(waitingFor: String, output: String)

    public var description: String {
        switch self {
        case .cannotCaptureOutput(let path): "cannot create the output files \(path).out/.err"
        case .timedOut(let text, let output): "timed out waiting for \(text); output so far:\n\(output)"
        }
    }
}
