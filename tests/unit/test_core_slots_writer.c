/*
 * Manifest slots, the writer (docs/SLOTS.md 3.1 and 3.2, "As built
 * (writer)"): a stream with slots = on acknowledges each tail with one
 * create-once slot, opens its lane (closing the head's lane first, then
 * swapping the watermark), and writes the watermark's hint lazily.
 *
 * Each test runs a real SQLite writer and checks every acknowledged
 * state against the record of what the source committed, by restore
 * --frame (with its generation) and the latest by restore and verify.
 * The pause-site tests change the database in the pause (a commit, then
 * a WAL checkpoint PASSIVE, FULL, RESTART or TRUNCATE and another commit,
 * or a transaction that spills its cache: wt_mutate), and the other owner
 * runs its whole tail there, in the paused thread.
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

#include "core_internal.h"
#include "follow.h"
#include "history.h"
#include "coreutil.h"
#include "sink.h"
#include "slots.h"
#include "stream_internal.h"
#include "throttlestore.h"
#include "walship.h"
#include "ws_fault.h"
#include "ws_store.h"

#define TENANT "ledger"
#define SLOT_TEST_INLINE 32768
#define ACKED_MAX 128

/* ---- the record -------------------------------------------------------- */

/* A state a tail acknowledged: its generation and last frame, and the
 * source's content hash then (0: any state the mutator recorded). */
struct acked {
	char gen[WS_GEN_ID_MAX];
	uint64_t frame, hash;
};

struct world {
	struct wt_env e;
	char url[1024];           /* the sink's: file://, or an S3 bucket's prefix (SLOTS_WRITER_S3) */
	struct wt_mutator m;
	struct acked a[ACKED_MAX];
	unsigned n;
};

#ifdef SLOTS_WRITER_S3
static char g_bucket[64];
static unsigned g_prefix_n;
#endif

static void world_init(struct world *w, const char *tag, unsigned how)
{
	memset(w, 0, sizeof(*w));
	wt_env_init(&w->e, tag, 0);
	wt_mutator_init(&w->m, &w->e, how);
	snprintf(w->url, sizeof(w->url), "%s", w->e.sink_url);
#ifdef SLOTS_WRITER_S3
	int err = 0;
	snprintf(w->url, sizeof(w->url), "s3://%s/%s-%ld-%u?endpoint=%s", g_bucket, tag, (long)getpid(), ++g_prefix_n,
		 getenv("WS_S3_ENDPOINT"));
	ws_sink_close(w->e.sink);
	w->e.sink = ws_sink_open(w->url, &err);
	if (!w->e.sink)
		fail_msg("open %s: %s", w->url, ws_errmsg());
#endif
}

static void world_free(struct world *w)
{
	wt_mutator_free(&w->m);
	wt_env_free(&w->e);
}

static struct ws_stream *open_owner(struct world *w, struct ws_sink *sink, uint64_t epoch, uint32_t hint_slots,
				    uint32_t batch_frames_max)
{
	struct ws_stream_config c;
	int err = -1;
	memset(&c, 0, sizeof(c));
	c.tenant = TENANT;
	c.db_path = w->e.db;
	c.epoch = epoch;
	c.pointer_generation = 1;
	c.policy = WS_POLICY_THROTTLE;
	c.wal_checkpoint_bytes = UINT64_MAX;
	c.inline_batch_bytes_max = SLOT_TEST_INLINE;
	c.batch_frames_max = batch_frames_max;
	c.slots = true;
	c.hint_slots = hint_slots;
	struct ws_stream *st = ws_stream_open(sink, &c, &err);
	if (!st)
		fail_msg("ws_stream_open: %s (%s)", ws_strerror(err), ws_errmsg());
	assert_true(ws_stream_slots(st));
	return st;
}

static struct ws_sink *second_sink(struct world *w)
{
	int err = 0;
	struct ws_sink *s = ws_sink_open(w->url, &err);
	if (!s)
		fail_msg("open %s: %s", w->url, ws_errmsg());
	return s;
}

/* The head st just acknowledged, as the state hash (0: any recorded). */
static void acked(struct world *w, const struct ws_stream *st, uint64_t hash)
{
	const struct ws_fmt_gen *g = &st->mark.wm.gen;
	assert_true(w->n < ACKED_MAX);
	struct acked *a = &w->a[w->n++];
	snprintf(a->gen, sizeof(a->gen), "g%08x-%08x%08x", g->checkpoint_seq, g->salt1, g->salt2);
	a->frame = st->mark.wm.last_frame;
	a->hash = hash;
}

/* A tail with nothing committed meanwhile: acknowledged, the state now. */
static void tail_acked(struct world *w, struct ws_stream *st)
{
	struct ws_outcome o;
	wt_tail_ok(st, &o);
	if (o.kind != WS_OUTCOME_STREAMED && o.kind != WS_OUTCOME_RESTARTED)
		fail_msg("tail: outcome %d, not Streamed or Restarted", (int)o.kind);
	acked(w, st, wt_content_hash(w->e.w, NULL));
}

static void tail_is(struct ws_stream *st, enum ws_outcome_kind kind, int line)
{
	struct ws_outcome o;
	int rc = ws_stream_tail_frames(st, &o);
	if (rc)
		fail_msg("line %d: tail failed: %s (%s)", line, ws_strerror(rc), ws_errmsg());
	if (o.kind != kind)
		fail_msg("line %d: outcome %d, not %d", line, (int)o.kind, (int)kind);
}

