/*
 * tail_frames, outcome by outcome, against a real SQLite writer and a
 * file:// sink, and restore checked against the source database's content.
 *
 * Every test writes through libsqlite3 (journal_mode=WAL), ships with
 * ws_stream_tail_frames, and compares the restored file to the source by
 * content (schema + every row of t, hashed) plus PRAGMA integrity_check.
 * Expected frame numbers come from the -wal file itself (its size, with
 * autocheckpoint off and no restart, is header + committed frames), never
 * from the engine under test.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "chain.h"
#include "core_internal.h"
#include "ws_stream.h"
#include "coreutil.h"
#include "walship.h"
#include "ws_clock.h"
#include "ws_fault.h"
#include "ws_format.h"
#include "pipe.h"
#include "ws_reader.h"
#include "ws_store.h"

#define TENANT "orders"

/* ---- helpers ------------------------------------------------------------ */

static uint64_t wal_size(const struct wt_env *e)
{
	struct stat sb;
	return stat(e->wal, &sb) == 0 ? (uint64_t)sb.st_size : 0;
}

/* Frames in the WAL, by size (valid with autocheckpoint off, no restart, no
 * uncommitted spill): every frame is then committed. */
static uint64_t wal_frames(const struct wt_env *e)
{
	uint64_t n = wal_size(e);
	return n < 32 ? 0 : (n - 32) / (24u + e->page_size);
}

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

struct walhdr {
	uint32_t seq, salt1, salt2;
};

static struct walhdr wal_header(const struct wt_env *e)
{
	size_t len = 0;
	uint8_t *b = wt_read_file(e->wal, &len);
	struct walhdr h;
	assert_non_null(b);
	assert_true(len >= 32);
	h.seq = be32(b + 12);
	h.salt1 = be32(b + 16);
	h.salt2 = be32(b + 20);
	free(b);
	return h;
}

static struct ws_stream *stream_open_cfg(struct wt_env *e, struct ws_sink *sink, const struct ws_stream_config *cfg)
{
	int err = -1;
	struct ws_stream *st = ws_stream_open(sink ? sink : e->sink, cfg, &err);
	if (!st)
		fail_msg("ws_stream_open: %s (%s)", ws_strerror(err), ws_errmsg());
	assert_int_equal(err, 0);
	return st;
}

static struct ws_stream_config cfg_default(const struct wt_env *e)
{
	struct ws_stream_config c;
	memset(&c, 0, sizeof(c));
	c.tenant = TENANT;
	c.db_path = e->db;
	c.epoch = 1;
	c.pointer_generation = 1;
	c.policy = WS_POLICY_THROTTLE; /* not the zero value: the report must copy it */
	c.wal_checkpoint_bytes = UINT64_MAX;
	return c;
}

static struct ws_stream *stream_open(struct wt_env *e)
{
	struct ws_stream_config c = cfg_default(e);
	return stream_open_cfg(e, NULL, &c);
}

static void tail_expect(struct ws_stream *st, struct ws_outcome *o, enum ws_outcome_kind k)
{
	wt_tail_ok(st, o);
	if (o->kind != k)
		fail_msg("tail_frames: outcome %s, expected %s", ws_outcome_name(o->kind), ws_outcome_name(k));
}

/* Restore into a fresh file of out_dir; returns the content hash. */
static uint64_t restore_hash_opts(struct wt_env *e, const struct ws_restore_opts *o, int64_t *rows)
{
	return wt_restore_hash(e, TENANT, o, rows);
}

static void restore_equals_source_at(struct wt_env *e, int line)
{
	int64_t rs = 0, rr = 0;
	uint64_t hs = wt_content_hash(e->w, &rs);
	uint64_t hr = restore_hash_opts(e, NULL, &rr);
	if (rr != rs || hs != hr)
		fail_msg("line %d: restored %" PRId64 " rows (hash %016" PRIx64 "), source has %" PRId64
			 " (hash %016" PRIx64 ")", line, rr, hr, rs, hs);
}
#define assert_restore_equals_source(e) restore_equals_source_at((e), __LINE__)

static void stats(struct ws_sink *s, struct ws_sink_stats *o)
{
	ws_sink_get_stats(s, o);
}

static void assert_stats_equal(const struct ws_sink_stats *a, const struct ws_sink_stats *b)
{
	assert_int_equal(a->puts, b->puts);
	assert_int_equal(a->gets, b->gets);
	assert_int_equal(a->heads, b->heads);
	assert_int_equal(a->lists, b->lists);
	assert_int_equal(a->deletes, b->deletes);
	assert_int_equal(a->bytes_put, b->bytes_put);
	assert_int_equal(a->bytes_got, b->bytes_got);
}

/* Files under dir matching a find(1) predicate. */
static unsigned count_objects(const char *dir, const char *pred)
{
	char *tmp;
	size_t len = 0;
	uint8_t *b;
	unsigned n;
	assert_int_not_equal(asprintf(&tmp, "%s.count", dir), -1);
	assert_int_equal(wt_sh("find '%s' -type f %s | wc -l > '%s'", dir, pred, tmp), 0);
	b = wt_read_file(tmp, &len);
	assert_non_null(b);
	b[len] = '\0';
	n = (unsigned)strtoul((char *)b, NULL, 10);
	free(b);
	unlink(tmp);
	free(tmp);
	return n;
}

static void check_rpo_bp_present(const struct ws_outcome *o, const struct ws_backpressure_report *bp_field,
				 const struct ws_rpo_status *rpo_field)
{
	const struct ws_rpo_status *rpo = ws_outcome_rpo(o);
	const struct ws_backpressure_report *bp = ws_outcome_backpressure(o);
	assert_ptr_equal(rpo, rpo_field);
	assert_ptr_equal(bp, bp_field);
	assert_true(rpo->has_watermark);
	assert_true(rpo->watermark_age_ms < 60000);
	assert_int_equal(bp->policy, WS_POLICY_THROTTLE);
	assert_int_equal(bp->frames_shed, 0);
}

static bool has_prefix(const char *s, const char *p)
{
	return strncmp(s, p, strlen(p)) == 0;
}

static bool key_exists(const struct wt_env *e, const char *key)
{
	char *p = wt_path(e->sink_dir, key);
	struct stat sb;
	bool ok = stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
	free(p);
	return ok;
}

/* ---- Streamed, Empty ------------------------------------------------------ */

/* Under shed, a re-base of a database with no WAL whose snapshot upload
 * fails is Shed with no frame range (0..0, as Streamed says of one), not
 * an inverted 1..0; the next call ships it. */
static void test_shed_snapshot_without_wal(void **state)
{
	struct wt_env e;
	struct ws_outcome o;
	struct ws_stream *st;
	struct ws_stream_config cfg;
	(void)state;

	wt_env_init(&e, "stream_shed_nowal", 0);
	wt_write_txn(e.w, 10, 100);
	sqlite3_close(e.w); /* last close: checkpoint and delete the WAL */
	e.w = NULL;
	assert_int_equal(access(e.wal, F_OK), -1);
	cfg = cfg_default(&e);
	cfg.policy = WS_POLICY_SHED;
	st = stream_open_cfg(&e, NULL, &cfg);
	assert_int_equal(ws_fault_arm("file.put.before_publish", 1, 0), 0);
	tail_expect(st, &o, WS_OUTCOME_SHED);
	ws_fault_disarm();
	assert_int_equal(o.u.shed.first_frame, 0);
	assert_int_equal(o.u.shed.last_frame, 0);
	assert_int_equal(o.u.shed.backpressure.frames_shed, 0);
	tail_expect(st, &o, WS_OUTCOME_STREAMED);
	assert_int_equal(o.u.streamed.last_frame, 0);
	ws_stream_close(st);
	e.w = wt_writer_open(e.db, 0);
	assert_true(restore_hash_opts(&e, NULL, NULL) == wt_content_hash(e.w, NULL));
	wt_env_free(&e);
}

/* A database with no WAL at all: the first tail ships the file (frame 0). */
static void test_fresh_db_without_wal(void **state)
{
	struct wt_env e;
	struct ws_outcome o, o2;
	struct ws_sink_stats a, b;
	struct ws_stream *st;
	(void)state;

	wt_env_init(&e, "stream_fresh", 0);
	wt_write_txn(e.w, 10, 100);
	sqlite3_close(e.w); /* last close: checkpoint and delete the WAL */
	e.w = NULL;
	assert_int_equal(access(e.wal, F_OK), -1);

	st = stream_open(&e);
	tail_expect(st, &o, WS_OUTCOME_STREAMED);
	assert_int_equal(o.u.streamed.first_frame, 0);
	assert_int_equal(o.u.streamed.last_frame, 0);
	assert_int_equal(o.u.streamed.frame_count, 0);
	assert_true(has_prefix(o.u.streamed.generation_key, TENANT "/e1-p1/g-none/m"));
	assert_true(key_exists(&e, o.u.streamed.generation_key));
	check_rpo_bp_present(&o, &o.u.streamed.backpressure, &o.u.streamed.rpo);

	stats(e.sink, &a);
	tail_expect(st, &o2, WS_OUTCOME_EMPTY);
	stats(e.sink, &b);
	assert_stats_equal(&a, &b);
	assert_null(ws_outcome_backpressure(&o2));
	assert_ptr_equal(ws_outcome_rpo(&o2), &o2.u.empty.rpo);
	assert_true(o2.u.empty.rpo.has_watermark);
	assert_string_equal(o2.u.empty.watermark.manifest_key, o.u.streamed.generation_key);

	e.w = wt_writer_open(e.db, 0);
	{
		int64_t rs, rr;
		uint64_t hs = wt_content_hash(e.w, &rs);
		uint64_t hr = restore_hash_opts(&e, NULL, &rr);
		assert_int_equal(rs, 10);
		assert_int_equal(rr, 10);
		assert_true(hs == hr);
	}
	/* A WAL appears while the stream holds its read mark: frames 1..N of
	 * it are shipped on top of the file image. */
	wt_write_txn(e.w, 4, 2000);
	tail_expect(st, &o, WS_OUTCOME_RESTARTED);
	assert_int_equal(o.u.restarted.first_frame, 1);
	assert_int_equal(o.u.restarted.last_frame, wal_frames(&e));
	assert_int_equal(o.u.restarted.frame_count, wal_frames(&e));
	assert_true(o.u.restarted.new_generation.has_salt);
	assert_int_equal(o.u.restarted.new_generation.salt1, wal_header(&e).salt1);
	assert_restore_equals_source(&e);
	ws_stream_close(st);
	wt_env_free(&e);
}

static void test_streamed_then_empty(void **state)
{
	struct wt_env e;
	struct ws_outcome o;
	struct ws_sink_stats a, b;
	struct ws_stream *st;
	uint64_t prev_last;
	(void)state;

	wt_env_init(&e, "stream_basic", 0);
	wt_write_txn(e.w, 5, 300);
	st = stream_open(&e);
	tail_expect(st, &o, WS_OUTCOME_STREAMED);
	assert_int_equal(o.u.streamed.first_frame, 1);
	assert_int_equal(o.u.streamed.last_frame, wal_frames(&e));
	assert_int_equal(o.u.streamed.frame_count, wal_frames(&e));
	assert_int_equal(o.u.streamed.checkpoint_seq, wal_header(&e).seq);
	assert_true(has_prefix(o.u.streamed.generation_key, TENANT "/e1-p1/g"));
	assert_true(key_exists(&e, o.u.streamed.generation_key));
	check_rpo_bp_present(&o, &o.u.streamed.backpressure, &o.u.streamed.rpo);
	assert_true(o.u.streamed.backpressure.spill_high_water > 0);
	prev_last = o.u.streamed.last_frame;

	/* Nothing new: Empty, decided without a single store request, twice. */
	for (int i = 0; i < 2; i++) {
		stats(e.sink, &a);
		tail_expect(st, &o, WS_OUTCOME_EMPTY);
		stats(e.sink, &b);
		assert_stats_equal(&a, &b);
		assert_null(ws_outcome_backpressure(&o));
		assert_ptr_equal(ws_outcome_rpo(&o), &o.u.empty.rpo);
		assert_true(o.u.empty.rpo.has_watermark);
		assert_int_equal(o.u.empty.watermark.last_frame, prev_last);
		assert_int_equal(o.u.empty.watermark.epoch, 1);
		assert_int_equal(o.u.empty.watermark.pointer_generation, 1);
		assert_true(o.u.empty.watermark.generation.has_salt);
		assert_int_equal(o.u.empty.watermark.generation.salt1, wal_header(&e).salt1);
		assert_int_equal(o.u.empty.watermark.generation.salt2, wal_header(&e).salt2);
	}

	/* Rounds of writes: each tail continues exactly where the last ended. */
	for (int round = 0; round < 6; round++) {
		for (int t = 0; t <= round % 3; t++)
			wt_write_txn(e.w, 1 + round, 200 + 700 * round);
		wt_sleep_ms(2);
		stats(e.sink, &a);
		tail_expect(st, &o, WS_OUTCOME_STREAMED);
		stats(e.sink, &b);
		assert_true(b.puts > a.puts);
		assert_int_equal(o.u.streamed.first_frame, prev_last + 1);
		assert_int_equal(o.u.streamed.last_frame, wal_frames(&e));
		assert_int_equal(o.u.streamed.frame_count, o.u.streamed.last_frame - o.u.streamed.first_frame + 1);
		assert_int_equal(o.u.streamed.checkpoint_seq, wal_header(&e).seq);
		assert_true(key_exists(&e, o.u.streamed.generation_key));
		check_rpo_bp_present(&o, &o.u.streamed.backpressure, &o.u.streamed.rpo);
		assert_true(o.u.streamed.backpressure.spill_high_water > 0);
		assert_true(o.u.streamed.backpressure.spill_high_water <= 4u << 20);
		/* The RPO is measured from the previous watermark: now fresh. */
		assert_true(o.u.streamed.rpo.watermark_age_ms < 1000);
		prev_last = o.u.streamed.last_frame;

		/* ls agrees with the outcome. */
		{
			struct ws_outcome oe;
			tail_expect(st, &oe, WS_OUTCOME_EMPTY);
			assert_int_equal(oe.u.empty.watermark.last_frame, prev_last);
			assert_string_equal(oe.u.empty.watermark.manifest_key, o.u.streamed.generation_key);
		}
	}
	assert_restore_equals_source(&e);
	assert_int_equal(ws_verify(e.sink, TENANT, NULL, NULL), 0);

	/* A reopened stream (fresh process) proves the WAL is the same
	 * generation and continues it: Streamed, not Restarted. */
	ws_stream_close(st);
	st = stream_open(&e);
	tail_expect(st, &o, WS_OUTCOME_EMPTY);
	wt_write_txn(e.w, 3, 500);
	tail_expect(st, &o, WS_OUTCOME_STREAMED);
	assert_int_equal(o.u.streamed.first_frame, prev_last + 1);
	assert_int_equal(o.u.streamed.last_frame, wal_frames(&e));
	assert_restore_equals_source(&e);
	ws_stream_close(st);
	wt_env_free(&e);
}

