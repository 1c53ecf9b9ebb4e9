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
#define NCK 8

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

/* ---- checkpoints/head and checkpoints/deployment: walship repair (ws_checkpoint_repair) ---- */

enum damage { FLIP, TRUNCATE, DELETE };

/* The bytes of the object at key ("" when absent), malloc'd. */
static char *slurp(struct dmg *d, const char *key)
{
	char *p = sink_path(d, key), *buf = calloc(1, 1 << 20);
	FILE *f = fopen(p, "rb");
	assert_non_null(buf);
	if (f) {
		size_t n = fread(buf, 1, (1 << 20) - 1, f);
		buf[n] = '\0';
		fclose(f);
	}
	free(p);
	return buf;
}

static void damage(struct dmg *d, const char *key, enum damage how)
{
	if (how == FLIP) {
		flip(d, key);
	} else if (how == TRUNCATE) {
		char *p = sink_path(d, key), *b = slurp(d, key);
		assert_int_equal(truncate(p, (off_t)(strlen(b) / 2)), 0);
		free(b);
		free(p);
	} else {
		drop(d, key);
	}
}

/* rc is a failure whose detail names key and the command that repairs it. */
static void assert_names_repair(int rc, const char *what, const char *key)
{
	if (rc == 0)
		fail_msg("%s: succeeded with %s damaged", what, key);
	if (!strstr(ws_errmsg(), key) || !strstr(ws_errmsg(), "run: walship repair --sink file://"))
		fail_msg("%s: the error does not name %s and `walship repair`: %s", what, key, ws_errmsg());
}

/* Every command that needs key fails naming it and `walship repair --sink URL`; verify too. */
static void assert_all_name_repair(struct dmg *d, const char *key)
{
	struct ws_checkpoint_info info;
	struct ws_retention_report rep;
	struct listing l;
	unsigned naming = 0;
	uint64_t h = 0;

	assert_names_repair(ws_checkpoint_take(d->e.sink, NULL, &info), "checkpoint", key);
	assert_names_repair(ws_retention_run(d->e.sink, false, NULL, NULL, &rep), "retention", key);
	memset(&l, 0, sizeof(l));
	assert_names_repair(ws_checkpoint_list(d->e.sink, on_listed, &l), "ls --checkpoints", key);
	assert_names_repair(restore_id(d, TENANT, d->id[0], &h), "restore --checkpoint", key);
	assert_true(verify_naming(d, key, &naming) >= 1);
	assert_true(naming >= 1);
	assert_true(verify_naming(d, "walship repair --sink", &naming) >= 1);
	assert_true(naming >= 1);
}

static void repair_ok(struct dmg *d, bool dry, struct ws_repair_report *rep)
{
	int rc = ws_checkpoint_repair(d->e.sink, dry, rep);
	if (rc)
		fail_msg("repair%s: %s (%s)", dry ? " --dry-run" : "", ws_strerror(rc), ws_errmsg());
}

/* The object at key as the store reads it: absent, its kind, its deployment. */
static struct ws_ckpt_peek peek_of(struct dmg *d, const char *key)
{
	struct ws_ckpt_peek p;
	int err = 0;
	struct ws_ckpt *c = ws_ckpt_open_reader(d->s, &err);
	assert_non_null(c);
	assert_int_equal(ws_ckpt_peek(c, key, NULL, &p), 0);
	ws_ckpt_close(c);
	return p;
}

/*
 * Repair of a healthy sink writes nothing: every checkpoints/ object holds
 * the bytes it held (checked over the whole namespace, by content).
 */
static void assert_repair_noop(struct dmg *d)
{
	static const char *const keys[] = { "checkpoints/deployment", "checkpoints/head", "checkpoints/inventory",
					    "checkpoints/witness" };
	struct ws_repair_report rep;
	char *before[4];
	for (size_t i = 0; i < 4; i++)
		before[i] = slurp(d, keys[i]);
	repair_ok(d, false, &rep);
	assert_false(rep.deployment_repaired);
	assert_false(rep.head_repaired);
	for (size_t i = 0; i < 4; i++) {
		char *after = slurp(d, keys[i]);
		assert_string_equal(before[i], after);
		free(after);
		free(before[i]);
	}
}

