/*
 * walship-bench: an end-to-end load generator. M tenants, each a real
 * SQLite writer thread committing transactions of a given size at a given
 * rate; the engine (include/walship/walship.h, built as `walship replicate`
 * builds it) ships them to the sink for T seconds; then the writers stop
 * and the engine drains. Every tenant is then restored and compared with
 * its source. Figures are printed and written as JSON, a time series as
 * CSV (and, with --plot, a PNG through gnuplot).
 *
 *   walship-bench --sink URL --dir DIR [--tenants M] [--rate TPS] [--txn-bytes B]
 *                 [--seconds T] [--policy block|throttle|shed] [--shards N]
 *                 [--ring-bytes B] [--batch-bytes B] [--batch-age-ms MS]
 *                 [--uploads-in-flight N] [--sample-ms MS] [--sync off|normal|full]
 *                 [--at SEC:COMMAND]... [--recovery-from SEC] [--label NAME]
 *                 [--json FILE] [--csv FILE] [--tenant-csv FILE] [--baseline-ms MS] [--no-baselines]
 *                 [--no-restore-check] [--key-write-interval-ms MS] [--tails-in-flight N]
 *
 * --rate 0 (the default) writes as fast as SQLite can. --at runs a shell
 * command SEC seconds into the load (e.g. `tests/s3/throttle.sh rate DIR 0`
 * to lift throttling); --recovery-from SEC reports the seconds from SEC
 * until the worst tenant's RPO is back under batch_age_ms_max.
 *
 * RPO is the watermark age the engine reports per tenant (now minus the
 * time the newest watermark was made durable, at most the time since the
 * writers started: the setup before is no loss window), sampled every --sample-ms
 * for every tenant during the load; percentiles are over all samples of
 * all tenants. Because a tenant's watermark only moves when it has
 * something new, an idle tenant's watermark age grows though nothing is
 * at risk; so the bench also reports the unshipped age: the age of the
 * tenant's oldest commit newer than its watermark (0 when all is shipped),
 * from the writers' own commit times. CPU is getrusage(RUSAGE_SELF) minus the writer threads'
 * own RUSAGE_THREAD: the engine's CPU. Peak RSS is the whole process's
 * (writers and SQLite page caches included).
 *
 * Baselines, measured in the same run after the load: cached read of the
 * tenants' database and WAL files; write+fdatasync+rename+dir-fsync of
 * files of batch_bytes_max (at least 4, for --baseline-ms, default 2000);
 * PUTs, one at a time, of 4 KiB objects to the same sink (through the same
 * proxy, if any) for --baseline-ms.
 * Exit status: 0 when the run completed and every tenant restored equal;
 * 1 otherwise (2: usage). Ratios are reported, never enforced.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "walship.h"
#include "ws_log.h"
#include "ws_store.h"

#define AT_MAX 8

struct opts {
	const char *sink, *dir, *json, *csv, *tenant_csv, *label;
	unsigned tenants, shards;
	double rate;
	uint64_t txn_bytes, seconds, ring_bytes, batch_bytes;
	uint32_t batch_age_ms, uploads_in_flight, sample_ms;
	enum ws_policy policy;
	const char *sync;
	unsigned n_at;
	double at_s[AT_MAX];
	const char *at_cmd[AT_MAX];
	double recovery_from;
	bool baselines, restore_check;
	bool adaptive;
	uint32_t throttle_age_ms, tail_ms;
	uint32_t key_ms, tails_in_flight; /* key_write_interval_ms (UINT32_MAX: default), tails_in_flight (0: default) */
	uint64_t inline_bytes;   /* the shards' inline_batch_bytes_max (0: default; UINT64_MAX: off) */
	enum ws_carry carry;     /* the shards' carry_in_watermark */
	double baseline_s;
};

/* Log-linear histogram of microseconds (or milliseconds): 32 sub-buckets per power of two. */
#define HB 2048
struct hist {
	uint64_t n[HB];
	uint64_t count, max;
};

static unsigned hidx(uint64_t v)
{
	if (v < 64)
		return (unsigned)v;
	unsigned e = 63u - (unsigned)__builtin_clzll(v);
	unsigned i = 64 + (e - 6) * 32 + (unsigned)((v >> (e - 5)) & 31);
	return i < HB ? i : HB - 1;
}

static uint64_t hval(unsigned i)
{
	if (i < 64)
		return i;
	unsigned e = (i - 64) / 32 + 6, s = (i - 64) % 32;
	return ((uint64_t)(32 + s) << (e - 5)) + ((uint64_t)1 << (e - 5)) / 2;
}

static void hadd(struct hist *h, uint64_t v)
{
	h->n[hidx(v)]++;
	h->count++;
	if (v > h->max)
		h->max = v;
}

static void hmerge(struct hist *a, const struct hist *b)
{
	for (unsigned i = 0; i < HB; i++)
		a->n[i] += b->n[i];
	a->count += b->count;
	if (b->max > a->max)
		a->max = b->max;
}

static uint64_t hpct(const struct hist *h, double p)
{
	if (!h->count)
		return 0;
	uint64_t want = (uint64_t)ceil(p / 100.0 * (double)h->count), seen = 0;
	if (want == 0)
		want = 1;
	for (unsigned i = 0; i < HB; i++) {
		seen += h->n[i];
		if (seen >= want) {
			uint64_t v = hval(i);
			return v > h->max ? h->max : v;
		}
	}
	return h->max;
}

struct tenant {
	char name[32];
	char db[512];
	pthread_t th;
	struct hist lat;             /* commit latency, us */
	uint64_t txns;
	_Atomic uint64_t wal_bytes;  /* WAL bytes committed (frames * (page + 24)) */
	unsigned page;
	int last_frames;
	double cpu_s;
	char err[640];
	/* Wall-clock ms of the last ct_cap commits, a ring the sampler reads
	 * (each slot written before ct_n is released past it). */
	_Atomic uint64_t *ct;
	void *ct_mem;                /* ct, for free() */
	_Atomic uint64_t ct_n;
};

static struct opts O;
static struct tenant *T;
static uint64_t ct_cap;
static atomic_bool stop_writers;
static double t0;

/* --debug: each line stamped with the seconds since the load began (the
 * time base of --csv and --tenant-csv; before it, negative), so a tail's
 * writes line up with the tenants' ages (bench/throttle_timeline.py). */
static void debug_sink(enum ws_log_level level, const char *msg, void *arg)
{
	static const char *const names[] = { "error", "warn", "info", "debug" };
	(void)arg;
	fprintf(stderr, "%.3f walship: %s: %s\n", t0 ? bench_now_s() - t0 : -1.0, names[level], msg);
}

