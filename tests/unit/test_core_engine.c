/*
 * The engine (core/engine.c): shards, the spill ring under each
 * backpressure policy, thousands of tenants, tenants coming and going while
 * shards run, and a kill -9 in the middle of shipping.
 *
 * Throttling comes from tests/util/throttlestore (a fake in front of the
 * real file store, for the one fault the file store cannot produce).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "chain.h"
#include "core_internal.h"
#include "engine.h"
#include "coreutil.h"
#include "throttlestore.h"
#include "ws_fault.h"
#include "ws_log.h"
#include "ws_clock.h"

#define MAX_STORES 64

/* ---- fixtures ------------------------------------------------------------- */

struct hook {
	struct ws_store *stores[MAX_STORES];   /* throttle stores the engine opened */
	bool uploader[MAX_STORES];
	unsigned n;
	uint32_t attempts_max;
	pthread_mutex_t mu;
	/* throttle_keys' last setting, for key stores opened after it (a
	 * shard's tail lanes open theirs at their first tail). */
	bool keys_set;
	char keys_match[64];
	int64_t keys_pass, keys_attempts;
	/* log_keys' match, for stores opened after it (lanes, as above). */
	bool log_set;
	char log_match[64];
	uint32_t keys_slow_ms;  /* slow_keys', for stores opened after it (lanes) */
};
static struct hook hook = { .mu = PTHREAD_MUTEX_INITIALIZER };

static struct ws_store *open_throttled(const char *url, unsigned shard, bool uploader, void *arg, int *err)
{
	struct ws_store *inner = ws_store_open_flags(url, uploader || shard ? WS_STORE_EXISTING : 0, err);
	struct ws_store *s;
	(void)arg;
	if (!inner)
		return NULL;
	s = wt_throttle_store_open(inner, hook.attempts_max, 1);
	pthread_mutex_lock(&hook.mu);
	if (!uploader && hook.keys_set)
		wt_throttle_set(s, hook.keys_match, hook.keys_pass, hook.keys_attempts);
	if (!uploader && hook.log_set)
		wt_throttle_log(s, hook.log_match);
	if (!uploader && hook.keys_slow_ms)
		wt_throttle_slow(s, hook.keys_slow_ms);
	assert_true(hook.n < MAX_STORES);
	hook.uploader[hook.n] = uploader;
	hook.stores[hook.n++] = s;
	pthread_mutex_unlock(&hook.mu);
	return s;
}

static void hook_on(uint32_t attempts_max)
{
	pthread_mutex_lock(&hook.mu);
	hook.n = 0;
	hook.keys_set = false;
	hook.log_set = false;
	hook.keys_slow_ms = 0;
	hook.attempts_max = attempts_max;
	pthread_mutex_unlock(&hook.mu);
	ws_engine_open_store_hook = open_throttled;
}

static void hook_off(void) { ws_engine_open_store_hook = NULL; }

/* How many stores the engine has opened so far: read under the hook's
 * mutex, since a shard's lanes open theirs at their first tail while the
 * test goes through the array (the entries below it are set before). */
static unsigned hook_count(void)
{
	pthread_mutex_lock(&hook.mu);
	const unsigned n = hook.n;
	pthread_mutex_unlock(&hook.mu);
	return n;
}

/* Apply to every upload-side store (batches and snapshot parts go there). */
static void throttle_uploads(const char *match, int64_t pass, int64_t attempts)
{
	for (unsigned i = 0, stores = hook_count(); i < stores; i++)
		if (hook.uploader[i])
			wt_throttle_set(hook.stores[i], match, pass, attempts);
}

/* Apply to the shards' own stores (manifests and watermarks go there),
 * those of tail lanes opened later too. */
static void throttle_keys(const char *match, int64_t pass, int64_t attempts)
{
	pthread_mutex_lock(&hook.mu);
	hook.keys_set = true;
	snprintf(hook.keys_match, sizeof(hook.keys_match), "%s", match);
	hook.keys_pass = pass;
	hook.keys_attempts = attempts;
	pthread_mutex_unlock(&hook.mu);
	for (unsigned i = 0, stores = hook_count(); i < stores; i++)
		if (!hook.uploader[i])
			wt_throttle_set(hook.stores[i], match, pass, attempts);
}

/* Log the writes of keys matching match on the shards' own stores, those
 * of tail lanes opened later too (wt_throttle_logged reads them). */