/*
 * Three checkpoints, then checkpoints/head damaged (one inverted byte, cut
 * in half, or deleted while the indexes are there). Before `walship
 * repair`, nothing rebuilt it and no error said how: every command that
 * needs it fails naming it and the command; the dry run writes nothing;
 * repair rebuilds it (latest Commit the newest index); verify passes; every
 * earlier checkpoint restores to exactly the rows its cut had; the next
 * checkpoint commits with an id above every earlier one; a second repair
 * writes nothing.
 */
static void head_damaged(enum damage how)
{
	struct dmg d;
	struct ws_repair_report rep;
	char *orig, *dry;

	d_init(&d, "ckdmg-head");
	d_take(&d);
	d_take(&d);
	d_take(&d);
	assert_repair_noop(&d);
	orig = slurp(&d, "checkpoints/head");
	damage(&d, "checkpoints/head", how);
	assert_all_name_repair(&d, "checkpoints/head");

	dry = slurp(&d, "checkpoints/head");
	repair_ok(&d, true, &rep);
	assert_true(rep.dry_run && rep.head_repaired && !rep.deployment_repaired);
	{
		char *after = slurp(&d, "checkpoints/head");
		assert_string_equal(dry, after); /* the dry run wrote nothing */
		free(after);
	}
	repair_ok(&d, false, &rep);
	assert_true(rep.head_repaired && !rep.deployment_repaired && !rep.head_removed);
	assert_true(rep.latest_commit == d.id[2] && rep.terminal_commit && rep.latest_terminal == d.id[2]);
	assert_true(rep.epoch == 1 && rep.in_flight == 0);
	assert_true(rep.decisions >= 3); /* at least the decisions taken */
	{
		/* The same latest Commit and epoch as the head it replaces. */
		char *now = slurp(&d, "checkpoints/head");
		const char *lc = strstr(orig, "\"latest_commit\""), *lc2 = strstr(now, "\"latest_commit\"");
		assert_non_null(lc);
		assert_non_null(lc2);
		assert_memory_equal(lc, lc2, (size_t)(strstr(lc, "\"latest_terminal\"") - lc));
		free(now);
	}
	assert_int_equal(verify_naming(&d, NULL, NULL), 0);
	for (unsigned i = 0; i < 3; i++)
		assert_restores(&d, i);
	assert_live(&d);
	d_take(&d);
	assert_true(d.id[3] > d.id[2] && d.id[3] > d.id[1] && d.id[3] > d.id[0]);
	assert_restores(&d, 3);
	assert_restores(&d, 0);
	assert_int_equal(verify_naming(&d, NULL, NULL), 0);
	assert_repair_noop(&d);
	free(orig);
	free(dry);
	d_free(&d);
}

static void test_head_flipped_repaired(void **state)
{
	(void)state;
	head_damaged(FLIP);
}

static void test_head_truncated_repaired(void **state)
{
	(void)state;
	head_damaged(TRUNCATE);
}

static void test_head_deleted_repaired(void **state)
{
	(void)state;
	head_damaged(DELETE);
}

/* The value of "field":"..." in json (64 bytes at most). */
static void field(const char *json, const char *name, char out[65])
{
	char pat[64];
	const char *p;
	snprintf(pat, sizeof(pat), "\"%s\":\"", name);
	p = strstr(json, pat);
	assert_non_null(p);
	p += strlen(pat);
	snprintf(out, 65, "%.*s", (int)strcspn(p, "\""), p);
}

/*
 * checkpoints/deployment damaged (an inverted byte, cut in half, or
 * deleted: without the guard the next checkpoint created a fresh
 * deployment and every stored checkpoint became foreign for good). Every
 * command fails naming it and `walship repair`; repair rebuilds it with the
 * deployment every other object carries and a next_id above every ID
 * stored; everything restores, and the next checkpoint's id is above all.
 */
