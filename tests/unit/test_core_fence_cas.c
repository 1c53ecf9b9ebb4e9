/*
 * Fencing with the watermark's own compare-and-swap (docs/DESIGN.md
 * "Fencing"): a tail whose frames ride inside its watermark (a carried
 * manifest) makes one request, the watermark PUT with If-Match on the etag
 * its own last write got back, and no fencing read. A takeover makes that
 * write fail: the stale tail reports Fenced and the sink holds exactly the
 * new owner's state. Races at the new sites, paused while a real writer
 * commits; a store that refuses our own write's etag (another form) for
 * no takeover; a tail that must upload after all reads first.
 *
 * Built twice: here against a file:// sink, and by
 * test_core_fence_cas_s3.c (FENCE_CAS_S3) against radosgw.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <inttypes.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "artifact.h"
#include "core_internal.h"
#include "coreutil.h"
#include "sink.h"
#include "stream_internal.h"
#include "walship.h"
#include "ws_fault.h"
#include "ws_store.h"

#define TENANT "t1"

#ifdef FENCE_CAS_S3
static char g_bucket[64];
static unsigned g_prefix_n;
#endif

/* The env's sink, on file:// (its own) or on a fresh prefix of the S3 bucket. */
static void env_init(struct wt_env *e, const char *tag)
{
	wt_env_init(e, tag, 0);
#ifdef FENCE_CAS_S3
	char url[1024];
	int err = 0;
	snprintf(url, sizeof(url), "s3://%s/%s-%ld-%u?endpoint=%s", g_bucket, tag, (long)getpid(), ++g_prefix_n,
		 getenv("WS_S3_ENDPOINT"));
	ws_sink_close(e->sink);
	e->sink = ws_sink_open(url, &err);
	if (!e->sink)
		fail_msg("open %s: %s", url, ws_errmsg());
#endif
}

static struct ws_stream *open_epoch(struct wt_env *e, uint64_t epoch, uint32_t batch_frames_max)
{
	struct ws_stream_config c;
	int err = -1;
	memset(&c, 0, sizeof(c));
	c.carry = WS_CARRY_ALWAYS;
	c.slots = false; /* the watermark per tail, fenced by its CAS (docs/SLOTS.md 3.3) */
	c.tenant = TENANT;
	c.db_path = e->db;
	c.epoch = epoch;
	c.pointer_generation = 1;
	c.policy = WS_POLICY_THROTTLE;
	c.batch_frames_max = batch_frames_max;
	c.wal_checkpoint_bytes = UINT64_MAX;
	struct ws_stream *st = ws_stream_open(e->sink, &c, &err);
	if (!st)
		fail_msg("ws_stream_open: %s (%s)", ws_strerror(err), ws_errmsg());
	return st;
}

static void restore_is(struct wt_env *e, uint64_t want, int line)
{
	int64_t rows = 0;
	uint64_t got = wt_restore_hash(e, TENANT, NULL, &rows);
	if (got != want)
		fail_msg("line %d: restored %" PRId64 " rows (hash %016" PRIx64 "), not the state expected (%016" PRIx64
			 ")", line, rows, got, want);
	int rc = ws_verify(e->sink, TENANT, NULL, NULL);
	if (rc)
		fail_msg("line %d: verify: %s (%s)", line, ws_strerror(rc), ws_errmsg());
}

static void state_unchanged(const char *before, char *after, int line)
{
	if (strcmp(before, after) != 0)
		fail_msg("line %d: the stale owner changed the sink:\n--- the new owner left\n%.2000s\n--- now\n%.2000s",
			 line, before, after);
	free(after);
}

/* A stream whose last write carried its manifest: the state for fencing by CAS. */
static struct ws_stream *carried_owner(struct wt_env *e, uint32_t batch_frames_max)
{
	struct ws_outcome o;
	struct ws_stream *st = open_epoch(e, 1, batch_frames_max);
	wt_write_txn(e->w, 200, 300);
	wt_tail_ok(st, &o); /* a re-base: stored */
	wt_write_txn(e->w, 3, 300);
	wt_tail_ok(st, &o);
	assert_int_equal(o.kind, WS_OUTCOME_STREAMED);
	struct ws_stream_call call;
	ws_stream_last_call(st, &call);
	assert_true(call.carried);
	return st;
}

/* ---- the steady state: one request per tail ----------------------------- */

