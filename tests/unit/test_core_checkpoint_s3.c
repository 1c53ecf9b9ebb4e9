/*
 * Checkpoints on an s3:// sink (the shared authority: radosgw's
 * If-None-Match / If-Match), through the ctest "s3" fixture ($WS_S3_DIR/env).
 *
 * Two writers, each with its own sink connection, race ws_checkpoint_take
 * on one sink prefix, round after round: the witness and the decision head
 * let exactly one attempt decide at a time; a writer that meets another's
 * live attempt waits and returns that durable winner (own = false), never
 * a second decision. Then restore by checkpoint, restore of the live stream
 * from the checkpoint, and retention, all on S3.
 *
 * A writer killed mid-attempt (before the decision, or after it with its
 * clean-up pending) is recovered by the next caller after the bounded wait
 * (issue 11 defect 5): that caller commits its own checkpoint, and the
 * crashed attempt's artifacts are gone.
 *
 * Without $WS_S3_DIR the test FAILS: it must never pass without a server.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core_internal.h"
#include "coreutil.h"
#include "probes.h"
#include "walship.h"
#include "ws_ckpt.h"
#include "ws_clock.h"
#include "ws_fault.h"
#include "ws_store.h"

static char g_bucket[64];


static void sink_url(char *out, size_t cap, const char *prefix)
{
	snprintf(out, cap, "s3://%s%s%s?endpoint=%s", g_bucket, prefix ? "/" : "", prefix ? prefix : "",
		 getenv("WS_S3_ENDPOINT"));
}

static int setup_bucket(void **state)
{
	char url[1024];
	int err = 0;
	struct ws_store *s;
	(void)state;
	snprintf(g_bucket, sizeof(g_bucket), "ws-cps3-%ld-%lld", (long)getpid(), (long long)time(NULL));
	sink_url(url, sizeof(url), NULL);
	if (!(s = ws_store_open_flags(url, WS_STORE_EXISTING, &err)))
		return -1;
	err = ws_store_s3_create_bucket(s);
	ws_store_close(s);
	return err ? -1 : 0;
}

static struct ws_sink *sink_open(const char *url)
{
	int err = 0;
	struct ws_sink *s = ws_sink_open(url, &err);
	if (!s)
		fail_msg("open %s: %s", url, ws_errmsg());
	return s;
}

struct racer {
	char url[1024];
	pthread_barrier_t *go;
	int rc;
	char err[512];
	struct ws_checkpoint_info info;
};

static void *race(void *arg)
{
	struct racer *r = arg;
	struct ws_checkpoint_opts o;
	int err = 0;
	struct ws_sink *s = ws_sink_open(r->url, &err);
	memset(&o, 0, sizeof(o));
	o.peer_wait_ms = 120000;
	pthread_barrier_wait(r->go);
	r->rc = s ? ws_checkpoint_take(s, &o, &r->info) : err;
	if (r->rc)
		snprintf(r->err, sizeof(r->err), "%s", ws_errmsg());
	ws_sink_close(s);
	return NULL;
}

static uint64_t restored(struct wt_env *e, struct ws_sink *s, uint64_t ckpt, bool by_ckpt)
{
	char name[64], *p;
	uint64_t h;
	int rc;
	snprintf(name, sizeof(name), "r%u.db", ++e->restores);
	p = wt_path(e->out_dir, name);
	rc = by_ckpt ? ws_restore_checkpoint(s, "orders", ckpt, p, false) : ws_restore(s, "orders", NULL, p);
	if (rc)
		fail_msg("restore: %s (%s)", ws_strerror(rc), ws_errmsg());
	h = wt_file_hash(p, NULL);
	free(p);
	return h;
}

static void test_s3_race_and_restore(void **state)
{
	struct wt_env e;
	struct ws_stream_config cfg;
	struct ws_stream *st;
	struct ws_outcome o;
	struct ws_sink *s;
	struct ws_retention_report rep;
	char prefix[64], url[1024];
	unsigned contended = 0;
	uint64_t last_id = 0, h = 0;
	int err = 0;
	(void)state;

	wt_env_init(&e, "ckpt-s3", 0);
	snprintf(prefix, sizeof(prefix), "cp-%ld", (long)getpid());
	sink_url(url, sizeof(url), prefix);
	s = sink_open(url);
	memset(&cfg, 0, sizeof(cfg));
	cfg.tenant = "orders";
	cfg.db_path = e.db;
	cfg.epoch = 1;
	cfg.pointer_generation = 1;
	st = ws_stream_open(s, &cfg, &err);
	if (!st)
		fail_msg("stream: %s", ws_errmsg());

	for (int round = 0; round < 6; round++) {
		pthread_barrier_t go;
		struct racer r[2];
		pthread_t t[2];
		wt_write_txn(e.w, 30, 500);
		wt_tail_ok(st, &o);
		h = wt_content_hash(e.w, NULL);
		pthread_barrier_init(&go, NULL, 2);
		for (int i = 0; i < 2; i++) {
			memset(&r[i], 0, sizeof(r[i]));
			snprintf(r[i].url, sizeof(r[i].url), "%s", url);
			r[i].go = &go;
			assert_int_equal(pthread_create(&t[i], NULL, race, &r[i]), 0);
		}
		for (int i = 0; i < 2; i++)
			pthread_join(t[i], NULL);
		pthread_barrier_destroy(&go);
		for (int i = 0; i < 2; i++) {
			if (r[i].rc)
				fail_msg("round %d writer %d: %s (%s)", round, i, ws_strerror(r[i].rc), r[i].err);
			assert_true(r[i].info.committed);
			assert_true(r[i].info.id > last_id);
		}
		if (r[0].info.own && r[1].info.own) {
			/* Not contended: one ran after the other, two decisions, two IDs. */
			assert_int_not_equal(r[0].info.id, r[1].info.id);
		} else {
			/* Contended: exactly one decided; the other got the durable winner. */
			assert_true(r[0].info.own != r[1].info.own);
			assert_int_equal(r[0].info.id, r[1].info.id);
			assert_string_equal(r[0].info.ref_key, r[1].info.ref_key);
			contended++;
		}
		last_id = r[0].info.id > r[1].info.id ? r[0].info.id : r[1].info.id;
		assert_int_equal(restored(&e, s, WS_CHECKPOINT_LATEST, true), h);
	}
	fprintf(stderr, "test_core_checkpoint_s3: %u of 6 rounds contended\n", contended);

	/* Frames after the last checkpoint, then retention: both restores still hold. */
	wt_write_txn(e.w, 10, 500);
	wt_tail_ok(st, &o);
	h = wt_content_hash(e.w, NULL);
	assert_int_equal(ws_retention_run(s, false, NULL, NULL, &rep), 0);
	assert_true(rep.ran);
	assert_int_equal(rep.protected_id, last_id);
	assert_true(rep.deleted > 0);
	assert_int_equal(restored(&e, s, 0, false), h);
	ws_stream_close(st);
	ws_sink_close(s);
	wt_env_free(&e);
}