static void deployment_damaged(enum damage how)
{
	struct dmg d;
	struct ws_repair_report rep;
	char *orig, *now, dep[65], dep2[65], next[65];
	uint64_t next_id;

	d_init(&d, "ckdmg-deployment");
	d_take(&d);
	d_take(&d);
	d_take(&d);
	orig = slurp(&d, "checkpoints/deployment");
	field(orig, "deployment", dep);
	field(orig, "next_id", next);
	next_id = strtoull(next, NULL, 10);
	damage(&d, "checkpoints/deployment", how);
	assert_all_name_repair(&d, "checkpoints/deployment");
	assert_int_equal(peek_of(&d, "checkpoints/deployment").kind,
			 how == DELETE ? WS_CKPT_PEEK_ABSENT : WS_CKPT_PEEK_DAMAGED);

	repair_ok(&d, true, &rep);
	assert_true(rep.deployment_repaired && !rep.head_repaired);
	assert_int_equal(peek_of(&d, "checkpoints/deployment").kind,
			 how == DELETE ? WS_CKPT_PEEK_ABSENT : WS_CKPT_PEEK_DAMAGED);
	repair_ok(&d, false, &rep);
	assert_true(rep.deployment_repaired && !rep.head_repaired && !rep.deployment_fresh);
	assert_string_equal(rep.deployment, dep);
	assert_true(rep.deployment_local);
	assert_true(rep.next_id > d.id[2]);
	/* A local writer reserves IDs in ranges: the record held more than the sink shows. */
	assert_true(rep.next_id <= next_id);
	now = slurp(&d, "checkpoints/deployment");
	field(now, "deployment", dep2);
	assert_string_equal(dep, dep2);
	assert_non_null(strstr(now, "\"authority\":\"local\""));
	assert_int_equal(verify_naming(&d, NULL, NULL), 0);
	for (unsigned i = 0; i < 3; i++)
		assert_restores(&d, i);
	d_take(&d);
	assert_true(d.id[3] > d.id[2]);
	assert_restores(&d, 3);
	assert_restores(&d, 1);
	assert_int_equal(verify_naming(&d, NULL, NULL), 0);
	assert_repair_noop(&d);
	free(orig);
	free(now);
	d_free(&d);
}

static void test_deployment_flipped_repaired(void **state)
{
	(void)state;
	deployment_damaged(FLIP);
}

static void test_deployment_truncated_repaired(void **state)
{
	(void)state;
	deployment_damaged(TRUNCATE);
}

static void test_deployment_deleted_repaired(void **state)
{
	(void)state;
	deployment_damaged(DELETE);
}

/* Both damaged at once: the deployment first, then the head through it. */
static void test_both_damaged_repaired(void **state)
{
	struct dmg d;
	struct ws_repair_report rep;
	(void)state;

	d_init(&d, "ckdmg-both");
	d_take(&d);
	d_take(&d);
	flip(&d, "checkpoints/deployment");
	flip(&d, "checkpoints/head");
	repair_ok(&d, false, &rep);
	assert_true(rep.deployment_repaired && rep.head_repaired);
	assert_true(rep.latest_commit == d.id[1] && rep.next_id > d.id[1]);
	assert_int_equal(verify_naming(&d, NULL, NULL), 0);
	assert_restores(&d, 0);
	assert_restores(&d, 1);
	d_take(&d);
	assert_true(d.id[2] > d.id[1]);
	assert_restores(&d, 2);
	d_free(&d);
}

/* A healthy sink, and one nothing was ever shipped to: repair writes nothing. */
static void test_repair_healthy_noop(void **state)
{
	struct dmg d;
	struct ws_repair_report rep;
	(void)state;

	d_init(&d, "ckdmg-noop");
	repair_ok(&d, false, &rep);
	assert_false(rep.deployment_repaired || rep.head_repaired);
	assert_false(exists(&d, "checkpoints/deployment"));
	assert_false(exists(&d, "checkpoints/head"));
	d_take(&d);
	assert_repair_noop(&d);
	d_free(&d);
}

