import Foundation
import Testing

@testable import ReloadGateServer

/// The dashboard's colours meet WCAG 2.1 AA: text against its backgrounds at least 4.5:1, chart colours
/// and borders of controls against the card at least 3:1 (graphical objects). Read from the style sheet
/// compiled into the binary, so that a colour changed there is checked here.
struct DashboardContrastTests {
    /// The `--name: #rrggbb` custom properties of the style sheet.
    static let palette: [String: (Double, Double, Double)] = {
        let css = String(decoding: PackageResources.dashboard_css, as: UTF8.self)
        var colours: [String: (Double, Double, Double)] = [:]
        for match in css.matches(of: /--([a-z0-9-]+):\s*#([0-9a-fA-F]{6});/) {
            let hex = UInt32(match.2, radix: 16)!
            colours[String(match.1)] = (Double(hex >> 16 & 0xff), Double(hex >> 8 & 0xff), Double(hex & 0xff))
        }
        return colours
    }()

    /// WCAG's relative luminance and contrast ratio.
    static func contrast(_ a: String, _ b: String) throws -> Double {
        func luminance(_ colour: (Double, Double, Double)) -> Double {
            func channel(_ value: Double) -> Double {
                let c = value / 255
                return c <= 0.03928 ? c / 12.92 : pow((c + 0.055) / 1.055, 2.4)
            }
            return 0.2126 * channel(colour.0) + 0.7152 * channel(colour.1) + 0.0722 * channel(colour.2)
        }
        let (x, y) = (luminance(try #require(palette[a], "no --\(a)")), luminance(try #require(palette[b], "no --\(b)")))
        return (max(x, y) + 0.05) / (min(x, y) + 0.05)
    }

    @Test(arguments: [
        ("text", "card"), ("text", "background"), ("muted", "card"), ("muted", "background"), ("error", "card"),
        ("accent-text", "accent"), ("accent", "card"),
    ])
    func textHasAtLeast4Point5To1(_ pair: (String, String)) throws {
        #expect(try Self.contrast(pair.0, pair.1) >= 4.5, "\(pair)")
    }

    @Test(arguments: (1...8).map { "chart-\($0)" } + ["muted"])
    func graphicsHaveAtLeast3To1AgainstTheCard(_ name: String) throws {
        #expect(try Self.contrast(name, "card") >= 3, "\(name)")
    }

    @Test func thePaletteIsReadFromTheStyleSheet() {
        #expect(Self.palette.count >= 15)
    }
}
