/*
 * End to end through the library API against a real SQLite writer in this
 * process: random transactions (small rows, overflow blobs, updates,
 * deletes, a WITHOUT ROWID table, header fields, multi-megabyte
 * transactions), WAL checkpoints of every mode by the application, its
 * autocheckpoint on in some runs, writer restarts, and stream restarts that
 * force a re-base. After many steps the test ships, restores into a fresh
 * file and requires the restore to equal the source at that moment: a
 * content hash of every row of every table and the schema, PRAGMA
 * integrity_check on the restored file, and every few steps a textual
 * comparison of `sqlite3 .dump` of both files.
 *
 * Each run is driven by a seeded PRNG and its seed is printed. To replay
 * or lengthen: WS_E2E_SEED=S gives run i (of the three configurations
 * below) seed S+i, WS_E2E_STEPS sets the steps per run, WS_E2E_RUNS
 * repeats the three with fresh seeds, WS_E2E_TRACE=1 prints every action.
 * RESTART and TRUNCATE checkpoints may return SQLITE_BUSY while the stream
 * holds its read mark: that is the design, so the test records them rather
 * than failing. The largest -wal file seen is reported, with a generous
 * bound asserted, to show the stream's own checkpoints keep it in check.
 */
#include <errno.h>
#include <inttypes.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"
#include "walship.h"

#define WAL_BOUND_BYTES ((uint64_t)64 << 20)
#define BLOB_MAX (1u << 20)

/* ---- hashing a database's logical content ------------------------------ */

/* A content hash being built: the FNV-1a state and the rows folded in. */
struct fnv {
	uint64_t h;
	uint64_t rows;
};

static void fnv_u64(struct fnv *f, uint64_t v) { wt_fnv(&f->h, &v, sizeof(v)); }

/* Fold one row into the hash at arg, column types and bytes included. */
static void hash_row(sqlite3_stmt *st, void *arg)
{
	struct fnv *f = arg;
	int n = sqlite3_column_count(st);
	f->rows++;
	fnv_u64(f, 0x524f57u); /* row separator */
	for (int i = 0; i < n; i++) {
		int t = sqlite3_column_type(st, i);
		fnv_u64(f, (uint64_t)t);
		switch (t) {
		case SQLITE_INTEGER:
			fnv_u64(f, (uint64_t)sqlite3_column_int64(st, i));
			break;
		case SQLITE_FLOAT: {
			double d = sqlite3_column_double(st, i);
			wt_fnv(&f->h, &d, sizeof(d));
			break;
		}
		case SQLITE_TEXT:
		case SQLITE_BLOB: {
			const void *p = sqlite3_column_blob(st, i);
			size_t len = (size_t)sqlite3_column_bytes(st, i);
			fnv_u64(f, len);
			if (len)
				wt_fnv(&f->h, p, len);
			break;
		}
		default:
			break;
		}
	}
}

/* Schema, header fields and every row of every table, in a fixed order. */
static uint64_t db_hash(sqlite3 *db, uint64_t *rows_out)
{
	static const char *const queries[] = {
		"SELECT type, name, tbl_name, rootpage, sql FROM sqlite_master ORDER BY name",
		"PRAGMA user_version",
		"SELECT * FROM t ORDER BY id",
		"SELECT * FROM kv ORDER BY key",
		"SELECT * FROM big ORDER BY id",
	};
	struct fnv f = { 0xcbf29ce484222325ull, 0 };
	for (size_t i = 0; i < sizeof(queries) / sizeof(queries[0]); i++) {
		int rc = wt_each_row(db, queries[i], hash_row, &f);
		if (rc != SQLITE_OK)
			fail_msg("hash query '%s': %s", queries[i], sqlite3_errmsg(db));
	}
	if (rows_out)
		*rows_out = f.rows;
	return f.h;
}

static uint64_t file_bytes(const char *path)
{
	struct stat sb;
	return stat(path, &sb) == 0 ? (uint64_t)sb.st_size : 0;
}

/* ---- one run ------------------------------------------------------------ */

struct run_cfg {
	uint64_t seed;
	unsigned steps;
	bool autockpt;                  /* writer's wal_autocheckpoint=1000 (else 0) */
	unsigned page_size;
	uint64_t wal_checkpoint_bytes;  /* the stream's own WAL checkpoint threshold */
};

