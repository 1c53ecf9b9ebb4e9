/*
 * Exactness under interleavings SQLite allows: the tail is paused at a
 * fault site (base/ws_fault.h) and the database is changed under it
 * by a real SQLite writer in the same process (another connection), at
 * exactly the moment that used to break exactness. Each test then checks
 * what a restore gives against what the source really committed.
 *
 *  1. a database replaced at its path is a new life: re-based, never spliced;
 *  2. a re-base under read mark 0 whose WAL a writer restarts mid-scan;
 *  3. frames of a spilled transaction, past the wal-index's last commit,
 *     rewritten (new checksums) when it commits under a tail: never read;
 *  4. a takeover between the fencing read and the watermark CAS is a lost
 *     race (WS_ELOSTRACE), never Fenced;
 *  5. a fenced stream lets go of its read marks;
 *  7. the WAL-checkpoint fallback's moment without a read mark re-bases;
 *  8. a tail stopped at its work bound (tail_ms_max), a commit and WAL
 *     checkpoints under it there, acknowledges a prefix the source had;
 * and every stream site, paused with a commit (and WAL checkpoints) under
 * it, or failed, leaves a sink whose restore is a state the source had.
 * (6, the file store's durable "exists", is in test_store_file.c.)
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core_internal.h"
#include "coreutil.h"
#include "chain.h"
#include "restore.h"
#include "ws_stream.h"
#include "walship.h"
#include "ws_clock.h"
#include "ws_fault.h"

#define TENANT "ledger"
#define SLOT_FRAMES 64u
#define SPILL_SLOT_FRAMES 16u /* the smallest slot of 4 KiB pages */

/* When the watermark carries the manifest (the default, PRESSED, never does
 * against a file sink: it never holds writes back). */
static enum ws_carry carry_mode = WS_CARRY_PRESSED;
/* Manifest slots (docs/SLOTS.md): the site tests run both ways. */
static bool slots_mode;

static struct ws_stream_config cfg_for(const struct wt_env *e, uint64_t epoch)
{
	struct ws_stream_config c;
	memset(&c, 0, sizeof(c));
	c.carry = carry_mode;
	c.slots = slots_mode;
	c.tenant = TENANT;
	c.db_path = e->db;
	c.epoch = epoch;
	c.pointer_generation = 1;
	c.policy = WS_POLICY_THROTTLE;
	/* Small slots, so one tail reads the WAL in several pieces. */
	c.batch_bytes_max = (size_t)SLOT_FRAMES * (24u + e->page_size);
	c.wal_checkpoint_bytes = UINT64_MAX;
	return c;
}

static struct ws_stream *open_cfg(struct wt_env *e, const struct ws_stream_config *c)
{
	int err = -1;
	struct ws_stream *st = ws_stream_open(e->sink, c, &err);
	if (!st)
		fail_msg("ws_stream_open: %s (%s)", ws_strerror(err), ws_errmsg());
	return st;
}

static struct ws_stream *open_epoch(struct wt_env *e, uint64_t epoch)
{
	struct ws_stream_config c = cfg_for(e, epoch);
	return open_cfg(e, &c);
}

static void restore_equals_source(struct wt_env *e, int line)
{
	int64_t rs = 0, rr = 0;
	uint64_t hs = wt_content_hash(e->w, &rs);
	uint64_t hr = wt_restore_hash(e, TENANT, NULL, &rr);
	if (hs != hr || rs != rr)
		fail_msg("line %d: restored %" PRId64 " rows (hash %016" PRIx64 "), the source has %" PRId64
			 " (hash %016" PRIx64 ")", line, rr, hr, rs, hs);
}

static void verify_ok(struct wt_env *e, int line)
{
	int rc = ws_verify(e->sink, TENANT, NULL, NULL);
	if (rc)
		fail_msg("line %d: verify: %s (%s)", line, ws_strerror(rc), ws_errmsg());
}

static void update_rows(sqlite3 *db, int count, uint64_t *rnd, int64_t key_max)
{
	char sql[128];
	for (int i = 0; i < count; i++) {
		snprintf(sql, sizeof(sql), "UPDATE t SET v = randomblob(100) WHERE k = %" PRId64,
			 (int64_t)(wt_rand(rnd) % (uint64_t)key_max) + 1);
		wt_exec(db, sql);
	}
}

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* salt1 of the live WAL header (0 when there is none). */
static uint32_t wal_salt1(const struct wt_env *e)
{
	size_t len = 0;
	uint8_t *b = wt_read_file(e->wal, &len);
	uint32_t s = b && len >= 32 ? be32(b + 16) : 0;
	free(b);
	return s;
}

/* ---- 1. a database replaced at its path ------------------------------- */

/* Make a second database at path with rows of its own, checkpointed into
 * the file and closed (so it is one file, as a restore or a copy leaves it). */
static void make_other_db(const char *path, int rows)
{
	sqlite3 *db = wt_writer_open(path, 0);
	wt_write_txn(db, rows, 50);
	wt_exec(db, "PRAGMA wal_checkpoint(TRUNCATE)");
	sqlite3_close(db);
}

/* rm db-wal db-shm; mv other db; open a writer on it: what an operator's
 * copy-into-place or `restore --force -o LIVE_DB` does. */
static void replace_db(struct wt_env *e, const char *other)
{
	char *shm = NULL;
	assert_int_not_equal(asprintf(&shm, "%s-shm", e->db), -1);
	sqlite3_close(e->w);
	unlink(e->wal);
	unlink(shm);
	free(shm);
	assert_int_equal(rename(other, e->db), 0);
	e->w = wt_writer_open(e->db, 0);
}

static void test_replaced_db_is_rebased(void **state)
{
	struct wt_env e;
	struct ws_outcome o;
	struct ws_stream *st;
	char *other;
	(void)state;

	wt_env_init(&e, "replaced", 0);
	other = wt_path(e.dir, "other.db");
	st = open_epoch(&e, 1);
	wt_write_txn(e.w, 164, 40);
	wt_tail_ok(st, &o);
	wt_write_txn(e.w, 3, 40);
	wt_tail_ok(st, &o);
	assert_int_equal(o.kind, WS_OUTCOME_STREAMED);

	make_other_db(other, 34);
	replace_db(&e, other);
	wt_write_txn(e.w, 3, 40); /* 37 rows: none of them the old database's */
	wt_tail_ok(st, &o);
	/* A new life: re-based from the new file, never continued. */
	assert_int_equal(o.kind, WS_OUTCOME_RESTARTED);
	restore_equals_source(&e, __LINE__);
	verify_ok(&e, __LINE__);
	wt_write_txn(e.w, 2, 40);
	wt_tail_ok(st, &o);
	assert_int_equal(o.kind, WS_OUTCOME_STREAMED);
	restore_equals_source(&e, __LINE__);

	ws_stream_close(st);
	free(other);
	wt_env_free(&e);
}

struct replace_ctx {
	struct wt_env *e;
	char *other;
	int fired;
};

static void replace_now(const char *site, void *arg)
{
	struct replace_ctx *c = arg;
	(void)site;
	replace_db(c->e, c->other);
	wt_write_txn(c->e->w, 5, 40);
	c->fired++;
}

/* Replaced while a tail runs, at each site of the tail: the call either
 * acknowledges a state of the old file (a real one) or nothing, and the
 * next call re-bases onto the new file. */
static void test_replaced_during_tail(void **state)
{
	static const char *const sites[] = { "stream.after_begin_read", "stream.after_wal_header",
					     "stream.before_fence", "stream.after_scan",
					     "stream.before_manifest_put" };
	(void)state;
	for (size_t i = 0; i < sizeof(sites) / sizeof(sites[0]); i++) {
		struct wt_env e;
		struct ws_outcome o;
		struct ws_stream *st;
		struct replace_ctx c;
		int64_t rows_old = 0, rows_new = 0;
		uint64_t h_old, h_new, h;
		int rc;

		wt_env_init(&e, "replaced-mid", 0);
		c.e = &e;
		c.other = wt_path(e.dir, "other.db");
		c.fired = 0;
		st = open_epoch(&e, 1);
		wt_write_txn(e.w, 50, 40);
		wt_tail_ok(st, &o);
		wt_write_txn(e.w, 80, 40);
		h_old = wt_content_hash(e.w, &rows_old);
		make_other_db(c.other, 11);
		assert_int_equal(ws_fault_arm_pause(sites[i], 1, replace_now, &c), 0);
		rc = ws_stream_tail_frames(st, &o);
		ws_fault_disarm();
		assert_int_equal(c.fired, 1);
		h_new = wt_content_hash(e.w, &rows_new);
		if (rc == 0) {
			/* What it acknowledged is the old file's latest state. */
			int64_t r = 0;
			h = wt_restore_hash(&e, TENANT, NULL, &r);
			if (h != h_old && h != h_new)
				fail_msg("site %s: restore is neither the old database (%" PRId64 " rows) nor the "
					 "new (%" PRId64 "): %" PRId64 " rows", sites[i], rows_old, rows_new, r);
		} else if (rc != WS_EREPLACED) {
			fail_msg("site %s: %s (%s)", sites[i], ws_strerror(rc), ws_errmsg());
		}
		wt_tail_ok(st, &o);
		restore_equals_source(&e, __LINE__);
		verify_ok(&e, __LINE__);
		ws_stream_close(st);
		free(c.other);
		wt_env_free(&e);
	}
}

/* ---- 2. a re-base under read mark 0 ------------------------------------ */

struct restart_ctx {
	struct wt_env *e;
	uint32_t salt_before, salt_after;
	int fired;
};

static void restart_wal_now(const char *site, void *arg)
{
	struct restart_ctx *c = arg;
	(void)site;
	c->salt_before = wal_salt1(c->e);
	wt_write_txn(c->e->w, 250, 3000); /* ~250 frames from the top of the WAL */
	c->salt_after = wal_salt1(c->e);
	c->fired++;
}

static void test_rebase_mark0_wal_restarted_mid_scan(void **state)
{
	struct wt_env e;
	struct ws_outcome o;
	struct ws_stream *st;
	struct restart_ctx c = { 0 };
	uint64_t rnd = 42;
	int log_frames = -1, ckpt_frames = -2;
	(void)state;

	wt_env_init(&e, "mark0", 0);
	c.e = &e;
	wt_write_txn(e.w, 1000, 100);
	update_rows(e.w, 200, &rnd, 1000); /* 200 one-page commits over ~30 pages */
	/* Fully backfilled: the tail's read transaction gets read mark 0. */
	assert_int_equal(sqlite3_wal_checkpoint_v2(e.w, NULL, SQLITE_CHECKPOINT_PASSIVE, &log_frames,
						   &ckpt_frames), SQLITE_OK);
	assert_int_equal(log_frames, ckpt_frames);
	assert_true(log_frames > (int)(3 * SLOT_FRAMES));

	st = open_epoch(&e, 1);
	assert_int_equal(ws_fault_arm_pause("stream.before_wal_read", 2, restart_wal_now, &c), 0);
	wt_tail_ok(st, &o);
	ws_fault_disarm();
	assert_int_equal(c.fired, 1);
	/* The writer really restarted the WAL under the scan. */
	assert_int_not_equal(c.salt_before, c.salt_after);
	assert_int_equal(o.kind, WS_OUTCOME_STREAMED);
	restore_equals_source(&e, __LINE__);
	verify_ok(&e, __LINE__);
	ws_stream_close(st);
	wt_env_free(&e);
}

/* ---- 3. spilled frames rewritten under a tail ----------------------------- */

struct spill_ctx {
	struct wt_env *e;
	sqlite3 *w2;
	uint64_t probe_off; /* header of a spilled frame the commit rewrites */
	uint8_t before[24], after[24];
	long long k0; /* the last row before the transaction */
	int fired;
};

static void read_frame_hdr(const struct wt_env *e, uint64_t off, uint8_t out[24])
{
	size_t len = 0;
	uint8_t *b = wt_read_file(e->wal, &len);
	assert_non_null(b);
	assert_true(len >= off + 24);
	memcpy(out, b + off, 24);
	free(b);
}

static void commit_spilled_now(const char *site, void *arg)
{
	struct spill_ctx *c = arg;
	(void)site;
	read_frame_hdr(c->e, c->probe_off, c->before);
	/* Change the transaction's first rows (spilled long ago) and commit:
	 * SQLite rewrites their frames in place and every checksum after. */
	char sql[128];
	snprintf(sql, sizeof(sql), "UPDATE t SET v = randomblob(3000) WHERE k BETWEEN %lld AND %lld",
		 c->k0 + 1, c->k0 + 3);
	wt_exec(c->w2, sql);
	wt_exec(c->w2, "COMMIT");
	read_frame_hdr(c->e, c->probe_off, c->after);
	c->fired++;
}