/* The RPO age grows while nothing is written (Empty keeps reporting it). */
static void test_empty_rpo_ages(void **state)
{
	struct wt_env e;
	struct ws_outcome o;
	struct ws_stream *st;
	(void)state;

	wt_env_init(&e, "stream_rpo", 0);
	wt_write_txn(e.w, 1, 10);
	st = stream_open(&e);
	tail_expect(st, &o, WS_OUTCOME_STREAMED);
	wt_sleep_ms(60);
	tail_expect(st, &o, WS_OUTCOME_EMPTY);
	assert_true(o.u.empty.rpo.has_watermark);
	assert_true(o.u.empty.rpo.watermark_age_ms >= 50);
	ws_stream_close(st);
	wt_env_free(&e);
}

/* ---- Restarted -------------------------------------------------------------- */

/* A writer restart: sequence 0 -> 0, only the salt moved. */
static void test_restarted_salt_only(void **state)
{
	struct wt_env e;
	struct ws_outcome o;
	struct ws_stream *st;
	struct walhdr h1, h2;
	(void)state;

	wt_env_init(&e, "stream_salt", 0);
	wt_write_txn(e.w, 4, 1000);
	h1 = wal_header(&e);
	assert_int_equal(h1.seq, 0);
	st = stream_open(&e);
	tail_expect(st, &o, WS_OUTCOME_STREAMED);
	ws_stream_close(st);

	sqlite3_close(e.w); /* last connection: WAL checkpointed and deleted */
	assert_int_equal(access(e.wal, F_OK), -1);
	e.w = wt_writer_open(e.db, 0);
	wt_write_txn(e.w, 3, 800);
	h2 = wal_header(&e);
	assert_int_equal(h2.seq, 0);
	assert_true(h1.salt1 != h2.salt1 || h1.salt2 != h2.salt2);

	st = stream_open(&e);
	tail_expect(st, &o, WS_OUTCOME_RESTARTED);
	assert_true(o.u.restarted.previous_generation.has_salt);
	assert_int_equal(o.u.restarted.previous_generation.checkpoint_seq, 0);
	assert_int_equal(o.u.restarted.previous_generation.salt1, h1.salt1);
	assert_int_equal(o.u.restarted.previous_generation.salt2, h1.salt2);
	assert_true(o.u.restarted.new_generation.has_salt);
	assert_int_equal(o.u.restarted.new_generation.checkpoint_seq, 0);
	assert_int_equal(o.u.restarted.new_generation.salt1, h2.salt1);
	assert_int_equal(o.u.restarted.new_generation.salt2, h2.salt2);
	assert_int_equal(o.u.restarted.first_frame, 1);
	assert_int_equal(o.u.restarted.last_frame, wal_frames(&e));
	assert_int_equal(o.u.restarted.frame_count, wal_frames(&e));
	assert_true(key_exists(&e, o.u.restarted.generation_key));
	check_rpo_bp_present(&o, &o.u.restarted.backpressure, &o.u.restarted.rpo);
	assert_restore_equals_source(&e);

	/* And the new generation continues normally. */
	wt_write_txn(e.w, 2, 100);
	tail_expect(st, &o, WS_OUTCOME_STREAMED);
	assert_int_equal(o.u.streamed.last_frame, wal_frames(&e));
	assert_restore_equals_source(&e);
	assert_int_equal(ws_verify(e.sink, TENANT, NULL, NULL), 0);
	ws_stream_close(st);
	wt_env_free(&e);
}

/* The application checkpointed and restarted the WAL while no stream ran:
 * the sequence advanced, and nothing proves the frames in between. */
static void test_restarted_seq_advanced(void **state)
{
	struct wt_env e;
	struct ws_outcome o;
	struct ws_stream *st;
	struct walhdr h1, h2;
	char res[64];
	(void)state;

	wt_env_init(&e, "stream_seq", 0);
	wt_write_txn(e.w, 4, 1000);
	h1 = wal_header(&e);
	st = stream_open(&e);
	tail_expect(st, &o, WS_OUTCOME_STREAMED);
	ws_stream_close(st);

	wt_write_txn(e.w, 5, 1000); /* never shipped as frames */
	wt_query1(e.w, "PRAGMA wal_checkpoint(TRUNCATE)", res);
	assert_string_equal(res, "0");
	wt_write_txn(e.w, 2, 1000);
	h2 = wal_header(&e);
	assert_int_equal(h2.seq, h1.seq + 1);

	st = stream_open(&e);
	tail_expect(st, &o, WS_OUTCOME_RESTARTED);
	assert_int_equal(o.u.restarted.previous_generation.checkpoint_seq, h1.seq);
	assert_true(o.u.restarted.previous_generation.has_salt);
	assert_int_equal(o.u.restarted.new_generation.checkpoint_seq, h2.seq);
	assert_int_equal(o.u.restarted.first_frame, 1);
	assert_int_equal(o.u.restarted.last_frame, wal_frames(&e));
	assert_restore_equals_source(&e);
	assert_int_equal(ws_verify(e.sink, TENANT, NULL, NULL), 0);
	ws_stream_close(st);
	wt_env_free(&e);
}

static void rewrite_wm_legacy(struct wt_env *e)
{
	int err = 0;
	struct ws_store *s = ws_store_file_open(e->sink_dir, &err);
	struct ws_buf b;
	struct ws_fmt_watermark wm;
	assert_non_null(s);
	ws_buf_init(&b, 0);
	assert_int_equal(ws_store_get(s, TENANT "/wm", 0, UINT64_MAX, &b, NULL), 0);
	assert_int_equal(ws_fmt_watermark_decode(b.data, b.len, &wm), 0);
	assert_int_equal(wm.version, 2);
	wm.version = 1;
	assert_int_equal(ws_fmt_watermark_encode(&wm, &b), 0);
	assert_int_equal(ws_store_put(s, TENANT "/wm", b.data, b.len, WS_PUT_OVERWRITE, NULL, NULL), 0);
	ws_buf_free(&b);
	ws_store_close(s);
}

static int ls_cb(const struct ws_tenant_info *info, void *arg)
{
	*(struct ws_tenant_info *)arg = *info;
	return 0;
}

/* A watermark from before salts: restarted because it cannot be checked. */
static void test_restarted_legacy_watermark(void **state)
{
	struct wt_env e;
	struct ws_outcome o;
	struct ws_stream *st;
	struct ws_tenant_info info;
	struct walhdr h;
	(void)state;

	wt_env_init(&e, "stream_legacy", 0);
	wt_write_txn(e.w, 4, 1000);
	st = stream_open(&e);
	tail_expect(st, &o, WS_OUTCOME_STREAMED);
	wt_write_txn(e.w, 2, 1000);
	tail_expect(st, &o, WS_OUTCOME_STREAMED);
	ws_stream_close(st);
	h = wal_header(&e);

	rewrite_wm_legacy(&e);
	memset(&info, 0, sizeof(info));
	assert_int_equal(ws_list_tenants(e.sink, TENANT, ls_cb, &info), 0);
	assert_true(info.has_watermark);
	assert_false(info.watermark.generation.has_salt);
	/* What a legacy watermark acknowledged is still restorable. */
	assert_int_equal(ws_verify(e.sink, TENANT, NULL, NULL), 0);
	assert_restore_equals_source(&e);

	/* Same live WAL, same sequence: only the missing salt forces a restart. */
	wt_write_txn(e.w, 1, 50);
	st = stream_open(&e);
	tail_expect(st, &o, WS_OUTCOME_RESTARTED);
	assert_false(o.u.restarted.previous_generation.has_salt);
	assert_int_equal(o.u.restarted.previous_generation.salt1, 0);
	assert_int_equal(o.u.restarted.previous_generation.salt2, 0);
	assert_int_equal(o.u.restarted.previous_generation.checkpoint_seq, h.seq);
	assert_true(o.u.restarted.new_generation.has_salt);
	assert_int_equal(o.u.restarted.new_generation.checkpoint_seq, h.seq);
	assert_int_equal(o.u.restarted.new_generation.salt1, h.salt1);
	assert_int_equal(o.u.restarted.new_generation.salt2, h.salt2);
	assert_int_equal(o.u.restarted.first_frame, 1);
	assert_int_equal(o.u.restarted.last_frame, wal_frames(&e));
	check_rpo_bp_present(&o, &o.u.restarted.backpressure, &o.u.restarted.rpo);
	assert_restore_equals_source(&e);
	assert_int_equal(ws_list_tenants(e.sink, TENANT, ls_cb, &info), 0);
	assert_true(info.watermark.generation.has_salt);
	ws_stream_close(st);
	wt_env_free(&e);
}

/*
 * A frame whose header is fine but whose page fails SQLite's checksum chain,
 * with commits after it: SQLite's own recovery ends the WAL at the last
 * commit before it, and so must walship. Batches are first split by frame
 * headers and verified on the upload side; this is the case where that
 * verification fails and the tail starts over checking every frame itself.
 */
static void test_bad_checksum_mid_wal_ends_chain(void **state)
{
	struct wt_env e;
	struct ws_outcome o;
	struct ws_stream *st;
	struct ws_stream_config c;
	int64_t rows_a = 0, rr = 0;
	(void)state;

	wt_env_init(&e, "stream_badck", 0);
	wt_write_txn(e.w, 30, 500);
	uint64_t frames_a = wal_frames(&e);
	uint64_t hash_a = wt_content_hash(e.w, &rows_a);
	wt_write_txn(e.w, 30, 500);
	wt_write_txn(e.w, 30, 500);
	assert_true(wal_frames(&e) > frames_a + 2);
	/* Flip one byte in the page of the first frame after txn A. */
	{
		size_t len = 0;
		uint8_t *wal = wt_read_file(e.wal, &len);
		uint64_t off = 32 + frames_a * (24 + (uint64_t)e.page_size) + 24 + 100;
		assert_non_null(wal);
		assert_true(off < len);
		wal[off] ^= 0x5a;
		int fd = open(e.wal, O_WRONLY);
		assert_true(fd >= 0);
		assert_int_equal(pwrite(fd, wal + off, 1, (off_t)off), 1);
		close(fd);
		free(wal);
	}
	c = cfg_default(&e);
	c.batch_bytes_max = 80u << 10; /* several batches, the bad one in the middle */
	st = stream_open_cfg(&e, NULL, &c);
	wt_tail_ok(st, &o);
	assert_true(o.kind == WS_OUTCOME_STREAMED || o.kind == WS_OUTCOME_RESTARTED);
	uint64_t last = o.kind == WS_OUTCOME_STREAMED ? o.u.streamed.last_frame : o.u.restarted.last_frame;
	assert_int_equal(last, frames_a);
	{
		char *out = wt_path(e.out_dir, "badck.db");
		assert_int_equal(ws_restore(e.sink, TENANT, NULL, out), 0);
		assert_true(wt_file_hash(out, &rr) == hash_a);
		assert_int_equal(rr, rows_a);
		free(out);
	}
	assert_int_equal(ws_verify(e.sink, TENANT, NULL, NULL), 0);
	ws_stream_close(st);
	wt_env_free(&e);
}

/* With the stream open, the engine's WAL checkpoint lets the writer restart
 * the WAL; the next generation continues the stream (NEXT_GEN). */