/*
 * A checkpoint killed after its candidate index (its witness open, its
 * candidate unsealed and undecided), then the head damaged: repair does not
 * take the candidate for a Commit (the latest Commit stays the one before),
 * and the next checkpoint aborts and seals that attempt, then commits above
 * it.
 */
static void test_repair_with_open_witness(void **state)
{
	struct dmg d;
	struct ws_repair_report rep;
	char key[WS_KEY_MAX] = "";
	pid_t pid;
	int status = 0;
	(void)state;

	d_init(&d, "ckdmg-repair-open");
	d_take(&d);
	d_take(&d);
	d_write(&d, 3);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct ws_checkpoint_info info;
		ws_fault_arm("ckpt.create.after_put", 1, 1);
		_exit(ws_checkpoint_take(d.e.sink, NULL, &info) == 0 ? 0 : 3);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	flip(&d, "checkpoints/head");
	repair_ok(&d, false, &rep);
	assert_true(rep.head_repaired && rep.in_flight > d.id[1]);
	assert_true(rep.latest_commit == d.id[1] && rep.terminal_commit);
	{
		/* The crashed attempt's candidate: an index, unsealed, not the latest Commit. */
		struct ws_list_page page;
		char prefix[WS_KEY_MAX];
		snprintf(prefix, sizeof(prefix), "checkpoints/committed/%016" PRIx64 "-", rep.in_flight);
		memset(&page, 0, sizeof(page));
		assert_int_equal(ws_store_list(d.s, prefix, "", 10, &page), 0);
		assert_int_equal(page.count, 1);
		snprintf(key, sizeof(key), "%s", page.keys[0]);
		ws_list_page_free(&page);
		assert_int_equal(peek_of(&d, key).kind, WS_CKPT_PEEK_INDEX);
	}
	assert_restores(&d, 0);
	assert_restores(&d, 1);
	d_take(&d);
	assert_true(d.id[2] > rep.in_flight);
	assert_int_equal(peek_of(&d, key).kind, WS_CKPT_PEEK_SEAL); /* aborted and sealed */
	assert_int_equal(verify_naming(&d, NULL, NULL), 0);
	assert_restores(&d, 2);
	assert_restores(&d, 1);
	assert_live(&d);
	d_free(&d);
}

/*
 * Repair racing a writer. On a file:// sink repair holds the writers'
 * lease: a checkpoint started while repair is stopped before its write
 * (ckpt.repair.before_put) gets the lease error and writes nothing. The
 * compare-and-swap itself: while repair is stopped there, the head is
 * replaced by another's write (a direct store write stands in for a
 * concurrent repair and decision, which the lease keeps from happening on
 * file://; test_checkpoint_s3.sh races real ones on s3://): repair's write
 * loses, it fails saying to run again, and the head keeps what was written.
 */
