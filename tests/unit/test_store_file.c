/*
 * file:// store backend: round trips, conditional writes, listing, key
 * validation, and the properties that must hold between processes: one
 * winner per create-once race, no lost update under CAS, and no visible or
 * lasting trace of a writer killed between write and publish.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* renameat2, O_DIRECTORY, struct dirent d_type */
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "storeutil.h"
#include "testutil.h"
#include "ws_fault.h"
#include "ws_hash.h"
#include "ws_store.h"

struct fixture {
	char *dir;
	struct ws_store *s;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	int err = 0;

	assert_non_null(f);
	f->dir = wt_tmpdir("store_file");
	assert_non_null(f->dir);
	f->s = ws_store_file_open(f->dir, &err);
	assert_int_equal(err, 0);
	assert_non_null(f->s);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	ws_store_close(f->s);
	wt_rmrf(f->dir);
	free(f->dir);
	free(f);
	return 0;
}

static int count_tmp(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	if (!d)
		return 0;
	while ((de = readdir(d)) != NULL)
		n += strncmp(de->d_name, ".tmp.", 5) == 0;
	closedir(d);
	return n;
}

/* ---- delete many ------------------------------------------------------------- */

/* The file backend has no batch delete: the wrapper deletes one by one, in
 * chunks, and a missing key is success; listings carry sizes. */
static void test_delete_many(void **state)
{
	struct fixture *f = *state;
	char *keys[2105];
	size_t n = 0;
	for (int i = 0; i < 2100; i++) {
		char k[64];
		snprintf(k, sizeof(k), "dm/%c/k%04d", 'a' + i % 3, i);
		wt_put_str(f->s, k, i % 2 ? "odd" : "even!", NULL);
		keys[n++] = strdup(k);
	}
	struct ws_list_page p;
	memset(&p, 0, sizeof(p));
	assert_int_equal(ws_store_list(f->s, "dm/a/", NULL, 5, &p), 0);
	assert_non_null(p.sizes);
	for (size_t i = 0; i < p.count; i++)
		assert_int_equal(p.sizes[i], atoi(strrchr(p.keys[i], 'k') + 1) % 2 ? 3 : 5);
	ws_list_page_free(&p);
	keys[n++] = strdup("dm/never-existed");
	uint64_t before = f->s->stats.deletes;
	assert_int_equal(ws_store_del_many(f->s, (const char *const *)keys, n), 0);
	assert_int_equal(f->s->stats.deletes - before, n);
	memset(&p, 0, sizeof(p));
	assert_int_equal(ws_store_list(f->s, "dm/", NULL, 1000, &p), 0);
	assert_int_equal(p.count, 0);
	ws_list_page_free(&p);
	const char *bad[] = { "dm/x", "/abs" };
	assert_int_equal(ws_store_del_many(f->s, bad, 2), -EINVAL);
	for (size_t i = 0; i < n; i++)
		free(keys[i]);
}

/* ---- round trips ----------------------------------------------------------- */

static void test_roundtrip(void **state)
{
	struct fixture *f = *state;
	struct ws_etag etag;
	struct ws_obj_info info;
	struct ws_buf b;
	int rc;

	wt_put_str(f->s, "a/b/c.txt", "hello", &etag);
	assert_true(etag.s[0] != '\0');

	ws_buf_init(&b, 0);
	assert_int_equal(ws_store_get(f->s, "a/b/c.txt", 0, UINT64_MAX, &b, &info), 0);
	assert_int_equal(b.len, 5);
	assert_memory_equal(b.data, "hello", 5);
	assert_int_equal(info.size_bytes, 5);
	assert_string_equal(info.etag.s, etag.s);
	assert_true(info.mtime_ms > 0);

	/* Ranges append, report the whole object's etag, and clip at the end. */
	ws_buf_reset(&b);
	assert_int_equal(ws_store_get(f->s, "a/b/c.txt", 1, 3, &b, &info), 0);
	assert_int_equal(b.len, 3);
	assert_memory_equal(b.data, "ell", 3);
	assert_string_equal(info.etag.s, etag.s);
	assert_int_equal(ws_store_get(f->s, "a/b/c.txt", 3, UINT64_MAX, &b, NULL), 0);
	assert_int_equal(b.len, 5);
	assert_memory_equal(b.data, "elllo", 5);
	assert_int_equal(ws_store_get(f->s, "a/b/c.txt", 10, 4, &b, NULL), 0);
	assert_int_equal(b.len, 5);
	ws_buf_free(&b);

	memset(&info, 0, sizeof(info));
	assert_int_equal(ws_store_head(f->s, "a/b/c.txt", &info), 0);
	assert_int_equal(info.size_bytes, 5);
	assert_string_equal(info.etag.s, etag.s);

	assert_int_equal(ws_store_del(f->s, "a/b/c.txt"), 0);
	assert_null(wt_get_str(f->s, "a/b/c.txt", &rc, NULL));
	assert_int_equal(rc, WS_ENOTFOUND);
	assert_int_equal(ws_store_head(f->s, "a/b/c.txt", &info), WS_ENOTFOUND);
	/* Deleting again, or a key whose directory never existed, succeeds. */
	assert_int_equal(ws_store_del(f->s, "a/b/c.txt"), 0);
	assert_int_equal(ws_store_del(f->s, "zz/top"), 0);

	assert_int_equal(f->s->stats.puts, 1);
	assert_int_equal(f->s->stats.bytes_put, 5);
	assert_int_equal(f->s->stats.gets, 5);
	assert_int_equal(f->s->stats.bytes_got, 5 + 3 + 2);
	assert_int_equal(f->s->stats.heads, 2);
	assert_int_equal(f->s->stats.deletes, 3);
	assert_int_equal(count_tmp(f->dir), 0);
}

static void test_empty_and_iovecs(void **state)
{
	struct fixture *f = *state;
	struct ws_etag e1, e2, e0;
	struct ws_obj_info info;
	struct iovec iov[200];
	char *flat, *got;
	size_t total = 0;
	int rc;

	/* Empty object. */
	assert_int_equal(ws_store_put(f->s, "empty", NULL, 0, WS_PUT_OVERWRITE, NULL, &e0), 0);
	got = wt_get_str(f->s, "empty", &rc, &info);
	assert_int_equal(rc, 0);
	assert_string_equal(got, "");
	assert_int_equal(info.size_bytes, 0);
	assert_string_equal(info.etag.s, e0.s);
	free(got);

	/* More iovecs than one pwritev window, some empty; etag = etag of the bytes. */
	flat = malloc(200 * 1000 + 1);
	assert_non_null(flat);
	for (int i = 0; i < 200; i++) {
		size_t n = i % 7 == 0 ? 0 : (size_t)(i * 5 % 1000);
		memset(flat + total, 'a' + i % 26, n);
		iov[i].iov_base = flat + total;
		iov[i].iov_len = n;
		total += n;
	}
	flat[total] = '\0';
	assert_int_equal(ws_store_putv(f->s, "vec", iov, 200, WS_PUT_OVERWRITE, NULL, &e1), 0);
	assert_int_equal(ws_store_put(f->s, "flat", flat, total, WS_PUT_OVERWRITE, NULL, &e2), 0);
	assert_string_equal(e1.s, e2.s);
	wt_assert_content(f->s, "vec", flat);
	assert_int_equal(ws_store_head(f->s, "vec", &info), 0);
	assert_int_equal(info.size_bytes, total);
	assert_string_equal(info.etag.s, e1.s);
	free(flat);
}

static void test_large_range(void **state)
{
	struct fixture *f = *state;
	size_t n = 3u << 20;
	uint8_t *data = malloc(n);
	uint64_t seed = 7;
	struct ws_etag etag;
	struct ws_obj_info info;
	struct ws_buf b;

	assert_non_null(data);
	for (size_t i = 0; i < n; i++)
		data[i] = (uint8_t)wt_rand(&seed);
	assert_int_equal(ws_store_put(f->s, "big/obj", data, n, WS_PUT_OVERWRITE, NULL, &etag), 0);
	ws_buf_init(&b, 0);
	assert_int_equal(ws_store_get(f->s, "big/obj", 1000000, 123457, &b, &info), 0);
	assert_int_equal(b.len, 123457);
	assert_memory_equal(b.data, data + 1000000, 123457);
	assert_string_equal(info.etag.s, etag.s);
	assert_int_equal(info.size_bytes, n);
	ws_buf_free(&b);

	/* A buffer smaller than the range refuses it and the error sticks. */
	ws_buf_init(&b, 4096);
	assert_int_equal(ws_store_get(f->s, "big/obj", 0, UINT64_MAX, &b, NULL), WS_ETOOBIG);
	assert_non_null(strstr(ws_errmsg(), "big/obj"));
	assert_int_equal(b.len, 0);
	assert_int_equal(ws_store_get(f->s, "big/obj", 0, 10, &b, NULL), WS_ETOOBIG);
	ws_buf_reset(&b);
	assert_int_equal(ws_store_get(f->s, "big/obj", 0, 10, &b, NULL), 0);
	assert_memory_equal(b.data, data, 10);
	ws_buf_free(&b);
	free(data);
}

static void test_overwrite(void **state)
{
	struct fixture *f = *state;
	struct ws_etag e1, e2, e3;

	wt_put_str(f->s, "k", "version-1", &e1);
	wt_put_str(f->s, "k", "version-2", &e2);
	wt_assert_content(f->s, "k", "version-2");
	/* Same size, different bytes: the etag must still change. */
	assert_string_not_equal(e1.s, e2.s);
	wt_put_str(f->s, "k", "version-2", &e3);
	assert_string_equal(e2.s, e3.s);
	assert_int_equal(count_tmp(f->dir), 0);
}

/*
 * The conditional read of the watermark a follower polls: 1 (nothing read)
 * while the object is the copy the validator names, the new bytes once it
 * is replaced (even by one of the same size, or the same bytes written
 * again), WS_ENOTFOUND for a key that is not there, and a bad key refused.
 */
