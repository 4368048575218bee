import Foundation
public import ReloadGateStore
import ReloadGateCore

extension GatewayStore {
    /// What most end-to-end tests start from: an app of `sender`'s team, the sender's provider key (every
    /// topic, both environments) and `devices` registered with one widget each (`w1`, kind `scores`).
    /// - Returns: the app's credentials (API key, webhook secret).
    public func addTestSender(bundle: String, sender: ProviderTokenFactory, devices: [String]) async throws -> AppCredentials {
        let credentials = try await createApp(bundle: try BundleID(bundle), teamID: sender.teamID, allowsExemptions: false, now: Date())
        try await addProviderKey(
            StoredProviderKey(
                keyID: sender.keyID, teamID: sender.teamID, publicKeyPEM: sender.publicKeyPEM, topics: [], environments: "both",
                createdAt: Date()
            )
        )
        let widgets = [WidgetRegistration(id: "w1", kind: "scores", family: .systemSmall, configuration: WidgetConfiguration())]
        for token in devices {
            _ = try await putDevice(app: credentials.app, token: try DeviceToken(token), widgets: widgets, previousToken: nil, now: Date())
        }
        return credentials
    }
}