/* Tenant "orders" streamed to s with 20 transactions shipped; *h: their content hash. */
static struct ws_stream *orders_shipped(struct wt_env *e, struct ws_sink *s, uint64_t *h)
{
	struct ws_stream_config cfg;
	struct ws_outcome o;
	struct ws_stream *st;
	int err = 0;
	memset(&cfg, 0, sizeof(cfg));
	cfg.tenant = "orders";
	cfg.db_path = e->db;
	cfg.epoch = 1;
	cfg.pointer_generation = 1;
	st = ws_stream_open(s, &cfg, &err);
	if (!st)
		fail_msg("stream: %s", ws_errmsg());
	wt_write_txn(e->w, 20, 500);
	wt_tail_ok(st, &o);
	*h = wt_content_hash(e->w, NULL);
	return st;
}

/* A checkpoint in a child process, killed at site; true if it was. */
static bool crash_take(const char *url, const char *site)
{
	int status = 0;
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct ws_checkpoint_info info;
		int err = 0;
		struct ws_sink *s = ws_sink_open(url, &err);
		ws_fault_arm(site, 1, 1);
		_exit(s && ws_checkpoint_take(s, NULL, &info) == 0 ? 0 : 3);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
}

static int collect_ids(const struct ws_checkpoint_info *i, void *arg)
{
	uint64_t *ids = arg;
	if (ids[0] < 63)
		ids[++ids[0]] = i->id;
	return 0;
}

