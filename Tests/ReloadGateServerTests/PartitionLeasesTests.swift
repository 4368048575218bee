import PropertyBased
import ReloadGateCore
import ReloadGateTesting
import Testing

@testable import ReloadGateServer
@testable import ReloadGateStore

/// The partition leases' state machine on its own (pure: heartbeat answers and instants in, what the
/// engine and the store must do out): each way a lease changes, and generated runs of heartbeats.
@Suite(.offThePool)
struct PartitionLeasesTests {
    static let lease: Duration = .seconds(5)
    static let start = ContinuousClock.now

    static func answer(_ held: [Int: Int64], surplus: [Int] = [], generation: Int64 = 1) -> LeaseState {
        LeaseState(held: held, acquired: [], liveGateways: ["g"], surplus: surplus, expiresAt: 0, generation: generation)
    }

    static func delivery(device: Int64) -> RecordedDelivery {
        RecordedDelivery(
            apnsID: "d\(device)", device: device, released: Timestamp(milliseconds: 0), instances: [device], requests: [1],
            priority: .high, expiration: nil, state: .pending
        )
    }

    @Test func theFirstHeartbeatAcquiresWhatItHoldsUntilTheLocalDeadline() {
        var leases = PartitionLeases(leaseTime: Self.lease, now: Self.start)
        #expect(!leases.owns(partition: 1, at: Self.start))
        let renewal = leases.renewed(Self.answer([1: 7, 2: 3], generation: 4), startedAt: Self.start)
        #expect(renewal == PartitionLeases.Renewal(generation: 4, acquired: [1: 7, 2: 3]))
        #expect(leases.owns(partition: 1, at: Self.start + .seconds(3)))
        // The lease lasts 5 s from the heartbeat's start; it counts as held until 1 s (the margin) before.
        #expect(!leases.owns(partition: 1, at: Self.start + .seconds(4)))
        #expect(!leases.owns(partition: 3, at: Self.start))
    }

    @Test func aPartitionRenewedWithAnotherEpochIsLostAndAcquiredAgain() {
        var leases = PartitionLeases(leaseTime: Self.lease, now: Self.start)
        _ = leases.renewed(Self.answer([1: 7, 2: 3, 5: 1]), startedAt: Self.start)
        let renewal = leases.renewed(Self.answer([1: 7, 2: 4], generation: 2), startedAt: Self.start + .seconds(1))
        #expect(renewal.lost == [2, 5])
        #expect(renewal.acquired == [2: 4])
        #expect(renewal.generation == 2)
        #expect(leases.held == [1: 7, 2: 4])
    }

    @Test func theSurplusIsHandedBackAndNoLongerHeld() {
        var leases = PartitionLeases(leaseTime: Self.lease, now: Self.start)
        _ = leases.renewed(Self.answer([1: 7, 2: 3]), startedAt: Self.start)
        let renewal = leases.renewed(Self.answer([1: 7, 2: 3], surplus: [2, 9]), startedAt: Self.start + .seconds(1))
        #expect(renewal.handBack == [2: 3])
        #expect(renewal.lost.isEmpty && renewal.acquired.isEmpty)
        #expect(leases.held == [1: 7])
        #expect(!leases.owns(partition: 2, at: Self.start + .seconds(1)))
    }

    @Test func attemptsOutAreCountedPerPartitionUntilTheyEndAndNoneBeginsOnceItIsHandedBack() throws {
        var leases = PartitionLeases(leaseTime: Self.lease, now: Self.start)
        let (first, second) = (Self.delivery(device: 1), Self.delivery(device: 2))
        let (one, two) = (DevicePartition.of(device: 1), DevicePartition.of(device: 2))
        try #require(one != two)
        _ = leases.renewed(Self.answer([one: 1, two: 1]), startedAt: Self.start)
        let begun = [first, first, second].map { leases.beginAttempt($0, at: Self.start) }
        #expect(begun == [true, true, true])
        #expect(leases.attemptsOut(in: [one]) == 2)
        // Handed back: no attempt begins; the two out are counted until they end.
        let later = Self.start + .seconds(1)
        let renewal = leases.renewed(Self.answer([one: 1, two: 1], surplus: [one]), startedAt: later)
        #expect(renewal.handBack == [one: 1])
        let afterHandBack = leases.beginAttempt(first, at: later)
        #expect(!afterHandBack)
        #expect(leases.attemptsOut(in: [one]) == 2)
        leases.endAttempt(first)
        leases.endAttempt(first)
        #expect(leases.attemptsOut(in: [one]) == 0)
        #expect(leases.attemptsOut(in: [one, two]) == 1)
        // An end without a beginning counts nothing.
        leases.endAttempt(first)
        #expect(leases.attemptsOut(in: [one, two]) == 1)
        // Past the local deadline nothing begins either.
        let pastDeadline = leases.beginAttempt(second, at: Self.start + .seconds(10))
        #expect(!pastDeadline)
    }

