/*
 * Bad input gets a clear error and loses nothing (DESIGN invariants 6, 8):
 * a -wal file that is not a WAL uploads nothing; every kind of damage to a
 * shipped sink (flipped, truncated, missing or swapped objects, a garbage
 * watermark, a foreign tenant's object) makes verify name the object and
 * restore refuse without leaving anything at or next to the output path;
 * bad tenant names and missing databases are refused up front.
 *
 * Each sink-damage case works on a fresh `cp -a` copy of one good sink.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <inttypes.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core_internal.h"
#include "ws_stream.h"
#include "coreutil.h"
#include "walship.h"
#include "ws_format.h"
#include "ws_hash.h"
#include "ws_store.h"

#define TENANT "ledger"

/* ---- helpers ------------------------------------------------------------ */

static uint64_t content_hash(sqlite3 *db)
{
	sqlite3_stmt *s = NULL;
	uint64_t h = 1469598103934665603ull;
	int rc;
	assert_int_equal(sqlite3_prepare_v2(db, "SELECT k, v FROM t ORDER BY 1", -1, &s, NULL), SQLITE_OK);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		int64_t k = sqlite3_column_int64(s, 0);
		int n = sqlite3_column_bytes(s, 1);
		wt_fnv(&h, &k, sizeof(k));
		wt_fnv(&h, &n, sizeof(n));
		if (n > 0)
			wt_fnv(&h, sqlite3_column_blob(s, 1), (size_t)n);
	}
	assert_int_equal(rc, SQLITE_DONE);
	sqlite3_finalize(s);
	return h;
}

static uint64_t file_hash(const char *path)
{
	sqlite3 *db = wt_open_checked(path);
	uint64_t h = content_hash(db);
	sqlite3_close(db);
	return h;
}

static bool dir_empty(const char *dir)
{
	char *tmp;
	size_t len = 0;
	uint8_t *b;
	bool empty;
	assert_int_not_equal(asprintf(&tmp, "%s.ls", dir), -1);
	assert_int_equal(wt_sh("ls -A '%s' > '%s'", dir, tmp), 0);
	b = wt_read_file(tmp, &len);
	empty = len == 0;
	if (!empty)
		fprintf(stderr, "left in %s: %.*s\n", dir, (int)len, (const char *)b);
	free(b);
	unlink(tmp);
	free(tmp);
	return empty;
}

/* Relative keys of the sink's objects whose find(1) predicate matches, sorted. */
static size_t find_keys(const char *sink_dir, const char *pred, char keys[][WS_KEY_MAX], size_t max)
{
	char *tmp;
	size_t len = 0, n = 0;
	char *b, *line, *save = NULL;
	assert_int_not_equal(asprintf(&tmp, "%s.keys", sink_dir), -1);
	assert_int_equal(wt_sh("cd '%s' && find . -type f ! -name '.*' %s | sed 's|^\\./||' | LC_ALL=C sort > '%s'",
			       sink_dir, pred, tmp),
			 0);
	b = (char *)wt_read_file(tmp, &len);
	assert_non_null(b);
	b[len] = '\0';
	for (line = strtok_r(b, "\n", &save); line && n < max; line = strtok_r(NULL, "\n", &save))
		snprintf(keys[n++], WS_KEY_MAX, "%s", line);
	free(b);
	unlink(tmp);
	free(tmp);
	return n;
}

static struct ws_stream *stream_for(struct ws_sink *sink, const char *tenant, const char *db, int *err)
{
	struct ws_stream_config c;
	memset(&c, 0, sizeof(c));
	c.tenant = tenant;
	c.db_path = db;
	c.epoch = 1;
	c.pointer_generation = 1;
	c.batch_bytes_max = 128u << 10;
	c.wal_checkpoint_bytes = UINT64_MAX;
	return ws_stream_open(sink, &c, err);
}

static void tail_ok(struct ws_stream *st)
{
	struct ws_outcome o;
	wt_tail_ok(st, &o);
	assert_true(o.kind == WS_OUTCOME_STREAMED || o.kind == WS_OUTCOME_RESTARTED);
}

/* Problems reported by verify. */
struct problems {
	unsigned count;
	char detail[16][1024];
	char key[16][WS_KEY_MAX];
	char tenant[16][WS_TENANT_MAX];
	int err[16];
};

static void problem_cb(const char *tenant, const char *key, int err, const char *detail, void *arg)
{
	struct problems *p = arg;
	if (p->count < 16) {
		snprintf(p->tenant[p->count], WS_TENANT_MAX, "%s", tenant ? tenant : "");
		snprintf(p->key[p->count], WS_KEY_MAX, "%s", key ? key : "");
		snprintf(p->detail[p->count], sizeof(p->detail[0]), "%s", detail ? detail : "");
		p->err[p->count] = err;
	}
	p->count++;
}

/* ---- garbage WAL ---------------------------------------------------------- */

/*
 * A -wal of garbage (or shorter than a header) beside a database nobody has
 * open: SQLite rebuilds its wal-index from the file, finds no valid header
 * and reads the database file alone, so the tail ships that (it failed on
 * it every call before, leaving the tenant without a backup until the
 * application wrote again), and leaves the file as it was. Under a live
 * wal-index that names frames the same header is an error (test_cli.sh).
 */
static void garbage_wal_case(size_t wal_len, bool shipped_before)
{
	struct wt_env s;
	struct ws_stream *st;
	struct ws_outcome o;
	uint8_t *junk = malloc(wal_len);
	uint8_t *after;
	size_t after_len = 0;
	uint64_t rng = 0x5eed + wal_len;
	uint64_t h_db;
	char *out;
	int err = 0, rc;

	wt_env_init(&s, "bad_wal", 0);
	wt_write_txn(s.w, 20, 500);
	if (shipped_before) {
		st = stream_for(s.sink, TENANT, s.db, &err);
		assert_non_null(st);
		tail_ok(st);
		ws_stream_close(st);
	}
	h_db = content_hash(s.w);
	sqlite3_close(s.w); /* WAL checkpointed and deleted */
	s.w = NULL;
	assert_int_equal(access(s.wal, F_OK), -1);
	for (size_t i = 0; i < wal_len; i++)
		junk[i] = (uint8_t)wt_rand(&rng);
	assert_int_equal(wt_write_file(s.wal, junk, wal_len), 0);

	st = stream_for(s.sink, TENANT, s.db, &err);
	assert_non_null(st);
	for (int i = 0; i < 2; i++) {
		rc = ws_stream_tail_frames(st, &o);
		if (rc)
			fail_msg("tail %d over a garbage WAL of %zu bytes: %s", i, wal_len, ws_errmsg());
	}
	ws_stream_close(st);
	/* The file is still the garbage we wrote: the test saw what it meant to. */
	after = wt_read_file(s.wal, &after_len);
	assert_int_equal(after_len, wal_len);
	assert_memory_equal(after, junk, wal_len);
	out = wt_path(s.dir, "r.db");
	assert_int_equal(ws_restore(s.sink, TENANT, NULL, out), 0);
	assert_true(file_hash(out) == h_db);
	free(out);
	free(after);
	free(junk);
	wt_env_free(&s);
}

static void test_garbage_wal(void **state)
{
	(void)state;
	garbage_wal_case(4096 + 32, false);
	garbage_wal_case(32, false);
	garbage_wal_case(10, false);   /* shorter than a header */
	garbage_wal_case(70000, true); /* after a good ship: the sink keeps it */
}

/* A database that is not in WAL mode, and a file that is no database. */
static void test_not_wal_database(void **state)
{
	struct wt_env s;
	struct ws_stream *st;
	struct ws_outcome o;
	char *before, *now;
	char res[64];
	int err = 0, rc;
	(void)state;

	wt_env_init(&s, "bad_mode", 0);
	wt_query1(s.w, "PRAGMA journal_mode=DELETE", res);
	assert_string_equal(res, "delete");
	wt_write_txn(s.w, 5, 100);
	before = wt_dir_digest(s.sink_dir);
	st = stream_for(s.sink, TENANT, s.db, &err);
	assert_non_null(st);
	rc = ws_stream_tail_frames(st, &o);
	assert_int_equal(rc, WS_ECONFIG);
	assert_non_null(strstr(ws_errmsg(), "WAL"));
	ws_stream_close(st);
	now = wt_dir_digest(s.sink_dir);
	assert_string_equal(before, now);
	free(now);

	sqlite3_close(s.w);
	s.w = NULL;
	{
		char junk[8192];
		memset(junk, 'x', sizeof(junk));
		assert_int_equal(wt_write_file(s.db, junk, sizeof(junk)), 0);
	}
	st = stream_for(s.sink, TENANT, s.db, &err);
	assert_non_null(st);
	rc = ws_stream_tail_frames(st, &o);
	assert_int_not_equal(rc, 0);
	assert_non_null(strstr(ws_errmsg(), TENANT));
	ws_stream_close(st);
	now = wt_dir_digest(s.sink_dir);
	assert_string_equal(before, now);
	free(now);
	free(before);
	wt_env_free(&s);
}