static void test_restarted_next_gen_open_stream(void **state)
{
	struct wt_env e;
	struct ws_outcome o;
	struct ws_stream *st;
	struct ws_stream_config c;
	struct walhdr h1, h2;
	char res[64];
	(void)state;

	wt_env_init(&e, "stream_nextgen", 0);
	wt_write_txn(e.w, 6, 1500);
	c = cfg_default(&e);
	c.wal_checkpoint_bytes = 1;
	st = stream_open_cfg(&e, NULL, &c);
	tail_expect(st, &o, WS_OUTCOME_STREAMED);
	h1 = wal_header(&e);
	assert_int_equal(ws_stream_wal_checkpoints(st), 0);

	/* Everything is shipped and the WAL is over 1 byte: the engine runs a
	 * WAL checkpoint on this call. */
	tail_expect(st, &o, WS_OUTCOME_EMPTY);
	assert_int_equal(ws_stream_wal_checkpoints(st), 1);

	/* The application's own TRUNCATE now completes. */
	wt_query1(e.w, "PRAGMA wal_checkpoint(TRUNCATE)", res);
	assert_string_equal(res, "0"); /* not busy */
	assert_int_equal(wal_size(&e), 0);
	tail_expect(st, &o, WS_OUTCOME_EMPTY);

	wt_write_txn(e.w, 3, 700);
	h2 = wal_header(&e);
	assert_int_equal(h2.seq, h1.seq + 1);
	tail_expect(st, &o, WS_OUTCOME_RESTARTED);
	assert_true(o.u.restarted.previous_generation.has_salt);
	assert_int_equal(o.u.restarted.previous_generation.checkpoint_seq, h1.seq);
	assert_int_equal(o.u.restarted.previous_generation.salt1, h1.salt1);
	assert_int_equal(o.u.restarted.previous_generation.salt2, h1.salt2);
	assert_int_equal(o.u.restarted.new_generation.checkpoint_seq, h2.seq);
	assert_int_equal(o.u.restarted.new_generation.salt1, h2.salt1);
	assert_int_equal(o.u.restarted.new_generation.salt2, h2.salt2);
	assert_int_equal(o.u.restarted.first_frame, 1);
	assert_int_equal(o.u.restarted.last_frame, wal_frames(&e));
	assert_int_equal(o.u.restarted.frame_count, wal_frames(&e));
	check_rpo_bp_present(&o, &o.u.restarted.backpressure, &o.u.restarted.rpo);
	assert_restore_equals_source(&e);

	/* More rounds without the application's TRUNCATE: the engine's
	 * checkpoint alone lets the writer's next write restart the WAL. */
	for (int round = 0; round < 4; round++) {
		struct walhdr before = wal_header(&e);
		int64_t rows_before;
		uint64_t h_before = wt_content_hash(e.w, &rows_before);
		tail_expect(st, &o, WS_OUTCOME_EMPTY); /* checkpoints */
		wt_write_txn(e.w, 2 + round, 3000); /* one commit, several frames */
		h2 = wal_header(&e);
		assert_int_equal(h2.seq, before.seq + 1);
		tail_expect(st, &o, WS_OUTCOME_RESTARTED);
		assert_int_equal(o.u.restarted.previous_generation.checkpoint_seq, before.seq);
		assert_int_equal(o.u.restarted.new_generation.checkpoint_seq, h2.seq);
		assert_int_equal(o.u.restarted.first_frame, 1);
		assert_restore_equals_source(&e);
		/* A point inside the newest generation. */
		{
			struct ws_restore_opts ro = { .frame = o.u.restarted.last_frame };
			int64_t rs, rr;
			uint64_t hs = wt_content_hash(e.w, &rs);
			assert_true(restore_hash_opts(&e, &ro, &rr) == hs);
			assert_int_equal(rr, rs);
			/* Frame 1 of the new generation is not a commit: the
			 * state is the one the generation started from, never a
			 * later one. */
			assert_true(o.u.restarted.last_frame > 1);
			ro.frame = 1;
			assert_true(restore_hash_opts(&e, &ro, &rr) == h_before);
			assert_int_equal(rr, rows_before);
		}
	}
	assert_int_equal(ws_verify(e.sink, TENANT, NULL, NULL), 0);
	ws_stream_close(st);
	wt_env_free(&e);
}

/* An application TRUNCATE while the stream holds its mark cannot discard
 * unshipped frames: it reports busy, and everything is shipped next tail. */
static void test_app_truncate_cannot_skip_frames(void **state)
{
	struct wt_env e;
	struct ws_outcome o;
	struct ws_stream *st;
	uint64_t seed = 7;
	(void)state;

	wt_env_init(&e, "stream_trunc", 0);
	wt_exec(e.w, "PRAGMA wal_autocheckpoint=20");
	sqlite3_busy_timeout(e.w, 50);
	wt_write_txn(e.w, 2, 100);
	st = stream_open(&e);
	tail_expect(st, &o, WS_OUTCOME_STREAMED);
	for (int i = 0; i < 40; i++) {
		uint64_t r = wt_rand(&seed);
		wt_write_txn(e.w, 1 + (int)(r % 5), 100 + (int)(r % 3000));
		if (r % 4 == 0) {
			/* Busy or partial is fine; losing frames is not. */
			sqlite3_exec(e.w, "PRAGMA wal_checkpoint(TRUNCATE)", NULL, NULL, NULL);
		}
		if (r % 3 == 0) {
			wt_tail_ok(st, &o);
			assert_true(o.kind == WS_OUTCOME_STREAMED || o.kind == WS_OUTCOME_RESTARTED ||
				    o.kind == WS_OUTCOME_EMPTY);
		}
	}
	wt_tail_ok(st, &o);
	assert_restore_equals_source(&e);
	assert_int_equal(ws_verify(e.sink, TENANT, NULL, NULL), 0);
	ws_stream_close(st);
	wt_env_free(&e);
}

/* ---- Fenced ----------------------------------------------------------------- */

static struct ws_stream *owner(struct wt_env *e, struct ws_sink *sink, uint64_t epoch, uint64_t pg)
{
	struct ws_stream_config c = cfg_default(e);
	c.epoch = epoch;
	c.pointer_generation = pg;
	return stream_open_cfg(e, sink, &c);
}

static void expect_fenced(struct wt_env *e, struct ws_stream *st, struct ws_sink *sink, uint64_t cur_e,
			  uint64_t our_e, uint64_t cur_pg, uint64_t our_pg)
{
	struct ws_outcome o;
	struct ws_sink_stats a, b;
	char *before = wt_dir_digest(e->sink_dir);
	char *after;
	stats(sink, &a);
	tail_expect(st, &o, WS_OUTCOME_FENCED);
	stats(sink, &b);
	after = wt_dir_digest(e->sink_dir);
	assert_string_equal(before, after);
	assert_int_equal(b.puts, a.puts);
	assert_int_equal(b.deletes, a.deletes);
	assert_int_equal(o.u.fenced.current_epoch, cur_e);
	assert_int_equal(o.u.fenced.our_epoch, our_e);
	assert_int_equal(o.u.fenced.current_pointer_generation, cur_pg);
	assert_int_equal(o.u.fenced.our_pointer_generation, our_pg);
	assert_null(ws_outcome_rpo(&o));
	assert_null(ws_outcome_backpressure(&o));
	free(before);
	free(after);
}

static void test_fenced(void **state)
{
	struct wt_env e;
	struct ws_outcome o;
	struct ws_stream *a, *b, *c, *d, *x;
	struct ws_sink *sb;
	struct ws_tenant_info info;
	int err = 0;
	(void)state;

	wt_env_init(&e, "stream_fenced", 0);
	sb = ws_sink_open(e.sink_url, &err);
	assert_non_null(sb);
	wt_write_txn(e.w, 5, 500);
	a = owner(&e, NULL, 2, 1);
	tail_expect(a, &o, WS_OUTCOME_STREAMED);
	uint64_t a_last = o.u.streamed.last_frame;
	wt_write_txn(e.w, 3, 500); /* new frames: a stale owner would have work to do */

	/* A lower epoch, same pointer generation. */
	b = owner(&e, sb, 1, 1);
	expect_fenced(&e, b, sb, 2, 1, 1, 1);
	expect_fenced(&e, b, sb, 2, 1, 1, 1); /* and again: still a pure read */

	/* Same epoch, lower pointer generation. */
	c = owner(&e, sb, 2, 0);
	expect_fenced(&e, c, sb, 2, 2, 1, 0);

	/* A higher epoch with a lower pointer generation still bounces. */
	x = owner(&e, sb, 9, 0);
	expect_fenced(&e, x, sb, 2, 9, 1, 0);
	ws_stream_close(x);

	/* A higher epoch takes over. The live WAL proves itself to be the
	 * generation the old owner's watermark names (sequence, salts and the
	 * checksum of its last frame), so the new owner continues it. */
	d = owner(&e, sb, 3, 1);
	tail_expect(d, &o, WS_OUTCOME_STREAMED);
	assert_true(has_prefix(o.u.streamed.generation_key, TENANT "/e3-p1/"));
	assert_int_equal(o.u.streamed.first_frame, a_last + 1);
	assert_int_equal(o.u.streamed.last_frame, wal_frames(&e));
	assert_restore_equals_source(&e);
	memset(&info, 0, sizeof(info));
	assert_int_equal(ws_list_tenants(e.sink, TENANT, ls_cb, &info), 0);
	assert_int_equal(info.watermark.epoch, 3);
	assert_int_equal(info.watermark.pointer_generation, 1);

	/* The old owner, still open with its cached watermark, finds out on
	 * its next tail that has anything to send. */
	wt_write_txn(e.w, 2, 500);
	expect_fenced(&e, a, e.sink, 3, 2, 1, 1);
	expect_fenced(&e, b, sb, 3, 1, 1, 1);

	/* The new owner keeps streaming. */
	tail_expect(d, &o, WS_OUTCOME_STREAMED);
	assert_int_equal(o.u.streamed.last_frame, wal_frames(&e));
	assert_restore_equals_source(&e);

	/* A move to another cell: same epoch, higher pointer generation. */
	x = owner(&e, sb, 3, 2);
	wt_write_txn(e.w, 1, 100);
	tail_expect(x, &o, WS_OUTCOME_STREAMED);
	assert_true(has_prefix(o.u.streamed.generation_key, TENANT "/e3-p2/"));
	wt_write_txn(e.w, 1, 100);
	expect_fenced(&e, d, e.sink, 3, 3, 2, 1);
	tail_expect(x, &o, WS_OUTCOME_STREAMED);
	assert_restore_equals_source(&e);
	assert_int_equal(ws_verify(e.sink, TENANT, NULL, NULL), 0);

	ws_stream_close(x);
	ws_stream_close(a);
	ws_stream_close(b);
	ws_stream_close(c);
	ws_stream_close(d);
	ws_sink_close(sb);
	wt_env_free(&e);
}

/* ---- Shed and the accessors --------------------------------------------------- */

static void test_outcome_accessors(void **state)
{
	struct ws_outcome o;
	(void)state;

	memset(&o, 0, sizeof(o));
	o.kind = WS_OUTCOME_SHED;
	o.u.shed.checkpoint_seq = 3;
	o.u.shed.first_frame = 10;
	o.u.shed.last_frame = 20;
	o.u.shed.backpressure.policy = WS_POLICY_SHED;
	o.u.shed.backpressure.frames_shed = 11;
	o.u.shed.rpo.watermark_age_ms = 1234;
	o.u.shed.rpo.has_watermark = true;
	assert_ptr_equal(ws_outcome_rpo(&o), &o.u.shed.rpo);
	assert_ptr_equal(ws_outcome_backpressure(&o), &o.u.shed.backpressure);
	assert_int_equal(ws_outcome_backpressure(&o)->frames_shed, 11);
	assert_int_equal(ws_outcome_rpo(&o)->watermark_age_ms, 1234);
	assert_string_equal(ws_outcome_name(WS_OUTCOME_SHED), "shed");

	o.kind = WS_OUTCOME_EMPTY;
	assert_ptr_equal(ws_outcome_rpo(&o), &o.u.empty.rpo);
	assert_null(ws_outcome_backpressure(&o));
	o.kind = WS_OUTCOME_STREAMED;
	assert_ptr_equal(ws_outcome_rpo(&o), &o.u.streamed.rpo);
	assert_ptr_equal(ws_outcome_backpressure(&o), &o.u.streamed.backpressure);
	o.kind = WS_OUTCOME_RESTARTED;
	assert_ptr_equal(ws_outcome_rpo(&o), &o.u.restarted.rpo);
	assert_ptr_equal(ws_outcome_backpressure(&o), &o.u.restarted.backpressure);
	o.kind = WS_OUTCOME_FENCED;
	assert_null(ws_outcome_rpo(&o));
	assert_null(ws_outcome_backpressure(&o));

	assert_string_equal(ws_outcome_name(WS_OUTCOME_EMPTY), "empty");
	assert_string_equal(ws_outcome_name(WS_OUTCOME_STREAMED), "streamed");
	assert_string_equal(ws_outcome_name(WS_OUTCOME_RESTARTED), "restarted");
	assert_string_equal(ws_outcome_name(WS_OUTCOME_FENCED), "fenced");
	assert_string_equal(ws_policy_name(WS_POLICY_BLOCK), "block");
	assert_string_equal(ws_policy_name(WS_POLICY_THROTTLE), "throttle");
	assert_string_equal(ws_policy_name(WS_POLICY_SHED), "shed");
}

/* ---- point in time -------------------------------------------------------------- */

#define PIT_TXNS 24

