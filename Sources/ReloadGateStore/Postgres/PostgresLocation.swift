import Foundation
import NIOSSL
public import PostgresNIO

/// Where a PostgreSQL store lives, parsed from a libpq-style URL:
/// `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?sslmode=MODE&sslrootcert=FILE]`, or
/// `postgres://USER@/DATABASE?host=/run/postgresql` for a Unix socket (its directory; port 5432 unless given).
///
/// `sslmode` is `disable`, `prefer` (the default, as libpq's), `require` (TLS, the server's certificate not
/// checked) or `verify-full` (TLS, the certificate checked against `sslrootcert` or the system's roots and
/// the host name). The password may come from a file instead (`store.passwordFile`); it is never part
/// of ``description``.
public struct PostgresLocation: Sendable, CustomStringConvertible {
    public var username: String
    public var password: String?
    public var host: String?
    public var socketDirectory: String?
    public var port: Int
    public var database: String
    public var sslMode: String
    public var sslRootCertificate: String?

    /// Why a URL was refused.
    public struct Invalid: Error, CustomStringConvertible {
        public var description: String
    }

    /// Parses `url`; `passwordFile` (its first line) overrides the URL's password.
    public init(url: String, passwordFile: String? = nil) throws(Invalid) {
        guard let components = URLComponents(string: url), let scheme = components.scheme,
            ["postgres", "postgresql"].contains(scheme.lowercased())
        else {
            throw Invalid(description: "store.url must be postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE")
        }
        guard let user = components.user, !user.isEmpty else {
            throw Invalid(description: "store.url names no user (postgres://USER@HOST/DATABASE)")
        }
        username = user.removingPercentEncoding ?? user
        password = components.password.map { $0.removingPercentEncoding ?? $0 }
        let query = Dictionary(
            (components.queryItems ?? []).map { ($0.name, $0.value ?? "") },
            uniquingKeysWith: { _, last in last }
        )
        let hostName = components.host.flatMap { $0.isEmpty ? nil : $0 }
        socketDirectory = query["host"].flatMap { $0.hasPrefix("/") ? $0 : nil }
        host = socketDirectory == nil ? (hostName ?? query["host"] ?? "localhost") : nil
        if let portText = components.port {
            guard (1...65535).contains(portText) else { throw Invalid(description: "store.url's port must be 1 to 65535") }
            port = portText
        } else if let portText = query["port"] {
            guard let value = Int(portText), (1...65535).contains(value) else {
                throw Invalid(description: "store.url's port must be 1 to 65535")
            }
            port = value
        } else {
            port = 5432
        }
        let path = components.path.hasPrefix("/") ? String(components.path.dropFirst()) : components.path
        database = path.isEmpty ? username : (path.removingPercentEncoding ?? path)
        sslMode = query["sslmode"] ?? "prefer"
        guard ["disable", "prefer", "require", "verify-full"].contains(sslMode) else {
            throw Invalid(description: "store.url's sslmode must be disable, prefer, require or verify-full, not \(sslMode)")
        }
        sslRootCertificate = query["sslrootcert"]
        if let passwordFile {
            guard let text = try? String(contentsOfFile: passwordFile, encoding: .utf8) else {
                throw Invalid(description: "cannot read store.passwordFile \(passwordFile)")
            }
            password = text.split(separator: "\n", omittingEmptySubsequences: false).first.map(String.init) ?? ""
        }
    }

    /// The URL without the password, for log lines and messages.
    public var description: String {
        if let socketDirectory {
            return "postgres://\(username)@/\(database)?host=\(socketDirectory)&port=\(port)"
        }
        return "postgres://\(username)@\(host ?? "localhost"):\(port)/\(database)?sslmode=\(sslMode)"
    }

    /// The client configuration of postgres-nio (for tests that set up databases beside the store).
    public func testClientConfiguration() throws -> PostgresClient.Configuration {
        try clientConfiguration()
    }

    /// The configuration of one postgres-nio connection (the check at open, outside the pool).
    func connectionConfiguration() throws -> PostgresConnection.Configuration {
        if let socketDirectory {
            let socket = URL(fileURLWithPath: socketDirectory).appendingPathComponent(".s.PGSQL.\(port)").path
            return .init(unixSocketPath: socket, username: username, password: password, database: database)
        }
        var tls = TLSConfiguration.makeClientConfiguration()
        let mode: PostgresConnection.Configuration.TLS
        switch sslMode {
        case "disable":
            mode = .disable
        case "verify-full":
            if let sslRootCertificate { tls.trustRoots = .file(sslRootCertificate) }
            mode = .require(try NIOSSLContext(configuration: tls))
        case "require":
            tls.certificateVerification = .none
            mode = .require(try NIOSSLContext(configuration: tls))
        default:
            tls.certificateVerification = .none
            mode = .prefer(try NIOSSLContext(configuration: tls))
        }
        return PostgresConnection.Configuration(
            host: host ?? "localhost", port: port, username: username, password: password, database: database, tls: mode
        )
    }

    /// The client configuration of postgres-nio.
    func clientConfiguration() throws -> PostgresClient.Configuration {
        var configuration: PostgresClient.Configuration
        if let socketDirectory {
            let socket = URL(fileURLWithPath: socketDirectory).appendingPathComponent(".s.PGSQL.\(port)").path
            configuration = .init(unixSocketPath: socket, username: username, password: password, database: database)
        } else {
            var tls = TLSConfiguration.makeClientConfiguration()
            let mode: PostgresClient.Configuration.TLS
            switch sslMode {
            case "disable":
                mode = .disable
            case "verify-full":
                if let sslRootCertificate {
                    tls.trustRoots = .file(sslRootCertificate)
                }
                mode = .require(tls)
            case "require":
                tls.certificateVerification = .none
                mode = .require(tls)
            default:
                tls.certificateVerification = .none
                mode = .prefer(tls)
            }
            configuration = .init(
                host: host ?? "localhost", port: port, username: username, password: password, database: database, tls: mode
            )
        }
        configuration.options.connectTimeout = .seconds(10)
        configuration.options.maximumConnections = 8
        return configuration
    }
}
