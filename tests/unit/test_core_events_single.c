/*
 * The event channel in single-thread mode (docs/EVENTS.md "Single-thread
 * mode"): a channel over one stream, driven by ws_events_tail on the test's
 * thread, read with ws_events_next(0). Against a real SQLite writer and a
 * record of every state it committed: every Progressed leaves the host's
 * replica at exactly the writer's next committed state, across WAL restarts
 * (walship's own checkpoints and the writer's, of every mode); Faulted
 * never comes: a WAL that does not decode fails the call and the events go
 * on once it decodes again, frames read before their commit are held back,
 * a host that falls behind its bound and a gap the events cannot cross get
 * Hydrated again; misuse is refused, named.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "coreutil.h"
#include "evreplica.h"
#include "ws_fault.h"

/* ---- a stream over the env's database, its channel, the host's replicas ---- */

struct sx {
	struct wt_env env;
	struct ws_stream *st;
	struct ws_events *ev;
	struct record rec;       /* every state the writer committed */
	/* The host: one replica per query (q[i] -> r[i]). */
	uint64_t q[2];
	struct replica r[2];
	int at[2];               /* the replica's state in rec (-1: not hydrated) */
	unsigned nq;
	uint64_t last_progressed; /* tx_id of the last Progressed (monotonic per tenant) */
	/* What the last sx_drain read. */
	unsigned hydrated, changed, progressed;
};

static void sx_up(struct sx *x, const char *tag, uint32_t batch_frames_max, uint64_t wal_ckpt_bytes,
		  uint64_t lag_bytes_max)
{
	struct ws_stream_config c = {
		.tenant = "app",
		.epoch = 1,
		.pointer_generation = 1,
		.batch_frames_max = batch_frames_max,
		.wal_checkpoint_bytes = wal_ckpt_bytes,
	};
	struct ws_events_config ec = { .lag_bytes_max = lag_bytes_max };
	struct ws_outcome o;
	int err = 0;
	memset(x, 0, sizeof(*x));
	x->at[0] = x->at[1] = -1;
	wt_env_init(&x->env, tag, 0);
	wt_write_txn(x->env.w, 3, 300);
	record_state(&x->rec, x->env.w);
	c.db_path = x->env.db;
	x->st = ws_stream_open(x->env.sink, &c, &err);
	if (!x->st)
		fail_msg("stream: %s (%s)", ws_strerror(err), ws_errmsg());
	wt_tail_ok(x->st, &o);
	x->ev = ws_events_open_stream(x->st, &ec, &err);
	if (!x->ev)
		fail_msg("events: %s (%s)", ws_strerror(err), ws_errmsg());
}

static void sx_down(struct sx *x)
{
	ws_events_close(x->ev);
	ws_stream_close(x->st);
	for (unsigned i = 0; i < 2; i++)
		replica_free(&x->r[i]);
	wt_env_free(&x->env);
}

static void sx_subscribe(struct sx *x)
{
	const char *t = "app";
	int rc = ws_events_subscribe(x->ev, &t, 1, &x->q[x->nq]);
	if (rc)
		fail_msg("subscribe: %s (%s)", ws_strerror(rc), ws_errmsg());
	x->nq++;
}

static void sx_tail(struct sx *x)
{
	struct ws_outcome o;
	int rc = ws_events_tail(x->ev, &o);
	if (rc)
		fail_msg("events_tail: %s (%s)", ws_strerror(rc), ws_errmsg());
}

/* The writer commits one transaction, recorded. */
static void sx_write(struct sx *x, int rows, int bytes)
{
	wt_write_txn(x->env.w, rows, bytes);
	record_state(&x->rec, x->env.w);
}

static int sx_query(const struct sx *x, uint64_t q)
{
	for (unsigned i = 0; i < x->nq; i++)
		if (x->q[i] == q)
			return (int)i;
	fail_msg("an event of query %llu, which is not the host's", (unsigned long long)q);
	return -1;
}

/*
 * Read every event there is (timeout 0: nothing comes while waiting).
 * Hydrated: a state the writer committed, at or after the replica's;
 * Changed: buffered; Progressed (once per channel): each replica goes to
 * exactly the writer's next committed state. Faulted fails the test.
 */
