/*
 * Point-in-time restore across re-bases. A real SQLite writer commits,
 * walship ships, the stream closes, and the history is re-based the ways an
 * application makes it happen while walship is down: it closes its last
 * connection (SQLite checkpoints and deletes the WAL), it restarts the WAL
 * (a TRUNCATE checkpoint), or the database file is replaced. Every state
 * shipped is recorded with the time it was acknowledged by and its WAL
 * position (generation from the WAL header, frame from the WAL's size);
 * restore --time and --frame GENERATION:N must give each of them exactly,
 * in every chain; ls lists every chain; verify checks them; a damaged link
 * and history retention removed end the walk with a clear answer.
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
#include <sys/stat.h>
#include <unistd.h>

#include "chain.h"
#include "core_internal.h"
#include "coreutil.h"
#include "walship.h"
#include "ws_clock.h"
#include "ws_fault.h"
#include "ws_format.h"

#define TENANT "hist"
#define POINTS_MAX 64

struct point {
	uint64_t hash;
	int64_t acked_ms;   /* ws_wall_ms() once the tail that shipped it returned */
	char gen[32];       /* from the WAL header */
	uint64_t frame;     /* from the WAL's size */
	unsigned chain;     /* re-bases before it */
};

struct hist {
	struct wt_env e;
	struct ws_stream *st;
	struct point p[POINTS_MAX];
	unsigned n;
	unsigned chains;    /* re-bases so far + 1 */
	bool rebased;       /* the next tail must re-base (RESTARTED) */
};

static void open_stream(struct hist *h)
{
	struct ws_stream_config c;
	int err = -1;
	memset(&c, 0, sizeof(c));
	c.tenant = TENANT;
	c.db_path = h->e.db;
	c.epoch = 1;
	c.pointer_generation = 1;
	c.wal_checkpoint_bytes = UINT64_MAX; /* frame numbers stay the WAL's size */
	h->st = ws_stream_open(h->e.sink, &c, &err);
	if (!h->st)
		fail_msg("ws_stream_open: %s (%s)", ws_strerror(err), ws_errmsg());
}

static void close_stream(struct hist *h)
{
	ws_stream_close(h->st);
	h->st = NULL;
}

/* One transaction, shipped; the state recorded with its WAL position. */
static void ship(struct hist *h, int rows)
{
	struct ws_outcome o;
	struct point *p;

	assert_true(h->n < POINTS_MAX);
	wt_write_txn(h->e.w, rows, 300);
	wt_tail_ok(h->st, &o);
	if (o.kind != (h->rebased ? WS_OUTCOME_RESTARTED : WS_OUTCOME_STREAMED))
		fail_msg("tail_frames: %s, expected %s", ws_outcome_name(o.kind), h->rebased ? "restarted (a "
			 "re-base)" : "streamed");
	h->rebased = false;
	p = &h->p[h->n++];
	p->acked_ms = ws_wall_ms();
	p->hash = wt_content_hash(h->e.w, NULL);
	p->chain = h->chains - 1;
	assert_true(wt_wal_pos(&h->e, p->gen, &p->frame));
	/* The next commit comes strictly after this acknowledgement. */
	wt_sleep_ms(3);
}

/* With walship down, make the history re-base; the stream opens again. */
static void rebase(struct hist *h, enum wt_rebase_how how)
{
	close_stream(h);
	if (how == WT_WAL_RESTART)
		wt_write_txn(h->e.w, 2, 300);
	wt_rebase_while_down(&h->e, how);
	h->chains++;
	h->rebased = true;
	open_stream(h);
}

static void hist_init(struct hist *h, const char *tag)
{
	memset(h, 0, sizeof(*h));
	wt_env_init(&h->e, tag, 0);
	h->chains = 1;
	open_stream(h);
}

static void hist_free(struct hist *h)
{
	if (h->st)
		close_stream(h);
	wt_env_free(&h->e);
}

/* Restore with o; rc the result, hash the state when 0. */
static int try_restore(struct hist *h, const struct ws_restore_opts *o, uint64_t *hash)
{
	return wt_try_restore(&h->e, TENANT, o, hash);
}