static void test_one_request_per_tail(void **state)
{
	struct wt_env e;
	struct ws_outcome o;
	(void)state;
	env_init(&e, "one-request");
	struct ws_stream *st = carried_owner(&e, 0);
	for (int i = 0; i < 5; i++) {
		wt_write_txn(e.w, 3, 300);
		struct ws_store_stats a = e.sink->store->stats;
		wt_tail_ok(st, &o);
		struct ws_store_stats b = e.sink->store->stats;
		assert_int_equal(o.kind, WS_OUTCOME_STREAMED);
		if (b.puts - a.puts != 1 || b.gets != a.gets || b.heads != a.heads || b.lists != a.lists)
			fail_msg("tail %d: %" PRIu64 " PUTs, %" PRIu64 " GETs, %" PRIu64 " HEADs, %" PRIu64
				 " LISTs; one PUT (the watermark) and nothing else expected",
				 i, b.puts - a.puts, b.gets - a.gets, b.heads - a.heads, b.lists - a.lists);
		restore_is(&e, wt_content_hash(e.w, NULL), __LINE__);
	}
	ws_stream_close(st);
	wt_env_free(&e);
}

/* ---- a takeover between two tails --------------------------------------- */

static void test_takeover_between_tails(void **state)
{
	struct wt_env e;
	struct ws_outcome o;
	(void)state;
	env_init(&e, "between-tails");
	struct ws_stream *st1 = carried_owner(&e, 0);
	/* Another host takes over and ships what is there. */
	wt_write_txn(e.w, 2, 300);
	struct ws_stream *st2 = open_epoch(&e, 2, 0);
	wt_tail_ok(st2, &o);
	assert_int_equal(o.kind, WS_OUTCOME_STREAMED);
	const uint64_t h2 = wt_content_hash(e.w, NULL);
	char *taken = wt_tenant_state(e.sink, TENANT);
	/* The stale owner's next tail: its one write is refused. */
	wt_write_txn(e.w, 3, 300);
	struct ws_store_stats a = e.sink->store->stats;
	wt_tail_ok(st1, &o);
	struct ws_store_stats b = e.sink->store->stats;
	assert_int_equal(o.kind, WS_OUTCOME_FENCED);
	assert_int_equal(o.u.fenced.current_epoch, 2);
	assert_int_equal(o.u.fenced.our_epoch, 1);
	assert_true(b.precond_failed > a.precond_failed); /* it was the swap that fenced */
	state_unchanged(taken, wt_tenant_state(e.sink, TENANT), __LINE__);
	restore_is(&e, h2, __LINE__);
	/* And stays fenced, with a read. */
	wt_tail_ok(st1, &o);
	assert_int_equal(o.kind, WS_OUTCOME_FENCED);
	state_unchanged(taken, wt_tenant_state(e.sink, TENANT), __LINE__);
	free(taken);
	/* The new owner goes on from its own state. */
	wt_tail_ok(st2, &o);
	restore_is(&e, wt_content_hash(e.w, NULL), __LINE__);
	ws_stream_close(st1);
	ws_stream_close(st2);
	wt_env_free(&e);
}

/* ---- a takeover paused at the new sites --------------------------------- */

struct takeover_ctx {
	struct wt_env *e;
	struct ws_stream *st2;
	unsigned how;      /* the writer's mutation before the takeover (wt_mutate's) */
	struct wt_mutator m;
	uint64_t h2;       /* the state the new owner shipped */
	char *taken;       /* the sink as the new owner left it */
	int fired;
};

static void take_over_now(const char *site, void *arg)
{
	struct takeover_ctx *c = arg;
	struct ws_outcome o;
	wt_mutate(site, &c->m); /* the application commits (and checkpoints) meanwhile */
	c->st2 = open_epoch(c->e, 2, 0);
	int rc = ws_stream_tail_frames(c->st2, &o);
	if (rc)
		fail_msg("site %s: the new owner's tail: %s (%s)", site, ws_strerror(rc), ws_errmsg());
	c->h2 = wt_content_hash(c->e->w, NULL);
	c->taken = wt_tenant_state(c->e->sink, TENANT);
	c->fired++;
}

/* The stale owner paused at site (after its own carried write, frames
 * to ship: rows rows, batch_frames_max as given) while the application
 * commits under mutation how and another owner takes over: Fenced, the
 * sink exactly as the new owner left it. */
