import GRDB

extension SQLiteStore {
    /// The schema's history. Migrations are named and never edited once landed: add a new one instead.
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1-store-info") { db in
            try db.create(table: "store_info") { table in
                table.primaryKey("key", .text)
                table.column("value", .text).notNull()
            }
        }
        migrator.registerMigration("v2-apps") { db in
            try db.create(table: "app") { table in
                table.autoIncrementedPrimaryKey("id")
                table.column("bundle", .text).notNull().unique()
                table.column("environment", .text).notNull()
                table.column("apiKeyHash", .blob).notNull().unique()
                table.column("webhookSecret", .blob).notNull()
                table.column("allowsExemptions", .boolean).notNull().defaults(to: false)
                table.column("createdAt", .double).notNull()
            }
        }
        return migrator
    }

    /// The names of the migrations applied to this store, oldest first.
    public func appliedMigrations() throws -> [String] {
        try writer.read { db in try Self.migrator.appliedMigrations(db) }
    }
}
