import Foundation
public import Logging
import ReloadGateCore

/// Writes one JSON object per log line to standard error, for log collectors (`log.format: json`):
/// `{"time":"2026-11-22T10:00:00.123Z","level":"info","label":"reloadgate","message":"...","key":"value"}`.
///
/// swift-log ships only a plain-text handler; this one is deliberately small: no buffering, one
/// `write(2)` per line so lines from several threads never interleave.
public struct JSONLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level = .info
    private let label: String
    private let write: @Sendable (String) -> Void

    /// A handler for `label` that writes to standard error.
    public init(label: String) {
        self.init(label: label) { line in
            FileHandle.standardError.write(Data(line.utf8))
        }
    }

    /// A handler that hands each finished line (with its newline) to `write`.
    public init(label: String, write: @escaping @Sendable (String) -> Void) {
        self.label = label
        self.write = write
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var fields: [(String, String)] = [
            ("time", Date().formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))),
            ("level", event.level.rawValue),
            ("label", label),
            ("message", "\(event.message)"),
        ]
        let merged = metadata.merging(event.metadata ?? [:]) { _, new in new }
        for (key, value) in merged.sorted(by: { $0.key < $1.key }) where !["time", "level", "label", "message"].contains(key) {
            fields.append((key, "\(value)"))
        }
        var line = "{"
        for (index, field) in fields.enumerated() {
            if index > 0 { line += "," }
            line += JSONText.quoted(field.0) + ":" + JSONText.quoted(field.1)
        }
        line += "}\n"
        write(line)
    }
}
