/*
 * The event channel (docs/EVENTS.md) under a real writer: latency, cost to
 * the shard, shedding, and subscription, as figures and ratios measured in
 * one run (docs/EVENTS.md, "Benchmark").
 *
 *   bench_events [--tiny] [--rate N] [--secs S] [--reps N] [--subs N] [--hyd-subs N] [--tenants N]
 *                [--shards N] [--burst-mb N] [--ring-mb N] [--lag-kb N] [--deadline-ms N]
 *                [--tails-in-flight N] [--carry pressed|always|never] [--no-read-ahead] [--latency-only]
 *                [--combined]
 *                [--sink-dir DIR] [--dir DIR] [--keep]
 *
 * One engine over a file:// sink (--sink-dir; default under the build's
 * testtmp: pass a tmpfs directory to take the disk's fsyncs out). Tenants:
 * "app" (4 KiB pages, 100 rows, one page rewritten per transaction), written
 * by a real SQLite writer thread at --rate transactions per second (default
 * 1,000) whenever a phase runs; "burst" (1 MiB of rows); --tenants - 1 more
 * ("bg1".."bgN", a background writer spreads 50 tx/s each among them), all
 * shipped by the engine. The writer stamps every commit from SQLite's WAL
 * hook (the commit frame, its time); a channel that reads Progressed{tx_id}
 * of app records when it read it; commit -> Progressed is the difference,
 * matched on the commit frame (the WAL is never restarted here).
 *
 * Interleaved --reps times, each phase:
 *  (L) --secs of the paced writer with one channel, one query on app, read
 *      by a thread: commit -> Progressed p50, p99 (targets <= 1 ms, <= 10
 *      ms), the channel's events/s, how often app was tailed (a tail every
 *      N ms: the shard tails one tenant at a time); the same with a second
 *      channel on app that never reads (stalled): the time from its stall
 *      to the shard's shed (push_deadline, the "shed at" in its Faulted;
 *      target within --deadline-ms), and the healthy channel's p99 with it
 *      / without (target < 10% move).
 *  (T) a burst of --burst-mb MiB written to "burst" as fast as SQLite
 *      goes (16 rows of 4000 bytes a transaction), then ws_engine_flush:
 *      shipping frames/s and MB/s from the burst's start to the flush's
 *      end, with --subs queries on burst (on 4 channels, each drained by a
 *      thread) and with none: the ratio (target >= 0.9), and the channels'
 *      events/s and page MB/s next to the ring's frames/s.
 *  (H) --hyd-subs subscriptions (8 channels, each a thread subscribing its
 *      share in turn over the tenants app, bg*; all start at once, the
 *      paced writer on): the time from the start to each subscribe's
 *      return (its Hydrated is on the channel), p50 and p95 (target p95 <
 *      1 s), against one subscription alone in the same repetition.
 *
 * --combined (2 shards or more: app on shard 0, burst on shard 1) makes
 * (T)'s subscriptions combined queries on {burst, app}, with app written
 * at --rate in both of (T)'s runs (with and without them): both workers
 * busy, each burst Progressed asking shard 0 for a marker whenever app has
 * nothing newer (docs/EVENTS.md "Markers"); the markers read per second
 * are shown.
 * --latency-only runs (L) alone; --tails-in-flight sets the shards'
 * tails_in_flight (1: one tail at a time, the baseline of tails in flight);
 * --carry the engine's carry_in_watermark (default pressed); --no-read-ahead
 * sets read_ahead_off (app's events wait for its next tail to read its
 * commits: the baseline of reading ahead, docs/EVENTS.md "Latency").
 * Medians over the repetitions, with min..max. --tiny: a seconds-long
 * smoke. The exit status is 0 unless something failed (an error, a fault
 * where none may come, no figure); targets are reported, never enforced.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <ftw.h>
#include <inttypes.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "walship.h"

#ifndef WS_BENCH_TESTTMP
#define WS_BENCH_TESTTMP "/tmp"
#endif
#define REPS_MAX 99
#define TENANTS_MAX 256
#define READERS_MAX 8
#define BG_RATE 50u

struct opts {
	unsigned rate, reps, subs, hyd_subs, tenants, shards, burst_mb, deadline_ms, tails_in_flight;
	double secs;
	uint64_t ring_bytes, lag_bytes;
	const char *sink_dir, *dir;
	bool keep, tiny, latency_only, no_read_ahead, combined;
	enum ws_carry carry;
};

static void usage(void)
{
	fprintf(stderr, "usage: bench_events [--tiny] [--rate N] [--secs S] [--reps N] [--subs N] [--hyd-subs N]\n"
			"                    [--tenants N] [--shards N] [--burst-mb N] [--ring-mb N] [--lag-kb N]\n"
			"                    [--deadline-ms N] [--tails-in-flight N] [--carry pressed|always|never]\n"
			"                    [--no-read-ahead] [--latency-only] [--combined]\n"
			"                    [--sink-dir DIR] [--dir DIR] [--keep]\n");
	exit(2);
}

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void exec_sql(sqlite3 *db, const char *sql)
{
	char *err = NULL;
	if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK)
		bench_die("sqlite: %s: %s", sql, err ? err : sqlite3_errmsg(db));
}

static sqlite3 *db_open(const char *path)
{
	sqlite3 *db = NULL;
	if (sqlite3_open(path, &db) != SQLITE_OK)
		bench_die("open %s: %s", path, sqlite3_errmsg(db));
	sqlite3_busy_timeout(db, 10000);
	exec_sql(db, "PRAGMA page_size=4096; PRAGMA journal_mode=WAL; PRAGMA wal_autocheckpoint=0;"
		     "PRAGMA synchronous=OFF; CREATE TABLE IF NOT EXISTS t(id INTEGER PRIMARY KEY, v BLOB)");
	return db;
}

/* A database of rows rows of bytes bytes each. */
static void db_create(const char *path, unsigned rows, unsigned bytes)
{
	char sql[256];
	sqlite3 *db = db_open(path);
	snprintf(sql, sizeof(sql), "WITH RECURSIVE s(x) AS (SELECT 0 UNION ALL SELECT x + 1 FROM s WHERE x + 1 < %u) "
		 "INSERT OR REPLACE INTO t(id, v) SELECT x, randomblob(%u) FROM s", rows, bytes);
	exec_sql(db, sql);
	sqlite3_close(db);
}

