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
        migrator.registerMigration("v3-registry") { db in
            try db.create(table: "device") { table in
                table.autoIncrementedPrimaryKey("id")
                table.belongsTo("app", onDelete: .cascade).notNull()
                table.column("token", .text).notNull()
                table.column("active", .boolean).notNull()
                table.column("registeredAt", .double).notNull()
                table.column("unregisteredAt", .double)
                table.uniqueKey(["appId", "token"])
            }
            try db.create(table: "widget") { table in
                table.autoIncrementedPrimaryKey("id")
                table.belongsTo("device", onDelete: .cascade).notNull()
                table.column("widgetID", .text).notNull()
                table.column("kind", .text).notNull()
                table.column("family", .text).notNull()
                table.column("configuration", .text).notNull()
                table.column("pushEnabled", .boolean).notNull()
                table.uniqueKey(["deviceId", "widgetID"])
            }
            try db.create(index: "widget_on_kind", on: "widget", columns: ["kind"])
            try db.create(table: "timeline") { table in
                table.primaryKey("widgetId", .integer).references("widget", onDelete: .cascade)
                table.column("entries", .text).notNull()
                table.column("policy", .text).notNull()
                table.column("plannedReload", .integer)
                table.column("reportedAt", .double).notNull()
            }
        }
        migrator.registerMigration("v4-ledger") { db in
            try db.create(table: "request") { table in
                table.primaryKey("id", .integer)
                table.belongsTo("app", onDelete: .cascade).notNull()
                table.column("source", .text).notNull()
                table.column("receivedAt", .integer).notNull()
                table.column("priority", .integer).notNull()
                table.column("expiration", .integer)
                table.column("collapseId", .text)
                table.column("exempt", .boolean).notNull()
                table.column("summary", .text).notNull()
            }
            try db.create(table: "decision") { table in
                table.belongsTo("request", onDelete: .cascade).notNull()
                table.column("instanceId", .integer)
                table.column("kind", .text).notNull()
                table.column("due", .integer)
                table.column("reason", .text).notNull()
            }
            try db.create(table: "instance_state") { table in
                table.primaryKey("instanceId", .integer).references("widget", onDelete: .cascade)
                table.column("bucketFullAt", .integer)
                table.column("lastReload", .integer)
                table.column("plannedReload", .integer)
            }
            try db.create(table: "pending_reload") { table in
                table.primaryKey("instanceId", .integer).references("widget", onDelete: .cascade)
                table.column("due", .integer).notNull()
                table.column("priority", .integer).notNull()
                table.column("expiration", .integer)
                table.column("requests", .text).notNull()
                table.column("collapseId", .text)
                table.column("team", .text)
                table.column("exempt", .boolean).notNull()
            }
            try db.create(table: "delivery") { table in
                table.primaryKey("apnsId", .text)
                table.column("deviceId", .integer).notNull()
                table.column("releasedAt", .integer).notNull()
                table.column("instances", .text).notNull()
                table.column("requests", .text).notNull()
                table.column("priority", .integer).notNull()
                table.column("expiration", .integer)
                table.column("state", .text).notNull()
                table.column("attempts", .integer).notNull().defaults(to: 0)
                table.column("lastError", .text)
            }
            try db.create(index: "delivery_on_state", on: "delivery", columns: ["state"])
            try db.create(table: "idempotency") { table in
                table.belongsTo("app", onDelete: .cascade).notNull()
                table.column("key", .text).notNull()
                table.column("bodyHash", .blob).notNull()
                table.column("status", .integer).notNull()
                table.column("response", .text).notNull()
                table.column("createdAt", .integer).notNull()
                table.primaryKey(["appId", "key"])
            }
        }
        migrator.registerMigration("v5-request-counts") { db in
            // Pending reloads and deliveries list their first 100 requests and count all of them.
            try db.alter(table: "pending_reload") { table in table.add(column: "requestCount", .integer) }
            try db.alter(table: "delivery") { table in table.add(column: "requestCount", .integer) }
        }
        migrator.registerMigration("v6-widget-parameters") { db in
            // Each configuration value of each widget as a row, indexed by key and value, so that a
            // webhook's `match` looks values up instead of parsing every widget's JSON. Triggers keep it
            // in step with `widget.configuration`; rows go with their widget (foreign key cascade).
            try db.create(table: "widget_parameter") { table in
                table.column("widgetId", .integer).notNull().references("widget", onDelete: .cascade)
                table.column("key", .text).notNull()
                table.column("type", .text).notNull()
                table.column("value")  // no affinity: text stays text, numbers stay numbers
            }
            try db.create(index: "widget_parameter_on_key_value", on: "widget_parameter", columns: ["key", "value", "type"])
            try db.create(index: "widget_parameter_on_widget", on: "widget_parameter", columns: ["widgetId"])
            try db.execute(sql: """
                INSERT INTO widget_parameter (widgetId, key, type, value)
                    SELECT widget.id, json_each.key, json_each.type, json_each.atom FROM widget, json_each(widget.configuration);
                CREATE TRIGGER widget_parameter_on_insert AFTER INSERT ON widget BEGIN
                    INSERT INTO widget_parameter (widgetId, key, type, value)
                        SELECT NEW.id, key, type, atom FROM json_each(NEW.configuration);
                END;
                CREATE TRIGGER widget_parameter_on_update AFTER UPDATE OF configuration ON widget BEGIN
                    DELETE FROM widget_parameter WHERE widgetId = NEW.id;
                    INSERT INTO widget_parameter (widgetId, key, type, value)
                        SELECT NEW.id, key, type, atom FROM json_each(NEW.configuration);
                END;
                """)
        }
        migrator.registerMigration("v7-provider-keys") { db in
            try db.create(table: "provider_key") { table in
                table.primaryKey("keyId", .text)
                table.column("teamId", .text).notNull()
                table.column("publicKey", .text).notNull()
                table.column("topics", .text).notNull()
                table.column("environments", .text).notNull()
                table.column("createdAt", .double).notNull()
            }
            // A push names only its token: find the device (and whether another app has it) by token.
            try db.create(index: "device_on_token", on: "device", columns: ["token"])
        }
        migrator.registerMigration("v8-delivery-answers") { db in
            // When the delivery last changed, and how many attempts ended without an answer (the
            // request may have reached Apple: sending it again may deliver it twice).
            try db.alter(table: "delivery") { table in
                table.add(column: "unknownOutcomes", .integer).notNull().defaults(to: 0)
                table.add(column: "updatedAt", .integer)
            }
        }
        migrator.registerMigration("v9-request-apns-id") { db in
            // A push's apns-id: `reloadgate explain <apns-id>` finds the push its sender saw answered.
            try db.alter(table: "request") { table in table.add(column: "apnsId", .text) }
            try db.create(index: "request_on_apns_id", on: "request", columns: ["apnsId"])
        }
        migrator.registerMigration("v10-apns-id-by-block") { db in
            // apns-ids are random: an index on them alone takes one B-tree page per push into every group
            // commit. Keyed by the request's block of ids first, a commit's entries stay in a few pages
            // (docs/DECISIONS.md, "apns-ids indexed by block").
            try db.execute(sql: "DROP INDEX request_on_apns_id")
            // 10: LedgerLayout.apnsIDBlockBits, written out because a migration never changes.
            try db.execute(sql: "CREATE INDEX request_on_block_apns_id ON request(id >> 10, apnsId)")
        }
        migrator.registerMigration("v11-pending-lists") { db in
            // A pending reload's list of request ids (up to 100, as JSON) moves to a table of its own, so
            // that a merge, which usually leaves the list as it is, rewrites a small row instead of one
            // with ~1 KB of ids (docs/DECISIONS.md, "Pending reloads keep their request lists apart").
            // `firstRequest` and `listed` identify the list: it only grows, from a request id that is new
            // for every pending reload.
            try db.create(table: "pending_list") { table in
                table.primaryKey("instanceId", .integer).references("widget", onDelete: .cascade)
                table.column("firstRequest", .integer).notNull()
                table.column("listed", .integer).notNull()
                table.column("requests", .text).notNull()
            }
            try db.execute(sql: """
                INSERT INTO pending_list (instanceId, firstRequest, listed, requests)
                    SELECT instanceId, COALESCE(json_extract(requests, '$[0]'), 0), json_array_length(requests), requests
                    FROM pending_reload;
                ALTER TABLE pending_reload DROP COLUMN requests;
                """)
        }
        migrator.registerMigration("v12-request-first-decision") { db in
            // A request's first decision (for most requests, the only one) is kept in the request's row:
            // one row and one index entry fewer per request in the group commit (docs/DECISIONS.md, "A
            // request's first decision is in its row"). Older requests keep theirs in `decision`.
            try db.alter(table: "request") { table in
                table.add(column: "decisionInstanceId", .integer)
                table.add(column: "decisionKind", .text)
                table.add(column: "decisionDue", .integer)
                table.add(column: "decisionReason", .text)
            }
        }
        migrator.registerMigration("v13-app-team") { db in
            // Apps belong to a team, as Apple's do: a provider key of team T may push only to team T's apps
            // (docs/DECISIONS.md, "Apps belong to a team"). Apps registered before get a team by this rule:
            // the team of the keys that name the app in their topics, when they are all of one team; else,
            // when every key in the store is of one team, that team; else none (provider tokens cannot push
            // to it until `reloadgate apps set-team`; client certificates still can).
            try db.alter(table: "app") { table in table.add(column: "teamId", .text) }
            try db.execute(sql: """
                UPDATE app SET teamId = (
                    SELECT MIN(teamId) FROM provider_key WHERE instr(' ' || topics || ' ', ' ' || app.bundle || ' ') > 0
                ) WHERE (
                    SELECT COUNT(DISTINCT teamId) FROM provider_key WHERE instr(' ' || topics || ' ', ' ' || app.bundle || ' ') > 0
                ) = 1;
                UPDATE app SET teamId = (SELECT MIN(teamId) FROM provider_key)
                    WHERE teamId IS NULL AND (SELECT COUNT(DISTINCT teamId) FROM provider_key) = 1;
                """)
            // Bundle ids are unique regardless of case (`apps add` checks with this index).
            try db.execute(sql: "CREATE INDEX app_on_bundle_nocase ON app(bundle COLLATE NOCASE)")
        }
        migrator.registerMigration("v14-times-in-milliseconds") { db in
            // One unit for times in SQL: INTEGER milliseconds since 1970, as the ledger has had them from
            // the start (the registry, apps and keys had REAL seconds). Values are rounded to the
            // microsecond, then floored to the millisecond: Timestamp's rule, without binary fractions
            // such as 1790000000.123 * 1000 = 1790000000122.9999.
            let columns: [(table: String, column: String, required: Bool)] = [
                ("app", "createdAt", true), ("device", "registeredAt", true), ("device", "unregisteredAt", false),
                ("timeline", "reportedAt", true), ("provider_key", "createdAt", true),
            ]
            for (table, column, required) in columns {
                try db.execute(sql: """
                    ALTER TABLE \(table) ADD COLUMN \(column)Ms INTEGER\(required ? " NOT NULL DEFAULT 0" : "");
                    UPDATE \(table) SET \(column)Ms = CAST(round(\(column) * 1000000) / 1000 AS INTEGER) WHERE \(column) IS NOT NULL;
                    ALTER TABLE \(table) DROP COLUMN \(column);
                    ALTER TABLE \(table) RENAME COLUMN \(column)Ms TO \(column);
                    """)
            }
            try db.execute(sql: """
                UPDATE store_info SET value = CAST(CAST(round(CAST(value AS REAL) * 1000000) / 1000 AS INTEGER) AS TEXT)
                    WHERE key = 'createdAt'
                """)
        }
        migrator.registerMigration("v15-decision-runs") { db in
            // A request's decisions after its first are written as runs: consecutive decisions of one
            // request with the same kind, due time and reason in one row listing their instances (a fan-out
            // over 100,000 widgets that all go now is one row, not 100,000; docs/DECISIONS.md, "Decisions
            // are written in runs"). `count` says how many decisions the row holds (`instances` is empty
            // for decisions without an instance). Rows of `decision` written before stay and are read.
            try db.create(table: "decision_run") { table in
                table.belongsTo("request", onDelete: .cascade).notNull()
                table.column("kind", .text).notNull()
                table.column("due", .integer)
                table.column("reason", .text).notNull()
                table.column("instances", .text).notNull()
                table.column("count", .integer).notNull()
            }
        }
        migrator.registerMigration("v16-push-types") { db in
            // A token reloads the widgets of an app on a device, or one control (WidgetKit controls: one
            // token per control). A control's token is a device row of push type `controls` with one
            // instance (widget id `control`, family `control`).
            try db.alter(table: "device") { table in
                table.add(column: "pushType", .text).notNull().defaults(to: "widgets")
            }
        }
        migrator.registerMigration("v17-idempotency-expiry") { db in
            // A key is kept until its own expiry (a webhook call's key 24 hours, a push's apns-id 15 minutes),
            // and expired keys are pruned oldest first.
            try db.alter(table: "idempotency") { table in
                table.add(column: "expiresAt", .integer).notNull().defaults(to: 0)
            }
            try db.execute(sql: "UPDATE idempotency SET expiresAt = createdAt + 86400000")
            try db.create(index: "idempotency_on_expiry", on: "idempotency", columns: ["expiresAt"])
        }
        migrator.registerMigration("v18-request-answers") { db in
            // A push's answer to its own apns-id is kept in the push's request row (written anyway, in
            // order of request id) instead of the idempotency table, whose index on a random key takes a
            // page per push into the group commit; the engine finds it by an index in memory, rebuilt
            // from these columns on start (docs/DECISIONS.md, "A push's apns-id is kept in its request").
            try db.alter(table: "request") { table in
                table.add(column: "answerKey", .text)
                table.add(column: "answerBodyHash", .blob)
                table.add(column: "answerStatus", .integer)
                table.add(column: "answerResponse", .text)
                table.add(column: "answerExpiresAt", .integer)
            }
        }
        migrator.registerMigration("v19-ledger-retention") { db in
            // The ledger is pruned by age (`ledger.retention`): deliveries oldest first by release time,
            // requests by id (in arrival order). `ledger_prune` keeps the stretches of request ids pruned
            // and when, for `explain` and `export` (docs/DECISIONS.md, "The ledger is kept for a time").
            try db.create(index: "delivery_on_released", on: "delivery", columns: ["releasedAt"])
            try db.create(table: "ledger_prune") { table in
                table.primaryKey("firstRequest", .integer)
                table.column("lastRequest", .integer).notNull()
                table.column("receivedBefore", .integer).notNull()
                table.column("since", .integer).notNull()
                table.column("until", .integer).notNull()
            }
        }
        migrator.registerMigration("v20-decisions-in-runs-only") { db in
            // One layout of the decisions on both engines (PostgreSQL's `pg9-decision-runs`): the decisions
            // written one row each before v15 move into runs of one, ahead of the runs written since (the
            // order a request's decisions were made in), and the runs get an explicit `seq`, their order.
            try db.execute(sql: """
                CREATE TABLE decision_run_moved (
                    seq INTEGER PRIMARY KEY, requestId INTEGER NOT NULL REFERENCES request(id) ON DELETE CASCADE,
                    kind TEXT NOT NULL, due INTEGER, reason TEXT NOT NULL, instances TEXT NOT NULL, count INTEGER NOT NULL);
                INSERT INTO decision_run_moved (requestId, kind, due, reason, instances, count)
                    SELECT requestId, kind, due, reason, CASE WHEN instanceId IS NULL THEN '[]' ELSE '[' || instanceId || ']' END, 1
                    FROM decision ORDER BY rowid;
                INSERT INTO decision_run_moved (requestId, kind, due, reason, instances, count)
                    SELECT requestId, kind, due, reason, instances, count FROM decision_run ORDER BY rowid;
                DROP TABLE decision;
                DROP TABLE decision_run;
                ALTER TABLE decision_run_moved RENAME TO decision_run;
                CREATE INDEX decision_run_on_request ON decision_run (requestId);
                """)
        }
        migrator.registerMigration("v21-activity-state") { db in
            // A Live Activity's content state beside its instance's (``ActivitySnapshot/text``); NULL for
            // widgets and controls.
            try db.execute(sql: "ALTER TABLE instance_state ADD COLUMN activity TEXT")
        }
        migrator.registerMigration("v22-registration-key") { db in
            // The app's registration key (its SHA-256, as the API key's): it may only put and delete the
            // app's devices, controls, activities and timelines. NULL until one is made (`apps add`,
            // `apps rotate-key --registration`).
            try db.execute(sql: "ALTER TABLE app ADD COLUMN registrationKeyHash BLOB")
            try db.execute(sql: "CREATE UNIQUE INDEX app_on_registration_key ON app (registrationKeyHash)")
        }
        migrator.registerMigration("v23-delivery-in-flight") { db in
            // 1 while an attempt of a `pending` delivery is on its way: the `sending` mark, written without
            // moving the row in `delivery_on_state` (decision 0096). Rows marked `sending` before stay so
            // and read the same.
            try db.execute(sql: "ALTER TABLE delivery ADD COLUMN inFlight INTEGER NOT NULL DEFAULT 0")
        }
        migrator.registerMigration("v24-device-by-token") { db in
            // One index over a device's token, (token, appId), where there were two: the unique (appId,
            // token) and `device_on_token` (a push names only its token). Tokens are random, so every new
            // device went to a random leaf of each, and a registration's transaction wrote both pages: half
            // of SQLite's time a registration (decision 0103). The unique key is a table constraint, so the
            // table is rebuilt (SQLite's documented steps; GRDB runs a migration with foreign keys off and
            // checks them before it commits). Ids are kept, and so is AUTOINCREMENT's high mark, so a
            // removed device's id is never given again. The app's devices keep an index of their own, and
            // a device's widgets need none besides their unique (deviceId, widgetID).
            let highMark = try Int64.fetchOne(db, sql: "SELECT seq FROM sqlite_sequence WHERE name = 'device'")
            try db.execute(sql: """
                CREATE TABLE device_by_token (
                    "id" INTEGER PRIMARY KEY AUTOINCREMENT,
                    "appId" INTEGER NOT NULL REFERENCES "app"("id") ON DELETE CASCADE,
                    "token" TEXT NOT NULL, "active" BOOLEAN NOT NULL, "registeredAt" INTEGER NOT NULL DEFAULT 0,
                    "unregisteredAt" INTEGER, "pushType" TEXT NOT NULL DEFAULT 'widgets',
                    UNIQUE ("token", "appId"));
                INSERT INTO device_by_token (id, appId, token, active, registeredAt, unregisteredAt, pushType)
                    SELECT id, appId, token, active, registeredAt, unregisteredAt, pushType FROM device ORDER BY id;
                DROP TABLE device;
                ALTER TABLE device_by_token RENAME TO device;
                CREATE INDEX device_on_appId ON device (appId);
                DROP INDEX widget_on_deviceId;
                """)
            if let highMark {
                try db.execute(sql: "DELETE FROM sqlite_sequence WHERE name = 'device'")
                try db.execute(sql: "INSERT INTO sqlite_sequence (name, seq) VALUES ('device', ?)", arguments: [highMark])
            }
        }
        return migrator
    }

    /// The names of the migrations applied to this store, oldest first.
    public func appliedMigrations() throws -> [String] {
        try writer.read { db in try Self.migrator.appliedMigrations(db) }
    }
}
