/*
 * Checkpoint decision store, shared authority, on a real radosgw (the ctest
 * "s3" fixture; $WS_S3_DIR/env): the conditional-write probe passes, every
 * durable step works with S3 etags, two writers racing record_outcome for one
 * checkpoint get exactly one decision (the loser gets the durable winner),
 * and racing allocations get distinct IDs. Each thread has its own store.
 *
 * Without $WS_S3_DIR the test FAILS: it must never pass without a server.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "storeutil.h"
#include "testutil.h"
#include "ws_ckpt.h"
#include "ws_store.h"

static char g_bucket[64];
static unsigned g_prefix_seq;


static void url_for(char *out, size_t cap, const char *prefix)
{
	snprintf(out, cap, "s3://%s%s%s?endpoint=%s", g_bucket, prefix ? "/" : "",
		 prefix ? prefix : "", getenv("WS_S3_ENDPOINT"));
}

/* A fresh prefix per test, so every test starts with an empty namespace. */
static void fresh_prefix(char *out, size_t cap)
{
	snprintf(out, cap, "ckpt-%ld-%u", (long)getpid(), ++g_prefix_seq);
}

static struct ws_store *open_store(const char *prefix)
{
	char url[1024];
	int err = 0;
	struct ws_store *s;
	url_for(url, sizeof(url), prefix);
	s = ws_store_open(url, &err);
	if (!s)
		fail_msg("open %s: %s", url, ws_errmsg());
	return s;
}

static int group_setup(void **state)
{
	char url[1024];
	int err = 0;
	struct ws_store *s;
	(void)state;
	snprintf(g_bucket, sizeof(g_bucket), "ws-ckpt-%ld-%lld", (long)getpid(), (long long)time(NULL));
	url_for(url, sizeof(url), NULL);
	s = ws_store_open_flags(url, WS_STORE_EXISTING, &err);
	if (!s) {
		fprintf(stderr, "test_store_ckpt_s3: open %s: %s\n", url, ws_errmsg());
		return -1;
	}
	err = ws_store_s3_create_bucket(s);
	ws_store_close(s);
	if (err)
		fprintf(stderr, "test_store_ckpt_s3: create bucket: %s\n", ws_errmsg());
	return err ? -1 : 0;
}

static struct ws_ckpt *open_ckpt(struct ws_store *s)
{
	int err = 0;
	struct ws_ckpt *c = ws_ckpt_open_shared(s, 0, &err); /* probes create-once and CAS */
	if (!c)
		fail_msg("open checkpoint store: %s", ws_errmsg());
	return c;
}

static void make_index(struct ws_ckpt_index *idx, struct ws_ckpt_tenant_entry *t, const char *dep, uint64_t id,
		       uint64_t epoch, const struct ws_ckpt_ref *pred)
{
	memset(idx, 0, sizeof(*idx));
	memset(t, 0, sizeof(*t));
	snprintf(idx->deployment, sizeof(idx->deployment), "%s", dep);
	idx->checkpoint_id = id;
	idx->epoch = epoch;
	snprintf(t->tenant, sizeof(t->tenant), "orders");
	t->wal_generation = 1;
	t->last_frame = id;
	snprintf(t->manifest_key, sizeof(t->manifest_key), "orders/m/%" PRIu64 ".wsm", id);
	memset(t->manifest_sha256, 'c', WS_SHA256_HEX_LEN);
	t->manifest_length = 10;
	idx->tenant_count = 1;
	idx->tenants = t;
	if (pred) {
		idx->has_predecessor = true;
		idx->predecessor = *pred;
	}
}