struct run {
	struct run_cfg cfg;
	uint64_t rng;
	char *dir, *src, *wal, *sink_url, *out;
	sqlite3 *w;
	struct ws_sink *sink;
	struct ws_stream *st;
	int64_t max_id;
	uint8_t *blob;
	unsigned restores;          /* serial for fresh restore paths */

	/* statistics */
	unsigned outcomes[5];
	unsigned ckpt_ok[4], ckpt_busy[4];
	unsigned compares, dumps, writer_restarts, stream_restarts, big_txns, txns;
	uint64_t wal_max, stream_ckpts;
};

static const int ckpt_modes[4] = { SQLITE_CHECKPOINT_PASSIVE, SQLITE_CHECKPOINT_FULL,
				   SQLITE_CHECKPOINT_RESTART, SQLITE_CHECKPOINT_TRUNCATE };
static const char *const ckpt_names[4] = { "PASSIVE", "FULL", "RESTART", "TRUNCATE" };

static bool trace_on;

/* WS_E2E_TRACE=1 prints every action, to replay a failing seed by hand. */
static void trace(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void trace(const char *fmt, ...)
{
	va_list ap;
	if (!trace_on)
		return;
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fflush(stdout);
}

static uint64_t rnd(struct run *r, uint64_t n) { return n ? wt_rand(&r->rng) % n : 0; }

static void fill_blob(struct run *r, size_t n)
{
	for (size_t i = 0; i < n; i += 8) {
		uint64_t x = wt_rand(&r->rng);
		memcpy(r->blob + i, &x, n - i < 8 ? n - i : 8);
	}
}

static void writer_open(struct run *r)
{
	char sql[128];
	assert_int_equal(sqlite3_open_v2(r->src, &r->w, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL),
			 SQLITE_OK);
	snprintf(sql, sizeof(sql), "PRAGMA page_size=%u", r->cfg.page_size);
	wt_exec(r->w, sql);
	wt_exec(r->w, "PRAGMA journal_mode=WAL");
	wt_exec(r->w, "PRAGMA synchronous=NORMAL");
	snprintf(sql, sizeof(sql), "PRAGMA wal_autocheckpoint=%d", r->cfg.autockpt ? 1000 : 0);
	wt_exec(r->w, sql);
	/* No busy handler: a RESTART/TRUNCATE checkpoint blocked by the
	 * stream's read mark must come back SQLITE_BUSY at once, not wait. */
	sqlite3_busy_timeout(r->w, 0);
}

static void writer_close(struct run *r)
{
	trace("  writer close\n");
	assert_int_equal(sqlite3_close(r->w), SQLITE_OK);
	r->w = NULL;
}

static void stream_open(struct run *r)
{
	struct ws_stream_config sc = {
		.tenant = "e2e",
		.db_path = r->src,
		.epoch = 1,
		.pointer_generation = 0,
		.policy = WS_POLICY_BLOCK,
		.wal_checkpoint_bytes = r->cfg.wal_checkpoint_bytes,
	};
	int err = 0;
	trace("  stream open\n");
	r->st = ws_stream_open(r->sink, &sc, &err);
	if (!r->st)
		fail_msg("ws_stream_open: %s (%d)", ws_errmsg(), err);
}

static void stream_close(struct run *r)
{
	if (r->st) {
		trace("  stream close\n");
		r->stream_ckpts += ws_stream_wal_checkpoints(r->st);
		ws_stream_close(r->st);
		r->st = NULL;
	}
}

/* A run's temp dir, source database (no tables yet) with its writer open, and
 * blob buffer; the sink's URL is set, opening the sink is the caller's. */
static void run_init(struct run *r, const struct run_cfg *cfg, const char *tag)
{
	memset(r, 0, sizeof(*r));
	r->cfg = *cfg;
	r->rng = cfg->seed;
	r->dir = wt_tmpdir(tag);
	assert_non_null(r->dir);
	r->src = wt_path(r->dir, "src.db");
	assert_true(asprintf(&r->wal, "%s-wal", r->src) > 0);
	assert_true(asprintf(&r->sink_url, "file://%s/sink", r->dir) > 0);
	r->blob = malloc(BLOB_MAX);
	assert_non_null(r->blob);
	writer_open(r);
}

/* The tables random_txn and big_txn write; t_k_index adds an index on t(k). */
static void create_tables(struct run *r, bool t_k_index)
{
	wt_exec(r->w, "CREATE TABLE t(id INTEGER PRIMARY KEY, k INTEGER, v BLOB)");
	if (t_k_index)
		wt_exec(r->w, "CREATE INDEX t_k ON t(k)");
	wt_exec(r->w, "CREATE TABLE kv(key TEXT PRIMARY KEY, val BLOB) WITHOUT ROWID");
	wt_exec(r->w, "CREATE TABLE big(id INTEGER PRIMARY KEY, v BLOB)");
}

static void run_free(struct run *r)
{
	writer_close(r);
	ws_sink_close(r->sink);
	wt_rmrf(r->dir);
	free(r->blob);
	free(r->src);
	free(r->wal);
	free(r->sink_url);
	free(r->dir);
}

static void bind_blob(struct run *r, sqlite3_stmt *s, int col, size_t n)
{
	fill_blob(r, n);
	assert_int_equal(sqlite3_bind_blob(s, col, r->blob, (int)n, SQLITE_TRANSIENT), SQLITE_OK);
}

static size_t random_size(struct run *r)
{
	uint64_t p = rnd(r, 100);
	if (p < 65)
		return (size_t)rnd(r, 200);
	if (p < 93)
		return 200 + (size_t)rnd(r, 5000);
	return 5000 + (size_t)rnd(r, 120000); /* overflow pages */
}

static void step_sql(sqlite3_stmt *s)
{
	int rc = sqlite3_step(s);
	if (rc != SQLITE_DONE)
		fail_msg("step '%s': %s", sqlite3_sql(s), sqlite3_errmsg(sqlite3_db_handle(s)));
	sqlite3_reset(s);
	sqlite3_clear_bindings(s);
}

static sqlite3_stmt *prep(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *s = NULL;
	if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) != SQLITE_OK)
		fail_msg("prepare '%s': %s", sql, sqlite3_errmsg(db));
	return s;
}

