/* Shared helpers for the engine tests (test_core_*): they need ws_core. */
#ifndef WS_COREUTIL_H
#define WS_COREUTIL_H

#include "testutil.h"
#include "walship.h"

/* One temp dir holding a source database with its writer and a file:// sink. */
struct wt_env {
	char *dir;          /* fresh, under $WS_TEST_TMP; removed by wt_env_free */
	char *db;           /* dir/src.db */
	char *wal;          /* dir/src.db-wal */
	char *sink_dir;     /* dir/sink */
	char *sink_url;     /* file://dir/sink */
	char *out_dir;      /* dir/out, created empty: for restored files */
	struct ws_sink *sink;
	sqlite3 *w;         /* wt_writer_open(db, page_size); NULL once closed */
	unsigned page_size; /* the database's page size (4096 when 0 was asked) */
	unsigned restores;  /* serial for fresh file names in out_dir */
};

/* page_size 0 keeps SQLite's default (4096). */
void wt_env_init(struct wt_env *e, const char *tag, unsigned page_size);
/* Closes the writer (if open) and the sink, removes dir, frees the paths. */
void wt_env_free(struct wt_env *e);

/* ws_stream_tail_frames that must succeed (fails with ws_errmsg()). */
void wt_tail_ok(struct ws_stream *st, struct ws_outcome *o);

/* Schema and every row of table t, in key order (rows_out may be NULL). */
uint64_t wt_content_hash(sqlite3 *db, int64_t *rows_out);
/* Open a restored file read-only: integrity_check must be ok; returns its hash. */
uint64_t wt_file_hash(const char *path, int64_t *rows);
/* Restore tenant (opts may be NULL: the latest) into a fresh file of out_dir
 * that must succeed; returns its content hash (the file is removed). */
uint64_t wt_restore_hash(struct wt_env *e, const char *tenant, const struct ws_restore_opts *o, int64_t *rows);

#endif
