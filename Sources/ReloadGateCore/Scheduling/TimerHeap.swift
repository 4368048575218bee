import CReloadGatePrefetch

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

    /// Adds `entry`: a hole moves up from the end to where the entry belongs, each parent it passes
    /// moved down once (one write a level, where a swap writes two).
    mutating func insert(_ entry: Entry) {
        entries.append(entry)
        entries.withUnsafeMutableBufferPointer { heap in
            var hole = heap.count - 1
            while hole > 0 {
                let parent = (hole - 1) / 4
                guard entry.time < heap[parent].time else { break }
                heap[hole] = heap[parent]
                hole = parent
            }
            heap[hole] = entry
        }
    }

    mutating func popTop() -> Entry? {
        guard let last = entries.popLast() else { return nil }
        guard !entries.isEmpty else { return last }
        return entries.withUnsafeMutableBufferPointer { heap in
            let top = heap[0]
            // The last entry goes where the hole left by the top settles: down from the root, the
            // smallest of up to four children moved up at each level. Four children per node: half the
            // depth of a binary heap, and siblings share cache lines.
            var hole = 0
            let count = heap.count
            while true {
                let firstChild = 4 * hole + 1
                guard firstChild < count else { break }
                // The sixteen grandchildren (256 contiguous bytes) asked for while the children are
                // compared: whichever child wins, its children are among them (decision 0115).
                let firstGrandchild = 4 * firstChild + 1
                if firstGrandchild < count {
                    let grandchildren = min(16, count - firstGrandchild)
                    reloadgate_prefetch(heap.baseAddress! + firstGrandchild, grandchildren * MemoryLayout<Entry>.stride)
                }
                var smallest = firstChild
                if firstChild + 3 < count {
                    // Four children (all but the last node): two pairs, then their winners, each comparison
                    // keeping the first of equal times as the scan below does. Without the loop's counter
                    // and bound, the compiler makes them selects rather than branches.
                    let left = heap[firstChild + 1].time < heap[firstChild].time ? firstChild + 1 : firstChild
                    let right = heap[firstChild + 3].time < heap[firstChild + 2].time ? firstChild + 3 : firstChild + 2
                    smallest = heap[right].time < heap[left].time ? right : left
                } else {
                    var child = firstChild + 1
                    while child < count {
                        if heap[child].time < heap[smallest].time { smallest = child }
                        child += 1
                    }
                }
                guard heap[smallest].time < last.time else { break }
                heap[hole] = heap[smallest]
                hole = smallest
            }
            heap[hole] = last
            return top
        }
    }
}

/// The scheduler's timers: a heap of planned timeline reloads (about one per instance, mostly hours
/// ahead), a heap of pending reloads (few, minutes ahead), and a queue of pending reloads that were the
/// earliest timer when they were set (a push due now, the common case). Kept apart, the busy pending
/// heap stays small enough for the caches while the large planned heap is touched only when a timeline
/// reload falls due; in one heap, every pop walked a million entries' depth (docs/benchmarks-history.md). The
/// queue takes what would go to the top of the heap only to be popped next: appended in time order,
/// it is a sorted list, so it costs a comparison where the heap cost a sift.
struct Timers: Sendable {
    private var planned = TimerHeap()
    private var pending = TimerHeap()
    /// The queue is `first[firstHead..<firstEnd]`; the slots after it are spare, kept from before (the
    /// entries are plain values). Emptied, the queue starts again at the first slot: emptying the array
    /// itself (`removeAll(keepingCapacity:)`) costs 146 instructions, and the queue empties at most pops.
    private var first: [TimerHeap.Entry] = []
    private var firstHead = 0
    private var firstEnd = 0

    var count: Int { planned.count + pending.count + firstEnd - firstHead }

    mutating func insert(_ entry: TimerHeap.Entry) {
        switch entry.kind {
        case .plannedReload:
            planned.insert(entry)
        case .pendingReload:
            let queued = firstHead < firstEnd
            if (!queued || first[firstEnd - 1].time <= entry.time), entry.time <= earliestTime {
                if firstEnd < first.count { first[firstEnd] = entry } else { first.append(entry) }
                firstEnd += 1
            } else {
                pending.insert(entry)
            }
        }
    }

    /// The earliest entry; at equal times the timeline reload first (it serves the pending reload).
    var top: TimerHeap.Entry? {
        earliest.map { source, _ in
            switch source {
            case .planned: planned.top!
            case .pending: pending.top!
            case .first: first[firstHead]
            }
        }
    }

    mutating func popTop() -> TimerHeap.Entry? { popTop(atOrBefore: .max) }

    /// Removes and returns the earliest entry if it is due at or before `time`.
    mutating func popTop(atOrBefore time: Int64) -> TimerHeap.Entry? {
        guard let (source, due) = earliest, due <= time else { return nil }
        switch source {
        case .planned: return planned.popTop()
        case .pending: return pending.popTop()
        case .first:
            let entry = first[firstHead]
            firstHead += 1
            if firstHead == firstEnd {
                (firstHead, firstEnd) = (0, 0)
            } else if firstHead >= 4096, firstHead * 2 >= firstEnd {
                first.removeFirst(firstHead)
                (firstHead, firstEnd) = (0, firstEnd - firstHead)
            }
            return entry
        }
    }

    /// The earliest entry's time (`Int64.max` when there is none), read without choosing its source.
    private var earliestTime: Int64 {
        min(planned.top?.time ?? .max, pending.top?.time ?? .max, firstHead < firstEnd ? first[firstHead].time : .max)
    }

    private enum Source { case planned, pending, first }

    /// Which of the three holds the earliest entry, and its time.
    private var earliest: (source: Source, time: Int64)? {
        var best: (source: Source, time: Int64)?
        if let entry = planned.top { best = (.planned, entry.time) }
        if let entry = pending.top, best.map({ entry.time < $0.time }) ?? true { best = (.pending, entry.time) }
        if firstHead < firstEnd, best.map({ first[firstHead].time < $0.time }) ?? true { best = (.first, first[firstHead].time) }
        return best
    }
}
