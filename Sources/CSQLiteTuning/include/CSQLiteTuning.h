#ifndef MEDIAFETCH_CSQLITETUNING_H
#define MEDIAFETCH_CSQLITETUNING_H

/// sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, NULL) for the
/// connection `db` (a `sqlite3 *`): closing it no longer checkpoints the WAL
/// into the database file (two fsyncs and a copy of every page in the WAL,
/// all on the way out of every run). The rows are committed in the WAL
/// already, and the next writer's automatic checkpoints keep the WAL bounded.
/// sqlite3_db_config is variadic, which Swift does not call. Returns an
/// SQLite result code (SQLITE_OK is 0).
int mf_sqlite_skip_checkpoint_on_close(void *db);

/// sqlite3_bind_text(statement, index, text, -1, SQLITE_TRANSIENT) for the
/// prepared statement `statement` (a `sqlite3_stmt *`): the text up to its
/// NUL, copied by SQLite, so it need only live for the call; or
/// sqlite3_bind_null when `text` is NULL. SQLITE_TRANSIENT is a cast of -1
/// to a function pointer, which Swift does not import. Returns an SQLite
/// result code.
int mf_sqlite_bind_text(void *statement, int index, const char *text);

/// sqlite3_bind_parameter_count(statement): how many parameters it has.
int mf_sqlite_parameter_count(void *statement);

/// sqlite3_bind_int64(statement, index, value). Returns an SQLite result code.
int mf_sqlite_bind_int64(void *statement, int index, long long value);

/// sqlite3_bind_double(statement, index, value). Returns an SQLite result code.
int mf_sqlite_bind_double(void *statement, int index, double value);

/// Runs `statement` to its end (sqlite3_step until it gives no row), then
/// resets it, keeping its bindings until they are replaced. Returns the
/// result code of the last step: SQLITE_DONE (101) when it ran through.
int mf_sqlite_run(void *statement);

/// sqlite3_errmsg of the connection that prepared `statement`: the message
/// for its last failed call.
const char *mf_sqlite_error_message(void *statement);

#endif
