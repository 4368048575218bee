#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// New `apns-id` values: random (version 4) UUIDs in the lowercase canonical form APNs uses.
///
/// Every push answered without a sender's `apns-id`, and every delivery, needs one.
/// `UUID().uuidString.lowercased()` made an uppercase string and then a lowercase copy, and read the
/// system's random source twice; this reads 16 bytes once and writes the 36 characters once.
public enum MessageID {
    /// A new random UUID, for example `0f8e4a2c-9b1d-4c3e-8a7f-2d6b5e4c3a21`.
    public static func random() -> String {
        var bits: (high: UInt64, low: UInt64) = (0, 0)
        let read = withUnsafeMutableBytes(of: &bits) { getentropy($0.baseAddress!, $0.count) }
        if read != 0 {
            var generator = SystemRandomNumberGenerator()
            bits = (generator.next(), generator.next())
        }
        return format(high: bits.high, low: bits.low)
    }

    /// New ids for one owner that is never shared between threads (a connection's handler): the random
    /// bits are read from the system 256 bytes at a time, so sixteen ids cost one `getentropy` call
    /// instead of one each, and no lock is needed.
    public struct Generator: Sendable {
        private var bits: [UInt64] = []

        public init() {}

        /// A new random UUID, as ``MessageID/random()`` makes.
        public mutating func next() -> String {
            if bits.count < 2 { refill() }
            let high = bits.removeLast()
            let low = bits.removeLast()
            return MessageID.format(high: high, low: low)
        }

        private mutating func refill() {
            bits = MessageID.randomWords()
        }
    }

    /// 32 random words from the system (256 bytes: `getentropy`'s limit) in one call.
    static func randomWords() -> [UInt64] {
        var words = [UInt64](repeating: 0, count: 32)
        let read = words.withUnsafeMutableBytes { getentropy($0.baseAddress!, $0.count) }
        if read != 0 {
            var generator = SystemRandomNumberGenerator()
            for index in words.indices { words[index] = generator.next() }
        }
        return words
    }

    /// New ids in increasing order (RFC 9562 version 7: the Unix time in milliseconds first, then a
    /// counter, then random bits), for the deliveries a gateway releases. Stored as the delivery table's
    /// key, ids that grow are appended to its index: 900,000 random ones took 10.8 s to insert into
    /// SQLite where ordered ones took 3.5 s (docs/DECISIONS.md, "Deliveries get time-ordered apns-ids").
    /// Unique across gateways by the 30 random bits of each id and a counter that starts at random. The
    /// random bits are read from the system 256 bytes at a time (one call for 32 ids): a herd releases
    /// hundreds of thousands of deliveries in one tick, and a system call for each id was 4% of the
    /// samples in a profile of a fan-out over 200,000 instances.
    public struct Ordered: Sendable {
        private var counter: UInt64
        private var random: [UInt64] = []

        public init() {
            counter = UInt64.random(in: 0..<(1 << 43))
        }

        /// The next id at `milliseconds` since 1970 (the clock's; a clock that goes back gives ids that
        /// are still unique, only not in order).
        public mutating func next(milliseconds: Int64) -> String {
            counter = (counter &+ 1) & ((1 << 44) - 1)
            let time = UInt64(clamping: milliseconds) & ((1 << 48) - 1)
            let high = (time << 16) | 0x7000 | ((counter >> 32) & 0x0FFF)
            if random.isEmpty { random = MessageID.randomWords() }
            let low = (0x2 << 62) | ((counter & 0xFFFF_FFFF) << 30) | (random.removeLast() & 0x3FFF_FFFF)
            return MessageID.format(high: high, low: low, version: 7)
        }
    }

    /// The UUID of these 128 bits (big-endian: `high` first) with the version (4, or `version`) and
    /// variant (RFC 9562) bits set.
    static func format(high: UInt64, low: UInt64, version: UInt64 = 4) -> String {
        let high = (high & ~0xF000) | (version << 12)  // the version: the 13th hex digit
        let low = (low & ~(0xC << 60)) | (0x8 << 60)  // variant 10xx: the 17th hex digit
        return String(unsafeUninitializedCapacity: 36) { buffer in
            // Each digit is computed, not read from a table: a table in a `static let` would be a lazy
            // global, whose every read asks whether it is made yet (`swift_once`, 32 times an id).
            @inline(__always) func put(_ value: UInt64, digits count: Int, at start: Int) {
                for index in 0..<count {
                    let nibble = UInt8(truncatingIfNeeded: value >> UInt64(4 * (count - 1 - index))) & 0xF
                    buffer[start + index] = nibble < 10 ? nibble &+ UInt8(ascii: "0") : nibble &+ (UInt8(ascii: "a") - 10)
                }
            }
            put(high >> 32, digits: 8, at: 0)
            buffer[8] = UInt8(ascii: "-")
            put(high >> 16, digits: 4, at: 9)
            buffer[13] = UInt8(ascii: "-")
            put(high, digits: 4, at: 14)
            buffer[18] = UInt8(ascii: "-")
            put(low >> 48, digits: 4, at: 19)
            buffer[23] = UInt8(ascii: "-")
            put(low, digits: 12, at: 24)
            return 36
        }
    }
}