/* ---- percentiles ------------------------------------------------------------ */

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

/* The p-th percentile (0 < p <= 1) of n values, sorted in place; in ms. */
static double pct_ms(int64_t *v, size_t n, double p)
{
	size_t k;
	if (n == 0)
		return -1;
	qsort(v, n, sizeof(*v), cmp_i64);
	k = (size_t)(p * (double)n + 0.999999);
	return (double)v[k ? k - 1 : 0] / 1e6;
}

struct series {
	const char *name, *unit;
	double v[REPS_MAX];
	unsigned n;
};

static void put(struct series *s, double v) { s->v[s->n++] = v; }

static double med(const struct series *s) { return s->n ? bench_median(s->v, s->n) : -1; }

static void show(const struct series *s)
{
	double lo = s->v[0], hi = s->v[0];
	if (!s->n)
		bench_die("no figure for %s", s->name);
	for (unsigned i = 1; i < s->n; i++) {
		lo = s->v[i] < lo ? s->v[i] : lo;
		hi = s->v[i] > hi ? s->v[i] : hi;
	}
	printf("  %-44s median %10.3f %-8s (min %.3f .. max %.3f, %u reps)\n", s->name, med(s), s->unit, lo, hi, s->n);
}

/* ---- the paced writer of app ------------------------------------------------- */

struct writer {
	sqlite3 *db;
	sqlite3_stmt *st;
	unsigned rate;
	int64_t *stamp;          /* by commit frame: when the commit was made (0: none) */
	uint64_t cap;
	unsigned k;
	volatile int run;        /* 1 while a phase writes */
	volatile int quit;
	pthread_t th;
};

static int on_wal(void *arg, sqlite3 *db, const char *name, int frames)
{
	struct writer *w = arg;
	(void)db;
	(void)name;
	if ((uint64_t)frames < w->cap)
		__atomic_store_n(&w->stamp[frames], now_ns(), __ATOMIC_RELAXED);
	return SQLITE_OK;
}

static void writer_txn(struct writer *w)
{
	sqlite3_bind_int(w->st, 1, (int)(w->k++ % 100));
	if (sqlite3_step(w->st) != SQLITE_DONE)
		bench_die("app writer: %s", sqlite3_errmsg(w->db));
	sqlite3_reset(w->st);
}

static void sleep_until(int64_t t)
{
	struct timespec ts = { .tv_sec = t / 1000000000, .tv_nsec = t % 1000000000 };
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	const int64_t gap = 1000000000 / (int64_t)w->rate;
	int64_t next = now_ns();
	while (!__atomic_load_n(&w->quit, __ATOMIC_ACQUIRE)) {
		if (!__atomic_load_n(&w->run, __ATOMIC_ACQUIRE)) {
			usleep(1000);
			next = now_ns();
			continue;
		}
		writer_txn(w);
		next += gap;
		if (next < now_ns() - 100 * gap)
			next = now_ns(); /* fell far behind: no catching up in a rush */
		sleep_until(next);
	}
	return NULL;
}

static void writer_start(struct writer *w, const char *db, unsigned rate, uint64_t cap)
{
	w->db = db_open(db);
	w->rate = rate;
	w->cap = cap;
	w->stamp = calloc(cap, sizeof(*w->stamp));
	if (!w->stamp)
		bench_die("out of memory");
	if (sqlite3_prepare_v2(w->db, "UPDATE t SET v = randomblob(100) WHERE id = ?", -1, &w->st, NULL) != SQLITE_OK)
		bench_die("app writer: %s", sqlite3_errmsg(w->db));
	sqlite3_wal_hook(w->db, on_wal, w);
	if (pthread_create(&w->th, NULL, writer_main, w) != 0)
		bench_die("writer thread");
}

static void writer_stop(struct writer *w)
{
	__atomic_store_n(&w->quit, 1, __ATOMIC_RELEASE);
	pthread_join(w->th, NULL);
	sqlite3_finalize(w->st);
	sqlite3_close(w->db);
	free(w->stamp);
}

/* ---- the background writer of bg1..bgN ---------------------------------------- */

struct bg {
	sqlite3 *db[TENANTS_MAX];
	unsigned n;
	volatile int quit;
	pthread_t th;
};

