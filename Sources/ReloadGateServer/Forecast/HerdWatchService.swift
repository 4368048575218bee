import Logging
import ServiceLifecycle

/// Looks at the next hour's herd forecast once a ``interval`` while the gateway runs (``HerdWatch``): the
/// metric per app, and a warning for each minute above an app's threshold. A failed look (the store
/// unavailable) is logged once and tried again at the next.
struct HerdWatchService: Service {
    let watch: HerdWatch
    let logger: Logger
    var interval: Duration = .seconds(60)

    func run() async throws {
        await cancelWhenGracefulShutdown {
            var failing = false
            while !Task.isCancelled {
                do {
                    try await watch.check()
                    failing = false
                } catch {
                    if !failing { logger.warning("the herd forecast could not be read", metadata: ["error": "\(error)"]) }
                    failing = true
                }
                try? await Task.sleep(for: interval)
            }
        }
    }
}
