/*
 * Checkpoints of a sink, restore by checkpoint and retention
 * (core/ckpt_take.c, ckpt_read.c, retention.c), against a real SQLite writer and a file:// sink
 * (the local single-writer authority).
 *
 * Expected states come from the source database itself (wt_content_hash
 * right after a tail, with no write in between), never from the engine.
 * Crash tests fork a child that takes a checkpoint (or runs retention) with
 * one fault site armed to SIGKILL it, for every site of the protocol, then
 * recover in the parent and check the durable state: the decision head
 * holds one outcome per decided ID (a Commit is never re-decided), every
 * committed checkpoint has every object it names, no artifact, candidate
 * index, active inventory or open witness is left behind by an aborted
 * attempt, and restore (by checkpoint and of the live stream) still equals
 * the source.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "coreutil.h"
#include "walship.h"
#include "ws_ckpt.h"
#include "ws_fault.h"
#include "ws_format.h"
#include "ws_hash.h"
#include "ws_store.h"

#define TENANT "orders"
#define TENANT2 "users"

struct cpenv {
	struct wt_env e;
	sqlite3 *w2;            /* second tenant's writer */
	char *db2;
	struct ws_stream *st, *st2;
};

static struct ws_stream *open_stream_wal(struct ws_sink *sink, const char *tenant, const char *db,
				 uint64_t wal_checkpoint_bytes);

static struct ws_stream *open_stream(struct ws_sink *sink, const char *tenant, const char *db)
{
	/* A WAL checkpoint once all is shipped, so TRUNCATE completes. */
	return open_stream_wal(sink, tenant, db, 1);
}

static struct ws_stream *open_stream_inl(struct ws_sink *sink, const char *tenant, const char *db,
					 uint64_t wal_checkpoint_bytes, uint64_t inline_max)
{
	struct ws_stream_config cfg;
	struct ws_stream *st;
	int err = -1;
	memset(&cfg, 0, sizeof(cfg));
	cfg.tenant = tenant;
	cfg.db_path = db;
	cfg.epoch = 1;
	cfg.pointer_generation = 1;
	cfg.wal_checkpoint_bytes = wal_checkpoint_bytes;
	cfg.inline_batch_bytes_max = inline_max;
	st = ws_stream_open(sink, &cfg, &err);
	if (!st)
		fail_msg("ws_stream_open: %s (%s)", ws_strerror(err), ws_errmsg());
	return st;
}

static struct ws_stream *open_stream_wal(struct ws_sink *sink, const char *tenant, const char *db,
					 uint64_t wal_checkpoint_bytes)
{
	return open_stream_inl(sink, tenant, db, wal_checkpoint_bytes, 0);
}

static void cp_init(struct cpenv *c, const char *tag)
{
	memset(c, 0, sizeof(*c));
	wt_env_init(&c->e, tag, 0);
	c->db2 = wt_path(c->e.dir, "src2.db");
	c->w2 = wt_writer_open(c->db2, 0);
	wt_write_txn(c->e.w, 20, 300);
	wt_write_txn(c->w2, 10, 200);
	c->st = open_stream(c->e.sink, TENANT, c->e.db);
	c->st2 = open_stream(c->e.sink, TENANT2, c->db2);
}

static void cp_free(struct cpenv *c)
{
	ws_stream_close(c->st);
	ws_stream_close(c->st2);
	sqlite3_close(c->w2);
	free(c->db2);
	wt_env_free(&c->e);
}

/* Write n transactions to both tenants, with a TRUNCATE WAL checkpoint
 * after every other one (a new WAL generation), shipping each. */
static void cp_write(struct cpenv *c, int n)
{
	struct ws_outcome o;
	for (int i = 0; i < n; i++) {
		wt_write_txn(c->e.w, 5 + i, 400);
		wt_write_txn(c->w2, 3, 100);
		wt_tail_ok(c->st, &o);
		wt_tail_ok(c->st2, &o);
		if (i % 2 == 1) {
			char res[64];
			wt_tail_ok(c->st, &o);
			wt_tail_ok(c->st2, &o);
			wt_query1(c->e.w, "PRAGMA wal_checkpoint(TRUNCATE)", res);
			assert_string_equal(res, "0"); /* not busy: a new WAL generation follows */
			wt_query1(c->w2, "PRAGMA wal_checkpoint(TRUNCATE)", res);
			assert_string_equal(res, "0");
		}
	}
	wt_tail_ok(c->st, &o);
	wt_tail_ok(c->st2, &o);
}

static void take_ok(struct cpenv *c, struct ws_checkpoint_info *info)
{
	int rc = ws_checkpoint_take(c->e.sink, NULL, info);
	if (rc)
		fail_msg("checkpoint: %s (%s)", ws_strerror(rc), ws_errmsg());
	assert_true(info->committed);
	assert_true(info->own);
}

static char *out_path(struct cpenv *c)
{
	char name[64];
	snprintf(name, sizeof(name), "r%u.db", ++c->e.restores);
	return wt_path(c->e.out_dir, name);
}

static uint64_t restore_ckpt_hash(struct cpenv *c, const char *tenant, uint64_t id)
{
	char *p = out_path(c);
	uint64_t h;
	int rc = ws_restore_checkpoint(c->e.sink, tenant, id, p, false);
	if (rc)
		fail_msg("restore --checkpoint %" PRIu64 ": %s (%s)", id, ws_strerror(rc), ws_errmsg());
	h = wt_file_hash(p, NULL);
	free(p);
	return h;
}

static uint64_t restore_live_hash(struct cpenv *c, const char *tenant)
{
	char *p = out_path(c);
	uint64_t h;
	int rc = ws_restore(c->e.sink, tenant, NULL, p);
	if (rc)
		fail_msg("restore: %s (%s)", ws_strerror(rc), ws_errmsg());
	h = wt_file_hash(p, NULL);
	free(p);
	return h;
}

/* ---- the durable state after recovery ---------------------------------------------- */

struct ids {
	uint64_t id[256];
	size_t n;
};

static int collect(const struct ws_checkpoint_info *info, void *arg)
{
	struct ids *x = arg;
	if (x->n < 256)
		x->id[x->n++] = info->id;
	return 0;
}

static bool has_id(const struct ids *x, uint64_t id)
{
	for (size_t i = 0; i < x->n; i++)
		if (x->id[i] == id)
			return true;
	return false;
}

static void list_prefix(struct ws_store *s, const char *prefix, void (*fn)(const char *key, void *arg), void *arg)
{
	char token[WS_KEY_MAX] = "";
	for (;;) {
		struct ws_list_page page;
		bool more;
		memset(&page, 0, sizeof(page));
		assert_int_equal(ws_store_list(s, prefix, token, WS_LIST_PAGE_MAX, &page), 0);
		for (size_t i = 0; i < page.count; i++)
			fn(page.keys[i], arg);
		more = page.truncated;
		if (more)
			snprintf(token, sizeof(token), "%s", page.next_token);
		ws_list_page_free(&page);
		if (!more)
			return;
	}
}

struct scan {
	struct ws_store *s;
	const struct ids *committed;
	unsigned bad;
};

static void check_artifact(const char *key, void *arg)
{
	struct scan *x = arg;
	uint64_t id = strtoull(key + strlen("checkpoints/artifacts/"), NULL, 16);
	if (!has_id(x->committed, id)) {
		fprintf(stderr, "orphan artifact %s\n", key);
		x->bad++;
	}
}

static void check_index(const char *key, void *arg)
{
	struct scan *x = arg;
	uint64_t id = strtoull(key + strlen("checkpoints/committed/"), NULL, 16);
	struct ws_buf b;
	ws_buf_init(&b, 1u << 26);
	assert_int_equal(ws_store_get(x->s, key, 0, UINT64_MAX, &b, NULL), 0);
	assert_int_equal(ws_buf_append(&b, "", 1), 0);
	if (!has_id(x->committed, id) && !strstr((const char *)b.data, "walship.ckpt.sealed.v1")) {
		fprintf(stderr, "unsealed candidate %s of an undecided or aborted checkpoint\n", key);
		x->bad++;
	}
	ws_buf_free(&b);
}

static void get_text(struct ws_store *s, const char *key, char *out, size_t cap)
{
	struct ws_buf b;
	ws_buf_init(&b, 1u << 20);
	out[0] = '\0';
	if (ws_store_get(s, key, 0, UINT64_MAX, &b, NULL) == 0)
		snprintf(out, cap, "%.*s", (int)b.len, (const char *)b.data);
	ws_buf_free(&b);
}

/*
 * After recovery: inventory idle, witness closed, every committed
 * checkpoint verifies with all its artifacts, no orphan artifact, every
 * index of an uncommitted ID sealed, and the latest Commit cannot be
 * re-decided (its ID has exactly one decision).
 */
