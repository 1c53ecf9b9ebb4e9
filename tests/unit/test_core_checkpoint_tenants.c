/*
 * A checkpoint that sees fewer tenants than the previous one named
 * (core/tenant_removal.c, docs/CHECKPOINTS.md "Removing a tenant"): refused,
 * naming the missing tenants, unless the tenant was removed for good with
 * ws_tenant_forget (`walship forget`); then the checkpoint commits,
 * retention deletes the tenant's objects, and a tenant of that name shipped
 * again is a new tenant that the old removal does not cover.
 *
 * Real SQLite writers and a file:// sink. The tenant goes missing from the
 * cut as a hidden directory would make it: its directory is moved out of
 * the sink while the checkpoint lists it. A short listing of an object
 * store reaches the same check the same way (the cut is whatever the
 * listing showed).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core_internal.h"
#include "coreutil.h"
#include "walship.h"
#include "ws_ckpt.h"
#include "ws_store.h"

#define T1 "orders"
#define T2 "users"
#define T3 "zeta"

struct tenv {
	struct wt_env e;
	sqlite3 *w2, *w3;
	char *db2, *db3;
	struct ws_stream *st, *st2, *st3;
};

static struct ws_stream *open_stream(struct ws_sink *sink, const char *tenant, const char *db)
{
	struct ws_stream_config cfg;
	struct ws_stream *st;
	int err = 0;
	memset(&cfg, 0, sizeof(cfg));
	cfg.tenant = tenant;
	cfg.db_path = db;
	cfg.epoch = 1;
	cfg.pointer_generation = 1;
	cfg.wal_checkpoint_bytes = 1;
	st = ws_stream_open(sink, &cfg, &err);
	if (!st)
		fail_msg("ws_stream_open %s: %s (%s)", tenant, ws_strerror(err), ws_errmsg());
	return st;
}

static void ship(struct tenv *t)
{
	struct ws_outcome o;
	wt_write_txn(t->e.w, 4, 300);
	wt_write_txn(t->w2, 3, 200);
	wt_write_txn(t->w3, 2, 100);
	wt_tail_ok(t->st, &o);
	if (t->st2)
		wt_tail_ok(t->st2, &o);
	wt_tail_ok(t->st3, &o);
}

static void tenv_init(struct tenv *t, const char *tag)
{
	memset(t, 0, sizeof(*t));
	wt_env_init(&t->e, tag, 0);
	t->db2 = wt_path(t->e.dir, "users.db");
	t->db3 = wt_path(t->e.dir, "zeta.db");
	t->w2 = wt_writer_open(t->db2, 0);
	t->w3 = wt_writer_open(t->db3, 0);
	wt_write_txn(t->e.w, 20, 300);
	wt_write_txn(t->w2, 10, 200);
	wt_write_txn(t->w3, 10, 200);
	t->st = open_stream(t->e.sink, T1, t->e.db);
	t->st2 = open_stream(t->e.sink, T2, t->db2);
	t->st3 = open_stream(t->e.sink, T3, t->db3);
	ship(t);
}

static void tenv_free(struct tenv *t)
{
	ws_stream_close(t->st);
	ws_stream_close(t->st2);
	ws_stream_close(t->st3);
	sqlite3_close(t->w2);
	sqlite3_close(t->w3);
	free(t->db2);
	free(t->db3);
	wt_env_free(&t->e);
}

static void take_ok(struct tenv *t, struct ws_checkpoint_info *info)
{
	int rc = ws_checkpoint_take(t->e.sink, NULL, info);
	if (rc)
		fail_msg("checkpoint: %s (%s)", ws_strerror(rc), ws_errmsg());
	assert_true(info->committed && info->own);
}

/* Move a tenant's directory out of the sink (hidden from the listing), or back. */
static void hide(struct tenv *t, const char *tenant, bool away)
{
	char *in = wt_path(t->e.sink_dir, tenant), *out = wt_path(t->e.dir, tenant);
	if (rename(away ? in : out, away ? out : in) != 0)
		fail_msg("rename %s: %s", in, strerror(errno));
	free(in);
	free(out);
}

