// swift-tools-version: 6.2
// ReloadGateKit: what an app and its widget extension use to tell a ReloadGate gateway their push tokens,
// widgets, controls and timelines. No server dependencies; the WidgetKit layer compiles on Apple platforms
// only, the rest (and its tests) on Linux too.
import PackageDescription

let package = Package(
    name: "ReloadGateKit",
    platforms: [.iOS(.v17), .macOS(.v14), .watchOS(.v10), .visionOS(.v1)],
    products: [
        .library(name: "ReloadGateKit", targets: ["ReloadGateKit"])
    ],
    targets: [
        .target(name: "ReloadGateKit"),
        .testTarget(name: "ReloadGateKitTests", dependencies: ["ReloadGateKit"]),
    ]
)
