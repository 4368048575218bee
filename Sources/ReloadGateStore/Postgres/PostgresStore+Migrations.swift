import Logging
import PostgresNIO

extension PostgresStore {
    /// The schema's history, oldest first. Migrations are named and never edited once landed: add a new
    /// one instead. The first one was the SQLite store's layout as of its `v14-times-in-milliseconds`.
    static let migrations: [(name: String, statements: [String])] = [
        (
            "pg1-schema",
            [
                "CREATE TABLE store_info (key text PRIMARY KEY, value text NOT NULL)",
                """
                CREATE TABLE app (
                    id bigserial PRIMARY KEY, bundle text NOT NULL UNIQUE, environment text NOT NULL,
                    apiKeyHash bytea NOT NULL UNIQUE, webhookSecret bytea NOT NULL,
                    allowsExemptions boolean NOT NULL DEFAULT false, createdAt bigint NOT NULL, teamId text)
                """,
                // Bundle ids are unique regardless of case (`apps add` checks with this index).
                "CREATE UNIQUE INDEX app_on_bundle_lower ON app (lower(bundle))",
                """
                CREATE TABLE device (
                    id bigserial PRIMARY KEY, appId bigint NOT NULL REFERENCES app(id) ON DELETE CASCADE,
                    token text NOT NULL, active boolean NOT NULL, registeredAt bigint NOT NULL, unregisteredAt bigint,
                    UNIQUE (appId, token))
                """,
                "CREATE INDEX device_on_token ON device (token)",
                """
                CREATE TABLE widget (
                    id bigserial PRIMARY KEY, deviceId bigint NOT NULL REFERENCES device(id) ON DELETE CASCADE,
                    widgetID text NOT NULL, kind text NOT NULL, family text NOT NULL, configuration text NOT NULL,
                    pushEnabled boolean NOT NULL, UNIQUE (deviceId, widgetID))
                """,
                "CREATE INDEX widget_on_kind ON widget (kind)",
                // Each configuration value of each widget as a row (a webhook's `match` looks values up),
                // kept in step with `widget.configuration` by a trigger. `type` is `text`, `number`, `true`,
                // `false` or `null`.
                """
                CREATE TABLE widget_parameter (
                    widgetId bigint NOT NULL REFERENCES widget(id) ON DELETE CASCADE, key text NOT NULL,
                    type text NOT NULL, textValue text, numberValue double precision)
                """,
                "CREATE INDEX widget_parameter_on_key_text ON widget_parameter (key, textValue)",
                "CREATE INDEX widget_parameter_on_key_number ON widget_parameter (key, numberValue)",
                "CREATE INDEX widget_parameter_on_widget ON widget_parameter (widgetId)",
                """
                CREATE FUNCTION widget_parameter_refresh() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN
                    IF TG_OP = 'UPDATE' THEN
                        IF NEW.configuration = OLD.configuration THEN RETURN NEW; END IF;
                        DELETE FROM widget_parameter WHERE widgetId = NEW.id;
                    END IF;
                    INSERT INTO widget_parameter (widgetId, key, type, textValue, numberValue)
                        SELECT NEW.id, e.key,
                            CASE jsonb_typeof(e.value) WHEN 'string' THEN 'text' WHEN 'number' THEN 'number'
                                WHEN 'boolean' THEN e.value::text ELSE jsonb_typeof(e.value) END,
                            CASE WHEN jsonb_typeof(e.value) = 'string' THEN e.value #>> '{}' END,
                            CASE WHEN jsonb_typeof(e.value) = 'number' THEN (e.value::text)::double precision END
                        FROM jsonb_each(NEW.configuration::jsonb) e;
                    RETURN NEW;
                END $$
                """,
                """
                CREATE TRIGGER widget_parameter_on_insert AFTER INSERT ON widget
                    FOR EACH ROW EXECUTE FUNCTION widget_parameter_refresh()
                """,
                """
                CREATE TRIGGER widget_parameter_on_update AFTER UPDATE OF configuration ON widget
                    FOR EACH ROW EXECUTE FUNCTION widget_parameter_refresh()
                """,
                """
                CREATE TABLE timeline (
                    widgetId bigint PRIMARY KEY REFERENCES widget(id) ON DELETE CASCADE, entries text NOT NULL,
                    policy text NOT NULL, plannedReload bigint, reportedAt bigint NOT NULL)
                """,
                """
                CREATE TABLE request (
                    id bigint PRIMARY KEY, appId bigint NOT NULL REFERENCES app(id) ON DELETE CASCADE,
                    source text NOT NULL, receivedAt bigint NOT NULL, priority bigint NOT NULL, expiration bigint,
                    collapseId text, exempt boolean NOT NULL, summary text NOT NULL, apnsId text,
                    decisionInstanceId bigint, decisionKind text, decisionDue bigint, decisionReason text)
                """,
                // By block of 1,024 request ids first (as SQLite's v10): a group commit's apns-ids land in a
                // few index pages instead of one random page each (docs/DECISIONS.md, "PostgreSQL: ...").
                "CREATE INDEX request_on_block_apns_id ON request ((id >> 10), apnsId) WHERE apnsId IS NOT NULL",
                """
                CREATE TABLE decision (
                    seq bigserial PRIMARY KEY, requestId bigint NOT NULL REFERENCES request(id) ON DELETE CASCADE,
                    instanceId bigint, kind text NOT NULL, due bigint, reason text NOT NULL)
                """,
                "CREATE INDEX decision_on_request ON decision (requestId)",
                """
                CREATE TABLE instance_state (
                    instanceId bigint PRIMARY KEY REFERENCES widget(id) ON DELETE CASCADE,
                    bucketFullAt bigint, lastReload bigint, plannedReload bigint)
                """,
                """
                CREATE TABLE pending_reload (
                    instanceId bigint PRIMARY KEY REFERENCES widget(id) ON DELETE CASCADE, due bigint NOT NULL,
                    priority bigint NOT NULL, expiration bigint, requestCount bigint, collapseId text, team text,
                    exempt boolean NOT NULL)
                """,
                """
                CREATE TABLE pending_list (
                    instanceId bigint PRIMARY KEY REFERENCES widget(id) ON DELETE CASCADE,
                    firstRequest bigint NOT NULL, listed bigint NOT NULL, requests text NOT NULL)
                """,
                """
                CREATE TABLE delivery (
                    apnsId text PRIMARY KEY, deviceId bigint NOT NULL, releasedAt bigint NOT NULL,
                    instances text NOT NULL, requests text NOT NULL, requestCount bigint, priority bigint NOT NULL,
                    expiration bigint, state text NOT NULL, attempts bigint NOT NULL DEFAULT 0, lastError text,
                    unknownOutcomes bigint NOT NULL DEFAULT 0, updatedAt bigint)
                """,
                "CREATE INDEX delivery_on_state ON delivery (state)",
                "CREATE INDEX delivery_on_device ON delivery (deviceId)",
                """
                CREATE TABLE idempotency (
                    appId bigint NOT NULL REFERENCES app(id) ON DELETE CASCADE, key text NOT NULL,
                    bodyHash bytea NOT NULL, status bigint NOT NULL, response text NOT NULL, createdAt bigint NOT NULL,
                    PRIMARY KEY (appId, key))
                """,
                """
                CREATE TABLE provider_key (
                    keyId text PRIMARY KEY, teamId text NOT NULL, publicKey text NOT NULL, topics text NOT NULL,
                    environments text NOT NULL, createdAt bigint NOT NULL)
                """,
            ]
        ),
        (
            "pg2-cluster",
            [
                // Gateways sharing the database: each beats (heartbeatAt) while it runs.
                """
                CREATE TABLE gateway (
                    id text PRIMARY KEY, address text, startedAt bigint NOT NULL, heartbeatAt bigint NOT NULL)
                """,
                // Devices hash into 1,024 partitions (device id modulo 1,024); a partition's lease names its owner
                // until expiresAt (the database's clock, ms); every new lease of a partition has a new epoch.
                """
                CREATE TABLE partition_lease (
                    partition integer PRIMARY KEY, owner text, epoch bigint NOT NULL DEFAULT 0,
                    expiresAt bigint NOT NULL DEFAULT 0, acquiredAt bigint)
                """,
                "INSERT INTO partition_lease (partition) SELECT generate_series(0, 1023)",
                "CREATE INDEX partition_lease_on_owner ON partition_lease (owner)",
            ]
        ),
        (
            "pg3-inbox",
            [
                // Work for a partition's owner, written by the gateway that accepted it (forwarded requests,
                // registry changes, operator commands); the owner deletes a row in the commit applying it.
                """
                CREATE TABLE inbox (
                    id bigserial PRIMARY KEY, partition integer NOT NULL, work text NOT NULL, createdAt bigint NOT NULL)
                """,
                "CREATE INDEX inbox_on_partition ON inbox (partition, id)",
                // A partition's devices and widgets, for loading them when its lease is taken.
                "CREATE INDEX widget_on_partition ON widget ((deviceId % 1024), deviceId)",
                // Request ids come in blocks of 1,024 (block n: n * 1024 to n * 1024 + 1023), one gateway each;
                // blocks start above every id written so far.
                "CREATE SEQUENCE request_block",
                "SELECT setval('request_block', (SELECT COALESCE(MAX(id), 0) FROM request) / 1024 + 1)",
            ]
        ),
        (
            "pg4-ledger-without-foreign-keys",
            [
                // The ledger's rows are written only by the group commit, with ids the gateway holds (an app
                // it loaded, a request of the same batch), and never deleted (apps are never removed): their
                // foreign keys checked nothing the gateway does not, at a query and a row lock per inserted
                // row (a fifth of the group commit's time in PostgreSQL; docs/DECISIONS.md, "PostgreSQL:
                // the group commit binds typed arrays").
                "ALTER TABLE request DROP CONSTRAINT IF EXISTS request_appid_fkey",
                "ALTER TABLE decision DROP CONSTRAINT IF EXISTS decision_requestid_fkey",
            ]
        ),
        (
            "pg5-gateway-fence",
            [
                // A gateway's fence generation: raised by every takeover of one of its partitions by another
                // gateway. Its group commits lock their gateway's row FOR SHARE and write only under the
                // generation they were decided under: one row lock per commit instead of one per partition.
                "CREATE TABLE gateway_fence (gateway text PRIMARY KEY, generation bigint NOT NULL DEFAULT 1)",
            ]
        ),
        (
            "pg6-push-types",
            [
                // A token reloads the widgets of an app on a device, or one control (the SQLite store's
                // `v16-push-types`): a control's token is a device of push type `controls` with one instance.
                "ALTER TABLE device ADD COLUMN pushType text NOT NULL DEFAULT 'widgets'",
            ]
        ),
        (
            "pg7-idempotency-expiry",
            [
                // A key is kept until its own expiry (the SQLite store's `v17-idempotency-expiry`).
                "ALTER TABLE idempotency ADD COLUMN expiresAt bigint NOT NULL DEFAULT 0",
                "UPDATE idempotency SET expiresAt = createdAt + 86400000",
                "CREATE INDEX idempotency_on_expiry ON idempotency (expiresAt)",
                // Ends a statement with an error, so that nothing it wrote stays: the group commit calls it when
                // one of its idempotency keys was answered by another gateway meanwhile.
                """
                CREATE FUNCTION reloadgate_key_answered_meanwhile(key text) RETURNS boolean LANGUAGE plpgsql AS $$
                BEGIN
                    RAISE EXCEPTION 'the idempotency key % was answered meanwhile', key USING ERRCODE = 'RG001', DETAIL = key;
                END
                $$
                """,
            ]
        ),
        (
            "pg8-ledger-retention",
            [
                // The ledger is pruned by age (the SQLite store's `v19-ledger-retention`).
                "CREATE INDEX delivery_on_released ON delivery (releasedAt)",
                """
                CREATE TABLE ledger_prune (
                    firstRequest bigint PRIMARY KEY, lastRequest bigint NOT NULL, receivedBefore bigint NOT NULL,
                    since bigint NOT NULL, until bigint NOT NULL)
                """,
            ]
        ),
        (
            "pg9-decision-runs",
            [
                // One layout of the decisions on both engines (the SQLite store's `v20-decisions-in-runs-only`): a
                // request's decisions past its first are written in runs, consecutive alike ones in one row.
                // The rows of `decision` move into runs of one, in their order. The table is locked first:
                // a commit of a gateway of the version before that is in flight is waited for and its
                // rows moved (the copy alone would not see them, and the drop would delete them).
                "LOCK TABLE decision IN ACCESS EXCLUSIVE MODE",
                """
                CREATE TABLE decision_run (
                    seq bigserial PRIMARY KEY, requestId bigint NOT NULL, kind text NOT NULL, due bigint,
                    reason text NOT NULL, instances text NOT NULL, count bigint NOT NULL)
                """,
                """
                INSERT INTO decision_run (requestId, kind, due, reason, instances, count)
                SELECT requestId, kind, due, reason, CASE WHEN instanceId IS NULL THEN '[]' ELSE '[' || instanceId || ']' END, 1
                FROM decision ORDER BY seq
                """,
                "DROP TABLE decision",
                "CREATE INDEX decision_run_on_request ON decision_run (requestId)",
                // Gateways of the version before share the database during a rolling upgrade: they write,
                // read and prune `decision`, which stays as a view over the runs that writes through to them
                // (docs/OPERATIONS.md, "Upgrading gateways that share a database").
                """
                CREATE VIEW decision (seq, requestId, instanceId, kind, due, reason) AS
                SELECT r.seq, r.requestId, i.instance, r.kind, r.due, r.reason FROM decision_run r
                CROSS JOIN LATERAL (
                    SELECT value::bigint AS instance FROM jsonb_array_elements_text(r.instances::jsonb) WHERE r.instances <> '[]'
                    UNION ALL SELECT NULL FROM generate_series(1, r.count) WHERE r.instances = '[]') i
                """,
                """
                CREATE FUNCTION reloadgate_decision_write() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN
                    IF TG_OP = 'INSERT' THEN
                        INSERT INTO decision_run (requestId, kind, due, reason, instances, count)
                        VALUES (NEW.requestId, NEW.kind, NEW.due, NEW.reason,
                            CASE WHEN NEW.instanceId IS NULL THEN '[]' ELSE '[' || NEW.instanceId || ']' END, 1);
                        RETURN NEW;
                    END IF;
                    DELETE FROM decision_run WHERE seq = OLD.seq;
                    RETURN OLD;
                END
                $$
                """,
                """
                CREATE TRIGGER decision_writes INSTEAD OF INSERT OR DELETE ON decision
                FOR EACH ROW EXECUTE FUNCTION reloadgate_decision_write()
                """,
            ]
        ),
        (
            "pg10-activity-state",
            [
                // A Live Activity's content state (the SQLite store's `v21-activity-state`). Gateways of the
                // version before leave it as it is: they schedule no activities.
                "ALTER TABLE instance_state ADD COLUMN activity text",
            ]
        ),
        (
            "pg11-registration-key",
            [
                // The app's registration key's SHA-256 (the SQLite store's `v22-registration-key`).
                "ALTER TABLE app ADD COLUMN registrationKeyHash bytea",
                "CREATE UNIQUE INDEX app_on_registration_key ON app (registrationKeyHash)",
            ]
        ),
        (
            "pg12-delivery-in-flight",
            [
                // The `sending` mark without a change of the indexed `state` (the SQLite store's
                // `v23-delivery-in-flight`, decision 0096). Gateways of the version before still write
                // `state = 'sending'`, which reads the same; a delivery this version marks in flight reads as
                // `pending` to them (sent again after a takeover, without its unknown outcome counted).
                "ALTER TABLE delivery ADD COLUMN inFlight bigint NOT NULL DEFAULT 0",
            ]
        ),
        (
            "pg13-device-by-token",
            [
                // One index over a device's token, (token, appId), where there were two (the SQLite store's
                // `v24-device-by-token`, decision 0103). `ON CONFLICT (appId, token)` names the same key:
                // PostgreSQL matches a conflict target's columns in any order, so gateways of the version
                // before keep inserting devices while and after this runs.
                "ALTER TABLE device ADD CONSTRAINT device_token_appid_key UNIQUE (token, appId)",
                "ALTER TABLE device DROP CONSTRAINT device_appid_token_key",
                "DROP INDEX device_on_token",
                "CREATE INDEX device_on_appid ON device (appId)",
            ]
        ),
    ]

