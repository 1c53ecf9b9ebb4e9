/*
 * The replica applier (core/replica.h) fed by the event channel: a real
 * SQLite writer in a thread of its own (transactions of every size,
 * checkpoints of every mode, restarts of its connection) records every
 * state it commits; the replica, applied at each Progressed, must be the
 * writer's next state, while reader threads hold connections to the
 * replica and check that every snapshot they read is a recorded state.
 * Then the schema cookie across rebuilds from another database, a page
 * size change, a Faulted query subscribed again, a WAL that stays bounded,
 * and bad input.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "coreutil.h"
#include "evreplica.h"
#include "replica.h"
#include "ws_hash.h"
#include "ws_wal.h"

/*
 * The hash of a database image as its content: page 1's schema cookie
 * (offset 40) is the replica's own (replica.h), so it is left out.
 */
static uint64_t content_hash(const uint8_t *img, uint64_t bytes)
{
	struct ws_xxh_state st;
	static const uint8_t zero[4];
	assert_true(bytes >= 100);
	ws_xxh_reset(&st);
	ws_xxh_update(&st, img, 40);
	ws_xxh_update(&st, zero, 4);
	ws_xxh_update(&st, img + 44, (size_t)bytes - 44);
	return ws_xxh_digest(&st);
}

/* The content hash of what db reads now, in one read transaction (serialize holds one). */
static int snapshot_hash(sqlite3 *db, uint64_t *h)
{
	sqlite3_int64 size = 0;
	uint8_t *img = sqlite3_serialize(db, "main", &size, 0);
	if (!img)
		return sqlite3_errcode(db) ? sqlite3_errcode(db) : SQLITE_NOMEM;
	*h = content_hash(img, (uint64_t)size);
	sqlite3_free(img);
	return SQLITE_OK;
}

/* ---- the record of committed states, shared with the writer thread --------- */

#define REC_MAX 8192

struct rec {
	pthread_mutex_t mu;
	uint64_t hash[REC_MAX];
	unsigned n;
	int done;
};

static void rec_add(struct rec *r, sqlite3 *w)
{
	uint64_t h = 0;
	assert_int_equal(snapshot_hash(w, &h), SQLITE_OK);
	pthread_mutex_lock(&r->mu);
	assert_true(r->n < REC_MAX);
	r->hash[r->n++] = h;
	pthread_mutex_unlock(&r->mu);
}

/* The index of h among the states recorded, waiting up to 20 s for it to be recorded; -1: never. */
static int rec_find(struct rec *r, uint64_t h, unsigned from)
{
	for (int tries = 0; tries < 20000; tries++) {
		pthread_mutex_lock(&r->mu);
		for (unsigned i = from; i < r->n; i++)
			if (r->hash[i] == h) {
				pthread_mutex_unlock(&r->mu);
				return (int)i;
			}
		int done = r->done;
		pthread_mutex_unlock(&r->mu);
		if (done)
			return -1;
		usleep(1000);
	}
	return -1;
}

static unsigned rec_count(struct rec *r)
{
	pthread_mutex_lock(&r->mu);
	unsigned n = r->n;
	pthread_mutex_unlock(&r->mu);
	return n;
}

/* ---- the writer: transactions, checkpoints of every mode, restarts -------- */

struct writer {
	struct wt_env *env;
	struct rec *rec;
	int txns;
	pthread_t th;
};

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	static const int modes[] = { SQLITE_CHECKPOINT_PASSIVE, SQLITE_CHECKPOINT_FULL, SQLITE_CHECKPOINT_RESTART,
				     SQLITE_CHECKPOINT_TRUNCATE };
	for (int i = 0; i < w->txns; i++) {
		/* Small ones, and some of 60 rows of 700 bytes: many pages, several slices. */
		wt_write_txn(w->env->w, i % 7 == 0 ? 60 : 1 + i % 5, 700);
		rec_add(w->rec, w->env->w);
		if (i % 11 == 10) { /* pages freed: the database shrinks at the next checkpoint */
			wt_exec(w->env->w, "DELETE FROM t WHERE rowid % 3 = 0");
			rec_add(w->rec, w->env->w);
		}
		if (i % 9 == 8)
			(void)sqlite3_wal_checkpoint_v2(w->env->w, NULL, modes[(i / 9) % 4], NULL, NULL);
		if (i % 25 == 24) { /* the writer restarts: its connection closed and opened again */
			sqlite3_close(w->env->w);
			w->env->w = wt_writer_open(w->env->db, 0);
		}
		usleep(2000);
	}
	pthread_mutex_lock(&w->rec->mu);
	w->rec->done = 1;
	pthread_mutex_unlock(&w->rec->mu);
	return NULL;
}

/* ---- readers of the replica ---------------------------------------------- */

#define SEEN_MAX 100000

struct reader {
	const char *path;
	int *stop;
	uint64_t *seen;          /* content hash of every snapshot read */
	unsigned nseen, busy, reopened;
	char error[256];
	char last[200];          /* the message of the last read that failed */
	pthread_t th;
};

/* One read transaction: a query through the schema, and the whole image. */
static int read_once(struct reader *r, sqlite3 *db)
{
	sqlite3_stmt *st = NULL;
	uint64_t h = 0;
	int rc = sqlite3_exec(db, "BEGIN", NULL, NULL, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_prepare_v2(db, "SELECT count(*), total(length(v)) FROM t", -1, &st, NULL);
	if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW)
		rc = SQLITE_OK;
	sqlite3_finalize(st);
	if (rc == SQLITE_OK)
		rc = snapshot_hash(db, &h);
	if (rc != SQLITE_OK)
		snprintf(r->last, sizeof(r->last), "%s", sqlite3_errmsg(db));
	(void)sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
	if (rc == SQLITE_OK && r->nseen < SEEN_MAX)
		r->seen[r->nseen++] = h;
	return rc;
}

