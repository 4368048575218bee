import Foundation
import ReloadGateAPI
import Testing

@Suite(.timeLimit(.minutes(5)))
struct WebhookSignatureTests {
    let secret = "rgs_test-secret"
    let body = Data(#"{"kind":"scores","match":{"team":"42"}}"#.utf8)
    let now = Date(timeIntervalSince1970: 1_790_000_000)

    @Test func aSignatureMadeWithOpensslVerifies() throws {
        // printf '%s.%s' 1790000000 "$body" | openssl dgst -sha256 -hmac rgs_test-secret
        let header = "t=1790000000,v1=1b203db3439429114c4d5e93ce9df1694fbbe33637375ac330be5d838b711576"
        try WebhookSignature(header: header).verify(body: body, secret: secret, now: now)
        #expect(WebhookSignature.header(body: body, timestamp: 1_790_000_000, secret: secret) == header)
    }

    @Test func signAndVerifyRoundTripAndAnyOfSeveralSignaturesMayMatch() throws {
        let header = WebhookSignature.header(body: body, timestamp: 1_790_000_000, secret: secret)
        try WebhookSignature(header: header).verify(body: body, secret: secret, now: now)
        let rotating = header + ",v1=" + String(repeating: "00", count: 32)
        try WebhookSignature(header: rotating).verify(body: body, secret: secret, now: now)
        let otherFirst = "t=1790000000,v1=" + String(repeating: "11", count: 32) + "," + header.split(separator: ",")[1]
        try WebhookSignature(header: otherFirst).verify(body: body, secret: secret, now: now)
    }

    @Test func anAppsKeyedSecretChecksCallAfterCallAsTheSecretDoes() throws {
        // The route keys the secret once (kept with the app) and checks every call with it.
        let key = WebhookSignature.Key(secret: secret)
        let signed = WebhookSignature.header(body: body, timestamp: 1_790_000_000, secret: secret)
        // Spaces around the parts and upper-case digits are read as the lower-case header.
        let loose = " t = 1790000000 , v1 = " + signed.split(separator: "=")[2].uppercased()
        for header in [signed, loose, signed, loose] {
            try WebhookSignature(header: header).verify(body: body, key: key, now: now)
        }
        #expect(throws: WebhookSignature.Failure.mismatch) {
            try WebhookSignature(header: signed).verify(body: body, key: WebhookSignature.Key(secret: "rgs_other"), now: now)
        }
        #expect(throws: WebhookSignature.Failure.mismatch) {
            try WebhookSignature(header: signed).verify(body: Data(#"{"kind":"news"}"#.utf8), key: key, now: now)
        }
        try WebhookSignature(header: signed).verify(body: body, key: key, now: now)
    }

    @Test func aChangedBodyOrAnotherSecretIsAMismatch() throws {
        let signature = try WebhookSignature(header: WebhookSignature.header(body: body, timestamp: 1_790_000_000, secret: secret))
        #expect(throws: WebhookSignature.Failure.mismatch) {
            try signature.verify(body: Data(#"{"kind":"news"}"#.utf8), secret: secret, now: now)
        }
        #expect(throws: WebhookSignature.Failure.mismatch) {
            try signature.verify(body: body, secret: "rgs_other", now: now)
        }
    }

    @Test func aStaleOrFutureTimestampIsRefused() throws {
        for offset in [-301, 301] as [Int64] {
            let signature = try WebhookSignature(header: WebhookSignature.header(body: body, timestamp: 1_790_000_000 + offset, secret: secret))
            #expect(throws: WebhookSignature.Failure.outsideWindow(signedAt: 1_790_000_000 + offset, now: 1_790_000_000)) {
                try signature.verify(body: body, secret: secret, now: now)
            }
        }
        let edge = try WebhookSignature(header: WebhookSignature.header(body: body, timestamp: 1_790_000_000 - 300, secret: secret))
        try edge.verify(body: body, secret: secret, now: now)
    }

    @Test(arguments: [
        (nil as String?, WebhookSignature.Failure.missing),
        ("", .missing),
        ("v1=abcd", .malformed),
        ("t=1790000000", .malformed),
        ("t=soon,v1=" + String(repeating: "00", count: 32), .malformed),
        ("t=1790000000,v1=xyz", .malformed),
        ("t=1790000000,v1=" + String(repeating: "00", count: 31), .malformed),
        ("t=1,t=2,v1=" + String(repeating: "00", count: 32), .malformed),
    ])
    func malformedHeadersAreRefusedWithTheirReason(_ header: String?, _ failure: WebhookSignature.Failure) {
        #expect(throws: failure) { try WebhookSignature(header: header) }
    }
}