    /// The advisory lock key of migrations (any constant; "RLGT" in ASCII).
    static let migrationLock: Int64 = 0x524C_4754

    /// Applies the migrations not applied yet, in one transaction under ``migrationLock``: a gateway
    /// starting while another migrates waits for it and then finds nothing to do.
    /// - Parameter last: the last migration to apply (tests build the database of an older version).
    static func migrate(_ client: PostgresClient, upTo last: String? = nil, logger: Logger) async throws {
        try await client.withConnection { connection in try await connection.inTransaction(logger: logger) { connection in
            // A migration may rewrite a large table, and a gateway starting meanwhile waits for it: neither
            // is held to the store deadline of the pool's connections.
            try await connection.run("SET LOCAL statement_timeout = 0", logger: logger)
            try await connection.run("SET LOCAL lock_timeout = 0", logger: logger)
            _ = try await connection.rows("SELECT pg_advisory_xact_lock(\(migrationLock))", logger: logger)
            _ = try await connection.rows(
                "CREATE TABLE IF NOT EXISTS store_migration (name text PRIMARY KEY, appliedAt timestamptz NOT NULL DEFAULT now())",
                logger: logger
            )
            var applied = Set<String>()
            for row in try await connection.rows("SELECT name FROM store_migration", logger: logger) {
                applied.insert(try row.value("name", as: String.self))
            }
            let wanted = last.flatMap { last in migrations.firstIndex { $0.name == last }.map { migrations[...$0] } } ?? migrations[...]
            for migration in wanted where !applied.contains(migration.name) {
                for statement in migration.statements {
                    _ = try await connection.rows(PostgresQuery(unsafeSQL: statement), logger: logger)
                }
                _ = try await connection.rows("INSERT INTO store_migration (name) VALUES (\(migration.name))", logger: logger)
                logger.info("store migrated", metadata: ["migration": "\(migration.name)"])
            }
        } }
    }

    /// The names of the migrations applied to this store, in the order of ``migrations`` (those applied in
    /// one transaction share a time, and by name `pg10` would sort before `pg2`); names this version does
    /// not know come last.
    public func appliedMigrations() async throws -> [String] {
        let applied = try await rows("SELECT name FROM store_migration").map { try $0.value("name", as: String.self) }
        let order = Dictionary(uniqueKeysWithValues: Self.migrations.enumerated().map { ($0.element.name, $0.offset) })
        return applied.sorted { (order[$0] ?? Int.max, $0) < (order[$1] ?? Int.max, $1) }
    }
}