static void test_spilled_frames_rewritten_under_a_tail(void **state)
{
	struct wt_env e;
	struct ws_outcome o;
	struct ws_stream *st;
	struct ws_stream_config cfg;
	struct spill_ctx c = { 0 };
	uint64_t before;
	(void)state;

	wt_env_init(&e, "spill", 0);
	c.e = &e;
	cfg = cfg_for(&e, 1);
	cfg.wal_checkpoint_bytes = 1; /* walship's own WAL checkpoint after each ship */
	cfg.batch_bytes_max = SPILL_SLOT_FRAMES * (24u + e.page_size);
	st = open_cfg(&e, &cfg);
	/* A long WAL file first: SQLite reuses it from the top after a
	 * restart without shrinking it, so a tail's scan (bounded by the file
	 * size when it starts) reaches frames committed while it runs. */
	wt_write_txn(e.w, 1000, 3000);
	wt_tail_ok(st, &o);
	wt_write_txn(e.w, 1, 100);
	wt_tail_ok(st, &o); /* ships, checkpoints: the WAL is fully backfilled */
	before = wt_content_hash(e.w, NULL);

	/* A transaction larger than the page cache: it restarts the WAL and
	 * spills frames from the top long before it commits. With 100 pages
	 * of cache, ~60 frames are spilled before SQLite first writes a page
	 * again that it spilled earlier in the transaction (an interior page,
	 * spilled at about frame 8): until then every spilled frame is a
	 * valid link of the chain. The commit changes the transaction's first
	 * rows, whose pages went out first: SQLite writes them again in place
	 * and re-checksums every frame after them. */
	c.w2 = wt_writer_open(e.db, 0);
	{
		char k0[64];
		wt_query1(c.w2, "SELECT max(k) FROM t", k0);
		c.k0 = atoll(k0);
	}
	wt_exec(c.w2, "PRAGMA cache_size=100");
	wt_exec(c.w2, "BEGIN");
	for (int i = 0; i < 150; i++)
		wt_exec(c.w2, "INSERT INTO t(v) VALUES(randomblob(3000))");
	c.probe_off = 32 + (uint64_t)(SPILL_SLOT_FRAMES - 1) * (24u + e.page_size);

	/* The tail stops right after it read the WAL header and the
	 * wal-index, and the transaction commits there. Its spilled frames lie
	 * past the wal-index's last commit (mxFrame 0 of the generation the
	 * transaction began): the tail reads none of them, so none that the
	 * commit rewrites. */
	assert_int_equal(ws_fault_arm_pause("stream.after_wal_header", 1, commit_spilled_now, &c), 0);
	wt_tail_ok(st, &o);
	ws_fault_disarm();
	assert_int_equal(c.fired, 1);
	/* The scenario happened: the spilled frames got new checksums. */
	if (memcmp(c.before + 16, c.after + 16, 8) == 0)
		fail_msg("SQLite did not rewrite the spilled frames' checksums: the test does not test");
	assert_int_equal(o.kind, WS_OUTCOME_EMPTY);
	{
		int64_t rr = 0;
		if (wt_restore_hash(&e, TENANT, NULL, &rr) != before)
			fail_msg("restored %" PRId64 " rows: not the state before the transaction", rr);
	}
	verify_ok(&e, __LINE__);
	/* The rest ships with the next call, restorable. */
	wt_tail_ok(st, &o);
	restore_equals_source(&e, __LINE__);
	verify_ok(&e, __LINE__);

	sqlite3_close(c.w2);
	ws_stream_close(st);
	wt_env_free(&e);
}

/* ---- 4. a takeover between the fencing read and the CAS --------------- */

struct takeover_ctx {
	struct wt_env *e;
	struct ws_stream *st2;
	struct ws_outcome o2;
	int rc2;
	int fired;
};

static void take_over_now(const char *site, void *arg)
{
	struct takeover_ctx *c = arg;
	(void)site;
	c->st2 = open_epoch(c->e, 2);
	c->rc2 = ws_stream_tail_frames(c->st2, &c->o2);
	c->fired++;
}

static void test_takeover_before_cas_is_lost_race(void **state)
{
	struct wt_env e;
	struct ws_outcome o;
	struct ws_stream *st;
	struct takeover_ctx c = { 0 };
	int rc;
	(void)state;

	wt_env_init(&e, "takeover", 0);
	c.e = &e;
	st = open_epoch(&e, 1);
	wt_write_txn(e.w, 10, 100);
	wt_tail_ok(st, &o);
	wt_write_txn(e.w, 5, 100);
	assert_int_equal(ws_fault_arm_pause("stream.before_watermark_put", 1, take_over_now, &c), 0);
	rc = ws_stream_tail_frames(st, &o);
	ws_fault_disarm();
	assert_int_equal(c.fired, 1);
	assert_int_equal(c.rc2, 0);
	/* Batches and manifest were uploaded: that is no pure read, so not
	 * Fenced; the lost race is an error and nothing is acknowledged. */
	if (rc != WS_ELOSTRACE)
		fail_msg("tail returned %s (outcome %s), expected WS_ELOSTRACE", ws_strerror(rc),
			 rc == 0 ? ws_outcome_name(o.kind) : "-");
	assert_non_null(strstr(ws_errmsg(), "took the stream over"));
	/* From then on the stale owner is Fenced. */
	wt_tail_ok(st, &o);
	assert_int_equal(o.kind, WS_OUTCOME_FENCED);
	assert_int_equal(o.u.fenced.current_epoch, 2);
	restore_equals_source(&e, __LINE__);
	ws_stream_close(c.st2);
	ws_stream_close(st);
	wt_env_free(&e);
}

/* ---- 5. a fenced stream releases its read marks ------------------------ */

static void test_fenced_releases_read_marks(void **state)
{
	struct wt_env e;
	struct ws_outcome o;
	struct ws_stream *st1, *st2;
	struct stat sb;
	int log_frames = -1, ckpt_frames = -1;
	(void)state;

	wt_env_init(&e, "fenced-marks", 0);
	st1 = open_epoch(&e, 1);
	wt_write_txn(e.w, 10, 100);
	wt_tail_ok(st1, &o);
	wt_write_txn(e.w, 10, 100);
	wt_tail_ok(st1, &o);
	wt_write_txn(e.w, 10, 100);
	st2 = open_epoch(&e, 2);
	wt_tail_ok(st2, &o); /* takes the stream over with its first write */
	assert_int_equal(o.kind, WS_OUTCOME_STREAMED);
	ws_stream_close(st2); /* the new owner lives on another host */
	wt_write_txn(e.w, 10, 100);
	wt_tail_ok(st1, &o);
	assert_int_equal(o.kind, WS_OUTCOME_FENCED);
	/* The application's TRUNCATE checkpoint is not held up by walship. */
	sqlite3_busy_timeout(e.w, 200);
	assert_int_equal(sqlite3_wal_checkpoint_v2(e.w, NULL, SQLITE_CHECKPOINT_TRUNCATE, &log_frames,
						   &ckpt_frames), SQLITE_OK);
	assert_int_equal(stat(e.wal, &sb), 0);
	assert_int_equal(sb.st_size, 0);
	/* And a fenced call takes none again. */
	wt_write_txn(e.w, 3, 100);
	wt_tail_ok(st1, &o);
	assert_int_equal(o.kind, WS_OUTCOME_FENCED);
	assert_int_equal(sqlite3_wal_checkpoint_v2(e.w, NULL, SQLITE_CHECKPOINT_TRUNCATE, &log_frames,
						   &ckpt_frames), SQLITE_OK);
	ws_stream_close(st1);
	wt_env_free(&e);
}

/* ---- 7. the WAL-checkpoint fallback's gap ------------------------------ */

struct gap_ctx {
	struct wt_env *e;
	int fired;
};

static void write_through_gap(const char *site, void *arg)
{
	struct gap_ctx *c = arg;
	(void)site;
	/* Pages that the later transaction does not touch: only a re-base
	 * can bring these rows back. */
	wt_exec(c->e->w, "UPDATE t SET v = randomblob(300) WHERE k <= 5");  /* restarts the WAL */
	wt_exec(c->e->w, "PRAGMA wal_checkpoint(TRUNCATE)");                 /* checkpointed away */
	wt_write_txn(c->e->w, 3, 300);                                       /* a newer generation */
	c->fired++;
}

static void test_checkpoint_fallback_gap_rebases(void **state)
{
	struct wt_env e;
	struct ws_outcome o;
	struct ws_stream *st;
	struct ws_stream_config cfg;
	struct gap_ctx c = { 0 };
	(void)state;

	wt_env_init(&e, "ckpt-gap", 0);
	c.e = &e;
	cfg = cfg_for(&e, 1);
	cfg.wal_checkpoint_bytes = 1; /* every call past the first checkpoints */
	st = open_cfg(&e, &cfg);
	wt_write_txn(e.w, 200, 300);
	wt_tail_ok(st, &o);
	wt_write_txn(e.w, 10, 300);
	/* The read transaction after walship's own WAL checkpoint fails, so
	 * the spare connection's takes over, with a moment in between. */
	assert_int_equal(ws_fault_arm("stream.after_begin_read", 1, 0), 0);
	assert_int_equal(ws_fault_add("stream.wal_checkpoint_gap", 1, WS_FAULT_PAUSE, write_through_gap, &c), 0);
	wt_tail_ok(st, &o);
	ws_fault_disarm();
	assert_int_equal(c.fired, 1);
	wt_tail_ok(st, &o);
	restore_equals_source(&e, __LINE__);
	verify_ok(&e, __LINE__);
	ws_stream_close(st);
	wt_env_free(&e);
}

/* ---- a backlog of more batches than one call names ------------------- */

/* batch_frames_max 1 and a 4,200-frame transaction: more batches than one
 * call may name (4096). The tail reads the backlog in larger batches
 * instead of failing on every retry (a tenant that never ships again). */
static void test_backlog_beyond_batch_limit(void **state)
{
	struct wt_env e;
	struct ws_outcome o;
	struct ws_stream *st;
	struct ws_stream_config cfg;
	(void)state;

	wt_env_init(&e, "backlog", 0);
	cfg = cfg_for(&e, 1);
	cfg.batch_bytes_max = 0; /* the default slot: room for larger batches */
	cfg.batch_frames_max = 1;
	st = open_cfg(&e, &cfg);
	wt_write_txn(e.w, 4200, 3000);
	wt_tail_ok(st, &o);
	assert_int_equal(o.kind, WS_OUTCOME_STREAMED);
	assert_true(o.u.streamed.last_frame > 4096);
	restore_equals_source(&e, __LINE__);
	wt_write_txn(e.w, 4200, 3000); /* and a continuation of the same size */
	wt_tail_ok(st, &o);
	assert_int_equal(o.kind, WS_OUTCOME_STREAMED);
	assert_true(o.u.streamed.frame_count > 4096);
	restore_equals_source(&e, __LINE__);
	verify_ok(&e, __LINE__);
	ws_stream_close(st);
	wt_env_free(&e);
}

/* ---- a call that reaches its batch limit ------------------------------- */

/*
 * A backlog of more batches than one call may name (a manifest names at
 * most 4096: at the smallest batches, a WAL of 256 MiB, which a long outage
 * with walship's read mark holding the WAL makes). The fault site puts the
 * limit at the call's third batch (a fake: the real limit is too large to
 * write in a unit test). The call ships a prefix that ends at a commit, says
 * it ended early, and the next call goes on from there. A re-base must
 * reach its read mark in one manifest: at the limit it fails, acknowledging
 * nothing.
 */
static void test_batch_limit_ships_prefixes(void **state)
{
	struct wt_env e;
	struct ws_outcome o;
	struct ws_stream *st;
	struct ws_stream_config cfg;
	struct ws_stream_call call;
	uint64_t hs[30], h;
	int64_t rr = 0;
	int rc, at = -1;
	(void)state;

	wt_env_init(&e, "batchlim", 0);
	cfg = cfg_for(&e, 1);
	cfg.batch_frames_max = 4;
	st = open_cfg(&e, &cfg);
	wt_write_txn(e.w, 20, 3000);
	assert_int_equal(ws_fault_arm("stream.batch_limit", 1, 0), 0);
	rc = ws_stream_tail_frames(st, &o);
	ws_fault_disarm();
	assert_int_not_equal(rc, 0);
	assert_non_null(strstr(ws_errmsg(), "batch limit"));
	wt_tail_ok(st, &o); /* the re-base, whole */
	restore_equals_source(&e, __LINE__);

	for (int i = 0; i < 30; i++) {
		wt_write_txn(e.w, 1, 3000);
		hs[i] = wt_content_hash(e.w, NULL);
	}
	assert_int_equal(ws_fault_arm("stream.batch_limit", 2, 0), 0);
	wt_tail_ok(st, &o);
	ws_fault_disarm();
	ws_stream_last_call(st, &call);
	assert_true(call.ended_early);
	assert_int_equal(o.kind, WS_OUTCOME_STREAMED);
	h = wt_restore_hash(&e, TENANT, NULL, &rr);
	for (int i = 0; i < 30; i++)
		if (hs[i] == h)
			at = i;
	if (at < 0 || at == 29)
		fail_msg("the call at its batch limit acknowledged %" PRId64 " rows: %s", rr,
			 at < 0 ? "no state the source committed" : "everything (it did not stop)");
	verify_ok(&e, __LINE__);
	wt_tail_ok(st, &o);
	ws_stream_last_call(st, &call);
	assert_false(call.ended_early);
	restore_equals_source(&e, __LINE__);
	verify_ok(&e, __LINE__);

	/* One transaction longer than the limit: a call that stopped before
	 * any commit scans on, and at the limit there it fails (raise
	 * batch_bytes_max), never an Empty call said to have ended early,
	 * which the engine would make again at once, for ever. */
	h = wt_content_hash(e.w, NULL);
	wt_write_txn(e.w, 40, 3000);
	assert_int_equal(ws_fault_arm("stream.batch_limit", 1, 0), 0);
	assert_int_equal(ws_fault_add("stream.batch_limit", 2, WS_FAULT_FAIL, NULL, NULL), 0);
	rc = ws_stream_tail_frames(st, &o);
	ws_fault_disarm();
	ws_stream_last_call(st, &call);
	if (rc == 0)
		fail_msg("one transaction past the batch limit: outcome %d, ended early %d, not an error", (int)o.kind,
			 (int)call.ended_early);
	assert_non_null(strstr(ws_errmsg(), "batch limit"));
	if (wt_restore_hash(&e, TENANT, NULL, &rr) != h)
		fail_msg("the failed call acknowledged something: %" PRId64 " rows", rr);
	wt_tail_ok(st, &o);
	restore_equals_source(&e, __LINE__);
	verify_ok(&e, __LINE__);
	ws_stream_close(st);
	wt_env_free(&e);
}