static void log_keys(const char *match)
{
	pthread_mutex_lock(&hook.mu);
	hook.log_set = true;
	snprintf(hook.log_match, sizeof(hook.log_match), "%s", match);
	pthread_mutex_unlock(&hook.mu);
	for (unsigned i = 0, stores = hook_count(); i < stores; i++)
		if (!hook.uploader[i])
			wt_throttle_log(hook.stores[i], match);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static void slow_uploads(uint32_t ms)
{
	for (unsigned i = 0, stores = hook_count(); i < stores; i++)
		if (hook.uploader[i])
			wt_throttle_slow(hook.stores[i], ms);
}

/* Every put of the shards' own stores (manifests, watermarks) takes at
 * least ms, those of tail lanes opened later too: a slow or paced store. */
static void slow_keys(uint32_t ms)
{
	pthread_mutex_lock(&hook.mu);
	hook.keys_slow_ms = ms;
	pthread_mutex_unlock(&hook.mu);
	for (unsigned i = 0, stores = hook_count(); i < stores; i++)
		if (!hook.uploader[i])
			wt_throttle_slow(hook.stores[i], ms);
}

/* Outcomes seen through the callback. */
struct seen {
	pthread_mutex_t mu;
	unsigned n[8];
	unsigned errors;
	unsigned deferred;   /* Error outcomes of deferred tails (block, throttle) */
	unsigned calls;      /* every on_outcome call */
	uint64_t frames_shed;
	uint64_t throttle_retries;
	uint64_t high_water;
	int last_err;
	struct ws_outcome last;
};
static struct seen seen = { .mu = PTHREAD_MUTEX_INITIALIZER };

/* Per tenant (the tests of tails in flight), under seen.mu. */
#define LANE_ACKS_MAX 256
struct lane_seen {
	const char *name;
	unsigned acked;               /* Streamed or Restarted */
	unsigned errors, sheds, fenced;
	int64_t ack_ms[LANE_ACKS_MAX]; /* wall ms of each acknowledgment */
};
static struct lane_seen lseen[4];

static void lane_note(const char *tenant, const struct ws_outcome *o, int err)
{
	for (unsigned i = 0; i < 4; i++) {
		struct lane_seen *l = &lseen[i];
		if (!l->name || strcmp(l->name, tenant) != 0)
			continue;
		if (err)
			l->errors++;
		else if (o->kind == WS_OUTCOME_SHED)
			l->sheds++;
		else if (o->kind == WS_OUTCOME_FENCED)
			l->fenced++;
		else if (o->kind == WS_OUTCOME_STREAMED || o->kind == WS_OUTCOME_RESTARTED) {
			assert_true(l->acked < LANE_ACKS_MAX);
			l->ack_ms[l->acked++] = ws_wall_ms();
		}
	}
}

static void on_outcome(const char *tenant, const struct ws_outcome *o, int err, void *arg)
{
	const struct ws_backpressure_report *bp = ws_outcome_backpressure(o);
	(void)arg;
	pthread_mutex_lock(&seen.mu);
	seen.calls++;
	lane_note(tenant, o, err);
	/* A failure is never Empty: its own kind, its code and message. */
	assert_true((err != 0) == (o->kind == WS_OUTCOME_ERROR));
	if (err) {
		assert_int_equal(o->u.error.code, err);
		assert_true(o->u.error.message[0] != '\0');
		if (o->u.error.deferred) {
			seen.deferred++;
		} else {
			seen.errors++;
			seen.last_err = err;
		}
	} else {
		seen.n[o->kind]++;
		seen.last = *o;
		if (bp) {
			seen.frames_shed += bp->frames_shed;
			seen.throttle_retries += bp->throttle_retries;
			if (bp->spill_high_water > seen.high_water)
				seen.high_water = bp->spill_high_water;
		}
	}
	pthread_mutex_unlock(&seen.mu);
}

static void seen_reset(void)
{
	pthread_mutex_lock(&seen.mu);
	memset(seen.n, 0, sizeof(seen.n));
	seen.errors = seen.deferred = seen.calls = 0;
	seen.frames_shed = seen.throttle_retries = seen.high_water = 0;
	seen.last_err = 0;
	memset(&seen.last, 0, sizeof(seen.last));
	pthread_mutex_unlock(&seen.mu);
}

/* The next shard_cfg's slots (docs/SLOTS.md; off but in the slot twins). */
static bool engine_slots;

static struct ws_shard_config shard_cfg(enum ws_policy p, uint64_t ring, uint64_t batch)
{
	struct ws_shard_config c;
	ws_shard_config_default(&c);
	c.slots = engine_slots;
	c.policy = p;
	c.ring_bytes = ring;
	c.batch_bytes_max = batch;
	c.batch_age_ms_max = 5;
	c.uploads_in_flight = 2;
	return c;
}

static uint32_t engine_drain_ms; /* the next engine_new's drain_ms_max */

static struct ws_engine *engine_new(const char *sink_url, unsigned shards, const struct ws_shard_config *sc)
{
	struct ws_shard_config cfgs[4];
	struct ws_engine_config ec;
	struct ws_engine *e;
	int err = 0;
	assert_true(shards <= 4);
	for (unsigned i = 0; i < shards; i++)
		cfgs[i] = *sc;
	memset(&ec, 0, sizeof(ec));
	ec.sink_url = sink_url;
	ec.shards = shards;
	ec.shard = cfgs;
	ec.epoch = 1;
	ec.pointer_generation = 1;
	ec.wal_checkpoint_bytes = UINT64_MAX;
	ec.on_outcome = on_outcome;
	ec.drain_ms_max = engine_drain_ms;
	e = ws_engine_create(&ec, &err);
	if (!e)
		fail_msg("engine: %s (%s)", ws_strerror(err), ws_errmsg());
	return e;
}

static void add_tenant(struct ws_engine *e, const char *name, const char *path, int shard)
{
	struct ws_tenant_config t = { .name = name, .db_path = path, .shard = shard };
	int rc = ws_engine_add_tenant(e, &t);
	if (rc)
		fail_msg("add %s: %s (%s)", name, ws_strerror(rc), ws_errmsg());
}

static void flush_ok(struct ws_engine *e)
{
	int rc = ws_engine_flush(e);
	if (rc)
		fail_msg("flush: %s (%s)", ws_strerror(rc), ws_errmsg());
}

static void restore_equals(struct ws_sink *sink, const char *tenant, sqlite3 *src, const char *out_dir)
{
	char name[WS_TENANT_MAX + 8];
	int64_t rs = 0, rr = 0;
	uint64_t hs, hr;
	char *out;
	int rc;
	snprintf(name, sizeof(name), "%s.db", tenant);
	out = wt_path(out_dir, name);
	unlink(out);
	rc = ws_restore(sink, tenant, NULL, out);
	if (rc)
		fail_msg("restore %s: %s (%s)", tenant, ws_strerror(rc), ws_errmsg());
	hs = wt_content_hash(src, &rs);
	hr = wt_file_hash(out, &rr);
	if (hs != hr || rs != rr)
		fail_msg("tenant %s: restored %" PRId64 " rows, source %" PRId64, tenant, rr, rs);
	unlink(out);
	free(out);
}

static void verify_ok(struct ws_sink *sink, const char *tenant)
{
	int rc = ws_verify(sink, tenant, NULL, NULL);
	if (rc)
		fail_msg("verify %s: %s (%s)", tenant, ws_strerror(rc), ws_errmsg());
}

/* ---- basics ------------------------------------------------------------- */

static void test_two_shards_wake_on_change(void **state)
{
	struct wt_env env;
	struct ws_shard_config sc = shard_cfg(WS_POLICY_BLOCK, 1u << 20, 256u << 10);
	struct ws_engine *e;
	struct ws_shard_metrics m0, m1;
	struct ws_tenant_metrics tm;
	char *db2;
	sqlite3 *w2;
	(void)state;

	wt_env_init(&env, "engine_basic", 0);
	db2 = wt_path(env.dir, "two.db");
	w2 = wt_writer_open(db2, 0);
	wt_write_txn(env.w, 50, 1000);
	wt_write_txn(w2, 20, 500);
	seen_reset();
	e = engine_new(env.sink_url, 2, &sc);
	add_tenant(e, "one", env.db, 0);
	add_tenant(e, "two", db2, 1);
	flush_ok(e);
	restore_equals(env.sink, "one", env.w, env.out_dir);
	restore_equals(env.sink, "two", w2, env.out_dir);

	/* A commit is shipped without any flush: the shard wakes on the change. */
	wt_write_txn(env.w, 10, 100);
	assert_int_equal(ws_engine_tenant_metrics(e, "one", &tm), 0);
	uint64_t before = tm.frames_shipped;
	for (int i = 0; i < 200; i++) {
		assert_int_equal(ws_engine_tenant_metrics(e, "one", &tm), 0);
		if (tm.frames_shipped > before)
			break;
		wt_sleep_ms(10);
	}
	assert_true(tm.frames_shipped > before);
	assert_true(tm.rpo.has_watermark);
	restore_equals(env.sink, "one", env.w, env.out_dir);

	assert_int_equal(ws_engine_shard_metrics(e, 0, &m0), 0);
	assert_int_equal(ws_engine_shard_metrics(e, 1, &m1), 0);
	assert_int_equal(m0.tenants, 1);
	assert_int_equal(m1.tenants, 1);
	assert_true(m0.ring_high_water <= m0.ring_bytes);
	assert_true(m0.puts > 0 && m1.puts > 0);

	char *text = NULL;
	size_t len = 0;
	assert_int_equal(ws_engine_metrics_text(e, &text, &len), 0);
	assert_non_null(strstr(text, "walship_tenant_frames_shipped_total{tenant=\"one\",shard=\"0\"}"));
	assert_non_null(strstr(text, "walship_shard_ring_bytes{shard=\"1\",policy=\"block\"} 1048576"));
	assert_non_null(strstr(text, "# TYPE walship_tenant_watermark_age_seconds gauge"));
	free(text);

	/* Bad registrations. */
	struct ws_tenant_config bad = { .name = "one", .db_path = env.db, .shard = 0 };
	assert_int_equal(ws_engine_add_tenant(e, &bad), WS_ECONFIG); /* duplicate */
	bad.name = "three";
	bad.shard = 2;
	assert_int_equal(ws_engine_add_tenant(e, &bad), WS_ECONFIG); /* no such shard */
	bad.shard = -1;
	bad.db_path = "/nonexistent/x.db";
	assert_int_equal(ws_engine_add_tenant(e, &bad), -ENOENT);
	bad.name = "../evil";
	assert_int_equal(ws_engine_add_tenant(e, &bad), WS_ECONFIG);
	assert_int_equal(ws_engine_remove_tenant(e, "nobody"), WS_ENOTFOUND);

	assert_int_equal(ws_engine_stop(e), 0);
	assert_int_equal(ws_engine_stop(e), 0); /* idempotent */
	ws_engine_destroy(e);
	sqlite3_close(w2);
	free(db2);
	wt_env_free(&env);
}

/*
 * ws_engine_add_tenants: each tenant's result in rcs, the call's the
 * lowest index that failed (with its detail), the others registered and
 * shipped. Then a restart over what they stored: every first tail is
 * Empty with no database opened (the streams stay parked), and a commit
 * made after it is shipped on its own (the shard wakes on the change).
 */
static void test_add_many_at_once(void **state)
{
	struct wt_env env;
	struct ws_shard_config sc = shard_cfg(WS_POLICY_BLOCK, 1u << 20, 256u << 10);
	struct ws_engine *e;
	struct ws_tenant_metrics tm;
	char *db2;
	sqlite3 *w2;
	int rcs[6];
	(void)state;

	wt_env_init(&env, "engine_many_at_once", 0);
	db2 = wt_path(env.dir, "two.db");
	w2 = wt_writer_open(db2, 0);
	wt_write_txn(env.w, 50, 1000);
	wt_write_txn(w2, 20, 500);
	const struct ws_tenant_config tcs[6] = {
		{ .name = "a", .db_path = env.db, .shard = -1 },
		{ .name = "bad/name", .db_path = env.db, .shard = -1 },
		{ .name = "b", .db_path = db2, .shard = -1 },
		{ .name = "a", .db_path = db2, .shard = -1 },         /* a duplicate */
		{ .name = "c", .db_path = "/nonexistent/c.db", .shard = -1 },
		{ .name = "d", .db_path = db2, .shard = 5 },          /* no such shard */
	};
	e = engine_new(env.sink_url, 2, &sc);
	memset(rcs, 0x7f, sizeof(rcs));
	assert_int_equal(ws_engine_add_tenants(e, tcs, 6, rcs), WS_ECONFIG);
	assert_non_null(strstr(ws_errmsg(), "bad/name"));
	assert_int_equal(rcs[0], 0);
	assert_int_equal(rcs[1], WS_ECONFIG);
	assert_int_equal(rcs[2], 0);
	assert_int_equal(rcs[3], WS_ECONFIG);
	assert_int_equal(rcs[4], -ENOENT);
	assert_int_equal(rcs[5], WS_ECONFIG);
	assert_int_equal(ws_engine_tenant_metrics(e, "c", &tm), WS_ENOTFOUND);
	flush_ok(e);
	restore_equals(env.sink, "a", env.w, env.out_dir);
	restore_equals(env.sink, "b", w2, env.out_dir);
	assert_int_equal(ws_engine_add_tenants(e, tcs, 0, NULL), 0); /* none: nothing to do */
	assert_int_equal(ws_engine_stop(e), 0);
	ws_engine_destroy(e);

	/* A restart over the stored streams: nothing new, every tail Empty. */
	const struct ws_tenant_config again[2] = { tcs[0], tcs[2] };
	seen_reset();
	e = engine_new(env.sink_url, 2, &sc);
	memset(rcs, 0x7f, sizeof(rcs));
	assert_int_equal(ws_engine_add_tenants(e, again, 2, rcs), 0);
	assert_int_equal(rcs[0], 0);
	assert_int_equal(rcs[1], 0);
	flush_ok(e);
	pthread_mutex_lock(&seen.mu);
	assert_int_equal(seen.errors, 0);
	if (seen.n[WS_OUTCOME_EMPTY] < 2 || seen.n[WS_OUTCOME_STREAMED] + seen.n[WS_OUTCOME_RESTARTED] != 0)
		fail_msg("after the restart: %u Empty, %u Streamed, %u Restarted (want every tail Empty)",
			 (unsigned)seen.n[WS_OUTCOME_EMPTY], (unsigned)seen.n[WS_OUTCOME_STREAMED],
			 (unsigned)seen.n[WS_OUTCOME_RESTARTED]);
	pthread_mutex_unlock(&seen.mu);
	/* Nothing of walship's holds the WAL: a TRUNCATE checkpoint completes. */
	{
		int log = -1, ckpt = -1;
		assert_int_equal(sqlite3_wal_checkpoint_v2(w2, NULL, SQLITE_CHECKPOINT_TRUNCATE, &log, &ckpt), SQLITE_OK);
		assert_int_equal(log, 0);
	}
	/* A commit after it ships with no flush: the parked tenant wakes. */
	assert_int_equal(ws_engine_tenant_metrics(e, "a", &tm), 0);
	const uint64_t before = tm.frames_shipped;
	wt_write_txn(env.w, 10, 100);
	for (int i = 0; i < 300 && tm.frames_shipped == before; i++) {
		wt_sleep_ms(10);
		assert_int_equal(ws_engine_tenant_metrics(e, "a", &tm), 0);
	}
	assert_true(tm.frames_shipped > before);
	restore_equals(env.sink, "a", env.w, env.out_dir);
	wt_write_txn(w2, 10, 100); /* after its WAL restarted: a re-base, exact */
	flush_ok(e);
	restore_equals(env.sink, "b", w2, env.out_dir);
	assert_int_equal(ws_engine_stop(e), 0);
	ws_engine_destroy(e);
	sqlite3_close(w2);
	free(db2);
	wt_env_free(&env);
}

/* A fenced tenant has no RPO: no watermark age in its metrics, no series
 * for it in the text export (the stream is a newer owner's; its age would
 * page the wrong operator), and fenced is 1. */
static void test_fenced_tenant_has_no_rpo(void **state)
{
	struct wt_env env;
	struct ws_shard_config sc = shard_cfg(WS_POLICY_BLOCK, 1u << 20, 256u << 10);
	struct ws_stream_config cfg;
	struct ws_stream *st;
	struct ws_outcome o;
	struct ws_engine *e;
	struct ws_tenant_metrics tm;
	char *text = NULL;
	size_t len = 0;
	int err = 0;
	(void)state;

	wt_env_init(&env, "engine_fenced_rpo", 0);
	wt_write_txn(env.w, 20, 100);
	memset(&cfg, 0, sizeof(cfg));
	cfg.tenant = "one";
	cfg.db_path = env.db;
	cfg.epoch = 5; /* a newer owner than the engine's epoch 1 */
	cfg.pointer_generation = 1;
	st = ws_stream_open(env.sink, &cfg, &err);
	assert_non_null(st);
	wt_tail_ok(st, &o);
	ws_stream_close(st);

	seen_reset();
	e = engine_new(env.sink_url, 1, &sc);
	add_tenant(e, "one", env.db, 0);
	if (ws_engine_flush(e) != 0)
		print_message("  flush: %s\n", ws_errmsg()); /* a fenced tenant's flush may say so */
	for (int i = 0; i < 200; i++) {
		assert_int_equal(ws_engine_tenant_metrics(e, "one", &tm), 0);
		if (tm.fenced)
			break;
		wt_sleep_ms(10);
	}
	assert_true(tm.fenced);
	/* Nor the new owner's frame as this owner's last shipped one. */
	assert_int_equal(tm.last_frame, 0);
	wt_sleep_ms(1100);
	assert_int_equal(ws_engine_tenant_metrics(e, "one", &tm), 0);
	assert_false(tm.rpo.has_watermark);
	assert_int_equal(tm.rpo.watermark_age_ms, 0);
	assert_int_equal(ws_engine_metrics_text(e, &text, &len), 0);
	assert_null(strstr(text, "walship_tenant_watermark_age_seconds{tenant=\"one\""));
	assert_non_null(strstr(text, "walship_tenant_fenced{tenant=\"one\",shard=\"0\"} 1"));
	free(text);
	assert_int_equal(ws_engine_stop(e), 0);
	ws_engine_destroy(e);
	wt_env_free(&env);
}

static uint64_t tenant_tails(struct ws_engine *e, const char *name)
{
	struct ws_tenant_metrics tm;
	assert_int_equal(ws_engine_tenant_metrics(e, name, &tm), 0);
	return tm.tails;
}

static uint64_t tenant_frames(struct ws_engine *e, const char *name)
{
	struct ws_tenant_metrics tm;
	assert_int_equal(ws_engine_tenant_metrics(e, name, &tm), 0);
	return tm.frames_shipped;
}

/*
 * Many tenants in one directory on one shard: a commit to one wakes that
 * one alone (the shard finds it by name, not by waking the directory), and
 * it keeps working while tenants around it come and go.
 */
static void test_wake_only_the_writer(void **state)
{
	enum { N = 40 };
	struct wt_env env;
	struct ws_shard_config sc = shard_cfg(WS_POLICY_BLOCK, 1u << 20, 256u << 10);
	struct ws_engine *e;
	sqlite3 *w[N];
	char name[N][16];
	uint64_t tails[N];
	(void)state;

	wt_env_init(&env, "engine_wake", 0);
	seen_reset();
	e = engine_new(env.sink_url, 1, &sc);
	for (int i = 0; i < N; i++) {
		char file[32], *db;
		snprintf(file, sizeof(file), "w%02d.db", i);
		snprintf(name[i], sizeof(name[i]), "w%02d", i);
		db = wt_path(env.dir, file);
		w[i] = wt_writer_open(db, 0);
		wt_write_txn(w[i], 5, 100);
		add_tenant(e, name[i], db, 0);
		free(db);
	}
	flush_ok(e);
	wt_sleep_ms(200); /* let wake-ups from registration settle */
	for (int i = 0; i < N; i++)
		tails[i] = tenant_tails(e, name[i]);

	/* Writes to three of them: each ships, nobody else is tailed. */
	const int hot[] = { 0, 17, N - 1 };
	for (size_t h = 0; h < sizeof(hot) / sizeof(hot[0]); h++) {
		int k = hot[h];
		uint64_t before = tenant_frames(e, name[k]);
		wt_write_txn(w[k], 3, 100);
		for (int i = 0; i < 300 && tenant_frames(e, name[k]) == before; i++)
			wt_sleep_ms(10);
		assert_true(tenant_frames(e, name[k]) > before);
		restore_equals(env.sink, name[k], w[k], env.out_dir);
	}
	wt_sleep_ms(50);
	for (int i = 0; i < N; i++) {
		bool is_hot = i == 0 || i == 17 || i == N - 1;
		if (is_hot)
			assert_true(tenant_tails(e, name[i]) > tails[i]);
		else if (tenant_tails(e, name[i]) != tails[i])
			fail_msg("tenant %s was tailed %" PRIu64 " times for another tenant's write", name[i],
				 tenant_tails(e, name[i]) - tails[i]);
	}

	/* Remove every even tenant; a write to a removed one wakes nobody, a
	 * write to one that stayed still ships. */
	for (int i = 0; i < N; i += 2)
		assert_int_equal(ws_engine_remove_tenant(e, name[i]), 0);
	wt_write_txn(w[2], 3, 100);
	uint64_t before = tenant_frames(e, name[17]);
	wt_write_txn(w[17], 3, 100);
	for (int i = 0; i < 300 && tenant_frames(e, name[17]) == before; i++)
		wt_sleep_ms(10);
	assert_true(tenant_frames(e, name[17]) > before);
	restore_equals(env.sink, name[17], w[17], env.out_dir);
	/* Re-registering a removed tenant picks up where the sink is. */
	{
		char *db = wt_path(env.dir, "w02.db");
		add_tenant(e, name[2], db, 0);
		free(db);
		flush_ok(e);
		restore_equals(env.sink, name[2], w[2], env.out_dir);
	}

	assert_int_equal(ws_engine_stop(e), 0);
	ws_engine_destroy(e);
	for (int i = 0; i < N; i++)
		sqlite3_close(w[i]);
	wt_env_free(&env);
}

/*
 * A busy writer makes an inotify event per WAL write. The shard must not
 * wake for each of them: it reads the queue at most every few ms while
 * events keep coming, and still ships everything.
 */
static void test_busy_writer_does_not_wake_per_write(void **state)
{
	struct wt_env env;
	struct ws_shard_config sc = shard_cfg(WS_POLICY_BLOCK, 1u << 20, 256u << 10);
	struct ws_engine *e;
	struct ws_shard_metrics m0, m1;
	(void)state;

	sc.batch_age_ms_max = 200;
	wt_env_init(&env, "engine_storm", 0);
	seen_reset();
	e = engine_new(env.sink_url, 1, &sc);
	wt_write_txn(env.w, 1, 100);
	add_tenant(e, "busy", env.db, 0);
	flush_ok(e);
	wt_sleep_ms(100);
	assert_int_equal(ws_engine_shard_metrics(e, 0, &m0), 0);
	/* 300 commits, a millisecond apart: 300 or more WAL writes. */
	int64_t t0 = wt_now_ms();
	for (int i = 0; i < 300; i++) {
		wt_write_txn(env.w, 1, 50);
		wt_sleep_ms(1);
	}
	int64_t elapsed = wt_now_ms() - t0;
	assert_int_equal(ws_engine_shard_metrics(e, 0, &m1), 0);
	uint64_t wakes = m1.wakeups - m0.wakeups;
	/* At most one read of the queue per 10 ms, each followed by a wake-up
	 * when its gap ends, plus the tails they led to (one per batch_age) and
	 * slack; on a loaded machine the commits take longer, so the bound
	 * follows the time they took. (A second bound, fewer than 300 whenever
	 * the commits took under 2 s, was stricter than this model between
	 * 1.3 and 2 s and failed under TSan at a load of 9: 312 wake-ups in
	 * 1,954 ms, within the model's 430. A wake-up per write shows as 300
	 * or more whenever the commits took under 1.3 s.) */
	uint64_t bound = (uint64_t)elapsed / 5 + 40;
	if (bound >= 300)
		print_message("the commits took %" PRId64 " ms: at this load a wake-up per write (300) is within "
			      "the bound (%" PRIu64 "), so this run shows only that there were no more\n",
			      elapsed, bound);
	if (wakes > bound)
		fail_msg("the shard woke %" PRIu64 " times for 300 commits in %" PRId64 " ms (bound %" PRIu64 ")",
			 wakes, elapsed, bound);
	flush_ok(e);
	restore_equals(env.sink, "busy", env.w, env.out_dir);
	assert_int_equal(ws_engine_stop(e), 0);
	ws_engine_destroy(e);
	wt_env_free(&env);
}

static uint64_t file_frames(const struct wt_env *e)
{
	struct stat sb;
	if (stat(e->wal, &sb) != 0 || sb.st_size < 32)
		return 0;
	return ((uint64_t)sb.st_size - 32) / (24u + e->page_size);
}

/*
 * Where the WAL's chain ends, found by whichever thread read that part of
 * it. The shard thread and the upload thread each read and check every
 * other slot (the upload thread the first, when there are several), so a
 * frame that breaks the chain lands in a slot of either: a page that fails
 * SQLite's checksum, or a frame with foreign salts. In each case the tail
 * ships exactly up to the last commit before it, restore gives the
 * database as of that commit, and nothing past it reaches the sink.
 */
static void test_chain_end_in_either_thread(void **state)
{
	(void)state;
	for (int salt = 0; salt <= 1; salt++) {
		for (uint64_t slot = 0; slot < 4; slot++) {
			struct wt_env env;
			struct ws_shard_config sc = shard_cfg(WS_POLICY_BLOCK, 16u * 80u << 10, 80u << 10);
			const uint64_t per = (80u << 10) / (24u + 4096u);
			uint64_t after[64], hash[64];
			int64_t rows[64];
			int n = 0;
			struct ws_engine *e;
			struct ws_tenant_metrics tm;
			char tag[32];

			snprintf(tag, sizeof(tag), "engine_end%d%" PRIu64, salt, slot);
			wt_env_init(&env, tag, 4096);
			/* Small transactions, their ends and contents noted, until
			 * the WAL spans the slots. */
			while (n < 64 && (n == 0 || after[n - 1] < per * 5)) {
				wt_write_txn(env.w, 3, 700);
				after[n] = file_frames(&env);
				hash[n] = wt_content_hash(env.w, &rows[n]);
				n++;
			}
			/* The first transaction that starts inside `slot`, past its
			 * first frame (slot k holds frames k*per+1 .. (k+1)*per). */
			int j = 0;
			while (j < n - 1 && after[j] + 1 < slot * per + 2)
				j++;
			assert_true(j < n - 1);
			uint64_t bad = after[j] + 1, off = 32 + (bad - 1) * (24u + 4096u);
			{
				int fd = open(env.wal, O_RDWR);
				uint8_t b;
				assert_true(fd >= 0);
				off += salt ? 9 : 24 + 1000;
				assert_int_equal(pread(fd, &b, 1, (off_t)off), 1);
				b ^= 0x5a;
				assert_int_equal(pwrite(fd, &b, 1, (off_t)off), 1);
				close(fd);
			}
			seen_reset();
			e = engine_new(env.sink_url, 1, &sc);
			add_tenant(e, "end", env.db, 0);
			flush_ok(e);
			assert_int_equal(ws_engine_tenant_metrics(e, "end", &tm), 0);
			if (tm.last_frame != after[j])
				fail_msg("%s in frame %" PRIu64 " (slot %" PRIu64 "): shipped to %" PRIu64 ", want %" PRIu64,
					 salt ? "foreign salt" : "bad checksum", bad, slot, tm.last_frame, after[j]);
			{
				char *out = wt_path(env.out_dir, "end.db");
				int64_t rr = 0;
				assert_int_equal(ws_restore(env.sink, "end", NULL, out), 0);
				assert_true(wt_file_hash(out, &rr) == hash[j]);
				assert_int_equal(rr, rows[j]);
				free(out);
			}
			verify_ok(env.sink, "end");
			/* No batch object starts at or past the broken frame (slots read
			 * ahead of knowing where the chain ended are never sent). */
			{
				struct ws_list_page pg;
				char token[WS_KEY_MAX] = "";
				unsigned batches = 0;
				do {
					assert_int_equal(ws_store_list(env.sink->store, "end/", token[0] ? token : NULL,
								       1000, &pg), 0);
					for (size_t k = 0; k < pg.count; k++) {
						const char *b = strstr(pg.keys[k], "/b");
						uint64_t first;
						if (!b || sscanf(b + 2, "%16" SCNx64, &first) != 1)
							continue;
						batches++;
						if (first >= bad)
							fail_msg("batch %s starts past the end of the chain (frame %" PRIu64 ")",
								 pg.keys[k], bad);
					}
					snprintf(token, sizeof(token), "%s", pg.truncated ? pg.next_token : "");
					ws_list_page_free(&pg);
				} while (token[0]);
				assert_true(batches > 0);
			}
			assert_int_equal(ws_engine_stop(e), 0);
			ws_engine_destroy(e);
			wt_env_free(&env);
		}
	}
}

static void test_bad_engine_config(void **state)
{
	struct ws_shard_config sc;
	struct ws_engine_config ec;
	int err = 0;
	(void)state;
	memset(&ec, 0, sizeof(ec));
	ws_shard_config_default(&sc);
	ec.sink_url = "file:///tmp/walship-never-created";
	ec.shards = 0;
	ec.shard = &sc;
	assert_null(ws_engine_create(&ec, &err));
	assert_int_equal(err, WS_ECONFIG);
	ec.shards = 1;
	sc.ring_bytes = sc.batch_bytes_max; /* one batch only */
	assert_null(ws_engine_create(&ec, &err));
	assert_int_equal(err, WS_ECONFIG);
	assert_non_null(strstr(ws_errmsg(), "ring_bytes"));
	ws_shard_config_default(&sc);
	sc.batch_bytes_max = 1000;
	assert_null(ws_engine_create(&ec, &err));
	assert_int_equal(err, WS_ECONFIG);
	ws_shard_config_default(&sc);
	sc.core = 100000;
	assert_null(ws_engine_create(&ec, &err));
	assert_int_equal(err, WS_ECONFIG);
	ws_shard_config_default(&sc);
	sc.uploads_in_flight = 0;
	assert_null(ws_engine_create(&ec, &err));
	assert_int_equal(err, WS_ECONFIG);
	ws_shard_config_default(&sc);
	sc.tails_in_flight = WS_TAILS_IN_FLIGHT_MAX + 1;
	assert_null(ws_engine_create(&ec, &err));
	assert_int_equal(err, WS_ECONFIG);
	assert_non_null(strstr(ws_errmsg(), "tails_in_flight 65 must be 1..64"));
	ws_shard_config_default(&sc);
	ec.sink_url = "gopher://x";
	assert_null(ws_engine_create(&ec, &err));
	assert_int_equal(err, WS_ECONFIG);
}

/* ---- policies ------------------------------------------------------------ */

/* Enough WAL for many ring slots: rows x ~1 KiB in 4 KiB pages. */
static void backlog(sqlite3 *w, int txns)
{
	for (int i = 0; i < txns; i++)
		wt_write_txn(w, 40, 1000);
}

static void test_block_holds_memory_loses_nothing(void **state)
{
	struct wt_env env;
	struct ws_shard_config sc = shard_cfg(WS_POLICY_BLOCK, 2 * 80u << 10, 80u << 10);
	struct ws_engine *e;
	struct ws_shard_metrics m;
	(void)state;

	wt_env_init(&env, "engine_block", 0);
	backlog(env.w, 20);
	seen_reset();
	hook_on(3);
	e = engine_new(env.sink_url, 1, &sc);
	/* Every batch upload is throttled for 40 attempts: far more than one
	 * request's bound (3), so only the block policy's own waiting gets the
	 * data through. */
	throttle_uploads("/b", 0, 40);
	add_tenant(e, "blk", env.db, 0);
	flush_ok(e);
	assert_int_equal(seen.errors, 0);
	assert_true(seen.n[WS_OUTCOME_STREAMED] + seen.n[WS_OUTCOME_RESTARTED] >= 1);
	assert_int_equal(seen.n[WS_OUTCOME_SHED], 0);
	assert_int_equal(seen.frames_shed, 0);
	assert_true(seen.throttle_retries > 0);
	assert_int_equal(ws_engine_shard_metrics(e, 0, &m), 0);
	assert_true(m.ring_high_water > 0);
	assert_true(m.ring_high_water <= m.ring_bytes);
	assert_true(m.throttle_retries > 0);
	restore_equals(env.sink, "blk", env.w, env.out_dir);
	verify_ok(env.sink, "blk");
	assert_int_equal(ws_engine_stop(e), 0);
	ws_engine_destroy(e);
	hook_off();
	wt_env_free(&env);
}

/*
 * A flush ships everything committed when it was called, even a backlog
 * longer than one call may name (a manifest names at most 4096 batches):
 * it calls again while a call ends early. The limit is put at a call's
 * third batch by the fault site (a fake: the real one takes a WAL of
 * 256 MiB or more); the restore is checked before stop, whose drain would
 * ship the rest anyway.
 */
static void test_flush_goes_past_the_batch_limit(void **state)
{
	struct wt_env env;
	struct ws_shard_config sc = shard_cfg(WS_POLICY_BLOCK, 8 * 80u << 10, 80u << 10);
	struct ws_engine *e;
	struct ws_shard_metrics m;
	(void)state;

	wt_env_init(&env, "engine_batchlim", 0);
	backlog(env.w, 2);
	seen_reset();
	e = engine_new(env.sink_url, 1, &sc);
	add_tenant(e, "lim", env.db, 0);
	flush_ok(e);
	backlog(env.w, 20);
	assert_int_equal(ws_fault_arm("stream.batch_limit", 2, 0), 0);
	flush_ok(e);
	ws_fault_disarm();
	assert_int_equal(seen.errors, 0);
	assert_int_equal(ws_engine_shard_metrics(e, 0, &m), 0);
	assert_true(m.tails_ended_early >= 1);
	restore_equals(env.sink, "lim", env.w, env.out_dir);
	verify_ok(env.sink, "lim");
	assert_int_equal(ws_engine_stop(e), 0);
	ws_engine_destroy(e);
	wt_env_free(&env);
}

/*
 * A watermark compare-and-swap that landed but whose reply was lost, the
 * retry refused because the watermark changed (to this very write): the
 * tail is acknowledged, not failed as "another writer" (an error an
 * operator would chase a writer that does not exist for). The sink's store
 * is the throttle store's lost-reply fault (a fake: neither radosgw nor the
 * file store loses a reply on demand).
 */
static void test_lost_watermark_reply_is_own_write(void **state)
{
	struct wt_env env;
	struct ws_shard_config sc = shard_cfg(WS_POLICY_BLOCK, 4 * 80u << 10, 80u << 10);
	struct ws_engine *e;
	(void)state;

	wt_env_init(&env, "engine_lost_reply", 0);
	backlog(env.w, 2);
	seen_reset();
	hook_on(3);
	e = engine_new(env.sink_url, 1, &sc);
	add_tenant(e, "lr", env.db, 0);
	flush_ok(e);
	backlog(env.w, 2);
	for (unsigned i = 0, stores = hook_count(); i < stores; i++)
		if (!hook.uploader[i])
			wt_throttle_lost_reply(hook.stores[i], "/wm", 1);
	seen_reset();
	flush_ok(e);
	assert_int_equal(seen.errors, 0);
	assert_int_equal(seen.n[WS_OUTCOME_STREAMED], 1);
	restore_equals(env.sink, "lr", env.w, env.out_dir);
	verify_ok(env.sink, "lr");
	assert_int_equal(ws_engine_stop(e), 0);
	ws_engine_destroy(e);
	hook_off();
	wt_env_free(&env);
}

/*
 * Under block, a request the store gave up on (throttled through all its
 * attempts) is sent again by the policy: each such re-send is a retry the
 * store throttled, counted in throttle_retries. With one attempt per request
 * the store counts none, and the six refusals were reported as 0.
 */
static void test_block_resends_counted(void **state)
{
	struct wt_env env;
	struct ws_shard_config sc = shard_cfg(WS_POLICY_BLOCK, 4 * 80u << 10, 80u << 10);
	struct ws_engine *e;
	struct ws_tenant_metrics tm;
	(void)state;

	wt_env_init(&env, "engine_block_count", 0);
	backlog(env.w, 2);
	seen_reset();
	hook_on(1);
	e = engine_new(env.sink_url, 1, &sc);
	throttle_uploads("/b", 0, 6);
	add_tenant(e, "bc", env.db, 0);
	flush_ok(e);
	assert_int_equal(ws_engine_tenant_metrics(e, "bc", &tm), 0);
	assert_true(tm.throttle_retries >= 6);
	restore_equals(env.sink, "bc", env.w, env.out_dir);
	assert_int_equal(ws_engine_stop(e), 0);
	ws_engine_destroy(e);
	hook_off();
	wt_env_free(&env);
}

/* One tenant (txns of backlog) on one shard whose sink says slow down to
 * every upload, each put giving up after `attempts`. */
static struct ws_engine *uploads_refused(struct wt_env *env, const struct ws_shard_config *sc, const char *dir,
					 const char *name, int txns, uint32_t attempts)
{
	struct ws_engine *e;
	wt_env_init(env, dir, 0);
	backlog(env->w, txns);
	seen_reset();
	hook_on(attempts);
	e = engine_new(env->sink_url, 1, sc);
	throttle_uploads("/", 0, -1);
	add_tenant(e, name, env->db, 0);
	return e;
}

static void test_throttle_counts_and_fails_bounded(void **state)
{
	struct wt_env env;
	struct ws_shard_config sc = shard_cfg(WS_POLICY_THROTTLE, 4 * 80u << 10, 80u << 10);
	struct ws_engine *e;
	struct ws_tenant_metrics tm;
	int rc;
	(void)state;

	e = uploads_refused(&env, &sc, "engine_throttle", "thr", 5, 4);
	rc = ws_engine_flush(e);
	assert_int_equal(rc, WS_ETHROTTLED);
	assert_non_null(strstr(ws_errmsg(), "thr"));
	assert_true(seen.errors >= 1);
	assert_int_equal(ws_engine_tenant_metrics(e, "thr", &tm), 0);
	assert_false(tm.rpo.has_watermark); /* nothing acknowledged */
	assert_true(tm.throttle_retries >= 3); /* 3 retries per request before giving up */
	assert_int_equal(tm.frames_shed, 0);

	/* The store recovers: the same range ships, counting what it took. */
	throttle_uploads("/", 0, 2);
	seen_reset();
	flush_ok(e);
	assert_true(seen.n[WS_OUTCOME_STREAMED] + seen.n[WS_OUTCOME_RESTARTED] >= 1);
	assert_true(seen.throttle_retries >= 2);
	restore_equals(env.sink, "thr", env.w, env.out_dir);
	assert_int_equal(ws_engine_stop(e), 0);
	ws_engine_destroy(e);
	hook_off();
	wt_env_free(&env);
}

/* stop under block with a sink that refuses every upload for ever: the
 * stop ends, with the error, instead of waiting for the sink (block waited
 * out failures until the ring closed, which only happens after the drain
 * the stop waits for). Then a remove after the stop is refused, the tenant
 * staying registered, and destroy releases it (it was freed while the
 * stopped shard still held it). */
struct stop_arg {
	struct ws_engine *e;
	int rc;
};

static void *stop_thread(void *arg)
{
	struct stop_arg *a = arg;
	a->rc = ws_engine_stop(a->e);
	return NULL;
}

static void test_stop_ends_under_block_when_sink_is_gone(void **state)
{
	struct wt_env env;
	struct ws_shard_config sc = shard_cfg(WS_POLICY_BLOCK, 4 * 80u << 10, 80u << 10);
	struct stop_arg a;
	struct timespec until;
	pthread_t th;
	int rc;
	(void)state;

	a.e = uploads_refused(&env, &sc, "engine_stop_gone", "gone", 3, 2);
	a.rc = 0;
	wt_sleep_ms(300); /* the first tail is waiting the refusals out */
	assert_int_equal(pthread_create(&th, NULL, stop_thread, &a), 0);
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 30;
	rc = pthread_timedjoin_np(th, NULL, &until);
	if (rc)
		fail_msg("ws_engine_stop still waiting after 30 s on a sink that refuses everything");
	assert_int_not_equal(a.rc, 0);
	rc = ws_engine_remove_tenant(a.e, "gone");
	assert_int_equal(rc, -ESHUTDOWN);
	assert_int_equal(ws_engine_remove_tenant(a.e, "gone"), -ESHUTDOWN); /* still registered */
	ws_engine_destroy(a.e);
	hook_off();
	wt_env_free(&env);
}

/* A tenant added while the final drain runs is refused (-ESHUTDOWN): it
 * was accepted and then never shipped, the stop returning 0. The add is
 * made from another thread while the drain is paused in a tail. */
struct late_add {
	struct ws_engine *e;
	const char *db;
	int rc;
	bool done;
	pthread_t th;
};

static void *late_add_thread(void *arg)
{
	struct late_add *l = arg;
	struct ws_tenant_config t = { .name = "late", .db_path = l->db, .shard = 0 };
	l->rc = ws_engine_add_tenant(l->e, &t);
	__atomic_store_n(&l->done, true, __ATOMIC_RELEASE);
	return NULL;
}

static void add_during_drain(const char *site, void *arg)
{
	struct late_add *l = arg;
	(void)site;
	assert_int_equal(pthread_create(&l->th, NULL, late_add_thread, l), 0);
	for (int i = 0; i < 50 && !__atomic_load_n(&l->done, __ATOMIC_ACQUIRE); i++)
		wt_sleep_ms(10);
}

static void test_add_during_stop_refused(void **state)
{
	struct wt_env env;
	struct ws_shard_config sc = shard_cfg(WS_POLICY_BLOCK, 1u << 20, 256u << 10);
	struct ws_engine *e;
	struct late_add l;
	char *db2;
	sqlite3 *w2;
	(void)state;

	wt_env_init(&env, "engine_late_add", 0);
	db2 = wt_path(env.dir, "late.db");
	w2 = wt_writer_open(db2, 0);
	wt_write_txn(w2, 5, 100);
	wt_write_txn(env.w, 5, 100);
	seen_reset();
	e = engine_new(env.sink_url, 1, &sc);
	add_tenant(e, "first", env.db, 0);
	flush_ok(e);
	memset(&l, 0, sizeof(l));
	l.e = e;
	l.db = db2;
	wt_write_txn(env.w, 5, 100); /* the final drain has something to ship */
	assert_int_equal(ws_fault_arm_pause("stream.before_watermark_put", 1, add_during_drain, &l), 0);
	assert_int_equal(ws_engine_stop(e), 0);
	ws_fault_disarm();
	pthread_join(l.th, NULL);
	assert_int_equal(l.rc, -ESHUTDOWN);
	restore_equals(env.sink, "first", env.w, env.out_dir);
	ws_engine_destroy(e);
	sqlite3_close(w2);
	free(db2);
	wt_env_free(&env);
}

/* Adding and removing one name at once, many times: the REMOVE never runs
 * before the ADD it races (the shard thread crashed on a stream not yet
 * made), and nothing is freed twice or dropped from the registry. */
struct churn {
	struct ws_engine *e;
	const char *db;
	int rounds;
};

static void *churn_remove(void *arg)
{
	struct churn *c = arg;
	for (int i = 0; i < c->rounds; i++) {
		int rc = ws_engine_remove_tenant(c->e, "churn");
		assert_true(rc == 0 || rc == WS_ENOTFOUND);
	}
	return NULL;
}

static void test_add_remove_race(void **state)
{
	struct wt_env env;
	struct ws_shard_config sc = shard_cfg(WS_POLICY_BLOCK, 1u << 20, 256u << 10);
	struct ws_engine *e;
	struct churn c;
	struct ws_tenant_metrics tm;
	pthread_t th;
	(void)state;

	wt_env_init(&env, "engine_churn", 0);
	wt_write_txn(env.w, 5, 100);
	seen_reset();
	e = engine_new(env.sink_url, 1, &sc);
	add_tenant(e, "keep", env.db, 0);
	c.e = e;
	c.db = env.db;
	c.rounds = 3000;
	assert_int_equal(pthread_create(&th, NULL, churn_remove, &c), 0);
	for (int i = 0; i < 200; i++) {
		struct ws_tenant_config t = { .name = "churn", .db_path = env.db, .shard = 0 };
		int rc = ws_engine_add_tenant(e, &t);
		/* registered already (not yet removed), or being removed */
		assert_true(rc == 0 || rc == WS_ECONFIG || rc == -EBUSY);
	}
	pthread_join(th, NULL);
	{
		int rc = ws_engine_remove_tenant(e, "churn");
		assert_true(rc == 0 || rc == WS_ENOTFOUND);
	}
	assert_int_equal(ws_engine_tenant_metrics(e, "keep", &tm), 0); /* still registered */
	flush_ok(e);
	assert_int_equal(ws_engine_stop(e), 0);
	ws_engine_destroy(e);
	wt_env_free(&env);
}

/*
 * The same race where the ADD fails (the path names a directory): the
 * remove, done first, freed the tenant while the failed add still read it
 * (and, with the memory reused by the next add, freed a live tenant). Each
 * add and remove returns one of its documented results; ASan checks the
 * rest.
 */
struct bad_churn {
	struct ws_engine *e;
	int rounds;
};

static void *bad_remove(void *arg)
{
	struct bad_churn *b = arg;
	for (int i = 0; i < b->rounds; i++) {
		int rc = ws_engine_remove_tenant(b->e, "bad");
		assert_true(rc == 0 || rc == WS_ENOTFOUND || rc == -EBUSY);
	}
	return NULL;
}

static void test_failed_add_remove_race(void **state)
{
	struct wt_env env;
	struct ws_shard_config sc = shard_cfg(WS_POLICY_BLOCK, 1u << 20, 256u << 10);
	struct bad_churn b;
	pthread_t th;
	(void)state;

	wt_env_init(&env, "engine_bad_churn", 0);
	seen_reset();
	b.e = engine_new(env.sink_url, 1, &sc);
	b.rounds = 3000;
	assert_int_equal(pthread_create(&th, NULL, bad_remove, &b), 0);
	for (int i = 0; i < 1000; i++) {
		struct ws_tenant_config t = { .name = "bad", .db_path = env.dir, .shard = 0 };
		int rc = ws_engine_add_tenant(b.e, &t);
		assert_true(rc != 0); /* a directory is no database */
	}
	pthread_join(th, NULL);
	assert_int_equal(ws_engine_stop(b.e), 0);
	ws_engine_destroy(b.e);
	wt_env_free(&env);
}

/*
 * A remove queued behind the engine's STOP never runs (the shard answers it
 * -ESHUTDOWN): the tenant, still the shard's, stays registered and
 * ws_engine_destroy closes its stream and frees it. The remove freed it
 * (ws_engine_destroy then read freed memory) and dropped it from the
 * registry. The stop and the remove are made from two threads while the
 * shard is paused in a tail, the stop first.
 */
struct stop_remove {
	struct ws_engine *e;
	pthread_t stop_th, remove_th;
	int stop_rc, remove_rc;
	int started; /* both threads created (__atomic: the pause sets it last) */
};

static void *remove_thread(void *arg)
{
	struct stop_remove *x = arg;
	x->remove_rc = ws_engine_remove_tenant(x->e, "gone");
	return NULL;
}

static void *stop_thread2(void *arg)
{
	struct stop_remove *x = arg;
	x->stop_rc = ws_engine_stop(x->e);
	return NULL;
}

static void stop_then_remove(const char *site, void *arg)
{
	struct stop_remove *x = arg;
	(void)site;
	/* The order of the two commands rests on these pauses: on a loaded
	 * machine 200 ms was once not enough for the STOP to be queued first. */
	assert_int_equal(pthread_create(&x->stop_th, NULL, stop_thread2, x), 0);
	wt_sleep_ms(1000); /* STOP is queued */
	assert_int_equal(pthread_create(&x->remove_th, NULL, remove_thread, x), 0);
	__atomic_store_n(&x->started, 1, __ATOMIC_RELEASE);
	wt_sleep_ms(1000); /* and the REMOVE behind it */
}

static void test_remove_behind_stop_keeps_tenant(void **state)
{
	struct wt_env env;
	struct ws_shard_config sc = shard_cfg(WS_POLICY_BLOCK, 1u << 20, 256u << 10);
	struct stop_remove x;
	struct ws_tenant_metrics tm;
	(void)state;

	wt_env_init(&env, "engine_remove_behind_stop", 0);
	wt_write_txn(env.w, 5, 100);
	seen_reset();
	memset(&x, 0, sizeof(x));
	x.e = engine_new(env.sink_url, 1, &sc);
	add_tenant(x.e, "gone", env.db, 0);
	flush_ok(x.e);
	assert_int_equal(ws_fault_arm_pause("stream.before_wal_header", 1, stop_then_remove, &x), 0);
	wt_write_txn(env.w, 5, 100); /* a due tail reaches the pause */
	/* Both threads exist before either is joined: the stop can end
	 * before the pause creates the remove's thread (seen under TSan on a
	 * loaded machine: a join of a thread not yet created). */
	for (int i = 0; i < 1000 && !__atomic_load_n(&x.started, __ATOMIC_ACQUIRE); i++)
		wt_sleep_ms(10);
	assert_true(__atomic_load_n(&x.started, __ATOMIC_ACQUIRE));
	pthread_join(x.stop_th, NULL);
	pthread_join(x.remove_th, NULL);
	ws_fault_disarm();
	assert_int_equal(x.stop_rc, 0);
	assert_int_equal(x.remove_rc, -ESHUTDOWN);
	assert_int_equal(ws_engine_tenant_metrics(x.e, "gone", &tm), 0); /* still registered */
	restore_equals(env.sink, "gone", env.w, env.out_dir);
	ws_engine_destroy(x.e); /* closes its stream, frees it once (ASan) */
	wt_env_free(&env);
}

/*
 * A tenant being removed stays registered until its stream is closed: an
 * add of its name meanwhile is refused (-EBUSY), on any shard. It was
 * accepted, and on another shard a second stream of the same database ran
 * beside the first's final drain. The add is made while the remove's drain
 * is paused in its tail.
 */
struct readd {
	struct ws_engine *e;
	const char *db;
	int add_rc, remove_rc;
	bool paused;
};

static void *readd_thread(void *arg)
{
	struct readd *r = arg;
	struct ws_tenant_config t = { .name = "twice", .db_path = r->db, .shard = 1 };
	r->add_rc = ws_engine_add_tenant(r->e, &t);
	return NULL;
}

static void readd_during_remove(const char *site, void *arg)
{
	struct readd *r = arg;
	pthread_t th;
	(void)site;
	r->paused = true;
	assert_int_equal(pthread_create(&th, NULL, readd_thread, r), 0);
	pthread_join(th, NULL);
}

static void test_readd_while_removing_refused(void **state)
{
	struct wt_env env;
	struct ws_shard_config sc = shard_cfg(WS_POLICY_BLOCK, 1u << 20, 256u << 10);
	struct readd r;
	struct ws_tenant_metrics tm;
	(void)state;

	wt_env_init(&env, "engine_readd", 0);
	wt_write_txn(env.w, 5, 100);
	seen_reset();
	memset(&r, 0, sizeof(r));
	r.e = engine_new(env.sink_url, 2, &sc);
	r.db = env.db;
	add_tenant(r.e, "twice", env.db, 0);
	flush_ok(r.e);
	wt_write_txn(env.w, 5, 100); /* the remove's drain has something to ship */
	assert_int_equal(ws_fault_arm_pause("stream.before_wal_header", 1, readd_during_remove, &r), 0);
	r.remove_rc = ws_engine_remove_tenant(r.e, "twice");
	ws_fault_disarm();
	assert_true(r.paused);
	assert_int_equal(r.add_rc, -EBUSY);
	assert_int_equal(r.remove_rc, 0);
	assert_int_equal(ws_engine_tenant_metrics(r.e, "twice", &tm), WS_ENOTFOUND);
	restore_equals(env.sink, "twice", env.w, env.out_dir);
	/* Once the remove has returned, the name can be added again. */
	add_tenant(r.e, "twice", env.db, 1);
	wt_write_txn(env.w, 5, 100);
	flush_ok(r.e);
	restore_equals(env.sink, "twice", env.w, env.out_dir);
	assert_int_equal(ws_engine_stop(r.e), 0);
	ws_engine_destroy(r.e);
	wt_env_free(&env);
}

/*
 * batch_age_ms_max under 4 ms (no gap between inotify reads): a commit to
 * tenant a (the shard's first) seen in the events read after tenant b's
 * tail was left out of the next wake-up, and the shard slept in poll with
 * no timeout until some other change. The commit is made while b's tail
 * is paused.
 */
struct commit_a {
	sqlite3 *wa;
};

static void commit_to_a(const char *site, void *arg)
{
	struct commit_a *c = arg;
	(void)site;
	wt_write_txn(c->wa, 3, 100);
}

static void test_change_seen_after_a_later_tail_wakes(void **state)
{
	struct wt_env env;
	struct ws_shard_config sc = shard_cfg(WS_POLICY_BLOCK, 1u << 20, 256u << 10);
	struct ws_engine *e;
	struct commit_a c;
	char *db_b;
	sqlite3 *wb;
	uint64_t a_frames, deadline;
	(void)state;

	sc.batch_age_ms_max = 2;
	sc.adaptive = false;
	wt_env_init(&env, "engine_late_wake", 0);
	db_b = wt_path(env.dir, "b.db");
	wb = wt_writer_open(db_b, 0);
	wt_write_txn(env.w, 3, 100);
	wt_write_txn(wb, 3, 100);
	seen_reset();
	e = engine_new(env.sink_url, 1, &sc);
	add_tenant(e, "a", env.db, 0); /* index 0 */
	add_tenant(e, "b", db_b, 0);   /* index 1 */
	flush_ok(e);
	a_frames = tenant_frames(e, "a");
	c.wa = env.w;
	assert_int_equal(ws_fault_arm_pause("stream.before_wal_header", 1, commit_to_a, &c), 0);
	wt_write_txn(wb, 3, 100); /* b's tail pauses; a commits meanwhile */
	deadline = ws_mono_ms() + 3000;
	while (tenant_frames(e, "a") == a_frames && ws_mono_ms() < deadline)
		wt_sleep_ms(5);
	ws_fault_disarm();
	if (tenant_frames(e, "a") == a_frames)
		fail_msg("tenant a's commit, seen after b's tail, was not shipped in 3 s");
	assert_int_equal(ws_engine_stop(e), 0);
	restore_equals(env.sink, "a", env.w, env.out_dir);
	ws_engine_destroy(e);
	sqlite3_close(wb);
	free(db_b);
	wt_env_free(&env);
}

/*
 * A failed ws_engine_create closes only what it opened: the shards after
 * the one that failed were never set up, and their descriptors (zero)
 * were closed, twice: the host's fd 0. Shard 1's store cannot be opened.
 */
static struct ws_store *fail_shard1(const char *url, unsigned shard, bool uploader, void *arg, int *err)
{
	(void)arg;
	if (shard == 1) {
		*err = ws_fail(-EIO, "test: shard 1's store cannot be opened");
		return NULL;
	}
	return ws_store_open_flags(url, uploader || shard ? WS_STORE_EXISTING : 0, err);
}

static void test_failed_create_leaves_host_fds(void **state)
{
	struct wt_env env;
	struct ws_shard_config sc[3];
	struct ws_engine_config ec;
	int p[2], saved, err = 0;
	(void)state;

	wt_env_init(&env, "engine_failed_create", 0);
	for (int i = 0; i < 3; i++)
		sc[i] = shard_cfg(WS_POLICY_BLOCK, 1u << 20, 256u << 10);
	memset(&ec, 0, sizeof(ec));
	ec.sink_url = env.sink_url;
	ec.shards = 3;
	ec.shard = sc;
	ec.epoch = 1;
	ec.pointer_generation = 1;
	saved = dup(0);
	assert_true(saved >= 0);
	assert_int_equal(pipe(p), 0);
	assert_int_equal(dup2(p[0], 0), 0);
	ws_engine_open_store_hook = fail_shard1;
	assert_null(ws_engine_create(&ec, &err));
	ws_engine_open_store_hook = NULL;
	assert_int_equal(err, -EIO);
	int still_open = fcntl(0, F_GETFD) != -1;
	assert_int_equal(dup2(saved, 0), 0);
	close(saved);
	close(p[0]);
	close(p[1]);
	assert_true(still_open);
	wt_env_free(&env);
}

/*
 * A shard whose poll fails (ENOMEM, for a moment) goes on serving: it left
 * its loop, and every later command, the engine's stop included, waited
 * for ever. Three failed polls (ws_engine_poll_hook: the kernel cannot be
 * made to fail a poll on demand), then a flush and a stop.
 */
static int poll_fails_left, poll_fails_seen;

static int poll_fail_hook(void)
{
	if (__atomic_load_n(&poll_fails_left, __ATOMIC_ACQUIRE) <= 0)
		return 0;
	if (__atomic_sub_fetch(&poll_fails_left, 1, __ATOMIC_ACQ_REL) < 0)
		return 0;
	__atomic_add_fetch(&poll_fails_seen, 1, __ATOMIC_RELAXED);
	return -ENOMEM;
}

static void test_poll_failure_keeps_shard(void **state)
{
	struct wt_env env;
	struct ws_shard_config sc = shard_cfg(WS_POLICY_BLOCK, 1u << 20, 256u << 10);
	struct ws_engine *e;
	(void)state;

	wt_env_init(&env, "engine_poll_fail", 0);
	wt_write_txn(env.w, 5, 100);
	seen_reset();
	__atomic_store_n(&poll_fails_left, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&poll_fails_seen, 0, __ATOMIC_RELEASE);
	ws_engine_poll_hook = poll_fail_hook;
	e = engine_new(env.sink_url, 1, &sc);
	add_tenant(e, "p", env.db, 0);
	flush_ok(e);
	__atomic_store_n(&poll_fails_left, 3, __ATOMIC_RELEASE);
	wt_write_txn(env.w, 5, 100); /* wakes the shard: its next polls fail */
	for (int i = 0; i < 200 && __atomic_load_n(&poll_fails_seen, __ATOMIC_ACQUIRE) < 3; i++)
		wt_sleep_ms(10);
	assert_int_equal(__atomic_load_n(&poll_fails_seen, __ATOMIC_ACQUIRE), 3);
	wt_write_txn(env.w, 5, 100);
	flush_ok(e);
	assert_int_equal(ws_engine_stop(e), 0);
	restore_equals(env.sink, "p", env.w, env.out_dir);
	ws_engine_destroy(e);
	ws_engine_poll_hook = NULL;
	wt_env_free(&env);
}

/*
 * A tenant whose tails fail backs off (100 ms, doubling, up to 30 s) while
 * its writer keeps committing: a change seen during the backoff is due when
 * the backoff ends, not batch_age_ms_max after it is seen (which retried a
 * failing store every batch_age_ms_max, whatever "retry in" said).
 */
static void test_failing_tenant_backs_off_under_writes(void **state)
{
	struct wt_env env;
	struct ws_shard_config sc = shard_cfg(WS_POLICY_THROTTLE, 4 * 80u << 10, 80u << 10);
	struct ws_engine *e;
	struct ws_tenant_metrics tm;
	uint64_t t0;
	(void)state;

	sc.batch_age_ms_max = 50;
	e = uploads_refused(&env, &sc, "engine_backoff", "bo", 1, 2);
	t0 = ws_mono_ms();
	while (ws_mono_ms() < t0 + 3000) {
		wt_write_txn(env.w, 1, 100);
		wt_sleep_ms(20);
	}
	assert_int_equal(ws_engine_tenant_metrics(e, "bo", &tm), 0);
	/* Failures at about 0, 0.1, 0.3, 0.7, 1.5 and 3.1 s; at 50 ms a
	 * retry it would be dozens. */
	if (tm.errors < 3 || tm.errors > 7)
		fail_msg("%" PRIu64 " failed tails in 3 s of commits (a backoff from 100 ms allows 6)", tm.errors);
	/* The store recovers: everything ships. */
	throttle_uploads("/", 0, 0);
	flush_ok(e);
	restore_equals(env.sink, "bo", env.w, env.out_dir);
	assert_int_equal(ws_engine_stop(e), 0);
	ws_engine_destroy(e);
	hook_off();
	wt_env_free(&env);
}

/*
 * The watermark writes the shard's stores logged (log_keys("/wm")), each
 * as it went out, in time order into ms (WT_THROTTLE_LOG_MAX): the test
 * fails unless each went out at least interval_ms after the one before.
 * Returns how many.
 */
static size_t wm_writes_apart(uint64_t *ms, uint32_t interval_ms)
{
	size_t n = 0;
	/* The tenant's tails may run on any of the shard's lanes, each with
	 * its own store: every one's watermark writes, in time order. */
	for (unsigned i = 0, stores = hook_count(); i < stores; i++)
		n += wt_throttle_logged(hook.stores[i], ms + n, WT_THROTTLE_LOG_MAX - n);
	qsort(ms, n, sizeof(ms[0]), cmp_u64);
	for (size_t i = 1; i < n; i++)
		if (ms[i] < ms[i - 1] + interval_ms)
			fail_msg("watermark writes %zu and %zu of %zu went out %" PRIu64 " ms apart "
				 "(key_write_interval_ms %u)", i - 1, i, n, ms[i] - ms[i - 1], interval_ms);
	return n;
}

/*
 * One write per second to one key, whatever made the tail due: a backlog
 * longer than tail_ms_max is shipped by a bounded tail and continuation
 * tails, and the last continuation (which reaches the end of the WAL
 * early) must still wait key_write_interval_ms after the watermark write
 * before it, as a tail woken by a commit does. Watermark writes are timed
 * in the store as they go out.
 */
static void test_key_interval_holds_for_continuations(void **state)
{
	struct wt_env env;
	struct ws_shard_config sc = shard_cfg(WS_POLICY_BLOCK, 4 * 80u << 10, 80u << 10);
	struct ws_engine *e;
	struct ws_tenant_metrics tm;
	struct ws_shard_metrics m;
	uint64_t ms[WT_THROTTLE_LOG_MAX], deadline, want;
	size_t n;
	(void)state;

	sc.adaptive = true;
	sc.tail_ms_max = 50;
	sc.key_write_interval_ms = 1000;
	wt_env_init(&env, "engine_key_interval", 0);
	backlog(env.w, 2);
	seen_reset();
	hook_on(3);
	e = engine_new(env.sink_url, 1, &sc);
	add_tenant(e, "key", env.db, 0);
	flush_ok(e); /* the first tail re-bases, and a re-base is never bounded */
	log_keys("/wm");
	slow_uploads(60);
	backlog(env.w, 120); /* ~5 MiB of WAL: seconds of slow uploads */
	want = file_frames(&env);
	/* No flush: a flush ships everything in one unbounded tail. */
	deadline = ws_mono_ms() + 60000;
	do {
		wt_sleep_ms(20);
		assert_int_equal(ws_engine_tenant_metrics(e, "key", &tm), 0);
		assert_true(ws_mono_ms() < deadline);
	} while (tm.last_frame < want);
	wt_sleep_ms(300); /* a write that would follow too soon has time to land */
	assert_int_equal(ws_engine_shard_metrics(e, 0, &m), 0);
	assert_true(m.tails_ended_early >= 2); /* the path under test ran */
	n = wm_writes_apart(ms, sc.key_write_interval_ms);
	assert_true(n >= 3);
	assert_int_equal(seen.errors, 0);
	restore_equals(env.sink, "key", env.w, env.out_dir);
	assert_int_equal(ws_engine_stop(e), 0);
	ws_engine_destroy(e);
	hook_off();
	wt_env_free(&env);
}

/* A writer that commits one small transaction every every_ms for ms. */
static void commit_for(sqlite3 *w, uint32_t ms, uint32_t every_ms)
{
	const uint64_t end = ws_mono_ms() + ms;
	while (ws_mono_ms() < end) {
		wt_write_txn(w, 1, 100);
		wt_sleep_ms(every_ms);
	}
}

/* An adaptive shard's configuration: batch_age_ms_max age_ms, key_write_interval_ms key_ms. */
static struct ws_shard_config key_cfg(uint32_t age_ms, uint32_t key_ms)
{
	struct ws_shard_config sc = shard_cfg(WS_POLICY_BLOCK, 4u << 20, 1u << 20);
	sc.adaptive = true;
	sc.batch_age_ms_max = age_ms;
	sc.key_write_interval_ms = key_ms;
	return sc;
}

/* Tenant name on a new engine of one shard (sc), its first tail flushed,
 * and from then on its watermark writes logged and the shard's manifest
 * and watermark writes slowed to slow_ms each. */
static struct ws_engine *key_engine(struct wt_env *env, const char *dir, const char *name,
				    const struct ws_shard_config *sc, uint32_t slow_ms)
{
	struct ws_engine *e;
	wt_env_init(env, dir, 0);
	seen_reset();
	hook_on(3);
	e = engine_new(env->sink_url, 1, sc);
	add_tenant(e, name, env->db, 0);
	flush_ok(e);
	log_keys("/wm");
	slow_keys(slow_ms);
	return e;
}

static void key_engine_done(struct wt_env *env, struct ws_engine *e, const char *name)
{
	assert_int_equal(seen.errors, 0);
	restore_equals(env->sink, name, env->w, env->out_dir);
	assert_int_equal(ws_engine_stop(e), 0);
	ws_engine_destroy(e);
	hook_off();
	wt_env_free(env);
}

/*
 * key_write_interval_ms holds under a slow (paced) store: the tenant's
 * manifest and watermark writes take 300 ms each while its writer commits
 * every 20 ms, so changes are seen while each tail is in flight. Such a
 * change was due from the watermark write before that tail's: when the
 * tail landed 600 ms into the interval, the next tail started at once and
 * its watermark went out 600 ms after this one. Every watermark write goes
 * out at least key_write_interval_ms after the one before.
 */
static void test_key_interval_holds_in_flight(void **state)
{
	struct wt_env env;
	const struct ws_shard_config sc = key_cfg(20, 1000);
	uint64_t ms[WT_THROTTLE_LOG_MAX];
	(void)state;

	struct ws_engine *e = key_engine(&env, "engine_key_in_flight", "kf", &sc, 300);
	commit_for(env.w, 4500, 20);
	wt_sleep_ms(1800); /* the last tail, and one that would follow too soon, land */
	assert_true(wm_writes_apart(ms, sc.key_write_interval_ms) >= 3);
	key_engine_done(&env, e, "kf");
}

/*
 * A tail due only because of key_write_interval_ms starts ahead of the
 * interval's end by what the tenant's tails take before their watermark
 * write (here a 150 ms manifest write), and only the watermark write waits
 * for the interval: consecutive watermark writes go out about one interval
 * apart, not one interval plus the manifest and watermark writes (900 ms
 * here, when the whole tail waited for the interval). Each at least one
 * interval apart all the same.
 */
static void test_key_interval_staged(void **state)
{
	struct wt_env env;
	const struct ws_shard_config sc = key_cfg(5, 600);
	struct ws_shard_metrics m;
	uint64_t ms[WT_THROTTLE_LOG_MAX], gaps[WT_THROTTLE_LOG_MAX];
	(void)state;

	struct ws_engine *e = key_engine(&env, "engine_key_staged", "ks", &sc, 150);
	commit_for(env.w, 7000, 10);
	wt_sleep_ms(1200);
	const size_t n = wm_writes_apart(ms, sc.key_write_interval_ms);
	/* The first gaps learn the lead (a tail's time to its write). */
	assert_true(n >= 8);
	for (size_t i = 3; i < n; i++)
		gaps[i - 3] = ms[i] - ms[i - 1];
	qsort(gaps, n - 3, sizeof(gaps[0]), cmp_u64);
	const uint64_t median = gaps[(n - 3) / 2];
	print_message("watermark writes: %zu, median gap %" PRIu64 " ms (%" PRIu64 "..%" PRIu64 ")\n", n, median,
		      gaps[0], gaps[n - 4]);
	if (median > sc.key_write_interval_ms + 75)
		fail_msg("watermark writes went out %" PRIu64 " ms apart (median of %zu), key_write_interval_ms %u: "
			 "the tails were not ready when the interval allowed their writes", median, n - 3,
			 sc.key_write_interval_ms);
	/* Waits are counted. Not how many: the lead is a mean plus its mean
	 * deviation, so a tail slower than that (often, on a loaded machine)
	 * is ready a few ms after the interval allows its write and does not
	 * wait (fewer than half of them waited in one run at load 17). */
	assert_int_equal(ws_engine_shard_metrics(e, 0, &m), 0);
	/* Under a heavy load every tail of the run above may be slower than
	 * its lead: commit on, a second at a time, until one waits (at most
	 * 8 s more). A count that never moves fails. */
	for (int more = 0; more < 8 && m.tails_key_waited == 0; more++) {
		commit_for(env.w, 1000, 10);
		assert_int_equal(ws_engine_shard_metrics(e, 0, &m), 0);
	}
	wt_sleep_ms(1200);
	assert_int_equal(ws_engine_shard_metrics(e, 0, &m), 0);
	const size_t writes = wm_writes_apart(ms, sc.key_write_interval_ms);
	print_message("tails whose watermark write waited: %" PRIu64 " of %zu watermark writes\n", m.tails_key_waited,
		      writes);
	assert_true(m.tails_key_waited >= 1 && m.tails_key_waited <= writes);
	key_engine_done(&env, e, "ks");
}

static uint64_t tails_of(struct ws_engine *e, const char *name)
{
	struct ws_tenant_metrics tm;
	assert_int_equal(ws_engine_tenant_metrics(e, name, &tm), 0);
	return tm.tails;
}

/* Poll until tenant name has had `want` tails; returns when (ws_mono_ms). */
static uint64_t wait_tails(struct ws_engine *e, const char *name, uint64_t want)
{
	const uint64_t deadline = ws_mono_ms() + 30000;
	while (tails_of(e, name) < want) {
		if (ws_mono_ms() > deadline)
			fail_msg("tenant %s: %" PRIu64 " tails after 30 s, waiting for %" PRIu64, name,
				 tails_of(e, name), want);
		wt_sleep_ms(2);
	}
	return ws_mono_ms();
}

/*
 * A change made while the shard works through a round of due tenants is
 * due batch_age_ms_max after it is seen, not after the round ends: four
 * tenants at the default batch_age_ms_max (1 s), each tail slowed to
 * 600 ms by the sink; tenant a0 commits again right after its own tail,
 * while b1, c2 and d3 are still to be tailed (1.8 s). By the end of the
 * round its change is over a second old, so its next tail follows d3's at
 * once; read only after the round, it would be due a second later and the
 * shard would sit idle for that second.
 */
static void test_change_during_a_round_is_due_from_when_seen(void **state)
{
	static const char *const names[] = { "a0", "b1", "c2", "d3" };
	struct wt_env env;
	struct ws_shard_config sc = shard_cfg(WS_POLICY_BLOCK, 4u << 20, 1u << 20);
	struct ws_engine *e;
	sqlite3 *w[4];
	char *path[4];
	uint64_t base[4], t_a1, t_d, t_a2;
	(void)state;

	sc.batch_age_ms_max = 1000;
	sc.inline_batch_bytes_max = UINT64_MAX; /* slow_uploads slows batches of their own */
	/* A round, one tail after another: with tails in flight the lanes take
	 * the due tenants in whatever order they get the shard's read lock. */
	sc.tails_in_flight = 1;
	wt_env_init(&env, "engine_round", 0);
	for (int i = 0; i < 4; i++) {
		char file[16];
		snprintf(file, sizeof(file), "%s.db", names[i]);
		path[i] = i ? wt_path(env.dir, file) : strdup(env.db);
		w[i] = i ? wt_writer_open(path[i], 0) : env.w;
		wt_write_txn(w[i], 5, 100);
	}
	seen_reset();
	hook_on(3);
	e = engine_new(env.sink_url, 1, &sc);
	for (int i = 0; i < 4; i++) {
		add_tenant(e, names[i], path[i], 0);
		free(path[i]);
	}
	flush_ok(e); /* the first tails re-base */
	for (int i = 0; i < 4; i++)
		base[i] = tails_of(e, names[i]);
	slow_uploads(600);
	for (int i = 0; i < 4; i++)
		wt_write_txn(w[i], 2, 100);
	t_a1 = wait_tails(e, "a0", base[0] + 1);
	wt_write_txn(env.w, 2, 100); /* during the round: b1, c2, d3 are still to come */
	t_d = wait_tails(e, "d3", base[3] + 1);
	t_a2 = wait_tails(e, "a0", base[0] + 2);
	if (t_d < t_a1 + 1200)
		fail_msg("the round after a0 took %" PRIu64 " ms: the uploads were not slow, the test does not test",
			 t_d - t_a1);
	/* a0's second tail is one slow tail (600 ms) after d3's, not a
	 * batch_age_ms_max more. */
	if (t_a2 > t_d + 1000)
		fail_msg("a0's change, made %" PRIu64 " ms before the round ended, was shipped %" PRIu64
			 " ms after it", t_d - t_a1, t_a2 - t_d);
	assert_int_equal(seen.errors, 0);
	slow_uploads(0);
	assert_int_equal(ws_engine_stop(e), 0);
	restore_equals(env.sink, "a0", env.w, env.out_dir);
	ws_engine_destroy(e);
	hook_off();
	for (int i = 1; i < 4; i++)
		sqlite3_close(w[i]);
	wt_env_free(&env);
}

static uint64_t wm_seq(struct ws_sink *sink, const char *tenant)
{
	struct ws_fmt_watermark wm;
	struct ws_etag etag;
	int rc = ws_wm_load(sink->store, tenant, &wm, &etag);
	return rc ? 0 : wm.seq;
}

/* ---- a tenant the store refuses ------------------------------------------- */

/* Warnings the engine logged, for the tests of a tenant that cannot ship. */
static struct {
	pthread_mutex_t mu;
	unsigned stalled, recovered;
	unsigned lanes_left_out;  /* "tail lane N cannot start" */
	char first[512];
} logged = { .mu = PTHREAD_MUTEX_INITIALIZER };

static void log_capture(enum ws_log_level level, const char *msg, void *arg)
{
	(void)level;
	(void)arg;
	pthread_mutex_lock(&logged.mu);
	if (strstr(msg, "nothing shipped for")) {
		if (!logged.stalled++)
			snprintf(logged.first, sizeof(logged.first), "%s", msg);
	}
	if (strstr(msg, "shipping again after"))
		logged.recovered++;
	if (strstr(msg, "cannot start") && strstr(msg, "tail lane"))
		logged.lanes_left_out++;
	pthread_mutex_unlock(&logged.mu);
}

static void log_capture_on(void)
{
	pthread_mutex_lock(&logged.mu);
	logged.stalled = logged.recovered = logged.lanes_left_out = 0;
	logged.first[0] = '\0';
	pthread_mutex_unlock(&logged.mu);
	ws_log_set_sink(log_capture, NULL);
}

/* Wait (5 s at most) until the tenant's watermark names frame >= want. */
static void wait_last_frame(struct ws_engine *e, const char *name, uint64_t want)
{
	struct ws_tenant_metrics tm;
	for (int i = 0; i < 5000; i++) {
		assert_int_equal(ws_engine_tenant_metrics(e, name, &tm), 0);
		if (tm.last_frame >= want && !tm.stalled)
			return;
		ws_sleep_ms(1);
	}
	fail_msg("tenant %s: last frame %" PRIu64 ", want %" PRIu64, name, tm.last_frame, want);
}

static uint64_t wal_frames(const char *db)
{
	char wal[4096];
	struct stat st;
	snprintf(wal, sizeof(wal), "%s-wal", db);
	assert_int_equal(stat(wal, &st), 0);
	return ((uint64_t)st.st_size - 32) / (4096 + 24);
}

/*
 * The shard's store refuses `refusals` key writes with a Retry-After
 * (fail-fast): every tail the engine ran reached on_outcome (Error
 * outcomes marked deferred under block, Shed under shed), the refusals
 * summed over the outcomes are the tenant's count, one warning came once
 * the tenant had not shipped for stall_warn_ms and one line when it did,
 * and everything shipped in the end.
 */
static void refused_then_ships(enum ws_policy policy, const char *dir, const char *name)
{
	struct wt_env env;
	struct ws_shard_config sc = shard_cfg(policy, 4 * 80u << 10, 80u << 10);
	struct ws_engine *e;
	struct ws_tenant_metrics tm;
	const int refusals = 6; /* 6 x 20 ms of Retry-After: past stall_warn_ms */

	sc.stall_warn_ms = 60;
	wt_env_init(&env, dir, 0);
	backlog(env.w, 2);
	seen_reset();
	log_capture_on();
	hook_on(3);
	e = engine_new(env.sink_url, 1, &sc);
	throttle_keys("", 0, refusals);
	add_tenant(e, name, env.db, 0);
	wait_last_frame(e, name, wal_frames(env.db));
	ws_sleep_ms(50); /* no tail in flight: the outcomes are all in */
	assert_int_equal(ws_engine_tenant_metrics(e, name, &tm), 0);
	pthread_mutex_lock(&seen.mu);
	assert_int_equal(seen.calls, tm.tails);
	assert_int_equal(seen.errors, 0);
	assert_true(tm.deferrals >= 1);
	if (policy == WS_POLICY_SHED) {
		assert_int_equal(seen.deferred, 0);
		assert_int_equal(seen.n[WS_OUTCOME_SHED], tm.deferrals);
		assert_true(seen.frames_shed >= 1);
	} else {
		assert_int_equal(seen.deferred, tm.deferrals);
		assert_int_equal(seen.n[WS_OUTCOME_SHED], 0);
	}
	/* A host summing the field sees each refusal once. */
	assert_int_equal(seen.throttle_retries, tm.throttle_retries);
	assert_true(seen.throttle_retries >= (uint64_t)refusals);
	pthread_mutex_unlock(&seen.mu);
	assert_false(tm.stalled);
	assert_true(tm.since_ack_ms < 5000);
	pthread_mutex_lock(&logged.mu);
	assert_true(logged.stalled >= 1);
	assert_true(logged.stalled <= 2); /* one, and repeats at most every 30 s */
	assert_non_null(strstr(logged.first, name));
	assert_non_null(strstr(logged.first, "SlowDown"));
	assert_non_null(strstr(logged.first, "RPO"));
	assert_int_equal(logged.recovered, 1);
	pthread_mutex_unlock(&logged.mu);
	ws_log_set_sink(NULL, NULL);
	restore_equals(env.sink, name, env.w, env.out_dir);
	assert_int_equal(ws_engine_stop(e), 0);
	ws_engine_destroy(e);
	hook_off();
	wt_env_free(&env);
}

static void test_deferred_block_reaches_host(void **state)
{
	(void)state;
	refused_then_ships(WS_POLICY_BLOCK, "engine_defer_block", "dfb");
}

static void test_deferred_throttle_reaches_host(void **state)
{
	(void)state;
	refused_then_ships(WS_POLICY_THROTTLE, "engine_defer_thr", "dft");
}

static void test_deferred_shed_is_shed(void **state)
{
	(void)state;
	refused_then_ships(WS_POLICY_SHED, "engine_defer_shed", "dfs");
}

/*
 * drain_ms_max: a stop under a store that takes 300 ms a write ends near
 * its deadline with -ETIMEDOUT, the tenant marked undrained; nothing
 * acknowledged is lost, and the next engine ships the rest: restore equal.
 */
static void test_drain_deadline(void **state)
{
	struct wt_env env;
	struct ws_shard_config sc = shard_cfg(WS_POLICY_BLOCK, 4 * 80u << 10, 80u << 10);
	struct ws_engine *e;
	struct ws_tenant_metrics tm;
	uint64_t t0, took;
	(void)state;

	wt_env_init(&env, "engine_drain_deadline", 0);
	seen_reset();
	hook_on(3);
	engine_drain_ms = 400;
	e = engine_new(env.sink_url, 1, &sc);
	add_tenant(e, "dd", env.db, 0);
	flush_ok(e);
	slow_uploads(300);
	backlog(env.w, 30);
	t0 = ws_mono_ms();
	assert_int_equal(ws_engine_stop(e), -ETIMEDOUT);
	took = ws_mono_ms() - t0;
	/* The deadline, the write in flight then, and room for a loaded
	 * sanitizer build: a drain of the whole backlog at 300 ms a write
	 * would take far longer. */
	assert_true(took < 400 + 5000);
	assert_non_null(strstr(ws_errmsg(), "drain_ms_max"));
	assert_int_equal(ws_engine_tenant_metrics(e, "dd", &tm), 0);
	assert_true(tm.undrained);
	ws_engine_destroy(e);
	hook_off();
	engine_drain_ms = 0;

	/* The next start ships what the deadline left. */
	e = engine_new(env.sink_url, 1, &sc);
	add_tenant(e, "dd", env.db, 0);
	flush_ok(e);
	assert_int_equal(ws_engine_stop(e), 0);
	assert_int_equal(ws_engine_tenant_metrics(e, "dd", &tm), 0);
	assert_false(tm.undrained);
	ws_engine_destroy(e);
	restore_equals(env.sink, "dd", env.w, env.out_dir);
	wt_env_free(&env);
}


static void test_shed_nothing_persisted_is_shed(void **state)
{
	struct wt_env env;
	struct ws_shard_config sc = shard_cfg(WS_POLICY_SHED, 4 * 80u << 10, 80u << 10);
	struct ws_engine *e;
	struct ws_tenant_metrics tm;
	(void)state;

	sc.batch_age_ms_max = 600000; /* only flushes tail: the test sets the stage first */
	wt_env_init(&env, "engine_shed", 0);
	wt_write_txn(env.w, 10, 100);
	seen_reset();
	hook_on(2);
	e = engine_new(env.sink_url, 1, &sc);
	add_tenant(e, "shd", env.db, 0);
	flush_ok(e); /* the first contact ships (re-base) */
	uint64_t seq0 = wm_seq(env.sink, "shd");
	assert_true(seq0 > 0);
	assert_int_equal(ws_engine_tenant_metrics(e, "shd", &tm), 0);
	uint64_t last0 = tm.last_frame;

	/* New frames; every batch upload is throttled past its bound. */
	throttle_uploads("/b", 0, -1);
	backlog(env.w, 3);
	seen_reset();
	flush_ok(e); /* Shed is an outcome, not an error */
	assert_true(seen.n[WS_OUTCOME_SHED] >= 1);
	assert_int_equal(seen.last.kind, WS_OUTCOME_SHED);
	assert_int_equal(seen.last.u.shed.first_frame, last0 + 1);
	assert_true(seen.last.u.shed.last_frame > last0);
	assert_int_equal(seen.last.u.shed.backpressure.policy, WS_POLICY_SHED);
	assert_int_equal(seen.last.u.shed.backpressure.frames_shed,
			 seen.last.u.shed.last_frame - seen.last.u.shed.first_frame + 1);
	assert_true(seen.last.u.shed.backpressure.throttle_retries >= 1);
	assert_non_null(ws_outcome_rpo(&seen.last));
	/* No manifest, no watermark. */
	assert_int_equal(wm_seq(env.sink, "shd"), seq0);

	/* Throttling stops: the same range ships from the unchanged watermark. */
	throttle_uploads(NULL, 0, 0);
	seen_reset();
	flush_ok(e);
	assert_int_equal(seen.last.kind, WS_OUTCOME_STREAMED);
	assert_int_equal(seen.last.u.streamed.first_frame, last0 + 1);
	assert_int_equal(seen.last.u.streamed.backpressure.frames_shed, 0);
	restore_equals(env.sink, "shd", env.w, env.out_dir);
	verify_ok(env.sink, "shd");
	assert_int_equal(ws_engine_stop(e), 0);
	ws_engine_destroy(e);
	hook_off();
	wt_env_free(&env);
}

static void test_shed_prefix_is_streamed_with_frames_shed(void **state)
{
	struct wt_env env;
	/* One frame per batch and uploads one at a time: the order of what
	 * lands is the order of the WAL. */
	struct ws_shard_config sc = shard_cfg(WS_POLICY_SHED, 8 * 80u << 10, 80u << 10);
	struct ws_engine *e;
	struct ws_tenant_metrics tm;
	(void)state;

	sc.batch_frames_max = 1;
	sc.uploads_in_flight = 1;
	sc.batch_age_ms_max = 600000;
	wt_env_init(&env, "engine_shedpfx", 0);
	wt_write_txn(env.w, 10, 100);
	seen_reset();
	hook_on(2);
	e = engine_new(env.sink_url, 1, &sc);
	add_tenant(e, "pfx", env.db, 0);
	flush_ok(e);
	assert_int_equal(ws_engine_tenant_metrics(e, "pfx", &tm), 0);
	uint64_t last0 = tm.last_frame;

	/* Six one-page transactions (a frame each, plus the btree's), then the
	 * sink gives out after 3 batch uploads. */
	throttle_uploads("/b", 3, -1);
	for (int i = 0; i < 6; i++)
		wt_write_txn(env.w, 1, 100);
	wt_sleep_ms(1500);
	seen_reset();
	flush_ok(e);
	assert_int_equal(seen.last.kind, WS_OUTCOME_STREAMED);
	assert_int_equal(seen.last.u.streamed.first_frame, last0 + 1);
	assert_true(seen.last.u.streamed.backpressure.frames_shed > 0);
	/* Commits were left behind: the RPO is still from the last complete
	 * ship, 1.5 s and more ago, not the time of this partial one's write. */
	assert_true(seen.last.u.streamed.rpo.watermark_age_ms >= 1500);
	assert_int_equal(ws_engine_tenant_metrics(e, "pfx", &tm), 0);
	assert_true(tm.rpo.has_watermark && tm.rpo.watermark_age_ms >= 1500);
	uint64_t shipped_to = seen.last.u.streamed.last_frame;
	assert_true(shipped_to > last0 && shipped_to < last0 + 6 * 2);
	/* What restore sees is a committed prefix: verify passes. */
	verify_ok(env.sink, "pfx");

	throttle_uploads(NULL, 0, 0);
	seen_reset();
	flush_ok(e);
	assert_int_equal(seen.last.kind, WS_OUTCOME_STREAMED);
	assert_int_equal(seen.last.u.streamed.first_frame, shipped_to + 1); /* no gap */
	assert_true(seen.last.u.streamed.rpo.watermark_age_ms < 1500); /* caught up */
	restore_equals(env.sink, "pfx", env.w, env.out_dir);
	verify_ok(env.sink, "pfx");
	assert_int_equal(ws_engine_stop(e), 0);
	ws_engine_destroy(e);
	hook_off();
	wt_env_free(&env);
}

/* A shed shard with a two-slot ring and tenant `name`, shipped once; then
 * a backlog of many slots and a slow (not failing) sink, and a flush: the
 * ring fills and shed stops reading rather than wait. */
static struct ws_engine *shed_ring_flushed(struct wt_env *env, struct ws_shard_config *sc, const char *dir,
					   const char *name)
{
	struct ws_engine *e;
	*sc = shard_cfg(WS_POLICY_SHED, 2 * 80u << 10, 80u << 10);
	sc->batch_age_ms_max = 600000;
	wt_env_init(env, dir, 0);
	wt_write_txn(env->w, 10, 100);
	seen_reset();
	hook_on(2);
	e = engine_new(env->sink_url, 1, sc);
	add_tenant(e, name, env->db, 0);
	flush_ok(e);
	backlog(env->w, 20);
	slow_uploads(30);
	seen_reset();
	flush_ok(e);
	return e;
}

static void test_shed_full_ring_drops_rest(void **state)
{
	struct wt_env env;
	struct ws_shard_config sc;
	struct ws_engine *e = shed_ring_flushed(&env, &sc, "engine_shedring", "ring");
	(void)state;

	assert_int_equal(seen.last.kind, WS_OUTCOME_STREAMED);
	assert_true(seen.last.u.streamed.backpressure.frames_shed > 0);
	assert_true(seen.last.u.streamed.backpressure.spill_high_water <= sc.ring_bytes);
	/* Later calls catch up, a ring's worth at a time, with no gap. */
	slow_uploads(0);
	for (int i = 0; i < 100; i++) {
		seen_reset();
		flush_ok(e);
		if (seen.last.kind == WS_OUTCOME_EMPTY)
			break;
	}
	assert_int_equal(seen.last.kind, WS_OUTCOME_EMPTY);
	restore_equals(env.sink, "ring", env.w, env.out_dir);
	verify_ok(env.sink, "ring");
	assert_int_equal(ws_engine_stop(e), 0);
	ws_engine_destroy(e);
	hook_off();
	wt_env_free(&env);
}

/*
 * The final drain never sheds: a flush under shed may leave the rest of a
 * backlog for later calls, but ws_engine_stop promises everything
 * committed, so its last tail waits for ring space as block does (and the
 * restore right after it is the source's last state).
 */
static void test_shed_drain_ships_everything(void **state)
{
	struct wt_env env;
	struct ws_shard_config sc;
	struct ws_engine *e = shed_ring_flushed(&env, &sc, "engine_sheddrain", "drain");
	(void)state;

	assert_true(seen.frames_shed > 0); /* a flush may shed */
	backlog(env.w, 20);
	seen_reset();
	assert_int_equal(ws_engine_stop(e), 0);
	assert_int_equal(seen.frames_shed, 0);
	assert_int_equal(seen.errors, 0);
	restore_equals(env.sink, "drain", env.w, env.out_dir);
	verify_ok(env.sink, "drain");
	ws_engine_destroy(e);
	hook_off();
	wt_env_free(&env);
}

/*
 * The drain paused at each stream site while a real SQLite writer changes
 * the database under it (a commit, then a WAL checkpoint of each mode, or
 * a transaction that spills): under shed, with a backlog larger than the
 * ring and slow uploads, so the drain's scan waits for ring space where a
 * due tail would shed. Stop still sheds nothing, fails nothing, and
 * acknowledges a state the source committed, never older than the one
 * committed when stop was called.
 */
static void test_shed_drain_paused_under_writer(void **state)
{
	unsigned scan_fired = 0;
	(void)state;
	for (unsigned i = 0; i < ws_fault_site_count(); i++) {
		const char *site = ws_fault_site_name(i);
		if (strncmp(site, "stream.", 7) != 0)
			continue;
		/* Every mutation where the scan waits for ring space; one each
		 * (in turn) at the other sites, to keep the test short. */
		const bool scan = !strcmp(site, "stream.before_wal_read") || !strcmp(site, "stream.ring_handover");
		for (unsigned k = 0; k < (scan ? WT_MUTATIONS : 1); k++) {
			const unsigned how = scan ? k : i % WT_MUTATIONS;
			struct wt_env env;
			struct ws_shard_config sc;
			struct wt_mutator m;
			struct ws_engine *e = shed_ring_flushed(&env, &sc, "engine_drainpause", "dp");
			int rc, at_stop, got;

			wt_mutator_init(&m, &env, how);
			backlog(env.w, 8); /* still twice the ring */
			wt_mutator_record(&m);
			at_stop = (int)m.nstates - 1;
			seen_reset();
			assert_int_equal(ws_fault_arm_pause(site, 1, wt_mutate, &m), 0);
			rc = ws_engine_stop(e);
			ws_fault_disarm();
			if (rc)
				fail_msg("site %s, mutation %u: stop: %s (%s)", site, how, ws_strerror(rc), ws_errmsg());
			if (seen.frames_shed || seen.errors)
				fail_msg("site %s, mutation %u: the drain shed %" PRIu64 " frames, %u errors", site, how,
					 seen.frames_shed, seen.errors);
			got = wt_mutator_find(&m, wt_restore_hash(&env, "dp", NULL, NULL));
			if (got < at_stop)
				fail_msg("site %s, mutation %u: the restore is %s", site, how,
					 got < 0 ? "no state the source committed" : "older than the state at stop");
			verify_ok(env.sink, "dp");
			if (m.fired && scan)
				scan_fired++;
			ws_engine_destroy(e);
			hook_off();
			wt_mutator_free(&m);
			wt_env_free(&env);
		}
	}
	/* The sites inside the scan were reached: the test tests the drain. */
	assert_int_equal(scan_fired, 2 * WT_MUTATIONS);
}

/* ---- many tenants -------------------------------------------------------- */

static void make_db(const char *path, int rows)
{
	sqlite3 *db = wt_writer_open(path, 0);
	wt_exec(db, "PRAGMA synchronous=OFF");
	if (rows)
		wt_write_txn(db, rows, 64);
	sqlite3_close(db);
}

static void test_thousand_tenants_two_shards(void **state)
{
	const unsigned n = (unsigned)wt_env_u64("WS_ENGINE_TENANTS", 1000);
	const unsigned writers = 16;
	struct wt_env env;
	struct ws_shard_config sc = shard_cfg(WS_POLICY_BLOCK, 4u << 20, 1u << 20);
	struct ws_engine *e;
	sqlite3 **w;
	char name[32], file[64];
	(void)state;

	wt_env_init(&env, "engine_many", 0);
	w = calloc(writers, sizeof(*w));
	assert_non_null(w);
	for (unsigned i = 0; i < n; i++) {
		snprintf(file, sizeof(file), "t%04u.db", i);
		char *p = wt_path(env.dir, file);
		make_db(p, (int)(i % 7));
		free(p);
	}
	seen_reset();
	e = engine_new(env.sink_url, 2, &sc);
	for (unsigned i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "t%04u", i);
		snprintf(file, sizeof(file), "t%04u.db", i);
		char *p = wt_path(env.dir, file);
		add_tenant(e, name, p, -1);
		free(p);
	}
	/* A real writer on a subset while the shards run. */
	for (unsigned i = 0; i < writers; i++) {
		snprintf(file, sizeof(file), "t%04u.db", i * (n / writers));
		char *p = wt_path(env.dir, file);
		w[i] = wt_writer_open(p, 0);
		free(p);
	}
	for (int round = 0; round < 5; round++)
		for (unsigned i = 0; i < writers; i++)
			wt_write_txn(w[i], 20, 200);
	flush_ok(e);
	struct ws_shard_metrics m0, m1;
	assert_int_equal(ws_engine_shard_metrics(e, 0, &m0), 0);
	assert_int_equal(ws_engine_shard_metrics(e, 1, &m1), 0);
	assert_int_equal(m0.tenants + m1.tenants, n);
	assert_true(m0.tenants > n / 4 && m1.tenants > n / 4); /* the hash spreads them */
	assert_int_equal(seen.errors, 0);
	assert_int_equal(ws_engine_stop(e), 0);
	ws_engine_destroy(e);

	/* Every tenant restores equal to its source. */
	for (unsigned i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "t%04u", i);
		snprintf(file, sizeof(file), "t%04u.db", i);
		char *p = wt_path(env.dir, file);
		sqlite3 *src = wt_open_checked(p);
		restore_equals(env.sink, name, src, env.out_dir);
		sqlite3_close(src);
		free(p);
	}
	for (unsigned i = 0; i < writers; i++)
		sqlite3_close(w[i]);
	free(w);
	wt_env_free(&env);
}