static void sx_drain(struct sx *x)
{
	struct ws_event e;
	int rc;
	x->hydrated = x->changed = x->progressed = 0;
	while ((rc = ws_events_next(x->ev, &e, 0)) == 0) {
		if (e.kind == WS_EVENT_FAULTED)
			fail_msg("Faulted in single-thread mode: %s (%s)", e.u.faulted.reason,
				 ws_fault_cause_name(e.u.faulted.cause));
		assert_string_equal(e.tenant, "app");
		if (e.kind == WS_EVENT_UPDATE) {
			int i = sx_query(x, e.u.update.query_id);
			struct replica *r = &x->r[i];
			if (e.u.update.kind == WS_UPDATE_HYDRATED) {
				int was = x->at[i];
				replica_hydrate(r, &e);
				x->at[i] = find_state(&x->rec, image_hash(r->img, r->pages * r->page_size));
				/* A state the writer committed, never one before the replica's. */
				assert_true(x->at[i] >= 0);
				assert_true(x->at[i] >= was);
				assert_true(e.u.update.u.hydrated.tx_id >= x->last_progressed);
				x->hydrated++;
			} else {
				replica_buffer(r, &e);
				x->changed++;
			}
			continue;
		}
		assert_int_equal(e.kind, WS_EVENT_PROGRESSED);
		assert_int_equal(e.u.progressed.worker, 0);
		assert_true(e.u.progressed.tx_id > x->last_progressed);
		x->last_progressed = e.u.progressed.tx_id;
		for (unsigned i = 0; i < x->nq; i++) {
			/* A query hydrated at or after this commit has nothing buffered for it. */
			if (!x->r[i].hydrated || (x->r[i].npend == 0 && x->r[i].last_tx >= e.u.progressed.tx_id))
				continue;
			uint64_t h = replica_apply(&x->r[i], e.u.progressed.tx_id);
			x->at[i]++;
			assert_true((unsigned)x->at[i] < x->rec.n);
			if (h != x->rec.hash[x->at[i]])
				fail_msg("query %u at Progressed %llx: not the writer's commit %d (found at %d)", i,
					 (unsigned long long)e.u.progressed.tx_id, x->at[i], find_state(&x->rec, h));
		}
		x->progressed++;
	}
	if (rc != -EAGAIN)
		fail_msg("events_next: %s (%s)", ws_strerror(rc), ws_errmsg());
}

/* Every replica is the writer's last commit, with nothing left buffered. */
static void sx_caught_up(const struct sx *x)
{
	for (unsigned i = 0; i < x->nq; i++) {
		assert_int_equal(x->at[i], (int)x->rec.n - 1);
		assert_int_equal(x->r[i].npend, 0);
	}
}

/* One ws_events_tail, every event read: so many Hydrated and Progressed, caught up. */
static void sx_round(struct sx *x, unsigned hydrated, unsigned progressed)
{
	sx_tail(x);
	sx_drain(x);
	assert_int_equal(x->hydrated, hydrated);
	assert_int_equal(x->progressed, progressed);
	sx_caught_up(x);
}

/* A new query, read up to its Hydrated. */
static void sx_follow(struct sx *x)
{
	sx_subscribe(x);
	sx_drain(x);
	assert_int_equal(x->hydrated, 1);
}

/* ---- tests ------------------------------------------------------------------- */

/*
 * Two queries follow a writer through the single-thread channel: each tail's
 * events, read after the call, bring both replicas to exactly each state
 * the writer committed, in order (Changed before its Progressed, several
 * slices per transaction: 8 frames per batch), across WAL restarts, both
 * walship's own (a WAL checkpoint every 64 KiB) and the writer's
 * checkpoints of every mode; tx_id grows across them, on a new chain.
 */
static void test_single_exact(void **state)
{
	static const int modes[] = { SQLITE_CHECKPOINT_PASSIVE, SQLITE_CHECKPOINT_FULL, SQLITE_CHECKPOINT_RESTART,
				     SQLITE_CHECKPOINT_TRUNCATE };
	struct sx x;
	struct ws_events_cv cv;
	(void)state;
	sx_up(&x, "evs-exact", 8, 64 << 10, 0);
	sx_subscribe(&x);
	assert_int_equal(ws_events_cv_init(x.ev, x.q[0], &cv), 0);
	assert_int_equal(cv.workers, 1);
	sx_drain(&x);
	assert_int_equal(x.hydrated, 1);
	for (int round = 0; round < 8; round++) {
		if (round == 2)
			sx_subscribe(&x); /* a second query joins while events flow */
		for (int i = 0; i < 8; i++)
			sx_write(&x, i % 3 == 0 ? 40 : 1 + i, 600);
		/* The writer's own checkpoint (busy while walship reads is fine). */
		(void)sqlite3_wal_checkpoint_v2(x.env.w, NULL, modes[round % 4], NULL, NULL);
		sx_write(&x, 2, 300);
		sx_tail(&x);
		sx_drain(&x);
		assert_true(x.progressed >= 9);
		sx_caught_up(&x);
	}
	assert_true(WS_TX_CHAIN(x.last_progressed) > 1);
	assert_true(x.r[0].max_slices_in_txn > 1);
	/* cv_min advances at each Progressed of the one worker. */
	sx_write(&x, 1, 100);
	sx_tail(&x);
	struct ws_event e;
	bool advanced = false;
	while (ws_events_next(x.ev, &e, 0) == 0)
		advanced |= ws_events_cv_note(&cv, &e);
	assert_true(advanced);
	assert_int_equal(cv.cv_min, 1);
	sx_down(&x);
}

