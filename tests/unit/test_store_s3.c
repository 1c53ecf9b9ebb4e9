/*
 * s3:// store backend against a real radosgw (started by the ctest "s3"
 * fixture, found through $WS_S3_DIR/env): every operation, listing past one
 * page, create-once and compare-and-swap raced by 20 processes, the signer
 * (a wrong secret is refused and never leaked), and the faults object stores
 * produce (503 SlowDown, 429, 500, latency, resets, truncated bodies, a store
 * that ignores conditional writes) injected by tests/s3/faultproxy.py, and
 * put_many (concurrent PUTs, each with its own retries, WS_ETHROTTLED when
 * throttling outlasts them, create-once per request, uploads cut mid-body),
 * and payload_signing (UNSIGNED-PAYLOAD against radosgw; the header each
 * mode sends, seen by a one-connection capture server), the If-Match
 * spelling the probe picks (bare on radosgw's defaults; quoted on stores
 * made from it by faultproxy rewriting If-Match; a store that ignores
 * If-Match refused; a 412 on the object's own etag reported as the store's
 * defect, WS_EBADSTORE), deadlines that cut requests a server leaves
 * hanging (faultproxy hang and stall) and the HEAD that settles a 412
 * within its call's deadline, replies radosgw never sends (a body without
 * Content-Length cut short, a 206 shorter than asked, a PUT answered 201
 * or 204, a HEAD without Content-Length), and a create refused over other
 * bytes under its key (ws_store_created_same).
 *
 * Every URL here is walship's default but for the endpoint and what a test
 * sets on purpose: no etag_quotes, so radosgw runs with its defaults.
 *
 * Without $WS_S3_DIR the test FAILS: it must never pass without a server.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "storeutil.h"
#include "testutil.h"
#include "ws_clock.h"
#include "ws_fault.h"
#include "ws_hash.h"
#include "ws_logging.h"
#include "ws_store.h"

static char g_endpoint[256];
static char g_bucket[64];
static char g_secret[256];
static char *g_tmp;

/* ---- setup ---------------------------------------------------------------- */

static int load_s3(void)
{
	if (wt_s3_load_env("test_store_s3") != 0)
		return -1;
	snprintf(g_endpoint, sizeof(g_endpoint), "%s", getenv("WS_S3_ENDPOINT"));
	snprintf(g_secret, sizeof(g_secret), "%s", getenv("AWS_SECRET_ACCESS_KEY"));
	return 0;
}


/* "s3://BUCKET[/prefix]?endpoint=E[&extra]": walship's defaults otherwise, etag_quotes auto */
static void sink_url(char *out, size_t cap, const char *endpoint, const char *prefix, const char *extra)
{
	snprintf(out, cap, "s3://%s%s%s?endpoint=%s%s%s", g_bucket, prefix ? "/" : "",
		 prefix ? prefix : "", endpoint ? endpoint : g_endpoint, extra ? "&" : "", extra ? extra : "");
}

static struct ws_store *open_url(const char *url)
{
	int err = 0;
	struct ws_store *s = ws_store_open(url, &err);
	if (!s)
		fail_msg("open %s: %s (%s)", url, ws_errmsg(), ws_strerror(err));
	assert_int_equal(err, 0);
	return s;
}

static struct ws_store *open_sink(const char *prefix, const char *extra)
{
	char url[1024];
	sink_url(url, sizeof(url), NULL, prefix, extra);
	return open_url(url);
}

static int group_setup(void **state)
{
	char url[1024];
	int err = 0;
	struct ws_store *s;
	(void)state;

	snprintf(g_bucket, sizeof(g_bucket), "ws-ut-%ld-%lld", (long)getpid(), (long long)time(NULL));
	sink_url(url, sizeof(url), NULL, NULL, NULL);
	/* The bucket does not exist yet: open without the probe, create it. */
	s = ws_store_open_flags(url, WS_STORE_EXISTING, &err);
	if (!s) {
		fprintf(stderr, "test_store_s3: open %s: %s\n", url, ws_errmsg());
		return -1;
	}
	err = ws_store_s3_create_bucket(s);
	if (err == 0)
		err = ws_store_s3_create_bucket(s); /* an existing bucket of ours is success */
	ws_store_close(s);
	if (err) {
		fprintf(stderr, "test_store_s3: create bucket %s at %s: %s\n", g_bucket, g_endpoint, ws_errmsg());
		return -1;
	}
	g_tmp = wt_tmpdir("store_s3");
	return g_tmp ? 0 : -1;
}

static int group_teardown(void **state)
{
	(void)state;
	wt_rmrf(g_tmp);
	free(g_tmp);
	return 0;
}

/* ---- helpers ---------------------------------------------------------------- */

static void fill_random(uint8_t *p, size_t n, uint64_t seed)
{
	uint64_t st = seed | 1;
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(wt_rand(&st) >> 24);
}

/* Run fn(i, arg) in n forked children; each returns its exit code into codes[i]. */
typedef int (*child_fn)(int i, void *arg);

static void run_children(int n, child_fn fn, void *arg, int *codes)
{
	pid_t pids[64];
	assert_true(n <= 64);
	fflush(NULL);
	for (int i = 0; i < n; i++) {
		pids[i] = fork();
		assert_true(pids[i] >= 0);
		if (pids[i] == 0)
			_exit(fn(i, arg));
	}
	for (int i = 0; i < n; i++) {
		int st = 0;
		assert_int_equal(waitpid(pids[i], &st, 0), pids[i]);
		codes[i] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	}
}

/* A store for a child process (no cmocka there): NULL on failure, reported. */
static struct ws_store *child_open(const char *url)
{
	int err = 0;
	struct ws_store *s = ws_store_open(url, &err);
	if (!s)
		fprintf(stderr, "child %d: open: %s\n", (int)getpid(), ws_errmsg());
	return s;
}

/* ---- 1. every operation ------------------------------------------------------ */

static void test_roundtrip(void **state)
{
	struct ws_store *s = open_sink(NULL, NULL);
	struct ws_etag e1, e2, e3;
	struct ws_obj_info info;
	struct ws_buf b;
	uint8_t data[1000], data2[777];
	const char *key = "ops/a/obj-1.bin";
	int rc;
	(void)state;

	fill_random(data, sizeof(data), 1);
	fill_random(data2, sizeof(data2), 2);
	wt_put_bytes(s, key, data, sizeof(data), &e1);
	assert_true(e1.s[0] != '\0');
	assert_null(strchr(e1.s, '"'));

	/* Whole object, with info. */
	ws_buf_init(&b, 0);
	memset(&info, 0, sizeof(info));
	rc = ws_store_get(s, key, 0, UINT64_MAX, &b, &info);
	assert_int_equal(rc, 0);
	assert_int_equal(b.len, sizeof(data));
	assert_memory_equal(b.data, data, sizeof(data));
	assert_int_equal(info.size_bytes, sizeof(data));
	assert_string_equal(info.etag.s, e1.s);

	/* Head. */
	memset(&info, 0, sizeof(info));
	assert_int_equal(ws_store_head(s, key, &info), 0);
	assert_int_equal(info.size_bytes, sizeof(data));
	assert_string_equal(info.etag.s, e1.s);
	assert_true(info.mtime_ms > (int64_t)(time(NULL) - 3600) * 1000);

	/* Ranges: inside, at the edges, straddling the end, past the end. */
	static const struct {
		uint64_t off, len, want_len;
	} ranges[] = {
		{ 0, 10, 10 },        { 1, 1, 1 },        { 100, 50, 50 },        { 999, 1, 1 },
		{ 990, 100, 10 },     { 0, 1000, 1000 },  { 0, 5000, 1000 },      { 500, UINT64_MAX, 500 },
		{ 1000, 10, 0 },      { 1000, UINT64_MAX, 0 }, { 5000, 10, 0 },   { 123, 0, 0 },
	};
	for (size_t i = 0; i < sizeof(ranges) / sizeof(ranges[0]); i++) {
		b.len = 3; /* appended after what is there */
		memcpy(b.data, "abc", 3);
		memset(&info, 0, sizeof(info));
		rc = ws_store_get(s, key, ranges[i].off, ranges[i].len, &b, &info);
		if (rc)
			fail_msg("range %" PRIu64 "+%" PRIu64 ": %s", ranges[i].off, ranges[i].len, ws_errmsg());
		assert_int_equal(b.len - 3, ranges[i].want_len);
		assert_memory_equal(b.data, "abc", 3);
		if (ranges[i].want_len)
			assert_memory_equal(b.data + 3, data + ranges[i].off, ranges[i].want_len);
		assert_int_equal(info.size_bytes, sizeof(data));
		assert_string_equal(info.etag.s, e1.s);
	}

	/* Overwrite: new content, new etag. */
	wt_put_bytes(s, key, data2, sizeof(data2), &e2);
	assert_string_not_equal(e1.s, e2.s);
	b.len = 0;
	assert_int_equal(ws_store_get(s, key, 0, UINT64_MAX, &b, &info), 0);
	assert_int_equal(b.len, sizeof(data2));
	assert_memory_equal(b.data, data2, sizeof(data2));
	assert_string_equal(info.etag.s, e2.s);

	/* Create-once on an existing key, CAS with a stale etag: precondition. */
	uint64_t pf0 = s->stats.precond_failed;
	assert_int_equal(ws_store_put(s, key, "x", 1, WS_PUT_CREATE, NULL, NULL), WS_EPRECOND);
	assert_int_equal(ws_store_put(s, key, "x", 1, WS_PUT_CAS, &e1, NULL), WS_EPRECOND);
	assert_int_equal(s->stats.precond_failed, pf0 + 2);
	/* CAS with the current etag succeeds and changes it. */
	assert_int_equal(ws_store_put(s, key, "cas", 3, WS_PUT_CAS, &e2, &e3), 0);
	assert_string_not_equal(e3.s, e2.s);
	wt_assert_content(s, key, "cas");
	/* CAS on a missing key, create-once on a new key. */
	assert_int_equal(ws_store_put(s, "ops/a/none", "x", 1, WS_PUT_CAS, &e3, NULL), WS_EPRECOND);
	assert_int_equal(ws_store_put(s, "ops/a/new", "new", 3, WS_PUT_CREATE, NULL, &e1), 0);
	assert_true(e1.s[0] != '\0');
	wt_assert_content(s, "ops/a/new", "new");

	/* An empty object. */
	wt_put_bytes(s, "ops/empty", "", 0, NULL);
	b.len = 0;
	assert_int_equal(ws_store_get(s, "ops/empty", 0, UINT64_MAX, &b, &info), 0);
	assert_int_equal(b.len, 0);
	assert_int_equal(info.size_bytes, 0);
	assert_int_equal(ws_store_head(s, "ops/empty", &info), 0);
	assert_int_equal(info.size_bytes, 0);

	/* Delete; a missing key: get/head say WS_ENOTFOUND, del succeeds. */
	assert_int_equal(ws_store_del(s, key), 0);
	b.len = 0;
	rc = ws_store_get(s, key, 0, UINT64_MAX, &b, NULL);
	assert_int_equal(rc, WS_ENOTFOUND);
	assert_non_null(strstr(ws_errmsg(), key));
	assert_int_equal(b.len, 0);
	assert_int_equal(ws_store_get(s, key, 10, 10, &b, NULL), WS_ENOTFOUND);
	assert_int_equal(ws_store_head(s, key, &info), WS_ENOTFOUND);
	assert_int_equal(ws_store_del(s, key), 0);
	assert_int_equal(ws_store_del(s, "ops/never/existed"), 0);
	assert_int_equal(ws_store_get(s, "ops/never/existed", 0, UINT64_MAX, &b, NULL), WS_ENOTFOUND);

	/* Invalid keys: -EINVAL from every operation, nothing sent. */
	char longkey[WS_KEY_MAX + 8];
	memset(longkey, 'k', sizeof(longkey) - 1);
	longkey[sizeof(longkey) - 1] = '\0';
	static const char *const bad[] = { "", "/a", "a/", "a//b", ".", "..", "a/./b", "a/../b", "a b",
					   "a?b", "a%2fb", "a\\b", "\xc3\xa9", "a\nb", NULL };
	for (int i = 0; bad[i]; i++) {
		const char *k = bad[i];
		assert_int_equal(ws_store_put(s, k, "x", 1, WS_PUT_OVERWRITE, NULL, NULL), -EINVAL);
		assert_int_equal(ws_store_put(s, k, "x", 1, WS_PUT_CREATE, NULL, NULL), -EINVAL);
		assert_int_equal(ws_store_get(s, k, 0, UINT64_MAX, &b, NULL), -EINVAL);
		assert_int_equal(ws_store_head(s, k, &info), -EINVAL);
		assert_int_equal(ws_store_del(s, k), -EINVAL);
	}
	assert_int_equal(ws_store_put(s, longkey, "x", 1, WS_PUT_OVERWRITE, NULL, NULL), -EINVAL);
	assert_int_equal(ws_store_get(s, longkey, 0, UINT64_MAX, &b, NULL), -EINVAL);
	/* The longest valid key works. */
	longkey[WS_KEY_MAX - 1] = '\0';
	memcpy(longkey, "ops/", 4);
	wt_put_str(s, longkey, "long", NULL);
	wt_assert_content(s, longkey, "long");
	assert_int_equal(ws_store_del(s, longkey), 0);
	/* Keys with every allowed character class. */
	wt_put_str(s, "ops/A-z_0.9/x..y", "chars", NULL);
	wt_assert_content(s, "ops/A-z_0.9/x..y", "chars");

	assert_true(s->stats.puts >= 8);
	assert_true(s->stats.gets >= 10);
	assert_int_equal(s->stats.retries, 0);
	ws_buf_free(&b);
	ws_store_close(s);
}

/* ---- listing ---------------------------------------------------------------- */

#define LIST_N 1100
#define LIST_WRITERS 10

/* Objects "<prefix>/k%05d" = "<value_prefix><k>" for k < n, written by
 * LIST_WRITERS child processes (child i takes every LIST_WRITERS-th key). */
struct bulk {
	const char *prefix;
	const char *value_prefix;
	int n;
};

static int bulk_writer(int i, void *arg)
{
	const struct bulk *w = arg;
	char url[1024], key[64], val[64];
	struct ws_store *s;
	sink_url(url, sizeof(url), NULL, NULL, NULL);
	if (!(s = child_open(url)))
		return 2;
	for (int k = i; k < w->n; k += LIST_WRITERS) {
		snprintf(key, sizeof(key), "%s/k%05d", w->prefix, k);
		snprintf(val, sizeof(val), "%s%d", w->value_prefix, k);
		if (ws_store_put(s, key, val, strlen(val), WS_PUT_OVERWRITE, NULL, NULL) != 0) {
			fprintf(stderr, "writer %d: %s\n", i, ws_errmsg());
			ws_store_close(s);
			return 3;
		}
	}
	ws_store_close(s);
	return 0;
}

/* Page through prefix with max_keys; every key k[first..first+n) exactly once, in order. */
static void check_paging(struct ws_store *s, const char *prefix, unsigned max_keys, int first, int n)
{
	char token[WS_KEY_MAX] = "", want[64];
	int next = first, pages = 0;
	for (;;) {
		struct ws_list_page p;
		memset(&p, 0, sizeof(p));
		int rc = ws_store_list(s, prefix, token, max_keys, &p);
		if (rc)
			fail_msg("list %s after \"%s\" max %u: %s", prefix, token, max_keys, ws_errmsg());
		assert_true(p.count <= max_keys);
		for (size_t i = 0; i < p.count; i++) {
			snprintf(want, sizeof(want), "list/k%05d", next);
			if (next >= first + n || strcmp(p.keys[i], want) != 0)
				fail_msg("list max %u page %d: got \"%s\", want \"%s\"", max_keys, pages, p.keys[i],
					 next < first + n ? want : "(end)");
			next++;
		}
		pages++;
		if (!p.truncated) {
			ws_list_page_free(&p);
			break;
		}
		/* A truncated page is full and its token is its last key. */
		assert_int_equal(p.count, max_keys);
		assert_string_equal(p.next_token, p.keys[p.count - 1]);
		snprintf(token, sizeof(token), "%s", p.next_token);
		ws_list_page_free(&p);
		assert_true(pages < 2000);
	}
	assert_int_equal(next, first + n);
	/* Pages: ceil(n / max), or one more (empty) when the store could not know it ended. */
	int want_pages = n == 0 ? 1 : (n + (int)max_keys - 1) / (int)max_keys;
	assert_true(pages == want_pages || (n % (int)max_keys == 0 && pages == want_pages + 1));
}

/* DeleteObjects: 1,100 keys (two requests), one missing key, sizes in listings. */
#define DEL_N 1100

static void test_delete_many(void **state)
{
	int codes[LIST_WRITERS];
	char **keys = calloc(DEL_N + 1, sizeof(*keys));
	char token[WS_KEY_MAX] = "";
	size_t n = 0;
	struct ws_store *s = open_sink(NULL, NULL);
	(void)state;
	assert_non_null(keys);
	struct bulk w = { "delm", "value-", DEL_N };
	run_children(LIST_WRITERS, bulk_writer, &w, codes);
	for (int i = 0; i < LIST_WRITERS; i++)
		assert_int_equal(codes[i], 0);
	for (;;) {
		struct ws_list_page p;
		memset(&p, 0, sizeof(p));
		assert_int_equal(ws_store_list(s, "delm/", token, 1000, &p), 0);
		assert_non_null(p.sizes);
		for (size_t i = 0; i < p.count; i++) {
			char want[64];
			snprintf(want, sizeof(want), "value-%d", atoi(p.keys[i] + 6));
			assert_int_equal(p.sizes[i], strlen(want)); /* sizes come with the listing */
			keys[n++] = strdup(p.keys[i]);
		}
		bool more = p.truncated;
		snprintf(token, sizeof(token), "%s", p.next_token);
		ws_list_page_free(&p);
		if (!more)
			break;
	}
	assert_int_equal(n, DEL_N);
	keys[n++] = strdup("delm/never-existed");
	uint64_t before = s->stats.deletes;
	if (ws_store_del_many(s, (const char *const *)keys, n) != 0)
		fail_msg("del_many: %s", ws_errmsg());
	assert_int_equal(s->stats.deletes - before, n);
	struct ws_list_page p;
	memset(&p, 0, sizeof(p));
	assert_int_equal(ws_store_list(s, "delm/", NULL, 1000, &p), 0);
	assert_int_equal(p.count, 0); /* every one gone */
	ws_list_page_free(&p);
	/* A bad key is refused before any request. */
	const char *bad[] = { "delm/ok", "../escape" };
	assert_int_equal(ws_store_del_many(s, bad, 2), -EINVAL);
	for (size_t i = 0; i < n; i++)
		free(keys[i]);
	free(keys);
	ws_store_close(s);
}

/*
 * The conditional read of the watermark a follower polls: a GET with
 * If-None-Match answered 304 (1, no body) while the object is unchanged,
 * the new bytes and etag once it is replaced, 404 for a key not there.
 */
