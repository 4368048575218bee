import NIOCore
import Synchronization

/// Messages for a connection's event loop from other threads, delivered together: the commit loop answers a
/// whole batch of pushes at once, and the connection's loop is handed all of its answers that arrived
/// before it ran with one `execute`, instead of one `execute` (a closure, a lock, a queue entry) each.
///
/// The connection's handler makes it when the connection starts, with `deliver` bound to itself on the
/// loop, and closes it when it is removed (that ends the reference from the mailbox back to the handler;
/// messages posted afterwards are dropped: the connection is gone).
final class LoopMailbox<Message: Sendable>: Sendable {
    private struct State {
        var messages: [Message] = []
        var deliver: (@Sendable ([Message]) -> Void)?
    }

    private let loop: any EventLoop
    private let state: Mutex<State>

    /// - Parameter deliver: called on `loop` with the messages in the order they were posted.
    init(loop: any EventLoop, deliver: @escaping @Sendable ([Message]) -> Void) {
        self.loop = loop
        self.state = Mutex(State(deliver: deliver))
    }

    /// Delivers `message` on the loop: at once when called on it, else with whatever else arrives before
    /// the loop gets to it.
    func post(_ message: Message) {
        if loop.inEventLoop {
            // Messages posted from other threads before this one go first.
            return deliver(adding: message)
        }
        let first = state.withLock { state -> Bool in
            guard state.deliver != nil else { return false }
            state.messages.append(message)
            return state.messages.count == 1
        }
        if first { loop.execute { self.deliver(adding: nil) } }
    }

    /// No more deliveries; what is posted from now on is dropped.
    func close() {
        state.withLock { state in
            state.deliver = nil
            state.messages = []
        }
    }

    private func deliver(adding message: Message?) {
        let (messages, deliver) = state.withLock { state -> ([Message], (@Sendable ([Message]) -> Void)?) in
            var taken = state.messages
            state.messages = []
            if let message { taken.append(message) }
            return (taken, state.deliver)
        }
        guard let deliver, !messages.isEmpty else { return }
        deliver(messages)
    }
}