static double thread_cpu_s(void)
{
	struct rusage ru;
	getrusage(RUSAGE_THREAD, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
	       ((double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_usec) / 1e6;
}

static uint64_t wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static double self_cpu_s(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
	       ((double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_usec) / 1e6;
}

/* SQLite's WAL hook: n is the WAL's frame count after this commit; it
 * restarts from a small number when a checkpoint let the WAL be reset. */
static int wal_hook(void *arg, sqlite3 *db, const char *name, int n)
{
	struct tenant *t = arg;
	(void)db;
	(void)name;
	int added = n >= t->last_frames ? n - t->last_frames : n;
	t->last_frames = n;
	atomic_fetch_add_explicit(&t->wal_bytes, (uint64_t)added * (t->page + 24u), memory_order_relaxed);
	return SQLITE_OK;
}

static int exec(struct tenant *t, sqlite3 *db, const char *s)
{
	char *msg = NULL;
	if (sqlite3_exec(db, s, NULL, NULL, &msg) == SQLITE_OK)
		return 0;
	snprintf(t->err, sizeof(t->err), "%.150s: %.150s: %.150s", t->db, s, msg ? msg : sqlite3_errmsg(db));
	sqlite3_free(msg);
	return -1;
}

static void sleep_until(double when)
{
	double now = bench_now_s();
	if (when <= now)
		return;
	struct timespec ts = { .tv_sec = (time_t)(when - now), .tv_nsec = 0 };
	ts.tv_nsec = (long)((when - now - (double)ts.tv_sec) * 1e9);
	nanosleep(&ts, NULL);
}

static void *writer(void *arg)
{
	struct tenant *t = arg;
	sqlite3 *db = NULL;
	sqlite3_stmt *ins = NULL;
	char pragma[64];
	uint64_t rows = (O.txn_bytes + 3999) / 4000, per = O.txn_bytes / rows;

	if (sqlite3_open(t->db, &db) != SQLITE_OK) {
		snprintf(t->err, sizeof(t->err), "open %.150s: %.150s", t->db, db ? sqlite3_errmsg(db) : "out of memory");
		goto out;
	}
	sqlite3_busy_timeout(db, 10000);
	snprintf(pragma, sizeof(pragma), "PRAGMA synchronous=%s;", O.sync);
	if (exec(t, db, pragma))
		goto out;
	sqlite3_wal_hook(db, wal_hook, t);
	if (sqlite3_prepare_v2(db, "INSERT INTO t(v) VALUES (randomblob(?))", -1, &ins, NULL) != SQLITE_OK) {
		snprintf(t->err, sizeof(t->err), "%.150s: prepare: %.150s", t->db, sqlite3_errmsg(db));
		goto out;
	}
	double next = t0;
	while (!atomic_load_explicit(&stop_writers, memory_order_relaxed)) {
		if (O.rate > 0) {
			double now = bench_now_s();
			if (now - next > 1.0) /* far behind: do not burst to catch up */
				next = now;
			/* In short steps: a slow writer must not hold the end of the load back. */
			while (bench_now_s() < next - 0.1 && !atomic_load_explicit(&stop_writers, memory_order_relaxed))
				sleep_until(bench_now_s() + 0.1);
			if (atomic_load_explicit(&stop_writers, memory_order_relaxed))
				break;
			sleep_until(next);
			next += 1.0 / O.rate;
			if (atomic_load_explicit(&stop_writers, memory_order_relaxed))
				break;
		}
		double a = bench_now_s();
		if (exec(t, db, "BEGIN IMMEDIATE"))
			goto out;
		for (uint64_t r = 0; r < rows; r++) {
			sqlite3_bind_int64(ins, 1, (sqlite3_int64)per);
			if (sqlite3_step(ins) != SQLITE_DONE) {
				snprintf(t->err, sizeof(t->err), "%.150s: insert: %.150s", t->db, sqlite3_errmsg(db));
				goto out;
			}
			sqlite3_reset(ins);
		}
		if (exec(t, db, "COMMIT"))
			goto out;
		hadd(&t->lat, (uint64_t)((bench_now_s() - a) * 1e6));
		uint64_t n = atomic_load_explicit(&t->ct_n, memory_order_relaxed);
		atomic_store_explicit(&t->ct[n % ct_cap], wall_ms(), memory_order_relaxed);
		atomic_store_explicit(&t->ct_n, n + 1, memory_order_release); /* pairs with the acquire in unshipped_age */
		t->txns++;
	}
out:
	t->cpu_s = thread_cpu_s();
	sqlite3_finalize(ins);
	sqlite3_close(db);
	return NULL;
}

/* Create the tenant's database: WAL mode, one table, so the engine can open it. */
static void make_db(struct tenant *t)
{
	sqlite3 *db = NULL;
	unlink(t->db);
	char wal[600];
	snprintf(wal, sizeof(wal), "%s-wal", t->db);
	unlink(wal);
	if (sqlite3_open(t->db, &db) != SQLITE_OK)
		bench_die("open %s: %s", t->db, db ? sqlite3_errmsg(db) : "out of memory");
	if (exec(t, db, "PRAGMA journal_mode=WAL") ||
	    exec(t, db, "CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB)"))
		bench_die("%s", t->err);
	sqlite3_stmt *s = NULL;
	if (sqlite3_prepare_v2(db, "PRAGMA page_size", -1, &s, NULL) != SQLITE_OK || sqlite3_step(s) != SQLITE_ROW)
		bench_die("%s: page_size: %s", t->db, sqlite3_errmsg(db));
	t->page = (unsigned)sqlite3_column_int(s, 0);
	sqlite3_finalize(s);
	sqlite3_close(db);
}

/* ---- sampling ---------------------------------------------------------- */

struct sampler {
	struct ws_engine *e;
	FILE *csv;
	FILE *tenant_csv; /* --tenant-csv: every tenant's watermark age per sample */
	pthread_t th;
	atomic_bool stop;
	atomic_bool loading;         /* RPO samples count while the writers run */
	struct hist rpo;             /* ms, load phase */
	struct hist loss;            /* unshipped_age, ms, load phase */
	uint64_t *ages, *lost;
	unsigned n_ages;
	double last_t;
	uint64_t last_puts, last_bytes, last_produced;
	uint64_t ring_total, ring_peak;
	double recovered_at;         /* first sample at or after --recovery-from under batch_age_ms_max */
	uint64_t max_puts_per_s;
};

/*
 * The tenant's loss window now: the age of its oldest commit newer than its
 * watermark (0 when every commit is older, i.e. shipped). A commit made just
 * before the watermark was written but not in it is missed, so this can
 * under-read by up to one upload's time; a ring that wrapped gives its oldest.
 */
static uint64_t unshipped_age(struct tenant *t, const struct ws_tenant_metrics *m, uint64_t now)
{
	uint64_t wm = m->rpo.has_watermark && now > m->rpo.watermark_age_ms ? now - m->rpo.watermark_age_ms : 0;
	uint64_t n = atomic_load_explicit(&t->ct_n, memory_order_acquire);
	uint64_t lo = n > ct_cap ? n - ct_cap + 1 : 0, hi = n; /* the slot of n - ct_cap may be rewritten */
	if (lo == hi)
		return 0;
	/* First commit with a time after wm: times are non-decreasing. */
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;
		if (atomic_load_explicit(&t->ct[mid % ct_cap], memory_order_relaxed) > wm)
			hi = mid;
		else
			lo = mid + 1;
	}
	if (lo == n)
		return 0;
	uint64_t c = atomic_load_explicit(&t->ct[lo % ct_cap], memory_order_relaxed);
	return now > c ? now - c : 0;
}

static int collect_age(const struct ws_tenant_metrics *m, void *arg)
{
	struct sampler *s = arg;
	if (s->n_ages >= O.tenants) /* registration order: T[i] is the i-th */
		return 1;
	/* Nothing was at risk before the writers started: a watermark older
	 * than the load counts from its start (the setup before it is no
	 * loss window). */
	double since = (bench_now_s() - t0) * 1000.0;
	uint64_t age = m->rpo.watermark_age_ms;
	if (since >= 0 && (double)age > since)
		age = (uint64_t)since;
	s->lost[s->n_ages] = unshipped_age(&T[s->n_ages], m, wall_ms());
	s->ages[s->n_ages++] = age;
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

struct totals {
	uint64_t puts, bytes, frames, throttle, shed, ring_used, ring_hw, errors;
	uint64_t window_decreases, ended_early, coalesced, carried, deferred, window_min;
};

static void engine_totals(struct ws_engine *e, struct totals *tt)
{
	memset(tt, 0, sizeof(*tt));
	for (unsigned i = 0; i < ws_engine_shards(e); i++) {
		struct ws_shard_metrics m;
		if (ws_engine_shard_metrics(e, i, &m) != 0)
			continue;
		tt->puts += m.puts;
		tt->bytes += m.bytes_shipped;
		tt->frames += m.frames_shipped;
		tt->throttle += m.throttle_retries;
		tt->shed += m.frames_shed;
		tt->ring_used += m.ring_used;
		tt->ring_hw += m.ring_high_water;
		tt->errors += m.errors;
		tt->window_decreases += m.window_decreases;
		tt->ended_early += m.tails_ended_early;
		tt->coalesced += m.tails_coalesced;
		tt->carried += m.tails_carried;
		tt->deferred += m.tails_deferred;
		if (i == 0 || m.uploads_window < tt->window_min)
			tt->window_min = m.uploads_window;
	}
}

static uint64_t produced_bytes(void)
{
	uint64_t b = 0;
	for (unsigned i = 0; i < O.tenants; i++)
		b += atomic_load_explicit(&T[i].wal_bytes, memory_order_relaxed);
	return b;
}

static void sample_once(struct sampler *s)
{
	struct totals tt;
	double t = bench_now_s() - t0;
	s->n_ages = 0;
	(void)ws_engine_foreach_tenant(s->e, collect_age, s);
	engine_totals(s->e, &tt);
	bool loading = atomic_load(&s->loading);
	uint64_t loss_max = 0;
	for (unsigned i = 0; i < s->n_ages; i++) {
		if (loading) {
			hadd(&s->rpo, s->ages[i]);
			hadd(&s->loss, s->lost[i]);
		}
		if (s->lost[i] > loss_max)
			loss_max = s->lost[i];
	}
	if (s->tenant_csv) {
		fprintf(s->tenant_csv, "%.3f", t);
		for (unsigned i = 0; i < s->n_ages; i++)
			fprintf(s->tenant_csv, ",%" PRIu64, s->ages[i]);
		fputc('\n', s->tenant_csv);
	}
	qsort(s->ages, s->n_ages, sizeof(*s->ages), cmp_u64);
	uint64_t p50 = s->n_ages ? s->ages[s->n_ages / 2] : 0;
	uint64_t p99 = s->n_ages ? s->ages[(s->n_ages * 99) / 100 < s->n_ages ? (s->n_ages * 99) / 100 : s->n_ages - 1] : 0;
	uint64_t mx = s->n_ages ? s->ages[s->n_ages - 1] : 0;
	uint64_t produced = produced_bytes();
	double dt = t - s->last_t;
	double puts_s = dt > 0 ? (double)(tt.puts - s->last_puts) / dt : 0;
	double ship_mb = dt > 0 ? (double)(tt.bytes - s->last_bytes) / dt / 1e6 : 0;
	double prod_mb = dt > 0 ? (double)(produced - s->last_produced) / dt / 1e6 : 0;
	if (tt.ring_used > s->ring_peak)
		s->ring_peak = tt.ring_used;
	if (loading && puts_s > (double)s->max_puts_per_s)
		s->max_puts_per_s = (uint64_t)puts_s;
	if (O.recovery_from > 0 && t >= O.recovery_from && s->recovered_at < 0 && mx < O.batch_age_ms)
		s->recovered_at = t;
	fprintf(s->csv, "%.3f,%s,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%.1f,%.3f,%.3f,%" PRIu64
		",%" PRIu64 ",%" PRIu64 "\n",
		t, loading ? "load" : "drain", p50, p99, mx, tt.ring_used, s->ring_total, puts_s, ship_mb, prod_mb,
		tt.throttle, tt.shed, loss_max);
	fflush(s->csv);
	s->last_t = t;
	s->last_puts = tt.puts;
	s->last_bytes = tt.bytes;
	s->last_produced = produced;
}

static void *sampler_main(void *arg)
{
	struct sampler *s = arg;
	double next = t0;
	while (!atomic_load(&s->stop)) {
		next += O.sample_ms / 1000.0;
		sleep_until(next);
		sample_once(s);
	}
	return NULL;
}

/* --at SEC:COMMAND, run from their own thread at their time. */
static void *at_main(void *arg)
{
	(void)arg;
	for (unsigned i = 0; i < O.n_at; i++) {
		sleep_until(t0 + O.at_s[i]);
		if (atomic_load(&stop_writers))
			break;
		int rc = system(O.at_cmd[i]);
		fprintf(stderr, "walship-bench: at %.1f s: `%s` exited %d\n", bench_now_s() - t0, O.at_cmd[i], rc);
	}
	return NULL;
}

/* ---- outcome counting ------------------------------------------------- */

static _Atomic uint64_t tail_errors, shed_outcomes;
static char first_error[512];
static pthread_mutex_t err_mu = PTHREAD_MUTEX_INITIALIZER;

static void on_outcome(const char *tenant, const struct ws_outcome *o, int err, void *arg)
{
	(void)arg;
	if (o->kind == WS_OUTCOME_ERROR && o->u.error.deferred)
		return; /* the store throttled: again after its Retry-After, not a failure */
	if (err) {
		if (atomic_fetch_add(&tail_errors, 1) == 0) {
			pthread_mutex_lock(&err_mu);
			snprintf(first_error, sizeof(first_error), "%s: %s", tenant, ws_errmsg());
			pthread_mutex_unlock(&err_mu);
		}
		return;
	}
	if (o->kind == WS_OUTCOME_SHED)
		atomic_fetch_add(&shed_outcomes, 1);
}

/* ---- restore check ------------------------------------------------------ */

static _Atomic unsigned restore_next, restore_equal;

static int restored_equal(struct tenant *t, const char *out)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *s = NULL;
	char sql[1400];
	int eq = 0;
	if (sqlite3_open_v2(out, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK)
		goto out;
	snprintf(sql, sizeof(sql), "ATTACH 'file:%s?mode=ro' AS src", t->db);
	sqlite3_close(db);
	db = NULL;
	if (sqlite3_open_v2(out, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, NULL) != SQLITE_OK ||
	    sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK)
		goto out;
	if (sqlite3_prepare_v2(db,
			       "SELECT (SELECT count(*) FROM main.t) = (SELECT count(*) FROM src.t) "
			       "AND NOT EXISTS (SELECT * FROM main.t EXCEPT SELECT * FROM src.t) "
			       "AND NOT EXISTS (SELECT * FROM src.t EXCEPT SELECT * FROM main.t), (SELECT count(*) FROM src.t)",
			       -1, &s, NULL) != SQLITE_OK ||
	    sqlite3_step(s) != SQLITE_ROW)
		goto out;
	eq = sqlite3_column_int(s, 0);
	if (!eq)
		snprintf(t->err, sizeof(t->err), "restored database differs from its source (%d source rows)",
			 sqlite3_column_int(s, 1));
out:
	if (!eq && !t->err[0])
		snprintf(t->err, sizeof(t->err), "compare %.150s with %.150s: %.150s", out, t->db, db ? sqlite3_errmsg(db) : "open");
	sqlite3_finalize(s);
	sqlite3_close(db);
	return eq;
}

/* One sink per thread: a sink is one connection, not shared between threads. */
static void *restore_main(void *arg)
{
	int err = 0;
	struct ws_sink *sink = ws_sink_open_flags(O.sink, WS_SINK_EXISTING, &err);
	(void)arg;
	if (!sink) {
		fprintf(stderr, "walship-bench: restore: open %s: %s\n", O.sink, ws_errmsg());
		return NULL;
	}
	for (;;) {
		unsigned i = atomic_fetch_add(&restore_next, 1);
		if (i >= O.tenants)
			break;
		struct tenant *t = &T[i];
		char out[600];
		snprintf(out, sizeof(out), "%s/restore/%s.db", O.dir, t->name);
		struct ws_restore_opts ro = { .force = true };
		t->err[0] = 0;
		if (ws_restore(sink, t->name, &ro, out) != 0) {
			snprintf(t->err, sizeof(t->err), "restore: %.150s", ws_errmsg());
			continue;
		}
		if (restored_equal(t, out))
			atomic_fetch_add(&restore_equal, 1);
	}
	ws_sink_close(sink);
	return NULL;
}

/* ---- baselines ---------------------------------------------------------- */

static double read_files_mb_s(void)
{
	static char buf[1 << 20];
	uint64_t total = 0;
	double a = 0;
	for (int pass = 0; pass < 64; pass++) {
		if (pass == 1)
			a = bench_now_s(), total = 0; /* pass 0 warms the page cache */
		for (unsigned i = 0; i < O.tenants; i++) {
			for (int w = 0; w < 2; w++) {
				char p[600];
				snprintf(p, sizeof(p), "%s%s", T[i].db, w ? "-wal" : "");
				int fd = open(p, O_RDONLY | O_CLOEXEC);
				if (fd < 0)
					continue;
				ssize_t n;
				while ((n = read(fd, buf, sizeof(buf))) > 0)
					total += (uint64_t)n;
				close(fd);
			}
		}
		if (pass >= 1 && (bench_now_s() - a > 1.0 || total > ((uint64_t)1 << 30)))
			break;
	}
	double dt = bench_now_s() - a;
	return dt > 0 ? (double)total / dt / 1e6 : 0;
}

static double write_fsync_mb_s(double *files_s)
{
	char d[600], tmp[700], fin[700];
	snprintf(d, sizeof(d), "%s/baseline", O.dir);
	mkdir(d, 0755);
	size_t n = (size_t)O.batch_bytes;
	char *buf = malloc(n);
	if (!buf)
		bench_die("out of memory");
	for (size_t i = 0; i < n; i++)
		buf[i] = (char)(i * 7919u >> 3);
	int dfd = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		bench_die("open %s: %s", d, strerror(errno));
	unsigned files = 0;
	double a = bench_now_s();
	while (files < 4 || (bench_now_s() - a < O.baseline_s && files < 256)) {
		snprintf(tmp, sizeof(tmp), "%s/.b%u.tmp", d, files);
		snprintf(fin, sizeof(fin), "%s/b%u", d, files);
		int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd < 0 || write(fd, buf, n) != (ssize_t)n || fdatasync(fd) || close(fd) || rename(tmp, fin) ||
		    fsync(dfd))
			bench_die("baseline write %s: %s", tmp, strerror(errno));
		files++;
	}
	double dt = bench_now_s() - a;
	for (unsigned i = 0; i < files; i++) {
		snprintf(fin, sizeof(fin), "%s/b%u", d, i);
		unlink(fin);
	}
	close(dfd);
	free(buf);
	*files_s = (double)files / dt;
	return (double)files * (double)n / dt / 1e6;
}

static double raw_put_rate(void)
{
	int err = 0;
	char url[4096];
	/* Raw: not paced by what the engine's run taught the process's pacer
	 * for this endpoint and bucket. */
	snprintf(url, sizeof(url), "%s%s", O.sink,
		 strncmp(O.sink, "s3://", 5) || strstr(O.sink, "pace=") ? "" : strchr(O.sink, '?') ? "&pace=0" : "?pace=0");
	struct ws_store *st = ws_store_open(url, &err);
	if (!st) {
		fprintf(stderr, "walship-bench: raw PUT baseline: %s\n", ws_errmsg());
		return 0;
	}
	char body[4096];
	memset(body, 'p', sizeof(body));
	unsigned n = 0;
	double a = bench_now_s();
	while (bench_now_s() - a < O.baseline_s && n < 100000) {
		char key[128];
		snprintf(key, sizeof(key), "bench-baseline/put-%u", n);
		if (ws_store_put(st, key, body, sizeof(body), WS_PUT_OVERWRITE, NULL, NULL) != 0) {
			fprintf(stderr, "walship-bench: raw PUT baseline: %s\n", ws_errmsg());
			break;
		}
		n++;
	}
	double dt = bench_now_s() - a;
	ws_store_close(st);
	return dt > 0 ? (double)n / dt : 0;
}

/* ---- arguments ----------------------------------------------------------- */

static void usage(void)
{
	fprintf(stderr,
		"usage: walship-bench --sink URL --dir DIR [--tenants M] [--rate TPS] [--txn-bytes B] [--seconds T]\n"
		"         [--policy block|throttle|shed] [--shards N] [--ring-bytes B] [--batch-bytes B]\n"
		"         [--batch-age-ms MS] [--uploads-in-flight N] [--sample-ms MS] [--sync off|normal|full]\n"
		"         [--at SEC:COMMAND]... [--recovery-from SEC] [--label NAME] [--json FILE] [--csv FILE]\n"
		"         [--tenant-csv FILE]\n"
		"         [--baseline-ms MS] [--no-baselines] [--no-restore-check] [--no-adaptive]\n"
		"         [--throttle-age-ms MS] [--tail-ms MS] [--inline-batch-bytes B|off]\n"
		"         [--carry pressed|always|never] [--key-write-interval-ms MS] [--tails-in-flight N] [--debug]\n");
	exit(2);
}

static void parse(int argc, char **argv)
{
	struct ws_shard_config d;
	ws_shard_config_default(&d);
	O.tenants = 1;
	O.shards = 1;
	O.txn_bytes = 1024;
	O.seconds = 10;
	O.ring_bytes = d.ring_bytes;
	O.key_ms = d.key_write_interval_ms;
	O.tails_in_flight = d.tails_in_flight;
	O.batch_bytes = d.batch_bytes_max;
	O.batch_age_ms = d.batch_age_ms_max;
	O.uploads_in_flight = d.uploads_in_flight;
	O.policy = d.policy;
	O.sample_ms = 250;
	O.sync = "NORMAL";
	O.label = "run";
	O.baselines = O.restore_check = true;
	O.adaptive = d.adaptive;
	O.recovery_from = -1;
	O.baseline_s = 2.0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define ARG(name) (!strcmp(a, name) && (v ? (i++, 1) : (bench_die("%s needs a value", name), 0)))
		if (ARG("--sink"))
			O.sink = v;
		else if (ARG("--dir"))
			O.dir = v;
		else if (ARG("--json"))
			O.json = v;
		else if (ARG("--csv"))
			O.csv = v;
		else if (ARG("--tenant-csv"))
			O.tenant_csv = v;
		else if (ARG("--label"))
			O.label = v;
		else if (ARG("--tenants"))
			O.tenants = (unsigned)bench_parse_num(a, v, 1, 100000);
		else if (ARG("--shards"))
			O.shards = (unsigned)bench_parse_num(a, v, 1, WS_SHARDS_MAX);
		else if (ARG("--rate")) {
			char *end;
			/* Plain decimal only: strtod also takes "", "nan", "inf" and hex. */
			if (!*v || strspn(v, "0123456789.") != strlen(v))
				bench_die("--rate: not a decimal rate in 0..1e6 transactions/s: '%s'", v);
			O.rate = strtod(v, &end);
			if (*end || !isfinite(O.rate) || O.rate < 0 || O.rate > 1e6)
				bench_die("--rate: not a rate in 0..1e6 transactions/s: '%s'", v);
		} else if (ARG("--txn-bytes"))
			O.txn_bytes = bench_parse_num(a, v, 1, 64 << 20);
		else if (ARG("--seconds"))
			O.seconds = bench_parse_num(a, v, 1, 86400);
		else if (ARG("--ring-bytes"))
			O.ring_bytes = bench_parse_num(a, v, 1, UINT64_MAX);
		else if (ARG("--batch-bytes"))
			O.batch_bytes = bench_parse_num(a, v, 1, UINT32_MAX);
		else if (ARG("--batch-age-ms"))
			O.batch_age_ms = (uint32_t)bench_parse_num(a, v, 1, 3600000);
		else if (ARG("--uploads-in-flight"))
			O.uploads_in_flight = (uint32_t)bench_parse_num(a, v, 1, 1024);
		else if (ARG("--sample-ms"))
			O.sample_ms = (uint32_t)bench_parse_num(a, v, 10, 60000);
		else if (ARG("--recovery-from"))
			O.recovery_from = (double)bench_parse_num(a, v, 0, 86400);
		else if (ARG("--baseline-ms"))
			O.baseline_s = (double)bench_parse_num(a, v, 100, 600000) / 1000.0;
		else if (ARG("--sync")) {
			if (strcasecmp(v, "off") && strcasecmp(v, "normal") && strcasecmp(v, "full"))
				bench_die("--sync: off, normal or full, not '%s'", v);
			O.sync = v;
		} else if (ARG("--policy")) {
			if (!strcmp(v, "block"))
				O.policy = WS_POLICY_BLOCK;
			else if (!strcmp(v, "throttle"))
				O.policy = WS_POLICY_THROTTLE;
			else if (!strcmp(v, "shed"))
				O.policy = WS_POLICY_SHED;
			else
				bench_die("--policy: block, throttle or shed, not '%s'", v);
		} else if (ARG("--at")) {
			const char *colon = strchr(v, ':');
			char sec[32];
			if (!colon || colon == v || (size_t)(colon - v) >= sizeof(sec) || O.n_at == AT_MAX)
				bench_die("--at: SEC:COMMAND (at most %d), not '%s'", AT_MAX, v);
			memcpy(sec, v, (size_t)(colon - v));
			sec[colon - v] = 0;
			O.at_s[O.n_at] = (double)bench_parse_num("--at", sec, 0, 86400);
			O.at_cmd[O.n_at++] = colon + 1;
		} else if (ARG("--throttle-age-ms"))
			O.throttle_age_ms = (uint32_t)bench_parse_num(a, v, 0, 86400000);
		else if (ARG("--tail-ms"))
			O.tail_ms = (uint32_t)bench_parse_num(a, v, 0, 86400000);
		else if (ARG("--inline-batch-bytes"))
			O.inline_bytes = !strcmp(v, "off") ? UINT64_MAX : bench_parse_num(a, v, 4096, 16u << 20);
		else if (ARG("--carry")) {
			if (ws_carry_parse(v, &O.carry))
				bench_die("--carry: '%s' is not pressed, always or never", v);
		}
		else if (ARG("--key-write-interval-ms"))
			O.key_ms = (uint32_t)bench_parse_num(a, v, 0, 3600000);
		else if (ARG("--tails-in-flight"))
			O.tails_in_flight = (uint32_t)bench_parse_num(a, v, 1, WS_TAILS_IN_FLIGHT_MAX);
		else if (!strcmp(a, "--no-adaptive"))
			O.adaptive = false;
		else if (!strcmp(a, "--no-baselines"))
			O.baselines = false;
		else if (!strcmp(a, "--no-restore-check"))
			O.restore_check = false;
		else if (!strcmp(a, "--debug")) {
			ws_log_set_level(WS_LOG_DEBUG); /* every write, retry, deferral and pace decision, to stderr */
			ws_log_set_sink(debug_sink, NULL);
		}
		else if (!strcmp(a, "-h") || !strcmp(a, "--help"))
			usage();
		else {
			fprintf(stderr, "walship-bench: unknown argument '%s'\n", a);
			usage();
		}
#undef ARG
	}
	if (!O.sink || !O.dir) {
		fprintf(stderr, "walship-bench: --sink and --dir are required\n");
		usage();
	}
	if (O.json && !*O.json)
		bench_die("--json: an empty file name");
}

/* s as the body of a JSON string (quotes, backslashes and control bytes
 * escaped), malloc'd: labels and URLs are the caller's text. */
static char *json_escape(const char *s)
{
	size_t n = strlen(s);
	char *out = malloc(n * 6 + 1), *o = out;
	if (!out)
		bench_die("out of memory");
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\') {
			*o++ = '\\';
			*o++ = (char)c;
		} else if (c < 0x20 || c == 0x7f) {
			o += sprintf(o, "\\u%04x", c);
		} else {
			*o++ = (char)c;
		}
	}
	*o = '\0';
	return out;
}

