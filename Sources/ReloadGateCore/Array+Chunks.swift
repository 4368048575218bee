extension Array {
    /// The array in consecutive slices of at most `size` elements (`size` at least 1), in order: a batch
    /// cut into parts that each fit one statement, one read within a deadline, or one group in flight.
    /// (swift-algorithms' `chunks(ofCount:)` does the same; the project does not take that package for
    /// one function.)
    public func chunks(of size: Int) -> [ArraySlice<Element>] {
        precondition(size > 0, "a chunk holds at least one element")
        return stride(from: 0, to: count, by: size).map { self[$0..<Swift.min($0 + size, count)] }
    }
}
