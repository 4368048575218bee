// SQLite's process-wide settings, for the SQLite store (Sources/ReloadGateStore/SQLite/SQLiteStore.swift).
// sqlite3_config is variadic, which Swift cannot call, and it must run before SQLite is first used; the
// header does not include <sqlite3.h>, so that SQLite's types reach Swift only through GRDB's module.
#ifndef CRELOADGATESQLITE_H
#define CRELOADGATESQLITE_H

/// What turning off SQLite's memory statistics (`SQLITE_CONFIG_MEMSTATUS`) answered when the process was
/// loaded: 0 (`SQLITE_OK`) when they are off. With them on, every allocation and free inside SQLite takes a
/// process-wide mutex; the gateway reads none of them (no `sqlite3_memory_used`, no soft heap limit).
int reloadgate_sqlite_memory_statistics_setting(void);

#endif
