#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The pending reloads' timers as a radix heap: the scheduler's clock never goes back, and a pending
/// reload is never due before the time processed last, so a timer needs to be ordered against the others
/// only when it is about to be taken (decision 0090).
///
/// Bucket `b` holds the entries whose time first differs from `last` (the time taken last) in bit `b - 1`;
/// bucket 0 those equal to it. An insert links its entry into its bucket. A pop takes from bucket 0; when
/// that is empty, the lowest bucket's smallest time becomes `last`, and that bucket's entries move to
/// lower buckets: an entry moves at most once for each bit of its distance from the clock, in practice
/// two or three times. Entries live in one pool, each bucket a list through it, so a move relinks an
/// entry and copies nothing. The 4-ary heap this replaces sifted through its whole depth at every pop.
///
/// An entry earlier than `last` (a stored reload restored late, or an operator's flush to a time already
/// processed, could make one) goes to a small heap beside the buckets, so the order holds for any input.
///
/// A value type: its storage is copied when shared, checked once per insert or pop.
struct RadixTimerQueue: @unchecked Sendable {
    typealias Entry = TimerHeap.Entry

    private struct Node {
        var time: Int64
        var instance: Int32
        /// The next node of its bucket (or of the free list), or -1.
        var next: Int32
    }

    private final class Storage {
        static let bucketCount = 65
        var nodes: UnsafeMutablePointer<Node>
        var capacity: Int
        /// Nodes ever used: those below are in a bucket or in the free list.
        var used = 0
        var free: Int32 = -1
        let heads: UnsafeMutablePointer<Int32>
        /// Each bucket's smallest time (`Int64.max` when empty): the top time without a scan.
        let smallest: UnsafeMutablePointer<Int64>
        /// Bit `b - 1` set: bucket `b` (1 to 64) holds entries.
        var occupied: UInt64 = 0
        /// The time taken last: no entry in the buckets is earlier.
        var last = Int64.min
        var count = 0

        init(capacity: Int) {
            self.capacity = capacity
            nodes = .allocate(capacity: Swift.max(capacity, 1))
            heads = .allocate(capacity: Self.bucketCount)
            heads.initialize(repeating: -1, count: Self.bucketCount)
            smallest = .allocate(capacity: Self.bucketCount)
            smallest.initialize(repeating: .max, count: Self.bucketCount)
        }

        func copy() -> Storage {
            let copy = Storage(capacity: capacity)
            copy.nodes.initialize(from: nodes, count: used)
            copy.used = used
            copy.free = free
            copy.heads.update(from: heads, count: Self.bucketCount)
            copy.smallest.update(from: smallest, count: Self.bucketCount)
            copy.occupied = occupied
            copy.last = last
            copy.count = count
            return copy
        }

        deinit {
            nodes.deallocate()
            heads.deallocate()
            smallest.deallocate()
        }

        /// The bucket of `time`: where it first differs from `last`. Read as unsigned keys in the times' order
        /// (the sign bit flipped), two times differ in the same bits as their patterns, so the patterns'
        /// difference is the keys'.
        @inline(__always)
        func bucket(of time: Int64) -> Int {
            let difference = (UInt64(bitPattern: time) ^ UInt64(bitPattern: last))
            return difference == 0 ? 0 : 64 - difference.leadingZeroBitCount
        }

        /// Links node `n` (its time set) into the bucket its time belongs in.
        @inline(__always)
        func link(_ n: Int32) {
            let time = nodes[Int(n)].time
            let b = bucket(of: time)
            nodes[Int(n)].next = heads[b]
            heads[b] = n
            if time < smallest[b] { smallest[b] = time }
            if b > 0 { occupied |= 1 << UInt64(b - 1) }
        }

        func insert(time: Int64, instance: Int32) {
            let n: Int32
            if free >= 0 {
                n = free
                free = nodes[Int(n)].next
            } else {
                if used == capacity { grow() }
                n = Int32(used)
                used += 1
            }
            nodes[Int(n)] = Node(time: time, instance: instance, next: -1)
            link(n)
            count += 1
        }

        private func grow() {
            let larger = Swift.max(16, capacity * 2)
            let moved = UnsafeMutablePointer<Node>.allocate(capacity: larger)
            moved.moveInitialize(from: nodes, count: used)
            nodes.deallocate()
            nodes = moved
            capacity = larger
        }

        /// The lowest bucket that holds entries.
        var lowest: Int? {
            if heads[0] >= 0 { return 0 }
            return occupied == 0 ? nil : occupied.trailingZeroBitCount + 1
        }

        /// Removes and returns the earliest entry's time and instance.
        func pop() -> (time: Int64, instance: Int32)? {
            guard let b = lowest else { return nil }
            if b > 0 { spread(b) }
            let n = heads[0]
            heads[0] = nodes[Int(n)].next
            if heads[0] < 0 { smallest[0] = .max }
            nodes[Int(n)].next = free
            free = n
            count -= 1
            return (nodes[Int(n)].time, nodes[Int(n)].instance)
        }

        /// Makes bucket `b`'s smallest time `last` and moves its entries down to the buckets they now
        /// belong in (bucket 0 among them: the entries at that time).
        private func spread(_ b: Int) {
            last = smallest[b]
            var n = heads[b]
            heads[b] = -1
            smallest[b] = .max
            occupied &= ~(1 << UInt64(b - 1))
            while n >= 0 {
                let next = nodes[Int(n)].next
                link(n)
                n = next
            }
        }
    }

    private var storage = Storage(capacity: 0)
    /// Entries earlier than the time taken last.
    private var early = TimerHeap()
    private let kind: TimerHeap.Kind

    /// A queue of timers of one kind (every entry it returns has it).
    init(kind: TimerHeap.Kind) { self.kind = kind }

    var count: Int { storage.count + early.count }

    mutating func insert(_ entry: Entry) {
        precondition(entry.kind == kind, "a radix timer queue holds one kind of timer")
        guard entry.time >= storage.last else {
            early.insert(entry)
            return
        }
        if !isKnownUniquelyReferenced(&storage) { storage = storage.copy() }
        storage.insert(time: entry.time, instance: entry.instance)
    }

    /// The earliest time in the queue, without a scan.
    var topTime: Int64? {
        let inBuckets = storage.lowest.map { storage.smallest[$0] }
        guard let earlyTime = early.top?.time else { return inBuckets }
        return min(earlyTime, inBuckets ?? .max)
    }

    /// An earliest entry. Reads the lowest bucket's list (a walk when it is not bucket 0): for tests and
    /// the rare reader who needs the entry itself; ``topTime`` is what the scheduler reads.
    var top: Entry? {
        guard let time = topTime else { return nil }
        if let entry = early.top, entry.time == time { return entry }
        var n = storage.heads[storage.lowest!]
        while storage.nodes[Int(n)].time != time { n = storage.nodes[Int(n)].next }
        return Entry(time: time, instance: storage.nodes[Int(n)].instance, kind: kind)
    }

    mutating func popTop() -> Entry? {
        if let earlyTime = early.top?.time, earlyTime <= storage.lowest.map({ storage.smallest[$0] }) ?? .max {
            return early.popTop()
        }
        guard storage.count > 0 else { return nil }
        if !isKnownUniquelyReferenced(&storage) { storage = storage.copy() }
        return storage.pop().map { Entry(time: $0.time, instance: $0.instance, kind: kind) }
    }
}
