import ReloadGateCore

extension Timeline {
    /// The entries as the stores keep them: their times in milliseconds, `[1,2,3]`.
    var storedEntries: String { IntegerList.text(entries.map(\.milliseconds)) }

    /// The reload policy as the stores keep it: `atEnd`, `after:<milliseconds>` or `never`.
    var storedPolicy: String {
        switch policy {
        case .atEnd: "atEnd"
        case .after(let date): "after:\(date.milliseconds)"
        case .never: "never"
        }
    }
}
