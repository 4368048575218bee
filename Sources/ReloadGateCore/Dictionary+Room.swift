extension Dictionary {
    /// Gives back the storage of a large dictionary that most of its entries have left.
    ///
    /// Swift keeps a dictionary's room when entries are removed. A herd or a burst that filled one to a
    /// million entries would leave room for them (tens of megabytes, written once and so resident) long
    /// after the last one left, so the memory would follow the most ever held, not what is held now.
    /// Rebuilt at the size of what it holds once that is below an eighth of its room: a rebuild copies few
    /// entries against the many removed before it, and a dictionary still growing is never rebuilt.
    /// - Parameter kept: room kept whatever the dictionary holds (small dictionaries are left alone).
    @inlinable
    public mutating func giveBackSpareRoom(keeping kept: Int) {
        guard capacity > kept, count < capacity / 8 else { return }
        var smaller = Self(minimumCapacity: count)
        for (key, value) in self { smaller[key] = value }
        self = smaller
    }
}
