#include "CReloadGateSQLite.h"
#include <sqlite3.h>

static int memory_statistics_setting = -1;
static int statement_journal_setting = -1;

// Run when the process is loaded, before main and before any thread: sqlite3_config takes effect only
// before SQLite initializes, and must not run beside any other SQLite call.
__attribute__((constructor)) static void reloadgate_sqlite_configure(void) {
    memory_statistics_setting = sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
    statement_journal_setting = sqlite3_config(SQLITE_CONFIG_STMTJRNL_SPILL, RELOADGATE_SQLITE_STATEMENT_JOURNAL_IN_MEMORY);
}

int reloadgate_sqlite_memory_statistics_setting(void) {
    return memory_statistics_setting;
}

int reloadgate_sqlite_statement_journal_setting(void) {
    return statement_journal_setting;
}