/* Every artifact key under checkpoints/artifacts/ belongs to a committed checkpoint. */
static void artifacts_all_committed(struct ws_sink *sink, const char *url)
{
	uint64_t ids[64] = { 0 };
	struct ws_list_page page;
	struct ws_store *st;
	int err = 0;

	assert_int_equal(ws_checkpoint_list(sink, collect_ids, ids), 0);
	st = ws_store_open_flags(url, WS_STORE_EXISTING, &err);
	assert_non_null(st);
	memset(&page, 0, sizeof(page));
	assert_int_equal(ws_store_list(st, "checkpoints/artifacts/", "", 1000, &page), 0);
	for (size_t k = 0; k < page.count; k++) {
		uint64_t id = strtoull(page.keys[k] + strlen("checkpoints/artifacts/"), NULL, 16);
		bool named = false;
		for (uint64_t j = 1; j <= ids[0]; j++)
			named |= ids[j] == id;
		if (!named)
			fail_msg("artifact %s belongs to no committed checkpoint (a crashed attempt's)", page.keys[k]);
	}
	ws_list_page_free(&page);
	ws_store_close(st);
}

static void test_s3_recover_crashed_attempt(void **state)
{
	static const char *const sites[] = { "checkpoint.artifact.after_put", "ckpt.create.after_put",
					     "ckpt.record.after_cas", "ckpt.inventory.before_complete" };
	(void)state;

	for (size_t k = 0; k < sizeof(sites) / sizeof(sites[0]); k++) {
		struct wt_env e;
		struct ws_stream *st;
		struct ws_sink *s;
		struct ws_checkpoint_opts co;
		struct ws_checkpoint_info info;
		char prefix[64], url[1024];
		uint64_t h;
		int rc;

		wt_env_init(&e, "ckpt-s3-crash", 0);
		snprintf(prefix, sizeof(prefix), "crash-%ld-%zu", (long)getpid(), k);
		sink_url(url, sizeof(url), prefix);
		s = sink_open(url);
		st = orders_shipped(&e, s, &h);
		if (!crash_take(url, sites[k]))
			fail_msg("site %s did not fire", sites[k]);
		/* The next caller: recovers after the bounded wait, then takes
		 * its own checkpoint. */
		memset(&co, 0, sizeof(co));
		co.peer_wait_ms = 300;
		rc = ws_checkpoint_take(s, &co, &info);
		if (rc)
			fail_msg("site %s: take after the crash: %s (%s)", sites[k], ws_strerror(rc), ws_errmsg());
		if (!info.own || !info.committed)
			fail_msg("site %s: take after the crash returned checkpoint %" PRIu64 " own=%d committed=%d",
				 sites[k], info.id, info.own, info.committed);
		/* Nothing is left open: the one after takes its own at once. */
		co.peer_wait_ms = 1;
		assert_int_equal(ws_checkpoint_take(s, &co, &info), 0);
		assert_true(info.own && info.committed);
		artifacts_all_committed(s, url);
		assert_int_equal(restored(&e, s, WS_CHECKPOINT_LATEST, true), h);
		ws_stream_close(st);
		ws_sink_close(s);
		wt_env_free(&e);
	}
}

/*
 * The wait for a crashed peer on a real S3 store: bounded by its deadline
 * (not by the sleeps between GETs, each GET's own round trip uncounted),
 * with a few GETs a second at most. Before, a 30 s wait took 103-106 s
 * and about 1,600 GETs of checkpoints/head.
 */
