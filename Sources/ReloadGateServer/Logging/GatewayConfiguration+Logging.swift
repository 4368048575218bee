public import Logging

extension GatewayConfiguration.Log {
    /// Makes the log handler for `label` in the configured format and level.
    ///
    /// The executable passes this to `LoggingSystem.bootstrap`; tests build loggers directly.
    public func makeHandler(label: String) -> any LogHandler {
        var handler: any LogHandler =
            switch format {
            case .text: StreamLogHandler.standardError(label: label)
            case .json: JSONLogHandler(label: label)
            }
        handler.logLevel = level
        return handler
    }
}