/* ---- a re-base over a grown, checkpointed database ---------------------- */

/* First contact with a WAL that holds a small commit and then a large one,
 * already checkpointed into the file: the re-base lays frames 1..N over a
 * snapshot of the grown file, so the early commits are not states of their
 * own. Restore and verify check a commit's database size against page 1
 * only at states the source really had (the torture smoke found restore
 * refusing this while verify passed). */
static void test_rebase_over_grown_database(void **state)
{
	struct wt_env e;
	struct ws_outcome o;
	struct ws_stream *st;
	int log_frames = -1, ckpt_frames = -2;
	(void)state;

	wt_env_init(&e, "rebase-grown", 0);
	wt_write_txn(e.w, 2, 100);     /* a few pages */
	wt_exec(e.w, "PRAGMA wal_checkpoint(TRUNCATE)");
	/* The WAL starts with a commit that leaves page 1 alone (same size),
	 * then grows the database by hundreds of pages. */
	wt_exec(e.w, "UPDATE t SET v = randomblob(100) WHERE k = 1");
	wt_write_txn(e.w, 600, 3000);
	assert_int_equal(sqlite3_wal_checkpoint_v2(e.w, NULL, SQLITE_CHECKPOINT_PASSIVE, &log_frames,
						   &ckpt_frames), SQLITE_OK);
	assert_int_equal(log_frames, ckpt_frames); /* the file holds the grown database */
	st = open_epoch(&e, 1);
	wt_tail_ok(st, &o);
	assert_int_equal(o.kind, WS_OUTCOME_STREAMED);
	restore_equals_source(&e, __LINE__);
	verify_ok(&e, __LINE__);
	ws_stream_close(st);
	wt_env_free(&e);
}

/* ---- a checkpoint's image file ------------------------------------------ */

/* The temporary image a checkpoint builds has a predictable name (often
 * under /tmp): a link planted there is replaced, never written through. */
static void test_image_tmp_never_through_a_link(void **state)
{
	struct wt_env e;
	struct ws_outcome o;
	struct ws_stream *st;
	struct ws_fmt_watermark wm;
	struct ws_chain_stop head;
	struct stat sb;
	char *victim, *tmp;
	bool used = true;
	size_t len = 0;
	uint8_t *got;
	(void)state;

	wt_env_init(&e, "image-tmp", 0);
	st = open_epoch(&e, 1);
	wt_write_txn(e.w, 50, 100);
	wt_tail_ok(st, &o);
	assert_int_equal(ws_wm_load(e.sink->store, TENANT, &wm, NULL), 0);
	memset(&head, 0, sizeof(head));
	snprintf(head.key, sizeof(head.key), "%s", wm.manifest_key);
	memcpy(head.sha, wm.manifest_sha, sizeof(head.sha));
	head.length = wm.manifest_length;
	victim = wt_path(e.dir, "victim");
	tmp = wt_path(e.dir, "image.db");
	assert_int_equal(wt_write_file(victim, "precious", 8), 0);
	assert_int_equal(symlink(victim, tmp), 0);
	if (ws_restore_image(e.sink->store, TENANT, &head, NULL, tmp, &used) != 0)
		fail_msg("ws_restore_image: %s", ws_errmsg());
	got = wt_read_file(victim, &len);
	assert_non_null(got);
	assert_int_equal(len, 8);
	assert_memory_equal(got, "precious", 8);
	assert_int_equal(lstat(tmp, &sb), 0);
	assert_true(S_ISREG(sb.st_mode));
	assert_int_equal(wt_file_hash(tmp, NULL), wt_content_hash(e.w, NULL));
	free(got);
	free(victim);
	free(tmp);
	ws_stream_close(st);
	wt_env_free(&e);
}

/* ---- verify while retention runs --------------------------------------- */

struct retention_ctx {
	struct wt_env *e;
	struct ws_retention_report rep;
	int rc;
	int fired;
};

static void run_retention_now(const char *site, void *arg)
{
	struct retention_ctx *c = arg;
	(void)site;
	c->rc = ws_retention_run(c->e->sink, false, NULL, NULL, &c->rep);
	c->fired++;
}

struct problem_count {
	unsigned n;
};

static void count_problem(const char *tenant, const char *key, int err, const char *detail, void *arg)
{
	struct problem_count *pc = arg;
	(void)tenant;
	(void)err;
	fprintf(stderr, "verify problem: %s: %s\n", key ? key : "-", detail);
	pc->n++;
}

/* Retention deletes the history before the newest checkpoint's cut while
 * verify holds the chain it read before: verify must not call that
 * corruption (issue: readers never report corruption because a writer is
 * busy). A second sink, whose history is really gone, still fails. */
static void test_verify_during_retention(void **state)
{
	struct wt_env e;
	struct ws_outcome o;
	struct ws_stream *st;
	struct ws_checkpoint_opts co;
	struct ws_checkpoint_info info;
	struct retention_ctx c;
	struct problem_count pc = { 0 };
	int rc;
	(void)state;

	wt_env_init(&e, "verify-retention", 0);
	{
		/* Batches of their own (not inline): the test deletes one. */
		struct ws_stream_config c0 = cfg_for(&e, 1);
		c0.inline_batch_bytes_max = UINT64_MAX;
		st = open_cfg(&e, &c0);
	}
	for (int i = 0; i < 3; i++) {
		wt_write_txn(e.w, 20, 300);
		wt_tail_ok(st, &o);
	}
	memset(&co, 0, sizeof(co));
	if (ws_checkpoint_take(e.sink, &co, &info) != 0)
		fail_msg("checkpoint: %s", ws_errmsg());
	wt_write_txn(e.w, 20, 300);
	wt_tail_ok(st, &o);

	memset(&c, 0, sizeof(c));
	c.e = &e;
	assert_int_equal(ws_fault_arm_pause("verify.after_chain_load", 1, run_retention_now, &c), 0);
	rc = ws_verify(e.sink, TENANT, count_problem, &pc);
	ws_fault_disarm();
	assert_int_equal(c.fired, 1);
	if (c.rc)
		fail_msg("retention: %s", ws_errmsg());
	assert_true(c.rep.ran && c.rep.deleted > 0); /* it really deleted history under verify */
	if (rc || pc.n)
		fail_msg("verify reported %u problems (%s) while retention ran", pc.n, ws_strerror(rc));
	restore_equals_source(&e, __LINE__);

	/* History really gone (a batch of the live chain deleted): reported. */
	wt_write_txn(e.w, 20, 300);
	wt_tail_ok(st, &o);
	assert_int_equal(wt_sh("rm -f \"$(ls -d %s/%s/*/*/b* | tail -1)\"", e.sink_dir, TENANT), 0);
	pc.n = 0;
	rc = ws_verify(e.sink, TENANT, count_problem, &pc);
	assert_int_not_equal(rc, 0);
	assert_true(pc.n > 0);
	ws_stream_close(st);
	wt_env_free(&e);
}

/* ---- every stream site, paused under a writer, or failed -------------- */

static void restore_is_recorded(struct wt_mutator *c, const char *site, int line)
{
	if (wt_mutator_find(c, wt_restore_hash(c->e, TENANT, NULL, NULL)) >= 0)
		return;
	fail_msg("line %d: site %s, mutation %u: the restore is no state the source committed", line, site,
		 c->how);
}

/* One tail of st paused at the first hit of site, where c mutates the
 * database (c->how): the site is reached, the tail succeeds, what it
 * acknowledged is a state the source committed, and three more tails reach
 * the source's latest state, which verify passes. */
static void tail_paused_then_caught_up(struct wt_env *e, struct ws_stream *st, struct wt_mutator *c, const char *site)
{
	struct ws_outcome o;
	int rc;
	assert_int_equal(ws_fault_arm_pause(site, 1, wt_mutate, c), 0);
	rc = ws_stream_tail_frames(st, &o);
	ws_fault_disarm();
	if (rc)
		fail_msg("site %s, mutation %u: %s (%s)", site, c->how, ws_strerror(rc), ws_errmsg());
	if (c->fired != 1)
		fail_msg("site %s, mutation %u: not reached", site, c->how);
	restore_is_recorded(c, site, __LINE__);
	for (int k = 0; k < 3; k++)
		wt_tail_ok(st, &o);
	restore_equals_source(e, __LINE__);
	verify_ok(e, __LINE__);
}

static bool is_stream_site(const char *name) { return strncmp(name, "stream.", 7) == 0; }

/*
 * One tail paused at the nth hit of site while a real writer mutates the
 * database (mutation how): what it acknowledged is a state the source
 * committed, and the next tails reach the source's latest state. rows1
 * rows are shipped first, rows2 more are there when the paused tail runs;
 * must_fire: the site must be reached.
 */
static void paused_mid(const char *site, unsigned nth, unsigned how, int rows1, int rows_mid, int rows2,
		       bool must_fire);

static void paused_under_writer(const char *site, unsigned nth, unsigned how, int rows1, int rows2, bool must_fire)
{
	paused_mid(site, nth, how, rows1, 0, rows2, must_fire);
}

/* The same, with rows_mid more rows shipped by a tail of their own in
 * between (0: none). */
static void paused_mid(const char *site, unsigned nth, unsigned how, int rows1, int rows_mid, int rows2,
		       bool must_fire)
{
	struct wt_env e;
	struct ws_outcome o;
	struct ws_stream *st;
	struct ws_stream_config cfg;
	struct wt_mutator c;
	int rc;

	wt_env_init(&e, "paused", 0);
	wt_mutator_init(&c, &e, how);
	cfg = cfg_for(&e, 1);
	/* Odd hows also take walship's own WAL checkpoint path. */
	cfg.wal_checkpoint_bytes = how & 1 ? 1 : UINT64_MAX;
	st = open_cfg(&e, &cfg);
	wt_write_txn(e.w, rows1, 300);
	wt_mutator_record(&c);
	wt_tail_ok(st, &o);
	if (rows_mid) {
		wt_write_txn(e.w, rows_mid, 300);
		wt_mutator_record(&c);
		wt_tail_ok(st, &o);
	}
	wt_write_txn(e.w, rows2, 300);
	wt_mutator_record(&c);
	assert_int_equal(ws_fault_arm_pause(site, nth, wt_mutate, &c), 0);
	rc = ws_stream_tail_frames(st, &o);
	ws_fault_disarm();
	if (rc)
		fail_msg("site %s, mutation %u (carry %s, %d rows between): %s (%s)", site, how,
			 ws_carry_name(carry_mode), rows_mid, ws_strerror(rc), ws_errmsg());
	if (must_fire && c.fired != 1)
		fail_msg("site %s, mutation %u (carry %s, %d rows between): not reached", site, how,
			 ws_carry_name(carry_mode), rows_mid);
	restore_is_recorded(&c, site, __LINE__);
	for (int k = 0; k < 3; k++)
		wt_tail_ok(st, &o);
	restore_equals_source(&e, __LINE__);
	verify_ok(&e, __LINE__);
	ws_stream_close(st);
	wt_mutator_free(&c);
	wt_env_free(&e);
}

static void test_every_site_paused_under_writer(void **state)
{
	(void)state;
	for (unsigned i = 0; i < ws_fault_site_count(); i++) {
		const char *site = ws_fault_site_name(i);
		if (!is_stream_site(site))
			continue;
		for (unsigned how = 0; how < WT_MUTATIONS; how++)
			paused_under_writer(site, 1, how, 200, 150, false); /* not every site is on this path */
	}
}

/* The same with manifest slots (SLOTS.md 3.2 item 9): a tail with batches
 * (its fencing read of our lane's next slot) and a small one (its slot the
 * one write), each site paused under every mutation. */
static void test_every_site_paused_under_writer_slots(void **state)
{
	(void)state;
	slots_mode = true;
	for (unsigned i = 0; i < ws_fault_site_count(); i++) {
		const char *site = ws_fault_site_name(i);
		if (!is_stream_site(site))
			continue;
		for (unsigned how = 0; how < WT_MUTATIONS; how++) {
			paused_under_writer(site, 1, how, 200, 150, false);
			paused_mid(site, 1, how, 200, 5, 5, false);
		}
	}
	slots_mode = false;
}

