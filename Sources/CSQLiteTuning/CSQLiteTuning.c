#include "CSQLiteTuning.h"
#include <sqlite3.h>
#include <stddef.h>

int mf_sqlite_skip_checkpoint_on_close(void *db) {
#ifdef SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE
    return sqlite3_db_config((sqlite3 *)db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, (int *)0);
#else
    (void)db;
    return SQLITE_OK;
#endif
}

int mf_sqlite_bind_text(void *statement, int index, const char *text) {
    if (text == NULL) return sqlite3_bind_null((sqlite3_stmt *)statement, index);
    return sqlite3_bind_text((sqlite3_stmt *)statement, index, text, -1, SQLITE_TRANSIENT);
}

int mf_sqlite_parameter_count(void *statement) {
    return sqlite3_bind_parameter_count((sqlite3_stmt *)statement);
}

int mf_sqlite_bind_int64(void *statement, int index, long long value) {
    return sqlite3_bind_int64((sqlite3_stmt *)statement, index, (sqlite3_int64)value);
}

int mf_sqlite_bind_double(void *statement, int index, double value) {
    return sqlite3_bind_double((sqlite3_stmt *)statement, index, value);
}

int mf_sqlite_run(void *statement) {
    int code;
    do {
        code = sqlite3_step((sqlite3_stmt *)statement);
    } while (code == SQLITE_ROW);
    // The error of a failed step is also given by reset; the step's own code is kept.
    sqlite3_reset((sqlite3_stmt *)statement);
    return code;
}

const char *mf_sqlite_error_message(void *statement) {
    return sqlite3_errmsg(sqlite3_db_handle((sqlite3_stmt *)statement));
}
