/*
 * Waiting for another writer's checkpoint attempt (core/ckpt_attempt.c
 * ws_attempt_wait_peer, step 3 of docs/CHECKPOINTS.md "Taking a
 * checkpoint"): the wait ends by a monotonic deadline, polls the head with
 * backoff (a few GETs a second at most), and waits out a store that
 * throttles those GETs within the same deadline.
 *
 * The store here is a fake in front of the real file store, for two faults
 * the file store cannot produce: the round trip of a remote store (each
 * request takes latency_ms, as an S3 request does) and an answer "slow
 * down" (503) to a GET of checkpoints/head. Under the caller's
 * throttle_fail_fast it answers WS_ETHROTTLED at once with its Retry-After
 * in throttle_until_ms, as the S3 backend does; otherwise it waits the
 * Retry-After out and answers, as the S3 backend's own retries do. Every
 * request it lets through goes to the real file store. Its kind is neither
 * backend, so a checkpoint through it decides with the shared authority
 * (conditional writes), the one whose writers can wait for each other.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt_attempt.h"
#include "core_internal.h"
#include "coreutil.h"
#include "walship.h"
#include "ws_ckpt.h"
#include "ws_clock.h"
#include "ws_store.h"

#define HEAD_KEY "checkpoints/head"

/* ---- the fake: latency and throttled GETs of the head ---------------------------- */

struct gstore {
	struct ws_store base;
	struct ws_store *inner;
	unsigned latency_ms;
	unsigned throttle_n;        /* GETs of the head still to throttle */
	unsigned retry_after_ms;
	uint64_t head_gets;         /* GETs of the head asked for, throttled or not */
	uint64_t throttled;
};

static void lag(struct gstore *g)
{
	if (g->latency_ms)
		ws_sleep_ms(g->latency_ms);
}

static int g_put(struct ws_store *s, const char *key, const struct iovec *iov, int iovcnt, enum ws_put_mode mode,
		 const struct ws_etag *expect, struct ws_etag *out)
{
	struct gstore *g = (struct gstore *)s;
	lag(g);
	return ws_store_putv(g->inner, key, iov, iovcnt, mode, expect, out);
}

static int g_get(struct ws_store *s, const char *key, uint64_t off, uint64_t len, struct ws_buf *out,
		 struct ws_obj_info *info)
{
	struct gstore *g = (struct gstore *)s;
	lag(g);
	if (strcmp(key, HEAD_KEY) == 0) {
		g->head_gets++;
		if (g->throttle_n) {
			g->throttle_n--;
			g->throttled++;
			if (s->throttle_fail_fast) {
				s->throttle_until_ms = ws_mono_ms() + g->retry_after_ms;
				return ws_fail(WS_ETHROTTLED, "fake store: GET %s throttled (503 SlowDown)", key);
			}
			ws_sleep_ms(g->retry_after_ms);
		}
	}
	return ws_store_get(g->inner, key, off, len, out, info);
}

static int g_head(struct ws_store *s, const char *key, struct ws_obj_info *info)
{
	struct gstore *g = (struct gstore *)s;
	lag(g);
	return ws_store_head(g->inner, key, info);
}

static int g_list(struct ws_store *s, const char *prefix, const char *token, unsigned max_keys,
		  struct ws_list_page *out)
{
	struct gstore *g = (struct gstore *)s;
	lag(g);
	return ws_store_list(g->inner, prefix, token, max_keys, out);
}

static int g_del(struct ws_store *s, const char *key)
{
	struct gstore *g = (struct gstore *)s;
	lag(g);
	return ws_store_del(g->inner, key);
}

static void g_close(struct ws_store *s)
{
	free(s);
}

static const struct ws_store_ops g_ops = {
	.put = g_put,
	.get = g_get,
	.head = g_head,
	.list = g_list,
	.del = g_del,
	.close = g_close,
	.kind = WS_STORE_OTHER,
};

static struct gstore *gstore_open(struct ws_store *inner, unsigned latency_ms)
{
	struct gstore *g = calloc(1, sizeof(*g));
	assert_non_null(g);
	g->base.ops = &g_ops;
	snprintf(g->base.url, sizeof(g->base.url), "fake+%.1000s", inner->url);
	g->inner = inner;
	g->latency_ms = latency_ms;
	return g;
}

/* ---- a sink with one tenant shipped, and a peer whose writer crashed ----------------- */

struct penv {
	struct wt_env e;
	struct ws_stream *st;
	struct gstore *g;
	struct ws_sink up;          /* the sink through the fake */
	struct ws_ckpt *c;          /* shared authority through the fake */
	struct ws_ckpt_attempt peer;
};