static void test_s3_peer_wait_bounded(void **state)
{
	struct wt_env e;
	struct ws_stream *st;
	struct ws_sink *s;
	struct ws_checkpoint_opts co;
	struct ws_checkpoint_info info;
	char prefix[64], url[1024];
	uint64_t h, gets, t0, el;
	int rc;
	(void)state;

	wt_env_init(&e, "ckpt-s3-peerwait", 0);
	snprintf(prefix, sizeof(prefix), "peerwait-%ld", (long)getpid());
	sink_url(url, sizeof(url), prefix);
	s = sink_open(url);
	st = orders_shipped(&e, s, &h);
	if (!crash_take(url, "checkpoint.artifact.after_put"))
		fail_msg("site checkpoint.artifact.after_put did not fire");
	memset(&co, 0, sizeof(co));
	co.peer_wait_ms = 3000;
	gets = s->store->stats.gets;
	t0 = ws_mono_ms();
	rc = ws_checkpoint_take(s, &co, &info);
	el = ws_mono_ms() - t0;
	gets = s->store->stats.gets - gets;
	if (rc)
		fail_msg("take after the crash: %s (%s)", ws_strerror(rc), ws_errmsg());
	assert_true(info.own && info.committed);
	/* The wait itself at most 3 s and a GET; the rest of the take a few s. */
	if (el < co.peer_wait_ms || el > co.peer_wait_ms + 5000)
		fail_msg("take past a crashed peer took %" PRIu64 " ms with a %u ms wait", el, co.peer_wait_ms);
	/* 4 GETs a second of waiting at most, and the take's own reads. */
	if (gets > 2 + 4 * co.peer_wait_ms / 1000 + 40)
		fail_msg("take past a crashed peer made %" PRIu64 " GETs with a %u ms wait", gets, co.peer_wait_ms);
	print_message("peer wait %u ms: take %" PRIu64 " ms, %" PRIu64 " GETs\n", co.peer_wait_ms, el, gets);
	ws_stream_close(st);
	ws_sink_close(s);
	wt_env_free(&e);
}

static void count_orphan(const char *key, const char *kind, void *arg)
{
	unsigned *n = arg;
	n[0]++;
	n[1] += strcmp(kind, "probe") == 0;
	(void)key;
}

/*
 * Probes left by kills on a real S3 store, at both probe sites (the S3
 * backend's open, the checkpoint store's shared open): fresh, the next
 * checkpoint keeps them (their writer may be alive); seen past
 * WS_PROBE_STALE_MS by radosgw's own LastModified (the sweep asked as of an
 * hour from now: S3 has no way to make an object older), they are removed
 * and verify --orphans finds nothing.
 */