static void test_get_changed(void **state)
{
	struct fixture *f = *state;
	struct ws_etag tag, e;
	struct ws_buf b;

	memset(&tag, 0, sizeof(tag));
	ws_buf_init(&b, 0);
	assert_int_equal(ws_store_get_changed(f->s, "t/wm", &tag, &b), WS_ENOTFOUND);
	wt_put_str(f->s, "t/wm", "version-1", &e);
	assert_int_equal(ws_store_get_changed(f->s, "t/wm", &tag, &b), 0);
	assert_int_equal(b.len, 9);
	assert_memory_equal(b.data, "version-1", 9);
	assert_true(tag.s[0] != '\0');
	uint64_t gets = f->s->stats.gets, bytes = f->s->stats.bytes_got;
	assert_int_equal(ws_store_get_changed(f->s, "t/wm", &tag, &b), 1);
	assert_int_equal(b.len, 9); /* untouched */
	assert_int_equal(f->s->stats.gets, gets + 1);
	assert_int_equal(f->s->stats.bytes_got, bytes); /* no body moved */
	/* Same size, other bytes: a new copy. */
	wt_put_str(f->s, "t/wm", "version-2", &e);
	ws_buf_reset(&b);
	assert_int_equal(ws_store_get_changed(f->s, "t/wm", &tag, &b), 0);
	assert_memory_equal(b.data, "version-2", 9);
	/* The same bytes written again are a new copy too (read again). */
	wt_put_str(f->s, "t/wm", "version-2", &e);
	ws_buf_reset(&b);
	assert_int_equal(ws_store_get_changed(f->s, "t/wm", &tag, &b), 0);
	assert_int_equal(ws_store_get_changed(f->s, "t/wm", &tag, &b), 1);
	/* Gone, and a bad key. */
	assert_int_equal(ws_store_del(f->s, "t/wm"), 0);
	assert_int_equal(ws_store_get_changed(f->s, "t/wm", &tag, &b), WS_ENOTFOUND);
	assert_int_equal(ws_store_get_changed(f->s, "../wm", &tag, &b), -EINVAL);
	ws_buf_free(&b);
}

static void test_create_once(void **state)
{
	struct fixture *f = *state;
	struct ws_etag e1, e2;

	assert_int_equal(ws_store_put(f->s, "once/x", "first", 5, WS_PUT_CREATE, NULL, &e1), 0);
	strcpy(e2.s, "untouched");
	assert_int_equal(ws_store_put(f->s, "once/x", "second", 6, WS_PUT_CREATE, NULL, &e2),
			 WS_EPRECOND);
	assert_string_equal(e2.s, "untouched");
	assert_non_null(strstr(ws_errmsg(), "once/x"));
	wt_assert_content(f->s, "once/x", "first");
	assert_int_equal(f->s->stats.precond_failed, 1);

	/* Once deleted it can be created again. */
	assert_int_equal(ws_store_del(f->s, "once/x"), 0);
	assert_int_equal(ws_store_put(f->s, "once/x", "third", 5, WS_PUT_CREATE, NULL, NULL), 0);
	wt_assert_content(f->s, "once/x", "third");

	char *sub = wt_path(f->dir, "once");
	assert_int_equal(count_tmp(sub), 0);
	free(sub);
}

static void test_cas(void **state)
{
	struct fixture *f = *state;
	struct ws_etag e1, e2, e3, none;
	struct ws_obj_info info;

	wt_put_str(f->s, "cas/c", "1", &e1);
	assert_int_equal(ws_store_put(f->s, "cas/c", "2", 1, WS_PUT_CAS, &e1, &e2), 0);
	wt_assert_content(f->s, "cas/c", "2");
	/* The old etag no longer matches. */
	assert_int_equal(ws_store_put(f->s, "cas/c", "3", 1, WS_PUT_CAS, &e1, &e3), WS_EPRECOND);
	wt_assert_content(f->s, "cas/c", "2");
	assert_int_equal(ws_store_head(f->s, "cas/c", &info), 0);
	assert_string_equal(info.etag.s, e2.s);

	/* Absent object, empty etag, garbage etag. */
	assert_int_equal(ws_store_put(f->s, "cas/missing", "x", 1, WS_PUT_CAS, &e2, NULL),
			 WS_EPRECOND);
	assert_int_equal(ws_store_head(f->s, "cas/missing", &info), WS_ENOTFOUND);
	none.s[0] = '\0';
	assert_int_equal(ws_store_put(f->s, "cas/c", "x", 1, WS_PUT_CAS, &none, NULL), WS_EPRECOND);
	strcpy(none.s, "0000000000000000-1");
	assert_int_equal(ws_store_put(f->s, "cas/c", "x", 1, WS_PUT_CAS, &none, NULL), WS_EPRECOND);
	assert_int_equal(ws_store_put(f->s, "cas/c", "x", 1, WS_PUT_CAS, NULL, NULL), -EINVAL);
	assert_int_equal(f->s->stats.precond_failed, 4);
	wt_assert_content(f->s, "cas/c", "2");
}

/* ---- listing ----------------------------------------------------------------- */

