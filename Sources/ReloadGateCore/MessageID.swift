#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization

/// New `apns-id` values: random (version 4) UUIDs in the lowercase canonical form APNs uses.
///
/// Every push answered without a sender's `apns-id` needs one. `UUID().uuidString.lowercased()` made an
/// uppercase string and then a lowercase copy; this writes the 36 bytes once from 16 random ones.
public enum MessageID {
    private static let digits = Array("0123456789abcdef".utf8)

    /// Random bits taken 128 at a time, refilled 64 IDs' worth at once (two `getrandom`
    /// calls per ID, as the system generator makes them, cost more than the rest of making it).
    private static let pool = Mutex<(bits: [UInt64], next: Int)>(([], 0))
    private static let poolSize = 128

    /// A new random UUID, for example `0f8e4a2c-9b1d-4c3e-8a7f-2d6b5e4c3a21`.
    public static func random() -> String {
        let (high, low) = pool.withLock { pool -> (UInt64, UInt64) in
            if pool.next + 2 > pool.bits.count {
                pool.bits = randomBits(poolSize)
                pool.next = 0
            }
            defer { pool.next += 2 }
            return (pool.bits[pool.next], pool.bits[pool.next + 1])
        }
        return format(high: high, low: low)
    }

    /// `count` random words: from `getentropy` 256 bytes per call where there is one, else word by word
    /// from the system generator.
    static func randomBits(_ count: Int) -> [UInt64] {
        var bits = [UInt64](repeating: 0, count: count)
        #if canImport(Glibc) || canImport(Darwin)
        let filled = bits.withUnsafeMutableBytes { buffer -> Bool in
            var done = 0
            while done < buffer.count {
                let length = min(256, buffer.count - done)  // getentropy's limit per call
                guard getentropy(buffer.baseAddress! + done, length) == 0 else { return false }
                done += length
            }
            return true
        }
        if filled { return bits }
        #endif
        var generator = SystemRandomNumberGenerator()
        for index in bits.indices { bits[index] = generator.next() }
        return bits
    }

    /// The UUID of these 128 bits (big-endian: `high` first) with the version (4) and variant (RFC 9562)
    /// bits set.
    static func format(high: UInt64, low: UInt64) -> String {
        let high = (high & ~0xF000) | 0x4000  // version 4: the 13th hex digit
        let low = (low & ~(0xC << 60)) | (0x8 << 60)  // variant 10xx: the 17th hex digit
        return String(unsafeUninitializedCapacity: 36) { buffer in
            var position = 0
            func put(_ value: UInt64, digits count: Int) {
                for shift in stride(from: (count - 1) * 4, through: 0, by: -4) {
                    buffer[position] = digits[Int((value >> UInt64(shift)) & 0xF)]
                    position += 1
                }
            }
            func dash() {
                buffer[position] = UInt8(ascii: "-")
                position += 1
            }
            put(high >> 32, digits: 8)
            dash()
            put((high >> 16) & 0xFFFF, digits: 4)
            dash()
            put(high & 0xFFFF, digits: 4)
            dash()
            put(low >> 48, digits: 4)
            dash()
            put(low & 0xFFFF_FFFF_FFFF, digits: 12)
            return position
        }
    }
}