static void check_durable(struct cpenv *c, struct ids *committed)
{
	struct ws_store *s = NULL;
	struct scan x;
	char text[1 << 14];
	int rc;

	memset(committed, 0, sizeof(*committed));
	rc = ws_checkpoint_list(c->e.sink, collect, committed);
	if (rc)
		fail_msg("list: %s (%s)", ws_strerror(rc), ws_errmsg());
	{
		int err = 0;
		s = ws_store_file_open(c->e.sink_dir, &err);
		assert_non_null(s);
	}
	get_text(s, "checkpoints/inventory", text, sizeof(text));
	if (text[0] && !strstr(text, "\"active\":null"))
		fail_msg("inventory still active: %s", text);
	get_text(s, "checkpoints/witness", text, sizeof(text));
	if (text[0] && !strstr(text, "\"state\":\"closed\""))
		fail_msg("witness still open: %s", text);
	memset(&x, 0, sizeof(x));
	x.s = s;
	x.committed = committed;
	list_prefix(s, "checkpoints/artifacts/", check_artifact, &x);
	list_prefix(s, "checkpoints/committed/", check_index, &x);
	assert_int_equal(x.bad, 0);
	/* Every committed checkpoint restores both tenants from its artifacts. */
	for (size_t i = 0; i < committed->n; i++) {
		(void)restore_ckpt_hash(c, TENANT, committed->id[i]);
		(void)restore_ckpt_hash(c, TENANT2, committed->id[i]);
	}
	/* One decision per ID: re-deciding the latest Commit as Abort returns
	 * the durable winner and changes nothing. */
	if (committed->n) {
		int err = 0;
		struct ws_ckpt *k = ws_ckpt_open_local(c->e.sink_dir, &err);
		struct ws_ckpt_record_result rr;
		struct ws_ckpt_head h1, h2;
		bool found;
		assert_non_null(k);
		assert_int_equal(ws_ckpt_decision_head(k, &h1, &found), 0);
		assert_true(found && h1.has_commit);
		assert_int_equal(h1.latest_commit.checkpoint_id, committed->id[0]);
		assert_int_equal(ws_ckpt_record_outcome(k, h1.epoch, committed->id[0], WS_CKPT_SCOPE_LOCAL, NULL,
							NULL, WS_CKPT_ABORT, NULL, &rr), 0);
		assert_int_not_equal(rr.kind, WS_CKPT_OK);
		assert_int_equal(ws_ckpt_decision_head(k, &h2, &found), 0);
		assert_int_equal(h2.decisions, h1.decisions);
		ws_ckpt_close(k);
	}
	ws_store_close(s);
}

/* ---- tests ---------------------------------------------------------------------------- */

static void test_take_and_restore(void **state)
{
	struct cpenv c;
	struct ws_checkpoint_info i1, i2;
	uint64_t h1, h2, h3, g1, g3;
	(void)state;

	cp_init(&c, "ckpt-take");
	cp_write(&c, 4);
	h1 = wt_content_hash(c.e.w, NULL);
	g1 = wt_content_hash(c.w2, NULL);
	take_ok(&c, &i1);
	assert_int_equal(i1.tenants, 2);
	assert_int_equal(i1.artifacts, 2);
	assert_false(i1.has_predecessor);
	assert_int_equal(i1.incremental, 0);

	cp_write(&c, 5);
	h2 = wt_content_hash(c.e.w, NULL);
	take_ok(&c, &i2);
	assert_true(i2.id > i1.id);
	assert_true(i2.has_predecessor);
	assert_int_equal(i2.predecessor_id, i1.id);
	/* Both images were built from checkpoint 1's artifacts plus the frames after its cut. */
	assert_int_equal(i2.incremental, 2);

	cp_write(&c, 3);
	h3 = wt_content_hash(c.e.w, NULL);
	g3 = wt_content_hash(c.w2, NULL);

	assert_int_equal(restore_ckpt_hash(&c, TENANT, i1.id), h1);
	assert_int_equal(restore_ckpt_hash(&c, TENANT2, i1.id), g1);
	assert_int_equal(restore_ckpt_hash(&c, TENANT, i2.id), h2);
	assert_int_equal(restore_ckpt_hash(&c, TENANT, WS_CHECKPOINT_LATEST), h2);
	/* Latest: the checkpoint's artifact plus the frames after its cut. */
	assert_int_equal(restore_live_hash(&c, TENANT), h3);
	assert_int_equal(restore_live_hash(&c, TENANT2), g3);

	{
		char *p = out_path(&c);
		assert_int_equal(ws_restore_checkpoint(c.e.sink, TENANT, i2.id + 1000, p, false), WS_ENOTFOUND);
		assert_int_equal(ws_restore_checkpoint(c.e.sink, "nosuch", i2.id, p, false), WS_ENOTFOUND);
		free(p);
	}
	cp_free(&c);
}

struct keys {
	char (*k)[WS_KEY_MAX];
	size_t n;
};

static void on_delete(const char *key, void *arg)
{
	struct keys *x = arg;
	x->k = realloc(x->k, (x->n + 1) * sizeof(*x->k));
	assert_non_null(x->k);
	snprintf(x->k[x->n++], WS_KEY_MAX, "%s", key);
}

static void test_retention(void **state)
{
	struct cpenv c;
	struct ws_checkpoint_info i1, i2, i3;
	struct ws_retention_report rep, dry;
	struct keys dk = { 0 }, rk = { 0 };
	uint64_t h2, h3, hl;
	int rc;
	(void)state;

	cp_init(&c, "ckpt-ret");
	/* No Commit yet: nothing protected, nothing deleted. */
	assert_int_equal(ws_retention_run(c.e.sink, false, NULL, NULL, &rep), 0);
	assert_false(rep.ran);

	cp_write(&c, 3);
	take_ok(&c, &i1);
	cp_write(&c, 3);
	h2 = wt_content_hash(c.e.w, NULL);
	take_ok(&c, &i2);
	cp_write(&c, 3);
	h3 = wt_content_hash(c.e.w, NULL);
	take_ok(&c, &i3);
	cp_write(&c, 2);
	hl = wt_content_hash(c.e.w, NULL);

	assert_int_equal(ws_retention_run(c.e.sink, true, on_delete, &dk, &dry), 0);
	assert_true(dry.ran);
	assert_int_equal(dry.protected_id, i3.id);
	assert_true(dk.n > 0);
	rc = ws_retention_run(c.e.sink, false, on_delete, &rk, &rep);
	if (rc)
		fail_msg("retention: %s (%s)", ws_strerror(rc), ws_errmsg());
	assert_int_equal(rep.protected_id, i3.id);
	assert_int_equal(rep.checkpoints_deleted, 2);
	/* The dry run named exactly what the run deleted: older checkpoints'
	 * artifacts and indexes, and each tenant's manifests before the cut. */
	assert_int_equal(dk.n, rk.n);
	{
		unsigned manifests = 0, artifacts = 0, indexes = 0;
		for (size_t i = 0; i < rk.n; i++) {
			manifests += strncmp(rk.k[i], TENANT "/", strlen(TENANT) + 1) == 0 && strstr(rk.k[i], "/m");
			artifacts += strncmp(rk.k[i], "checkpoints/artifacts/", 22) == 0;
			indexes += strncmp(rk.k[i], "checkpoints/committed/", 22) == 0;
		}
		assert_true(manifests > 0);
		assert_int_equal(artifacts, 4);
		assert_int_equal(indexes, 2);
	}
	for (size_t i = 0; i < rk.n; i++) {
		struct ws_obj_info info;
		int err = 0;
		struct ws_store *s = ws_store_file_open(c.e.sink_dir, &err);
		assert_string_equal(dk.k[i], rk.k[i]);
		assert_int_equal(ws_store_head(s, rk.k[i], &info), WS_ENOTFOUND);
		ws_store_close(s);
	}
	/* What retention keeps still restores. */
	assert_int_equal(restore_ckpt_hash(&c, TENANT, i3.id), h3);
	assert_int_equal(restore_live_hash(&c, TENANT), hl);
	{
		char *p = out_path(&c);
		assert_int_equal(ws_restore_checkpoint(c.e.sink, TENANT, i1.id, p, false), WS_ENOTFOUND);
		assert_int_equal(ws_restore_checkpoint(c.e.sink, TENANT, i2.id, p, false), WS_ENOTFOUND);
		free(p);
	}
	(void)h2;
	/* The stream keeps going after retention, and checkpoints build on. */
	cp_write(&c, 3);
	hl = wt_content_hash(c.e.w, NULL);
	{
		struct ws_checkpoint_info i4;
		take_ok(&c, &i4);
		assert_int_equal(i4.incremental, 2);
		assert_int_equal(restore_ckpt_hash(&c, TENANT, i4.id), hl);
	}
	assert_int_equal(restore_live_hash(&c, TENANT), hl);
	/* Idempotent: a second run for the same cut deletes nothing more. */
	{
		struct keys again = { 0 };
		assert_int_equal(ws_retention_run(c.e.sink, false, on_delete, &again, &rep), 0);
		assert_int_equal(restore_live_hash(&c, TENANT), hl);
		free(again.k);
	}
	free(dk.k);
	free(rk.k);
	cp_free(&c);
}

/*
 * A manifest behind the cut that no chain reaches and that names an object
 * of another tenant's prefix (a forged or misplaced manifest, its hashes
 * whole): retention deletes the manifest and what it names under its own
 * tenant, and never the other tenant's object.
 */