/* One transaction of 1..40 random operations. */
static void random_txn(struct run *r)
{
	sqlite3_stmt *ins = prep(r->w, "INSERT INTO t(id, k, v) VALUES(?, ?, ?)");
	sqlite3_stmt *upd = prep(r->w, "UPDATE t SET k = ?, v = ? WHERE id = (SELECT id FROM t WHERE id >= ? "
				       "ORDER BY id LIMIT 1)");
	sqlite3_stmt *del = prep(r->w, "DELETE FROM t WHERE id BETWEEN ? AND ?");
	sqlite3_stmt *kv = prep(r->w, "INSERT OR REPLACE INTO kv(key, val) VALUES(?, ?)");
	sqlite3_stmt *kvdel = prep(r->w, "DELETE FROM kv WHERE key = ?");
	unsigned ops = 1 + (unsigned)rnd(r, 40);
	char key[32];

	wt_exec(r->w, "BEGIN");
	for (unsigned i = 0; i < ops; i++) {
		uint64_t p = rnd(r, 100);
		if (p < 45) {
			sqlite3_bind_int64(ins, 1, ++r->max_id);
			sqlite3_bind_int64(ins, 2, (int64_t)rnd(r, 1000000));
			bind_blob(r, ins, 3, random_size(r));
			step_sql(ins);
		} else if (p < 65 && r->max_id > 0) {
			sqlite3_bind_int64(upd, 1, (int64_t)rnd(r, 1000000));
			bind_blob(r, upd, 2, random_size(r));
			sqlite3_bind_int64(upd, 3, 1 + (int64_t)rnd(r, (uint64_t)r->max_id));
			step_sql(upd);
		} else if (p < 77 && r->max_id > 0) {
			int64_t a = 1 + (int64_t)rnd(r, (uint64_t)r->max_id);
			sqlite3_bind_int64(del, 1, a);
			sqlite3_bind_int64(del, 2, a + (int64_t)rnd(r, 8));
			step_sql(del);
		} else if (p < 92) {
			snprintf(key, sizeof(key), "key-%03u", (unsigned)rnd(r, 300));
			sqlite3_bind_text(kv, 1, key, -1, SQLITE_TRANSIENT);
			bind_blob(r, kv, 2, (size_t)rnd(r, 600));
			step_sql(kv);
		} else if (p < 97) {
			snprintf(key, sizeof(key), "key-%03u", (unsigned)rnd(r, 300));
			sqlite3_bind_text(kvdel, 1, key, -1, SQLITE_TRANSIENT);
			step_sql(kvdel);
		} else {
			char sql[64];
			snprintf(sql, sizeof(sql), "PRAGMA user_version=%u", (unsigned)rnd(r, 1u << 30));
			wt_exec(r->w, sql);
		}
	}
	wt_exec(r->w, "COMMIT");
	trace("  txn %u ops, max_id %" PRId64 ", wal %" PRIu64 "\n", ops, r->max_id, file_bytes(r->wal));
	sqlite3_finalize(ins);
	sqlite3_finalize(upd);
	sqlite3_finalize(del);
	sqlite3_finalize(kv);
	sqlite3_finalize(kvdel);
	r->txns++;
}

