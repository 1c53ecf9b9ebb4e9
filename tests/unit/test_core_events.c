/*
 * The event channel (docs/EVENTS.md): Hydrated, Changed and Progressed
 * from a real SQLite writer through the engine's shards, rebuilt by the
 * host into pages and checked against every state the writer committed;
 * each Faulted cause; combined subscriptions over two shards; a stalled
 * channel shed while the shard and the other channels go on; bad input.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "coreutil.h"
#include "evreplica.h"
#include "events.h"
#include "ws_clock.h"
#include "ws_fault.h"
#include "ws_log.h"
#include "ws_hash.h"
#include "ws_wal.h"

/*
 * Read events of one query on one tenant until the replica is the
 * writer's last recorded commit; each applied image must be the next
 * state the writer committed, from the one the baseline is at (*at, -1:
 * find it from the Hydrated, which must be one of them).
 */
static void follow_q(struct ws_events *ev, struct replica *r, const struct record *rec, int *at, uint64_t *last_tx,
		     uint64_t only_q)
{
	unsigned got = 0;
	/* Until the replica is the writer's last commit. */
	while (*at < 0 || (unsigned)*at + 1 < rec->n) {
		struct ws_event e;
		ev_next_ok(ev, &e);
		if (e.kind == WS_EVENT_FAULTED)
			fail_msg("faulted: %s (%s)", e.u.faulted.reason, ws_fault_cause_name(e.u.faulted.cause));
		/* only_q != 0: every Update is that query's (no other query's event follows). */
		if (only_q && e.kind == WS_EVENT_UPDATE && e.u.update.query_id != only_q)
			fail_msg("an update of query %llu, not %llu", (unsigned long long)e.u.update.query_id,
				 (unsigned long long)only_q);
		if (e.kind == WS_EVENT_UPDATE && e.u.update.kind == WS_UPDATE_HYDRATED) {
			replica_hydrate(r, &e);
			*at = find_state(rec, image_hash(r->img, r->pages * r->page_size));
			/* The baseline is a state the writer committed. */
			assert_true(*at >= 0);
			*last_tx = e.u.update.u.hydrated.tx_id;
			continue;
		}
		if (e.kind == WS_EVENT_UPDATE) {
			replica_buffer(r, &e);
			continue;
		}
		/* Progressed: the next committed state, exactly (a marker: nothing new). */
		uint64_t h = 0;
		assert_true(e.u.progressed.tx_id >= *last_tx);
		*last_tx = e.u.progressed.tx_id;
		if (!replica_progress(r, e.u.progressed.tx_id, &h))
			continue;
		(*at)++;
		assert_true((unsigned)*at < rec->n);
		if (h != rec->hash[*at])
			fail_msg("at Progressed %u (tx %llx) the replica is not the writer's commit %d (found at %d)", got,
				 (unsigned long long)e.u.progressed.tx_id, *at, find_state(rec, h));
		got++;
	}
}

static void follow(struct ws_events *ev, struct replica *r, const struct record *rec, int *at, uint64_t *last_tx)
{
	follow_q(ev, r, rec, at, last_tx, 0);
}

/* ---- tests ----------------------------------------------------------------- */

/*
 * The whole life of a query against a real writer: Hydrated at a committed
 * state, then every commit's Changed slices (several per transaction: 8
 * frames per batch) before its Progressed, applied by the host at each
 * Progressed to equal exactly the writer's next committed state, across
 * WAL restarts (walship's own WAL checkpoint every 64 KiB) where tx_id
 * starts a new chain and still grows.
 */
static void test_exact_replica(void **state)
{
	struct wt_env env;
	struct record rec = { 0 };
	struct replica r = { 0 };
	uint64_t last_tx = 0;
	int at = -1;
	(void)state;
	wt_env_init(&env, "events-exact", 0);
	for (int i = 0; i < 5; i++)
		wt_write_txn(env.w, 3, 500);
	record_state(&rec, env.w);
	struct ws_engine *e = ev_engine_up(env.sink_url, 1, 8, 64 << 10, 0);
	ev_add_tenant(e, "app", env.db, 0);
	struct ws_events *ev = ev_channel(e, 10000);
	(void)ev_subscribe1(ev, "app");
	for (int round = 0; round < 6; round++) {
		for (int i = 0; i < 10; i++) {
			/* Small ones, and some of 40 rows of 600 bytes: many pages, several slices. */
			wt_write_txn(env.w, i % 3 == 0 ? 40 : 1 + i, 600);
			record_state(&rec, env.w);
		}
		follow(ev, &r, &rec, &at, &last_tx);
	}
	/* The last state is the writer's last commit; tx_ids crossed WAL restarts. */
	assert_int_equal(at, (int)rec.n - 1);
	assert_true(WS_TX_CHAIN(last_tx) > 1);
	assert_true(r.max_slices_in_txn > 1);
	assert_int_equal(ws_engine_flush(e), 0);
	ws_events_close(ev);
	ws_engine_destroy(e);
	replica_free(&r);
	wt_env_free(&env);
}

struct marker_scan {
	const uint8_t *marker;
	size_t len;
};

static bool page_has(const uint8_t *p, size_t n, const uint8_t *m, size_t mlen)
{
	for (size_t i = 0; i + mlen <= n; i++)
		if (p[i] == m[0] && memcmp(p + i, m, mlen) == 0)
			return true;
	return false;
}

/*
 * A writer whose big transaction spills pages into the WAL (cache_size 5)
 * and then rolls back: none of its pages reaches the host, no Progressed
 * names it, and every state the host applies is one the writer committed.
 */
static void test_rollback_never_released(void **state)
{
	struct wt_env env;
	struct record rec = { 0 };
	struct replica r = { 0 };
	int at = -1;
	char blob[2049];
	(void)state;
	wt_env_init(&env, "events-rollback", 0);
	wt_write_txn(env.w, 5, 300);
	record_state(&rec, env.w);
	struct ws_engine *e = ev_engine_up(env.sink_url, 1, 0, UINT64_MAX, 0);
	ev_add_tenant(e, "app", env.db, 0);
	struct ws_events *ev = ev_channel(e, 10000);
	(void)ev_subscribe1(ev, "app");
	struct ws_event h;
	ev_next_ok(ev, &h);
	assert_int_equal(h.u.update.kind, WS_UPDATE_HYDRATED);
	replica_hydrate(&r, &h);
	at = find_state(&rec, image_hash(r.img, r.pages * r.page_size));
	assert_true(at >= 0);

	memset(blob, 'R', sizeof(blob) - 1);
	blob[sizeof(blob) - 1] = '\0';
	uint64_t wal_before = 0, wal_spilled = 0;
	struct stat sb;
	if (stat(env.wal, &sb) == 0)
		wal_before = (uint64_t)sb.st_size;
	wt_exec(env.w, "PRAGMA cache_size=5");
	wt_exec(env.w, "BEGIN");
	for (int i = 0; i < 200; i++) {
		char sql[2200];
		snprintf(sql, sizeof(sql), "INSERT INTO t(v) VALUES ('ROLLEDBACK%s')", blob);
		wt_exec(env.w, sql);
	}
	assert_int_equal(stat(env.wal, &sb), 0);
	wal_spilled = (uint64_t)sb.st_size;
	wt_exec(env.w, "ROLLBACK");
	wt_exec(env.w, "PRAGMA cache_size=-2000");
	/* The transaction really spilled: its pages were in the WAL file. */
	assert_true(wal_spilled > wal_before + 100 * 4096);
	for (int i = 0; i < 8; i++) {
		wt_write_txn(env.w, 2, 200);
		record_state(&rec, env.w);
	}
	unsigned got = 0;
	while (got < 8) {
		struct ws_event x;
		ev_next_ok(ev, &x);
		assert_int_not_equal(x.kind, WS_EVENT_FAULTED);
		if (x.kind == WS_EVENT_UPDATE) {
			assert_int_equal(x.u.update.kind, WS_UPDATE_CHANGED);
			for (uint32_t i = 0; i < x.u.update.u.changed.count; i++)
				assert_false(page_has(x.u.update.u.changed.pages + (size_t)i * x.u.update.page_size,
						      x.u.update.page_size, (const uint8_t *)"ROLLEDBACKRRRR", 14));
			replica_buffer(&r, &x);
			continue;
		}
		uint64_t hh = replica_apply(&r, x.u.progressed.tx_id);
		at++;
		assert_int_equal(find_state(&rec, hh), at);
		got++;
	}
	ws_events_close(ev);
	ws_engine_destroy(e);
	replica_free(&r);
	wt_env_free(&env);
}

/*
 * Rollback after speculative delivery, and a re-base the events cannot
 * cross, at the tap itself: the shard reads a WAL only up to the
 * wal-index's last commit, so SQLite never lets it read frames that a
 * rollback then replaces, and no writer produces either case on demand.
 * The frames here are built by hand (their checks are the tail's, done
 * before); the ring's records are read raw.
 */
static void frame_at(uint8_t *buf, uint32_t ps, uint32_t i, uint32_t pgno, uint32_t db_size, uint32_t ck, uint8_t fill)
{
	uint8_t *f = buf + (size_t)i * (ps + WS_WAL_FRAME_HDR_SIZE);
	memset(f, 0, WS_WAL_FRAME_HDR_SIZE);
	f[0] = (uint8_t)(pgno >> 24), f[1] = (uint8_t)(pgno >> 16), f[2] = (uint8_t)(pgno >> 8), f[3] = (uint8_t)pgno;
	f[4] = (uint8_t)(db_size >> 24), f[5] = (uint8_t)(db_size >> 16), f[6] = (uint8_t)(db_size >> 8), f[7] = (uint8_t)db_size;
	f[16] = (uint8_t)(ck >> 24), f[17] = (uint8_t)(ck >> 16), f[18] = (uint8_t)(ck >> 8), f[19] = (uint8_t)ck;
	memset(f + WS_WAL_FRAME_HDR_SIZE, fill, ps);
}

static void slot_desc(struct ws_pipe_desc *d, uint32_t ps, uint32_t salt, uint64_t first, uint32_t n, uint64_t last_commit)
{
	memset(d, 0, sizeof(*d));
	d->checked = true;
	d->batch.gen.page_size = ps;
	d->batch.gen.salt1 = salt;
	d->batch.gen.salt2 = salt;
	d->chk.filled = true;
	d->chk.run.first_frame = first;
	d->chk.run.valid = n;
	d->chk.run.last_commit = last_commit;
}

/* Kinds of the records written since *pos (advanced); causes of REC_FAULT into cause. */
static unsigned ring_kinds(struct ws_ev_hub *h, uint64_t *pos, uint16_t *kinds, uint16_t *cause, unsigned max)
{
	struct ws_ev_ring *r = &h->rings[0];
	unsigned n = 0;
	while (*pos < r->head && n < max) {
		struct ev_rec rh;
		memcpy(&rh, r->mem + (*pos & (r->cap - 1)), sizeof(rh));
		assert_int_equal(rh.pos, *pos);
		*pos += rh.len;
		if (rh.kind == REC_PAD)
			continue;
		kinds[n] = rh.kind;
		*cause = rh.cause;
		n++;
	}
	return n;
}