    @Test func failedHeartbeatsLoseEveryLeaseOnceTheLocalDeadlinePasses() {
        var leases = PartitionLeases(leaseTime: Self.lease, now: Self.start)
        _ = leases.renewed(Self.answer([1: 7, 2: 3]), startedAt: Self.start)
        #expect(leases.heartbeatFailed(at: Self.start + .seconds(2)).isEmpty)
        #expect(leases.held == [1: 7, 2: 3])
        #expect(leases.heartbeatFailed(at: Self.start + .seconds(4)) == [1, 2])
        #expect(leases.held.isEmpty)
        // Taken again by a later heartbeat: acquired (loaded anew), nothing lost twice.
        let renewal = leases.renewed(Self.answer([1: 7]), startedAt: Self.start + .seconds(6))
        #expect(renewal.acquired == [1: 7] && renewal.lost.isEmpty)
    }

    @Test func aDeliveryIsSentOnlyUnderTheLeaseEpochItWasReleasedUnder() {
        var leases = PartitionLeases(leaseTime: Self.lease, now: Self.start)
        _ = leases.renewed(Self.answer([1: 7]), startedAt: Self.start)
        var released = Self.delivery(device: 1)
        released.leaseEpoch = 7
        #expect(leases.owns(released, at: Self.start))
        // The partition changed hands and came back (epoch 9): the copy of epoch 7 is another tenure's.
        _ = leases.renewed(Self.answer([1: 9]), startedAt: Self.start + .seconds(1))
        #expect(!leases.owns(released, at: Self.start + .seconds(1)))
        released.leaseEpoch = 9
        #expect(leases.owns(released, at: Self.start + .seconds(1)))
        // Without an epoch (one gateway's deliveries, the tests' own): the partition alone decides.
        released.leaseEpoch = nil
        #expect(leases.owns(released, at: Self.start + .seconds(1)))
        #expect(!leases.owns(released, at: Self.start + .seconds(5)))
        // Left behind under epoch 7, renewed with 9 unchanged since: not sent again (the copy is stale).
        released.leaseEpoch = 7
        leases.lapse(at: Self.start + .seconds(1))
        leases.leaveBehind([released])
        #expect(leases.renewed(Self.answer([1: 9]), startedAt: Self.start + .seconds(2)).requeue.isEmpty)
    }

    @Test func heldBackDeliveriesAreSentAgainOnlyWhenTheSameEpochIsRenewed() {
        var leases = PartitionLeases(leaseTime: Self.lease, now: Self.start)
        _ = leases.renewed(Self.answer([1: 7, 2: 3]), startedAt: Self.start)
        leases.lapse(at: Self.start)
        #expect(!leases.owns(partition: 1, at: Self.start))
        leases.leaveBehind([Self.delivery(device: 1), Self.delivery(device: 2), Self.delivery(device: 1025)])
        // Partition 1 renewed with its epoch (devices 1 and 1025); partition 2 changed hands.
        let renewal = leases.renewed(Self.answer([1: 7, 2: 4]), startedAt: Self.start + .seconds(1))
        #expect(renewal.requeue.map(\.device) == [1, 1025])
        #expect(leases.leftBehind.isEmpty)
        #expect(leases.owns(partition: 1, at: Self.start + .seconds(1)))
    }

    @Test func releasingGivesBackEverything() {
        var leases = PartitionLeases(leaseTime: Self.lease, now: Self.start)
        _ = leases.renewed(Self.answer([1: 7, 2: 3]), startedAt: Self.start)
        #expect(leases.releaseAll() == [1: 7, 2: 3])
        #expect(leases.held.isEmpty)
    }

    /// Generated runs: each heartbeat answers a random holding of four partitions with random epochs and
    /// surplus, or fails at a random time. After each step, what the engine was told adds up to what is held.
    @Test func theEngineIsToldExactlyWhatIsHeldInGeneratedRuns() async {
        let holding = Gen.int(in: 0...3).array(of: 4)   // per partition: 0 not held, else the epoch
        let step = zip(holding, Gen.int(in: 0...15), Gen.int(in: 0...3))   // holding, surplus bits, 0: heartbeat fails
        await propertyCheck(count: 2000, input: step.array(of: 1...40)) { steps in
            var leases = PartitionLeases(leaseTime: Self.lease, now: Self.start)
            // What the engine schedules: partition -> epoch (told by the renewals and failures).
            var scheduled: [Int: Int64] = [:]
            var time = Self.start
            for (epochs, surplusBits, outcome) in steps {
                time += .seconds(outcome == 0 ? 3 : 1)
                if outcome == 0 {
                    for partition in leases.heartbeatFailed(at: time) { scheduled[partition] = nil }
                } else {
                    var held: [Int: Int64] = [:]
                    for (partition, epoch) in epochs.enumerated() where epoch > 0 { held[partition] = Int64(epoch) }
                    let surplus = (0..<4).filter { surplusBits & (1 << $0) != 0 }
                    let renewal = leases.renewed(Self.answer(held, surplus: surplus), startedAt: time)
                    for partition in renewal.lost {
                        #expect(scheduled[partition] != nil, "lost \(partition), which the engine did not schedule")
                        scheduled[partition] = nil
                    }
                    for (partition, epoch) in renewal.acquired {
                        #expect(scheduled[partition] == nil, "acquired \(partition), which the engine still schedules")
                        scheduled[partition] = epoch
                    }
                    for partition in renewal.handBack.keys { scheduled[partition] = nil }
                }
                #expect(scheduled == leases.held, "after \(steps)")
            }
        }
    }
}