/* Every acknowledged state restores by --frame; the latest is the source's now; verify passes. */
static void check_all(struct world *w, const char *what)
{
	struct wt_problems pb = { 0 };
	for (unsigned i = 0; i < w->n; i++) {
		struct ws_restore_opts o = { 0 };
		const struct acked *a = &w->a[i];
		if (!a->frame)
			continue;
		o.frame = a->frame;
		o.generation = a->gen;
		uint64_t h = wt_restore_hash(&w->e, TENANT, &o, NULL);
		if (a->hash ? h != a->hash : wt_mutator_find(&w->m, h) < 0)
			fail_msg("%s: restore --frame %" PRIu64 " --generation %s (acknowledged state %u) is not the "
				 "state the source committed", what, a->frame, a->gen, i);
	}
	if (wt_restore_hash(&w->e, TENANT, NULL, NULL) != wt_content_hash(w->e.w, NULL))
		fail_msg("%s: restore-latest is not the source's state", what);
	if (ws_verify(w->e.sink, TENANT, wt_problem, &pb) != 0 || pb.n)
		fail_msg("%s: verify: %u problems, first %s (%s)", what, pb.n, pb.first, ws_errmsg());
}

/* ---- the sink ---------------------------------------------------------- */

static void slot_key(char key[WS_KEY_MAX], uint64_t epoch, uint64_t lane, uint64_t seq)
{
	assert_int_equal(ws_key_slot(key, WS_KEY_MAX, TENANT, epoch, 1, lane, seq), 0);
}

/* The object at slot seq of lane: its kind, and decoded into m or c. */
static enum ws_fmt_slot_kind slot_read(struct world *w, uint64_t epoch, uint64_t lane, uint64_t seq,
				       struct ws_fmt_manifest *m, struct ws_fmt_close *c)
{
	char key[WS_KEY_MAX];
	struct ws_buf b;
	enum ws_fmt_slot_kind kind;
	ws_buf_init(&b, WS_SLOT_BYTES_MAX);
	if (ws_slot_get(w->e.sink->store, TENANT, epoch, 1, lane, seq, &b, &kind, key) != 0)
		fail_msg("slot %" PRIu64 " of lane %016" PRIx64 ": %s", seq, lane, ws_errmsg());
	if (kind == WS_FMT_SLOT_MANIFEST)
		assert_int_equal(ws_fmt_manifest_decode(b.data, b.len, m), 0);
	else
		assert_int_equal(ws_fmt_close_decode(b.data, b.len, c), 0);
	ws_buf_free(&b);
	return kind;
}

static bool slot_there(struct world *w, uint64_t epoch, uint64_t lane, uint64_t seq)
{
	char key[WS_KEY_MAX];
	struct ws_obj_info info;
	slot_key(key, epoch, lane, seq);
	return ws_store_head(w->e.sink->store, key, &info) == 0;
}

/* The close record at slot seq of lane: it names closer's lane. */
static void closed_by(struct world *w, uint64_t epoch, uint64_t lane, uint64_t seq, const struct ws_stream *closer)
{
	struct ws_fmt_manifest m;
	struct ws_fmt_close c;
	if (slot_read(w, epoch, lane, seq, &m, &c) != WS_FMT_SLOT_CLOSE)
		fail_msg("slot %" PRIu64 " of lane %016" PRIx64 " is no close record", seq, lane);
	assert_int_equal(c.closer_epoch, closer->epoch);
	assert_int_equal(c.closer_lane, closer->mark.lane);
}

static void state_unchanged(const char *before, char *after, int line)
{
	if (strcmp(before, after) != 0)
		fail_msg("line %d: the stale owner changed the sink:\n--- before\n%.2000s\n--- now\n%.2000s", line,
			 before, after);
	free(after);
}

static void checkpoint(struct world *w, const char *mode)
{
	char sql[64];
	snprintf(sql, sizeof(sql), "PRAGMA wal_checkpoint(%s)", mode);
	sqlite3_exec(w->e.w, sql, NULL, NULL, NULL); /* busy is an answer too */
}

static struct ws_fmt_watermark wm_now(struct world *w)
{
	struct ws_fmt_watermark wm;
	struct ws_buf keep;
	ws_buf_init(&keep, WS_WM_BYTES_MAX);
	if (ws_wm_load_any(w->e.sink->store, TENANT, &wm, NULL, &keep) != 0)
		fail_msg("watermark: %s", ws_errmsg());
	ws_buf_free(&keep);
	wm.carried = NULL;
	return wm;
}

/* ---- tests ------------------------------------------------------------- */

/* 3.2 item 1: after the lane opens, each small tail is its slot's create
 * alone (no read), plus the hint's swap once per hint_slots slots. */
static void test_slot_one_request_per_tail(void **state)
{
	struct world w;
	(void)state;
	world_init(&w, "slot_one_req", 0);
	struct ws_stream *a = open_owner(&w, w.e.sink, 1, 8, 0);
	wt_write_txn(w.e.w, 50, 300);
	tail_acked(&w, a); /* a re-base: the lane opens, its first slot */
	struct ws_fmt_watermark wm = wm_now(&w);
	assert_int_equal(wm.version, 4);
	assert_int_equal(wm.lane, a->mark.lane);
	assert_int_equal(wm.seq, 0); /* the lane opened on nothing */
	unsigned hints = 0;
	for (int i = 0; i < 40; i++) {
		const struct ws_store_stats s0 = w.e.sink->store->stats;
		wt_write_txn(w.e.w, 2, 200);
		tail_acked(&w, a);
		const struct ws_store_stats s1 = w.e.sink->store->stats;
		const bool hint = a->mark.wm.seq % 8 == 0;
		hints += hint;
		if (s1.puts - s0.puts != 1u + hint || s1.gets != s0.gets || s1.heads != s0.heads ||
		    s1.lists != s0.lists)
			fail_msg("tail %d (slot %" PRIu64 "): %" PRIu64 " puts, %" PRIu64 " gets, %" PRIu64 " heads, %" PRIu64
				 " lists; want %u put(s) and nothing else", i, a->mark.wm.seq, s1.puts - s0.puts,
				 s1.gets - s0.gets, s1.heads - s0.heads, s1.lists - s0.lists, 1u + hint);
	}
	assert_int_equal(hints, 5);
	wm = wm_now(&w);
	assert_int_equal(wm.seq, 40); /* the last hint */
	assert_int_equal(a->mark.wm.seq, 41);
	check_all(&w, "one request per tail");
	ws_stream_close(a);
	world_free(&w);
}