static void *bg_main(void *arg)
{
	struct bg *b = arg;
	const int64_t gap = 1000000000 / ((int64_t)BG_RATE * b->n);
	int64_t next = now_ns();
	for (unsigned k = 0; !__atomic_load_n(&b->quit, __ATOMIC_ACQUIRE); k++) {
		exec_sql(b->db[k % b->n], "UPDATE t SET v = randomblob(100) WHERE id = abs(random()) % 100");
		next += gap;
		sleep_until(next);
	}
	return NULL;
}

/* ---- the world: dirs, databases, the engine -------------------------------------- */

struct world {
	char dir[4096], sink[4096];
	char names[TENANTS_MAX][32];
	unsigned ntenants;        /* app, burst, bg1.. */
	struct ws_engine *e;
	struct writer w;
	struct bg bg;
	sqlite3 *burst;
	unsigned burst_k;
};

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
	(void)sb;
	(void)flag;
	(void)f;
	return remove(p);
}

static void db_path(const struct world *w, const char *name, char *out, size_t cap)
{
	snprintf(out, cap, "%s/%s.db", w->dir, name);
}

static void engine_up(struct world *w, const struct opts *o)
{
	struct ws_shard_config sc[16];
	struct ws_engine_config ec;
	char url[4200];
	int err = 0;
	for (unsigned i = 0; i < o->shards; i++) {
		ws_shard_config_default(&sc[i]);
		if (o->tails_in_flight)
			sc[i].tails_in_flight = o->tails_in_flight;
		sc[i].carry = o->carry;
		sc[i].read_ahead_off = o->no_read_ahead;
	}
	snprintf(url, sizeof(url), "file://%s", w->sink);
	memset(&ec, 0, sizeof(ec));
	ec.sink_url = url;
	ec.shards = o->shards;
	ec.shard = sc;
	ec.epoch = 1;
	ec.pointer_generation = 1;
	ec.wal_checkpoint_bytes = UINT64_MAX; /* the WAL is never restarted: commit frames are unique */
	ec.events_ring_bytes = o->ring_bytes;
	w->e = ws_engine_create(&ec, &err);
	if (!w->e)
		bench_die("engine: %s", ws_errmsg());
	for (unsigned i = 0; i < w->ntenants; i++) {
		char db[4200];
		db_path(w, w->names[i], db, sizeof(db));
		struct ws_tenant_config tc = { .name = w->names[i], .db_path = db, .shard = (int)(i % o->shards) };
		if (ws_engine_add_tenant(w->e, &tc) != 0)
			bench_die("add %s: %s", w->names[i], ws_errmsg());
	}
	if (ws_engine_flush(w->e) != 0)
		bench_die("first flush: %s", ws_errmsg());
}

static void world_up(struct world *w, const struct opts *o)
{
	char db[4200];
	snprintf(w->dir, sizeof(w->dir), "%s/bench-events-%d", o->dir, (int)getpid());
	snprintf(w->sink, sizeof(w->sink), "%s/bench-events-sink-%d", o->sink_dir, (int)getpid());
	if (mkdir(w->dir, 0700) != 0 || mkdir(w->sink, 0700) != 0)
		bench_die("mkdir %s, %s: %s", w->dir, w->sink, strerror(errno));
	w->ntenants = o->tenants + 1;
	snprintf(w->names[0], sizeof(w->names[0]), "app");
	snprintf(w->names[1], sizeof(w->names[1]), "burst");
	for (unsigned i = 2; i < w->ntenants; i++)
		snprintf(w->names[i], sizeof(w->names[i]), "bg%u", i - 1);
	for (unsigned i = 0; i < w->ntenants; i++) {
		db_path(w, w->names[i], db, sizeof(db));
		db_create(db, i == 1 ? 256 : 100, i == 1 ? 4000 : 100);
	}
	engine_up(w, o);
	db_path(w, "app", db, sizeof(db));
	/* Frames of app: one a transaction, every phase's, with room to spare. */
	writer_start(&w->w, db, o->rate,
		     (uint64_t)((double)o->rate * o->secs * 4.0 + 4.0 * o->rate + 1000.0) * o->reps + 100000 +
			     /* --combined: app written through (T) too (a minute a rep is room to spare) */
			     (o->combined ? (uint64_t)o->rate * 60 * o->reps : 0));
	db_path(w, "burst", db, sizeof(db));
	w->burst = db_open(db);
	w->bg.n = w->ntenants - 2;
	for (unsigned i = 0; i < w->bg.n; i++) {
		db_path(w, w->names[i + 2], db, sizeof(db));
		w->bg.db[i] = db_open(db);
	}
	if (w->bg.n && pthread_create(&w->bg.th, NULL, bg_main, &w->bg) != 0)
		bench_die("background writer thread");
}