/* Several megabytes in one transaction; replaces the previous big rows so
 * the database itself stays small. */
static void big_txn(struct run *r)
{
	sqlite3_stmt *ins = prep(r->w, "INSERT INTO big(v) VALUES(?)");
	size_t total = ((size_t)2 << 20) + (size_t)rnd(r, (uint64_t)5 << 20);
	wt_exec(r->w, "BEGIN");
	wt_exec(r->w, "DELETE FROM big");
	for (size_t done = 0; done < total;) {
		size_t n = 32768 + (size_t)rnd(r, 64 * 1024);
		bind_blob(r, ins, 1, n);
		step_sql(ins);
		done += n;
	}
	wt_exec(r->w, "COMMIT");
	trace("  big txn %zu bytes, wal %" PRIu64 "\n", total, file_bytes(r->wal));
	sqlite3_finalize(ins);
	r->big_txns++;
}

static void app_checkpoint(struct run *r)
{
	unsigned m = (unsigned)rnd(r, 4);
	int log_frames = -1, ckpt_frames = -1;
	int rc = sqlite3_wal_checkpoint_v2(r->w, NULL, ckpt_modes[m], &log_frames, &ckpt_frames);
	trace("  checkpoint %s: rc %d log %d ckpt %d, wal %" PRIu64 "\n", ckpt_names[m], rc, log_frames,
	      ckpt_frames, file_bytes(r->wal));
	if (rc == SQLITE_OK)
		r->ckpt_ok[m]++;
	else if (rc == SQLITE_BUSY)
		r->ckpt_busy[m]++;
	else
		fail_msg("seed %" PRIu64 ": %s checkpoint: %s", r->cfg.seed, ckpt_names[m], sqlite3_errmsg(r->w));
}