static void test_retention_spares_foreign_object(void **state)
{
	struct cpenv c;
	struct ws_checkpoint_info i1, i2;
	struct ws_retention_report rep;
	struct ws_fmt_manifest m;
	struct ws_buf b;
	uint8_t sha[WS_SHA256_LEN], *raw;
	char base[WS_KEY_MAX], forged[WS_KEY_MAX], foreign[WS_KEY_MAX], *slash, *p, *q;
	size_t len = 0;
	uint64_t hl;
	int rc;
	(void)state;

	cp_init(&c, "ckpt-foreign");
	cp_write(&c, 2);
	take_ok(&c, &i1);
	cp_write(&c, 2);
	take_ok(&c, &i2);
	cp_write(&c, 1);
	hl = wt_content_hash(c.e.w, NULL);

	/* The tenant's first manifest (its REBASE base, sequence 1, behind
	 * both cuts), forged to name a copy of its first snapshot part under
	 * tenant "other", stored under a key of its own (no link names it). */
	p = wt_path(c.e.sink_dir, TENANT);
	assert_int_equal(wt_sh("cd '%s' && find . -name 'm0000000000000001-*' | head -1 > '%s/base.key'", p, c.e.dir), 0);
	free(p);
	q = wt_path(c.e.dir, "base.key");
	raw = wt_read_file(q, &len);
	free(q);
	assert_non_null(raw);
	assert_true(len > 3);
	snprintf(base, sizeof(base), TENANT "/%.*s", (int)(len - 3), (const char *)raw + 2);
	free(raw);
	p = wt_path(c.e.sink_dir, base);
	raw = wt_read_file(p, &len);
	free(p);
	assert_non_null(raw);
	assert_int_equal(ws_fmt_manifest_decode(raw, len, &m), 0);
	assert_int_equal(m.kind, WS_MANIFEST_REBASE);
	assert_true(m.snap_count >= 1);
	snprintf(foreign, sizeof(foreign), "other%s", m.snaps[0].key + strlen(TENANT));
	p = wt_path(c.e.sink_dir, m.snaps[0].key);
	q = wt_path(c.e.sink_dir, foreign);
	assert_int_equal(wt_sh("mkdir -p \"$(dirname '%s')\" && cp '%s' '%s'", q, p, q), 0);
	free(p);
	free(q);
	snprintf(m.snaps[0].key, sizeof(m.snaps[0].key), "%s", foreign);
	ws_buf_init(&b, 0);
	assert_int_equal(ws_fmt_manifest_encode(&m, &b), 0);
	ws_sha256(b.data, b.len, sha);
	snprintf(forged, sizeof(forged), "%s", base);
	slash = strrchr(forged, '-');
	assert_non_null(slash);
	snprintf(slash + 1, sizeof(forged) - (size_t)(slash + 1 - forged), "%02x%02x%02x%02x%02x%02x%02x%02x", sha[0],
		 sha[1], sha[2], sha[3], sha[4], sha[5], sha[6], sha[7]);
	assert_string_not_equal(forged, base);
	p = wt_path(c.e.sink_dir, forged);
	assert_int_equal(wt_write_file(p, b.data, b.len), 0);
	ws_buf_free(&b);
	ws_fmt_manifest_free(&m);
	free(raw);

	rc = ws_retention_run(c.e.sink, false, NULL, NULL, &rep);
	if (rc)
		fail_msg("retention: %s (%s)", ws_strerror(rc), ws_errmsg());
	assert_int_equal(rep.protected_id, i2.id);
	/* The forged manifest is gone (its tenant's), the other tenant's
	 * object it named is not, and the live state still restores. */
	assert_int_not_equal(access(p, F_OK), 0);
	free(p);
	p = wt_path(c.e.sink_dir, foreign);
	assert_int_equal(access(p, F_OK), 0);
	free(p);
	assert_int_equal(restore_live_hash(&c, TENANT), hl);
	(void)i1;
	cp_free(&c);
}

/*
 * A checkpoint that does not name a tenant an older one names, while that
 * tenant still has a watermark (the cut did not see it: here its watermark
 * is away while the cut is read, as a listing that misses it or a read
 * that fails would leave it): the older checkpoint's artifact is the
 * tenant's only base once retention has removed its history behind that
 * cut. Retention refuses and deletes nothing until a checkpoint names the
 * tenant again; it used to delete that artifact and index, and the tenant
 * no longer restored.
 */
static void test_retention_keeps_base_of_tenant_left_out(void **state)
{
	struct cpenv c;
	struct ws_checkpoint_info i1, i2, i3;
	struct ws_retention_report rep;
	struct keys rk = { 0 };
	char *wm, *aside, art[WS_KEY_MAX], *art_path;
	uint64_t h1, h2;
	int rc;
	(void)state;

	cp_init(&c, "ckpt-omit");
	cp_write(&c, 3);
	h1 = wt_content_hash(c.w2, NULL);
	take_ok(&c, &i1);
	cp_write(&c, 3);
	assert_int_equal(ws_retention_run(c.e.sink, false, NULL, NULL, &rep), 0);
	assert_int_equal(rep.protected_id, i1.id); /* TENANT2's history before i1's cut is gone */
	h2 = wt_content_hash(c.w2, NULL);

	wm = wt_path(c.e.sink_dir, TENANT2 "/wm");
	aside = wt_path(c.e.dir, "wm-aside");
	assert_int_equal(rename(wm, aside), 0);
	/* A cut that misses a tenant the previous checkpoint named is refused
	 * (issue 31 item 9) unless the tenant was removed for good; removed
	 * while its watermark was away, it then came back. */
	rc = ws_checkpoint_take(c.e.sink, NULL, &i2);
	assert_int_equal(rc, WS_EINCOMPLETE);
	assert_non_null(strstr(ws_errmsg(), TENANT2));
	assert_int_equal(ws_tenant_forget(c.e.sink, TENANT2, NULL), 0);
	take_ok(&c, &i2);
	assert_int_equal(rename(aside, wm), 0);
	assert_int_equal(i2.tenants, 1); /* TENANT only */

	rc = ws_retention_run(c.e.sink, false, on_delete, &rk, &rep);
	assert_int_equal(rc, WS_EINCOMPLETE);
	assert_non_null(strstr(ws_errmsg(), "tenant " TENANT2));
	assert_int_equal(rk.n, 0);
	assert_int_equal(ws_retention_run(c.e.sink, true, on_delete, &rk, &rep), WS_EINCOMPLETE);
	assert_int_equal(rk.n, 0);
	snprintf(art, sizeof(art), "checkpoints/artifacts/%016" PRIx64 "/%s", i1.id, TENANT2);
	art_path = wt_path(c.e.sink_dir, art);
	assert_int_equal(access(art_path, F_OK), 0);
	assert_int_equal(restore_live_hash(&c, TENANT2), h2);
	assert_int_equal(restore_ckpt_hash(&c, TENANT2, i1.id), h1);

	/* A checkpoint that names it again: retention goes on, the tenant restores. */
	take_ok(&c, &i3);
	assert_int_equal(i3.tenants, 2);
	rc = ws_retention_run(c.e.sink, false, NULL, NULL, &rep);
	if (rc)
		fail_msg("retention: %s (%s)", ws_strerror(rc), ws_errmsg());
	assert_int_equal(rep.protected_id, i3.id);
	assert_int_equal(access(art_path, F_OK), -1);
	assert_int_equal(restore_live_hash(&c, TENANT2), h2);
	free(rk.k);
	free(art_path);
	free(aside);
	free(wm);
	cp_free(&c);
}

static int grab_wm(const struct ws_tenant_info *t, void *arg)
{
	snprintf(arg, WS_KEY_MAX, "%s", t->watermark.manifest_key);
	return 0;
}

static int count_objects(const struct ws_tenant_info *t, void *arg)
{
	*(uint64_t *)arg = t->objects;
	return 0;
}

/*
 * A REBASE after a checkpoint cuts the old chain off the live stream:
 * retention removes that superseded chain too (it is behind an older cut),
 * but nothing the re-based live chain shares with it by content.
 */
static void test_retention_after_rebase(void **state)
{
	struct cpenv c;
	struct ws_checkpoint_info a, b;
	struct ws_retention_report rep;
	struct ws_outcome o;
	struct ws_obj_info info;
	struct ws_store *s;
	char old_manifest[WS_KEY_MAX], res[64];
	uint64_t hb, hl, before = 0, after = 0;
	int err = 0;
	(void)state;

	ws_fault_disarm();
	cp_init(&c, "ckpt-rebase");
	cp_write(&c, 3);
	take_ok(&c, &a);
	assert_int_equal(ws_list_tenants(c.e.sink, TENANT, grab_wm, old_manifest), 0);
	/* The stream stops; the application writes and resets its WAL
	 * unshipped; the next stream must re-base with a snapshot. */
	ws_stream_close(c.st);
	wt_write_txn(c.e.w, 7, 300);
	wt_query1(c.e.w, "PRAGMA wal_checkpoint(TRUNCATE)", res);
	assert_string_equal(res, "0");
	wt_write_txn(c.e.w, 4, 300);
	c.st = open_stream(c.e.sink, TENANT, c.e.db);
	wt_tail_ok(c.st, &o);
	assert_int_equal(o.kind, WS_OUTCOME_RESTARTED);
	cp_write(&c, 2);
	hb = wt_content_hash(c.e.w, NULL);
	take_ok(&c, &b);
	cp_write(&c, 1);
	hl = wt_content_hash(c.e.w, NULL);
	assert_int_equal(ws_list_tenants(c.e.sink, TENANT, count_objects, &before), 0);
	assert_int_equal(ws_retention_run(c.e.sink, false, NULL, NULL, &rep), 0);
	assert_int_equal(ws_list_tenants(c.e.sink, TENANT, count_objects, &after), 0);
	assert_true(after < before);
	s = ws_store_file_open(c.e.sink_dir, &err);
	assert_non_null(s);
	assert_int_equal(ws_store_head(s, old_manifest, &info), WS_ENOTFOUND);
	ws_store_close(s);
	assert_int_equal(restore_ckpt_hash(&c, TENANT, b.id), hb);
	assert_int_equal(restore_live_hash(&c, TENANT), hl);
	cp_free(&c);
}

/* ---- verify and restore --frame/--time after retention -------------------------------- */

static int grab_last_frame(const struct ws_tenant_info *t, void *arg)
{
	*(uint64_t *)arg = t->watermark.last_frame;
	return 0;
}