/* ---- a damaged sink ---------------------------------------------------------- */

struct good {
	struct wt_env s;
	uint64_t h;
	unsigned copies;
};

/* A sink with a snapshot base (several parts) and three manifests of
 * several batches each. */
static void good_init(struct good *g)
{
	struct ws_stream *st;
	char res[64];
	int err = 0;

	wt_env_init(&g->s, "bad_sink", 0);
	wt_write_txn(g->s.w, 120, 3000);
	wt_query1(g->s.w, "PRAGMA wal_checkpoint(TRUNCATE)", res);
	assert_string_equal(res, "0");
	wt_write_txn(g->s.w, 60, 3000);
	st = stream_for(g->s.sink, TENANT, g->s.db, &err);
	assert_non_null(st);
	tail_ok(st);
	for (int i = 0; i < 2; i++) {
		wt_write_txn(g->s.w, 70, 3000);
		tail_ok(st);
	}
	ws_stream_close(st);
	g->h = content_hash(g->s.w);
	assert_int_equal(ws_verify(g->s.sink, TENANT, NULL, NULL), 0);
	{
		char *out = wt_path(g->s.out_dir, "good.db");
		assert_int_equal(ws_restore(g->s.sink, TENANT, NULL, out), 0);
		assert_true(file_hash(out) == g->h);
		unlink(out);
		free(out);
	}
}

static void good_free(struct good *g)
{
	wt_env_free(&g->s);
}

/* A fresh copy of the good sink. */
static char *good_copy(struct good *g)
{
	char name[32];
	char *dir;
	snprintf(name, sizeof(name), "copy%u", g->copies++);
	dir = wt_path(g->s.dir, name);
	assert_int_equal(wt_sh("cp -a '%s' '%s'", g->s.sink_dir, dir), 0);
	return dir;
}

static char *obj_path(const char *dir, const char *key)
{
	return wt_path(dir, key);
}

enum damage { FLIP, TRUNCATE, DELETE, RANDOM, EMPTY, HEADER_FLIP };

static void damage(const char *dir, const char *key, enum damage d)
{
	char *p = obj_path(dir, key);
	size_t len = 0;
	uint8_t *b = wt_read_file(p, &len);
	uint64_t rng = 42;
	assert_non_null(b);
	assert_true(len > 8);
	/* Published objects may be hard links shared with the original sink
	 * copy's source: replace, never modify in place. */
	assert_int_equal(unlink(p), 0);
	switch (d) {
	case FLIP:
		b[len / 2] ^= 0x01;
		assert_int_equal(wt_write_file(p, b, len), 0);
		break;
	case HEADER_FLIP:
		b[20] ^= 0x80;
		assert_int_equal(wt_write_file(p, b, len), 0);
		break;
	case TRUNCATE:
		assert_int_equal(wt_write_file(p, b, len / 2), 0);
		break;
	case RANDOM:
		for (size_t i = 0; i < len; i++)
			b[i] = (uint8_t)wt_rand(&rng);
		assert_int_equal(wt_write_file(p, b, len), 0);
		break;
	case EMPTY:
		assert_int_equal(wt_write_file(p, b, 0), 0);
		break;
	case DELETE:
		break;
	}
	free(b);
	free(p);
}

/* verify names `key` and fails with one of `errs`; restore refuses cleanly. */
static void expect_refused(struct good *g, const char *dir, const char *key, const int *errs, size_t nerrs)
{
	char *url;
	struct ws_sink *sink;
	struct problems p;
	char *out = wt_path(g->s.out_dir, "restored.db");
	int err = 0, rc;
	bool named = false, code_ok = false;

	assert_int_not_equal(asprintf(&url, "file://%s", dir), -1);
	sink = ws_sink_open(url, &err);
	assert_non_null(sink);

	memset(&p, 0, sizeof(p));
	rc = ws_verify(sink, TENANT, problem_cb, &p);
	assert_int_not_equal(rc, 0);
	assert_true(p.count >= 1);
	for (unsigned i = 0; i < p.count && i < 16; i++) {
		if (strstr(p.detail[i], key) || strcmp(p.key[i], key) == 0)
			named = true;
		assert_string_equal(p.tenant[i], TENANT);
	}
	for (size_t i = 0; i < nerrs; i++)
		code_ok |= rc == errs[i];
	if (!named || !code_ok)
		fail_msg("damage to %s: verify returned %s, problem: %s", key, ws_strerror(rc), p.detail[0]);
	/* Verify of the whole sink reports it too. */
	memset(&p, 0, sizeof(p));
	assert_int_equal(ws_verify(sink, NULL, problem_cb, &p), rc);
	if (p.count != 1)
		fail_msg("damage to %s: verify of the sink reported %u problems: %s | %s", key, p.count, p.detail[0],
			 p.detail[1]);

	rc = ws_restore(sink, TENANT, NULL, out);
	assert_int_not_equal(rc, 0);
	code_ok = false;
	for (size_t i = 0; i < nerrs; i++)
		code_ok |= rc == errs[i];
	if (!code_ok)
		fail_msg("damage to %s: restore returned %s (%s)", key, ws_strerror(rc), ws_errmsg());
	assert_non_null(strstr(ws_errmsg(), key));
	assert_int_equal(access(out, F_OK), -1);
	assert_true(dir_empty(g->s.out_dir));

	/* With force too, and over an existing file: that file is untouched. */
	{
		struct ws_restore_opts o = { .force = true };
		static const char keep[] = "precious";
		size_t len = 0;
		uint8_t *b;
		assert_int_equal(wt_write_file(out, keep, sizeof(keep)), 0);
		assert_int_not_equal(ws_restore(sink, TENANT, &o, out), 0);
		b = wt_read_file(out, &len);
		assert_int_equal(len, sizeof(keep));
		assert_memory_equal(b, keep, len);
		free(b);
		unlink(out);
		assert_true(dir_empty(g->s.out_dir));
	}
	ws_sink_close(sink);
	free(url);
	free(out);
}

static const int E_CORRUPT[] = { WS_ECORRUPT };
static const int E_MISSING[] = { WS_EINCOMPLETE };
static const int E_BADWM[] = { WS_EFORMAT, WS_ECORRUPT };

static void damage_case(struct good *g, const char *key, enum damage d, const int *errs, size_t nerrs)
{
	char *dir = good_copy(g);
	damage(dir, key, d);
	expect_refused(g, dir, key, errs, nerrs);
	wt_rmrf(dir);
	free(dir);
}

#define NKEYS 256

