public import Foundation
import Synchronization

/// A program run by a test, waited for without blocking a thread.
///
/// Standard output and error go to files, not pipes: reading a pipe to its end blocks until every
/// process holding its write end has closed it, and a process spawned at the same moment by another
/// test (`swift test` runs tests in parallel) can inherit that end and keep it open for as long as it
/// runs. A blocked read also holds one of the few threads of Swift's cooperative pool (two on a
/// two-core machine). So the child's exit is polled, every wait has a deadline, and the output is what
/// the files hold.
///
/// Started with `posix_spawn` directly, not Foundation's `Process`: on Linux (Swift 6.3.1) `Process.run()`
/// lists `/proc/self/fd` and copies each entry's whole 256-byte name, reading past glibc's buffer, and
/// intermittently kills the test process (SIGSEGV in `memcpy`; swift-corelibs-foundation PR 5472). It
/// crashed a full test run here. The child gets `/dev/null` as standard input, the two files, the
/// directory, and no other descriptor of the test process.
public final class ChildProcess: Sendable {
    private let pid: pid_t
    /// The exit status once the child has been reaped.
    private let reaped = Mutex<Int32?>(nil)
    private let outputFile: URL
    private let errorFile: URL

    /// Starts `executable ARGUMENTS` in `directory`; `environment` replaces the test process's environment
    /// when given.
    public init(_ executable: URL, _ arguments: [String], in directory: URL, environment: [String: String]? = nil) throws {
        let stem = FileManager.default.temporaryDirectory
            .appendingPathComponent("reloadgate-child-\(UUID().uuidString)").path
        outputFile = URL(fileURLWithPath: stem + ".out")
        errorFile = URL(fileURLWithPath: stem + ".err")
        let output = open(outputFile.path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        let error = open(errorFile.path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        defer {
            // The child has its own copies now.
            if output >= 0 { close(output) }
            if error >= 0 { close(error) }
        }
        guard output >= 0, error >= 0 else { throw ChildProcessError.cannotCaptureOutput(stem) }

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, output, 1)
        posix_spawn_file_actions_adddup2(&actions, error, 2)
        guard Self.addChdir(&actions, directory.path) == 0 else {
            throw ChildProcessError.cannotStart(executable.path, reason: "cannot change to \(directory.path)")
        }
        _ = Self.addCloseFrom(&actions, 3)

        let variables = (environment ?? ProcessInfo.processInfo.environment).map { "\($0.key)=\($0.value)" }
        // The child starts with no signal blocked and every signal's default action, whatever the spawning
        // thread has (a thread of Swift's pool or of NIO blocks signals; the runtime ignores SIGPIPE): a
        // gateway or a database server started by a test must stop on SIGTERM and SIGQUIT like anywhere else.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        var allSignals = sigset_t()
        sigfillset(&allSignals)
        posix_spawnattr_setsigdefault(&attributes, &allSignals)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        // A program that cannot be run is refused here, as `posix_spawn` refuses it: through `setpriv` it
        // would start, fail to run it and exit, and the caller would get a status instead of the reason.
        guard access(executable.path, X_OK) == 0 else {
            throw ChildProcessError.cannotStart(executable.path, reason: String(cString: strerror(errno)))
        }
        // Through `setpriv --pdeathsig KILL` when there is one (util-linux, on every Debian): the child is
        // killed when the test process dies, however it dies (stopped by hand, killed by a watchdog), so no
        // gateway a test started runs on without it. The parent whose death counts is the thread that
        // spawned the child, so every child is spawned from one thread that never ends (``Spawner``): a
        // thread of Swift's pool ends after a few idle seconds.
        var argv = ([executable.path] + arguments).map { strdup($0) } + [nil]
        let program = Self.setpriv ?? executable.path
        if let setpriv = Self.setpriv {
            argv = [strdup(setpriv), strdup("--pdeathsig"), strdup("KILL"), strdup("--")] + argv
        }
        let envp = variables.map { strdup($0) } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var pid: pid_t = 0
        let status = Spawner.shared.run {
            posix_spawn(&pid, program, &actions, &attributes, argv, envp)
        }
        guard status == 0 else {
            throw ChildProcessError.cannotStart(executable.path, reason: String(cString: strerror(status)))
        }
        self.pid = pid
    }

    /// util-linux's `setpriv`, when installed.
    private static let setpriv: String? = ["/usr/bin/setpriv", "/bin/setpriv"].first { access($0, X_OK) == 0 }

    /// glibc's `posix_spawn_file_actions_addchdir_np` and `..._addclosefrom_np` (2.29, 2.34), which Swift's
    /// Glibc module does not show: looked up once.
    private typealias AddChdir = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, UnsafePointer<CChar>) -> Int32
    private typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
    private static let addChdir: AddChdir = {
        guard let symbol = dlsym(nil, "posix_spawn_file_actions_addchdir_np") else { fatalError("glibc 2.29 or newer is needed") }
        return unsafeBitCast(symbol, to: AddChdir.self)
    }()
    private static let addCloseFrom: AddCloseFrom = {
        guard let symbol = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np") else { fatalError("glibc 2.34 or newer is needed") }
        return unsafeBitCast(symbol, to: AddCloseFrom.self)
    }()