static void world_down(struct world *w, const struct opts *o)
{
	writer_stop(&w->w);
	if (w->bg.n) {
		__atomic_store_n(&w->bg.quit, 1, __ATOMIC_RELEASE);
		pthread_join(w->bg.th, NULL);
	}
	for (unsigned i = 0; i < w->bg.n; i++)
		sqlite3_close(w->bg.db[i]);
	sqlite3_close(w->burst);
	if (ws_engine_stop(w->e) != 0)
		bench_die("engine stop: %s", ws_errmsg());
	ws_engine_destroy(w->e);
	if (!o->keep) {
		nftw(w->dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
		nftw(w->sink, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
	}
}

/* ---- a channel read by a thread --------------------------------------------------- */

struct reader {
	struct ws_events *ev;
	const struct opts *o;
	struct world *w;
	const char *tenant;       /* its queries' tenant */
	const char *tenant2;      /* and a second one (a combined query), or NULL */
	unsigned nq;              /* its queries */
	uint64_t markers;         /* Progressed at a tenant's tx_id already seen (docs/EVENTS.md "Markers") */
	uint64_t last_tx[2];      /* tenant's, tenant2's last Progressed tx_id */
	int64_t *prog;            /* by app's commit frame: when its Progressed was read (NULL: not kept) */
	uint64_t events, page_bytes;
	unsigned faults;          /* its queries shed (push_deadline) */
	volatile int quit;
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool ready;
	uint64_t *q;
};

static struct ws_events *chan_open(struct world *w, const struct opts *o)
{
	struct ws_events_config c = { .deadline_ms = o->deadline_ms, .lag_bytes_max = o->lag_bytes };
	int err = 0;
	struct ws_events *ev = ws_events_open(w->e, &c, &err);
	if (!ev)
		bench_die("events open: %s", ws_errmsg());
	return ev;
}

static uint64_t subscribe2(struct ws_events *ev, const char *tenant, const char *tenant2)
{
	const char *t[2] = { tenant, tenant2 };
	uint64_t q = 0;
	if (ws_events_subscribe(ev, t, tenant2 ? 2 : 1, &q) != 0)
		bench_die("subscribe %s%s%s: %s", tenant, tenant2 ? "," : "", tenant2 ? tenant2 : "", ws_errmsg());
	return q;
}

static uint64_t subscribe1(struct ws_events *ev, const char *tenant) { return subscribe2(ev, tenant, NULL); }

/* A Faulted other than push_deadline is a failure; a shed is counted. */
static void shed_ok(const struct ws_event *e, unsigned *shed)
{
	if (e->u.faulted.cause != WS_CAUSE_PUSH_DEADLINE)
		bench_die("a query faulted: %s (%s)", e->u.faulted.reason, ws_fault_cause_name(e->u.faulted.cause));
	if (!(*shed)++)
		fprintf(stderr, "bench_events: a query was shed: %s\n", e->u.faulted.reason);
}

static void count(struct reader *r, const struct ws_event *e)
{
	__atomic_fetch_add(&r->events, 1, __ATOMIC_RELAXED); /* read by the main thread meanwhile */
	if (e->kind == WS_EVENT_FAULTED) {
		shed_ok(e, &r->faults);
	} else if (e->kind == WS_EVENT_UPDATE && e->u.update.kind == WS_UPDATE_CHANGED) {
		r->page_bytes += (uint64_t)e->u.update.u.changed.count * e->u.update.page_size;
	} else if (e->kind == WS_EVENT_PROGRESSED) {
		const int k = r->tenant2 && e->tenant && strcmp(e->tenant, r->tenant2) == 0;
		if (r->last_tx[k] == e->u.progressed.tx_id)
			r->markers++;
		r->last_tx[k] = e->u.progressed.tx_id;
		if (r->prog && WS_TX_FRAME(e->u.progressed.tx_id) < r->w->w.cap)
			r->prog[WS_TX_FRAME(e->u.progressed.tx_id)] = now_ns();
	}
}

static void *reader_main(void *arg)
{
	struct reader *r = arg;
	struct ws_event e;
	for (unsigned i = 0; i < r->nq; i++)
		r->q[i] = subscribe2(r->ev, r->tenant, r->tenant2);
	pthread_mutex_lock(&r->mu);
	r->ready = true;
	pthread_cond_signal(&r->cv);
	pthread_mutex_unlock(&r->mu);
	while (!__atomic_load_n(&r->quit, __ATOMIC_ACQUIRE)) {
		int rc = ws_events_next(r->ev, &e, 20);
		if (rc == 0)
			count(r, &e);
		else if (rc != -EAGAIN)
			bench_die("events next: %s", ws_errmsg());
	}
	while (ws_events_next(r->ev, &e, 0) == 0)
		count(r, &e);
	for (unsigned i = 0; i < r->nq; i++)
		if (ws_events_unsubscribe(r->ev, r->q[i]) != 0 && !r->faults)
			bench_die("unsubscribe: %s", ws_errmsg());
	return NULL;
}

/* Opens a channel, subscribes nq queries on tenant from its thread, returns once they are hydrated. */
static void reader_start2(struct reader *r, struct world *w, const struct opts *o, const char *tenant,
			  const char *tenant2, unsigned nq, int64_t *prog)
{
	memset(r, 0, sizeof(*r));
	r->ev = chan_open(w, o);
	r->o = o;
	r->w = w;
	r->tenant = tenant;
	r->tenant2 = tenant2;
	r->nq = nq;
	r->prog = prog;
	r->q = calloc(nq ? nq : 1, sizeof(*r->q));
	pthread_mutex_init(&r->mu, NULL);
	pthread_cond_init(&r->cv, NULL);
	if (!r->q || pthread_create(&r->th, NULL, reader_main, r) != 0)
		bench_die("reader thread");
	pthread_mutex_lock(&r->mu);
	while (!r->ready)
		pthread_cond_wait(&r->cv, &r->mu);
	pthread_mutex_unlock(&r->mu);
}

static void reader_start(struct reader *r, struct world *w, const struct opts *o, const char *tenant, unsigned nq,
			 int64_t *prog)
{
	reader_start2(r, w, o, tenant, NULL, nq, prog);
}

static void reader_stop(struct reader *r)
{
	__atomic_store_n(&r->quit, 1, __ATOMIC_RELEASE);
	pthread_join(r->th, NULL);
	ws_events_close(r->ev);
	pthread_mutex_destroy(&r->mu);
	pthread_cond_destroy(&r->cv);
	free(r->q);
}

/* ---- (L) latency, with and without a stalled channel -------------------------------- */

struct lat_res {
	double p50, p99, events_s, shed_ms;
	double tail_ms;            /* the writing's time over app's tails in it: one tail every this long */
	double ahead;              /* the share of app's frames shipped that were read ahead of their tail */
	unsigned missing, commits;
	bool by_lag;               /* the stalled channel was shed by lag_bytes_max, not its deadline */
};

/* The commits of app stamped in this run, matched against prog. */
static void lat_figures(struct world *w, const int64_t *prog, struct lat_res *out)
{
	size_t n = 0, cap = 1024;
	int64_t *d = malloc(cap * sizeof(*d));
	out->missing = out->commits = 0;
	for (uint64_t f = 1; f < w->w.cap && d; f++) {
		int64_t s = __atomic_load_n(&w->w.stamp[f], __ATOMIC_RELAXED);
		if (!s)
			continue;
		out->commits++;
		if (!prog[f]) {
			out->missing++;
			continue;
		}
		if (n == cap && !(d = realloc(d, (cap *= 2) * sizeof(*d))))
			break;
		d[n++] = prog[f] - s > 0 ? prog[f] - s : 0;
	}
	if (!d)
		bench_die("out of memory");
	out->p50 = pct_ms(d, n, 0.50);
	out->p99 = pct_ms(d, n, 0.99);
	free(d);
}

/* The stalled channel's Faulted: push_deadline, and when ("shed at N ms"), by its lag bound or its
 * deadline (*by_lag); read past twice its deadline. */
static double stalled_shed_ms(struct ws_events *ev, int64_t stall_ns, unsigned deadline_ms, bool *by_lag)
{
	struct ws_event e;
	long long at_ms;
	sleep_until(stall_ns + (int64_t)deadline_ms * 2000000 + 100000000);
	for (;;) {
		int rc = ws_events_next(ev, &e, 2000);
		if (rc)
			bench_die("the stalled channel was never shed (no Faulted)");
		if (e.kind == WS_EVENT_FAULTED)
			break;
	}
	const char *p = strstr(e.u.faulted.reason, "shed at ");
	if (e.u.faulted.cause != WS_CAUSE_PUSH_DEADLINE || !p || sscanf(p, "shed at %lld ms", &at_ms) != 1)
		bench_die("the stalled channel faulted otherwise: %s (%s)", e.u.faulted.reason,
			  ws_fault_cause_name(e.u.faulted.cause));
	*by_lag = strstr(e.u.faulted.reason, "lag_bytes_max") != NULL;
	return (double)at_ms - (double)stall_ns / 1e6;
}

static void lat_run(struct world *w, const struct opts *o, bool stalled, struct lat_res *out)
{
	int64_t *prog = calloc(w->w.cap, sizeof(*prog));
	struct reader r;
	struct ws_events *st = NULL;
	struct ws_event e;
	int64_t stall_ns = 0;
	if (!prog)
		bench_die("out of memory");
	memset(w->w.stamp, 0, w->w.cap * sizeof(*w->w.stamp)); /* this run counts its own commits */
	reader_start(&r, w, o, "app", 1, prog);
	if (stalled) {
		st = chan_open(w, o);
		(void)subscribe1(st, "app");
		while (ws_events_next(st, &e, 0) == 0)
			; /* its Hydrated: from here on it reads nothing */
		stall_ns = now_ns();
	}
	struct ws_tenant_metrics m0, m1;
	if (ws_engine_tenant_metrics(w->e, "app", &m0) != 0)
		bench_die("metrics: %s", ws_errmsg());
	int64_t t0 = now_ns();
	__atomic_store_n(&w->w.run, 1, __ATOMIC_RELEASE);
	usleep((useconds_t)(o->secs * 1e6));
	__atomic_store_n(&w->w.run, 0, __ATOMIC_RELEASE);
	double secs = (double)(now_ns() - t0) / 1e9; /* events/s over the writing (its last ones read below) */
	if (ws_engine_tenant_metrics(w->e, "app", &m1) != 0)
		bench_die("metrics: %s", ws_errmsg());
	out->tail_ms = secs * 1e3 / (double)(m1.tails - m0.tails ? m1.tails - m0.tails : 1);
	out->ahead = m1.frames_shipped > m0.frames_shipped ? (double)(m1.frames_read_ahead - m0.frames_read_ahead) /
								(double)(m1.frames_shipped - m0.frames_shipped)
							      : 0;
	usleep(200000); /* the last commits' Progressed */
	reader_stop(&r);
	lat_figures(w, prog, out); /* a shed healthy channel: its commits after the shed count as missing */
	out->events_s = (double)r.events / secs;
	out->shed_ms = stalled ? stalled_shed_ms(st, stall_ns, o->deadline_ms, &out->by_lag) : -1;
	if (st)
		ws_events_close(st);
	free(prog);
}

/* ---- (T) shipping a burst, with and without subscribers ------------------------------ */

struct thr_res {
	double frames_s, mb_s, events_s, event_mb_s, markers_s;
	unsigned shed;             /* channels shed (push_deadline: they fell behind the burst) */
};

static void burst(struct world *w, unsigned mb)
{
	const unsigned txns = mb * 16; /* 16 rows of 4000 bytes each: about 64 KiB of pages */
	char sql[160];
	for (unsigned i = 0; i < txns; i++) {
		snprintf(sql, sizeof(sql), "UPDATE t SET v = randomblob(4000) WHERE id >= %u AND id < %u",
			 (w->burst_k * 16) % 256, (w->burst_k * 16) % 256 + 16);
		w->burst_k++;
		exec_sql(w->burst, sql);
	}
}

static void thr_run(struct world *w, const struct opts *o, unsigned subs, struct thr_res *out)
{
	struct reader r[4];
	const unsigned nr = subs ? 4 : 0;
	struct ws_tenant_metrics m0, m1;
	uint64_t ev = 0, evb = 0, mk = 0;
	for (unsigned i = 0; i < nr; i++)
		reader_start2(&r[i], w, o, "burst", o->combined ? "app" : NULL, subs / 4 + (i < subs % 4), NULL);
	if (o->combined)
		__atomic_store_n(&w->w.run, 1, __ATOMIC_RELEASE); /* both workers busy, with or without queries */
	if (ws_engine_flush(w->e) != 0 || ws_engine_tenant_metrics(w->e, "burst", &m0) != 0)
		bench_die("burst: %s", ws_errmsg());
	uint64_t e0[4] = { 0 };
	for (unsigned i = 0; i < nr; i++)
		e0[i] = __atomic_load_n(&r[i].events, __ATOMIC_RELAXED);
	double t0 = bench_now_s();
	burst(w, o->burst_mb);
	if (ws_engine_flush(w->e) != 0)
		bench_die("burst flush: %s", ws_errmsg());
	double secs = bench_now_s() - t0;
	__atomic_store_n(&w->w.run, 0, __ATOMIC_RELEASE);
	if (ws_engine_tenant_metrics(w->e, "burst", &m1) != 0)
		bench_die("metrics: %s", ws_errmsg());
	for (unsigned i = 0; i < nr; i++) {
		ev += __atomic_load_n(&r[i].events, __ATOMIC_RELAXED) - e0[i];
		reader_stop(&r[i]);
		evb += r[i].page_bytes;
		mk += r[i].markers;
		out->shed += r[i].faults > 0;
	}
	out->frames_s = (double)(m1.frames_shipped - m0.frames_shipped) / secs;
	out->mb_s = (double)(m1.bytes_shipped - m0.bytes_shipped) / secs / 1e6;
	out->events_s = (double)ev / secs;
	out->event_mb_s = (double)evb / secs / 1e6;
	out->markers_s = (double)mk / secs;
}

/* ---- (H) many subscriptions at once --------------------------------------------------- */

struct hyd {
	struct world *w;
	const struct opts *o;
	unsigned nq, first;       /* its share of the subscriptions, and where it starts among the tenants */
	int64_t start;
	int64_t *took;            /* nq times: start -> subscribe returned */
	unsigned shed;            /* its queries shed (push_deadline) while it subscribed the others */
	pthread_barrier_t *bar;
	pthread_t th;
};

/* The tenants subscriptions spread over: app and bg*, not burst (its 1 MiB image, a thousand times). */
static const char *hyd_tenant(const struct world *w, unsigned k)
{
	unsigned n = w->ntenants - 1;
	unsigned i = k % n;
	return w->names[i == 0 ? 0 : i + 1];
}

static void *hyd_main(void *arg)
{
	struct hyd *h = arg;
	struct ws_events *ev = chan_open(h->w, h->o);
	uint64_t *q = calloc(h->nq ? h->nq : 1, sizeof(*q));
	struct ws_event e;
	if (!q)
		bench_die("out of memory");
	pthread_barrier_wait(h->bar);
	for (unsigned i = 0; i < h->nq; i++) {
		q[i] = subscribe1(ev, hyd_tenant(h->w, h->first + i));
		h->took[i] = now_ns() - h->start;
		while (ws_events_next(ev, &e, 0) == 0)
			if (e.kind == WS_EVENT_FAULTED)
				shed_ok(&e, &h->shed);
	}
	for (unsigned i = 0; i < h->nq; i++)
		if (ws_events_unsubscribe(ev, q[i]) != 0)
			bench_die("unsubscribe: %s", ws_errmsg());
	ws_events_close(ev);
	free(q);
	return NULL;
}

static void hyd_run(struct world *w, const struct opts *o, double *p50, double *p95, double *one_ms, unsigned *shed)
{
	struct hyd h[READERS_MAX];
	pthread_barrier_t bar;
	int64_t *took = calloc(o->hyd_subs, sizeof(*took));
	unsigned nt = o->hyd_subs < READERS_MAX ? o->hyd_subs : READERS_MAX, at = 0;
	if (!took)
		bench_die("out of memory");
	__atomic_store_n(&w->w.run, 1, __ATOMIC_RELEASE);
	{
		struct ws_events *ev = chan_open(w, o);
		int64_t t = now_ns();
		(void)subscribe1(ev, "app");
		*one_ms = (double)(now_ns() - t) / 1e6;
		ws_events_close(ev);
	}
	pthread_barrier_init(&bar, NULL, nt + 1);
	for (unsigned i = 0; i < nt; i++) {
		h[i] = (struct hyd){ .w = w, .o = o, .nq = o->hyd_subs / nt + (i < o->hyd_subs % nt), .first = at,
				     .took = took + at, .bar = &bar };
		at += h[i].nq;
	}
	for (unsigned i = 0; i < nt; i++)
		if (pthread_create(&h[i].th, NULL, hyd_main, &h[i]) != 0)
			bench_die("subscriber thread");
	int64_t start = now_ns();
	for (unsigned i = 0; i < nt; i++)
		h[i].start = start;
	pthread_barrier_wait(&bar);
	for (unsigned i = 0; i < nt; i++)
		pthread_join(h[i].th, NULL);
	__atomic_store_n(&w->w.run, 0, __ATOMIC_RELEASE);
	pthread_barrier_destroy(&bar);
	*shed = 0;
	for (unsigned i = 0; i < nt; i++)
		*shed += h[i].shed;
	*p50 = pct_ms(took, o->hyd_subs, 0.50);
	*p95 = pct_ms(took, o->hyd_subs, 0.95);
	free(took);
}

/* ---- main ------------------------------------------------------------------------------- */

static void parse(int argc, char **argv, struct opts *o)
{
	*o = (struct opts){ .rate = 1000, .reps = 7, .subs = 100, .hyd_subs = 1000, .tenants = 1, .shards = 1,
			    .burst_mb = 8, .deadline_ms = 500, .secs = 3, .sink_dir = WS_BENCH_TESTTMP,
			    .dir = WS_BENCH_TESTTMP };
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (strcmp(a, "--tiny") == 0) {
			o->tiny = true;
			o->rate = 500, o->reps = 3, o->subs = 8, o->hyd_subs = 40, o->burst_mb = 1, o->secs = 0.3;
			continue;
		}
		if (strcmp(a, "--keep") == 0) {
			o->keep = true;
			continue;
		}
		if (strcmp(a, "--latency-only") == 0) {
			o->latency_only = true;
			continue;
		}
		if (strcmp(a, "--no-read-ahead") == 0) {
			o->no_read_ahead = true;
			continue;
		}
		if (strcmp(a, "--combined") == 0) {
			o->combined = true;
			continue;
		}
		if (!v)
			usage();
		i++;
		if (strcmp(a, "--rate") == 0) o->rate = (unsigned)bench_parse_num(a, v, 1, 100000);
		else if (strcmp(a, "--secs") == 0) o->secs = (double)bench_parse_num(a, v, 1, 3600);
		else if (strcmp(a, "--reps") == 0) o->reps = (unsigned)bench_parse_num(a, v, 1, REPS_MAX);
		else if (strcmp(a, "--subs") == 0) o->subs = (unsigned)bench_parse_num(a, v, 4, 4000);
		else if (strcmp(a, "--hyd-subs") == 0) o->hyd_subs = (unsigned)bench_parse_num(a, v, 1, 32000);
		else if (strcmp(a, "--tenants") == 0) o->tenants = (unsigned)bench_parse_num(a, v, 1, TENANTS_MAX - 1);
		else if (strcmp(a, "--shards") == 0) o->shards = (unsigned)bench_parse_num(a, v, 1, 16);
		else if (strcmp(a, "--tails-in-flight") == 0)
			o->tails_in_flight = (unsigned)bench_parse_num(a, v, 1, WS_TAILS_IN_FLIGHT_MAX);
		else if (strcmp(a, "--burst-mb") == 0) o->burst_mb = (unsigned)bench_parse_num(a, v, 1, 4096);
		else if (strcmp(a, "--ring-mb") == 0) o->ring_bytes = bench_parse_num(a, v, 1, 4096) << 20;
		else if (strcmp(a, "--lag-kb") == 0) o->lag_bytes = bench_parse_num(a, v, 64, 4u << 20) << 10;
		else if (strcmp(a, "--deadline-ms") == 0) o->deadline_ms = (unsigned)bench_parse_num(a, v, 1, 600000);
		else if (strcmp(a, "--carry") == 0) {
			if (ws_carry_parse(v, &o->carry) != 0)
				usage();
		} else if (strcmp(a, "--sink-dir") == 0) o->sink_dir = v;
		else if (strcmp(a, "--dir") == 0) o->dir = v;
		else usage();
	}
	if (o->combined && o->shards < 2) {
		fprintf(stderr, "bench_events: --combined needs --shards 2 or more (app on shard 0, burst on 1)\n");
		exit(2);
	}
}

struct figs {
	struct series p50, p99, ev_s, tail_ms, ahead, p99_st, p99_ratio, shed, by_lag, missing;
	struct series t0_fs, t_fs, t_mbs, t_ratio, t_evs, t_evmbs, t_shed, t_mk;
	struct series h50, h95, h1, h_shed;
};

static void rep(struct world *w, const struct opts *o, struct figs *f)
{
	struct lat_res a, b;
	struct thr_res t0 = { 0 }, t1 = { 0 };
	double h50, h95, h1;
	unsigned hshed;
	lat_run(w, o, false, &a);
	lat_run(w, o, true, &b);
	put(&f->p50, a.p50), put(&f->p99, a.p99), put(&f->ev_s, a.events_s), put(&f->tail_ms, a.tail_ms);
	put(&f->ahead, a.ahead);
	put(&f->p99_st, b.p99), put(&f->p99_ratio, b.p99 / a.p99), put(&f->shed, b.shed_ms);
	put(&f->missing, a.missing + b.missing), put(&f->by_lag, b.by_lag);
	if (o->latency_only)
		return;
	thr_run(w, o, 0, &t0);
	thr_run(w, o, o->subs, &t1);
	put(&f->t0_fs, t0.frames_s), put(&f->t_fs, t1.frames_s), put(&f->t_mbs, t1.mb_s);
	put(&f->t_ratio, t1.frames_s / t0.frames_s), put(&f->t_evs, t1.events_s), put(&f->t_evmbs, t1.event_mb_s);
	put(&f->t_shed, t1.shed), put(&f->t_mk, t1.markers_s);
	hyd_run(w, o, &h50, &h95, &h1, &hshed);
	put(&f->h50, h50), put(&f->h95, h95), put(&f->h1, h1), put(&f->h_shed, hshed);
}

static void report(const struct opts *o, struct figs *f)
{
	printf("(L) app written at %u tx/s for %.1f s; deadline_ms %u\n", o->rate, o->secs, o->deadline_ms);
	show(&f->p50), show(&f->p99), show(&f->ev_s), show(&f->tail_ms), show(&f->ahead);
	show(&f->p99_st), show(&f->p99_ratio), show(&f->shed), show(&f->by_lag), show(&f->missing);
	if (o->latency_only)
		return;
	printf("(T) burst of %u MiB on burst, %u %s on 4 channels vs none%s\n", o->burst_mb, o->subs,
	       o->combined ? "combined queries {burst, app}" : "subscribers",
	       o->combined ? ", app written meanwhile in both" : "");
	show(&f->t0_fs), show(&f->t_fs), show(&f->t_mbs), show(&f->t_ratio), show(&f->t_evs), show(&f->t_evmbs);
	show(&f->t_shed);
	if (o->combined)
		show(&f->t_mk);
	printf("(H) %u subscriptions at once on 8 channels, app written at %u tx/s\n", o->hyd_subs, o->rate);
	show(&f->h50), show(&f->h95), show(&f->h1), show(&f->h_shed);
}

int main(int argc, char **argv)
{
	struct opts o;
	struct world w;
	struct figs f = {
		.p50 = { "commit->Progressed p50", "ms" }, .p99 = { "commit->Progressed p99", "ms" },
		.ev_s = { "channel events/s (one query)", "ev/s" },
		.tail_ms = { "a tail of app every", "ms" },
		.ahead = { "app's frames read ahead of their tail", "share" },
		.p99_st = { "p99 beside a stalled channel", "ms" },
		.p99_ratio = { "p99 stalled-beside / alone", "x" },
		.shed = { "stall -> shed (push_deadline)", "ms" },
		.by_lag = { "  shed by lag_bytes_max (1), deadline (0)", "" },
		.missing = { "commits with no Progressed (a shed reader)", "n" },
		.t0_fs = { "shipping, no subscriber", "frames/s" }, .t_fs = { "shipping, N subscribers", "frames/s" },
		.t_mbs = { "shipping, N subscribers", "MB/s" }, .t_ratio = { "shipping N subscribers / none", "x" },
		.t_evs = { "channel events/s (N subscribers)", "ev/s" },
		.t_evmbs = { "channel page bytes/s (N subscribers)", "MB/s" },
		.t_shed = { "channels shed in the burst (of 4)", "n" },
		.t_mk = { "markers read/s (N combined queries)", "ev/s" },
		.h50 = { "start -> Hydrated p50", "ms" }, .h95 = { "start -> Hydrated p95", "ms" },
		.h1 = { "one subscription alone", "ms" },
		.h_shed = { "queries shed meanwhile (push_deadline)", "n" },
	};
	parse(argc, argv, &o);
	memset(&w, 0, sizeof(w));
	printf("bench_events: sink %s, %u tenant(s) + burst, %u shard(s), events ring %" PRIu64 " MiB, lag_bytes_max "
	       "%" PRIu64 " KiB (0: the ring), %u reps, interleaved\n", o.sink_dir, o.tenants, o.shards,
	       (o.ring_bytes ? o.ring_bytes : (uint64_t)8 << 20) >> 20, o.lag_bytes >> 10, o.reps);
	fflush(stdout);
	world_up(&w, &o);
	for (unsigned r = 0; r < o.reps; r++)
		rep(&w, &o, &f);
	report(&o, &f);
	world_down(&w, &o);
	return 0;
}