/* Writes key's file under root without the store, creating directories. */
static void raw_put(const char *root, const char *key)
{
	char *p = wt_path(root, key);

	assert_non_null(p);
	for (char *slash = strchr(p + strlen(root) + 1, '/'); slash; slash = strchr(slash + 1, '/')) {
		*slash = '\0';
		if (mkdir(p, 0755) < 0 && errno != EEXIST)
			fail_msg("mkdir %s: %s", p, strerror(errno));
		*slash = '/';
	}
	assert_int_equal(wt_write_file(p, key, strlen(key)), 0);
	free(p);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Pages through prefix with max_keys and checks the result equals want[0..n). */
static void check_listing(struct ws_store *s, const char *prefix, unsigned max_keys,
			  char **want, size_t n)
{
	char token[WS_KEY_MAX] = "";
	size_t seen = 0;
	unsigned pages = 0;

	for (;;) {
		struct ws_list_page page = { 0 };
		int rc = ws_store_list(s, prefix, token, max_keys, &page);
		if (rc)
			fail_msg("list %s: %s", prefix, ws_errmsg());
		assert_true(page.count <= max_keys);
		for (size_t i = 0; i < page.count; i++) {
			assert_true(seen < n);
			assert_string_equal(page.keys[i], want[seen]);
			seen++;
		}
		pages++;
		if (!page.truncated) {
			ws_list_page_free(&page);
			break;
		}
		assert_int_equal(page.count, max_keys);
		assert_string_equal(page.next_token, page.keys[page.count - 1]);
		snprintf(token, sizeof(token), "%s", page.next_token);
		ws_list_page_free(&page);
		assert_true(pages <= n / max_keys + 1);
	}
	assert_int_equal(seen, n);
}

/*
 * A sparse file the file store lists at more bytes than an object can have
 * (someone's `truncate -s 6T` in the sink): ls's sum of the listing refuses
 * it as bad data from the store, naming the key, rather than count it (two
 * of 2^63 would wrap the tenant's bytes).
 */
static void test_list_size_beyond_a_store(void **state)
{
	struct fixture *f = *state;
	struct ws_list_page page = { 0 };
	char path[4096];
	uint64_t total = 0;
	int fd;

	assert_int_equal(ws_store_put(f->s, "t/a", "x", 1, WS_PUT_OVERWRITE, NULL, NULL), 0);
	snprintf(path, sizeof(path), "%s/t/huge", f->dir);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
	assert_true(fd >= 0);
	if (ftruncate(fd, (off_t)(WS_OBJ_BYTES_MAX + 4096)) != 0) {
		/* A file system that cannot hold so large a sparse file. */
		print_message("ftruncate to 5 TiB: %s; not run here\n", strerror(errno));
		close(fd);
		unlink(path);
		skip();
	}
	close(fd);
	assert_int_equal(ws_store_list(f->s, "t/", NULL, 10, &page), 0);
	assert_int_equal(page.count, 2);
	assert_int_equal(ws_list_page_add_bytes(f->s, &page, &total), WS_EFORMAT);
	print_message("  refused: %s\n", ws_errmsg());
	assert_non_null(strstr(ws_errmsg(), "t/huge a size of 5497558142976 bytes"));
	assert_non_null(strstr(ws_errmsg(), "bad data from the store"));
	assert_true(total == 1); /* t/a's byte, before it */
	ws_list_page_free(&page);
	unlink(path);
}

static void test_list_paging(void **state)
{
	struct fixture *f = *state;
	enum { N = 2500 };
	char **keys = calloc(N + 8, sizeof(*keys));
	char **sub = calloc(N + 8, sizeof(*sub));
	size_t n = 0, m;
	struct ws_list_page page = { 0 };

	assert_non_null(keys);
	assert_non_null(sub);
	/* Byte order puts '-' < '.' < '/' < '0': a directory sorts by "name/". */
	const char *tricky[] = { "l/a-b", "l/a.b", "l/a/x", "l/a/y/z", "l/a0", "l/aa", "l/b" };
	for (size_t i = 0; i < sizeof(tricky) / sizeof(*tricky); i++)
		keys[n++] = strdup(tricky[i]);
	for (int i = 0; n < N; i++) {
		char k[64];
		if (i % 5 == 0)
			snprintf(k, sizeof(k), "l/n%02d/k%05d", i % 37, i);
		else if (i % 5 == 1)
			snprintf(k, sizeof(k), "l/n%02d/deep/er/k%05d", i % 11, i);
		else
			snprintf(k, sizeof(k), "l/k%05d", i);
		keys[n++] = strdup(k);
	}
	/*
	 * The first keys go through put; the bulk is laid out directly (one file
	 * per key, as the backend stores them) because 2500 durable puts cost
	 * two fsyncs each and this test is about listing.
	 */
	for (size_t i = 0; i < n; i++) {
		assert_non_null(keys[i]);
		if (i < 300)
			assert_int_equal(ws_store_put(f->s, keys[i], keys[i], strlen(keys[i]),
						      WS_PUT_OVERWRITE, NULL, NULL), 0);
		else
			raw_put(f->dir, keys[i]);
	}
	/* Outside the prefix: must never show up. */
	wt_put_str(f->s, "other/k", "x", NULL);
	wt_put_str(f->s, "l-top", "x", NULL);
	qsort(keys, n, sizeof(*keys), cmp_str);

	check_listing(f->s, "l/", 1000, keys, n);
	check_listing(f->s, "l/", 7, keys, n);

	/* Prefixes that end inside a segment and inside a directory name. */
	const char *prefixes[] = { "l/n1", "l/n03/", "l/a", "l/k0001", "l/n07/deep/er/k",
				   "nothing", "l/a/y/z" };
	for (size_t p = 0; p < sizeof(prefixes) / sizeof(*prefixes); p++) {
		m = 0;
		for (size_t i = 0; i < n; i++)
			if (strncmp(keys[i], prefixes[p], strlen(prefixes[p])) == 0)
				sub[m++] = keys[i];
		check_listing(f->s, prefixes[p], 1, sub, m);
		check_listing(f->s, prefixes[p], 3, sub, m);
		check_listing(f->s, prefixes[p], 1000, sub, m);
	}

	/* A token that is not itself a key starts right after where it would sort. */
	assert_int_equal(ws_store_list(f->s, "l/", "l/n05/deep", 2, &page), 0);
	for (size_t i = 0; i < n; i++) {
		if (strcmp(keys[i], "l/n05/deep") > 0) {
			assert_string_equal(page.keys[0], keys[i]);
			assert_string_equal(page.keys[1], keys[i + 1]);
			break;
		}
	}
	ws_list_page_free(&page);
	/* Whole store, no prefix. */
	assert_int_equal(ws_store_list(f->s, NULL, NULL, 1000, &page), 0);
	assert_true(page.truncated);
	/* '-' sorts before '/': the sibling file comes before the whole "l/" tree. */
	assert_string_equal(page.keys[0], "l-top");
	assert_string_equal(page.keys[1], keys[0]);
	ws_list_page_free(&page);
	assert_int_equal(ws_store_list(f->s, "", "l/zzz", 1000, &page), 0);
	assert_int_equal(page.count, 1);
	assert_string_equal(page.keys[0], "other/k");
	assert_false(page.truncated);
	ws_list_page_free(&page);

	assert_int_equal(ws_store_list(f->s, "l/", NULL, 0, &page), -EINVAL);
	assert_int_equal(ws_store_list(f->s, "l/", NULL, WS_LIST_PAGE_MAX + 1, &page), -EINVAL);

	for (size_t i = 0; i < n; i++)
		free(keys[i]);
	free(keys);
	free(sub);
}

static void test_nested_and_conflicts(void **state)
{
	struct fixture *f = *state;
	struct ws_list_page page = { 0 };
	int rc;

	wt_put_str(f->s, "t/1/2/3/4/5/6/leaf", "deep", NULL);
	wt_assert_content(f->s, "t/1/2/3/4/5/6/leaf", "deep");
	/* "t/1" is a directory: not an object, cannot be written over, deleting is a no-op. */
	assert_null(wt_get_str(f->s, "t/1", &rc, NULL));
	assert_int_equal(rc, WS_ENOTFOUND);
	assert_int_equal(ws_store_head(f->s, "t/1", NULL), WS_ENOTFOUND);
	assert_true(ws_store_put(f->s, "t/1", "x", 1, WS_PUT_OVERWRITE, NULL, NULL) < 0);
	assert_int_equal(ws_store_del(f->s, "t/1"), 0);
	/* A file where a directory would go. */
	wt_put_str(f->s, "u", "file", NULL);
	assert_true(ws_store_put(f->s, "u/v", "x", 1, WS_PUT_OVERWRITE, NULL, NULL) < 0);
	assert_null(wt_get_str(f->s, "u/v", &rc, NULL));
	assert_int_equal(rc, WS_ENOTFOUND);

	assert_int_equal(ws_store_list(f->s, "t/", NULL, 10, &page), 0);
	assert_int_equal(page.count, 1);
	assert_string_equal(page.keys[0], "t/1/2/3/4/5/6/leaf");
	ws_list_page_free(&page);

	/* Lock files live next to objects but are never listed. */
	assert_int_equal(ws_store_put(f->s, "t/c", "1", 1, WS_PUT_CREATE, NULL, NULL), 0);
	assert_int_equal(ws_store_list(f->s, "t/", NULL, 10, &page), 0);
	assert_int_equal(page.count, 2);
	assert_string_equal(page.keys[0], "t/1/2/3/4/5/6/leaf");
	assert_string_equal(page.keys[1], "t/c");
	ws_list_page_free(&page);
}

static void test_invalid_keys(void **state)
{
	struct fixture *f = *state;
	char longkey[WS_KEY_MAX + 1];
	struct ws_buf b;
	struct ws_obj_info info;
	const char *bad[] = { "", "/abs", "a/../b", "..", ".", "a/./b", "a//b", "a/", "sp ace",
			      "a\\b", "uni\xc3\xa9", "a:b", "a*", "new\nline", ".tmp.1.2",
			      "d/.lock.00", "a/.tmp.x/b", NULL };

	ws_buf_init(&b, 0);
	/* Segments of 100 bytes: one file name may hold at most NAME_MAX (255) of them. */
	memset(longkey, 'k', WS_KEY_MAX);
	for (size_t i = 100; i < WS_KEY_MAX; i += 101)
		longkey[i] = '/';
	longkey[WS_KEY_MAX] = '\0';
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		const char *k = bad[i];
		if (i == sizeof(bad) / sizeof(*bad) - 1)
			k = longkey;
		assert_int_equal(ws_store_put(f->s, k, "x", 1, WS_PUT_OVERWRITE, NULL, NULL), -EINVAL);
		assert_int_equal(ws_store_put(f->s, k, "x", 1, WS_PUT_CREATE, NULL, NULL), -EINVAL);
		assert_int_equal(ws_store_get(f->s, k, 0, UINT64_MAX, &b, NULL), -EINVAL);
		assert_int_equal(ws_store_head(f->s, k, &info), -EINVAL);
		assert_int_equal(ws_store_del(f->s, k), -EINVAL);
	}
	assert_int_equal(ws_store_put(f->s, NULL, "x", 1, WS_PUT_OVERWRITE, NULL, NULL), -EINVAL);
	ws_buf_free(&b);

	assert_false(ws_key_valid(NULL));
	assert_false(ws_key_valid(longkey));
	longkey[WS_KEY_MAX - 1] = '\0';
	assert_true(ws_key_valid(longkey));
	wt_put_str(f->s, longkey, "longest", NULL);
	wt_assert_content(f->s, longkey, "longest");
	/* A valid key whose segment is longer than a file name can be: a clear error. */
	memset(longkey, 'k', 300);
	longkey[300] = '\0';
	assert_true(ws_key_valid(longkey));
	assert_int_equal(ws_store_put(f->s, longkey, "x", 1, WS_PUT_OVERWRITE, NULL, NULL), -EINVAL);
	assert_non_null(strstr(ws_errmsg(), "300-byte segment"));
	assert_int_equal(ws_store_head(f->s, longkey, NULL), -EINVAL);
	assert_true(ws_key_valid("a.b/c_d-e/..."));
	assert_true(ws_key_valid(".hidden/x"));
	assert_true(ws_key_valid("A/Z/0/9"));
	assert_false(ws_key_valid("a/b/"));
	/* Nothing was created by the rejected calls except the one valid key. */
	assert_int_equal(count_tmp(f->dir), 0);
}

static void test_buf(void **state)
{
	struct ws_buf b;
	(void)state;

	ws_buf_init(&b, 10);
	assert_int_equal(ws_buf_append(&b, "12345678", 8), 0);
	assert_int_equal(ws_buf_append(&b, "abc", 3), WS_ETOOBIG);
	assert_int_equal(b.err, WS_ETOOBIG);
	assert_int_equal(b.len, 8);
	/* Sticky: even a write that would fit fails now. */
	assert_int_equal(ws_buf_append(&b, "a", 1), WS_ETOOBIG);
	assert_int_equal(ws_buf_reserve(&b, 0), WS_ETOOBIG);
	ws_buf_reset(&b);
	assert_int_equal(b.err, 0);
	assert_int_equal(ws_buf_append(&b, "0123456789", 10), 0);
	assert_memory_equal(b.data, "0123456789", 10);
	assert_int_equal(ws_buf_append(&b, NULL, 0), 0);
	assert_int_equal(ws_buf_append(&b, "x", 1), WS_ETOOBIG);
	ws_buf_free(&b);
	assert_null(b.data);
	assert_int_equal(b.max, 10);

	/* Growth from empty to many kilobytes keeps content. */
	ws_buf_init(&b, 0);
	assert_int_equal(b.max, WS_BUF_DEFAULT_MAX);
	for (int i = 0; i < 10000; i++) {
		uint8_t c = (uint8_t)i;
		assert_int_equal(ws_buf_append(&b, &c, 1), 0);
	}
	for (int i = 0; i < 10000; i++)
		assert_int_equal(b.data[i], (uint8_t)i);
	assert_int_equal(ws_buf_reserve(&b, SIZE_MAX), WS_ETOOBIG);
	ws_buf_free(&b);
}