static void test_repair_race(void **state)
{
	struct dmg d;
	struct ws_checkpoint_opts co;
	struct ws_checkpoint_info info;
	char *orig, *now;
	pid_t pid;
	int status = 0, rc;
	(void)state;

	d_init(&d, "ckdmg-repair-race");
	d_take(&d);
	d_take(&d);
	orig = slurp(&d, "checkpoints/head");
	flip(&d, "checkpoints/head");
	for (int round = 0; round < 2; round++) {
		pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			struct ws_repair_report rep;
			ws_fault_arm_action("ckpt.repair.before_put", 1, WS_FAULT_STOP);
			rc = ws_checkpoint_repair(d.e.sink, false, &rep);
			if (rc)
				fprintf(stderr, "repair: %s\n", ws_errmsg());
			_exit(rc == 0 ? 0 : rc == WS_EPRECOND && strstr(ws_errmsg(), "run again") ? 4 : 3);
		}
		assert_int_equal(waitpid(pid, &status, WUNTRACED), pid);
		assert_true(WIFSTOPPED(status));
		if (round == 0) {
			memset(&co, 0, sizeof(co));
			co.wait_ms = 200;
			rc = ws_checkpoint_take(d.e.sink, &co, &info);
			assert_int_equal(rc, WS_EFENCED); /* the lease: nothing written */
		} else {
			/* Another's write lands first. */
			assert_int_equal(ws_store_put(d.s, "checkpoints/head", orig, strlen(orig), WS_PUT_OVERWRITE,
						      NULL, NULL), 0);
		}
		assert_int_equal(kill(pid, SIGCONT), 0);
		assert_int_equal(waitpid(pid, &status, 0), pid);
		assert_true(WIFEXITED(status));
		assert_int_equal(WEXITSTATUS(status), round == 0 ? 0 : 4);
		if (round == 0)
			flip(&d, "checkpoints/head"); /* damage it again for the second round */
	}
	now = slurp(&d, "checkpoints/head");
	assert_string_equal(now, orig); /* the write that won stands */
	assert_int_equal(verify_naming(&d, NULL, NULL), 0);
	d_take(&d);
	assert_restores(&d, 2);
	assert_restores(&d, 0);
	free(orig);
	free(now);
	d_free(&d);
}

/*
 * A seal (an aborted candidate's) between two Commits. Before, a walk past
 * a damaged index took the intact seal for a damaged index (its recorded
 * length is its candidate's): verify named it and retention deleted it.
 * Now the seal passes, and a damaged seal (decoding as neither an index nor
 * a seal) is named by verify and removed by retention, as a damaged index
 * is.
 */
static void test_damaged_seal(void **state)
{
	struct dmg d;
	struct ws_retention_report rep;
	char key[WS_KEY_MAX] = "";
	unsigned naming = 0;
	pid_t pid;
	int status = 0;
	(void)state;

	d_init(&d, "ckdmg-seal");
	d_take(&d);
	d_write(&d, 2);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct ws_checkpoint_info info;
		ws_fault_arm("ckpt.create.after_put", 1, 1);
		_exit(ws_checkpoint_take(d.e.sink, NULL, &info) == 0 ? 0 : 3);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	d_take(&d); /* recovers: the candidate sealed */
	d_take(&d);
	{
		struct ws_list_page page;
		memset(&page, 0, sizeof(page));
		assert_int_equal(ws_store_list(d.s, "checkpoints/committed/", "", 10, &page), 0);
		for (size_t i = 0; i < page.count; i++)
			if (peek_of(&d, page.keys[i]).kind == WS_CKPT_PEEK_SEAL)
				snprintf(key, sizeof(key), "%s", page.keys[i]);
		ws_list_page_free(&page);
	}
	assert_true(key[0] != '\0');
	assert_int_equal(verify_naming(&d, NULL, NULL), 0);
	/* The newest index damaged: the walk goes past the intact seal, names only the index. */
	flip(&d, d.key[2]);
	assert_int_equal(verify_naming(&d, key, &naming), 1);
	assert_int_equal(naming, 0);
	d_take(&d);
	retention_ok(&d, 1, &rep);
	assert_true(exists(&d, key)); /* a seal occupies its path for good */
	assert_false(exists(&d, d.key[2]));
	assert_int_equal(verify_naming(&d, NULL, NULL), 0);
	/* Now the seal itself damaged: named; retention removes it. */
	flip(&d, key);
	assert_true(verify_naming(&d, key, &naming) >= 1);
	assert_true(naming >= 1);
	assert_int_equal(peek_of(&d, key).kind, WS_CKPT_PEEK_DAMAGED);
	d_take(&d);
	assert_restores(&d, 3);
	retention_ok(&d, 1, &rep);
	assert_false(exists(&d, key));
	assert_int_equal(verify_naming(&d, NULL, NULL), 0);
	assert_restores(&d, 4);
	assert_live(&d);
	d_free(&d);
}

