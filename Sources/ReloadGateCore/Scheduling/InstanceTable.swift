#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CReloadGatePrefetch

/// The instances' scheduling states: an array of value semantics (copied on write, for the scheduler's
/// value type) that grows but never shrinks (handles are dense and reused). Unlike `Array` it asks for
/// huge pages once it is large: a decision starts with a read of a random instance's state, and over tens
/// of megabytes in 4 KiB pages nearly every such read also missed the TLB (8-20% more decisions a second
/// with them, docs/benchmarks-history.md).
struct InstanceTable: @unchecked Sendable {
    typealias State = ReloadScheduler.InstanceState

    private final class Storage {
        static let hugePage = 2 << 20
        let base: UnsafeMutablePointer<State>
        var count: Int
        let capacity: Int

        init(capacity: Int) {
            self.capacity = capacity
            count = 0
            let byteCount = Swift.max(1, capacity) * MemoryLayout<State>.stride
            var raw: UnsafeMutableRawPointer?
            // Huge pages are asked for whole 2 MiB ranges: a large table starts on one (an `Array`'s
            // elements start 32 bytes into a block that malloc's own header already shifted).
            let alignment = byteCount >= Self.hugePage ? Self.hugePage : MemoryLayout<UnsafeRawPointer>.alignment
            guard posix_memalign(&raw, alignment, byteCount) == 0, let raw else { fatalError("out of memory") }
            #if os(Linux)
            // Transparent huge pages where the system gives them on request (THP `madvise` or `always`);
            // nothing changes where it does not.
            if byteCount >= Self.hugePage { _ = madvise(raw, byteCount, MADV_HUGEPAGE) }
            #endif
            base = raw.bindMemory(to: State.self, capacity: Swift.max(1, capacity))
        }

        func copy(capacity: Int) -> Storage {
            let copy = Storage(capacity: capacity)
            copy.base.initialize(from: base, count: count)
            copy.count = count
            return copy
        }

        deinit {
            base.deinitialize(count: count)
            free(UnsafeMutableRawPointer(base))
        }
    }

    private var storage = Storage(capacity: 0)

    var count: Int { storage.count }

    subscript(index: Int) -> State {
        get {
            precondition(index >= 0 && index < storage.count, "instance index out of range")
            return storage.base[index]
        }
        _modify {
            precondition(index >= 0 && index < storage.count, "instance index out of range")
            if !isKnownUniquelyReferenced(&storage) { storage = storage.copy(capacity: storage.capacity) }
            yield &storage.base[index]
        }
    }

    /// Asks for the cache lines of the state at `index` (every one it spans), so that a read
    /// soon after finds them; nothing for an index out of range.
    @inline(__always)
    func prefetch(_ index: Int) {
        guard index >= 0 && index < storage.count else { return }
        reloadgate_prefetch(storage.base + index, MemoryLayout<State>.size)
    }

    /// Adds fresh states (unregistered) up to `count`.
    mutating func grow(to count: Int) {
        guard count > storage.count else { return }
        if count > storage.capacity || !isKnownUniquelyReferenced(&storage) {
            storage = storage.copy(capacity: Swift.max(count, storage.capacity * 2, 16))
        }
        (storage.base + storage.count).initialize(repeating: State(), count: count - storage.count)
        storage.count = count
    }
}