/* Every recorded point, by time and by GENERATION:frame, gives its state. */
static void check_every_point(struct hist *h, unsigned from)
{
	for (unsigned i = from; i < h->n; i++) {
		char label[64];
		snprintf(label, sizeof(label), "point %u (chain %u)", i, h->p[i].chain);
		wt_point_check(&h->e, TENANT, label, h->p[i].hash, h->p[i].acked_ms, h->p[i].gen, h->p[i].frame);
	}
}

struct gens {
	unsigned n, chains;
	struct ws_generation_info g[32];
};

static int gen_cb(const struct ws_generation_info *g, void *arg)
{
	struct gens *x = arg;
	assert_true(x->n < 32);
	x->g[x->n++] = *g;
	if (g->chain + 1 > x->chains)
		x->chains = g->chain + 1;
	return 0;
}

/* The live chain's REBASE base (it must be one), its key and its link. */
static void live_base(struct hist *h, char key[WS_KEY_MAX], char link[WS_KEY_MAX])
{
	struct ws_fmt_watermark wm;
	struct ws_chain c;
	assert_int_equal(ws_wm_load(h->e.sink->store, TENANT, &wm, NULL), 0);
	assert_int_equal(ws_chain_load(h->e.sink->store, TENANT, &wm, &c), 0);
	assert_int_equal(c.m[0].kind, WS_MANIFEST_REBASE);
	snprintf(key, WS_KEY_MAX, "%s", c.keys[0]);
	snprintf(link, WS_KEY_MAX, "%s", c.m[0].prev_key);
	ws_chain_free(&c);
}

static void build_three_rebases(struct hist *h)
{
	for (int i = 0; i < 3; i++)
		ship(h, 3 + i);
	rebase(h, WT_CLOSE_LAST_CONNECTION);
	for (int i = 0; i < 3; i++)
		ship(h, 2 + i);
	rebase(h, WT_WAL_RESTART);
	for (int i = 0; i < 2; i++)
		ship(h, 4);
	rebase(h, WT_FILE_REPLACED);
	for (int i = 0; i < 3; i++)
		ship(h, 3);
}

static void test_every_point_across_rebases(void **state)
{
	struct hist h;
	struct gens g = { 0 };
	enum ws_history_end removed = WS_HISTORY_REMOVED;
	char a[WS_TIME_STR_MAX];
	(void)state;

	hist_init(&h, "hist_points");
	build_three_rebases(&h);
	check_every_point(&h, 0);

	/* ls TENANT: the four chains, newest first, each one generation here,
	 * ending at the tenant's first chain. */
	assert_int_equal(ws_list_generations(h.e.sink, TENANT, gen_cb, &g, &removed), 0);
	assert_int_equal(removed, WS_HISTORY_FIRST);
	assert_int_equal(g.chains, 4);
	assert_int_equal(g.n, 4);
	for (unsigned i = 0; i < g.n; i++) {
		const struct point *last = NULL;
		for (unsigned k = 0; k < h.n; k++)
			if (h.p[k].chain == 3 - g.g[i].chain)
				last = &h.p[k];
		assert_non_null(last);
		assert_string_equal(g.g[i].generation, last->gen);
		assert_int_equal(g.g[i].last_frame, last->frame);
		assert_string_equal(g.g[i].start, "rebase");
		assert_true(g.g[i].last_time_ms <= last->acked_ms);
		assert_true(g.g[i].first_time_ms <= g.g[i].last_time_ms);
		if (i + 1 < g.n)
			assert_true(g.g[i + 1].last_time_ms <= g.g[i].first_time_ms);
	}

	/* Before the first state shipped: refused, the time as RFC 3339. */
	{
		struct ws_restore_opts o = { 0 };
		uint64_t got;
		o.time_ms = g.g[g.n - 1].first_time_ms - 1;
		assert_int_equal(try_restore(&h, &o, &got), WS_ERANGE_);
		ws_time_str(g.g[g.n - 1].first_time_ms, a);
		if (!strstr(ws_errmsg(), a) || strstr(ws_errmsg(), " ms"))
			fail_msg("the refusal does not name the oldest state's time as %s: %s", a, ws_errmsg());
		/* A generation no chain holds. */
		memset(&o, 0, sizeof(o));
		o.frame = 1;
		o.generation = "g00000000-0000000000000000";
		assert_int_equal(try_restore(&h, &o, &got), WS_ERANGE_);
		assert_non_null(strstr(ws_errmsg(), "g00000000-0000000000000000"));
	}
	/* Plain --frame N still counts in the live chain's newest generation. */
	{
		struct ws_restore_opts o = { 0 };
		uint64_t got = 0;
		o.frame = h.p[h.n - 2].frame;
		assert_int_equal(try_restore(&h, &o, &got), 0);
		assert_true(got == h.p[h.n - 2].hash);
	}
	assert_int_equal(ws_verify(h.e.sink, TENANT, NULL, NULL), 0);
	hist_free(&h);
}