static void tail(struct run *r, unsigned step)
{
	struct ws_outcome oc;
	int rc = ws_stream_tail_frames(r->st, &oc);
	if (rc)
		fail_msg("seed %" PRIu64 " step %u: tail_frames: %s (%s)", r->cfg.seed, step, ws_errmsg(),
			 ws_strerror(rc));
	if (oc.kind == WS_OUTCOME_SHED || oc.kind == WS_OUTCOME_FENCED)
		fail_msg("seed %" PRIu64 " step %u: unexpected outcome %s", r->cfg.seed, step,
			 ws_outcome_name(oc.kind));
	r->outcomes[oc.kind]++;
	trace("  tail: %s", ws_outcome_name(oc.kind));
	if (oc.kind == WS_OUTCOME_STREAMED)
		trace(" frames %" PRIu64 "..%" PRIu64 " seq %u", oc.u.streamed.first_frame, oc.u.streamed.last_frame,
		      oc.u.streamed.checkpoint_seq);
	else if (oc.kind == WS_OUTCOME_RESTARTED)
		trace(" frames %" PRIu64 "..%" PRIu64 " seq %u->%u", oc.u.restarted.first_frame,
		      oc.u.restarted.last_frame, oc.u.restarted.previous_generation.checkpoint_seq,
		      oc.u.restarted.new_generation.checkpoint_seq);
	else if (oc.kind == WS_OUTCOME_EMPTY)
		trace(" wm last_frame %" PRIu64 " seq %u", oc.u.empty.watermark.last_frame,
		      oc.u.empty.watermark.generation.checkpoint_seq);
	trace(" (stream checkpoints %" PRIu64 ")\n", ws_stream_wal_checkpoints(r->st));
	/* The writer is idle: a second call has nothing to ship. */
	if (rnd(r, 4) == 0) {
		rc = ws_stream_tail_frames(r->st, &oc);
		if (rc)
			fail_msg("seed %" PRIu64 " step %u: second tail_frames: %s", r->cfg.seed, step, ws_errmsg());
		if (oc.kind != WS_OUTCOME_EMPTY)
			fail_msg("seed %" PRIu64 " step %u: second tail_frames on an idle writer was %s, not empty",
				 r->cfg.seed, step, ws_outcome_name(oc.kind));
		r->outcomes[oc.kind]++;
	}
}

static void check_integrity(sqlite3 *db, const char *what, uint64_t seed, unsigned step)
{
	sqlite3_stmt *s = prep(db, "PRAGMA integrity_check");
	const char *res;
	assert_int_equal(sqlite3_step(s), SQLITE_ROW);
	res = (const char *)sqlite3_column_text(s, 0);
	if (!res || strcmp(res, "ok") != 0)
		fail_msg("seed %" PRIu64 " step %u: %s: integrity_check: %s", seed, step, what, res ? res : "?");
	sqlite3_finalize(s);
}

