public import Foundation
public import ReloadGateCore

/// What a store records about itself: the environment it was created for and when.
public struct StoreInfo: Equatable, Sendable {
    /// The environment whose device tokens the store holds.
    public var environment: DeploymentEnvironment
    /// When the store was created.
    public var createdAt: Date
}

