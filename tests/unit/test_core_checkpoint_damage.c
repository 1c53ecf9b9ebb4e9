/*
 * A damaged or missing committed checkpoint index (core/ckpt_read.c
 * ws_ckread_walk_past, ckpt_take.c, retention.c): one flipped byte in, or
 * the deletion of, a `checkpoints/committed/<id>-<sha>.json` never wedges
 * the sink. The next checkpoint commits past it (its images from the
 * chain), every intact checkpoint still restores by id to exactly the rows
 * the source had committed at its cut, `ls` lists the rest and marks the
 * damaged one, verify names it, and retention deletes what it decides,
 * the damaged index with its artifacts included. Real SQLite writers on a
 * file:// sink; expected states are the sources' own content hashes.
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
#include <unistd.h>

#include "coreutil.h"
#include "walship.h"
#include "ws_ckpt.h"
#include "ws_fault.h"
#include "ws_store.h"

#define TENANT "orders"
#define TENANT2 "users"
#define NCK 6

struct dmg {
	struct wt_env e;
	sqlite3 *w2;
	char *db2;
	struct ws_stream *st, *st2;
	struct ws_store *s;                 /* the sink's store, to damage it */
	uint64_t id[NCK];                   /* checkpoints taken, oldest first */
	char key[NCK][WS_KEY_MAX];          /* their committed indexes */
	uint64_t h1[NCK], h2[NCK];          /* each tenant's source state at each cut */
	unsigned n;
};

static struct ws_stream *open_stream(struct ws_sink *sink, const char *tenant, const char *db)
{
	struct ws_stream_config cfg;
	struct ws_stream *st;
	int err = -1;
	memset(&cfg, 0, sizeof(cfg));
	cfg.tenant = tenant;
	cfg.db_path = db;
	cfg.epoch = 1;
	cfg.pointer_generation = 1;
	cfg.wal_checkpoint_bytes = 1;
	st = ws_stream_open(sink, &cfg, &err);
	if (!st)
		fail_msg("ws_stream_open: %s (%s)", ws_strerror(err), ws_errmsg());
	return st;
}

static void d_init(struct dmg *d, const char *tag)
{
	int err = 0;
	memset(d, 0, sizeof(*d));
	wt_env_init(&d->e, tag, 0);
	d->db2 = wt_path(d->e.dir, "src2.db");
	d->w2 = wt_writer_open(d->db2, 0);
	wt_write_txn(d->e.w, 20, 300);
	wt_write_txn(d->w2, 10, 200);
	d->st = open_stream(d->e.sink, TENANT, d->e.db);
	d->st2 = open_stream(d->e.sink, TENANT2, d->db2);
	d->s = ws_store_file_open(d->e.sink_dir, &err);
	assert_non_null(d->s);
}

static void d_free(struct dmg *d)
{
	ws_store_close(d->s);
	ws_stream_close(d->st);
	ws_stream_close(d->st2);
	sqlite3_close(d->w2);
	free(d->db2);
	wt_env_free(&d->e);
}

/* New rows on both tenants, shipped in two tails. */
static void d_write(struct dmg *d, int rows)
{
	struct ws_outcome o;
	wt_write_txn(d->e.w, rows, 400);
	wt_write_txn(d->w2, 3, 100);
	wt_tail_ok(d->st, &o);
	wt_tail_ok(d->st2, &o);
	wt_write_txn(d->e.w, 2, 400);
	wt_tail_ok(d->st, &o);
	wt_tail_ok(d->st2, &o);
}

/* Write, then take a checkpoint, recording the sources' states at its cut. */
static void d_take(struct dmg *d)
{
	struct ws_checkpoint_info info;
	int rc;
	assert_true(d->n < NCK);
	d_write(d, 5 + (int)d->n);
	rc = ws_checkpoint_take(d->e.sink, NULL, &info);
	if (rc)
		fail_msg("checkpoint: %s (%s)", ws_strerror(rc), ws_errmsg());
	assert_true(info.committed && info.own);
	d->id[d->n] = info.id;
	snprintf(d->key[d->n], WS_KEY_MAX, "%s", info.ref_key);
	d->h1[d->n] = wt_content_hash(d->e.w, NULL);
	d->h2[d->n] = wt_content_hash(d->w2, NULL);
	d->n++;
}