static void test_tap_rollback_and_gap(void **state)
{
	struct ws_ev_hub *h = NULL;
	const uint32_t ps = 512;
	uint8_t frames[8 * (512 + 24)];
	struct ws_pipe_desc *d = calloc(1, sizeof(*d));
	uint32_t chain = 0, chain_salt[2] = { 0, 0 };
	uint16_t kinds[16], cause = 0;
	uint64_t pos = 0;
	(void)state;
	assert_non_null(d);
	assert_int_equal(ws_ev_hub_create(&h, 1, 0), 0);
	struct ws_ev_tap tap = { .hub = h, .shard = 0, .tenant_id = 7, .chain = &chain, .chain_salt = chain_salt,
				 .subs = 1, .salt1 = 9, .salt2 = 9, .commit = 0, .spec_next = 1 };
	chain = 1;
	/* Frames 1..3 commit at 3 (Changed, Progressed); 4..5 read without a commit (speculative). */
	frame_at(frames, ps, 0, 1, 0, 101, 'a');
	frame_at(frames, ps, 1, 2, 0, 102, 'b');
	frame_at(frames, ps, 2, 3, 3, 103, 'c');
	frame_at(frames, ps, 3, 4, 0, 104, 'd');
	frame_at(frames, ps, 4, 5, 0, 105, 'e');
	slot_desc(d, ps, 9, 1, 5, 3);
	ws_ev_tap_slot(&tap, d, frames);
	assert_int_equal(ring_kinds(h, &pos, kinds, &cause, 16), 3);
	assert_int_equal(kinds[0], REC_CHANGED);
	assert_int_equal(kinds[1], REC_PROGRESSED);
	assert_int_equal(kinds[2], REC_CHANGED);
	assert_int_equal(tap.commit, 3);
	assert_int_equal(tap.spec_next, 6);
	/* The same frames read again (a tail that ended early): nothing new. */
	slot_desc(d, ps, 9, 4, 2, 0);
	ws_ev_tap_slot(&tap, d, frames + 3 * (ps + 24));
	assert_int_equal(ring_kinds(h, &pos, kinds, &cause, 16), 0);
	/* The writer rolled back: other frames at 4..5, committed at 5. */
	frame_at(frames, ps, 3, 6, 0, 204, 'x');
	frame_at(frames, ps, 4, 7, 7, 205, 'y');
	slot_desc(d, ps, 9, 4, 2, 5);
	ws_ev_tap_slot(&tap, d, frames + 3 * (ps + 24));
	assert_int_equal(ring_kinds(h, &pos, kinds, &cause, 16), 1);
	assert_int_equal(kinds[0], REC_FAULT);
	assert_int_equal(cause, WS_CAUSE_ROLLBACK);
	assert_true(tap.faulted);
	/* No event of it follows. */
	ws_ev_tap_slot(&tap, d, frames + 3 * (ps + 24));
	assert_int_equal(ring_kinds(h, &pos, kinds, &cause, 16), 0);
	/* A single-thread channel's tap (events_single.c) ends the same way
	 * but writes no REC_FAULT: its channel hydrates again instead. */
	struct ws_ev_tap ts = { .hub = h, .tenant_id = 11, .chain = &chain, .chain_salt = chain_salt, .subs = 1,
				.salt1 = 9, .salt2 = 9, .commit = 3, .spec_next = 6, .spec_ck = { 105, 0 }, .single = true };
	ws_ev_tap_slot(&ts, d, frames + 3 * (ps + 24));
	assert_true(ts.faulted);
	assert_int_equal(ring_kinds(h, &pos, kinds, &cause, 16), 0);

	/* Speculative frames, then the WAL restarts (new salts): rollback. */
	struct ws_ev_tap t2 = { .hub = h, .tenant_id = 8, .chain = &chain, .chain_salt = chain_salt, .subs = 1,
				.salt1 = 9, .salt2 = 9, .commit = 3, .spec_next = 6, .spec_ck = { 105, 0 } };
	slot_desc(d, ps, 10, 1, 1, 1);
	frame_at(frames, ps, 0, 1, 1, 1, 'z');
	ws_ev_tap_begin(&t2, WS_MANIFEST_NEXT_GEN, true, 9, 9, 3);
	ws_ev_tap_slot(&t2, d, frames);
	assert_int_equal(ring_kinds(h, &pos, kinds, &cause, 16), 1);
	assert_int_equal(cause, WS_CAUSE_ROLLBACK);

	/* A new generation the tail proves follows (NEXT_GEN from the tap's
	 * commit): the chain goes on, tx_id grows. */
	struct ws_ev_tap t3 = { .hub = h, .tenant_id = 9, .chain = &chain, .chain_salt = chain_salt, .subs = 1,
				.salt1 = 9, .salt2 = 9, .commit = 3, .spec_next = 4 };
	uint32_t c0 = chain;
	ws_ev_tap_begin(&t3, WS_MANIFEST_NEXT_GEN, true, 9, 9, 3);
	ws_ev_tap_slot(&t3, d, frames);
	assert_int_equal(ring_kinds(h, &pos, kinds, &cause, 16), 2);
	assert_int_equal(kinds[1], REC_PROGRESSED);
	assert_int_equal(chain, c0 + 1);
	/* A re-base onto another generation: nothing proves the commits between were read. */
	struct ws_ev_tap t4 = { .hub = h, .tenant_id = 10, .chain = &chain, .chain_salt = chain_salt, .subs = 1,
				.salt1 = 9, .salt2 = 9, .commit = 3, .spec_next = 4 };
	ws_ev_tap_begin(&t4, WS_MANIFEST_REBASE, true, 9, 9, 3);
	ws_ev_tap_slot(&t4, d, frames);
	assert_int_equal(ring_kinds(h, &pos, kinds, &cause, 16), 1);
	assert_int_equal(cause, WS_CAUSE_DERIVE);
	ws_ev_hub_destroy(h);
	free(d);
}

/*
 * The tap checks that the frames it is given continue the chain it
 * emitted: a run that starts at its next frame must be seeded by the
 * checksum of the frame it emitted last, and a frame read again at the
 * last one it emitted must be that frame. Otherwise it faults (DERIVE
 * past a commit, ROLLBACK over speculative Changed) and emits no page of
 * the run. The runs here are fabricated, each a valid WAL chain in itself
 * (salts, page numbers, SQLite's checksums, checked by ws_wal_run_check
 * as the tail does) but not the one the tap emitted: the real WAL cannot
 * produce this on demand (a slot refilled with other frames, a pipe bug
 * now fixed, did). The ring's records are read raw: a REC_FAULT is what
 * the host turns into Faulted for each query of the tenant.
 */
struct chain_wal {
	uint32_t ps, salt;
	uint8_t buf[7 * (512 + WS_WAL_FRAME_HDR_SIZE)];
	uint32_t ck[8][2]; /* ck[0]: the WAL header's (frame 1's seed); ck[i]: frame i's stored checksum */
};

/* Frame i (1-based) of the chain, seeded by the checksum in ck[i - 1]. */
static void chain_frame(struct chain_wal *w, uint32_t i, uint32_t pgno, uint32_t db_size, uint8_t fill)
{
	uint8_t *f = w->buf + (size_t)(i - 1) * ws_wal_frame_size(w->ps);
	uint32_t s[2] = { w->ck[i - 1][0], w->ck[i - 1][1] };
	ws_put_be32(f, pgno);
	ws_put_be32(f + 4, db_size);
	ws_put_be32(f + 8, w->salt);
	ws_put_be32(f + 12, w->salt);
	memset(f + WS_WAL_FRAME_HDR_SIZE, fill, w->ps);
	ws_wal_checksum(false, f, 8, s);
	ws_wal_checksum(false, f + WS_WAL_FRAME_HDR_SIZE, w->ps, s);
	ws_put_be32(f + 16, s[0]);
	ws_put_be32(f + 20, s[1]);
	w->ck[i][0] = s[0];
	w->ck[i][1] = s[1];
}

/* Frames 1..3 (pages 1..3), a commit at 4 (page 4); 5..6 (pages 5..6) and a commit at 7; letters from base. */
static void chain_wal_init(struct chain_wal *w, char base)
{
	struct ws_wal_hdr hdr = { .magic = WS_WAL_MAGIC_LE, .version = WS_WAL_VERSION, .page_size = 512,
				  .checkpoint_seq = 1, .salt1 = 9, .salt2 = 9 };
	uint8_t hb[WS_WAL_HDR_SIZE];
	ws_wal_hdr_encode(&hdr, hb);
	w->ps = 512;
	w->salt = 9;
	w->ck[0][0] = hdr.cksum1;
	w->ck[0][1] = hdr.cksum2;
	for (uint32_t i = 1; i <= 7; i++)
		chain_frame(w, i, i, i == 4 || i == 7 ? i : 0u, (uint8_t)(i + (uint8_t)base));
}

/* Feed frames first..first+n-1 of w to the tap as one run seeded by seed (checked as the tail checks it). */
static void tap_run(struct ws_ev_tap *tap, const struct chain_wal *w, uint64_t first, uint32_t n, const uint32_t seed[2])
{
	const struct ws_fmt_gen gen = { .wal_magic = WS_WAL_MAGIC_LE, .checkpoint_seq = 1, .salt1 = w->salt,
					.salt2 = w->salt, .page_size = w->ps };
	const uint8_t *frames = w->buf + (size_t)(first - 1) * ws_wal_frame_size(w->ps);
	struct ws_wal_run run = { .first_frame = first, .seed = { seed[0], seed[1] } };
	/* A valid chain in itself: the tail would hand it on. */
	assert_int_equal(ws_wal_run_check(&run, false, w->ps, w->salt, w->salt, frames, n, NULL), n);
	ws_ev_tap_frames(tap, &gen, &run, frames);
}

/* The records written since *pos (advanced); a REC_FAULT's reason into why. */
static unsigned ring_recs(struct ws_ev_hub *h, uint64_t *pos, struct ev_rec *out, unsigned max, char *why, size_t whylen)
{
	struct ws_ev_ring *r = &h->rings[0];
	unsigned n = 0;
	while (*pos < r->head && n < max) {
		struct ev_rec rh;
		const uint8_t *p = r->mem + (*pos & (r->cap - 1));
		memcpy(&rh, p, sizeof(rh));
		assert_int_equal(rh.pos, *pos);
		*pos += rh.len;
		if (rh.kind == REC_PAD)
			continue;
		if (rh.kind == REC_FAULT)
			snprintf(why, whylen, "%s", (const char *)(p + sizeof(rh)));
		out[n++] = rh;
	}
	return n;
}