static uint64_t wm_last_frame(struct cpenv *c)
{
	uint64_t f = 0;
	assert_int_equal(ws_list_tenants(c->e.sink, TENANT, grab_last_frame, &f), 0);
	return f;
}

struct problems {
	unsigned n;
	char key[WS_KEY_MAX];    /* the first problem's object, "" if none named */
};

static void on_problem(const char *tenant, const char *key, int err, const char *detail, void *arg)
{
	struct problems *p = arg;
	fprintf(stderr, "verify problem: tenant %s key %s: %s (%s)\n", tenant, key ? key : "-", detail,
		ws_strerror(err));
	if (!p->n++)
		snprintf(p->key, sizeof(p->key), "%s", key ? key : "");
}

static int verify_all(struct cpenv *c, const char *tenant, struct problems *p)
{
	memset(p, 0, sizeof(*p));
	return ws_verify(c->e.sink, tenant, on_problem, p);
}

/* One transaction of rows on TENANT, shipped: its commit frame; *h (may be
 * NULL) the source's hash right after it. */
static uint64_t ship_txn(struct cpenv *c, int rows, uint64_t *h)
{
	struct ws_outcome o;
	wt_write_txn(c->e.w, rows, 300);
	wt_tail_ok(c->st, &o);
	if (h)
		*h = wt_content_hash(c->e.w, NULL);
	return wm_last_frame(c);
}

/* restore with opts: 0 and the file's hash in *h, or the error. */
static int restore_opts_hash(struct cpenv *c, const struct ws_restore_opts *o, uint64_t *h)
{
	char *p = out_path(c);
	int rc = ws_restore(c->e.sink, TENANT, o, p);
	if (rc == 0)
		*h = wt_file_hash(p, NULL);
	free(p);
	return rc;
}

static void collect_key(const char *key, void *arg)
{
	on_delete(key, arg);
}

/* Every key of TENANT at the sink into k. */
static void tenant_keys(struct cpenv *c, struct keys *k)
{
	int err = 0;
	struct ws_store *s = ws_store_file_open(c->e.sink_dir, &err);
	assert_non_null(s);
	list_prefix(s, TENANT "/", collect_key, k);
	ws_store_close(s);
}

static bool keys_have(const struct keys *k, const char *key)
{
	for (size_t i = 0; i < k->n; i++)
		if (strcmp(k->k[i], key) == 0)
			return true;
	return false;
}

/* Rewrite a file of the sink with other bytes of the same length. */
static void flip_byte(const char *path, long off)
{
	FILE *f = fopen(path, "r+b");
	int ch;
	assert_non_null(f);
	assert_int_equal(fseek(f, off, SEEK_SET), 0);
	ch = fgetc(f);
	assert_true(ch != EOF);
	assert_int_equal(fseek(f, off, SEEK_SET), 0);
	assert_int_equal(fputc(ch ^ 0x5a, f), ch ^ 0x5a);
	assert_int_equal(fclose(f), 0);
}

/*
 * After a checkpoint and retention, history before the cut is gone: verify
 * checks the chain from the watermark down to the cut plus the checkpoint's
 * artifact, restore --frame/--time of a point at or after the cut starts
 * from the artifact, and a point before it is out of range. A bad artifact,
 * or a missing object after the cut, still fails verify.
 */
static void test_verify_restore_after_retention(void **state)
{
	struct cpenv c;
	struct ws_checkpoint_info i1;
	struct ws_retention_report rep;
	struct ws_restore_opts ro;
	struct problems pr;
	struct keys before = { 0 }, after = { 0 };
	struct ws_outcome o;
	char art[WS_KEY_MAX], *art_path, batch[WS_KEY_MAX] = "", *batch_path;
	uint64_t fA, fB, fC, fD, hB, hC, hD, h;
	int rc;
	(void)state;

	ws_fault_disarm();
	cp_init(&c, "ckpt-vr");
	/* One WAL generation throughout: this stream never checkpoints the WAL.
	 * Batches of their own (not inline): the test deletes one. */
	ws_stream_close(c.st);
	c.st = open_stream_inl(c.e.sink, TENANT, c.e.db, UINT64_MAX, UINT64_MAX);
	wt_tail_ok(c.st, &o);
	wt_tail_ok(c.st2, &o);
	/* Commits A and B, then the checkpoint's cut at B, then C and D. */
	fA = ship_txn(&c, 3, NULL);
	fB = ship_txn(&c, 3, &hB);
	take_ok(&c, &i1);
	tenant_keys(&c, &before);
	fC = ship_txn(&c, 30, &hC); /* several pages: frames inside C before its commit */
	fD = ship_txn(&c, 3, &hD);
	assert_true(fA < fB && fB < fC && fC < fD); /* one generation */
	tenant_keys(&c, &after);
	for (size_t i = 0; i < after.n && !batch[0]; i++)
		if (!keys_have(&before, after.k[i]) && strstr(after.k[i], "/b"))
			snprintf(batch, sizeof(batch), "%s", after.k[i]);
	assert_true(batch[0] != '\0');

	rc = ws_retention_run(c.e.sink, false, NULL, NULL, &rep);
	if (rc)
		fail_msg("retention: %s (%s)", ws_strerror(rc), ws_errmsg());
	assert_int_equal(rep.protected_id, i1.id);
	assert_true(rep.deleted > 0);

	/* verify: every tenant, and each on its own. */
	rc = verify_all(&c, NULL, &pr);
	if (rc)
		fail_msg("verify after retention: %s (%s)", ws_strerror(rc), ws_errmsg());
	assert_int_equal(pr.n, 0);
	assert_int_equal(verify_all(&c, TENANT, &pr), 0);
	assert_int_equal(verify_all(&c, TENANT2, &pr), 0);

	/* restore --frame at or after the cut: the artifact plus the frames after it. */
	memset(&ro, 0, sizeof(ro));
	ro.frame = fC;
	rc = restore_opts_hash(&c, &ro, &h);
	if (rc)
		fail_msg("restore --frame %" PRIu64 ": %s (%s)", fC, ws_strerror(rc), ws_errmsg());
	assert_int_equal(h, hC);
	ro.frame = fD;
	assert_int_equal(restore_opts_hash(&c, &ro, &h), 0);
	assert_int_equal(h, hD);
	ro.frame = fB; /* the cut itself: the artifact alone */
	assert_int_equal(restore_opts_hash(&c, &ro, &h), 0);
	assert_int_equal(h, hB);
	assert_true(fC - fB > 1);
	ro.frame = fC - 1; /* inside C's frames: the last commit before is the cut */
	assert_int_equal(restore_opts_hash(&c, &ro, &h), 0);
	assert_int_equal(h, hB);
	/* Before the cut: removed by retention. */
	ro.frame = fA;
	assert_int_equal(restore_opts_hash(&c, &ro, &h), WS_ERANGE_);
	assert_non_null(strstr(ws_errmsg(), "retention removed"));
	ro.frame = fB - 1;
	assert_int_equal(restore_opts_hash(&c, &ro, &h), WS_ERANGE_);
	/* --time: long before the cut, and now. */
	memset(&ro, 0, sizeof(ro));
	ro.time_ms = 1;
	assert_int_equal(restore_opts_hash(&c, &ro, &h), WS_ERANGE_);
	assert_non_null(strstr(ws_errmsg(), "retention removed"));
	ro.time_ms = (int64_t)time(NULL) * 1000 + 60000;
	assert_int_equal(restore_opts_hash(&c, &ro, &h), 0);
	assert_int_equal(h, hD);

	/* A corrupted artifact (same length, other bytes) fails verify, naming it. */
	snprintf(art, sizeof(art), "checkpoints/artifacts/%016" PRIx64 "/%s", i1.id, TENANT);
	art_path = wt_path(c.e.sink_dir, art);
	flip_byte(art_path, 200);
	rc = verify_all(&c, NULL, &pr);
	assert_int_equal(rc, WS_ECORRUPT);
	assert_int_equal(pr.n, 1);
	assert_string_equal(pr.key, art);
	flip_byte(art_path, 200); /* back */
	assert_int_equal(verify_all(&c, NULL, &pr), 0);
	/* A missing object after the cut still fails verify. */
	batch_path = wt_path(c.e.sink_dir, batch);
	assert_int_equal(unlink(batch_path), 0);
	rc = verify_all(&c, TENANT, &pr);
	assert_int_equal(rc, WS_EINCOMPLETE);
	assert_string_equal(pr.key, batch);
	assert_int_equal(verify_all(&c, TENANT2, &pr), 0);

	free(art_path);
	free(batch_path);
	free(before.k);
	free(after.k);
	cp_free(&c);
}

static int64_t wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Ship one transaction on TENANT while retention is paused at a delete. */
struct ship_during {
	struct cpenv *c;
	unsigned fired;
};

static void ship_now(const char *site, void *arg)
{
	struct ship_during *d = arg;
	(void)site;
	if (d->fired++)
		return;
	(void)ship_txn(d->c, 4, NULL);
}

/*
 * Retention keeping the N newest checkpoints: what goes is what retention
 * would delete were the oldest kept one the latest, so restore --time,
 * --frame and --checkpoint reach back to it and no further; keeping 1 is
 * plain retention. A run paused at its first delete while the tenant
 * ships loses nothing shipped. Keep 0 is refused; keeping more than are
 * stored keeps from the oldest.
 */
