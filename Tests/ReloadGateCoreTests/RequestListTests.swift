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
