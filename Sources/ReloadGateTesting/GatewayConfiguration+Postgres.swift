public import ReloadGateServer

extension GatewayConfiguration {
    /// Runs the gateway on the PostgreSQL database at `url` (a test database's, or a proxy's in front of
    /// it), with its data directory (secrets key, outbox) at `dataDirectory`.
    public mutating func usePostgres(_ url: String, dataDirectory: String) {
        store.kind = .postgres
        store.url = url
        self.dataDirectory = dataDirectory
    }
}