static void test_retention_keeps_checkpoints(void **state)
{
	struct cpenv c;
	struct ws_checkpoint_info i1, i2, i3;
	struct ws_retention_report rep;
	struct ws_restore_opts ro;
	struct problems pr;
	struct ids ids = { { 0 }, 0 };
	struct ship_during d;
	struct ws_outcome o;
	uint64_t fA, fB, fC, hA, hB, hC, h;
	int64_t tA, tB;
	int rc;
	(void)state;

	ws_fault_disarm();
	cp_init(&c, "ckpt-keep");
	ws_stream_close(c.st);
	c.st = open_stream_wal(c.e.sink, TENANT, c.e.db, UINT64_MAX); /* one WAL generation */
	wt_tail_ok(c.st, &o);
	wt_tail_ok(c.st2, &o);
	fA = ship_txn(&c, 3, &hA);
	take_ok(&c, &i1);
	tA = wall_ms();
	wt_sleep_ms(20);
	fB = ship_txn(&c, 3, &hB);
	take_ok(&c, &i2);
	tB = wall_ms();
	wt_sleep_ms(20);
	fC = ship_txn(&c, 3, &hC);
	take_ok(&c, &i3);
	assert_true(fA < fB && fB < fC);

	assert_int_equal(ws_retention_run_keep(c.e.sink, false, 0, NULL, NULL, &rep), WS_ECONFIG);
	/* Keep 2, while the tenant ships under the run's first delete. */
	d.c = &c;
	d.fired = 0;
	assert_int_equal(ws_fault_arm_pause("retention.before_delete", 1, ship_now, &d), 0);
	rc = ws_retention_run_keep(c.e.sink, false, 2, NULL, NULL, &rep);
	ws_fault_disarm();
	if (rc)
		fail_msg("retention keeping 2: %s (%s)", ws_strerror(rc), ws_errmsg());
	assert_int_equal(d.fired, 1);
	assert_int_equal(rep.protected_id, i3.id);
	assert_int_equal(rep.kept_from_id, i2.id);
	assert_int_equal(rep.checkpoints_deleted, 1);
	assert_int_equal(ws_checkpoint_list(c.e.sink, collect, &ids), 0);
	assert_false(has_id(&ids, i1.id));
	assert_true(has_id(&ids, i2.id) && has_id(&ids, i3.id));
	assert_int_equal(verify_all(&c, NULL, &pr), 0);
	assert_int_equal(restore_live_hash(&c, TENANT), wt_content_hash(c.e.w, NULL));
	/* Back to the oldest kept checkpoint, by each way of naming a point. */
	assert_int_equal(restore_ckpt_hash(&c, TENANT, i2.id), hB);
	memset(&ro, 0, sizeof(ro));
	ro.frame = fB;
	assert_int_equal(restore_opts_hash(&c, &ro, &h), 0);
	assert_int_equal(h, hB);
	ro.frame = fC;
	assert_int_equal(restore_opts_hash(&c, &ro, &h), 0);
	assert_int_equal(h, hC);
	memset(&ro, 0, sizeof(ro));
	ro.time_ms = tB;
	rc = restore_opts_hash(&c, &ro, &h);
	if (rc)
		fail_msg("restore --time (after checkpoint %" PRIu64 "): %s", i2.id, ws_errmsg());
	assert_int_equal(h, hB);
	/* ... and not before it. */
	ro.time_ms = tA;
	assert_int_equal(restore_opts_hash(&c, &ro, &h), WS_ERANGE_);
	memset(&ro, 0, sizeof(ro));
	ro.frame = fA;
	assert_int_equal(restore_opts_hash(&c, &ro, &h), WS_ERANGE_);

	/* More than are stored: kept from the oldest, nothing more to delete. */
	rc = ws_retention_run_keep(c.e.sink, false, 5, NULL, NULL, &rep);
	if (rc)
		fail_msg("retention keeping 5: %s (%s)", ws_strerror(rc), ws_errmsg());
	assert_int_equal(rep.kept_from_id, i2.id);
	assert_int_equal(rep.checkpoints_deleted, 0);
	/* Keep 1: plain retention, the window closes to the latest cut. */
	assert_int_equal(ws_retention_run_keep(c.e.sink, false, 1, NULL, NULL, &rep), 0);
	assert_int_equal(rep.kept_from_id, i3.id);
	assert_int_equal(rep.checkpoints_deleted, 1);
	memset(&ro, 0, sizeof(ro));
	ro.time_ms = tB;
	assert_int_equal(restore_opts_hash(&c, &ro, &h), WS_ERANGE_);
	assert_int_equal(verify_all(&c, NULL, &pr), 0);
	assert_int_equal(restore_live_hash(&c, TENANT), wt_content_hash(c.e.w, NULL));
	cp_free(&c);
}

/*
 * After retention, a past point restores from the oldest stored cut in the
 * chain. When that cut's artifact is damaged (same length, other bytes) a
 * point after a newer stored cut still restores from the newer one; before,
 * restore --frame/--time failed on the damaged artifact. A point only the
 * damaged cut could serve fails naming the artifact, not the retention
 * window.
 */
static void test_restore_past_point_skips_damaged_cut(void **state)
{
	struct cpenv c;
	struct ws_checkpoint_info i1, i2;
	struct ws_restore_opts ro;
	struct ws_outcome o;
	char art[WS_KEY_MAX], *art_path;
	uint64_t fB, fC, fD, hB, hC, hD, h;
	int rc;
	(void)state;

	ws_fault_disarm();
	cp_init(&c, "ckpt-skipcut");
	ws_stream_close(c.st);
	c.st = open_stream_wal(c.e.sink, TENANT, c.e.db, UINT64_MAX);
	wt_tail_ok(c.st, &o);
	wt_tail_ok(c.st2, &o);
	ship_txn(&c, 3, NULL);
	fB = ship_txn(&c, 3, &hB);
	take_ok(&c, &i1);
	assert_int_equal(ws_retention_run(c.e.sink, false, NULL, NULL, NULL), 0);
	fC = ship_txn(&c, 3, &hC);
	take_ok(&c, &i2);
	fD = ship_txn(&c, 3, &hD);
	assert_true(i1.id < i2.id && fB < fC && fC < fD);

	memset(&ro, 0, sizeof(ro));
	ro.frame = fD;
	assert_int_equal(restore_opts_hash(&c, &ro, &h), 0);
	assert_int_equal(h, hD);

	snprintf(art, sizeof(art), "checkpoints/artifacts/%016" PRIx64 "/%s", i1.id, TENANT);
	art_path = wt_path(c.e.sink_dir, art);
	flip_byte(art_path, 200);
	ro.frame = fD;
	rc = restore_opts_hash(&c, &ro, &h);
	if (rc)
		fail_msg("restore --frame after the newer cut with the older artifact damaged: %s (%s)",
			 ws_strerror(rc), ws_errmsg());
	assert_int_equal(h, hD);
	ro.frame = fC;
	assert_int_equal(restore_opts_hash(&c, &ro, &h), 0);
	assert_int_equal(h, hC);
	memset(&ro, 0, sizeof(ro));
	ro.time_ms = (int64_t)time(NULL) * 1000 + 60000;
	assert_int_equal(restore_opts_hash(&c, &ro, &h), 0);
	assert_int_equal(h, hD);
	/* The cut only the damaged artifact holds. */
	memset(&ro, 0, sizeof(ro));
	ro.frame = fB;
	assert_int_equal(restore_opts_hash(&c, &ro, &h), WS_ECORRUPT);
	assert_non_null(strstr(ws_errmsg(), art));
	/* Truncated, then gone: the newer cut still serves what it holds, and
	 * the point only the older held fails naming its artifact (not
	 * "retention removed the history"). */
	for (int k = 0; k < 2; k++) {
		if (k == 0)
			assert_int_equal(truncate(art_path, 4096), 0);
		else
			assert_int_equal(unlink(art_path), 0);
		memset(&ro, 0, sizeof(ro));
		ro.frame = fD;
		assert_int_equal(restore_opts_hash(&c, &ro, &h), 0);
		assert_int_equal(h, hD);
		ro.frame = fB;
		assert_int_equal(restore_opts_hash(&c, &ro, &h), WS_EINCOMPLETE);
		if (!strstr(ws_errmsg(), art))
			fail_msg("restore --frame of the damaged cut (%s): %s", k ? "gone" : "truncated", ws_errmsg());
	}
	free(art_path);
	cp_free(&c);
}

/* Without a checkpoint, a missing manifest is reported as before. */
static void test_verify_missing_link_without_checkpoint(void **state)
{
	struct cpenv c;
	struct keys all = { 0 };
	struct problems pr;
	char head[WS_KEY_MAX], *path = NULL;
	int rc;
	(void)state;

	ws_fault_disarm();
	cp_init(&c, "ckpt-vmiss");
	cp_write(&c, 3);
	assert_int_equal(verify_all(&c, NULL, &pr), 0);
	assert_int_equal(ws_list_tenants(c.e.sink, TENANT, grab_wm, head), 0);
	tenant_keys(&c, &all);
	/* Delete the oldest manifest that is not the head. */
	for (size_t i = 0; i < all.n && !path; i++)
		if (strstr(all.k[i], "/m") && strcmp(all.k[i], head) != 0)
			path = wt_path(c.e.sink_dir, all.k[i]);
	assert_non_null(path);
	assert_int_equal(unlink(path), 0);
	rc = verify_all(&c, TENANT, &pr);
	assert_int_equal(rc, WS_EINCOMPLETE);
	assert_non_null(strstr(ws_errmsg(), "is missing"));
	{
		struct ws_restore_opts ro = { .frame = 1 };
		uint64_t h;
		assert_int_equal(restore_opts_hash(&c, &ro, &h), WS_EINCOMPLETE);
	}
	free(path);
	free(all.k);
	cp_free(&c);
}