static void test_get_changed(void **state)
{
	struct ws_store *s = open_sink(NULL, NULL);
	struct ws_etag tag, e;
	struct ws_buf b;
	(void)state;

	memset(&tag, 0, sizeof(tag));
	ws_buf_init(&b, 0);
	assert_int_equal(ws_store_get_changed(s, "gc/wm", &tag, &b), WS_ENOTFOUND);
	wt_put_str(s, "gc/wm", "version-1", &e);
	assert_int_equal(ws_store_get_changed(s, "gc/wm", &tag, &b), 0);
	assert_int_equal(b.len, 9);
	assert_memory_equal(b.data, "version-1", 9);
	assert_string_equal(tag.s, e.s);
	uint64_t bytes = s->stats.bytes_got;
	assert_int_equal(ws_store_get_changed(s, "gc/wm", &tag, &b), 1);
	assert_int_equal(b.len, 9);
	assert_int_equal(s->stats.bytes_got, bytes);
	wt_put_str(s, "gc/wm", "version-2", &e);
	ws_buf_reset(&b);
	assert_int_equal(ws_store_get_changed(s, "gc/wm", &tag, &b), 0);
	assert_memory_equal(b.data, "version-2", 9);
	assert_string_equal(tag.s, e.s);
	assert_int_equal(ws_store_get_changed(s, "gc/wm", &tag, &b), 1);
	ws_buf_free(&b);
	ws_store_close(s);
}

static void test_list_paging(void **state)
{
	struct ws_store *s = open_sink(NULL, NULL);
	struct ws_list_page p;
	int codes[LIST_WRITERS];
	int64_t t0 = wt_now_ms();
	(void)state;

	struct bulk w = { "list", "v", LIST_N };
	run_children(LIST_WRITERS, bulk_writer, &w, codes);
	for (int i = 0; i < LIST_WRITERS; i++)
		assert_int_equal(codes[i], 0);
	/* Neighbours that a prefix match must not include. */
	wt_put_str(s, "lisu", "x", NULL);
	wt_put_str(s, "list-other/k00001", "x", NULL);
	wt_put_str(s, "lis/t", "x", NULL);
	print_message("  wrote %d objects with %d processes in %lld ms\n", LIST_N, LIST_WRITERS,
		      (long long)(wt_now_ms() - t0));

	check_paging(s, "list/", 1000, 0, LIST_N);
	check_paging(s, "list/", 333, 0, LIST_N);
	check_paging(s, "list/", 97, 0, LIST_N);
	check_paging(s, "list/k", 1000, 0, LIST_N);
	check_paging(s, "list/k00", 1000, 0, 1000); /* exactly one full page */
	check_paging(s, "list/k0109", 3, 1090, 10);
	check_paging(s, "list/k01", 1, 1000, 100);

	/* The first page at 1000 is truncated and ends at k00999. */
	memset(&p, 0, sizeof(p));
	assert_int_equal(ws_store_list(s, "list/", NULL, 1000, &p), 0);
	assert_int_equal(p.count, 1000);
	assert_true(p.truncated);
	assert_string_equal(p.next_token, "list/k00999");
	ws_list_page_free(&p);

	/* A token that is not a key: strictly after it. */
	memset(&p, 0, sizeof(p));
	assert_int_equal(ws_store_list(s, "list/", "list/k00500x", 2, &p), 0);
	assert_int_equal(p.count, 2);
	assert_string_equal(p.keys[0], "list/k00501");
	assert_string_equal(p.keys[1], "list/k00502");
	ws_list_page_free(&p);
	/* Past the last key: empty, not truncated. */
	memset(&p, 0, sizeof(p));
	assert_int_equal(ws_store_list(s, "list/", "list/k01099", 10, &p), 0);
	assert_int_equal(p.count, 0);
	assert_false(p.truncated);
	ws_list_page_free(&p);
	/* A prefix with nothing under it. */
	memset(&p, 0, sizeof(p));
	assert_int_equal(ws_store_list(s, "nothing/here/", NULL, 1000, &p), 0);
	assert_int_equal(p.count, 0);
	assert_false(p.truncated);
	ws_list_page_free(&p);
	/* "lis" sees all neighbours and the 1100, sorted. */
	memset(&p, 0, sizeof(p));
	assert_int_equal(ws_store_list(s, "lis", NULL, 2, &p), 0);
	assert_int_equal(p.count, 2);
	assert_string_equal(p.keys[0], "lis/t");
	assert_string_equal(p.keys[1], "list-other/k00001");
	assert_true(p.truncated);
	ws_list_page_free(&p);
	/* max_keys out of range. */
	memset(&p, 0, sizeof(p));
	assert_int_equal(ws_store_list(s, "list/", NULL, 0, &p), -EINVAL);
	memset(&p, 0, sizeof(p));
	assert_int_equal(ws_store_list(s, "list/", NULL, WS_LIST_PAGE_MAX + 1, &p), -EINVAL);
	ws_store_close(s);
}

/* A sink URL with a prefix: keys are stored under it and listed relative to it. */
static void test_prefix(void **state)
{
	struct ws_store *root = open_sink(NULL, NULL);
	struct ws_store *a = open_sink("some/prefix", NULL);
	struct ws_store *a2 = open_sink("some/prefix/", NULL);
	struct ws_store *other = open_sink("some/prefix2", NULL);
	struct ws_list_page p;
	char key[64];
	(void)state;

	for (int i = 0; i < 5; i++) {
		snprintf(key, sizeof(key), "x/%d", i);
		wt_put_str(a, key, key, NULL);
	}
	wt_put_str(a, "y", "y", NULL);
	wt_put_str(other, "x/9", "other", NULL);

	/* Stored under the prefix. */
	wt_assert_content(root, "some/prefix/x/3", "x/3");
	wt_assert_content(a2, "x/3", "x/3");
	wt_assert_content(other, "x/9", "other");
	int rc;
	char *v = wt_get_str(a, "x/9", &rc, NULL);
	assert_null(v);
	assert_int_equal(rc, WS_ENOTFOUND);

	/* Listed relative to it, paging with tokens relative to it too. */
	memset(&p, 0, sizeof(p));
	assert_int_equal(ws_store_list(a, "", NULL, 1000, &p), 0);
	assert_int_equal(p.count, 6);
	assert_false(p.truncated);
	for (int i = 0; i < 5; i++) {
		snprintf(key, sizeof(key), "x/%d", i);
		assert_string_equal(p.keys[i], key);
	}
	assert_string_equal(p.keys[5], "y");
	ws_list_page_free(&p);

	char token[WS_KEY_MAX] = "";
	int seen = 0;
	do {
		memset(&p, 0, sizeof(p));
		assert_int_equal(ws_store_list(a, "x/", token, 2, &p), 0);
		for (size_t i = 0; i < p.count; i++) {
			snprintf(key, sizeof(key), "x/%d", seen++);
			assert_string_equal(p.keys[i], key);
		}
		snprintf(token, sizeof(token), "%s", p.next_token);
		if (!p.truncated) {
			ws_list_page_free(&p);
			break;
		}
		ws_list_page_free(&p);
	} while (seen < 100);
	assert_int_equal(seen, 5);

	memset(&p, 0, sizeof(p));
	assert_int_equal(ws_store_list(root, "some/prefix/", NULL, 1000, &p), 0);
	assert_int_equal(p.count, 6);
	assert_string_equal(p.keys[0], "some/prefix/x/0");
	ws_list_page_free(&p);
	/* "some/prefix" must not see "some/prefix2". */
	memset(&p, 0, sizeof(p));
	assert_int_equal(ws_store_list(a, "x/", NULL, 1000, &p), 0);
	assert_int_equal(p.count, 5);
	ws_list_page_free(&p);

	assert_int_equal(ws_store_del(a, "y"), 0);
	assert_int_equal(ws_store_head(root, "some/prefix/y", NULL), WS_ENOTFOUND);
	ws_store_close(root);
	ws_store_close(a);
	ws_store_close(a2);
	ws_store_close(other);
}

/* ---- 2. races between processes ------------------------------------------------ */

#define RACERS 20
#define RACE_KEYS 5
#define CAS_INCREMENTS 5

struct race {
	int ready;                           /* children that opened their store */
	int result[RACERS][RACE_KEYS];       /* 0 won, 1 WS_EPRECOND, 2 other */
	int cas_attempts[RACERS];
};

static struct race *g_race;
static int g_go[2];

/* Open, report ready, block until the parent closes the go pipe. */
static struct ws_store *racer_start(void)
{
	char url[1024], c;
	struct ws_store *s;
	close(g_go[1]);
	sink_url(url, sizeof(url), NULL, NULL, NULL);
	s = child_open(url);
	__atomic_fetch_add(&g_race->ready, 1, __ATOMIC_SEQ_CST);
	while (read(g_go[0], &c, 1) < 0 && errno == EINTR)
		;
	return s;
}

static int create_racer(int i, void *arg)
{
	char key[64], val[64];
	(void)arg;
	struct ws_store *s = racer_start();
	if (!s)
		return 2;
	for (int k = 0; k < RACE_KEYS; k++) {
		snprintf(key, sizeof(key), "race/create-%d", k);
		snprintf(val, sizeof(val), "writer %d of key %d", i, k);
		int rc = ws_store_put(s, key, val, strlen(val), WS_PUT_CREATE, NULL, NULL);
		g_race->result[i][k] = rc == 0 ? 0 : rc == WS_EPRECOND ? 1 : 2;
		if (rc && rc != WS_EPRECOND)
			fprintf(stderr, "create racer %d: %s\n", i, ws_errmsg());
	}
	ws_store_close(s);
	return 0;
}

static int cas_racer(int i, void *arg)
{
	(void)arg;
	struct ws_store *s = racer_start();
	struct ws_buf b;
	int done = 0, attempts = 0, rc = 0;
	if (!s)
		return 2;
	ws_buf_init(&b, 4096);
	while (done < CAS_INCREMENTS && attempts < 10000) {
		struct ws_obj_info info;
		char val[32];
		b.len = 0;
		attempts++;
		rc = ws_store_get(s, "race/counter", 0, UINT64_MAX, &b, &info);
		if (rc || b.len == 0 || b.len >= sizeof(val)) {
			fprintf(stderr, "cas racer %d: get: %s\n", i, ws_errmsg());
			rc = 3;
			break;
		}
		memcpy(val, b.data, b.len);
		val[b.len] = '\0';
		snprintf(val, sizeof(val), "%ld", strtol(val, NULL, 10) + 1);
		rc = ws_store_put(s, "race/counter", val, strlen(val), WS_PUT_CAS, &info.etag, NULL);
		if (rc == 0)
			done++;
		else if (rc != WS_EPRECOND) {
			fprintf(stderr, "cas racer %d: put: %s\n", i, ws_errmsg());
			rc = 4;
			break;
		}
		rc = 0;
	}
	g_race->cas_attempts[i] = attempts;
	ws_buf_free(&b);
	ws_store_close(s);
	return rc ? rc : done == CAS_INCREMENTS ? 0 : 5;
}