/*
 * A small tail sends its one batch inside its manifest (inline): the
 * frames stay in their ring slot from the scan until the manifest is
 * written. Every site from the WAL read to the watermark, paused while a
 * real writer commits and runs each kind of WAL checkpoint: what is
 * acknowledged is a state the source committed. The tail unpaused writes
 * two objects, the manifest carrying the batch.
 */
static void test_inline_tail_paused_under_writer(void **state)
{
	static const char *const sites[] = {
		"stream.after_wal_header", "stream.before_wal_read", "stream.after_wal_read",
		"stream.before_batch_put", "stream.ring_handover",    "stream.after_scan",
		"stream.before_manifest_put", "stream.before_watermark_put", "stream.after_watermark_put",
	};
	(void)state;
	{
		struct wt_env e;
		struct ws_outcome o;
		struct ws_stream *st;
		struct ws_stream_call call;
		wt_env_init(&e, "inline", 0);
		st = open_epoch(&e, 1);
		wt_write_txn(e.w, 200, 300);
		wt_tail_ok(st, &o);
		wt_write_txn(e.w, 5, 300);
		wt_tail_ok(st, &o);
		assert_int_equal(o.kind, WS_OUTCOME_STREAMED);
		ws_stream_last_call(st, &call);
		assert_int_equal(call.puts, 2); /* manifest (with the batch) and watermark */
		restore_equals_source(&e, __LINE__);
		verify_ok(&e, __LINE__);
		ws_stream_close(st);
		wt_env_free(&e);
	}
	for (size_t i = 0; i < sizeof(sites) / sizeof(sites[0]); i++)
		for (unsigned how = 0; how < WT_MUTATIONS; how++)
			paused_under_writer(sites[i], 1, how, 200, 5, false);
}

/*
 * A watermark that carries its manifest (carry_in_watermark; docs/FORMAT.md
 * "Watermark"): a small tail writes one object, and the tails after it
 * merge what they ship into that manifest, same sequence, same
 * predecessor. Every acknowledged state restores to what the source
 * committed, by latest, by frame and by time; a tail too large to carry
 * stores the carried manifest first and links to it; a new stream (a
 * restart, a takeover) stores the carried manifest it finds before it
 * links to it; a checkpoint cuts at the stored manifest a carried one
 * continues, and retention behind that cut leaves the carried head whole.
 */
static uint64_t wm_seq_of(struct wt_env *e, bool *carried)
{
	struct ws_fmt_watermark wm;
	assert_int_equal(ws_wm_load(e->sink->store, TENANT, &wm, NULL), 0);
	*carried = wm.carried_len > 0;
	assert_null(wm.carried);
	return wm.seq;
}

static void test_carried_manifest_tails(void **state)
{
	struct wt_env e;
	struct ws_outcome o;
	struct ws_stream *st;
	struct ws_stream_call call;
	struct ws_stream_config cfg;
	uint64_t h[8], seq0, seq, h_cut;
	uint64_t frames[8];
	int64_t times[8];
	bool carried;
	(void)state;

	carry_mode = WS_CARRY_ALWAYS;
	wt_env_init(&e, "carried", 0);
	st = open_epoch(&e, 1);
	wt_write_txn(e.w, 200, 300);
	wt_tail_ok(st, &o); /* a re-base: stored, never carried */
	ws_stream_last_call(st, &call);
	assert_true(call.puts > 2);
	seq0 = wm_seq_of(&e, &carried);
	assert_false(carried);
	for (int i = 0; i < 4; i++) {
		wt_write_txn(e.w, 3, 300);
		h[i] = wt_content_hash(e.w, NULL);
		times[i] = ws_wall_ms();
		usleep(20000);
		wt_tail_ok(st, &o);
		assert_int_equal(o.kind, WS_OUTCOME_STREAMED);
		frames[i] = o.u.streamed.last_frame;
		ws_stream_last_call(st, &call);
		assert_int_equal(call.puts, 1); /* the watermark alone */
		seq = wm_seq_of(&e, &carried);
		assert_true(carried);
		assert_int_equal(seq, seq0 + 1); /* merged: the same sequence */
		restore_equals_source(&e, __LINE__);
		verify_ok(&e, __LINE__);
		usleep(20000);
	}
	/* Every merged state by frame; by time, a state no newer than asked. */
	for (int i = 0; i < 4; i++) {
		struct ws_restore_opts ro = { .frame = frames[i] };
		assert_true(wt_restore_hash(&e, TENANT, &ro, NULL) == h[i]);
	}
	{
		struct ws_restore_opts ro = { .time_ms = times[0] - 1 };
		uint64_t got = wt_restore_hash(&e, TENANT, &ro, NULL);
		for (int i = 0; i < 4; i++)
			assert_true(got != h[i]); /* before the carried manifest's frames: the re-base */
	}
	/* Too large to carry (more than one slot of frames): the carried
	 * manifest is stored, then linked to. */
	wt_write_txn(e.w, 1500, 300);
	wt_tail_ok(st, &o);
	ws_stream_last_call(st, &call);
	assert_true(call.puts >= 4); /* the carried manifest, batches, manifest, watermark */
	seq = wm_seq_of(&e, &carried);
	assert_false(carried);
	assert_int_equal(seq, seq0 + 2);
	restore_equals_source(&e, __LINE__);
	verify_ok(&e, __LINE__);
	/* Carried again, then a new stream (a restart) finds it carried. */
	wt_write_txn(e.w, 3, 300);
	h_cut = wt_content_hash(e.w, NULL);
	wt_tail_ok(st, &o);
	seq = wm_seq_of(&e, &carried);
	assert_true(carried);
	assert_int_equal(seq, seq0 + 3);
	ws_stream_close(st);
	cfg = cfg_for(&e, 2);
	st = open_cfg(&e, &cfg);
	wt_write_txn(e.w, 3, 300);
	wt_tail_ok(st, &o);
	ws_stream_last_call(st, &call);
	/* Not its own: stored (1), then a carried watermark of its own (1),
	 * after the CONTINUE's proof reads. */
	assert_int_equal(call.puts, 2);
	seq = wm_seq_of(&e, &carried);
	assert_true(carried);
	assert_int_equal(seq, seq0 + 4);
	restore_equals_source(&e, __LINE__);
	verify_ok(&e, __LINE__);
	/* A checkpoint while the head is carried cuts at that head, the
	 * newest acknowledged state (issue 31: it cut at the stored manifest
	 * the head continues, a state older than acknowledged): restore by id
	 * gives it; retention then leaves the live chain whole; the tails go
	 * on merging. */
	{
		struct ws_checkpoint_info ci;
		struct ws_retention_report rep;
		char *p = wt_path(e.out_dir, "ck.db");
		wt_write_txn(e.w, 3, 300);
		wt_tail_ok(st, &o); /* merged into the carried head */
		h_cut = wt_content_hash(e.w, NULL);
		assert_int_equal(ws_checkpoint_take(e.sink, NULL, &ci), 0);
		assert_true(ci.committed);
		assert_int_equal(ws_restore_checkpoint(e.sink, TENANT, ci.id, p, false), 0);
		assert_true(wt_file_hash(p, NULL) == h_cut);
		unlink(p);
		assert_int_equal(ws_retention_run(e.sink, false, NULL, NULL, &rep), 0);
		assert_true(rep.ran);
		restore_equals_source(&e, __LINE__);
		verify_ok(&e, __LINE__);
		wt_write_txn(e.w, 3, 300);
		wt_tail_ok(st, &o);
		ws_stream_last_call(st, &call);
		assert_int_equal(call.puts, 1);
		restore_equals_source(&e, __LINE__);
		verify_ok(&e, __LINE__);
		free(p);
	}
	ws_stream_close(st);
	wt_env_free(&e);
	carry_mode = WS_CARRY_PRESSED;
}

/*
 * restore --time inside a merged span (issue 31, item 3): each tail merged
 * into a carried manifest keeps its own end and time (the manifest's tail
 * index, version 3), so a time at which a tail was acknowledged restores
 * that tail's state, not the state before the span; a time before the
 * span's first tail restores the state before it. Both while the manifest
 * is carried and once a tail too large to carry has stored it.
 */
#define SPAN_TAILS 5
static void test_carried_time_inside_merged_span(void **state)
{
	struct wt_env e;
	struct ws_outcome o;
	struct ws_stream *st;
	uint64_t h[SPAN_TAILS], h_before;
	int64_t acked[SPAN_TAILS], t_before;
	bool carried;
	(void)state;

	carry_mode = WS_CARRY_ALWAYS;
	wt_env_init(&e, "carried-time", 0);
	st = open_epoch(&e, 1);
	wt_write_txn(e.w, 200, 300);
	wt_tail_ok(st, &o); /* a stored re-base */
	h_before = wt_content_hash(e.w, NULL);
	usleep(20000);
	t_before = ws_wall_ms();
	for (int i = 0; i < SPAN_TAILS; i++) {
		usleep(20000);
		wt_write_txn(e.w, 3, 300);
		h[i] = wt_content_hash(e.w, NULL);
		wt_tail_ok(st, &o);
		acked[i] = ws_wall_ms(); /* acknowledged by now */
		assert_int_equal(o.kind, WS_OUTCOME_STREAMED);
		(void)wm_seq_of(&e, &carried);
		assert_true(carried);
	}
	for (int pass = 0; pass < 2; pass++) {
		struct ws_restore_opts ro = { .time_ms = t_before };
		if (wt_restore_hash(&e, TENANT, &ro, NULL) != h_before)
			fail_msg("pass %d: the time before the merged span is not the state before it", pass);
		for (int i = 0; i < SPAN_TAILS; i++) {
			ro.time_ms = acked[i];
			if (wt_restore_hash(&e, TENANT, &ro, NULL) != h[i])
				fail_msg("pass %d: --time when tail %d of the merged span was acknowledged is not its "
					 "state", pass, i);
		}
		if (pass == 0) {
			/* Too large to carry: the merged manifest is stored and
			 * linked to. */
			usleep(20000);
			wt_write_txn(e.w, 1500, 300);
			wt_tail_ok(st, &o);
			(void)wm_seq_of(&e, &carried);
			assert_false(carried);
		}
	}
	restore_equals_source(&e, __LINE__);
	verify_ok(&e, __LINE__);
	ws_stream_close(st);
	wt_env_free(&e);
	carry_mode = WS_CARRY_PRESSED;
}

/* The kind of the manifest the watermark carries (it must carry one). */
static uint32_t carried_kind(struct wt_env *e)
{
	struct ws_fmt_watermark wm;
	struct ws_fmt_manifest m;
	struct ws_buf b;
	uint32_t kind;
	ws_buf_init(&b, WS_WM_BYTES_MAX);
	assert_int_equal(ws_wm_load_keep(e->sink->store, TENANT, &wm, NULL, &b), 0);
	assert_non_null(wm.carried);
	assert_int_equal(ws_fmt_manifest_decode(wm.carried, (size_t)wm.carried_len, &m), 0);
	kind = m.kind;
	ws_fmt_manifest_free(&m);
	ws_buf_free(&b);
	return kind;
}

/* The number after "name" in the checkpoint's committed record (one tenant;
 * numbers are written as strings). */
static uint64_t ckpt_field(struct wt_env *e, const struct ws_checkpoint_info *ci, const char *name)
{
	struct ws_buf b;
	char key[64];
	const char *p;
	uint64_t v;
	ws_buf_init(&b, 1u << 20);
	assert_int_equal(ws_store_get(e->sink->store, ci->ref_key, 0, UINT64_MAX, &b, NULL), 0);
	assert_int_equal(ws_buf_append(&b, "", 1), 0);
	snprintf(key, sizeof(key), "\"%s\"", name);
	p = strstr((const char *)b.data, key);
	if (!p)
		fail_msg("checkpoint %s has no %s", ci->ref_key, name);
	p += strlen(key);
	while (*p == ' ' || *p == ':' || *p == '"')
		p++;
	v = strtoull(p, NULL, 10);
	ws_buf_free(&b);
	return v;
}

/* Three rows more and a tail of st: outcome kind, puts writes, the
 * watermark at seq carrying a manifest of kind mkind; the restore is the
 * source and verify passes. Returns the source's content hash after the
 * rows. */
static uint64_t carried_tail_kind(struct wt_env *e, struct ws_stream *st, struct ws_outcome *o,
				  enum ws_outcome_kind kind, uint64_t puts, uint64_t seq, uint32_t mkind, int line)
{
	struct ws_stream_call call;
	bool carried;
	uint64_t h;
	wt_write_txn(e->w, 3, 300);
	h = wt_content_hash(e->w, NULL);
	wt_tail_ok(st, o);
	if (o->kind != kind)
		fail_msg("line %d: outcome %s", line, ws_outcome_name(o->kind));
	ws_stream_last_call(st, &call);
	assert_int_equal(call.puts, puts);
	assert_int_equal(wm_seq_of(e, &carried), seq);
	assert_true(carried);
	assert_int_equal(carried_kind(e), mkind);
	restore_equals_source(e, line);
	verify_ok(e, line);
	return h;
}

/* The same, the watermark carrying a NEXT_GEN. */
static uint64_t carried_tail(struct wt_env *e, struct ws_stream *st, struct ws_outcome *o, enum ws_outcome_kind kind,
			     uint64_t puts, uint64_t seq, int line)
{
	return carried_tail_kind(e, st, o, kind, puts, seq, WS_MANIFEST_NEXT_GEN, line);
}