/* Run fn in a child with site armed to kill it; true if the site fired. */
static bool crash_child(struct cpenv *c, const char *site, unsigned nth, bool retention)
{
	pid_t pid = fork();
	int status = 0;
	assert_true(pid >= 0);
	if (pid == 0) {
		struct ws_checkpoint_info info;
		int rc;
		ws_fault_arm(site, nth, 1);
		if (retention)
			rc = ws_retention_run(c->e.sink, false, NULL, NULL, NULL);
		else
			rc = ws_checkpoint_take(c->e.sink, NULL, &info);
		_exit(rc == 0 ? 0 : 3);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
}

static const char *const take_sites[] = {
	"ckpt.deployment.before_create", "ckpt.deployment.after_create",
	"ckpt.alloc.before_cas",         "ckpt.alloc.after_cas",
	"ckpt.witness.before_open",      "ckpt.witness.after_open",
	"ckpt.inventory.before_begin",   "ckpt.inventory.after_begin",
	"checkpoint.artifact.before_put", "checkpoint.artifact.after_put",
	"ckpt.create.before_put",        "ckpt.create.after_put",
	"ckpt.record.before_cas",        "ckpt.record.after_cas",
	"ckpt.inventory.before_complete", "ckpt.inventory.after_complete",
	"ckpt.witness.before_close",     "ckpt.witness.after_close",
};

static void test_take_crash_every_step(void **state)
{
	struct cpenv c;
	struct ids committed;
	unsigned fired = 0;
	(void)state;

	ws_fault_disarm();
	cp_init(&c, "ckpt-crash");
	for (size_t i = 0; i < sizeof(take_sites) / sizeof(take_sites[0]); i++) {
		for (unsigned nth = 1; nth <= 2; nth++) {
			struct ws_checkpoint_info info;
			uint64_t h, g;
			bool f;
			cp_write(&c, 1);
			h = wt_content_hash(c.e.w, NULL);
			g = wt_content_hash(c.w2, NULL);
			f = crash_child(&c, take_sites[i], nth, false);
			fired += f;
			/* Recovery is the next checkpoint. */
			take_ok(&c, &info);
			check_durable(&c, &committed);
			assert_int_equal(committed.id[0], info.id);
			assert_int_equal(restore_ckpt_hash(&c, TENANT, info.id), h);
			assert_int_equal(restore_ckpt_hash(&c, TENANT2, info.id), g);
			assert_int_equal(restore_live_hash(&c, TENANT), h);
		}
	}
	/* Each site fires at least once (the nth=2 hits of one-shot sites may not). */
	assert_true(fired >= sizeof(take_sites) / sizeof(take_sites[0]));
	cp_free(&c);
}

/* The same sites failing (not crashing): the call's own abort path cleans up. */
static void test_take_fail_every_step(void **state)
{
	static const char *const abort_sites[] = { "ckpt.seal.before_put", "ckpt.seal.after_put",
						   "checkpoint.abort.before_delete" };
	struct cpenv c;
	struct ids committed;
	(void)state;

	ws_fault_disarm();
	cp_init(&c, "ckpt-fail");
	for (size_t i = 0; i < sizeof(take_sites) / sizeof(take_sites[0]); i++) {
		struct ws_checkpoint_info info;
		uint64_t h;
		int rc;
		cp_write(&c, 1);
		h = wt_content_hash(c.e.w, NULL);
		ws_fault_arm(take_sites[i], 1, 0);
		rc = ws_checkpoint_take(c.e.sink, NULL, &info);
		ws_fault_disarm();
		if (rc == 0)
			assert_true(info.committed);
		take_ok(&c, &info);
		check_durable(&c, &committed);
		assert_int_equal(restore_ckpt_hash(&c, TENANT, info.id), h);
	}
	/* A failure during an abort leaves the rest to recovery. */
	for (size_t i = 0; i < sizeof(abort_sites) / sizeof(abort_sites[0]); i++) {
		struct ws_checkpoint_info info;
		cp_write(&c, 1);
		/* A crash leaves a candidate index and artifacts of an undecided attempt. */
		assert_true(crash_child(&c, "ckpt.create.after_put", 1, false));
		ws_fault_arm(abort_sites[i], 1, 0);
		if (ws_checkpoint_recover(c.e.sink, NULL) == 0)
			fail_msg("recovery with %s armed succeeded", abort_sites[i]);
		ws_fault_disarm();
		take_ok(&c, &info);
		check_durable(&c, &committed);
	}
	cp_free(&c);
}

static const char *const ret_sites[] = {
	"ckpt.retention.before_begin",   "ckpt.retention.after_begin",
	"ckpt.retention.before_advance", "ckpt.retention.after_advance",
	"retention.before_delete",       "retention.after_delete",
	"ckpt.delete.before_del",        "retention.before_unreachable_list",
};

static void test_retention_crash_every_step(void **state)
{
	struct cpenv c;
	struct ids committed;
	(void)state;

	ws_fault_disarm();
	cp_init(&c, "ckpt-rcrash");
	for (size_t i = 0; i < sizeof(ret_sites) / sizeof(ret_sites[0]); i++) {
		for (unsigned nth = 1; nth <= 3; nth += 2) {
			struct ws_checkpoint_info a, b;
			struct ws_retention_report rep;
			uint64_t hb, hl;
			int rc;
			cp_write(&c, 2);
			take_ok(&c, &a);
			cp_write(&c, 2);
			hb = wt_content_hash(c.e.w, NULL);
			take_ok(&c, &b);
			cp_write(&c, 1);
			hl = wt_content_hash(c.e.w, NULL);
			(void)crash_child(&c, ret_sites[i], nth, true);
			/* Whatever the crash left, restore still works, and verify
			 * (which checks every checkpoint not being removed) passes... */
			assert_int_equal(restore_ckpt_hash(&c, TENANT, b.id), hb);
			assert_int_equal(restore_live_hash(&c, TENANT), hl);
			{
				struct problems pr;
				rc = verify_all(&c, NULL, &pr);
				if (rc)
					fail_msg("verify after a crash at %s: %s (%s)", ret_sites[i], ws_strerror(rc),
						 ws_errmsg());
			}
			/* ...and the next run resumes and finishes. */
			rc = ws_retention_run(c.e.sink, false, NULL, NULL, &rep);
			if (rc)
				fail_msg("retention after crash at %s: %s (%s)", ret_sites[i], ws_strerror(rc),
					 ws_errmsg());
			check_durable(&c, &committed);
			assert_int_equal(committed.n, 1);
			assert_int_equal(committed.id[0], b.id);
			(void)a;
			assert_int_equal(restore_ckpt_hash(&c, TENANT, b.id), hb);
			assert_int_equal(restore_live_hash(&c, TENANT), hl);
			assert_int_equal(restore_live_hash(&c, TENANT2), wt_content_hash(c.w2, NULL));
		}
	}
	cp_free(&c);
}

/*
 * verify passes no stored checkpoint that restore --checkpoint refuses: an
 * older Commit's damaged artifact fails verify, naming it, as it fails the
 * restore by its id. Once retention is under way for the newer one, the
 * older is being removed: it leaves the listing, restore by its id says so,
 * and verify passes over it; after retention, it is gone and verify is clean.
 */
static int count_listed(struct cpenv *c, struct ids *x)
{
	memset(x, 0, sizeof(*x));
	return ws_checkpoint_list(c->e.sink, collect, x);
}

/* A fresh sink with two checkpoints, a then b, a few commits apart. */
static void two_checkpoints(struct cpenv *c, const char *name, struct ws_checkpoint_info *a,
			    struct ws_checkpoint_info *b)
{
	ws_fault_disarm();
	cp_init(c, name);
	cp_write(c, 2);
	take_ok(c, a);
	cp_write(c, 2);
	take_ok(c, b);
	assert_true(a->id < b->id);
}

/* Checkpoint id is being removed: restore by its id says so, verify passes. */
static void assert_being_removed(struct cpenv *c, uint64_t id)
{
	struct problems pr;
	char *p = out_path(c);
	int rc;
	assert_int_equal(ws_restore_checkpoint(c->e.sink, TENANT, id, p, false), WS_ENOTFOUND);
	assert_non_null(strstr(ws_errmsg(), "being removed"));
	free(p);
	rc = verify_all(c, NULL, &pr);
	if (rc)
		fail_msg("verify while checkpoint %" PRIu64 " is being removed: %s (%s)", id, ws_strerror(rc),
			 ws_errmsg());
}

static void test_verify_older_checkpoint(void **state)
{
	struct cpenv c;
	struct ws_checkpoint_info a, b;
	struct problems pr;
	struct ids listed;
	char key[WS_KEY_MAX], *path, *p;
	int rc;
	(void)state;

	two_checkpoints(&c, "ckpt-vold", &a, &b);
	assert_int_equal(verify_all(&c, NULL, &pr), 0);

	snprintf(key, sizeof(key), "checkpoints/artifacts/%016" PRIx64 "/%s", a.id, TENANT);
	path = wt_path(c.e.sink_dir, key);
	flip_byte(path, 200);
	rc = verify_all(&c, NULL, &pr);
	assert_int_equal(rc, WS_ECORRUPT);
	assert_int_equal(pr.n, 1);
	assert_string_equal(pr.key, key);
	assert_int_equal(verify_all(&c, TENANT2, &pr), 0); /* the other tenant's artifact is fine */
	p = out_path(&c);
	assert_int_equal(ws_restore_checkpoint(c.e.sink, TENANT, a.id, p, false), WS_ECORRUPT);
	free(p);
	assert_int_equal(count_listed(&c, &listed), 0);
	assert_int_equal(listed.n, 2);

	/* Retention for b stopped before its first delete: a is being removed. */
	assert_true(crash_child(&c, "retention.before_delete", 1, true));
	assert_int_equal(count_listed(&c, &listed), 0);
	assert_int_equal(listed.n, 1);
	assert_true(listed.id[0] == b.id);
	assert_being_removed(&c, a.id);
	assert_int_equal(ws_retention_run(c.e.sink, false, NULL, NULL, NULL), 0);
	assert_int_equal(verify_all(&c, NULL, &pr), 0);
	(void)restore_ckpt_hash(&c, TENANT, b.id); /* b restores (asserted inside) */
	free(path);
	cp_free(&c);
}

/*
 * A retention run resumed for an older cut ends idle having deleted the
 * artifacts, not the indexes, of the checkpoints before it; the run for
 * the latest checkpoint, which deletes those indexes, is killed before it
 * is recorded. The older checkpoints are still being removed: the listing
 * leaves them out, restore by id says so, verify passes over them. (They
 * used to be listed, restore by id said an artifact was missing, and
 * verify failed, until a later retention finished the work.)
 */
static void test_resumed_older_run_then_killed(void **state)
{
	struct cpenv c;
	struct ws_checkpoint_info a, b, d;
	struct problems pr;
	struct ids listed;
	char key[WS_KEY_MAX], *path;
	(void)state;

	two_checkpoints(&c, "ckpt-resumed", &a, &b);
	/* Retention for b killed once recorded: nothing deleted yet. */
	assert_true(crash_child(&c, "ckpt.retention.after_begin", 1, true));
	cp_write(&c, 2);
	take_ok(&c, &d);
	/* The next run finishes b's (a's artifacts go), and is killed before
	 * its own run, for d, is recorded. */
	assert_true(crash_child(&c, "ckpt.retention.before_begin", 1, true));
	snprintf(key, sizeof(key), "checkpoints/artifacts/%016" PRIx64 "/%s", a.id, TENANT);
	path = wt_path(c.e.sink_dir, key);
	assert_int_equal(access(path, F_OK), -1); /* the state this test is about */

	assert_int_equal(count_listed(&c, &listed), 0);
	assert_int_equal(listed.n, 2);
	assert_true(listed.id[0] == d.id && listed.id[1] == b.id);
	assert_being_removed(&c, a.id);
	(void)restore_ckpt_hash(&c, TENANT, b.id); /* b restores (asserted inside) */

	assert_int_equal(ws_retention_run(c.e.sink, false, NULL, NULL, NULL), 0);
	assert_int_equal(verify_all(&c, NULL, &pr), 0);
	assert_int_equal(count_listed(&c, &listed), 0);
	assert_int_equal(listed.n, 1);
	assert_true(listed.id[0] == d.id);
	free(path);
	cp_free(&c);
}

/*
 * A retention run a crash left in flight, whose protected checkpoint no
 * longer verifies (its artifact damaged), is skipped as a whole by the next
 * run: its index sweep too, which deleted the older indexes without their
 * artifacts, leaving those artifacts named by nothing for ever. The newer
 * run then deletes every older checkpoint, artifacts and indexes.
 */
static void skipped_run(bool crash_after_advance)
{
	struct cpenv c;
	struct ws_checkpoint_info a, b, d, n;
	struct ids committed;
	char key[WS_KEY_MAX], *path;
	int rc;

	ws_fault_disarm();
	cp_init(&c, "ckpt-rskip");
	cp_write(&c, 1);
	take_ok(&c, &a);
	cp_write(&c, 1);
	take_ok(&c, &b);
	cp_write(&c, 1);
	take_ok(&c, &d);
	assert_true(crash_child(&c, "retention.before_delete", 1, true)); /* in flight, protecting d */
	snprintf(key, sizeof(key), "checkpoints/artifacts/%016" PRIx64 "/%s", d.id, TENANT);
	path = wt_path(c.e.sink_dir, key);
	flip_byte(path, 200);
	cp_write(&c, 1);
	take_ok(&c, &n);
	if (crash_after_advance)
		assert_true(crash_child(&c, "ckpt.retention.after_advance", 1, true));
	rc = ws_retention_run(c.e.sink, false, NULL, NULL, NULL);
	if (rc)
		fail_msg("retention: %s (%s)", ws_strerror(rc), ws_errmsg());
	check_durable(&c, &committed); /* no artifact that no stored checkpoint names */
	assert_int_equal(committed.n, 1);
	assert_true(committed.id[0] == n.id);
	(void)a;
	(void)b;
	free(path);
	cp_free(&c);
}

/*
 * A dry run after a crash names what the real run then deletes: the run
 * left at its index phase resumes there, so the dry run names the index
 * alone, not the artifacts the crashed run already deleted (it named them
 * again, reporting three deletes where the run made one).
 */
static void test_retention_dry_run_after_crash(void **state)
{
	struct cpenv c;
	struct ws_checkpoint_info a, b;
	struct ws_retention_report dry, rep;
	struct keys dk = { 0 }, rk = { 0 };
	(void)state;

	ws_fault_disarm();
	cp_init(&c, "ckpt-drycrash");
	cp_write(&c, 2);
	take_ok(&c, &a);
	cp_write(&c, 2);
	take_ok(&c, &b);
	assert_true(crash_child(&c, "ckpt.delete.before_del", 1, true)); /* in its index phase */
	assert_int_equal(ws_retention_run(c.e.sink, true, on_delete, &dk, &dry), 0);
	assert_int_equal(ws_retention_run(c.e.sink, false, on_delete, &rk, &rep), 0);
	assert_int_equal(dk.n, rk.n);
	for (size_t i = 0; i < dk.n; i++)
		assert_string_equal(dk.k[i], rk.k[i]);
	assert_int_equal(dry.deleted, rep.deleted);
	(void)a;
	free(dk.k);
	free(rk.k);
	cp_free(&c);
}

static void test_retention_skipped_run_leaks_nothing(void **state)
{
	(void)state;
	skipped_run(false);
	/* The older run killed once its phase advanced past the skipped sweep:
	 * the process that resumes it knows nothing of the skip, and deleted
	 * the older indexes without their artifacts. */
	skipped_run(true);
}

/*
 * Retention killed after its first delete (the oldest manifest of the
 * chain behind the cut): a point after the cut still restores, by frame
 * and by time, from the cut's artifact. Objects were deleted before their
 * manifest, which then named missing objects, and restore --frame of any
 * point after the cut failed on them until the next run.
 */
static void test_retention_crash_keeps_points_after_cut(void **state)
{
	struct cpenv c;
	struct ws_checkpoint_info i1;
	struct ws_restore_opts ro;
	struct ws_outcome o;
	uint64_t fC, hC, h;
	int rc;
	(void)state;

	ws_fault_disarm();
	cp_init(&c, "ckpt-rcut");
	ws_stream_close(c.st);
	c.st = open_stream_wal(c.e.sink, TENANT, c.e.db, UINT64_MAX);
	wt_tail_ok(c.st, &o);
	wt_tail_ok(c.st2, &o);
	(void)ship_txn(&c, 3, NULL);
	take_ok(&c, &i1);
	fC = ship_txn(&c, 3, &hC);
	assert_true(crash_child(&c, "retention.after_delete", 1, true));
	memset(&ro, 0, sizeof(ro));
	ro.frame = fC;
	rc = restore_opts_hash(&c, &ro, &h);
	if (rc)
		fail_msg("restore --frame %" PRIu64 " after a retention crash: %s (%s)", fC, ws_strerror(rc), ws_errmsg());
	assert_true(h == hC);
	assert_int_equal(ws_retention_run(c.e.sink, false, NULL, NULL, NULL), 0);
	assert_int_equal(restore_opts_hash(&c, &ro, &h), 0);
	assert_true(h == hC);
	cp_free(&c);
}

/* A second local writer is refused while the lease is held. */
static void test_lease(void **state)
{
	struct cpenv c;
	struct ws_checkpoint_opts o;
	struct ws_checkpoint_info info;
	struct ws_ckpt *k;
	int err = 0;
	(void)state;

	cp_init(&c, "ckpt-lease");
	cp_write(&c, 1);
	k = ws_ckpt_open_local(c.e.sink_dir, &err);
	assert_non_null(k);
	memset(&o, 0, sizeof(o));
	o.wait_ms = 50;
	assert_int_equal(ws_checkpoint_take(c.e.sink, &o, &info), WS_EFENCED);
	ws_ckpt_close(k);
	take_ok(&c, &info);
	cp_free(&c);
}

/*
 * A checkpoints/inventory that is not the exact canonical object (another
 * deployment's, another format, keys out of order, bytes after it) is an
 * error naming it, and recovery acts on none of it: the keys it names
 * (here: checkpoint 1's artifacts) are not deleted, no Abort is recorded.
 * The strstr scan this replaces read each of these bodies as an active
 * attempt 2 and deleted what it named before the store refused the object.
 */
/*
 * The authority follows the store's backend, not the URL's spelling: the
 * store opens "FILE:///dir" as the same file sink as "file:///dir", so its
 * checkpoints take the same local lease and extend the same chain. (Read
 * off a case-sensitive "file://" prefix, the second spelling went to the
 * shared authority, which refuses the local namespace as foreign.)
 */
static void test_authority_by_backend(void **state)
{
	struct cpenv c;
	struct ws_checkpoint_info info, info2;
	struct ws_sink *upper;
	char url[4096];
	int err = 0, rc;
	(void)state;

	cp_init(&c, "ckpt-kind");
	cp_write(&c, 1);
	take_ok(&c, &info);
	snprintf(url, sizeof(url), "FILE://%s", c.e.sink_dir);
	upper = ws_sink_open(url, &err);
	assert_non_null(upper);
	rc = ws_checkpoint_take(upper, NULL, &info2);
	if (rc)
		fail_msg("checkpoint through %s: %s (%s)", url, ws_strerror(rc), ws_errmsg());
	assert_true(info2.committed && info2.own && info2.id > info.id);
	assert_true(info2.has_predecessor && info2.predecessor_id == info.id);
	ws_sink_close(upper);
	cp_free(&c);
}

static void put_text(struct ws_store *s, const char *key, const char *text)
{
	assert_int_equal(ws_store_put(s, key, text, strlen(text), WS_PUT_OVERWRITE, NULL, NULL), 0);
}

/*
 * A well-formed inventory (a damaged or hostile sink) naming a key that is
 * no artifact of its attempt: recovery aborts the attempt and deletes its
 * artifacts only, never the watermark it names (which it deleted, the
 * tenant then unrestorable and left out of the next checkpoint); and an
 * attempt epoch above 2^63-1 is refused as malformed (recorded, no later
 * taker could ever match it).
 */
static void test_inventory_names_no_foreign_key(void **state)
{
	struct cpenv c;
	struct ws_checkpoint_info info;
	struct ws_obj_info oi;
	char good[4096], body[4096], dep[WS_CKPT_DEPLOYMENT_LEN + 1];
	const char *at;
	struct ws_store *s;
	int rc, err = 0;
	(void)state;

	cp_init(&c, "ckpt-foreign");
	cp_write(&c, 1);
	take_ok(&c, &info);
	s = ws_store_file_open(c.e.sink_dir, &err);
	assert_non_null(s);
	get_text(s, "checkpoints/inventory", good, sizeof(good));
	at = strstr(good, "\"deployment\":\"");
	assert_non_null(at);
	snprintf(dep, sizeof(dep), "%.32s", at + strlen("\"deployment\":\""));
	snprintf(body, sizeof(body), "{\"active\":{\"attempt\":{\"checkpoint_id\":\"2\",\"epoch\":\"1\","
		 "\"token\":\"77\"},\"keys\":[\"" TENANT "/wm\"]},\"deployment\":\"%s\","
		 "\"format\":\"walship.ckpt.inventory.v1\",\"last_completed\":null}", dep);
	put_text(s, "checkpoints/inventory", body);
	cp_write(&c, 1);
	rc = ws_checkpoint_take(c.e.sink, NULL, &info);
	if (rc)
		fail_msg("checkpoint after a foreign inventory: %s (%s)", ws_strerror(rc), ws_errmsg());
	assert_int_equal(ws_store_head(s, TENANT "/wm", &oi), 0); /* not deleted */
	assert_true(restore_live_hash(&c, TENANT) == wt_content_hash(c.e.w, NULL));

	snprintf(body, sizeof(body), "{\"active\":{\"attempt\":{\"checkpoint_id\":\"%" PRIu64 "\","
		 "\"epoch\":\"18446744073709551615\",\"token\":\"77\"},\"keys\":[]},\"deployment\":\"%s\","
		 "\"format\":\"walship.ckpt.inventory.v1\",\"last_completed\":null}", info.id + 64, dep);
	put_text(s, "checkpoints/inventory", body);
	/* Undecodable (an epoch no taker could match): recovery refuses it,
	 * naming why; the next checkpoint rebuilds it from the witness (issue
	 * 31 item 5) and deletes nothing it names. */
	rc = ws_checkpoint_recover(c.e.sink, NULL);
	assert_int_equal(rc, WS_EFORMAT);
	assert_non_null(strstr(ws_errmsg(), "2^63"));
	rc = ws_checkpoint_take(c.e.sink, NULL, &info);
	if (rc)
		fail_msg("checkpoint after an undecodable inventory: %s (%s)", ws_strerror(rc), ws_errmsg());
	get_text(s, "checkpoints/inventory", body, sizeof(body));
	assert_non_null(strstr(body, "\"active\":null"));
	assert_int_equal(ws_store_head(s, TENANT "/wm", &oi), 0);
	ws_store_close(s);
	cp_free(&c);
}

static void test_malformed_inventory_deletes_nothing(void **state)
{
	struct cpenv c;
	struct ws_checkpoint_info info;
	struct ws_obj_info oi;
	char good[4096], head[4096], now[4096], body[4096], bad[4200], dep[WS_CKPT_DEPLOYMENT_LEN + 1];
	const char *at;
	bool recovered = false;
	struct ws_store *s;
	int rc, err = 0;
	(void)state;

	cp_init(&c, "ckpt-badinv");
	cp_write(&c, 1);
	take_ok(&c, &info);
	s = ws_store_file_open(c.e.sink_dir, &err);
	assert_non_null(s);
	assert_int_equal(info.id, 1);
	get_text(s, "checkpoints/inventory", good, sizeof(good));
	get_text(s, "checkpoints/head", head, sizeof(head));
	at = strstr(good, "\"deployment\":\"");
	assert_non_null(at);
	snprintf(dep, sizeof(dep), "%.32s", at + strlen("\"deployment\":\""));
	snprintf(body, sizeof(body), "{\"active\":{\"attempt\":{\"checkpoint_id\":\"2\",\"epoch\":\"1\","
		 "\"token\":\"77\"},\"keys\":[\"checkpoints/artifacts/0000000000000001/" TENANT "\","
		 "\"checkpoints/artifacts/0000000000000001/" TENANT2 "\"]},\"deployment\":\"%s\","
		 "\"format\":\"walship.ckpt.inventory.v1\",\"last_completed\":null}", dep);
	const char *edits[][2] = {
		{ dep, "0123456789abcdef0123456789abcdef" },
		{ "inventory.v1", "inventory.v7" },
		{ "/" TENANT "\",\"checkpoints/artifacts/0000000000000001/" TENANT2,
		  "/" TENANT2 "\",\"checkpoints/artifacts/0000000000000001/" TENANT },
		{ "null}", "null}}" },
		{ "{", "" },
	};
	for (size_t i = 0; i < sizeof(edits) / sizeof(edits[0]); i++) {
		at = strstr(body, edits[i][0]);
		assert_non_null(at);
		snprintf(bad, sizeof(bad), "%.*s%s%s", (int)(at - body), body, edits[i][1], at + strlen(edits[i][0]));
		put_text(s, "checkpoints/inventory", bad);
		rc = ws_checkpoint_recover(c.e.sink, &recovered);
		if (rc != WS_EFORMAT || !strstr(ws_errmsg(), "checkpoints/inventory"))
			fail_msg("edit %zu: recover: rc %d (%s)", i, rc, ws_errmsg());
		get_text(s, "checkpoints/head", now, sizeof(now));
		assert_string_equal(now, head);
		/* The checkpoint rebuilds it from the closed witness (issue 31
		 * item 5: it used to fail here for good), deleting nothing the
		 * damaged record named. */
		rc = ws_checkpoint_take(c.e.sink, NULL, &info);
		if (rc)
			fail_msg("edit %zu: checkpoint: rc %d (%s)", i, rc, ws_errmsg());
		assert_int_equal(ws_store_head(s, "checkpoints/artifacts/0000000000000001/" TENANT, &oi), 0);
		assert_int_equal(ws_store_head(s, "checkpoints/artifacts/0000000000000001/" TENANT2, &oi),
				 0);
		get_text(s, "checkpoints/head", head, sizeof(head));
		get_text(s, "checkpoints/inventory", good, sizeof(good));
	}
	/* Put back as it was, everything works and checkpoint 1 restores. */
	put_text(s, "checkpoints/inventory", good);
	assert_int_equal(restore_ckpt_hash(&c, TENANT, 1), restore_live_hash(&c, TENANT));
	take_ok(&c, &info);
	ws_store_close(s);
	cp_free(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_take_and_restore),
		cmocka_unit_test(test_retention),
		cmocka_unit_test(test_retention_keeps_base_of_tenant_left_out),
		cmocka_unit_test(test_retention_spares_foreign_object),
		cmocka_unit_test(test_retention_after_rebase),
		cmocka_unit_test(test_verify_restore_after_retention),
		cmocka_unit_test(test_retention_keeps_checkpoints),
		cmocka_unit_test(test_restore_past_point_skips_damaged_cut),
		cmocka_unit_test(test_verify_missing_link_without_checkpoint),
		cmocka_unit_test(test_lease),
		cmocka_unit_test(test_malformed_inventory_deletes_nothing),
		cmocka_unit_test(test_authority_by_backend),
		cmocka_unit_test(test_take_fail_every_step),
		cmocka_unit_test(test_take_crash_every_step),
		cmocka_unit_test(test_retention_crash_every_step),
		cmocka_unit_test(test_verify_older_checkpoint),
		cmocka_unit_test(test_resumed_older_run_then_killed),
		cmocka_unit_test(test_retention_skipped_run_leaks_nothing),
		cmocka_unit_test(test_retention_dry_run_after_crash),
		cmocka_unit_test(test_inventory_names_no_foreign_key),
		cmocka_unit_test(test_retention_crash_keeps_points_after_cut),
	};
	return WT_RUN_GROUP(tests, NULL, NULL);
}