static void test_open_urls(void **state)
{
	struct fixture *f = *state;
	const char *bad[] = { "", "http://x/y", "s3://bucket/prefix", "S3://bucket", "file:relative",
			      "file:/abs", "file://relative/dir", "file://", "file:///",
			      "file:///tmp/x?fsync=0", "file:///tmp/x#frag", "/abs/no/scheme",
			      "file:///tmp/a%20b", "relative" };
	char url[1200];
	struct ws_store *s;
	int err;

	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		err = 0;
		s = ws_store_open(bad[i], &err);
		assert_null(s);
		if (err != WS_ECONFIG)
			fail_msg("url \"%s\": got %d (%s)", bad[i], err, ws_errmsg());
	}
	err = 0;
	assert_null(ws_store_open(NULL, &err));
	assert_int_equal(err, WS_ECONFIG);
	/* s3 URLs go to the s3 backend, which checks them before any request. */
	assert_null(ws_store_open("s3://b/p", &err));
	assert_int_equal(err, WS_ECONFIG);
	assert_non_null(strstr(ws_errmsg(), "bucket name"));
	assert_null(ws_store_file_open("rel/dir", &err));
	assert_int_equal(err, WS_ECONFIG);

	/* A good URL, nested and not yet existing, trailing slash tolerated. */
	snprintf(url, sizeof(url), "file://%s/new/sub/", f->dir);
	s = ws_store_open(url, &err);
	assert_int_equal(err, 0);
	assert_non_null(s);
	assert_string_equal(s->url, url);
	wt_put_str(s, "k", "v", NULL);
	ws_store_close(s);
	char *p = wt_path(f->dir, "new/sub/k");
	size_t len;
	uint8_t *data = wt_read_file(p, &len);
	assert_non_null(data);
	assert_int_equal(len, 1);
	free(data);
	free(p);
}

/* ---- between processes ------------------------------------------------------------ */

enum { CHILD_UNEXPECTED = 3, CHILD_OPEN_FAILED = 4 };

/* Forks n children that wait on a pipe so they all start together; returns the write end. */
static int spawn_children(int n, pid_t *pids, int (*body)(const char *dir, int id), const char *dir)
{
	int go[2];

	assert_int_equal(pipe(go), 0);
	for (int i = 0; i < n; i++) {
		pids[i] = fork();
		assert_true(pids[i] >= 0);
		if (pids[i] == 0) {
			char c;
			close(go[1]);
			/* EOF when the parent closes its end: everybody runs at once. */
			while (read(go[0], &c, 1) < 0 && errno == EINTR)
				;
			_exit(body(dir, i));
		}
	}
	close(go[0]);
	return go[1];
}

static void wait_children(int n, const pid_t *pids)
{
	for (int i = 0; i < n; i++) {
		int st;
		assert_int_equal(waitpid(pids[i], &st, 0), pids[i]);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			fail_msg("child %d: status 0x%x", i, st);
	}
}

enum { RACE_CHILDREN = 4, RACE_ROUNDS = 40 };
static int race_pipe_w = -1;

static int create_racer(const char *dir, int id)
{
	int err;
	struct ws_store *s = ws_store_file_open(dir, &err);

	if (!s)
		return CHILD_OPEN_FAILED;
	for (int r = 0; r < RACE_ROUNDS; r++) {
		char key[64], val[64];
		int rc;
		snprintf(key, sizeof(key), "race/r%03d", r);
		snprintf(val, sizeof(val), "child-%d-round-%d", id, r);
		rc = ws_store_put(s, key, val, strlen(val), WS_PUT_CREATE, NULL, NULL);
		if (rc == 0) {
			unsigned char msg[2] = { (unsigned char)r, (unsigned char)id };
			if (write(race_pipe_w, msg, 2) != 2)
				return CHILD_UNEXPECTED;
		} else if (rc != WS_EPRECOND) {
			fprintf(stderr, "child %d: %s\n", id, ws_errmsg());
			return CHILD_UNEXPECTED;
		}
	}
	ws_store_close(s);
	return 0;
}

static void test_race_create(void **state)
{
	struct fixture *f = *state;
	pid_t pids[RACE_CHILDREN];
	int winner[RACE_ROUNDS], wins[RACE_ROUNDS] = { 0 };
	int res[2], go;
	unsigned char msg[2];
	ssize_t r;

	assert_int_equal(pipe(res), 0);
	race_pipe_w = res[1];
	go = spawn_children(RACE_CHILDREN, pids, create_racer, f->dir);
	close(res[1]);
	close(go);
	while ((r = read(res[0], msg, 2)) == 2) {
		assert_true(msg[0] < RACE_ROUNDS);
		wins[msg[0]]++;
		winner[msg[0]] = msg[1];
	}
	close(res[0]);
	wait_children(RACE_CHILDREN, pids);
	for (int i = 0; i < RACE_ROUNDS; i++) {
		char key[64], val[64];
		if (wins[i] != 1)
			fail_msg("round %d: %d winners", i, wins[i]);
		snprintf(key, sizeof(key), "race/r%03d", i);
		snprintf(val, sizeof(val), "child-%d-round-%d", winner[i], i);
		wt_assert_content(f->s, key, val);
	}
	char *sub = wt_path(f->dir, "race");
	assert_int_equal(count_tmp(sub), 0);
	free(sub);
}

enum { CAS_CHILDREN = 4, CAS_INCREMENTS = 25, CAS_TRIES_MAX = 100000 };

static int cas_incrementer(const char *dir, int id)
{
	int err, done = 0;
	struct ws_store *s = ws_store_file_open(dir, &err);
	struct ws_buf b;

	(void)id;
	if (!s)
		return CHILD_OPEN_FAILED;
	ws_buf_init(&b, 64);
	for (int tries = 0; done < CAS_INCREMENTS && tries < CAS_TRIES_MAX; tries++) {
		struct ws_obj_info info;
		char val[32];
		long n;
		int rc;

		ws_buf_reset(&b);
		if (ws_store_get(s, "cas/counter", 0, UINT64_MAX, &b, &info) != 0 ||
		    ws_buf_append(&b, "", 1) != 0)
			return CHILD_UNEXPECTED;
		n = strtol((const char *)b.data, NULL, 10);
		snprintf(val, sizeof(val), "%ld", n + 1);
		rc = ws_store_put(s, "cas/counter", val, strlen(val), WS_PUT_CAS, &info.etag, NULL);
		if (rc == 0)
			done++;
		else if (rc != WS_EPRECOND)
			return CHILD_UNEXPECTED;
	}
	ws_buf_free(&b);
	ws_store_close(s);
	return done == CAS_INCREMENTS ? 0 : CHILD_UNEXPECTED;
}

static void test_race_cas(void **state)
{
	struct fixture *f = *state;
	pid_t pids[CAS_CHILDREN];
	char want[32];
	int go;

	wt_put_str(f->s, "cas/counter", "0", NULL);
	go = spawn_children(CAS_CHILDREN, pids, cas_incrementer, f->dir);
	close(go);
	wait_children(CAS_CHILDREN, pids);
	/* Every child made exactly CAS_INCREMENTS successful CAS writes: none may be lost. */
	snprintf(want, sizeof(want), "%d", CAS_CHILDREN * CAS_INCREMENTS);
	wt_assert_content(f->s, "cas/counter", want);
}

/*
 * Deleting a directory's last object removes the directory (only lock files
 * are left in it). Children put, read and delete objects of a few
 * directories at once, so each delete may remove a directory while another
 * child is about to create into it: every put must succeed (making the
 * directory again), every object read back, and no directory holding only
 * lock files must be left.
 */
enum { PRUNE_CHILDREN = 4, PRUNE_ROUNDS = 150 };

static int prune_racer(const char *dir, int id)
{
	int err;
	struct ws_store *s = ws_store_file_open(dir, &err);
	struct ws_buf b;

	if (!s)
		return CHILD_OPEN_FAILED;
	ws_buf_init(&b, 64);
	for (int r = 0; r < PRUNE_ROUNDS; r++) {
		char key[64];
		snprintf(key, sizeof(key), "prune/d%d/s/k%d-%d", r % 3, id, r);
		if (id % 2) {
			/* put_many's writes race the prunes too (its own directory
			 * walk and temp file create, on its writer threads). */
			char key2[64];
			struct iovec v = { .iov_base = (void *)"v", .iov_len = 1 };
			struct ws_put_req q[2] = {
				{ .key = key, .iov = &v, .iovcnt = 1, .mode = WS_PUT_CREATE },
				{ .key = key2, .iov = &v, .iovcnt = 1, .mode = WS_PUT_CREATE },
			};
			snprintf(key2, sizeof(key2), "prune/d%d/s/m%d-%d", (r + 1) % 3, id, r);
			if (ws_store_putv_many(s, q, 2) != 0 || q[0].rc || q[1].rc ||
			    ws_store_del(s, key2) != 0) {
				fprintf(stderr, "child %d: put_many: %d %d %s\n", id, q[0].rc, q[1].rc, ws_errmsg());
				return CHILD_UNEXPECTED;
			}
		} else if (ws_store_put(s, key, "v", 1, WS_PUT_CREATE, NULL, NULL) != 0) {
			fprintf(stderr, "child %d: %s\n", id, ws_errmsg());
			return CHILD_UNEXPECTED;
		}
		ws_buf_reset(&b);
		if (ws_store_get(s, key, 0, UINT64_MAX, &b, NULL) != 0 || b.len != 1) {
			fprintf(stderr, "child %d: %s not read back\n", id, key);
			return CHILD_UNEXPECTED;
		}
		if (ws_store_del(s, key) != 0) {
			fprintf(stderr, "child %d: %s\n", id, ws_errmsg());
			return CHILD_UNEXPECTED;
		}
	}
	ws_buf_free(&b);
	ws_store_close(s);
	return 0;
}

/* Directories under path holding nothing but lock files. */
static int lock_only_dirs(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *de;
	int n = 0, entries = 0, locks = 0;

	assert_non_null(d);
	while ((de = readdir(d)) != NULL) {
		char *sub;
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		entries++;
		if (!strncmp(de->d_name, ".lock.", 6))
			locks++;
		if (de->d_type == DT_DIR) {
			sub = wt_path(path, de->d_name);
			n += lock_only_dirs(sub);
			free(sub);
		}
	}
	closedir(d);
	return n + (entries > 0 && entries == locks);
}