/* A tap of its own tenant that emitted frames 1..4 of w (committed at 4): Changed, Progressed. */
static void tap_at_commit4(struct ws_ev_tap *tap, struct ws_ev_hub *h, uint64_t tenant_id, uint32_t *chain,
			   uint32_t *chain_salt, const struct chain_wal *w, uint64_t *pos)
{
	struct ev_rec recs[8];
	char why[256] = "";
	*tap = (struct ws_ev_tap){ .hub = h, .tenant_id = tenant_id, .chain = chain, .chain_salt = chain_salt,
				   .subs = 1, .salt1 = 9, .salt2 = 9, .commit = 0, .spec_next = 1 };
	tap_run(tap, w, 1, 4, w->ck[0]);
	assert_int_equal(ring_recs(h, pos, recs, 8, why, sizeof(why)), 2);
	assert_int_equal(recs[0].kind, REC_CHANGED);
	assert_int_equal(recs[0].count, 4);
	assert_int_equal(recs[1].kind, REC_PROGRESSED);
	assert_int_equal(tap->commit, 4);
	assert_int_equal(tap->spec_next, 5);
}

/* The run faulted the tap with cause, and nothing else came of it. */
static void expect_chain_fault(struct ws_ev_hub *h, uint64_t *pos, const struct ws_ev_tap *tap, uint16_t cause,
			       const char *says)
{
	struct ev_rec recs[8];
	char why[256] = "";
	unsigned n = ring_recs(h, pos, recs, 8, why, sizeof(why));
	for (unsigned i = 0; i < n; i++)
		if (recs[i].kind != REC_FAULT)
			fail_msg("record %u of kind %u (a page or commit of frames not the tap's chain), not a fault", i,
				 recs[i].kind);
	assert_int_equal(n, 1);
	assert_int_equal(recs[0].cause, cause);
	assert_int_equal(recs[0].tenant_id, tap->tenant_id);
	if (!strstr(why, says))
		fail_msg("fault reason \"%s\" does not say \"%s\"", why, says);
	assert_true(tap->faulted);
}

static void test_tap_chain_continues(void **state)
{
	struct ws_ev_hub *h = NULL;
	struct chain_wal a, b;
	struct ws_ev_tap tap;
	struct ev_rec recs[8];
	char why[256] = "";
	uint32_t chain = 1, chain_salt[2] = { 9, 9 };
	uint64_t pos = 0;
	(void)state;
	assert_int_equal(ws_ev_hub_create(&h, 1, 0), 0);
	chain_wal_init(&a, 'a');

	/* The good case: a run at 5 seeded by frame 4's checksum goes on (Changed of 5..7, Progressed at 7). */
	tap_at_commit4(&tap, h, 20, &chain, chain_salt, &a, &pos);
	tap_run(&tap, &a, 5, 3, a.ck[4]);
	assert_int_equal(ring_recs(h, &pos, recs, 8, why, sizeof(why)), 2);
	assert_int_equal(recs[0].kind, REC_CHANGED);
	assert_int_equal((uint32_t)recs[0].tx, 5);
	assert_int_equal(recs[0].count, 3);
	assert_int_equal(recs[1].kind, REC_PROGRESSED);
	assert_int_equal(tap.commit, 7);
	assert_false(tap.faulted);
	/* Frames it emitted read again, the same: nothing new, no fault. */
	tap_run(&tap, &a, 1, 7, a.ck[0]);
	assert_int_equal(ring_recs(h, &pos, recs, 8, why, sizeof(why)), 0);
	assert_false(tap.faulted);

	/* 1. Committed at 4, then a run at 5 chained from another frame 4
	 * (b's: other bytes): DERIVE, no page of it. */
	chain_wal_init(&b, 'A');
	assert_true(b.ck[4][0] != a.ck[4][0] || b.ck[4][1] != a.ck[4][1]);
	tap_at_commit4(&tap, h, 21, &chain, chain_salt, &a, &pos);
	tap_run(&tap, &b, 5, 3, b.ck[4]);
	expect_chain_fault(h, &pos, &tap, WS_CAUSE_DERIVE, "frame 5 does not follow committed frame 4");
	assert_int_equal(tap.commit, 4);
	assert_int_equal(tap.spec_next, 5);

	/* 2. Committed at 4, 5..6 emitted before their commit, then a run at 7
	 * chained from another frame 6 (the writer rolled back and wrote b's
	 * 5..6): ROLLBACK, no page of it. */
	tap_at_commit4(&tap, h, 22, &chain, chain_salt, &a, &pos);
	tap_run(&tap, &a, 5, 2, a.ck[4]);
	assert_int_equal(ring_recs(h, &pos, recs, 8, why, sizeof(why)), 1);
	assert_int_equal(recs[0].kind, REC_CHANGED);
	assert_int_equal(tap.spec_next, 7);
	memcpy(b.ck[4], a.ck[4], sizeof(b.ck[4]));
	chain_frame(&b, 5, 5, 0, 'X');
	chain_frame(&b, 6, 6, 0, 'Y');
	chain_frame(&b, 7, 7, 7, 'Z');
	tap_run(&tap, &b, 7, 1, b.ck[6]);
	expect_chain_fault(h, &pos, &tap, WS_CAUSE_ROLLBACK, "frames 5..6 delivered as Changed were replaced");
	assert_int_equal(tap.commit, 4);

	/* 3. Committed at 4, then 1..4 read again where frame 4 is another
	 * (1..3 the same, frame 4's bytes and so its checksum not): DERIVE. */
	tap_at_commit4(&tap, h, 23, &chain, chain_salt, &a, &pos);
	b = a;
	chain_frame(&b, 4, 4, 4, 'W');
	assert_true(b.ck[4][0] != a.ck[4][0] || b.ck[4][1] != a.ck[4][1]);
	tap_run(&tap, &b, 1, 4, b.ck[0]);
	expect_chain_fault(h, &pos, &tap, WS_CAUSE_DERIVE, "frame 4, read again, is not the frame emitted before");
	ws_ev_hub_destroy(h);
}

/*
 * A PAD record (the end of the ring a record did not fit in) is no event:
 * a channel whose cursor stands on one is aged by the record after it,
 * never by the bytes under the PAD's short header (what an earlier lap
 * left there). Driven on a hub directly: a PAD at the channel's cursor on
 * demand; the earlier lap's bytes are written by hand, and so is the
 * later check's old emission time (both say so below).
 */
static void pad_slot(struct ws_ev_hub *h, uint64_t cursor)
{
	struct ws_ev_slot *s = &h->slots[0];
	s->deadline_ns = 500u * 1000000u;
	s->lag_bytes = h->rings[0].cap;
	s->cursor[0] = cursor;
	s->interest[0] = 1;
	s->live = 1;
}

static void test_pad_not_aged(void **state)
{
	struct ws_ev_hub *h = NULL;
	uint32_t chain = 1, chain_salt[2] = { 0, 0 };
	uint64_t pad_at = 0;
	(void)state;
	assert_int_equal(ws_ev_hub_create(&h, 1, WS_EV_RING_MIN), 0);
	struct ws_ev_ring *r = &h->rings[0];
	struct ws_ev_tap tap = { .hub = h, .tenant_id = 7, .chain = &chain, .chain_salt = chain_salt, .subs = 1 };
	/* Records of 192 bytes until one wraps: a PAD of 64 bytes at the ring's end (2^20 = 5461 * 192 + 64).
	 * Each is a Faulted record, which warns: not 5,000 times here. */
	ws_log_set_level(WS_LOG_ERROR);
	while (r->whead < r->cap) {
		uint64_t before = r->whead;
		tap.faulted = false;
		ws_ev_tap_fault(&tap, WS_CAUSE_DERIVE, "%0127d", 0);
		if (r->whead - before > 192)
			pad_at = before;
	}
	ws_log_set_level(WS_LOG_WARN);
	assert_true(pad_at > 0 && r->cap - (pad_at & (r->cap - 1)) >= 64);
	/* Under the PAD's 16-byte header: an earlier lap's record, emitted an hour ago (written by hand). */
	int64_t old = (int64_t)ws_mono_ns() - (int64_t)3600 * 1000000000;
	memcpy(r->mem + (pad_at & (r->cap - 1)) + offsetof(struct ev_rec, mono_ns), &old, sizeof(old));
	/* The channel read everything before the PAD; the record after it is fresh: no shed. */
	pad_slot(h, pad_at);
	(void)ws_ev_flush(h, 0);
	assert_int_equal(h->slots[0].shed_seq[0], 0);
	/* The record after the PAD is what ages it: left unread an hour (its time written by hand), shed. */
	memcpy(r->mem + offsetof(struct ev_rec, mono_ns), &old, sizeof(old));
	(void)ws_ev_flush(h, 0);
	assert_int_equal(h->slots[0].shed_seq[0], 1);
	assert_int_equal(h->slots[0].shed_why[0], 1);
	h->slots[0].live = 0;
	ws_ev_hub_destroy(h);
}

/* One tenant "app" with a writer, an engine of one shard over it, a channel. */
struct fx {
	struct wt_env env;
	struct ws_engine *e;
	struct ws_events *ev;
};

static void fx_up(struct fx *f, const char *tag, uint32_t deadline_ms)
{
	wt_env_init(&f->env, tag, 0);
	wt_write_txn(f->env.w, 2, 100);
	f->e = ev_engine_up(f->env.sink_url, 1, 0, UINT64_MAX, 0);
	ev_add_tenant(f->e, "app", f->env.db, 0);
	f->ev = ev_channel(f->e, deadline_ms);
}

static void fx_down(struct fx *f)
{
	ws_events_close(f->ev);
	ws_engine_destroy(f->e);
	wt_env_free(&f->env);
}

static struct ws_event wait_fault(struct ws_events *ev)
{
	for (;;) {
		struct ws_event x;
		ev_next_ok(ev, &x);
		if (x.kind == WS_EVENT_FAULTED)
			return x;
	}
}

/*
 * A WAL whose header no longer decodes (overwritten in place): derive. The
 * database lives in a directory whose name (160 bytes) alone would fill
 * most of a reason: the reason still names what could not be decoded.
 */
static void test_fault_derive(void **state)
{
	struct fx f0;
	char tag[192];
	(void)state;
	snprintf(tag, sizeof(tag), "events-derive-%0146d", 0);
	fx_up(&f0, tag, 10000);
	struct ws_engine *e = f0.e;
	struct ws_events *ev = f0.ev;
	struct wt_env env = f0.env;
	uint64_t q = ev_subscribe1(ev, "app");
	int fd = open(env.wal, O_WRONLY);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, "not a WAL header, nor anything!!", 32, 0), 32);
	close(fd);
	wt_write_txn(env.w, 1, 100); /* wakes the shard; SQLite writes past the header */
	struct ws_event f = wait_fault(ev);
	assert_int_equal(f.u.faulted.query_id, q);
	assert_int_equal(f.u.faulted.cause, WS_CAUSE_DERIVE);
	/* The reason names the tenant, the file and what could not be decoded:
	 * "not " is the magic the WAL header now starts with. */
	print_message("reason: %s\n", f.u.faulted.reason);
	assert_non_null(strstr(f.u.faulted.reason, "tenant app"));
	assert_non_null(strstr(f.u.faulted.reason, "src.db-wal"));
	assert_non_null(strstr(f.u.faulted.reason, "bad magic 0x6e6f7420"));
	/* Terminal: nothing more of it, and it can be unsubscribed once. */
	struct ws_event x;
	assert_int_equal(ws_events_next(ev, &x, 300), -EAGAIN);
	assert_int_equal(ws_events_unsubscribe(ev, q), 0);
	assert_int_equal(ws_events_unsubscribe(ev, q), WS_ENOTFOUND);
	(void)env;
	(void)e;
	(void)ev;
	fx_down(&f0);
}