/*
 * A WAL restart under a carried head: the next generation's first tail
 * stores the carried manifest and carries its own NEXT_GEN manifest (two
 * writes, not three), and the tails after it merge into that one (one
 * write, the same sequence), until the next restart stores it in turn.
 * walship's own WAL checkpoint (wal_checkpoint_bytes 1) restarts the WAL
 * at the application's next write after each locked tail. At each step
 * the restore is the source, verify passes, and every state is restored by
 * frame within its generation. A checkpoint while a NEXT_GEN head is
 * carried cuts at that head (its generation and last frame), the newest
 * state acknowledged: restore by id gives it.
 */
static void test_carried_next_generation(void **state)
{
	struct wt_env e;
	struct ws_outcome o;
	struct ws_stream *st;
	struct ws_stream_config cfg;
	uint64_t seq0, seq, h_cut, h_mid, f_mid, f_cut;
	uint32_t g_cut;
	bool carried;
	(void)state;

	carry_mode = WS_CARRY_ALWAYS;
	wt_env_init(&e, "carried-gen", 0);
	cfg = cfg_for(&e, 1);
	cfg.wal_checkpoint_bytes = 1;
	st = open_cfg(&e, &cfg);
	wt_write_txn(e.w, 200, 300);
	wt_tail_ok(st, &o); /* a re-base: stored */
	seq0 = wm_seq_of(&e, &carried);
	assert_false(carried);
	/* Locked: carried, and walship's checkpoint backfills the WAL. */
	wt_write_txn(e.w, 3, 300);
	h_cut = wt_content_hash(e.w, NULL);
	wt_tail_ok(st, &o);
	assert_int_equal(o.kind, WS_OUTCOME_STREAMED);
	f_cut = o.u.streamed.last_frame;
	g_cut = o.u.streamed.checkpoint_seq;
	assert_int_equal(wm_seq_of(&e, &carried), seq0 + 1);
	assert_true(carried);
	assert_int_equal(carried_kind(&e), WS_MANIFEST_CONTINUE);
	for (int round = 0; round < 2; round++) {
		/* The application's write restarts the WAL: a next generation,
		 * the carried head stored, the new one carried. */
		seq = round == 0 ? seq0 + 2 : seq + 1;
		h_cut = carried_tail(&e, st, &o, WS_OUTCOME_RESTARTED, 2, seq, __LINE__);
		f_cut = o.u.restarted.last_frame;
		g_cut = o.u.restarted.new_generation.checkpoint_seq;
		if (round == 0) {
			/* Cut at the carried NEXT_GEN itself: the newest state. */
			struct ws_checkpoint_info ci;
			char *p = wt_path(e.out_dir, "ck.db");
			assert_int_equal(ws_checkpoint_take(e.sink, NULL, &ci), 0);
			assert_true(ci.committed);
			assert_int_equal(ws_restore_checkpoint(e.sink, TENANT, ci.id, p, false), 0);
			assert_true(wt_file_hash(p, NULL) == h_cut);
			/* The cut's frame and generation are the carried head's,
			 * in the new generation. */
			assert_int_equal(ckpt_field(&e, &ci, "last_frame"), f_cut);
			assert_int_equal(ckpt_field(&e, &ci, "wal_generation"), g_cut);
			unlink(p);
			free(p);
			/* The checkpoint stored the head and put the watermark
			 * naming it stored: the next tail links to it (a new
			 * carried CONTINUE, one write), so the chain passes
			 * through the cut. */
			h_mid = carried_tail_kind(&e, st, &o, WS_OUTCOME_STREAMED, 1, ++seq, WS_MANIFEST_CONTINUE,
						  __LINE__);
			h_cut = h_mid;
			f_cut = o.u.streamed.last_frame;
			g_cut = o.u.streamed.checkpoint_seq;
			continue;
		}
		/* The same generation: merged into the carried NEXT_GEN. */
		h_mid = carried_tail(&e, st, &o, WS_OUTCOME_STREAMED, 1, seq, __LINE__);
		f_mid = o.u.streamed.last_frame;
		{
			struct ws_restore_opts ro = { .frame = f_mid };
			assert_true(wt_restore_hash(&e, TENANT, &ro, NULL) == h_mid);
		}
		h_cut = h_mid;
		f_cut = f_mid;
		g_cut = o.u.streamed.checkpoint_seq;
	}
	/* Retention behind a cut at the carried head (the checkpoint stores it), then the
	 * head stored by a tail that cannot carry (never): the chain whole. */
	{
		struct ws_checkpoint_info ci;
		struct ws_retention_report rep;
		assert_int_equal(ws_checkpoint_take(e.sink, NULL, &ci), 0);
		assert_int_equal(ws_retention_run(e.sink, false, NULL, NULL, &rep), 0);
		restore_equals_source(&e, __LINE__);
		verify_ok(&e, __LINE__);
	}
	ws_stream_close(st);
	carry_mode = WS_CARRY_NEVER;
	cfg = cfg_for(&e, 2);
	st = open_cfg(&e, &cfg);
	wt_write_txn(e.w, 3, 300);
	wt_tail_ok(st, &o);
	assert_false((wm_seq_of(&e, &carried), carried));
	restore_equals_source(&e, __LINE__);
	verify_ok(&e, __LINE__);
	ws_stream_close(st);
	wt_env_free(&e);
	carry_mode = WS_CARRY_PRESSED;
}

/*
 * A checkpoint while the head is carried (issue 31, item 3) names that
 * head, the newest state acknowledged at its decision: it stores the head
 * under its key and puts the same watermark there naming it stored, so the
 * owner's next tail links to it and the live chain passes through the cut.
 * Restore by id gives the newest acknowledged state; retention behind it
 * leaves everything after it restorable; the next checkpoint builds on its
 * artifact. Then the two races, each paused at its site with a real writer
 * committing: a tail that merged into the head the checkpoint stores (its
 * swap refused, it starts over on top of the stored head), and a
 * checkpoint whose swap loses to a tail that merged (the cut stays the
 * head it stored; retention keeps the chain the cut is not on).
 */
struct ck_race {
	struct wt_env *e;
	struct ws_stream *st;
	struct ws_checkpoint_info ci;
	uint64_t h_acked;       /* the state acknowledged when the checkpoint read the cut */
	uint64_t h_after;       /* the source after the race's own commit */
	int rc, fired;
};

/* Paused in the tail before its carrying watermark: a checkpoint. */
static void race_checkpoint(const char *site, void *arg)
{
	struct ck_race *r = arg;
	(void)site;
	r->fired++;
	r->rc = ws_checkpoint_take(r->e->sink, NULL, &r->ci);
}

/* Paused in the checkpoint before its swap: a commit and a merging tail. */
static void race_tail(const char *site, void *arg)
{
	struct ck_race *r = arg;
	struct ws_outcome o;
	(void)site;
	r->fired++;
	wt_write_txn(r->e->w, 3, 300);
	r->h_after = wt_content_hash(r->e->w, NULL);
	r->rc = ws_stream_tail_frames(r->st, &o);
}

static uint64_t ck_restore_hash(struct wt_env *e, uint64_t id)
{
	char name[64];
	char *p;
	uint64_t h;
	snprintf(name, sizeof(name), "ck-%u.db", e->restores++);
	p = wt_path(e->out_dir, name);
	if (ws_restore_checkpoint(e->sink, TENANT, id, p, false) != 0)
		fail_msg("restore --checkpoint %" PRIu64 ": %s", id, ws_errmsg());
	h = wt_file_hash(p, NULL);
	unlink(p);
	free(p);
	return h;
}

/* A stored re-base and three carried tails merged into one head. */
static struct ws_stream *carried_span(struct wt_env *e, const char *tag, uint64_t *h, uint64_t *frame)
{
	struct ws_outcome o;
	struct ws_stream *st;
	bool carried;
	wt_env_init(e, tag, 0);
	st = open_epoch(e, 1);
	wt_write_txn(e->w, 200, 300);
	wt_tail_ok(st, &o);
	for (int i = 0; i < 3; i++) {
		wt_write_txn(e->w, 3, 300);
		wt_tail_ok(st, &o);
		assert_int_equal(o.kind, WS_OUTCOME_STREAMED);
		*frame = o.u.streamed.last_frame;
		(void)wm_seq_of(e, &carried);
		assert_true(carried);
	}
	*h = wt_content_hash(e->w, NULL);
	return st;
}

/* The time_ms of the manifest the watermark carries (it must carry one). */
static int64_t carried_time(struct wt_env *e)
{
	struct ws_fmt_watermark wm;
	struct ws_fmt_manifest m;
	struct ws_buf b;
	int64_t t;
	ws_buf_init(&b, WS_WM_BYTES_MAX);
	assert_int_equal(ws_wm_load_keep(e->sink->store, TENANT, &wm, NULL, &b), 0);
	assert_non_null(wm.carried);
	assert_int_equal(ws_fmt_manifest_decode(wm.carried, (size_t)wm.carried_len, &m), 0);
	t = m.time_ms;
	ws_fmt_manifest_free(&m);
	ws_buf_free(&b);
	return t;
}

struct listed {
	uint64_t id;
	struct ws_checkpoint_info info;
	bool found;
};

static int find_listed(const struct ws_checkpoint_info *i, void *arg)
{
	struct listed *l = arg;
	if (i->id == l->id) {
		l->info = *i;
		l->found = true;
	}
	return 0;
}

static void test_checkpoint_names_carried_head(void **state)
{
	struct wt_env e;
	struct ws_outcome o;
	struct ws_stream *st;
	struct ws_checkpoint_info ci, ci2;
	struct ws_retention_report rep;
	uint64_t h, frame, seq;
	bool carried;
	(void)state;

	carry_mode = WS_CARRY_ALWAYS;
	st = carried_span(&e, "ck-carried", &h, &frame);
	seq = wm_seq_of(&e, &carried);
	{
		/* ls --checkpoints: the cut's time is the carried head's. */
		int64_t t_head = carried_time(&e);
		struct listed l = { 0 };
		assert_int_equal(ws_checkpoint_take(e.sink, NULL, &ci), 0);
		l.id = ci.id;
		assert_int_equal(ws_checkpoint_list(e.sink, find_listed, &l), 0);
		assert_true(l.found);
		assert_int_equal(l.info.cut_time_ms, t_head);
		assert_true(l.info.decided_ms > 0);
	}
	assert_true(ci.committed);
	if (ck_restore_hash(&e, ci.id) != h)
		fail_msg("checkpoint %" PRIu64 " is not the newest acknowledged state", ci.id);
	assert_int_equal(ckpt_field(&e, &ci, "last_frame"), frame);
	/* The head stored, the watermark naming it so: the next tail links. */
	assert_int_equal(wm_seq_of(&e, &carried), seq);
	assert_false(carried);
	wt_write_txn(e.w, 3, 300);
	wt_tail_ok(st, &o);
	assert_int_equal(wm_seq_of(&e, &carried), seq + 1);
	assert_true(carried);
	assert_int_equal(ws_retention_run(e.sink, false, NULL, NULL, &rep), 0);
	assert_true(rep.ran);
	assert_true(rep.deleted > 0); /* the history behind the cut */
	restore_equals_source(&e, __LINE__);
	verify_ok(&e, __LINE__);
	for (int i = 0; i < 2; i++) {
		wt_write_txn(e.w, 3, 300);
		wt_tail_ok(st, &o);
		restore_equals_source(&e, __LINE__);
		verify_ok(&e, __LINE__);
	}
	/* The next checkpoint: the newest state again, built on the first's
	 * artifact (the chain passes through its cut). */
	h = wt_content_hash(e.w, NULL);
	assert_int_equal(ws_checkpoint_take(e.sink, NULL, &ci2), 0);
	assert_int_equal(ci2.incremental, 1);
	assert_true(ck_restore_hash(&e, ci2.id) == h);
	assert_int_equal(ws_retention_run(e.sink, false, NULL, NULL, &rep), 0);
	wt_write_txn(e.w, 3, 300);
	wt_tail_ok(st, &o);
	restore_equals_source(&e, __LINE__);
	verify_ok(&e, __LINE__);
	ws_stream_close(st);
	wt_env_free(&e);
	carry_mode = WS_CARRY_PRESSED;
}