static char *sink_path(struct dmg *d, const char *key)
{
	return wt_path(d->e.sink_dir, key);
}

/* One inverted byte in the middle of the object at key. */
static void flip(struct dmg *d, const char *key)
{
	char *p = sink_path(d, key);
	FILE *f = fopen(p, "r+b");
	long len;
	int ch;
	assert_non_null(f);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	len = ftell(f);
	assert_true(len > 2);
	assert_int_equal(fseek(f, len / 2, SEEK_SET), 0);
	ch = fgetc(f);
	assert_int_equal(fseek(f, len / 2, SEEK_SET), 0);
	assert_int_equal(fputc(ch ^ 0xff, f), ch ^ 0xff);
	assert_int_equal(fclose(f), 0);
	free(p);
}

static void drop(struct dmg *d, const char *key)
{
	assert_int_equal(ws_store_del(d->s, key), 0);
}

static bool exists(struct dmg *d, const char *key)
{
	struct ws_obj_info oi;
	return ws_store_head(d->s, key, &oi) == 0;
}

/* restore --checkpoint id of tenant: 0 and the restored file's hash, or the error. */
static int restore_id(struct dmg *d, const char *tenant, uint64_t id, uint64_t *h)
{
	char name[64], *p;
	int rc;
	snprintf(name, sizeof(name), "r%u.db", ++d->e.restores);
	p = wt_path(d->e.out_dir, name);
	rc = ws_restore_checkpoint(d->e.sink, tenant, id, p, false);
	if (rc == 0)
		*h = wt_file_hash(p, NULL);
	unlink(p);
	free(p);
	return rc;
}

/* Checkpoint i (its index intact) restores both tenants to the recorded rows. */
static void assert_restores(struct dmg *d, unsigned i)
{
	uint64_t h = 0;
	int rc = restore_id(d, TENANT, d->id[i], &h);
	if (rc)
		fail_msg("restore --checkpoint %" PRIu64 ": %s (%s)", d->id[i], ws_strerror(rc), ws_errmsg());
	assert_true(h == d->h1[i]);
	rc = restore_id(d, TENANT2, d->id[i], &h);
	if (rc)
		fail_msg("restore --checkpoint %" PRIu64 " %s: %s (%s)", d->id[i], TENANT2, ws_strerror(rc), ws_errmsg());
	assert_true(h == d->h2[i]);
}

/* The latest state of both tenants equals the sources'. */
static void assert_live(struct dmg *d)
{
	assert_true(wt_restore_hash(&d->e, TENANT, NULL, NULL) == wt_content_hash(d->e.w, NULL));
	assert_true(wt_restore_hash(&d->e, TENANT2, NULL, NULL) == wt_content_hash(d->w2, NULL));
}

struct listing {
	uint64_t id[16];
	bool damaged[16];
	size_t n;
};

static int on_listed(const struct ws_checkpoint_info *info, void *arg)
{
	struct listing *l = arg;
	if (l->n < 16) {
		l->id[l->n] = info->id;
		l->damaged[l->n++] = info->damaged;
	}
	if (info->damaged)
		assert_non_null(strstr(info->ref_key, "checkpoints/committed/"));
	return 0;
}

static void list_all(struct dmg *d, struct listing *l)
{
	int rc;
	memset(l, 0, sizeof(*l));
	rc = ws_checkpoint_list(d->e.sink, on_listed, l);
	if (rc)
		fail_msg("ls --checkpoints: %s (%s)", ws_strerror(rc), ws_errmsg());
}

struct problems {
	unsigned n, naming;
	const char *want;       /* key a problem must name */
};

static void on_problem(const char *tenant, const char *key, int err, const char *detail, void *arg)
{
	struct problems *p = arg;
	fprintf(stderr, "verify problem: tenant %s key %s: %s (%s)\n", tenant ? tenant : "-", key ? key : "-", detail,
		ws_strerror(err));
	p->n++;
	if (p->want && ((key && strcmp(key, p->want) == 0) || strstr(detail, p->want)))
		p->naming++;
}