#ifdef WS_FAULTS
/* The same cause through the fault site in the tap (injected: the decoding
 * the tail already did cannot be made to fail on demand otherwise). */
static void test_fault_derive_injected(void **state)
{
	struct fx f0;
	(void)state;
	fx_up(&f0, "events-derive-inj", 10000);
	struct ws_engine *e = f0.e;
	struct ws_events *ev = f0.ev;
	struct wt_env env = f0.env;
	uint64_t q = ev_subscribe1(ev, "app");
	assert_int_equal(ws_fault_arm("events.derive", 1, 0), 0);
	wt_write_txn(env.w, 1, 100);
	struct ws_event f = wait_fault(ev);
	ws_fault_disarm();
	assert_int_equal(f.u.faulted.query_id, q);
	assert_int_equal(f.u.faulted.cause, WS_CAUSE_DERIVE);
	/* A new registration gets a fresh baseline and goes on. */
	uint64_t q2 = ev_subscribe1(ev, "app");
	struct ws_event x;
	ev_next_ok(ev, &x);
	assert_int_equal(x.u.update.kind, WS_UPDATE_HYDRATED);
	assert_int_equal(x.u.update.query_id, q2);
	(void)env;
	(void)e;
	(void)ev;
	fx_down(&f0);
}
#endif

/* The engine stops: its shard threads end, and every query on them is told. */
static void test_fault_worker_lost(void **state)
{
	struct fx f0;
	(void)state;
	fx_up(&f0, "events-lost", 10000);
	struct ws_engine *e = f0.e;
	struct ws_events *ev = f0.ev;
	struct wt_env env = f0.env;
	uint64_t q = ev_subscribe1(ev, "app");
	assert_int_equal(ws_engine_stop(e), 0);
	struct ws_event f = wait_fault(ev);
	assert_int_equal(f.u.faulted.query_id, q);
	assert_int_equal(f.u.faulted.cause, WS_CAUSE_WORKER_LOST);
	const char *t = "app";
	uint64_t q2;
	assert_int_equal(ws_events_subscribe(ev, &t, 1, &q2), -ESHUTDOWN);
	(void)env;
	(void)e;
	(void)ev;
	fx_down(&f0);
}

/*
 * The tx_id order a host sees of each tenant of a combined query
 * (docs/EVENTS.md "Ordering", "Markers"): a Changed after the tenant's
 * last tx_id; a Progressed at a new tx_id only after a Changed of it; at
 * the last tx_id again (a marker) only with no Changed since; never one
 * before the last.
 */
struct tx_order {
	const char *name;
	uint64_t last;       /* the last Hydrated or Progressed tx_id */
	unsigned changed;    /* Changed slices since */
	unsigned progressed; /* Progressed at a new tx_id */
	unsigned markers;    /* Progressed at the last tx_id again */
};

static struct tx_order *order_of(struct tx_order *o, size_t n, const char *name)
{
	for (size_t i = 0; name && i < n; i++)
		if (strcmp(o[i].name, name) == 0)
			return &o[i];
	fail_msg("an event of tenant %s, which no query follows", name ? name : "(none)");
	return NULL;
}

/* Checks x against the order; true when it is a marker. */
static bool order_note(struct tx_order *o, size_t n, const struct ws_event *x)
{
	if (x->kind == WS_EVENT_FAULTED)
		fail_msg("faulted: %s (%s)", x->u.faulted.reason, ws_fault_cause_name(x->u.faulted.cause));
	struct tx_order *t = order_of(o, n, x->tenant);
	if (x->kind == WS_EVENT_UPDATE) {
		if (x->u.update.kind == WS_UPDATE_HYDRATED) {
			t->last = x->u.update.u.hydrated.tx_id;
			t->changed = 0;
		} else {
			assert_true(x->u.update.u.changed.position > t->last);
			t->changed++;
		}
		return false;
	}
	const uint64_t tx = x->u.progressed.tx_id;
	if (tx < t->last)
		fail_msg("tenant %s: Progressed %llx after %llx", t->name, (unsigned long long)tx,
			 (unsigned long long)t->last);
	if (tx == t->last) {
		if (t->changed)
			fail_msg("tenant %s: a marker at %llx after %u Changed of a later transaction", t->name,
				 (unsigned long long)tx, t->changed);
		t->markers++;
		return true;
	}
	if (!t->changed)
		fail_msg("tenant %s: Progressed %llx with no Changed before it", t->name, (unsigned long long)tx);
	t->last = tx;
	t->changed = 0;
	t->progressed++;
	return false;
}

/*
 * Two tenants, a on shard 0 and b on shard 1, one transaction committed in
 * each, and one query {a, b} on a channel (marker_ms 0: the default), its
 * cv and the order of its events, the two Hydrated read. recb (or NULL):
 * b's state then; rb (or NULL): b's Hydrated.
 */
struct comb_fx {
	struct wt_env a, b;
	struct ws_engine *e;
	struct ws_events *ev;
	uint64_t q;
	struct ws_events_cv cv;
	struct tx_order o[2];
};

static void comb_up(struct comb_fx *f, const char *tag, uint32_t marker_ms, struct record *recb, struct replica *rb)
{
	char t[64];
	int err = 0;
	const char *names[] = { "a", "b" };
	memset(f, 0, sizeof(*f));
	snprintf(t, sizeof(t), "%s-a", tag);
	wt_env_init(&f->a, t, 0);
	snprintf(t, sizeof(t), "%s-b", tag);
	wt_env_init(&f->b, t, 0);
	wt_write_txn(f->a.w, 1, 100);
	wt_write_txn(f->b.w, 1, 100);
	if (recb)
		record_state(recb, f->b.w);
	f->e = ev_engine_up(f->a.sink_url, 2, 0, UINT64_MAX, 0);
	ev_add_tenant(f->e, "a", f->a.db, 0);
	ev_add_tenant(f->e, "b", f->b.db, 1);
	f->ev = ws_events_open(f->e, &(struct ws_events_config){ .deadline_ms = 10000, .marker_ms = marker_ms }, &err);
	assert_non_null(f->ev);
	f->o[0].name = "a";
	f->o[1].name = "b";
	assert_int_equal(ws_events_subscribe(f->ev, names, 2, &f->q), 0);
	assert_int_equal(ws_events_cv_init(f->ev, f->q, &f->cv), 0);
	assert_int_equal(f->cv.workers, 2);
	for (int i = 0; i < 2; i++) {
		struct ws_event x;
		ev_next_ok(f->ev, &x);
		assert_int_equal(x.kind, WS_EVENT_UPDATE);
		assert_int_equal(x.u.update.kind, WS_UPDATE_HYDRATED);
		assert_int_equal(x.u.update.query_id, f->q);
		(void)order_note(f->o, 2, &x);
		if (rb && strcmp(x.tenant, "b") == 0)
			replica_hydrate(rb, &x);
	}
}

static void comb_down(struct comb_fx *f)
{
	ws_events_close(f->ev);
	ws_engine_destroy(f->e);
	wt_env_free(&f->b);
	wt_env_free(&f->a);
}

/*
 * One query over two tenants on two shards: cv_min advances only once both
 * progressed. a commits; b, idle, progresses only by its marker (a
 * Progressed at its Hydrated's tx_id, nothing new), which completes the
 * round. Then a and b both commit: b's own Progressed comes after its
 * Changed, at a later tx_id, and completes a round as a marker would.
 */
static void test_combined_two_shards(void **state)
{
	struct comb_fx f;
	(void)state;
	comb_up(&f, "events-comb", 0, NULL, NULL);
	struct wt_env a = f.a, b = f.b;
	struct ws_events *ev = f.ev;
	struct tx_order *o = f.o;
	struct ws_event x;
	const uint64_t b_hydrated = o[1].last;
	/* Nothing has progressed: no marker is asked, none comes. */
	assert_int_equal(ws_events_next(ev, &x, 300), -EAGAIN);
	wt_write_txn(a.w, 1, 100);
	do {
		ev_next_ok(ev, &x);
		assert_false(order_note(o, 2, &x));
	} while (x.kind != WS_EVENT_PROGRESSED);
	assert_int_equal(x.u.progressed.worker, 0);
	assert_string_equal(x.tenant, "a");
	assert_false(ws_events_cv_note(&f.cv, &x)); /* shard 1 has not progressed */
	assert_int_equal(f.cv.cv_min, 0);
	/* b's marker: worker 1 progressed, b unchanged. */
	ev_next_ok(ev, &x);
	assert_int_equal(x.kind, WS_EVENT_PROGRESSED);
	assert_int_equal(x.u.progressed.worker, 1);
	assert_string_equal(x.tenant, "b");
	assert_true(order_note(o, 2, &x));
	assert_true(x.u.progressed.tx_id == b_hydrated);
	assert_true(ws_events_cv_note(&f.cv, &x));
	assert_int_equal(f.cv.cv_min, 1);
	/* One marker for one round: nothing more while a and b stay idle. */
	assert_int_equal(ws_events_next(ev, &x, 300), -EAGAIN);
	wt_write_txn(a.w, 1, 100);
	wt_write_txn(b.w, 1, 100);
	/* Until both commits' Progressed; a marker of b before b's own (asked by
	 * a's) repeats b's tx_id, and completes the round as b's own would. */
	while (o[0].progressed < 2 || o[1].progressed < 1) {
		ev_next_ok(ev, &x);
		(void)order_note(o, 2, &x);
		if (x.kind == WS_EVENT_PROGRESSED)
			(void)ws_events_cv_note(&f.cv, &x);
	}
	assert_true(o[1].last > b_hydrated);
	assert_int_equal(o[0].progressed, 2);
	assert_int_equal(o[1].progressed, 1);
	assert_int_equal(f.cv.cv_min, 2);
	comb_down(&f);
}

/* A writer committing to its database on a thread of its own until told to stop. */
struct busy_writer {
	const char *db;
	int stop;            /* (atomic) */
	unsigned commits;    /* (atomic) */
	int failed;          /* (atomic) an SQLite error */
	pthread_t th;
};

