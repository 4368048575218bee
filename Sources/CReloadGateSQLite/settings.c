#include "CReloadGateSQLite.h"
#include <sqlite3.h>

static int memory_statistics_setting = -1;

// Run when the process is loaded, before main and before any thread: sqlite3_config takes effect only
// before SQLite initializes, and must not run beside any other SQLite call.
__attribute__((constructor)) static void reloadgate_sqlite_configure(void) {
    memory_statistics_setting = sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}

int reloadgate_sqlite_memory_statistics_setting(void) {
    return memory_statistics_setting;
}