/*
 * Watermarks that carry their manifests (carry_in_watermark = always) on
 * two shards whose streams share each shard's ring and work arrays: real
 * writers commit while the shards run; tails carry, merge (into the
 * carried manifest of their own last write, kept in hand, fencing with the
 * watermark's swap alone; or brought back by a fencing read) and store; every
 * tenant restores equal to its source and verifies, after the stop and
 * after a restart of the engine that goes on from the carried watermarks
 * it finds.
 */
static void test_carried_tenants_two_shards(void **state)
{
	const unsigned n = 24;
	struct wt_env env;
	struct ws_shard_config sc = shard_cfg(WS_POLICY_BLOCK, 2u << 20, 256u << 10);
	struct ws_engine *e;
	sqlite3 *w[24];
	char name[32], file[64];
	uint64_t carried = 0;
	(void)state;

	sc.carry = WS_CARRY_ALWAYS;
	sc.key_write_interval_ms = 0; /* a tail per round of commits */
	wt_env_init(&env, "engine_carry", 0);
	for (unsigned i = 0; i < n; i++) {
		snprintf(file, sizeof(file), "c%02u.db", i);
		char *p = wt_path(env.dir, file);
		make_db(p, 3);
		w[i] = wt_writer_open(p, 0);
		free(p);
	}
	for (int life = 0; life < 2; life++) {
		seen_reset();
		e = engine_new(env.sink_url, 2, &sc);
		for (unsigned i = 0; i < n; i++) {
			snprintf(name, sizeof(name), "c%02u", i);
			snprintf(file, sizeof(file), "c%02u.db", i);
			char *p = wt_path(env.dir, file);
			add_tenant(e, name, p, -1);
			free(p);
		}
		for (int round = 0; round < 12; round++) {
			for (unsigned i = 0; i < n; i++)
				wt_write_txn(w[i], 2 + (int)(i % 5), 1500);
			usleep(20000);
		}
		flush_ok(e);
		for (unsigned s = 0; s < 2; s++) {
			struct ws_shard_metrics m;
			assert_int_equal(ws_engine_shard_metrics(e, s, &m), 0);
			carried += m.tails_carried;
		}
		assert_int_equal(seen.errors, 0);
		assert_int_equal(ws_engine_stop(e), 0);
		ws_engine_destroy(e);
		for (unsigned i = 0; i < n; i++) {
			snprintf(name, sizeof(name), "c%02u", i);
			restore_equals(env.sink, name, w[i], env.out_dir);
			verify_ok(env.sink, name);
		}
	}
	assert_true(carried > n);
	for (unsigned i = 0; i < n; i++)
		sqlite3_close(w[i]);
	wt_env_free(&env);
}