/* verify: the number of problems; *naming those that name want. */
static unsigned verify_naming(struct dmg *d, const char *want, unsigned *naming)
{
	struct problems p = { 0, 0, want };
	int rc = ws_verify(d->e.sink, NULL, on_problem, &p);
	assert_true((rc == 0) == (p.n == 0));
	if (naming)
		*naming = p.naming;
	return p.n;
}

static void retention_ok(struct dmg *d, unsigned keep, struct ws_retention_report *rep)
{
	int rc = ws_retention_run_keep(d->e.sink, false, keep, NULL, NULL, rep);
	if (rc)
		fail_msg("retention --keep-checkpoints %u: %s (%s)", keep, ws_strerror(rc), ws_errmsg());
}

/* Every artifact key of checkpoint id still stored. */
static unsigned artifacts_of(struct dmg *d, uint64_t id)
{
	char k[WS_KEY_MAX];
	unsigned n = 0;
	snprintf(k, sizeof(k), "checkpoints/artifacts/%016" PRIx64 "/" TENANT, id);
	n += exists(d, k);
	snprintf(k, sizeof(k), "checkpoints/artifacts/%016" PRIx64 "/" TENANT2, id);
	n += exists(d, k);
	return n;
}

/*
 * The latest committed index damaged (flip) or gone (!flip): before the
 * fix every later checkpoint, retention, ls and restore of an intact older
 * checkpoint failed until checkpoints/head was edited by hand.
 */
static void latest_damaged(bool flip_it)
{
	struct dmg d;
	struct listing l;
	struct ws_retention_report rep;
	unsigned naming = 0;
	uint64_t h = 0;
	int rc;

	d_init(&d, flip_it ? "ckdmg-latest-flip" : "ckdmg-latest-gone");
	d_take(&d);
	d_take(&d);
	d_take(&d);
	if (flip_it)
		flip(&d, d.key[2]);
	else
		drop(&d, d.key[2]);

	/* verify names it; ls lists the older ones and marks it. */
	assert_true(verify_naming(&d, d.key[2], &naming) >= 1);
	assert_true(naming >= 1);
	list_all(&d, &l);
	assert_int_equal(l.n, 3);
	assert_true(l.id[0] == d.id[2] && l.damaged[0]);
	assert_true(l.id[1] == d.id[1] && !l.damaged[1]);
	assert_true(l.id[2] == d.id[0] && !l.damaged[2]);
	/* The intact checkpoints restore exactly; the damaged one is refused, named. */
	assert_restores(&d, 1);
	assert_restores(&d, 0);
	rc = restore_id(&d, TENANT, d.id[2], &h);
	assert_int_equal(rc, WS_ECORRUPT);
	assert_non_null(strstr(ws_errmsg(), d.key[2]));
	/* Retention protects the latest Commit: it refuses, naming it, until a
	 * new checkpoint stands in for it. */
	rc = ws_retention_run_keep(d.e.sink, false, 1, NULL, NULL, &rep);
	assert_int_not_equal(rc, 0);
	assert_non_null(strstr(ws_errmsg(), d.key[2]));
	assert_true(exists(&d, d.key[1]) && exists(&d, d.key[0]));

	/* The next checkpoint commits past it, its images from the chain. */
	d_take(&d);
	assert_restores(&d, 3);
	assert_restores(&d, 1);
	assert_live(&d);
	list_all(&d, &l);
	assert_int_equal(l.n, 4);
	assert_true(!l.damaged[0] && l.damaged[1] && !l.damaged[2] && !l.damaged[3]);

	/* keep 3: the three newest that restore (3, 1, 0) stay, and so does the
	 * damaged one between them; nothing is removed. */
	retention_ok(&d, 3, &rep);
	assert_true(rep.kept_from_id == d.id[0]);
	assert_int_equal(rep.checkpoints_deleted, 0);
	assert_restores(&d, 0);
	assert_restores(&d, 1);
	assert_restores(&d, 3);
	/* keep 1: everything older than the latest goes, the damaged index and
	 * its artifacts included; verify is clean again. */
	retention_ok(&d, 1, &rep);
	assert_int_equal(rep.checkpoints_deleted, flip_it ? 3 : 2);
	assert_false(exists(&d, d.key[2]));
	assert_false(exists(&d, d.key[1]));
	assert_false(exists(&d, d.key[0]));
	assert_int_equal(artifacts_of(&d, d.id[2]), 0);
	assert_int_equal(artifacts_of(&d, d.id[1]), 0);
	assert_int_equal(verify_naming(&d, NULL, NULL), 0);
	list_all(&d, &l);
	assert_int_equal(l.n, 1);
	assert_true(l.id[0] == d.id[3] && !l.damaged[0]);
	assert_restores(&d, 3);
	assert_live(&d);
	/* And checkpoints go on. */
	d_take(&d);
	assert_restores(&d, 4);
	d_free(&d);
}

