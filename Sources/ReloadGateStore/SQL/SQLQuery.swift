public import Foundation

/// A value bound to a statement, or read from a row, in the types both engines share.
public enum SQLValue: Sendable, Equatable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    /// A boolean: an integer 0 or 1 on SQLite, a `boolean` on PostgreSQL.
    case bool(Bool)
    /// Bytes: a `blob` on SQLite, `bytea` on PostgreSQL.
    case blob(Data)

    /// Hands the value to the `binder` method of its type (each engine binds the six types its own way).
    func bind(to binder: inout some SQLBinder) {
        switch self {
        case .null: binder.bindNull()
        case .integer(let value): binder.bind(value)
        case .real(let value): binder.bind(value)
        case .text(let value): binder.bind(value)
        case .bool(let value): binder.bind(value)
        case .blob(let value): binder.bind(value)
        }
    }
}

/// Where an engine binds a statement's arguments, one at a time in order.
protocol SQLBinder {
    mutating func bindNull()
    mutating func bind(_ value: Int64)
    mutating func bind(_ value: Double)
    mutating func bind(_ value: String)
    mutating func bind(_ value: Bool)
    mutating func bind(_ value: Data)
}

/// A Swift value that binds as an ``SQLValue``.
public protocol SQLBindable {
    var sqlValue: SQLValue { get }
}

extension Int64: SQLBindable { public var sqlValue: SQLValue { .integer(self) } }
extension Int: SQLBindable { public var sqlValue: SQLValue { .integer(Int64(self)) } }
extension String: SQLBindable { public var sqlValue: SQLValue { .text(self) } }
extension Bool: SQLBindable { public var sqlValue: SQLValue { .bool(self) } }
extension Double: SQLBindable { public var sqlValue: SQLValue { .real(self) } }
extension Data: SQLBindable { public var sqlValue: SQLValue { .blob(self) } }
extension Optional: SQLBindable where Wrapped: SQLBindable {
    public var sqlValue: SQLValue { self?.sqlValue ?? .null }
}

/// One statement's text with its values, written once for both engines: an interpolated value becomes a
/// bound parameter, and the few spellings that differ between SQLite and PostgreSQL are fragments each
/// engine renders its own way (``SQLDialect``). The stores' rules are written with it (the query surface
/// of vapor/sql-kit, reduced to what the stores use).
public struct SQLQuery: Sendable, ExpressibleByStringInterpolation {
    enum Segment: Sendable {
        case text(String)
        case value(SQLValue)
        /// A list of ids for `x IN <list>`.
        case ids([Int64])
        /// A list of strings for `x IN <list>`.
        case texts([String])
        /// Ordering text by its bytes (SQLite's default; PostgreSQL's `COLLATE "C"`).
        case binaryCollation
        /// Whether the JSON array of integers in a column holds a value.
        case jsonArrayContains(column: String, value: Int64)
    }

    var segments: [Segment]

    public init(stringLiteral value: String) {
        segments = [.text(value)]
    }

    public init(stringInterpolation: StringInterpolation) {
        segments = stringInterpolation.segments
    }

    public struct StringInterpolation: StringInterpolationProtocol {
        var segments: [Segment] = []

        public init(literalCapacity: Int, interpolationCount: Int) {
            segments.reserveCapacity(2 * interpolationCount + 1)
        }

        public mutating func appendLiteral(_ literal: String) {
            if !literal.isEmpty { segments.append(.text(literal)) }
        }

        /// A bound parameter.
        public mutating func appendInterpolation(_ value: some SQLBindable) {
            segments.append(.value(value.sqlValue))
        }

        /// A value that may be absent, bound as `NULL` when it is. Its own overload, so that the compiler
        /// does not warn of an optional written into text: it is bound, never written.
        public mutating func appendInterpolation<Wrapped: SQLBindable>(_ value: Wrapped?) {
            segments.append(.value(value.sqlValue))
        }

        /// A list of ids, for `column IN \(ids: list)` (an empty list matches nothing).
        public mutating func appendInterpolation(ids: [Int64]) {
            segments.append(.ids(ids))
        }

        /// A list of strings, for `column IN \(texts: list)` (an empty list matches nothing).
        public mutating func appendInterpolation(texts: [String]) {
            segments.append(.texts(texts))
        }

        /// A fragment of the query, its values kept bound.
        public mutating func appendInterpolation(_ query: SQLQuery) {
            segments += query.segments
        }

        /// Text that is part of the statement itself (a table or column name chosen by the code, never a
        /// value from outside).
        public mutating func appendInterpolation(unescaped text: String) {
            segments.append(.text(text))
        }