static void test_damaged_sink(void **state)
{
	struct good g;
	char (*batches)[WS_KEY_MAX] = calloc(NKEYS, WS_KEY_MAX);
	char (*manifests)[WS_KEY_MAX] = calloc(NKEYS, WS_KEY_MAX);
	char (*snaps)[WS_KEY_MAX] = calloc(NKEYS, WS_KEY_MAX);
	size_t nb, nm, ns;
	(void)state;

	memset(&g, 0, sizeof(g));
	good_init(&g);
	nb = find_keys(g.s.sink_dir, "-name 'b*'", batches, NKEYS);
	nm = find_keys(g.s.sink_dir, "-name 'm*'", manifests, NKEYS);
	ns = find_keys(g.s.sink_dir, "-path '*/s*/*'", snaps, NKEYS);
	assert_true(nb >= 6);
	assert_int_equal(nm, 3);
	assert_true(ns >= 3);

	/* Batches: first, a middle one, the last. */
	size_t pick[3] = { 0, nb / 2, nb - 1 };
	for (int i = 0; i < 3; i++) {
		const char *k = batches[pick[i]];
		damage_case(&g, k, FLIP, E_CORRUPT, 1);
		damage_case(&g, k, HEADER_FLIP, E_CORRUPT, 1);
		damage_case(&g, k, TRUNCATE, E_CORRUPT, 1);
		damage_case(&g, k, DELETE, E_MISSING, 1);
	}
	/* A batch replaced by another valid batch. */
	{
		char *dir = good_copy(&g);
		char *src = obj_path(dir, batches[1]);
		char *dst = obj_path(dir, batches[0]);
		assert_int_equal(unlink(dst), 0);
		assert_int_equal(wt_sh("cp '%s' '%s'", src, dst), 0);
		expect_refused(&g, dir, batches[0], E_CORRUPT, 1);
		wt_rmrf(dir);
		free(dir);
		free(src);
		free(dst);
	}
	/* Manifests: each of the chain. */
	for (size_t i = 0; i < nm; i++) {
		damage_case(&g, manifests[i], FLIP, E_CORRUPT, 1);
		damage_case(&g, manifests[i], TRUNCATE, E_CORRUPT, 1);
		damage_case(&g, manifests[i], DELETE, E_MISSING, 1);
	}
	/* Snapshot parts. */
	damage_case(&g, snaps[0], FLIP, E_CORRUPT, 1);
	damage_case(&g, snaps[ns - 1], TRUNCATE, E_CORRUPT, 1);
	damage_case(&g, snaps[ns / 2], DELETE, E_MISSING, 1);
	/* The watermark. */
	damage_case(&g, TENANT "/wm", TRUNCATE, E_BADWM, 2);
	damage_case(&g, TENANT "/wm", RANDOM, E_BADWM, 2);
	damage_case(&g, TENANT "/wm", FLIP, E_BADWM, 2);
	damage_case(&g, TENANT "/wm", EMPTY, E_BADWM, 2);

	/* The original is still good: the cases really worked on copies. */
	assert_int_equal(ws_verify(g.s.sink, TENANT, NULL, NULL), 0);
	free(batches);
	free(manifests);
	free(snaps);
	good_free(&g);
}

/* ---- hash-consistent forged manifests ------------------------------------------ */

/*
 * What a hostile or broken store can serve and no hash catches: manifest
 * `depth` of the chain (0 = the head the watermark names) decoded, changed
 * by fn (which may change the watermark too), encoded under a new key, every
 * newer manifest re-linked to it and the watermark re-pointed, so every
 * SHA-256, length and link holds. Works in dir (a good_copy); the forged
 * manifest's key goes to key_out.
 */
typedef void (*forge_fn)(struct ws_fmt_manifest *m, struct ws_fmt_watermark *wm, const char *dir, void *arg);

#define FORGE_DEPTH_MAX 8

