import Foundation
import NIOCore
import NIOSSL
import ReloadGateAPNs
import SwiftASN1
import X509

/// What both transports of the APNs listener need from their connection: the client certificate's
/// topics, read once.
enum IngressConnection {
    /// Asks an open connection to finish its requests and close (graceful shutdown).
    struct Drain: Sendable {}

    /// The connection's client certificate: its serial number and APNs topics; `nil` when it presented
    /// none (token authentication). A certificate without the APNs topics extension allows no topic.
    static func clientCertificate(_ pipeline: ChannelPipeline) -> ClientCertificate? {
        guard let handler = try? pipeline.syncOperations.handler(type: NIOSSLServerHandler.self),
            let peer = handler.peerCertificate
        else { return nil }
        guard let der = try? peer.toDERBytes(), let certificate = try? Certificate(derEncoded: der) else {
            return ClientCertificate(serial: "", topics: [])
        }
        let serial = certificate.serialNumber.bytes.map { String(format: "%02x", $0) }.joined()
        let topics = (try? certificate.apnsTopics())??.topics.map(\.name) ?? []
        return ClientCertificate(serial: String(serial.drop(while: { $0 == "0" })), topics: topics)
    }
}

/// A push sender's client certificate, as the push endpoint needs it.
struct ClientCertificate: Sendable {
    /// Lower-case hex without leading zeros.
    var serial: String
    /// The bundles of its APNs topics extension.
    var topics: [String]
}
