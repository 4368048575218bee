import Synchronization
import Testing

@testable import ReloadGateSimulation

/// The progress line's text (what `simulate` and `export` draw on a terminal), with a clock the test moves:
/// the count, the total and share, the rate and the time left; redrawn at most every 200 ms, looked at once
/// every 1,024 calls; cleared at the end.
struct ProgressLineTests {
    final class Terminal: Sendable {
        let time = Mutex(ContinuousClock.now)
        let written = Mutex<[String]>([])

        func move(_ duration: Duration) { time.withLock { $0 = $0 + duration } }
        var writes: [String] { written.withLock { $0 } }

        func line(_ command: String) -> ProgressLine {
            ProgressLine(command: command, clock: { self.time.withLock { $0 } }, output: { text in self.written.withLock { $0.append(text) } })
        }
    }

    @Test func aCountedPhaseShowsHowFarTheRateAndTheTimeLeft() {
        let terminal = Terminal()
        let progress = terminal.line("simulate")
        progress.begin("replaying", total: 10_000, unit: "requests")
        #expect(terminal.writes == ["\rsimulate: replaying: 0 of 10,000 requests (0%)\u{1B}[K"])

        // 1,023 calls are not looked at; the 1,024th is, half a second in: 2,048 a second, 8,976 left.
        terminal.move(.milliseconds(500))
        for done in 1...1024 { progress.advance(to: done) }
        #expect(terminal.writes.count == 2)
        #expect(terminal.writes.last == "\rsimulate: replaying: 1,024 of 10,000 requests (10%), 2,048 requests/s, 5 s left\u{1B}[K")

        // Within 200 ms of the last line: not redrawn.
        terminal.move(.milliseconds(100))
        for done in 1025...2048 { progress.advance(to: done) }
        #expect(terminal.writes.count == 2)
        terminal.move(.milliseconds(900))
        for done in 2049...3072 { progress.advance(to: done) }
        #expect(terminal.writes.last == "\rsimulate: replaying: 3,072 of 10,000 requests (30%), 2,048 requests/s, 4 s left\u{1B}[K")

        progress.end()
        #expect(terminal.writes.last == "\r\u{1B}[K")
        progress.end()
        #expect(terminal.writes.count == 4, "a second end clears nothing more")
    }

    @Test func bytesAPhaseWithoutATotalAndOneNotCounted() {
        let terminal = Terminal()
        let progress = terminal.line("export")
        progress.begin("reading trace.jsonl", totalBytes: 80_000_000)
        #expect(terminal.writes.last == "\rexport: reading trace.jsonl: 0.0 of 80.0 MB (0%)\u{1B}[K")
        terminal.move(.seconds(2))
        for done in 1...1024 { progress.advance(to: done * 12_207) }
        #expect(terminal.writes.last == "\rexport: reading trace.jsonl: 12.5 of 80.0 MB (15%), 6.2 MB/s, 11 s left\u{1B}[K")

        progress.begin("reading the ledger", unit: "rows")
        #expect(terminal.writes.last == "\rexport: reading the ledger: 0 rows\u{1B}[K")
        terminal.move(.seconds(75))
        for done in 1...1024 { progress.advance(to: done * 1000) }
        #expect(terminal.writes.last == "\rexport: reading the ledger: 1,024,000 rows, 13,653 rows/s, 1 min 15 s\u{1B}[K")

        progress.begin("generating a sports evening for 1,000,000 devices", unit: "")
        #expect(terminal.writes.last == "\rexport: generating a sports evening for 1,000,000 devices\u{1B}[K")
    }

    @Test func numbersAndDurations() {
        #expect(ProgressLine.grouped(0) == "0")
        #expect(ProgressLine.grouped(999) == "999")
        #expect(ProgressLine.grouped(1000) == "1,000")
        #expect(ProgressLine.grouped(-1_234_567) == "-1,234,567")
        #expect(ProgressLine.grouped(Int.min) == "-9,223,372,036,854,775,808")
        #expect(ProgressLine.duration(0.2) == "1 s")
        #expect(ProgressLine.duration(59) == "59 s")
        #expect(ProgressLine.duration(125) == "2 min 5 s")
        #expect(ProgressLine.duration(3840) == "1 h 4 min")
        #expect(ProgressLine.duration(.infinity) == "?")
        #expect(ProgressLine.duration(1e300) == "100 h 0 min")
    }
}