/* ---- tenants come and go -------------------------------------------------- */

static void test_register_unregister_while_running(void **state)
{
	struct wt_env env;
	struct ws_shard_config sc = shard_cfg(WS_POLICY_BLOCK, 1u << 20, 256u << 10);
	struct ws_engine *e;
	char name[32], file[64];
	sqlite3 *w[8];
	(void)state;

	wt_env_init(&env, "engine_churn", 0);
	for (int i = 0; i < 8; i++) {
		snprintf(file, sizeof(file), "c%d.db", i);
		char *p = wt_path(env.dir, file);
		w[i] = wt_writer_open(p, 0);
		free(p);
	}
	seen_reset();
	e = engine_new(env.sink_url, 2, &sc);
	for (int round = 0; round < 6; round++) {
		for (int i = 0; i < 8; i++) {
			snprintf(name, sizeof(name), "c%d", i);
			snprintf(file, sizeof(file), "c%d.db", i);
			char *p = wt_path(env.dir, file);
			wt_write_txn(w[i], 5, 300);
			if ((i + round) % 2 == 0) {
				add_tenant(e, name, p, -1);
			} else {
				int rc = ws_engine_remove_tenant(e, name);
				assert_true(rc == 0 || rc == WS_ENOTFOUND);
			}
			free(p);
		}
		/* Removal ships what was committed: those restore equal now. */
		for (int i = 0; i < 8; i++) {
			snprintf(name, sizeof(name), "c%d", i);
			struct ws_tenant_metrics tm;
			if (ws_engine_tenant_metrics(e, name, &tm) == WS_ENOTFOUND && round > 0)
				restore_equals(env.sink, name, w[i], env.out_dir);
		}
	}
	assert_int_equal(ws_engine_stop(e), 0);
	ws_engine_destroy(e);
	for (int i = 0; i < 8; i++) {
		snprintf(name, sizeof(name), "c%d", i);
		restore_equals(env.sink, name, w[i], env.out_dir);
		sqlite3_close(w[i]);
	}
	assert_int_equal(seen.errors, 0);
	wt_env_free(&env);
}

