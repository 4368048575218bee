import Foundation
import Logging
import ReloadGateCore
import ReloadGateStore
import ServiceLifecycle

/// Deletes what the ledger holds past `ledger.retention` while the gateway runs: requests with their
/// decisions, and finished deliveries, in short steps (``LedgerPruneStep``), each its own transaction.
///
/// A step holds the store's writer while it runs, and a group commit that comes meanwhile waits for it:
/// steps are sized to take about ``stepTarget`` (a small part of the store's deadline), and while there
/// is more to prune the service pauses ``pause`` between steps so that commits come first. Disk use then
/// depends on the traffic of the retention period, not on the traffic ever seen. On a store several
/// gateways share, one gateway's step runs at a time (``GatewayStore/pruneLedger(_:)``).
struct LedgerRetentionService: Service {
    let store: any GatewayStore
    /// Milliseconds a request or finished delivery is kept.
    let retention: Int64
    let now: @Sendable () -> Date
    let metrics: GatewayMetrics?
    let logger: Logger
    /// How often the ledger is looked at when nothing was past retention.
    var interval: Duration = .seconds(1)
    /// The wait between steps while more is past retention.
    var pause: Duration = .milliseconds(20)
    /// Told each step's outcome and time (tests).
    var observe: (@Sendable (LedgerPruned, Duration) -> Void)?

    /// What one step should take at most.
    static let stepTarget: Duration = .milliseconds(25)

    func run() async throws {
        await cancelWhenGracefulShutdown {
            var size = StepSize()
            var failing = false
            while !Task.isCancelled {
                let time = Timestamp(now())
                let step = LedgerPruneStep(receivedBefore: time.adding(milliseconds: -retention), now: time, limit: size.limit)
                let started = ContinuousClock.now
                var more = false
                do {
                    let pruned = try await store.pruneLedger(step)
                    let took = ContinuousClock.now - started
                    size.took(took, full: pruned.more)
                    observe?(pruned, took)
                    metrics?.ledgerPruned(pruned)
                    more = pruned.more
                    if failing { logger.notice("the ledger's retention prunes again") }
                    failing = false
                } catch {
                    // The commit path reports an unavailable store; here it only waits for the next look.
                    if !failing { logger.warning("the ledger's retention could not prune", metadata: ["error": "\(error)"]) }
                    failing = true
                }
                try? await Task.sleep(for: more ? pause : interval)
            }
        }
    }

    /// How many rows a step deletes at most: halved after a step slower than twice ``stepTarget``,
    /// doubled after a full step faster than half of it, within ``range``.
    struct StepSize {
        static let range = 16...4096
        private(set) var limit = 256

        mutating func took(_ duration: Duration, full: Bool) {
            if duration > LedgerRetentionService.stepTarget * 2 {
                limit = max(Self.range.lowerBound, limit / 2)
            } else if full, duration < LedgerRetentionService.stepTarget / 2 {
                limit = min(Self.range.upperBound, limit * 2)
            }
        }
    }
}
