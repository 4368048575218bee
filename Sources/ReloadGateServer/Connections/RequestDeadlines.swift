import NIOCore

/// The deadlines of one HTTP/1.1 connection, or of one HTTP/2 stream, as a state machine over the
/// request's parts (shared/STYLE.md: decisions as values, effects in the handler). Every phase in which
/// the gateway waits for the peer has a deadline (docs/DESIGN.md, Security: slow or silent connections are
/// closed in bounded time):
///
/// - the headers of a request: `header` from the connection's start (its first request) or from the first
///   byte of a later one; a sender that trickles header lines (slowloris) is closed;
/// - its body: `body` from the headers to the end of the request (an announced body that never comes);
/// - between requests: `idle`, when this handler keeps it (`nil`: the framework does).
///
/// While the gateway works on a request (body complete, answer not written) nothing is timed here: that
/// wait is the gateway's, bounded by its own limits.
struct RequestDeadlines {
    /// What the connection is waiting for.
    enum Phase: Equatable, Sendable {
        /// The headers of a request.
        case head
        /// The rest of a request whose headers came.
        case body
        /// The gateway's answer: nothing timed.
        case answer
        /// The next request.
        case idle
    }

    /// Which deadline passed.
    enum Expiry: String, Equatable, Sendable {
        case header, body, idle
    }

    let header: TimeAmount
    let body: TimeAmount
    let idle: TimeAmount?
    private(set) var phase: Phase = .head
    /// When the current phase ends the connection; `nil`: not timed.
    private(set) var deadline: NIODeadline?
    private var requestEnded = false
    private var answerEnded = false

    /// A new connection (or stream): its first request's headers are due within `header`.
    init(header: TimeAmount, body: TimeAmount, idle: TimeAmount?, now: NIODeadline) {
        self.header = header
        self.body = body
        self.idle = idle
        deadline = now + header
    }

    /// Bytes came while idle: they start a request, whose headers are now due.
    mutating func bytesArrived(at now: NIODeadline) {
        guard phase == .idle else { return }
        phase = .head
        deadline = now + header
    }

    /// A request's headers came.
    mutating func headReceived(at now: NIODeadline) {
        phase = .body
        requestEnded = false
        answerEnded = false
        deadline = now + body
    }

    /// The request's body is complete.
    mutating func requestEnded(at now: NIODeadline) {
        guard phase == .body else { return }
        requestEnded = true
        if answerEnded { becomeIdle(at: now) } else { phase = .answer; deadline = nil }
    }

    /// The answer is written (possibly before the request ended: an early refusal).
    mutating func answerEnded(at now: NIODeadline) {
        answerEnded = true
        if requestEnded || phase == .answer { becomeIdle(at: now) }
    }

    /// Whether the deadline has passed at `now`, and which one.
    func expiry(at now: NIODeadline) -> Expiry? {
        guard let deadline, deadline <= now else { return nil }
        switch phase {
        case .head: return .header
        case .body: return .body
        case .idle: return .idle
        case .answer: return nil
        }
    }

    private mutating func becomeIdle(at now: NIODeadline) {
        phase = .idle
        deadline = idle.map { now + $0 }
    }
}
