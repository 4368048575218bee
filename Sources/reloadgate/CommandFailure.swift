import ArgumentParser
import Foundation

/// How the commands end on an error: one line `reloadgate: error: ...` on standard error and an exit
/// status (1: failure while running, 2: bad arguments or configuration).
enum CommandFailure {
    static func exit(_ message: String, status: Int32) -> ExitCode {
        FileHandle.standardError.write(Data("reloadgate: error: \(message)\n".utf8))
        return ExitCode(status)
    }
}

/// Writes a line to standard output at once (no buffering: the line may announce a listener that a
/// supervising process waits for).
func printLine(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

/// The `--json` outputs' encoder: one line, sorted keys, `/` escaped (as they were before they were types).
private let outputEncoder: JSONEncoder = {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys]
    return encoder
}()

/// Prints `value` (a body of ``AdminAPI`` or another of the commands' answers) as one line of JSON with
/// sorted keys.
func printJSON(_ value: some Encodable) throws {
    printLine(String(decoding: try outputEncoder.encode(value), as: UTF8.self))
}