static void forge(const char *dir, unsigned depth, forge_fn fn, void *arg, char key_out[WS_KEY_MAX])
{
	struct ws_fmt_manifest ms[FORGE_DEPTH_MAX];
	char keys[FORGE_DEPTH_MAX][WS_KEY_MAX];
	uint8_t *raws[FORGE_DEPTH_MAX];
	struct iovec inl[FORGE_DEPTH_MAX];
	struct ws_fmt_watermark wm;
	struct ws_buf b;
	char *wm_path = obj_path(dir, TENANT "/wm");
	size_t len = 0;
	uint8_t *raw = wt_read_file(wm_path, &len);

	assert_true(depth < FORGE_DEPTH_MAX);
	assert_non_null(raw);
	assert_int_equal(ws_fmt_watermark_decode(raw, len, &wm), 0);
	free(raw);
	snprintf(keys[0], WS_KEY_MAX, "%s", wm.manifest_key);
	for (unsigned i = 0; i <= depth; i++) {
		char *mp = obj_path(dir, keys[i]);
		raw = wt_read_file(mp, &len);
		assert_non_null(raw);
		assert_int_equal(ws_fmt_manifest_decode(raw, len, &ms[i]), 0);
		/* Inline batches (one run before the trailing hash) go with it. */
		raws[i] = raw;
		for (uint32_t k = 0; k < ms[i].batch_count; k++)
			if (ms[i].batches[k].key[0] == '\0' && !ms[i].inline_iovcnt) {
				inl[i].iov_base = raw + ms[i].batches[k].inline_off;
				inl[i].iov_len = len - 8 - ms[i].batches[k].inline_off;
				ms[i].inline_iov = &inl[i];
				ms[i].inline_iovcnt = 1;
			}
		free(mp);
		if (i < depth) {
			assert_true(ms[i].prev_key[0] != '\0');
			snprintf(keys[i + 1], WS_KEY_MAX, "%s", ms[i].prev_key);
		}
	}
	fn(&ms[depth], depth == 0 ? &wm : NULL, dir, arg);
	for (int i = (int)depth; i >= 0; i--) {
		uint8_t sha[WS_SHA256_LEN];
		char nk[WS_KEY_MAX], *slash, *mp;
		ws_buf_init(&b, 0);
		assert_int_equal(ws_fmt_manifest_encode(&ms[i], &b), 0);
		ws_sha256(b.data, b.len, sha);
		snprintf(nk, sizeof(nk), "%s", keys[i]);
		slash = strrchr(nk, '/');
		assert_non_null(slash);
		snprintf(slash + 1, sizeof(nk) - (size_t)(slash + 1 - nk), "m%016" PRIx64 "-%02x%02x%02x%02x%02x%02x%02x%02x",
			 ms[i].wm_seq, sha[0], sha[1], sha[2], sha[3], sha[4], sha[5], sha[6], sha[7]);
		assert_string_not_equal(nk, keys[i]); /* the forgery changed the manifest */
		mp = obj_path(dir, nk);
		assert_int_equal(wt_write_file(mp, b.data, b.len), 0);
		free(mp);
		if (i > 0) {
			snprintf(ms[i - 1].prev_key, WS_KEY_MAX, "%s", nk);
			memcpy(ms[i - 1].prev_sha, sha, WS_SHA256_LEN);
			ms[i - 1].prev_length = b.len;
		} else {
			snprintf(wm.manifest_key, WS_KEY_MAX, "%s", nk);
			memcpy(wm.manifest_sha, sha, WS_SHA256_LEN);
			wm.manifest_length = b.len;
		}
		if (i == (int)depth)
			snprintf(key_out, WS_KEY_MAX, "%s", nk);
		ws_buf_free(&b);
		ws_fmt_manifest_free(&ms[i]);
		free(raws[i]);
	}
	ws_buf_init(&b, 0);
	assert_int_equal(ws_fmt_watermark_encode(&wm, &b), 0);
	assert_int_equal(unlink(wm_path), 0); /* may be a hard link shared with the original */
	assert_int_equal(wt_write_file(wm_path, b.data, b.len), 0);
	ws_buf_free(&b);
	free(wm_path);
}

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* The WAL frame numbered no of manifest m, as its batch in dir holds it (malloc'd). */
static uint8_t *frame_of(const char *dir, const struct ws_fmt_manifest *m, uint64_t no)
{
	const size_t fsz = 24 + m->gen.page_size;
	for (uint32_t k = 0; k < m->batch_count; k++) {
		const struct ws_fmt_objref *r = &m->batches[k];
		if (no >= r->first && no < r->first + r->count) {
			char *p = obj_path(dir, r->key);
			size_t len = 0;
			uint8_t *b = wt_read_file(p, &len), *fr = malloc(fsz);
			assert_non_null(b);
			assert_true(WS_BATCH_HDR_SIZE + (no - r->first + 1) * fsz <= len);
			memcpy(fr, b + WS_BATCH_HDR_SIZE + (no - r->first) * fsz, fsz);
			free(b);
			free(p);
			return fr;
		}
	}
	fail_msg("frame %" PRIu64 " is in no batch of the manifest", no);
	return NULL;
}

/* The head ends on a frame inside a transaction, its checksums made to fit. */
static void forge_end_inside_txn(struct ws_fmt_manifest *m, struct ws_fmt_watermark *wm, const char *dir, void *arg)
{
	uint64_t no = m->last_frame;
	(void)arg;
	for (;;) {
		uint8_t *fr;
		assert_true(no > m->first_frame);
		fr = frame_of(dir, m, --no);
		if (be32(fr + 4) == 0) {
			m->last_frame = wm->last_frame = no;
			m->end_cksum[0] = wm->end_cksum[0] = be32(fr + 16);
			m->end_cksum[1] = wm->end_cksum[1] = be32(fr + 20);
			free(fr);
			return;
		}
		free(fr);
	}
}

static void forge_end_cksum(struct ws_fmt_manifest *m, struct ws_fmt_watermark *wm, const char *dir, void *arg)
{
	(void)wm;
	(void)dir;
	(void)arg;
	m->end_cksum[1] ^= 0x10;
}

static void forge_db_pages(struct ws_fmt_manifest *m, struct ws_fmt_watermark *wm, const char *dir, void *arg)
{
	(void)wm;
	(void)dir;
	(void)arg;
	m->db_pages += 1;
}

static void forge_rebase_valid_from(struct ws_fmt_manifest *m, struct ws_fmt_watermark *wm, const char *dir,
				    void *arg)
{
	(void)wm;
	(void)dir;
	(void)arg;
	assert_int_equal(m->kind, WS_MANIFEST_REBASE);
	assert_true(m->last_frame > 1);
	m->valid_from_frame = m->last_frame - 1;
}

static void forge_rebase_snap_gap(struct ws_fmt_manifest *m, struct ws_fmt_watermark *wm, const char *dir, void *arg)
{
	(void)wm;
	(void)dir;
	(void)arg;
	assert_int_equal(m->kind, WS_MANIFEST_REBASE);
	assert_true(m->snap_count >= 2);
	/* The first part dropped: restore would write the rest over zeros. */
	memmove(&m->snaps[0], &m->snaps[1], (m->snap_count - 1) * sizeof(m->snaps[0]));
	m->snap_count--;
}

static void forge_page_size(struct ws_fmt_manifest *m, struct ws_fmt_watermark *wm, const char *dir, void *arg)
{
	(void)dir;
	(void)arg;
	assert_int_equal(m->kind, WS_MANIFEST_NEXT_GEN);
	m->gen.page_size *= 2;
	if (wm)
		wm->gen.page_size = m->gen.page_size;
}

static const int E_FORMAT[] = { WS_EFORMAT };

/* ref's object copied, byte for byte, to the same key under tenant
 * "other" (a tenant's own valid object, in another tenant's prefix), and
 * ref re-pointed to it: every hash and length the manifest records holds. */
static void foreign_copy(struct ws_fmt_objref *ref, const char *dir)
{
	char nk[WS_KEY_MAX];
	const size_t tl = strlen(TENANT);
	assert_int_equal(strncmp(ref->key, TENANT "/", tl + 1), 0);
	snprintf(nk, sizeof(nk), "other%s", ref->key + tl);
	char *src = obj_path(dir, ref->key), *dst = obj_path(dir, nk);
	assert_int_equal(wt_sh("mkdir -p \"$(dirname '%s')\" && cp '%s' '%s'", dst, src, dst), 0);
	snprintf(ref->key, sizeof(ref->key), "%s", nk);
	free(src);
	free(dst);
}

/* A REBASE naming another tenant's copy of its first snapshot part. */
static void forge_foreign_snap(struct ws_fmt_manifest *m, struct ws_fmt_watermark *wm, const char *dir, void *arg)
{
	(void)wm;
	(void)arg;
	assert_int_equal(m->kind, WS_MANIFEST_REBASE);
	assert_true(m->snap_count >= 1);
	foreign_copy(&m->snaps[0], dir);
}

/* A manifest naming another tenant's copy of its first stored batch. */
static void forge_foreign_batch(struct ws_fmt_manifest *m, struct ws_fmt_watermark *wm, const char *dir, void *arg)
{
	(void)wm;
	(void)arg;
	for (uint32_t k = 0; k < m->batch_count; k++)
		if (!ws_fmt_objref_inline(&m->batches[k])) {
			foreign_copy(&m->batches[k], dir);
			return;
		}
	fail_msg("the manifest has no stored batch to forge");
}

static void forged_case(struct good *g, unsigned depth, forge_fn fn, const int *errs, const char *why)
{
	char key[WS_KEY_MAX];
	char *dir = good_copy(g);
	forge(dir, depth, fn, NULL, key);
	expect_refused(g, dir, key, errs, 1);
	if (!strstr(ws_errmsg(), why))
		fail_msg("forged %s: restore said: %s (wanted '%s')", key, ws_errmsg(), why);
	wt_rmrf(dir);
	free(dir);
}

/*
 * Manifests whose every hash and link holds but whose fields lie about the
 * frames they name (DESIGN invariants 1, 6, 11, 12): verify reports each,
 * naming the manifest, and restore refuses it: the newest manifest (where a
 * restore used to stop inside a transaction, or end on a checksum its
 * frames do not have) or the base. (An older manifest that ends early is
 * caught by its successor's link check.)
 */
static void test_forged_manifests(void **state)
{
	struct good g;
	(void)state;

	memset(&g, 0, sizeof(g));
	good_init(&g);
	forged_case(&g, 0, forge_end_inside_txn, E_CORRUPT, "not a commit frame");
	forged_case(&g, 0, forge_end_cksum, E_CORRUPT, "end checksum");
	forged_case(&g, 0, forge_db_pages, E_CORRUPT, "the commit frame says");
	forged_case(&g, 2, forge_rebase_valid_from, E_FORMAT, "valid from frame");
	forged_case(&g, 2, forge_rebase_snap_gap, E_FORMAT, "snapshot part 0");
	/* An object of another tenant's prefix, its bytes exactly the part
	 * or batch named before (so no hash catches it): refused by name. */
	forged_case(&g, 2, forge_foreign_snap, E_FORMAT, "(foreign object)");
	forged_case(&g, 2, forge_foreign_batch, E_FORMAT, "(foreign object)");
	/* The good sink is untouched. */
	assert_int_equal(ws_verify(g.s.sink, TENANT, NULL, NULL), 0);
	good_free(&g);
}

/* last_frame of manifest depth (0 = the head) of the chain in dir. */
static uint64_t manifest_last_frame(const char *dir, unsigned depth)
{
	struct ws_fmt_watermark wm;
	struct ws_fmt_manifest m;
	char key[WS_KEY_MAX], *p = obj_path(dir, TENANT "/wm");
	size_t len = 0;
	uint8_t *raw = wt_read_file(p, &len);
	uint64_t last;

	assert_non_null(raw);
	assert_int_equal(ws_fmt_watermark_decode(raw, len, &wm), 0);
	free(raw);
	free(p);
	snprintf(key, sizeof(key), "%s", wm.manifest_key);
	for (unsigned i = 0;; i++) {
		p = obj_path(dir, key);
		raw = wt_read_file(p, &len);
		assert_non_null(raw);
		assert_int_equal(ws_fmt_manifest_decode(raw, len, &m), 0);
		free(raw);
		free(p);
		last = m.last_frame;
		snprintf(key, sizeof(key), "%s", m.prev_key);
		ws_fmt_manifest_free(&m);
		if (i == depth)
			return last;
	}
}

static void forge_time_future(struct ws_fmt_manifest *m, struct ws_fmt_watermark *wm, const char *dir, void *arg)
{
	(void)wm;
	(void)dir;
	m->time_ms = *(const int64_t *)arg;
}

/*
 * Manifest times that go backwards (a clock stepped back, a takeover by a
 * host whose clock is behind): the middle manifest stamped an hour ahead.
 * restore --time between must not yield it, nor the head after it: the
 * state is the last manifest of the run stamped at or before the time (the
 * base). Before, the walk back from the head stopped at the first manifest
 * at or before the time, the head, with the middle's commits in it.
 */
static void test_restore_time_not_past_a_later_stamp(void **state)
{
	struct good g;
	struct ws_restore_opts ro;
	struct ws_sink *sink;
	char key[WS_KEY_MAX], *dir, *url, *out, *base_out;
	int64_t ahead = ((int64_t)time(NULL) + 3600) * 1000;
	int err = 0;
	(void)state;

	memset(&g, 0, sizeof(g));
	good_init(&g);
	dir = good_copy(&g);
	forge(dir, 1, forge_time_future, &ahead, key);
	assert_int_not_equal(asprintf(&url, "file://%s", dir), -1);
	sink = ws_sink_open(url, &err);
	assert_non_null(sink);
	out = wt_path(g.s.out_dir, "t.db");
	base_out = wt_path(g.s.out_dir, "base.db");
	memset(&ro, 0, sizeof(ro));
	ro.time_ms = ahead - 1800 * 1000;
	if (ws_restore(sink, TENANT, &ro, out) != 0)
		fail_msg("restore --time: %s", ws_errmsg());
	assert_true(file_hash(out) != g.h); /* not the head's state */
	/* The base's state (the run before the middle manifest ends there),
	 * restored by its last frame from the unforged sink. */
	memset(&ro, 0, sizeof(ro));
	ro.frame = manifest_last_frame(g.s.sink_dir, 2);
	assert_int_equal(ws_restore(g.s.sink, TENANT, &ro, base_out), 0);
	assert_true(file_hash(out) == file_hash(base_out));
	ws_sink_close(sink);
	free(out);
	free(base_out);
	free(url);
	wt_rmrf(dir);
	free(dir);
	good_free(&g);
}

/* A next generation may not change the page size (SQLite cannot, in WAL mode). */
static void test_forged_next_gen_page_size(void **state)
{
	struct good g;
	struct ws_stream_config c;
	struct ws_stream *st;
	struct ws_outcome o;
	char res[64];
	int err = 0;
	(void)state;

	memset(&g, 0, sizeof(g));
	wt_env_init(&g.s, "bad_nextgen", 0);
	wt_write_txn(g.s.w, 6, 1500);
	memset(&c, 0, sizeof(c));
	c.tenant = TENANT;
	c.db_path = g.s.db;
	c.epoch = 1;
	c.pointer_generation = 1;
	c.wal_checkpoint_bytes = 1; /* the stream lets the writer restart the WAL */
	st = ws_stream_open(g.s.sink, &c, &err);
	assert_non_null(st);
	wt_tail_ok(st, &o);
	assert_int_equal(o.kind, WS_OUTCOME_STREAMED);
	wt_tail_ok(st, &o); /* runs its WAL checkpoint */
	wt_query1(g.s.w, "PRAGMA wal_checkpoint(TRUNCATE)", res);
	assert_string_equal(res, "0");
	wt_write_txn(g.s.w, 3, 700);
	wt_tail_ok(st, &o);
	assert_int_equal(o.kind, WS_OUTCOME_RESTARTED);
	ws_stream_close(st);
	assert_int_equal(ws_verify(g.s.sink, TENANT, NULL, NULL), 0);
	forged_case(&g, 0, forge_page_size, E_MISSING, "changes the page size");
	good_free(&g);
}

/*
 * A database file that is empty when it is shipped (created, not yet
 * written): the state shipped is an empty database, and restore gives one,
 * as verify says it can (it used to refuse what verify passed).
 */
static void test_empty_database(void **state)
{
	struct wt_env s;
	struct ws_stream *st;
	struct ws_outcome o;
	char *db, *out;
	sqlite3 *r;
	char res[64];
	int err = 0;
	(void)state;

	wt_env_init(&s, "bad_emptydb", 0);
	db = wt_path(s.dir, "empty.db");
	assert_int_equal(wt_write_file(db, "", 0), 0);
	st = stream_for(s.sink, TENANT, db, &err);
	assert_non_null(st);
	wt_tail_ok(st, &o);
	assert_true(o.kind == WS_OUTCOME_STREAMED || o.kind == WS_OUTCOME_RESTARTED);
	ws_stream_close(st);
	assert_int_equal(ws_verify(s.sink, TENANT, NULL, NULL), 0);
	out = wt_path(s.out_dir, "empty-restored.db");
	assert_int_equal(ws_restore(s.sink, TENANT, NULL, out), 0);
	{
		struct stat sb;
		assert_int_equal(stat(out, &sb), 0);
		assert_int_equal(sb.st_size, 0);
	}
	r = wt_open_checked(out);
	wt_query1(r, "SELECT count(*) FROM sqlite_master", res);
	assert_string_equal(res, "0");
	sqlite3_close(r);
	free(out);
	free(db);
	wt_env_free(&s);
}

/*
 * verify builds each tenant's image in TMPDIR: where that has no room, the
 * error is the local file system's, says where and what to do, and blames
 * no object of the sink. No room is made here by a file size limit (the
 * same write error a full file system gives, without mounting one).
 */
static void test_verify_tmpdir_full(void **state)
{
	struct good g;
	pid_t pid;
	int status;
	(void)state;

	memset(&g, 0, sizeof(g));
	good_init(&g);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct rlimit rl = { 64 * 1024, 64 * 1024 };
		struct problems p;
		int rc;
		memset(&p, 0, sizeof(p));
		signal(SIGXFSZ, SIG_IGN);
		setenv("TMPDIR", g.s.out_dir, 1);
		if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
			_exit(10);
		rc = ws_verify(g.s.sink, TENANT, problem_cb, &p);
		if (rc != -EFBIG || p.count != 1 || p.key[0][0] != '\0')
			_exit(11);
		if (!strstr(p.detail[0], "TMPDIR") || !strstr(p.detail[0], g.s.out_dir))
			_exit(12);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	/* With room, the same sink verifies. */
	assert_int_equal(ws_verify(g.s.sink, TENANT, NULL, NULL), 0);
	good_free(&g);
}

/* A corrupt watermark stops the stream: an error, and nothing written over it. */
static void test_stream_refuses_bad_watermark(void **state)
{
	struct good g;
	struct ws_outcome o;
	struct ws_stream *st;
	char *before, *now;
	int err = 0, rc;
	(void)state;

	memset(&g, 0, sizeof(g));
	good_init(&g);
	damage(g.s.sink_dir, TENANT "/wm", RANDOM);
	wt_write_txn(g.s.w, 3, 100);
	before = wt_dir_digest(g.s.sink_dir);
	st = stream_for(g.s.sink, TENANT, g.s.db, &err);
	assert_non_null(st);
	for (int i = 0; i < 2; i++) {
		rc = ws_stream_tail_frames(st, &o);
		assert_true(rc == WS_EFORMAT || rc == WS_ECORRUPT);
		assert_non_null(strstr(ws_errmsg(), TENANT "/wm"));
	}
	ws_stream_close(st);
	now = wt_dir_digest(g.s.sink_dir);
	assert_string_equal(before, now);
	free(before);
	free(now);
	good_free(&g);
}

/*
 * A watermark that carries its manifest (docs/FORMAT.md "Watermark"),
 * damaged or forged: restore and verify refuse it, naming it, a checkpoint
 * refuses to cut it, and nothing is written at the restore's output.
 */
static void reseal(uint8_t *b, size_t len)
{
	ws_put_le32(b + 12, (uint32_t)len);
	ws_put_le64(b + len - 8, ws_xxh64(b, len - 8));
}

/* stream_for's, with every small tail carried by its watermark. */
static struct ws_stream *carrying_stream(struct wt_env *e, uint64_t inline_max)
{
	struct ws_stream_config c;
	struct ws_stream *st;
	int err = 0;
	memset(&c, 0, sizeof(c));
	c.tenant = TENANT;
	c.db_path = e->db;
	c.epoch = 1;
	c.pointer_generation = 1;
	c.batch_bytes_max = 128u << 10;
	c.wal_checkpoint_bytes = UINT64_MAX;
	c.carry = WS_CARRY_ALWAYS;
	c.inline_batch_bytes_max = inline_max;
	st = ws_stream_open(e->sink, &c, &err);
	if (!st)
		fail_msg("stream: %s (%s)", ws_strerror(err), ws_errmsg());
	return st;
}

static void carried_refused(struct wt_env *e, const uint8_t *wm, size_t len, const char *what, const char *needle)
{
	char *wp = obj_path(e->sink_dir, TENANT "/wm");
	char *out = wt_path(e->out_dir, "carried.db");
	struct ws_checkpoint_info ci;
	int rc;
	assert_int_equal(unlink(wp), 0);
	assert_int_equal(wt_write_file(wp, wm, len), 0);
	rc = ws_restore(e->sink, TENANT, NULL, out);
	if (rc != WS_ECORRUPT && rc != WS_EFORMAT && rc != WS_EINCOMPLETE)
		fail_msg("%s: restore gave %d (%s)", what, rc, ws_errmsg());
	if (needle && !strstr(ws_errmsg(), needle))
		fail_msg("%s: restore's error does not name %s: %s", what, needle, ws_errmsg());
	assert_int_equal(access(out, F_OK), -1);
	rc = ws_verify(e->sink, TENANT, NULL, NULL);
	if (rc == 0)
		fail_msg("%s: verify passed what restore refuses", what);
	rc = ws_checkpoint_take(e->sink, NULL, &ci);
	if (rc == 0 && ci.committed)
		fail_msg("%s: a checkpoint was committed over it", what);
	free(out);
	free(wp);
}

/* w's manifest key renamed after its manifest_sha: ".../m<seq>-<sha8>". */
static void rekey_carried(struct ws_fmt_watermark *w)
{
	char *slash = strrchr(w->manifest_key, '/');
	char shahex[17];
	assert_non_null(slash);
	ws_hex(w->manifest_sha, 8, shahex);
	assert_true(strlen(slash + 1) == 34);
	memcpy(slash + 1 + 18, shahex, 16);
}

static void test_carried_watermark_damaged(void **state)
{
	struct wt_env e;
	struct ws_stream *st;
	struct ws_outcome o;
	struct ws_fmt_watermark w;
	struct ws_fmt_manifest m;
	struct ws_buf mb, wb;
	uint8_t *orig, *b;
	size_t len = 0;
	char *wp;
	(void)state;

	wt_env_init(&e, "carried_bad", 0);
	st = carrying_stream(&e, 0);
	wt_write_txn(e.w, 60, 3000);
	assert_int_equal(ws_stream_tail_frames(st, &o), 0);
	for (int i = 0; i < 2; i++) {
		wt_write_txn(e.w, 3, 100);
		assert_int_equal(ws_stream_tail_frames(st, &o), 0);
	}
	ws_stream_close(st);
	wp = obj_path(e.sink_dir, TENANT "/wm");
	orig = wt_read_file(wp, &len);
	assert_non_null(orig);
	assert_int_equal(ws_fmt_watermark_decode(orig, len, &w), 0);
	assert_int_equal(w.version, 3); /* it does carry */
	assert_true(w.carried_len > 0);
	assert_int_equal(ws_verify(e.sink, TENANT, NULL, NULL), 0);
	b = malloc(len);

	/* One bit of the carried manifest: the watermark's own hash. */
	memcpy(b, orig, len);
	b[len - 8 - w.carried_len / 2] ^= 0x01;
	carried_refused(&e, b, len, "flipped", TENANT "/wm");
	/* The same, re-hashed: not the manifest the watermark names. */
	reseal(b, len);
	carried_refused(&e, b, len, "flipped and re-hashed", "carried manifest");

	/* Forged: a carried manifest whose predecessor is recorded with another
	 * length, re-encoded with its SHA-256 in the watermark (a self-consistent
	 * object): the chain behind it does not match. */
	assert_int_equal(ws_fmt_watermark_decode(orig, len, &w), 0);
	assert_int_equal(ws_fmt_manifest_decode(w.carried, (size_t)w.carried_len, &m), 0);
	{
		struct iovec iov[16];
		int n = 0;
		for (uint32_t k = 0; k < m.batch_count && n < 16; k++) {
			assert_true(ws_fmt_objref_inline(&m.batches[k]));
			iov[n].iov_base = (void *)(uintptr_t)(w.carried + m.batches[k].inline_off);
			iov[n].iov_len = m.batches[k].length;
			n++;
		}
		m.inline_iov = iov;
		m.inline_iovcnt = n;
		m.prev_length += 1;
		ws_buf_init(&mb, 1u << 24);
		assert_int_equal(ws_fmt_manifest_encode(&m, &mb), 0);
	}
	w.carried = mb.data;
	w.carried_len = mb.len;
	w.manifest_length = mb.len;
	ws_sha256(mb.data, mb.len, w.manifest_sha);
	rekey_carried(&w); /* its key names its hash, as a writer's would */
	ws_buf_init(&wb, 1u << 24);
	assert_int_equal(ws_fmt_watermark_encode(&w, &wb), 0);
	carried_refused(&e, wb.data, wb.len, "forged predecessor", NULL);
	ws_fmt_manifest_free(&m);
	ws_buf_free(&mb);
	ws_buf_free(&wb);

	/* Forged: the carried manifest as it was, under the key of its good
	 * predecessor (every hash consistent). Readers refuse the key; a tail
	 * on top fails without advice to remove the predecessor, which stays. */
	assert_int_equal(ws_fmt_watermark_decode(orig, len, &w), 0);
	assert_int_equal(ws_fmt_manifest_decode(w.carried, (size_t)w.carried_len, &m), 0);
	{
		char *pp = obj_path(e.sink_dir, m.prev_key);
		size_t plen = 0, plen2 = 0;
		uint8_t *pred = wt_read_file(pp, &plen), *pred2;
		assert_non_null(pred);
		snprintf(w.manifest_key, sizeof(w.manifest_key), "%s", m.prev_key);
		ws_buf_init(&wb, 1u << 24);
		assert_int_equal(ws_fmt_watermark_encode(&w, &wb), 0);
		carried_refused(&e, wb.data, wb.len, "carried under its predecessor's key", "carried manifest's key");
		st = carrying_stream(&e, 0);
		wt_write_txn(e.w, 3, 100);
		assert_int_not_equal(ws_stream_tail_frames(st, &o), 0);
		if (strstr(ws_errmsg(), "remove it"))
			fail_msg("a tail advises removing a key the chain names: %s", ws_errmsg());
		ws_stream_close(st);
		pred2 = wt_read_file(pp, &plen2);
		assert_non_null(pred2);
		assert_true(plen == plen2 && memcmp(pred, pred2, plen) == 0);
		free(pred);
		free(pred2);
		free(pp);
		ws_buf_free(&wb);
	}
	ws_fmt_manifest_free(&m);

	/* Back as it was: everything restores and verifies again. */
	assert_int_equal(unlink(wp), 0);
	assert_int_equal(wt_write_file(wp, orig, len), 0);
	/* The transaction the refused tail left behind ships now. */
	st = carrying_stream(&e, 0);
	assert_int_equal(ws_stream_tail_frames(st, &o), 0);
	ws_stream_close(st);
	assert_int_equal(ws_verify(e.sink, TENANT, NULL, NULL), 0);
	{
		int64_t rs = 0, rr = 0;
		assert_true(wt_restore_hash(&e, TENANT, NULL, &rr) == wt_content_hash(e.w, &rs));
		assert_true(rs == rr);
	}
	free(b);
	free(orig);
	free(wp);
	wt_env_free(&e);
}

/*
 * A watermark that carries the first manifest of a next generation (the
 * WAL restarted under a carried head): the manifest it is on, stored, is
 * damaged (one bit). Restore and verify refuse it; a checkpoint, whose cut
 * is that manifest (its frame and generation read from it), refuses,
 * naming it; nothing is committed or written at the restore's output.
 */
static void test_carried_next_gen_on_damaged(void **state)
{
	struct wt_env e;
	struct ws_stream *st;
	struct ws_stream_config c;
	struct ws_outcome o;
	struct ws_fmt_watermark w;
	struct ws_fmt_manifest m;
	struct ws_checkpoint_info ci;
	uint8_t *wm, *pb;
	size_t wlen = 0, plen = 0;
	char *wp, *pp, *out;
	int err = 0, rc;
	(void)state;

	wt_env_init(&e, "carried_gen_bad", 0);
	memset(&c, 0, sizeof(c));
	c.tenant = TENANT;
	c.db_path = e.db;
	c.epoch = 1;
	c.pointer_generation = 1;
	c.batch_bytes_max = 128u << 10;
	c.wal_checkpoint_bytes = 1; /* walship's own checkpoint after each locked tail */
	c.carry = WS_CARRY_ALWAYS;
	st = ws_stream_open(e.sink, &c, &err);
	assert_non_null(st);
	wt_write_txn(e.w, 60, 3000);
	assert_int_equal(ws_stream_tail_frames(st, &o), 0);
	wt_write_txn(e.w, 3, 100);
	assert_int_equal(ws_stream_tail_frames(st, &o), 0); /* locked: carried, checkpointed */
	wt_write_txn(e.w, 3, 100);                          /* restarts the WAL */
	assert_int_equal(ws_stream_tail_frames(st, &o), 0);
	assert_int_equal(o.kind, WS_OUTCOME_RESTARTED);
	ws_stream_close(st);
	wp = obj_path(e.sink_dir, TENANT "/wm");
	wm = wt_read_file(wp, &wlen);
	assert_non_null(wm);
	assert_int_equal(ws_fmt_watermark_decode(wm, wlen, &w), 0);
	assert_true(w.carried_len > 0);
	assert_int_equal(ws_fmt_manifest_decode(w.carried, (size_t)w.carried_len, &m), 0);
	assert_int_equal(m.kind, WS_MANIFEST_NEXT_GEN);
	assert_int_equal(ws_verify(e.sink, TENANT, NULL, NULL), 0);
	pp = obj_path(e.sink_dir, m.prev_key);
	pb = wt_read_file(pp, &plen);
	assert_non_null(pb);
	pb[plen / 2] ^= 0x01;
	assert_int_equal(unlink(pp), 0);
	assert_int_equal(wt_write_file(pp, pb, plen), 0);

	out = wt_path(e.out_dir, "carried_gen.db");
	rc = ws_restore(e.sink, TENANT, NULL, out);
	if (rc != WS_ECORRUPT && rc != WS_EFORMAT && rc != WS_EINCOMPLETE)
		fail_msg("restore gave %d (%s)", rc, ws_errmsg());
	assert_int_equal(access(out, F_OK), -1);
	assert_int_not_equal(ws_verify(e.sink, TENANT, NULL, NULL), 0);
	rc = ws_checkpoint_take(e.sink, NULL, &ci);
	if (rc == 0 && ci.committed)
		fail_msg("a checkpoint was committed on a damaged cut");
	if (!strstr(ws_errmsg(), m.prev_key))
		fail_msg("the checkpoint's error does not name %s: %s", m.prev_key, ws_errmsg());

	/* Back as it was: restore, verify and a checkpoint go through. */
	pb[plen / 2] ^= 0x01;
	assert_int_equal(unlink(pp), 0);
	assert_int_equal(wt_write_file(pp, pb, plen), 0);
	assert_int_equal(ws_verify(e.sink, TENANT, NULL, NULL), 0);
	assert_int_equal(ws_checkpoint_take(e.sink, NULL, &ci), 0);
	assert_true(ci.committed);
	ws_fmt_manifest_free(&m);
	free(out);
	free(pb);
	free(pp);
	free(wm);
	free(wp);
	wt_env_free(&e);
}

/*
 * A store that loses writes and returns an older watermark that carried its
 * manifest, after the owner stored a merge of that manifest (at the same
 * sequence) and went on past it: restore of the latest state refuses it as
 * gone back, and verify reports it; --frame still restores on purpose.
 */
static void test_carried_watermark_went_back(void **state)
{
	struct wt_env e;
	struct ws_stream *st;
	struct ws_outcome o;
	struct ws_stream_call call;
	struct ws_fmt_watermark w;
	uint8_t *old;
	size_t len = 0;
	char *wp, *out;
	int rc;
	(void)state;

	wt_env_init(&e, "carried_back", 0);
	st = carrying_stream(&e, 6u << 10); /* one one-frame tail carried; two merged are stored */
	wt_write_txn(e.w, 60, 3000);
	assert_int_equal(ws_stream_tail_frames(st, &o), 0);
	wt_write_txn(e.w, 1, 100);
	assert_int_equal(ws_stream_tail_frames(st, &o), 0);
	wp = obj_path(e.sink_dir, TENANT "/wm");
	old = wt_read_file(wp, &len);
	assert_non_null(old);
	assert_int_equal(ws_fmt_watermark_decode(old, len, &w), 0);
	assert_int_equal(w.version, 3);
	/* Merged past the bound: stored, at the same sequence; then one more. */
	wt_write_txn(e.w, 1, 100);
	assert_int_equal(ws_stream_tail_frames(st, &o), 0);
	ws_stream_last_call(st, &call);
	assert_int_equal(call.puts, 2);
	wt_write_txn(e.w, 5, 3000); /* too large to carry: a stored manifest on the merge */
	assert_int_equal(ws_stream_tail_frames(st, &o), 0);
	ws_stream_close(st);
	assert_int_equal(ws_verify(e.sink, TENANT, NULL, NULL), 0);
	/* The store loses both later watermark writes. */
	assert_int_equal(unlink(wp), 0);
	assert_int_equal(wt_write_file(wp, old, len), 0);
	out = wt_path(e.out_dir, "back.db");
	rc = ws_restore(e.sink, TENANT, NULL, out);
	assert_int_equal(rc, WS_EINCOMPLETE);
	assert_non_null(strstr(ws_errmsg(), "went back"));
	assert_int_equal(access(out, F_OK), -1);
	assert_int_not_equal(ws_verify(e.sink, TENANT, NULL, NULL), 0);
	{
		struct ws_restore_opts ro = { .frame = w.last_frame };
		assert_int_equal(ws_restore(e.sink, TENANT, &ro, out), 0);
		unlink(out);
	}
	free(out);
	free(old);
	free(wp);
	wt_env_free(&e);
}

/* ---- foreign objects ---------------------------------------------------------- */

static void test_foreign_objects(void **state)
{
	struct wt_env a, b;
	struct ws_stream *st;
	struct ws_outcome o;
	struct problems p;
	char *wm_a, *wm_b, *out, *before, *now;
	int err = 0, rc;
	(void)state;

	wt_env_init(&a, "foreign", 0);
	wt_write_txn(a.w, 10, 700);
	st = stream_for(a.sink, "alpha", a.db, &err);
	assert_non_null(st);
	tail_ok(st);
	ws_stream_close(st);

	/* Tenant beta ships its own database into the same sink. */
	memset(&b, 0, sizeof(b));
	b.db = wt_path(a.dir, "beta.db");
	b.w = wt_writer_open(b.db, 0);
	wt_write_txn(b.w, 4, 300);
	st = stream_for(a.sink, "beta", b.db, &err);
	assert_non_null(st);
	tail_ok(st);
	ws_stream_close(st);
	assert_int_equal(ws_verify(a.sink, NULL, NULL, NULL), 0);

	/* Alpha's watermark under beta's key. */
	wm_a = wt_path(a.sink_dir, "alpha/wm");
	wm_b = wt_path(a.sink_dir, "beta/wm");
	assert_int_equal(unlink(wm_b), 0);
	assert_int_equal(wt_sh("cp '%s' '%s'", wm_a, wm_b), 0);

	memset(&p, 0, sizeof(p));
	rc = ws_verify(a.sink, "beta", problem_cb, &p);
	assert_int_equal(rc, WS_EFORMAT);
	assert_int_equal(p.count, 1);
	assert_non_null(strstr(p.detail[0], "beta/wm"));
	assert_non_null(strstr(p.detail[0], "alpha"));
	/* The whole sink: only beta is reported. */
	memset(&p, 0, sizeof(p));
	assert_int_equal(ws_verify(a.sink, NULL, problem_cb, &p), WS_EFORMAT);
	assert_int_equal(p.count, 1);
	assert_string_equal(p.tenant[0], "beta");
	assert_int_equal(ws_verify(a.sink, "alpha", NULL, NULL), 0);

	out = wt_path(a.dir, "beta-restored.db");
	assert_int_equal(ws_restore(a.sink, "beta", NULL, out), WS_EFORMAT);
	assert_int_equal(access(out, F_OK), -1);

	/* Beta's stream refuses to build on it, and writes nothing. */
	wt_write_txn(b.w, 2, 300);
	before = wt_dir_digest(a.sink_dir);
	st = stream_for(a.sink, "beta", b.db, &err);
	assert_non_null(st);
	rc = ws_stream_tail_frames(st, &o);
	assert_int_equal(rc, WS_EFORMAT);
	ws_stream_close(st);
	now = wt_dir_digest(a.sink_dir);
	assert_string_equal(before, now);
	free(before);
	free(now);

	/* A well-formed beta watermark naming alpha's manifest (with its true
	 * hash): the manifest itself says whose it is. */
	{
		int e2 = 0;
		struct ws_store *s = ws_store_file_open(a.sink_dir, &e2);
		struct ws_buf buf;
		struct ws_fmt_watermark wm;
		assert_non_null(s);
		ws_buf_init(&buf, 0);
		assert_int_equal(ws_store_get(s, "alpha/wm", 0, UINT64_MAX, &buf, NULL), 0);
		assert_int_equal(ws_fmt_watermark_decode(buf.data, buf.len, &wm), 0);
		snprintf(wm.tenant, sizeof(wm.tenant), "beta");
		assert_int_equal(ws_fmt_watermark_encode(&wm, &buf), 0);
		assert_int_equal(ws_store_put(s, "beta/wm", buf.data, buf.len, WS_PUT_OVERWRITE, NULL, NULL), 0);
		ws_buf_free(&buf);
		ws_store_close(s);
	}
	memset(&p, 0, sizeof(p));
	rc = ws_verify(a.sink, "beta", problem_cb, &p);
	assert_int_equal(rc, WS_EFORMAT);
	assert_non_null(strstr(p.detail[0], "alpha/"));
	assert_int_equal(ws_restore(a.sink, "beta", NULL, out), WS_EFORMAT);
	assert_int_equal(access(out, F_OK), -1);

	/* Alpha is untouched by all of it. */
	assert_int_equal(ws_restore(a.sink, "alpha", NULL, out), 0);
	assert_true(file_hash(out) == content_hash(a.w));

	free(out);
	free(wm_a);
	free(wm_b);
	sqlite3_close(b.w);
	free(b.db);
	wt_env_free(&a);
}

/* ---- configuration ---------------------------------------------------------------- */

static void test_bad_tenant_names(void **state)
{
	struct wt_env s;
	char long_name[200];
	char max_name[WS_TENANT_MAX];
	const char *bad[] = { "", ".", "..", ".hidden", "_private", "a/b", "a b", "a\\b", "tab\t",
			      "caf\xc3\xa9", "star*", "q?", "new\nline", long_name };
	char *out;
	int err, rc;
	(void)state;

	memset(long_name, 'a', sizeof(long_name) - 1);
	long_name[sizeof(long_name) - 1] = '\0';
	memset(max_name, 'z', sizeof(max_name) - 1);
	max_name[sizeof(max_name) - 1] = '\0';
	wt_env_init(&s, "bad_names", 0);
	out = wt_path(s.dir, "r.db");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct ws_stream *st;
		err = 0;
		st = stream_for(s.sink, bad[i], s.db, &err);
		assert_null(st);
		assert_int_equal(err, WS_ECONFIG);
		assert_int_equal(ws_restore(s.sink, bad[i], NULL, out), WS_ECONFIG);
		assert_int_equal(ws_verify(s.sink, bad[i], NULL, NULL), WS_ECONFIG);
		rc = ws_list_tenants(s.sink, bad[i], NULL, NULL);
		assert_int_equal(rc, WS_ECONFIG);
	}
	{
		struct ws_stream *st;
		err = 0;
		st = stream_for(s.sink, NULL, s.db, &err);
		assert_null(st);
		assert_int_equal(err, WS_ECONFIG);
		assert_int_equal(ws_restore(s.sink, NULL, NULL, out), WS_ECONFIG);
	}
	assert_int_equal(access(out, F_OK), -1);
	{
		/* The longest legal name works end to end. */
		struct ws_stream *st = stream_for(s.sink, max_name, s.db, &err);
		assert_non_null(st);
		wt_write_txn(s.w, 2, 10);
		tail_ok(st);
		ws_stream_close(st);
		assert_int_equal(ws_restore(s.sink, max_name, NULL, out), 0);
		assert_true(file_hash(out) == content_hash(s.w));
	}
	/* Nothing but the legal tenant was ever written. */
	assert_int_equal(wt_sh("test \"$(ls -A '%s')\" = '%s'", s.sink_dir, max_name), 0);

	/* Other bad configuration. */
	{
		struct ws_stream_config c;
		struct ws_stream *st;
		memset(&c, 0, sizeof(c));
		c.tenant = TENANT;
		c.db_path = s.db;
		c.batch_bytes_max = 4096;
		err = 0;
		st = ws_stream_open(s.sink, &c, &err);
		assert_null(st);
		assert_int_equal(err, WS_ECONFIG);
		c.batch_bytes_max = 0;
		c.db_path = NULL;
		st = ws_stream_open(s.sink, &c, &err);
		assert_null(st);
		assert_int_equal(err, WS_ECONFIG);
	}
	{
		const char *urls[] = { "", "file://", "file://relative/dir", "ftp://host/x", "/abs/no/scheme" };
		for (size_t i = 0; i < sizeof(urls) / sizeof(urls[0]); i++) {
			struct ws_sink *k;
			err = 0;
			k = ws_sink_open(urls[i], &err);
			assert_null(k);
			assert_int_equal(err, WS_ECONFIG);
		}
	}
	free(out);
	wt_env_free(&s);
}