/* Lock files in one directory of the sink. */
static int locks_in(const char *root, const char *dir)
{
	char *path = wt_path(root, dir);
	DIR *d = opendir(path);
	struct dirent *de;
	int n = 0;
	assert_non_null(d);
	while ((de = readdir(d)) != NULL)
		n += !strncmp(de->d_name, ".lock.", 6);
	closedir(d);
	free(path);
	return n;
}

/* Create-once objects (a tail's batches and manifests) take no lock, so
 * their directories hold no lock files; an overwrite takes its stripe's. */
static void test_create_once_leaves_no_lock_files(void **state)
{
	struct fixture *f = *state;
	struct iovec v = { .iov_base = (void *)"v", .iov_len = 1 };
	struct ws_put_req q[8];
	char keys[8][32];

	for (int i = 0; i < 8; i++) {
		snprintf(keys[i], sizeof(keys[i]), "gen/b%d", i);
		q[i] = (struct ws_put_req){ .key = keys[i], .iov = &v, .iovcnt = 1, .mode = WS_PUT_CREATE };
	}
	assert_int_equal(ws_store_putv_many(f->s, q, 8), 0);
	for (int i = 0; i < 8; i++)
		assert_int_equal(q[i].rc, 0);
	assert_int_equal(ws_store_put(f->s, "gen/m", "m", 1, WS_PUT_CREATE, NULL, NULL), 0);
	assert_int_equal(ws_store_put(f->s, "gen/m", "m", 1, WS_PUT_CREATE, NULL, NULL), WS_EPRECOND);
	assert_int_equal(locks_in(f->dir, "gen"), 0);
	assert_int_equal(ws_store_put(f->s, "gen/wm", "w", 1, WS_PUT_OVERWRITE, NULL, NULL), 0);
	assert_int_equal(locks_in(f->dir, "gen"), 1);
	wt_assert_content(f->s, "gen/b7", "v");
	wt_assert_content(f->s, "gen/m", "m");
}

static void test_race_prune(void **state)
{
	struct fixture *f = *state;
	pid_t pids[PRUNE_CHILDREN];
	char *sub;
	int go;

	wt_put_str(f->s, "prune/keep", "k", NULL);
	go = spawn_children(PRUNE_CHILDREN, pids, prune_racer, f->dir);
	close(go);
	wait_children(PRUNE_CHILDREN, pids);
	/* Everything deleted: the directories went with their last objects
	 * (prune/ itself holds an object). */
	sub = wt_path(f->dir, "prune/d0");
	assert_int_equal(access(sub, F_OK), -1);
	free(sub);
	assert_int_equal(lock_only_dirs(f->dir), 0);
	wt_assert_content(f->s, "prune/keep", "k");
}

/*
 * A writer waiting on a lock file that a prune unlinks (holding it) must,
 * once it gets the unlinked file's lock, take the one at the name again: a
 * lock on an unlinked file excludes nobody, since the next writer creates a
 * new file there. Here the test plays the prune: it holds the lock file
 * while a child's put waits on it, unlinks it, takes the new file at the
 * name, and only then lets the old one go. The child must still wait.
 */
static bool child_has_open(pid_t pid, const struct stat *want)
{
	char path[64];
	struct dirent *de;
	DIR *d;
	bool found = false;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	if (!(d = opendir(path)))
		return false;
	while (!found && (de = readdir(d)) != NULL) {
		char fdp[320];
		struct stat st;
		snprintf(fdp, sizeof(fdp), "%s/%s", path, de->d_name);
		found = stat(fdp, &st) == 0 && st.st_ino == want->st_ino && st.st_dev == want->st_dev;
	}
	closedir(d);
	return found;
}

static int lock_waiter(const char *dir, int id)
{
	int err;
	struct ws_store *s = ws_store_file_open(dir, &err);
	(void)id;
	return s && ws_store_put(s, "lk/k", "v", 1, WS_PUT_OVERWRITE, NULL, NULL) == 0 ? 0 : CHILD_UNEXPECTED;
}

static void test_lock_unlinked_is_retaken(void **state)
{
	struct fixture *f = *state;
	char lname[32], *lpath;
	struct ws_obj_info info;
	struct stat st;
	int l1, l2, status;
	pid_t pid;

	int go;

	wt_put_str(f->s, "lk/other", "o", NULL);
	snprintf(lname, sizeof(lname), "lk/.lock.%02x", (unsigned)(ws_xxh64("k", 1) % 64));
	lpath = wt_path(f->dir, lname);
	/* The child starts its put once the lock is held (opened after the
	 * fork: a descriptor it inherited would share our lock). */
	go = spawn_children(1, &pid, lock_waiter, f->dir);
	l1 = open(lpath, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	assert_true(l1 >= 0);
	assert_int_equal(flock(l1, LOCK_EX), 0);
	assert_int_equal(fstat(l1, &st), 0);
	close(go);
	/* The child has the lock file open: it waits on it. */
	for (int i = 0; i < 1000 && !child_has_open(pid, &st); i++)
		usleep(10000);
	assert_true(child_has_open(pid, &st));
	assert_int_equal(unlink(lpath), 0);
	l2 = open(lpath, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	assert_true(l2 >= 0);
	assert_int_equal(flock(l2, LOCK_EX), 0);
	close(l1);
	/* It got the unlinked file's lock; it must now wait for ours. */
	usleep(300000);
	assert_int_equal(waitpid(pid, &status, WNOHANG), 0);
	assert_int_equal(ws_store_head(f->s, "lk/k", &info), WS_ENOTFOUND);
	close(l2);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	wt_assert_content(f->s, "lk/k", "v");
	free(lpath);
}

/* ---- crash between write and publish -------------------------------------------------- */

static pid_t crash_child(const char *dir, const char *site, const char *key, const char *val)
{
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		int err;
		struct ws_store *s = ws_store_file_open(dir, &err);
		if (!s)
			_exit(CHILD_OPEN_FAILED);
		ws_fault_arm(site, 1, 1);
		(void)!ws_store_put(s, key, val, strlen(val), WS_PUT_OVERWRITE, NULL, NULL);
		_exit(0); /* reaching here means the fault site did not fire */
	}
	return pid;
}

static void expect_killed(pid_t pid)
{
	int st;

	assert_int_equal(waitpid(pid, &st, 0), pid);
	if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL)
		fail_msg("child was not killed by its fault site: status 0x%x", st);
}

static void test_crash_before_publish(void **state)
{
	struct fixture *f = *state;
	struct ws_list_page page = { 0 };
	char *sub;
	int rc, err;

#ifndef WS_FAULTS
	skip();
#endif
	sub = wt_path(f->dir, "crash");
	wt_put_str(f->s, "crash/old", "old content", NULL);

	/* New key: the writer dies after fsync, before rename. */
	expect_killed(crash_child(f->dir, "file.put.before_publish", "crash/new", "new content"));
	assert_null(wt_get_str(f->s, "crash/new", &rc, NULL));
	assert_int_equal(rc, WS_ENOTFOUND);
	assert_int_equal(count_tmp(sub), 1);

	/* Overwrite: readers still see the old object whole. */
	expect_killed(crash_child(f->dir, "file.put.before_publish", "crash/old", "replacement"));
	wt_assert_content(f->s, "crash/old", "old content");
	assert_int_equal(count_tmp(sub), 1);
	/* And a death before the data is even synced. */
	expect_killed(crash_child(f->dir, "file.put.after_write", "crash/old", "replacement 2"));
	wt_assert_content(f->s, "crash/old", "old content");
	/* Each child's open removed the temp file of the child killed before it. */
	assert_int_equal(count_tmp(sub), 1);

	assert_int_equal(ws_store_list(f->s, "", NULL, 100, &page), 0);
	assert_int_equal(page.count, 1);
	assert_string_equal(page.keys[0], "crash/old");
	ws_list_page_free(&page);

	/* Reopening removes what the dead writers left. */
	ws_store_close(f->s);
	f->s = ws_store_file_open(f->dir, &err);
	assert_non_null(f->s);
	assert_int_equal(count_tmp(sub), 0);
	wt_assert_content(f->s, "crash/old", "old content");
	/* The key is usable afterwards. */
	assert_int_equal(ws_store_put(f->s, "crash/new", "n", 1, WS_PUT_CREATE, NULL, NULL), 0);
	free(sub);
}

/* A live writer's temp file is not stale, even to another handle's open. */
static void test_open_keeps_live_tmp(void **state)
{
	struct fixture *f = *state;
	char name[64];
	char *p;
	struct ws_store *s2;
	int err;

	snprintf(name, sizeof(name), ".tmp.%ld.999", (long)getpid());
	p = wt_path(f->dir, name);
	assert_int_equal(wt_write_file(p, "x", 1), 0);
	s2 = ws_store_file_open(f->dir, &err);
	assert_non_null(s2);
	ws_store_close(s2);
	assert_int_equal(count_tmp(f->dir), 1);
	unlink(p);
	free(p);
}

static void test_fault_fail_paths(void **state)
{
	struct fixture *f = *state;
	int rc;

#ifndef WS_FAULTS
	skip();
#endif
	wt_put_str(f->s, "ff/k", "before", NULL);
	ws_fault_arm("file.put.after_write", 1, 0);
	assert_int_equal(ws_store_put(f->s, "ff/k", "after", 5, WS_PUT_OVERWRITE, NULL, NULL), -EIO);
	assert_non_null(strstr(ws_errmsg(), "ff/k"));
	ws_fault_arm("file.put.before_publish", 1, 0);
	assert_int_equal(ws_store_put(f->s, "ff/n", "new", 3, WS_PUT_CREATE, NULL, NULL), -EIO);
	assert_null(wt_get_str(f->s, "ff/n", &rc, NULL));
	assert_int_equal(rc, WS_ENOTFOUND);
	/* Failing after publish is an ambiguous failure: the object may be there. */
	ws_fault_arm("file.put.after_publish", 1, 0);
	assert_int_equal(ws_store_put(f->s, "ff/k", "after", 5, WS_PUT_OVERWRITE, NULL, NULL), -EIO);
	ws_fault_disarm();
	wt_assert_content(f->s, "ff/k", "after");
	char *sub = wt_path(f->dir, "ff");
	assert_int_equal(count_tmp(sub), 0);
	free(sub);
}