static void penv_init(struct penv *p, const char *tag, unsigned latency_ms)
{
	struct ws_stream_config cfg;
	struct ws_outcome o;
	struct ws_ckpt_witness wit;
	const char *sinks[1] = { "crashed" };
	int err = 0;

	memset(p, 0, sizeof(*p));
	wt_env_init(&p->e, tag, 0);
	wt_write_txn(p->e.w, 20, 300);
	memset(&cfg, 0, sizeof(cfg));
	cfg.tenant = "orders";
	cfg.db_path = p->e.db;
	cfg.epoch = 1;
	cfg.pointer_generation = 1;
	cfg.wal_checkpoint_bytes = 1;
	p->st = ws_stream_open(p->e.sink, &cfg, &err);
	if (!p->st)
		fail_msg("ws_stream_open: %s", ws_errmsg());
	wt_tail_ok(p->st, &o);
	p->g = gstore_open(p->e.sink->store, latency_ms);
	p->up.store = &p->g->base;
	p->c = ws_ckpt_open_shared(&p->g->base, 0, &err);
	if (!p->c)
		fail_msg("open shared: %s", ws_errmsg());
	/* The peer: an attempt whose witness is open and that never decides. */
	assert_int_equal(ws_ckpt_allocate_id_at_least(p->c, 1, &p->peer.checkpoint_id), 0);
	p->peer.epoch = 1;
	p->peer.token = 0xdead;
	assert_int_equal(ws_ckpt_create_sink_open_witness(p->c, "walship", 9, &p->peer, sinks, 1, &wit), 0);
}

static void penv_free(struct penv *p)
{
	ws_ckpt_close(p->c);
	ws_store_close(&p->g->base);
	ws_stream_close(p->st);
	wt_env_free(&p->e);
}

/* At most 4 GETs a second of waiting, plus the first and the one at the deadline. */
static uint64_t gets_bound(unsigned wait_ms)
{
	return 2 + (uint64_t)wait_ms * 4 / 1000;
}

static void expect_within(uint64_t elapsed, unsigned wait_ms, unsigned margin_ms, const char *what)
{
	if (elapsed < wait_ms || elapsed > (uint64_t)wait_ms + margin_ms)
		fail_msg("%s: the wait took %" PRIu64 " ms, want %u..%u", what, elapsed, wait_ms, wait_ms + margin_ms);
}

/* ---- tests ---------------------------------------------------------------------------- */

/* A crashed peer: the wait ends at its deadline with a bounded number of GETs. */
static void test_wait_deadline_and_backoff(void **state)
{
	struct penv p;
	struct ws_checkpoint_info info;
	bool timed_out = false;
	uint64_t t0, el;
	const unsigned wait_ms = 2000, latency_ms = 40;
	(void)state;

	penv_init(&p, "ckpt-peer-wait", latency_ms);
	p.g->head_gets = 0;
	t0 = ws_mono_ms();
	assert_int_equal(ws_attempt_wait_peer(p.c, p.peer.checkpoint_id, wait_ms, &info, &timed_out), 0);
	el = ws_mono_ms() - t0;
	assert_true(timed_out);
	/* The deadline holds whatever each GET costs: at most one read in flight past it. */
	expect_within(el, wait_ms, latency_ms + 250, "slow store");
	if (p.g->head_gets > gets_bound(wait_ms) || p.g->head_gets < 3)
		fail_msg("%" PRIu64 " GETs of the head in %u ms, want 3..%" PRIu64, p.g->head_gets, wait_ms,
			 gets_bound(wait_ms));
	penv_free(&p);
}

/* Every GET of the head throttled: waited out within the deadline, not an error. */
static void test_wait_throttled(void **state)
{
	struct penv p;
	struct ws_checkpoint_info info;
	bool timed_out = false;
	uint64_t t0, el;
	const unsigned wait_ms = 2000;
	(void)state;

	penv_init(&p, "ckpt-peer-503", 5);
	p.g->throttle_n = 1000000;
	p.g->retry_after_ms = 700;
	p.g->head_gets = p.g->throttled = 0;
	t0 = ws_mono_ms();
	assert_int_equal(ws_attempt_wait_peer(p.c, p.peer.checkpoint_id, wait_ms, &info, &timed_out), 0);
	el = ws_mono_ms() - t0;
	assert_true(timed_out);
	expect_within(el, wait_ms, 250, "throttled store");
	/* Each retry waited for the Retry-After: about one GET per 700 ms. */
	if (p.g->throttled < 2 || p.g->head_gets > 2 + wait_ms / 700 + 1)
		fail_msg("%" PRIu64 " GETs of the head (%" PRIu64 " throttled) in %u ms with a 700 ms Retry-After",
			 p.g->head_gets, p.g->throttled, wait_ms);
	/* The caller's fail-fast setting is left as it was. */
	assert_false(p.g->base.throttle_fail_fast);
	penv_free(&p);
}