static void paused_takeover(const char *site, unsigned how, int rows, uint32_t batch_frames_max)
{
	struct wt_env e;
	struct ws_outcome o;
	struct takeover_ctx c;
	memset(&c, 0, sizeof(c));
	env_init(&e, "paused-takeover");
	c.e = &e;
	struct ws_stream *st1 = carried_owner(&e, batch_frames_max);
	wt_mutator_init(&c.m, &e, how);
	wt_write_txn(e.w, rows, 300);
	assert_int_equal(ws_fault_arm_pause(site, 1, take_over_now, &c), 0);
	int rc = ws_stream_tail_frames(st1, &o);
	ws_fault_disarm();
	if (c.fired != 1)
		fail_msg("site %s, mutation %u: not reached", site, how);
	if (rc)
		fail_msg("site %s, mutation %u: %s (%s); Fenced expected", site, how, ws_strerror(rc), ws_errmsg());
	if (o.kind != WS_OUTCOME_FENCED)
		fail_msg("site %s, mutation %u: %s; Fenced expected", site, how, ws_outcome_name(o.kind));
	assert_int_equal(o.u.fenced.current_epoch, 2);
	state_unchanged(c.taken, wt_tenant_state(e.sink, TENANT), __LINE__);
	restore_is(&e, c.h2, __LINE__);
	free(c.taken);
	/* The new owner ships the rest. */
	for (int k = 0; k < 2; k++)
		wt_tail_ok(c.st2, &o);
	restore_is(&e, wt_content_hash(e.w, NULL), __LINE__);
	ws_stream_close(st1);
	ws_stream_close(c.st2);
	wt_mutator_free(&c.m);
	wt_env_free(&e);
}

static void test_takeover_at_skipped_read(void **state)
{
	(void)state;
	for (unsigned how = 0; how < WT_MUTATIONS; how++) {
		paused_takeover("stream.fence_by_cas", how, 3, 0);
		paused_takeover("stream.before_carrying_watermark_put", how, 3, 0);
	}
}

/* The read skipped, but the tail has batches of their own to upload
 * (more frames than a batch takes): it reads before the first, and a
 * takeover found there leaves nothing behind. */
static void test_takeover_before_deferred_read(void **state)
{
	(void)state;
	for (unsigned how = 0; how < WT_MUTATIONS; how++)
		paused_takeover("stream.before_deferred_fence", how, 100, 4);
}

/* No takeover: the deferred read finds our own write and the tail goes on
 * to upload its batches (the read before them, then manifest and
 * watermark), paused there while the application commits. */
static void test_deferred_read_paused_under_writer(void **state)
{
	(void)state;
	for (unsigned how = 0; how < WT_MUTATIONS; how++) {
		struct wt_env e;
		struct ws_outcome o;
		struct wt_mutator m;
		env_init(&e, "deferred");
		struct ws_stream *st = carried_owner(&e, 4);
		wt_mutator_init(&m, &e, how);
		wt_write_txn(e.w, 100, 300);
		wt_mutator_record(&m);
		struct ws_store_stats a = e.sink->store->stats;
		assert_int_equal(ws_fault_arm_pause("stream.before_deferred_fence", 1, wt_mutate, &m), 0);
		wt_tail_ok(st, &o);
		ws_fault_disarm();
		struct ws_store_stats b = e.sink->store->stats;
		if (m.fired != 1)
			fail_msg("mutation %u: the deferred read was not reached", how);
		assert_int_equal(o.kind, WS_OUTCOME_STREAMED);
		assert_true(b.gets > a.gets); /* it read before uploading */
		/* What it acknowledged is a state the source committed. */
		uint64_t got = wt_restore_hash(&e, TENANT, NULL, NULL);
		bool known = false;
		for (unsigned k = 0; k < m.nstates; k++)
			known = known || m.states[k] == got;
		if (!known)
			fail_msg("mutation %u: restored a state the source never committed", how);
		for (int k = 0; k < 3; k++)
			wt_tail_ok(st, &o);
		restore_is(&e, wt_content_hash(e.w, NULL), __LINE__);
		ws_stream_close(st);
		wt_mutator_free(&m);
		wt_env_free(&e);
	}
}

/* ---- the default codec, by sink ------------------------------------------- */

/*
 * The codec a stream gets when it names none (WS_CODEC_DEFAULT) follows
 * its sink: zstd on s3://, none on file:// (core/sink.c; README.md
 * "Compression and encryption"). One transaction of ~150 pages of one
 * repeated byte: stored plain it puts more than its pages' bytes, sealed
 * with zstd a small fraction of them; restore_is restores and verifies it
 * either way. (Here because this file runs on both sinks.)
 */