/* ---- a create-once that loses to a writer killed before its fsync ------------------- */

/*
 * A writer killed between link() and its directory fsync() leaves the entry
 * in the page cache only. The next CREATE of that key must not answer "it
 * exists" (on which callers act: a watermark CAS, a decision) before the
 * entry is durable: it fsyncs the directory first. The fault site in front
 * of that fsync proves the path: armed to fail, the CREATE fails there
 * instead of reporting WS_EPRECOND.
 */
static void test_create_exists_is_made_durable(void **state)
{
	struct fixture *f = *state;
	const char *keys[] = { "dur/k", "dur/s0000000000000007/part" };
	int rc;

#ifndef WS_FAULTS
	skip();
#endif
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		pid_t pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			int err;
			struct ws_store *s = ws_store_file_open(f->dir, &err);
			if (!s)
				_exit(CHILD_OPEN_FAILED);
			ws_fault_arm("file.put.after_publish", 1, 1);
			(void)!ws_store_put(s, keys[i], "first", 5, WS_PUT_CREATE, NULL, NULL);
			_exit(0);
		}
		expect_killed(pid);
		/* Published (visible) but the child never reached its fsync. */
		wt_assert_content(f->s, keys[i], "first");

		ws_fault_arm("file.put.exists_fsync", 1, 0);
		rc = ws_store_put(f->s, keys[i], "second", 6, WS_PUT_CREATE, NULL, NULL);
		ws_fault_disarm();
		assert_int_equal(rc, -EIO);
		assert_non_null(strstr(ws_errmsg(), "fsync of an existing entry"));

		/* Unarmed: the fsync succeeds, then the loss is reported. */
		assert_int_equal(ws_store_put(f->s, keys[i], "second", 6, WS_PUT_CREATE, NULL, NULL), WS_EPRECOND);
		wt_assert_content(f->s, keys[i], "first");
	}
}

/* ---- put_many: n puts sharing their waits ----------------------------------------------- */

enum { PM_KEYS = 70 };

struct pm_set {
	char keys[PM_KEYS][48];
	char vals[PM_KEYS][48];
	struct iovec iov[PM_KEYS];
	struct ws_put_req reqs[PM_KEYS];
};

/* PM_KEYS puts over three directories: more keys in "pm/a" than it has lock
 * stripes, so some must share one (a put_many that locked each key on its
 * own would wait for itself there for ever). */
static void pm_fill(struct pm_set *p, const char *tag, enum ws_put_mode mode)
{
	static const char *dirs[] = { "pm/a", "pm/b/c", "pm" };

	for (int i = 0; i < PM_KEYS; i++) {
		const char *dir = i < 66 ? dirs[0] : dirs[1 + i % 2];
		snprintf(p->keys[i], sizeof(p->keys[i]), "%s/k%03d", dir, i);
		snprintf(p->vals[i], sizeof(p->vals[i]), "%s value %d", tag, i);
		p->iov[i].iov_base = p->vals[i];
		p->iov[i].iov_len = strlen(p->vals[i]);
		memset(&p->reqs[i], 0, sizeof(p->reqs[i]));
		p->reqs[i].key = p->keys[i];
		p->reqs[i].iov = &p->iov[i];
		p->reqs[i].iovcnt = 1;
		p->reqs[i].mode = mode;
		p->reqs[i].rc = 12345;
	}
}

/*
 * Each request of a put_many gets its own result: a create-once of a key
 * that exists is WS_EPRECOND and leaves it alone, a bad key is -EINVAL, the
 * others are published whole (create-once and overwrite), and no temp file
 * is left behind.
 */
static void test_put_many(void **state)
{
	struct fixture *f = *state;
	struct pm_set *p = calloc(1, sizeof(*p));
	char *sub;

	assert_non_null(p);
	pm_fill(p, "first", WS_PUT_CREATE);
	assert_int_equal(ws_store_putv_many(f->s, p->reqs, PM_KEYS), 0);
	for (int i = 0; i < PM_KEYS; i++) {
		assert_int_equal(p->reqs[i].rc, 0);
		wt_assert_content(f->s, p->keys[i], p->vals[i]);
	}

	/* Again, as create-once: every key exists (one made bad, one new). */
	pm_fill(p, "second", WS_PUT_CREATE);
	snprintf(p->keys[5], sizeof(p->keys[5]), "pm/a/.tmp.reserved");
	snprintf(p->keys[67], sizeof(p->keys[67]), "pm/b/c/new");
	assert_int_equal(ws_store_putv_many(f->s, p->reqs, PM_KEYS), 0);
	for (int i = 0; i < PM_KEYS; i++) {
		char want[48];
		if (i == 5) {
			assert_int_equal(p->reqs[i].rc, -EINVAL);
			continue;
		}
		if (i == 67) {
			assert_int_equal(p->reqs[i].rc, 0);
			wt_assert_content(f->s, p->keys[i], p->vals[i]);
			continue;
		}
		assert_int_equal(p->reqs[i].rc, WS_EPRECOND);
		snprintf(want, sizeof(want), "first value %d", i);
		wt_assert_content(f->s, p->keys[i], want);
	}

	/* Overwrite: all replaced. */
	pm_fill(p, "third", WS_PUT_OVERWRITE);
	assert_int_equal(ws_store_putv_many(f->s, p->reqs, PM_KEYS), 0);
	for (int i = 0; i < PM_KEYS; i++) {
		assert_int_equal(p->reqs[i].rc, 0);
		wt_assert_content(f->s, p->keys[i], p->vals[i]);
	}
	/* A swap has an expected etag, which a put_many request cannot carry. */
	pm_fill(p, "fourth", WS_PUT_OVERWRITE);
	p->reqs[3].mode = WS_PUT_CAS;
	assert_int_equal(ws_store_putv_many(f->s, p->reqs, 8), 0);
	assert_int_equal(p->reqs[3].rc, -EINVAL);
	wt_assert_content(f->s, p->keys[3], "third value 3");
	assert_int_equal(p->reqs[4].rc, 0);

	/* Counted as puts, each once. */
	assert_int_equal(f->s->stats.puts, 3 * PM_KEYS + 8);
	sub = wt_path(f->dir, "pm/a");
	assert_int_equal(count_tmp(sub), 0);
	free(sub);
	sub = wt_path(f->dir, "pm/b/c");
	assert_int_equal(count_tmp(sub), 0);
	free(sub);
	free(p);
}

/*
 * A put_many killed part way leaves what n puts killed part way would: each
 * object absent or whole (never a partial one), and a temp file the next
 * open removes. Killed before its first publish, nothing is visible; killed
 * after its second, exactly the first two are.
 */
static void test_put_many_crash(void **state)
{
	struct fixture *f = *state;
	static const struct {
		const char *site;
		unsigned nth;
		int visible;
	} cases[] = {
		{ "file.put.after_write", 3, 0 },
		{ "file.put.before_publish", 3, 0 },
		{ "file.put.after_publish", 2, 2 },
	};
	struct pm_set *p = calloc(1, sizeof(*p));
	int err;

#ifndef WS_FAULTS
	skip();
#endif
	assert_non_null(p);
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		char tag[32];
		pid_t pid;

		snprintf(tag, sizeof(tag), "case %zu", c);
		pm_fill(p, tag, WS_PUT_CREATE);
		for (int i = 0; i < 8; i++)
			snprintf(p->keys[i], sizeof(p->keys[i]), "pmc/%zu/k%d", c, i);
		pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			struct ws_store *s = ws_store_file_open(f->dir, &err);
			if (!s)
				_exit(CHILD_OPEN_FAILED);
			ws_fault_arm(cases[c].site, cases[c].nth, 1);
			(void)!ws_store_putv_many(s, p->reqs, 8);
			_exit(0);
		}
		expect_killed(pid);
		for (int i = 0; i < 8; i++) {
			int rc = 0;
			char *got = wt_get_str(f->s, p->keys[i], &rc, NULL);
			if (i < cases[c].visible) {
				assert_non_null(got);
				assert_string_equal(got, p->vals[i]);
			} else {
				if (got)
					fail_msg("%s hit %u: %s is visible", cases[c].site, cases[c].nth, p->keys[i]);
				assert_int_equal(rc, WS_ENOTFOUND);
			}
			free(got);
		}
	}
	/* Reopening removes what the dead writers left. */
	ws_store_close(f->s);
	f->s = ws_store_file_open(f->dir, &err);
	assert_non_null(f->s);
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		char rel[32];
		char *sub;
		snprintf(rel, sizeof(rel), "pmc/%zu", c);
		sub = wt_path(f->dir, rel);
		assert_int_equal(count_tmp(sub), 0);
		free(sub);
	}
	free(p);
}

/*
 * A request that fails in a put_many fails alone; the others go on, and the
 * error detail names it on the caller's thread (the temp files are written
 * by two threads, so which request meets the 4th write is not fixed).
 */