    /// The process id.
    public var processIdentifier: Int32 { pid }
    /// Whether the process still runs (it is reaped once it has ended).
    public var isRunning: Bool { terminationStatus == nil }
    /// The exit status, or the signal that ended the process; `nil` while it runs.
    public var terminationStatus: Int32? {
        reaped.withLock { reaped in
            if let reaped { return reaped }
            var status: Int32 = 0
            guard waitpid(pid, &status, WNOHANG) == pid else { return nil }
            // WIFEXITED / WEXITSTATUS / WTERMSIG (macros Swift does not import).
            let signal = status & 0x7f
            let code = signal == 0 ? (status >> 8) & 0xff : signal
            reaped = code
            return code
        }
    }
    /// What the process wrote to standard output so far.
    public var standardOutput: String { Self.contents(of: outputFile) }
    /// What the process wrote to standard error so far.
    public var standardError: String { Self.contents(of: errorFile) }

    /// Sends a signal (`SIGTERM`, `SIGINT`, `SIGKILL`).
    public func send(_ signal: Int32) {
        if isRunning { kill(pid, signal) }
    }

    /// Waits until a line of standard output contains `text` and returns that line.
    /// - Throws: ``ChildProcessError/timedOut(waitingFor:output:)`` after `timeout`, or when the process
    ///   exits first.
    public func waitForOutputLine(containing text: String, timeout: Duration = .seconds(60)) async throws -> String {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let running = isRunning
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
        while true {
            if let status = terminationStatus { return status }
            guard ContinuousClock.now < deadline else {
                send(SIGKILL)
                throw ChildProcessError.timedOut(waitingFor: "exit", output: standardOutput + standardError)
            }
            try await Task.sleep(for: .milliseconds(20))
        }
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

    /// Waits for the process to exit, blocking the calling thread (for code outside Swift concurrency).
    public func waitUntilExit() -> Int32 {
        while true {
            if let status = terminationStatus { return status }
            usleep(10_000)
        }
    }

    deinit {
        if isRunning {
            kill(pid, SIGKILL)
            _ = waitUntilExit()
        }
        try? FileManager.default.removeItem(at: outputFile)
        try? FileManager.default.removeItem(at: errorFile)
    }
}

/// The one thread every child is spawned from: it lives as long as the test process, so that a child's
/// parent-death signal (``ChildProcess``) comes when the process dies, not when the pool thread that
/// happened to spawn it ends.
private final class Spawner: @unchecked Sendable {
    static let shared = Spawner()

    private let condition = NSCondition()
    /// Guarded by `condition`.
    private var work: [() -> Void] = []

    private init() {
        let thread = Thread { [unowned self] in
            while true {
                condition.lock()
                while work.isEmpty { condition.wait() }
                let next = work.removeFirst()
                condition.unlock()
                next()
            }
        }
        thread.name = "reloadgate-test-spawner"
        thread.start()
    }

    /// Runs `body` on the spawner's thread and returns its result (a spawn takes a millisecond or so).
    func run(_ body: @escaping () -> Int32) -> Int32 {
        let done = DispatchSemaphore(value: 0)
        let result = Mutex<Int32>(0)
        condition.lock()
        work.append {
            result.withLock { $0 = body() }
            done.signal()
        }
        condition.signal()
        condition.unlock()
        done.wait()
        return result.withLock { $0 }
    }
}

/// Failures of running a child process.
public enum ChildProcessError: Error, CustomStringConvertible {
    case cannotCaptureOutput(String)
    case cannotStart(String, reason: String)
    case timedOut(waitingFor: String, output: String)

    public var description: String {
        switch self {
        case .cannotCaptureOutput(let path): "cannot create the output files \(path).out/.err"
        case .cannotStart(let path, let reason): "cannot start \(path): \(reason)"
        case .timedOut(let text, let output): "timed out waiting for \(text); output so far:\n\(output)"
        }
    }
}
