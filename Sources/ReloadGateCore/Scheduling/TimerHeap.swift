/// A 4-ary min-heap of (time, instance, kind): what falls due next, in O(log n) per change, with no scan
/// per tick. Entries are never removed in place; an entry whose instance no longer has that due time is
/// skipped when it reaches the top (lazy deletion).
struct TimerHeap: Sendable {
    enum Kind: UInt8, Sendable {
        case pendingReload
        case plannedReload
    }

    struct Entry: Sendable {
        var time: Int64
        var instance: Int32
        var kind: Kind
    }

    private(set) var entries: [Entry] = []

    var count: Int { entries.count }
    var top: Entry? { entries.first }

    mutating func insert(_ entry: Entry) {
        entries.append(entry)
        var child = entries.count - 1
        while child > 0 {
            let parent = (child - 1) / 4
            guard entries[child].time < entries[parent].time else { break }
            entries.swapAt(child, parent)
            child = parent
        }
    }

    mutating func popTop() -> Entry? {
        guard !entries.isEmpty else { return nil }
        let top = entries[0]
        let last = entries.removeLast()
        if !entries.isEmpty {
            entries[0] = last
            // Four children per node: half the depth of a binary heap, and siblings share cache lines.
            var parent = 0
            while true {
                let firstChild = 4 * parent + 1
                guard firstChild < entries.count else { break }
                var smallest = parent
                for child in firstChild..<min(firstChild + 4, entries.count)
                where entries[child].time < entries[smallest].time {
                    smallest = child
                }
                guard smallest != parent else { break }
                entries.swapAt(parent, smallest)
                parent = smallest
            }
        }
        return top
    }
}

/// The scheduler's two timer heaps: planned timeline reloads (about one per instance, mostly hours
/// ahead) and pending reloads (few, minutes ahead). Kept apart, the busy pending heap stays small enough
/// for the caches while the large planned heap is touched only when a timeline reload falls due; in one
/// heap, every pop walked a million entries' depth (docs/BENCHMARKS.md).
struct Timers: Sendable {
    private var planned = TimerHeap()
    private var pending = TimerHeap()

    var count: Int { planned.count + pending.count }

    mutating func insert(_ entry: TimerHeap.Entry) {
        switch entry.kind {
        case .plannedReload: planned.insert(entry)
        case .pendingReload: pending.insert(entry)
        }
    }

    /// The earliest entry; at equal times the timeline reload first (it serves the pending reload).
    var top: TimerHeap.Entry? {
        switch (planned.top, pending.top) {
        case (let p?, let q?): p.time <= q.time ? p : q
        case (let p?, nil): p
        case (nil, let q): q
        }
    }

    mutating func popTop() -> TimerHeap.Entry? {
        switch (planned.top, pending.top) {
        case (let p?, let q?): p.time <= q.time ? planned.popTop() : pending.popTop()
        case (_?, nil): planned.popTop()
        case (nil, _): pending.popTop()
        }
    }
}