/* ---- kill -9 mid-stream ---------------------------------------------------- */

/*
 * The child writes and ships; after each successful flush it records the
 * row count it had committed before the flush (acknowledged). The parent
 * kills it at a random moment, then restores the sink as the crash left it:
 * at least every acknowledged row must be there. A restarted engine then
 * ships the rest and restore equals the source.
 */
static void child_run(const char *sink_url, const char *db, const char *ack_path)
{
	struct ws_shard_config sc = shard_cfg(WS_POLICY_BLOCK, 1u << 20, 128u << 10);
	struct ws_engine *e = engine_new(sink_url, 2, &sc);
	sqlite3 *w = wt_writer_open(db, 0);
	add_tenant(e, "k", db, -1);
	for (int64_t rows = 0;; ) {
		wt_write_txn(w, 7, 700);
		rows += 7;
		if (ws_engine_flush(e) == 0) {
			char buf[32];
			int n = snprintf(buf, sizeof(buf), "%" PRId64 "\n", rows);
			FILE *f = fopen(ack_path, "w");
			if (f) {
				fwrite(buf, 1, (size_t)n, f);
				fflush(f);
				fsync(fileno(f));
				fclose(f);
			}
		}
	}
}

/*
 * A restart while the sink refuses every upload (an outage): the tenant's
 * watermark at the sink is 1.5 s old and more; the RPO says so from the
 * first failed tail on, not the time since this engine added the tenant,
 * with no watermark (which an operator reads as "nothing durable yet").
 */
