/*
 * Checkpoint decision store over the file store: every seed method on both
 * authorities (the certified local single writer, and the shared store over
 * a file store, which has native create-once and CAS), each convergence and
 * each conflict kind, malformed and foreign durable objects, ID exhaustion,
 * burned local ID ranges, the lease, and the fault sites between steps.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "storeutil.h"
#include "testutil.h"
#include "ckpt_internal.h"
#include "ws_ckpt.h"
#include "ws_fault.h"
#include "ws_store.h"

struct fx {
	char *dir;
	bool local;
	struct ws_store *s;     /* shared: ours; local: the handle's */
	struct ws_ckpt *c;
	char dep[WS_CKPT_DEPLOYMENT_LEN + 1];
};

static struct ws_ckpt *open_fx(struct fx *f)
{
	int err = 0;
	struct ws_ckpt *c = f->local ? ws_ckpt_open_local(f->dir, &err) : ws_ckpt_open_shared(f->s, 0, &err);
	if (!c)
		fail_msg("open: %s", ws_errmsg());
	return c;
}

static int setup_any(void **state, bool local)
{
	struct fx *f = calloc(1, sizeof(*f));
	int err = 0;
	assert_non_null(f);
	f->dir = wt_tmpdir(local ? "ckpt_local" : "ckpt_shared");
	f->local = local;
	if (!local) {
		f->s = ws_store_file_open(f->dir, &err);
		assert_non_null(f->s);
	}
	f->c = open_fx(f);
	if (local)
		f->s = ws_ckpt_store(f->c);
	assert_int_equal(ws_ckpt_deployment_id(f->c, f->dep), 0);
	*state = f;
	return 0;
}

static int setup_local(void **state)
{
	return setup_any(state, true);
}

static int setup_shared(void **state)
{
	return setup_any(state, false);
}

static int teardown(void **state)
{
	struct fx *f = *state;
	ws_fault_disarm();
	ws_ckpt_close(f->c);
	if (!f->local)
		ws_store_close(f->s);
	wt_rmrf(f->dir);
	free(f->dir);
	free(f);
	return 0;
}