static void *busy_writer_main(void *arg)
{
	struct busy_writer *w = arg;
	sqlite3 *db = NULL;
	if (sqlite3_open(w->db, &db) != SQLITE_OK || sqlite3_busy_timeout(db, 5000) != SQLITE_OK) {
		__atomic_store_n(&w->failed, 1, __ATOMIC_RELEASE);
		sqlite3_close(db);
		return NULL;
	}
	while (!__atomic_load_n(&w->stop, __ATOMIC_ACQUIRE)) {
		if (sqlite3_exec(db, "INSERT INTO t(v) VALUES (randomblob(100))", NULL, NULL, NULL) != SQLITE_OK) {
			__atomic_store_n(&w->failed, 1, __ATOMIC_RELEASE);
			break;
		}
		__atomic_fetch_add(&w->commits, 1, __ATOMIC_RELEASE);
		ws_sleep_ms(5);
	}
	sqlite3_close(db);
	return NULL;
}

/* An event of test_idle_worker_marker's second part: b's replica follows it. */
static void marker_b_event(struct tx_order *o, struct replica *rb, const struct record *recb, int *at,
			   const struct ws_event *x)
{
	(void)order_note(o, 2, x);
	if (strcmp(x->tenant, "b") != 0)
		return;
	if (x->kind == WS_EVENT_UPDATE) {
		replica_buffer(rb, x);
		return;
	}
	assert_int_equal(x->u.progressed.worker, 1);
	uint64_t h = 0;
	if (!replica_progress(rb, x->u.progressed.tx_id, &h))
		return; /* a marker: nothing applied */
	(*at)++;
	assert_true((unsigned)*at < recb->n);
	if (h != recb->hash[*at])
		fail_msg("b at its Progressed %d is not its writer's commit %d (found at %d)", *at, *at,
			 find_state(recb, h));
}

/*
 * The idle worker's marker (docs/EVENTS.md "Markers"). a (shard 0)
 * commits every 5 ms for 1.5 s on a writer thread; b (shard 1) stays idle;
 * one query {a, b}, marker_ms 50. Every Progressed of a is covered by an
 * advance of cv_min within 5 s of the host reading it (without markers,
 * cv_min never advances: b never progresses); every Progressed of b
 * carries b's unchanged tx_id; b's markers come at most one per 50 ms.
 * Then b commits 20 times while a goes on: ordering holds for both (no
 * Progressed at a new tx_id before its Changed, tx_ids non-decreasing, a
 * marker never after a Changed it does not cover), and b's replica, which
 * applies nothing at a marker, is each state b's writer committed, in turn.
 */
static void test_idle_worker_marker(void **state)
{
	struct comb_fx f;
	struct record recb = { .n = 0 };
	struct replica rb = { 0 };
	(void)state;
	comb_up(&f, "events-mark", 50, &recb, &rb);
	struct wt_env a = f.a, b = f.b;
	struct ws_events *ev = f.ev;
	struct tx_order *o = f.o;
	struct ws_events_cv cv = f.cv;
	struct ws_event x;
	const uint64_t b_hydrated = o[1].last;
	assert_int_equal(find_state(&recb, image_hash(rb.img, rb.pages * rb.page_size)), 0);

	struct busy_writer w = { .db = a.db };
	const uint64_t t0 = ws_mono_ms();
	assert_int_equal(pthread_create(&w.th, NULL, busy_writer_main, &w), 0);
	uint64_t uncovered = 0; /* when the host read the oldest Progressed of a no advance covers (0: none) */
	uint64_t last_advance = 0, stop_at = t0 + 1500;
	bool stopped = false;
	for (;;) {
		const uint64_t now = ws_mono_ms();
		if (uncovered && now - uncovered > 5000)
			fail_msg("cv_min did not advance in 5 s after a Progressed of a (cv_min %llu, b's markers %u)",
				 (unsigned long long)cv.cv_min, o[1].markers);
		if (!stopped && now >= stop_at) {
			__atomic_store_n(&w.stop, 1, __ATOMIC_RELEASE);
			assert_int_equal(pthread_join(w.th, NULL), 0);
			assert_int_equal(__atomic_load_n(&w.failed, __ATOMIC_ACQUIRE), 0);
			stopped = true;
		}
		/* Done: the writer stopped, every commit of a read, and covered. */
		if (stopped && o[0].progressed == __atomic_load_n(&w.commits, __ATOMIC_ACQUIRE) && !uncovered)
			break;
		int rc = ws_events_next(ev, &x, 100);
		if (rc == -EAGAIN)
			continue;
		assert_int_equal(rc, 0);
		bool marker = order_note(o, 2, &x);
		if (x.kind != WS_EVENT_PROGRESSED)
			continue;
		if (strcmp(x.tenant, "b") == 0) {
			/* b is idle: every Progressed of it is a marker, at its Hydrated's tx_id. */
			assert_true(marker);
			assert_true(x.u.progressed.tx_id == b_hydrated);
			assert_int_equal(x.u.progressed.worker, 1);
		} else if (!marker && !uncovered) {
			uncovered = ws_mono_ms();
		}
		if (ws_events_cv_note(&cv, &x)) {
			uncovered = 0;
			last_advance = ws_mono_ms();
		}
	}
	const uint64_t elapsed = last_advance - t0;
	const unsigned commits = __atomic_load_n(&w.commits, __ATOMIC_ACQUIRE);
	print_message("a: %u commits in %llu ms; b: %u markers; cv_min %llu\n", commits,
		      (unsigned long long)elapsed, o[1].markers, (unsigned long long)cv.cv_min);
	assert_true(commits >= 20);
	assert_true(cv.cv_min >= 1 && cv.cv_min == o[1].markers);
	/* Not a flood: at most one marker per marker_ms (and per Progressed of a). */
	assert_true(o[1].markers <= elapsed / 50 + 1);
	assert_true(o[1].markers <= o[0].progressed);

	/* b commits now, a too, the host reading meanwhile: a's Progressed ask
	 * b's markers while b's commits are under way. */
	w = (struct busy_writer){ .db = a.db };
	assert_int_equal(pthread_create(&w.th, NULL, busy_writer_main, &w), 0);
	int at = 0;
	const unsigned markers_before = o[1].markers;
	for (int i = 0; i < 20; i++) {
		wt_write_txn(b.w, 1, 100);
		record_state(&recb, b.w);
		/* Some gaps longer than marker_ms: b idle for a marker's time. */
		const uint64_t until = ws_mono_ms() + (i % 2 ? 30 : 80);
		while (ws_mono_ms() < until)
			if (ws_events_next(ev, &x, 10) == 0)
				marker_b_event(o, &rb, &recb, &at, &x);
	}
	__atomic_store_n(&w.stop, 1, __ATOMIC_RELEASE);
	assert_int_equal(pthread_join(w.th, NULL), 0);
	assert_int_equal(__atomic_load_n(&w.failed, __ATOMIC_ACQUIRE), 0);
	while ((unsigned)at + 1 < recb.n) {
		ev_next_ok(ev, &x);
		marker_b_event(o, &rb, &recb, &at, &x);
	}
	assert_int_equal(o[1].progressed, 20);
	print_message("b: %u markers while it committed\n", o[1].markers - markers_before);
	replica_free(&rb);
	comb_down(&f);
}

/*
 * A channel that stops reading is shed (push_deadline) while the writer
 * goes on: the shard keeps shipping, and another channel on the same
 * tenant receives every Progressed, exactly, with no fault.
 */
static void test_stalled_channel_shed(void **state)
{
	struct wt_env env;
	struct record rec = { 0 };
	struct replica r = { 0 };
	uint64_t last_tx = 0;
	int at = -1;
	(void)state;
	wt_env_init(&env, "events-shed", 0);
	wt_write_txn(env.w, 2, 100);
	record_state(&rec, env.w);
	struct ws_engine *e = ev_engine_up(env.sink_url, 1, 0, UINT64_MAX, 0);
	ev_add_tenant(e, "app", env.db, 0);
	struct ws_events *stalled = ev_channel(e, 100);
	struct ws_events *healthy = ev_channel(e, 10000);
	uint64_t qs = ev_subscribe1(stalled, "app");
	(void)ev_subscribe1(healthy, "app");
	struct ws_tenant_metrics m0, m1;
	assert_int_equal(ws_engine_tenant_metrics(e, "app", &m0), 0);
	/* 60 commits over about 1.2 s; the healthy channel follows them all. */
	for (int i = 0; i < 60; i++) {
		wt_write_txn(env.w, 1, 300);
		record_state(&rec, env.w);
		wt_sleep_ms(20);
	}
	follow(healthy, &r, &rec, &at, &last_tx);
	assert_int_equal(ws_engine_flush(e), 0);
	assert_int_equal(ws_engine_tenant_metrics(e, "app", &m1), 0);
	assert_true(m1.frames_shipped > m0.frames_shipped); /* the shard kept shipping */
	/* The stalled one: its first event is the Faulted (or comes after what it had read). */
	struct ws_event f = wait_fault(stalled);
	assert_int_equal(f.u.faulted.query_id, qs);
	assert_int_equal(f.u.faulted.cause, WS_CAUSE_PUSH_DEADLINE);
	assert_non_null(strstr(f.u.faulted.reason, "deadline_ms 100"));
	ws_events_close(stalled);
	ws_events_close(healthy);
	ws_engine_destroy(e);
	replica_free(&r);
	wt_env_free(&env);
}

/*
 * A host that polls ws_events_fd itself (docs/EVENTS.md, "The API") is
 * woken for what it has not read: before its first ws_events_next (the
 * Hydrated), and after a ws_events_next that returned -EAGAIN, though no
 * thread waits inside ws_events_next. The deadline is long: no shed wakes it.
 */
static void test_fd_wakes_poller(void **state)
{
	struct fx f0;
	struct ws_event x;
	(void)state;
	fx_up(&f0, "events-fd", 60000);
	struct pollfd p = { .fd = ws_events_fd(f0.ev), .events = POLLIN };
	(void)ev_subscribe1(f0.ev, "app");
	assert_int_equal(poll(&p, 1, 5000), 1);
	ev_next_ok(f0.ev, &x);
	assert_int_equal(x.u.update.kind, WS_UPDATE_HYDRATED);
	assert_int_equal(ws_events_next(f0.ev, &x, 0), -EAGAIN);
	wt_write_txn(f0.env.w, 1, 100);
	for (;;) {
		assert_int_equal(poll(&p, 1, 5000), 1);
		if (ws_events_next(f0.ev, &x, 0) == 0 && x.kind == WS_EVENT_PROGRESSED)
			break;
	}
	fx_down(&f0);
}

/*
 * A channel that stops reading while the writer goes on falls
 * lag_bytes_max behind long before its (long) deadline: the shard sheds
 * it, and its Faulted says so, with the bound and the time (not "0 bytes
 * behind").
 */
