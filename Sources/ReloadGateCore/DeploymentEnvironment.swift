/// The APNs environment a listener, an app or a key belongs to.
///
/// A gateway listener runs in one environment; device tokens and provider keys of the other one are
/// refused, as Apple's sandbox and production services refuse each other's.
public enum DeploymentEnvironment: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// Apple's development service (`api.sandbox.push.apple.com`): apps run from Xcode.
    case sandbox
    /// Apple's production service (`api.push.apple.com`): TestFlight and App Store builds.
    case production

    public var description: String { rawValue }
}
