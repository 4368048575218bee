import Foundation
import NIOCore
import NIOPosix
import Synchronization
import Testing

@testable import ReloadGateServer

/// The hand-over of answers from other threads to a connection's loop: every message arrives, on the loop,
/// in the order posted, in fewer deliveries than messages when they come faster than the loop takes them;
/// after `close()` nothing more is delivered.
struct LoopMailboxTests {
    @Test func messagesArriveOnTheLoopInOrderAndNothingAfterClose() async throws {
        // A loop of the test's own: it is held busy below.
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        defer { group.shutdownGracefully { _ in } }
        let loop = group.next()
        let delivered = Mutex<(messages: [Int], deliveries: Int, offLoop: Int)>(([], 0, 0))
        let mailbox = LoopMailbox<Int>(loop: loop) { messages in
            delivered.withLock { state in
                state.messages += messages
                state.deliveries += 1
                if !loop.inEventLoop { state.offLoop += 1 }
            }
        }
        // Held busy while the first messages are posted, so that they gather.
        let busy = loop.submit { Thread.sleep(forTimeInterval: 0.2) }
        for message in 0..<1000 { mailbox.post(message) }
        try await busy.get()
        // One posted on the loop itself is delivered at once, after those waiting.
        try await loop.submit { mailbox.post(1000) }.get()
        try await loop.submit {}.get()
        let state = delivered.withLock { $0 }
        #expect(state.messages == Array(0...1000))
        #expect(state.deliveries < 1001 && state.offLoop == 0, "\(state.deliveries) deliveries, \(state.offLoop) off the loop")

        mailbox.close()
        mailbox.post(1001)
        try await loop.submit {}.get()
        #expect(delivered.withLock { $0.messages.count } == 1001)
    }
}
