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

#endif