static void test_point_in_time(void **state)
{
	struct wt_env e;
	struct ws_outcome o;
	struct ws_stream *st;
	struct ws_restore_opts ro;
	uint64_t frame_at[PIT_TXNS], hash_at[PIT_TXNS];
	int64_t rows_at[PIT_TXNS];
	int tail_txn[8];       /* last transaction shipped by tail k */
	int64_t after_ms[8];   /* a time after tail k, before tail k+1 reads */
	int64_t first_read_ms;
	uint64_t first_restorable;
	int tails = 0;
	char *out;
	int rc;
	(void)state;

	wt_env_init(&e, "stream_pit", 0);
	/* Some history before the stream exists: not restorable by frame. */
	wt_write_txn(e.w, 3, 3000);
	wt_write_txn(e.w, 2, 3000);
	uint64_t pre_frames = wal_frames(&e);
	st = stream_open(&e);
	wt_sleep_ms(3);
	first_read_ms = ws_wall_ms();
	wt_sleep_ms(3);
	tail_expect(st, &o, WS_OUTCOME_STREAMED);
	first_restorable = o.u.streamed.last_frame;
	assert_int_equal(first_restorable, pre_frames);
	wt_sleep_ms(3);
	after_ms[tails] = ws_wall_ms();
	tail_txn[tails++] = -1;
	uint64_t h_first = wt_content_hash(e.w, NULL);

	for (int i = 0; i < PIT_TXNS; i++) {
		/* Multi-frame transactions so frames between commits exist. */
		wt_write_txn(e.w, 1 + i % 4, 2500);
		frame_at[i] = wal_frames(&e);
		hash_at[i] = wt_content_hash(e.w, &rows_at[i]);
		if (i % 5 == 4 || i == PIT_TXNS - 1) {
			wt_sleep_ms(3);
			tail_expect(st, &o, WS_OUTCOME_STREAMED);
			assert_int_equal(o.u.streamed.last_frame, frame_at[i]);
			wt_sleep_ms(3);
			after_ms[tails] = ws_wall_ms();
			tail_txn[tails++] = i;
		}
	}

	/* Every commit frame of the generation. */
	for (int i = 0; i < PIT_TXNS; i++) {
		int64_t rows;
		memset(&ro, 0, sizeof(ro));
		ro.frame = frame_at[i];
		assert_true(restore_hash_opts(&e, &ro, &rows) == hash_at[i]);
		assert_int_equal(rows, rows_at[i]);
		/* A frame inside the next transaction: the commit before it. */
		if (i + 1 < PIT_TXNS && frame_at[i + 1] > frame_at[i] + 1) {
			ro.frame = frame_at[i] + 1;
			assert_true(restore_hash_opts(&e, &ro, NULL) == hash_at[i]);
			ro.frame = frame_at[i + 1] - 1;
			assert_true(restore_hash_opts(&e, &ro, NULL) == hash_at[i]);
		}
	}
	/* The first restorable frame is the base's last frame. */
	memset(&ro, 0, sizeof(ro));
	ro.frame = first_restorable;
	assert_true(restore_hash_opts(&e, &ro, NULL) == h_first);

	/* Before it: out of range, and nothing written. */
	out = wt_path(e.out_dir, "range.db");
	for (uint64_t f = 1; f < first_restorable; f++) {
		ro.frame = f;
		rc = ws_restore(e.sink, TENANT, &ro, out);
		assert_int_equal(rc, WS_ERANGE_);
		assert_int_equal(access(out, F_OK), -1);
	}

	/* By time: the state of the tail just before it. */
	for (int k = 0; k < tails; k++) {
		memset(&ro, 0, sizeof(ro));
		ro.time_ms = after_ms[k];
		uint64_t want = tail_txn[k] < 0 ? h_first : hash_at[tail_txn[k]];
		assert_true(restore_hash_opts(&e, &ro, NULL) == want);
	}
	memset(&ro, 0, sizeof(ro));
	ro.time_ms = first_read_ms;
	rc = ws_restore(e.sink, TENANT, &ro, out);
	assert_int_equal(rc, WS_ERANGE_);
	assert_int_equal(access(out, F_OK), -1);

	/* Never overwrite without force; overwrite with it. */
	memset(&ro, 0, sizeof(ro));
	ro.frame = frame_at[0];
	assert_int_equal(ws_restore(e.sink, TENANT, &ro, out), 0);
	assert_true(wt_file_hash(out, NULL) == hash_at[0]);
	memset(&ro, 0, sizeof(ro));
	rc = ws_restore(e.sink, TENANT, &ro, out);
	assert_int_equal(rc, -EEXIST);
	assert_true(wt_file_hash(out, NULL) == hash_at[0]);
	ro.force = true;
	assert_int_equal(ws_restore(e.sink, TENANT, &ro, out), 0);
	assert_true(wt_file_hash(out, NULL) == hash_at[PIT_TXNS - 1]);
	{
		/* Only the published file is left behind. */
		char *listing;
		size_t len = 0;
		char *tmp = wt_path(e.dir, "ls.txt");
		assert_int_equal(wt_sh("ls -A '%s' > '%s'", e.out_dir, tmp), 0);
		listing = (char *)wt_read_file(tmp, &len);
		listing[len] = '\0';
		assert_string_equal(listing, "range.db\n");
		free(listing);
		free(tmp);
	}
	free(out);
	ws_stream_close(st);
	wt_env_free(&e);
}

/*
 * Restore by time must never yield a commit made after the requested time.
 * A writer thread commits continuously (each transaction stamped with the
 * wall clock before it begins) while tails run; the WAL file is reused from
 * the top after the engine's WAL checkpoints, so a scan can meet commits made
 * after the tail started. After each tail, the state restored at its
 * manifest's time may contain only transactions begun at or before it.
 */
#define RACE_TXNS_MAX 200000

struct racer {
	const char *db;
	int stop;          /* __atomic: set by the test thread, read by the racer */
	int64_t *begin_ms;
	int count;
};

static void *racer_main(void *arg)
{
	struct racer *r = arg;
	sqlite3 *db = NULL;
	sqlite3_stmt *s = NULL;
	if (sqlite3_open(r->db, &db) != SQLITE_OK)
		return NULL;
	sqlite3_busy_timeout(db, 5000);
	sqlite3_exec(db, "PRAGMA wal_autocheckpoint=0", NULL, NULL, NULL);
	if (sqlite3_prepare_v2(db, "INSERT INTO t(k, v) VALUES(?, randomblob(64))", -1, &s, NULL) != SQLITE_OK)
		goto out;
	while (!__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE) && r->count < RACE_TXNS_MAX) {
		r->begin_ms[r->count] = ws_wall_ms();
		sqlite3_bind_int64(s, 1, 1000000 + r->count);
		if (sqlite3_step(s) != SQLITE_DONE) {
			sqlite3_reset(s);
			continue; /* busy while the engine holds the write lock: retry */
		}
		sqlite3_reset(s);
		__atomic_store_n(&r->count, r->count + 1, __ATOMIC_RELEASE);
	}
out:
	sqlite3_finalize(s);
	sqlite3_close(db);
	return NULL;
}

/* The manifest at key in e's sink, decoded into m (free with ws_fmt_manifest_free). */
static void manifest_at(const struct wt_env *e, const char *key, struct ws_fmt_manifest *m)
{
	int err = 0;
	struct ws_store *s = ws_store_file_open(e->sink_dir, &err);
	struct ws_buf b;
	assert_non_null(s);
	ws_buf_init(&b, 0);
	assert_int_equal(ws_store_get(s, key, 0, UINT64_MAX, &b, NULL), 0);
	assert_int_equal(ws_fmt_manifest_decode(b.data, b.len, m), 0);
	ws_buf_free(&b);
	ws_store_close(s);
}

static int64_t manifest_time_ms(const struct wt_env *e, const char *key)
{
	struct ws_fmt_manifest m;
	int64_t t;
	manifest_at(e, key, &m);
	t = m.time_ms;
	ws_fmt_manifest_free(&m);
	return t;
}

