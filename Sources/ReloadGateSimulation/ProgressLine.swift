import Foundation
import ReloadGateCore
import Synchronization

/// Progress of a long command (`simulate`, `export`) on standard error: what it is doing, how far, the
/// rate and the time left, one line rewritten in place. Only when standard error is a terminal and the
/// command prints no JSON: on a pipe, in a file or in a CI log it writes nothing, so that scripts see
/// exactly what they saw before. A phase ends by clearing its line, so the terminal keeps only the
/// command's own output.
///
/// Cheap to call in a loop: ``advance(to:)`` looks at the clock once every 1,024 calls and redraws at
/// most five times a second. Here (not in the executable) so that its text is tested with a clock the test
/// moves (`ProgressLineTests`).
public final class ProgressLine: Sendable {
    /// The command's name, first on every line (`simulate: replaying ...`).
    private let command: String
    private let state: Mutex<State>
    private let clock: @Sendable () -> ContinuousClock.Instant
    private let output: @Sendable (String) -> Void

    private struct State {
        var phase = ""
        var unit = ""
        var bytes = false
        var total: Int?
        var done = 0
        var calls = 0
        var started: ContinuousClock.Instant
        var drawn: ContinuousClock.Instant
        var visible = false
    }

    /// A progress line for `command`, or `nil` when there is nobody to see it: standard error is not a
    /// terminal, or `quiet` (the command prints JSON).
    public static func onTerminal(_ command: String, quiet: Bool = false) -> ProgressLine? {
        guard !quiet, isatty(STDERR_FILENO) == 1 else { return nil }
        return ProgressLine(command: command)
    }

    /// A progress line written to `output` (standard error) with the time of `clock`.
    public init(
        command: String,
        clock: @escaping @Sendable () -> ContinuousClock.Instant = { .now },
        output: @escaping @Sendable (String) -> Void = { FileHandle.standardError.write(Data($0.utf8)) }
    ) {
        self.command = command
        self.clock = clock
        self.output = output
        let now = clock()
        self.state = Mutex(State(started: now, drawn: now))
    }

    /// Starts a phase (`replaying A`, `reading the ledger`): `total` items of `unit` when known (`unit`
    /// empty: a phase that is not counted). Drawn at once, so even a short phase shows its line.
    public func begin(_ phase: String, total: Int? = nil, unit: String) {
        let now = clock()
        start(State(phase: phase, unit: unit, total: total, started: now, drawn: now, visible: true), now: now)
    }

    /// Starts a phase counted in bytes (`reading trace.jsonl: 12.5 of 80.0 MB`).
    public func begin(_ phase: String, totalBytes: Int) {
        let now = clock()
        start(State(phase: phase, unit: "MB", bytes: true, total: totalBytes, started: now, drawn: now, visible: true), now: now)
    }

    private func start(_ phase: State, now: ContinuousClock.Instant) {
        let line = state.withLock { state -> String in
            state = phase
            return Self.line(command, state, now: now)
        }
        output("\r" + line + "\u{1B}[K")
    }

    /// `done` items of the phase so far.
    public func advance(to done: Int) {
        let line = state.withLock { state -> String? in
            state.done = done
            state.calls &+= 1
            guard state.calls & 1023 == 0 else { return nil }
            let now = clock()
            guard now - state.drawn >= .milliseconds(200) else { return nil }
            state.drawn = now
            return Self.line(command, state, now: now)
        }
        if let line { output("\r" + line + "\u{1B}[K") }
    }

    /// Ends the phase: its line is cleared.
    public func end() {
        let visible = state.withLock { state -> Bool in
            defer { state.visible = false }
            return state.visible
        }
        if visible { output("\r\u{1B}[K") }
    }

    /// `simulate: replaying A: 1,234,567 of 5,000,000 requests (24%), 310,102 requests/s, 13 s left`.
    private static func line(_ command: String, _ state: State, now: ContinuousClock.Instant) -> String {
        guard !state.unit.isEmpty else { return "\(command): \(state.phase)" }
        let elapsed = max((now - state.started).seconds, 0.000_001)
        let amount = { (value: Int) in state.bytes ? megabytes(value) : grouped(value) }
        var text = "\(command): \(state.phase): \(amount(state.done))"
        if let total = state.total {
            text += " of \(amount(total)) \(state.unit)"
            if total > 0 { text += " (\(min(100, state.done * 100 / total))%)" }
        } else {
            text += " \(state.unit)"
        }
        guard state.done > 0 else { return text }
        let rate = Double(state.done) / elapsed
        // Bounded before the conversion (a clock that barely moved must not trap it).
        text += ", \(amount(Int(min(rate, 1e15).rounded()))) \(state.unit)/s"
        if let total = state.total, rate > 0 {
            text += ", \(duration(Double(max(0, total - state.done)) / rate)) left"
        } else {
            text += ", \(duration(elapsed))"
        }
        return text
    }

    /// 1234567 as `1,234,567`.
    public static func grouped(_ value: Int) -> String {
        let digits = String(value.magnitude)
        var out = ""
        for (index, digit) in digits.enumerated() {
            if index > 0, (digits.count - index) % 3 == 0 { out.append(",") }
            out.append(digit)
        }
        return value < 0 ? "-" + out : out
    }

    /// 12,500,000 bytes as `12.5`.
    static func megabytes(_ bytes: Int) -> String {
        String(format: "%.1f", Double(bytes) / 1_000_000)
    }

    /// `13 s`, `2 min 5 s`, `1 h 4 min`.
    static func duration(_ seconds: Double) -> String {
        guard seconds.isFinite else { return "?" }
        let whole = Int(min(seconds, 360_000).rounded(.up))
        switch whole {
        case ..<60: return "\(whole) s"
        case ..<3600: return "\(whole / 60) min \(whole % 60) s"
        default: return "\(whole / 3600) h \(whole / 60 % 60) min"
        }
    }
}