/*
 * A WAL whose header no longer decodes: the call fails, named
 * (WS_ENOTWAL), with no event at all, the writer committing meanwhile;
 * once the header is whole again, the next call brings every commit made
 * meanwhile, exactly, on the same registration (no Hydrated again).
 */
static void test_single_decode_error(void **state)
{
	struct sx x;
	struct ws_outcome o;
	struct ws_event e;
	uint8_t hdr[32];
	(void)state;
	sx_up(&x, "evs-decode", 0, UINT64_MAX, 0);
	sx_follow(&x);
	sx_write(&x, 2, 200);
	sx_round(&x, 0, 1);
	int fd = open(x.env.wal, O_RDWR);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, hdr, sizeof(hdr), 0), (ssize_t)sizeof(hdr));
	assert_int_equal(pwrite(fd, "not a WAL header, nor anything!!", 32, 0), 32);
	for (int i = 0; i < 3; i++)
		sx_write(&x, 2, 200); /* SQLite appends past the header it keeps in memory */
	for (int i = 0; i < 2; i++) {
		assert_int_equal(ws_events_tail(x.ev, &o), WS_ENOTWAL);
		assert_non_null(strstr(ws_errmsg(), "app"));
		assert_non_null(strstr(ws_errmsg(), "-wal"));
		assert_int_equal(ws_events_next(x.ev, &e, 0), -EAGAIN); /* no Faulted, nothing */
	}
	assert_int_equal(pwrite(fd, hdr, sizeof(hdr), 0), (ssize_t)sizeof(hdr));
	close(fd);
	sx_round(&x, 0, 3);
	/* And on: a restart of the WAL by the writer. */
	(void)sqlite3_wal_checkpoint_v2(x.env.w, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
	sx_write(&x, 2, 200);
	sx_round(&x, 0, 1);
	sx_down(&x);
}

#ifdef WS_FAULTS
/*
 * Frames read before their commit never reach the host: a tail that stops
 * inside a transaction (here at its batch limit, the fault site
 * stream.batch_limit: a standalone stream has no work bound to stop it on
 * demand) ships and delivers the transaction before it, Changed and
 * Progressed, and holds back the slices it read of the next one; the next
 * tail delivers that one whole. So no rollback can follow a delivery (the
 * writer rolling back, or the WAL restarting over them): single-thread
 * mode has no Faulted{rollback} to send.
 */
static void test_single_held_back(void **state)
{
	struct sx x;
	struct ws_outcome o;
	(void)state;
	sx_up(&x, "evs-held", 8, UINT64_MAX, 0);
	sx_follow(&x);
	sx_write(&x, 1, 100);   /* a frame or two, committed */
	sx_write(&x, 60, 600);  /* many frames: past the first batch of 8 */
	assert_int_equal(ws_fault_arm("stream.batch_limit", 1, 0), 0);
	assert_int_equal(ws_events_tail(x.ev, &o), 0);
	ws_fault_disarm();
	assert_int_equal(o.kind, WS_OUTCOME_STREAMED);
	sx_drain(&x);
	/* The small one, whole; of the big one, nothing. */
	assert_int_equal(x.progressed, 1);
	assert_int_equal(x.r[0].npend, 0);
	assert_int_equal(x.at[0], (int)x.rec.n - 2);
	sx_tail(&x);
	sx_drain(&x);
	assert_int_equal(x.progressed, 1);
	assert_true(x.changed > 1);
	sx_caught_up(&x);
	sx_down(&x);
}
#endif

/*
 * The seed's delta overflow: the host calls ws_events_tail and reads
 * nothing while the writer commits more than lag_bytes_max (64 KiB) of
 * pages. The events it did not read are dropped; its next read is a
 * Hydrated again, at a state the writer committed, then the events after
 * it, exact. Never a Faulted.
 */