static void *reader_main(void *arg)
{
	struct reader *r = arg;
	sqlite3 *db = NULL;
	unsigned i = 0;
	while (!__atomic_load_n(r->stop, __ATOMIC_ACQUIRE) && !r->error[0]) {
		if (!db || i++ % 50 == 49) { /* mostly held open across rebuilds and restarts */
			sqlite3_close(db);
			if (sqlite3_open_v2(r->path, &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK)
				snprintf(r->error, sizeof(r->error), "open: %s", sqlite3_errmsg(db));
			sqlite3_busy_timeout(db, 5000);
			r->reopened++;
		}
		usleep(300);
		int rc = read_once(r, db);
		if (rc == SQLITE_BUSY)
			r->busy++;
		/* No table t: the replica before its first image, the only error allowed. */
		else if (rc != SQLITE_OK && (rc != SQLITE_ERROR || !strstr(r->last, "no such table")))
			snprintf(r->error, sizeof(r->error), "read: %s (%d)", r->last, rc);
	}
	sqlite3_close(db);
	return NULL;
}

static void readers_start(struct reader *rd, unsigned n, const char *path, int *stop)
{
	for (unsigned i = 0; i < n; i++) {
		memset(&rd[i], 0, sizeof(rd[i]));
		rd[i].path = path;
		rd[i].stop = stop;
		rd[i].seen = calloc(SEEN_MAX, sizeof(uint64_t));
		assert_non_null(rd[i].seen);
		assert_int_equal(pthread_create(&rd[i].th, NULL, reader_main, &rd[i]), 0);
	}
}

/* Every snapshot every reader read is a state the writer committed. */
static unsigned readers_check(struct reader *rd, unsigned n, struct rec *rec)
{
	unsigned reads = 0;
	for (unsigned i = 0; i < n; i++) {
		pthread_join(rd[i].th, NULL);
		if (rd[i].error[0])
			fail_msg("reader %u: %s", i, rd[i].error);
		for (unsigned k = 0; k < rd[i].nseen; k++)
			if (rec_find(rec, rd[i].seen[k], 0) < 0)
				fail_msg("reader %u read a state the writer never committed (read %u)", i, k);
		reads += rd[i].nseen;
		free(rd[i].seen);
	}
	return reads;
}

/* ---- the host: a channel, a feed, the replica ----------------------------- */

struct host {
	struct ws_events *ev;
	struct ws_replica *r;
	struct ws_replica_feed *f;
	sqlite3 *check;          /* the host's own reader of the replica */
	uint64_t q;
	int at;                  /* the state the replica is at, -1: none yet */
	unsigned progressed, resubscribed;
	char trace[32][300];      /* the last events fed, printed when a check fails */
	unsigned ntrace;
};

static void trace_event(struct host *h, const struct ws_event *x)
{
	char *t = h->trace[h->ntrace++ % 32];
	if (x->kind == WS_EVENT_PROGRESSED)
		snprintf(t, 300, "Progressed tx %" PRIx64, x->u.progressed.tx_id);
	else if (x->kind == WS_EVENT_FAULTED)
		snprintf(t, 300, "Faulted %s", ws_fault_cause_name(x->u.faulted.cause));
	else if (x->u.update.kind == WS_UPDATE_HYDRATED)
		snprintf(t, 300, "Hydrated q %" PRIu64 " tx %" PRIx64 " pages %" PRIu64, x->u.update.query_id,
			 x->u.update.u.hydrated.tx_id, x->u.update.u.hydrated.pages);
	else {
		/* The page numbers too: a slice of other frames shows there. */
		char pl[200] = "";
		size_t o = 0;
		for (uint32_t i = 0; i < x->u.update.u.changed.count && o < 180; i++)
			o += (size_t)snprintf(pl + o, sizeof(pl) - o, "%s%u", i ? "," : "", x->u.update.u.changed.pgno[i]);
		snprintf(t, 300, "Changed q %" PRIu64 " at %" PRIx64 " count %u db_pages %u pages [%s]",
			 x->u.update.query_id, x->u.update.u.changed.position, x->u.update.u.changed.count,
			 x->u.update.u.changed.db_pages, pl);
	}
}

static void trace_print(const struct host *h)
{
	for (unsigned i = h->ntrace > 32 ? h->ntrace - 32 : 0; i < h->ntrace; i++)
		print_error("  event %u: %s\n", i, h->trace[i % 32]);
}

static void host_open(struct host *h, struct ws_engine *e, const char *replica, uint32_t deadline_ms)
{
	int err = 0;
	memset(h, 0, sizeof(*h));
	h->at = -1;
	h->ev = ev_channel(e, deadline_ms);
	h->r = ws_replica_open(replica, &err);
	if (!h->r)
		fail_msg("replica: %s", ws_errmsg());
	h->f = ws_replica_feed_new(h->r, 0, &err);
	assert_non_null(h->f);
	assert_int_equal(sqlite3_open_v2(replica, &h->check, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
	sqlite3_busy_timeout(h->check, 5000);
	h->q = ev_subscribe1(h->ev, "app");
}

static void host_close(struct host *h)
{
	sqlite3_close(h->check);
	ws_replica_feed_free(h->f);
	ws_replica_close(h->r);
	ws_events_close(h->ev);
}

/* The state the replica is at as a reader sees it, at or after `from`. */
static int replica_state(struct host *h, struct rec *rec, unsigned from)
{
	uint64_t hash = 0;
	assert_int_equal(snapshot_hash(h->check, &hash), SQLITE_OK);
	return rec_find(rec, hash, from);
}

/* One event through the feed; at each Progressed the replica is the writer's next state. */
static void host_step(struct host *h, struct rec *rec, const struct ws_event *x)
{
	struct ws_replica_feed_stats before, after;
	ws_replica_feed_stats(h->f, &before);
	trace_event(h, x);
	int rc = ws_replica_feed(h->f, x);
	if (rc < 0)
		fail_msg("feed: %s", ws_errmsg());
	if (rc == 1) { /* Faulted: subscribe again, a new Hydrated follows */
		assert_int_equal(ws_events_unsubscribe(h->ev, h->q), 0);
		h->q = ev_subscribe1(h->ev, "app");
		h->resubscribed++;
		return;
	}
	ws_replica_feed_stats(h->f, &after);
	if (after.images > before.images) {
		int at = replica_state(h, rec, 0);
		assert_true(at >= h->at); /* a committed state, never behind what was applied */
		h->at = at;
	} else if (after.applied > before.applied) {
		int64_t t0 = wt_now_ms();
		int at = replica_state(h, rec, (unsigned)(h->at + 1));
		if (at != h->at + 1) {
			uint64_t hash = 0;
			pthread_mutex_lock(&rec->mu);
			unsigned n = rec->n;
			int done = rec->done;
			pthread_mutex_unlock(&rec->mu);
			(void)snapshot_hash(h->check, &hash);
			int any = rec_find(rec, hash, 0);
			trace_print(h);
			fail_msg("at Progressed %u (tx %" PRIx64 ", %u pages applied, db %u pages) the replica is the "
				 "writer's state %d, not %d (from 0: %d; %u states recorded, writer %s; looked %" PRId64
				 " ms)", h->progressed, x->u.progressed.tx_id, after.last_pages, after.last_db_pages, at,
				 h->at + 1, any, n, done ? "done" : "writing", wt_now_ms() - t0);
		}
		h->at = at;
		h->progressed++;
	}
}

/* Events until the replica is the writer's last state (the writer done); 20 s with no event fails. */
static void host_follow(struct host *h, struct rec *rec)
{
	unsigned idle_ms = 0;
	for (;;) {
		pthread_mutex_lock(&rec->mu);
		bool end = rec->done && h->at == (int)rec->n - 1;
		pthread_mutex_unlock(&rec->mu);
		if (end)
			return;
		struct ws_event x;
		int rc = ws_events_next(h->ev, &x, 100);
		if (rc == -EAGAIN && (idle_ms += 100) < 20000)
			continue; /* the writer may still be on its way to done */
		if (rc)
			fail_msg("no event in 20 s (%s): the replica at state %d of %u, %u Progressed, %u re-subscribed",
				 ws_strerror(rc), h->at, rec_count(rec), h->progressed, h->resubscribed);
		idle_ms = 0;
		host_step(h, rec, &x);
	}
}

/* ---- tests ----------------------------------------------------------------- */

/*
 * The replica follows a writer that checkpoints in every mode and restarts
 * its connection, equal to the writer's next state at each Progressed,
 * while three readers read it all along and only ever see committed
 * states; its WAL is checkpointed and restarted as it goes (small
 * ckpt_frames), so it stays far below what was written through it.
 */
static void test_follow_writer(void **state)
{
	struct wt_env env;
	struct rec rec = { .mu = PTHREAD_MUTEX_INITIALIZER };
	struct writer w = { .env = &env, .rec = &rec, .txns = (int)wt_env_u64("WS_REPLICA_TXNS", 300) };
	struct host h;
	struct reader rd[3];
	int stop = 0;
	(void)state;
	wt_env_init(&env, "replica-follow", 0);
	wt_write_txn(env.w, 3, 500);
	rec_add(&rec, env.w);
	char *replica = wt_path(env.dir, "replica.db");
	struct ws_engine *e = ev_engine_up(env.sink_url, 1, 8, 256 << 10, 0);
	ev_add_tenant(e, "app", env.db, 0);
	host_open(&h, e, replica, 10000);
	ws_replica_ckpt_frames(h.r, 64);
	readers_start(rd, 3, replica, &stop);
	assert_int_equal(pthread_create(&w.th, NULL, writer_main, &w), 0);
	host_follow(&h, &rec);
	pthread_join(w.th, NULL);
	__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
	unsigned reads = readers_check(rd, 3, &rec);
	print_message("replica: %u states, %u Progressed checked, %u re-subscribed, %u reads by readers\n",
		      rec_count(&rec), h.progressed, h.resubscribed, reads);
	assert_true(h.progressed > 0 && reads > 0);
	struct stat st;
	char *wal = wt_path(env.dir, "replica.db-wal");
	assert_int_equal(stat(wal, &st), 0);
	assert_true(st.st_size < 16 << 20);
	/* sqlite3 finds it sound. */
	host_close(&h);
	sqlite3_close(wt_open_checked(replica));
	ws_engine_destroy(e);
	free(wal);
	free(replica);
	wt_env_free(&env);
}

/* ---- a database built for the schema-cookie test ------------------------- */

/* A database of two tables created in the order given (so different root pages), cookie 2 either way. */
static uint8_t *two_tables(const char *dir, const char *name, bool swap, const char *val, sqlite3_int64 *size)
{
	sqlite3 *db = NULL;
	char *p = wt_path(dir, name);
	char sql[512];
	assert_int_equal(sqlite3_open(p, &db), SQLITE_OK);
	wt_exec(db, "PRAGMA journal_mode=WAL");
	wt_exec(db, swap ? "CREATE TABLE b(x); CREATE TABLE a(x)" : "CREATE TABLE a(x); CREATE TABLE b(x)");
	snprintf(sql, sizeof(sql), "INSERT INTO a VALUES('%s-a'); INSERT INTO b VALUES('%s-b')", val, val);
	wt_exec(db, sql);
	uint8_t *img = sqlite3_serialize(db, "main", size, 0);
	assert_non_null(img);
	sqlite3_close(db);
	free(p);
	return img;
}

static void expect_row(sqlite3 *db, const char *sql, const char *want)
{
	char got[128] = "";
	sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
	if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW)
		snprintf(got, sizeof(got), "%s", (const char *)sqlite3_column_text(st, 0));
	if (rc != SQLITE_ROW)
		fail_msg("%s: %s", sql, sqlite3_errmsg(db));
	sqlite3_finalize(st);
	assert_string_equal(got, want);
}

/*
 * Readers held open across a rebuild from another database whose tables
 * have other root pages and the same schema cookie: they must read the new
 * tables, not use their cached schema on the new pages (the replica's own
 * cookie). Then a transaction of that database that writes page 1 keeps
 * the replica's cookie.
 */
static void test_cookie_across_rebuild(void **state)
{
	char *dir = wt_tmpdir("replica-cookie");
	char *path = wt_path(dir, "replica.db");
	sqlite3_int64 na = 0, nb = 0;
	uint8_t *a = two_tables(dir, "a.db", false, "one", &na);
	uint8_t *b = two_tables(dir, "b.db", true, "two", &nb);
	int err = 0;
	sqlite3 *rd[2];
	(void)state;
	assert_int_equal(ws_get_be32(a + 40), ws_get_be32(b + 40));
	struct ws_replica *r = ws_replica_open(path, &err);
	assert_non_null(r);
	assert_int_equal(ws_replica_image(r, 1, a, (uint64_t)na / 4096, 4096), 0);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(sqlite3_open(path, &rd[i]), SQLITE_OK);
		sqlite3_busy_timeout(rd[i], 5000);
		expect_row(rd[i], "SELECT x FROM b", "one-b");
	}
	assert_int_equal(ws_replica_image(r, 2, b, (uint64_t)nb / 4096, 4096), 0);
	for (int i = 0; i < 2; i++) {
		expect_row(rd[i], "SELECT x FROM b", "two-b");
		expect_row(rd[i], "SELECT x FROM a", "two-a");
	}
	/* Back to a, then a transaction on it that writes page 1 (b's page 1, a's cookie). */
	assert_int_equal(ws_replica_image(r, 3, a, (uint64_t)na / 4096, 4096), 0);
	expect_row(rd[0], "SELECT x FROM b", "one-b");
	uint32_t one = 1;
	assert_int_equal(ws_replica_apply(r, 4, &one, b, 1, 4096, (uint32_t)(na / 4096)), 0);
	expect_row(rd[1], "SELECT count(*) FROM sqlite_schema", "2");
	for (int i = 0; i < 2; i++)
		sqlite3_close(rd[i]);
	ws_replica_close(r);
	sqlite3_free(a);
	sqlite3_free(b);
	wt_rmrf(dir);
	free(path);
	free(dir);
}

/*
 * A rebuild with another page size rewrites the file (no reader open);
 * with a reader open it is refused, named, and the replica stays usable.
 */
static void test_page_size_change(void **state)
{
	struct wt_env env;
	int err = 0;
	(void)state;
	wt_env_init(&env, "replica-pagesize", 1024);
	wt_write_txn(env.w, 20, 300);
	sqlite3_int64 n = 0;
	uint8_t *img = sqlite3_serialize(env.w, "main", &n, 0);
	char *path = wt_path(env.dir, "replica.db");
	struct ws_replica *r = ws_replica_open(path, &err);
	assert_non_null(r);
	assert_int_equal(ws_replica_image(r, 1, img, (uint64_t)n / 1024, 1024), 0);
	sqlite3 *rd = wt_open_checked(path);
	expect_row(rd, "SELECT count(*) FROM t", "20");
	expect_row(rd, "PRAGMA page_size", "1024");
	/* A 4096 image while a reader is open: refused, the replica as it was. */
	sqlite3 *w2 = NULL;
	char *p2 = wt_path(env.dir, "other.db");
	w2 = wt_writer_open(p2, 4096);
	wt_write_txn(w2, 5, 100);
	sqlite3_int64 n2 = 0;
	uint8_t *img2 = sqlite3_serialize(w2, "main", &n2, 0);
	int rc = ws_replica_image(r, 2, img2, (uint64_t)n2 / 4096, 4096);
	assert_int_equal(rc, -EBUSY);
	assert_non_null(strstr(ws_errmsg(), path));
	expect_row(rd, "SELECT count(*) FROM t", "20");
	sqlite3_close(rd);
	assert_int_equal(ws_replica_image(r, 3, img2, (uint64_t)n2 / 4096, 4096), 0);
	rd = wt_open_checked(path);
	expect_row(rd, "SELECT count(*) FROM t", "5");
	expect_row(rd, "PRAGMA page_size", "4096");
	expect_row(rd, "PRAGMA journal_mode", "wal");
	sqlite3_close(rd);
	ws_replica_close(r);
	sqlite3_close(w2);
	sqlite3_free(img);
	sqlite3_free(img2);
	free(p2);
	free(path);
	wt_env_free(&env);
}

/*
 * A host that stops reading is shed (Faulted, push_deadline): the feed
 * says so, the host subscribes again, and the replica comes back equal to
 * the writer from the new Hydrated on.
 */
static void test_faulted_resubscribe(void **state)
{
	struct wt_env env;
	struct rec rec = { .mu = PTHREAD_MUTEX_INITIALIZER };
	struct host h;
	(void)state;
	wt_env_init(&env, "replica-fault", 0);
	wt_write_txn(env.w, 3, 500);
	rec_add(&rec, env.w);
	char *replica = wt_path(env.dir, "replica.db");
	struct ws_engine *e = ev_engine_up(env.sink_url, 1, 0, UINT64_MAX, 0);
	ev_add_tenant(e, "app", env.db, 0);
	host_open(&h, e, replica, 100);
	for (int i = 0; i < 5; i++) {
		wt_write_txn(env.w, 2, 300);
		rec_add(&rec, env.w);
	}
	usleep(600 * 1000); /* past the 100 ms deadline: shed */
	for (int i = 0; i < 5; i++) {
		wt_write_txn(env.w, 2, 300);
		rec_add(&rec, env.w);
	}
	rec.done = 1;
	host_follow(&h, &rec);
	assert_true(h.resubscribed >= 1);
	host_close(&h);
	ws_engine_destroy(e);
	free(replica);
	wt_env_free(&env);
}

/* The writer's database as an image, and its page count. */
static uint8_t *image_of(sqlite3 *w, uint32_t *pages)
{
	sqlite3_int64 n = 0;
	uint8_t *img = sqlite3_serialize(w, "main", &n, 0);
	assert_non_null(img);
	*pages = (uint32_t)(n / 4096);
	return img;
}

/* Every page of img as one transaction. */
static void apply_all(struct ws_replica *r, uint64_t tx, const uint8_t *img, uint32_t pages)
{
	uint32_t *pg = malloc(pages * sizeof(*pg));
	assert_non_null(pg);
	for (uint32_t i = 0; i < pages; i++)
		pg[i] = i + 1;
	int rc = ws_replica_apply(r, tx, pg, img, pages, 4096, pages);
	if (rc)
		fail_msg("apply: %s", ws_errmsg());
	free(pg);
}

/* Three states of a 200-row table, each every row rewritten. */
static void three_states(struct wt_env *env, uint8_t **s1, uint32_t *n1, uint8_t **s2, uint32_t *n2, uint8_t **s3,
			 uint32_t *n3)
{
	wt_write_txn(env->w, 200, 300);
	*s1 = image_of(env->w, n1);
	wt_exec(env->w, "UPDATE t SET v = randomblob(300)");
	*s2 = image_of(env->w, n2);
	wt_exec(env->w, "UPDATE t SET v = randomblob(300)");
	*s3 = image_of(env->w, n3);
}

/* A reader in a read transaction that has read page 1 only (the rest is read later). */
static sqlite3 *reader_in_txn(const char *path)
{
	sqlite3 *rd = NULL;
	assert_int_equal(sqlite3_open(path, &rd), SQLITE_OK);
	sqlite3_busy_timeout(rd, 5000);
	wt_exec(rd, "BEGIN");
	expect_row(rd, "SELECT count(*) FROM sqlite_schema", "1");
	return rd;
}

/*
 * A checkpoint by another connection (returned), then transaction tx (s3):
 * rd, in its read transaction at s2, still reads s2, and s3 once it ends.
 */
static sqlite3 *ckpt_then_apply(struct ws_replica *r, const char *path, sqlite3 *rd, uint64_t tx, const uint8_t *s2,
				uint32_t n2, const uint8_t *s3, uint32_t n3)
{
	sqlite3 *ck = NULL;
	uint64_t h = 0;
	assert_int_equal(sqlite3_open(path, &ck), SQLITE_OK);
	wt_exec(ck, "PRAGMA wal_checkpoint(PASSIVE)");
	apply_all(r, tx, s3, n3);
	assert_int_equal(snapshot_hash(rd, &h), SQLITE_OK);
	assert_true(h == content_hash(s2, (uint64_t)n2 * 4096));
	wt_exec(rd, "COMMIT");
	assert_int_equal(snapshot_hash(rd, &h), SQLITE_OK);
	assert_true(h == content_hash(s3, (uint64_t)n3 * 4096));
	return ck;
}

/*
 * A WAL fully checkpointed while a reader still reads frames of it (it
 * began before the checkpoint, READ lock 1..4) is not restarted under that
 * reader: the next transaction is appended, and the reader, in the same
 * read transaction, reads exactly its snapshot. Once it ends, the WAL
 * starts over (the file grows no more).
 */
static void test_restart_waits_for_reader(void **state)
{
	struct wt_env env;
	uint32_t n1, n2, n3;
	int err = 0;
	uint64_t h = 0;
	struct stat st;
	(void)state;
	wt_env_init(&env, "replica-restart", 0);
	uint8_t *s1, *s2, *s3;
	three_states(&env, &s1, &n1, &s2, &n2, &s3, &n3);
	char *path = wt_path(env.dir, "replica.db");
	char *wal = wt_path(env.dir, "replica.db-wal");
	struct ws_replica *r = ws_replica_open(path, &err);
	assert_non_null(r);
	ws_replica_ckpt_frames(r, 1u << 30); /* no checkpoint but the test's */
	assert_int_equal(ws_replica_image(r, 1, s1, n1, 4096), 0);
	apply_all(r, 2, s2, n2);
	/* A reader at s2, reading frames (the WAL is not checkpointed yet): READ lock 1..4. */
	sqlite3 *rd = reader_in_txn(path), *ck = NULL;
	/* Everything checkpointed (the reader's mark allows it), then the next transaction. */
	ck = ckpt_then_apply(r, path, rd, 3, s2, n2, s3, n3);
	/* No reader: checkpointed, the WAL starts over and stays the size it was. */
	assert_int_equal(stat(wal, &st), 0);
	off_t size = st.st_size;
	for (uint64_t tx = 4; tx < 10; tx++) {
		wt_exec(ck, "PRAGMA wal_checkpoint(PASSIVE)");
		apply_all(r, tx, tx % 2 ? s2 : s3, tx % 2 ? n2 : n3);
	}
	assert_int_equal(stat(wal, &st), 0);
	assert_true(st.st_size <= size);
	assert_int_equal(snapshot_hash(rd, &h), SQLITE_OK);
	assert_true(h == content_hash(s2, (uint64_t)n2 * 4096));
	sqlite3_close(rd);
	sqlite3_close(ck);
	ws_replica_close(r);
	sqlite3_free(s1);
	sqlite3_free(s2);
	sqlite3_free(s3);
	free(path);
	free(wal);
	wt_env_free(&env);
}

/*
 * A reader in this process keeps its snapshot when the applier lets go of
 * its descriptors (a refused page size change): closing a descriptor of a
 * file drops every POSIX lock this process holds on it, so the reader's
 * READ lock on the -shm would go with the applier's -shm descriptor, and the
 * applier's next restart of the WAL would overwrite the frames it reads.
 */
static void test_inprocess_reader_keeps_locks(void **state)
{
	struct wt_env env;
	uint32_t n1, n2, n3;
	int err = 0;
	(void)state;
	wt_env_init(&env, "replica-inproc", 0);
	uint8_t *s1, *s2, *s3;
	three_states(&env, &s1, &n1, &s2, &n2, &s3, &n3);
	char *path = wt_path(env.dir, "replica.db");
	char *p2 = wt_path(env.dir, "small.db");
	sqlite3 *w2 = wt_writer_open(p2, 1024);
	wt_write_txn(w2, 5, 100);
	sqlite3_int64 nsmall = 0;
	uint8_t *small = sqlite3_serialize(w2, "main", &nsmall, 0);
	struct ws_replica *r = ws_replica_open(path, &err);
	assert_non_null(r);
	ws_replica_ckpt_frames(r, 1u << 30);
	assert_int_equal(ws_replica_image(r, 1, s1, n1, 4096), 0);
	apply_all(r, 2, s2, n2);
	sqlite3 *rd = reader_in_txn(path), *ck = NULL;
	/* Another page size while rd reads: refused, the applier lets go and comes back. */
	assert_int_equal(ws_replica_image(r, 3, small, (uint64_t)nsmall / 1024, 1024), -EBUSY);
	ck = ckpt_then_apply(r, path, rd, 4, s2, n2, s3, n3);
	sqlite3_close(rd);
	sqlite3_close(ck);
	ws_replica_close(r);
	sqlite3_close(w2);
	sqlite3_free(small);
	sqlite3_free(s1);
	sqlite3_free(s2);
	sqlite3_free(s3);
	free(p2);
	free(path);
	wt_env_free(&env);
}

/* The pages of to that differ from from, as one transaction (to's size); 0 or the error. */
static int apply_diff(struct ws_replica *r, uint64_t tx, const uint8_t *from, uint32_t nfrom, const uint8_t *to,
		      uint32_t nto)
{
	uint32_t *pg = malloc(nto * sizeof(*pg)), n = 0;
	uint8_t *pages = malloc((size_t)nto * 4096);
	int rc = -ENOMEM;
	for (uint32_t i = 0; pg && pages && i < nto; i++)
		if (i >= nfrom || memcmp(from + (size_t)i * 4096, to + (size_t)i * 4096, 4096) != 0) {
			pg[n] = i + 1;
			memcpy(pages + (size_t)n++ * 4096, to + (size_t)i * 4096, 4096);
		}
	if (pg && pages)
		rc = ws_replica_apply(r, tx, pg, pages, n, 4096, nto);
	free(pg);
	free(pages);
	return rc;
}

/* The child of test_recovery_after_crash: s1, s2 (restarting the WAL), s3's changed pages, then killed. */
static void crash_child(const char *path, const uint8_t *s1, uint32_t n1, const uint8_t *s2, uint32_t n2,
			const uint8_t *s3, uint32_t n3)
{
	int err = 0;
	struct ws_replica *r = ws_replica_open(path, &err);
	if (!r)
		_exit(2);
	ws_replica_ckpt_frames(r, 1); /* each transaction checkpointed: the next restarts the WAL */
	if (ws_replica_image(r, 1, s1, n1, 4096) || ws_replica_image(r, 2, s2, n2, 4096))
		_exit(3);
	ws_replica_ckpt_frames(r, 1u << 30); /* the last stays in the WAL only */
	if (apply_diff(r, 3, s2, n2, s3, n3))
		_exit(4);
	kill(getpid(), SIGKILL);
}

/*
 * The applier killed after a transaction that restarted the WAL, frames
 * of the generation before it still in the file past it, and the -shm
 * gone: SQLite rebuilds the wal-index from the WAL file alone
 * (walIndexRecover: the header's checksum, the salts, every frame's
 * checksum chain and the commit frame's size) and reads the last state;
 * a new applier opens the file and goes on.
 */
static void test_recovery_after_crash(void **state)
{
	struct wt_env env;
	uint32_t n1, n2, n3;
	uint64_t h = 0;
	int status = 0, err = 0;
	struct stat st;
	(void)state;
	wt_env_init(&env, "replica-crash", 0);
	uint8_t *s1, *s2, *s3;
	three_states(&env, &s1, &n1, &s2, &n2, &s3, &n3);
	wt_exec(env.w, "DELETE FROM t WHERE rowid % 2 = 0");
	uint32_t n4;
	uint8_t *s4 = image_of(env.w, &n4);
	char *path = wt_path(env.dir, "replica.db");
	char *shm = wt_path(env.dir, "replica.db-shm");
	char *wal = wt_path(env.dir, "replica.db-wal");
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		crash_child(path, s1, n1, s2, n2, s3, n3);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	assert_int_equal(stat(wal, &st), 0);
	assert_true((uint64_t)st.st_size > ws_wal_frame_offset(4096, n2)); /* the older generation's frames */
	assert_int_equal(unlink(shm), 0);
	sqlite3 *rd = wt_open_checked(path);
	assert_int_equal(snapshot_hash(rd, &h), SQLITE_OK);
	assert_true(h == content_hash(s3, (uint64_t)n3 * 4096));
	struct ws_replica *r = ws_replica_open(path, &err);
	assert_non_null(r);
	assert_int_equal(apply_diff(r, 4, s3, n3, s4, n4), 0);
	assert_int_equal(snapshot_hash(rd, &h), SQLITE_OK);
	assert_true(h == content_hash(s4, (uint64_t)n4 * 4096));
	sqlite3_close(rd);
	ws_replica_close(r);
	sqlite3_free(s1);
	sqlite3_free(s2);
	sqlite3_free(s3);
	sqlite3_free(s4);
	free(path);
	free(shm);
	free(wal);
	wt_env_free(&env);
}

/* ---- bad input --------------------------------------------------------------- */

static void expect_open_fails(const char *path, int code, const char *words)
{
	int err = 0;
	struct ws_replica *r = ws_replica_open(path, &err);
	if (r)
		fail_msg("%s opened as a replica", path);
	assert_int_equal(err, code);
	if (!strstr(ws_errmsg(), path) || !strstr(ws_errmsg(), words))
		fail_msg("message: %s", ws_errmsg());
}

/* Not a database, a directory, in use by a writer (SQLite's, or a second applier); no file changed. */
static void test_bad_replica_files(void **state)
{
	char *dir = wt_tmpdir("replica-bad");
	char *text = wt_path(dir, "notes.txt");
	char *path = wt_path(dir, "replica.db");
	int err = 0;
	(void)state;
	const char junk[] = "this is a text file, and a long one: longer than a database header of 100 bytes."
			    "................................................................................";
	assert_int_equal(wt_write_file(text, junk, sizeof(junk)), 0);
	expect_open_fails(text, WS_EFORMAT, "not a SQLite database");
	size_t len = 0;
	uint8_t *after = wt_read_file(text, &len);
	assert_int_equal(len, sizeof(junk));
	assert_memory_equal(after, junk, len);
	free(after);
	expect_open_fails(dir, -EISDIR, "cannot open it");

	/* A writer in the middle of a transaction holds the write lock. */
	sqlite3 *w = wt_writer_open(path, 0);
	wt_exec(w, "BEGIN IMMEDIATE");
	wt_exec(w, "INSERT INTO t(v) VALUES(1)");
	expect_open_fails(path, -EBUSY, "in use by another writer");
	wt_exec(w, "COMMIT");
	/* Open, the replica keeps every other writer out. */
	struct ws_replica *r = ws_replica_open(path, &err);
	assert_non_null(r);
	assert_int_not_equal(sqlite3_exec(w, "INSERT INTO t(v) VALUES(2)", NULL, NULL, NULL), SQLITE_OK);
	expect_open_fails(path, -EBUSY, "in use by another writer");
	ws_replica_close(r);
	sqlite3_close(w);
	wt_rmrf(dir);
	free(text);
	free(path);
	free(dir);
}

/* A directory with database a ("one") as an image, for a replica at path. */
struct onefx {
	char *dir, *path;
	uint8_t *a;
	sqlite3_int64 na;
};

static void one_up(struct onefx *x, const char *tag)
{
	x->dir = wt_tmpdir(tag);
	x->path = wt_path(x->dir, "replica.db");
	x->a = two_tables(x->dir, "a.db", false, "one", &x->na);
}

/* The replica still holds a, sound: the refusals changed nothing. */
static void one_down(struct onefx *x)
{
	sqlite3 *rd = wt_open_checked(x->path);
	expect_row(rd, "SELECT x FROM b", "one-b");
	sqlite3_close(rd);
	sqlite3_free(x->a);
	wt_rmrf(x->dir);
	free(x->path);
	free(x->dir);
}

/* Images and transactions the applier refuses, each named; the replica unchanged. */
static void test_bad_transactions(void **state)
{
	struct onefx x;
	one_up(&x, "replica-badtx");
	uint8_t page[4096];
	uint32_t pg = 2, zero = 0, one = 1;
	int err = 0;
	(void)state;
	assert_null(ws_replica_open(NULL, &err));
	assert_int_equal(err, WS_ECONFIG);
	struct ws_replica *r = ws_replica_open(x.path, &err);
	assert_non_null(r);
	memset(page, 'x', sizeof(page));
	assert_int_equal(ws_replica_image(r, 1, page, 1, 4096), WS_EFORMAT);
	assert_int_equal(ws_replica_image(r, 1, x.a, (uint64_t)x.na / 4096, 1000), WS_EFORMAT);
	assert_int_equal(ws_replica_image(r, 1, x.a, (uint64_t)x.na / 4096, 2048), WS_EFORMAT);
	assert_int_equal(ws_replica_image(r, 1, x.a, 0, 4096), WS_EFORMAT);
	assert_int_equal(ws_replica_image(r, 5, x.a, (uint64_t)x.na / 4096, 4096), 0);
	assert_int_equal(ws_replica_apply(r, 5, &pg, page, 1, 4096, 3), WS_ECONFIG); /* not after 5 */
	assert_int_equal(ws_replica_apply(r, 6, &pg, page, 1, 1024, 3), WS_ECONFIG); /* page size */
	assert_non_null(strstr(ws_errmsg(), "rebuild"));
	assert_int_equal(ws_replica_apply(r, 6, &zero, page, 1, 4096, 3), WS_ECONFIG);
	assert_int_equal(ws_replica_apply(r, 6, &one, page, 1, 4096, 3), WS_EFORMAT); /* page 1 not a header */
	assert_int_equal(ws_replica_apply(r, 6, &pg, page, 0, 4096, 3), WS_ECONFIG);
	assert_int_equal(ws_replica_apply(r, 6, &pg, page, 1, 4096, 0), WS_ECONFIG);
	pg = 9;
	assert_int_equal(ws_replica_apply(r, 6, &pg, page, 1, 4096, 3), WS_EFORMAT); /* nothing within 3 pages */
	assert_int_equal(ws_replica_apply(NULL, 6, &pg, page, 1, 4096, 3), WS_ECONFIG);
	ws_replica_close(r);
	one_down(&x);
}

/*
 * Events the feed refuses, built by hand (the channel never sends them:
 * this is the feed's own check of its input): pages before any Hydrated,
 * of another page size, at or before the last transaction, a Progressed
 * before its commit's slice, a transaction past pending_bytes_max; a
 * Faulted asks for a new subscription; NULLs.
 */
static void test_feed_bad_events(void **state)
{
	struct onefx x;
	one_up(&x, "replica-feed");
	uint8_t page[4096] = { 0 };
	uint32_t pg = 2;
	int err = 0;
	(void)state;
	struct ws_replica *r = ws_replica_open(x.path, &err);
	assert_non_null(r);
	struct ws_replica_feed *f = ws_replica_feed_new(r, 8192, &err);
	assert_non_null(f);
	assert_null(ws_replica_feed_new(NULL, 0, &err));
	assert_int_equal(err, WS_ECONFIG);
	struct ws_event ch = { .kind = WS_EVENT_UPDATE, .tenant = "app" };
	ch.u.update.kind = WS_UPDATE_CHANGED;
	ch.u.update.page_size = 4096;
	ch.u.update.u.changed = (typeof(ch.u.update.u.changed)){ .position = 10, .count = 1, .pgno = &pg, .pages = page };
	assert_int_equal(ws_replica_feed(f, &ch), WS_EFORMAT); /* before any Hydrated */
	struct ws_event hy = { .kind = WS_EVENT_UPDATE, .tenant = "app" };
	hy.u.update.kind = WS_UPDATE_HYDRATED;
	hy.u.update.page_size = 4096;
	hy.u.update.u.hydrated.tx_id = 5;
	hy.u.update.u.hydrated.image = x.a;
	hy.u.update.u.hydrated.pages = (uint64_t)x.na / 4096;
	assert_int_equal(ws_replica_feed(f, &hy), 0);
	struct ws_event pr = { .kind = WS_EVENT_PROGRESSED, .tenant = "app" };
	pr.u.progressed.tx_id = 10;
	assert_int_equal(ws_replica_feed(f, &pr), 0); /* nothing buffered: nothing to do */
	assert_int_equal(ws_replica_feed(f, &ch), 0);
	assert_int_equal(ws_replica_feed(f, &pr), WS_EFORMAT); /* no commit slice yet */
	assert_int_equal(ws_replica_feed(f, &ch), WS_EFORMAT); /* after an error, nothing before a Hydrated */
	assert_int_equal(ws_replica_feed(f, &hy), 0);
	ch.u.update.page_size = 1024;
	assert_int_equal(ws_replica_feed(f, &ch), WS_EFORMAT); /* another page size */
	assert_int_equal(ws_replica_feed(f, &hy), 0);
	ch.u.update.page_size = 4096;
	ch.u.update.u.changed.position = 5;
	assert_int_equal(ws_replica_feed(f, &ch), WS_EFORMAT); /* at the last transaction */
	assert_int_equal(ws_replica_feed(f, &hy), 0);
	ch.u.update.u.changed.position = 10;
	assert_int_equal(ws_replica_feed(f, &ch), 0);
	assert_int_equal(ws_replica_feed(f, &ch), 0);
	assert_int_equal(ws_replica_feed(f, &ch), WS_ETOOBIG); /* 3 pages past 8 KiB */
	struct ws_event fa = { .kind = WS_EVENT_FAULTED, .tenant = "app" };
	assert_int_equal(ws_replica_feed(f, &fa), 1);
	assert_int_equal(ws_replica_feed(NULL, &fa), WS_ECONFIG);
	assert_int_equal(ws_replica_feed(f, NULL), WS_ECONFIG);
	struct ws_replica_feed_stats st;
	ws_replica_feed_stats(f, &st);
	assert_int_equal(st.images, 4);
	assert_int_equal(st.faults, 1);
	assert_int_equal(st.applied, 0);
	ws_replica_feed_free(f);
	ws_replica_close(r);
	one_down(&x);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_follow_writer),
		cmocka_unit_test(test_cookie_across_rebuild),
		cmocka_unit_test(test_page_size_change),
		cmocka_unit_test(test_faulted_resubscribe),
		cmocka_unit_test(test_restart_waits_for_reader),
		cmocka_unit_test(test_inprocess_reader_keeps_locks),
		cmocka_unit_test(test_recovery_after_crash),
		cmocka_unit_test(test_bad_replica_files),
		cmocka_unit_test(test_bad_transactions),
		cmocka_unit_test(test_feed_bad_events),
	};
	return WT_RUN_GROUP(tests, NULL, NULL);
}
