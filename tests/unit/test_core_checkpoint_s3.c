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
 * Without $WS_S3_DIR the test FAILS: it must never pass without a server.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <inttypes.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "coreutil.h"
#include "walship.h"
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_s3_race_and_restore),
	};
	if (wt_s3_load_env("test_core_checkpoint_s3") != 0)
		return 1;
	return cmocka_run_group_tests(tests, setup_bucket, NULL);
}