/* Pause callbacks: change the database, then what the test asks. */
struct pause {
	struct world *w;
	struct ws_stream *other;  /* tailed in the pause (acknowledged), or NULL */
	bool other_fenced;        /* ... and expected Fenced instead */
	bool nothing_shipped;     /* restore answers "nothing shipped", verify passes */
	bool commit_after;        /* one more commit after the other's tail */
	int fired;
};

static void in_pause(const char *site, void *arg)
{
	struct pause *p = arg;
	p->fired++;
	wt_mutate(site, &p->w->m);
	if (p->nothing_shipped) {
		struct wt_problems pb = { 0 };
		char *out = wt_out_path(&p->w->e);
		int rc = ws_restore(p->w->e.sink, TENANT, NULL, out);
		if (rc != WS_ENOTFOUND)
			fail_msg("%s: restore in the pause: %s (%s), not \"nothing shipped\"", site, ws_strerror(rc),
				 ws_errmsg());
		assert_int_not_equal(access(out, F_OK), 0);
		free(out);
		if (ws_verify(p->w->e.sink, TENANT, wt_problem, &pb) != 0 || pb.n)
			fail_msg("%s: verify in the pause: %s", site, pb.first);
	}
	if (p->other && p->other_fenced)
		tail_is(p->other, WS_OUTCOME_FENCED, __LINE__);
	else if (p->other)
		tail_acked(p->w, p->other);
	if (p->commit_after)
		wt_write_txn(p->w->e.w, 2, 200);
}

static unsigned slot_keys(struct world *w)
{
	unsigned n = 0;
	char *tok = NULL;
	for (;;) {
		struct ws_list_page p;
		memset(&p, 0, sizeof(p));
		assert_int_equal(ws_store_list(w->e.sink->store, TENANT "/", tok, 1000, &p), 0);
		for (size_t i = 0; i < p.count; i++)
			n += ws_key_slot_any(p.keys[i]);
		free(tok);
		tok = p.truncated ? strdup(p.next_token) : NULL;
		ws_list_page_free(&p);
		if (!tok)
			break;
	}
	return n;
}

/* 3.2 item 2: paused before the first slot's create, the lane is open and
 * nothing is shipped: restore says so, verify passes. */
static void test_slot_first_tail_opens_lane(void **state)
{
	(void)state;
	for (unsigned how = 0; how < WT_MUTATIONS; how++) {
		struct world w;
		world_init(&w, "slot_first", how);
		struct ws_stream *a = open_owner(&w, w.e.sink, 1, 8, 0);
		struct pause p = { .w = &w, .nothing_shipped = true };
		wt_write_txn(w.e.w, 30, 300);
		wt_mutator_record(&w.m);
		assert_int_equal(ws_fault_add("stream.before_slot_put", 1, WS_FAULT_PAUSE, in_pause, &p), 0);
		struct ws_outcome o;
		wt_tail_ok(a, &o);
		ws_fault_disarm();
		assert_int_equal(p.fired, 1);
		acked(&w, a, 0);
		assert_int_equal(slot_keys(&w), 1);
		assert_true(slot_there(&w, 1, a->mark.lane, 1));
		tail_acked(&w, a); /* what the pause committed */
		check_all(&w, "first tail");
		ws_stream_close(a);
		world_free(&w);
	}
}

/* A (epoch 1, hint_slots 4) opened its lane with a re-base and shipped one small tail. */
static struct ws_stream *owner_shipped(struct world *w)
{
	struct ws_stream *a = open_owner(w, w->e.sink, 1, 4, 0);
	wt_write_txn(w->e.w, 40, 300);
	tail_acked(w, a);
	wt_write_txn(w->e.w, 2, 200);
	tail_acked(w, a);
	return a;
}

/* The lane's opening paused under the writer (its first tail: before and
 * after the watermark's swap; a takeover's: before its close, and after
 * the old owner's refused create): what is acknowledged is a state the
 * source committed, and the next tail reaches the source's latest. */
static void test_slot_open_sites_paused_under_writer(void **state)
{
	static const char *const sites[] = { "stream.before_lane_open", "stream.after_lane_open",
					     "stream.before_lane_close", "stream.slot_taken" };
	(void)state;
	for (size_t i = 0; i < sizeof(sites) / sizeof(sites[0]); i++) {
		for (unsigned how = 0; how < WT_MUTATIONS; how++) {
			struct world w;
			struct ws_outcome o;
			world_init(&w, "slot_open_sites", how);
			const bool takeover = i >= 2;
			struct ws_stream *a = takeover ? owner_shipped(&w) : open_owner(&w, w.e.sink, 1, 4, 0);
			struct ws_sink *sb = second_sink(&w);
			struct ws_stream *b = open_owner(&w, sb, 2, 4, 0);
			struct pause p = { .w = &w };
			if (i == 3) {
				wt_write_txn(w.e.w, 2, 200);
				tail_acked(&w, b); /* b takes over first: a's next create is refused */
			}
			struct ws_stream *paused = i == 2 ? b : a;
			wt_write_txn(w.e.w, 20, 300);
			wt_mutator_record(&w.m);
			assert_int_equal(ws_fault_add(sites[i], 1, WS_FAULT_PAUSE, in_pause, &p), 0);
			int rc = ws_stream_tail_frames(paused, &o);
			ws_fault_disarm();
			if (rc)
				fail_msg("site %s, mutation %u: %s (%s)", sites[i], how, ws_strerror(rc), ws_errmsg());
			if (p.fired != 1)
				fail_msg("site %s, mutation %u: not reached", sites[i], how);
			if (i == 3) {
				assert_int_equal(o.kind, WS_OUTCOME_FENCED);
				paused = b;
			} else {
				acked(&w, paused, 0); /* scanned before or after the pause's commits */
			}
			wt_write_txn(w.e.w, 2, 200);
			tail_acked(&w, paused);
			check_all(&w, sites[i]);
			ws_stream_close(a);
			ws_stream_close(b);
			ws_sink_close(sb);
			world_free(&w);
		}
	}
}