        /// A condition: the JSON array of integers in `column` (a name chosen by the code) holds `value`.
        public mutating func appendInterpolation(jsonArray column: String, contains value: Int64) {
            segments.append(.jsonArrayContains(column: column, value: value))
        }

        /// `COLLATE` for ordering text by its bytes, after an `ORDER BY` column.
        public mutating func appendInterpolation(_ collation: SQLCollation) {
            segments.append(.binaryCollation)
        }
    }

    /// This query followed by `other`.
    public static func + (lhs: SQLQuery, rhs: SQLQuery) -> SQLQuery {
        var query = lhs
        query.segments += rhs.segments
        return query
    }

    public static func += (lhs: inout SQLQuery, rhs: SQLQuery) {
        lhs.segments += rhs.segments
    }
}

/// How text is compared in an `ORDER BY`: `\(SQLCollation.binary)`.
public enum SQLCollation: Sendable {
    /// By the bytes of the text (the same order on both engines, whatever the database's locale).
    case binary
}

/// How one engine spells what the engines spell differently.
public enum SQLDialect: Sendable {
    case sqlite
    case postgres

    /// At most this many rows in one of the registry's multi-row `INSERT`s (of devices, of instances),
    /// whatever else bounds them. SQLite journals each page a multi-row statement changes inside a
    /// transaction, so that the statement alone can be undone: in memory up to 31 pages, and past them in a
    /// temporary file, written for the rest of the transaction at two system calls a page (decision 0105).
    /// A new device's random token changes a leaf of the token index, and with the leaves' splits about two
    /// pages a token: 8 a statement stay in memory (decision 0110 has the measured figures). PostgreSQL
    /// keeps no such journal, and each statement is a round trip there.
    var registryInsertRows: Int {
        switch self {
        case .sqlite: 8
        case .postgres: .max
        }
    }

    /// `query`'s text in this dialect and its values in order; PostgreSQL's placeholders are numbered from
    /// `firstPlaceholder` (a query appended to one with parameters of its own).
    func render(_ query: SQLQuery, firstPlaceholder: Int = 1) -> (text: String, values: [SQLValue]) {
        var text = ""
        text.reserveCapacity(256)
        var values: [SQLValue] = []
        values.reserveCapacity(query.segments.count / 2 + 1)
        let offset = firstPlaceholder - 1
        for segment in query.segments {
            switch segment {
            case .text(let part):
                text += part
            case .value(let value):
                values.append(value)
                text += placeholder(values.count, offset: offset)
            case .ids(let ids):
                switch self {
                case .sqlite:
                    values.append(.text("[" + ids.map(String.init).joined(separator: ",") + "]"))
                    text += "(SELECT value FROM json_each(\(placeholder(values.count, offset: offset))))"
                case .postgres:
                    // Bound as a literal array: one parameter whatever the count.
                    values.append(.text("{" + ids.map(String.init).joined(separator: ",") + "}"))
                    text += "(SELECT unnest(\(placeholder(values.count, offset: offset))::bigint[]))"
                }
            case .texts(let texts):
                switch self {
                case .sqlite:
                    // One parameter each: SQLite plans `IN (?, ?)` as index lookups, where it estimates
                    // `json_each` at many rows and scans by another index instead.
                    values += texts.map(SQLValue.text)
                    text += "(" + (texts.isEmpty ? "NULL" : Array(repeating: "?", count: texts.count).joined(separator: ", ")) + ")"
                case .postgres:
                    values.append(.text("{" + texts.map(Self.jsonString).joined(separator: ",") + "}"))
                    text += "(SELECT unnest(\(placeholder(values.count, offset: offset))::text[]))"
                }
            case .binaryCollation:
                text += self == .sqlite ? " COLLATE BINARY" : " COLLATE \"C\""
            case .jsonArrayContains(let column, let value):
                values.append(.integer(value))
                switch self {
                case .sqlite: text += "EXISTS (SELECT 1 FROM json_each(\(column)) WHERE value = \(placeholder(values.count, offset: offset)))"
                case .postgres: text += "\(column)::jsonb @> jsonb_build_array(\(placeholder(values.count, offset: offset))::bigint)"
                }
            }
        }
        return (text, values)
    }

    /// `text` quoted with its `"` and `\\` escaped, as an element of a PostgreSQL array literal (the lists
    /// bound so hold device tokens: hexadecimal).
    private static func jsonString(_ text: String) -> String {
        var quoted = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": quoted += "\\\""
            case "\\": quoted += "\\\\"
            default: quoted.unicodeScalars.append(scalar)
            }
        }
        return quoted + "\""
    }

    private func placeholder(_ number: Int, offset: Int) -> String {
        self == .sqlite ? "?" : "$\(number + offset)"
    }
}
