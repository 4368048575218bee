import Foundation
import Hummingbird
import NIOCore
import ReloadGateAPI
import ReloadGateCore
import ReloadGateStore

/// What a call made with an app's registration key may spend (docs/API.md, "The registration key"): the
/// key may ship inside the app, so whoever pulls it out may call with it. Each device token gets
/// `registration.requestsPerMinute` calls a minute, each client address `registration.requestsPerAddressPerMinute`,
/// and each app `registration.newDevicesPerMinute` new devices; past any of them the call is refused with
/// `429` and `retry-after`, before anything is written.
/// Calls with the app's API key are not limited here.
final class RegistrationGuard: Sendable {
    private let perToken: RateLimiter<ContinuousClock>
    private let perAddress: RateLimiter<ContinuousClock>?
    private let newDevices: RateLimiter<ContinuousClock>

    init(_ limits: GatewayConfiguration.Registration) {
        // A burst of a minute's worth (one at its time and the rest early): an app that reports its widgets,
        // its controls and a timeline at once is never refused.
        perToken = Self.perMinute(limits.requestsPerMinute)
        perAddress = limits.requestsPerAddressPerMinute > 0 ? Self.perMinute(limits.requestsPerAddressPerMinute) : nil
        newDevices = Self.perMinute(limits.newDevicesPerMinute)
    }

    /// Admits a call for `token` of `app` from `address` (the client's IP address, without its port;
    /// `nil`: not known), or refuses it with `429`. The address is counted first: a client that walks
    /// through tokens is stopped by it.
    func admit(token: DeviceToken, app: App, address: String?) throws(APIError) {
        if let perAddress, let address, let wait = perAddress.wait(for: address) {
            throw .tooManyRequests(
                "too many calls from this address with the registration key (registration.requestsPerAddressPerMinute)",
                retryAfter: Self.seconds(wait)
            )
        }
        if let wait = perToken.wait(for: app.bundle.rawValue + "/" + token.hex) {
            throw .tooManyRequests(
                "too many calls for this device token with the registration key (registration.requestsPerMinute)",
                retryAfter: Self.seconds(wait)
            )
        }
    }

    /// Admits one more device new to `app`, or refuses it with `429`.
    func admitNewDevice(app: App) throws(APIError) {
        if let wait = newDevices.wait(for: app.bundle.rawValue) {
            throw .tooManyRequests(
                "too many new devices for \(app.bundle) with the registration key (registration.newDevicesPerMinute)",
                retryAfter: Self.seconds(wait)
            )
        }
    }

    /// `count` a minute, all of them at once if need be, no more.
    static func perMinute(_ count: Int) -> RateLimiter<ContinuousClock> {
        let interval = Duration.seconds(60) / max(1, count)
        return RateLimiter(every: interval, tolerance: .seconds(60) - interval, clock: ContinuousClock())
    }

    /// What the per-address limit counts a client by: an IPv4 address whole, an IPv6 address by its /64
    /// (one host, or one customer of a provider, holds a whole /64: counting its addresses one by one
    /// would give it 2^64 limits); an IPv4 address mapped into IPv6 as IPv4. `nil` for a Unix socket.
    static func addressKey(_ address: SocketAddress?) -> String? {
        switch address {
        case .v4?:
            return address?.ipAddress
        case .v6?:
            var bytes = [UInt8](repeating: 0, count: 16)
            guard let text = address?.ipAddress, inet_pton(AF_INET6, text, &bytes) == 1 else { return address?.ipAddress }
            if bytes[0..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xff, bytes[11] == 0xff {
                return bytes[12..<16].map(String.init).joined(separator: ".")
            }
            let groups = stride(from: 0, to: 8, by: 2).map { String(UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]), radix: 16) }
            return groups.joined(separator: ":") + "::/64"
        default:
            return nil
        }
    }

    /// Whole seconds, rounded up.
    static func seconds(_ duration: Duration) -> Int {
        let (seconds, attoseconds) = duration.components
        return Int(seconds) + (attoseconds > 0 ? 1 : 0)
    }
}

/// What a bearer key of the registry API may do.
enum KeyScope: Sendable, Equatable {
    /// The app's API key: everything of its app.
    case apiKey
    /// The app's registration key: put and delete its devices, controls, activities and timelines.
    case registration

    /// The scope a key's prefix says (`rgr_`: a registration key; whether the key is valid is the store's
    /// to say).
    init(key: some StringProtocol) {
        self = key.hasPrefix(AppCredentials.registrationKeyPrefix) ? .registration : .apiKey
    }

    /// Whether `request` presents a registration key (`authorization: bearer rgr_...`), valid or not: the
    /// webhook and the admin API refuse it by its look, without a lookup.
    static func presentsRegistrationKey(_ request: Request) -> Bool {
        guard let credential = HeaderValue.bearerCredential(request.headers[.authorization]) else { return false }
        return KeyScope(key: credential.drop { $0 == " " }) == .registration
    }

    /// The refusal of a call the registration key may not make, naming what `needs` instead.
    static func refusal(needs: String) -> APIError {
        .forbidden("this is the app's registration key: it may only put and delete the app's devices, controls, activities and timelines; \(needs)")
    }

    /// The refusal of a registry call the registration key may not make.
    static let registrationOnly = refusal(needs: "this call needs the app's API key")
}