static void test_checkpoint_carried_head_races(void **state)
{
	(void)state;
	carry_mode = WS_CARRY_ALWAYS;
	for (int side = 0; side < 2; side++) {
		struct wt_env e;
		struct ws_outcome o;
		struct ck_race r;
		struct ws_retention_report rep;
		uint64_t h, frame, seq0;
		int rc;

		memset(&r, 0, sizeof(r));
		r.st = carried_span(&e, side ? "ck-race-ckpt" : "ck-race-tail", &h, &frame);
		r.e = &e;
		r.h_acked = h;
		{
			bool carried;
			seq0 = wm_seq_of(&e, &carried);
		}
		if (side == 0) {
			/* The tail merges, then pauses before its watermark: the
			 * checkpoint stores the head it merged into. */
			wt_write_txn(e.w, 3, 300);
			r.h_after = wt_content_hash(e.w, NULL);
			assert_int_equal(ws_fault_arm_pause("stream.before_carrying_watermark_put", 1, race_checkpoint,
							    &r), 0);
			rc = ws_stream_tail_frames(r.st, &o);
			ws_fault_disarm();
			if (rc)
				fail_msg("the tail under the checkpoint: %s (%s)", ws_strerror(rc), ws_errmsg());
		} else {
			/* The checkpoint stored the head, pauses before its swap:
			 * the owner merges a tail into the head meanwhile. */
			assert_int_equal(ws_fault_arm_pause("checkpoint.before_uncarry_put", 1, race_tail, &r), 0);
			rc = ws_checkpoint_take(e.sink, NULL, &r.ci);
			ws_fault_disarm();
			if (rc)
				fail_msg("the checkpoint under the tail: %s (%s)", ws_strerror(rc), ws_errmsg());
		}
		if (r.fired != 1 || r.rc)
			fail_msg("side %d: the race did not run (%d) or failed: %s", side, r.fired, ws_errmsg());
		{
			/* side 0: the tail's swap was refused, it started over and
			 * linked to the stored head (the next sequence); side 1:
			 * the checkpoint's swap lost, the head merged stays carried. */
			bool carried;
			assert_int_equal(wm_seq_of(&e, &carried), seq0 + (side == 0 ? 1 : 0));
			assert_true(carried);
		}
		assert_true(r.ci.committed);
		if (ck_restore_hash(&e, r.ci.id) != r.h_acked)
			fail_msg("side %d: the checkpoint is not the state acknowledged when it read the cut", side);
		restore_equals_source(&e, __LINE__);
		verify_ok(&e, __LINE__);
		assert_int_equal(ws_retention_run(e.sink, false, NULL, NULL, &rep), 0);
		assert_true(rep.ran);
		restore_equals_source(&e, __LINE__);
		verify_ok(&e, __LINE__);
		for (int k = 0; k < 2; k++) {
			wt_write_txn(e.w, 3, 300);
			wt_tail_ok(r.st, &o);
			restore_equals_source(&e, __LINE__);
			verify_ok(&e, __LINE__);
		}
		assert_true(ck_restore_hash(&e, r.ci.id) == r.h_acked);
		{
			/* And the next checkpoint and retention on top of it. */
			struct ws_checkpoint_info ci2;
			uint64_t hn = wt_content_hash(e.w, NULL);
			assert_int_equal(ws_checkpoint_take(e.sink, NULL, &ci2), 0);
			assert_true(ck_restore_hash(&e, ci2.id) == hn);
			assert_int_equal(ws_retention_run(e.sink, false, NULL, NULL, &rep), 0);
			wt_write_txn(e.w, 3, 300);
			wt_tail_ok(r.st, &o);
			restore_equals_source(&e, __LINE__);
			verify_ok(&e, __LINE__);
		}
		ws_stream_close(r.st);
		wt_env_free(&e);
	}
	carry_mode = WS_CARRY_PRESSED;
}

/*
 * The carried path paused at each of its sites (and the scan's) while a
 * real writer commits and runs each kind of WAL checkpoint: the tail that
 * starts the carried manifest, and the tail that merges into it (a small
 * tail in between). What is acknowledged is a state the source committed;
 * the next tails reach the latest.
 */
static void test_carried_tail_paused_under_writer(void **state)
{
	static const char *const sites[] = {
		"stream.after_wal_header", "stream.after_wal_read", "stream.after_scan",
		"stream.before_carrying_watermark_put", "stream.after_watermark_put",
	};
	(void)state;
	carry_mode = WS_CARRY_ALWAYS;
	for (size_t i = 0; i < sizeof(sites) / sizeof(sites[0]); i++)
		for (unsigned how = 0; how < WT_MUTATIONS; how++) {
			/* Odd hows run walship's own WAL checkpoint after each
			 * tail: the WAL restarts, and the next tail is a new
			 * generation, which stores the carried manifest instead
			 * (its sites are not all reached). */
			paused_mid(sites[i], 1, how, 200, 0, 4, (how & 1) == 0);
			paused_mid(sites[i], 1, how, 200, 3, 4, (how & 1) == 0);
		}
	carry_mode = WS_CARRY_PRESSED;
}

/*
 * The carried manifest stored before a tail too large to carry links to
 * it, paused there while a real writer commits and checkpoints; and a
 * failure there acknowledges nothing new.
 */
static void test_carried_store_paused_under_writer(void **state)
{
	struct wt_env e;
	struct ws_outcome o;
	struct ws_stream *st;
	uint64_t before;
	int rc;
	(void)state;
	carry_mode = WS_CARRY_ALWAYS;
	for (unsigned how = 0; how < WT_MUTATIONS; how++)
		paused_mid("stream.before_carried_store", 1, how, 200, 3, 1500, (how & 1) == 0);
	/* Failed there: the carried state stays acknowledged, nothing more. */
	wt_env_init(&e, "failed-store", 0);
	st = open_epoch(&e, 1);
	wt_write_txn(e.w, 200, 300);
	wt_tail_ok(st, &o);
	wt_write_txn(e.w, 3, 300);
	wt_tail_ok(st, &o); /* carried */
	before = wt_restore_hash(&e, TENANT, NULL, NULL);
	assert_true(before == wt_content_hash(e.w, NULL));
	wt_write_txn(e.w, 1500, 300);
	assert_int_equal(ws_fault_arm("stream.before_carried_store", 1, 0), 0);
	rc = ws_stream_tail_frames(st, &o);
	ws_fault_disarm();
	assert_int_not_equal(rc, 0);
	assert_true(wt_restore_hash(&e, TENANT, NULL, NULL) == before);
	verify_ok(&e, __LINE__);
	for (int k = 0; k < 3; k++)
		wt_tail_ok(st, &o);
	restore_equals_source(&e, __LINE__);
	verify_ok(&e, __LINE__);
	ws_stream_close(st);
	wt_env_free(&e);
	carry_mode = WS_CARRY_PRESSED;
}

/*
 * A re-base after a restart while the watermark carried its manifest
 * (issue 31, item 1): the re-base's watermark replaces the carried one,
 * the only copy of every state that manifest held, so the re-base stores
 * it first, as any tail that does not merge does. The app closes its last
 * connection while walship is down (SQLite deletes the WAL), the restarted
 * stream re-bases; every state acknowledged before stays in the sink: the
 * carried manifest is stored under the key, SHA-256 and length the old
 * watermark named, and each state is rebuilt from the chain it heads,
 * exactly as the source committed it.
 */

/* The chain whose head is the manifest the watermark named (key, SHA-256,
 * length). */
static struct ws_chain_stop wm_head(struct wt_env *e, bool *carried)
{
	struct ws_fmt_watermark wm;
	struct ws_chain_stop h;
	assert_int_equal(ws_wm_load(e->sink->store, TENANT, &wm, NULL), 0);
	*carried = wm.carried_len > 0;
	memset(&h, 0, sizeof(h));
	snprintf(h.key, sizeof(h.key), "%s", wm.manifest_key);
	memcpy(h.sha, wm.manifest_sha, WS_SHA256_LEN);
	h.length = wm.manifest_length;
	return h;
}

/* The state at commit frame `frame` of the chain head heads (stored
 * manifests only), replayed and finished as restore finishes an image:
 * its content hash. */
static uint64_t chain_state_hash(struct wt_env *e, const struct ws_chain_stop *head, uint64_t frame)
{
	static const uint8_t legacy[2] = { 1, 1 };
	struct ws_chain c;
	struct ws_replay_result res;
	char name[64];
	char *p;
	size_t upto;
	uint64_t h;
	int fd, rc;

	rc = ws_chain_load_from(e->sink->store, TENANT, head, NULL, 0, &c, NULL);
	if (rc)
		fail_msg("chain from %s: %s (%s)", head->key, ws_strerror(rc), ws_errmsg());
	for (upto = c.count - 1; upto > 0 && c.m[upto].first_frame > frame; upto--)
		;
	assert_true(frame <= c.m[upto].last_frame);
	snprintf(name, sizeof(name), "replayed-%u.db", e->restores++);
	p = wt_path(e->out_dir, name);
	fd = open(p, O_RDWR | O_CREAT | O_EXCL, 0600);
	assert_true(fd >= 0);
	rc = ws_replay(e->sink->store, TENANT, &c, upto, frame, fd, &res, NULL);
	if (rc)
		fail_msg("replay to frame %" PRIu64 ": %s (%s)", frame, ws_strerror(rc), ws_errmsg());
	assert_int_equal(res.commit_frame, frame);
	assert_int_equal(ftruncate(fd, (off_t)res.db_pages * res.page_size), 0);
	assert_int_equal(pwrite(fd, legacy, 2, 18), 2);
	close(fd);
	h = wt_file_hash(p, NULL);
	unlink(p);
	free(p);
	ws_chain_free(&c);
	return h;
}

#define REBASE_STATES 5

/* Ship a re-base and four carried tails; then walship stops and the app
 * closes its last connection (its WAL deleted) and writes again. h and
 * frames: each acknowledged state; *old: the head the last watermark named
 * (carried). The stream is closed, the writer reopened. */
static void carried_then_app_restart(struct wt_env *e, uint64_t h[REBASE_STATES], uint64_t frames[REBASE_STATES],
				     struct ws_chain_stop *old)
{
	struct ws_outcome o;
	struct ws_stream *st = open_epoch(e, 1);
	bool carried;
	wt_write_txn(e->w, 200, 300);
	wt_tail_ok(st, &o); /* the first contact: a stored re-base */
	h[0] = wt_content_hash(e->w, NULL);
	frames[0] = o.kind == WS_OUTCOME_RESTARTED ? o.u.restarted.last_frame : o.u.streamed.last_frame;
	for (int i = 1; i < REBASE_STATES; i++) {
		wt_write_txn(e->w, 3, 300);
		h[i] = wt_content_hash(e->w, NULL);
		wt_tail_ok(st, &o);
		assert_int_equal(o.kind, WS_OUTCOME_STREAMED);
		frames[i] = o.u.streamed.last_frame;
		(void)wm_head(e, &carried);
		assert_true(carried);
	}
	restore_equals_source(e, __LINE__);
	*old = wm_head(e, &carried);
	assert_true(carried);
	ws_stream_close(st);
	/* The app's last connection closes: SQLite checkpoints and deletes
	 * the WAL. Walship comes back to a database without that WAL. */
	sqlite3_close(e->w);
	assert_true(access(e->wal, F_OK) != 0);
	e->w = wt_writer_open(e->db, 0);
	wt_write_txn(e->w, 3, 300);
}

/* What the re-base kept: the manifest the old watermark carried is stored
 * (that very one), every state before the re-base is rebuilt from the
 * chain it heads, and the watermark now names a stored REBASE. */
static void carried_kept_after_rebase(struct wt_env *e, const uint64_t h[REBASE_STATES],
				      const uint64_t frames[REBASE_STATES], const struct ws_chain_stop *old, int line)
{
	struct ws_fmt_manifest m;
	struct ws_buf b;
	struct ws_chain_stop now;
	bool carried;
	int rc;

	ws_buf_init(&b, WS_WM_BYTES_MAX);
	rc = ws_manifest_read(e->sink->store, old->key, old->sha, old->length, &b, &m);
	if (rc)
		fail_msg("line %d: the manifest %s the watermark carried before the re-base is %s", line, old->key,
			 rc > 0 ? "not stored" : "unreadable");
	ws_fmt_manifest_free(&m);
	now = wm_head(e, &carried);
	assert_false(carried);
	ws_buf_reset(&b);
	assert_int_equal(ws_manifest_read(e->sink->store, now.key, now.sha, now.length, &b, &m), 0);
	assert_int_equal(m.kind, WS_MANIFEST_REBASE);
	ws_fmt_manifest_free(&m);
	ws_buf_free(&b);
	for (int i = 0; i < REBASE_STATES; i++)
		if (chain_state_hash(e, old, frames[i]) != h[i])
			fail_msg("line %d: state %d (frame %" PRIu64 ") before the re-base is not the source's", line,
				 i, frames[i]);
}

static void test_rebase_stores_carried_manifest(void **state)
{
	struct wt_env e;
	struct ws_outcome o;
	struct ws_stream *st;
	struct ws_chain_stop old;
	uint64_t h[REBASE_STATES], frames[REBASE_STATES];
	(void)state;

	carry_mode = WS_CARRY_ALWAYS;
	wt_env_init(&e, "rebase-carried", 0);
	carried_then_app_restart(&e, h, frames, &old);
	st = open_epoch(&e, 1);
	wt_tail_ok(st, &o);
	assert_int_equal(o.kind, WS_OUTCOME_RESTARTED);
	carried_kept_after_rebase(&e, h, frames, &old, __LINE__);
	restore_equals_source(&e, __LINE__);
	verify_ok(&e, __LINE__);
	ws_stream_close(st);
	wt_env_free(&e);
	carry_mode = WS_CARRY_PRESSED;
}

/*
 * The same re-base paused where it stores the carried manifest, and where
 * it writes its own manifest and watermark, while a real writer commits
 * and runs each kind of WAL checkpoint: the re-base is reached and
 * acknowledges a state the source committed, and the carried states stay
 * stored. A failure where the carried manifest is stored acknowledges
 * nothing: the carried watermark stays, and the next tail re-bases.
 */