static void race(child_fn fn, int *codes)
{
	g_race = mmap(NULL, sizeof(*g_race), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(g_race != MAP_FAILED);
	memset(g_race, 0, sizeof(*g_race));
	assert_int_equal(pipe(g_go), 0);
	pid_t pids[RACERS];
	fflush(NULL);
	for (int i = 0; i < RACERS; i++) {
		pids[i] = fork();
		assert_true(pids[i] >= 0);
		if (pids[i] == 0)
			_exit(fn(i, NULL));
	}
	close(g_go[0]);
	int64_t end = wt_now_ms() + 30000;
	while (__atomic_load_n(&g_race->ready, __ATOMIC_SEQ_CST) < RACERS && wt_now_ms() < end)
		wt_sleep_ms(5);
	close(g_go[1]); /* go */
	for (int i = 0; i < RACERS; i++) {
		int st = 0;
		assert_int_equal(waitpid(pids[i], &st, 0), pids[i]);
		codes[i] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	}
}

static void test_race_create(void **state)
{
	struct ws_store *s = open_sink(NULL, NULL);
	int codes[RACERS];
	char want[64], key[64];
	(void)state;

	race(create_racer, codes);
	for (int i = 0; i < RACERS; i++)
		assert_int_equal(codes[i], 0);
	for (int k = 0; k < RACE_KEYS; k++) {
		int winners = 0, winner = -1, lost = 0;
		for (int i = 0; i < RACERS; i++) {
			if (g_race->result[i][k] == 0) {
				winners++;
				winner = i;
			} else if (g_race->result[i][k] == 1) {
				lost++;
			}
		}
		if (winners != 1 || lost != RACERS - 1)
			fail_msg("key %d: %d winners, %d WS_EPRECOND, %d errors", k, winners, lost,
				 RACERS - winners - lost);
		snprintf(key, sizeof(key), "race/create-%d", k);
		snprintf(want, sizeof(want), "writer %d of key %d", winner, k);
		wt_assert_content(s, key, want);
	}
	munmap(g_race, sizeof(*g_race));
	ws_store_close(s);
}

/*
 * A create-once refused as already there is taken for the same bytes only
 * when the object there is as long as the write (ws_store_created_same):
 * radosgw holding other bytes under the key (put first, unconditionally)
 * answers the create 412 and the store says WS_EPRECOND, as it must for
 * the checkpoint store's races; the content-keyed callers then refuse it.
 */
static void test_create_over_other_bytes(void **state)
{
	struct ws_store *s = open_sink("created-same", NULL);
	struct iovec six = { "abcdef", 6 }, three = { "abc", 3 }, same_len = { "abd", 3 };
	struct iovec split[2] = { { "ab", 2 }, { "c", 1 } };
	(void)state;

	assert_int_equal(ws_store_put(s, "k/obj", "abc", 3, WS_PUT_OVERWRITE, NULL, NULL), 0);
	assert_int_equal(ws_store_put(s, "k/obj", "abcdef", 6, WS_PUT_CREATE, NULL, NULL), WS_EPRECOND);
	assert_int_equal(ws_store_created_same(s, "k/obj", &six, 1), WS_ECORRUPT);
	assert_non_null(strstr(ws_errmsg(), "k/obj"));
	assert_non_null(strstr(ws_errmsg(), "3 bytes"));
	/* As long, other bytes: read back and compared. */
	assert_int_equal(ws_store_created_same(s, "k/obj", &same_len, 1), WS_ECORRUPT);
	assert_non_null(strstr(ws_errmsg(), "other bytes"));
	assert_int_equal(ws_store_created_same(s, "k/obj", &three, 1), 0);
	assert_int_equal(ws_store_created_same(s, "k/obj", split, 2), 0);
	assert_int_equal(ws_store_created_same(s, "k/missing", &three, 1), -EIO);
	assert_int_equal(ws_store_del(s, "k/obj"), 0);
	ws_store_close(s);
}

static void test_race_cas(void **state)
{
	struct ws_store *s = open_sink(NULL, NULL);
	int codes[RACERS], attempts = 0;
	char want[32];
	(void)state;

	wt_put_str(s, "race/counter", "0", NULL);
	int64_t t0 = wt_now_ms();
	race(cas_racer, codes);
	for (int i = 0; i < RACERS; i++) {
		assert_int_equal(codes[i], 0);
		attempts += g_race->cas_attempts[i];
	}
	print_message("  %d CAS increments by %d processes: %d attempts, %lld ms\n", RACERS * CAS_INCREMENTS,
		      RACERS, attempts, (long long)(wt_now_ms() - t0));
	snprintf(want, sizeof(want), "%d", RACERS * CAS_INCREMENTS);
	wt_assert_content(s, "race/counter", want);
	/* Contention really happened (else the race proved nothing). */
	assert_true(attempts > RACERS * CAS_INCREMENTS);
	munmap(g_race, sizeof(*g_race));
	ws_store_close(s);
}

/* ---- 3. the signer ------------------------------------------------------------ */

struct logcap {
	char text[16384];
	size_t len;
	int warnings;
};

static void log_capture(enum ws_log_level level, const char *msg, void *arg)
{
	struct logcap *c = arg;
	size_t n = strlen(msg);
	if (level <= WS_LOG_WARN)
		c->warnings++;
	if (c->len + n + 2 < sizeof(c->text)) {
		memcpy(c->text + c->len, msg, n);
		c->len += n;
		c->text[c->len++] = '\n';
		c->text[c->len] = '\0';
	}
}

static void assert_no_secret(const char *text, const char *secret)
{
	if (strstr(text, secret) || strstr(text, "Signature=") || strstr(text, g_secret))
		fail_msg("secret material in: %s", text);
}

static void test_wrong_secret(void **state)
{
	const char *wrong = "WRONGsecretWRONGsecretWRONGsecret0123456";
	struct logcap cap;
	char url[1024];
	int err = 0;
	struct ws_store *s;
	(void)state;

	memset(&cap, 0, sizeof(cap));
	ws_log_set_sink(log_capture, &cap);
	ws_log_set_level(WS_LOG_DEBUG);
	assert_int_equal(setenv("AWS_SECRET_ACCESS_KEY", wrong, 1), 0);
	sink_url(url, sizeof(url), NULL, NULL, NULL);

	/* The open's probe is refused. */
	s = ws_store_open(url, &err);
	const char *msg = ws_errmsg();
	print_message("  wrong secret: %s\n", msg);
	assert_null(s);
	assert_int_equal(err, -EACCES);
	assert_non_null(strstr(msg, "403"));
	assert_no_secret(msg, wrong);

	/* Without the probe: the first request is refused the same way. */
	s = ws_store_open_flags(url, WS_STORE_EXISTING, &err);
	assert_non_null(s);
	struct ws_buf b;
	ws_buf_init(&b, 0);
	assert_int_equal(ws_store_get(s, "ops/a/new", 0, UINT64_MAX, &b, NULL), -EACCES);
	assert_no_secret(ws_errmsg(), wrong);
	assert_int_equal(ws_store_put(s, "ops/denied", "x", 1, WS_PUT_OVERWRITE, NULL, NULL), -EACCES);
	assert_no_secret(ws_errmsg(), wrong);
	assert_int_equal(s->stats.retries, 0); /* 403 is never retried */
	ws_buf_free(&b);
	ws_store_close(s);

	/* An unknown access key. */
	char *saved_id = strdup(getenv("AWS_ACCESS_KEY_ID"));
	assert_int_equal(setenv("AWS_SECRET_ACCESS_KEY", g_secret, 1), 0);
	assert_int_equal(setenv("AWS_ACCESS_KEY_ID", "NOSUCHACCESSKEY00000", 1), 0);
	s = ws_store_open(url, &err);
	assert_null(s);
	assert_int_equal(err, -EACCES);
	assert_no_secret(ws_errmsg(), wrong);
	assert_int_equal(setenv("AWS_ACCESS_KEY_ID", saved_id, 1), 0);
	free(saved_id);

	ws_log_set_level(WS_LOG_WARN);
	ws_log_set_sink(NULL, NULL);
	assert_no_secret(cap.text, wrong);

	/* Right credentials again: it opens, and nothing was written by the refused ones. */
	s = open_url(url);
	assert_int_equal(ws_store_head(s, "ops/denied", NULL), WS_ENOTFOUND);
	ws_store_close(s);
}

/* ---- 4. faults through the proxy ------------------------------------------------ */

struct proxy {
	pid_t pid;
	char endpoint[128];
	char control[512], stats[512], portfile[512];
};
static struct proxy g_px;

static void proxy_control(const char *json)
{
	char tmp[600];
	snprintf(tmp, sizeof(tmp), "%s.tmp", g_px.control);
	assert_int_equal(wt_write_file(tmp, json, strlen(json)), 0);
	assert_int_equal(rename(tmp, g_px.control), 0);
}

/* Requests the proxy has faulted so far. */
static long proxy_faulted(void)
{
	size_t n;
	uint8_t *d = wt_read_file(g_px.stats, &n);
	long v = -1;
	if (!d)
		return 0;
	char *txt = calloc(1, n + 1);
	assert_non_null(txt);
	memcpy(txt, d, n);
	char *p = strstr(txt, "\"faulted\":");
	if (p)
		v = strtol(p + 10, NULL, 10);
	free(txt);
	free(d);
	assert_true(v >= 0);
	return v;
}

/* The x-amz-date of the proxy's last request as seconds since the epoch
 * (back = 0), or of the one back requests before it. */
static int64_t proxy_amz_date(int back)
{
	size_t n;
	uint8_t *d = wt_read_file(g_px.stats, &n);
	char *txt, *p, *q;
	int64_t v = -1;
	assert_non_null(d);
	txt = calloc(1, n + 1);
	assert_non_null(txt);
	memcpy(txt, d, n);
	free(d);
	p = strstr(txt, "\"amz_dates\":");
	assert_non_null(p);
	q = strchr(p, ']');
	assert_non_null(q);
	/* The entries are "YYYYMMDDTHHMMSSZ", last one last. */
	for (int k = 0; k <= back; k++) {
		while (q > p && *q != 'Z')
			q--;
		assert_true(q - p > 16);
		if (k < back)
			q--;
	}
	struct tm tm;
	memset(&tm, 0, sizeof(tm));
	if (sscanf(q - 15, "%4d%2d%2dT%2d%2d%2d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min,
		   &tm.tm_sec) == 6) {
		tm.tm_year -= 1900;
		tm.tm_mon -= 1;
		v = (int64_t)timegm(&tm);
	}
	free(txt);
	assert_true(v > 0);
	return v;
}

static int proxy_start(void **state)
{
	const char *fp = getenv("WS_FAULTPROXY");
	char upstream[256];
	(void)state;
	if (!fp || !*fp) {
		fprintf(stderr, "test_store_s3: WS_FAULTPROXY is not set (path to tests/s3/faultproxy.py)\n");
		return -1;
	}
	memset(&g_px, 0, sizeof(g_px));
	snprintf(upstream, sizeof(upstream), "%s", g_endpoint + strlen("http://"));
	snprintf(g_px.control, sizeof(g_px.control), "%s/control.json", g_tmp);
	snprintf(g_px.stats, sizeof(g_px.stats), "%s/stats.json", g_tmp);
	snprintf(g_px.portfile, sizeof(g_px.portfile), "%s/port", g_tmp);
	unlink(g_px.portfile);
	unlink(g_px.stats);
	if (wt_write_file(g_px.control, "{\"mode\": \"pass\"}", 16) != 0)
		return -1;
	fflush(NULL);
	g_px.pid = fork();
	if (g_px.pid < 0)
		return -1;
	if (g_px.pid == 0) {
		execlp("python3", "python3", fp, "--upstream", upstream, "--port-file", g_px.portfile, "--control",
		       g_px.control, "--stats", g_px.stats, (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 1000; i++) {
		size_t n;
		uint8_t *d = wt_read_file(g_px.portfile, &n);
		if (d) {
			snprintf(g_px.endpoint, sizeof(g_px.endpoint), "http://127.0.0.1:%.*s", (int)n, (char *)d);
			free(d);
			return 0;
		}
		int st;
		if (waitpid(g_px.pid, &st, WNOHANG) == g_px.pid) {
			fprintf(stderr, "test_store_s3: faultproxy exited (status %d)\n", st);
			g_px.pid = 0;
			return -1;
		}
		wt_sleep_ms(10);
	}
	fprintf(stderr, "test_store_s3: faultproxy wrote no port file in 10 s\n");
	return -1;
}

static int proxy_stop(void **state)
{
	(void)state;
	if (g_px.pid > 0) {
		kill(g_px.pid, SIGTERM);
		waitpid(g_px.pid, NULL, 0);
		g_px.pid = 0;
	}
	return 0;
}

/* The fault tests check each request's own retries: the process-wide
 * write pacer (which a throttled answer turns on for the endpoint and
 * bucket) is off for them unless extra says pace=1. */
static struct ws_store *open_proxied(const char *extra)
{
	char url[1024], q[512];
	snprintf(q, sizeof(q), "%s%s%s", extra && strstr(extra, "pace=") ? "" : "pace=0", extra && !strstr(extra, "pace=") ? "&" : "",
		 extra ? extra : "");
	sink_url(url, sizeof(url), g_px.endpoint, NULL, q);
	return open_url(url);
}

struct snap {
	uint64_t retries, throttle, resends;
	long faulted;
};

static struct snap snap(struct ws_store *s)
{
	struct snap x = { s->stats.retries, s->stats.throttle_retries, s->stats.resends, proxy_faulted() };
	return x;
}

/* stats and proxy deltas since a, each within [min, max] */
static void assert_delta_range(struct ws_store *s, struct snap a, uint64_t rmin, uint64_t rmax, uint64_t throttle,
			       long fmin, long fmax)
{
	struct snap b = snap(s);
	uint64_t r = b.retries - a.retries;
	long f = b.faulted - a.faulted;
	if (r < rmin || r > rmax || b.throttle - a.throttle != throttle || f < fmin || f > fmax)
		fail_msg("retries %" PRIu64 " (want %" PRIu64 "..%" PRIu64 "), throttle_retries %" PRIu64
			 " (want %" PRIu64 "), proxy faulted %ld (want %ld..%ld)",
			 r, rmin, rmax, b.throttle - a.throttle, throttle, f, fmin, fmax);
}

static void assert_delta(struct ws_store *s, struct snap a, uint64_t retries, uint64_t throttle, long faulted)
{
	assert_delta_range(s, a, retries, retries, throttle, faulted, faulted);
}

/*
 * A reset PUT: libcurl resends a request on its own when a reused connection
 * dies before any reply (libcurl 7.88 cannot be told not to), so the store
 * may see no failure and count no retry; net/ counts that resend instead.
 * Either way each reset is answered exactly once: a retry or a resend.
 */
static void assert_delta_put_reset(struct ws_store *s, struct snap a)
{
	assert_delta_range(s, a, 0, 1, 0, 1, 1);
	assert_int_equal((s->stats.retries - a.retries) + (s->stats.resends - a.resends), 1);
}

static void test_fault_throttling(void **state)
{
	struct ws_store *s = open_proxied(NULL);
	struct snap a;
	(void)state;

	/* 503 SlowDown three times, then the PUT goes through. */
	proxy_control("{\"mode\": \"slowdown\", \"count\": 3, \"methods\": [\"PUT\"]}");
	a = snap(s);
	wt_put_str(s, "fault/slowdown", "after three SlowDowns", NULL);
	assert_delta(s, a, 3, 3, 3);
	proxy_control("{\"mode\": \"pass\"}");
	wt_assert_content(s, "fault/slowdown", "after three SlowDowns");

	/* 429 twice on GET. */
	proxy_control("{\"mode\": \"throttle\", \"count\": 2, \"methods\": [\"GET\"]}");
	a = snap(s);
	wt_assert_content(s, "fault/slowdown", "after three SlowDowns");
	assert_delta(s, a, 2, 2, 2);

	/* 500 twice: retried, but not throttling. */
	proxy_control("{\"mode\": \"error500\", \"count\": 2, \"methods\": [\"PUT\"]}");
	a = snap(s);
	wt_put_str(s, "fault/err500", "after two 500s", NULL);
	assert_delta(s, a, 2, 0, 2);
	proxy_control("{\"mode\": \"error500\", \"count\": 2, \"methods\": [\"HEAD\"]}");
	a = snap(s);
	struct ws_obj_info info;
	assert_int_equal(ws_store_head(s, "fault/err500", &info), 0);
	assert_int_equal(info.size_bytes, strlen("after two 500s"));
	assert_delta(s, a, 2, 0, 2);
	proxy_control("{\"mode\": \"pass\"}");
	wt_assert_content(s, "fault/err500", "after two 500s");

	/* Retry-After: 1 is honoured. */
	proxy_control("{\"mode\": \"slowdown\", \"count\": 1, \"methods\": [\"GET\"], \"retry_after\": 1}");
	a = snap(s);
	int64_t t0 = wt_now_ms();
	wt_assert_content(s, "fault/err500", "after two 500s");
	assert_true(wt_now_ms() - t0 >= 990);
	assert_delta(s, a, 1, 1, 1);

	/* Throttled listing and delete. */
	proxy_control("{\"mode\": \"slowdown\", \"count\": 2, \"methods\": [\"GET\", \"DELETE\"]}");
	a = snap(s);
	struct ws_list_page p;
	memset(&p, 0, sizeof(p));
	assert_int_equal(ws_store_list(s, "fault/", NULL, 10, &p), 0);
	assert_int_equal(p.count, 2);
	ws_list_page_free(&p);
	assert_int_equal(ws_store_del(s, "fault/err500"), 0);
	assert_delta(s, a, 2, 2, 2);
	proxy_control("{\"mode\": \"slowdown\", \"count\": 1, \"methods\": [\"DELETE\"]}");
	assert_int_equal(ws_store_del(s, "fault/err500"), 0);
	proxy_control("{\"mode\": \"pass\"}");
	assert_int_equal(ws_store_head(s, "fault/err500", NULL), WS_ENOTFOUND);
	ws_store_close(s);
}

/*
 * A handle whose owner asked not to wait out throttling on it
 * (throttle_fail_fast: an engine shard's own schedule): a 503 SlowDown with
 * Retry-After: 1 fails the PUT at once as throttled, nothing written, with
 * throttle_until_ms about a second on; a 500 is still retried within the
 * call (not throttling); the same PUT afterwards goes through.
 */
static void test_fault_throttle_fail_fast(void **state)
{
	struct ws_store *s = open_proxied(NULL);
	struct snap a;
	int64_t t0;
	uint64_t m0;
	int rc;
	(void)state;

	s->throttle_fail_fast = true;
	proxy_control("{\"mode\": \"slowdown\", \"count\": 1, \"methods\": [\"PUT\"], \"retry_after\": 1}");
	a = snap(s);
	t0 = wt_now_ms();
	m0 = ws_mono_ms();
	rc = ws_store_put(s, "fault/ff", "x", 1, WS_PUT_CREATE, NULL, NULL);
	assert_int_equal(rc, WS_ETHROTTLED);
	assert_true(wt_now_ms() - t0 < 900); /* not waited out here */
	assert_non_null(strstr(ws_errmsg(), "throttled (HTTP 503)"));
	assert_true(s->throttle_until_ms >= m0 + 990 && s->throttle_until_ms <= ws_mono_ms() + 1100);
	assert_delta(s, a, 1, 1, 1);
	proxy_control("{\"mode\": \"pass\"}");
	assert_int_equal(ws_store_head(s, "fault/ff", NULL), WS_ENOTFOUND);
	/* Not throttling: retried within the call as always. */
	proxy_control("{\"mode\": \"error500\", \"count\": 2, \"methods\": [\"PUT\"]}");
	a = snap(s);
	wt_put_str(s, "fault/ff", "after two 500s", NULL);
	assert_delta(s, a, 2, 0, 2);
	proxy_control("{\"mode\": \"pass\"}");
	wt_assert_content(s, "fault/ff", "after two 500s");
	assert_int_equal(ws_store_del(s, "fault/ff"), 0);
	s->throttle_fail_fast = false;
	ws_store_close(s);
}

static void test_fault_latency(void **state)
{
	struct ws_store *s = open_proxied(NULL);
	struct snap a;
	(void)state;
	wt_put_str(s, "fault/latency", "slow but fine", NULL);
	proxy_control("{\"mode\": \"latency\", \"latency_ms\": 200}");
	a = snap(s);
	int64_t t0 = wt_now_ms();
	wt_assert_content(s, "fault/latency", "slow but fine");
	wt_put_str(s, "fault/latency", "slow but fine 2", NULL);
	int64_t dt = wt_now_ms() - t0;
	proxy_control("{\"mode\": \"pass\"}");
	assert_true(dt >= 400);
	assert_true(dt < 5000);
	assert_delta(s, a, 0, 0, 2);
	wt_assert_content(s, "fault/latency", "slow but fine 2");
	ws_store_close(s);
}

static void test_fault_get_reset_truncate(void **state)
{
	struct ws_store *s = open_proxied(NULL);
	size_t n = 256 << 10;
	uint8_t *data = malloc(n);
	struct ws_buf b;
	struct snap a;
	(void)state;

	assert_non_null(data);
	fill_random(data, n, 7);
	wt_put_bytes(s, "fault/big", data, n, NULL);
	ws_buf_init(&b, 0);
	static const char *const faults[] = {
		"{\"mode\": \"reset\", \"count\": 1, \"methods\": [\"GET\"]}",
		"{\"mode\": \"truncate\", \"count\": 1, \"methods\": [\"GET\"]}",
		"{\"mode\": \"reset\", \"count\": 2, \"methods\": [\"GET\"]}",
		"{\"mode\": \"truncate\", \"count\": 3, \"methods\": [\"GET\"]}",
	};
	for (size_t i = 0; i < sizeof(faults) / sizeof(faults[0]); i++) {
		long count = strtol(strstr(faults[i], "count") + 8, NULL, 10);
		proxy_control(faults[i]);
		a = snap(s);
		b.len = 0;
		int rc = ws_store_get(s, "fault/big", 0, UINT64_MAX, &b, NULL);
		if (rc)
			fail_msg("%s: %s", faults[i], ws_errmsg());
		assert_int_equal(b.len, n);
		assert_memory_equal(b.data, data, n);
		assert_delta(s, a, (uint64_t)count, 0, count);
		/* A range GET through the same fault. */
		proxy_control("{\"mode\": \"pass\"}");
		proxy_control(faults[i]);
		a = snap(s);
		b.len = 0;
		rc = ws_store_get(s, "fault/big", 1000, 100000, &b, NULL);
		if (rc)
			fail_msg("range %s: %s", faults[i], ws_errmsg());
		assert_int_equal(b.len, 100000);
		assert_memory_equal(b.data, data + 1000, 100000);
		assert_delta(s, a, (uint64_t)count, 0, count);
		proxy_control("{\"mode\": \"pass\"}");
	}
	/* A reset list response. */
	proxy_control("{\"mode\": \"truncate\", \"count\": 1, \"methods\": [\"GET\"]}");
	a = snap(s);
	struct ws_list_page p;
	memset(&p, 0, sizeof(p));
	assert_int_equal(ws_store_list(s, "fault/", NULL, 10, &p), 0);
	assert_true(p.count >= 1);
	ws_list_page_free(&p);
	assert_delta(s, a, 1, 0, 1);
	proxy_control("{\"mode\": \"pass\"}");
	ws_buf_free(&b);
	free(data);
	ws_store_close(s);
}

/* The server applied the PUT, the client never heard: a retried conditional
 * PUT gets 412 and must recognise its own write by the attempt token. */
static void test_fault_put_reset(void **state)
{
	struct ws_store *s = open_proxied(NULL);
	struct ws_store *direct = open_sink(NULL, NULL);
	struct ws_etag e, e2;
	struct ws_obj_info info;
	struct snap a;
	int rc;
	(void)state;

	/* Create-once: ours. */
	proxy_control("{\"mode\": \"reset\", \"count\": 1, \"methods\": [\"PUT\"]}");
	a = snap(s);
	uint64_t pf0 = s->stats.precond_failed;
	memset(&e, 0, sizeof(e));
	rc = ws_store_put(s, "fault/create-reset", "mine", 4, WS_PUT_CREATE, NULL, &e);
	if (rc)
		fail_msg("create-once after a reset: %s (%s)", ws_errmsg(), ws_strerror(rc));
	assert_delta_put_reset(s, a);
	assert_int_equal(s->stats.precond_failed, pf0);
	proxy_control("{\"mode\": \"pass\"}");
	wt_assert_content(direct, "fault/create-reset", "mine");
	assert_int_equal(ws_store_head(direct, "fault/create-reset", &info), 0);
	assert_string_equal(e.s, info.etag.s);

	/* Create-once: someone else's key stays theirs. */
	wt_put_str(direct, "fault/create-theirs", "theirs", NULL);
	proxy_control("{\"mode\": \"reset\", \"count\": 1, \"methods\": [\"PUT\"]}");
	a = snap(s);
	rc = ws_store_put(s, "fault/create-theirs", "mine", 4, WS_PUT_CREATE, NULL, NULL);
	assert_int_equal(rc, WS_EPRECOND);
	assert_delta_put_reset(s, a);
	proxy_control("{\"mode\": \"pass\"}");
	wt_assert_content(direct, "fault/create-theirs", "theirs");

	/* Compare-and-swap: ours. */
	assert_int_equal(ws_store_head(s, "fault/create-reset", &info), 0);
	proxy_control("{\"mode\": \"reset\", \"count\": 1, \"methods\": [\"PUT\"]}");
	a = snap(s);
	rc = ws_store_put(s, "fault/create-reset", "mine 2", 6, WS_PUT_CAS, &info.etag, &e2);
	if (rc)
		fail_msg("CAS after a reset: %s (%s)", ws_errmsg(), ws_strerror(rc));
	assert_delta_put_reset(s, a);
	proxy_control("{\"mode\": \"pass\"}");
	wt_assert_content(direct, "fault/create-reset", "mine 2");
	assert_int_equal(ws_store_head(direct, "fault/create-reset", &info), 0);
	assert_string_equal(e2.s, info.etag.s);

	/* Compare-and-swap: someone else changed it in between. */
	struct ws_etag stale = info.etag;
	wt_put_str(direct, "fault/create-reset", "theirs 3", NULL);
	proxy_control("{\"mode\": \"reset\", \"count\": 1, \"methods\": [\"PUT\"]}");
	a = snap(s);
	rc = ws_store_put(s, "fault/create-reset", "mine 3", 6, WS_PUT_CAS, &stale, NULL);
	assert_int_equal(rc, WS_EPRECOND);
	assert_delta_put_reset(s, a);
	proxy_control("{\"mode\": \"pass\"}");
	wt_assert_content(direct, "fault/create-reset", "theirs 3");

	/* A plain overwrite reset: retried, applied once, content exact. */
	proxy_control("{\"mode\": \"reset\", \"count\": 1, \"methods\": [\"PUT\"]}");
	a = snap(s);
	wt_put_str(s, "fault/overwrite-reset", "overwritten", NULL);
	assert_delta_put_reset(s, a);
	proxy_control("{\"mode\": \"pass\"}");
	wt_assert_content(direct, "fault/overwrite-reset", "overwritten");
	ws_store_close(direct);
	ws_store_close(s);
}

/*
 * A create refused as already there (412) is taken as durable only when
 * the store shows the object: a store that says 412 over nothing (a stale
 * index; faultproxy phantom_exists, radosgw cannot be made to) would
 * otherwise have walship name a batch or manifest that is not stored in an
 * acknowledged watermark. And a PUT whose reply lost its ETag (a proxy
 * stripping it) still gives its caller the etag its next compare-and-swap
 * needs, read back while the object is this write's.
 */
static void test_fault_phantom_and_no_etag(void **state)
{
	struct ws_store *s = open_proxied(NULL);
	struct ws_store *direct = open_sink(NULL, NULL);
	struct ws_obj_info info;
	struct ws_etag e, e2;
	int rc;
	(void)state;

	proxy_control("{\"mode\": \"phantom_exists\", \"count\": 1, \"methods\": [\"PUT\"]}");
	rc = ws_store_put(s, "fault/phantom", "mine", 4, WS_PUT_CREATE, NULL, NULL);
	print_message("  %s\n", ws_errmsg());
	assert_int_not_equal(rc, 0);
	assert_int_not_equal(rc, WS_EPRECOND);
	assert_true(ws_err_transient(rc));
	assert_non_null(strstr(ws_errmsg(), "fault/phantom"));
	assert_non_null(strstr(ws_errmsg(), "no such object"));
	assert_int_equal(ws_store_head(direct, "fault/phantom", &info), WS_ENOTFOUND);
	/* Tried again (the caller's retry), it is written. */
	proxy_control("{\"mode\": \"pass\"}");
	assert_int_equal(ws_store_put(s, "fault/phantom", "mine", 4, WS_PUT_CREATE, NULL, NULL), 0);
	wt_assert_content(direct, "fault/phantom", "mine");

	/* No ETag in the reply: the etag comes from the object, and the next
	 * compare-and-swap with it goes through. */
	proxy_control("{\"mode\": \"strip_etag\", \"count\": 2, \"methods\": [\"PUT\"]}");
	memset(&e, 0, sizeof(e));
	assert_int_equal(ws_store_put(s, "fault/noetag", "one", 3, WS_PUT_CREATE, NULL, &e), 0);
	assert_int_equal(ws_store_head(direct, "fault/noetag", &info), 0);
	assert_true(e.s[0] != '\0');
	assert_string_equal(e.s, info.etag.s);
	memset(&e2, 0, sizeof(e2));
	rc = ws_store_put(s, "fault/noetag", "two", 3, WS_PUT_CAS, &e, &e2);
	if (rc)
		fail_msg("CAS with the etag read back: %s (%s)", ws_errmsg(), ws_strerror(rc));
	proxy_control("{\"mode\": \"pass\"}");
	wt_assert_content(direct, "fault/noetag", "two");
	assert_int_equal(ws_store_head(direct, "fault/noetag", &info), 0);
	assert_string_equal(e2.s, info.etag.s);
	ws_store_close(direct);
	ws_store_close(s);
}

/*
 * A ranged GET is the bytes asked for or an error: a server that ignores
 * Range (200 with the whole object, as HTTP allows; faultproxy ignore_range)
 * still gives the range, and a 206 for another range than the one asked for
 * (faultproxy shift_range; radosgw answers ranges right) is refused, never
 * taken as the bytes at the offset.
 */
static void test_fault_ranges(void **state)
{
	struct ws_store *s = open_proxied(NULL);
	struct ws_buf b;
	struct ws_obj_info info;
	int rc;
	(void)state;

	wt_put_str(s, "fault/range", "0123456789ABCDEFGHIJ", NULL);
	ws_buf_init(&b, 1024);
	assert_int_equal(ws_store_get(s, "fault/range", 10, 5, &b, &info), 0);
	assert_int_equal(b.len, 5);
	assert_memory_equal(b.data, "ABCDE", 5);
	assert_true(info.size_bytes == 20);

	proxy_control("{\"mode\": \"ignore_range\", \"count\": 3, \"methods\": [\"GET\"]}");
	ws_buf_reset(&b);
	assert_int_equal(ws_store_get(s, "fault/range", 10, 5, &b, &info), 0);
	assert_int_equal(b.len, 5);
	assert_memory_equal(b.data, "ABCDE", 5);
	assert_true(info.size_bytes == 20);
	ws_buf_reset(&b);
	assert_int_equal(ws_store_get(s, "fault/range", 15, UINT64_MAX, &b, NULL), 0);
	assert_int_equal(b.len, 5);
	assert_memory_equal(b.data, "FGHIJ", 5);
	ws_buf_reset(&b);
	assert_int_equal(ws_store_get(s, "fault/range", 25, 5, &b, NULL), 0); /* past the end: nothing */
	assert_int_equal(b.len, 0);

	proxy_control("{\"mode\": \"shift_range\", \"count\": 1, \"methods\": [\"GET\"]}");
	ws_buf_reset(&b);
	rc = ws_store_get(s, "fault/range", 10, 5, &b, NULL);
	print_message("  %s\n", ws_errmsg());
	assert_int_equal(rc, WS_EFORMAT);
	assert_int_equal(b.len, 0);
	assert_non_null(strstr(ws_errmsg(), "not that range"));
	proxy_control("{\"mode\": \"pass\"}");
	ws_buf_free(&b);
	ws_store_close(s);
}

/* A throttle whose error page is long (100 KB, past what walship keeps of
 * an error body) is still a throttle, retried, not "response too large". */
static void test_fault_long_error_page(void **state)
{
	struct ws_store *s = open_proxied(NULL);
	struct ws_store *direct = open_sink(NULL, NULL);
	uint64_t t0 = s->stats.throttle_retries;
	int rc;
	(void)state;

	proxy_control("{\"mode\": \"slowdown\", \"count\": 1, \"methods\": [\"PUT\"], \"error_pad\": 100000}");
	rc = ws_store_put(s, "fault/long-error", "abc", 3, WS_PUT_CREATE, NULL, NULL);
	if (rc)
		fail_msg("put after a throttle with a long error page: %s (%s)", ws_errmsg(), ws_strerror(rc));
	assert_true(s->stats.throttle_retries == t0 + 1);
	proxy_control("{\"mode\": \"pass\"}");
	wt_assert_content(direct, "fault/long-error", "abc");
	ws_store_close(direct);
	ws_store_close(s);
}

/*
 * A request the store refuses as it is (400 InvalidArgument; a 301 for
 * another region, 405, 413, 501 alike) is sent once and is no transient
 * error: it was -EIO, which the block policy retries for ever, a tail that
 * never returns and never says why.
 */
static void test_refused_request_is_final(void **state)
{
	struct ws_store *s = open_proxied(NULL);
	uint64_t r0 = s->stats.retries;
	int rc;
	(void)state;

	proxy_control("{\"mode\": \"bad_request\", \"count\": 5, \"methods\": [\"PUT\"]}");
	rc = ws_store_put(s, "fault/refused", "abc", 3, WS_PUT_CREATE, NULL, NULL);
	assert_int_equal(rc, -EPROTO);
	assert_false(ws_err_transient(rc));
	assert_non_null(strstr(ws_errmsg(), "HTTP 400 InvalidArgument"));
	assert_non_null(strstr(ws_errmsg(), "fault/refused"));
	assert_true(s->stats.retries == r0); /* sent once */
	proxy_control("{\"mode\": \"pass\"}");
	ws_store_close(s);
}

/* More faults than retry_attempts_max (or the deadline): a clear error that
 * names the key, and nothing half-written. */
static void test_fault_exhausted(void **state)
{
	struct ws_store *s = open_proxied("retry_attempts_max=3");
	struct ws_store *d = open_proxied("retry_deadline_ms=300");
	struct ws_buf b;
	struct snap a;
	int rc;
	(void)state;

	ws_buf_init(&b, 0);
	wt_put_str(s, "fault/exhaust-old", "old content", NULL);
	static const char *const modes[] = { "slowdown", "throttle", "error500", "reset", NULL };
	for (int m = 0; modes[m]; m++) {
		char ctl[256];
		snprintf(ctl, sizeof(ctl), "{\"mode\": \"%s\", \"count\": 5, \"methods\": [\"PUT\"]}", modes[m]);
		/* A new key. */
		proxy_control(ctl);
		a = snap(s);
		rc = ws_store_put(s, "fault/exhaust-new", "half?", 5, WS_PUT_CREATE, NULL, NULL);
		print_message("  %s x5, 3 attempts: %s\n", modes[m], ws_errmsg());
		assert_true(rc < 0);
		assert_int_not_equal(rc, WS_EPRECOND);
		assert_non_null(strstr(ws_errmsg(), "fault/exhaust-new"));
		assert_non_null(strstr(ws_errmsg(), "3 attempts"));
		/* Throttling that outlasts the retries is told apart from other failures. */
		if (m < 2) {
			assert_int_equal(rc, WS_ETHROTTLED);
			assert_non_null(strstr(ws_errmsg(), "throttled"));
		} else {
			assert_int_not_equal(rc, WS_ETHROTTLED);
		}
		if (strcmp(modes[m], "reset") != 0)
			assert_delta(s, a, 2, m < 2 ? 2 : 0, 3);
		else /* plus libcurl's own resend of the first */
			assert_delta_range(s, a, 2, 2, 0, 3, 4);
		proxy_control("{\"mode\": \"pass\"}");
		if (strcmp(modes[m], "reset") != 0) {
			/* The store never saw it. */
			assert_int_equal(ws_store_get(s, "fault/exhaust-new", 0, UINT64_MAX, &b, NULL), WS_ENOTFOUND);
		} else {
			/* The store applied it whole; the client was told it failed. */
			char *v = wt_get_str(s, "fault/exhaust-new", &rc, NULL);
			assert_int_equal(rc, 0);
			assert_string_equal(v, "half?");
			free(v);
			assert_int_equal(ws_store_del(s, "fault/exhaust-new"), 0);
		}
		/* An overwrite: the old content stays. */
		proxy_control(ctl);
		rc = ws_store_put(s, "fault/exhaust-old", "new content", 11, WS_PUT_OVERWRITE, NULL, NULL);
		assert_true(rc < 0);
		assert_true(m < 2 ? rc == WS_ETHROTTLED : rc != WS_ETHROTTLED);
		assert_non_null(strstr(ws_errmsg(), "fault/exhaust-old"));
		proxy_control("{\"mode\": \"pass\"}");
		if (strcmp(modes[m], "reset") != 0)
			wt_assert_content(s, "fault/exhaust-old", "old content");
		else
			wt_put_str(s, "fault/exhaust-old", "old content", NULL);
	}
	/* A GET that runs out. */
	proxy_control("{\"mode\": \"slowdown\", \"count\": 5, \"methods\": [\"GET\"]}");
	b.len = 0;
	rc = ws_store_get(s, "fault/exhaust-old", 0, UINT64_MAX, &b, NULL);
	assert_int_equal(rc, WS_ETHROTTLED);
	assert_int_equal(b.len, 0);
	assert_non_null(strstr(ws_errmsg(), "fault/exhaust-old"));
	assert_non_null(strstr(ws_errmsg(), "503"));

	/* The deadline bounds it too (attempts_max is 10 there). */
	proxy_control("{\"mode\": \"slowdown\", \"count\": 1000, \"methods\": [\"PUT\"]}");
	int64_t t0 = wt_now_ms();
	rc = ws_store_put(d, "fault/deadline", "x", 1, WS_PUT_OVERWRITE, NULL, NULL);
	int64_t dt = wt_now_ms() - t0;
	print_message("  deadline 300 ms: %lld ms: %s\n", (long long)dt, ws_errmsg());
	assert_int_equal(rc, WS_ETHROTTLED);
	assert_non_null(strstr(ws_errmsg(), "throttled"));
	assert_non_null(strstr(ws_errmsg(), "fault/deadline"));
	assert_true(dt < 2000);
	proxy_control("{\"mode\": \"pass\"}");
	assert_int_equal(ws_store_head(s, "fault/deadline", NULL), WS_ENOTFOUND);

	/* Slow 503s: the second attempt is still waiting when the deadline cuts
	 * it (300 ms answers, 500 ms deadline, backoff at most 100 ms). Still
	 * throttling, told apart from other failures. */
	struct ws_store *d5 = open_proxied("retry_deadline_ms=500");
	proxy_control("{\"mode\": \"slowdown\", \"count\": 1000, \"methods\": [\"PUT\"], \"latency_ms\": 300}");
	t0 = wt_now_ms();
	rc = ws_store_put(d5, "fault/deadline", "x", 1, WS_PUT_OVERWRITE, NULL, NULL);
	dt = wt_now_ms() - t0;
	print_message("  slow 503s, deadline 500 ms: %lld ms: %s\n", (long long)dt, ws_errmsg());
	assert_int_equal(rc, WS_ETHROTTLED);
	assert_non_null(strstr(ws_errmsg(), "throttled (HTTP 503) through 2 attempts"));
	assert_non_null(strstr(ws_errmsg(), "cut at the deadline"));
	assert_true(dt >= 480 && dt < 1500);
	proxy_control("{\"mode\": \"pass\"}");
	ws_store_close(d5);
	ws_buf_free(&b);
	ws_store_close(d);
	ws_store_close(s);
}

static void test_fault_ignore_conditional(void **state)
{
	char url[1024];
	struct logcap cap;
	int err = 0;
	struct ws_store *s;
	(void)state;

	proxy_control("{\"mode\": \"ignore_conditional\", \"count\": 1000}");
	sink_url(url, sizeof(url), g_px.endpoint, NULL, NULL);
	s = ws_store_open(url, &err);
	print_message("  %s\n", ws_errmsg());
	assert_null(s);
	assert_int_equal(err, WS_ECONFIG);
	assert_non_null(strstr(ws_errmsg(), "If-None-Match"));
	assert_non_null(strstr(ws_errmsg(), "conditional_writes=off"));

	/* conditional_writes=off: opens, with a warning. */
	memset(&cap, 0, sizeof(cap));
	ws_log_set_sink(log_capture, &cap);
	sink_url(url, sizeof(url), g_px.endpoint, NULL, "conditional_writes=off");
	s = ws_store_open(url, &err);
	ws_log_set_sink(NULL, NULL);
	assert_non_null(s);
	assert_int_equal(err, 0);
	assert_int_equal(cap.warnings, 1);
	assert_non_null(strstr(cap.text, "conditional_writes=off"));
	wt_put_str(s, "fault/nocond", "a", NULL);
	wt_assert_content(s, "fault/nocond", "a");
	ws_store_close(s);

	/* A read-only open (WS_STORE_EXISTING) does not probe. */
	sink_url(url, sizeof(url), g_px.endpoint, NULL, NULL);
	s = ws_store_open_flags(url, WS_STORE_EXISTING, &err);
	assert_non_null(s);
	wt_assert_content(s, "fault/nocond", "a");
	ws_store_close(s);
	proxy_control("{\"mode\": \"pass\"}");

	/* The probe left nothing behind. */
	struct ws_store *root = open_sink(NULL, NULL);
	struct ws_list_page p;
	memset(&p, 0, sizeof(p));
	assert_int_equal(ws_store_list(root, "_walship/", NULL, 1000, &p), 0);
	assert_int_equal(p.count, 0);
	ws_list_page_free(&p);
	ws_store_close(root);
}


/* ---- 5. put_many: concurrent PUTs, each with its own retries ------------------- */

#define PM_N 32

struct pm_set {
	size_t n;
	char keys[PM_N][64];
	uint8_t *data[PM_N];
	size_t len[PM_N];
	struct iovec iov[PM_N][2];
	struct ws_put_req reqs[PM_N];
};

/* n objects "<dir>/o%02d", sizes varied (size_min to size_max), each as two iovecs. */
static void pm_make(struct pm_set *p, size_t n, const char *dir, size_t size_min, size_t size_max,
		    enum ws_put_mode mode, uint64_t seed)
{
	memset(p, 0, sizeof(*p));
	assert_true(n <= PM_N);
	p->n = n;
	for (size_t i = 0; i < n; i++) {
		snprintf(p->keys[i], sizeof(p->keys[i]), "%s/o%02zu", dir, i);
		p->len[i] = i == 0 ? size_min
			  : i == 1 ? size_max
				   : size_min + (size_t)((seed * 7919 + i * 104729) % (size_max - size_min));
		p->data[i] = malloc(p->len[i] + 1);
		assert_non_null(p->data[i]);
		fill_random(p->data[i], p->len[i], seed + i);
		size_t half = p->len[i] / 3;
		p->iov[i][0] = (struct iovec){ p->data[i], half };
		p->iov[i][1] = (struct iovec){ p->data[i] + half, p->len[i] - half };
		p->reqs[i] = (struct ws_put_req){ .key = p->keys[i], .iov = p->iov[i], .iovcnt = 2, .mode = mode,
						  .rc = 12345, .throttle_retries = 777 };
	}
}

static void pm_free(struct pm_set *p)
{
	for (size_t i = 0; i < p->n; i++)
		free(p->data[i]);
}

static void pm_check_content(struct ws_store *s, const struct pm_set *p, size_t i)
{
	struct ws_buf b;
	ws_buf_init(&b, 0);
	int rc = ws_store_get(s, p->keys[i], 0, UINT64_MAX, &b, NULL);
	if (rc)
		fail_msg("get %s: %s", p->keys[i], ws_errmsg());
	assert_int_equal(b.len, p->len[i]);
	if (p->len[i])
		assert_memory_equal(b.data, p->data[i], p->len[i]);
	ws_buf_free(&b);
}

static void pm_run(struct ws_store *s, struct pm_set *p)
{
	int rc = ws_store_putv_many(s, p->reqs, p->n);
	if (rc)
		fail_msg("put_many: %s", ws_errmsg());
}

static void pm_assert_all_ok(struct ws_store *s, struct pm_set *p)
{
	for (size_t i = 0; i < p->n; i++) {
		if (p->reqs[i].rc)
			fail_msg("put_many %s: rc %d (%s)", p->keys[i], p->reqs[i].rc, ws_strerror(p->reqs[i].rc));
		pm_check_content(s, p, i);
	}
}

static void test_put_many(void **state)
{
	struct ws_store *s = open_sink(NULL, NULL);
	struct pm_set p;
	uint64_t total = 0;
	(void)state;

	pm_make(&p, PM_N, "pm/all", 0, 1u << 20, WS_PUT_OVERWRITE, 11);
	for (size_t i = 0; i < p.n; i++)
		total += p.len[i];
	struct ws_store_stats st0 = s->stats;
	int64_t t0 = wt_now_ms();
	pm_run(s, &p);
	print_message("  put_many of %d objects (%.1f MB): %lld ms\n", PM_N, (double)total / 1e6,
		      (long long)(wt_now_ms() - t0));
	for (size_t i = 0; i < p.n; i++)
		assert_int_equal(p.reqs[i].throttle_retries, 0);
	assert_int_equal(s->stats.puts - st0.puts, PM_N);
	assert_int_equal(s->stats.bytes_put - st0.bytes_put, total);
	assert_int_equal(s->stats.retries, st0.retries);
	pm_assert_all_ok(s, &p);

	/* Again over the same keys: overwritten with new content. */
	pm_free(&p);
	pm_make(&p, PM_N, "pm/all", 0, 100000, WS_PUT_OVERWRITE, 12);
	pm_run(s, &p);
	pm_assert_all_ok(s, &p);
	pm_free(&p);

	/* Nothing to do; a bad key or a CAS fails alone, the others land. */
	assert_int_equal(ws_store_putv_many(s, NULL, 0), 0);
	pm_make(&p, 4, "pm/bad", 0, 1000, WS_PUT_OVERWRITE, 13);
	snprintf(p.keys[1], sizeof(p.keys[1]), "pm/../escape");
	p.reqs[2].mode = WS_PUT_CAS;
	pm_run(s, &p);
	assert_int_equal(p.reqs[0].rc, 0);
	assert_int_equal(p.reqs[1].rc, -EINVAL);
	assert_int_equal(p.reqs[2].rc, -EINVAL);
	assert_int_equal(p.reqs[3].rc, 0);
	pm_check_content(s, &p, 0);
	pm_check_content(s, &p, 3);
	assert_int_equal(ws_store_head(s, "pm/bad/o02", NULL), WS_ENOTFOUND);
	pm_free(&p);
	ws_store_close(s);
}

/* Create-once in a batch where some keys exist: WS_EPRECOND for exactly those. */
static void test_put_many_create(void **state)
{
	struct ws_store *s = open_sink(NULL, NULL);
	struct pm_set p;
	static const bool exists[12] = { 1, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 1 };
	(void)state;

	pm_make(&p, 12, "pm/create", 0, 5000, WS_PUT_CREATE, 21);
	for (size_t i = 0; i < p.n; i++)
		if (exists[i])
			wt_put_str(s, p.keys[i], "theirs", NULL);
	uint64_t pf0 = s->stats.precond_failed;
	pm_run(s, &p);
	for (size_t i = 0; i < p.n; i++) {
		if (exists[i]) {
			assert_int_equal(p.reqs[i].rc, WS_EPRECOND);
			wt_assert_content(s, p.keys[i], "theirs");
		} else {
			assert_int_equal(p.reqs[i].rc, 0);
			pm_check_content(s, &p, i);
		}
	}
	assert_int_equal(s->stats.precond_failed - pf0, 4);
	/* The same batch again: every key exists now. */
	pm_run(s, &p);
	for (size_t i = 0; i < p.n; i++)
		assert_int_equal(p.reqs[i].rc, WS_EPRECOND);
	pm_free(&p);
	ws_store_close(s);
}

/* 503 SlowDown (then 429) for every request of the first rounds: all land, each counted. */
static void test_put_many_throttled(void **state)
{
	struct ws_store *s = open_proxied(NULL);
	struct pm_set p;
	struct snap a;
	(void)state;

	/* Each round sends every pending request: 2 x PM_N faults = two 503s each. */
	pm_make(&p, PM_N, "pm/slow", 0, 200000, WS_PUT_OVERWRITE, 31);
	proxy_control("{\"mode\": \"slowdown\", \"count\": 64, \"methods\": [\"PUT\"]}");
	a = snap(s);
	pm_run(s, &p);
	assert_delta(s, a, 2 * PM_N, 2 * PM_N, 2 * PM_N);
	for (size_t i = 0; i < p.n; i++)
		assert_int_equal(p.reqs[i].throttle_retries, 2);
	proxy_control("{\"mode\": \"pass\"}");
	pm_assert_all_ok(s, &p);
	pm_free(&p);

	pm_make(&p, 8, "pm/429", 0, 70000, WS_PUT_CREATE, 32);
	proxy_control("{\"mode\": \"throttle\", \"count\": 8, \"methods\": [\"PUT\"]}");
	a = snap(s);
	pm_run(s, &p);
	assert_delta(s, a, 8, 8, 8);
	for (size_t i = 0; i < p.n; i++)
		assert_int_equal(p.reqs[i].throttle_retries, 1);
	proxy_control("{\"mode\": \"pass\"}");
	pm_assert_all_ok(s, &p);
	pm_free(&p);
	ws_store_close(s);
}

/* Throttling that never stops: every request WS_ETHROTTLED within the deadline, nothing written. */
static void test_put_many_throttled_out(void **state)
{
	struct ws_store *s = open_proxied("retry_deadline_ms=600");
	struct pm_set p;
	(void)state;

	pm_make(&p, 8, "pm/never", 0, 10000, WS_PUT_OVERWRITE, 41);
	proxy_control("{\"mode\": \"slowdown\", \"count\": 100000, \"methods\": [\"PUT\"]}");
	uint64_t tr0 = s->stats.throttle_retries;
	int64_t t0 = wt_now_ms();
	pm_run(s, &p);
	int64_t dt = wt_now_ms() - t0;
	print_message("  persistent SlowDown, deadline 600 ms: %lld ms: %s\n", (long long)dt, ws_errmsg());
	assert_true(dt < 3000);
	assert_non_null(strstr(ws_errmsg(), "throttled"));
	uint64_t sum = 0;
	for (size_t i = 0; i < p.n; i++) {
		assert_int_equal(p.reqs[i].rc, WS_ETHROTTLED);
		assert_true(p.reqs[i].throttle_retries >= 1);
		sum += p.reqs[i].throttle_retries;
	}
	assert_int_equal(s->stats.throttle_retries - tr0, sum);
	/* A single PUT the same way. */
	int rc = ws_store_put(s, "pm/never/single", "x", 1, WS_PUT_CREATE, NULL, NULL);
	assert_int_equal(rc, WS_ETHROTTLED);
	assert_non_null(strstr(ws_errmsg(), "pm/never/single"));
	assert_non_null(strstr(ws_errmsg(), "throttled"));
	proxy_control("{\"mode\": \"pass\"}");
	for (size_t i = 0; i < p.n; i++)
		assert_int_equal(ws_store_head(s, p.keys[i], NULL), WS_ENOTFOUND);
	pm_free(&p);
	ws_store_close(s);
}

/*
 * put_many signs each request as it is sent, not when its round begins:
 * with one request in flight, each answered 1.5 s late, the third goes out
 * (and is signed) about 3 s after the first. Signed up front, the whole
 * round carries one time, and a large round on a slow link sends its last
 * requests with a signature older than the 15 minutes a store accepts.
 */
static void test_put_many_signed_when_sent(void **state)
{
	struct ws_store *s = open_proxied("max_in_flight=1");
	struct iovec iov = { "x", 1 };
	struct ws_put_req r[3] = {
		{ .key = "sig/m0", .iov = &iov, .iovcnt = 1, .mode = WS_PUT_OVERWRITE },
		{ .key = "sig/m1", .iov = &iov, .iovcnt = 1, .mode = WS_PUT_OVERWRITE },
		{ .key = "sig/m2", .iov = &iov, .iovcnt = 1, .mode = WS_PUT_CREATE },
	};
	(void)state;
	assert_non_null(s);
	proxy_control("{\"mode\": \"latency\", \"latency_ms\": 1500, \"methods\": [\"PUT\"]}");
	assert_int_equal(ws_store_putv_many(s, r, 3), 0);
	proxy_control("{\"mode\": \"pass\"}");
	for (int i = 0; i < 3; i++)
		if (r[i].rc)
			fail_msg("put_many %s: %s", r[i].key, ws_strerror(r[i].rc));
	int64_t first = proxy_amz_date(2), last = proxy_amz_date(0);
	print_message("  put_many of 3, one in flight, 1.5 s each: signed %lld s apart\n",
		      (long long)(last - first));
	assert_true(last - first >= 2);
	ws_store_close(s);
}

/* Uploads cut off mid-body (the store never sees them): retried or re-sent, each lands whole once. */
static void test_put_many_reset(void **state)
{
	struct ws_store *s = open_proxied(NULL);
	struct pm_set p;
	struct snap a;
	(void)state;

	pm_make(&p, 8, "pm/reset", 100000, 600000, WS_PUT_CREATE, 51); /* bodies to cut in half */
	/* Warm the connections first, so some faults land on reused ones (libcurl resends). */
	wt_put_str(s, "pm/reset/warm", "w", NULL);
	proxy_control("{\"mode\": \"reset_body\", \"count\": 5, \"methods\": [\"PUT\"]}");
	a = snap(s);
	pm_run(s, &p);
	struct snap b = snap(s);
	print_message("  5 uploads reset mid-body: %" PRIu64 " retries, %" PRIu64 " libcurl resends\n",
		      b.retries - a.retries, b.resends - a.resends);
	assert_int_equal(b.faulted - a.faulted, 5);
	assert_int_equal((b.retries - a.retries) + (b.resends - a.resends), 5);
	assert_int_equal(b.throttle - a.throttle, 0);
	proxy_control("{\"mode\": \"pass\"}");
	pm_assert_all_ok(s, &p);
	pm_free(&p);

	/* The single PUT path through the same fault. */
	proxy_control("{\"mode\": \"reset_body\", \"count\": 1, \"methods\": [\"PUT\"]}");
	a = snap(s);
	wt_put_str(s, "pm/reset/single", "cut off once, then whole", NULL);
	assert_delta_put_reset(s, a);
	proxy_control("{\"mode\": \"pass\"}");
	wt_assert_content(s, "pm/reset/single", "cut off once, then whole");
	ws_store_close(s);
}

/* ---- 6. payload_signing ---------------------------------------------------------- */

/*
 * payload_signing=unsigned against radosgw: every write path (the open's
 * probe, put, create-once, CAS, put_many) works with UNSIGNED-PAYLOAD and
 * reads back equal; GET/HEAD/LIST/DeleteObjects still sign their own hashes.
 */
static void test_unsigned_payload(void **state)
{
	struct ws_store *s = open_sink("unsigned", "payload_signing=unsigned"); /* probe: create-once twice */
	struct ws_etag e1, e2, e3;
	struct ws_buf b;
	struct pm_set p;
	size_t n = 300000;
	uint8_t *data = malloc(n);
	(void)state;

	assert_non_null(data);
	fill_random(data, n, 61);
	wt_put_bytes(s, "u/obj", data, n, &e1);
	ws_buf_init(&b, 0);
	assert_int_equal(ws_store_get(s, "u/obj", 0, UINT64_MAX, &b, NULL), 0);
	assert_int_equal(b.len, n);
	assert_memory_equal(b.data, data, n);
	b.len = 0;
	assert_int_equal(ws_store_get(s, "u/obj", 1000, 10, &b, NULL), 0);
	assert_int_equal(b.len, 10);
	assert_memory_equal(b.data, data + 1000, 10);
	ws_buf_free(&b);

	/* Create-once: new key wins, existing key is a precondition failure. */
	assert_int_equal(ws_store_put(s, "u/once", "first", 5, WS_PUT_CREATE, NULL, &e2), 0);
	assert_int_equal(ws_store_put(s, "u/once", "second", 6, WS_PUT_CREATE, NULL, NULL), WS_EPRECOND);
	wt_assert_content(s, "u/once", "first");
	/* CAS: the current etag wins, a stale one fails. */
	assert_int_equal(ws_store_put(s, "u/once", "third", 5, WS_PUT_CAS, &e2, &e3), 0);
	assert_int_equal(ws_store_put(s, "u/once", "fourth", 6, WS_PUT_CAS, &e2, NULL), WS_EPRECOND);
	wt_assert_content(s, "u/once", "third");

	/* put_many, overwrite then create-once over the same keys. */
	pm_make(&p, 8, "u/pm", 0, 1u << 20, WS_PUT_OVERWRITE, 62);
	pm_run(s, &p);
	pm_assert_all_ok(s, &p);
	pm_free(&p);
	pm_make(&p, 8, "u/pm", 1, 5000, WS_PUT_CREATE, 63);
	pm_run(s, &p);
	for (size_t i = 0; i < p.n; i++)
		assert_int_equal(p.reqs[i].rc, WS_EPRECOND);
	pm_free(&p);
	pm_make(&p, 8, "u/pmc", 1, 5000, WS_PUT_CREATE, 64);
	pm_run(s, &p);
	pm_assert_all_ok(s, &p);
	pm_free(&p);

	/* Body-less requests and DeleteObjects still go through. */
	struct ws_list_page lp;
	memset(&lp, 0, sizeof(lp));
	assert_int_equal(ws_store_list(s, "u/pmc/", NULL, 1000, &lp), 0);
	assert_int_equal(lp.count, 8);
	ws_list_page_free(&lp);
	const char *del[] = { "u/obj", "u/once" };
	assert_int_equal(ws_store_del_many(s, del, 2), 0);
	assert_int_equal(ws_store_head(s, "u/obj", NULL), WS_ENOTFOUND);
	assert_int_equal(ws_store_del(s, "u/pmc/o00"), 0);
	assert_int_equal(ws_store_head(s, "u/pmc/o00", NULL), WS_ENOTFOUND);
	assert_int_equal(s->stats.retries, 0);
	free(data);
	ws_store_close(s);
}

/* A wrong secret is still refused (403) when the payload is unsigned: the headers are signed. */
static void test_unsigned_wrong_secret(void **state)
{
	const char *wrong = "WRONGsecretWRONGsecretWRONGsecret0123456";
	char url[1024];
	int err = 0;
	struct ws_store *s;
	(void)state;

	assert_int_equal(setenv("AWS_SECRET_ACCESS_KEY", wrong, 1), 0);
	sink_url(url, sizeof(url), NULL, "unsigned", "payload_signing=unsigned");
	s = ws_store_open(url, &err); /* the probe's PUT */
	assert_null(s);
	assert_int_equal(err, -EACCES);
	assert_no_secret(ws_errmsg(), wrong);
	s = ws_store_open_flags(url, WS_STORE_EXISTING, &err);
	assert_non_null(s);
	assert_int_equal(ws_store_put(s, "u/denied", "x", 1, WS_PUT_OVERWRITE, NULL, NULL), -EACCES);
	assert_no_secret(ws_errmsg(), wrong);
	struct iovec iov = { (void *)(uintptr_t)"y", 1 };
	struct ws_put_req r = { .key = "u/denied-many", .iov = &iov, .iovcnt = 1, .mode = WS_PUT_OVERWRITE };
	assert_int_equal(ws_store_putv_many(s, &r, 1), 0);
	assert_int_equal(r.rc, -EACCES);
	ws_store_close(s);
	assert_int_equal(setenv("AWS_SECRET_ACCESS_KEY", g_secret, 1), 0);
	s = open_sink("unsigned", "payload_signing=unsigned");
	assert_int_equal(ws_store_head(s, "u/denied", NULL), WS_ENOTFOUND);
	assert_int_equal(ws_store_head(s, "u/denied-many", NULL), WS_ENOTFOUND);
	ws_store_close(s);
}

/* ---- If-Match: the form the probe picks, stores that break it ---------------- */

/* Open url (with the probe); the If-Match form it logged: "quoted", "bare", or NULL on failure. */
static const char *open_probed(const char *url, struct ws_store **out, int *err)
{
	struct logcap cap;
	memset(&cap, 0, sizeof(cap));
	ws_log_set_sink(log_capture, &cap);
	ws_log_set_level(WS_LOG_DEBUG);
	*out = ws_store_open(url, err);
	ws_log_set_level(WS_LOG_WARN);
	ws_log_set_sink(NULL, NULL);
	if (!*out)
		return NULL;
	if (strstr(cap.text, "If-Match etags quoted"))
		return "quoted";
	if (strstr(cap.text, "If-Match etags bare"))
		return "bare";
	fail_msg("open %s logged no If-Match form: %s", url, cap.text);
	return NULL;
}

/* On s: a swap on the current etag succeeds, one on a stale etag gets WS_EPRECOND and changes nothing. */
static void assert_cas_works(struct ws_store *s, const char *key)
{
	struct ws_etag e1, e2, e3;
	wt_put_str(s, key, "v1", &e1);
	assert_int_equal(ws_store_put(s, key, "v2", 2, WS_PUT_CAS, &e1, &e2), 0);
	assert_string_not_equal(e1.s, e2.s);
	assert_int_equal(ws_store_put(s, key, "v3", 2, WS_PUT_CAS, &e1, &e3), WS_EPRECOND);
	wt_assert_content(s, key, "v2");
	assert_int_equal(ws_store_put(s, key, "v3", 2, WS_PUT_CAS, &e2, &e3), 0);
	wt_assert_content(s, key, "v3");
}

/* Nothing the probes wrote is left under _walship/. */
static void assert_no_probe_left(void)
{
	struct ws_store *root = open_sink(NULL, NULL);
	struct ws_list_page p;
	memset(&p, 0, sizeof(p));
	assert_int_equal(ws_store_list(root, "_walship/", NULL, 1000, &p), 0);
	assert_int_equal(p.count, 0);
	ws_list_page_free(&p);
	ws_store_close(root);
}

/*
 * radosgw 16.2 with its defaults matches only a bare If-Match etag (a quoted
 * one always gets 412): the default URL must find that out, and swaps must
 * then work; etag_quotes=1 forced on it is refused at open with what the
 * probe saw, and, where no probe ran, the first swap is reported as the
 * store's defect (WS_EBADSTORE), not as another writer.
 */
static void test_if_match_radosgw(void **state)
{
	char url[1024];
	struct ws_store *s;
	int err = 0, rc;
	struct ws_etag e1, e2;
	(void)state;

	sink_url(url, sizeof(url), NULL, NULL, NULL);
	const char *form = open_probed(url, &s, &err);
	if (!s)
		fail_msg("open %s: %s", url, ws_errmsg());
	assert_string_equal(form, "bare");
	assert_cas_works(s, "ifm/rgw");
	ws_store_close(s);

	/* Opened without the probe, auto learns the form before its first swap. */
	s = ws_store_open_flags(url, WS_STORE_EXISTING, &err);
	assert_non_null(s);
	assert_cas_works(s, "ifm/rgw-lazy");
	ws_store_close(s);

	/* etag_quotes=1 on radosgw: refused at open, naming what failed. */
	sink_url(url, sizeof(url), NULL, NULL, "etag_quotes=1");
	s = ws_store_open(url, &err);
	print_message("  etag_quotes=1: %s\n", ws_errmsg());
	assert_null(s);
	assert_int_equal(err, WS_ECONFIG);
	assert_non_null(strstr(ws_errmsg(), "does not honour If-Match"));
	assert_non_null(strstr(ws_errmsg(), "quoted etag: the current etag got 412"));
	assert_null(strstr(ws_errmsg(), "bare etag"));

	/* ... and with no probe, the swap itself tells the store's defect from a writer. */
	s = ws_store_open_flags(url, WS_STORE_EXISTING, &err);
	assert_non_null(s);
	wt_put_str(s, "ifm/rgw-forced", "v1", &e1);
	rc = ws_store_put(s, "ifm/rgw-forced", "v2", 2, WS_PUT_CAS, &e1, &e2);
	print_message("  forced quoted swap: %s\n", ws_errmsg());
	assert_int_equal(rc, WS_EBADSTORE);
	assert_non_null(strstr(ws_errmsg(), "ifm/rgw-forced"));
	assert_non_null(strstr(ws_errmsg(), "412 to If-Match with the object's current etag"));
	assert_non_null(strstr(ws_errmsg(), "not another writer"));
	assert_non_null(strstr(ws_errmsg(), "etag_quotes=0"));
	wt_assert_content(s, "ifm/rgw-forced", "v1");
	ws_store_close(s);

	/* etag_quotes=0 is the explicit form that works; a bad value names the parameter. */
	sink_url(url, sizeof(url), NULL, NULL, "etag_quotes=0");
	assert_string_equal(open_probed(url, &s, &err), "bare");
	ws_store_close(s);
	sink_url(url, sizeof(url), NULL, NULL, "etag_quotes=maybe");
	assert_null(ws_store_open_flags(url, WS_STORE_EXISTING, &err));
	assert_int_equal(err, WS_ECONFIG);
	assert_non_null(strstr(ws_errmsg(), "etag_quotes=maybe"));
	assert_no_probe_left();
}

/* On s: assert_cas_works at key, with what it logged (debug) in cap. */
static void cas_logged(struct ws_store *s, const char *key, struct logcap *cap)
{
	memset(cap, 0, sizeof(*cap));
	ws_log_set_sink(log_capture, cap);
	ws_log_set_level(WS_LOG_DEBUG);
	assert_cas_works(s, key);
	ws_log_set_level(WS_LOG_WARN);
	ws_log_set_sink(NULL, NULL);
}

/*
 * A handle opened without the probe (a shard's tail lanes) takes the If-Match
 * form a probe of another open handle of the process settled on the same
 * endpoint and bucket, instead of probing again (five or six writes, which a
 * store that throttles writes counts like any other). With no such handle
 * open, or pace=0 (no state shared between handles), it probes by itself.
 */
static void test_if_match_probe_shared(void **state)
{
	char url[1024], nopace[1024];
	struct ws_store *s, *lane;
	struct logcap cap;
	int err = 0;
	(void)state;

	sink_url(url, sizeof(url), NULL, NULL, NULL);
	assert_string_equal(open_probed(url, &s, &err), "bare");
	lane = ws_store_open_flags(url, WS_STORE_EXISTING, &err);
	assert_non_null(lane);
	cas_logged(lane, "ifm/shared", &cap);
	assert_non_null(strstr(cap.text, "If-Match etags bare, as a probe of this process found"));
	assert_null(strstr(cap.text, "probe-"));
	assert_null(strstr(cap.text, "conditional writes enforced"));
	ws_store_close(lane);

	/* pace=0: nothing shared, so the lazy probe runs. */
	sink_url(nopace, sizeof(nopace), NULL, NULL, "pace=0");
	lane = ws_store_open_flags(nopace, WS_STORE_EXISTING, &err);
	assert_non_null(lane);
	cas_logged(lane, "ifm/shared-nopace", &cap);
	assert_non_null(strstr(cap.text, "conditional writes enforced; If-Match etags bare"));
	ws_store_close(lane);
	ws_store_close(s);

	/* Every handle closed: what was settled went with them; the next probes. */
	lane = ws_store_open_flags(url, WS_STORE_EXISTING, &err);
	assert_non_null(lane);
	cas_logged(lane, "ifm/shared-again", &cap);
	assert_non_null(strstr(cap.text, "conditional writes enforced; If-Match etags bare"));
	assert_null(strstr(cap.text, "as a probe of this process found"));
	ws_store_close(lane);
	assert_no_probe_left();
}

/*
 * Stores radosgw cannot imitate, made from it by faultproxy rewriting each
 * request's If-Match (and signing it again): radosgw still decides every
 * condition. An RFC 9110 store that matches only quoted etags, and an
 * AWS-like one that matches either spelling, both get quoted ones; bare
 * forced on the first is refused.
 */
static void test_if_match_quoted_stores(void **state)
{
	char url[1024];
	struct ws_store *s;
	int err = 0;
	(void)state;

	proxy_control("{\"mode\": \"if_match_quoted_only\"}");
	sink_url(url, sizeof(url), g_px.endpoint, NULL, NULL);
	const char *form = open_probed(url, &s, &err);
	if (!s)
		fail_msg("open %s: %s", url, ws_errmsg());
	assert_string_equal(form, "quoted");
	assert_cas_works(s, "ifm/quoted-only");
	ws_store_close(s);

	sink_url(url, sizeof(url), g_px.endpoint, NULL, "etag_quotes=0");
	s = ws_store_open(url, &err);
	print_message("  etag_quotes=0 on a quoted-only store: %s\n", ws_errmsg());
	assert_null(s);
	assert_int_equal(err, WS_ECONFIG);
	assert_non_null(strstr(ws_errmsg(), "bare etag: the current etag got 412"));

	proxy_control("{\"mode\": \"if_match_any\"}");
	sink_url(url, sizeof(url), g_px.endpoint, NULL, NULL);
	assert_string_equal(open_probed(url, &s, &err), "quoted");
	assert_cas_works(s, "ifm/any");
	ws_store_close(s);
	proxy_control("{\"mode\": \"pass\"}");
	assert_no_probe_left();
}

/*
 * A store whose ETags are long (faultproxy long_etag: the real one, "-" and
 * a padding, matched only whole). 200 bytes: kept whole, the probe passes
 * and swaps work (a cut etag would never match). 1,000 bytes, more than
 * walship keeps: refused at open by the probe, and where no probe ran, a
 * swap against it is an error naming the length, never a 412 read as
 * another writer, nor a swap against a prefix.
 */
static void test_long_etags(void **state)
{
	char url[1024];
	struct ws_store *s;
	struct ws_etag e1, e2;
	int err = 0, rc;
	(void)state;

	proxy_control("{\"mode\": \"long_etag\", \"etag_bytes\": 200}");
	sink_url(url, sizeof(url), g_px.endpoint, NULL, NULL);
	if (!open_probed(url, &s, &err))
		fail_msg("open %s with 200-byte ETags: %s", url, ws_errmsg());
	wt_put_str(s, "etag/long", "v0", &e1);
	assert_int_equal(strlen(e1.s), 200);
	assert_cas_works(s, "etag/long");
	ws_store_close(s);

	proxy_control("{\"mode\": \"long_etag\", \"etag_bytes\": 1000}");
	s = ws_store_open(url, &err);
	print_message("  1000-byte ETags, probed: %s\n", ws_errmsg());
	assert_null(s);
	assert_int_equal(err, WS_ECONFIG);
	assert_non_null(strstr(ws_errmsg(), "1002 bytes")); /* the header's value, quotes and all */
	sink_url(url, sizeof(url), g_px.endpoint, NULL, "etag_quotes=0");
	s = ws_store_open_flags(url, WS_STORE_EXISTING, &err);
	assert_non_null(s);
	wt_put_str(s, "etag/longer", "v1", &e1);
	assert_int_equal(e1.s[0], '\0');
	assert_int_equal(e1.too_long, 1002);
	rc = ws_store_put(s, "etag/longer", "v2", 2, WS_PUT_CAS, &e1, &e2);
	print_message("  swap against a 1000-byte ETag: %s\n", ws_errmsg());
	assert_int_equal(rc, -EPROTO);
	assert_non_null(strstr(ws_errmsg(), "1002 bytes"));
	assert_non_null(strstr(ws_errmsg(), "etag/longer"));
	wt_assert_content(s, "etag/longer", "v1");
	ws_store_close(s);
	proxy_control("{\"mode\": \"pass\"}");
	assert_no_probe_left();
}

/*
 * A store that honours If-None-Match but ignores If-Match (faultproxy drops
 * the header; radosgw cannot be made to do this): compare-and-swap would
 * silently overwrite, so it is refused with what each form got, at open and
 * before the first swap of a store opened without the probe.
 */
static void test_if_match_ignored(void **state)
{
	char url[1024];
	struct ws_store *s;
	struct ws_etag e1, e2;
	int err = 0, rc;
	(void)state;

	proxy_control("{\"mode\": \"if_match_ignored\"}");
	sink_url(url, sizeof(url), g_px.endpoint, NULL, NULL);
	s = ws_store_open(url, &err);
	print_message("  %s\n", ws_errmsg());
	assert_null(s);
	assert_int_equal(err, WS_ECONFIG);
	assert_non_null(strstr(ws_errmsg(), "does not honour If-Match"));
	assert_non_null(strstr(ws_errmsg(), "quoted etag: a stale etag's write went through"));
	assert_non_null(strstr(ws_errmsg(), "bare etag: a stale etag's write went through"));
	assert_non_null(strstr(ws_errmsg(), "conditional_writes=off"));

	s = ws_store_open_flags(url, WS_STORE_EXISTING, &err);
	assert_non_null(s);
	wt_put_str(s, "ifm/ignored", "v1", &e1);
	wt_put_str(s, "ifm/ignored", "v2", NULL);
	rc = ws_store_put(s, "ifm/ignored", "v3", 2, WS_PUT_CAS, &e1, &e2);
	assert_int_equal(rc, WS_ECONFIG);
	assert_non_null(strstr(ws_errmsg(), "does not honour If-Match"));
	wt_assert_content(s, "ifm/ignored", "v2");
	ws_store_close(s);
	proxy_control("{\"mode\": \"pass\"}");
	assert_no_probe_left();
}

/*
 * Replies radosgw never sends, made from its real ones by faultproxy:
 *   - unframed: a GET's body without Content-Length, cut in half and the
 *     connection closed. Nothing in HTTP/1.1 tells it from a whole body:
 *     it is retried as cut, never taken for the object;
 *   - short_range: a 206 with half the range asked for, its Content-Range
 *     saying so: an error, never the object's end;
 *   - put_status: a PUT answered 201 or 204, success codes HTTP allows:
 *     written (create and compare-and-swap, the etag kept), not refused;
 *   - put_error_body: a PUT's 200 over an S3 error document: retried, the
 *     write that landed told ours by its attempt token;
 *   - head_no_length: a HEAD without Content-Length: an error naming it,
 *     not an object of 0 bytes, where the size is read; a HEAD that settles
 *     a 412 needs none;
 *   - chunked_padded: a chunked body after 40 extra headers: framed still.
 */
static void test_fault_unusual_replies(void **state)
{
	struct ws_store *s = open_proxied(NULL);
	size_t n = 64 << 10;
	uint8_t *data = malloc(n);
	struct ws_buf b;
	struct ws_obj_info info;
	struct ws_etag e1, e2;
	struct snap a;
	int rc;
	(void)state;

	assert_non_null(data);
	fill_random(data, n, 11);
	wt_put_bytes(s, "odd/obj", data, n, NULL);
	ws_buf_init(&b, 0);

	proxy_control("{\"mode\": \"unframed\", \"count\": 1, \"methods\": [\"GET\"]}");
	a = snap(s);
	rc = ws_store_get(s, "odd/obj", 0, UINT64_MAX, &b, &info);
	if (rc)
		fail_msg("unframed: %s", ws_errmsg());
	assert_int_equal(b.len, n);
	assert_memory_equal(b.data, data, n);
	assert_true(info.size_bytes == n);
	assert_delta(s, a, 1, 0, 1);
	proxy_control("{\"mode\": \"unframed\", \"count\": 1000, \"methods\": [\"GET\"]}");
	{
		struct ws_store *s3 = open_proxied("retry_attempts_max=3");
		b.len = 0;
		rc = ws_store_get(s3, "odd/obj", 0, UINT64_MAX, &b, NULL);
		print_message("  unframed every time: %s\n", ws_errmsg());
		assert_int_equal(rc, -EIO);
		assert_int_equal(b.len, 0);
		assert_non_null(strstr(ws_errmsg(), "odd/obj"));
		ws_store_close(s3);
	}
	proxy_control("{\"mode\": \"pass\"}");

	proxy_control("{\"mode\": \"short_range\", \"count\": 2, \"methods\": [\"GET\"]}");
	b.len = 0;
	rc = ws_store_get(s, "odd/obj", 100, 1000, &b, NULL);
	print_message("  short 206: %s\n", ws_errmsg());
	assert_int_equal(rc, -EIO);
	assert_int_equal(b.len, 0);
	assert_non_null(strstr(ws_errmsg(), "fewer bytes than the 1000 asked for at 100"));
	b.len = 0;
	rc = ws_store_get(s, "odd/obj", n - 10, UINT64_MAX, &b, NULL);
	assert_int_equal(rc, -EIO);
	proxy_control("{\"mode\": \"pass\"}");
	b.len = 0;
	assert_int_equal(ws_store_get(s, "odd/obj", n - 10, 1000, &b, NULL), 0); /* to the end, not past it */
	assert_int_equal(b.len, 10);

	proxy_control("{\"mode\": \"put_status\", \"count\": 1, \"methods\": [\"PUT\"], \"status\": \"201 Created\"}");
	memset(&e1, 0, sizeof(e1));
	rc = ws_store_put(s, "odd/created", "one", 3, WS_PUT_CREATE, NULL, &e1);
	if (rc)
		fail_msg("create answered 201: %s", ws_errmsg());
	assert_true(e1.s[0] != '\0');
	proxy_control("{\"mode\": \"put_status\", \"count\": 1, \"methods\": [\"PUT\"], \"status\": \"204 No Content\"}");
	memset(&e2, 0, sizeof(e2));
	rc = ws_store_put(s, "odd/created", "two", 3, WS_PUT_CAS, &e1, &e2);
	if (rc)
		fail_msg("compare-and-swap answered 204: %s", ws_errmsg());
	proxy_control("{\"mode\": \"pass\"}");
	wt_assert_content(s, "odd/created", "two");
	assert_int_equal(ws_store_head(s, "odd/created", &info), 0);
	assert_string_equal(e2.s, info.etag.s);

	/* 200 over an error document: sent again, the write that landed is
	 * told ours by its attempt token (412, then HEAD). */
	proxy_control("{\"mode\": \"put_error_body\", \"count\": 1, \"methods\": [\"PUT\"]}");
	a = snap(s);
	rc = ws_store_put(s, "odd/errdoc", "three", 5, WS_PUT_CREATE, NULL, NULL);
	if (rc)
		fail_msg("create answered 200 with an error document once: %s", ws_errmsg());
	assert_delta(s, a, 1, 0, 1);
	wt_assert_content(s, "odd/errdoc", "three");
	proxy_control("{\"mode\": \"put_error_body\", \"count\": 1000, \"methods\": [\"PUT\"]}");
	{
		struct ws_store *s2 = open_proxied("retry_attempts_max=2");
		rc = ws_store_put(s2, "odd/errdoc2", "four", 4, WS_PUT_OVERWRITE, NULL, NULL);
		print_message("  200 with an error document every time: %s\n", ws_errmsg());
		assert_int_equal(rc, -EIO);
		assert_non_null(strstr(ws_errmsg(), "error document (InternalError)"));
		ws_store_close(s2);
	}
	proxy_control("{\"mode\": \"pass\"}");

	proxy_control("{\"mode\": \"head_no_length\", \"count\": 1000, \"methods\": [\"HEAD\"]}");
	rc = ws_store_head(s, "odd/obj", &info);
	print_message("  HEAD without Content-Length: %s\n", ws_errmsg());
	assert_int_equal(rc, -EPROTO);
	assert_non_null(strstr(ws_errmsg(), "no Content-Length"));
	/* A HEAD that needs no size (the one that settles a 412) does without. */
	rc = ws_store_put(s, "odd/obj", "other", 5, WS_PUT_CREATE, NULL, NULL);
	if (rc != WS_EPRECOND)
		fail_msg("create over an object, HEAD without Content-Length: %s (%s)", ws_errmsg(), ws_strerror(rc));
	proxy_control("{\"mode\": \"pass\"}");

	/* Chunked after more headers than the client keeps: still framed. */
	proxy_control("{\"mode\": \"chunked_padded\", \"count\": 1, \"methods\": [\"GET\"]}");
	a = snap(s);
	b.len = 0;
	rc = ws_store_get(s, "odd/obj", 0, UINT64_MAX, &b, NULL);
	if (rc)
		fail_msg("chunked after 40 headers: %s", ws_errmsg());
	assert_int_equal(b.len, n);
	assert_memory_equal(b.data, data, n);
	assert_delta(s, a, 0, 0, 1);
	proxy_control("{\"mode\": \"pass\"}");
	ws_buf_free(&b);
	free(data);
	ws_store_close(s);
}

/*
 * A step of a call is bound by the call's deadline: a create answered 412
 * is settled by a HEAD, which may not start a deadline of its own. Every
 * request delayed 1.5 s (faultproxy latency) against retry_deadline_ms=2000:
 * the 412 comes after 1.5 s, and the HEAD is cut at 2 s, not 3.5 s.
 */
static void test_deadline_covers_settling_head(void **state)
{
	struct ws_store *s = open_proxied("retry_deadline_ms=2000");
	int64_t t0, dt;
	int rc;
	(void)state;

	wt_put_str(s, "hang/settle", "there already", NULL);
	proxy_control("{\"mode\": \"latency\", \"latency_ms\": 1500, \"methods\": [\"PUT\", \"HEAD\"]}");
	t0 = wt_now_ms();
	rc = ws_store_put(s, "hang/settle", "other", 5, WS_PUT_CREATE, NULL, NULL);
	dt = wt_now_ms() - t0;
	proxy_control("{\"mode\": \"pass\"}");
	print_message("  create answered 412 after 1.5 s, its HEAD as slow: %lld ms: %s (%s)\n", (long long)dt,
		      ws_errmsg(), ws_strerror(rc));
	assert_true(rc != 0 && rc != WS_EPRECOND);
	assert_true(dt >= 1900 && dt < 2700);
	ws_store_close(s);
}

/*
 * Every request ends by the call's deadline (retry_deadline_ms), whatever
 * it is doing then: a server that accepted and never answers, or a reply
 * that stops half way, is cut there, not after the client's 30 s transfer
 * timeout (faultproxy hang and stall; radosgw never hangs on demand).
 */
static void test_deadline_hung_request(void **state)
{
	struct ws_store *s = open_proxied("retry_deadline_ms=1000");
	struct ws_buf b;
	int64_t t0, dt;
	int rc;
	(void)state;

	ws_buf_init(&b, 0);
	wt_put_str(s, "hang/a", "some bytes to cut in half", NULL);
	static const char *const ctl[] = {
		"{\"mode\": \"hang\", \"methods\": [\"GET\"]}",
		"{\"mode\": \"stall\", \"count\": 1000, \"methods\": [\"GET\"]}",
	};
	for (size_t i = 0; i < 2; i++) {
		proxy_control(ctl[i]);
		b.len = 0;
		t0 = wt_now_ms();
		rc = ws_store_get(s, "hang/a", 0, UINT64_MAX, &b, NULL);
		dt = wt_now_ms() - t0;
		print_message("  GET, %s: %lld ms: %s\n", i ? "stalled mid-body" : "never answered", (long long)dt,
			      ws_errmsg());
		assert_int_equal(rc, -ETIMEDOUT);
		assert_int_equal(b.len, 0);
		assert_non_null(strstr(ws_errmsg(), "hang/a"));
		assert_non_null(strstr(ws_errmsg(), "after 1 attempt and retry_deadline_ms=1000"));
		assert_true(dt >= 900 && dt < 3000);
	}
	/* put_many: each request by its own deadline. */
	proxy_control("{\"mode\": \"hang\", \"methods\": [\"PUT\"]}");
	struct iovec iov = { "x", 1 };
	struct ws_put_req r[3] = {
		{ .key = "hang/m0", .iov = &iov, .iovcnt = 1, .mode = WS_PUT_OVERWRITE },
		{ .key = "hang/m1", .iov = &iov, .iovcnt = 1, .mode = WS_PUT_OVERWRITE },
		{ .key = "hang/m2", .iov = &iov, .iovcnt = 1, .mode = WS_PUT_CREATE },
	};
	t0 = wt_now_ms();
	assert_int_equal(ws_store_putv_many(s, r, 3), 0);
	dt = wt_now_ms() - t0;
	print_message("  put_many of 3, never answered: %lld ms\n", (long long)dt);
	for (int i = 0; i < 3; i++)
		assert_int_equal(r[i].rc, -ETIMEDOUT);
	assert_true(dt >= 900 && dt < 3000);
	proxy_control("{\"mode\": \"pass\"}");
	wt_assert_content(s, "hang/a", "some bytes to cut in half");
	ws_buf_free(&b);
	ws_store_close(s);
}

/*
 * A transfer that is slow but moving runs as long as the request's deadline
 * allows: a reply of 330 KB at 10 KB/s takes ~33 s, more than the HTTP
 * client's own 30 s, and with retry_deadline_ms=120000 it arrives whole.
 * Before, every attempt was cut at 30 s whatever the deadline, so an object
 * that needs longer than that on the wire (a large checkpoint artifact on a
 * slow link) could never be sent or read (faultproxy slow_reply).
 */
static void test_slow_transfer_runs_to_deadline(void **state)
{
	struct ws_store *s;
	struct ws_buf b;
	char *body;
	int64_t t0, dt;
	int rc;
	(void)state;

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	/* 33 s of a slow link: the plain build (build-ci) runs it; the
	 * sanitizer builds would only repeat the wait. */
	skip();
#endif
	s = open_proxied("retry_deadline_ms=120000&retry_attempts_max=1");
	body = malloc(330000);

	assert_non_null(body);
	for (size_t i = 0; i < 330000; i++)
		body[i] = (char)('a' + i % 26);
	assert_int_equal(ws_store_put(s, "slow/a", body, 330000, WS_PUT_OVERWRITE, NULL, NULL), 0);
	proxy_control("{\"mode\": \"slow_reply\", \"count\": 1, \"methods\": [\"GET\"], \"rate_bps\": 10000}");
	ws_buf_init(&b, 0);
	t0 = wt_now_ms();
	rc = ws_store_get(s, "slow/a", 0, UINT64_MAX, &b, NULL);
	dt = wt_now_ms() - t0;
	print_message("  GET of 330 KB at 10 KB/s: %lld ms: %s\n", (long long)dt, rc ? ws_errmsg() : "ok");
	assert_int_equal(rc, 0);
	assert_int_equal(b.len, 330000);
	assert_memory_equal(b.data, body, 330000);
	assert_true(dt > 30000);
	proxy_control("{\"mode\": \"pass\"}");
	ws_buf_free(&b);
	free(body);
	ws_store_close(s);
}

/* A bad value names the parameter; the mode each endpoint gets by default. */
static void test_payload_signing_config(void **state)
{
	static const char *const bad[] = { "payload_signing=yes", "payload_signing=", "payload_signing=SIGNED",
					   "payload_signing=unsigned-payload" };
	static const struct {
		const char *url, *want;
	} modes[] = {
		{ "s3://ws-mode?endpoint=https://127.0.0.1:1", "payload signing: unsigned" },
		{ "s3://ws-mode", "payload signing: unsigned" }, /* AWS: https */
		{ "s3://ws-mode?endpoint=http://127.0.0.1:1", "payload signing: signed" },
		{ "s3://ws-mode?endpoint=https://127.0.0.1:1&payload_signing=signed", "payload signing: signed" },
		{ "s3://ws-mode?endpoint=http://127.0.0.1:1&payload_signing=unsigned",
		  "payload signing: unsigned over plain http" },
	};
	char url[1024];
	int err = 0;
	(void)state;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		sink_url(url, sizeof(url), NULL, NULL, bad[i]);
		assert_null(ws_store_open_flags(url, WS_STORE_EXISTING, &err));
		assert_int_equal(err, WS_ECONFIG);
		assert_non_null(strstr(ws_errmsg(), "payload_signing"));
	}
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		struct logcap cap;
		memset(&cap, 0, sizeof(cap));
		ws_log_set_sink(log_capture, &cap);
		ws_log_set_level(i == 4 ? WS_LOG_INFO : WS_LOG_DEBUG); /* http + unsigned: logged at info */
		struct ws_store *s = ws_store_open_flags(modes[i].url, WS_STORE_EXISTING, &err);
		ws_log_set_level(WS_LOG_WARN);
		ws_log_set_sink(NULL, NULL);
		if (!s)
			fail_msg("open %s: %s", modes[i].url, ws_errmsg());
		ws_store_close(s);
		if (!strstr(cap.text, modes[i].want) ||
		    (strcmp(modes[i].want, "payload signing: signed") && strstr(cap.text, "payload signing: signed")))
			fail_msg("%s: logged \"%s\", want \"%s\"", modes[i].url, cap.text, modes[i].want);
		assert_int_equal(cap.warnings, 0);
	}
}

/*
 * What goes on the wire: a capture server on 127.0.0.1 answers every request
 * (PUT 200 with an etag, anything else 404) on one connection and writes the
 * request heads to a file. Returns the server's pid; *port is its port.
 */
static pid_t capture_start(const char *path, int *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(ls >= 0);
	assert_int_equal(bind(ls, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(ls, 4), 0);
	assert_int_equal(getsockname(ls, (struct sockaddr *)&a, &al), 0);
	*port = ntohs(a.sin_port);
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid > 0) {
		close(ls);
		return pid;
	}
	FILE *out = fopen(path, "w");
	int c = accept(ls, NULL, NULL);
	static char buf[1 << 16];
	size_t have = 0;
	if (!out || c < 0)
		_exit(2);
	for (;;) {
		char *end;
		ssize_t r;
		while (!(end = memmem(buf, have, "\r\n\r\n", 4))) {
			if (have == sizeof(buf) || (r = read(c, buf + have, sizeof(buf) - have)) <= 0)
				_exit(fclose(out) == 0 ? 0 : 3);
			have += (size_t)r;
		}
		size_t head = (size_t)(end - buf) + 4, body = 0;
		fwrite(buf, 1, head, out);
		fflush(out);
		for (char *h = buf; h < end; h = strstr(h, "\r\n") + 2)
			if (!strncasecmp(h, "content-length:", 15))
				body = strtoul(h + 15, NULL, 10);
		int put = !strncmp(buf, "PUT ", 4);
		if (memmem(buf, head, "100-continue", 12)) {
			static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
			if (write(c, cont, sizeof(cont) - 1) < 0)
				_exit(4);
		}
		/* Drop the head and the body (which may still be arriving). */
		memmove(buf, buf + head, have - head);
		have -= head;
		while (have < body) {
			r = read(c, buf + have, sizeof(buf) - have < body - have ? sizeof(buf) - have : body - have);
			if (r <= 0)
				_exit(5);
			have += (size_t)r;
			if (have == sizeof(buf)) {
				body -= have;
				have = 0;
			}
		}
		memmove(buf, buf + body, have - body);
		have -= body;
		const char *reply = put ? "HTTP/1.1 200 OK\r\nETag: \"abc\"\r\nContent-Length: 0\r\n\r\n"
					: "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n";
		if (write(c, reply, strlen(reply)) < 0)
			_exit(6);
	}
}

/* The x-amz-content-sha256 of the request heads in the capture file, in order ('|' between them). */
static void captured_hashes(const char *path, char *out, size_t cap)
{
	size_t n;
	uint8_t *d = wt_read_file(path, &n);
	char *txt = calloc(1, n + 1);
	assert_non_null(d);
	assert_non_null(txt);
	memcpy(txt, d, n);
	out[0] = '\0';
	for (char *p = txt; (p = strcasestr(p, "\r\nx-amz-content-sha256:")); p += 2) {
		char *v = p + 23;
		v += strspn(v, " ");
		size_t len = strcspn(v, "\r");
		size_t o = strlen(out);
		snprintf(out + o, cap - o, "%s%.*s", o ? "|" : "", (int)len, v);
	}
	free(txt);
	free(d);
}

static void capture_one(const char *mode_param, char *hashes, size_t cap, const struct iovec *iov, int iovcnt)
{
	char path[600], url[1024];
	int port, err = 0, st;
	snprintf(path, sizeof(path), "%s/capture.txt", g_tmp);
	pid_t pid = capture_start(path, &port);
	snprintf(url, sizeof(url), "s3://%s?endpoint=http://127.0.0.1:%d%s%s", g_bucket, port,
		 mode_param ? "&" : "", mode_param ? mode_param : "");
	struct ws_store *s = ws_store_open_flags(url, WS_STORE_EXISTING, &err);
	if (!s)
		fail_msg("open %s: %s", url, ws_errmsg());
	struct ws_buf b;
	ws_buf_init(&b, 0);
	assert_int_equal(ws_store_putv(s, "cap/a", iov, iovcnt, WS_PUT_OVERWRITE, NULL, NULL), 0);
	struct ws_put_req r = { .key = "cap/b", .iov = iov, .iovcnt = iovcnt, .mode = WS_PUT_CREATE };
	assert_int_equal(ws_store_putv_many(s, &r, 1), 0);
	assert_int_equal(r.rc, 0);
	assert_int_equal(ws_store_get(s, "cap/a", 0, UINT64_MAX, &b, NULL), WS_ENOTFOUND);
	ws_buf_free(&b);
	ws_store_close(s);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	captured_hashes(path, hashes, cap);
}

/* Signed mode sends the body's real SHA-256 (radosgw verifies it); unsigned sends UNSIGNED-PAYLOAD. */
static void test_payload_signing_wire(void **state)
{
	static const char empty[] = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
	uint8_t body[5000], md[WS_SHA256_LEN];
	char real[65], want[400], got[400];
	struct iovec iov[2];
	(void)state;

	fill_random(body, sizeof(body), 71);
	iov[0] = (struct iovec){ body, 1234 };
	iov[1] = (struct iovec){ body + 1234, sizeof(body) - 1234 };
	ws_sha256v(iov, 2, md);
	ws_hex(md, WS_SHA256_LEN, real);

	/* put, put_many, then a GET (no body: UNSIGNED-PAYLOAD in every mode,
	 * never the empty payload's hash). */
	snprintf(want, sizeof(want), "%s|%s|UNSIGNED-PAYLOAD", real, real);
	capture_one("payload_signing=signed", got, sizeof(got), iov, 2);
	assert_string_equal(got, want);
	assert_null(strstr(got, empty));
	capture_one(NULL, got, sizeof(got), iov, 2); /* http: signed by default */
	assert_string_equal(got, want);
	snprintf(want, sizeof(want), "UNSIGNED-PAYLOAD|UNSIGNED-PAYLOAD|UNSIGNED-PAYLOAD");
	capture_one("payload_signing=unsigned", got, sizeof(got), iov, 2);
	assert_string_equal(got, want);
}

/* Whether the header line h (up to its CRLF) is named name (case aside). */
static bool head_named(const char *h, const char *name)
{
	size_t n = strlen(name);
	return !strncasecmp(h, name, n) && h[n] == ':';
}

/*
 * What a request's head holds, and nothing more: Host, x-amz-date,
 * x-amz-content-sha256 and Authorization on every request; a PUT's
 * Content-Length (sent, not signed), its attempt token (16 hex digits)
 * and its condition. None of the headers libcurl adds by itself (Accept,
 * Expect, User-Agent, Content-Type): each would be sent on every request
 * of every tail for nothing (docs/bench/README.md "What a tail sends").
 */
static void test_request_heads_lean(void **state)
{
	static const char *const put_names[] = { "host", "x-amz-date", "x-amz-content-sha256", "authorization",
						 "content-length", "x-amz-meta-ws-attempt", "if-none-match" };
	uint8_t body[3000];
	char hashes[400], path[600];
	struct iovec iov = { body, sizeof(body) };
	size_t n;
	int heads = 0;
	(void)state;

	fill_random(body, sizeof(body), 72);
	/* An overwrite PUT, a create-once PUT (put_many), a GET. */
	capture_one(NULL, hashes, sizeof(hashes), &iov, 1);
	snprintf(path, sizeof(path), "%s/capture.txt", g_tmp);
	uint8_t *d = wt_read_file(path, &n);
	char *txt = calloc(1, n + 1);
	assert_non_null(d);
	assert_non_null(txt);
	memcpy(txt, d, n);
	for (char *p = txt, *end; (end = strstr(p, "\r\n\r\n")); p = end + 4, heads++) {
		const bool put = !strncmp(p, "PUT ", 4), create = put && heads == 1;
		bool seen[7] = { false };
		*end = '\0';
		assert_true(put || !strncmp(p, "GET ", 4));
		for (char *h = strstr(p, "\r\n"); h; h = strstr(h, "\r\n")) {
			size_t i;
			h += 2;
			for (i = 0; i < 7 && !head_named(h, put_names[i]); i++)
				;
			if (i == 7)
				fail_msg("request %d sends a header it need not: %.*s", heads, (int)strcspn(h, "\r"), h);
			/* GET: the first four only; a PUT's condition only on a create. */
			assert_true(i < 4 || (put && (i < 6 || create)));
			seen[i] = true;
			if (i == 3) {
				const char *sh = strstr(h, "SignedHeaders=");
				assert_non_null(sh);
				size_t len = strcspn(sh, ",");
				char want[160];
				snprintf(want, sizeof(want), "SignedHeaders=host;%sx-amz-content-sha256;x-amz-date%s",
					 create ? "if-none-match;" : "", put ? ";x-amz-meta-ws-attempt" : "");
				if (len != strlen(want) || strncmp(sh, want, len))
					fail_msg("request %d signs %.*s, not %s", heads, (int)len, sh, want);
			}
			if (i == 5) {
				const char *v = h + strlen(put_names[5]) + 1;
				v += strspn(v, " ");
				assert_int_equal(strcspn(v, "\r"), 16);
				assert_int_equal(strspn(v, "0123456789abcdef"), 16);
			}
		}
		for (size_t i = 0; i < 4; i++)
			assert_true(seen[i]);
		assert_true(!put || (seen[4] && seen[5] && seen[6] == create));
	}
	assert_int_equal(heads, 3);
	free(txt);
	free(d);
}

/*
 * A POST (DeleteObjects here; multipart's create and complete go the same
 * way) carries no header libcurl adds on its own: no Content-Type
 * (libcurl's form default would go unsigned, and a multipart create would
 * store it as the object's type), no Accept, no Expect. The captured server
 * answers 404, so the call fails; only its head matters here.
 */
static void test_post_head_lean(void **state)
{
	char path[600], url[1024];
	const char *const keys[] = { "cap/x", "cap/y" };
	int port, err = 0, st;
	size_t n;
	(void)state;

	snprintf(path, sizeof(path), "%s/capture-post.txt", g_tmp);
	pid_t pid = capture_start(path, &port);
	snprintf(url, sizeof(url), "s3://%s?endpoint=http://127.0.0.1:%d&retry_attempts_max=1", g_bucket, port);
	struct ws_store *s = ws_store_open_flags(url, WS_STORE_EXISTING, &err);
	if (!s)
		fail_msg("open %s: %s", url, ws_errmsg());
	assert_int_not_equal(ws_store_del_many(s, keys, 2), 0);
	ws_store_close(s);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	uint8_t *d = wt_read_file(path, &n);
	assert_non_null(d);
	char *txt = calloc(1, n + 1);
	assert_non_null(txt);
	memcpy(txt, d, n);
	assert_true(!strncmp(txt, "POST ", 5));
	assert_non_null(strcasestr(txt, "\r\ncontent-md5:"));
	for (const char *bad = "content-type:\0accept:\0expect:\0"; *bad; bad += strlen(bad) + 1) {
		char h[32];
		snprintf(h, sizeof(h), "\r\n%s", bad);
		if (strcasestr(txt, h))
			fail_msg("the POST sends %s: %s", bad, txt);
	}
	free(txt);
	free(d);
}

/*
 * Paced writes (pace=1, the default): nothing waits before the store
 * throttles; after a run of 503 SlowDown every handle on the endpoint and
 * bucket paces its writes (stats.paced_ms), everything still lands, and a
 * handle with pace=0 beside it never waits.
 */
static void test_pace_after_throttle(void **state)
{
	struct ws_store *s = open_proxied("pace=1");
	struct ws_store *other = open_proxied("pace=1&retry_deadline_ms=60000");
	struct ws_store *unpaced = open_proxied("pace=0");
	char key[64];
	(void)state;

	for (int i = 0; i < 10; i++) {
		snprintf(key, sizeof(key), "pace/before-%d", i);
		wt_put_str(s, key, "x", NULL);
	}
	assert_int_equal(s->stats.paced_ms, 0);
	/* Throttled: the store's retries land it, the pacer is now on. */
	proxy_control("{\"mode\": \"slowdown\", \"count\": 4, \"methods\": [\"PUT\"]}");
	wt_put_str(s, "pace/throttled", "x", NULL);
	proxy_control("{\"mode\": \"pass\"}");
	assert_true(s->stats.throttle_retries >= 4);
	/* A burst from another handle of the same bucket waits its turns. */
	for (int i = 0; i < 30; i++) {
		snprintf(key, sizeof(key), "pace/after-%d", i);
		wt_put_str(other, key, "x", NULL);
	}
	print_message("  30 PUTs after 4 throttled answers: paced %" PRIu64 " ms\n", other->stats.paced_ms);
	assert_true(other->stats.paced_ms > 0);
	for (int i = 0; i < 30; i++) {
		snprintf(key, sizeof(key), "pace/after-%d", i);
		wt_assert_content(s, key, "x");
		snprintf(key, sizeof(key), "pace/unpaced-%d", i);
		wt_put_str(unpaced, key, "y", NULL);
	}
	assert_int_equal(unpaced->stats.paced_ms, 0);
	ws_store_close(unpaced);
	ws_store_close(other);
	ws_store_close(s);
}

/* ---- multipart uploads ------------------------------------------------------ */

/* Thresholds low enough that a 40 MiB object goes up in 5 MiB parts. */
#define MP_PARAMS "multipart_threshold_bytes=8MiB&multipart_part_bytes=5MiB"
#define MP_BYTES (((size_t)40 << 20) + 12345)
#define MP_SPLIT (((size_t)3 << 20) + 77) /* the object comes in two iovecs, split here */

/* Multipart uploads still open in the bucket (ListMultipartUploads, through
 * curl's signer as tests/s3/radosgw.sh smoke does: ws_store has no call for it;
 * curl 7.88 signs "uploads" only when it is spelt "uploads="). */
static int uploads_left(void)
{
	char cmd[2048], path[600];
	size_t n;
	snprintf(path, sizeof(path), "%s/uploads.xml", g_tmp);
	snprintf(cmd, sizeof(cmd), "curl -sS -o '%s' -H 'x-amz-content-sha256: "
		 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855' --aws-sigv4 'aws:amz:%s:s3' "
		 "--user \"$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY\" '%s/%s?uploads='", path,
		 getenv("AWS_REGION") ? getenv("AWS_REGION") : "us-east-1", g_endpoint, g_bucket);
	assert_int_equal(system(cmd), 0);
	uint8_t *d = wt_read_file(path, &n);
	assert_non_null(d);
	char *txt = calloc(1, n + 1);
	assert_non_null(txt);
	memcpy(txt, d, n);
	free(d);
	if (!strstr(txt, "ListMultipartUploadsResult"))
		fail_msg("ListMultipartUploads: %s", txt);
	int count = 0;
	for (char *p = txt; (p = strstr(p, "<UploadId>")); p++)
		count++;
	free(txt);
	return count;
}

static uint8_t *mp_data(uint64_t seed, struct iovec iov[2])
{
	uint8_t *d = malloc(MP_BYTES);
	assert_non_null(d);
	fill_random(d, MP_BYTES, seed);
	iov[0] = (struct iovec){ d, MP_SPLIT };
	iov[1] = (struct iovec){ d + MP_SPLIT, MP_BYTES - MP_SPLIT };
	return d;
}

static void assert_object(struct ws_store *s, const char *key, const uint8_t *d, size_t n)
{
	struct ws_buf b;
	ws_buf_init(&b, 64u << 20);
	int rc = ws_store_get(s, key, 0, UINT64_MAX, &b, NULL);
	if (rc)
		fail_msg("get %s: %s", key, ws_errmsg());
	assert_int_equal(b.len, n);
	assert_true(memcmp(b.data, d, n) == 0);
	ws_buf_free(&b);
}

/* The ETag S3 gives an object completed from N parts ends in "-N". */
static void assert_parts(struct ws_store *s, const char *key, const char *suffix)
{
	struct ws_obj_info info;
	assert_int_equal(ws_store_head(s, key, &info), 0);
	assert_int_equal(info.size_bytes, MP_BYTES);
	size_t l = strlen(info.etag.s), m = strlen(suffix);
	if (l < m || strcmp(info.etag.s + l - m, suffix) != 0)
		fail_msg("%s: etag %s, not one of a multipart upload ending %s", key, info.etag.s, suffix);
}

/*
 * Above multipart_threshold_bytes an object goes up in parts (its ETag
 * says how many: 40 MiB in 5 MiB parts is 9 with the tail), from iovecs
 * split off a part boundary, and reads back byte for byte; create-once
 * holds (a second create is WS_EPRECOND, the object untouched); overwrite
 * works in parts; below the threshold, and at the default threshold
 * (64 MiB), the same object is one PUT. Bad sizes are refused at open.
 */
static void test_multipart_roundtrip(void **state)
{
	struct ws_store *s = open_sink(NULL, MP_PARAMS), *plain = open_sink(NULL, NULL);
	struct iovec iov[2], iov2[2];
	uint8_t *d = mp_data(11, iov), *d2 = mp_data(12, iov2);
	(void)state;

	int rc = ws_store_putv(s, "mp/one", iov, 2, WS_PUT_CREATE, NULL, NULL);
	if (rc)
		fail_msg("multipart create: %s (%s)", ws_errmsg(), ws_strerror(rc));
	assert_parts(s, "mp/one", "-9");
	assert_object(plain, "mp/one", d, MP_BYTES);
	rc = ws_store_putv(s, "mp/one", iov2, 2, WS_PUT_CREATE, NULL, NULL);
	assert_int_equal(rc, WS_EPRECOND);
	assert_non_null(strstr(ws_errmsg(), "already exists"));
	assert_object(plain, "mp/one", d, MP_BYTES);
	assert_int_equal(ws_store_putv(s, "mp/one", iov2, 2, WS_PUT_OVERWRITE, NULL, NULL), 0);
	assert_object(plain, "mp/one", d2, MP_BYTES);
	/* One PUT at walship's default threshold. */
	assert_int_equal(ws_store_putv(plain, "mp/single", iov, 2, WS_PUT_CREATE, NULL, NULL), 0);
	struct ws_obj_info info;
	assert_int_equal(ws_store_head(plain, "mp/single", &info), 0);
	assert_null(strchr(info.etag.s, '-'));
	assert_int_equal(uploads_left(), 0);

	static const char *const bad[] = { "multipart_part_bytes=1MiB", "multipart_part_bytes=6GiB",
					   "multipart_threshold_bytes=64M", "multipart_threshold_bytes=-5",
					   "multipart_part_bytes=" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char url[1024];
		int err = 0;
		sink_url(url, sizeof(url), NULL, NULL, bad[i]);
		assert_null(ws_store_open(url, &err));
		assert_int_equal(err, WS_ECONFIG);
		assert_non_null(strstr(ws_errmsg(), "multipart_"));
	}
	free(d);
	free(d2);
	ws_store_close(plain);
	ws_store_close(s);
}

/*
 * A part that fails mid-way (fault site s3.multipart.part on the second
 * window of parts): the upload is aborted, nothing stays in
 * ListMultipartUploads, the object does not exist, and the write tried
 * again goes through.
 */
static void test_multipart_part_fails(void **state)
{
	struct ws_store *s = open_sink(NULL, MP_PARAMS);
	struct ws_obj_info info;
	struct iovec iov[2];
	uint8_t *d = mp_data(13, iov);
	(void)state;

#ifndef WS_FAULTS
	skip();
#endif
	assert_int_equal(ws_fault_add("s3.multipart.part", 2, WS_FAULT_FAIL, NULL, NULL), 0);
	int rc = ws_store_putv(s, "mp/fault", iov, 2, WS_PUT_CREATE, NULL, NULL);
	ws_fault_disarm();
	print_message("  %s\n", ws_errmsg());
	assert_int_equal(rc, -EIO);
	assert_non_null(strstr(ws_errmsg(), "s3.multipart.part"));
	assert_non_null(strstr(ws_errmsg(), "mp/fault"));
	assert_int_equal(uploads_left(), 0);
	assert_int_equal(ws_store_head(s, "mp/fault", &info), WS_ENOTFOUND);
	assert_int_equal(ws_store_putv(s, "mp/fault", iov, 2, WS_PUT_CREATE, NULL, NULL), 0);
	assert_object(s, "mp/fault", d, MP_BYTES);
	free(d);
	ws_store_close(s);
}

/* Parts are retried on their own (503 SlowDown, a 500) as PUTs are, and a
 * completion whose reply was lost is not taken for a failure. */
static void test_multipart_part_retried(void **state)
{
	struct ws_store *s = open_proxied(MP_PARAMS);
	struct iovec iov[2];
	uint8_t *d = mp_data(14, iov);
	(void)state;

	proxy_control("{\"mode\": \"slowdown\", \"count\": 2, \"methods\": [\"PUT\"], \"target\": \"uploadId=\"}");
	struct snap a = snap(s);
	assert_int_equal(ws_store_putv(s, "mp/retried", iov, 2, WS_PUT_CREATE, NULL, NULL), 0);
	assert_delta(s, a, 2, 2, 2);
	proxy_control("{\"mode\": \"error500\", \"count\": 1, \"methods\": [\"PUT\"], \"target\": \"uploadId=\"}");
	assert_int_equal(ws_store_putv(s, "mp/retried", iov, 2, WS_PUT_OVERWRITE, NULL, NULL), 0);
	proxy_control("{\"mode\": \"pass\"}");
	assert_object(s, "mp/retried", d, MP_BYTES);
	/* A completion that went through, its reply lost (the connection
	 * reset): sent again, the store answers 404 NoSuchUpload (faultproxy
	 * lost_then_gone; radosgw answers 200), and the object's attempt token
	 * shows it was this upload's. */
	proxy_control("{\"mode\": \"lost_then_gone\", \"count\": 3, \"methods\": [\"POST\"], \"target\": "
		      "\"?uploadId=\"}");
	int rc = ws_store_putv(s, "mp/lost-reply", iov, 2, WS_PUT_CREATE, NULL, NULL);
	if (rc)
		fail_msg("completion whose reply was lost: %s", ws_errmsg());
	assert_int_equal(proxy_faulted() > 0, 1);
	proxy_control("{\"mode\": \"pass\"}");
	assert_object(s, "mp/lost-reply", d, MP_BYTES);
	assert_int_equal(uploads_left(), 0);
	free(d);
	ws_store_close(s);
}

/* One bad reply of a multipart upload: fails naming want, aborted, nothing left. */
static void mp_bad_reply(struct ws_store *s, const struct iovec *iov, const char *control, const char *want)
{
	struct ws_obj_info info;
	proxy_control(control);
	int rc = ws_store_putv(s, "mp/bad", iov, 2, WS_PUT_CREATE, NULL, NULL);
	proxy_control("{\"mode\": \"pass\"}");
	print_message("  %s\n", ws_errmsg());
	assert_int_not_equal(rc, 0);
	assert_int_not_equal(rc, WS_EPRECOND);
	if (!strstr(ws_errmsg(), want) || !strstr(ws_errmsg(), "mp/bad"))
		fail_msg("want \"%s\" and the key in: %s", want, ws_errmsg());
	assert_int_equal(uploads_left(), 0);
	assert_int_equal(ws_store_head(s, "mp/bad", &info), WS_ENOTFOUND);
}

/*
 * Replies radosgw cannot be made to send, from faultproxy (fake_reply, not
 * forwarded): a CreateMultipartUpload answer without an UploadId, or not
 * XML; a CompleteMultipartUpload answered 200 with an <Error> document (as
 * AWS S3 reports a completion that failed once its answer began), which is
 * no completion; and parts answered without an ETag (strip_etag). Each is
 * an error naming the problem, the upload aborted.
 */
static void test_multipart_bad_replies(void **state)
{
	struct ws_store *s = open_proxied(MP_PARAMS "&retry_attempts_max=3");
	struct iovec iov[2];
	uint8_t *d = mp_data(15, iov);
	(void)state;

	mp_bad_reply(s, iov, "{\"mode\": \"fake_reply\", \"count\": 1, \"methods\": [\"POST\"], \"target\": \"?uploads\", "
		     "\"body\": \"<InitiateMultipartUploadResult><Bucket>b</Bucket><Key>mp/bad</Key>"
		     "</InitiateMultipartUploadResult>\"}", "no UploadId");
	mp_bad_reply(s, iov, "{\"mode\": \"fake_reply\", \"count\": 1, \"methods\": [\"POST\"], \"target\": \"?uploads\", "
		     "\"body\": \"<InitiateMultipartUploadResult><UploadId>x\"}", "not well-formed XML");
	mp_bad_reply(s, iov, "{\"mode\": \"fake_reply\", \"count\": 100, \"methods\": [\"POST\"], \"target\": "
		     "\"?uploadId=\", \"body\": \"<?xml version=\\\"1.0\\\"?><Error><Code>InternalError</Code>"
		     "<Message>We encountered an internal error.</Message></Error>\"}", "error document (InternalError)");
	mp_bad_reply(s, iov, "{\"mode\": \"fake_reply\", \"count\": 1, \"methods\": [\"POST\"], \"target\": "
		     "\"?uploadId=\", \"body\": \"<Nonsense/>\"}", "not a CompleteMultipartUploadResult");
	mp_bad_reply(s, iov, "{\"mode\": \"strip_etag\", \"count\": 100, \"methods\": [\"PUT\"], \"target\": "
		     "\"uploadId=\"}", "has no ETag");
	/* And the same object goes up once the store answers right. */
	assert_int_equal(ws_store_putv(s, "mp/bad", iov, 2, WS_PUT_CREATE, NULL, NULL), 0);
	assert_object(s, "mp/bad", d, MP_BYTES);
	free(d);
	ws_store_close(s);
}

/*
 * get_many: ranged reads at once, each its own answer (a range, the rest of
 * an object, nothing past its end, a missing object, a bad key, a read of
 * nothing), in the order asked whatever order they end in, each retried
 * on its own when throttled (faultproxy slowdown on GETs).
 */
static void test_get_many(void **state)
{
	struct ws_store *s = open_proxied(NULL);
	struct ws_buf b[7];
	static const char body[] = "0123456789ABCDEFGHIJ";
	struct ws_get_req r[7] = {
		{ .key = "many/a", .off = 3, .len = 4 },     { .key = "many/b", .off = 10, .len = UINT64_MAX },
		{ .key = "many/a", .off = 100, .len = 5 },   { .key = "many/none", .off = 0, .len = 5 },
		{ .key = "many/../x", .off = 0, .len = 5 },  { .key = "many/a", .off = 0, .len = 0 },
		{ .key = "many/b", .off = 0, .len = 20 },
	};
	(void)state;

	wt_put_str(s, "many/a", body, NULL);
	wt_put_str(s, "many/b", "abcdefghijklmnopqrst", NULL);
	for (int round = 0; round < 2; round++) {
		for (int i = 0; i < 7; i++) {
			ws_buf_init(&b[i], 1024);
			r[i].out = &b[i];
			r[i].rc = 99;
		}
		if (round == 1)
			proxy_control("{\"mode\": \"slowdown\", \"count\": 3, \"methods\": [\"GET\"]}");
		struct snap a = snap(s);
		assert_int_equal(ws_store_get_many(s, r, 7), 0);
		if (round == 1)
			assert_delta(s, a, 3, 3, 3);
		proxy_control("{\"mode\": \"pass\"}");
		assert_int_equal(r[0].rc, 0);
		assert_int_equal(b[0].len, 4);
		assert_memory_equal(b[0].data, "3456", 4);
		assert_int_equal(r[1].rc, 0);
		assert_int_equal(b[1].len, 10);
		assert_memory_equal(b[1].data, "klmnopqrst", 10);
		assert_int_equal(r[2].rc, 0);
		assert_int_equal(b[2].len, 0);
		assert_int_equal(r[3].rc, WS_ENOTFOUND);
		assert_int_equal(r[4].rc, -EINVAL);
		assert_int_equal(r[5].rc, 0);
		assert_int_equal(b[5].len, 0);
		assert_int_equal(r[6].rc, 0);
		assert_memory_equal(b[6].data, "abcdefghijklmnopqrst", 20);
		for (int i = 0; i < 7; i++)
			ws_buf_free(&b[i]);
	}
	ws_store_close(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_roundtrip),
		cmocka_unit_test(test_get_changed),
		cmocka_unit_test(test_list_paging),
		cmocka_unit_test(test_delete_many),
		cmocka_unit_test(test_prefix),
		cmocka_unit_test(test_race_create),
		cmocka_unit_test(test_create_over_other_bytes),
		cmocka_unit_test(test_race_cas),
		cmocka_unit_test(test_wrong_secret),
		cmocka_unit_test_setup_teardown(test_fault_throttling, proxy_start, proxy_stop),
		cmocka_unit_test_setup_teardown(test_fault_throttle_fail_fast, proxy_start, proxy_stop),
		cmocka_unit_test_setup_teardown(test_fault_latency, proxy_start, proxy_stop),
		cmocka_unit_test_setup_teardown(test_fault_get_reset_truncate, proxy_start, proxy_stop),
		cmocka_unit_test_setup_teardown(test_fault_put_reset, proxy_start, proxy_stop),
		cmocka_unit_test_setup_teardown(test_fault_exhausted, proxy_start, proxy_stop),
		cmocka_unit_test_setup_teardown(test_fault_ignore_conditional, proxy_start, proxy_stop),
		cmocka_unit_test_setup_teardown(test_fault_phantom_and_no_etag, proxy_start, proxy_stop),
		cmocka_unit_test_setup_teardown(test_fault_ranges, proxy_start, proxy_stop),
		cmocka_unit_test_setup_teardown(test_fault_unusual_replies, proxy_start, proxy_stop),
		cmocka_unit_test_setup_teardown(test_fault_long_error_page, proxy_start, proxy_stop),
		cmocka_unit_test(test_if_match_radosgw),
		cmocka_unit_test(test_if_match_probe_shared),
		cmocka_unit_test_setup_teardown(test_if_match_quoted_stores, proxy_start, proxy_stop),
		cmocka_unit_test_setup_teardown(test_if_match_ignored, proxy_start, proxy_stop),
		cmocka_unit_test_setup_teardown(test_long_etags, proxy_start, proxy_stop),
		cmocka_unit_test_setup_teardown(test_deadline_hung_request, proxy_start, proxy_stop),
		cmocka_unit_test_setup_teardown(test_deadline_covers_settling_head, proxy_start, proxy_stop),
		cmocka_unit_test_setup_teardown(test_slow_transfer_runs_to_deadline, proxy_start, proxy_stop),
		cmocka_unit_test_setup_teardown(test_refused_request_is_final, proxy_start, proxy_stop),
		cmocka_unit_test(test_put_many),
		cmocka_unit_test(test_put_many_create),
		cmocka_unit_test_setup_teardown(test_put_many_throttled, proxy_start, proxy_stop),
		cmocka_unit_test_setup_teardown(test_put_many_throttled_out, proxy_start, proxy_stop),
		cmocka_unit_test_setup_teardown(test_put_many_reset, proxy_start, proxy_stop),
		cmocka_unit_test_setup_teardown(test_put_many_signed_when_sent, proxy_start, proxy_stop),
		cmocka_unit_test_setup_teardown(test_pace_after_throttle, proxy_start, proxy_stop),
		cmocka_unit_test(test_unsigned_payload),
		cmocka_unit_test(test_unsigned_wrong_secret),
		cmocka_unit_test(test_payload_signing_config),
		cmocka_unit_test(test_payload_signing_wire),
		cmocka_unit_test(test_request_heads_lean),
		cmocka_unit_test(test_post_head_lean),
		cmocka_unit_test_setup_teardown(test_get_many, proxy_start, proxy_stop),
		cmocka_unit_test(test_multipart_roundtrip),
		cmocka_unit_test(test_multipart_part_fails),
		cmocka_unit_test_setup_teardown(test_multipart_part_retried, proxy_start, proxy_stop),
		cmocka_unit_test_setup_teardown(test_multipart_bad_replies, proxy_start, proxy_stop),
	};
	if (load_s3() != 0)
		return 1;
	return WT_RUN_GROUP(tests, group_setup, group_teardown);
}