/* ws_sink_set_fetch_parallelism takes 1..WS_FETCH_PARALLELISM_MAX and says what else is wrong. */
static void test_fetch_parallelism_bounds(void **state)
{
	struct wt_env e;
	const unsigned bad[] = { 0, WS_FETCH_PARALLELISM_MAX + 1, UINT32_MAX };
	(void)state;
	wt_env_init(&e, "par", 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(ws_sink_set_fetch_parallelism(e.sink, bad[i]), WS_ECONFIG);
		if (!strstr(ws_errmsg(), "must be 1 to 256"))
			fail_msg("parallelism %u: '%s' does not say what is allowed", bad[i], ws_errmsg());
	}
	assert_int_equal(ws_sink_set_fetch_parallelism(NULL, 8), WS_ECONFIG);
	assert_int_equal(ws_sink_set_fetch_parallelism(e.sink, 1), 0);
	assert_int_equal(ws_sink_set_fetch_parallelism(e.sink, WS_FETCH_PARALLELISM_MAX), 0);
	wt_env_free(&e);
}

static void test_missing_database(void **state)
{
	struct wt_env s;
	struct ws_stream *st;
	char *missing, *in_missing_dir, *out;
	int err;
	(void)state;

	wt_env_init(&s, "bad_missing", 0);
	missing = wt_path(s.dir, "nope.db");
	in_missing_dir = wt_path(s.dir, "no/such/dir/x.db");
	err = 0;
	st = stream_for(s.sink, TENANT, missing, &err);
	assert_null(st);
	assert_int_equal(err, -ENOENT);
	assert_non_null(strstr(ws_errmsg(), missing));
	assert_non_null(strstr(ws_errmsg(), TENANT));
	err = 0;
	st = stream_for(s.sink, TENANT, in_missing_dir, &err);
	assert_null(st);
	assert_int_equal(err, -ENOENT);
	/* Opening did not create it. */
	assert_int_equal(access(missing, F_OK), -1);

	/* A database that vanishes after the stream opened. */
	{
		char *gone = wt_path(s.dir, "gone.db");
		sqlite3 *w = wt_writer_open(gone, 0);
		struct ws_outcome o;
		char *before;
		char *now;
		sqlite3_close(w);
		st = stream_for(s.sink, TENANT, gone, &err);
		assert_non_null(st);
		assert_int_equal(unlink(gone), 0);
		before = wt_dir_digest(s.sink_dir);
		assert_int_not_equal(ws_stream_tail_frames(st, &o), 0);
		now = wt_dir_digest(s.sink_dir);
		assert_string_equal(before, now);
		ws_stream_close(st);
		free(before);
		free(now);
		free(gone);
	}

	/* Restore of a tenant that was never shipped. */
	out = wt_path(s.dir, "r.db");
	assert_int_equal(ws_restore(s.sink, "never", NULL, out), WS_ENOTFOUND);
	assert_int_equal(access(out, F_OK), -1);
	free(out);
	free(missing);
	free(in_missing_dir);
	wt_env_free(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_garbage_wal),
		cmocka_unit_test(test_fetch_parallelism_bounds),
		cmocka_unit_test(test_not_wal_database),
		cmocka_unit_test(test_damaged_sink),
		cmocka_unit_test(test_stream_refuses_bad_watermark),
		cmocka_unit_test(test_carried_watermark_damaged),
		cmocka_unit_test(test_carried_next_gen_on_damaged),
		cmocka_unit_test(test_carried_watermark_went_back),
		cmocka_unit_test(test_forged_manifests),
		cmocka_unit_test(test_restore_time_not_past_a_later_stamp),
		cmocka_unit_test(test_forged_next_gen_page_size),
		cmocka_unit_test(test_empty_database),
		cmocka_unit_test(test_verify_tmpdir_full),
		cmocka_unit_test(test_foreign_objects),
		cmocka_unit_test(test_bad_tenant_names),
		cmocka_unit_test(test_missing_database),
	};
	/* WS_TEST_FILTER=GLOB runs a subset (wt_run_group). */
	return WT_RUN_GROUP(tests, NULL, NULL);
}