static void test_s3_stale_probes(void **state)
{
	struct wt_env e;
	struct ws_stream *st;
	struct ws_sink *s;
	struct ws_checkpoint_info info;
	char prefix[64], url[1024];
	unsigned orph[2] = { 0, 0 };
	uint64_t h, count = 0, removed = 0, fresh = 0;
	int status = 0;
	pid_t pid;
	(void)state;

	wt_env_init(&e, "ckpt-s3-probes", 0);
	snprintf(prefix, sizeof(prefix), "probes-%ld", (long)getpid());
	sink_url(url, sizeof(url), prefix);
	s = sink_open(url);
	st = orders_shipped(&e, s, &h);
	assert_int_equal(ws_checkpoint_take(s, NULL, &info), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int err = 0;
		ws_fault_arm("s3.probe.after_create", 1, 1);
		_exit(ws_sink_open(url, &err) ? 0 : 3);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	if (!crash_take(url, "ckpt.probe.after_create"))
		fail_msg("site ckpt.probe.after_create did not fire");
	assert_int_equal(ws_verify_orphans(s, NULL, count_orphan, orph, &count), 0);
	assert_int_equal(orph[1], 2);
	/* Fresh: kept by the next checkpoint. */
	assert_int_equal(ws_checkpoint_take(s, NULL, &info), 0);
	memset(orph, 0, sizeof(orph));
	assert_int_equal(ws_verify_orphans(s, NULL, count_orphan, orph, &count), 0);
	assert_int_equal(orph[1], 2);
	assert_int_equal(ws_probes_sweep(s->store, ws_wall_ms(), WS_PROBE_STALE_MS, false, NULL, NULL, &removed, &fresh),
			 0);
	assert_int_equal(removed, 0);
	assert_int_equal(fresh, 2);
	/* An hour on: both stale by their LastModified. */
	assert_int_equal(ws_probes_sweep(s->store, ws_wall_ms() + (int64_t)WS_PROBE_STALE_MS + 60000, WS_PROBE_STALE_MS,
					 false, NULL, NULL, &removed, &fresh), 0);
	assert_int_equal(removed, 2);
	assert_int_equal(fresh, 0);
	memset(orph, 0, sizeof(orph));
	assert_int_equal(ws_verify_orphans(s, NULL, count_orphan, orph, &count), 0);
	assert_int_equal(orph[0], 0);
	ws_stream_close(st);
	ws_sink_close(s);
	wt_env_free(&e);
}

/*
 * An attempt whose begin_inventory landed but whose writer never heard so,
 * and whose abort then closed its witness (the durable inventory could not
 * be read back either): the inventory stays active with no witness open.
 * The state is written here through the checkpoint store itself (a lost
 * reply is a fault radosgw cannot make on demand). The next take must finish
 * that attempt (Abort, its artifact deleted) and commit its own; before, every
 * later take on a shared sink failed "attempt ... is active" for good.
 */
static void test_s3_stray_inventory_finished(void **state)
{
	struct wt_env e;
	struct ws_stream *st;
	struct ws_sink *s;
	struct ws_store *store;
	struct ws_ckpt *c;
	struct ws_ckpt_attempt a = { 0 };
	struct ws_ckpt_inventory inv;
	struct ws_ckpt_inventory_result ir;
	struct ws_ckpt_witness wit;
	struct ws_ckpt_outcome term;
	struct ws_checkpoint_info info;
	struct ws_checkpoint_opts co;
	char url[1024], key[1][WS_KEY_MAX];
	const char *sinks[1] = { "stray" };
	bool found = false;
	uint64_t h;
	int err = 0, rc;
	(void)state;

	wt_env_init(&e, "ckpt-s3-stray", 0);
	snprintf(url, sizeof(url), "s3://%s/stray-%ld?endpoint=%s", g_bucket, (long)getpid(), getenv("WS_S3_ENDPOINT"));
	s = sink_open(url);
	st = orders_shipped(&e, s, &h);

	store = ws_store_open_flags(url, WS_STORE_EXISTING, &err);
	assert_non_null(store);
	c = ws_ckpt_open_shared(store, WS_CKPT_TRUST_CONDITIONAL, &err);
	if (!c)
		fail_msg("open shared: %s", ws_errmsg());
	assert_int_equal(ws_ckpt_allocate_id_at_least(c, 1, &a.checkpoint_id), 0);
	a.epoch = 1;
	a.token = 0x5eed;
	assert_int_equal(ws_ckpt_create_sink_open_witness(c, "walship", 1, &a, sinks, 1, &wit), 0);
	memset(&inv, 0, sizeof(inv));
	assert_int_equal(ws_ckpt_deployment_id(c, inv.deployment), 0);
	inv.scope = WS_CKPT_SCOPE_LOCAL;
	inv.attempt = a;
	inv.key_count = 1;
	inv.keys = key;
	snprintf(key[0], sizeof(key[0]), "checkpoints/artifacts/%016" PRIx64 "/orders", a.checkpoint_id);
	assert_int_equal(ws_ckpt_begin_inventory(c, &inv, &ir), 0);
	assert_int_equal(ws_store_put(store, key[0], "half an artifact", 16, WS_PUT_CREATE, NULL, NULL), 0);
	/* Its writer aborted (a witness closes only once its attempt is decided). */
	{
		struct ws_ckpt_record_result rr;
		assert_int_equal(ws_ckpt_record_outcome(c, a.epoch, a.checkpoint_id, WS_CKPT_SCOPE_LOCAL, NULL, NULL,
							WS_CKPT_ABORT, NULL, &rr), 0);
	}
	assert_int_equal(ws_ckpt_clear_sink_open_witness(c, &wit), 0);

	memset(&co, 0, sizeof(co));
	co.peer_wait_ms = 300;
	rc = ws_checkpoint_take(s, &co, &info);
	if (rc)
		fail_msg("take after a stray inventory: %s (%s)", ws_strerror(rc), ws_errmsg());
	assert_true(info.own && info.committed);
	assert_true(info.id > a.checkpoint_id);
	/* The stray attempt was decided (Abort) and its artifact is gone. */
	assert_int_equal(ws_ckpt_latest_terminal(c, &term, &found), 0);
	assert_true(found && term.checkpoint_id == info.id);
	artifacts_all_committed(s, url);
	co.peer_wait_ms = 1;
	assert_int_equal(ws_checkpoint_take(s, &co, &info), 0);
	assert_true(info.own && info.committed);
	assert_int_equal(restored(&e, s, WS_CHECKPOINT_LATEST, true), h);
	ws_ckpt_close(c);
	ws_store_close(store);
	ws_stream_close(st);
	ws_sink_close(s);
	wt_env_free(&e);
}

/*
 * Tails whose watermark carries their manifest (carry_in_watermark =
 * always) on S3 (issue 31, item 3): four checkpoints in a row, each after
 * more carried tails, each names the newest state acknowledged at its
 * decision (they named the stored predecessor, the same older state every
 * time); restore by time inside a merged span gives each tail's state;
 * retention, then the latest state and verify, on S3.
 */
static void test_s3_carried_cut_is_newest(void **state)
{
	struct wt_env e;
	struct ws_stream_config cfg;
	struct ws_stream *st;
	struct ws_outcome o;
	struct ws_sink *s;
	struct ws_retention_report rep;
	char prefix[64], url[1024];
	uint64_t h[3];
	int64_t acked[3];
	int err = 0;
	(void)state;

	wt_env_init(&e, "ckpt-s3-carried", 0);
	snprintf(prefix, sizeof(prefix), "carried-%ld", (long)getpid());
	sink_url(url, sizeof(url), prefix);
	s = sink_open(url);
	memset(&cfg, 0, sizeof(cfg));
	cfg.tenant = "orders";
	cfg.db_path = e.db;
	cfg.epoch = 1;
	cfg.pointer_generation = 1;
	cfg.carry = WS_CARRY_ALWAYS;
	st = ws_stream_open(s, &cfg, &err);
	if (!st)
		fail_msg("stream: %s", ws_errmsg());
	wt_write_txn(e.w, 30, 500);
	wt_tail_ok(st, &o); /* a stored re-base */
	for (int round = 0; round < 4; round++) {
		struct ws_checkpoint_info ci;
		for (int i = 0; i < 3; i++) {
			usleep(20000);
			wt_write_txn(e.w, 3, 300);
			h[i] = wt_content_hash(e.w, NULL);
			wt_tail_ok(st, &o);
			acked[i] = ws_wall_ms();
		}
		for (int i = 0; i < 3; i++) {
			char name[64], *p;
			struct ws_restore_opts ro = { .time_ms = acked[i] };
			snprintf(name, sizeof(name), "t%u.db", ++e.restores);
			p = wt_path(e.out_dir, name);
			if (ws_restore(s, "orders", &ro, p) != 0)
				fail_msg("round %d: restore --time of tail %d: %s", round, i, ws_errmsg());
			if (wt_file_hash(p, NULL) != h[i])
				fail_msg("round %d: --time of tail %d is not its state", round, i);
			free(p);
		}
		assert_int_equal(ws_checkpoint_take(s, NULL, &ci), 0);
		assert_true(ci.committed);
		if (restored(&e, s, ci.id, true) != h[2])
			fail_msg("round %d: checkpoint %" PRIu64 " is not the newest acknowledged state", round, ci.id);
	}
	wt_write_txn(e.w, 3, 300);
	wt_tail_ok(st, &o);
	assert_int_equal(ws_retention_run(s, false, NULL, NULL, &rep), 0);
	assert_true(rep.ran);
	assert_true(rep.deleted > 0);
	assert_int_equal(restored(&e, s, 0, false), wt_content_hash(e.w, NULL));
	assert_int_equal(ws_verify(s, "orders", NULL, NULL), 0);
	ws_stream_close(st);
	ws_sink_close(s);
	wt_env_free(&e);
}

/*
 * Sealed artifacts on a real S3 server: a database spanning several 8 MiB
 * chunks (so several ranges), sealed with zstd and a key, checkpointed
 * twice (the second from the first's artifact), each restored by
 * checkpoint equal to the source at its cut and verified; a sink without
 * the key fails the restore with WS_ENOKEY, nothing at the output.
 */
static void test_s3_sealed_artifacts(void **state)
{
	struct wt_env e;
	struct ws_outcome o;
	struct ws_checkpoint_info c1, c2;
	char prefix[64], url[1024], *kf, *p;
	static const char key[] = "# k\n0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0\n";
	uint64_t h1, h2;
	int err = 0;
	(void)state;

	wt_env_init(&e, "ckpt-s3-sealed", 0);
	kf = wt_path(e.dir, "keys");
	assert_int_equal(wt_write_file(kf, key, strlen(key)), 0);
	snprintf(prefix, sizeof(prefix), "sealed-%ld", (long)getpid());
	sink_url(url, sizeof(url), prefix);
	struct ws_sink *s = sink_open(url), *bare = sink_open(url);
	struct ws_stream_config cfg = { .tenant = "orders", .db_path = e.db, .epoch = 1, .pointer_generation = 1,
					.seal = { .codec = WS_CODEC_ZSTD, .key_file = kf } };
	struct ws_checkpoint_opts co = { .seal = cfg.seal };
	struct ws_stream *st = ws_stream_open(s, &cfg, &err);
	if (!st)
		fail_msg("stream: %s", ws_errmsg());
	for (int i = 0; i < 6; i++) {
		wt_write_txn(e.w, 1200, 3000);
		wt_tail_ok(st, &o);
	}
	h1 = wt_content_hash(e.w, NULL);
	if (ws_checkpoint_take(s, &co, &c1) != 0)
		fail_msg("checkpoint: %s", ws_errmsg());
	wt_write_txn(e.w, 50, 300);
	wt_tail_ok(st, &o);
	h2 = wt_content_hash(e.w, NULL);
	assert_int_equal(ws_checkpoint_take(s, &co, &c2), 0);
	assert_true(c1.committed && c2.committed && c2.incremental == 1);
	assert_true(restored(&e, s, c1.id, true) == h1);
	assert_true(restored(&e, s, c2.id, true) == h2);
	assert_int_equal(ws_verify(s, "orders", NULL, NULL), 0);
	p = wt_path(e.out_dir, "nokey.db");
	assert_int_equal(ws_restore_checkpoint(bare, "orders", c2.id, p, false), WS_ENOKEY);
	assert_non_null(strstr(ws_errmsg(), "checkpoints/artifacts/"));
	assert_int_equal(access(p, F_OK), -1);
	free(p);
	free(kf);
	ws_stream_close(st);
	ws_sink_close(bare);
	ws_sink_close(s);
	wt_env_free(&e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_s3_race_and_restore),
		cmocka_unit_test(test_s3_recover_crashed_attempt),
		cmocka_unit_test(test_s3_peer_wait_bounded),
		cmocka_unit_test(test_s3_stale_probes),
		cmocka_unit_test(test_s3_stray_inventory_finished),
		cmocka_unit_test(test_s3_carried_cut_is_newest),
		cmocka_unit_test(test_s3_sealed_artifacts),
	};
	if (wt_s3_load_env("test_core_checkpoint_s3") != 0)
		return 1;
	return cmocka_run_group_tests(tests, setup_bucket, NULL);
}