static void test_lag_shed_reason(void **state)
{
	struct fx f0;
	struct ws_event x;
	int err = 0;
	(void)state;
	fx_up(&f0, "events-lag", 60000);
	struct ws_events_config c = { .deadline_ms = 60000, .lag_bytes_max = 64 << 10 };
	struct ws_events *lag = ws_events_open(f0.e, &c, &err);
	assert_non_null(lag);
	uint64_t q = ev_subscribe1(lag, "app");
	/* 40 transactions of about 20 pages: far over 64 KiB of Changed. */
	for (int i = 0; i < 40; i++)
		wt_write_txn(f0.env.w, 20, 3000);
	assert_int_equal(ws_engine_flush(f0.e), 0);
	x = wait_fault(lag);
	assert_int_equal(x.u.faulted.query_id, q);
	assert_int_equal(x.u.faulted.cause, WS_CAUSE_PUSH_DEADLINE);
	assert_non_null(strstr(x.u.faulted.reason, "more than lag_bytes_max 65536 bytes behind (shed at"));
	ws_events_close(lag);
	fx_down(&f0);
}

/* Holds a database's write lock from another connection for hold_ms. */
struct lock_holder {
	const char *db;
	unsigned hold_ms;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool held;
};

static void *hold_lock(void *arg)
{
	struct lock_holder *l = arg;
	sqlite3 *db = NULL;
	assert_int_equal(sqlite3_open(l->db, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
	pthread_mutex_lock(&l->mu);
	l->held = true;
	pthread_cond_signal(&l->cv);
	pthread_mutex_unlock(&l->mu);
	wt_sleep_ms(l->hold_ms);
	sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
	sqlite3_close(db);
	return NULL;
}

/*
 * The host cannot read while it is inside ws_events_subscribe, which waits
 * for the new query's Hydrated (here: another connection holds the
 * database's write lock for 1.5 s, three deadlines): events of its other
 * queries left unread meanwhile are not shed for that time. Their deadline
 * starts again when subscribe returns, and the host reads them at once.
 */
static void test_deadline_paused_in_subscribe(void **state)
{
	struct fx f0;
	struct wt_env b;
	struct lock_holder l = { .hold_ms = 1500, .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };
	pthread_t th;
	struct ws_event x;
	(void)state;
	fx_up(&f0, "events-subpause", 500);
	wt_env_init(&b, "events-subpause-b", 0);
	wt_write_txn(b.w, 2, 100);
	ev_add_tenant(f0.e, "slow", b.db, 0);
	(void)ev_subscribe1(f0.ev, "app");
	ev_next_ok(f0.ev, &x); /* app's Hydrated */
	assert_int_equal(x.u.update.kind, WS_UPDATE_HYDRATED);
	/* Events of app on the channel (its tail has run), not read. */
	wt_write_txn(f0.env.w, 1, 100);
	assert_int_equal(ws_engine_flush(f0.e), 0);
	l.db = b.db;
	assert_int_equal(pthread_create(&th, NULL, hold_lock, &l), 0);
	pthread_mutex_lock(&l.mu);
	while (!l.held)
		pthread_cond_wait(&l.cv, &l.mu);
	pthread_mutex_unlock(&l.mu);
	uint64_t qs = ev_subscribe1(f0.ev, "slow"); /* about 1.5 s */
	pthread_join(th, NULL);
	/* app's Progressed and slow's Hydrated, no Faulted. */
	bool progressed = false, hydrated = false;
	while (!progressed || !hydrated) {
		ev_next_ok(f0.ev, &x);
		if (x.kind == WS_EVENT_FAULTED)
			fail_msg("faulted: %s (%s)", x.u.faulted.reason, ws_fault_cause_name(x.u.faulted.cause));
		progressed |= x.kind == WS_EVENT_PROGRESSED;
		hydrated |= x.kind == WS_EVENT_UPDATE && x.u.update.kind == WS_UPDATE_HYDRATED &&
			    x.u.update.query_id == qs;
	}
	fx_down(&f0);
	wt_env_free(&b);
}

/* Unsubscribed: no event of the query follows; others go on. */
static void test_unsubscribe_stops(void **state)
{
	struct fx f0;
	(void)state;
	fx_up(&f0, "events-unsub", 10000);
	struct ws_engine *e = f0.e;
	struct ws_events *ev = f0.ev;
	struct wt_env env = f0.env;
	uint64_t q1 = ev_subscribe1(ev, "app");
	uint64_t q2 = ev_subscribe1(ev, "app");
	assert_int_equal(ws_events_unsubscribe(ev, q1), 0);
	wt_write_txn(env.w, 3, 100);
	unsigned progressed = 0;
	while (progressed < 1) {
		struct ws_event x;
		ev_next_ok(ev, &x);
		assert_int_not_equal(x.kind, WS_EVENT_FAULTED);
		if (x.kind == WS_EVENT_UPDATE)
			assert_int_equal(x.u.update.query_id, q2);
		else
			progressed++;
	}
	assert_int_equal(ws_events_unsubscribe(ev, q2), 0);
	wt_write_txn(env.w, 3, 100);
	struct ws_event x;
	assert_int_equal(ws_events_next(ev, &x, 300), -EAGAIN);
	(void)env;
	(void)e;
	(void)ev;
	fx_down(&f0);
}

/*
 * A Progressed also advances queries whose results did not change
 * (docs/EVENTS.md, Progressed): a Progressed is delivered once per channel
 * that has a query on its tenant, and every query of that channel with a
 * tenant on its worker counts it (ws_events_cv_note). q1 = {a (shard 0),
 * c (shard 1)}, and q2 and q2b = {b (shard 0)} on one channel: commits on
 * b and c only, nothing of a changed, advance q1's cv_min once per round,
 * no Update of q1 comes with b's commits, and b's Progressed comes once
 * though two queries follow b. A channel whose only query is
 * {a, c} follows nothing on b: b's Progressed does not reach it, and its
 * cv_min stays at 0 however often c commits. The markers the combined
 * queries ask (of a and c: test_idle_worker_marker) are checked for their
 * order and left out of cv_min here: this is about the tenants' own.
 */
static void test_progressed_advances_unchanged(void **state)
{
	struct wt_env a, b, c;
	struct ws_events_cv cv1, cv3;
	struct ws_event x;
	uint64_t q1, q3;
	const char *ac[] = { "a", "c" };
	struct tx_order o1[3] = { { .name = "a" }, { .name = "b" }, { .name = "c" } };
	struct tx_order o3[2] = { { .name = "a" }, { .name = "c" } };
	(void)state;
	wt_env_init(&a, "events-unch-a", 0);
	wt_env_init(&b, "events-unch-b", 0);
	wt_env_init(&c, "events-unch-c", 0);
	wt_write_txn(a.w, 1, 100);
	wt_write_txn(b.w, 1, 100);
	wt_write_txn(c.w, 1, 100);
	struct ws_engine *e = ev_engine_up(a.sink_url, 2, 0, UINT64_MAX, 0);
	ev_add_tenant(e, "a", a.db, 0);
	ev_add_tenant(e, "b", b.db, 0);
	ev_add_tenant(e, "c", c.db, 1);
	struct ws_events *ev = ev_channel(e, 10000);
	struct ws_events *only = ev_channel(e, 10000);
	assert_int_equal(ws_events_subscribe(ev, ac, 2, &q1), 0);
	uint64_t q2 = ev_subscribe1(ev, "b");
	uint64_t q2b = ev_subscribe1(ev, "b");
	assert_int_equal(ws_events_subscribe(only, ac, 2, &q3), 0);
	assert_int_equal(ws_events_cv_init(ev, q1, &cv1), 0);
	assert_int_equal(ws_events_cv_init(only, q3, &cv3), 0);
	assert_int_equal(cv1.workers, 2);
	for (int i = 0; i < 4; i++) {
		ev_next_ok(ev, &x);
		assert_int_equal(x.u.update.kind, WS_UPDATE_HYDRATED);
		(void)order_note(o1, 3, &x);
	}
	for (int i = 0; i < 2; i++) {
		ev_next_ok(only, &x);
		assert_int_equal(x.u.update.kind, WS_UPDATE_HYDRATED);
		(void)order_note(o3, 2, &x);
	}
	for (unsigned round = 0; round < 3; round++) {
		/* b commits: q2's and q2b's Changed, one Progressed of worker 0, nothing of q1. */
		wt_write_txn(b.w, 1, 100);
		bool marker;
		do {
			ev_next_ok(ev, &x);
			marker = order_note(o1, 3, &x);
			if (x.kind == WS_EVENT_UPDATE)
				assert_true(x.u.update.query_id == q2 || x.u.update.query_id == q2b);
		} while (x.kind != WS_EVENT_PROGRESSED || marker);
		assert_int_equal(x.u.progressed.worker, 0);
		assert_string_equal(x.tenant, "b");
		assert_false(ws_events_cv_note(&cv1, &x)); /* worker 1 has not progressed */
		assert_int_equal(cv1.cv_min, round);
		/* c commits: worker 1 progressed too, so q1 advances, a unchanged. */
		wt_write_txn(c.w, 1, 100);
		do {
			ev_next_ok(ev, &x);
			marker = order_note(o1, 3, &x);
			if (x.kind == WS_EVENT_UPDATE)
				assert_int_equal(x.u.update.query_id, q1);
		} while (x.kind != WS_EVENT_PROGRESSED || marker);
		assert_int_equal(x.u.progressed.worker, 1);
		assert_string_equal(x.tenant, "c");
		assert_true(ws_events_cv_note(&cv1, &x));
		assert_int_equal(cv1.cv_min, round + 1);
	}
	/* Once per channel: no second Progressed of b (two queries follow it; q1 none); markers only. */
	assert_int_equal(ws_engine_flush(e), 0);
	while (ws_events_next(ev, &x, 300) == 0)
		assert_true(order_note(o1, 3, &x));
	assert_int_equal(o1[1].progressed, 3);
	assert_int_equal(o1[1].markers, 0); /* b is in no combined query */
	/* The channel that follows nothing on b: c's three Progressed, none of b, cv_min 0. */
	while (ws_events_next(only, &x, 300) == 0) {
		if (order_note(o3, 2, &x) || x.kind != WS_EVENT_PROGRESSED)
			continue;
		assert_string_equal(x.tenant, "c");
		assert_false(ws_events_cv_note(&cv3, &x));
	}
	assert_int_equal(o3[1].progressed, 3);
	assert_int_equal(o3[0].progressed, 0);
	assert_int_equal(cv3.cv_min, 0);
	ws_events_close(only);
	ws_events_close(ev);
	ws_engine_destroy(e);
	wt_env_free(&c);
	wt_env_free(&b);
	wt_env_free(&a);
}

/*
 * Faulted is out of band and terminal. One channel (deadline 1.5 s) with
 * qa = {app} (shard 0) and qo = {other} (shard 1) leaves app's commits
 * unread past its deadline: shard 0 sheds it. Then other commits, and its
 * Changed and Progressed wait on the channel, within their deadline. The
 * next event the host reads is qa's Faulted(push_deadline), ahead of them;
 * other's follow, qo unaffected. Then app's writer goes on for 20 more
 * commits while the channel reads app's records again for a new query qa2:
 * every Update is qa2's, none qa's, each Progressed applies exactly the
 * writer's next state, and nothing else is left on the channel. A second
 * channel on app receives every commit, exactly, through it all.
 */
static void test_faulted_out_of_band_terminal(void **state)
{
	struct wt_env env, o;
	struct record rec = { 0 };
	struct replica r = { 0 }, rw = { 0 };
	uint64_t lt = 0, ltw = 0;
	int at = -1, atw = -1;
	struct ws_event x;
	(void)state;
	wt_env_init(&env, "events-oob", 0);
	wt_env_init(&o, "events-oob-o", 0);
	wt_write_txn(env.w, 2, 100);
	record_state(&rec, env.w);
	wt_write_txn(o.w, 1, 100);
	struct ws_engine *e = ev_engine_up(env.sink_url, 2, 0, UINT64_MAX, 0);
	ev_add_tenant(e, "app", env.db, 0);
	ev_add_tenant(e, "other", o.db, 1);
	struct ws_events *ev = ev_channel(e, 1500);
	struct ws_events *watch = ev_channel(e, 60000);
	uint64_t qa = ev_subscribe1(ev, "app");
	uint64_t qo = ev_subscribe1(ev, "other");
	(void)ev_subscribe1(watch, "app");
	for (int i = 0; i < 2; i++) {
		ev_next_ok(ev, &x);
		assert_int_equal(x.u.update.kind, WS_UPDATE_HYDRATED);
	}
	for (int i = 0; i < 3; i++) {
		wt_write_txn(env.w, 1, 100);
		record_state(&rec, env.w);
	}
	wt_sleep_ms(1500 + 2000); /* the deadline, and time for shard 0 to see it passed */
	wt_write_txn(o.w, 1, 100);
	assert_int_equal(ws_engine_flush(e), 0); /* other's events are on the channel */
	/* Out of band: the Faulted comes first, ahead of other's queued events. */
	ev_next_ok(ev, &x);
	assert_int_equal(x.kind, WS_EVENT_FAULTED);
	assert_int_equal(x.u.faulted.query_id, qa);
	assert_int_equal(x.u.faulted.cause, WS_CAUSE_PUSH_DEADLINE);
	bool changed = false;
	do {
		ev_next_ok(ev, &x);
		assert_int_not_equal(x.kind, WS_EVENT_FAULTED);
		if (x.kind == WS_EVENT_UPDATE) {
			assert_int_equal(x.u.update.query_id, qo);
			changed = true;
		}
	} while (x.kind != WS_EVENT_PROGRESSED);
	assert_true(changed);
	assert_string_equal(x.tenant, "other");
	assert_int_equal(x.u.progressed.worker, 1);
	/* Terminal: the channel reads app's records again (qa2), and none is qa's. */
	uint64_t qa2 = ev_subscribe1(ev, "app");
	for (int i = 0; i < 20; i++) {
		wt_write_txn(env.w, 1 + i % 3, 200);
		record_state(&rec, env.w);
		if (i % 5 == 4)
			follow_q(ev, &r, &rec, &at, &lt, qa2);
		wt_sleep_ms(25);
	}
	assert_int_equal(ws_engine_flush(e), 0);
	assert_int_equal(ws_events_next(ev, &x, 300), -EAGAIN);
	follow(watch, &rw, &rec, &atw, &ltw);
	assert_int_equal(atw, (int)rec.n - 1);
	ws_events_close(watch);
	ws_events_close(ev);
	ws_engine_destroy(e);
	replica_free(&rw);
	replica_free(&r);
	wt_env_free(&o);
	wt_env_free(&env);
}

/*
 * A stalled channel is shed within its deadline (300 ms here), while a
 * channel beside it receives every commit's Progressed, exactly. Its
 * Faulted(push_deadline) names when the shard shed it ("shed at N ms",
 * the monotonic clock): no earlier than the deadline after the host last
 * came out of ws_events_subscribe (the deadline counts from no earlier),
 * and no later than the deadline plus 2 s after the first commit's
 * Progressed reached the other channel (the stalled channel's oldest
 * unread event was emitted by then). The slack: the shard checks
 * deadlines between slots of a tail and when idle, so a shed waits for a
 * tail in progress, whose fsyncs on a shared, busy disk can take hundreds
 * of ms (bench_events: up to 1,036 ms with 20 tenants on the shard). How
 * close to the deadline the shed comes is measured in that bench, not here.
 */
static void test_shed_within_deadline(void **state)
{
	const uint64_t deadline = 300, slack = 2000;
	struct fx f0;
	struct record rec = { 0 };
	struct replica r = { 0 };
	uint64_t last_tx = 0;
	int at = -1;
	struct ws_event x;
	(void)state;
	fx_up(&f0, "events-shed-time", 60000);
	record_state(&rec, f0.env.w);
	struct ws_events *healthy = f0.ev;
	struct ws_events *stalled = ev_channel(f0.e, (uint32_t)deadline);
	(void)ev_subscribe1(healthy, "app");
	follow(healthy, &r, &rec, &at, &last_tx); /* its Hydrated */
	uint64_t t_sub = ws_mono_ms();
	uint64_t qs = ev_subscribe1(stalled, "app");
	ev_next_ok(stalled, &x);
	assert_int_equal(x.u.update.kind, WS_UPDATE_HYDRATED);
	/* Commits until well past the latest allowed shed, each followed by the healthy channel. */
	uint64_t t_seen = 0;
	unsigned commits = 0;
	do {
		wt_write_txn(f0.env.w, 1, 300);
		record_state(&rec, f0.env.w);
		follow(healthy, &r, &rec, &at, &last_tx);
		if (!commits++)
			t_seen = ws_mono_ms();
		wt_sleep_ms(20);
	} while (ws_mono_ms() < t_seen + deadline + slack + 300);
	/* The stalled channel's next event is its Faulted. */
	ev_next_ok(stalled, &x);
	assert_int_equal(x.kind, WS_EVENT_FAULTED);
	assert_int_equal(x.u.faulted.query_id, qs);
	assert_int_equal(x.u.faulted.cause, WS_CAUSE_PUSH_DEADLINE);
	const char *s = strstr(x.u.faulted.reason, "shed at ");
	assert_non_null(s);
	uint64_t shed_at = strtoull(s + 8, NULL, 10);
	print_message("shed %lld ms after the first commit reached the other channel (deadline %llu); %u commits\n",
		      (long long)(shed_at - t_seen), (unsigned long long)deadline, commits);
	assert_true(shed_at >= t_sub + deadline);
	assert_true(shed_at <= t_seen + deadline + slack);
	ws_events_close(stalled);
	replica_free(&r);
	fx_down(&f0);
}

static void test_bad_input(void **state)
{
	struct wt_env env;
	int err = 0;
	uint64_t q = 0;
	struct ws_event x;
	struct ws_events_cv cv;
	(void)state;
	wt_env_init(&env, "events-bad", 0);
	wt_write_txn(env.w, 1, 100);
	assert_null(ws_events_open(NULL, NULL, &err));
	assert_int_equal(err, WS_ECONFIG);
	struct ws_engine *e = ev_engine_up(env.sink_url, 1, 0, UINT64_MAX, 0);
	ev_add_tenant(e, "app", env.db, 0);
	struct ws_events *ev = ev_channel(e, 0);
	const char *unknown = "nope";
	assert_int_equal(ws_events_subscribe(ev, &unknown, 1, &q), WS_ENOTFOUND);
	assert_non_null(strstr(ws_errmsg(), "nope"));
	const char *twice[] = { "app", "app" };
	assert_int_equal(ws_events_subscribe(ev, twice, 2, &q), WS_ECONFIG);
	assert_non_null(strstr(ws_errmsg(), "twice"));
	const char *app = "app";
	assert_int_equal(ws_events_subscribe(ev, &app, 0, &q), WS_ECONFIG);
	assert_int_equal(ws_events_subscribe(ev, NULL, 1, &q), WS_ECONFIG);
	assert_int_equal(ws_events_subscribe(NULL, &app, 1, &q), WS_ECONFIG);
	assert_int_equal(ws_events_subscribe(ev, &app, 1, NULL), WS_ECONFIG);
	const char *with_null[] = { "app", NULL };
	assert_int_equal(ws_events_subscribe(ev, with_null, 2, &q), WS_ECONFIG);
	/* A failed subscribe left nothing: no event comes. */
	assert_int_equal(ws_events_next(ev, &x, 100), -EAGAIN);
	assert_int_equal(ws_events_unsubscribe(ev, 12345), WS_ENOTFOUND);
	assert_int_equal(ws_events_unsubscribe(NULL, 1), WS_ECONFIG);
	assert_int_equal(ws_events_next(NULL, &x, 0), WS_ECONFIG);
	assert_int_equal(ws_events_next(ev, NULL, 0), WS_ECONFIG);
	assert_int_equal(ws_events_cv_init(ev, 999, &cv), WS_ENOTFOUND);
	assert_false(ws_events_cv_note(NULL, &x));
	assert_int_equal(ws_events_fd(NULL), -1);
	assert_true(ws_events_fd(ev) >= 0);
	assert_string_equal(ws_fault_cause_name(WS_CAUSE_PUSH_DEADLINE), "push_deadline");
	assert_string_equal(ws_fault_cause_name((enum ws_fault_cause)99), "?");
	q = ev_subscribe1(ev, "app");
	assert_int_equal(ws_events_unsubscribe(ev, q), 0);
	assert_int_equal(ws_events_unsubscribe(ev, q), WS_ENOTFOUND);
	ws_events_close(ev);
	ws_events_close(NULL);
	ws_engine_destroy(e);
	wt_env_free(&env);
}

/*
 * A writer whose WAL sync takes 200 ms: SQLite writes a commit's frames,
 * syncs the WAL, then publishes the commit in the wal-index, so the frames
 * wake the shard a sync's time before the commit can be read. The test's
 * VFS is SQLite's own unix VFS with a slower xSync on the WAL (the real
 * disk cannot be made slow on demand).
 */
static sqlite3_io_methods slow_wal_methods;
static int (*real_sync)(sqlite3_file *, int);

static int slow_sync(sqlite3_file *f, int flags)
{
	ws_sleep_ms(200);
	return real_sync(f, flags);
}

static sqlite3_vfs slow_vfs;

static int slow_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *f, int flags, int *out)
{
	sqlite3_vfs *real = vfs->pAppData;
	int rc = real->xOpen(real, name, f, flags, out);
	if (rc == SQLITE_OK && (flags & SQLITE_OPEN_WAL) && f->pMethods) {
		if (!real_sync) {
			slow_wal_methods = *f->pMethods;
			real_sync = f->pMethods->xSync;
			slow_wal_methods.xSync = slow_sync;
		}
		f->pMethods = &slow_wal_methods;
	}
	return rc;
}

static sqlite3 *open_slow_sync_writer(const char *db)
{
	sqlite3 *w = NULL;
	if (!slow_vfs.zName) {
		sqlite3_vfs *real = sqlite3_vfs_find(NULL);
		slow_vfs = *real;
		slow_vfs.zName = "ws-test-slow-wal-sync";
		slow_vfs.pAppData = real;
		slow_vfs.xOpen = slow_open;
		assert_int_equal(sqlite3_vfs_register(&slow_vfs, 0), SQLITE_OK);
	}
	assert_int_equal(sqlite3_open_v2(db, &w, SQLITE_OPEN_READWRITE, slow_vfs.zName), SQLITE_OK);
	assert_int_equal(sqlite3_exec(w, "PRAGMA synchronous=FULL", NULL, NULL, NULL), SQLITE_OK);
	return w;
}

/*
 * A followed tenant's commit whose frames woke the shard before the
 * wal-index named it (a commit under way when its tail read the WAL)
 * reaches the host without another write to wake the shard: with a
 * batch_age_ms_max of a minute, each isolated commit's Progressed must
 * come within next_ok's 20 s.
 */
static void test_commit_under_way_followed(void **state)
{
	struct wt_env env;
	struct record rec = { 0 };
	struct replica r = { 0 };
	uint64_t last_tx = 0;
	int at = -1;
	(void)state;
	wt_env_init(&env, "events-under-way", 0);
	wt_write_txn(env.w, 3, 500);
	record_state(&rec, env.w);
	ev_engine_age_ms = 60000;
	struct ws_engine *e = ev_engine_up(env.sink_url, 1, 0, 0, 0);
	ev_engine_age_ms = 50;
	ev_add_tenant(e, "app", env.db, 0);
	struct ws_events *ev = ev_channel(e, 10000);
	(void)ev_subscribe1(ev, "app");
	follow(ev, &r, &rec, &at, &last_tx);
	sqlite3 *w = open_slow_sync_writer(env.db);
	for (int i = 0; i < 3; i++) {
		wt_write_txn(w, 1, 100);
		record_state(&rec, w);
		follow(ev, &r, &rec, &at, &last_tx);
	}
	assert_int_equal(at, (int)rec.n - 1);
	sqlite3_close(w);
	ws_events_close(ev);
	ws_engine_destroy(e);
	replica_free(&r);
	wt_env_free(&env);
}

/* ---- read ahead of the next tail (docs/EVENTS.md "Latency") --------------- */

static void ahead_commit(struct wt_env *env, struct record *rec, int rows, int bytes)
{
	wt_write_txn(env->w, rows, bytes);
	record_state(rec, env->w);
}

static bool gate_paused(struct wt_gate *g)
{
	pthread_mutex_lock(&g->mu);
	bool p = g->paused;
	pthread_mutex_unlock(&g->mu);
	return p;
}

static void app_metrics(struct ws_engine *e, struct ws_tenant_metrics *m)
{
	if (ws_engine_tenant_metrics(e, "app", m) != 0)
		fail_msg("metrics: %s", ws_errmsg());
}

/*
 * A tail of the followed tenant paused where it waits for the store
 * (engine.lane_store_wait: the shard's read lock let go), while the
 * writer commits, runs each kind of WAL checkpoint (PASSIVE, FULL,
 * RESTART, TRUNCATE: busy or partial against walship's read mark), commits
 * a transaction that spilled, and rolls back one that spilled (a commit
 * then writes over its frames): every commit's Changed and Progressed
 * reach the host while that tail is still paused (no tail of the tenant
 * ends meanwhile), each applied state the next one the writer committed.
 * Then the next tails ship what was read ahead (frames_read_ahead), across
 * walship's own WAL checkpoints, and the sink restores to the source's
 * last state and verifies. at_read: the shard paused instead at
 * engine.read_ahead, between its look at the wal-index and its read (its
 * read lock held: nothing is tailed or read meanwhile), under the same
 * changes; they reach the host once it goes on.
 */
/* Whether the events of the commits made during the pause must reach the
 * host while the tail is still paused. Not under TSan: there tails are
 * slow enough that the paused tail's backlog can pass what reading ahead
 * holds (one slot), and such commits wait for the next tail (docs/EVENTS.md
 * "Latency": latency, never a wrong state); seen as a 20 s wait for the
 * first commit's event in 3 of 4 TSan runs. What TSan is for, the shard
 * reading ahead while a lane's tail is paused, still runs there, and every
 * state is still checked once the tail goes on. */
#ifdef __SANITIZE_THREAD__
#define AHEAD_WHILE_PAUSED false
#else
#define AHEAD_WHILE_PAUSED true
#endif

static void ahead_run(bool at_read)
{
	const bool during = !at_read && AHEAD_WHILE_PAUSED;
	static const char *const ckpt[] = { "PASSIVE", "FULL", "RESTART", "TRUNCATE" };
	struct wt_env env;
	struct record rec = { 0 };
	struct replica r = { 0 };
	struct wt_gate g = WT_GATE_INIT;
	struct ws_tenant_metrics m0, m1;
	sqlite3 *ck = NULL;
	uint64_t last_tx = 0;
	int at = -1;
	int64_t rows_src = 0, rows_rest = 0;

	wt_env_init(&env, at_read ? "events-ahead-read" : "events-ahead", 0);
	ahead_commit(&env, &rec, 5, 300);
	/* walship restarts the WAL past 512 KiB: not before the pause (the
	 * first tail of a new generation arms reading ahead again), after it. */
	struct ws_engine *e = ev_engine_up(env.sink_url, 1, 0, 512 << 10, 0);
	ev_add_tenant(e, "app", env.db, 0);
	struct ws_events *ev = ev_channel(e, 10000);
	(void)ev_subscribe1(ev, "app");
	for (int i = 0; i < 3; i++)
		ahead_commit(&env, &rec, 2, 300);
	follow(ev, &r, &rec, &at, &last_tx);
	assert_int_equal(sqlite3_open(env.db, &ck), SQLITE_OK);
	sqlite3_busy_timeout(ck, 0);

	assert_int_equal(ws_fault_add(at_read ? "engine.read_ahead" : "engine.lane_store_wait", 1, WS_FAULT_PAUSE,
				      wt_gate_wait, &g),
			 0);
	/* Commits until one is read ahead (or a tail waits for the store):
	 * a tail in progress may read the first ones itself, and the shard
	 * then finds nothing past it to read. */
	for (int i = 0; i < 500 && !gate_paused(&g); i++) {
		ahead_commit(&env, &rec, 2, 300);
		wt_sleep_ms(20);
	}
	wt_gate_until_paused(&g);
	app_metrics(e, &m0);
	for (unsigned k = 0; k < 4; k++) {
		char sql[64];
		ahead_commit(&env, &rec, 1 + (int)k, 300);
		snprintf(sql, sizeof(sql), "PRAGMA wal_checkpoint(%s)", ckpt[k]);
		(void)sqlite3_exec(ck, sql, NULL, NULL, NULL); /* busy is an answer too */
		ahead_commit(&env, &rec, 2, 200);
		if (during)
			follow(ev, &r, &rec, &at, &last_tx);
	}
	/* A transaction that spilled its cache into the WAL, committed. */
	wt_exec(env.w, "PRAGMA cache_size=5");
	ahead_commit(&env, &rec, 40, 1500);
	if (during)
		follow(ev, &r, &rec, &at, &last_tx);
	/* One that spilled and rolled back, then a commit over its frames. */
	wt_exec(env.w, "BEGIN");
	for (int i = 0; i < 60; i++)
		wt_exec(env.w, "INSERT INTO t(v) VALUES (randomblob(1500))");
	wt_exec(env.w, "ROLLBACK");
	wt_exec(env.w, "PRAGMA cache_size=-2000");
	ahead_commit(&env, &rec, 1, 300);
	if (during) {
		follow(ev, &r, &rec, &at, &last_tx);
		/* All of it while the tail was paused: no tail of app ended. */
		app_metrics(e, &m1);
		assert_int_equal(m1.tails, m0.tails);
		assert_true(m1.frames_read_ahead > m0.frames_read_ahead);
	}
	wt_gate_open(&g);
	/* The next tails ship it; walship's WAL checkpoint restarts the WAL meanwhile. */
	for (int i = 0; i < 30; i++)
		ahead_commit(&env, &rec, 8, 3000);
	follow(ev, &r, &rec, &at, &last_tx);
	/* Until walship restarted the WAL (a commit it ships while the
	 * application writes on finds its WAL checkpoint's lock taken). */
	for (int i = 0; i < 300 && WS_TX_CHAIN(last_tx) <= 1; i++) {
		ahead_commit(&env, &rec, 8, 3000);
		follow(ev, &r, &rec, &at, &last_tx);
	}
	assert_int_equal(at, (int)rec.n - 1);
	assert_int_equal(ws_engine_flush(e), 0);
	ws_fault_disarm();
	app_metrics(e, &m1);
	assert_true(WS_TX_CHAIN(last_tx) > 1);
	assert_true(m1.frames_read_ahead > 0 && m1.frames_read_ahead <= m1.frames_shipped);
	uint64_t hs = wt_content_hash(env.w, &rows_src);
	uint64_t hr = wt_restore_hash(&env, "app", NULL, &rows_rest);
	if (hs != hr || rows_src != rows_rest)
		fail_msg("restored %lld rows (hash %016llx), the source has %lld (hash %016llx)", (long long)rows_rest,
			 (unsigned long long)hr, (long long)rows_src, (unsigned long long)hs);
	if (ws_verify(env.sink, "app", NULL, NULL) != 0)
		fail_msg("verify: %s", ws_errmsg());
	sqlite3_close(ck);
	ws_events_close(ev);
	ws_engine_destroy(e);
	replica_free(&r);
	wt_env_free(&env);
}

static void test_read_ahead_paused_store_wait(void **state)
{
	(void)state;
	ahead_run(false);
}

static void test_read_ahead_paused_at_read(void **state)
{
	(void)state;
	ahead_run(true);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bad_input),
		cmocka_unit_test(test_tap_rollback_and_gap),
		cmocka_unit_test(test_tap_chain_continues),
		cmocka_unit_test(test_pad_not_aged),
		cmocka_unit_test(test_exact_replica),
		cmocka_unit_test(test_commit_under_way_followed),
		cmocka_unit_test(test_rollback_never_released),
		cmocka_unit_test(test_fault_derive),
#ifdef WS_FAULTS
		cmocka_unit_test(test_fault_derive_injected),
		cmocka_unit_test(test_read_ahead_paused_store_wait),
		cmocka_unit_test(test_read_ahead_paused_at_read),
#endif
		cmocka_unit_test(test_fault_worker_lost),
		cmocka_unit_test(test_combined_two_shards),
		cmocka_unit_test(test_idle_worker_marker),
		cmocka_unit_test(test_stalled_channel_shed),
		cmocka_unit_test(test_deadline_paused_in_subscribe),
		cmocka_unit_test(test_fd_wakes_poller),
		cmocka_unit_test(test_lag_shed_reason),
		cmocka_unit_test(test_unsubscribe_stops),
		cmocka_unit_test(test_progressed_advances_unchanged),
		cmocka_unit_test(test_faulted_out_of_band_terminal),
		cmocka_unit_test(test_shed_within_deadline),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
