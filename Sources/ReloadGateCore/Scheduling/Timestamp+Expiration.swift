/// A request's expiration as the scheduler keeps it, written once for every door (a push's
/// `apns-expiration`, a webhook call's `expiration`, a trace).
extension Timestamp {
    /// `apns-expiration: 0`, as Apple means it: now or never. The request goes only if the commit that decides
    /// it releases it (never held for a budget, an interval, a merge window or a timeline), and the delivery
    /// is then attempted whenever the worker gets to it, with `apns-expiration: 0` upstream. Kept as the epoch
    /// (what the header says, and what the stores and traces write) and never compared as a time: every
    /// comparison goes through ``latestRelease(decidedAt:)``.
    public static let nowOrNever = Timestamp(milliseconds: 0)

    /// Whether this is ``nowOrNever``.
    public var isNowOrNever: Bool { self == .nowOrNever }

    /// The expiration a request received at `received` carries: `nil` (none) stays `nil`; `0`, and any date
    /// before `received`, is ``nowOrNever`` (a date already past cannot wait, and Apple tries it once);
    /// a later date is kept.
    public static func expiration(_ expiration: Timestamp?, receivedAt received: Timestamp) -> Timestamp? {
        guard let expiration else { return nil }
        return expiration < received ? .nowOrNever : expiration
    }

    /// The latest time a reload may be released for a request with this expiration, deciding at `now`:
    /// `now` itself for ``nowOrNever`` and for a date already past (a request the gateway decides after its
    /// date, on another gateway's inbox say, may still go at once: Apple would have tried it when it came).
    public func latestRelease(decidedAt now: Int64) -> Int64 {
        isNowOrNever || milliseconds < now ? now : milliseconds
    }
}