static void test_single_overflow_rehydrates(void **state)
{
	struct sx x;
	(void)state;
	sx_up(&x, "evs-overflow", 0, UINT64_MAX, 64 << 10);
	sx_subscribe(&x);
	sx_subscribe(&x);
	sx_drain(&x);
	assert_int_equal(x.hydrated, 2);
	/* Read half of a tail's events, then fall behind. */
	sx_write(&x, 4, 500);
	sx_write(&x, 4, 500);
	sx_tail(&x);
	struct ws_event e;
	assert_int_equal(ws_events_next(x.ev, &e, 0), 0);
	assert_int_equal(e.kind, WS_EVENT_UPDATE);
	replica_buffer(&x.r[sx_query(&x, e.u.update.query_id)], &e);
	for (int i = 0; i < 12; i++) {
		sx_write(&x, 8, 1000); /* ~3 pages a row: 100 KiB over the 12 */
		sx_tail(&x);
	}
	sx_drain(&x);
	assert_int_equal(x.hydrated, 2);     /* both queries, once */
	assert_int_equal(x.progressed, 0);   /* none of the dropped ones */
	sx_caught_up(&x);                    /* the Hydrated is the writer's last commit */
	for (int i = 0; i < 5; i++)
		sx_write(&x, 2, 300);
	sx_round(&x, 0, 5);
	sx_down(&x);
}

/*
 * Events the channel cannot derive without a gap get a Hydrated again,
 * never a Faulted: frames shipped by a ws_stream_tail_frames call that
 * bypassed the channel (its tap never saw them), and, with fault sites,
 * the tap's own decoding failing (events.derive).
 */
static void test_single_gap_rehydrates(void **state)
{
	struct sx x;
	struct ws_outcome o;
	(void)state;
	sx_up(&x, "evs-gap", 0, UINT64_MAX, 0);
	sx_follow(&x);
	sx_write(&x, 2, 200);
	wt_tail_ok(x.st, &o); /* shipped; the channel never saw it */
	sx_write(&x, 2, 200);
	sx_round(&x, 1, 0);
	sx_write(&x, 3, 200);
	sx_round(&x, 0, 1);
#ifdef WS_FAULTS
	assert_int_equal(ws_fault_arm("events.derive", 1, 0), 0);
	sx_write(&x, 2, 200);
	sx_tail(&x);
	ws_fault_disarm();
	sx_drain(&x);
	assert_int_equal(x.hydrated, 1);
	assert_int_equal(x.progressed, 0);
	sx_caught_up(&x);
	sx_write(&x, 2, 200);
	sx_round(&x, 0, 1);
#endif
	sx_down(&x);
}

/*
 * A re-base: the database replaced at its path (rm -wal -shm, mv another
 * in, as a restore into place does), a new life the tail re-bases onto.
 * The events cannot follow it without a gap: a Hydrated again of the new
 * life, its tx_id past every earlier one (a new chain), never a Faulted;
 * then its commits, exactly.
 */
static void test_single_rebase_rehydrates(void **state)
{
	struct sx x;
	struct ws_outcome o;
	char *other, *shm = NULL;
	(void)state;
	sx_up(&x, "evs-rebase", 0, UINT64_MAX, 0);
	sx_follow(&x);
	sx_write(&x, 3, 200);
	sx_round(&x, 0, 1);
	const uint64_t before = x.last_progressed;
	other = wt_path(x.env.dir, "other.db");
	sqlite3 *odb = wt_writer_open(other, 0);
	wt_write_txn(odb, 20, 50);
	wt_exec(odb, "PRAGMA wal_checkpoint(TRUNCATE)");
	sqlite3_close(odb);
	assert_int_not_equal(asprintf(&shm, "%s-shm", x.env.db), -1);
	sqlite3_close(x.env.w);
	unlink(x.env.wal);
	unlink(shm);
	assert_int_equal(rename(other, x.env.db), 0);
	x.env.w = wt_writer_open(x.env.db, 0);
	for (int i = 0; i < 3; i++)
		sx_write(&x, 2, 100);
	assert_int_equal(ws_events_tail(x.ev, &o), 0);
	assert_int_equal(o.kind, WS_OUTCOME_RESTARTED);
	sx_drain(&x);
	assert_int_equal(x.hydrated, 1);
	assert_int_equal(x.progressed, 0);
	assert_true(x.r[0].last_tx > before);
	assert_true(WS_TX_CHAIN(x.r[0].last_tx) > WS_TX_CHAIN(before));
	sx_caught_up(&x);
	for (int i = 0; i < 4; i++)
		sx_write(&x, 2, 100);
	sx_round(&x, 0, 4);
	free(shm);
	free(other);
	sx_down(&x);
}

