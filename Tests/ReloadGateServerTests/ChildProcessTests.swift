import Foundation
import ReloadGateTesting
import Testing

/// The tests' child processes (decision 0046): started through `setpriv` where there is one, they still
/// report a program that cannot be run as an error, and hand back its status and output unchanged.
struct ChildProcessTests {
    @Test func aProgramThatCannotBeRunIsAnErrorNamingIt() throws {
        let directory = try TemporaryDirectory("child")
        defer { directory.remove() }
        let missing = directory.path("no-such-program")
        #expect {
            _ = try ChildProcess(URL(fileURLWithPath: missing), [], in: directory.url)
        } throws: { error in
            guard case ChildProcessError.cannotStart(let path, let reason)? = error as? ChildProcessError else { return false }
            return path == missing && reason.contains("No such file")
        }
    }

    @Test func theChildsStatusAndOutputComeBackAsItsOwn() async throws {
        let directory = try TemporaryDirectory("child")
        defer { directory.remove() }
        let (status, output, error) = try await ChildProcess.run("/bin/sh", ["-c", "echo out; echo err >&2; exit 3"], in: directory.url)
        #expect(status == 3)
        #expect(output == "out\n")
        #expect(error == "err\n")
    }
}