static void test_default_codec_by_sink(void **state)
{
	struct wt_env e;
	struct ws_outcome o;
	struct ws_sink_stats before, after;
	(void)state;
	env_init(&e, "codec");
	wt_exec(e.w, "WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 200) "
		     "INSERT INTO t SELECT i, zeroblob(3000) FROM s");
	const uint64_t pages_bytes = 150u * 4096u;
	struct ws_stream *st = open_epoch(&e, 1, 0);
	ws_sink_get_stats(e.sink, &before);
	wt_tail_ok(st, &o);
	ws_sink_get_stats(e.sink, &after);
	const uint64_t put = after.bytes_put - before.bytes_put;
#ifdef FENCE_CAS_S3
	if (put >= pages_bytes / 8)
		fail_msg("s3:// default: %" PRIu64 " bytes put for %" PRIu64 " bytes of pages: not compressed", put,
			 pages_bytes);
#else
	if (put < pages_bytes)
		fail_msg("file:// default: %" PRIu64 " bytes put for %" PRIu64 " bytes of pages: compressed", put,
			 pages_bytes);
#endif
	ws_stream_close(st);
	restore_is(&e, wt_content_hash(e.w, NULL), __LINE__);
	/* Checkpoint artifacts stay unsealed unless a codec is named, on
	 * either sink (sealing one takes a second temporary file). */
	struct ws_checkpoint_opts co;
	struct ws_art_seals as;
	memset(&co, 0, sizeof(co));
	assert_int_equal(ws_art_seals_resolve(e.sink, &co, &as), 0);
	assert_false(ws_seal_on(ws_art_seals_for(&as, TENANT)));
	ws_art_seals_free(&as);
	wt_env_free(&e);
}

/* ---- a 412 that is no takeover ------------------------------------------- */

/*
 * The store refuses the swap on the etag our own write got back though
 * nobody wrote since: another form of the same etag (W/"…", as a proxy
 * that weakens the ETags of the replies it passes on sends). Neither
 * radosgw nor a directory can be made to answer a PUT with another form
 * than their reads give, so the etag the stream kept is rewritten in
 * place (the one fault faked here). The tail must not loop nor lose
 * frames: one refusal, then it fences by a read, and so do later tails.
 */
static void test_own_etag_refused(void **state)
{
	struct wt_env e;
	struct ws_outcome o;
	char weak[WS_ETAG_MAX];
	(void)state;
	env_init(&e, "etag-form");
	struct ws_stream *st = carried_owner(&e, 0);
	assert_true(st->mark.wrote_last && st->mark.etag.s[0]);
	snprintf(weak, sizeof(weak), "W/\"%.200s\"", st->mark.etag.s);
	snprintf(st->mark.etag.s, sizeof(st->mark.etag.s), "%s", weak);
	wt_write_txn(e.w, 3, 300);
	struct ws_store_stats a = e.sink->store->stats;
	int rc = ws_stream_tail_frames(st, &o);
	struct ws_store_stats b = e.sink->store->stats;
	if (rc)
		fail_msg("tail after a refused etag: %s (%s)", ws_strerror(rc), ws_errmsg());
	assert_int_equal(o.kind, WS_OUTCOME_STREAMED);
	assert_true(st->mark.own_etag_refused);
	/* One refusal, the read, the swap on the read's etag: no loop. */
	if (b.puts - a.puts > 3)
		fail_msg("%" PRIu64 " PUTs for one tail after a refused etag", b.puts - a.puts);
	restore_is(&e, wt_content_hash(e.w, NULL), __LINE__);
	for (int i = 0; i < 3; i++) {
		wt_write_txn(e.w, 3, 300);
		a = e.sink->store->stats;
		wt_tail_ok(st, &o);
		b = e.sink->store->stats;
		assert_int_equal(o.kind, WS_OUTCOME_STREAMED);
		assert_true(b.gets > a.gets);               /* fenced by a read now */
		assert_int_equal(b.precond_failed, a.precond_failed); /* and refused no more */
		restore_is(&e, wt_content_hash(e.w, NULL), __LINE__);
	}
	ws_stream_close(st);
	wt_env_free(&e);
}

#ifdef FENCE_CAS_S3
static int setup_bucket(void **state)
{
	(void)state;
	return wt_s3_fresh_bucket("fcas", g_bucket, sizeof(g_bucket));
}
#endif

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_one_request_per_tail),
		cmocka_unit_test(test_takeover_between_tails),
		cmocka_unit_test(test_takeover_at_skipped_read),
		cmocka_unit_test(test_takeover_before_deferred_read),
		cmocka_unit_test(test_deferred_read_paused_under_writer),
		cmocka_unit_test(test_own_etag_refused),
		cmocka_unit_test(test_default_codec_by_sink),
	};
#ifdef FENCE_CAS_S3
	if (wt_s3_load_env("test_core_fence_cas_s3") != 0)
		return 1;
	return WT_RUN_GROUP(tests, setup_bucket, NULL);
#else
	return WT_RUN_GROUP(tests, NULL, NULL);
#endif
}