/* Misuse is refused, named: single-thread calls on an engine's channel and
 * the other way round, more than one tenant, a second channel, a deadline. */
static void test_single_misuse(void **state)
{
	struct sx x;
	struct ws_outcome o;
	struct ws_event e;
	uint64_t q;
	int err = 0;
	(void)state;
	sx_up(&x, "evs-misuse", 0, UINT64_MAX, 0);
	assert_null(ws_events_open_stream(NULL, NULL, &err));
	assert_int_equal(err, WS_ECONFIG);
	/* One channel per stream. */
	assert_null(ws_events_open_stream(x.st, NULL, &err));
	assert_int_equal(err, WS_ECONFIG);
	assert_non_null(strstr(ws_errmsg(), "already"));
	/* Nothing comes while waiting: a timeout is refused. */
	assert_int_equal(ws_events_next(x.ev, &e, 100), WS_ECONFIG);
	assert_non_null(strstr(ws_errmsg(), "ws_events_tail"));
	assert_int_equal(ws_events_next(x.ev, &e, -1), WS_ECONFIG);
	assert_int_equal(ws_events_next(x.ev, &e, 0), -EAGAIN);
	/* One shard, one tenant: the stream's. */
	const char *two[] = { "app", "other" };
	assert_int_equal(ws_events_subscribe(x.ev, two, 2, &q), WS_ECONFIG);
	assert_non_null(strstr(ws_errmsg(), "one tenant"));
	const char *other = "other";
	assert_int_equal(ws_events_subscribe(x.ev, &other, 1, &q), WS_ENOTFOUND);
	assert_non_null(strstr(ws_errmsg(), "other"));
	assert_int_equal(ws_events_fd(x.ev), -1);
	assert_int_equal(ws_events_tail(NULL, &o), WS_ECONFIG);
	assert_int_equal(ws_events_tail(x.ev, NULL), WS_ECONFIG);
	/* Nothing was left subscribed: a tail brings no event. */
	sx_write(&x, 1, 100);
	sx_tail(&x);
	assert_int_equal(ws_events_next(x.ev, &e, 0), -EAGAIN);
	/* Closed, the stream takes a new channel; a deadline is refused. */
	ws_events_close(x.ev);
	struct ws_events_config dl = { .deadline_ms = 500 };
	assert_null(ws_events_open_stream(x.st, &dl, &err));
	assert_int_equal(err, WS_ECONFIG);
	assert_non_null(strstr(ws_errmsg(), "deadline_ms"));
	x.ev = ws_events_open_stream(x.st, NULL, &err);
	assert_non_null(x.ev);

	/* An engine's channel: its shards tail, ws_events_tail is refused. */
	struct ws_shard_config sc;
	ws_shard_config_default(&sc);
	sc.ring_bytes = 8 << 20;
	sc.batch_bytes_max = 1 << 20;
	struct ws_engine_config ec = { .sink_url = x.env.sink_url, .shards = 1, .shard = &sc, .epoch = 2,
				       .pointer_generation = 1 };
	struct ws_engine *eng = ws_engine_create(&ec, &err);
	assert_non_null(eng);
	struct ws_events *tev = ws_events_open(eng, NULL, &err);
	assert_non_null(tev);
	assert_int_equal(ws_events_tail(tev, &o), WS_ECONFIG);
	assert_non_null(strstr(ws_errmsg(), "engine"));
	ws_events_close(tev);
	ws_engine_destroy(eng);

	/* The stream closed before its channel: refused, not a dangling stream. */
	sx_follow(&x);
	ws_stream_close(x.st);
	x.st = NULL;
	assert_int_equal(ws_events_tail(x.ev, &o), WS_ECONFIG);
	assert_non_null(strstr(ws_errmsg(), "stream was closed"));
	assert_int_equal(ws_events_subscribe(x.ev, (const char *[]){ "app" }, 1, &q), WS_ECONFIG);
	sx_down(&x);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_single_misuse),
		cmocka_unit_test(test_single_exact),
		cmocka_unit_test(test_single_decode_error),
#ifdef WS_FAULTS
		cmocka_unit_test(test_single_held_back),
#endif
		cmocka_unit_test(test_single_overflow_rehydrates),
		cmocka_unit_test(test_single_gap_rehydrates),
		cmocka_unit_test(test_single_rebase_rehydrates),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