#ifdef WS_FAULTS
/*
 * The re-base's tail paused before its manifest goes out while the
 * application commits under it: every point before still restores, the
 * re-base's state is one the source committed, and the commits made during
 * the pause are shipped by the next tail.
 */
static void test_rebase_paused_writer_goes_on(void **state)
{
	struct hist h;
	struct wt_mutator m;
	struct ws_outcome o;
	uint64_t got = 0;
	(void)state;

	hist_init(&h, "hist_pause");
	ship(&h, 3);
	ship(&h, 3);
	close_stream(&h);
	sqlite3_close(h.e.w);
	h.e.w = wt_writer_open(h.e.db, 0);
	wt_write_txn(h.e.w, 3, 300);
	open_stream(&h);
	h.chains++;
	wt_mutator_init(&m, &h.e, 0);
	wt_mutator_record(&m);
	assert_int_equal(ws_fault_arm_pause("stream.before_manifest_put", 1, wt_mutate, &m), 0);
	wt_tail_ok(h.st, &o);
	ws_fault_disarm();
	assert_int_equal(m.fired, 1);
	assert_int_equal(o.kind, WS_OUTCOME_RESTARTED);
	/* The re-base's own state: the one before the pause (its scan came first). */
	{
		struct ws_restore_opts ro = { 0 };
		ro.time_ms = ws_wall_ms();
		assert_int_equal(try_restore(&h, &ro, &got), 0);
		if (wt_mutator_find(&m, got) != 0)
			fail_msg("the re-base restored a state the source did not commit before its scan");
	}
	wt_tail_ok(h.st, &o);
	assert_true(wt_restore_hash(&h.e, TENANT, NULL, NULL) == wt_content_hash(h.e.w, NULL));
	wt_mutator_free(&m);
	check_every_point(&h, 0);
	assert_int_equal(ws_verify(h.e.sink, TENANT, NULL, NULL), 0);
	hist_free(&h);
}
#endif

static char *obj_path(const char *sink_dir, const char *key)
{
	char *p;
	assert_int_not_equal(asprintf(&p, "%s/%s", sink_dir, key), -1);
	return p;
}

struct problems {
	unsigned n;
	bool named;
	const char *key;
};

static void problem(const char *tenant, const char *key, int err, const char *detail, void *arg)
{
	struct problems *p = arg;
	(void)tenant;
	(void)err;
	p->n++;
	if ((key && !strcmp(key, p->key)) || strstr(detail, p->key))
		p->named = true;
}

/* A link to a chain that is gone, not by retention: restore of a point
 * behind it, verify and ls name the missing manifest; the live chain's
 * points still restore. A damaged one (another manifest at the key) too. */