/* 3.2 item 3: B takes over between A's tails; A's next tails are Fenced
 * and write nothing, whatever they hold. */
static void test_slot_takeover_between_tails(void **state)
{
	struct world w;
	struct ws_outcome o;
	(void)state;
	world_init(&w, "slot_takeover", 0);
	struct ws_sink *sb = second_sink(&w);
	struct ws_stream *a = open_owner(&w, w.e.sink, 1, 4, 8);
	wt_write_txn(w.e.w, 40, 300);
	tail_acked(&w, a);
	for (int i = 0; i < 5; i++) {
		wt_write_txn(w.e.w, 2, 200);
		tail_acked(&w, a);
	}
	const uint64_t lane_a = a->mark.lane, h = a->mark.wm.seq;
	checkpoint(&w, "PASSIVE");
	wt_write_txn(w.e.w, 2, 200);
	struct ws_stream *b = open_owner(&w, sb, 2, 4, 8);
	tail_acked(&w, b);
	assert_int_not_equal(b->mark.lane, lane_a);
	closed_by(&w, 1, lane_a, h + 1, b);
	assert_true(slot_there(&w, 2, b->mark.lane, h + 1));
	assert_int_equal(wm_now(&w).epoch, 2);
	char *before = wt_tenant_state(w.e.sink, TENANT);
	checkpoint(&w, "FULL");
	wt_write_txn(w.e.w, 2, 200);
	const uint64_t pre = w.e.sink->store->stats.precond_failed, puts = w.e.sink->store->stats.puts;
	tail_is(a, WS_OUTCOME_FENCED, __LINE__); /* one inline tail: its create is refused */
	assert_int_equal(w.e.sink->store->stats.precond_failed, pre + 1);
	assert_int_equal(w.e.sink->store->stats.puts, puts + 1);
	state_unchanged(before, wt_tenant_state(w.e.sink, TENANT), __LINE__);
	checkpoint(&w, "RESTART");
	wt_write_txn(w.e.w, 60, 3000); /* batches of its own */
	const uint64_t puts2 = w.e.sink->store->stats.puts;
	tail_is(a, WS_OUTCOME_FENCED, __LINE__);
	assert_int_equal(w.e.sink->store->stats.puts, puts2);
	state_unchanged(before, wt_tenant_state(w.e.sink, TENANT), __LINE__);
	checkpoint(&w, "TRUNCATE");
	free(before);
	tail_acked(&w, b);
	(void)o;
	check_all(&w, "takeover between tails");
	ws_stream_close(a);
	ws_stream_close(b);
	ws_sink_close(sb);
	world_free(&w);
}

/* 3.2 item 4: B, opening its lane, is paused before its close of A's lane;
 * A ships meanwhile (slot H+1). B's close is refused, it reads the head
 * again and closes at H+2, its first slot linking A's H+1. */
static void test_slot_old_owner_creates_before_close(void **state)
{
	(void)state;
	for (unsigned how = 0; how < WT_MUTATIONS; how++) {
		struct world w;
		world_init(&w, "slot_before_close", how);
		struct ws_sink *sb = second_sink(&w);
		struct ws_stream *a = owner_shipped(&w);
		const uint64_t lane_a = a->mark.lane, h = a->mark.wm.seq;
		struct ws_stream *b = open_owner(&w, sb, 2, 4, 0);
		struct pause p = { .w = &w, .other = a, .commit_after = true };
		wt_write_txn(w.e.w, 2, 200);
		assert_int_equal(ws_fault_add("stream.before_lane_close", 1, WS_FAULT_PAUSE, in_pause, &p), 0);
		tail_acked(&w, b);
		ws_fault_disarm();
		assert_int_equal(p.fired, 1);
		assert_int_equal(a->mark.wm.seq, h + 1); /* A's slot, acknowledged in the pause */
		struct ws_fmt_manifest m;
		struct ws_fmt_close c;
		assert_int_equal(slot_read(&w, 1, lane_a, h + 1, &m, &c), WS_FMT_SLOT_MANIFEST);
		char a_key[WS_KEY_MAX];
		slot_key(a_key, 1, lane_a, h + 1);
		ws_fmt_manifest_free(&m);
		closed_by(&w, 1, lane_a, h + 2, b);
		assert_int_equal(slot_read(&w, 2, b->mark.lane, h + 2, &m, &c), WS_FMT_SLOT_MANIFEST);
		assert_string_equal(m.prev_key, a_key);
		ws_fmt_manifest_free(&m);
		tail_is(a, WS_OUTCOME_FENCED, __LINE__);
		wt_write_txn(w.e.w, 2, 200);
		tail_acked(&w, b);
		check_all(&w, "old owner creates before the close");
		ws_stream_close(a);
		ws_stream_close(b);
		ws_sink_close(sb);
		world_free(&w);
	}
}