static void test_rpo_after_restart_with_failing_sink(void **state)
{
	struct wt_env env;
	struct ws_shard_config sc = shard_cfg(WS_POLICY_THROTTLE, 4 * 80u << 10, 80u << 10);
	struct ws_engine *e;
	struct ws_tenant_metrics tm;
	(void)state;

	wt_env_init(&env, "engine_rpo_restart", 0);
	backlog(env.w, 2);
	seen_reset();
	e = engine_new(env.sink_url, 1, &sc);
	add_tenant(e, "rr", env.db, 0);
	flush_ok(e);
	assert_int_equal(ws_engine_stop(e), 0);
	ws_engine_destroy(e);
	wt_sleep_ms(1500);
	backlog(env.w, 2);
	hook_on(2);
	e = engine_new(env.sink_url, 1, &sc);
	throttle_uploads("/", 0, -1);
	add_tenant(e, "rr", env.db, 0);
	assert_int_not_equal(ws_engine_flush(e), 0);
	assert_int_equal(ws_engine_tenant_metrics(e, "rr", &tm), 0);
	assert_true(tm.rpo.has_watermark);
	assert_true(tm.rpo.watermark_age_ms >= 1500);
	throttle_uploads(NULL, 0, 0);
	flush_ok(e);
	restore_equals(env.sink, "rr", env.w, env.out_dir);
	assert_int_equal(ws_engine_stop(e), 0);
	ws_engine_destroy(e);
	hook_off();
	wt_env_free(&env);
}