/*
 * Bad input to repair: a valid object is never replaced (the store refuses
 * one its caller read as decoding), a read-only handle writes nothing, a
 * malformed deployment id is refused; records of two deployments make the
 * lost record's id unknowable: refused naming both, nothing written.
 */
static void test_repair_bad_input(void **state)
{
	struct dmg d;
	struct ws_repair_report rep;
	struct ws_ckpt_peek hp, dp;
	struct ws_ckpt_head h;
	struct ws_ckpt *c;
	char *wit, *dep, *p, other[65], *before;
	int err = 0, rc;
	(void)state;

	d_init(&d, "ckdmg-repair-bad");
	d_take(&d);
	d_take(&d);
	hp = peek_of(&d, "checkpoints/head");
	dp = peek_of(&d, "checkpoints/deployment");
	assert_int_equal(hp.kind, WS_CKPT_PEEK_HEAD);
	c = ws_ckpt_open_local(d.e.sink_dir, &err);
	assert_non_null(c);
	h = hp.head;
	assert_int_equal(ws_ckpt_repair_head(c, &hp, &h), WS_ECONFIG);
	assert_non_null(strstr(ws_errmsg(), "never replaced"));
	assert_int_equal(ws_ckpt_repair_deployment(c, &dp, dp.deployment, 5), WS_ECONFIG);
	dp.kind = WS_CKPT_PEEK_DAMAGED;
	assert_int_equal(ws_ckpt_repair_deployment(c, &dp, "not-hex", 5), WS_ECONFIG);
	assert_int_equal(ws_ckpt_repair_deployment(c, &dp, dp.deployment, 0), WS_ECONFIG);
	ws_ckpt_close(c);
	c = ws_ckpt_open_reader(d.s, &err);
	assert_non_null(c);
	hp.kind = WS_CKPT_PEEK_DAMAGED;
	assert_int_equal(ws_ckpt_repair_head(c, &hp, &h), WS_ECONFIG);
	ws_ckpt_close(c);
	assert_repair_noop(&d); /* none of that wrote anything */

	/* The witness made another deployment's (still a valid record), the deployment record damaged. */
	wit = slurp(&d, "checkpoints/witness");
	dep = slurp(&d, "checkpoints/deployment");
	field(dep, "deployment", other);
	other[0] = other[0] == 'a' ? 'b' : 'a';
	p = strstr(wit, "\"deployment\":\"");
	assert_non_null(p);
	memcpy(p + strlen("\"deployment\":\""), other, 32);
	assert_int_equal(ws_store_put(d.s, "checkpoints/witness", wit, strlen(wit), WS_PUT_OVERWRITE, NULL, NULL), 0);
	flip(&d, "checkpoints/deployment");
	before = slurp(&d, "checkpoints/deployment");
	rc = ws_checkpoint_repair(d.e.sink, false, &rep);
	assert_int_equal(rc, WS_EFORMAT);
	assert_non_null(strstr(ws_errmsg(), "checkpoints/witness"));
	assert_non_null(strstr(ws_errmsg(), other));
	assert_non_null(strstr(ws_errmsg(), "nothing written"));
	{
		char *after = slurp(&d, "checkpoints/deployment");
		assert_string_equal(before, after);
		free(after);
	}
	free(before);
	free(wit);
	free(dep);
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
		cmocka_unit_test(test_head_flipped_repaired),
		cmocka_unit_test(test_head_truncated_repaired),
		cmocka_unit_test(test_head_deleted_repaired),
		cmocka_unit_test(test_deployment_flipped_repaired),
		cmocka_unit_test(test_deployment_truncated_repaired),
		cmocka_unit_test(test_deployment_deleted_repaired),
		cmocka_unit_test(test_both_damaged_repaired),
		cmocka_unit_test(test_repair_healthy_noop),
		cmocka_unit_test(test_repair_with_open_witness),
		cmocka_unit_test(test_repair_race),
		cmocka_unit_test(test_damaged_seal),
		cmocka_unit_test(test_repair_bad_input),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
