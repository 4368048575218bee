public import Foundation

/// The rows of a query, each column read by its name.
public struct SQLRows: Sendable, RandomAccessCollection {
    /// The columns' names, as the engine reports them.
    let columns: SQLColumns
    let values: [[SQLValue]]

    init(names: [String], folded: Bool = false, values: [[SQLValue]]) {
        self.columns = SQLColumns(names: names, folded: folded)
        self.values = values
    }

    public var startIndex: Int { values.startIndex }
    public var endIndex: Int { values.endIndex }
    public subscript(position: Int) -> SQLRow { SQLRow(columns: columns, values: values[position]) }
}

/// The names of a result's columns. A name is found whatever its case: SQLite reports names as the query
/// wrote them, PostgreSQL folds unquoted ones to lower case (`folded`). Results have a few columns, and
/// each lookup compares whole strings (a start reads a million rows of a dozen columns by name).
struct SQLColumns: Sendable {
    let names: [String]
    /// Whether every name is in lower case, as PostgreSQL reports unquoted ones.
    let folded: Bool

    init(names: [String], folded: Bool = false) {
        self.names = names
        self.folded = folded
    }

    func index(of name: String) -> Int? {
        if folded { return names.firstIndex(of: name.lowercased()) }
        if let index = names.firstIndex(of: name) { return index }
        let wanted = name.lowercased()
        return names.firstIndex { $0.lowercased() == wanted }
    }
}

/// One row of ``SQLRows``. A column that is missing, or holds another type than asked, is
/// ``StoreError/corrupt(reason:)``.
public struct SQLRow: Sendable {
    let columns: SQLColumns
    let values: [SQLValue]

    /// The value of the column named `name` (any case).
    public func value(_ name: String) throws -> SQLValue {
        guard let index = columns.index(of: name) else {
            throw StoreError.corrupt(reason: "a query's rows have no column \(name)")
        }
        return values[index]
    }

    public func int64(_ name: String) throws -> Int64 {
        guard let value = try optionalInt64(name) else { throw mismatch(name, "an integer", .null) }
        return value
    }

    public func optionalInt64(_ name: String) throws -> Int64? {
        switch try value(name) {
        case .null: nil
        case .integer(let value): value
        case .bool(let value): value ? 1 : 0
        // Times in columns that older SQLite migrations declared REAL.
        case .real(let value) where value.rounded() == value && abs(value) < 0x1p63: Int64(value)
        case let other: throw mismatch(name, "an integer", other)
        }
    }

    public func int(_ name: String) throws -> Int { Int(try int64(name)) }

    public func string(_ name: String) throws -> String {
        guard let value = try optionalString(name) else { throw mismatch(name, "text", .null) }
        return value
    }

    public func optionalString(_ name: String) throws -> String? {
        switch try value(name) {
        case .null: nil
        case .text(let value): value
        case let other: throw mismatch(name, "text", other)
        }
    }

    public func bool(_ name: String) throws -> Bool {
        switch try value(name) {
        case .bool(let value): value
        case .integer(let value): value != 0
        case let other: throw mismatch(name, "a boolean", other)
        }
    }

    public func optionalData(_ name: String) throws -> Data? {
        switch try value(name) {
        case .null: nil
        case .blob(let value): value
        case let other: throw mismatch(name, "bytes", other)
        }
    }

    public func double(_ name: String) throws -> Double {
        switch try value(name) {
        case .real(let value): value
        case .integer(let value): Double(value)
        case let other: throw mismatch(name, "a number", other)
        }
    }

    private func mismatch(_ name: String, _ expected: String, _ found: SQLValue) -> StoreError {
        .corrupt(reason: "column \(name) holds \(found), not \(expected)")
    }
}