/* 3.2 item 5: A is paused before its slot's create; B takes over in the
 * pause. A's create is refused by B's close: Fenced when the slot was its
 * only write, WS_ELOSTRACE when it uploaded batches first. */
static void old_owner_after_close(bool batches)
{
	for (unsigned how = 0; how < WT_MUTATIONS; how++) {
		struct world w;
		struct ws_outcome o;
		world_init(&w, batches ? "slot_after_close_b" : "slot_after_close", how);
		struct ws_sink *sb = second_sink(&w);
		struct ws_stream *a = open_owner(&w, w.e.sink, 1, 4, 8);
		wt_write_txn(w.e.w, 40, 300);
		tail_acked(&w, a);
		const uint64_t lane_a = a->mark.lane, h = a->mark.wm.seq;
		struct ws_stream *b = open_owner(&w, sb, 2, 4, 8);
		struct pause p = { .w = &w, .other = b };
		wt_write_txn(w.e.w, batches ? 60 : 2, batches ? 3000 : 200);
		assert_int_equal(ws_fault_add("stream.before_slot_put", 1, WS_FAULT_PAUSE, in_pause, &p), 0);
		int rc = ws_stream_tail_frames(a, &o);
		ws_fault_disarm();
		assert_int_equal(p.fired, 1);
		if (batches) {
			if (rc != WS_ELOSTRACE)
				fail_msg("A's tail: %s (%s), not a lost race", ws_strerror(rc), ws_errmsg());
		} else {
			assert_int_equal(rc, 0);
			assert_int_equal(o.kind, WS_OUTCOME_FENCED);
			assert_int_equal(o.u.fenced.current_epoch, 2);
		}
		assert_int_equal(a->mark.wm.seq, h); /* nothing after H acknowledged */
		closed_by(&w, 1, lane_a, h + 1, b);
		tail_is(a, WS_OUTCOME_FENCED, __LINE__);
		wt_write_txn(w.e.w, 2, 200);
		tail_acked(&w, b);
		check_all(&w, batches ? "old owner with batches after the close" : "old owner after the close");
		ws_stream_close(a);
		ws_stream_close(b);
		ws_sink_close(sb);
		world_free(&w);
	}
}

static void test_slot_old_owner_after_close(void **state)
{
	(void)state;
	old_owner_after_close(false);
	old_owner_after_close(true);
}

/*
 * 3.2 item 6: two new owners race. (1) B (epoch 2), opening its lane, is
 * paused before its close of A's lane; C (epoch 3) takes over whole in the
 * pause (closes A at H+1): B's close is refused by C's, which fences it:
 * Fenced, having written nothing. (2) B closed A and swapped the
 * watermark, and is paused before its first slot's create; C closes B's
 * empty lane at H+1: B's create is refused: Fenced. Readers walk
 * A -> close -> B -> close -> C.
 */
static void two_new_owners(bool b_opened)
{
	for (unsigned how = 0; how < WT_MUTATIONS; how++) {
		struct world w;
		struct ws_outcome o;
		world_init(&w, b_opened ? "slot_race_opened" : "slot_race", how);
		struct ws_sink *sb = second_sink(&w), *sc = second_sink(&w);
		struct ws_stream *a = owner_shipped(&w);
		const uint64_t lane_a = a->mark.lane, h = a->mark.wm.seq;
		struct ws_stream *b = open_owner(&w, sb, 2, 4, 0);
		struct ws_stream *c = open_owner(&w, sc, 3, 4, 0);
		struct pause p = { .w = &w, .other = c };
		wt_write_txn(w.e.w, 2, 200);
		const uint64_t puts = sb->store->stats.puts;
		assert_int_equal(ws_fault_add(b_opened ? "stream.before_slot_put" : "stream.before_lane_close", 1,
					      WS_FAULT_PAUSE, in_pause, &p), 0);
		int rc = ws_stream_tail_frames(b, &o);
		ws_fault_disarm();
		assert_int_equal(p.fired, 1);
		if (rc)
			fail_msg("B's tail: %s (%s)", ws_strerror(rc), ws_errmsg());
		assert_int_equal(o.kind, WS_OUTCOME_FENCED);
		assert_int_equal(o.u.fenced.current_epoch, 3);
		/* (1) nothing written; (2) the close of A and the watermark, then a refused create */
		assert_int_equal(sb->store->stats.puts - puts, b_opened ? 3 : 1);
		struct ws_fmt_watermark wm = wm_now(&w);
		assert_int_equal(wm.epoch, 3);
		assert_int_equal(wm.lane, c->mark.lane);
		if (b_opened) {
			/* A's lane closed by B, B's (empty) closed by C at the same sequence. */
			struct ws_fmt_manifest m;
			struct ws_fmt_close cl;
			assert_int_equal(slot_read(&w, 1, lane_a, h + 1, &m, &cl), WS_FMT_SLOT_CLOSE);
			assert_int_equal(cl.closer_epoch, 2);
			closed_by(&w, 2, cl.closer_lane, h + 1, c);
		} else {
			closed_by(&w, 1, lane_a, h + 1, c);
		}
		tail_is(b, WS_OUTCOME_FENCED, __LINE__);
		tail_is(a, WS_OUTCOME_FENCED, __LINE__);
		wt_write_txn(w.e.w, 2, 200);
		tail_acked(&w, c);
		check_all(&w, b_opened ? "two new owners, B's lane opened" : "two new owners");
		ws_stream_close(a);
		ws_stream_close(b);
		ws_stream_close(c);
		ws_sink_close(sb);
		ws_sink_close(sc);
		world_free(&w);
	}
}

