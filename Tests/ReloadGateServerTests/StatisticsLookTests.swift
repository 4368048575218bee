import Logging
import Synchronization
import Testing

@testable import ReloadGateServer

/// The statistics look's failures (decision 0113): one is tried again quietly, a run of them is told once
/// at warning level, and the first success after it says so.
@Suite(.timeLimit(.minutes(1)))
struct StatisticsLookTests {
    struct LookFailed: Error {}

    @Test func aRunOfFailuresIsToldOnceAndTheRecoveryToo() async throws {
        let lines = Mutex<[String]>([])
        var handler = JSONLogHandler(label: "reloadgate") { line in lines.withLock { $0.append(line) } }
        handler.logLevel = .info
        let logger = Logger(label: "reloadgate") { _ in handler }
        // One failure, a success, then a run of six failures, then successes.
        let outcomes: [Bool] = [false, true, false, false, false, false, false, false, true, true]
        let looks = Mutex(0)
        let task = Task {
            await ClusterService.gatherStatistics(every: .milliseconds(1), logger: logger) {
                let look = looks.withLock { count in
                    count += 1
                    return count
                }
                guard look > outcomes.count || outcomes[look - 1] else { throw LookFailed() }
                return look == 2 ? ["request"] : []
            }
        }
        let deadline = ContinuousClock.now + .seconds(30)
        while looks.withLock({ $0 }) <= outcomes.count, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(5))
        }
        task.cancel()
        await task.value

        let written = lines.withLock { $0 }
        #expect(written.filter { $0.contains("\"level\":\"warning\"") }.count == 1)
        #expect(written.filter { $0.contains("cannot look for tables without statistics") }.count == 1)
        #expect(written.filter { $0.contains("works again") }.count == 1)
        #expect(written.filter { $0.contains("gathered statistics") && $0.contains("request") }.count == 1)
        // In that order: the tables analyzed, the warning after the third failure in a row, the recovery.
        let order = ["gathered statistics", "cannot look", "works again"].map { text in written.firstIndex { $0.contains(text) } }
        #expect(order.compactMap(\.self) == order.compactMap(\.self).sorted() && !order.contains(nil))
    }
}