static void test_rebase_carried_paused_under_writer(void **state)
{
	static const char *const sites[] = {
		"stream.before_carried_store", "stream.before_manifest_put", "stream.before_watermark_put",
	};
	(void)state;
	carry_mode = WS_CARRY_ALWAYS;
	for (size_t i = 0; i < sizeof(sites) / sizeof(sites[0]); i++) {
		for (unsigned how = 0; how < WT_MUTATIONS; how++) {
			struct wt_env e;
			struct ws_outcome o;
			struct ws_stream *st;
			struct ws_chain_stop old;
			struct wt_mutator c;
			uint64_t h[REBASE_STATES], frames[REBASE_STATES];
			int rc;

			wt_env_init(&e, "rebase-carried-paused", 0);
			carried_then_app_restart(&e, h, frames, &old);
			wt_mutator_init(&c, &e, how);
			wt_mutator_record(&c);
			st = open_epoch(&e, 1);
			assert_int_equal(ws_fault_arm_pause(sites[i], 1, wt_mutate, &c), 0);
			rc = ws_stream_tail_frames(st, &o);
			ws_fault_disarm();
			if (rc)
				fail_msg("site %s, mutation %u: %s (%s)", sites[i], how, ws_strerror(rc), ws_errmsg());
			if (c.fired != 1)
				fail_msg("site %s, mutation %u: the re-base did not reach it", sites[i], how);
			restore_is_recorded(&c, sites[i], __LINE__);
			carried_kept_after_rebase(&e, h, frames, &old, __LINE__);
			for (int k = 0; k < 3; k++)
				wt_tail_ok(st, &o);
			restore_equals_source(&e, __LINE__);
			verify_ok(&e, __LINE__);
			ws_stream_close(st);
			wt_mutator_free(&c);
			wt_env_free(&e);
		}
	}
	{
		struct wt_env e;
		struct ws_outcome o;
		struct ws_stream *st;
		struct ws_chain_stop old, now;
		uint64_t h[REBASE_STATES], frames[REBASE_STATES];
		bool carried;
		int rc;

		wt_env_init(&e, "rebase-carried-failed", 0);
		carried_then_app_restart(&e, h, frames, &old);
		st = open_epoch(&e, 1);
		assert_int_equal(ws_fault_arm("stream.before_carried_store", 1, 0), 0);
		rc = ws_stream_tail_frames(st, &o);
		ws_fault_disarm();
		assert_int_not_equal(rc, 0);
		now = wm_head(&e, &carried);
		assert_true(carried);
		assert_string_equal(now.key, old.key);
		assert_true(wt_restore_hash(&e, TENANT, NULL, NULL) == h[REBASE_STATES - 1]);
		wt_tail_ok(st, &o);
		assert_int_equal(o.kind, WS_OUTCOME_RESTARTED);
		carried_kept_after_rebase(&e, h, frames, &old, __LINE__);
		restore_equals_source(&e, __LINE__);
		verify_ok(&e, __LINE__);
		ws_stream_close(st);
		wt_env_free(&e);
	}
	carry_mode = WS_CARRY_PRESSED;
}

/*
 * The read that probes for a frame after the watermark (a CONTINUE's third
 * read, before anything is uploaded; a failed one now fails the call
 * instead of saying Empty) paused while a real writer commits and runs
 * each kind of WAL checkpoint: what is acknowledged is a state the source
 * committed, and the next tails reach the latest.
 */
static void test_probe_read_paused_under_writer(void **state)
{
	(void)state;
	for (unsigned how = 0; how < WT_MUTATIONS; how++)
		paused_under_writer("reader.read", 3, how, 20, 15, true);
}

/*
 * A snapshot of more parts than the per-call arrays start with (64; they
 * grow on demand): a first-contact re-base of ~1,300 pages at the smallest
 * batch (16 pages a part), paused at the 70th part's upload (past the
 * growth) while a real writer commits and runs each kind of WAL
 * checkpoint. What is acknowledged is a state the source committed, and the
 * following tails reach the latest.
 */
static void test_grown_snapshot_paused_under_writer(void **state)
{
	(void)state;
	for (unsigned how = 0; how < WT_MUTATIONS; how++) {
		struct wt_env e;
		struct ws_outcome o;
		struct ws_stream *st;
		struct ws_stream_config cfg;
		struct wt_mutator c;
		char res[64];
		int rc;

		wt_env_init(&e, "grown-snap", 0);
		wt_mutator_init(&c, &e, how);
		cfg = cfg_for(&e, 1);
		cfg.batch_bytes_max = 65536 + 24; /* 16 pages of 4 KiB a part */
		wt_write_txn(e.w, 1500, 3000);
		wt_query1(e.w, "PRAGMA wal_checkpoint(TRUNCATE)", res); /* all of it in the file */
		assert_string_equal(res, "0");
		wt_write_txn(e.w, 5, 100);
		wt_mutator_record(&c);
		st = open_cfg(&e, &cfg);
		assert_int_equal(ws_fault_arm_pause("stream.before_snapshot_put", 70, wt_mutate, &c), 0);
		rc = ws_stream_tail_frames(st, &o);
		ws_fault_disarm();
		if (rc)
			fail_msg("mutation %u: %s (%s)", how, ws_strerror(rc), ws_errmsg());
		assert_int_equal(c.fired, 1); /* the 70th part was reached */
		restore_is_recorded(&c, "stream.before_snapshot_put", __LINE__);
		for (int k = 0; k < 3; k++)
			wt_tail_ok(st, &o);
		restore_equals_source(&e, __LINE__);
		verify_ok(&e, __LINE__);
		ws_stream_close(st);
		wt_mutator_free(&c);
		wt_env_free(&e);
	}
}

/*
 * A CONTINUE on a fresh read mark (the engine parked the stream, walship
 * restarted, a takeover): the application had committed past the watermark
 * and its WAL checkpoint backfilled everything, so the fresh mark is 0,
 * which does not hold a WAL restart off. A writer restarts the WAL while
 * the tail scans (paused before its second slot's read), or the tail stops
 * at its work bound and the next commit restarts it. Either way the tail
 * acknowledges a prefix of the old generation (a state the source did
 * commit), and the new generation must not be chained onto that prefix
 * (NEXT_GEN): the old generation's later commits were never shipped.
 */
static void let_clock_pass(const char *site, void *arg);

static void park_and_backfill(struct wt_env *e, struct ws_stream **st, uint64_t seed)
{
	struct ws_stream_config cfg = cfg_for(e, 1);
	struct ws_outcome o;
	uint64_t rnd = seed;
	int log_frames = -1, ckpt_frames = -2;

	*st = open_cfg(e, &cfg);
	wt_write_txn(e->w, 1000, 100);
	wt_tail_ok(*st, &o); /* REBASE */
	wt_write_txn(e->w, 3, 100);
	wt_tail_ok(*st, &o);
	assert_int_equal(o.kind, WS_OUTCOME_STREAMED);
	ws_stream_park(*st);
	update_rows(e->w, 200, &rnd, 1000); /* 200 one-frame commits, the same generation */
	assert_int_equal(sqlite3_wal_checkpoint_v2(e->w, NULL, SQLITE_CHECKPOINT_PASSIVE, &log_frames,
						   &ckpt_frames), SQLITE_OK);
	assert_int_equal(log_frames, ckpt_frames); /* all backfilled: the next read mark is 0 */
}

static void test_fresh_mark0_continue_then_restart(void **state)
{
	struct wt_env e;
	struct ws_outcome o;
	struct ws_stream *st;
	struct restart_ctx c = { 0 };
	uint64_t before;
	(void)state;

	/* A restart during the scan. */
	wt_env_init(&e, "fresh-mark0", 0);
	c.e = &e;
	park_and_backfill(&e, &st, 7);
	before = ws_stream_wm_last_frame(st);
	assert_int_equal(ws_fault_arm_pause("stream.before_wal_read", 2, restart_wal_now, &c), 0);
	wt_tail_ok(st, &o);
	ws_fault_disarm();
	assert_int_equal(c.fired, 1);
	assert_int_not_equal(c.salt_before, c.salt_after);
	assert_int_equal(o.kind, WS_OUTCOME_STREAMED);
	assert_true(ws_stream_wm_last_frame(st) > before); /* a prefix shipped */
	wt_tail_ok(st, &o);
	assert_int_equal(o.kind, WS_OUTCOME_RESTARTED);
	restore_equals_source(&e, __LINE__);
	verify_ok(&e, __LINE__);
	ws_stream_close(st);
	wt_env_free(&e);

	/* The tail stops at its work bound; the next commit restarts the WAL. */
	wt_env_init(&e, "fresh-mark0-bound", 0);
	park_and_backfill(&e, &st, 9);
	ws_stream_set_tail_bound(st, 1, 0);
	assert_int_equal(ws_fault_add("stream.before_wal_read", 1, WS_FAULT_PAUSE, let_clock_pass, NULL), 0);
	wt_tail_ok(st, &o);
	ws_fault_disarm();
	{
		struct ws_stream_call call;
		ws_stream_last_call(st, &call);
		assert_true(call.ended_early);
	}
	ws_stream_set_tail_bound(st, 0, 0);
	{
		uint32_t salt0 = wal_salt1(&e);
		wt_write_txn(e.w, 5, 100);
		assert_int_not_equal(salt0, wal_salt1(&e));
	}
	wt_tail_ok(st, &o);
	restore_equals_source(&e, __LINE__);
	verify_ok(&e, __LINE__);
	ws_stream_close(st);
	wt_env_free(&e);
}

/* ---- 8. a tail stopped at its work bound, the database changed there --- */

static void let_clock_pass(const char *site, void *arg)
{
	(void)site;
	(void)arg;
	usleep(3000); /* past a 1 ms work bound, whatever the machine's speed */
}

/*
 * A backlog of many transactions over many slots; the tail's work bound is
 * 1 ms and its first slot's read is held 3 ms, so it stops after that
 * slot (the stream.tail_bound site, paused): there a real SQLite writer
 * commits (and runs a WAL checkpoint of each mode, or a spilling
 * transaction). What the tail acknowledged must be a state the source
 * committed (a prefix of the backlog), and the following tails reach the
 * source's latest state.
 */
static void test_tail_bound_paused_under_writer(void **state)
{
	(void)state;
	for (unsigned how = 0; how < WT_MUTATIONS; how++) {
		struct wt_env e;
		struct ws_outcome o;
		struct ws_stream *st;
		struct ws_stream_config cfg;
		struct ws_stream_call call;
		struct wt_mutator c;
		int rc;

		wt_env_init(&e, "bound", 0);
		wt_mutator_init(&c, &e, how);
		cfg = cfg_for(&e, 1);
		cfg.wal_checkpoint_bytes = how & 1 ? 1 : UINT64_MAX;
		st = open_cfg(&e, &cfg);
		wt_write_txn(e.w, 50, 300);
		wt_mutator_record(&c);
		wt_tail_ok(st, &o);
		/* ~250 frames in 20 commits: four slots of 64 frames. */
		for (int i = 0; i < 20; i++) {
			wt_write_txn(e.w, 12, 1000);
			wt_mutator_record(&c);
		}
		ws_stream_set_tail_bound(st, 1, 0);
		assert_int_equal(ws_fault_add("stream.before_wal_read", 1, WS_FAULT_PAUSE, let_clock_pass, NULL), 0);
		assert_int_equal(ws_fault_add("stream.tail_bound", 1, WS_FAULT_PAUSE, wt_mutate, &c), 0);
		rc = ws_stream_tail_frames(st, &o);
		ws_fault_disarm();
		if (rc)
			fail_msg("mutation %u: %s (%s)", how, ws_strerror(rc), ws_errmsg());
		if (c.fired != 1)
			fail_msg("mutation %u: the tail never reached its work bound: the test does not test", how);
		ws_stream_last_call(st, &call);
		assert_true(call.ended_early);
		assert_int_equal(o.kind, WS_OUTCOME_STREAMED);
		assert_int_equal(call.frames_shed, 0);
		restore_is_recorded(&c, "stream.tail_bound", __LINE__);
		/* It shipped a prefix, not everything. */
		if (wt_restore_hash(&e, TENANT, NULL, NULL) == wt_content_hash(e.w, NULL))
			fail_msg("mutation %u: the bounded tail shipped the whole backlog", how);
		/* Unbounded, the next calls bring the sink to the latest state. */
		ws_stream_set_tail_bound(st, 0, 0);
		for (int k = 0; k < 3; k++)
			wt_tail_ok(st, &o);
		restore_equals_source(&e, __LINE__);
		verify_ok(&e, __LINE__);
		ws_stream_close(st);
		wt_mutator_free(&c);
		wt_env_free(&e);
	}
}

/* replay.prefetch's callback: while the restore's fetching thread waits,
 * the source is written (wt_mutate) and each change shipped. */
struct prefetch_pause {
	struct wt_mutator *m;
	struct ws_stream *st;
	int tails;
};

static void mutate_and_ship(const char *site, void *arg)
{
	struct prefetch_pause *p = arg;
	struct ws_outcome o;
	wt_mutate(site, p->m);
	for (int k = 0; k < 3; k++)
		if (ws_stream_tail_frames(p->st, &o) == 0 && o.kind != WS_OUTCOME_EMPTY)
			p->tails++;
}

/*
 * A restore fetching 4 objects at once, paused at site in its window's
 * threads (the second time there) while a real writer commits, runs each
 * kind of WAL checkpoint and ships: released, it writes exactly the state
 * it chose before (the latest then), never one the sink moved to meanwhile
 * nor a mix; after, the new latest state restores at 4 and at 1 equal to
 * the source, and verifies. sealed: the stream ships zstd and a key.
 */