/* rc must be code and the thread's kind k; the detail must mention needle (if any). */
#define EXPECT(call, code, k, needle)                                                            \
	do {                                                                                      \
		int rc_ = (call);                                                                 \
		if (rc_ != (code) || ws_ckpt_last_kind() != (k))                                  \
			fail_msg("%s: rc %d (%s) kind %s, want %d kind %s; detail: %s", #call,    \
				 rc_, ws_strerror(rc_), ws_ckpt_kind_name(ws_ckpt_last_kind()),   \
				 (code), ws_ckpt_kind_name(k), ws_errmsg());                      \
		expect_detail(#call, (needle));                                                   \
	} while (0)

static void expect_detail(const char *call, const char *needle)
{
	if (needle && !strstr(ws_errmsg(), needle))
		fail_msg("%s: detail \"%s\" lacks \"%s\"", call, ws_errmsg(), needle);
}

#define NONE ((const char *)NULL)

/* ---- index helpers ------------------------------------------------------------ */

struct tidx {
	struct ws_ckpt_index idx;
	struct ws_ckpt_tenant_entry tenants[3];
	struct ws_ckpt_artifact arts[2];
};

static const char SHA_A[] = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

static void make_index(struct tidx *t, const char *dep, uint64_t id, uint64_t epoch, const struct ws_ckpt_ref *pred)
{
	static const char *names[] = { "alpha", "beta", "gamma" };
	memset(t, 0, sizeof(*t));
	snprintf(t->idx.deployment, sizeof(t->idx.deployment), "%s", dep);
	t->idx.checkpoint_id = id;
	t->idx.epoch = epoch;
	for (int i = 0; i < 3; i++) {
		struct ws_ckpt_tenant_entry *e = &t->tenants[i];
		snprintf(e->tenant, sizeof(e->tenant), "%s", names[i]);
		e->wal_generation = 7;
		e->last_frame = id * 10 + (uint64_t)i;
		snprintf(e->manifest_key, sizeof(e->manifest_key), "%s/m/%016" PRIx64 ".wsm", names[i], id);
		snprintf(e->manifest_sha256, sizeof(e->manifest_sha256), "%s", SHA_A);
		e->manifest_length = 100 + id;
	}
	for (int i = 0; i < 2; i++) {
		snprintf(t->arts[i].key, sizeof(t->arts[i].key), "ckart/%" PRIu64 "/part-%d", id, i);
		t->arts[i].length = 4096;
		snprintf(t->arts[i].sha256, sizeof(t->arts[i].sha256), "%s", SHA_A);
	}
	t->idx.tenant_count = 3;
	t->idx.tenants = t->tenants;
	t->idx.artifact_count = 2;
	t->idx.artifacts = t->arts;
	if (pred) {
		t->idx.has_predecessor = true;
		t->idx.predecessor = *pred;
	}
}

static void create_ok(struct fx *f, uint64_t id, uint64_t epoch, const struct ws_ckpt_ref *pred,
		      struct ws_ckpt_ref *ref)
{
	struct tidx t;
	make_index(&t, f->dep, id, epoch, pred);
	EXPECT(ws_ckpt_create_committed(f->c, &t.idx, ref), 0, WS_CKPT_OK, NONE);
}

/* ---- deployment ------------------------------------------------------------------ */

/* Overwrite checkpoints/deployment: lead before the first key, this or the other authority. */
static void put_dep(struct fx *f, const char *lead, bool same_authority, const char *dep, const char *version,
		    const char *extra, const char *next)
{
	char buf[512];
	snprintf(buf, sizeof(buf), "{%s\"authority\":\"%s\",\"deployment\":\"%s\",%s\"format\":"
		 "\"walship.ckpt.deployment.%s\",\"next_id\":\"%s\"}", lead,
		 f->local == same_authority ? "local" : "shared", dep, extra, version, next);
	wt_put_str(f->s, "checkpoints/deployment", buf, NULL);
}

static void test_deployment(void **state)
{
	struct fx *f = *state;
	char again[WS_CKPT_DEPLOYMENT_LEN + 1];
	struct ws_ckpt *c2;
	int rc;

	assert_int_equal(strlen(f->dep), WS_CKPT_DEPLOYMENT_LEN);
	EXPECT(ws_ckpt_deployment_id(f->c, again), 0, WS_CKPT_OK, NONE);
	assert_string_equal(again, f->dep);
	char *body = wt_get_str(f->s, "checkpoints/deployment", &rc, NULL);
	assert_int_equal(rc, 0);
	assert_non_null(strstr(body, "\"format\":\"walship.ckpt.deployment.v1\""));
	assert_null(strchr(body, ' '));

	/* A second handle on the same namespace (shared only: local holds the lease) converges. */
	if (!f->local) {
		int err = 0;
		c2 = ws_ckpt_open_shared(f->s, WS_CKPT_TRUST_CONDITIONAL, &err);
		assert_non_null(c2);
		EXPECT(ws_ckpt_deployment_id(c2, again), 0, WS_CKPT_OK, NONE);
		assert_string_equal(again, f->dep);
		ws_ckpt_close(c2);
	}

	/* Malformed: not JSON, non-canonical, wrong format, extra field. */
	wt_put_str(f->s, "checkpoints/deployment", "{not json", NULL);
	EXPECT(ws_ckpt_deployment_id(f->c, again), WS_EFORMAT, WS_CKPT_MALFORMED, "checkpoints/deployment");
	put_dep(f, " ", true, f->dep, "v1", "", "1");
	EXPECT(ws_ckpt_deployment_id(f->c, again), WS_EFORMAT, WS_CKPT_MALFORMED, "not canonical");
	put_dep(f, "", true, f->dep, "v2", "", "1");
	EXPECT(ws_ckpt_deployment_id(f->c, again), WS_EFORMAT, WS_CKPT_MALFORMED, "format");
	put_dep(f, "", true, f->dep, "v1", "\"extra\":1,", "1");
	EXPECT(ws_ckpt_deployment_id(f->c, again), WS_EFORMAT, WS_CKPT_MALFORMED, "fields");
	put_dep(f, "", true, f->dep, "v1", "", "01");
	EXPECT(ws_ckpt_deployment_id(f->c, again), WS_EFORMAT, WS_CKPT_MALFORMED, "next_id");
	/* The other authority's namespace is foreign. */
	put_dep(f, "", false, f->dep, "v1", "", "1");
	EXPECT(ws_ckpt_deployment_id(f->c, again), WS_EFORMAT, WS_CKPT_FOREIGN, "authority");
	/* A replaced incarnation: the explicit re-read adopts it. */
	put_dep(f, "", true, "0123456789abcdef0123456789abcdef", "v1", "", "1");
	EXPECT(ws_ckpt_deployment_id(f->c, again), 0, WS_CKPT_OK, NONE); /* re-read adopts it */
	free(body);
}

/* ---- IDs ----------------------------------------------------------------------------- */

static void test_allocate(void **state)
{
	struct fx *f = *state;
	uint64_t a = 0, b = 0, x = 0;

	EXPECT(ws_ckpt_allocate_id_at_least(f->c, 0, &a), 0, WS_CKPT_OK, NONE);
	assert_int_equal(a, 1);
	EXPECT(ws_ckpt_allocate_id_at_least(f->c, 0, &b), 0, WS_CKPT_OK, NONE);
	assert_int_equal(b, 2);
	EXPECT(ws_ckpt_allocate_id_at_least(f->c, 1000, &x), 0, WS_CKPT_OK, NONE);
	assert_int_equal(x, 1000);
	EXPECT(ws_ckpt_allocate_id_at_least(f->c, 5, &x), 0, WS_CKPT_OK, NONE);
	assert_int_equal(x, 1001);
	/* The top of the u64 space. */
	EXPECT(ws_ckpt_allocate_id_at_least(f->c, UINT64_MAX - 3, &x), 0, WS_CKPT_OK, NONE);
	assert_true(x == UINT64_MAX - 3);
	EXPECT(ws_ckpt_allocate_id_at_least(f->c, 0, &x), 0, WS_CKPT_OK, NONE);
	assert_true(x == UINT64_MAX - 2);
	EXPECT(ws_ckpt_allocate_id_at_least(f->c, UINT64_MAX - 1, &x), 0, WS_CKPT_OK, NONE);
	assert_true(x == UINT64_MAX - 1);
	EXPECT(ws_ckpt_allocate_id_at_least(f->c, 0, &x), WS_ETOOBIG, WS_CKPT_EXHAUSTED, "exhausted");
	EXPECT(ws_ckpt_allocate_id_at_least(f->c, UINT64_MAX, &x), WS_ETOOBIG, WS_CKPT_EXHAUSTED, "exhausted");
}

static void test_allocate_exhausted_at_max(void **state)
{
	struct fx *f = *state;
	uint64_t x = 0;
	EXPECT(ws_ckpt_allocate_id_at_least(f->c, UINT64_MAX, &x), WS_ETOOBIG, WS_CKPT_EXHAUSTED, NONE);
	EXPECT(ws_ckpt_allocate_id_at_least(f->c, UINT64_MAX - 1, &x), 0, WS_CKPT_OK, NONE);
	assert_true(x == UINT64_MAX - 1);
	EXPECT(ws_ckpt_allocate_id_at_least(f->c, 1, &x), WS_ETOOBIG, WS_CKPT_EXHAUSTED, NONE);
}

static void test_local_burned_ranges(void **state)
{
	struct fx *f = *state;
	uint64_t seen[8], x = 0;
	int n = 0;

	for (int round = 0; round < 4; round++) {
		for (int i = 0; i < 2; i++) {
			EXPECT(ws_ckpt_allocate_id_at_least(f->c, 0, &x), 0, WS_CKPT_OK, NONE);
			for (int j = 0; j < n; j++)
				assert_true(seen[j] < x); /* never twice, always increasing */
			seen[n++] = x;
		}
		/* Restart: the unused rest of the range is burned. */
		ws_ckpt_close(f->c);
		f->c = open_fx(f);
		f->s = ws_ckpt_store(f->c);
	}
	assert_true(seen[2] == seen[0] + WS_CKPT_LOCAL_ID_RANGE);
	assert_true(seen[7] == 1 + 3 * WS_CKPT_LOCAL_ID_RANGE + 1);
	/* The durable range is reserved: one CAS per WS_CKPT_LOCAL_ID_RANGE IDs. */
	uint64_t puts = f->s->stats.puts;
	for (unsigned i = 0; i < WS_CKPT_LOCAL_ID_RANGE - 1; i++)
		EXPECT(ws_ckpt_allocate_id_at_least(f->c, 0, &x), 0, WS_CKPT_OK, NONE);
	assert_true(f->s->stats.puts - puts <= 1);
}

static void test_local_lease(void **state)
{
	struct fx *f = *state;
	int err = 0;
	struct ws_ckpt *c2 = ws_ckpt_open_local(f->dir, &err);
	assert_null(c2);
	assert_int_equal(err, WS_EFENCED);
	assert_int_equal(ws_ckpt_last_kind(), WS_CKPT_LEASE_HELD);
	assert_non_null(strstr(ws_errmsg(), "lease"));
	ws_ckpt_close(f->c);
	f->c = open_fx(f);
	f->s = ws_ckpt_store(f->c);
	c2 = ws_ckpt_open_local("relative/dir", &err);
	assert_null(c2);
	assert_int_equal(err, WS_ECONFIG);
}

/* The local lease is a regular file of the root: a link planted at its
 * name is refused, never followed (nothing is made outside the root), and
 * so is a FIFO (an open alone could block). */
static void test_local_lease_not_a_link(void **state)
{
	struct fx *f = *state;
	char *root, *lease, *outside;
	struct ws_ckpt *c;
	struct stat st;
	int err = 0;
	(void)f;

	root = wt_tmpdir("ckpt-lease-link");
	lease = wt_path(root, ".lock.ckpt-lease");
	outside = wt_path(root, "../ckpt-lease-outside");
	unlink(outside);
	assert_int_equal(symlink(outside, lease), 0);
	c = ws_ckpt_open_local(root, &err);
	assert_null(c);
	assert_int_equal(err, WS_EFORMAT);
	assert_non_null(strstr(ws_errmsg(), "not a regular file"));
	assert_int_equal(lstat(outside, &st), -1); /* nothing made outside */
	assert_int_equal(unlink(lease), 0);
	assert_int_equal(mkfifo(lease, 0644), 0);
	c = ws_ckpt_open_local(root, &err);
	assert_null(c);
	assert_int_equal(err, WS_EFORMAT);
	assert_int_equal(unlink(lease), 0);
	c = ws_ckpt_open_local(root, &err);
	assert_non_null(c);
	ws_ckpt_close(c);
	wt_rmrf(root);
	free(root);
	free(lease);
	free(outside);
}

/* ---- committed indexes ---------------------------------------------------------------- */

static void test_committed_roundtrip(void **state)
{
	struct fx *f = *state;
	struct ws_ckpt_ref r1, r2, r3;
	struct ws_ckpt_index got;
	struct tidx t;
	int rc;

	make_index(&t, f->dep, 5, 3, NULL);
	EXPECT(ws_ckpt_create_committed(f->c, &t.idx, &r1), 0, WS_CKPT_OK, NONE);
	assert_int_equal(r1.id, 5);
	assert_non_null(strstr(r1.key, "checkpoints/committed/0000000000000005-"));
	EXPECT(ws_ckpt_create_committed(f->c, &t.idx, &r2), 0, WS_CKPT_CONVERGED, NONE);
	assert_memory_equal(&r1, &r2, sizeof(r1));

	EXPECT(ws_ckpt_load_committed(f->c, &r1, &got), 0, WS_CKPT_OK, NONE);
	assert_int_equal(got.checkpoint_id, 5);
	assert_int_equal(got.epoch, 3);
	assert_int_equal(got.tenant_count, 3);
	assert_string_equal(got.tenants[2].tenant, "gamma");
	assert_int_equal(got.tenants[1].last_frame, 51);
	assert_string_equal(got.artifacts[1].key, "ckart/5/part-1");
	assert_false(got.has_predecessor);
	ws_ckpt_index_free(&got);

	/* The body is canonical JSON. */
	char *body = wt_get_str(f->s, r1.key, &rc, NULL);
	assert_int_equal(rc, 0);
	assert_int_equal(strlen(body), r1.length);
	assert_memory_equal(body, "{\"artifacts\":[{\"key\":\"ckart/5/part-0\",\"length\":\"4096\"", 52);
	free(body);

	/* A chained index. */
	make_index(&t, f->dep, 9, 3, &r1);
	EXPECT(ws_ckpt_create_committed(f->c, &t.idx, &r3), 0, WS_CKPT_OK, NONE);
	EXPECT(ws_ckpt_load_committed(f->c, &r3, &got), 0, WS_CKPT_OK, NONE);
	assert_true(got.has_predecessor);
	assert_memory_equal(&got.predecessor, &r1, sizeof(r1));
	ws_ckpt_index_free(&got);
}

static void test_committed_invalid_input(void **state)
{
	struct fx *f = *state;
	struct ws_ckpt_ref r, pred;
	struct tidx t;

	make_index(&t, f->dep, 5, 1, NULL);
	snprintf(t.tenants[0].tenant, sizeof(t.tenants[0].tenant), "zulu"); /* unsorted */
	EXPECT(ws_ckpt_create_committed(f->c, &t.idx, &r), WS_ECONFIG, WS_CKPT_INVALID_INPUT, "sorted");
	make_index(&t, f->dep, 5, 1, NULL);
	snprintf(t.tenants[0].tenant, sizeof(t.tenants[0].tenant), "checkpoints"); /* reserved */
	snprintf(t.tenants[1].tenant, sizeof(t.tenants[1].tenant), "delta");
	snprintf(t.tenants[2].tenant, sizeof(t.tenants[2].tenant), "echo");
	EXPECT(ws_ckpt_create_committed(f->c, &t.idx, &r), WS_ECONFIG, WS_CKPT_INVALID_INPUT, "reserved");
	make_index(&t, f->dep, 0, 1, NULL);
	EXPECT(ws_ckpt_create_committed(f->c, &t.idx, &r), WS_ECONFIG, WS_CKPT_INVALID_INPUT, NONE);
	make_index(&t, f->dep, 5, 1, NULL);
	snprintf(t.arts[1].key, sizeof(t.arts[1].key), "ckart/5/part-0"); /* duplicate */
	EXPECT(ws_ckpt_create_committed(f->c, &t.idx, &r), WS_ECONFIG, WS_CKPT_INVALID_INPUT, "sorted");
	make_index(&t, f->dep, 5, 1, NULL);
	t.arts[0].sha256[3] = 'Z';
	EXPECT(ws_ckpt_create_committed(f->c, &t.idx, &r), WS_ECONFIG, WS_CKPT_INVALID_INPUT, NONE);
	/* Predecessor not older. */
	create_ok(f, 7, 1, NULL, &pred);
	make_index(&t, f->dep, 7, 1, &pred);
	EXPECT(ws_ckpt_create_committed(f->c, &t.idx, &r), WS_ECONFIG, WS_CKPT_INVALID_INPUT, "older");
	/* Foreign deployment. */
	make_index(&t, "0123456789abcdef0123456789abcdef", 5, 1, NULL);
	EXPECT(ws_ckpt_create_committed(f->c, &t.idx, &r), WS_EFORMAT, WS_CKPT_FOREIGN, NONE);
}

static void test_committed_load_verifies(void **state)
{
	struct fx *f = *state;
	struct ws_ckpt_ref r, bad;
	struct ws_ckpt_index got;
	struct tidx t;
	int rc;

	create_ok(f, 11, 2, NULL, &r);
	char *orig = wt_get_str(f->s, r.key, &rc, NULL);
	assert_int_equal(rc, 0);

	/* Reference that does not name its own path. */
	bad = r;
	bad.key[strlen(bad.key) - 6] ^= 1;
	EXPECT(ws_ckpt_load_committed(f->c, &bad, &got), WS_ECONFIG, WS_CKPT_INVALID_INPUT, NONE);
	bad = r;
	bad.id = 12;
	EXPECT(ws_ckpt_load_committed(f->c, &bad, &got), WS_ECONFIG, WS_CKPT_INVALID_INPUT, NONE);
	/* Recorded length differs from the observed one. */
	bad = r;
	bad.length = r.length - 1;
	EXPECT(ws_ckpt_load_committed(f->c, &bad, &got), WS_ECORRUPT, WS_CKPT_REF_MISMATCH, r.key);
	bad.length = r.length + 1;
	EXPECT(ws_ckpt_load_committed(f->c, &bad, &got), WS_ECORRUPT, WS_CKPT_REF_MISMATCH, r.key);
	/* Missing object. */
	bad = r;
	memset(bad.sha256, 'b', WS_SHA256_HEX_LEN);
	ws_ckpt_committed_key(bad.id, bad.sha256, bad.key);
	EXPECT(ws_ckpt_load_committed(f->c, &bad, &got), WS_ENOTFOUND, WS_CKPT_MISSING, bad.key);
	/* Same length, one flipped byte: the hash catches it. */
	orig[20] = orig[20] == '0' ? '1' : '0';
	wt_put_str(f->s, r.key, orig, NULL);
	EXPECT(ws_ckpt_load_committed(f->c, &r, &got), WS_ECORRUPT, WS_CKPT_REF_MISMATCH, "SHA-256");
	/* Those foreign bytes at the path: creating the index there conflicts. */
	make_index(&t, f->dep, 11, 2, NULL);
	EXPECT(ws_ckpt_create_committed(f->c, &t.idx, &bad), WS_EPRECOND, WS_CKPT_CONFLICTING_BODY, r.key);
	free(orig);
}

/* Put body at its own content address and load it through a matching reference. */
static int load_forged(struct fx *f, const char *body, uint64_t id)
{
	struct ws_ckpt_ref r;
	struct ws_ckpt_index got;
	uint8_t sha[WS_SHA256_LEN];
	int rc;
	memset(&r, 0, sizeof(r));
	r.id = id;
	r.length = strlen(body);
	ws_sha256(body, strlen(body), sha);
	ws_hex(sha, sizeof(sha), r.sha256);
	ws_ckpt_committed_key(id, r.sha256, r.key);
	wt_put_str(f->s, r.key, body, NULL);
	rc = ws_ckpt_load_committed(f->c, &r, &got);
	if (rc == 0)
		ws_ckpt_index_free(&got);
	if (rc && !strstr(ws_errmsg(), r.key))
		fail_msg("detail \"%s\" does not name %s", ws_errmsg(), r.key);
	return rc;
}

static void test_committed_malformed_foreign(void **state)
{
	struct fx *f = *state;
	char body[2048];
	const char *other = "0123456789abcdef0123456789abcdef";
#define fmt "{\"artifacts\":[],\"checkpoint_id\":\"%s\",\"deployment\":\"%s\",\"epoch\":\"1\"," \
	    "\"format\":\"walship.ckpt.committed.v1\",\"predecessor\":null,\"tenants\":[%s]}"
#define tenant "{\"last_frame\":\"3\",\"manifest_key\":\"a/m\",\"manifest_length\":\"9\"," \
	       "\"manifest_sha256\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" \
	       "\",\"tenant\":\"%s\",\"wal_generation\":\"1\"}"
	char t1[512], t2[1100];

	/* Well-formed control. */
	snprintf(body, sizeof(body), fmt, "21", f->dep, "");
	EXPECT(load_forged(f, body, 21), 0, WS_CKPT_OK, NONE);
	/* Foreign deployment. */
	snprintf(body, sizeof(body), fmt, "22", other, "");
	EXPECT(load_forged(f, body, 22), WS_EFORMAT, WS_CKPT_FOREIGN, other);
	/* Non-canonical: a space, a number instead of a decimal string. */
	snprintf(body, sizeof(body), fmt, "23", f->dep, "");
	memmove(body + 2, body + 1, strlen(body));
	body[1] = ' ';
	EXPECT(load_forged(f, body, 23), WS_EFORMAT, WS_CKPT_MALFORMED, "canonical");
	snprintf(body, sizeof(body), "{\"artifacts\":[],\"checkpoint_id\":24,\"deployment\":\"%s\",\"epoch\":"
		 "\"1\",\"format\":\"walship.ckpt.committed.v1\",\"predecessor\":null,\"tenants\":[]}", f->dep);
	EXPECT(load_forged(f, body, 24), WS_EFORMAT, WS_CKPT_MALFORMED, "checkpoint_id");
	/* Wrong format name; not JSON; id differs from the reference. */
	snprintf(body, sizeof(body), fmt, "25", f->dep, "");
	memcpy(strstr(body, ".v1"), ".v9", 3);
	EXPECT(load_forged(f, body, 25), WS_EFORMAT, WS_CKPT_MALFORMED, "format");
	EXPECT(load_forged(f, "[1,2,3", 26), WS_EFORMAT, WS_CKPT_MALFORMED, "JSON");
	snprintf(body, sizeof(body), fmt, "27", f->dep, "");
	EXPECT(load_forged(f, body, 28), WS_ECORRUPT, WS_CKPT_REF_MISMATCH, NONE);
	/* Index invariants: unsorted tenants, reserved name, duplicate keys. */
	snprintf(t1, sizeof(t1), tenant, "b");
	snprintf(t2, sizeof(t2), "%s,", t1);
	snprintf(t1, sizeof(t1), tenant, "a");
	strncat(t2, t1, sizeof(t2) - strlen(t2) - 1);
	snprintf(body, sizeof(body), fmt, "29", f->dep, t2);
	EXPECT(load_forged(f, body, 29), WS_EFORMAT, WS_CKPT_MALFORMED, "sorted");
	snprintf(t1, sizeof(t1), tenant, "checkpoints");
	snprintf(body, sizeof(body), fmt, "30", f->dep, t1);
	EXPECT(load_forged(f, body, 30), WS_EFORMAT, WS_CKPT_MALFORMED, "reserved");
	EXPECT(load_forged(f, "{\"a\":1,\"a\":1}", 31), WS_EFORMAT, WS_CKPT_MALFORMED, NONE);
#undef fmt
#undef tenant
}

static void test_seal(void **state)
{
	struct fx *f = *state;
	struct ws_ckpt_ref r, r2;
	struct ws_ckpt_index got;
	struct tidx t;
	int rc;

	/* Seal replaces an existing candidate. */
	create_ok(f, 50, 1, NULL, &r);
	make_index(&t, f->dep, 50, 1, NULL);
	EXPECT(ws_ckpt_seal_aborted_candidate(f->c, &t.idx), 0, WS_CKPT_OK, NONE);
	EXPECT(ws_ckpt_seal_aborted_candidate(f->c, &t.idx), 0, WS_CKPT_CONVERGED, NONE);
	EXPECT(ws_ckpt_load_committed(f->c, &r, &got), WS_EPRECOND, WS_CKPT_SEALED, r.key);
	/* An in-flight create loses to the seal. */
	EXPECT(ws_ckpt_create_committed(f->c, &t.idx, &r2), WS_EPRECOND, WS_CKPT_SEALED, r.key);
	char *seal = wt_get_str(f->s, r.key, &rc, NULL);
	assert_non_null(strstr(seal, "walship.ckpt.sealed.v1"));
	free(seal);

	/* Seal pre-empts a create that has not landed yet. */
	make_index(&t, f->dep, 51, 1, NULL);
	EXPECT(ws_ckpt_seal_aborted_candidate(f->c, &t.idx), 0, WS_CKPT_OK, NONE);
	EXPECT(ws_ckpt_create_committed(f->c, &t.idx, &r2), WS_EPRECOND, WS_CKPT_SEALED, NONE);

	/* Different content at the path: no seal. */
	create_ok(f, 52, 1, NULL, &r);
	wt_put_str(f->s, r.key, "something else", NULL);
	make_index(&t, f->dep, 52, 1, NULL);
	EXPECT(ws_ckpt_seal_aborted_candidate(f->c, &t.idx), WS_EPRECOND, WS_CKPT_CONFLICTING_BODY, r.key);
	/* Foreign candidate. */
	make_index(&t, "0123456789abcdef0123456789abcdef", 53, 1, NULL);
	EXPECT(ws_ckpt_seal_aborted_candidate(f->c, &t.idx), WS_EFORMAT, WS_CKPT_FOREIGN, NONE);
}

static void test_delete(void **state)
{
	struct fx *f = *state;
	struct ws_ckpt_ref r, s;
	struct ws_obj_info info;
	struct tidx t;

	create_ok(f, 60, 1, NULL, &r);
	EXPECT(ws_ckpt_delete_committed(f->c, &r), 0, WS_CKPT_OK, NONE);
	assert_int_equal(ws_store_head(f->s, r.key, &info), WS_ENOTFOUND);
	EXPECT(ws_ckpt_delete_committed(f->c, &r), 0, WS_CKPT_CONVERGED, NONE);
	/* A seal is permanent (the seed: it occupies the candidate's path, so
	 * an in-flight create of the candidate loses to it): refused, kept. */
	create_ok(f, 61, 1, NULL, &s);
	make_index(&t, f->dep, 61, 1, NULL);
	EXPECT(ws_ckpt_seal_aborted_candidate(f->c, &t.idx), 0, WS_CKPT_OK, NONE);
	EXPECT(ws_ckpt_delete_committed(f->c, &s), WS_EPRECOND, WS_CKPT_SEALED, s.key);
	assert_int_equal(ws_store_head(f->s, s.key, &info), 0);
	/* Different content: refused, left in place. */
	create_ok(f, 62, 1, NULL, &r);
	wt_put_str(f->s, r.key, "not ours", NULL);
	EXPECT(ws_ckpt_delete_committed(f->c, &r), WS_ECORRUPT, WS_CKPT_REF_MISMATCH, r.key);
	assert_int_equal(ws_store_head(f->s, r.key, &info), 0);
	r.length = 0;
	EXPECT(ws_ckpt_delete_committed(f->c, &r), WS_ECONFIG, WS_CKPT_INVALID_INPUT, NONE);
}

/*
 * A read-only handle reads either authority's namespace without the lease
 * (a writer holding it never blocks a reader) and refuses every write.
 */
static void test_reader(void **state)
{
	struct fx *f = *state;
	struct ws_ckpt_ref r, r2;
	struct ws_ckpt_index idx;
	struct ws_ckpt_outcome o;
	struct ws_ckpt_record_result rr;
	struct tidx t;
	struct ws_ckpt *rd;
	uint64_t id;
	bool found;
	int err = 0;

	create_ok(f, 70, 1, NULL, &r);
	EXPECT(ws_ckpt_record_outcome(f->c, 1, 70, WS_CKPT_SCOPE_LOCAL, NULL, NULL, WS_CKPT_COMMIT, &r, &rr), 0,
	       WS_CKPT_OK, NONE);
	rd = ws_ckpt_open_reader(f->s, &err); /* f->c still holds the local lease */
	assert_non_null(rd);
	EXPECT(ws_ckpt_latest_commit(rd, &o, &found), 0, WS_CKPT_OK, NONE);
	assert_true(found);
	assert_int_equal(o.checkpoint_id, 70);
	assert_int_equal(ws_ckpt_load_committed(rd, &r, &idx), 0);
	ws_ckpt_index_free(&idx);
	EXPECT(ws_ckpt_allocate_id_at_least(rd, 1, &id), WS_ECONFIG, WS_CKPT_INVALID_INPUT, "read-only");
	make_index(&t, f->dep, 71, 1, &r);
	EXPECT(ws_ckpt_create_committed(rd, &t.idx, &r2), WS_ECONFIG, WS_CKPT_INVALID_INPUT, "read-only");
	EXPECT(ws_ckpt_delete_committed(rd, &r), WS_ECONFIG, WS_CKPT_INVALID_INPUT, "read-only");
	EXPECT(ws_ckpt_latest_commit(rd, &o, &found), 0, WS_CKPT_OK, NONE);
	assert_int_equal(o.checkpoint_id, 70);
	ws_ckpt_close(rd);
}

/* ---- decisions -------------------------------------------------------------------------- */

static void test_record_outcome(void **state)
{
	struct fx *f = *state;
	struct ws_ckpt_record_result res;
	struct ws_ckpt_outcome oc;
	struct ws_ckpt_head h;
	struct ws_ckpt_ref c3, c4, c5;
	struct ws_ckpt_leader_proof proof = { 1, 1 };
	struct ws_ckpt_assignment_fence fence = { 1, 1 };
	bool found = true;

	EXPECT(ws_ckpt_decision_head(f->c, &h, &found), 0, WS_CKPT_OK, NONE);
	assert_false(found);
	EXPECT(ws_ckpt_latest_commit(f->c, &oc, &found), 0, WS_CKPT_OK, NONE);
	assert_false(found);

	/* Abort of 1, then its identical retry. */
	EXPECT(ws_ckpt_record_outcome(f->c, 2, 1, WS_CKPT_SCOPE_LOCAL, NULL, NULL, WS_CKPT_ABORT, NULL, &res), 0,
	       WS_CKPT_OK, NONE);
	assert_int_equal(res.kind, WS_CKPT_OK);
	EXPECT(ws_ckpt_record_outcome(f->c, 2, 1, WS_CKPT_SCOPE_LOCAL, NULL, NULL, WS_CKPT_ABORT, NULL, &res), 0,
	       WS_CKPT_CONVERGED, NONE);
	assert_int_equal(res.kind, WS_CKPT_CONVERGED);
	/* A conflicting outcome for 1 gets the durable winner. */
	create_ok(f, 1, 2, NULL, &c3);
	EXPECT(ws_ckpt_record_outcome(f->c, 2, 1, WS_CKPT_SCOPE_LOCAL, NULL, NULL, WS_CKPT_COMMIT, &c3, &res), 0,
	       WS_CKPT_CONFLICTING_OUTCOME, NONE);
	assert_int_equal(res.winner.verdict, WS_CKPT_ABORT);
	assert_int_equal(res.winner.checkpoint_id, 1);

	/* Commit 3 (first Commit: no predecessor), epoch 5. */
	create_ok(f, 3, 5, NULL, &c3);
	EXPECT(ws_ckpt_record_outcome(f->c, 5, 3, WS_CKPT_SCOPE_LOCAL, NULL, NULL, WS_CKPT_COMMIT, &c3, &res), 0,
	       WS_CKPT_OK, NONE);
	/* Stale epoch: the durable winner comes back. */
	EXPECT(ws_ckpt_record_outcome(f->c, 4, 9, WS_CKPT_SCOPE_LOCAL, NULL, NULL, WS_CKPT_ABORT, NULL, &res), 0,
	       WS_CKPT_STALE_EPOCH, NONE);
	assert_int_equal(res.kind, WS_CKPT_STALE_EPOCH);
	assert_int_equal(res.winner.checkpoint_id, 3);
	assert_int_equal(res.winner.verdict, WS_CKPT_COMMIT);
	/* An older checkpoint after a later one was decided. */
	EXPECT(ws_ckpt_record_outcome(f->c, 5, 2, WS_CKPT_SCOPE_LOCAL, NULL, NULL, WS_CKPT_ABORT, NULL, &res), 0,
	       WS_CKPT_STALE_CHECKPOINT, NONE);
	assert_int_equal(res.winner.checkpoint_id, 3);
	/* A forked Commit: 4 does not name 3 as predecessor. */
	create_ok(f, 4, 5, NULL, &c4);
	EXPECT(ws_ckpt_record_outcome(f->c, 5, 4, WS_CKPT_SCOPE_LOCAL, NULL, NULL, WS_CKPT_COMMIT, &c4, &res),
	       WS_EPRECOND, WS_CKPT_FORKED_PREDECESSOR, c3.key);
	/* An Abort between Commits, then a Commit that extends 3. */
	EXPECT(ws_ckpt_record_outcome(f->c, 5, 4, WS_CKPT_SCOPE_LOCAL, NULL, NULL, WS_CKPT_ABORT, NULL, &res), 0,
	       WS_CKPT_OK, NONE);
	create_ok(f, 5, 6, &c3, &c5);
	EXPECT(ws_ckpt_record_outcome(f->c, 6, 5, WS_CKPT_SCOPE_LOCAL, NULL, NULL, WS_CKPT_COMMIT, &c5, &res), 0,
	       WS_CKPT_OK, NONE);
	EXPECT(ws_ckpt_record_outcome(f->c, 6, 5, WS_CKPT_SCOPE_LOCAL, NULL, NULL, WS_CKPT_COMMIT, &c5, &res), 0,
	       WS_CKPT_CONVERGED, NONE);

	/* Reads: one GET each, never a listing. */
	uint64_t lists = f->s->stats.lists, gets = f->s->stats.gets;
	EXPECT(ws_ckpt_decision_head(f->c, &h, &found), 0, WS_CKPT_OK, NONE);
	assert_true(found);
	assert_int_equal(h.epoch, 6);
	assert_int_equal(h.decisions, 4);
	assert_int_equal(h.latest_terminal.checkpoint_id, 5);
	EXPECT(ws_ckpt_latest_terminal(f->c, &oc, &found), 0, WS_CKPT_OK, NONE);
	assert_int_equal(oc.checkpoint_id, 5);
	EXPECT(ws_ckpt_latest_commit(f->c, &oc, &found), 0, WS_CKPT_OK, NONE);
	assert_true(found);
	assert_memory_equal(&oc.committed, &c5, sizeof(c5));
	assert_int_equal(f->s->stats.lists, lists);
	assert_int_equal(f->s->stats.gets - gets, 3);

	/* Cluster authority and invalid input. */
	EXPECT(ws_ckpt_record_outcome(f->c, 7, 6, WS_CKPT_SCOPE_CLUSTER, &fence, &proof, WS_CKPT_ABORT, NULL, &res),
	       WS_ECONFIG, WS_CKPT_CLUSTER_AUTHORITY, "cluster authority");
	EXPECT(ws_ckpt_record_outcome(f->c, 7, 6, WS_CKPT_SCOPE_LOCAL, NULL, NULL, WS_CKPT_COMMIT, NULL, &res),
	       WS_ECONFIG, WS_CKPT_INVALID_INPUT, NONE);
	EXPECT(ws_ckpt_record_outcome(f->c, 7, 6, WS_CKPT_SCOPE_LOCAL, NULL, NULL, WS_CKPT_ABORT, &c5, &res),
	       WS_ECONFIG, WS_CKPT_INVALID_INPUT, NONE);
	/* The committed index must verify and carry the decision's epoch. */
	EXPECT(ws_ckpt_record_outcome(f->c, 7, 5, WS_CKPT_SCOPE_LOCAL, NULL, NULL, WS_CKPT_COMMIT, &c5, &res),
	       WS_ECONFIG, WS_CKPT_INVALID_INPUT, "epoch");
}

/*
 * The decision counter at 2^64-1: the next decision is refused (EXHAUSTED)
 * and the head stays as it was, instead of wrapping to 0 (a head no reader
 * accepts, so every later checkpoint failed). Issue 12 item 6.
 */
static void test_head_decisions_at_max(void **state)
{
	struct fx *f = *state;
	struct ws_ckpt_record_result res;
	struct ws_ckpt_head h;
	bool found;
	char *good, *maxed, *p, *after;
	size_t len;
	int rc;

	EXPECT(ws_ckpt_record_outcome(f->c, 1, 1, WS_CKPT_SCOPE_LOCAL, NULL, NULL, WS_CKPT_ABORT, NULL, &res), 0,
	       WS_CKPT_OK, NONE);
	good = wt_get_str(f->s, "checkpoints/head", &rc, NULL);
	assert_int_equal(rc, 0);
	p = strstr(good, "\"decisions\":\"1\"");
	assert_non_null(p);
	len = strlen(good) + 32;
	maxed = malloc(len);
	assert_non_null(maxed);
	snprintf(maxed, len, "%.*s\"decisions\":\"18446744073709551615\"%s", (int)(p - good), good,
		 p + strlen("\"decisions\":\"1\""));
	wt_put_str(f->s, "checkpoints/head", maxed, NULL);
	EXPECT(ws_ckpt_decision_head(f->c, &h, &found), 0, WS_CKPT_OK, NONE);
	assert_true(h.decisions == UINT64_MAX);
	EXPECT(ws_ckpt_record_outcome(f->c, 1, 2, WS_CKPT_SCOPE_LOCAL, NULL, NULL, WS_CKPT_ABORT, NULL, &res),
	       WS_ETOOBIG, WS_CKPT_EXHAUSTED, "decision counter");
	after = wt_get_str(f->s, "checkpoints/head", &rc, NULL);
	assert_int_equal(rc, 0);
	assert_string_equal(after, maxed);
	free(after);
	free(maxed);
	free(good);
}

/* s with every occurrence of from replaced by to (malloc'd; at least one). */
static char *replace_all(const char *s, const char *from, const char *to)
{
	size_t n = 0, fl = strlen(from), tl = strlen(to);
	const char *p, *q;
	char *out, *o;
	for (p = strstr(s, from); p; p = strstr(p + fl, from))
		n++;
	assert_true(n > 0);
	out = o = malloc(strlen(s) + n * tl + 1);
	assert_non_null(out);
	for (p = s; (q = strstr(p, from)) != NULL; p = q + fl) {
		memcpy(o, p, (size_t)(q - p));
		o += q - p;
		memcpy(o, to, tl);
		o += tl;
	}
	strcpy(o, p);
	return out;
}

/*
 * Counters and epochs read back are bounded where one more write would
 * overflow them: an epoch above 2^63-1 in the decision head fenced every
 * later taker as if a newer owner had decided (the CLI cannot pass such an
 * epoch); a retention generation at 2^64-1 wrapped to 0 in the next run's
 * first write, after which every retention and listing failed. Both are
 * malformed objects, said so, and the retention run writes nothing.
 */
static void test_epoch_and_generation_bounds(void **state)
{
	struct fx *f = *state;
	struct ws_ckpt_record_result rr;
	struct ws_ckpt_retention_result res;
	struct ws_ckpt_retention st, exp;
	struct ws_ckpt_head h;
	struct ws_ckpt_ref c1, c2;
	bool found;
	char *good, *bad, *after;
	int rc;

	create_ok(f, 1, 1, NULL, &c1);
	EXPECT(ws_ckpt_record_outcome(f->c, 1, 1, WS_CKPT_SCOPE_LOCAL, NULL, NULL, WS_CKPT_COMMIT, &c1, &rr), 0,
	       WS_CKPT_OK, NONE);
	good = wt_get_str(f->s, "checkpoints/head", &rc, NULL);
	assert_int_equal(rc, 0);
	bad = replace_all(good, "\"epoch\":\"1\"", "\"epoch\":\"18446744073709551615\"");
	wt_put_str(f->s, "checkpoints/head", bad, NULL);
	EXPECT(ws_ckpt_decision_head(f->c, &h, &found), WS_EFORMAT, WS_CKPT_MALFORMED, "above 2^63-1");
	wt_put_str(f->s, "checkpoints/head", good, NULL);
	free(bad);
	free(good);

	/* A run at generation 2^64-1, finished (idle), and a later cut to protect. */
	EXPECT(ws_ckpt_begin_retention(f->c, &c1, &res), 0, WS_CKPT_OK, NONE);
	exp = res.state;
	EXPECT(ws_ckpt_advance_retention(f->c, &exp, &res), 0, WS_CKPT_OK, NONE);
	exp = res.state;
	EXPECT(ws_ckpt_advance_retention(f->c, &exp, &res), 0, WS_CKPT_OK, NONE);
	assert_int_equal(res.state.phase, WS_CKPT_RET_IDLE);
	good = wt_get_str(f->s, "checkpoints/retention", &rc, NULL);
	assert_int_equal(rc, 0);
	bad = replace_all(good, "\"generation\":\"3\"", "\"generation\":\"18446744073709551615\"");
	wt_put_str(f->s, "checkpoints/retention", bad, NULL);
	EXPECT(ws_ckpt_retention_state(f->c, &st, &found), WS_EFORMAT, WS_CKPT_MALFORMED, "generation");
	create_ok(f, 2, 1, &c1, &c2);
	EXPECT(ws_ckpt_record_outcome(f->c, 1, 2, WS_CKPT_SCOPE_LOCAL, NULL, NULL, WS_CKPT_COMMIT, &c2, &rr), 0,
	       WS_CKPT_OK, NONE);
	EXPECT(ws_ckpt_begin_retention(f->c, &c2, &res), WS_EFORMAT, WS_CKPT_MALFORMED, "generation");
	after = wt_get_str(f->s, "checkpoints/retention", &rc, NULL);
	assert_int_equal(rc, 0);
	assert_string_equal(after, bad); /* nothing written */
	free(after);
	free(bad);
	free(good);
}

/* An empty object at a committed index's path is refused by its length
 * (UBSan: the seal check passed memmem a NULL pointer; issue 12 item 8). */
static void test_committed_empty_object(void **state)
{
	struct fx *f = *state;
	struct ws_ckpt_ref r;
	struct ws_ckpt_index idx;

	create_ok(f, 80, 1, NULL, &r);
	wt_put_str(f->s, r.key, "", NULL);
	EXPECT(ws_ckpt_load_committed(f->c, &r, &idx), WS_ECORRUPT, WS_CKPT_REF_MISMATCH, r.key);
}

static void test_head_malformed(void **state)
{
	struct fx *f = *state;
	struct ws_ckpt_record_result res;
	struct ws_ckpt_head h;
	bool found;
	int rc;

	EXPECT(ws_ckpt_record_outcome(f->c, 1, 1, WS_CKPT_SCOPE_LOCAL, NULL, NULL, WS_CKPT_ABORT, NULL, &res), 0,
	       WS_CKPT_OK, NONE);
	char *good = wt_get_str(f->s, "checkpoints/head", &rc, NULL);
	assert_int_equal(rc, 0);

	wt_put_str(f->s, "checkpoints/head", "garbage", NULL);
	EXPECT(ws_ckpt_decision_head(f->c, &h, &found), WS_EFORMAT, WS_CKPT_MALFORMED, "checkpoints/head");
	EXPECT(ws_ckpt_record_outcome(f->c, 1, 2, WS_CKPT_SCOPE_LOCAL, NULL, NULL, WS_CKPT_ABORT, NULL, &res),
	       WS_EFORMAT, WS_CKPT_MALFORMED, "checkpoints/head");
	/* Foreign: another deployment's head. */
	char *foreign = strdup(good);
	memcpy(strstr(foreign, f->dep), "0123456789abcdef0123456789abcdef", WS_CKPT_DEPLOYMENT_LEN);
	wt_put_str(f->s, "checkpoints/head", foreign, NULL);
	EXPECT(ws_ckpt_latest_terminal(f->c, &h.latest_terminal, &found), WS_EFORMAT, WS_CKPT_FOREIGN,
	       "checkpoints/head");
	/* Invariant: a terminal Commit without latest_commit. */
	char *bad = strdup(good);
	memcpy(strstr(bad, "\"abort\""), "\"commit", 7);
	wt_put_str(f->s, "checkpoints/head", bad, NULL);
	EXPECT(ws_ckpt_latest_commit(f->c, &h.latest_commit, &found), WS_EFORMAT, WS_CKPT_MALFORMED, NONE);
	wt_put_str(f->s, "checkpoints/head", good, NULL);
	EXPECT(ws_ckpt_decision_head(f->c, &h, &found), 0, WS_CKPT_OK, NONE);
	free(good);
	free(foreign);
	free(bad);
}

/* ---- inventory ------------------------------------------------------------------------------ */

static void make_inv(struct ws_ckpt_inventory *inv, char (*keys)[WS_KEY_MAX], const char *dep, uint64_t id,
		     uint64_t token)
{
	memset(inv, 0, sizeof(*inv));
	snprintf(inv->deployment, sizeof(inv->deployment), "%s", dep);
	inv->attempt.checkpoint_id = id;
	inv->attempt.epoch = 1;
	inv->attempt.token = token;
	snprintf(keys[0], WS_KEY_MAX, "ckart/%" PRIu64 "/a", id);
	snprintf(keys[1], WS_KEY_MAX, "ckart/%" PRIu64 "/b", id);
	inv->key_count = 2;
	inv->keys = keys;
}

static void test_inventory(void **state)
{
	struct fx *f = *state;
	struct ws_ckpt_inventory a, b;
	struct ws_ckpt_inventory_result res;
	struct ws_ckpt_record_result rr;
	char ka[2][WS_KEY_MAX], kb[2][WS_KEY_MAX];

	make_inv(&a, ka, f->dep, 3, 100);
	make_inv(&b, kb, f->dep, 4, 101);
	EXPECT(ws_ckpt_begin_inventory(f->c, &a, &res), 0, WS_CKPT_OK, NONE);
	assert_true(res.active);
	EXPECT(ws_ckpt_begin_inventory(f->c, &a, &res), 0, WS_CKPT_CONVERGED, NONE);
	assert_int_equal(res.kind, WS_CKPT_CONVERGED);
	EXPECT(ws_ckpt_begin_inventory(f->c, &b, &res), WS_EPRECOND, WS_CKPT_ACTIVE_ATTEMPT, "checkpoints/inventory");
	EXPECT(ws_ckpt_complete_inventory(f->c, &b, &res), WS_EPRECOND, WS_CKPT_STATE_MISMATCH, NONE);
	EXPECT(ws_ckpt_complete_inventory(f->c, &a, &res), 0, WS_CKPT_OK, NONE);
	assert_false(res.active);
	EXPECT(ws_ckpt_complete_inventory(f->c, &a, &res), 0, WS_CKPT_CONVERGED, NONE);
	/* The completed attempt is terminal: reusing it conflicts. */
	EXPECT(ws_ckpt_begin_inventory(f->c, &a, &res), WS_EPRECOND, WS_CKPT_TERMINAL_ATTEMPT_REUSED, NONE);
	/* So is an attempt the head already decided. */
	EXPECT(ws_ckpt_record_outcome(f->c, 1, 4, WS_CKPT_SCOPE_LOCAL, NULL, NULL, WS_CKPT_ABORT, NULL, &rr), 0,
	       WS_CKPT_OK, NONE);
	EXPECT(ws_ckpt_begin_inventory(f->c, &b, &res), WS_EPRECOND, WS_CKPT_TERMINAL_ATTEMPT_REUSED, NONE);
	make_inv(&b, kb, f->dep, 5, 102);
	EXPECT(ws_ckpt_begin_inventory(f->c, &b, &res), 0, WS_CKPT_OK, NONE);

	/* Cluster, foreign, invalid. */
	b.scope = WS_CKPT_SCOPE_CLUSTER;
	EXPECT(ws_ckpt_begin_inventory(f->c, &b, &res), WS_ECONFIG, WS_CKPT_CLUSTER_AUTHORITY, NONE);
	EXPECT(ws_ckpt_complete_inventory(f->c, &b, &res), WS_ECONFIG, WS_CKPT_CLUSTER_AUTHORITY, NONE);
	make_inv(&b, kb, "0123456789abcdef0123456789abcdef", 6, 103);
	EXPECT(ws_ckpt_begin_inventory(f->c, &b, &res), WS_EFORMAT, WS_CKPT_FOREIGN, NONE);
	make_inv(&b, kb, f->dep, 6, 0);
	EXPECT(ws_ckpt_begin_inventory(f->c, &b, &res), WS_ECONFIG, WS_CKPT_INVALID_INPUT, NONE);
	make_inv(&b, kb, f->dep, 6, 9);
	snprintf(kb[1], WS_KEY_MAX, "ckart/0"); /* unsorted */
	EXPECT(ws_ckpt_begin_inventory(f->c, &b, &res), WS_ECONFIG, WS_CKPT_INVALID_INPUT, NONE);

	/* Malformed durable inventory. */
	wt_put_str(f->s, "checkpoints/inventory", "{}", NULL);
	make_inv(&b, kb, f->dep, 6, 9);
	EXPECT(ws_ckpt_begin_inventory(f->c, &b, &res), WS_EFORMAT, WS_CKPT_MALFORMED, "checkpoints/inventory");

	/* Two million values (4 MB): refused before it is parsed, which would
	 * hold each value in memory (some 40 times its text), and before an
	 * array of a key's size for each is allocated. Commas inside strings
	 * are not values. */
	{
		const size_t n = 2000000;
		char *big = malloc(2 * n + 64), *q = big;
		assert_non_null(big);
		q += sprintf(q, "{\"active\":{\"keys\":[");
		for (size_t i = 0; i < n; i++) {
			*q++ = '0';
			*q++ = ',';
		}
		strcpy(q - 1, "]}}");
		wt_put_str(f->s, "checkpoints/inventory", big, NULL);
		free(big);
		EXPECT(ws_ckpt_begin_inventory(f->c, &b, &res), WS_EFORMAT, WS_CKPT_MALFORMED, "more than 1000064 values");
		wt_put_str(f->s, "checkpoints/inventory", "{\"format\":\"a,b,c\"}", NULL);
		EXPECT(ws_ckpt_begin_inventory(f->c, &b, &res), WS_EFORMAT, WS_CKPT_MALFORMED, "checkpoints/inventory");
		assert_null(strstr(ws_errmsg(), "values"));
	}
}

/*
 * ws_ckpt_active_inventory: the attempt and keys exactly as begun; nothing
 * active when absent or completed; and every body that is not the exact
 * canonical object (garbage, a truncation, whitespace, an extra field,
 * unsorted keys, an invalid key, a zero token, another format or
 * deployment) an error naming checkpoints/inventory.
 */
static void test_inventory_read(void **state)
{
	struct fx *f = *state;
	struct ws_ckpt_inventory a, got;
	struct ws_ckpt_inventory_result res;
	char ka[2][WS_KEY_MAX], body[2048], bad[2200];
	bool active = true;
	int rc;

	EXPECT(ws_ckpt_active_inventory(f->c, &got, &active), 0, WS_CKPT_OK, NONE);
	assert_false(active);
	make_inv(&a, ka, f->dep, 3, 100);
	EXPECT(ws_ckpt_begin_inventory(f->c, &a, &res), 0, WS_CKPT_OK, NONE);
	EXPECT(ws_ckpt_active_inventory(f->c, &got, &active), 0, WS_CKPT_OK, NONE);
	assert_true(active);
	assert_true(ws_ckpt_attempt_equal(&got.attempt, &a.attempt));
	assert_int_equal(got.scope, WS_CKPT_SCOPE_LOCAL);
	assert_string_equal(got.deployment, f->dep);
	assert_int_equal(got.key_count, 2);
	assert_string_equal(got.keys[0], ka[0]);
	assert_string_equal(got.keys[1], ka[1]);
	/* What it returns is what completes the attempt. */
	EXPECT(ws_ckpt_complete_inventory(f->c, &got, &res), 0, WS_CKPT_OK, NONE);
	ws_ckpt_inventory_free(&got);
	assert_null(got.keys);
	EXPECT(ws_ckpt_active_inventory(f->c, &got, &active), 0, WS_CKPT_OK, NONE);
	assert_false(active);
	assert_false(ws_ckpt_attempt_equal(&(struct ws_ckpt_attempt){ 3, 1, 101 }, &a.attempt));
	assert_false(ws_ckpt_attempt_equal(&(struct ws_ckpt_attempt){ 3, 2, 100 }, &a.attempt));
	assert_false(ws_ckpt_attempt_equal(&(struct ws_ckpt_attempt){ 4, 1, 100 }, &a.attempt));

	/* The canonical active body, then each way of breaking it. */
	snprintf(body, sizeof(body), "{\"active\":{\"attempt\":{\"checkpoint_id\":\"7\",\"epoch\":\"1\","
		 "\"token\":\"9\"},\"keys\":[\"ckart/7/a\",\"ckart/7/b\"]},\"deployment\":\"%s\","
		 "\"format\":\"walship.ckpt.inventory.v1\",\"last_completed\":null}", f->dep);
	wt_put_str(f->s, "checkpoints/inventory", body, NULL);
	EXPECT(ws_ckpt_active_inventory(f->c, &got, &active), 0, WS_CKPT_OK, NONE);
	assert_true(active && got.attempt.checkpoint_id == 7 && got.attempt.token == 9 && got.key_count == 2);
	ws_ckpt_inventory_free(&got);

	const struct {
		const char *from, *to;
		enum ws_ckpt_kind kind;
	} edits[] = {
		{ "{", "garbage{", WS_CKPT_MALFORMED },
		{ "\"last_completed\":null}", "\"last_completed\":null", WS_CKPT_MALFORMED },
		{ "null}", "null} ", WS_CKPT_MALFORMED },
		{ "null}", "null}x", WS_CKPT_MALFORMED },
		{ "\"keys\":[", "\"keys\": [", WS_CKPT_MALFORMED },
		{ "\"epoch\":\"1\",", "\"epoch\":\"1\",\"extra\":\"1\",", WS_CKPT_MALFORMED },
		{ "\"ckart/7/a\",\"ckart/7/b\"", "\"ckart/7/b\",\"ckart/7/a\"", WS_CKPT_MALFORMED },
		{ "\"ckart/7/a\",\"ckart/7/b\"", "\"ckart/7/a\",\"ckart/7/a\"", WS_CKPT_MALFORMED },
		{ "\"ckart/7/a\"", "\"../7/a\"", WS_CKPT_MALFORMED },
		{ "\"token\":\"9\"", "\"token\":\"0\"", WS_CKPT_MALFORMED },
		{ "\"token\":\"9\"", "\"token\":9", WS_CKPT_MALFORMED },
		{ "\"epoch\":\"1\"", "\"epoch\":\"01\"", WS_CKPT_MALFORMED },
		{ "inventory.v1", "inventory.v2", WS_CKPT_MALFORMED },
		{ f->dep, "0123456789abcdef0123456789abcdef", WS_CKPT_FOREIGN },
	};
	for (size_t i = 0; i < sizeof(edits) / sizeof(edits[0]); i++) {
		const char *at = strstr(body, edits[i].from);
		assert_non_null(at);
		snprintf(bad, sizeof(bad), "%.*s%s%s", (int)(at - body), body, edits[i].to,
			 at + strlen(edits[i].from));
		wt_put_str(f->s, "checkpoints/inventory", bad, NULL);
		active = true;
		rc = ws_ckpt_active_inventory(f->c, &got, &active);
		if (rc != WS_EFORMAT || ws_ckpt_last_kind() != edits[i].kind)
			fail_msg("edit %zu (%s): rc %d kind %s; detail: %s", i, bad, rc,
				 ws_ckpt_kind_name(ws_ckpt_last_kind()), ws_errmsg());
		expect_detail(bad, "checkpoints/inventory");
		assert_false(active);
		assert_null(got.keys);
	}
	wt_put_str(f->s, "checkpoints/inventory", "", NULL);
	EXPECT(ws_ckpt_active_inventory(f->c, &got, &active), WS_EFORMAT, WS_CKPT_MALFORMED, "checkpoints/inventory");
}

/* The candidates of one ID, each named by its listing; another ID's never. */
static int count_candidate(const struct ws_ckpt_ref *ref, void *arg)
{
	const struct ws_ckpt_ref *want = ((const struct ws_ckpt_ref **)arg)[0];
	unsigned *n = ((unsigned **)arg)[1];
	assert_int_equal(ref->id, want->id);
	assert_string_equal(ref->key, want->key);
	assert_string_equal(ref->sha256, want->sha256);
	assert_int_equal(ref->length, want->length);
	(*n)++;
	return 0;
}

static int stop_candidate(const struct ws_ckpt_ref *ref, void *arg)
{
	(void)ref;
	(void)arg;
	return -EINTR;
}

static void test_list_candidates(void **state)
{
	struct fx *f = *state;
	struct ws_ckpt_ref r12, r13;
	unsigned n = 0;
	void *arg[2] = { &r12, &n };

	create_ok(f, 12, 1, NULL, &r12);
	create_ok(f, 13, 1, NULL, &r13);
	assert_int_equal(ws_ckpt_list_candidates(f->c, 12, count_candidate, arg), 0);
	assert_int_equal(n, 1);
	n = 0;
	assert_int_equal(ws_ckpt_list_candidates(f->c, 14, count_candidate, arg), 0);
	assert_int_equal(n, 0);
	assert_int_equal(ws_ckpt_list_candidates(f->c, 13, stop_candidate, NULL), -EINTR);
}

/* ---- retention ---------------------------------------------------------------------------------- */

static void test_retention(void **state)
{
	struct fx *f = *state;
	struct ws_ckpt_retention_result res;
	struct ws_ckpt_record_result rr;
	struct ws_ckpt_retention st, exp;
	struct ws_ckpt_ref c1, c2;
	bool found = true;

	EXPECT(ws_ckpt_retention_state(f->c, &st, &found), 0, WS_CKPT_OK, NONE);
	assert_false(found);
	create_ok(f, 1, 1, NULL, &c1);
	EXPECT(ws_ckpt_begin_retention(f->c, &c1, &res), WS_EPRECOND, WS_CKPT_STALE_CUT, NONE);
	EXPECT(ws_ckpt_record_outcome(f->c, 1, 1, WS_CKPT_SCOPE_LOCAL, NULL, NULL, WS_CKPT_COMMIT, &c1, &rr), 0,
	       WS_CKPT_OK, NONE);
	EXPECT(ws_ckpt_begin_retention(f->c, &c1, &res), 0, WS_CKPT_OK, NONE);
	assert_int_equal(res.state.phase, WS_CKPT_RET_SWEEP_ARTIFACTS);
	assert_int_equal(res.state.generation, 1);
	EXPECT(ws_ckpt_begin_retention(f->c, &c1, &res), 0, WS_CKPT_CONVERGED, NONE);
	exp = res.state;
	EXPECT(ws_ckpt_advance_retention(f->c, &exp, &res), 0, WS_CKPT_OK, NONE);
	assert_int_equal(res.state.phase, WS_CKPT_RET_SWEEP_INDEXES);
	EXPECT(ws_ckpt_advance_retention(f->c, &exp, &res), 0, WS_CKPT_CONVERGED, NONE);
	assert_int_equal(res.state.phase, WS_CKPT_RET_SWEEP_INDEXES);
	exp = res.state;
	/* A new cut cannot start while a run is in flight. */
	create_ok(f, 2, 1, &c1, &c2);
	EXPECT(ws_ckpt_record_outcome(f->c, 1, 2, WS_CKPT_SCOPE_LOCAL, NULL, NULL, WS_CKPT_COMMIT, &c2, &rr), 0,
	       WS_CKPT_OK, NONE);
	EXPECT(ws_ckpt_begin_retention(f->c, &c2, &res), WS_EPRECOND, WS_CKPT_STATE_MISMATCH, NONE);
	EXPECT(ws_ckpt_advance_retention(f->c, &exp, &res), 0, WS_CKPT_OK, NONE);
	assert_int_equal(res.state.phase, WS_CKPT_RET_IDLE);
	/* Idle expected state is invalid; a stale expected state mismatches. */
	EXPECT(ws_ckpt_advance_retention(f->c, &res.state, &res), WS_ECONFIG, WS_CKPT_INVALID_INPUT, "idle");
	exp.generation = 1;
	EXPECT(ws_ckpt_advance_retention(f->c, &exp, &res), WS_EPRECOND, WS_CKPT_STATE_MISMATCH, NONE);
	/* The old cut is stale now; the new one starts. */
	EXPECT(ws_ckpt_begin_retention(f->c, &c1, &res), WS_EPRECOND, WS_CKPT_STALE_CUT, NONE);
	EXPECT(ws_ckpt_begin_retention(f->c, &c2, &res), 0, WS_CKPT_OK, NONE);
	assert_int_equal(res.state.generation, 4);
	EXPECT(ws_ckpt_retention_state(f->c, &st, &found), 0, WS_CKPT_OK, NONE);
	assert_true(found);
	assert_memory_equal(&st.protected_ref, &c2, sizeof(c2));
	assert_false(st.has_kept);
	/* Keeping the older checkpoint: a run of its own for the same cut once
	 * the last one is done, recorded (and read back) with what it keeps;
	 * the same request again converges; one keeping nothing older follows. */
	exp = res.state;
	EXPECT(ws_ckpt_begin_retention_keep(f->c, &c2, &c1, &res), WS_EPRECOND, WS_CKPT_STATE_MISMATCH, NONE);
	EXPECT(ws_ckpt_advance_retention(f->c, &exp, &res), 0, WS_CKPT_OK, NONE);
	exp = res.state;
	EXPECT(ws_ckpt_advance_retention(f->c, &exp, &res), 0, WS_CKPT_OK, NONE);
	assert_int_equal(res.state.phase, WS_CKPT_RET_IDLE);
	EXPECT(ws_ckpt_begin_retention_keep(f->c, &c2, &c2, &res), 0, WS_CKPT_CONVERGED, NONE);
	EXPECT(ws_ckpt_begin_retention_keep(f->c, &c2, &c1, &res), 0, WS_CKPT_OK, NONE);
	assert_int_equal(res.state.phase, WS_CKPT_RET_SWEEP_ARTIFACTS);
	assert_true(res.state.has_kept);
	EXPECT(ws_ckpt_retention_state(f->c, &st, &found), 0, WS_CKPT_OK, NONE);
	assert_true(st.has_kept);
	assert_memory_equal(&st.kept_ref, &c1, sizeof(c1));
	EXPECT(ws_ckpt_begin_retention_keep(f->c, &c2, &c1, &res), 0, WS_CKPT_CONVERGED, NONE);
	exp = res.state;
	EXPECT(ws_ckpt_advance_retention(f->c, &exp, &res), 0, WS_CKPT_OK, NONE);
	assert_true(res.state.has_kept); /* every phase keeps it */
	exp = res.state;
	EXPECT(ws_ckpt_advance_retention(f->c, &exp, &res), 0, WS_CKPT_OK, NONE);
	EXPECT(ws_ckpt_begin_retention_keep(f->c, &c2, NULL, &res), 0, WS_CKPT_OK, NONE);
	assert_false(res.state.has_kept);
	exp = res.state;
	EXPECT(ws_ckpt_advance_retention(f->c, &exp, &res), 0, WS_CKPT_OK, NONE);
	exp = res.state;
	EXPECT(ws_ckpt_advance_retention(f->c, &exp, &res), 0, WS_CKPT_OK, NONE);
	/* Keeping from a checkpoint not older than the cut: refused. */
	EXPECT(ws_ckpt_begin_retention_keep(f->c, &c1, &c2, &res), WS_EPRECOND, WS_CKPT_STALE_CUT, NONE);
	{
		struct ws_ckpt_ref later = c2;
		later.id = c2.id + 1;
		EXPECT(ws_ckpt_begin_retention_keep(f->c, &c2, &later, &res), WS_ECONFIG, WS_CKPT_INVALID_INPUT,
		       NONE);
	}
	/* A record whose kept is not older than its cut is malformed. */
	{
		struct ws_ckpt_retention bad = res.state;
		size_t len = 0;
		char *body;
		bad.has_kept = true;
		bad.kept_ref = c2;
		char dep[WS_CKPT_DEPLOYMENT_LEN + 1];
		memset(dep, 'a', WS_CKPT_DEPLOYMENT_LEN);
		dep[WS_CKPT_DEPLOYMENT_LEN] = '\0';
		body = ckpt_enc_retention(dep, &bad, &len);
		assert_non_null(body);
		assert_int_equal(ckpt_dec_retention("checkpoints/retention", (const uint8_t *)body, len, NULL, &st),
				 WS_EFORMAT);
		free(body);
	}
	/* A cut whose index no longer verifies. */
	wt_put_str(f->s, c2.key, "broken", NULL);
	EXPECT(ws_ckpt_begin_retention(f->c, &c2, &res), WS_ECORRUPT, WS_CKPT_REF_MISMATCH, c2.key);
	wt_put_str(f->s, "checkpoints/retention", "{\"format\":1}", NULL);
	EXPECT(ws_ckpt_retention_state(f->c, &st, &found), WS_EFORMAT, WS_CKPT_MALFORMED, "checkpoints/retention");
}

/* ---- sink-open witness ------------------------------------------------------------------------------ */

static void test_witness(void **state)
{
	struct fx *f = *state;
	struct ws_ckpt_witness *w = calloc(1, sizeof(*w)), *w2 = calloc(1, sizeof(*w2));
	struct ws_ckpt_attempt a1 = { 7, 1, 70 }, a2 = { 8, 1, 80 };
	const char *sinks[] = { "kafka", "s3-out" }, *unsorted[] = { "s3-out", "kafka" }, *dup[] = { "a", "a" };
	bool found = true;

	EXPECT(ws_ckpt_sink_open_witness(f->c, w, &found), 0, WS_CKPT_OK, NONE);
	assert_false(found);
	EXPECT(ws_ckpt_create_sink_open_witness(f->c, "pipe-1", 3, &a1, sinks, 2, w), 0, WS_CKPT_OK, NONE);
	assert_int_equal(w->state, WS_CKPT_WITNESS_OPEN);
	assert_int_equal(w->sequence, 1);
	EXPECT(ws_ckpt_create_sink_open_witness(f->c, "pipe-1", 3, &a1, sinks, 2, w2), 0, WS_CKPT_CONVERGED, NONE);
	assert_memory_equal(w, w2, sizeof(*w));
	EXPECT(ws_ckpt_create_sink_open_witness(f->c, "pipe-1", 3, &a2, sinks, 2, w2), WS_EPRECOND,
	       WS_CKPT_ACTIVE_ATTEMPT, "checkpoints/witness");
	EXPECT(ws_ckpt_create_sink_open_witness(f->c, "pipe-1", 3, &a2, unsorted, 2, w2), WS_ECONFIG,
	       WS_CKPT_INVALID_INPUT, "sorted");
	EXPECT(ws_ckpt_create_sink_open_witness(f->c, "pipe-1", 3, &a2, dup, 2, w2), WS_ECONFIG,
	       WS_CKPT_INVALID_INPUT, "unique");
	EXPECT(ws_ckpt_create_sink_open_witness(f->c, "bad pipe", 3, &a2, sinks, 2, w2), WS_ECONFIG,
	       WS_CKPT_INVALID_INPUT, NONE);

	EXPECT(ws_ckpt_sink_open_witness(f->c, w2, &found), 0, WS_CKPT_OK, NONE);
	assert_true(found);
	assert_memory_equal(w, w2, sizeof(*w));
	/* Clearing a different witness conflicts; the exact one closes (once
	 * its attempt is decided), then converges. */
	{
		struct ws_ckpt_record_result rr;
		EXPECT(ws_ckpt_record_outcome(f->c, 1, 7, WS_CKPT_SCOPE_LOCAL, NULL, NULL, WS_CKPT_ABORT, NULL, &rr),
		       0, WS_CKPT_OK, NONE);
	}
	*w2 = *w;
	w2->participant_id = 4;
	EXPECT(ws_ckpt_clear_sink_open_witness(f->c, w2), WS_EPRECOND, WS_CKPT_STATE_MISMATCH, NONE);
	EXPECT(ws_ckpt_clear_sink_open_witness(f->c, w), 0, WS_CKPT_OK, NONE);
	EXPECT(ws_ckpt_clear_sink_open_witness(f->c, w), 0, WS_CKPT_CONVERGED, NONE);
	EXPECT(ws_ckpt_sink_open_witness(f->c, w2, &found), 0, WS_CKPT_OK, NONE);
	assert_int_equal(w2->state, WS_CKPT_WITNESS_CLOSED);
	/* Reopening the closed attempt is a reuse; a successor opens over the tombstone. */
	EXPECT(ws_ckpt_create_sink_open_witness(f->c, "pipe-1", 3, &a1, sinks, 2, w2), WS_EPRECOND,
	       WS_CKPT_TERMINAL_ATTEMPT_REUSED, NONE);
	EXPECT(ws_ckpt_create_sink_open_witness(f->c, "pipe-1", 3, &a2, sinks, 1, w2), 0, WS_CKPT_OK, NONE);
	assert_int_equal(w2->sequence, 2);
	/* The old owner's clear is harmless now. */
	EXPECT(ws_ckpt_clear_sink_open_witness(f->c, w), WS_EPRECOND, WS_CKPT_STATE_MISMATCH, NONE);
	/* Malformed and foreign witness. */
	int rc;
	char *good = wt_get_str(f->s, "checkpoints/witness", &rc, NULL);
	char *bad = strdup(good);
	memcpy(strstr(bad, f->dep), "0123456789abcdef0123456789abcdef", WS_CKPT_DEPLOYMENT_LEN);
	wt_put_str(f->s, "checkpoints/witness", bad, NULL);
	EXPECT(ws_ckpt_sink_open_witness(f->c, w2, &found), WS_EFORMAT, WS_CKPT_FOREIGN, "checkpoints/witness");
	memcpy(bad, good, strlen(good));
	memcpy(strstr(bad, "\"open\""), "\"shut\"", 6);
	wt_put_str(f->s, "checkpoints/witness", bad, NULL);
	EXPECT(ws_ckpt_sink_open_witness(f->c, w2, &found), WS_EFORMAT, WS_CKPT_MALFORMED, "checkpoints/witness");
	free(good);
	free(bad);
	free(w);
	free(w2);
}

/* ---- the seed's contract (issue 31 item 8) ------------------------------------------------------------ */

static void commit_ok(struct fx *f, uint64_t id, uint64_t epoch, const struct ws_ckpt_ref *pred,
		      struct ws_ckpt_ref *ref)
{
	struct ws_ckpt_record_result rr;
	create_ok(f, id, epoch, pred, ref);
	EXPECT(ws_ckpt_record_outcome(f->c, epoch, id, WS_CKPT_SCOPE_LOCAL, NULL, NULL, WS_CKPT_COMMIT, ref, &rr), 0,
	       WS_CKPT_OK, NONE);
}

/*
 * begin_checkpoint_retention: a run keeping older checkpoints keeps the
 * protected cut's chain back to kept; kept off that chain, or a protected
 * cut that does not verify, is refused and nothing is recorded; a damaged
 * link between is passed (kept, older, must verify).
 */
static void test_seed_retention_chain(void **state)
{
	struct fx *f = *state;
	struct ws_ckpt_retention_result res;
	struct ws_ckpt_retention st;
	struct ws_ckpt_ref c1, stray, c3, c4, c5;
	bool found = true;
	char *good;
	int rc;

	commit_ok(f, 1, 1, NULL, &c1);
	create_ok(f, 2, 1, NULL, &stray); /* stored and valid, never committed: no chain's */
	commit_ok(f, 3, 1, &c1, &c3);
	commit_ok(f, 4, 1, &c3, &c4);
	commit_ok(f, 5, 1, &c4, &c5);
	EXPECT(ws_ckpt_begin_retention_keep(f->c, &c5, &stray, &res), WS_ECONFIG, WS_CKPT_INVALID_INPUT,
	       "not on the chain");
	EXPECT(ws_ckpt_retention_state(f->c, &st, &found), 0, WS_CKPT_OK, NONE);
	assert_false(found);
	/* A damaged protected cut: refused, nothing recorded. */
	good = wt_get_str(f->s, c5.key, &rc, NULL);
	assert_non_null(good);
	wt_put_str(f->s, c5.key, "damaged", NULL);
	EXPECT(ws_ckpt_begin_retention_keep(f->c, &c5, &c3, &res), WS_ECORRUPT, WS_CKPT_REF_MISMATCH, c5.key);
	EXPECT(ws_ckpt_retention_state(f->c, &st, &found), 0, WS_CKPT_OK, NONE);
	assert_false(found);
	wt_put_str(f->s, c5.key, good, NULL);
	free(good);
	/* A damaged link between the cut and kept names no predecessor: the
	 * chain past it is the caller's to find (issue 31 item 4: retention
	 * --keep-checkpoints must not be blocked by a damaged older index);
	 * kept, older and verifying, is accepted, and c3 kept. */
	good = wt_get_str(f->s, c4.key, &rc, NULL);
	assert_non_null(good);
	wt_put_str(f->s, c4.key, "damaged", NULL);
	EXPECT(ws_ckpt_begin_retention_keep(f->c, &c5, &c3, &res), 0, WS_CKPT_OK, NONE);
	assert_true(res.state.has_kept);
	assert_memory_equal(&res.state.kept_ref, &c3, sizeof(c3));
	wt_put_str(f->s, c4.key, good, NULL);
	free(good);
}

/* record_outcome: a retried Commit converges after later decisions, while it is on the chain. */
static void test_seed_record_commit_retry(void **state)
{
	struct fx *f = *state;
	struct ws_ckpt_record_result res;
	struct ws_ckpt_ref c1, c2, c3, c4;

	commit_ok(f, 1, 1, NULL, &c1);
	/* A later decision at a higher epoch (an Abort). */
	EXPECT(ws_ckpt_record_outcome(f->c, 3, 2, WS_CKPT_SCOPE_LOCAL, NULL, NULL, WS_CKPT_ABORT, NULL, &res), 0,
	       WS_CKPT_OK, NONE);
	EXPECT(ws_ckpt_record_outcome(f->c, 1, 1, WS_CKPT_SCOPE_LOCAL, NULL, NULL, WS_CKPT_COMMIT, &c1, &res), 0,
	       WS_CKPT_CONVERGED, NONE);
	assert_int_equal(res.kind, WS_CKPT_CONVERGED);
	assert_int_equal(res.winner.checkpoint_id, 1);
	assert_int_equal(res.winner.verdict, WS_CKPT_COMMIT);
	assert_memory_equal(&res.winner.committed, &c1, sizeof(c1));
	/* Two later Commits: each earlier one is on the chain and converges. */
	commit_ok(f, 3, 3, &c1, &c3);
	commit_ok(f, 4, 3, &c3, &c4);
	EXPECT(ws_ckpt_record_outcome(f->c, 3, 3, WS_CKPT_SCOPE_LOCAL, NULL, NULL, WS_CKPT_COMMIT, &c3, &res), 0,
	       WS_CKPT_CONVERGED, NONE);
	EXPECT(ws_ckpt_record_outcome(f->c, 1, 1, WS_CKPT_SCOPE_LOCAL, NULL, NULL, WS_CKPT_COMMIT, &c1, &res), 0,
	       WS_CKPT_CONVERGED, NONE);
	/* A Commit of the aborted 2 is no retry: the durable winner comes back. */
	create_ok(f, 2, 3, NULL, &c2);
	EXPECT(ws_ckpt_record_outcome(f->c, 3, 2, WS_CKPT_SCOPE_LOCAL, NULL, NULL, WS_CKPT_COMMIT, &c2, &res), 0,
	       WS_CKPT_STALE_CHECKPOINT, NONE);
	assert_int_equal(res.winner.checkpoint_id, 4);
	/* The head did not move for any retry. */
	{
		struct ws_ckpt_head h;
		bool found;
		EXPECT(ws_ckpt_decision_head(f->c, &h, &found), 0, WS_CKPT_OK, NONE);
		assert_int_equal(h.decisions, 4);
	}
}

/* seal_aborted_committed_checkpoint_candidate: a committed index is never sealed. */
static void test_seed_seal_refuses_commit(void **state)
{
	struct fx *f = *state;
	struct ws_ckpt_index got;
	struct ws_ckpt_ref c1, c2, r3;
	struct tidx t;

	commit_ok(f, 1, 1, NULL, &c1);
	make_index(&t, f->dep, 1, 1, NULL);
	EXPECT(ws_ckpt_seal_aborted_candidate(f->c, &t.idx), WS_EPRECOND, WS_CKPT_CONFLICTING_OUTCOME, "committed");
	EXPECT(ws_ckpt_load_committed(f->c, &c1, &got), 0, WS_CKPT_OK, NONE);
	ws_ckpt_index_free(&got);
	/* Still on the chain once a later Commit names it. */
	commit_ok(f, 2, 1, &c1, &c2);
	EXPECT(ws_ckpt_seal_aborted_candidate(f->c, &t.idx), WS_EPRECOND, WS_CKPT_CONFLICTING_OUTCOME, c1.key);
	EXPECT(ws_ckpt_load_committed(f->c, &c1, &got), 0, WS_CKPT_OK, NONE);
	ws_ckpt_index_free(&got);
	/* An aborted candidate is sealed as before. */
	create_ok(f, 3, 1, &c2, &r3);
	make_index(&t, f->dep, 3, 1, &c2);
	{
		struct ws_ckpt_record_result rr;
		EXPECT(ws_ckpt_record_outcome(f->c, 1, 3, WS_CKPT_SCOPE_LOCAL, NULL, NULL, WS_CKPT_ABORT, NULL, &rr),
		       0, WS_CKPT_OK, NONE);
	}
	EXPECT(ws_ckpt_seal_aborted_candidate(f->c, &t.idx), 0, WS_CKPT_OK, NONE);
	EXPECT(ws_ckpt_load_committed(f->c, &r3, &got), WS_EPRECOND, WS_CKPT_SEALED, r3.key);
	/* The header's word: a seal is not deleted, the committed index is. */
	EXPECT(ws_ckpt_delete_committed(f->c, &r3), WS_EPRECOND, WS_CKPT_SEALED, r3.key);
	EXPECT(ws_ckpt_load_committed(f->c, &r3, &got), WS_EPRECOND, WS_CKPT_SEALED, NONE);
	EXPECT(ws_ckpt_delete_committed(f->c, &c1), 0, WS_CKPT_OK, NONE);
}

/* The sink-open witness: no empty sink list; closed only once its attempt is terminal. */
static void test_seed_witness(void **state)
{
	struct fx *f = *state;
	struct ws_ckpt_witness *w = calloc(1, sizeof(*w)), *cur = calloc(1, sizeof(*cur));
	struct ws_ckpt_attempt a1 = { 7, 2, 70 }, a2 = { 9, 1, 90 };
	struct ws_ckpt_record_result rr;
	const char *sinks[] = { "s3-out" };
	bool found;

	EXPECT(ws_ckpt_create_sink_open_witness(f->c, "pipe-1", 3, &a1, sinks, 0, w), WS_ECONFIG,
	       WS_CKPT_INVALID_INPUT, "1 to");
	EXPECT(ws_ckpt_create_sink_open_witness(f->c, "pipe-1", 3, &a1, NULL, 0, w), WS_ECONFIG,
	       WS_CKPT_INVALID_INPUT, NONE);
	EXPECT(ws_ckpt_sink_open_witness(f->c, cur, &found), 0, WS_CKPT_OK, NONE);
	assert_false(found);
	EXPECT(ws_ckpt_create_sink_open_witness(f->c, "pipe-1", 3, &a1, sinks, 1, w), 0, WS_CKPT_OK, NONE);
	/* Undecided: the close is refused and the witness stays open. */
	EXPECT(ws_ckpt_clear_sink_open_witness(f->c, w), WS_EPRECOND, WS_CKPT_STATE_MISMATCH, "not terminal");
	EXPECT(ws_ckpt_sink_open_witness(f->c, cur, &found), 0, WS_CKPT_OK, NONE);
	assert_true(found && cur->state == WS_CKPT_WITNESS_OPEN);
	/* An earlier checkpoint's decision does not make it terminal. */
	EXPECT(ws_ckpt_record_outcome(f->c, 2, 6, WS_CKPT_SCOPE_LOCAL, NULL, NULL, WS_CKPT_ABORT, NULL, &rr), 0,
	       WS_CKPT_OK, NONE);
	EXPECT(ws_ckpt_clear_sink_open_witness(f->c, w), WS_EPRECOND, WS_CKPT_STATE_MISMATCH, "not terminal");
	EXPECT(ws_ckpt_record_outcome(f->c, 2, 7, WS_CKPT_SCOPE_LOCAL, NULL, NULL, WS_CKPT_ABORT, NULL, &rr), 0,
	       WS_CKPT_OK, NONE);
	EXPECT(ws_ckpt_clear_sink_open_witness(f->c, w), 0, WS_CKPT_OK, NONE);
	/* An attempt at an epoch below the head's can never decide: terminal. */
	EXPECT(ws_ckpt_create_sink_open_witness(f->c, "pipe-1", 3, &a2, sinks, 1, w), 0, WS_CKPT_OK, NONE);
	EXPECT(ws_ckpt_clear_sink_open_witness(f->c, w), 0, WS_CKPT_OK, NONE);
	EXPECT(ws_ckpt_sink_open_witness(f->c, cur, &found), 0, WS_CKPT_OK, NONE);
	assert_true(found && cur->state == WS_CKPT_WITNESS_CLOSED);
	free(w);
	free(cur);
}

/* checkpoints/removed/<tenant>: recorded once, only ever later, strictly decoded. */
static void test_removed_record(void **state)
{
	struct fx *f = *state;
	bool found = true;
	uint64_t after = 9;
	int err = 0;
	struct ws_ckpt *rd;

	EXPECT(ws_ckpt_removed(f->c, "users", &found, &after), 0, WS_CKPT_OK, NONE);
	assert_false(found);
	EXPECT(ws_ckpt_record_removed(f->c, "users", 5), 0, WS_CKPT_OK, NONE);
	EXPECT(ws_ckpt_removed(f->c, "users", &found, &after), 0, WS_CKPT_OK, NONE);
	assert_true(found);
	assert_int_equal(after, 5);
	/* The same or an earlier checkpoint: the record stays. */
	EXPECT(ws_ckpt_record_removed(f->c, "users", 5), 0, WS_CKPT_CONVERGED, NONE);
	EXPECT(ws_ckpt_record_removed(f->c, "users", 3), 0, WS_CKPT_CONVERGED, NONE);
	EXPECT(ws_ckpt_removed(f->c, "users", &found, &after), 0, WS_CKPT_OK, NONE);
	assert_int_equal(after, 5);
	/* A later one replaces it. */
	EXPECT(ws_ckpt_record_removed(f->c, "users", 8), 0, WS_CKPT_OK, NONE);
	EXPECT(ws_ckpt_removed(f->c, "users", &found, &after), 0, WS_CKPT_OK, NONE);
	assert_int_equal(after, 8);
	/* Not a tenant name; a reader never writes. */
	EXPECT(ws_ckpt_record_removed(f->c, "checkpoints", 1), WS_ECONFIG, WS_CKPT_INVALID_INPUT, NONE);
	EXPECT(ws_ckpt_record_removed(f->c, "a/b", 1), WS_ECONFIG, WS_CKPT_INVALID_INPUT, NONE);
	rd = ws_ckpt_open_reader(f->s, &err);
	assert_non_null(rd);
	EXPECT(ws_ckpt_record_removed(rd, "users", 9), WS_ECONFIG, WS_CKPT_INVALID_INPUT, "read-only");
	EXPECT(ws_ckpt_removed(rd, "users", &found, &after), 0, WS_CKPT_OK, NONE);
	assert_int_equal(after, 8);
	ws_ckpt_close(rd);
	/* Another tenant's record at this name, and a foreign one: named by key. */
	{
		char body[256];
		snprintf(body, sizeof(body), "{\"after_checkpoint\":\"8\",\"deployment\":\"%s\",\"format\":"
			 "\"walship.ckpt.removed.v1\",\"tenant\":\"orders\"}", f->dep);
		wt_put_str(f->s, "checkpoints/removed/users", body, NULL);
		EXPECT(ws_ckpt_removed(f->c, "users", &found, &after), WS_EFORMAT, WS_CKPT_MALFORMED,
		       "checkpoints/removed/users");
		snprintf(body, sizeof(body), "{\"after_checkpoint\":\"8\",\"deployment\":\"%s\",\"format\":"
			 "\"walship.ckpt.removed.v1\",\"tenant\":\"users\"}", "0123456789abcdef0123456789abcdef");
		wt_put_str(f->s, "checkpoints/removed/users", body, NULL);
		EXPECT(ws_ckpt_removed(f->c, "users", &found, &after), WS_EFORMAT, WS_CKPT_FOREIGN, NONE);
		EXPECT(ws_ckpt_record_removed(f->c, "users", 9), WS_EFORMAT, WS_CKPT_FOREIGN, NONE);
	}
}

/* ---- shared-store specifics ---------------------------------------------------------------------------- */

/* A store that ignores conditions: every put overwrites. */
struct lax_store {
	struct ws_store base;
	struct ws_store *inner;
};

static int lax_put(struct ws_store *s, const char *key, const struct iovec *iov, int iovcnt, enum ws_put_mode mode,
		   const struct ws_etag *expect, struct ws_etag *out)
{
	(void)mode;
	(void)expect;
	return ws_store_putv(((struct lax_store *)s)->inner, key, iov, iovcnt, WS_PUT_OVERWRITE, NULL, out);
}

static int lax_del(struct ws_store *s, const char *key)
{
	return ws_store_del(((struct lax_store *)s)->inner, key);
}

static void test_shared_refuses_unconditional(void **state)
{
	struct fx *f = *state;
	struct ws_store_ops ops = *f->s->ops;
	struct lax_store lax;
	int err = 0;

	ops.put = lax_put;
	ops.del = lax_del;
	memset(&lax, 0, sizeof(lax));
	lax.base.ops = &ops;
	lax.inner = f->s;
	snprintf(lax.base.url, sizeof(lax.base.url), "lax+%.900s", f->s->url);
	assert_null(ws_ckpt_open_shared(&lax.base, 0, &err));
	assert_int_equal(err, WS_ECONFIG);
	assert_int_equal(ws_ckpt_last_kind(), WS_CKPT_NO_CONDITIONAL);
	assert_non_null(strstr(ws_errmsg(), "conditional"));
}

static void test_shared_foreign_local_namespace(void **state)
{
	struct fx *f = *state;
	char *dir = wt_tmpdir("ckpt_cross");
	char dep[WS_CKPT_DEPLOYMENT_LEN + 1];
	int err = 0;
	struct ws_ckpt *l = ws_ckpt_open_local(dir, &err), *s;
	(void)f;
	assert_non_null(l);
	assert_int_equal(ws_ckpt_deployment_id(l, dep), 0);
	s = ws_ckpt_open_shared(ws_ckpt_store(l), 0, &err);
	assert_non_null(s);
	EXPECT(ws_ckpt_deployment_id(s, dep), WS_EFORMAT, WS_CKPT_FOREIGN, "checkpoints/deployment");
	ws_ckpt_close(s);
	ws_ckpt_close(l);
	wt_rmrf(dir);
	free(dir);
}

/* ---- fault sites --------------------------------------------------------------------------------------- */

static void test_fault_sites(void **state)
{
	struct fx *f = *state;
	struct ws_ckpt_record_result res;
	struct ws_ckpt_outcome oc;
	uint64_t id = 0;
	bool found;

	/* Before the decision CAS: nothing decided. */
	ws_fault_arm("ckpt.record.before_cas", 1, 0);
	EXPECT(ws_ckpt_record_outcome(f->c, 1, 1, WS_CKPT_SCOPE_LOCAL, NULL, NULL, WS_CKPT_ABORT, NULL, &res), -EIO,
	       WS_CKPT_IO, "ckpt.record.before_cas");
	ws_fault_disarm();
	EXPECT(ws_ckpt_latest_terminal(f->c, &oc, &found), 0, WS_CKPT_OK, NONE);
	assert_false(found);
	/* After it: decided, and the retry converges. */
	ws_fault_arm("ckpt.record.after_cas", 1, 0);
	EXPECT(ws_ckpt_record_outcome(f->c, 1, 1, WS_CKPT_SCOPE_LOCAL, NULL, NULL, WS_CKPT_ABORT, NULL, &res), -EIO,
	       WS_CKPT_IO, NONE);
	ws_fault_disarm();
	EXPECT(ws_ckpt_latest_terminal(f->c, &oc, &found), 0, WS_CKPT_OK, NONE);
	assert_true(found);
	EXPECT(ws_ckpt_record_outcome(f->c, 1, 1, WS_CKPT_SCOPE_LOCAL, NULL, NULL, WS_CKPT_ABORT, NULL, &res), 0,
	       WS_CKPT_CONVERGED, NONE);
	/* An allocation lost after its CAS is burned, never reissued. */
	ws_fault_arm("ckpt.alloc.after_cas", 1, 0);
	EXPECT(ws_ckpt_allocate_id_at_least(f->c, 0, &id), -EIO, WS_CKPT_IO, NONE);
	ws_fault_disarm();
	EXPECT(ws_ckpt_allocate_id_at_least(f->c, 0, &id), 0, WS_CKPT_OK, NONE);
	assert_true(id >= 2);
}

#define BOTH(t) cmocka_unit_test_setup_teardown(t, setup_local, teardown), \
		cmocka_unit_test_setup_teardown(t, setup_shared, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		BOTH(test_deployment),
		BOTH(test_allocate),
		BOTH(test_allocate_exhausted_at_max),
		cmocka_unit_test_setup_teardown(test_local_burned_ranges, setup_local, teardown),
		cmocka_unit_test_setup_teardown(test_local_lease, setup_local, teardown),
		cmocka_unit_test_setup_teardown(test_local_lease_not_a_link, setup_local, teardown),
		BOTH(test_reader),
		BOTH(test_committed_roundtrip),
		BOTH(test_committed_invalid_input),
		BOTH(test_committed_load_verifies),
		BOTH(test_committed_malformed_foreign),
		BOTH(test_seal),
		BOTH(test_delete),
		BOTH(test_record_outcome),
		BOTH(test_head_decisions_at_max),
		BOTH(test_epoch_and_generation_bounds),
		BOTH(test_committed_empty_object),
		BOTH(test_head_malformed),
		BOTH(test_inventory),
		BOTH(test_inventory_read),
		BOTH(test_list_candidates),
		BOTH(test_retention),
		BOTH(test_witness),
		BOTH(test_seed_retention_chain),
		BOTH(test_seed_record_commit_retry),
		BOTH(test_seed_seal_refuses_commit),
		BOTH(test_seed_witness),
		BOTH(test_removed_record),
		cmocka_unit_test_setup_teardown(test_shared_refuses_unconditional, setup_shared, teardown),
		cmocka_unit_test_setup_teardown(test_shared_foreign_local_namespace, setup_shared, teardown),
		BOTH(test_fault_sites),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