static void test_put_many_fault_one(void **state)
{
	struct fixture *f = *state;
	static const char *sites[] = { "file.put.after_write", "file.put.before_publish" };
	struct pm_set *p = calloc(1, sizeof(*p));

#ifndef WS_FAULTS
	skip();
#endif
	assert_non_null(p);
	for (size_t c = 0; c < 2; c++) {
		int failed = -1;
		pm_fill(p, sites[c], WS_PUT_CREATE);
		for (int i = 0; i < 6; i++)
			snprintf(p->keys[i], sizeof(p->keys[i]), "pmf/%zu/k%d", c, i);
		ws_fault_arm(sites[c], 4, 0);
		assert_int_equal(ws_store_putv_many(f->s, p->reqs, 6), 0);
		ws_fault_disarm();
		for (int i = 0; i < 6; i++) {
			if (p->reqs[i].rc == 0)
				continue;
			assert_int_equal(failed, -1);
			failed = i;
		}
		if (failed < 0)
			fail_msg("%s: no request failed", sites[c]);
		if (!strstr(ws_errmsg(), p->keys[failed]))
			fail_msg("%s: the error detail '%s' does not name %s", sites[c], ws_errmsg(), p->keys[failed]);
		/* Publishing runs on the caller's thread, in order. */
		if (c == 1)
			assert_int_equal(failed, 3);
		for (int i = 0; i < 6; i++) {
			int rc = 0;
			char *got = wt_get_str(f->s, p->keys[i], &rc, NULL);
			if (i == failed) {
				assert_int_equal(p->reqs[i].rc, -EIO);
				assert_null(got);
				assert_int_equal(rc, WS_ENOTFOUND);
			} else {
				assert_int_equal(p->reqs[i].rc, 0);
				assert_non_null(got);
				assert_string_equal(got, p->vals[i]);
			}
			free(got);
		}
		char rel[32];
		snprintf(rel, sizeof(rel), "pmf/%zu", c);
		char *sub = wt_path(f->dir, rel);
		assert_int_equal(count_tmp(sub), 0);
		free(sub);
	}
	free(p);
}

/* ---- links, FIFOs and devices in the sink --------------------------------------------- */

static bool file_has(const char *path, const char *want)
{
	char buf[64] = "";
	FILE *fp = fopen(path, "r");
	size_t n;

	if (!fp)
		return false;
	n = fread(buf, 1, sizeof(buf) - 1, fp);
	fclose(fp);
	buf[n] = '\0';
	return strcmp(buf, want) == 0;
}

/*
 * A directory or file in the sink that is a symbolic link (to anywhere), a
 * FIFO or a device is never followed or opened: reads, writes and deletes
 * through it are refused with WS_EFORMAT naming it, nothing outside the sink
 * is read, created or removed, and a FIFO does not block a reader.
 */
static void test_links_fifos_devices(void **state)
{
	struct fixture *f = *state;
	char *outside = wt_tmpdir("store_file_outside");
	char *p, *q;
	struct ws_list_page page = { 0 };
	int rc;

	assert_non_null(outside);
	q = wt_path(outside, "victim");
	assert_int_equal(wt_write_file(q, "precious", 8), 0);

	/* A tenant directory that is a link to elsewhere. */
	p = wt_path(f->dir, "t1");
	assert_int_equal(symlink(outside, p), 0);
	free(p);
	assert_null(wt_get_str(f->s, "t1/victim", &rc, NULL));
	assert_int_equal(rc, WS_EFORMAT);
	assert_non_null(strstr(ws_errmsg(), "symbolic link"));
	assert_int_equal(ws_store_head(f->s, "t1/victim", NULL), WS_EFORMAT);
	assert_int_equal(ws_store_del(f->s, "t1/victim"), WS_EFORMAT);
	assert_int_equal(ws_store_put(f->s, "t1/new", "x", 1, WS_PUT_OVERWRITE, NULL, NULL), WS_EFORMAT);
	assert_int_equal(ws_store_put(f->s, "t1/g/new", "x", 1, WS_PUT_CREATE, NULL, NULL), WS_EFORMAT);
	assert_true(file_has(q, "precious"));
	p = wt_path(outside, "new");
	assert_int_equal(access(p, F_OK), -1);
	free(p);
	p = wt_path(outside, "g");
	assert_int_equal(access(p, F_OK), -1);
	free(p);

	/* A generation directory below a real tenant directory. */
	wt_put_str(f->s, "t2/wm", "w", NULL);
	p = wt_path(f->dir, "t2/g");
	assert_int_equal(symlink(outside, p), 0);
	free(p);
	assert_int_equal(ws_store_del(f->s, "t2/g/victim"), WS_EFORMAT);
	assert_true(file_has(q, "precious"));

	/* An object that is a link to a file elsewhere. */
	p = wt_path(f->dir, "t2/obj");
	assert_int_equal(symlink(q, p), 0);
	free(p);
	assert_null(wt_get_str(f->s, "t2/obj", &rc, NULL));
	assert_int_equal(rc, WS_EFORMAT);
	assert_int_equal(ws_store_del(f->s, "t2/obj"), WS_EFORMAT);
	assert_int_equal(ws_store_put(f->s, "t2/obj", "x", 1, WS_PUT_CREATE, NULL, NULL), WS_EFORMAT);
	assert_true(file_has(q, "precious"));

	/* A FIFO and a device where objects belong: refused, without blocking. */
	p = wt_path(f->dir, "t2/fifo");
	assert_int_equal(mkfifo(p, 0644), 0);
	free(p);
	assert_null(wt_get_str(f->s, "t2/fifo", &rc, NULL));
	assert_int_equal(rc, WS_EFORMAT);
	assert_non_null(strstr(ws_errmsg(), "FIFO"));
	assert_int_equal(ws_store_put(f->s, "t2/fifo", "x", 1, WS_PUT_CAS, &(struct ws_etag){ .s = "e" }, NULL),
			 WS_EFORMAT);
	p = wt_path(f->dir, "t2/null");
	if (mknod(p, S_IFCHR | 0666, makedev(1, 3)) == 0) { /* as root only */
		assert_null(wt_get_str(f->s, "t2/null", &rc, NULL));
		assert_int_equal(rc, WS_EFORMAT);
		assert_int_equal(ws_store_del(f->s, "t2/null"), WS_EFORMAT);
		assert_int_equal(access(p, F_OK), 0);
	}
	free(p);

	/* Lock files (".lock.00" .. ".lock.3f") planted as links out of the
	 * sink, or as FIFOs: a put neither opens them nor blocks on them. */
	wt_put_str(f->s, "t3/wm", "w", NULL);
	wt_put_str(f->s, "t4/wm", "w", NULL);
	for (unsigned i = 0; i < 64; i++) {
		char lname[32];
		snprintf(lname, sizeof(lname), "t3/.lock.%02x", i);
		p = wt_path(f->dir, lname);
		unlink(p);
		assert_int_equal(symlink(q, p), 0);
		free(p);
		snprintf(lname, sizeof(lname), "t4/.lock.%02x", i);
		p = wt_path(f->dir, lname);
		unlink(p);
		assert_int_equal(mkfifo(p, 0644), 0);
		free(p);
	}
	assert_int_equal(ws_store_put(f->s, "t3/k", "x", 1, WS_PUT_OVERWRITE, NULL, NULL), WS_EFORMAT);
	assert_non_null(strstr(ws_errmsg(), "lock file"));
	assert_int_equal(ws_store_del(f->s, "t3/wm"), WS_EFORMAT);
	assert_int_equal(ws_store_put(f->s, "t4/k", "x", 1, WS_PUT_OVERWRITE, NULL, NULL), WS_EFORMAT);
	assert_non_null(strstr(ws_errmsg(), "FIFO"));
	/* A create-once takes no lock: it never comes near them. */
	assert_int_equal(ws_store_put(f->s, "t3/c", "c", 1, WS_PUT_CREATE, NULL, NULL), 0);
	assert_true(file_has(q, "precious"));
	wt_assert_content(f->s, "t3/wm", "w");

	/* A listing shows the objects only. */
	assert_int_equal(ws_store_list(f->s, "", NULL, 100, &page), 0);
	assert_int_equal(page.count, 4);
	assert_string_equal(page.keys[0], "t2/wm");
	assert_string_equal(page.keys[1], "t3/c");
	assert_string_equal(page.keys[2], "t3/wm");
	assert_string_equal(page.keys[3], "t4/wm");
	ws_list_page_free(&page);

	free(q);
	wt_rmrf(outside);
	free(outside);
}

/* ---- a directory pruned and made again ------------------------------------------------ */

/*
 * A directory removed with its last object (a prune) and made again by a
 * later put has its entry in its parent synced again: ext4 hands the new
 * directory the inode number the old one had, and a cache keyed by path
 * and inode took it for the one already synced, leaving the entry of an
 * acknowledged object's directory unsynced. The sync is seen through the
 * fault site just before it.
 */
static void test_remade_dir_entry_synced(void **state)
{
	struct fixture *f = *state;
	char *g = wt_path(f->dir, "t/g1");
	struct stat st;
	ino_t before;
	int rc;
#ifndef WS_FAULTS
	skip(); /* armed at a fault site */
#endif

	wt_put_str(f->s, "t/g1/x", "1", NULL);
	assert_int_equal(stat(g, &st), 0);
	before = st.st_ino;
	assert_int_equal(ws_store_del(f->s, "t/g1/x"), 0);
	assert_int_equal(stat(g, &st), -1); /* pruned with its last object */
	ws_fault_arm("file.put.dir_entry_fsync", 1, 0);
	rc = ws_store_put(f->s, "t/g1/y", "2", 1, WS_PUT_CREATE, NULL, NULL);
	ws_fault_disarm();
	assert_int_equal(rc, -EIO); /* the entry of the new t/g1 in t is synced */
	wt_put_str(f->s, "t/g1/y", "2", NULL);
	assert_int_equal(stat(g, &st), 0);
	print_message("  t/g1 made again with inode %s\n", st.st_ino == before ? "reused" : "new");
	free(g);
}

/* A writer's open syncs the root's entry in its parent even when the root
 * already existed (made by `mkdir -p` just before, not yet durable): every
 * object acknowledged under it depends on that entry. */
