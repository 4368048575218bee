import ArgumentParser
import Foundation
import ReloadGateAPI

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

/// Prints `value` (a body of ``AdminAPI`` or another of the commands' answers) as one line of JSON with
/// sorted keys, as the commands printed it before their answers were types (``FoundationOrderJSON``).
func printJSON(_ value: some Encodable) throws {
    let json = try JSONParser.parse(try BodyJSON.encode(value))
    printLine(FoundationOrderJSON.text(json))
}

/// JSON text with keys in the order `JSONSerialization`'s `.sortedKeys` writes them (case-insensitive,
/// digit runs by value: `a` before `Team`, `9` before `10`) and `/` escaped, where `JSONEncoder` sorts by
/// code point: the CLI's `--json` outputs and table cells stay what they were when the CLI walked
/// `JSONSerialization`'s dictionaries.
enum FoundationOrderJSON {
    static func text(_ value: JSONValue) -> String {
        switch value {
        case .object(let object):
            let keys = object.keys.sorted {
                $0.compare($1, options: [.numeric, .caseInsensitive, .forcedOrdering], range: nil, locale: nil) == .orderedAscending
            }
            return "{" + keys.map { leaf(.string($0)) + ":" + text(object[$0]!) }.joined(separator: ",") + "}"
        case .array(let items):
            return "[" + items.map(text).joined(separator: ",") + "]"
        default:
            return leaf(value)
        }
    }

    /// A string, number, boolean or null as `JSONEncoder` writes it (the same as `JSONSerialization`).
    private static func leaf(_ value: JSONValue) -> String {
        (try? encoder.encode(value)).map { String(decoding: $0, as: UTF8.self) } ?? "null"
    }

    private static let encoder = JSONEncoder()
}