static void test_s3_walkthrough(void **state)
{
	char prefix[64], dep[WS_CKPT_DEPLOYMENT_LEN + 1], dep2[WS_CKPT_DEPLOYMENT_LEN + 1];
	struct ws_ckpt_index idx, got;
	struct ws_ckpt_tenant_entry t;
	struct ws_ckpt_ref r, r2;
	struct ws_ckpt_record_result res;
	struct ws_ckpt_outcome oc;
	bool found;
	uint64_t id = 0;
	(void)state;

	fresh_prefix(prefix, sizeof(prefix));
	struct ws_store *s = open_store(prefix), *s2 = open_store(prefix);
	struct ws_ckpt *c = open_ckpt(s), *c2 = open_ckpt(s2);
	assert_int_equal(ws_ckpt_deployment_id(c, dep), 0);
	assert_int_equal(ws_ckpt_deployment_id(c2, dep2), 0);
	assert_string_equal(dep, dep2);

	assert_int_equal(ws_ckpt_allocate_id_at_least(c, 0, &id), 0);
	assert_int_equal(id, 1);
	make_index(&idx, &t, dep, id, 1, NULL);
	assert_int_equal(ws_ckpt_create_committed(c, &idx, &r), 0);
	assert_int_equal(ws_ckpt_create_committed(c2, &idx, &r2), 0);
	assert_int_equal(ws_ckpt_last_kind(), WS_CKPT_CONVERGED);
	assert_int_equal(ws_ckpt_load_committed(c2, &r, &got), 0);
	assert_int_equal(got.checkpoint_id, 1);
	ws_ckpt_index_free(&got);
	assert_int_equal(ws_ckpt_record_outcome(c, 1, id, WS_CKPT_SCOPE_LOCAL, NULL, NULL, WS_CKPT_COMMIT, &r, &res),
			 0);
	assert_int_equal(res.kind, WS_CKPT_OK);
	assert_int_equal(ws_ckpt_latest_commit(c2, &oc, &found), 0);
	assert_true(found);
	assert_string_equal(oc.committed.key, r.key);

	/* Seal replaces a candidate by CAS on the S3 etag. */
	assert_int_equal(ws_ckpt_allocate_id_at_least(c2, 0, &id), 0);
	assert_int_equal(id, 2);
	make_index(&idx, &t, dep, id, 1, &r);
	assert_int_equal(ws_ckpt_create_committed(c2, &idx, &r2), 0);
	assert_int_equal(ws_ckpt_seal_aborted_candidate(c, &idx), 0);
	assert_int_equal(ws_ckpt_load_committed(c2, &r2, &got), WS_EPRECOND);
	assert_int_equal(ws_ckpt_last_kind(), WS_CKPT_SEALED);
	/* The seal stays for good: deleting it is refused. */
	assert_int_equal(ws_ckpt_delete_committed(c, &r2), WS_EPRECOND);
	assert_int_equal(ws_ckpt_last_kind(), WS_CKPT_SEALED);

	/* A malformed head names its key. */
	wt_put_str(s, "checkpoints/head", "{}", NULL);
	assert_int_equal(ws_ckpt_latest_terminal(c2, &oc, &found), WS_EFORMAT);
	assert_non_null(strstr(ws_errmsg(), "checkpoints/head"));

	ws_ckpt_close(c);
	ws_ckpt_close(c2);
	ws_store_close(s);
	ws_store_close(s2);
}

/* ---- races -------------------------------------------------------------------- */

struct racer {
	const char *prefix;
	pthread_barrier_t *go;
	uint64_t id;
	enum ws_ckpt_verdict verdict;
	struct ws_ckpt_ref ref;
	int rc;
	struct ws_ckpt_record_result res;
	uint64_t ids[16];
	unsigned n_ids;
};

/* A thread's own store and shared handle on prefix (NULL handle on failure, reported). */
static struct ws_ckpt *thread_open(const char *prefix, struct ws_store **s)
{
	char url[1024];
	int err = 0;
	struct ws_ckpt *c = NULL;
	url_for(url, sizeof(url), prefix);
	*s = ws_store_open(url, &err);
	if (*s)
		c = ws_ckpt_open_shared(*s, WS_CKPT_TRUST_CONDITIONAL, &err);
	if (!c)
		fprintf(stderr, "thread open %s: %s\n", url, ws_errmsg());
	return c;
}

static void *race_record(void *arg)
{
	struct racer *r = arg;
	struct ws_store *s;
	struct ws_ckpt *c = thread_open(r->prefix, &s);

	pthread_barrier_wait(r->go);
	if (!c) {
		r->rc = -1;
	} else {
		r->rc = ws_ckpt_record_outcome(c, 1, r->id, WS_CKPT_SCOPE_LOCAL, NULL, NULL, r->verdict,
					       r->verdict == WS_CKPT_COMMIT ? &r->ref : NULL, &r->res);
		if (r->rc)
			fprintf(stderr, "racer: %s\n", ws_errmsg());
	}
	ws_ckpt_close(c);
	ws_store_close(s);
	return NULL;
}