static void test_slot_takeover_race_two_new_owners(void **state)
{
	(void)state;
	two_new_owners(false);
	two_new_owners(true);
}

/* A stream on a throttle store in front of the file store, forwarding its
 * conditions (a file store never loses a reply). */
static struct ws_store *throttled(struct world *w)
{
	struct ws_store *t = wt_throttle_store_open(w->e.sink->store, 1, 1);
	assert_non_null(t);
	wt_throttle_forward_conditions(t);
	w->e.sink->store = t;
	return t;
}

/* 3.2 item 7: a slot's create lands but its reply is lost (an ambiguous
 * failure): nothing acknowledged; the next tail finds our own bytes there,
 * adopts the slot and ships the rest after it, no frame twice. (a): the
 * create never landed: the next tail's slot at the same sequence holds
 * more frames. (b): the reply lost and B takes over before A's next tail:
 * B's probe passes A's slot and closes after it; A's next tail is Fenced. */
static void test_slot_ambiguous_create_lost_reply(void **state)
{
	(void)state;
	/* 2: landed, reply lost, and B takes over before A's next tail;
	 * 1: landed, reply lost; 0: never landed. */
	for (int v = 2; v >= 0; v--) {
		struct world w;
		struct ws_outcome o;
		world_init(&w, v == 2 ? "slot_lost_takeover" : v ? "slot_lost_reply" : "slot_never_landed", 0);
		struct ws_store *t = throttled(&w);
		struct ws_stream *a = owner_shipped(&w);
		const uint64_t h = a->mark.wm.seq, lane = a->mark.lane;
		char key[WS_KEY_MAX], suffix[32];
		slot_key(key, 1, lane, h + 1);
		snprintf(suffix, sizeof(suffix), "%s", strrchr(key, '/'));
		if (v)
			wt_throttle_lost_reply_rc(t, suffix, 1, -EIO);
		else
			assert_int_equal(ws_fault_add("file.put.before_publish", 1, WS_FAULT_FAIL, NULL, NULL), 0);
		wt_write_txn(w.e.w, 2, 200);
		const uint64_t lost_hash = wt_content_hash(w.e.w, NULL);
		int rc = ws_stream_tail_frames(a, &o);
		ws_fault_disarm();
		assert_int_not_equal(rc, 0);
		assert_int_equal(slot_there(&w, 1, lane, h + 1), v != 0);
		struct ws_fmt_manifest m1, m2;
		struct ws_fmt_close c;
		if (v) {
			/* It landed: that state is acknowledged after all (same generation as H). */
			assert_int_equal(slot_read(&w, 1, lane, h + 1, &m1, &c), WS_FMT_SLOT_MANIFEST);
			w.a[w.n] = w.a[w.n - 1];
			w.a[w.n].frame = m1.last_frame;
			w.a[w.n++].hash = lost_hash;
			ws_fmt_manifest_free(&m1);
		}
		wt_write_txn(w.e.w, 2, 200);
		if (v == 2) {
			struct ws_sink *sb = second_sink(&w);
			struct ws_stream *b = open_owner(&w, sb, 2, 4, 0);
			tail_acked(&w, b); /* its probe passes A's H + 1, its close is at H + 2 */
			closed_by(&w, 1, lane, h + 2, b);
			tail_is(a, WS_OUTCOME_FENCED, __LINE__);
			check_all(&w, "lost reply, then a takeover");
			ws_stream_close(b);
			ws_sink_close(sb);
			ws_stream_close(a);
			world_free(&w);
			continue;
		}
		tail_acked(&w, a);
		assert_int_equal(slot_read(&w, 1, lane, h + 1, &m1, &c), WS_FMT_SLOT_MANIFEST);
		if (v) {
			/* Adopted: the rest follows it, no frame twice. */
			assert_int_equal(a->mark.wm.seq, h + 2);
			assert_int_equal(slot_read(&w, 1, lane, h + 2, &m2, &c), WS_FMT_SLOT_MANIFEST);
			assert_int_equal(m2.first_frame, m1.last_frame + 1);
			ws_fmt_manifest_free(&m2);
		} else {
			/* The next create of H + 1 holds more frames. */
			assert_int_equal(a->mark.wm.seq, h + 1);
			assert_int_equal(m1.last_frame, a->mark.wm.last_frame);
			assert_false(slot_there(&w, 1, lane, h + 2));
		}
		ws_fmt_manifest_free(&m1);
		check_all(&w, v ? "lost reply" : "create never landed");
		ws_stream_close(a);
		world_free(&w);
	}
}

/* 3.2 item 8: A's slot is acknowledged; paused before its hint's swap, B
 * takes over. The swap is refused, A's tail stays Streamed, its next tail
 * is Fenced with no write, and A's slot is on B's chain. */
static void test_slot_hint_cas_loses_to_takeover(void **state)
{
	(void)state;
	for (unsigned how = 0; how < WT_MUTATIONS; how++) {
		struct world w;
		struct ws_outcome o;
		world_init(&w, "slot_hint_lost", how);
		struct ws_sink *sb = second_sink(&w);
		struct ws_stream *a = open_owner(&w, w.e.sink, 1, 1, 0);
		wt_write_txn(w.e.w, 40, 300);
		tail_acked(&w, a);
		const uint64_t lane_a = a->mark.lane, h = a->mark.wm.seq;
		struct ws_stream *b = open_owner(&w, sb, 2, 1, 0);
		struct pause p = { .w = &w, .other = b };
		wt_write_txn(w.e.w, 2, 200);
		const uint64_t a_hash = wt_content_hash(w.e.w, NULL);
		assert_int_equal(ws_fault_add("stream.before_hint_put", 1, WS_FAULT_PAUSE, in_pause, &p), 0);
		wt_tail_ok(a, &o);
		ws_fault_disarm();
		assert_int_equal(p.fired, 1);
		assert_int_equal(o.kind, WS_OUTCOME_STREAMED);
		acked(&w, a, a_hash);
		assert_int_equal(a->mark.wm.seq, h + 1);
		closed_by(&w, 1, lane_a, h + 2, b);
		assert_int_equal(wm_now(&w).epoch, 2);
		wt_write_txn(w.e.w, 2, 200);
		const uint64_t puts = w.e.sink->store->stats.puts;
		tail_is(a, WS_OUTCOME_FENCED, __LINE__);
		assert_int_equal(w.e.sink->store->stats.puts, puts);
		tail_acked(&w, b);
		check_all(&w, "hint lost to a takeover");
		ws_stream_close(a);
		ws_stream_close(b);
		ws_sink_close(sb);
		world_free(&w);
	}
}

