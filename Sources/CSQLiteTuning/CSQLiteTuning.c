#include "CSQLiteTuning.h"
#include <sqlite3.h>

int mf_sqlite_skip_checkpoint_on_close(void *db) {
#ifdef SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE
    return sqlite3_db_config((sqlite3 *)db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, (int *)0);
#else
    (void)db;
    return SQLITE_OK;
#endif
}