static void test_s3_race_record_outcome(void **state)
{
	char prefix[64], dep[WS_CKPT_DEPLOYMENT_LEN + 1];
	struct ws_ckpt_index idx;
	struct ws_ckpt_tenant_entry t;
	struct ws_ckpt_outcome latest;
	bool has_latest = false, found;
	unsigned commits = 0, aborts = 0;
	(void)state;

	fresh_prefix(prefix, sizeof(prefix));
	struct ws_store *s = open_store(prefix);
	struct ws_ckpt *c = open_ckpt(s);
	assert_int_equal(ws_ckpt_deployment_id(c, dep), 0);

	for (int round = 0; round < 12; round++) {
		struct racer rs[2];
		pthread_t th[2];
		pthread_barrier_t go;
		uint64_t id = 0;

		assert_int_equal(ws_ckpt_allocate_id_at_least(c, 0, &id), 0);
		memset(rs, 0, sizeof(rs));
		make_index(&idx, &t, dep, id, 1, has_latest ? &latest.committed : NULL);
		assert_int_equal(ws_ckpt_create_committed(c, &idx, &rs[0].ref), 0);
		pthread_barrier_init(&go, NULL, 2);
		for (int i = 0; i < 2; i++) {
			rs[i].prefix = prefix;
			rs[i].go = &go;
			rs[i].id = id;
			/* Alternate who asks for what, so both verdicts win some rounds. */
			rs[i].verdict = (i ^ (round & 1)) ? WS_CKPT_ABORT : WS_CKPT_COMMIT;
			rs[i].ref = rs[0].ref;
			assert_int_equal(pthread_create(&th[i], NULL, race_record, &rs[i]), 0);
		}
		for (int i = 0; i < 2; i++)
			pthread_join(th[i], NULL);
		pthread_barrier_destroy(&go);

		int wins = 0, losses = 0;
		struct ws_ckpt_outcome durable;
		assert_int_equal(ws_ckpt_latest_terminal(c, &durable, &found), 0);
		assert_true(found);
		assert_int_equal(durable.checkpoint_id, id);
		for (int i = 0; i < 2; i++) {
			assert_int_equal(rs[i].rc, 0);
			if (rs[i].res.kind == WS_CKPT_OK) {
				wins++;
				assert_int_equal(durable.verdict, rs[i].verdict);
			} else {
				assert_int_equal(rs[i].res.kind, WS_CKPT_CONFLICTING_OUTCOME);
				losses++;
			}
			/* Everyone learns the same durable winner. */
			assert_int_equal(rs[i].res.winner.verdict, durable.verdict);
			assert_int_equal(rs[i].res.winner.checkpoint_id, id);
		}
		assert_int_equal(wins, 1);
		assert_int_equal(losses, 1);
		if (durable.verdict == WS_CKPT_COMMIT) {
			commits++;
			latest = durable;
			has_latest = true;
		} else {
			aborts++;
		}
	}
	fprintf(stderr, "race_record_outcome: %u commits, %u aborts won\n", commits, aborts);
	ws_ckpt_close(c);
	ws_store_close(s);
}

static void *race_alloc(void *arg)
{
	struct racer *r = arg;
	struct ws_store *s;
	struct ws_ckpt *c = thread_open(r->prefix, &s);

	pthread_barrier_wait(r->go);
	r->rc = c ? 0 : -1;
	for (unsigned i = 0; c && i < 16 && r->rc == 0; i++) {
		r->rc = ws_ckpt_allocate_id_at_least(c, 0, &r->ids[i]);
		if (r->rc == 0)
			r->n_ids++;
		else
			fprintf(stderr, "allocator: %s\n", ws_errmsg());
	}
	ws_ckpt_close(c);
	ws_store_close(s);
	return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static void test_s3_race_allocate(void **state)
{
	enum { N = 4 };
	char prefix[64], dep[WS_CKPT_DEPLOYMENT_LEN + 1];
	struct racer rs[N];
	pthread_t th[N];
	pthread_barrier_t go;
	uint64_t all[N * 16];
	unsigned n = 0;
	(void)state;

	fresh_prefix(prefix, sizeof(prefix));
	struct ws_store *s = open_store(prefix);
	struct ws_ckpt *c = open_ckpt(s);
	assert_int_equal(ws_ckpt_deployment_id(c, dep), 0);
	memset(rs, 0, sizeof(rs));
	pthread_barrier_init(&go, NULL, N);
	for (int i = 0; i < N; i++) {
		rs[i].prefix = prefix;
		rs[i].go = &go;
		assert_int_equal(pthread_create(&th[i], NULL, race_alloc, &rs[i]), 0);
	}
	for (int i = 0; i < N; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&go);
	for (int i = 0; i < N; i++) {
		assert_int_equal(rs[i].rc, 0);
		assert_int_equal(rs[i].n_ids, 16);
		for (unsigned j = 0; j < 16; j++) {
			if (j)
				assert_true(rs[i].ids[j] > rs[i].ids[j - 1]);
			all[n++] = rs[i].ids[j];
		}
	}
	qsort(all, n, sizeof(all[0]), cmp_u64);
	/* Distinct, and a shared store hands out exactly 1..n: one ID per CAS, none burned. */
	for (unsigned i = 0; i < n; i++)
		assert_true(all[i] == i + 1);
	ws_ckpt_close(c);
	ws_store_close(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_s3_walkthrough),
		cmocka_unit_test(test_s3_race_record_outcome),
		cmocka_unit_test(test_s3_race_allocate),
	};
	if (wt_s3_load_env("test_store_ckpt_s3") != 0)
		return 1;
	return cmocka_run_group_tests(tests, group_setup, NULL);
}