/* Restore into a fresh file and compare it with the source as it is now. */
static void restore_and_compare(struct run *r, unsigned step, bool dump)
{
	struct ws_restore_opts ro = { 0 };
	char name[64];
	char *out;
	sqlite3 *db = NULL;
	uint64_t want, got, want_rows = 0, got_rows = 0;
	int rc;

	snprintf(name, sizeof(name), "restore-%u.db", r->restores++);
	out = wt_path(r->dir, name);
	rc = ws_restore(r->sink, "e2e", &ro, out);
	if (rc)
		fail_msg("seed %" PRIu64 " step %u: restore: %s (%s)", r->cfg.seed, step, ws_errmsg(),
			 ws_strerror(rc));
	want = db_hash(r->w, &want_rows);
	assert_int_equal(sqlite3_open_v2(out, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	check_integrity(db, "restored file", r->cfg.seed, step);
	got = db_hash(db, &got_rows);
	sqlite3_close(db);
	if (got != want)
		fail_msg("seed %" PRIu64 " step %u: restored content differs from the source (rows %" PRIu64
			 " vs source %" PRIu64 ")", r->cfg.seed, step, got_rows, want_rows);
	r->compares++;
	trace("  restore ok (%" PRIu64 " rows)\n", got_rows);
	if (dump) {
		char *a = wt_path(r->dir, "src.sql"), *b = wt_path(r->dir, "out.sql");
		/* -readonly: a read-only connection never checkpoints or deletes
		 * the WAL when it closes (test_stream_close_keeps_app_locks is
		 * about what a read-write one may do). */
		if (wt_sh("sqlite3 -readonly '%s' .dump > '%s'", r->src, a) != 0 ||
		    wt_sh("sqlite3 '%s' .dump > '%s'", out, b) != 0)
			fail_msg("seed %" PRIu64 " step %u: sqlite3 .dump failed", r->cfg.seed, step);
		if (wt_sh("cmp -s '%s' '%s'", a, b) != 0)
			fail_msg("seed %" PRIu64 " step %u: sqlite3 .dump of the source and of the restore differ "
				 "(%s vs %s)", r->cfg.seed, step, a, b);
		unlink(a);
		unlink(b);
		free(a);
		free(b);
		r->dumps++;
	}
	unlink(out);
	free(out);
}

static void run_one(const struct run_cfg *cfg)
{
	struct run r;
	int err = 0;
	int64_t t0 = wt_now_ms();

	printf("[ e2e ] seed=%" PRIu64 " (0x%" PRIx64 ") steps=%u autocheckpoint=%s page_size=%u stream_wal_checkpoint=%" PRIu64
	       "\n", cfg->seed, cfg->seed, cfg->steps, cfg->autockpt ? "on" : "off", cfg->page_size,
	       cfg->wal_checkpoint_bytes);
	fflush(stdout);
	run_init(&r, cfg, "core_e2e");
	create_tables(&r, true);
	r.sink = ws_sink_open(r.sink_url, &err);
	if (!r.sink)
		fail_msg("ws_sink_open %s: %s", r.sink_url, ws_errmsg());
	stream_open(&r);

	for (unsigned step = 0; step < cfg->steps; step++) {
		uint64_t p = rnd(&r, 100);
		bool force_check = step % 10 == 9 || step + 1 == cfg->steps;
		trace("step %u (p=%" PRIu64 ")\n", step, p);

		if (p < 55) {
			unsigned n = 1 + (unsigned)rnd(&r, 3);
			for (unsigned i = 0; i < n; i++)
				random_txn(&r);
		} else if (p < 59) {
			big_txn(&r);
		} else if (p < 75) {
			app_checkpoint(&r);
			if (rnd(&r, 2))
				random_txn(&r);
		} else if (p < 84) {
			/* Writer restart; closing is not the last connection while
			 * the stream is open, so the WAL stays. */
			writer_close(&r);
			writer_open(&r);
			random_txn(&r);
			r.writer_restarts++;
		} else if (p < 92) {
			/* Stream restart: continuity is unproven on reopen, so the
			 * next call re-bases if the generation changed meanwhile.
			 * Sometimes the writer also restarts while no stream is
			 * open: its close is then the last one, which checkpoints
			 * and deletes the WAL. */
			stream_close(&r);
			if (rnd(&r, 2)) {
				writer_close(&r);
				writer_open(&r);
				r.writer_restarts++;
			}
			if (rnd(&r, 2)) {
				random_txn(&r);
				if (rnd(&r, 2))
					app_checkpoint(&r);
			}
			if (rnd(&r, 4) == 0) {
				ws_sink_close(r.sink);
				r.sink = ws_sink_open(r.sink_url, &err);
				assert_non_null(r.sink);
			}
			stream_open(&r);
			r.stream_restarts++;
		} else {
			random_txn(&r);
		}

		if (force_check || rnd(&r, 100) < 70) {
			tail(&r, step);
			if (force_check || rnd(&r, 100) < 40)
				restore_and_compare(&r, step, step % 10 == 9);
		}
		uint64_t ws = file_bytes(r.wal);
		if (ws > r.wal_max)
			r.wal_max = ws;
	}
	stream_close(&r);

	printf("[ e2e ] seed=%" PRIu64 ": %u txns (%u big), %u writer restarts, %u stream restarts; outcomes: "
	       "empty=%u streamed=%u restarted=%u; %u restores compared (%u by .dump); app checkpoints ok/busy: "
	       "PASSIVE %u/%u FULL %u/%u RESTART %u/%u TRUNCATE %u/%u; stream WAL checkpoints %" PRIu64
	       "; max WAL %.1f MiB; %.1f s\n",
	       cfg->seed, r.txns, r.big_txns, r.writer_restarts, r.stream_restarts, r.outcomes[WS_OUTCOME_EMPTY],
	       r.outcomes[WS_OUTCOME_STREAMED], r.outcomes[WS_OUTCOME_RESTARTED], r.compares, r.dumps, r.ckpt_ok[0],
	       r.ckpt_busy[0], r.ckpt_ok[1], r.ckpt_busy[1], r.ckpt_ok[2], r.ckpt_busy[2], r.ckpt_ok[3],
	       r.ckpt_busy[3], r.stream_ckpts, (double)r.wal_max / (1 << 20), (double)(wt_now_ms() - t0) / 1000.0);
	fflush(stdout);

	if (r.wal_max >= WAL_BOUND_BYTES)
		fail_msg("seed %" PRIu64 ": the -wal file reached %" PRIu64 " bytes (bound %" PRIu64 ")", cfg->seed,
			 r.wal_max, WAL_BOUND_BYTES);
	/* The run must have exercised what it claims to. */
	assert_true(r.compares > 0);
	assert_true(r.outcomes[WS_OUTCOME_STREAMED] > 0);
	assert_true(r.outcomes[WS_OUTCOME_RESTARTED] > 0);

	run_free(&r);
}

/* ---- tests -------------------------------------------------------------- */

static const struct run_cfg base_runs[] = {
	/* autocheckpoint on, default page size, default stream threshold */
	{ 0x5eed0001, 150, true, 4096, 0 },
	/* autocheckpoint off: only explicit and the stream's own checkpoints;
	 * a small stream threshold so it checkpoints often */
	{ 0x5eed0002, 150, false, 1024, 256 << 10 },
	/* large pages, autocheckpoint on, stream checkpoints at 1 MiB */
	{ 0x5eed0003, 150, true, 16384, 1 << 20 },
};

static void test_random_writer(void **state)
{
	(void)state;
	uint64_t seed = wt_env_u64("WS_E2E_SEED", 0);
	unsigned steps = (unsigned)wt_env_u64("WS_E2E_STEPS", 0);
	unsigned runs = (unsigned)wt_env_u64("WS_E2E_RUNS", 1);
	trace_on = wt_env_u64("WS_E2E_TRACE", 0) != 0;

	for (unsigned k = 0; k < runs; k++) {
		for (size_t i = 0; i < sizeof(base_runs) / sizeof(base_runs[0]); i++) {
			struct run_cfg c = base_runs[i];
			if (seed)
				c.seed = seed + k * 3 + i;
			if (steps)
				c.steps = steps;
			run_one(&c);
		}
	}
}

/*
 * The stream's own checkpoints bound the WAL even when the application
 * never checkpoints at all (autocheckpoint off, no explicit checkpoints):
 * many small transactions, tail after each; the -wal file must stay near
 * the stream's threshold instead of growing with every commit.
 */
static void test_wal_bounded_without_app_checkpoints(void **state)
{
	(void)state;
	struct run r;
	int err = 0;
	trace_on = wt_env_u64("WS_E2E_TRACE", 0) != 0;

	run_init(&r, &(struct run_cfg){ 0x5eed00aa, 0, false, 4096, 512 << 10 }, "core_e2e_bound");
	create_tables(&r, true);
	r.sink = ws_sink_open(r.sink_url, &err);
	assert_non_null(r.sink);
	stream_open(&r);

	/* ~12 MiB of WAL traffic in total without any application checkpoint. */
	for (unsigned i = 0; i < 400; i++) {
		random_txn(&r);
		tail(&r, i);
		uint64_t ws = file_bytes(r.wal);
		if (ws > r.wal_max)
			r.wal_max = ws;
	}
	restore_and_compare(&r, 400, true);
	uint64_t total_frames_bytes = 0;
	{
		struct ws_sink_stats s;
		ws_sink_get_stats(r.sink, &s);
		total_frames_bytes = s.bytes_put;
	}
	stream_close(&r);
	printf("[ e2e ] no app checkpoints: shipped %.1f MiB, stream WAL checkpoints %" PRIu64
	       ", max WAL %.2f MiB (threshold 0.5 MiB)\n",
	       (double)total_frames_bytes / (1 << 20), r.stream_ckpts, (double)r.wal_max / (1 << 20));
	fflush(stdout);
	assert_true(r.stream_ckpts > 0);
	/* Threshold plus one transaction (at most ~40 x 125 KB) plus slack. */
	if (r.wal_max > (8u << 20))
		fail_msg("WAL grew to %" PRIu64 " bytes although the stream checkpoints at 512 KiB", r.wal_max);

	run_free(&r);
}

/*
 * The stream reads the database file through its own descriptor. Closing
 * that descriptor must not cost the process SQLite's POSIX locks on the
 * same file (fcntl locks belong to the process and die with any close of
 * the file): without the SHARED lock the application's connections hold,
 * another process that closes its connection believes it is the last one,
 * checkpoints and deletes the -wal file under the live writer, and every
 * later commit of that writer goes to an unlinked file. A host that embeds
 * libwalship and closes or re-opens a stream would lose data that way.
 */
static void test_stream_close_keeps_app_locks(void **state)
{
	(void)state;
	struct run r;
	int err = 0;
	char *cnt = NULL;
	size_t len = 0;

	run_init(&r, &(struct run_cfg){ 0x5eed00bb, 0, false, 4096, 0 }, "core_e2e_locks");
	create_tables(&r, false);
	wt_exec(r.w, "INSERT INTO t(k, v) VALUES(1, x'01')");
	r.sink = ws_sink_open(r.sink_url, &err);
	assert_non_null(r.sink);
	stream_open(&r);
	tail(&r, 0);
	stream_close(&r);

	/* Another process reads the database and closes its connection. */
	assert_int_equal(wt_sh("sqlite3 '%s' 'SELECT count(*) FROM t' >/dev/null", r.src), 0);
	if (access(r.wal, F_OK) != 0)
		fail_msg("the -wal file of %s was deleted by another process's sqlite3_close while this "
			 "process's writer was still open: closing the stream dropped the writer's POSIX lock on "
			 "the database file (core/stream_wal.c file_close on db_fd)", r.src);
	/* And the writer's next commit is visible to other processes. */
	wt_exec(r.w, "INSERT INTO t(k, v) VALUES(2, x'02')");
	{
		char *outp = wt_path(r.dir, "count.txt");
		assert_int_equal(wt_sh("sqlite3 '%s' 'SELECT count(*) FROM t' > '%s'", r.src, outp), 0);
		cnt = (char *)wt_read_file(outp, &len);
		assert_non_null(cnt);
		cnt[len] = '\0';
		if (atoi(cnt) != 2)
			fail_msg("a commit of the live writer is invisible to other processes: they count %d rows, "
				 "not 2", atoi(cnt));
		free(outp);
		free(cnt);
	}
	run_free(&r);
}

/*
 * A WAL that is absent or empty on both sides does not prove the database
 * file unchanged. The stream ships a state while the WAL is empty (after
 * a TRUNCATE checkpoint), is closed (or its process restarts), the
 * application commits and truncates the WAL again, and a new stream opens:
 * the live generation is "none" and so is the watermark's, yet the
 * database file holds new commits. That call must ship them (re-base), not
 * report Empty, and restore must give the new state.
 */
static void test_reopen_after_truncate_twice(void **state)
{
	(void)state;
	struct run r;
	struct ws_outcome oc;
	int err = 0;

	run_init(&r, &(struct run_cfg){ 0x5eed00cc, 0, false, 4096, 0 }, "core_e2e_gnone");
	create_tables(&r, false);
	random_txn(&r);
	assert_int_equal(sqlite3_wal_checkpoint_v2(r.w, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL), SQLITE_OK);
	assert_int_equal(file_bytes(r.wal), 0);
	r.sink = ws_sink_open(r.sink_url, &err);
	assert_non_null(r.sink);

	stream_open(&r);
	assert_int_equal(ws_stream_tail_frames(r.st, &oc), 0);
	assert_int_equal(oc.kind, WS_OUTCOME_STREAMED);
	restore_and_compare(&r, 0, false);
	stream_close(&r);

	/* New commits, checkpointed into the file; the WAL is empty again. */
	random_txn(&r);
	random_txn(&r);
	assert_int_equal(sqlite3_wal_checkpoint_v2(r.w, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL), SQLITE_OK);
	assert_int_equal(file_bytes(r.wal), 0);

	stream_open(&r);
	assert_int_equal(ws_stream_tail_frames(r.st, &oc), 0);
	if (oc.kind == WS_OUTCOME_EMPTY)
		fail_msg("tail_frames said Empty although the database file changed since the watermark (both WAL "
			 "generations are 'none'); the new commits are not shipped");
	restore_and_compare(&r, 1, false);
	stream_close(&r);

	run_free(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_random_writer),
		cmocka_unit_test(test_wal_bounded_without_app_checkpoints),
		cmocka_unit_test(test_stream_close_keeps_app_locks),
		cmocka_unit_test(test_reopen_after_truncate_twice),
	};
	return WT_RUN_GROUP(tests, NULL, NULL);
}
