import Synchronization

/// What `/ready` reports: the parts of the gateway that are not ready yet.
///
/// Each long-running part marks itself ready when it runs and not ready when it stops, so a load
/// balancer stops sending traffic to a gateway that is starting or shutting down.
public final class Readiness: Sendable {
    /// A part of the gateway that must run before it serves traffic.
    public enum Component: String, Sendable, CaseIterable {
        /// The listener takes new requests (not draining for shutdown).
        case listener
        /// The store is open.
        case store
        /// The scheduler runs (its state loaded, its commit loop and timers running).
        case scheduler
        /// The APNs listener takes pushes.
        case ingress
    }

    private let waiting: Mutex<Set<Component>>

    /// Starts with every component in `waitingFor` not ready.
    public init(waitingFor: Set<Component> = Set(Component.allCases)) {
        self.waiting = Mutex(waitingFor)
    }

    /// Marks `component` ready.
    public func markReady(_ component: Component) {
        _ = waiting.withLock { $0.remove(component) }
    }

    /// Marks `component` not ready (stopping, or failed).
    public func markNotReady(_ component: Component) {
        _ = waiting.withLock { $0.insert(component) }
    }

    /// The components not ready yet, sorted by name; empty when the gateway is ready.
    public var waitingFor: [Component] {
        waiting.withLock { $0.sorted { $0.rawValue < $1.rawValue } }
    }
}
