extension Duration {
    /// The duration in whole milliseconds (toward zero): a deadline or a lease as the stores and the
    /// configuration count them.
    public var milliseconds: Int64 {
        components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000
    }

    /// The duration in seconds, with its fraction.
    public var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