static void test_latest_index_flipped(void **state)
{
	(void)state;
	latest_damaged(true);
}

static void test_latest_index_deleted(void **state)
{
	(void)state;
	latest_damaged(false);
}

/*
 * An older index damaged: before the fix retention failed for good
 * whatever --keep-checkpoints said. keep 3 keeps the three newest that
 * restore; keep 1 deletes everything older than the latest, the damaged
 * index and its artifacts included.
 */
static void test_older_index_flipped(void **state)
{
	struct dmg d;
	struct listing l;
	struct ws_retention_report rep;
	unsigned naming = 0;
	(void)state;

	d_init(&d, "ckdmg-older");
	d_take(&d);
	d_take(&d);
	d_take(&d);
	flip(&d, d.key[1]);
	assert_true(verify_naming(&d, d.key[1], &naming) >= 1);
	assert_true(naming >= 1);
	list_all(&d, &l);
	assert_int_equal(l.n, 3);
	assert_true(!l.damaged[0] && l.damaged[1] && !l.damaged[2] && l.id[2] == d.id[0]);
	assert_restores(&d, 0);
	assert_restores(&d, 2);
	retention_ok(&d, 3, &rep);
	assert_true(rep.kept_from_id == d.id[0]);
	assert_int_equal(rep.checkpoints_deleted, 0);
	assert_restores(&d, 0);
	d_take(&d);
	retention_ok(&d, 1, &rep);
	assert_int_equal(rep.checkpoints_deleted, 3);
	assert_false(exists(&d, d.key[1]));
	assert_int_equal(artifacts_of(&d, d.id[1]), 0);
	assert_int_equal(verify_naming(&d, NULL, NULL), 0);
	assert_restores(&d, 3);
	assert_live(&d);
	d_free(&d);
}

/*
 * A kill at the deletes of the retention run that removes a damaged index
 * and its artifacts (its first deletes: the damaged checkpoint's artifacts;
 * its last: the damaged index), before and after each: the next run
 * finishes it and the sink verifies, every kept state restoring exactly.
 */
static void test_retention_crash_past_damaged(void **state)
{
	static const char *const sites[] = { "retention.before_delete", "retention.after_delete" };
	unsigned total = 0;
	(void)state;
	for (unsigned k = 0; k < 4; k++) {
		for (size_t s = 0; s < 2; s++) {
			struct dmg d;
			struct ws_retention_report rep;
			unsigned nth;
			pid_t pid;
			int status = 0;

			d_init(&d, "ckdmg-crash");
			d_take(&d);
			d_take(&d);
			flip(&d, d.key[1]);
			d_take(&d);
			if (!total) {
				assert_int_equal(ws_retention_run(d.e.sink, true, NULL, NULL, &rep), 0);
				total = (unsigned)rep.deleted;
				assert_true(total >= 4);
			}
			nth = k < 2 ? k + 1 : total - 3 + k;
			pid = fork();
			assert_true(pid >= 0);
			if (pid == 0) {
				ws_fault_arm(sites[s], nth, 1);
				_exit(ws_retention_run(d.e.sink, false, NULL, NULL, NULL) == 0 ? 0 : 3);
			}
			assert_int_equal(waitpid(pid, &status, 0), pid);
			assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
			/* The restarted run repairs whatever the kill left. */
			retention_ok(&d, 1, &rep);
			assert_false(exists(&d, d.key[1]));
			assert_false(exists(&d, d.key[0]));
			assert_int_equal(artifacts_of(&d, d.id[1]), 0);
			assert_int_equal(artifacts_of(&d, d.id[0]), 0);
			assert_int_equal(verify_naming(&d, NULL, NULL), 0);
			assert_restores(&d, 2);
			assert_live(&d);
			d_take(&d);
			assert_restores(&d, 3);
			d_free(&d);
		}
	}
}

