/// The form an `apns-id` takes wherever the gateway keeps or looks one up (a push's request row, its
/// idempotency key, an operator's query): lower case. An apns-id is a UUID, whose letters' case means
/// nothing, so a sender's retry in other letters and an operator's look-up find the id the ledger holds.
public enum StoredAPNsID {
    /// `id` in its stored form.
    public static func of(_ id: String) -> String {
        id.lowercasedIfNeeded
    }
}
