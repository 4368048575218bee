import Foundation
import Logging
import ReloadGateTesting
import Testing

@testable import ReloadGateServer

/// The memory upkeep gives a burst's freed heap back to the system: memory freed between blocks still in
/// use stays resident until the heap is trimmed.
@Suite(.offThePool, .serialized)
struct MemoryUpkeepTests {
    /// Resident bytes of this process (/proc/self/statm's second field, in pages).
    static func resident() throws -> Int {
        let fields = try String(contentsOfFile: "/proc/self/statm", encoding: .utf8).split(separator: " ")
        return (Int(fields[1]) ?? 0) * Int(sysconf(Int32(_SC_PAGESIZE)))
    }

    /// Allocates 192 MiB in blocks of 32 KiB (below malloc's mmap threshold: from the heap) and frees all
    /// but every 16th: the freed blocks lie between live ones, so free() alone cannot give them back.
    /// Returns the blocks kept, for the caller to free.
    static func freeBetweenLiveBlocks() throws -> [UnsafeMutableRawPointer] {
        let block = 32 << 10
        var blocks: [UnsafeMutableRawPointer] = []
        for _ in 0..<(192 << 20) / block {
            let pointer = try #require(malloc(block))
            memset(pointer, 1, block)  // resident
            blocks.append(pointer)
        }
        var kept: [UnsafeMutableRawPointer] = []
        for (index, pointer) in blocks.enumerated() {
            if index % 16 == 0 { kept.append(pointer) } else { free(pointer) }
        }
        return kept
    }

    @Test func aBurstFreedBetweenLiveBlocksIsGivenBackOnceItPassesTheThreshold() throws {
        let kept = try Self.freeBetweenLiveBlocks()
        defer { for pointer in kept { free(pointer) } }
        #expect(MemoryUpkeep.freeBytes > 150 << 20, "the heap holds \(MemoryUpkeep.freeBytes >> 20) MiB free")
        // Under the threshold nothing is trimmed.
        #expect(MemoryUpkeep.trim(above: Int.max) == nil)
        let before = try Self.resident()
        #expect(MemoryUpkeep.trim(above: 64 << 20) != nil)
        let after = try Self.resident()
        // (Other tests of the run allocate meanwhile: the bound leaves room for them.)
        #expect(before - after > 100 << 20, "resident \(before >> 20) MiB before the trim, \(after >> 20) MiB after")
    }

    /// A look asked for without waiting (a burst's end) trims the heap on the upkeep's queue; asks made
    /// while one is queued are that one look.
    @Test func aLookAskedForSoonTrimsTheHeap() async throws {
        let trims = HeapTrims(threshold: 64 << 20, logger: Logger(label: "test"))
        let kept = try Self.freeBetweenLiveBlocks()
        defer { for pointer in kept { free(pointer) } }
        let before = try Self.resident()
        for _ in 0..<100 { trims.lookSoon() }
        _ = try await eventually { trims.looks >= 1 }
        let after = try Self.resident()
        #expect(before - after > 100 << 20, "resident \(before >> 20) MiB before the look, \(after >> 20) MiB after")
        // The hundred asks were at most a few looks (one queued at a time), not a hundred.
        try await Task.sleep(for: .milliseconds(100))
        #expect(trims.looks < 10, "\(trims.looks) looks")
    }
}