static void test_time_never_after_commit(void **state)
{
	struct wt_env e;
	struct ws_outcome o;
	struct ws_stream *st;
	struct ws_stream_config c;
	struct racer r;
	pthread_t th;
	unsigned checked = 0;
	(void)state;

	wt_env_init(&e, "stream_race", 0);
	wt_write_txn(e.w, 300, 3000);
	c = cfg_default(&e);
	c.wal_checkpoint_bytes = 256u << 10;
	c.batch_bytes_max = 128u << 10; /* an fsynced upload every 31 frames: a long scan */
	st = stream_open_cfg(&e, NULL, &c);
	tail_expect(st, &o, WS_OUTCOME_STREAMED);
	tail_expect(st, &o, WS_OUTCOME_EMPTY); /* engine WAL checkpoint */
	assert_int_equal(ws_stream_wal_checkpoints(st), 1);

	memset(&r, 0, sizeof(r));
	r.db = e.db;
	r.begin_ms = calloc(RACE_TXNS_MAX, sizeof(*r.begin_ms));
	assert_non_null(r.begin_ms);
	assert_int_equal(pthread_create(&th, NULL, racer_main, &r), 0);
	/* 16 tails; more while fewer than 8 restores contained a racer's row
	 * (on a loaded machine the racer may not be scheduled between tails). */
	for (int i = 0; i < 16 || (checked < 8 && i < 400); i++) {
		wt_sleep_ms(1 + (unsigned)i % 3);
		wt_tail_ok(st, &o);
		if (o.kind != WS_OUTCOME_STREAMED && o.kind != WS_OUTCOME_RESTARTED)
			continue;
		const char *key = o.kind == WS_OUTCOME_STREAMED ? o.u.streamed.generation_key
							       : o.u.restarted.generation_key;
		int64_t t = manifest_time_ms(&e, key);
		struct ws_restore_opts ro = { .time_ms = t };
		char *out = wt_path(e.out_dir, "race.db");
		sqlite3 *db;
		char res[64];
		assert_int_equal(ws_restore(e.sink, TENANT, &ro, out), 0);
		assert_int_equal(sqlite3_open_v2(out, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
		wt_query1(db, "SELECT coalesce(max(k), 0) FROM t WHERE k >= 1000000", res);
		sqlite3_close(db);
		unlink(out);
		free(out);
		long long k = strtoll(res, NULL, 10);
		if (k >= 1000000) {
			int64_t began = r.begin_ms[k - 1000000];
			if (began > t)
				fail_msg("tail %d: restore at %lld ms contains a transaction begun at %lld ms",
					 i, (long long)t, (long long)began);
			checked++;
			if (getenv("WS_TEST_VERBOSE"))
				fprintf(stderr, "tail %d %s k=%lld began-t=%lld wal=%llu count=%d\n", i,
					ws_outcome_name(o.kind), k - 1000000, (long long)(began - t),
					(unsigned long long)wal_size(&e), r.count);
		}
	}
	__atomic_store_n(&r.stop, 1, __ATOMIC_RELEASE); /* pairs with the racer's acquire load */
	pthread_join(th, NULL);
	assert_true(checked >= 8);
	wt_tail_ok(st, &o);
	assert_restore_equals_source(&e);
	free(r.begin_ms);
	ws_stream_close(st);
	wt_env_free(&e);
}

/* ---- large and uncommitted transactions -------------------------------------------- */

static void test_large_transactions(void **state)
{
	struct wt_env e;
	struct ws_outcome o;
	struct ws_stream *st;
	struct ws_stream_config c;
	char res[64];
	(void)state;

	wt_env_init(&e, "stream_large", 0);
	/* A database file bigger than one read buffer: several snapshot parts. */
	wt_write_txn(e.w, 500, 3000);
	wt_query1(e.w, "PRAGMA wal_checkpoint(TRUNCATE)", res);
	assert_string_equal(res, "0");
	wt_write_txn(e.w, 1, 10);
	c = cfg_default(&e);
	c.batch_bytes_max = 128u << 10;
	st = stream_open_cfg(&e, NULL, &c);
	tail_expect(st, &o, WS_OUTCOME_STREAMED);
	assert_true(count_objects(e.sink_dir, "-path '*/s*/*'") >= 8); /* snapshot parts */
	assert_restore_equals_source(&e);

	/* A 2 MB transaction: one commit spread over many batches. */
	unsigned batches_before = count_objects(e.sink_dir, "-name 'b*'");
	uint64_t prev_last = o.u.streamed.last_frame;
	wt_write_txn(e.w, 700, 3000);
	tail_expect(st, &o, WS_OUTCOME_STREAMED);
	assert_int_equal(o.u.streamed.first_frame, prev_last + 1);
	assert_int_equal(o.u.streamed.last_frame, wal_frames(&e));
	assert_true(o.u.streamed.frame_count > 500);
	assert_true(o.u.streamed.backpressure.spill_high_water <= c.batch_bytes_max);
	assert_true(count_objects(e.sink_dir, "-name 'b*'") >= batches_before + 16);
	assert_restore_equals_source(&e);

	/* Two more, shipped together. */
	wt_write_txn(e.w, 300, 3000);
	wt_write_txn(e.w, 400, 2000);
	tail_expect(st, &o, WS_OUTCOME_STREAMED);
	assert_int_equal(o.u.streamed.last_frame, wal_frames(&e));
	assert_restore_equals_source(&e);
	assert_int_equal(ws_verify(e.sink, TENANT, NULL, NULL), 0);

	/* The database shrinks: the restored file has exactly the pages the
	 * last commit says, as SQLite would leave it. */
	wt_exec(e.w, "DELETE FROM t WHERE k > 50");
	wt_exec(e.w, "VACUUM");
	tail_expect(st, &o, WS_OUTCOME_STREAMED);
	assert_int_equal(o.u.streamed.last_frame, wal_frames(&e));
	assert_restore_equals_source(&e);
	{
		char *out = wt_path(e.out_dir, "vac.db");
		struct stat sb;
		wt_query1(e.w, "PRAGMA page_count", res);
		assert_int_equal(ws_restore(e.sink, TENANT, NULL, out), 0);
		assert_int_equal(stat(out, &sb), 0);
		assert_int_equal((uint64_t)sb.st_size, strtoull(res, NULL, 10) * 4096u);
		unlink(out);
		free(out);
	}
	ws_stream_close(st);
	wt_env_free(&e);
}

static void test_uncommitted_not_shipped(void **state)
{
	struct wt_env e;
	struct ws_outcome o;
	struct ws_stream *st;
	struct ws_stream_config c;
	sqlite3 *w2;
	uint64_t committed_frames, h_committed;
	int64_t rows_committed;
	(void)state;

	wt_env_init(&e, "stream_uncommitted", 0);
	wt_write_txn(e.w, 5, 1000);
	c = cfg_default(&e);
	c.batch_bytes_max = 128u << 10;
	st = stream_open_cfg(&e, NULL, &c);
	tail_expect(st, &o, WS_OUTCOME_STREAMED);

	wt_write_txn(e.w, 3, 1000); /* committed, not shipped yet */
	committed_frames = wal_frames(&e);
	h_committed = wt_content_hash(e.w, &rows_committed);

	/* A second writer with a tiny cache spills its open transaction into
	 * the WAL as uncommitted frames. */
	assert_int_equal(sqlite3_open(e.db, &w2), SQLITE_OK);
	wt_exec(w2, "PRAGMA cache_size=5");
	wt_exec(w2, "BEGIN");
	for (int i = 0; i < 300; i++)
		wt_exec(w2, "INSERT INTO t(v) VALUES(randomblob(3000))");
	assert_true(wal_frames(&e) > committed_frames + 60); /* the spill is really there */

	tail_expect(st, &o, WS_OUTCOME_STREAMED);
	assert_int_equal(o.u.streamed.last_frame, committed_frames);
	{
		int64_t rr;
		uint64_t hr = restore_hash_opts(&e, NULL, &rr);
		assert_int_equal(rr, rows_committed);
		assert_true(hr == h_committed);
	}
	/* Only the uncommitted frames are there: nothing new to name. */
	wt_tail_ok(st, &o);
	assert_int_equal(o.kind, WS_OUTCOME_EMPTY);
	assert_int_equal(o.u.empty.watermark.last_frame, committed_frames);

	wt_exec(w2, "ROLLBACK");
	sqlite3_close(w2);
	wt_tail_ok(st, &o);
	assert_int_equal(o.kind, WS_OUTCOME_EMPTY);
	{
		int64_t rr;
		assert_true(restore_hash_opts(&e, NULL, &rr) == h_committed);
		assert_int_equal(rr, rows_committed);
	}

	/* The writer overwrites the rolled-back frames; the stream follows. */
	wt_write_txn(e.w, 2, 1000);
	tail_expect(st, &o, WS_OUTCOME_STREAMED);
	assert_int_equal(o.u.streamed.first_frame, committed_frames + 1);
	assert_restore_equals_source(&e);
	assert_int_equal(ws_verify(e.sink, TENANT, NULL, NULL), 0);
	ws_stream_close(st);
	wt_env_free(&e);
}

/* First contact with a WAL that holds only another connection's spilled,
 * uncommitted frames: the base is the database file, no frame of it. */
static void test_uncommitted_on_first_contact(void **state)
{
	struct wt_env e;
	struct ws_outcome o;
	struct ws_stream *st;
	sqlite3 *w2;
	char res[64];
	uint64_t h;
	int64_t rows, rr;
	(void)state;

	wt_env_init(&e, "stream_uncommitted0", 0);
	wt_write_txn(e.w, 20, 1000);
	wt_query1(e.w, "PRAGMA wal_checkpoint(TRUNCATE)", res);
	assert_string_equal(res, "0");
	assert_int_equal(wal_size(&e), 0);
	h = wt_content_hash(e.w, &rows);

	assert_int_equal(sqlite3_open(e.db, &w2), SQLITE_OK);
	wt_exec(w2, "PRAGMA cache_size=5");
	wt_exec(w2, "BEGIN");
	for (int i = 0; i < 200; i++)
		wt_exec(w2, "INSERT INTO t(v) VALUES(randomblob(3000))");
	assert_true(wal_frames(&e) > 50);

	st = stream_open(&e);
	tail_expect(st, &o, WS_OUTCOME_STREAMED);
	assert_int_equal(o.u.streamed.last_frame, 0);
	assert_int_equal(o.u.streamed.frame_count, 0);
	assert_true(restore_hash_opts(&e, NULL, &rr) == h);
	assert_int_equal(rr, rows);

	wt_exec(w2, "ROLLBACK");
	sqlite3_close(w2);
	wt_tail_ok(st, &o);
	assert_int_equal(o.kind, WS_OUTCOME_EMPTY);
	wt_write_txn(e.w, 3, 1000);
	wt_tail_ok(st, &o);
	assert_true(o.kind == WS_OUTCOME_STREAMED || o.kind == WS_OUTCOME_RESTARTED);
	assert_restore_equals_source(&e);
	assert_int_equal(ws_verify(e.sink, TENANT, NULL, NULL), 0);
	ws_stream_close(st);
	wt_env_free(&e);
}

/* ---- page sizes ------------------------------------------------------------------- */

static void test_page_sizes(void **state)
{
	(void)state;
	for (unsigned ps = 512; ps <= 65536; ps *= 2) {
		struct wt_env e;
		struct ws_outcome o;
		struct ws_stream *st;
		char res[64];
		struct ws_tenant_info info;

		wt_env_init(&e, "stream_ps", ps);
		wt_query1(e.w, "PRAGMA page_size", res);
		assert_int_equal(strtoul(res, NULL, 10), (unsigned long)ps);
		/* Part in the database file (snapshot), part in the WAL. */
		wt_write_txn(e.w, 40, 700);
		wt_query1(e.w, "PRAGMA wal_checkpoint(TRUNCATE)", res);
		assert_string_equal(res, "0");
		wt_write_txn(e.w, 30, 900);
		st = stream_open(&e);
		tail_expect(st, &o, WS_OUTCOME_STREAMED);
		assert_int_equal(o.u.streamed.last_frame, wal_frames(&e));
		wt_write_txn(e.w, 20, (int)ps + 100); /* overflow pages */
		wt_write_txn(e.w, 1, 1);
		wt_exec(e.w, "DELETE FROM t WHERE k % 3 = 0");
		tail_expect(st, &o, WS_OUTCOME_STREAMED);
		assert_int_equal(o.u.streamed.last_frame, wal_frames(&e));
		memset(&info, 0, sizeof(info));
		assert_int_equal(ws_list_tenants(e.sink, TENANT, ls_cb, &info), 0);
		assert_int_equal(info.page_size, ps);
		assert_restore_equals_source(&e);
		{
			/* The restored file keeps the page size. */
			char *out = wt_path(e.out_dir, "ps.db");
			sqlite3 *db;
			assert_int_equal(ws_restore(e.sink, TENANT, NULL, out), 0);
			assert_int_equal(sqlite3_open_v2(out, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
			wt_query1(db, "PRAGMA page_size", res);
			assert_int_equal(strtoul(res, NULL, 10), (unsigned long)ps);
			sqlite3_close(db);
			free(out);
		}
		assert_int_equal(ws_verify(e.sink, TENANT, NULL, NULL), 0);
		ws_stream_close(st);
		wt_env_free(&e);
	}
}

/*
 * Two streams sharing a shard's reader, pipe and per-call arrays, as the
 * engine's tenants do. The arrays start small and grow: the first tenant's
 * re-base needs 125 snapshot parts at the smallest batch (16 pages of 4 KiB
 * each; a database needing more than 4096 parts could never re-base
 * before), then the second tenant's call must use the arrays where the
 * growth moved them (ASan catches a stale one), and both restore equal.
 */
/* A shard's reader, threaded pipe and per-call arrays, as the engine makes them. */
struct shard_env {
	struct ws_reader *rd;
	struct ws_tail_work work;
	struct ws_pipe pipe;
	struct ws_store *up;
	struct ws_stream_shared sh;
};

static void shard_env_init_slot(struct shard_env *x, struct wt_env *e, size_t slot)
{
	const uint32_t nslots = 8;
	const size_t small = (size_t)128 << 10;
	int err = 0;
	memset(x, 0, sizeof(*x));
	x->rd = ws_reader_open(small + nslots * slot, 8, 0, &err);
	assert_non_null(x->rd);
	assert_int_equal(ws_tail_work_init(&x->work), 0);
	x->up = ws_store_file_open(e->sink_dir, &err);
	assert_non_null(x->up);
	assert_int_equal(ws_pipe_init(&x->pipe, ws_reader_buf(x->rd) + small, slot, nslots, x->up, 2, true, true), 0);
	x->sh.reader = x->rd;
	x->sh.small_off = 0;
	x->sh.small_bytes = small;
	x->sh.ring_off = small;
	x->sh.pipe = &x->pipe;
	x->sh.work = &x->work;
}

static void shard_env_init(struct shard_env *x, struct wt_env *e)
{
	shard_env_init_slot(x, e, 65536 + 24); /* the smallest batch_bytes_max */
}

static void shard_env_free(struct shard_env *x)
{
	ws_pipe_destroy(&x->pipe);
	ws_tail_work_free(&x->work);
	ws_store_close(x->up);
	ws_reader_close(x->rd);
}

/*
 * A slot's results are read (on_done) after the upload thread released
 * it: the event channel takes its Changed slices from the slot's frames
 * there. The ring gives a new slot the buffer released last, so the
 * results of every released slot must be read before a slot is given a
 * buffer again. Here all four slots are released at once (the first put
 * paused until the ring is full) before the fifth is reserved: each
 * slot's on_done must still find its own bytes. Before the fix the fifth
 * slot took slot 3's buffer into slot 0's place first, and slot 0's
 * results were read from slot 3's bytes.
 */
struct results_check {
	struct ws_pipe *pipe;
	unsigned done, wrong;
};

static void results_check_done(void *arg, uint32_t idx, const struct ws_pipe_desc *d)
{
	struct results_check *c = arg;
	const uint8_t *b = ws_pipe_slot(c->pipe, idx);
	(void)d;
	c->done++;
	for (size_t i = 0; i < 4096; i++)
		if (b[i] != (uint8_t)(0xa0 + idx)) {
			print_error("slot %u: byte %zu is %02x, not %02x\n", idx, i, b[i], 0xa0 + idx);
			c->wrong++;
			return;
		}
}

static void test_pipe_results_before_reuse(void **state)
{
	struct wt_gate g = WT_GATE_INIT;
	struct ws_pipe pipe;
	struct results_check c = { .pipe = &pipe };
	const uint32_t nslots = 4;
	const size_t slot = 4096;
	char *dir = wt_tmpdir("pipe-results");
	int err = 0;
	uint32_t idx;
	(void)state;

	uint8_t *mem = aligned_alloc(4096, nslots * slot);
	assert_non_null(mem);
	struct ws_store *up = ws_store_file_open(dir, &err);
	assert_non_null(up);
	assert_int_equal(ws_pipe_init(&pipe, mem, slot, nslots, up, 4, true, false), 0);
	pipe.arg = &c;
	pipe.on_done = results_check_done;
	assert_int_equal(ws_fault_add("file.put.before_publish", 1, WS_FAULT_PAUSE, wt_gate_wait, &g), 0);
	for (uint32_t k = 0; k < nslots + 1; k++) {
		if (k == nslots) {
			/* The ring is full: let the uploads go, wait until all four are released. */
			wt_gate_open(&g);
			for (int t = 0; t < 10000 && ws_ring_used(&pipe.ring) > 0; t++)
				usleep(1000);
			assert_int_equal(ws_ring_used(&pipe.ring), 0);
			assert_int_equal(c.done, 0); /* nothing collected before this reserve */
		}
		assert_int_equal(ws_pipe_reserve(&pipe, -1, &idx), 0);
		assert_int_equal(idx, k);
		if (k == 0)
			assert_int_equal(c.done, 0);
		struct ws_pipe_desc *d = ws_pipe_desc(&pipe, idx);
		memset(d, 0, sizeof(*d));
		snprintf(d->key, sizeof(d->key), "results/%u", k);
		d->payload_len = slot;
		d->policy = WS_POLICY_BLOCK;
		memset(ws_pipe_slot(&pipe, idx), (int)(0xa0 + k), slot);
		if (k == 0) {
			ws_pipe_publish(&pipe);
			wt_gate_until_paused(&g); /* the first put waits: nothing is released */
		} else if (k < nslots) {
			ws_pipe_publish(&pipe);
		}
	}
	assert_int_equal(c.done, nslots);
	assert_int_equal(c.wrong, 0);
	ws_fault_disarm();
	ws_pipe_destroy(&pipe);
	ws_store_close(up);
	free(mem);
	wt_rmrf(dir);
	free(dir);
}

/*
 * Two streams sharing a shard's reader, pipe and per-call arrays, as the
 * engine's tenants do. The arrays start small and grow: the first tenant's
 * re-base needs 125 snapshot parts at the smallest batch (16 pages of 4 KiB
 * each; a database needing more than 4096 parts could never re-base
 * before), then the second tenant's call must use the arrays where the
 * growth moved them (under ASan a stale one is a use after free), and both
 * restore equal.
 */
/* Sets *flag a little after it starts: an engine beginning to stop. */
struct stop_later {
	uint32_t flag;
	unsigned after_ms;
};

static void *stop_later_main(void *arg)
{
	struct stop_later *s = arg;
	wt_sleep_ms(s->after_ms);
	__atomic_store_n(&s->flag, 1, __ATOMIC_RELAXED);
	return NULL;
}

/*
 * A watermark write that waits out key_write_interval_ms (15 s here, after
 * the stream's first write) goes as soon as the engine begins to stop, not
 * when the interval ends: the stop is not held up by the wait. What it
 * ships is acknowledged, and restores.
 */
static void test_key_wait_ends_at_stop(void **state)
{
	struct wt_env e;
	struct ws_outcome o;
	struct ws_stream *st;
	struct stop_later sl = { 0, 300 };
	pthread_t th;
	(void)state;

	wt_env_init(&e, "stream_key_wait_stop", 0);
	wt_write_txn(e.w, 3, 300);
	st = stream_open(&e);
	ws_stream_set_tail_bound(st, 0, 15000);
	ws_stream_set_key_wait(st, true, 0, &sl.flag);
	tail_expect(st, &o, WS_OUTCOME_STREAMED); /* the first write: nothing to wait for */
	wt_write_txn(e.w, 2, 400);
	assert_int_equal(pthread_create(&th, NULL, stop_later_main, &sl), 0);
	const uint64_t t0 = ws_mono_ms();
	tail_expect(st, &o, WS_OUTCOME_STREAMED);
	const uint64_t took = ws_mono_ms() - t0;
	pthread_join(th, NULL);
	if (took < 250 || took > 5000)
		fail_msg("the write waited %" PRIu64 " ms: expected it to wait until the stop (300 ms), not the 15 s "
			 "interval", took);
	assert_int_equal(o.u.streamed.last_frame, wal_frames(&e));
	assert_restore_equals_source(&e);
	ws_stream_close(st);
	wt_env_free(&e);
}

static void test_shared_work_grows(void **state)
{
	struct wt_env e;
	struct shard_env x;
	struct ws_stream_config ca, cb;
	struct ws_stream *a, *b;
	struct ws_outcome o;
	sqlite3 *wb;
	char *dbb;
	int err = 0;
	(void)state;

	wt_env_init(&e, "shared-work", 0);
	wt_write_txn(e.w, 2000, 3000); /* ~2,000 pages: 125 parts of 16 */
	{
		char res[64];
		wt_query1(e.w, "PRAGMA wal_checkpoint(TRUNCATE)", res); /* all of it in the database file */
		assert_string_equal(res, "0");
	}
	dbb = wt_path(e.dir, "b.db");
	wb = wt_writer_open(dbb, 0);
	wt_write_txn(wb, 50, 100);
	shard_env_init(&x, &e);
	memset(&ca, 0, sizeof(ca));
	ca.tenant = "big";
	ca.db_path = e.db;
	ca.epoch = ca.pointer_generation = 1;
	cb = ca;
	cb.tenant = "small";
	cb.db_path = dbb;
	a = ws_stream_open_shared(e.sink, &ca, &x.sh, &err);
	assert_non_null(a);
	b = ws_stream_open_shared(e.sink, &cb, &x.sh, &err);
	assert_non_null(b);
	wt_tail_ok(b, &o);            /* b takes the arrays at their first size */
	wt_tail_ok(a, &o);            /* a grows them */
	assert_true(x.work.snaps_cap > 64 && x.work.parts_cap > 64);
	wt_write_txn(wb, 30, 100);
	wt_tail_ok(b, &o);            /* b again, after the growth */
	assert_int_equal(o.kind, WS_OUTCOME_STREAMED);
	wt_write_txn(e.w, 10, 100);
	wt_tail_ok(a, &o);
	ws_stream_close(a);
	ws_stream_close(b);
	shard_env_free(&x);
	assert_true(wt_restore_hash(&e, "big", NULL, NULL) == wt_content_hash(e.w, NULL));
	assert_true(wt_restore_hash(&e, "small", NULL, NULL) == wt_content_hash(wb, NULL));
	sqlite3_close(wb);
	free(dbb);
	wt_env_free(&e);
}

/* A `block` stream whose next call takes the application's write lock: two
 * good calls shipped, the WAL past wal_checkpoint_bytes (4096), and more
 * written since. */
static struct ws_stream *open_locking_stream(struct wt_env *e, struct shard_env *x)
{
	struct ws_stream_config cfg;
	struct ws_stream *st;
	struct ws_outcome o;
	int err = 0;

	wt_write_txn(e->w, 50, 200);
	shard_env_init(x, e);
	cfg = cfg_default(e);
	cfg.policy = WS_POLICY_BLOCK;
	cfg.wal_checkpoint_bytes = 4096; /* every call after a good one takes the write lock */
	cfg.inline_batch_bytes_max = UINT64_MAX; /* batch uploads under the lock are the subject */
	st = ws_stream_open_shared(e->sink, &cfg, &x->sh, &err);
	assert_non_null(st);
	wt_tail_ok(st, &o);
	wt_write_txn(e->w, 5, 200);
	wt_tail_ok(st, &o); /* locked: checkpoints, and the next write restarts the WAL */
	wt_write_txn(e->w, 5, 200);
	/* The new generation: not locked (the live WAL is not the one the
	 * watermark names, however long that one was). */
	wt_tail_ok(st, &o);
	assert_int_equal(o.kind, WS_OUTCOME_RESTARTED);
	wt_write_txn(e->w, 5, 200);
	return st;
}

/*
 * A call that holds the application's write lock (walship's own WAL
 * checkpoint, the WAL past wal_checkpoint_bytes) does not wait out a
 * struggling sink under `block`: the upload fails (injected once, as the
 * first of an outage), the call fails with nothing acknowledged and lets the
 * lock go, so the application's writers never wait on the sink. The next
 * call does not take the lock (the last one failed) and ships under
 * `block` as always; the tenant restores equal.
 */
static void test_locked_call_waits_out_nothing(void **state)
{
	struct wt_env e;
	struct shard_env x;
	struct ws_stream *st;
	struct ws_outcome o;
	int rc;
	(void)state;

	wt_env_init(&e, "locked-bounded", 0);
	st = open_locking_stream(&e, &x);
	assert_int_equal(ws_fault_arm("file.put.before_publish", 1, 0), 0);
	rc = ws_stream_tail_frames(st, &o);
	ws_fault_disarm();
	print_message("  locked call: %s\n", rc ? ws_errmsg() : "shipped");
	assert_int_not_equal(rc, 0);
	assert_non_null(strstr(ws_errmsg(), "not waited out under the database's write lock"));
	/* The lock is gone: the application writes at once. */
	wt_exec(e.w, "PRAGMA busy_timeout=0");
	wt_write_txn(e.w, 5, 200);
	wt_tail_ok(st, &o); /* a new generation (the last locked call checkpointed the WAL) */
	assert_true(o.kind == WS_OUTCOME_STREAMED || o.kind == WS_OUTCOME_RESTARTED);
	ws_stream_close(st);
	shard_env_free(&x);
	assert_true(wt_restore_hash(&e, TENANT, NULL, NULL) == wt_content_hash(e.w, NULL));
	wt_env_free(&e);
}

/*
 * A call that holds the application's write lock does not wait out
 * key_write_interval_ms before its watermark write (15 s here, the last
 * write a moment ago): the application's writers would wait with it. It
 * writes at once, and the state it ships restores.
 */
static void test_locked_call_no_key_wait(void **state)
{
	struct wt_env e;
	struct shard_env x;
	struct ws_stream *st;
	struct ws_outcome o;
	(void)state;

	wt_env_init(&e, "locked-key-wait", 0);
	st = open_locking_stream(&e, &x);
	ws_stream_set_tail_bound(st, 0, 15000);
	ws_stream_set_key_wait(st, true, 0, NULL);
	const uint64_t t0 = ws_mono_ms(), wal_checkpoints = ws_stream_wal_checkpoints(st);
	wt_tail_ok(st, &o);
	const uint64_t took = ws_mono_ms() - t0;
	assert_int_equal(ws_stream_wal_checkpoints(st), wal_checkpoints + 1); /* it was the locked call */
	if (took > 5000)
		fail_msg("the locked call took %" PRIu64 " ms: it waited out the interval under the write lock", took);
	assert_int_equal(o.kind, WS_OUTCOME_STREAMED);
	ws_stream_close(st);
	shard_env_free(&x);
	assert_true(wt_restore_hash(&e, TENANT, NULL, NULL) == wt_content_hash(e.w, NULL));
	wt_env_free(&e);
}

/*
 * A call that took the application's write lock (the last call went
 * through, the WAL the watermark names past wal_checkpoint_bytes and still
 * live) and then finds it must re-base (continuity lost: the stream was
 * parked, as the engine parks one over its open-file budget) lets the lock
 * go before it reads and uploads the database file: a snapshot is as large
 * as the database, and the application's writers waited for all of it.
 * The call finds a re-base under the lock only when the WAL restarted
 * between its look at the live generation and the lock: its fresh read
 * mark is 0 (the WAL fully backfilled), so a writer paused in there
 * restarts it. Paused before the snapshot's upload, an application write
 * with no busy timeout goes through; what is acknowledged is a state the
 * source committed (the state before that write, or after it when the
 * call starts over), and the next tail ships the write.
 */
struct lock_probe {
	sqlite3 *db;
	int rc;
	int fired;
};

static void write_during_snapshot(const char *site, void *arg)
{
	struct lock_probe *p = arg;
	(void)site;
	if (p->fired++)
		return;
	p->rc = sqlite3_exec(p->db, "INSERT INTO t(v) VALUES (randomblob(300))", NULL, NULL, NULL);
}

struct restart_probe {
	sqlite3 *db;
	int rc;
	int fired;
	uint64_t hash; /* the source after the write that restarted the WAL */
};

static void restart_before_lock(const char *site, void *arg)
{
	struct restart_probe *r = arg;
	(void)site;
	if (r->fired++)
		return;
	r->rc = sqlite3_exec(r->db, "INSERT INTO t(v) VALUES (randomblob(300))", NULL, NULL, NULL);
	r->hash = wt_content_hash(r->db, NULL);
}

static void test_rebase_lets_the_write_lock_go(void **state)
{
	struct wt_env e;
	struct shard_env x;
	struct ws_stream *st;
	struct ws_outcome o;
	struct lock_probe p = { 0 };
	struct restart_probe r = { 0 };
	uint64_t before, after, got;
	(void)state;

	wt_env_init(&e, "rebase-unlocked", 0);
	st = open_locking_stream(&e, &x);
	wt_tail_ok(st, &o); /* locked: ships all and checkpoints; the WAL fully backfilled */
	ws_stream_park(st); /* continuity lost: the next call re-bases */
	wt_exec(e.w, "PRAGMA busy_timeout=0");
	p.db = r.db = e.w;
	p.rc = r.rc = -1;
	assert_int_equal(ws_fault_arm_pause("stream.before_checkpoint_lock", 1, restart_before_lock, &r), 0);
	assert_int_equal(ws_fault_add("stream.before_snapshot_put", 1, WS_FAULT_PAUSE, write_during_snapshot, &p), 0);
	tail_expect(st, &o, WS_OUTCOME_RESTARTED);
	ws_fault_disarm();
	if (r.fired != 1 || r.rc != SQLITE_OK)
		fail_msg("the write that restarts the WAL before the lock: %s",
			 r.fired ? sqlite3_errstr(r.rc) : "not reached");
	before = r.hash;
	after = wt_content_hash(e.w, NULL);
	assert_true(p.fired > 0);
	if (p.rc != SQLITE_OK)
		fail_msg("the application's write during the re-base's snapshot: %s", sqlite3_errstr(p.rc));
	got = wt_restore_hash(&e, TENANT, NULL, NULL);
	assert_true(got == before || got == after);
	wt_tail_ok(st, &o);
	ws_stream_close(st);
	shard_env_free(&x);
	assert_true(wt_restore_hash(&e, TENANT, NULL, NULL) == wt_content_hash(e.w, NULL));
	wt_env_free(&e);
}

/*
 * Restore and verify look for manifests after the watermark they read (a
 * watermark that went back); a writer that ships two more tails meanwhile
 * leaves exactly such manifests, linked back to the watermark read. That
 * is no loss: both must pass (they refused, saying the store lost writes,
 * when the writer did so before each of restore's two attempts). The
 * watermark then put back to an earlier version of itself (a store that
 * lost writes) is refused by both.
 */
struct went_on {
	struct wt_env *e;
	struct ws_stream *st;
	int fired;
};

static void ship_two_more(const char *site, void *arg)
{
	struct went_on *w = arg;
	struct ws_outcome o;
	(void)site;
	for (int i = 0; i < 2; i++) {
		wt_write_txn(w->e->w, 3, 300);
		tail_expect(w->st, &o, WS_OUTCOME_STREAMED);
	}
	w->fired++;
}

/* Verify (of tenant, or NULL: every one) paused before its manifest listing
 * while the writer ships two more tails: it must pass. */
static void verify_while_writer_goes_on(struct wt_env *e, struct went_on *w, const char *tenant)
{
	int rc;
	assert_int_equal(ws_fault_arm_pause("chain.before_manifest_list", 1, ship_two_more, w), 0);
	rc = ws_verify(e->sink, tenant, NULL, NULL);
	ws_fault_disarm();
	if (rc)
		fail_msg("verify while the writer went on: %s (%s)", ws_strerror(rc), ws_errmsg());
}

static void test_writer_going_on_is_no_went_back(void **state)
{
	struct wt_env e;
	struct ws_outcome o;
	struct went_on w;
	char *wm_path;
	uint8_t *saved;
	size_t saved_len;
	int rc;
	(void)state;

	wt_env_init(&e, "stream_went_on", 0);
	w = (struct went_on){ &e, stream_open(&e), 0 };
	for (int i = 0; i < 2; i++) {
		wt_write_txn(e.w, 3, 300);
		tail_expect(w.st, &o, WS_OUTCOME_STREAMED);
	}
	wm_path = wt_path(e.sink_dir, TENANT "/wm");
	saved = wt_read_file(wm_path, &saved_len);
	const uint64_t at_two = wt_content_hash(e.w, NULL);
	assert_non_null(saved);

	/* Restore, paused after reading the watermark (a second attempt, had
	 * there been one with another watermark, paused too). */
	assert_int_equal(ws_fault_add("chain.before_manifest_list", 1, WS_FAULT_PAUSE, ship_two_more, &w), 0);
	assert_int_equal(ws_fault_add("chain.before_manifest_list", 2, WS_FAULT_PAUSE, ship_two_more, &w), 0);
	char *out = wt_path(e.out_dir, "went-on.db");
	rc = ws_restore(e.sink, TENANT, NULL, out);
	ws_fault_disarm();
	if (rc)
		fail_msg("restore while the writer went on: %s (%s)", ws_strerror(rc), ws_errmsg());
	assert_int_equal(w.fired, 1);
	/* Verify, paused the same way. */
	verify_while_writer_goes_on(&e, &w, TENANT);
	assert_int_equal(w.fired, 2);
	assert_true(wt_restore_hash(&e, TENANT, NULL, NULL) == wt_content_hash(e.w, NULL));

	/* The watermark back at its version of six tails ago: refused. */
	assert_int_equal(wt_write_file(wm_path, saved, saved_len), 0);
	assert_int_equal(unlink(out), 0);
	assert_int_equal(ws_restore(e.sink, TENANT, NULL, out), WS_EINCOMPLETE);
	assert_non_null(strstr(ws_errmsg(), "went back"));
	assert_int_equal(ws_verify(e.sink, TENANT, NULL, NULL), WS_EINCOMPLETE);
	/* A LIST that fails (read-only credentials, say) is no refusal:
	 * restore warns and restores the state the watermark names, which is
	 * the one of six tails ago (fault injected: a store refusing LIST on
	 * demand is not at hand). */
	assert_int_equal(ws_fault_arm("chain.before_manifest_list", 1, 0), 0);
	rc = ws_restore(e.sink, TENANT, NULL, out);
	ws_fault_disarm();
	if (rc)
		fail_msg("restore when the LIST fails: %s (%s)", ws_strerror(rc), ws_errmsg());
	assert_true(wt_file_hash(out, NULL) == at_two);
	ws_stream_close(w.st);
	free(out);
	free(saved);
	free(wm_path);
	wt_env_free(&e);
}

/*
 * Garbage where the went-back check looks (objects named as manifests for
 * the watermark's sequence + 2 in its directory: random bytes, and a real
 * manifest cut short) is no evidence: restore of the latest state and
 * verify pass, and the restore is the source's state.
 */
static void test_garbage_after_watermark_is_no_went_back(void **state)
{
	struct wt_env e;
	struct ws_outcome o;
	struct ws_fmt_watermark wm;
	struct ws_stream *st;
	char key[WS_KEY_MAX], *path;
	uint8_t junk[700], *real;
	size_t real_len;
	uint64_t rng = 20261202;
	(void)state;

	wt_env_init(&e, "stream_went_back_garbage", 0);
	st = stream_open(&e);
	for (int i = 0; i < 2; i++) {
		wt_write_txn(e.w, 3, 300);
		tail_expect(st, &o, WS_OUTCOME_STREAMED);
	}
	assert_int_equal(ws_wm_load(e.sink->store, TENANT, &wm, NULL), 0);
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (uint8_t)wt_rand(&rng);
	const char *slash = strrchr(wm.manifest_key, '/');
	assert_non_null(slash);
	snprintf(key, sizeof(key), "%.*sm%016" PRIx64 "-00000000deadbeef", (int)(slash - wm.manifest_key + 1),
		 wm.manifest_key, wm.seq + 2);
	path = wt_path(e.sink_dir, key);
	assert_int_equal(wt_write_file(path, junk, sizeof(junk)), 0);
	free(path);
	path = wt_path(e.sink_dir, wm.manifest_key);
	real = wt_read_file(path, &real_len);
	assert_non_null(real);
	free(path);
	snprintf(key, sizeof(key), "%.*sm%016" PRIx64 "-00000000feedface", (int)(slash - wm.manifest_key + 1),
		 wm.manifest_key, wm.seq + 2);
	path = wt_path(e.sink_dir, key);
	assert_int_equal(wt_write_file(path, real, real_len / 2), 0);
	free(path);

	assert_true(wt_restore_hash(&e, TENANT, NULL, NULL) == wt_content_hash(e.w, NULL));
	assert_int_equal(ws_verify(e.sink, TENANT, NULL, NULL), 0);
	free(real);
	ws_stream_close(st);
	wt_env_free(&e);
}

/*
 * Verify of a tenant with objects but no watermark (its first tail stopped
 * before the watermark) passes; when, while verify lists its manifests,
 * the writer ships its first watermark and more, verify finds a manifest
 * written after watermark 1. It reads the watermark again and verifies the
 * tenant as any other. (Before, it reported the watermark missing, and its
 * retry of a tenant with a missing object, from a fresh watermark, hid
 * that: this test passes on that code too, and guards the pair.)
 */
static void test_first_watermark_while_verify_lists(void **state)
{
	struct wt_env e;
	struct ws_outcome o;
	struct went_on w;
	(void)state;

	wt_env_init(&e, "stream_first_wm", 0);
	w = (struct went_on){ &e, stream_open(&e), 0 };
	wt_write_txn(e.w, 3, 300);
	assert_int_equal(ws_fault_arm("stream.before_watermark_put", 1, 0), 0);
	assert_int_not_equal(ws_stream_tail_frames(w.st, &o), 0);
	ws_fault_disarm();
	assert_int_equal(ws_verify(e.sink, NULL, NULL, NULL), 0);
	verify_while_writer_goes_on(&e, &w, NULL);
	assert_int_equal(w.fired, 1);
	assert_true(wt_restore_hash(&e, TENANT, NULL, NULL) == wt_content_hash(e.w, NULL));
	ws_stream_close(w.st);
	wt_env_free(&e);
}

/*
 * A failed WAL read is a failed call, never "nothing new": the read that
 * probes for a frame after the watermark (here the call's third read) failed
 * and the call said Empty, with commits there unshipped and no failure for
 * the engine to retry; and with the write lock taken (every call past
 * wal_checkpoint_bytes) walship's WAL checkpoint then copied those commits
 * into the database file, the next WAL generation was chained onto the old
 * watermark, and restore published a state the source never had (verify
 * passed it).
 */
static void test_probe_read_error_is_no_empty(void **state)
{
	struct wt_env e;
	struct ws_outcome o;
	struct ws_stream *st;
	struct ws_stream_config c;
	int rc;
	(void)state;

	wt_env_init(&e, "stream_probe_read_error", 0);
	wt_exec(e.w, "CREATE TABLE a(k INTEGER PRIMARY KEY, v TEXT); CREATE TABLE b(k INTEGER PRIMARY KEY, v TEXT);"
		     "INSERT INTO a VALUES (1, 'a0'); INSERT INTO b VALUES (1, 'b0');");
	c = cfg_default(&e);
	c.wal_checkpoint_bytes = 1;
	st = stream_open_cfg(&e, NULL, &c);
	tail_expect(st, &o, WS_OUTCOME_STREAMED);
	wt_exec(e.w, "UPDATE a SET v = 'a1'");
	uint64_t before = ws_stream_wal_checkpoints(st);
	assert_int_equal(ws_fault_arm("reader.read", 3, 0), 0);
	rc = ws_stream_tail_frames(st, &o);
	ws_fault_disarm();
	print_message("  probe read failed: rc %d, outcome %s (%s)\n", rc, ws_outcome_name(o.kind),
		      rc ? ws_errmsg() : "-");
	assert_int_not_equal(rc, 0);
	assert_int_equal(ws_stream_wal_checkpoints(st), before);
	wt_exec(e.w, "UPDATE b SET v = 'b1'");
	wt_tail_ok(st, &o);
	wt_tail_ok(st, &o);
	ws_stream_close(st);
	assert_true(wt_restore_hash(&e, TENANT, NULL, NULL) == wt_content_hash(e.w, NULL));
	assert_int_equal(ws_verify(e.sink, TENANT, NULL, NULL), 0);
	wt_env_free(&e);
}

/*
 * The same for a slot of WAL frames the upload thread reads: its failure
 * ended the chain where it was, read as the end of the WAL. Under block
 * the call said Empty (no commit before the failed slot) and the WAL
 * checkpoint followed; under shed it said Streamed with nothing shed. The
 * slots are page multiples so that the upload thread's own ring can read
 * them; "reader.attach" fails the upload thread's read of a slot.
 */
static void delegated_read_error(enum ws_policy policy, unsigned nth)
{
	struct wt_env e;
	struct shard_env x;
	struct ws_stream_config cfg;
	struct ws_stream *st;
	struct ws_outcome o;
	int err = 0, rc;

	wt_env_init(&e, policy == WS_POLICY_SHED ? "delegated-read-shed" : "delegated-read-block", 0);
	wt_write_txn(e.w, 5, 200);
	shard_env_init_slot(&x, &e, 17 * 4096);
	cfg = cfg_default(&e);
	cfg.policy = policy;
	cfg.wal_checkpoint_bytes = 4096;
	st = ws_stream_open_shared(e.sink, &cfg, &x.sh, &err);
	assert_non_null(st);
	wt_tail_ok(st, &o);
	for (int i = 0; i < 25; i++)
		wt_write_txn(e.w, 4, 2000); /* a backlog of 25 commits over several slots */
	uint64_t before = ws_stream_wal_checkpoints(st);
	assert_int_equal(ws_fault_arm("reader.attach", nth, 0), 0);
	rc = ws_stream_tail_frames(st, &o);
	ws_fault_disarm();
	print_message("  %s, the upload thread's read failed: rc %d, outcome %s (%s)\n", ws_policy_name(policy), rc,
		      ws_outcome_name(o.kind), rc ? ws_errmsg() : "-");
	assert_int_not_equal(rc, 0);
	assert_int_equal(ws_stream_wal_checkpoints(st), before);
	wt_write_txn(e.w, 3, 200);
	wt_tail_ok(st, &o);
	wt_tail_ok(st, &o);
	ws_stream_close(st);
	shard_env_free(&x);
	assert_true(wt_restore_hash(&e, TENANT, NULL, NULL) == wt_content_hash(e.w, NULL));
	wt_env_free(&e);
}

static void test_delegated_read_error_block(void **state)
{
	(void)state;
	delegated_read_error(WS_POLICY_BLOCK, 1);
}

static void test_delegated_read_error_shed(void **state)
{
	(void)state;
	delegated_read_error(WS_POLICY_SHED, 2);
}

/*
 * Fencing with equal tokens. An owner whose read mark was held since its own
 * last watermark may chain a new WAL generation onto it (NEXT_GEN), but only
 * while the watermark is still that write: another writer with the same
 * epoch and pointer generation (an overlapping restart, a failover host that
 * kept the tokens) may have written since. Before, the first owner chained a
 * NEXT_GEN onto the other's re-base (same generation: verify and restore
 * refused the stream), or onto another database's pages (a state neither
 * source committed).
 */
static void test_next_gen_not_onto_same_token_writer(void **state)
{
	struct wt_env e;
	struct ws_outcome o;
	struct ws_stream *a, *b;
	struct ws_stream_config c;
	char res[64];
	(void)state;

	wt_env_init(&e, "nextgen-same-token", 0);
	wt_write_txn(e.w, 6, 1500);
	c = cfg_default(&e);
	c.wal_checkpoint_bytes = 1;
	a = stream_open_cfg(&e, NULL, &c);
	tail_expect(a, &o, WS_OUTCOME_STREAMED);
	tail_expect(a, &o, WS_OUTCOME_EMPTY); /* its WAL checkpoint: read mark 0 held */
	wt_query1(e.w, "PRAGMA wal_checkpoint(TRUNCATE)", res);
	wt_write_txn(e.w, 3, 700); /* a new generation */
	b = owner(&e, NULL, 1, 1);  /* the same tokens, the same database */
	wt_tail_ok(b, &o);
	wt_write_txn(e.w, 2, 700);
	wt_tail_ok(a, &o);
	if (ws_verify(e.sink, TENANT, NULL, NULL) != 0)
		fail_msg("verify after a same-token writer: %s", ws_errmsg());
	assert_restore_equals_source(&e);
	ws_stream_close(a);
	ws_stream_close(b);
	wt_env_free(&e);
}

struct other_tail {
	struct ws_stream *b;
	int rc;
	struct ws_outcome o;
};

static void other_tails(const char *site, void *arg)
{
	struct other_tail *x = arg;
	(void)site;
	x->rc = ws_stream_tail_frames(x->b, &x->o);
}

/* Two databases under one tenant with equal tokens (a failover host started
 * without a higher epoch): the lost race leaves the other's watermark in A's
 * cache; A's next tail must re-base, never chain its WAL onto db2's pages. */
static void test_next_gen_not_after_lost_race(void **state)
{
	struct wt_env e, e2;
	struct ws_outcome o;
	struct ws_stream *a;
	struct ws_stream_config c;
	struct other_tail x = { 0 };
	char res[64], *out;
	uint64_t h1;
	int rc;
	(void)state;

	wt_env_init(&e, "nextgen-race-a", 0);
	wt_env_init(&e2, "nextgen-race-b", 0);
	wt_write_txn(e.w, 6, 1500);
	wt_query1(e.w, "PRAGMA wal_checkpoint(TRUNCATE)", res);
	wt_write_txn(e.w, 1, 300);
	wt_write_txn(e2.w, 9, 900);
	a = stream_open(&e);
	tail_expect(a, &o, WS_OUTCOME_STREAMED);
	c = cfg_default(&e2);
	x.b = stream_open_cfg(&e2, e.sink, &c);
	wt_write_txn(e.w, 2, 700);
	assert_int_equal(ws_fault_arm_pause("stream.before_watermark_put", 1, other_tails, &x), 0);
	rc = ws_stream_tail_frames(a, &o);
	ws_fault_disarm();
	assert_int_equal(x.rc, 0);
	assert_int_equal(rc, WS_EPRECOND); /* lost the race: nothing acknowledged */
	wt_write_txn(e.w, 1, 700);
	wt_tail_ok(a, &o);
	if (ws_verify(e.sink, TENANT, NULL, NULL) != 0)
		fail_msg("verify: %s", ws_errmsg());
	h1 = wt_content_hash(e.w, NULL);
	out = wt_path(e.out_dir, "race.db");
	if (ws_restore(e.sink, TENANT, NULL, out) != 0)
		fail_msg("restore: %s", ws_errmsg());
	assert_int_equal(wt_file_hash(out, NULL), h1); /* A's acknowledged state: db1's */
	free(out);
	ws_stream_close(a);
	ws_stream_close(x.b);
	wt_env_free(&e2);
	wt_env_free(&e);
}

/* A watermark unreadable for one read (a damaged object put back, a gateway's
 * wrong 200) fails that tail and leaves the stream as it was: before, the
 * failed decode left a zeroed watermark cached and the next tail chained a
 * NEXT_GEN of the very same generation (verify and restore refused it). */
static void test_unreadable_watermark_once(void **state)
{
	struct wt_env e;
	struct ws_outcome o;
	struct ws_stream *a;
	struct ws_buf good;
	struct ws_store *s;
	int err = 0;
	(void)state;

	wt_env_init(&e, "wm-unreadable-once", 0);
	wt_write_txn(e.w, 6, 1500);
	a = stream_open(&e);
	tail_expect(a, &o, WS_OUTCOME_STREAMED);
	wt_write_txn(e.w, 2, 700);
	tail_expect(a, &o, WS_OUTCOME_STREAMED);
	s = ws_store_file_open(e.sink_dir, &err);
	assert_non_null(s);
	ws_buf_init(&good, 0);
	assert_int_equal(ws_store_get(s, TENANT "/wm", 0, UINT64_MAX, &good, NULL), 0);
	assert_int_equal(ws_store_put(s, TENANT "/wm", "garbage!", 8, WS_PUT_OVERWRITE, NULL, NULL), 0);
	wt_write_txn(e.w, 2, 700);
	assert_int_not_equal(ws_stream_tail_frames(a, &o), 0);
	assert_int_equal(ws_store_put(s, TENANT "/wm", good.data, good.len, WS_PUT_OVERWRITE, NULL, NULL), 0);
	tail_expect(a, &o, WS_OUTCOME_STREAMED);
	if (ws_verify(e.sink, TENANT, NULL, NULL) != 0)
		fail_msg("verify: %s", ws_errmsg());
	assert_restore_equals_source(&e);
	ws_buf_free(&good);
	ws_store_close(s);
	ws_stream_close(a);
	wt_env_free(&e);
}

/* The kind of the manifest at key in e's sink. */
static uint32_t manifest_kind_at(const struct wt_env *e, const char *key)
{
	struct ws_fmt_manifest m;
	uint32_t k;
	manifest_at(e, key, &m);
	k = m.kind;
	ws_fmt_manifest_free(&m);
	return k;
}

/*
 * A watermark read that fails once (unreadable, then put back) costs one
 * tail, not the stream's continuity: the next new WAL generation still
 * chains on (NEXT_GEN) instead of re-uploading the whole database.
 */
static void test_failed_read_keeps_next_gen(void **state)
{
	struct wt_env e;
	struct ws_outcome o;
	struct ws_stream *a;
	struct ws_stream_config c;
	struct ws_buf good;
	struct ws_store *s;
	char res[64];
	int err = 0;
	(void)state;

	wt_env_init(&e, "read-fail-nextgen", 0);
	wt_write_txn(e.w, 6, 1500);
	c = cfg_default(&e);
	c.wal_checkpoint_bytes = 1;
	a = stream_open_cfg(&e, NULL, &c);
	tail_expect(a, &o, WS_OUTCOME_STREAMED);
	tail_expect(a, &o, WS_OUTCOME_EMPTY); /* its WAL checkpoint: read mark 0 held */
	s = ws_store_file_open(e.sink_dir, &err);
	assert_non_null(s);
	ws_buf_init(&good, 0);
	assert_int_equal(ws_store_get(s, TENANT "/wm", 0, UINT64_MAX, &good, NULL), 0);
	wt_query1(e.w, "PRAGMA wal_checkpoint(TRUNCATE)", res);
	wt_write_txn(e.w, 2, 700); /* a new generation */
	assert_int_equal(ws_store_put(s, TENANT "/wm", "garbage!", 8, WS_PUT_OVERWRITE, NULL, NULL), 0);
	assert_int_not_equal(ws_stream_tail_frames(a, &o), 0);
	assert_int_equal(ws_store_put(s, TENANT "/wm", good.data, good.len, WS_PUT_OVERWRITE, NULL, NULL), 0);
	tail_expect(a, &o, WS_OUTCOME_RESTARTED);
	assert_int_equal(manifest_kind_at(&e, o.u.restarted.generation_key), WS_MANIFEST_NEXT_GEN);
	assert_int_equal(ws_verify(e.sink, TENANT, NULL, NULL), 0);
	assert_restore_equals_source(&e);
	ws_buf_free(&good);
	ws_store_close(s);
	ws_stream_close(a);
	wt_env_free(&e);
}

static sqlite3 *g_truncate_w;
static void truncate_wal(const char *site, void *arg)
{
	char res[64];
	(void)site;
	(void)arg;
	wt_query1(g_truncate_w, "PRAGMA wal_checkpoint(TRUNCATE)", res);
}

/*
 * A tail on a fresh read mark whose WAL is restarted under its scan ships
 * a prefix and leaves the rest of what was committed before it began (in
 * the database file only, until a re-base). Its RPO is not the ~0 of a
 * complete ship: the watermark keeps the time of the last complete one,
 * more than 1.5 s ago.
 */
static void test_unproven_tail_keeps_rpo(void **state)
{
	struct wt_env e;
	struct ws_outcome o;
	struct ws_stream *a, *b;
	struct ws_stream_config c;
	char res[64];
	int rc;
	(void)state;

	wt_env_init(&e, "unproven-rpo", 0);
	wt_write_txn(e.w, 2, 700);
	a = stream_open(&e);
	tail_expect(a, &o, WS_OUTCOME_STREAMED);
	ws_stream_close(a);
	for (int i = 0; i < 8; i++)
		wt_write_txn(e.w, 3, 1500);
	wt_query1(e.w, "PRAGMA wal_checkpoint(PASSIVE)", res);
	wt_sleep_ms(1500);
	c = cfg_default(&e);
	c.batch_frames_max = 1;
	b = stream_open_cfg(&e, NULL, &c);
	g_truncate_w = e.w;
	assert_int_equal(ws_fault_arm_pause("stream.after_wal_read", 20, truncate_wal, NULL), 0);
	rc = ws_stream_tail_frames(b, &o);
	ws_fault_disarm();
	assert_int_equal(rc, 0);
	assert_int_equal(o.kind, WS_OUTCOME_STREAMED); /* a prefix, its WAL gone under it */
	if (o.u.streamed.rpo.watermark_age_ms < 1500)
		fail_msg("a prefix shipped with commits left behind reads RPO %llu ms",
			 (unsigned long long)o.u.streamed.rpo.watermark_age_ms);
	/* The next tail re-bases and catches up. */
	wt_tail_ok(b, &o);
	assert_restore_equals_source(&e);
	ws_stream_close(b);
	wt_env_free(&e);
}

/*
 * A manifest carrying its batch (inline) is that batch's upload, and a
 * refused one meets the stream's policy as a refused batch does: under
 * `shed` the call sheds its range (no manifest, no watermark) and the next
 * ships it; under `throttle` the call fails; under `block` in a shard's
 * pipeline it is tried again until it lands. The refusal is injected (a
 * file sink cannot refuse on demand).
 */
static void test_inline_manifest_meets_policy(void **state)
{
	static const enum ws_policy policies[] = { WS_POLICY_SHED, WS_POLICY_THROTTLE, WS_POLICY_BLOCK };
	(void)state;
	for (size_t i = 0; i < sizeof(policies) / sizeof(policies[0]); i++) {
		struct wt_env e;
		struct shard_env x;
		struct ws_stream_config cfg;
		struct ws_stream_call call;
		struct ws_stream *st;
		struct ws_outcome o;
		int err = 0, rc;

		wt_env_init(&e, "inline-policy", 0);
		shard_env_init(&x, &e);
		cfg = cfg_default(&e);
		cfg.policy = policies[i];
		st = ws_stream_open_shared(e.sink, &cfg, &x.sh, &err);
		assert_non_null(st);
		wt_tail_ok(st, &o); /* the re-base: snapshot parts of their own */
		wt_write_txn(e.w, 3, 300);
		assert_int_equal(ws_fault_arm("file.put.before_publish", 1, 0), 0);
		rc = ws_stream_tail_frames(st, &o);
		ws_fault_disarm();
		print_message("  policy %s: %s\n", ws_policy_name(policies[i]), rc ? ws_errmsg() : "no error");
		if (policies[i] == WS_POLICY_SHED) {
			assert_int_equal(rc, 0);
			assert_int_equal(o.kind, WS_OUTCOME_SHED);
			assert_true(o.u.shed.first_frame >= 1 && o.u.shed.last_frame >= o.u.shed.first_frame);
		} else if (policies[i] == WS_POLICY_THROTTLE) {
			assert_int_not_equal(rc, 0);
			assert_non_null(strstr(ws_errmsg(), "carrying its batch"));
			assert_non_null(strstr(ws_errmsg(), "policy throttle"));
		} else {
			assert_int_equal(rc, 0);
			assert_int_equal(o.kind, WS_OUTCOME_STREAMED);
			ws_stream_last_call(st, &call);
			assert_int_equal(call.puts, 2); /* the manifest (once it landed) and the watermark */
		}
		wt_tail_ok(st, &o);
		ws_stream_close(st);
		shard_env_free(&x);
		assert_true(wt_restore_hash(&e, TENANT, NULL, NULL) == wt_content_hash(e.w, NULL));
		wt_env_free(&e);
	}
}

/* How many of this process's descriptors open path with O_NOATIME, and with it or without (*all). */
static unsigned fds_noatime(const char *path, unsigned *all)
{
	char want[PATH_MAX], link[PATH_MAX], info[300], line[128];
	unsigned n = 0;
	DIR *d = opendir("/proc/self/fd");
	assert_non_null(realpath(path, want));
	assert_non_null(d);
	*all = 0;
	for (struct dirent *de; (de = readdir(d)) != NULL;) {
		char fdp[300];
		ssize_t len;
		if (de->d_name[0] == '.')
			continue;
		snprintf(fdp, sizeof(fdp), "/proc/self/fd/%s", de->d_name);
		len = readlink(fdp, link, sizeof(link) - 1);
		if (len < 0)
			continue;
		link[len] = '\0';
		if (strcmp(link, want) != 0)
			continue;
		(*all)++;
		snprintf(info, sizeof(info), "/proc/self/fdinfo/%s", de->d_name);
		FILE *f = fopen(info, "r");
		unsigned flags = 0;
		while (f && fgets(line, sizeof(line), f))
			if (sscanf(line, "flags: %o", &flags) == 1)
				break;
		if (f)
			fclose(f);
		n += (flags & O_NOATIME) != 0;
	}
	closedir(d);
	return n;
}

/*
 * The stream opens the WAL without access-time updates (O_NOATIME,
 * stream_wal.c file_refresh): on a disk each update of a file a writer
 * keeps changing dirties its inode and may wait for the filesystem's
 * journal (behind the sink's fsyncs) while the shard's read lock is held
 * (its tails' reads, and its reads ahead of them). SQLite's own
 * descriptors of the WAL (the writer's, the stream's connections) are
 * SQLite's business; the stream's own is checked.
 */
static void test_wal_opened_noatime(void **state)
{
	struct wt_env e;
	struct ws_outcome o;
	unsigned before_all, after_all;
	(void)state;
	wt_env_init(&e, "noatime", 0);
	wt_write_txn(e.w, 5, 300);
	struct ws_stream *st = stream_open(&e);
	assert_int_equal(fds_noatime(e.wal, &before_all), 0);
	wt_tail_ok(st, &o);
	assert_int_equal(fds_noatime(e.wal, &after_all), 1);
	assert_true(after_all > before_all);
	ws_stream_close(st);
	wt_env_free(&e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_wal_opened_noatime),
		cmocka_unit_test(test_failed_read_keeps_next_gen),
		cmocka_unit_test(test_unproven_tail_keeps_rpo),
		cmocka_unit_test(test_next_gen_not_onto_same_token_writer),
		cmocka_unit_test(test_next_gen_not_after_lost_race),
		cmocka_unit_test(test_unreadable_watermark_once),
		cmocka_unit_test(test_fresh_db_without_wal),
		cmocka_unit_test(test_streamed_then_empty),
		cmocka_unit_test(test_empty_rpo_ages),
		cmocka_unit_test(test_restarted_salt_only),
		cmocka_unit_test(test_restarted_seq_advanced),
		cmocka_unit_test(test_restarted_legacy_watermark),
		cmocka_unit_test(test_restarted_next_gen_open_stream),
		cmocka_unit_test(test_bad_checksum_mid_wal_ends_chain),
		cmocka_unit_test(test_app_truncate_cannot_skip_frames),
		cmocka_unit_test(test_fenced),
		cmocka_unit_test(test_outcome_accessors),
		cmocka_unit_test(test_point_in_time),
		cmocka_unit_test(test_time_never_after_commit),
		cmocka_unit_test(test_large_transactions),
		cmocka_unit_test(test_uncommitted_not_shipped),
		cmocka_unit_test(test_uncommitted_on_first_contact),
		cmocka_unit_test(test_page_sizes),
		cmocka_unit_test(test_shared_work_grows),
		cmocka_unit_test(test_pipe_results_before_reuse),
		cmocka_unit_test(test_key_wait_ends_at_stop),
		cmocka_unit_test(test_shed_snapshot_without_wal),
		cmocka_unit_test(test_locked_call_waits_out_nothing),
		cmocka_unit_test(test_locked_call_no_key_wait),
		cmocka_unit_test(test_inline_manifest_meets_policy),
		cmocka_unit_test(test_rebase_lets_the_write_lock_go),
		cmocka_unit_test(test_probe_read_error_is_no_empty),
		cmocka_unit_test(test_writer_going_on_is_no_went_back),
		cmocka_unit_test(test_first_watermark_while_verify_lists),
		cmocka_unit_test(test_garbage_after_watermark_is_no_went_back),
		cmocka_unit_test(test_delegated_read_error_block),
		cmocka_unit_test(test_delegated_read_error_shed),
	};
	/* WS_TEST_FILTER=GLOB runs a subset (wt_run_group). */
	return WT_RUN_GROUP(tests, NULL, NULL);
}
