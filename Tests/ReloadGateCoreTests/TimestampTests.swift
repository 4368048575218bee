import Foundation
import ReloadGateCore
import Testing

struct TimestampTests {
    /// The calendar-free RFC 3339 text against Foundation's formatter (whole seconds, so that no
    /// floating-point rounding is involved; the milliseconds are appended), over random times from 1583
    /// to 9999 (Foundation switches to the Julian calendar before the Gregorian reform; RFC 3339 does
    /// not) and the edges around the epoch and a leap day.
    @Test func rfc3339MatchesFoundationsFormatter() {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime]
        formatter.timeZone = TimeZone(identifier: "UTC")
        var generator = SystemRandomNumberGenerator()
        let first: Int64 = -12_212_553_600  // 1583-01-01T00:00:00Z
        let last: Int64 = 253_402_300_799  // 9999-12-31T23:59:59Z
        var samples: [(seconds: Int64, millis: Int64)] = [
            (0, 0), (-1, 999), (0, 1), (951_782_400, 0), (951_868_799, 999), (first, 0), (last, 999),
        ]
        for _ in 0..<5_000 {
            samples.append((Int64.random(in: first...last, using: &generator), Int64.random(in: 0...999, using: &generator)))
        }
        for (seconds, millis) in samples {
            let whole = formatter.string(from: Date(timeIntervalSince1970: Double(seconds)))  // ...:SSZ
            let fraction = String(millis + 1000).dropFirst()
            let expected = whole.dropLast() + "." + fraction + "Z"
            #expect(Timestamp(milliseconds: seconds * 1000 + millis).rfc3339 == expected, "\(seconds) s \(millis) ms")
        }
    }

    // Literal expectations: Foundation's formatter rounds milliseconds through a Double (….122Z for .123).
    @Test(arguments: [
        (0, "1970-01-01T00:00:00.000Z"), (1_790_172_000_123, "2026-09-23T14:00:00.123Z"),
        (951_782_400_000, "2000-02-29T00:00:00.000Z"), (4_102_444_799_999, "2099-12-31T23:59:59.999Z"),
        (-1, "1969-12-31T23:59:59.999Z"), (1_709_164_800_500, "2024-02-29T00:00:00.500Z"),
    ] as [(Int64, String)])
    func rfc3339InUTCWithMilliseconds(_ milliseconds: Int64, _ expected: String) {
        #expect(Timestamp(milliseconds: milliseconds).rfc3339 == expected)
    }

    /// The gateway's own spelling reads back to the same time, over random times of the accepted range,
    /// with and without the milliseconds.
    @Test func rfc3339ReadsBackWhatRFC3339Writes() {
        var generator = SystemRandomNumberGenerator()
        var samples: [Int64] = [0, 951_782_400_000, 4_102_444_799_999, Timestamp.acceptedRange.upperBound, 1_709_164_800_500]
        for _ in 0..<5_000 { samples.append(Int64.random(in: Timestamp.acceptedRange, using: &generator)) }
        for milliseconds in samples {
            let text = Timestamp(milliseconds: milliseconds).rfc3339
            #expect(Timestamp(rfc3339: text)?.milliseconds == milliseconds, "\(text)")
            let whole = String(text.prefix(19)) + "Z"
            #expect(Timestamp(rfc3339: whole)?.milliseconds == milliseconds - milliseconds % 1000, "\(whole)")
        }
    }

    /// Every spelling RFC 3339 allows (section 5.6), computed by hand; nothing it does not allow, no date
    /// that does not exist, and no time outside the accepted range once in UTC.
    @Test func rfc3339ReadsEverySpellingTheRFCAllows() {
        let cases: [(String, Int64)] = [
            ("2024-02-29T12:30:45.250Z", 1_709_209_845_250),
            ("2024-02-29t12:30:45.25z", 1_709_209_845_250),
            ("2024-02-29T12:30:45.2509999Z", 1_709_209_845_250),
            ("2024-02-29T12:30:45.2Z", 1_709_209_845_200),
            ("2024-02-29T14:30:45+02:00", 1_709_209_845_000),
            ("2024-02-29T12:30:45-00:00", 1_709_209_845_000),
            // -21:04 is 21 h 4 min behind UTC: 10:39:47 there is 07:43:47 the next day in UTC.
            ("2026-11-29T10:39:47-21:04", 1_796_024_627_000),  // 2026-11-30T07:43:47Z
            ("2016-12-31T23:59:60Z", 1_483_228_800_000),
            ("1970-01-01T01:00:00+01:00", 0),
            ("9999-12-31T23:59:59.999Z", Timestamp.acceptedRange.upperBound),
        ]
        for (text, milliseconds) in cases {
            #expect(Timestamp(rfc3339: text)?.milliseconds == milliseconds, "\(text)")
        }
        for text in [
            "2026-02-29T00:00:00Z", "2026-13-01T00:00:00Z", "2026-00-10T00:00:00Z", "2026-04-31T00:00:00Z", "2026-01-01T24:00:00Z",
            "2026-01-01T00:60:00Z", "2026-01-01T00:00:61Z", "2026-01-01T00:00:00+24:00", "2026-01-01T00:00:00+01:60", "2026-01-01 00:00:00Z",
            "2026-1-01T00:00:00Z", "2026-01-01T00:00:00.Z", "2026-01-01T00:00:00", "2026-01-01T00:00:00+0100", "+026-01-01T00:00:00Z",
            "2026-01-01T00:00:00Zx", "",
        ] {
            #expect(Timestamp(rfc3339: text) == nil, "\(text)")
            #expect(!Timestamp.isRFC3339(text), "\(text)")
        }
        for text in ["1969-12-31T23:59:59.999Z", "1970-01-01T00:30:00+01:00", "9999-12-31T23:00:00-01:00", "0001-01-01T00:00:00Z"] {
            #expect(Timestamp(rfc3339: text) == nil, "\(text)")
            #expect(Timestamp.isRFC3339(text), "\(text) is RFC 3339, only out of range")
        }
    }
}
