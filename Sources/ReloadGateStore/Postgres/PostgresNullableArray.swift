import NIOCore
import PostgresNIO

/// A one-dimensional PostgreSQL array whose elements may be NULL, bound in the binary format.
///
/// postgres-nio binds `[Element]` but no array with NULL elements, and most columns of the group commit
/// are nullable. Written by hand from the array's binary layout (PostgreSQL's `array_send`: dimensions,
/// a has-nulls flag, the element type, then each element as a length and its bytes, length -1 for NULL)
/// so that a batch's rows travel as typed arrays rather than as JSON text that both sides must print and
/// parse (docs/DECISIONS.md, "PostgreSQL: the group commit binds typed arrays").
struct PostgresNullableArray<Element: PostgresArrayEncodable & PostgresNonThrowingEncodable>: PostgresNonThrowingEncodable {
    var elements: [Element?]

    init(_ elements: [Element?]) {
        self.elements = elements
    }

    static var psqlType: PostgresDataType { Element.psqlArrayType }
    static var psqlFormat: PostgresFormat { .binary }

    func encode<JSONEncoder: PostgresJSONEncoder>(into buffer: inout ByteBuffer, context: PostgresEncodingContext<JSONEncoder>) {
        buffer.writeInteger(elements.isEmpty ? 0 : 1, as: Int32.self)  // dimensions
        buffer.writeInteger(elements.contains { $0 == nil } ? 1 : 0, as: Int32.self)  // has NULLs
        buffer.writeInteger(Element.psqlType.rawValue)
        guard !elements.isEmpty else { return }
        buffer.writeInteger(Int32(elements.count))
        buffer.writeInteger(1, as: Int32.self)  // lower bound
        for element in elements {
            guard let element else {
                buffer.writeInteger(-1, as: Int32.self)
                continue
            }
            // Each element: its length in bytes, then the element in its binary format.
            let lengthIndex = buffer.writerIndex
            buffer.writeInteger(0, as: Int32.self)
            let start = buffer.writerIndex
            element.encode(into: &buffer, context: context)
            buffer.setInteger(Int32(buffer.writerIndex - start), at: lengthIndex)
        }
    }
}
