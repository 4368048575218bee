import Foundation
import ReloadGateTesting

/// The virtual environment of the APNs client libraries from PyPI (`.build/interop-venv`: aioapns and
/// pyapns_client), made once per test process and shared by every suite that sends with them: two suites
/// making the same venv at once left one with a python but no pip yet ("No module named pip" in a CI run).
enum InteropPython {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let packages = ["aioapns==4.0", "pyapns_client==2.0.6"]

    /// The venv's python, with the packages installed.
    static func python() async throws -> String { try await prepared.value }

    private static let prepared = Task<String, any Error> {
        let environment = root.appendingPathComponent(".build/interop-venv")
        let python = environment.appendingPathComponent("bin/python").path
        if FileManager.default.isExecutableFile(atPath: python),
            (try? await ChildProcess.run(python, ["-c", "import aioapns, pyapns_client"], in: root))?.status == 0
        {
            return python
        }
        // --clear: a venv left half-made (a python without pip) by an interrupted run is made again.
        let made = try await ChildProcess.run("/usr/bin/env", ["python3", "-m", "venv", "--clear", environment.path], in: root)
        guard made.status == 0 else { throw SetupError(message: "python3 -m venv: \(made.error)") }
        let installed = try await ChildProcess.run(
            python, ["-m", "pip", "install", "--quiet", "--disable-pip-version-check"] + packages, in: root, timeout: .seconds(600)
        )
        guard installed.status == 0 else { throw SetupError(message: "pip install \(packages): \(installed.output) \(installed.error)") }
        return python
    }

    struct SetupError: Error, CustomStringConvertible {
        let message: String
        var description: String { message }
    }
}