static void test_kill9_and_restart(void **state)
{
	struct wt_env env;
	uint64_t rng = 99;
	(void)state;
	wt_env_init(&env, "engine_kill", 0);
	sqlite3_close(env.w);
	env.w = NULL;
	char *ack = wt_path(env.dir, "ack");
	for (int iter = 0; iter < 3; iter++) {
		pid_t pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			child_run(env.sink_url, env.db, ack);
			_exit(0);
		}
		wt_sleep_ms(300 + (unsigned)(wt_rand(&rng) % 700));
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);

		size_t len = 0;
		uint8_t *a = wt_read_file(ack, &len);
		char num[32] = "";
		if (a)
			memcpy(num, a, len < sizeof(num) - 1 ? len : sizeof(num) - 1);
		int64_t acked = strtoll(num, NULL, 10);
		free(a);
		if (acked > 0) {
			char *out = wt_path(env.out_dir, "crash.db");
			unlink(out);
			int rc = ws_restore(env.sink, "k", NULL, out);
			if (rc)
				fail_msg("restore after kill: %s (%s)", ws_strerror(rc), ws_errmsg());
			int64_t rows = 0;
			(void)wt_file_hash(out, &rows);
			if (rows < acked)
				fail_msg("after kill -9: %" PRId64 " rows restored, %" PRId64 " acknowledged", rows, acked);
			unlink(out);
			free(out);
			verify_ok(env.sink, "k");
		} else {
			/* Killed before its first acknowledgment (a slow start: a
			 * sanitizer build on a loaded machine): verify passes what
			 * is there, or finds nothing shipped yet. */
			int rc = ws_verify(env.sink, "k", NULL, NULL);
			if (rc && rc != WS_ENOTFOUND)
				fail_msg("verify k after a kill before any acknowledgment: %s (%s)", ws_strerror(rc),
					 ws_errmsg());
		}
	}
	/* Restart: everything committed ships, restore equals the source. */
	struct ws_shard_config sc = shard_cfg(WS_POLICY_BLOCK, 1u << 20, 128u << 10);
	seen_reset();
	struct ws_engine *e = engine_new(env.sink_url, 2, &sc);
	add_tenant(e, "k", env.db, -1);
	flush_ok(e);
	assert_int_equal(ws_engine_stop(e), 0);
	ws_engine_destroy(e);
	sqlite3 *src = wt_open_checked(env.db);
	restore_equals(env.sink, "k", src, env.out_dir);
	sqlite3_close(src);
	free(ack);
	wt_env_free(&env);
}

/* ---- tails in flight (tails_in_flight > 1) ------------------------------- */

static unsigned lane_acked(unsigned i)
{
	pthread_mutex_lock(&seen.mu);
	unsigned n = lseen[i].acked;
	pthread_mutex_unlock(&seen.mu);
	return n;
}

/* Tenant i acknowledged more than `before` tails within 10 s, or the test fails. */
static void lane_wait_acked(unsigned i, unsigned before, const char *why)
{
	const uint64_t deadline = ws_mono_ms() + 10000;
	while (lane_acked(i) <= before) {
		if (ws_mono_ms() > deadline)
			fail_msg("tenant %s: no tail acknowledged in 10 s %s", lseen[i].name, why);
		wt_sleep_ms(2);
	}
}

static void lanes_reset(const char *const *names, unsigned n)
{
	pthread_mutex_lock(&seen.mu);
	memset(lseen, 0, sizeof(lseen));
	for (unsigned i = 0; i < n; i++)
		lseen[i].name = names[i];
	pthread_mutex_unlock(&seen.mu);
}

/* Three tenants of one shard, tails_in_flight 3: a (env's source), b, c. */
struct lanes_fix {
	struct wt_env env;
	sqlite3 *w[3];
	char *path[3];
	struct ws_engine *e;
};

static uint32_t lanes_key_ms; /* the next lanes_fix_init's key_write_interval_ms */

static void lanes_fix_init(struct lanes_fix *f, const char *dir, struct ws_shard_config *sc)
{
	static const char *const names[] = { "a", "b", "c" };
	sc->tails_in_flight = 3;
	sc->key_write_interval_ms = lanes_key_ms; /* 0: each tail writes its watermark at once */
	wt_env_init(&f->env, dir, 0);
	for (int i = 0; i < 3; i++) {
		char file[16];
		snprintf(file, sizeof(file), "%s.db", names[i]);
		f->path[i] = i ? wt_path(f->env.dir, file) : strdup(f->env.db);
		f->w[i] = i ? wt_writer_open(f->path[i], 0) : f->env.w;
		wt_write_txn(f->w[i], 20, 100);
	}
	seen_reset();
	lanes_reset(names, 3);
	f->e = engine_new(f->env.sink_url, 1, sc);
	for (int i = 0; i < 3; i++)
		add_tenant(f->e, names[i], f->path[i], 0);
	flush_ok(f->e);
	wt_sleep_ms(100); /* the inotify events of the writes above are spent */
}

static void lanes_fix_free(struct lanes_fix *f)
{
	for (int i = 0; i < 3; i++) {
		if (i)
			sqlite3_close(f->w[i]);
		free(f->path[i]);
	}
	wt_env_free(&f->env);
}

/* While a's tail is paused (at its manifest write, or where its watermark write
 * waits), b and c commit and are acknowledged. */
static void others_ship_while_paused(struct lanes_fix *f, struct wt_gate *g, unsigned a_acked)
{
	unsigned before[3] = { 0, lane_acked(1), lane_acked(2) };
	for (int i = 1; i < 3; i++)
		wt_write_txn(f->w[i], 3, 100);
	lane_wait_acked(1, before[1], "while tenant a's tail was paused (tails do not overlap)");
	lane_wait_acked(2, before[2], "while tenant a's tail was paused (tails do not overlap)");
	/* a's tail is not acknowledged before its manifest and watermark are durable. */
	assert_int_equal(lane_acked(0), a_acked);
	wt_gate_open(g);
}