static uint64_t latest_commit(struct tenv *t)
{
	struct ws_checkpoint_info ids[1];
	struct ws_store *s;
	struct ws_ckpt *c;
	struct ws_ckpt_outcome o;
	bool found = false;
	int err = 0;
	(void)ids;
	s = ws_store_file_open(t->e.sink_dir, &err);
	assert_non_null(s);
	c = ws_ckpt_open_reader(s, &err);
	assert_non_null(c);
	assert_int_equal(ws_ckpt_latest_commit(c, &o, &found), 0);
	ws_ckpt_close(c);
	ws_store_close(s);
	return found ? o.checkpoint_id : 0;
}

/* Keys under prefix in the sink. */
static size_t count_under(struct tenv *t, const char *prefix)
{
	struct ws_list_page page;
	char token[WS_KEY_MAX] = "";
	size_t n = 0;
	do {
		memset(&page, 0, sizeof(page));
		assert_int_equal(ws_store_list(t->e.sink->store, prefix, token, WS_LIST_PAGE_MAX, &page), 0);
		n += page.count;
		snprintf(token, sizeof(token), "%s", page.truncated ? page.next_token : "");
		ws_list_page_free(&page);
	} while (token[0]);
	return n;
}

struct orphans {
	unsigned n;
	char first[512];
};

static void on_orphan(const char *key, const char *kind, void *arg)
{
	struct orphans *o = arg;
	if (!o->n++)
		snprintf(o->first, sizeof(o->first), "%s (%s)", key, kind);
}

static uint64_t restore_hash(struct tenv *t, const char *tenant)
{
	return wt_restore_hash(&t->e, tenant, NULL, NULL);
}

/* A short cut is refused naming every missing tenant; nothing is committed. */
static void test_short_cut_refused(void **state)
{
	struct tenv t;
	struct ws_checkpoint_info i1, x;
	uint64_t arts;
	int rc;
	(void)state;

	tenv_init(&t, "ckpt-short");
	take_ok(&t, &i1);
	assert_int_equal(i1.tenants, 3);
	arts = count_under(&t, "checkpoints/artifacts/");
	ship(&t);
	hide(&t, T2, true);
	hide(&t, T3, true);
	rc = ws_checkpoint_take(t.e.sink, NULL, &x);
	assert_int_equal(rc, WS_EINCOMPLETE);
	if (!strstr(ws_errmsg(), T2 " (" T2 "/wm), " T3 " (" T3 "/wm)") || !strstr(ws_errmsg(), "2 tenant(s)") ||
	    !strstr(ws_errmsg(), "walship forget"))
		fail_msg("refusal does not name the missing tenants and the way out: %s", ws_errmsg());
	assert_int_equal(latest_commit(&t), i1.id);
	assert_int_equal(count_under(&t, "checkpoints/artifacts/"), arts);
	/* Seen again, the checkpoint commits with every tenant. */
	hide(&t, T2, false);
	hide(&t, T3, false);
	take_ok(&t, &x);
	assert_int_equal(x.tenants, 3);
	tenv_free(&t);
}

/*
 * walship forget: the checkpoint without the tenant commits, retention
 * deletes its objects, verify and the orphan check pass; a tenant of the
 * same name shipped again is a new tenant, covered by no removal.
 */
