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
        // An IPv6 address comes in brackets ([::1]); the connection wants it without them.
        let hostName = components.host.flatMap { $0.isEmpty ? nil : $0 }.map {
            $0.hasPrefix("[") && $0.hasSuffix("]") ? String($0.dropFirst().dropLast()) : $0
        }
        socketDirectory = query["host"].flatMap { $0.hasPrefix("/") ? $0 : nil }
        host = socketDirectory == nil ? (hostName ?? query["host"] ?? "localhost") : nil
        if components.rangeOfPort != nil {
            // URLComponents leaves `port` nil for one beyond Int (a 20-digit port): not 5432 then.
            guard let value = components.port, (1...65535).contains(value) else {
                throw Invalid(description: "store.url's port must be 1 to 65535")
            }
            port = value
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

    /// Unix socket of the server, for a `host=/directory` URL.
    private var socketPath: String? {
        socketDirectory.map { URL(fileURLWithPath: $0).appendingPathComponent(".s.PGSQL.\(port)").path }
    }

    /// What `sslmode` asks of TLS: whether to use it, and the settings (`verify-full` checks the server's
    /// certificate against `sslrootcert` or the system's roots and the host name; `prefer` and `require`,
    /// as libpq, do not check it).
    private var tls: (use: TLSUse, configuration: TLSConfiguration) {
        var configuration = TLSConfiguration.makeClientConfiguration()
        switch sslMode {
        case "disable":
            return (.disable, configuration)
        case "verify-full":
            if let sslRootCertificate { configuration.trustRoots = .file(sslRootCertificate) }
            return (.require, configuration)
        case "require":
            configuration.certificateVerification = .none
            return (.require, configuration)
        default:
            configuration.certificateVerification = .none
            return (.prefer, configuration)
        }
    }

    private enum TLSUse { case disable, prefer, require }

    /// The configuration of one postgres-nio connection (the check at open, outside the pool).
    public func connectionConfiguration() throws -> PostgresConnection.Configuration {
        if let socketPath {
            return .init(unixSocketPath: socketPath, username: username, password: password, database: database)
        }
        let (use, settings) = tls
        let mode: PostgresConnection.Configuration.TLS =
            switch use {
            case .disable: .disable
            case .prefer: .prefer(try NIOSSLContext(configuration: settings))
            case .require: .require(try NIOSSLContext(configuration: settings))
            }
        return .init(host: host ?? "localhost", port: port, username: username, password: password, database: database, tls: mode)
    }

    /// The client (pool) configuration of postgres-nio: the store's, and tests' that set up databases.
    public func clientConfiguration() throws -> PostgresClient.Configuration {
        var configuration: PostgresClient.Configuration
        if let socketPath {
            configuration = .init(unixSocketPath: socketPath, username: username, password: password, database: database)
        } else {
            let (use, settings) = tls
            let mode: PostgresClient.Configuration.TLS =
                switch use {
                case .disable: .disable
                case .prefer: .prefer(settings)
                case .require: .require(settings)
                }
            configuration = .init(host: host ?? "localhost", port: port, username: username, password: password, database: database, tls: mode)
        }
        configuration.options.connectTimeout = .seconds(10)
        configuration.options.maximumConnections = 8
        return configuration
    }
}
