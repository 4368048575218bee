/// A list that keeps its first element inline and the others in an array: a list of one element, what
/// almost every delivery has (one instance reloaded, one request served), allocates nothing. The
/// scheduler releases a delivery for most requests, so two arrays each were a fifth of its time
/// (docs/benchmarks-history.md).
public struct CompactList<Element: Hashable & Sendable>: RandomAccessCollection, Hashable, Sendable, ExpressibleByArrayLiteral {
    private var head: Element?
    private var tail: [Element] = []

    public init() {}

    public init(arrayLiteral elements: Element...) {
        self.init(elements)
    }

    public init(_ elements: some Sequence<Element>) {
        for element in elements { append(element) }
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int { head == nil ? 0 : 1 + tail.count }

    public subscript(position: Int) -> Element {
        precondition(position >= 0 && position < endIndex, "index out of range")
        return position == 0 ? head! : tail[position - 1]
    }

    public mutating func append(_ element: Element) {
        if head == nil {
            head = element
        } else {
            tail.append(element)
        }
    }

    public mutating func append(contentsOf elements: CompactList<Element>) {
        guard let first = elements.head else { return }
        append(first)
        if !elements.tail.isEmpty { tail.append(contentsOf: elements.tail) }
    }
}
