/// A list that keeps its first element inline and the others in an array: a list of one element, what
/// almost every delivery has (one instance reloaded, one request served), allocates nothing. The
/// scheduler releases a delivery for most requests, so two arrays each were a fifth of its time
/// (docs/benchmarks-history.md).
///
/// Inlinable, so that the modules reading deliveries (the engine's ledger rows, the delivery worker)
/// get code specialized to their element: unspecialized, each `endIndex` and subscript looked up the
/// generic metadata (a tenth of the samples in a profile of a fan-out over 200,000 instances).
public struct CompactList<Element: Hashable & Sendable>: RandomAccessCollection, Hashable, Sendable, ExpressibleByArrayLiteral {
    @usableFromInline var head: Element?
    @usableFromInline var tail: [Element] = []

    @inlinable public init() {}

    @inlinable public init(arrayLiteral elements: Element...) {
        self.init(elements)
    }

    @inlinable public init(_ elements: some Sequence<Element>) {
        for element in elements { append(element) }
    }

    @inlinable public var startIndex: Int { 0 }
    @inlinable public var endIndex: Int { head == nil ? 0 : 1 + tail.count }

    @inlinable public subscript(position: Int) -> Element {
        precondition(position >= 0 && position < endIndex, "index out of range")
        return position == 0 ? head! : tail[position - 1]
    }

    @inlinable public mutating func append(_ element: Element) {
        if head == nil {
            head = element
        } else {
            tail.append(element)
        }
    }

    @inlinable public mutating func append(contentsOf elements: CompactList<Element>) {
        guard let first = elements.head else { return }
        append(first)
        if !elements.tail.isEmpty { tail.append(contentsOf: elements.tail) }
    }
}
