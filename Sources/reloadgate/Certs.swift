import ArgumentParser
import Foundation
import ReloadGateCertificates
import ReloadGateCore

/// `reloadgate certs`: the development PKI (see certs/README.md).
struct Certs: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Create development certificates.",
        subcommands: [Dev.self, Client.self]
    )

    /// `reloadgate certs dev`: a new development CA and server certificate.
    struct Dev: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "(Re)create the development CA and server certificate.",
            discussion: """
                Writes ca.pem, ca-key.pem, server.pem and server-key.pem (P-256) into the directory. The server \
                certificate is valid for localhost, 127.0.0.1 and ::1, plus any --host and --ip given. Existing \
                files are replaced: client certificates of the old CA are no longer trusted.
                """
        )

        @Option(name: .long, help: "Directory of the development certificates.")
        var dir: String = "certs"

        @Option(name: .customLong("host"), help: "An extra DNS name for the server certificate (repeatable).")
        var hosts: [String] = []

        @Option(name: .customLong("ip"), help: "An extra IP address for the server certificate (repeatable).")
        var ipAddresses: [String] = []

        func run() async throws {
            let development = DevelopmentCertificates(directory: dir)
            let replacing = FileManager.default.fileExists(atPath: development.caCertificatePath)
            do {
                try development.recreate(
                    dnsNames: ["localhost"] + hosts,
                    ipAddresses: ["127.0.0.1", "::1"] + ipAddresses,
                    now: Date()
                )
            } catch let error as CertificateFactoryError {
                throw CommandFailure.exit(error.description, status: 2)
            } catch {
                throw CommandFailure.exit(String(describing: error), status: 1)
            }
            if replacing {
                printLine("replaced the development CA: client certificates issued before are no longer trusted")
            }
            printLine("CA certificate (clients trust this): \(development.caCertificatePath)")
            printLine("CA key:                              \(development.caKeyPath)")
            printLine("server certificate:                  \(development.serverCertificatePath)")
            printLine("server key:                          \(development.serverKeyPath)")
        }
    }

    /// `reloadgate certs client`: a client certificate carrying APNs topics.
    struct Client: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Issue a client certificate for certificate-based push authentication.",
            discussion: """
                The certificate is signed by the development CA and carries Apple's APNs topics extension \
                (1.2.840.113635.100.6.3.6) listing each --topic bundle, as Apple's push certificates do. It is \
                written to DIR/NAME.pem with its key in DIR/NAME-key.pem (mode 0600).
                """
        )

        @Option(name: .customLong("topic"), help: "A bundle id the certificate may push to (repeatable).")
        var topics: [String]

        @Option(name: .long, help: "File name (without .pem) of the certificate in the directory.")
        var out: String

        @Option(name: .long, help: "Directory of the development certificates.")
        var dir: String = "certs"

        func run() async throws {
            var bundles: [BundleID] = []
            for topic in topics {
                if topic.hasSuffix(".push-type.widgets") {
                    throw CommandFailure.exit(
                        "--topic takes the bundle id, not the widgets topic: use \(topic.dropLast(18))",
                        status: 2
                    )
                }
                do {
                    bundles.append(try BundleID(topic))
                } catch {
                    throw CommandFailure.exit("--topic \(topic): \(error)", status: 2)
                }
            }
            let development = DevelopmentCertificates(directory: dir)
            guard FileManager.default.fileExists(atPath: development.caCertificatePath) else {
                throw CommandFailure.exit(
                    "no development CA in \(development.directory.path): run `reloadgate certs dev` first",
                    status: 1
                )
            }
            do {
                let paths = try development.issueClientCertificate(name: out, topics: bundles, now: Date())
                printLine("client certificate: \(paths.certificatePath)")
                printLine("client key:         \(paths.keyPath)")
                printLine("topics:             \(bundles.map(\.rawValue).joined(separator: ", "))")
            } catch let error as CertificateFactoryError {
                throw CommandFailure.exit(error.description, status: error == .noTopics || error.isNameError ? 2 : 1)
            } catch {
                throw CommandFailure.exit(String(describing: error), status: 1)
            }
        }
    }
}

extension CertificateFactoryError {
    fileprivate var isNameError: Bool {
        if case .invalidName = self { return true }
        return false
    }
}
