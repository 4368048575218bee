extension Array {
    /// Makes room for `additional` more elements before they are appended, growing at least twofold.
    ///
    /// A fan-out appends a million decisions, deliveries and snapshots in one turn. Appended one by one,
    /// an array doubles twenty times on the way, and each doubling copies what it holds into fresh memory
    /// that the kernel then maps page by page. Room made once takes one allocation. Growing at least
    /// twofold keeps many calls for a few elements each as cheap as appending: `reserveCapacity` alone
    /// allocates exactly what is asked, so calling it before every small append would copy the whole
    /// array each time.
    @inlinable
    public mutating func reserveRoom(for additional: Int) {
        let needed = count + additional
        guard needed > capacity else { return }
        reserveCapacity(Swift.max(needed, 2 * capacity))
    }
}
