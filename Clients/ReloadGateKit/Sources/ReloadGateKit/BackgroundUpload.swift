#if !canImport(FoundationNetworking)
import Foundation

/// Requests sent in a background `URLSession` (Apple platforms): the system sends them, retrying as the
/// network allows, after the process that started them is gone.
public enum BackgroundUpload {
    /// A background session whose files live in the app group `appGroup` (a widget extension's uploads
    /// need a shared container).
    public static func session(identifier: String, appGroup: String?) -> URLSession {
        let configuration = URLSessionConfiguration.background(withIdentifier: identifier)
        configuration.sharedContainerIdentifier = appGroup
        configuration.sessionSendsLaunchEvents = false
        return URLSession(configuration: configuration)
    }

    /// Writes `body` to a file in `directory` (a background upload takes a file) and starts the upload.
    /// Files of uploads started more than a day ago are removed (the system has read them by then).
    public static func start(_ request: URLRequest, body: Data, in session: URLSession, directory: URL) throws {
        let manager = FileManager.default
        try manager.createDirectory(at: directory, withIntermediateDirectories: true)
        let old = Date(timeIntervalSinceNow: -86_400)
        for file in (try? manager.contentsOfDirectory(at: directory, includingPropertiesForKeys: [.contentModificationDateKey])) ?? [] {
            let modified = (try? file.resourceValues(forKeys: [.contentModificationDateKey]))?.contentModificationDate
            if let modified, modified < old { try? manager.removeItem(at: file) }
        }
        let file = directory.appendingPathComponent("\(UUID().uuidString).json")
        try body.write(to: file, options: .atomic)
        session.uploadTask(with: request, fromFile: file).resume()
    }
}
#endif