/* Slots asked for on a store whose conditions do not fence: the legacy
 * path (a watermark per tail), logged. */
static void test_slot_needs_fencing_store(void **state)
{
	struct world w;
	struct ws_stream_config c;
	struct ws_outcome o;
	int err = -1;
	(void)state;
	world_init(&w, "slot_no_fence", 0);
	w.e.sink->store = wt_throttle_store_open(w.e.sink->store, 1, 1); /* conditions not forwarded */
	memset(&c, 0, sizeof(c));
	c.tenant = TENANT;
	c.db_path = w.e.db;
	c.slots = true;
	struct ws_stream *st = ws_stream_open(w.e.sink, &c, &err);
	assert_non_null(st);
	assert_false(ws_stream_slots(st));
	wt_write_txn(w.e.w, 5, 200);
	wt_tail_ok(st, &o);
	assert_int_equal(wm_now(&w).version, 2);
	ws_stream_close(st);
	c.hint_slots = WS_HINT_SLOTS_MAX + 1;
	assert_null(ws_stream_open(w.e.sink, &c, &err));
	assert_int_equal(err, WS_ECONFIG);
	assert_non_null(strstr(ws_errmsg(), "hint_slots"));
	world_free(&w);
}

static void refused_msg(int rc, const char *what)
{
	if (rc != WS_EFORMAT)
		fail_msg("%s gave %d (%s), not a refusal", what, rc, ws_errmsg());
	if (!strstr(ws_errmsg(), "uses manifest slots"))
		fail_msg("%s's error does not say the tenant uses manifest slots: %s", what, ws_errmsg());
}

static int ls_cb(const struct ws_tenant_info *info, void *arg)
{
	unsigned *errors = arg;
	*errors += info->error && strstr(info->error, "uses manifest slots");
	return 0;
}

/*
 * Stage 1: a tenant this writer shipped with slots is read by restore and
 * verify (check_all); ls, checkpoint, retention, forget, verify --orphans,
 * a follower and a stream with slots = off refuse it, saying it uses
 * manifest slots, and leave its objects as they were.
 */
static void test_slot_tenant_other_commands_refuse(void **state)
{
	struct world w;
	struct ws_retention_report rr;
	struct ws_forget_report fr;
	struct ws_checkpoint_info ci;
	struct ws_follow_config fc;
	struct ws_follow_ops ops = { wt_follow_no_image, wt_follow_no_apply };
	struct ws_follow *f = NULL;
	struct ws_stream_config c;
	struct ws_outcome o;
	unsigned errors = 0, handed = 0;
	uint64_t n = 0;
	int err = 0;
	(void)state;
	world_init(&w, "slot_refused", 0);
	/* Shipped first without slots, a checkpoint taken (retention then has
	 * a tenant to protect), then the same token with slots: the lane opens
	 * on the content-named head (the upgrade). */
	memset(&c, 0, sizeof(c));
	c.tenant = TENANT;
	c.db_path = w.e.db;
	c.epoch = 1;
	c.pointer_generation = 1;
	c.wal_checkpoint_bytes = UINT64_MAX;
	struct ws_stream *legacy = ws_stream_open(w.e.sink, &c, &err);
	assert_non_null(legacy);
	wt_write_txn(w.e.w, 40, 300);
	tail_acked(&w, legacy);
	wt_write_txn(w.e.w, 2, 200);
	tail_acked(&w, legacy);
	assert_int_equal(ws_checkpoint_take(w.e.sink, NULL, &ci), 0);
	assert_true(ci.committed);
	struct ws_stream *a = open_owner(&w, w.e.sink, 1, 2, 0);
	for (int i = 0; i < 5; i++) {
		wt_write_txn(w.e.w, 2, 200);
		tail_acked(&w, a);
	}
	check_all(&w, "shipped with slots");
	char *before = wt_tenant_state(w.e.sink, TENANT);
	assert_int_not_equal(ws_list_tenants(w.e.sink, NULL, ls_cb, &errors), 0);
	assert_int_equal(errors, 1);
	refused_msg(ws_verify_orphans(w.e.sink, TENANT, NULL, NULL, &n), "verify --orphans");
	refused_msg(ws_retention_run(w.e.sink, false, NULL, NULL, &rr), "retention");
	refused_msg(ws_tenant_forget(w.e.sink, TENANT, &fr), "forget");
	refused_msg(ws_checkpoint_take(w.e.sink, NULL, &ci), "checkpoint");
	assert_false(ci.committed);
	memset(&fc, 0, sizeof(fc));
	fc.tenant = TENANT;
	assert_int_equal(ws_follow_open(w.e.sink, &fc, &ops, NULL, &f), 0);
	refused_msg(ws_follow_poll(f, &handed), "follow");
	assert_int_equal(handed, 0);
	ws_follow_close(f);
	wt_write_txn(w.e.w, 2, 200);
	refused_msg(ws_stream_tail_frames(legacy, &o), "a tail with slots = off");
	ws_stream_close(legacy);
	state_unchanged(before, wt_tenant_state(w.e.sink, TENANT), __LINE__);
	free(before);
	tail_acked(&w, a); /* the slot writer goes on */
	check_all(&w, "after the refusals");
	ws_stream_close(a);
	world_free(&w);
}