/* ---- main --------------------------------------------------------------- */

int main(int argc, char **argv)
{
	parse(argc, argv);
	setvbuf(stdout, NULL, _IOLBF, 0);
	/* Opened before the run: a path that cannot be written fails now, not
	 * after the load. */
	FILE *json = NULL;
	if (O.json && !(json = fopen(O.json, "w")))
		bench_die("%s: %s", O.json, strerror(errno));
	char p[700];
	mkdir(O.dir, 0755);
	snprintf(p, sizeof(p), "%s/db", O.dir);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/restore", O.dir);
	mkdir(p, 0755);

	T = calloc(O.tenants, sizeof(*T));
	if (!T)
		bench_die("out of memory");
	ct_cap = O.tenants <= 16 ? (uint64_t)1 << 20 : 4096;
	for (unsigned i = 0; i < O.tenants; i++) {
		T[i].ct = T[i].ct_mem = calloc(ct_cap, sizeof(uint64_t));
		if (!T[i].ct_mem)
			bench_die("out of memory");
		snprintf(T[i].name, sizeof(T[i].name), "t%05u", i);
		snprintf(T[i].db, sizeof(T[i].db), "%s/db/%s.db", O.dir, T[i].name);
		make_db(&T[i]);
	}

	/* An s3:// sink's bucket is made here, as an operator makes it before replicate runs. */
	if (!strncmp(O.sink, "s3://", 5)) {
		int berr = 0;
		struct ws_store *bst = ws_store_s3_open(O.sink, WS_STORE_EXISTING, &berr);
		if (!bst || ws_store_s3_create_bucket(bst) != 0)
			bench_die("create the bucket of %s: %s", O.sink, ws_errmsg());
		ws_store_close(bst);
	}

	/* The engine, configured as `walship replicate` configures it (tools/main.c). */
	struct ws_shard_config *sc = calloc(O.shards, sizeof(*sc));
	if (!sc)
		bench_die("out of memory");
	for (unsigned i = 0; i < O.shards; i++) {
		ws_shard_config_default(&sc[i]);
		sc[i].ring_bytes = O.ring_bytes;
		sc[i].batch_bytes_max = O.batch_bytes;
		sc[i].batch_age_ms_max = O.batch_age_ms;
		sc[i].uploads_in_flight = O.uploads_in_flight;
		sc[i].adaptive = O.adaptive;
		sc[i].throttle_age_ms_max = O.throttle_age_ms;
		sc[i].tail_ms_max = O.tail_ms;
		sc[i].inline_batch_bytes_max = O.inline_bytes;
		sc[i].carry = O.carry;
		sc[i].policy = O.policy;
		sc[i].key_write_interval_ms = O.key_ms;
		sc[i].tails_in_flight = O.tails_in_flight;
	}
	struct ws_engine_config ec;
	memset(&ec, 0, sizeof(ec));
	ec.sink_url = O.sink;
	ec.shards = O.shards;
	ec.shard = sc;
	ec.epoch = 1;
	ec.pointer_generation = 1;
	ec.on_outcome = on_outcome;
	int err = 0;
	struct ws_engine *e = ws_engine_create(&ec, &err);
	if (!e) {
		fprintf(stderr, "walship-bench: engine: %s\n", ws_errmsg());
		free(sc);
		for (unsigned i = 0; i < O.tenants; i++)
			free(T[i].ct_mem);
		free(T);
		if (json)
			fclose(json);
		return err == WS_ECONFIG ? 2 : 1;
	}
	for (unsigned i = 0; i < O.tenants; i++) {
		struct ws_tenant_config tc = { .name = T[i].name, .db_path = T[i].db, .shard = -1 };
		if (ws_engine_add_tenant(e, &tc) != 0)
			bench_die("add tenant %s: %s", T[i].name, ws_errmsg());
	}
	/* First watermarks written before the clock starts: that is setup. */
	if (ws_engine_flush(e) != 0)
		fprintf(stderr, "walship-bench: first flush: %s\n", ws_errmsg());

	struct sampler s;
	memset(&s, 0, sizeof(s));
	s.e = e;
	s.ages = calloc(O.tenants, sizeof(*s.ages));
	s.lost = calloc(O.tenants, sizeof(*s.lost));
	s.recovered_at = -1;
	s.ring_total = O.ring_bytes * O.shards;
	char csv_default[700];
	snprintf(csv_default, sizeof(csv_default), "%s/%s.csv", O.dir, O.label);
	const char *csv_path = O.csv ? O.csv : csv_default;
	s.csv = fopen(csv_path, "w");
	if (!s.csv || !s.ages || !s.lost)
		bench_die("%s: %s", csv_path, strerror(errno));
	fprintf(s.csv, "t_s,phase,rpo_p50_ms,rpo_p99_ms,rpo_max_ms,ring_used_bytes,ring_bytes,puts_per_s,"
		       "shipped_mb_per_s,produced_mb_per_s,throttle_retries,frames_shed,unshipped_max_ms\n");
	if (O.tenant_csv) {
		s.tenant_csv = fopen(O.tenant_csv, "w");
		if (!s.tenant_csv)
			bench_die("%s: %s", O.tenant_csv, strerror(errno));
		fputs("t_s", s.tenant_csv);
		for (unsigned i = 0; i < O.tenants; i++)
			fprintf(s.tenant_csv, ",t%u_age_ms", i);
		fputc('\n', s.tenant_csv);
	}

	struct totals before;
	engine_totals(e, &before);
	double cpu_before = self_cpu_s();
	printf("walship-bench %s: %u tenant(s), %s txn/s each of %" PRIu64 " bytes, %" PRIu64
	       " s, policy %s, %u shard(s), batch %" PRIu64 " B / %u ms, ring %" PRIu64 " B, sink %s\n",
	       O.label, O.tenants, O.rate > 0 ? "fixed" : "max", O.txn_bytes, O.seconds, ws_policy_name(O.policy), O.shards,
	       O.batch_bytes, O.batch_age_ms, O.ring_bytes, O.sink);
	if (O.rate > 0)
		printf("  (rate %.3f txn/s per tenant)\n", O.rate);

	t0 = bench_now_s();
	atomic_store(&s.loading, true);
	pthread_attr_t at;
	pthread_attr_init(&at);
	pthread_attr_setstacksize(&at, 256 << 10);
	for (unsigned i = 0; i < O.tenants; i++)
		if (pthread_create(&T[i].th, &at, writer, &T[i]))
			bench_die("writer thread %u: %s", i, strerror(errno));
	pthread_attr_destroy(&at);
	pthread_t at_th;
	if (pthread_create(&s.th, NULL, sampler_main, &s) || pthread_create(&at_th, NULL, at_main, NULL))
		bench_die("threads: %s", strerror(errno));

	sleep_until(t0 + (double)O.seconds);
	atomic_store(&stop_writers, true);
	/* The load is the time the writers were let write; closing a thousand
	 * connections afterwards is not part of it. */
	double load_s = bench_now_s() - t0, j0 = bench_now_s();
	double writers_cpu = 0;
	for (unsigned i = 0; i < O.tenants; i++) {
		pthread_join(T[i].th, NULL);
		writers_cpu += T[i].cpu_s;
	}
	double join_s = bench_now_s() - j0;
	uint64_t produced = produced_bytes();
	atomic_store(&s.loading, false);
	pthread_join(at_th, NULL);

	/* Drain: everything committed made durable, sampled as it goes. */
	double d0 = bench_now_s();
	int flush_rc = ws_engine_flush(e);
	double drain_s = bench_now_s() - d0;
	atomic_store(&s.stop, true);
	pthread_join(s.th, NULL);
	sample_once(&s);
	fclose(s.csv);
	if (s.tenant_csv)
		fclose(s.tenant_csv);
	int stop_rc = ws_engine_stop(e);
	struct totals after;
	engine_totals(e, &after);
	double engine_cpu = self_cpu_s() - cpu_before - writers_cpu;
	ws_engine_destroy(e);
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);

	struct hist lat;
	memset(&lat, 0, sizeof(lat));
	uint64_t txns = 0;
	unsigned writer_errors = 0;
	for (unsigned i = 0; i < O.tenants; i++) {
		hmerge(&lat, &T[i].lat);
		txns += T[i].txns;
		if (T[i].err[0]) {
			if (!writer_errors)
				fprintf(stderr, "walship-bench: writer %s: %s\n", T[i].name, T[i].err);
			writer_errors++;
		}
	}
	uint64_t shipped = after.bytes - before.bytes, puts = after.puts - before.puts;
	double gb = (double)shipped / 1e9;

	/* Every tenant restored and compared with its source. */
	unsigned equal = 0;
	double restore_s = 0;
	if (O.restore_check) {
		double r0 = bench_now_s();
		pthread_t rt[4];
		unsigned nr = O.tenants < 4 ? O.tenants : 4;
		for (unsigned i = 0; i < nr; i++)
			if (pthread_create(&rt[i], NULL, restore_main, NULL))
				bench_die("restore thread: %s", strerror(errno));
		for (unsigned i = 0; i < nr; i++)
			pthread_join(rt[i], NULL);
		equal = atomic_load(&restore_equal);
		restore_s = bench_now_s() - r0;
		for (unsigned i = 0, shown = 0; i < O.tenants && shown < 5; i++)
			if (T[i].err[0]) {
				fprintf(stderr, "walship-bench: tenant %s: %s\n", T[i].name, T[i].err);
				shown++;
			}
	}

	double read_mb = 0, wf_mb = 0, wf_files = 0, put_rate = 0;
	if (O.baselines) {
		read_mb = read_files_mb_s();
		wf_mb = write_fsync_mb_s(&wf_files);
		put_rate = raw_put_rate();
	}

	uint64_t rpo50 = hpct(&s.rpo, 50), rpo99 = hpct(&s.rpo, 99), rpomax = s.rpo.max;
	double lat50 = (double)hpct(&lat, 50) / 1000.0, lat99 = (double)hpct(&lat, 99) / 1000.0;
	double recovery = s.recovered_at >= 0 ? s.recovered_at - O.recovery_from : -1;
	uint64_t shed = after.shed - before.shed, retries = after.throttle - before.throttle;
	double puts_gb = gb > 0 ? (double)puts / gb : 0;
	double cpu_gb = gb > 0 ? engine_cpu / gb : 0;
	double ideal_puts_gb = 1e9 / (double)O.batch_bytes;

	printf("  %-34s %12.3f MB/s  (%" PRIu64 " txns, %.0f txn/s, %.3f MB)\n", "WAL produced", (double)produced / load_s / 1e6,
	       txns, (double)txns / load_s, (double)produced / 1e6);
	printf("  %-34s %12.3f MB/s  (%.3f MB in %.1f s load + %.2f s drain)\n", "WAL shipped",
	       (double)shipped / (load_s + drain_s) / 1e6, (double)shipped / 1e6, load_s, drain_s);
	printf("  %-34s %12.2f s\n", "writers stopped and closed in", join_s);
	printf("  %-34s %8" PRIu64 " / %" PRIu64 " / %" PRIu64 " ms  (%" PRIu64 " samples)\n", "RPO p50 / p99 / max", rpo50,
	       rpo99, rpomax, s.rpo.count);
	printf("  %-34s %8" PRIu64 " / %" PRIu64 " / %" PRIu64 " ms  (oldest commit not yet under the watermark)\n",
	       "unshipped age p50 / p99 / max", hpct(&s.loss, 50), hpct(&s.loss, 99), s.loss.max);
	printf("  %-34s %12.1f  (%" PRIu64 " PUTs; full batches would be %.1f)\n", "PUTs per GB", puts_gb, puts,
	       ideal_puts_gb);
	printf("  %-34s %12.2f  (engine %.2f s, writers %.2f s)\n", "engine CPU s per GB", cpu_gb, engine_cpu, writers_cpu);
	printf("  %-34s %12.1f MiB  (ring %.1f MiB x %u shards)\n", "peak RSS", (double)ru.ru_maxrss / 1024.0,
	       (double)O.ring_bytes / 1048576.0, O.shards);
	printf("  %-34s %12.1f MiB\n", "spill ring peak (sampled)", (double)s.ring_peak / 1048576.0);
	printf("  %-34s %12" PRIu64 "  (%" PRIu64 " shed outcomes)\n", "frames shed", shed, (uint64_t)atomic_load(&shed_outcomes));
	printf("  %-34s %12" PRIu64 "\n", "throttle retries", retries);
	printf("  %-34s %12" PRIu64 "  (carry_in_watermark %s)\n", "tails carried by the watermark",
	       after.carried - before.carried, ws_carry_name(O.carry));
	printf("  %-34s %12" PRIu64 "  (refused, again after Retry-After, the others going on)\n", "tails deferred",
	       after.deferred - before.deferred);
	printf("  %-34s %12" PRIu64 "\n", "tail errors", (uint64_t)atomic_load(&tail_errors));
	printf("  %-34s %8.3f / %.3f ms\n", "commit latency p50 / p99", lat50, lat99);
	if (O.recovery_from >= 0) {
		if (recovery >= 0)
			printf("  %-34s %12.1f s  (worst tenant's RPO under %u ms, from %.0f s)\n", "recovery", recovery,
			       O.batch_age_ms, O.recovery_from);
		else
			printf("  %-34s %12s  (worst tenant's RPO never under %u ms after %.0f s)\n", "recovery", "never",
			       O.batch_age_ms, O.recovery_from);
	}
	if (O.baselines) {
		printf("  baseline: %-24s %12.1f MB/s\n", "cached read of the files", read_mb);
		printf("  baseline: %-24s %12.1f MB/s  (%.1f files/s of %" PRIu64 " B)\n", "write+fsync+rename", wf_mb,
		       wf_files, O.batch_bytes);
		printf("  baseline: %-24s %12.1f PUT/s  (4 KiB, one at a time, same sink)\n", "raw PUT rate", put_rate);
		printf("  %-34s %12.3f\n", "shipped / write+fsync baseline", wf_mb > 0 ? (double)shipped / (load_s + drain_s) / 1e6 / wf_mb : 0);
	}
	if (O.restore_check)
		printf("  check: restore equal to source    %u/%u tenants %s  (%.1f s)\n", equal, O.tenants,
		       equal == O.tenants ? "OK" : "FAILED", restore_s);
	printf("  time series: %s\n", csv_path);
	if (flush_rc || stop_rc)
		fprintf(stderr, "walship-bench: drain: %s (first tail error: %s)\n", ws_errmsg(), first_error);

	bool json_ok = true;
	if (json) {
		FILE *j = json;
		char *label = json_escape(O.label), *sink = json_escape(O.sink), *csv = json_escape(csv_path);
		fprintf(j,
			"{\"label\":\"%s\",\"sink\":\"%s\",\"tenants\":%u,\"rate_txn_s\":%.3f,\"txn_bytes\":%" PRIu64
			",\"seconds\":%" PRIu64 ",\"policy\":\"%s\",\"shards\":%u,\"batch_bytes_max\":%" PRIu64
			",\"batch_age_ms_max\":%u,\"ring_bytes\":%" PRIu64 ",\"inline_batch_bytes_max\":%" PRIu64
			",\"carry_in_watermark\":\"%s\",\n"
			" \"txns\":%" PRIu64 ",\"wal_produced_bytes\":%" PRIu64 ",\"wal_produced_mb_s\":%.3f,"
			"\"wal_shipped_bytes\":%" PRIu64 ",\"wal_shipped_mb_s\":%.3f,\"load_s\":%.3f,\"drain_s\":%.3f,\n"
			" \"rpo_ms\":{\"p50\":%" PRIu64 ",\"p99\":%" PRIu64 ",\"max\":%" PRIu64 ",\"samples\":%" PRIu64 "},\n"
			" \"unshipped_age_ms\":{\"p50\":%" PRIu64 ",\"p99\":%" PRIu64 ",\"max\":%" PRIu64 "},\n"
			" \"puts\":%" PRIu64 ",\"puts_per_gb\":%.1f,\"puts_per_gb_full_batches\":%.1f,\"max_puts_per_s\":%" PRIu64
			",\"engine_cpu_s\":%.3f,\"cpu_s_per_gb\":%.3f,\"writers_cpu_s\":%.3f,\"peak_rss_bytes\":%lld,"
			"\"ring_peak_bytes\":%" PRIu64 ",\n"
			" \"frames_shed\":%" PRIu64 ",\"throttle_retries\":%" PRIu64 ",\"tail_errors\":%" PRIu64 ",\n"
			" \"commit_latency_ms\":{\"p50\":%.3f,\"p99\":%.3f},\"recovery_s\":%.3f,\n"
			" \"baseline\":{\"cached_read_mb_s\":%.1f,\"write_fsync_rename_mb_s\":%.1f,\"write_fsync_rename_files_s\":%.1f,"
			"\"raw_put_per_s\":%.1f},\n"
			" \"adaptive\":%s,\"window_decreases\":%" PRIu64 ",\"tails_ended_early\":%" PRIu64
			",\"tails_coalesced\":%" PRIu64 ",\"tails_carried\":%" PRIu64 ",\"tails_deferred\":%" PRIu64
			",\"bytes_per_put\":%.0f,\n"
			" \"restore_equal\":%u,\"restore_checked\":%s,\"csv\":\"%s\"}\n",
			label, sink, O.tenants, O.rate, O.txn_bytes, O.seconds, ws_policy_name(O.policy), O.shards, O.batch_bytes,
			O.batch_age_ms, O.ring_bytes, O.inline_bytes == UINT64_MAX ? 0 : O.inline_bytes ? O.inline_bytes : 1u << 20,
			ws_carry_name(O.carry),
			txns, produced, (double)produced / load_s / 1e6, shipped,
			(double)shipped / (load_s + drain_s) / 1e6, load_s, drain_s, rpo50, rpo99, rpomax, s.rpo.count,
			hpct(&s.loss, 50), hpct(&s.loss, 99), s.loss.max, puts,
			puts_gb, ideal_puts_gb, s.max_puts_per_s, engine_cpu, cpu_gb, writers_cpu,
			(long long)ru.ru_maxrss * 1024, s.ring_peak, shed, retries, (uint64_t)atomic_load(&tail_errors), lat50,
			lat99, recovery, read_mb, wf_mb, wf_files, put_rate, O.adaptive ? "true" : "false",
			after.window_decreases - before.window_decreases, after.ended_early - before.ended_early,
			after.coalesced - before.coalesced, after.carried - before.carried,
			after.deferred - before.deferred, puts ? (double)shipped / (double)puts : 0.0,
			equal, O.restore_check ? "true" : "false", csv);
		/* A full disk must not leave a cut-short file taken for figures. */
		if (fflush(j) != 0 || ferror(j)) {
			fprintf(stderr, "walship-bench: writing %s: %s\n", O.json, strerror(errno));
			json_ok = false;
		}
		if (fclose(j) != 0 && json_ok) {
			fprintf(stderr, "walship-bench: closing %s: %s\n", O.json, strerror(errno));
			json_ok = false;
		}
		free(label);
		free(sink);
		free(csv);
	}
	free(s.ages);
	free(s.lost);
	for (unsigned i = 0; i < O.tenants; i++)
		free(T[i].ct_mem);
	free(sc);
	free(T);
	bool ok = json_ok && !writer_errors && !flush_rc && !stop_rc && (!O.restore_check || equal == O.tenants);
	return ok ? 0 : 1;
}