static void test_missing_or_damaged_link(void **state)
{
	struct hist h;
	char base[WS_KEY_MAX], link[WS_KEY_MAX];
	struct ws_restore_opts o = { 0 };
	struct problems pb = { 0, false, link };
	struct gens g = { 0 };
	enum ws_history_end removed = WS_HISTORY_FIRST;
	uint64_t got = 0;
	size_t len = 0;
	uint8_t *saved;
	char *path;
	(void)state;

	hist_init(&h, "hist_link");
	ship(&h, 3);
	ship(&h, 3);
	rebase(&h, WT_CLOSE_LAST_CONNECTION);
	ship(&h, 3);
	live_base(&h, base, link);
	assert_true(link[0] != '\0');
	path = obj_path(h.e.sink_dir, link);
	saved = wt_read_file(path, &len);
	assert_non_null(saved);
	assert_int_equal(unlink(path), 0);

	o.time_ms = h.p[0].acked_ms;
	assert_int_equal(try_restore(&h, &o, &got), WS_EINCOMPLETE);
	if (!strstr(ws_errmsg(), link) || !strstr(ws_errmsg(), "no retention run removed it"))
		fail_msg("restore behind a missing link: %s", ws_errmsg());
	assert_int_not_equal(ws_verify(h.e.sink, TENANT, problem, &pb), 0);
	assert_true(pb.named);
	assert_int_not_equal(ws_list_generations(h.e.sink, TENANT, gen_cb, &g, &removed), 0);
	assert_non_null(strstr(ws_errmsg(), link));
	check_every_point(&h, 2); /* the live chain's */

	/* Damaged: one byte of it changed (its SHA-256 no longer the link's). */
	saved[len / 2] ^= 0x40;
	assert_int_equal(wt_write_file(path, saved, len), 0);
	assert_int_not_equal(try_restore(&h, &o, &got), 0);
	assert_non_null(strstr(ws_errmsg(), link));
	pb.n = 0;
	pb.named = false;
	assert_int_not_equal(ws_verify(h.e.sink, TENANT, problem, &pb), 0);
	assert_true(pb.named);
	saved[len / 2] ^= 0x40;
	assert_int_equal(wt_write_file(path, saved, len), 0);
	check_every_point(&h, 0);
	assert_int_equal(ws_verify(h.e.sink, TENANT, NULL, NULL), 0);
	free(saved);
	free(path);
	hist_free(&h);
}

/*
 * Retention past a re-base: a checkpoint taken in the second chain, then
 * retention protecting it. The first chain is gone; the second starts at
 * the cut; the third is whole. Points from the cut on restore, in both
 * chains; an older point is refused naming retention; ls ends at the cut;
 * verify passes.
 */
static void test_retention_ends_the_walk(void **state)
{
	struct hist h;
	struct ws_checkpoint_info info;
	struct ws_retention_report rep;
	struct gens g = { 0 };
	enum ws_history_end removed = WS_HISTORY_FIRST;
	unsigned cut_point;
	uint64_t got;
	(void)state;

	hist_init(&h, "hist_retention");
	ship(&h, 3);
	ship(&h, 3);
	rebase(&h, WT_WAL_RESTART);
	ship(&h, 3);
	ship(&h, 3);
	cut_point = h.n - 1;
	memset(&info, 0, sizeof(info));
	assert_int_equal(ws_checkpoint_take(h.e.sink, NULL, &info), 0);
	assert_true(info.committed);
	ship(&h, 3);
	rebase(&h, WT_CLOSE_LAST_CONNECTION);
	ship(&h, 3);
	ship(&h, 3);
	memset(&rep, 0, sizeof(rep));
	assert_int_equal(ws_retention_run(h.e.sink, false, NULL, NULL, &rep), 0);
	assert_true(rep.ran && rep.deleted > 0);

	check_every_point(&h, cut_point);
	for (unsigned i = 0; i < cut_point; i++) {
		struct ws_restore_opts o = { 0 };
		o.time_ms = h.p[i].acked_ms;
		assert_int_equal(try_restore(&h, &o, &got), WS_ERANGE_);
		if (!strstr(ws_errmsg(), "retention"))
			fail_msg("point %u, behind what retention kept: %s", i, ws_errmsg());
	}
	assert_int_equal(ws_list_generations(h.e.sink, TENANT, gen_cb, &g, &removed), 0);
	assert_int_equal(removed, WS_HISTORY_REMOVED);
	assert_int_equal(g.chains, 2);
	assert_string_equal(g.g[g.n - 1].start, "checkpoint");
	assert_int_equal(g.g[g.n - 1].first_frame, h.p[cut_point].frame);
	assert_int_equal(ws_verify(h.e.sink, TENANT, NULL, NULL), 0);
	hist_free(&h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_point_across_rebases),
#ifdef WS_FAULTS
		cmocka_unit_test(test_rebase_paused_writer_goes_on),
#endif
		cmocka_unit_test(test_missing_or_damaged_link),
		cmocka_unit_test(test_retention_ends_the_walk),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
