import Crypto
import Foundation

/// Seals secrets that the gateway must be able to read back (webhook secrets: verifying an HMAC needs
/// the key itself) with AES-GCM under a key kept in the data directory (`secrets.key`, mode 0600,
/// created on first use). A copy of the database alone does not reveal them.
///
/// Losing `secrets.key` makes every sealed secret unreadable: back it up with the database, keep it
/// out of database dumps.
struct SecretSealer: Sendable {
    static let fileName = "secrets.key"
    private let key: SymmetricKey

    /// Loads the key from `directory`, creating it when missing.
    init(directory: String) throws(StoreError) {
        let path = URL(fileURLWithPath: directory).appendingPathComponent(Self.fileName).path
        if let data = FileManager.default.contents(atPath: path) {
            guard data.count == 32 else {
                throw .corrupt(reason: "\(path) does not hold a 256-bit key")
            }
            key = SymmetricKey(data: data)
            return
        }
        let fresh = SymmetricKey(size: .bits256)
        let data = fresh.withUnsafeBytes { Data($0) }
        // Written whole to a file of its own, then published with link(2), which fails when the key
        // exists: two processes (or stores) creating it at once end up with one key, and no reader ever
        // sees a partly written file.
        let temporary = path + ".\(getpid()).\(UInt64.random(in: 0 ... .max))"
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw .cannotOpen(path: path, reason: "cannot create the secrets key: \(String(cString: strerror(errno)))")
        }
        let written = data.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        let synced = fsync(descriptor)
        close(descriptor)
        defer { unlink(temporary) }
        guard written == data.count, synced == 0 else {
            throw .cannotOpen(path: path, reason: "cannot write the secrets key")
        }
        if link(temporary, path) != 0 {
            if errno == EEXIST, let existing = FileManager.default.contents(atPath: path), existing.count == 32 {
                key = SymmetricKey(data: existing)
                return
            }
            throw .cannotOpen(path: path, reason: "cannot create the secrets key: \(String(cString: strerror(errno)))")
        }
        key = fresh
    }

    func seal(_ secret: String) throws -> Data {
        guard let combined = try AES.GCM.seal(Data(secret.utf8), using: key).combined else {
            throw StoreError.corrupt(reason: "AES-GCM produced no combined box")
        }
        return combined
    }

    /// What a store keeps (in `store_info`, as `secretsCheck`) to tell whether a key is the one its secrets
    /// were sealed with: a known text sealed with the key, in base64.
    func checkValue() throws -> String {
        try seal(Self.checkText).base64EncodedString()
    }

    /// Whether `value` (a ``checkValue()`` of some key) was made with this key.
    func opens(checkValue value: String) -> Bool {
        guard let sealed = Data(base64Encoded: value), let text = try? unseal(sealed) else { return false }
        return text == Self.checkText
    }

    /// Whether `sealed` (a stored secret) opens with this key; `nil` when it is too short to be a sealed
    /// box at all (nonce and tag: 28 bytes), which says nothing about the key.
    func opens(_ sealed: Data) -> Bool? {
        guard sealed.count >= 28 else { return nil }
        return (try? unseal(sealed)) != nil
    }

    private static let checkText = "reloadgate: the secrets.key of this store"

    func unseal(_ sealed: Data) throws -> String {
        let plain = try AES.GCM.open(AES.GCM.SealedBox(combined: sealed), using: key)
        return String(decoding: plain, as: UTF8.self)
    }
}