/*
 * Tenant a's tail pauses at the nth hit of site with the shard's read lock
 * let go; its database is changed under it by a real writer (a commit,
 * then a WAL checkpoint of mode `how` and another commit, or a spilling
 * transaction: wt_mutate), while b and c commit and are acknowledged. Then
 * every state tenant a acknowledged restores, by the time of its
 * acknowledgment, to a state its source committed, and the last one to the
 * source.
 */
static void paused_case(unsigned how, const char *site, unsigned nth)
{
	struct lanes_fix f;
	struct ws_shard_config sc = shard_cfg(WS_POLICY_BLOCK, 4u << 20, 1u << 20);
	struct wt_gate g = WT_GATE_INIT;
	struct wt_mutator m;

	lanes_fix_init(&f, "engine_lanes_pause", &sc);
	wt_mutator_init(&m, &f.env, how);
	wt_mutator_record(&m);
	const unsigned a_acked = lane_acked(0);
	assert_int_equal(ws_fault_add(site, nth, WS_FAULT_PAUSE, wt_gate_wait, &g), 0);
	wt_write_txn(f.w[0], 3, 100);
	wt_mutator_record(&m);
	wt_gate_until_paused(&g);
	wt_mutate(site, &m);
	others_ship_while_paused(&f, &g, a_acked);
	lane_wait_acked(0, a_acked, "after its paused write went on");
	ws_fault_disarm();
	wt_mutate("after", &m);
	flush_ok(f.e);
	assert_int_equal(ws_engine_stop(f.e), 0);
	ws_engine_destroy(f.e);
	pthread_mutex_lock(&seen.mu);
	assert_int_equal(seen.errors, 0);
	const unsigned n = lseen[0].acked;
	pthread_mutex_unlock(&seen.mu);
	for (unsigned i = 0; i < n; i++) {
		struct ws_restore_opts o = { .time_ms = lseen[0].ack_ms[i] };
		uint64_t h = wt_restore_hash(&f.env, "a", &o, NULL);
		if (wt_mutator_find(&m, h) < 0)
			fail_msg("mutation %u: the state acknowledged at tail %u of a was never committed", how, i);
	}
	restore_equals(f.env.sink, "a", f.env.w, f.env.out_dir);
	restore_equals(f.env.sink, "b", f.w[1], f.env.out_dir);
	restore_equals(f.env.sink, "c", f.w[2], f.env.out_dir);
	wt_mutator_free(&m);
	lanes_fix_free(&f);
}

/* Paused at its manifest write (the lane's second store wait: fencing
 * read, then manifest). */
static void test_lanes_paused_write_others_ship(void **state)
{
	(void)state;
	for (unsigned how = 0; how < WT_MUTATIONS; how++)
		paused_case(how, "engine.lane_store_wait", 2);
}

/* Paused where its watermark write waits out key_write_interval_ms (its
 * manifest durable, the tail started ahead of the interval's end): b's
 * and c's tails, which wait for their own intervals, go on meanwhile. */
static void test_lanes_paused_key_wait(void **state)
{
	(void)state;
	lanes_key_ms = 300;
	for (unsigned how = 0; how < WT_MUTATIONS; how++)
		paused_case(how, "stream.key_wait", 1);
	lanes_key_ms = 0;
}

/* Objects the sink holds under tenant's prefix (file://: files under sink/tenant). */
static unsigned sink_objects(const struct wt_env *env, const char *tenant)
{
	char cmd[8192];
	unsigned n = 0;
	snprintf(cmd, sizeof(cmd), "find '%s/%s' -type f | wc -l", env->sink_dir, tenant);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	assert_int_equal(fscanf(p, "%u", &n), 1);
	pclose(p);
	return n;
}

/*
 * A takeover while a's tail is in flight: paused at its manifest write, a
 * newer owner (epoch 5) ships tenant a. a's tail goes on, its manifest
 * lands, its watermark swap is refused: an error, nothing acknowledged,
 * while b and c are acknowledged meanwhile. Its next tail is Fenced (a pure
 * read), and from then on it leaves no object in the sink; b and c ship on.
 */
static void takeover_in_flight(bool slots)
{
	struct lanes_fix f;
	engine_slots = slots;
	struct ws_shard_config sc = shard_cfg(WS_POLICY_BLOCK, 4u << 20, 1u << 20);
	engine_slots = false;
	struct wt_gate g = WT_GATE_INIT;
	struct ws_stream_config cfg = { .tenant = "a", .epoch = 5, .pointer_generation = 1, .slots = slots };
	struct ws_outcome o;
	int err = 0;

	lanes_fix_init(&f, slots ? "engine_lanes_takeover_slots" : "engine_lanes_takeover", &sc);
	cfg.db_path = f.env.db;
	if (slots) {
		/* Shipped in a lane (a directory l<lane> under the tenant's epoch). */
		char cmd[8192];
		unsigned lanes = 0;
		snprintf(cmd, sizeof(cmd), "find '%s/a' -type d -name 'l*' | wc -l", f.env.sink_dir);
		FILE *p = popen(cmd, "r");
		assert_non_null(p);
		assert_int_equal(fscanf(p, "%u", &lanes), 1);
		pclose(p);
		assert_int_equal(lanes, 1);
	}
	const unsigned a_acked = lane_acked(0);
	/* The manifest's write (the second wait: the fencing read's first);
	 * with slots the slot's create, the tail's one request. */
	assert_int_equal(ws_fault_add("engine.lane_store_wait", slots ? 1 : 2, WS_FAULT_PAUSE, wt_gate_wait, &g), 0);
	wt_write_txn(f.w[0], 3, 100);
	wt_gate_until_paused(&g);
	struct ws_stream *st = ws_stream_open(f.env.sink, &cfg, &err);
	assert_non_null(st);
	wt_tail_ok(st, &o); /* the new owner's watermark */
	others_ship_while_paused(&f, &g, a_acked);
	const uint64_t deadline = ws_mono_ms() + 10000;
	for (;;) {
		pthread_mutex_lock(&seen.mu);
		bool done = lseen[0].fenced > 0;
		pthread_mutex_unlock(&seen.mu);
		if (done)
			break;
		if (ws_mono_ms() > deadline)
			fail_msg("tenant a was not reported Fenced in 10 s after the takeover");
		wt_write_txn(f.w[0], 1, 100);
		wt_sleep_ms(20);
	}
	ws_fault_disarm();
	pthread_mutex_lock(&seen.mu);
	assert_int_equal(lseen[0].acked, a_acked); /* the lost race acknowledged nothing */
	if (slots) {
		/* Its create, refused by the close record, was its only write: Fenced. */
		assert_int_equal(lseen[0].errors, 0);
	} else {
		assert_int_equal(lseen[0].errors, 1);
		assert_int_equal(seen.last_err, WS_ELOSTRACE);
	}
	pthread_mutex_unlock(&seen.mu);
	/* Fenced: more commits leave nothing of the old owner in the sink. */
	const unsigned objs = sink_objects(&f.env, "a");
	const uint64_t tails = tails_of(f.e, "a");
	wt_write_txn(f.w[0], 3, 100);
	wait_tails(f.e, "a", tails + 1);
	assert_int_equal(sink_objects(&f.env, "a"), objs);
	const unsigned b_acked = lane_acked(1);
	wt_write_txn(f.w[1], 3, 100);
	lane_wait_acked(1, b_acked, "after a was fenced");
	assert_int_equal(ws_engine_stop(f.e), 0);
	ws_engine_destroy(f.e);
	wt_tail_ok(st, &o); /* the new owner ships what a's writer made since */
	ws_stream_close(st);
	restore_equals(f.env.sink, "a", f.env.w, f.env.out_dir);
	restore_equals(f.env.sink, "b", f.w[1], f.env.out_dir);
	lanes_fix_free(&f);
}

static void test_lanes_takeover_in_flight(void **state)
{
	(void)state;
	takeover_in_flight(false);
}

/* The same with manifest slots (docs/SLOTS.md 3.3): a's small tail's one
 * write is its slot, whose create the new owner's close record refuses. */
static void test_lanes_takeover_in_flight_slots(void **state)
{
	(void)state;
	takeover_in_flight(true);
}

/*
 * Shed with several tails in flight: four tenants of one shard, four
 * lanes, the key writes (manifests, watermarks) of every connection
 * refused with a Retry-After a few times. Every tail reaches the host once
 * (Shed outcomes, counted as the tenants' deferrals and sheds), no tail
 * fails, and every tenant ships all it has in the end.
 */
static void test_lanes_shed_in_flight(void **state)
{
	static const char *const names[] = { "s0", "s1", "s2", "s3" };
	struct wt_env env;
	struct ws_shard_config sc = shard_cfg(WS_POLICY_SHED, 8 * 80u << 10, 80u << 10);
	sqlite3 *w[4];
	char *path[4];
	uint64_t tails = 0, deferrals = 0, sheds = 0;
	(void)state;

	sc.tails_in_flight = 4;
	wt_env_init(&env, "engine_lanes_shed", 0);
	for (int i = 0; i < 4; i++) {
		char file[16];
		snprintf(file, sizeof(file), "%s.db", names[i]);
		path[i] = i ? wt_path(env.dir, file) : strdup(env.db);
		w[i] = i ? wt_writer_open(path[i], 0) : env.w;
		backlog(w[i], 2);
	}
	seen_reset();
	lanes_reset(names, 4);
	hook_on(3);
	struct ws_engine *e = engine_new(env.sink_url, 1, &sc);
	throttle_keys("", 0, 6);
	for (int i = 0; i < 4; i++)
		add_tenant(e, names[i], path[i], 0);
	for (int i = 0; i < 4; i++)
		wait_last_frame(e, names[i], wal_frames(path[i]));
	ws_sleep_ms(50); /* no tail in flight: the outcomes are all in */
	for (int i = 0; i < 4; i++) {
		struct ws_tenant_metrics tm;
		assert_int_equal(ws_engine_tenant_metrics(e, names[i], &tm), 0);
		tails += tm.tails;
		deferrals += tm.deferrals;
		sheds += tm.sheds;
	}
	pthread_mutex_lock(&seen.mu);
	assert_int_equal(seen.calls, tails);
	assert_int_equal(seen.errors, 0);
	assert_int_equal(seen.n[WS_OUTCOME_SHED], deferrals);
	assert_true(deferrals >= 4); /* each connection refused some */
	assert_true(sheds >= deferrals);
	assert_true(seen.frames_shed >= 1);
	pthread_mutex_unlock(&seen.mu);
	assert_int_equal(ws_engine_stop(e), 0);
	ws_engine_destroy(e);
	hook_off();
	for (int i = 0; i < 4; i++) {
		restore_equals(env.sink, names[i], w[i], env.out_dir);
		if (i)
			sqlite3_close(w[i]);
		free(path[i]);
	}
	wt_env_free(&env);
}

/* Every connection after the shard's own (non-uploader) is refused: the lanes'. */
static unsigned lane_opens;

static struct ws_store *fail_lane_stores(const char *url, unsigned shard, bool uploader, void *arg, int *err)
{
	(void)arg;
	if (!uploader && __atomic_fetch_add(&lane_opens, 1, __ATOMIC_RELAXED) >= 1) {
		*err = ws_fail(-EIO, "test: a tail lane's connection cannot be opened");
		return NULL;
	}
	return ws_store_open_flags(url, uploader || shard ? WS_STORE_EXISTING : 0, err);
}

/*
 * Lanes that cannot start (their connections refused): each is left out
 * with one warning naming it and why, and the shard tails on its own
 * thread, as with tails_in_flight 1; everything ships.
 */
static void test_lanes_cannot_start(void **state)
{
	struct wt_env env;
	struct ws_shard_config sc = shard_cfg(WS_POLICY_BLOCK, 4u << 20, 1u << 20);
	(void)state;

	sc.tails_in_flight = 3;
	wt_env_init(&env, "engine_lanes_cannot", 0);
	wt_write_txn(env.w, 20, 100);
	seen_reset();
	log_capture_on();
	lane_opens = 0;
	ws_engine_open_store_hook = fail_lane_stores;
	struct ws_engine *e = engine_new(env.sink_url, 1, &sc);
	add_tenant(e, "nl", env.db, 0);
	wait_last_frame(e, "nl", wal_frames(env.db));
	wt_write_txn(env.w, 5, 100);
	wait_last_frame(e, "nl", wal_frames(env.db));
	pthread_mutex_lock(&logged.mu);
	assert_int_equal(logged.lanes_left_out, 3);
	pthread_mutex_unlock(&logged.mu);
	ws_log_set_sink(NULL, NULL);
	assert_int_equal(seen.errors, 0);
	assert_int_equal(ws_engine_stop(e), 0);
	ws_engine_destroy(e);
	ws_engine_open_store_hook = NULL;
	restore_equals(env.sink, "nl", env.w, env.out_dir);
	wt_env_free(&env);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bad_engine_config),
		cmocka_unit_test(test_two_shards_wake_on_change),
		cmocka_unit_test(test_add_many_at_once),
		cmocka_unit_test(test_fenced_tenant_has_no_rpo),
		cmocka_unit_test(test_stop_ends_under_block_when_sink_is_gone),
		cmocka_unit_test(test_add_during_stop_refused),
		cmocka_unit_test(test_add_remove_race),
		cmocka_unit_test(test_failed_add_remove_race),
		cmocka_unit_test(test_remove_behind_stop_keeps_tenant),
		cmocka_unit_test(test_readd_while_removing_refused),
		cmocka_unit_test(test_change_seen_after_a_later_tail_wakes),
		cmocka_unit_test(test_failed_create_leaves_host_fds),
		cmocka_unit_test(test_poll_failure_keeps_shard),
		cmocka_unit_test(test_wake_only_the_writer),
		cmocka_unit_test(test_busy_writer_does_not_wake_per_write),
		cmocka_unit_test(test_chain_end_in_either_thread),
		cmocka_unit_test(test_block_holds_memory_loses_nothing),
		cmocka_unit_test(test_flush_goes_past_the_batch_limit),
		cmocka_unit_test(test_throttle_counts_and_fails_bounded),
		cmocka_unit_test(test_lost_watermark_reply_is_own_write),
		cmocka_unit_test(test_rpo_after_restart_with_failing_sink),
		cmocka_unit_test(test_block_resends_counted),
		cmocka_unit_test(test_failing_tenant_backs_off_under_writes),
		cmocka_unit_test(test_key_interval_holds_for_continuations),
		cmocka_unit_test(test_key_interval_holds_in_flight),
		cmocka_unit_test(test_key_interval_staged),
		cmocka_unit_test(test_change_during_a_round_is_due_from_when_seen),
		cmocka_unit_test(test_deferred_block_reaches_host),
		cmocka_unit_test(test_deferred_throttle_reaches_host),
		cmocka_unit_test(test_deferred_shed_is_shed),
		cmocka_unit_test(test_drain_deadline),
		cmocka_unit_test(test_shed_nothing_persisted_is_shed),
		cmocka_unit_test(test_shed_prefix_is_streamed_with_frames_shed),
		cmocka_unit_test(test_shed_full_ring_drops_rest),
		cmocka_unit_test(test_shed_drain_ships_everything),
		cmocka_unit_test(test_shed_drain_paused_under_writer),
		cmocka_unit_test(test_register_unregister_while_running),
		cmocka_unit_test(test_kill9_and_restart),
		cmocka_unit_test(test_thousand_tenants_two_shards),
		cmocka_unit_test(test_lanes_paused_write_others_ship),
		cmocka_unit_test(test_lanes_paused_key_wait),
		cmocka_unit_test(test_lanes_takeover_in_flight),
		cmocka_unit_test(test_lanes_takeover_in_flight_slots),
		cmocka_unit_test(test_lanes_shed_in_flight),
		cmocka_unit_test(test_lanes_cannot_start),
		cmocka_unit_test(test_carried_tenants_two_shards),
	};
	/* WT_FILTER=pattern runs only the tests it matches (cmocka's wildcards). */
	if (getenv("WT_FILTER"))
		cmocka_set_test_filter(getenv("WT_FILTER"));
	return WT_RUN_GROUP(tests, NULL, NULL);
}
