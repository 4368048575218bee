import NIOCore
import PostgresNIO

/// A one-dimensional PostgreSQL array, its elements optional (`[Int64?]`) or not (`[Int64]`), bound in the
/// binary format and written in one pass: every column of the group commit travels as one of these.
///
/// postgres-nio binds `[Element]` but no array with NULL elements, and most columns of the group commit
/// are nullable. Written by hand from the array's binary layout (PostgreSQL's `array_send`: dimensions,
/// a has-nulls flag, the element type, then each element as a length and its bytes, length -1 for NULL)
/// so that a batch's rows travel as typed arrays rather than as JSON text that both sides must print and
/// parse (docs/DECISIONS.md, "PostgreSQL: the group commit binds typed arrays").
///
/// The array's size is counted first and its bytes written into the buffer's room at once, rather than
/// element by element through `ByteBuffer` (three checked writes an element, each checking the buffer's
/// uniqueness, capacity and exclusive access): decision 0099.
struct PostgresPackedArray<Slot: PostgresPackedSlot>: PostgresNonThrowingEncodable {
    var elements: [Slot]

    init(_ elements: [Slot]) {
        self.elements = elements
    }

    static var psqlType: PostgresDataType { Slot.Packed.psqlArrayType }
    static var psqlFormat: PostgresFormat { .binary }

    func encode<JSONEncoder: PostgresJSONEncoder>(into buffer: inout ByteBuffer, context: PostgresEncodingContext<JSONEncoder>) {
        // The header: dimensions, has-NULLs, element type; then, when not empty, the one dimension's length
        // and lower bound.
        var size = 12
        var hasNull = false
        if !elements.isEmpty {
            size += 8
            for element in elements {
                size += 4
                if let element = element.packed { size += element.packedCount } else { hasNull = true }
            }
        }
        let elements = elements
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: size) { bytes in
            var at = 0
            func int32(_ value: Int32) {
                bytes.storeBytes(of: value.bigEndian, toByteOffset: at, as: Int32.self)
                at += 4
            }
            int32(elements.isEmpty ? 0 : 1)
            int32(hasNull ? 1 : 0)
            int32(Int32(bitPattern: Slot.Packed.psqlType.rawValue))
            guard !elements.isEmpty else { return at }
            int32(Int32(elements.count))
            int32(1)
            for element in elements {
                guard let element = element.packed else {
                    int32(-1)
                    continue
                }
                int32(Int32(element.packedCount))
                at = element.pack(into: bytes, at: at)
            }
            return at
        }
    }
}

/// A place of a ``PostgresPackedArray``: an element, or an optional one (`nil` is NULL).
protocol PostgresPackedSlot {
    associatedtype Packed: PostgresPackedElement
    /// The element, or `nil` for NULL.
    var packed: Packed? { get }
}

extension Optional: PostgresPackedSlot where Wrapped: PostgresPackedElement {
    var packed: Wrapped? { self }
}

/// An element of a ``PostgresPackedArray``: its binary format's length, and its bytes written at an offset.
protocol PostgresPackedElement: PostgresArrayEncodable, PostgresPackedSlot where Packed == Self {
    /// The length of the element's binary format, in bytes.
    var packedCount: Int { get }
    /// Writes the element's binary format at `offset` of `bytes` (which has room for ``packedCount`` bytes
    /// there) and returns the offset after it.
    func pack(into bytes: UnsafeMutableRawBufferPointer, at offset: Int) -> Int
}

extension PostgresPackedElement {
    var packed: Self? { self }
}

extension Int64: PostgresPackedElement {
    var packedCount: Int { 8 }

    func pack(into bytes: UnsafeMutableRawBufferPointer, at offset: Int) -> Int {
        bytes.storeBytes(of: bigEndian, toByteOffset: offset, as: Int64.self)
        return offset + 8
    }
}

extension Int32: PostgresPackedElement {
    var packedCount: Int { 4 }

    func pack(into bytes: UnsafeMutableRawBufferPointer, at offset: Int) -> Int {
        bytes.storeBytes(of: bigEndian, toByteOffset: offset, as: Int32.self)
        return offset + 4
    }
}

extension Bool: PostgresPackedElement {
    var packedCount: Int { 1 }

    func pack(into bytes: UnsafeMutableRawBufferPointer, at offset: Int) -> Int {
        bytes[offset] = self ? 1 : 0
        return offset + 1
    }
}

extension String: PostgresPackedElement {
    /// The UTF-8 length (stored with a native string: counting it reads no byte).
    var packedCount: Int { utf8.count }

    func pack(into bytes: UnsafeMutableRawBufferPointer, at offset: Int) -> Int {
        let written = utf8.withContiguousStorageIfAvailable { utf8 in
            UnsafeMutableRawBufferPointer(rebasing: bytes[offset...]).copyMemory(from: UnsafeRawBufferPointer(utf8))
            return utf8.count
        }
        if let written { return offset + written }
        // A bridged or lazily stored string: byte by byte.
        var at = offset
        for byte in utf8 {
            bytes[at] = byte
            at += 1
        }
        return at
    }
}

/// An integer list bound as its stored text (``IntegerList/text(_:)``, `[1,2,3]`), written straight into
/// the array's bytes: no `String` made for it. Of any collection, so that a delivery's ``CompactList`` is
/// written as it is, not copied into an array first.
struct PackedIntegerList<Values: Collection<Int64> & Sendable>: PostgresPackedElement, PostgresNonThrowingEncodable {
    let values: Values

    init(_ values: Values) {
        self.values = values
    }

    static var psqlType: PostgresDataType { .text }
    static var psqlFormat: PostgresFormat { .binary }
    static var psqlArrayType: PostgresDataType { .textArray }

    var packedCount: Int { IntegerList.textLength(values) }

    func pack(into bytes: UnsafeMutableRawBufferPointer, at offset: Int) -> Int {
        IntegerList.write(values, count: values.count, into: bytes.assumingMemoryBound(to: UInt8.self), at: offset)
    }

    func encode<JSONEncoder: PostgresJSONEncoder>(into buffer: inout ByteBuffer, context: PostgresEncodingContext<JSONEncoder>) {
        let count = packedCount
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: count) { bytes in pack(into: bytes, at: 0) }
    }
}
