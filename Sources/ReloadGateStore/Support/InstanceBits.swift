/// A set of instance ids kept as one bit each, up to the largest id held: an eighth of a byte an id, where
/// a `Set` takes about 16 bytes an element, for the dense ids the registry gives out. Only ids in
/// `0..<limit` are held (``holds(_:)``); what another id means is the caller's to say.
struct InstanceBits: Sendable {
    /// Ids from here on are not held (the words stay within 512 MiB).
    static let limit: Int64 = 1 << 32

    private var words: [UInt64] = []

    init() {}

    /// An empty set with its words made for ids up to `largest` at once.
    init(roomFor largest: Int64) {
        if Self.holds(largest) { words = Array(repeating: 0, count: Int(largest >> 6) + 1) }
    }

    /// Whether `id` can be held.
    static func holds(_ id: Int64) -> Bool { id >= 0 && id < limit }

    func contains(_ id: Int64) -> Bool {
        guard Self.holds(id) else { return false }
        let word = Int(id >> 6)
        return word < words.count && words[word] & Self.bit(id) != 0
    }

    /// Adds `id` (one that ``holds(_:)``); false when it was held already.
    @discardableResult
    mutating func insert(_ id: Int64) -> Bool {
        precondition(Self.holds(id), "instance id \(id) outside the bits")
        let word = Int(id >> 6)
        if word >= words.count { words.append(contentsOf: repeatElement(0, count: word - words.count + 1)) }
        guard words[word] & Self.bit(id) == 0 else { return false }
        words[word] |= Self.bit(id)
        return true
    }

    mutating func remove(_ id: Int64) {
        guard Self.holds(id), Int(id >> 6) < words.count else { return }
        words[Int(id >> 6)] &= ~Self.bit(id)
    }

    private static func bit(_ id: Int64) -> UInt64 { 1 << UInt64(id & 63) }
}
