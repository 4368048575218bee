/// Waits for something a test set in motion and the gateway does on its own (a delivery, a commit, a
/// takeover): asks `condition` every `interval` until it holds, and returns whether it did within `limit`.
///
/// The limit is not a speed the gateway promises: it only ends a wait for something that never comes, so
/// it is long (a minute by default) and a test never fails on a slow machine for want of patience. A test
/// of a deadline the gateway does promise bounds that deadline itself, with a margin of its own.
public func eventually(
    within limit: Duration = .seconds(60),
    every interval: Duration = .milliseconds(25),
    _ condition: () async throws -> Bool
) async throws -> Bool {
    let deadline = ContinuousClock.now + limit
    while true {
        if try await condition() { return true }
        guard ContinuousClock.now < deadline else { return false }
        try await Task.sleep(for: interval)
    }
}