static void test_existing_root_entry_synced(void **state)
{
	struct fixture *f = *state;
	char *root = wt_path(f->dir, "made-before");
	struct ws_store *s;
	int err = 0;
#ifndef WS_FAULTS
	skip(); /* armed at a fault site */
#endif

	assert_int_equal(mkdir(root, 0755), 0);
	ws_fault_arm("file.open.root_entry_fsync", 1, 0);
	s = ws_store_file_open(root, &err);
	ws_fault_disarm();
	assert_null(s);
	assert_int_equal(err, -EIO);
	s = ws_store_file_open(root, &err);
	assert_non_null(s);
	ws_store_close(s);
	/* A reader's open (the sink must exist) writes nothing, syncs nothing. */
	ws_fault_arm("file.open.root_entry_fsync", 1, 0);
	s = ws_store_file_open_flags(root, WS_STORE_EXISTING, &err);
	ws_fault_disarm();
	assert_non_null(s);
	ws_store_close(s);
	free(root);
}

/* An object shrunk by someone else between its size and its bytes (a cp
 * over the sink truncates first) is an error for a HEAD or a swap, never a
 * SIGBUS for the whole process (its etag was hashed from a mapping). */
static char *g_shrink_path;

static void shrink_now(const char *site, void *arg)
{
	(void)site;
	(void)arg;
	assert_int_equal(truncate(g_shrink_path, 3), 0);
}

static void test_object_shrunk_under_head(void **state)
{
	struct fixture *f = *state;
	char big[3 * 4096];
	struct ws_obj_info info;
	int rc;
#ifndef WS_FAULTS
	skip(); /* armed at a fault site */
#endif

	memset(big, 'x', sizeof(big));
	assert_int_equal(ws_store_put(f->s, "t/shrinks", big, sizeof(big), WS_PUT_OVERWRITE, NULL, NULL), 0);
	g_shrink_path = wt_path(f->dir, "t/shrinks");
	assert_int_equal(ws_fault_arm_pause("file.etag.before_read", 1, shrink_now, NULL), 0);
	rc = ws_store_head(f->s, "t/shrinks", &info);
	ws_fault_disarm();
	assert_int_equal(rc, -EIO);
	free(g_shrink_path);
	g_shrink_path = NULL;
}

/* Two deletes of one key at once: the one that finds the key's directory
 * pruned by the other (its last object gone) has nothing left to delete,
 * and succeeds, as a delete of a missing key does (it failed "cannot open
 * lock file", stopping retention's batch). */
static struct ws_store *g_other;

static void delete_meanwhile(const char *site, void *arg)
{
	(void)site;
	(void)arg;
	assert_int_equal(ws_store_del(g_other, "t/gone/x"), 0);
}

static void test_concurrent_delete_same_key(void **state)
{
	struct fixture *f = *state;
	struct ws_obj_info info;
	int err = 0, rc;

	g_other = ws_store_file_open(f->dir, &err);
	assert_non_null(g_other);
	wt_put_str(f->s, "t/gone/x", "1", NULL);
	assert_int_equal(ws_fault_arm_pause("file.del.before_lock", 1, delete_meanwhile, NULL), 0);
	rc = ws_store_del(f->s, "t/gone/x");
	ws_fault_disarm();
	if (rc)
		fail_msg("delete: %s (%s)", ws_errmsg(), ws_strerror(rc));
	assert_int_equal(ws_store_head(f->s, "t/gone/x", &info), WS_ENOTFOUND);
	ws_store_close(g_other);
	g_other = NULL;
}

/* ---- top-level names of any length ---------------------------------------------------- */

/* ws_store_next_top steps over every top-level name, whatever its length
 * (a 255-byte file name, a 200-byte directory), and ends; an object at the
 * top is stepped over by itself: an object "db" used to hide the names
 * between it and "db/~" ("db-2", "db.x"), and with them tenants from ls,
 * verify and a checkpoint's cut. */
static void test_next_top_long_names(void **state)
{
	struct fixture *f = *state;
	char long_dir[201], long_file[256], key[WS_KEY_MAX], name[WS_KEY_MAX] = "", next[WS_KEY_MAX];
	const char *want[5];
	size_t n = 0;

	memset(long_dir, 'b', sizeof(long_dir) - 1);
	long_dir[sizeof(long_dir) - 1] = '\0';
	memset(long_file, 'c', sizeof(long_file) - 1);
	long_file[sizeof(long_file) - 1] = '\0';
	wt_put_str(f->s, "a/wm", "1", NULL);
	snprintf(key, sizeof(key), "%s/x/y", long_dir);
	wt_put_str(f->s, key, "2", NULL);
	wt_put_str(f->s, long_file, "3", NULL);
	wt_put_str(f->s, "d/wm", "4", NULL);
	wt_put_str(f->s, "db", "5", NULL);
	wt_put_str(f->s, "db-2/wm", "6", NULL);
	wt_put_str(f->s, "db.x/wm", "7", NULL);
	want[0] = "a";
	want[1] = long_dir;
	want[2] = "d";
	want[3] = "db-2";
	want[4] = "db.x";
	for (;;) {
		assert_int_equal(ws_store_next_top(f->s, name, next), 0);
		if (!next[0])
			break;
		assert_true(n < 5);
		assert_string_equal(next, want[n]);
		n++;
		memcpy(name, next, sizeof(name));
	}
	assert_int_equal(n, 5);
}


/* ---- a backend that does not move on ----------------------------------------------- */

/*
 * A fake backend, because no real one repeats itself on demand: its list
 * answers every call with the same truncated page, as a buggy or hostile
 * server could. Every paging loop over ws_store_list and ws_store_next_top
 * must end with an error instead of asking again for ever.
 */
static int stuck_list(struct ws_store *s, const char *prefix, const char *token, unsigned max_keys,
		      struct ws_list_page *out)
{
	(void)s;
	(void)prefix;
	(void)token;
	(void)max_keys;
	memset(out, 0, sizeof(*out));
	out->keys = calloc(1, sizeof(*out->keys));
	out->sizes = calloc(1, sizeof(*out->sizes));
	assert_non_null(out->keys);
	assert_non_null(out->sizes);
	out->keys[0] = strdup("a/wm");
	assert_non_null(out->keys[0]);
	out->count = 1;
	out->truncated = true;
	snprintf(out->next_token, sizeof(out->next_token), "a/wm");
	return 0;
}

static void stuck_close(struct ws_store *s)
{
	(void)s;
}

static void test_list_must_advance(void **state)
{
	static const struct ws_store_ops ops = { .list = stuck_list, .close = stuck_close };
	struct ws_store s = { .ops = &ops, .url = "stuck://" };
	struct ws_list_page page = { 0 };
	char next[WS_KEY_MAX];

	(void)state;
	/* The first page is fine: its key is past "" and under the prefix. */
	assert_int_equal(ws_store_list(&s, "a/", "", 10, &page), 0);
	assert_int_equal(page.count, 1);
	ws_list_page_free(&page);
	/* Asked for what follows "a/wm", it answers "a/wm" again. */
	assert_int_equal(ws_store_list(&s, "a/", "a/wm", 10, &page), -EPROTO);
	assert_non_null(strstr(ws_errmsg(), "a/wm"));
	assert_int_equal(page.count, 0);
	/* Keys outside the prefix asked for. */
	assert_int_equal(ws_store_list(&s, "b/", "", 10, &page), -EPROTO);
	/* Top-level names: "a", then "a" again is an error, not a loop. */
	assert_int_equal(ws_store_next_top(&s, "", next), 0);
	assert_string_equal(next, "a");
	assert_int_equal(ws_store_next_top(&s, "a", next), -EPROTO);
	assert_string_equal(next, "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_roundtrip, setup, teardown),
		cmocka_unit_test_setup_teardown(test_delete_many, setup, teardown),
		cmocka_unit_test_setup_teardown(test_empty_and_iovecs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_large_range, setup, teardown),
		cmocka_unit_test_setup_teardown(test_overwrite, setup, teardown),
		cmocka_unit_test_setup_teardown(test_get_changed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_create_once_leaves_no_lock_files, setup, teardown),
		cmocka_unit_test_setup_teardown(test_create_once, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cas, setup, teardown),
		cmocka_unit_test_setup_teardown(test_list_paging, setup, teardown),
		cmocka_unit_test_setup_teardown(test_list_size_beyond_a_store, setup, teardown),
		cmocka_unit_test_setup_teardown(test_nested_and_conflicts, setup, teardown),
		cmocka_unit_test_setup_teardown(test_invalid_keys, setup, teardown),
		cmocka_unit_test(test_buf),
		cmocka_unit_test_setup_teardown(test_open_urls, setup, teardown),
		cmocka_unit_test_setup_teardown(test_race_create, setup, teardown),
		cmocka_unit_test_setup_teardown(test_race_cas, setup, teardown),
		cmocka_unit_test_setup_teardown(test_race_prune, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lock_unlinked_is_retaken, setup, teardown),
		cmocka_unit_test_setup_teardown(test_crash_before_publish, setup, teardown),
		cmocka_unit_test_setup_teardown(test_open_keeps_live_tmp, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fault_fail_paths, setup, teardown),
		cmocka_unit_test_setup_teardown(test_create_exists_is_made_durable, setup, teardown),
		cmocka_unit_test_setup_teardown(test_put_many, setup, teardown),
		cmocka_unit_test_setup_teardown(test_put_many_crash, setup, teardown),
		cmocka_unit_test_setup_teardown(test_put_many_fault_one, setup, teardown),
		cmocka_unit_test_setup_teardown(test_links_fifos_devices, setup, teardown),
		cmocka_unit_test_setup_teardown(test_next_top_long_names, setup, teardown),
		cmocka_unit_test_setup_teardown(test_remade_dir_entry_synced, setup, teardown),
		cmocka_unit_test_setup_teardown(test_existing_root_entry_synced, setup, teardown),
		cmocka_unit_test_setup_teardown(test_object_shrunk_under_head, setup, teardown),
		cmocka_unit_test_setup_teardown(test_concurrent_delete_same_key, setup, teardown),
		cmocka_unit_test(test_list_must_advance),
	};

	/* WS_TEST_FILTER=GLOB runs a subset (wt_run_group). */
	return WT_RUN_GROUP(tests, NULL, NULL);
}