static void restore_paused_at(const char *site, bool sealed)
{
	static const char key[] = "# test\n5e1d0c9b8a7f6e5d4c3b2a19087f6e5d4c3b2a19087f6e5d4c3b2a1908a7b6c5\n";
	for (unsigned how = 0; how < WT_MUTATIONS; how++) {
		struct wt_env e;
		struct ws_outcome o;
		struct ws_stream *st;
		struct ws_stream_config cfg;
		struct wt_mutator c;
		struct prefetch_pause p;
		uint64_t want, got;

		wt_env_init(&e, "prefetch", 0);
		char *kf = wt_path(e.dir, "keys");
		wt_mutator_init(&c, &e, how);
		cfg = cfg_for(&e, 1);
		cfg.wal_checkpoint_bytes = how & 1 ? 1 : UINT64_MAX;
		if (sealed) {
			assert_int_equal(wt_write_file(kf, key, strlen(key)), 0);
			cfg.seal.codec = WS_CODEC_ZSTD;
			cfg.seal.key_file = kf;
		}
		st = open_cfg(&e, &cfg);
		/* Stored batches of several slots and inline ones, in turn. */
		for (int i = 0; i < 12; i++) {
			wt_write_txn(e.w, i % 2 ? 100 : 12, 1000);
			wt_mutator_record(&c);
			wt_tail_ok(st, &o);
		}
		want = wt_content_hash(e.w, NULL);
		assert_int_equal(ws_sink_set_fetch_parallelism(e.sink, 4), 0);
		p = (struct prefetch_pause){ .m = &c, .st = st };
		assert_int_equal(ws_fault_add(site, 2, WS_FAULT_PAUSE, mutate_and_ship, &p), 0);
		got = wt_restore_hash(&e, TENANT, NULL, NULL);
		ws_fault_disarm();
		if (c.fired != 1 || p.tails == 0)
			fail_msg("%s, mutation %u: paused %d times, %d tails shipped meanwhile: the test does not test",
				 site, how, c.fired, p.tails);
		if (got != want)
			fail_msg("%s, mutation %u: the restore paused in its window is not the state chosen before "
				 "(found at %d of the %u recorded)", site, how, wt_mutator_find(&c, got), c.nstates);
		restore_equals_source(&e, __LINE__);
		assert_int_equal(ws_sink_set_fetch_parallelism(e.sink, 1), 0);
		restore_equals_source(&e, __LINE__);
		verify_ok(&e, __LINE__);
		ws_stream_close(st);
		wt_mutator_free(&c);
		wt_env_free(&e);
		free(kf);
	}
}

/* Paused in the fetching thread (replay.prefetch: a window chosen, not yet read). */
static void test_restore_paused_in_prefetch(void **state)
{
	(void)state;
	restore_paused_at("replay.prefetch", false);
}

/* Sealed objects, paused where the window's second thread opens an object
 * ahead of the replay (replay.prefetch_open). */
static void test_restore_paused_opening_sealed(void **state)
{
	(void)state;
	restore_paused_at("replay.prefetch_open", true);
}

static void every_site_failed(void)
{
	for (unsigned i = 0; i < ws_fault_site_count(); i++) {
		const char *site = ws_fault_site_name(i);
		struct wt_env e;
		struct ws_outcome o;
		struct ws_stream *st;
		struct ws_stream_config cfg;
		int64_t rows_before = 0, rows = 0;
		uint64_t before;
		int rc;

		if (!is_stream_site(site) && strcmp(site, "reader.read") != 0 && strncmp(site, "file.put.", 9) != 0)
			continue;
		wt_env_init(&e, "failed", 0);
		cfg = cfg_for(&e, 1);
		cfg.wal_checkpoint_bytes = 1;
		st = open_cfg(&e, &cfg);
		wt_write_txn(e.w, 200, 300);
		wt_tail_ok(st, &o);
		before = wt_content_hash(e.w, &rows_before);
		wt_write_txn(e.w, 150, 300);
		assert_int_equal(ws_fault_arm(site, 1, 0), 0);
		rc = ws_stream_tail_frames(st, &o);
		ws_fault_disarm();
		/* Failed: nothing new acknowledged. Succeeded (the site was not on
		 * this call's path, or it only pauses): everything is. */
		if (rc) {
			uint64_t h = wt_restore_hash(&e, TENANT, NULL, &rows);
			if (h != before && h != wt_content_hash(e.w, NULL))
				fail_msg("site %s failed the call, and the restore is no state the source had", site);
		}
		wt_tail_ok(st, &o);
		restore_equals_source(&e, __LINE__);
		verify_ok(&e, __LINE__);
		ws_stream_close(st);
		wt_env_free(&e);
	}
}

static void test_every_site_failed(void **state)
{
	(void)state;
	every_site_failed();
}

/* The same with manifest slots (SLOTS.md 3.2 item 9). */
static void test_every_site_failed_slots(void **state)
{
	(void)state;
	slots_mode = true;
	every_site_failed();
	slots_mode = false;
}

/* ---- the registry ------------------------------------------------------ */

/* Every site named in the sources is listed, and every listed site is
 * named somewhere (a stale entry would make a site-iterating test vacuous). */
static void test_registry_matches_sources(void **state)
{
	char *cmd = NULL, *out = NULL, *path;
	size_t len = 0;
	(void)state;
	path = wt_path(getenv("WS_TEST_TMP") ? getenv("WS_TEST_TMP") : "/tmp", "fault-sites.txt");
	/* Every string literal shaped like a site name in a layer's sources. */
	assert_int_not_equal(asprintf(&cmd,
		"cd '%s' && grep -rhoE '\"((reader|http|file|ckpt|checkpoint|retention|stream|verify)\\.[a-z_]+|"
		"(chain|restore|replay)\\.[a-z_]{2,})(\\.[a-z_]+)*\"' "
		"core io net store tools --include=*.c | tr -d '\"' | sort -u > '%s'",
		WS_SOURCE_DIR, path), -1);
	assert_int_equal(wt_sh("%s", cmd), 0);
	out = (char *)wt_read_file(path, &len);
	assert_non_null(out);
	out = realloc(out, len + 1);
	out[len] = '\0';
	unsigned named = 0;
	for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
		named++;
		if (ws_fault_site_index(line) < 0)
			fail_msg("fault site \"%s\" is used in the sources but not listed in WS_FAULT_SITES", line);
	}
	assert_true(named > 20);
	for (unsigned i = 0; i < ws_fault_site_count(); i++) {
		const char *site = ws_fault_site_name(i);
		assert_non_null(ws_fault_site_about(i));
		if (wt_sh("cd '%s' && grep -rqF '\"%s\"' core io net store tools --include=*.c", WS_SOURCE_DIR,
			  site) != 0)
			fail_msg("fault site \"%s\" is listed but no source names it", site);
	}
	assert_int_equal(ws_fault_arm("no.such.site", 1, 0), -EINVAL);
	unlink(path);
	free(path);
	free(cmd);
	free(out);
}

/*
 * A parked stream (nothing open) whose tail finds nothing new decides Empty
 * with no read mark (empty_unheld, core/stream_steps.c) and stays parked.
 * Paused there, after its look past the watermark's last frame and before
 * it reads the WAL header again, while a real writer commits and runs each
 * kind of WAL checkpoint: the tail's outcome never acknowledges a state the
 * source did not commit, a restart under it is seen (the tail goes the held
 * way and re-bases), and the next tails reach the source exactly. Without a
 * pause: Empty, nothing held (a TRUNCATE checkpoint completes), no request
 * once the watermark is known.
 */
static void test_unheld_empty_paused_under_writer(void **state)
{
	(void)state;
	/* Both with the watermark carrying its manifest (dropped with the
	 * stream parked, read back by the next fencing read) and without. */
	for (unsigned k = 0; k < 2 * WT_MUTATIONS; k++) {
		const unsigned how = k % WT_MUTATIONS;
		carry_mode = k < WT_MUTATIONS ? WS_CARRY_PRESSED : WS_CARRY_ALWAYS;
		struct wt_env e;
		struct wt_mutator c;
		struct ws_outcome o;
		struct ws_stream_call call;
		struct ws_stream_config cfg;
		struct ws_stream *st;

		wt_env_init(&e, "unheld", 0);
		wt_mutator_init(&c, &e, how);
		cfg = cfg_for(&e, 1); /* walship's own WAL checkpoint never due: see below */
		st = open_cfg(&e, &cfg);
		wt_write_txn(e.w, 200, 300);
		wt_mutator_record(&c);
		wt_tail_ok(st, &o);
		/* Nothing new, unpaused: Empty, parked, no request, nothing held. */
		ws_stream_park(st);
		wt_tail_ok(st, &o);
		assert_int_equal(o.kind, WS_OUTCOME_EMPTY);
		assert_true(ws_stream_parked(st));
		ws_stream_last_call(st, &call);
		assert_int_equal(call.puts, 0);
		{
			int log = -1, ckpt = -1;
			assert_int_equal(sqlite3_wal_checkpoint_v2(e.w, NULL, SQLITE_CHECKPOINT_TRUNCATE, &log, &ckpt),
					 SQLITE_OK);
			assert_int_equal(log, 0); /* no read mark of walship's kept the WAL from restarting */
		}
		wt_tail_ok(st, &o); /* the WAL restarted: a held tail re-bases */
		wt_write_txn(e.w, 20, 300);
		wt_mutator_record(&c);
		wt_tail_ok(st, &o);
		/* Paused in the unheld look, the writer mutating under it. */
		ws_stream_park(st);
		tail_paused_then_caught_up(&e, st, &c, "stream.unheld_empty");
		ws_stream_close(st);
		wt_mutator_free(&c);
		wt_env_free(&e);
	}
	carry_mode = WS_CARRY_PRESSED;
	/* walship's own WAL checkpoint due (the WAL past wal_checkpoint_bytes):
	 * a parked stream with nothing new goes the held way, which takes it. */
	{
		struct wt_env e;
		struct ws_outcome o;
		struct ws_stream_config cfg;
		struct ws_stream *st;
		wt_env_init(&e, "unheld-ckpt", 0);
		cfg = cfg_for(&e, 1);
		cfg.wal_checkpoint_bytes = 1;
		st = open_cfg(&e, &cfg);
		wt_write_txn(e.w, 200, 300);
		wt_tail_ok(st, &o);
		const uint64_t ckpts = ws_stream_wal_checkpoints(st);
		ws_stream_park(st);
		wt_write_txn(e.w, 5, 300);
		wt_tail_ok(st, &o);
		ws_stream_park(st);
		wt_tail_ok(st, &o);
		assert_false(ws_stream_parked(st));
		assert_true(ws_stream_wal_checkpoints(st) > ckpts);
		restore_equals_source(&e, __LINE__);
		ws_stream_close(st);
		wt_env_free(&e);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_registry_matches_sources),
		cmocka_unit_test(test_replaced_db_is_rebased),
		cmocka_unit_test(test_replaced_during_tail),
		cmocka_unit_test(test_rebase_mark0_wal_restarted_mid_scan),
		cmocka_unit_test(test_fresh_mark0_continue_then_restart),
		cmocka_unit_test(test_spilled_frames_rewritten_under_a_tail),
		cmocka_unit_test(test_takeover_before_cas_is_lost_race),
		cmocka_unit_test(test_fenced_releases_read_marks),
		cmocka_unit_test(test_checkpoint_fallback_gap_rebases),
		cmocka_unit_test(test_backlog_beyond_batch_limit),
		cmocka_unit_test(test_batch_limit_ships_prefixes),
		cmocka_unit_test(test_rebase_over_grown_database),
		cmocka_unit_test(test_image_tmp_never_through_a_link),
		cmocka_unit_test(test_verify_during_retention),
		cmocka_unit_test(test_every_site_failed),
		cmocka_unit_test(test_every_site_paused_under_writer),
		cmocka_unit_test(test_every_site_paused_under_writer_slots),
		cmocka_unit_test(test_every_site_failed_slots),
		cmocka_unit_test(test_inline_tail_paused_under_writer),
		cmocka_unit_test(test_carried_manifest_tails),
		cmocka_unit_test(test_carried_time_inside_merged_span),
		cmocka_unit_test(test_carried_next_generation),
		cmocka_unit_test(test_checkpoint_names_carried_head),
		cmocka_unit_test(test_checkpoint_carried_head_races),
		cmocka_unit_test(test_carried_tail_paused_under_writer),
		cmocka_unit_test(test_carried_store_paused_under_writer),
		cmocka_unit_test(test_rebase_stores_carried_manifest),
		cmocka_unit_test(test_rebase_carried_paused_under_writer),
		cmocka_unit_test(test_probe_read_paused_under_writer),
		cmocka_unit_test(test_grown_snapshot_paused_under_writer),
		cmocka_unit_test(test_tail_bound_paused_under_writer),
		cmocka_unit_test(test_unheld_empty_paused_under_writer),
		cmocka_unit_test(test_restore_paused_in_prefetch),
		cmocka_unit_test(test_restore_paused_opening_sealed),
	};
	return WT_RUN_GROUP(tests, NULL, NULL);
}
