import Logging
import ServiceLifecycle

/// Looks at the next hour's herd forecast once a ``interval`` while the gateway runs (``HerdWatch``): the
/// metric per app, and a warning for each minute above an app's threshold. A failed look (the store
/// unavailable) is logged once and tried again at the next.
struct HerdWatchService: Service {
    let watch: HerdWatch
    let logger: Logger
    var interval: Duration = .seconds(60)

    /// A forecast that takes longer is abandoned (a million timelines take about a second).
    var deadline: Duration = .seconds(30)

    func run() async throws {
        await PeriodicTurns(interval: interval, deadline: deadline, logger: logger, failure: "the herd forecast could not be read").run { [watch] in
            try await watch.check()
        }
    }
}
