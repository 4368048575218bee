// SQLite's process-wide settings, for the SQLite store (Sources/ReloadGateStore/SQLite/SQLiteStore.swift).
// sqlite3_config is variadic, which Swift cannot call, and it must run before SQLite is first used; the
// header does not include <sqlite3.h>, so that SQLite's types reach Swift only through GRDB's module.
#ifndef CRELOADGATESQLITE_H
#define CRELOADGATESQLITE_H

/// What turning off SQLite's memory statistics (`SQLITE_CONFIG_MEMSTATUS`) answered when the process was
/// loaded: 0 (`SQLITE_OK`) when they are off. With them on, every allocation and free inside SQLite takes a
/// process-wide mutex; the gateway reads none of them (no `sqlite3_memory_used`, no soft heap limit).
int reloadgate_sqlite_memory_statistics_setting(void);

/// How many bytes of a statement journal SQLite keeps in memory before it writes the journal to a file
/// (`SQLITE_CONFIG_STMTJRNL_SPILL`; SQLite's default is 64 KiB): 128 KiB less one byte, the most that
/// SQLite's Unix file layer writes in one call (`seekAndWriteFd` keeps the low 17 bits of a length). A
/// journal that outgrows the threshold is copied to its file one chunk of the threshold's size at a time,
/// so a larger threshold makes that copy fail as a full disk (`SQLITE_FULL`; decision 0105).
#define RELOADGATE_SQLITE_STATEMENT_JOURNAL_IN_MEMORY (128 * 1024 - 1)

/// What setting the statement journal's threshold (`RELOADGATE_SQLITE_STATEMENT_JOURNAL_IN_MEMORY`) answered
/// when the process was loaded: 0 (`SQLITE_OK`) when it took effect.
int reloadgate_sqlite_statement_journal_setting(void);

#endif