/*
 * A control object that cannot be decoded: verify names it (before the
 * fix it said ok); an inventory or a witness the next checkpoint rebuilds
 * from the rest of the sink (before, every checkpoint failed for good),
 * and the checkpoint after it restores exactly; a retention record the
 * next retention run rebuilds (idle, keeping the oldest stored checkpoint),
 * readers failing naming it until then.
 */
static void damaged_control(const char *key, bool rebuilt)
{
	struct dmg d;
	struct ws_retention_report rep;
	unsigned naming = 0;
	int rc;

	d_init(&d, "ckdmg-control");
	d_take(&d);
	d_take(&d);
	if (strcmp(key, "checkpoints/retention") == 0)
		retention_ok(&d, 2, &rep);
	flip(&d, key);
	assert_true(verify_naming(&d, key, &naming) >= 1);
	assert_true(naming >= 1);
	if (rebuilt) {
		d_take(&d);
		assert_int_equal(verify_naming(&d, NULL, NULL), 0);
		assert_restores(&d, 2);
		assert_restores(&d, 0);
		assert_live(&d);
		d_take(&d);
		assert_restores(&d, 3);
	} else {
		/* Readers that need it fail naming it; retention rebuilds it
		 * (idle, keeping the oldest stored) and runs. */
		struct listing l;
		memset(&l, 0, sizeof(l));
		rc = ws_checkpoint_list(d.e.sink, on_listed, &l);
		assert_int_not_equal(rc, 0);
		assert_non_null(strstr(ws_errmsg(), key));
		retention_ok(&d, 1, &rep);
		assert_int_equal(rep.checkpoints_deleted, 1);
		assert_int_equal(verify_naming(&d, NULL, NULL), 0);
		assert_restores(&d, 1);
		assert_live(&d);
		d_take(&d);
		retention_ok(&d, 1, &rep);
		assert_restores(&d, 2);
	}
	d_free(&d);
}

static void test_damaged_inventory_rebuilt(void **state)
{
	(void)state;
	damaged_control("checkpoints/inventory", true);
}

static void test_damaged_witness_rebuilt(void **state)
{
	(void)state;
	damaged_control("checkpoints/witness", true);
}

static void test_damaged_retention_rebuilt(void **state)
{
	(void)state;
	damaged_control("checkpoints/retention", false);
}

/* Both damaged, and a crashed attempt's witness open: rebuilt, the crashed attempt finished. */
static void test_damaged_inventory_with_open_witness(void **state)
{
	struct dmg d;
	pid_t pid;
	int status = 0;
	(void)state;

	d_init(&d, "ckdmg-openwit");
	d_take(&d);
	d_write(&d, 3);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct ws_checkpoint_info info;
		ws_fault_arm("checkpoint.artifact.after_put", 1, 1);
		_exit(ws_checkpoint_take(d.e.sink, NULL, &info) == 0 ? 0 : 3);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	flip(&d, "checkpoints/inventory");
	d_take(&d);
	assert_int_equal(verify_naming(&d, NULL, NULL), 0);
	assert_restores(&d, 1);
	assert_restores(&d, 0);
	assert_live(&d);
	d_free(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_latest_index_flipped),
		cmocka_unit_test(test_latest_index_deleted),
		cmocka_unit_test(test_older_index_flipped),
		cmocka_unit_test(test_retention_crash_past_damaged),
		cmocka_unit_test(test_damaged_inventory_rebuilt),
		cmocka_unit_test(test_damaged_witness_rebuilt),
		cmocka_unit_test(test_damaged_retention_rebuilt),
		cmocka_unit_test(test_damaged_inventory_with_open_witness),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