static void test_forget_then_ships_again(void **state)
{
	struct tenv t;
	struct ws_checkpoint_info i1, i2, i3, i4, x;
	struct ws_forget_report rep;
	struct ws_retention_report rr;
	struct orphans orph;
	uint64_t count = 0, h1, h3;
	int rc;
	(void)state;

	tenv_init(&t, "ckpt-forget");
	take_ok(&t, &i1);
	/* Not a tenant, nothing under the name. */
	assert_int_equal(ws_tenant_forget(t.e.sink, "checkpoints", &rep), WS_ECONFIG);
	assert_int_equal(ws_tenant_forget(t.e.sink, "no/such", &rep), WS_ECONFIG);
	assert_int_equal(ws_tenant_forget(t.e.sink, "nobody", &rep), WS_ENOTFOUND);
	assert_non_null(strstr(ws_errmsg(), "nobody"));

	/* The application drops T2; it is no longer shipped, then forgotten. */
	ship(&t);
	ws_stream_close(t.st2);
	t.st2 = NULL;
	take_ok(&t, &i2);
	assert_int_equal(i2.tenants, 3);
	assert_true(count_under(&t, T2 "/") > 0);
	assert_int_equal(ws_tenant_forget(t.e.sink, T2, &rep), 0);
	assert_int_equal(rep.after_checkpoint, i2.id);
	assert_true(rep.had_watermark && rep.had_objects);
	/* Forgetting again converges (the record stays as it is). */
	assert_int_equal(ws_tenant_forget(t.e.sink, T2, &rep), 0);
	assert_false(rep.had_watermark);
	/* verify does not require the watermark of a tenant removed for good. */
	for (const char *n = T1; n; n = strcmp(n, T1) == 0 ? T3 : NULL) {
		rc = ws_verify(t.e.sink, n, NULL, NULL);
		if (rc)
			fail_msg("verify %s after forget %s: %s (%s)", n, T2, ws_strerror(rc), ws_errmsg());
	}

	ship(&t);
	take_ok(&t, &i3);
	assert_int_equal(i3.tenants, 2);
	h1 = wt_content_hash(t.e.w, NULL);
	h3 = wt_content_hash(t.w3, NULL);
	/* Retention proceeds: T2's objects and the older checkpoints go. */
	rc = ws_retention_run(t.e.sink, false, NULL, NULL, &rr);
	if (rc)
		fail_msg("retention after forget: %s (%s)", ws_strerror(rc), ws_errmsg());
	assert_int_equal(rr.protected_id, i3.id);
	assert_int_equal(count_under(&t, T2 "/"), 0);
	memset(&orph, 0, sizeof(orph));
	assert_int_equal(ws_verify_orphans(t.e.sink, NULL, on_orphan, &orph, &count), 0);
	if (orph.n)
		fail_msg("%u orphans after retention, first %s", orph.n, orph.first);
	assert_int_equal(restore_hash(&t, T1), h1);
	assert_int_equal(restore_hash(&t, T3), h3);

	/* Shipped again under the same name: a new tenant, named by the next checkpoint. */
	t.st2 = open_stream(t.e.sink, T2, t.db2);
	ship(&t);
	take_ok(&t, &i4);
	assert_int_equal(i4.tenants, 3);
	assert_int_equal(restore_hash(&t, T2), wt_content_hash(t.w2, NULL));
	/* Retention keeps the new tenant's objects (it has a watermark). */
	rc = ws_retention_run(t.e.sink, false, NULL, NULL, &rr);
	if (rc)
		fail_msg("retention after T2 shipped again: %s (%s)", ws_strerror(rc), ws_errmsg());
	assert_true(count_under(&t, T2 "/") > 0);
	assert_int_equal(restore_hash(&t, T2), wt_content_hash(t.w2, NULL));
	/* The old removal does not cover it: missing from a cut, it is refused again. */
	ship(&t);
	hide(&t, T2, true);
	rc = ws_checkpoint_take(t.e.sink, NULL, &x);
	assert_int_equal(rc, WS_EINCOMPLETE);
	assert_non_null(strstr(ws_errmsg(), T2));
	hide(&t, T2, false);
	tenv_free(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_short_cut_refused),
		cmocka_unit_test(test_forget_then_ships_again),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
