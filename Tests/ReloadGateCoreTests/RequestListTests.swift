import Testing

@testable import ReloadGateCore

/// A pending reload's list of request ids (``RequestList``), kept as differences: every id comes back as
/// it was added, in order, whatever the differences between them; the first ``RequestList/listed`` are
/// listed and all are counted.
struct RequestListTests {
    static let lists: [[RequestID]] = [
        [7],
        [1, 2, 3, 4],
        [1_000, 21_000, 41_500, 61_000],
        [500, 400, 300, 2, 1],
        [0, .max, 0, .max, 1, .max - 1],
        [RequestID(1) << 63, 5, RequestID(1) << 62, 9],
    ]

    @Test(arguments: lists)
    func everyIdComesBackInOrder(_ ids: [RequestID]) {
        var list = RequestList(ids[0])
        for id in ids.dropFirst() { list.append(id) }
        #expect(list.array == ids)
        #expect(list.count == ids.count)
        #expect(RequestList(listed: ids, count: ids.count)?.array == ids)
    }

    @Test func onlyTheFirstHundredAreListedAndAllAreCounted() {
        var list = RequestList(1)
        for id in 2...250 as ClosedRange<RequestID> { list.append(id * 20_011) }
        #expect(list.count == 250)
        #expect(list.array == [1] + (2...100).map { $0 * 20_011 })
        let stored = RequestList(listed: (1...150).map { RequestID($0) }, count: 400)
        #expect(stored?.array == (1...100).map { RequestID($0) })
        #expect(stored?.count == 400)
        #expect(RequestList(listed: [], count: 3) == nil)
    }

    @Test func idsGivenInArrivalOrderTakeAFewBytesEach() {
        // 45 pushes to one widget among 20,000 devices at 3,000 a second: ids about 20,000 apart.
        var list = RequestList(1_000_000)
        for step in 1...44 as ClosedRange<RequestID> { list.append(1_000_000 + step * 20_000) }
        #expect(list.listedBytes <= 44 * 3)
    }
}

/// A snapshot's pending reload shares the scheduler's list instead of an array, and its rare parts (the
/// pending reload, an activity's state) are boxed: neither changes what a snapshot says or compares as.
struct SnapshotRepresentationTests {
    @Test(arguments: RequestListTests.lists)
    func aSnapshotsListSaysWhatAnArrayOfTheSameIdsSays(_ ids: [RequestID]) {
        var list = RequestList(ids[0])
        for id in ids.dropFirst() { list.append(id) }
        // Merged requests beyond the listed ones are counted by the scheduler's list, not by the snapshot's.
        for _ in 0..<3 { list.append(99) }
        let shared = PendingSnapshot(
            due: Timestamp(seconds: 10), priority: .high, expiration: nil, list: list, requestCount: list.count,
            collapseID: "c", team: "T", exempt: false
        )
        let fromArray = PendingSnapshot(
            due: Timestamp(seconds: 10), priority: .high, expiration: nil, requests: ids + [99, 99, 99], requestCount: ids.count + 3,
            collapseID: "c", team: "T", exempt: false
        )
        #expect(shared.requests == ids + [99, 99, 99])
        #expect(shared.firstRequest == ids[0])
        #expect(shared.listedCount == ids.count + 3)
        #expect(shared == fromArray)
        #expect(shared.hashValue == fromArray.hashValue)
        var visited: [RequestID] = []
        shared.forEachRequest { visited.append($0) }
        #expect(visited == ids + [99, 99, 99])
        var changed = shared
        changed.requests = [5]
        #expect(changed.requests == [5] && changed.firstRequest == 5 && changed.listedCount == 1)
        #expect(changed != shared)
        #expect(shared.requests == ids + [99, 99, 99])
    }

    @Test func anEmptyListHasNoFirstRequest() {
        let empty = PendingSnapshot(due: Timestamp(seconds: 1), priority: .low, expiration: nil, requests: [], collapseID: nil, team: nil, exempt: false)
        #expect(empty.requests.isEmpty && empty.firstRequest == nil && empty.listedCount == 0)
    }

    @Test func theBoxedPartsAreSetAndComparedLikeFields() {
        let pending = PendingSnapshot(due: Timestamp(seconds: 5), priority: .high, expiration: nil, requests: [1, 2], collapseID: nil, team: nil, exempt: false)
        let activity = ActivitySnapshot(delivered: nil, ended: false, content: nil, alert: nil, ending: true)
        var snapshot = InstanceSnapshot(bucketFullAt: 7, lastReload: nil, plannedReload: Timestamp(seconds: 9), pending: nil)
        let bare = snapshot
        #expect(snapshot.pending == nil && snapshot.activity == nil)
        snapshot.pending = pending
        #expect(snapshot.pending == pending && snapshot.activity == nil)
        snapshot.activity = activity
        #expect(snapshot.pending == pending && snapshot.activity == activity)
        #expect(snapshot == InstanceSnapshot(bucketFullAt: 7, lastReload: nil, plannedReload: Timestamp(seconds: 9), pending: pending, activity: activity))
        #expect(bare.pending == nil, "a copy taken before is not changed through the box")
        snapshot.pending?.requests = [3]
        #expect(snapshot.pending?.requests == [3] && snapshot.activity == activity)
        snapshot.pending = nil
        snapshot.activity = nil
        #expect(snapshot == bare && snapshot.hashValue == bare.hashValue)
        #expect(snapshot != InstanceSnapshot(bucketFullAt: 7, lastReload: nil, plannedReload: Timestamp(seconds: 9), pending: pending))
    }
}