struct decider {
	char *sink_dir;
	uint64_t id;
	unsigned after_ms;
	int rc;
	uint64_t decided_ms; /* ws_mono_ms() once its decision was written */
};

/* Another writer decides the peer (Abort) after a while, through its own handle. */
static void *decide_later(void *arg)
{
	struct decider *d = arg;
	struct ws_ckpt_record_result rr;
	int err = 0;
	struct ws_store *s;
	struct ws_ckpt *c;

	ws_sleep_ms(d->after_ms);
	s = ws_store_file_open(d->sink_dir, &err);
	c = s ? ws_ckpt_open_shared(s, WS_CKPT_TRUST_CONDITIONAL, &err) : NULL;
	d->rc = c ? ws_ckpt_record_outcome(c, 1, d->id, WS_CKPT_SCOPE_LOCAL, NULL, NULL, WS_CKPT_ABORT, NULL, &rr)
		  : err;
	d->decided_ms = ws_mono_ms();
	ws_ckpt_close(c);
	ws_store_close(s);
	return NULL;
}

/* The peer decides during the wait, some GETs throttled: its outcome comes back soon after. */
static void test_wait_sees_decision(void **state)
{
	struct penv p;
	struct ws_checkpoint_info info;
	struct decider d;
	pthread_t th;
	bool timed_out = true;
	uint64_t t0, el;
	(void)state;

	penv_init(&p, "ckpt-peer-decided", 20);
	p.g->throttle_n = 2;
	p.g->retry_after_ms = 100;
	d.sink_dir = p.e.sink_dir;
	d.id = p.peer.checkpoint_id;
	d.after_ms = 600;
	d.rc = -1;
	t0 = ws_mono_ms();
	assert_int_equal(pthread_create(&th, NULL, decide_later, &d), 0);
	assert_int_equal(ws_attempt_wait_peer(p.c, p.peer.checkpoint_id, 10000, &info, &timed_out), 0);
	el = ws_mono_ms() - t0;
	pthread_join(th, NULL);
	assert_int_equal(d.rc, 0);
	assert_false(timed_out);
	assert_int_equal(info.id, p.peer.checkpoint_id);
	assert_false(info.committed);
	assert_false(info.own);
	/* Seen within one backoff step (at most WS_PEER_POLL_MAX_MS) and a read
	 * of the moment the decision was written: the decider's own open and
	 * write, which a loaded machine stretches (850 ms once at a load of
	 * 10), come before it. */
	const uint64_t decided = d.decided_ms - t0;
	if (el < 600 || el > decided + WS_PEER_POLL_MAX_MS + 300)
		fail_msg("the decision written at %" PRIu64 " ms (asked for at 600) was seen at %" PRIu64 " ms", decided,
			 el);
	penv_free(&p);
}

/*
 * Through ws_checkpoint_take: the crashed peer is aborted after peer_wait_ms
 * and this call's checkpoint commits; the GETs of the head stay a handful
 * (they were one per 20 ms of sleep before, plus each GET's own time
 * uncounted: 1,600 GETs and 105 s for a 30 s wait on s3).
 */
static void test_take_past_crashed_peer(void **state)
{
	struct penv p;
	struct ws_checkpoint_opts o;
	struct ws_checkpoint_info info;
	struct ws_ckpt_outcome term;
	bool found;
	uint64_t t0, el;
	int rc;
	(void)state;

	penv_init(&p, "ckpt-peer-take", 30);
	p.g->throttle_n = 3;
	p.g->retry_after_ms = 100;
	p.g->head_gets = 0;
	memset(&o, 0, sizeof(o));
	o.peer_wait_ms = 1500;
	t0 = ws_mono_ms();
	rc = ws_checkpoint_take(&p.up, &o, &info);
	el = ws_mono_ms() - t0;
	if (rc)
		fail_msg("take past a crashed peer: %s (%s)", ws_strerror(rc), ws_errmsg());
	assert_true(info.own && info.committed);
	assert_true(info.id > p.peer.checkpoint_id);
	assert_int_equal(ws_ckpt_latest_terminal(p.c, &term, &found), 0);
	assert_true(found && term.checkpoint_id == info.id);
	if (el < o.peer_wait_ms || el > o.peer_wait_ms + 6000)
		fail_msg("take took %" PRIu64 " ms with a %u ms wait", el, o.peer_wait_ms);
	if (p.g->head_gets > gets_bound(o.peer_wait_ms) + 20)
		fail_msg("take read the head %" PRIu64 " times around a %u ms wait", p.g->head_gets, o.peer_wait_ms);
	penv_free(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_wait_deadline_and_backoff),
		cmocka_unit_test(test_wait_throttled),
		cmocka_unit_test(test_wait_sees_decision),
		cmocka_unit_test(test_take_past_crashed_peer),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
