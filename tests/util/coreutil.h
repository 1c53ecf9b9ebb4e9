/* Shared helpers for the engine tests (test_core_*): they need ws_core. */
#ifndef WS_COREUTIL_H
#define WS_COREUTIL_H

#include <pthread.h>
#include <stdbool.h>

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
/* A fresh file name in out_dir (free it). */
char *wt_out_path(struct wt_env *e);
/* Restore tenant (opts may be NULL: the latest) into a fresh file of out_dir
 * that must succeed; returns its content hash (the file is removed). */
uint64_t wt_restore_hash(struct wt_env *e, const char *tenant, const struct ws_restore_opts *o, int64_t *rows);

/* Restore tenant with o into a fresh file of out_dir: its result, and the
 * state's content hash when 0 (the file is removed). */
int wt_try_restore(struct wt_env *e, const char *tenant, const struct ws_restore_opts *o, uint64_t *hash);
/* The state acknowledged at time_ms (and, with a generation, at frame of
 * it) restores to hash, by restore --time and --frame GENERATION:N; a
 * failure names label. */
void wt_point_check(struct wt_env *e, const char *tenant, const char *label, uint64_t hash, int64_t time_ms,
		    const char *gen, uint64_t frame);
/* A fresh bucket on the S3 fixture (WS_S3_ENDPOINT), named from prefix,
 * the pid and the time; url gets its s3:// URL. 0, or -1. */
int wt_s3_new_bucket(const char *prefix, char *url, size_t len);
/* What an application does while walship is down that makes the next
 * tail re-base: its last connection closes (SQLite checkpoints and deletes
 * the WAL), a TRUNCATE checkpoint restarts the WAL, or the database file is
 * replaced by a copy of itself (VACUUM INTO, renamed over it). */
enum wt_rebase_how { WT_CLOSE_LAST_CONNECTION, WT_WAL_RESTART, WT_FILE_REPLACED };
void wt_rebase_while_down(struct wt_env *e, enum wt_rebase_how how);
/* The live WAL's generation (as restore --frame GENERATION:N names it) and
 * its last frame, from its header and size; false when there is no WAL. */
bool wt_wal_pos(const struct wt_env *e, char gen[32], uint64_t *frame);

/* Write an object straight into e's file:// sink at key (its directories
 * made; a file there replaced, never modified in place: published objects
 * may be hard links), as another writer or a damaged store would leave it. */
void wt_sink_put(const struct wt_env *e, const char *key, const void *data, size_t len);

/* A ws_verify problem callback (arg: struct wt_problems): counts them and
 * keeps the first as "key: detail". */
struct wt_problems {
	unsigned n;
	char first[2048];
};
void wt_problem(const char *tenant, const char *key, int err, const char *detail, void *arg);

/* Follower callbacks (struct ws_follow_ops) for a follower that must be
 * handed nothing: each fails the test. */
int wt_follow_no_image(void *arg, uint64_t tx, const uint8_t *img, uint64_t pages, uint32_t ps);
int wt_follow_no_apply(void *arg, uint64_t tx, const uint32_t *pgno, const uint8_t *pages, uint32_t n, uint32_t ps,
		       uint32_t dbp);

/* Create a fresh bucket on the S3 test server ($WS_S3_ENDPOINT), named
 * ws-<tag>-<pid>-<time> into bucket: 0, or -1 (a cmocka group setup's answer). */
int wt_s3_fresh_bucket(const char *tag, char *bucket, size_t cap);

/* Every key under tenant/ in sink's store, with its size, then the
 * watermark's bytes in hex: one string to compare (free it). */
char *wt_tenant_state(struct ws_sink *sink, const char *tenant);

/*
 * A real SQLite writer that changes the database at a paused site, and the
 * record of every state the source committed (content hashes, in order).
 * wt_mutate is a ws_fault pause callback: one commit (a row on the first
 * pages and rows at the end), then by `how`: nothing (0), a WAL checkpoint
 * PASSIVE (1), FULL (2), RESTART (3), TRUNCATE (4) and another commit, or a
 * transaction that spills its cache (5). While walship holds the write lock
 * (its own WAL checkpoint) the commit is skipped, as SQLite would make an
 * application wait.
 */
#define WT_STATES_MAX 64
#define WT_MUTATIONS 6
struct wt_mutator {
	struct wt_env *e;
	sqlite3 *ck;       /* runs the WAL checkpoints, busy timeout 0 */
	unsigned how;
	uint64_t states[WT_STATES_MAX];
	unsigned nstates;
	int fired;
};
void wt_mutator_init(struct wt_mutator *m, struct wt_env *e, unsigned how);
void wt_mutator_free(struct wt_mutator *m);
/* Record the source's current state as committed. */
void wt_mutator_record(struct wt_mutator *m);
/* Index of the state with this hash in the record, or -1. */
int wt_mutator_find(const struct wt_mutator *m, uint64_t hash);
void wt_mutate(const char *site, void *arg);

/*
 * A pause (ws_fault_add's WS_FAULT_PAUSE): the thread that reaches the site
 * waits in wt_gate_wait until wt_gate_open; wt_gate_until_paused waits (10 s
 * at most, else the test fails) until one has.
 */
struct wt_gate {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool paused, go;
};
#define WT_GATE_INIT { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, false }
void wt_gate_wait(const char *site, void *arg);
void wt_gate_until_paused(struct wt_gate *g);
void wt_gate_open(struct wt_gate *g);

#endif