/* ---- the engine --------------------------------------------------------- */

static struct ws_engine *slot_engine(struct world *w)
{
	struct ws_shard_config sc;
	struct ws_engine_config ec;
	int err = 0;
	ws_shard_config_default(&sc);
	sc.ring_bytes = 4u << 20;
	sc.batch_bytes_max = 256u << 10;
	sc.batch_age_ms_max = 5;
	sc.slots = true;
	sc.hint_slots = 4;
	memset(&ec, 0, sizeof(ec));
	ec.sink_url = w->e.sink_url;
	ec.shards = 1;
	ec.shard = &sc;
	ec.epoch = 1;
	ec.pointer_generation = 1;
	ec.wal_checkpoint_bytes = UINT64_MAX;
	struct ws_engine *e = ws_engine_create(&ec, &err);
	if (!e)
		fail_msg("engine: %s (%s)", ws_strerror(err), ws_errmsg());
	return e;
}

#define ENGINE_TENANTS 3

/*
 * An engine with slots = on (tails in flight on lanes): three tenants
 * written and flushed many times, each latest state restored; stopped
 * and started again with the same token, each tenant goes on in the
 * lane it opened (adopted: no new lane, no close record).
 */
static void test_slot_engine_ships_and_adopts(void **state)
{
	struct world w;
	sqlite3 *db[ENGINE_TENANTS];
	char *path[ENGINE_TENANTS], name[ENGINE_TENANTS][8];
	uint64_t lane[ENGINE_TENANTS];
	(void)state;
	world_init(&w, "slot_engine", 0);
	for (int k = 0; k < ENGINE_TENANTS; k++) {
		char file[16];
		snprintf(file, sizeof(file), "t%d.db", k);
		snprintf(name[k], sizeof(name[k]), "t%d", k);
		path[k] = wt_path(w.e.dir, file);
		db[k] = wt_writer_open(path[k], 0);
		wt_write_txn(db[k], 30, 500);
	}
	for (int life = 0; life < 2; life++) {
		struct ws_engine *e = slot_engine(&w);
		for (int k = 0; k < ENGINE_TENANTS; k++) {
			struct ws_tenant_config tc = { .name = name[k], .db_path = path[k], .shard = -1 };
			assert_int_equal(ws_engine_add_tenant(e, &tc), 0);
		}
		for (int round = 0; round < 12; round++) {
			for (int k = 0; k < ENGINE_TENANTS; k++)
				wt_write_txn(db[k], round % 5 == 4 ? 40 : 2, round % 5 == 4 ? 3000 : 200);
			if (round % 3 == 2 && ws_engine_flush(e) != 0)
				fail_msg("flush: %s", ws_errmsg());
		}
		assert_int_equal(ws_engine_stop(e), 0);
		ws_engine_destroy(e);
		for (int k = 0; k < ENGINE_TENANTS; k++) {
			struct ws_head h;
			if (ws_head_load(w.e.sink->store, name[k], 0, &h) != 0)
				fail_msg("head of %s: %s", name[k], ws_errmsg());
			assert_int_equal(h.wm.version, 4);
			if (life == 0)
				lane[k] = h.lane;
			else if (h.lane != lane[k])
				fail_msg("%s: lane %016" PRIx64 " after the restart, not %016" PRIx64 " (adopted)", name[k],
					 h.lane, lane[k]);
			ws_head_free(&h);
			if (wt_restore_hash(&w.e, name[k], NULL, NULL) != wt_content_hash(db[k], NULL))
				fail_msg("%s: restore-latest is not the source's state (life %d)", name[k], life);
			if (ws_verify(w.e.sink, name[k], NULL, NULL) != 0)
				fail_msg("%s: verify: %s", name[k], ws_errmsg());
		}
	}
	for (int k = 0; k < ENGINE_TENANTS; k++) {
		sqlite3_close(db[k]);
		free(path[k]);
	}
	world_free(&w);
}

#ifdef SLOTS_WRITER_S3
static int setup_bucket(void **state)
{
	(void)state;
	return wt_s3_fresh_bucket("slotw", g_bucket, sizeof(g_bucket));
}

int main(void)
{
	/* Against radosgw: the request counts and a takeover between tails. */
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_slot_one_request_per_tail),
		cmocka_unit_test(test_slot_takeover_between_tails),
	};
	if (wt_s3_load_env("test_core_slots_writer_s3") != 0)
		return 1;
	return WT_RUN_GROUP(tests, setup_bucket, NULL);
}
#else
int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_slot_one_request_per_tail),
		cmocka_unit_test(test_slot_first_tail_opens_lane),
		cmocka_unit_test(test_slot_takeover_between_tails),
		cmocka_unit_test(test_slot_open_sites_paused_under_writer),
		cmocka_unit_test(test_slot_old_owner_creates_before_close),
		cmocka_unit_test(test_slot_old_owner_after_close),
		cmocka_unit_test(test_slot_takeover_race_two_new_owners),
		cmocka_unit_test(test_slot_ambiguous_create_lost_reply),
		cmocka_unit_test(test_slot_hint_cas_loses_to_takeover),
		cmocka_unit_test(test_slot_needs_fencing_store),
		cmocka_unit_test(test_slot_tenant_other_commands_refuse),
		cmocka_unit_test(test_slot_engine_ships_and_adopts),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif
