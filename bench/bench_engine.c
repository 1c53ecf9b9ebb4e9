/*
 * Shard throughput and the cost of idle tenants, as ratios against
 * baselines measured in the same run (docs/DESIGN.md, "Performance model").
 *
 *   bench_engine [--mb N] [--tenants N] [--idle N] [--idle-s S] [--reps N] [--start-reps N]
 *                [--dir DIR] [--tiny]
 *
 * Setup: --tenants SQLite databases (WAL mode, autocheckpoint off, 4 KiB
 * pages) with --mb MiB of committed WAL between them, closed without a
 * checkpoint, then read once so the WAL sits in the page cache.
 *
 * (a) baseline: a bare io_uring fixed-buffer read of the same WAL files
 *     (io/ws_reader with one 4 MiB registered buffer, registered files),
 *     nothing else: frames per second.
 * (b) walship, one shard: an engine whose sink discards batches (watermarks
 *     are kept in memory so the streams behave exactly as against a real
 *     sink); every tenant registered and flushed: WAL read into the spill
 *     ring with fixed-buffer reads, every frame verified (SQLite's checksum
 *     chain), hashed, handed to the upload thread, manifest and watermark
 *     written. Frames per second, and the ratio to (a) (target >= 0.7).
 *     Every tenant here is a first contact (registered under a fresh name):
 *     it opens the database, takes its read marks and re-bases.
 * (c) the same with two shards (tenants split between them): the ratio of
 *     two shards to one.
 * (b', c') steady state, which is what a running host does: the tenants stay
 *     registered, and before each repetition the applications append --mb
 *     MiB of commits between them; the bare read reads exactly the appended
 *     bytes, then each engine ships them (a flush: one continuing tail per
 *     tenant). Frames per second against the bare read (target >= 0.7), and
 *     two shards against one.
 * (d) start-up: --idle databases registered on a fresh engine (2 shards)
 *     and shipped once (each a snapshot of a small database), timed from
 *     the first add to the flush's end: one ws_engine_add_tenant call per
 *     tenant (the baseline) against one ws_engine_add_tenants call for all,
 *     then a restart over what was stored (every first tail Empty: target
 *     < 5 s at 10,000); --start-reps repetitions interleaved, the order
 *     alternating (default 7), median (min..max) and the ratio.
 * (e) idle tenants: on the last such engine, --idle-s seconds of nothing:
 *     the process's CPU time over that window as a share of one core
 *     (target < 2%), and the object-store requests made in it, per hour
 *     (target 0).
 *
 * The discarding sink is a benchmark fixture (the engine's store hook), not
 * a walship feature. The exit status is 0 unless something failed; ratios
 * are reported, never enforced.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "core_internal.h"
#include "engine.h"
#include "ws_reader.h"
#include "ws_store.h"

#define PAGE 4096u
#define FRAME (PAGE + 24u)
#define READ_BUF ((size_t)4 << 20)

/* ---- a sink that keeps watermarks and discards everything else ----------- */

struct kept {
	char key[WS_KEY_MAX];
	uint8_t *data;
	size_t len;
	uint64_t version;
};

struct dstore {
	struct ws_store base;
	pthread_mutex_t *mu;     /* shared by every store of one engine */
	struct kept **kept;      /* shared table */
	size_t *nkept;
	uint64_t *requests;      /* shared counter of every request */
};

static pthread_mutex_t d_mu = PTHREAD_MUTEX_INITIALIZER;
static struct kept *d_kept;
static size_t d_nkept, d_cap;
static uint64_t d_requests;

static bool is_wm(const char *key)
{
	size_t n = strlen(key);
	return n >= 3 && !strcmp(key + n - 3, "/wm");
}

static struct kept *find(const char *key)
{
	for (size_t i = 0; i < d_nkept; i++)
		if (!strcmp(d_kept[i].key, key))
			return &d_kept[i];
	return NULL;
}

static int d_put(struct ws_store *s, const char *key, const struct iovec *iov, int iovcnt, enum ws_put_mode mode,
		 const struct ws_etag *expect, struct ws_etag *out_etag)
{
	struct kept *k;
	size_t len = 0;
	(void)s;
	__atomic_fetch_add(&d_requests, 1, __ATOMIC_RELAXED);
	if (!is_wm(key))
		return 0; /* discarded: data objects are never read back while streaming */
	for (int i = 0; i < iovcnt; i++)
		len += iov[i].iov_len;
	pthread_mutex_lock(&d_mu);
	k = find(key);
	if ((mode == WS_PUT_CREATE && k) ||
	    (mode == WS_PUT_CAS && (!k || !expect || strtoull(expect->s, NULL, 10) != k->version))) {
		pthread_mutex_unlock(&d_mu);
		return WS_EPRECOND;
	}
	if (!k) {
		if (d_nkept == d_cap) {
			d_cap = d_cap ? d_cap * 2 : 1024;
			d_kept = realloc(d_kept, d_cap * sizeof(*d_kept));
			if (!d_kept)
				bench_die("out of memory");
		}
		k = &d_kept[d_nkept++];
		memset(k, 0, sizeof(*k));
		snprintf(k->key, sizeof(k->key), "%s", key);
	}
	free(k->data);
	k->data = malloc(len ? len : 1);
	k->len = 0;
	for (int i = 0; i < iovcnt; i++) {
		memcpy(k->data + k->len, iov[i].iov_base, iov[i].iov_len);
		k->len += iov[i].iov_len;
	}
	k->version++;
	if (out_etag) {
		memset(out_etag, 0, sizeof(*out_etag));
		snprintf(out_etag->s, sizeof(out_etag->s), "%" PRIu64, k->version);
	}
	pthread_mutex_unlock(&d_mu);
	return 0;
}

static int d_get(struct ws_store *s, const char *key, uint64_t off, uint64_t len, struct ws_buf *out,
		 struct ws_obj_info *info)
{
	struct kept *k;
	int rc = 0;
	(void)s;
	__atomic_fetch_add(&d_requests, 1, __ATOMIC_RELAXED);
	pthread_mutex_lock(&d_mu);
	k = find(key);
	if (!k) {
		rc = WS_ENOTFOUND;
	} else {
		if (off < k->len)
			ws_buf_append(out, k->data + off, len < k->len - off ? (size_t)len : k->len - (size_t)off);
		rc = out->err;
		if (info) {
			memset(info, 0, sizeof(*info));
			info->size_bytes = k->len;
			snprintf(info->etag.s, sizeof(info->etag.s), "%" PRIu64, k->version);
		}
	}
	pthread_mutex_unlock(&d_mu);
	return rc;
}

static int d_head(struct ws_store *s, const char *key, struct ws_obj_info *info)
{
	struct ws_buf b;
	int rc;
	ws_buf_init(&b, 0);
	rc = d_get(s, key, 0, 0, &b, info);
	ws_buf_free(&b);
	return rc;
}

static int d_list(struct ws_store *s, const char *prefix, const char *token, unsigned max_keys,
		  struct ws_list_page *out)
{
	(void)s;
	(void)prefix;
	(void)token;
	(void)max_keys;
	__atomic_fetch_add(&d_requests, 1, __ATOMIC_RELAXED);
	memset(out, 0, sizeof(*out));
	return 0;
}

static int d_del(struct ws_store *s, const char *key)
{
	(void)s;
	(void)key;
	__atomic_fetch_add(&d_requests, 1, __ATOMIC_RELAXED);
	return 0;
}

static void d_close(struct ws_store *s) { free(s); }

static const struct ws_store_ops d_ops = {
	.put = d_put, .get = d_get, .head = d_head, .list = d_list, .del = d_del, .close = d_close,
};

static struct ws_store *open_discard(const char *url, unsigned shard, bool uploader, void *arg, int *err)
{
	struct dstore *d = calloc(1, sizeof(*d));
	(void)shard;
	(void)uploader;
	(void)arg;
	if (!d) {
		*err = -ENOMEM;
		return NULL;
	}
	d->base.ops = &d_ops;
	snprintf(d->base.url, sizeof(d->base.url), "%s", url);
	*err = 0;
	return &d->base;
}

static void discard_reset(void)
{
	pthread_mutex_lock(&d_mu);
	for (size_t i = 0; i < d_nkept; i++)
		free(d_kept[i].data);
	d_nkept = 0;
	pthread_mutex_unlock(&d_mu);
}

/* ---- setup ------------------------------------------------------------------ */

static void sql(sqlite3 *db, const char *q)
{
	char *msg = NULL;
	if (sqlite3_exec(db, q, NULL, NULL, &msg) != SQLITE_OK)
		bench_die("sqlite: %s: %s", q, msg ? msg : "?");
}

/* Commit about `bytes` of new rows (1 MiB transactions). */
static void append_db(sqlite3 *db, uint64_t bytes)
{
	char q[128];
	for (uint64_t done = 0; done < bytes; done += 1u << 20) {
		snprintf(q, sizeof(q), "BEGIN; INSERT INTO t(v) SELECT randomblob(1000) FROM generate_series(1, 1000); "
			 "COMMIT");
		/* generate_series is not always compiled in: fall back to a recursive CTE. */
		if (sqlite3_exec(db, q, NULL, NULL, NULL) != SQLITE_OK) {
			sql(db, "ROLLBACK");
			sql(db, "BEGIN; WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x<1000) "
				"INSERT INTO t(v) SELECT randomblob(1000) FROM c; COMMIT");
		}
	}
}

static void make_db(const char *path, uint64_t bytes)
{
	sqlite3 *db;
	if (sqlite3_open(path, &db) != SQLITE_OK)
		bench_die("open %s", path);
	sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, (int *)NULL);
	sql(db, "PRAGMA page_size=4096; PRAGMA journal_mode=WAL; PRAGMA wal_autocheckpoint=0; "
		"PRAGMA synchronous=OFF; CREATE TABLE t(k INTEGER PRIMARY KEY, v BLOB)");
	append_db(db, bytes);
	sqlite3_close(db);
}

static uint64_t file_size(const char *path)
{
	struct stat sb;
	return stat(path, &sb) == 0 ? (uint64_t)sb.st_size : 0;
}

/* ---- (a) bare io_uring fixed-buffer read ------------------------------------ */

/* Read every file from from[i] (0 when from is NULL) to its end. */
static double bare_read(char **wals, unsigned n, const uint64_t *from, uint64_t *bytes_out)
{
	int err = 0;
	struct ws_reader *r = ws_reader_open(READ_BUF, n, 0, &err);
	uint64_t bytes = 0;
	double t0;
	int *fds = calloc(n, sizeof(*fds)), *slots = calloc(n, sizeof(*slots));
	if (!r || !fds || !slots)
		bench_die("reader: %s", ws_errmsg());
	if (ws_reader_backend(r) != WS_READER_URING)
		fprintf(stderr, "bench_engine: note: reader fell back to pread\n");
	for (unsigned i = 0; i < n; i++) {
		fds[i] = open(wals[i], O_RDONLY | O_CLOEXEC);
		if (fds[i] < 0 || (slots[i] = ws_reader_attach(r, fds[i])) < 0)
			bench_die("open %s", wals[i]);
	}
	t0 = bench_now_s();
	for (unsigned i = 0; i < n; i++) {
		for (uint64_t off = from ? from[i] : 0;;) {
			ssize_t got = ws_reader_read(r, slots[i], off, 0, READ_BUF);
			if (got < 0)
				bench_die("read %s: %s", wals[i], ws_strerror((int)got));
			if (got == 0)
				break;
			off += (uint64_t)got;
			bytes += (uint64_t)got;
		}
	}
	double dt = bench_now_s() - t0;
	for (unsigned i = 0; i < n; i++) {
		ws_reader_detach(r, slots[i]);
		close(fds[i]);
	}
	ws_reader_close(r);
	free(fds);
	free(slots);
	*bytes_out = bytes;
	return dt;
}

/* ---- (b), (c) the engine ----------------------------------------------------- */

static bool sqpoll;
static uint64_t ring_opt = (uint64_t)64 << 20, batch_opt = (uint64_t)4 << 20;

static struct ws_engine *engine(unsigned shards, uint64_t ring)
{
	struct ws_shard_config sc[2];
	struct ws_engine_config ec;
	struct ws_engine *e;
	int err = 0;
	for (unsigned i = 0; i < shards; i++) {
		ws_shard_config_default(&sc[i]);
		sc[i].core = (int)i < (int)sysconf(_SC_NPROCESSORS_ONLN) ? (int)i : -1;
		sc[i].ring_bytes = ring;
		sc[i].batch_age_ms_max = 3600000; /* only the flush tails: the timer measures work */
		sc[i].sqpoll = sqpoll;
		sc[i].batch_bytes_max = batch_opt;
	}
	memset(&ec, 0, sizeof(ec));
	ec.sink_url = "bench://discard";
	ec.shards = shards;
	ec.shard = sc;
	ec.epoch = 1;
	ec.pointer_generation = 1;
	ec.wal_checkpoint_bytes = UINT64_MAX;
	e = ws_engine_create(&ec, &err);
	if (!e)
		bench_die("engine: %s", ws_errmsg());
	return e;
}

static void add(struct ws_engine *e, const char *name, const char *path, int shard)
{
	struct ws_tenant_config t = { .name = name, .db_path = path, .shard = shard };
	if (ws_engine_add_tenant(e, &t))
		bench_die("add %s: %s", name, ws_errmsg());
}

static uint64_t shipped(struct ws_engine *e)
{
	uint64_t n = 0;
	for (unsigned s = 0; s < ws_engine_shards(e); s++) {
		struct ws_shard_metrics m;
		if (ws_engine_shard_metrics(e, s, &m))
			bench_die("metrics");
		n += m.frames_shipped;
	}
	return n;
}

static double flush_timed(struct ws_engine *e, uint64_t *frames)
{
	uint64_t before = shipped(e);
	double t0 = bench_now_s();
	if (ws_engine_flush(e))
		bench_die("flush: %s", ws_errmsg());
	double dt = bench_now_s() - t0;
	*frames = shipped(e) - before;
	return dt;
}

/*
 * Register every database under fresh names (so each is a first contact that
 * ships its whole WAL), flush, time it; then unregister them. The engine
 * lives across calls so its ring memory is warm, as in a running host.
 */
static double ship(struct ws_engine *e, char **dbs, unsigned n, unsigned round, uint64_t *frames)
{
	unsigned shards = ws_engine_shards(e);
	char name[32];
	uint64_t before = shipped(e);
	double t0 = bench_now_s(), dt;
	for (unsigned i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "s%ur%ut%u", shards, round, i);
		add(e, name, dbs[i], (int)(i % shards));
	}
	if (ws_engine_flush(e))
		bench_die("flush: %s", ws_errmsg());
	dt = bench_now_s() - t0;
	*frames = shipped(e) - before;
	for (unsigned i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "s%ur%ut%u", shards, round, i);
		if (ws_engine_remove_tenant(e, name))
			bench_die("remove %s: %s", name, ws_errmsg());
	}
	return dt;
}

/* ---- (d) idle tenants --------------------------------------------------------- */

static double cpu_s(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
	       (double)ru.ru_stime.tv_usec / 1e6;
}

/* Register the n idle databases on a fresh engine (2 shards) and ship each
 * once: one ws_engine_add_tenant call each (batch false) or one
 * ws_engine_add_tenants call; seconds from the first add to the flush's end. */
static struct ws_engine *start_idle(const char *dir, unsigned n, bool batch, bool fresh, double *secs)
{
	struct ws_tenant_config *tcs = calloc(n, sizeof(*tcs));
	char (*names)[32] = calloc(n, sizeof(*names));
	char (*paths)[4200] = calloc(n, sizeof(*paths));
	struct ws_engine *e;
	if (!tcs || !names || !paths)
		bench_die("out of memory");
	for (unsigned i = 0; i < n; i++) {
		snprintf(paths[i], sizeof(paths[i]), "%s/idle%05u.db", dir, i);
		snprintf(names[i], sizeof(names[i]), "idle%05u", i);
		tcs[i] = (struct ws_tenant_config){ .name = names[i], .db_path = paths[i], .shard = -1 };
	}
	if (fresh)
		discard_reset();
	e = engine(2, (uint64_t)8 << 20);
	double t0 = bench_now_s();
	if (batch) {
		if (ws_engine_add_tenants(e, tcs, n, NULL))
			bench_die("add: %s", ws_errmsg());
	} else {
		for (unsigned i = 0; i < n; i++)
			add(e, names[i], paths[i], -1);
	}
	if (ws_engine_flush(e))
		bench_die("flush: %s", ws_errmsg());
	*secs = bench_now_s() - t0;
	free(tcs);
	free(names);
	free(paths);
	return e;
}

static void stop_engine(struct ws_engine *e)
{
	if (ws_engine_stop(e))
		bench_die("stop: %s", ws_errmsg());
	ws_engine_destroy(e);
}

static void idle(const char *dir, unsigned n, unsigned secs, unsigned reps)
{
	struct ws_engine *e = NULL;
	char path[4200];
	double *one = calloc(reps, sizeof(*one)), *all = calloc(reps, sizeof(*all)), *again = calloc(reps, sizeof(*again));
	if (!one || !all || !again)
		bench_die("out of memory");
	for (unsigned i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/idle%05u.db", dir, i);
		make_db(path, 0);
	}
	/* Start-up, interleaved (the order alternates each repetition): every
	 * tenant registered afresh on a new engine and shipped once, then a
	 * restart: a new engine over what the last one stored (nothing new to
	 * ship: each first tail is Empty). The last restart's engine stays for
	 * the idle window. */
	for (unsigned r = 0; r < reps; r++) {
		for (unsigned k = 0; k < 2; k++) {
			bool batch = (r + k) % 2 == 1;
			if (e)
				stop_engine(e);
			e = start_idle(dir, n, batch, true, batch ? &all[r] : &one[r]);
		}
		stop_engine(e);
		e = start_idle(dir, n, true, false, &again[r]);
	}
	printf("start-up: %u tenants registered and shipped once (2 shards, %u repetitions, median (min..max)):\n", n,
	       reps);
	bench_print_spread("  ws_engine_add_tenant, one call each (baseline)", one, reps, "s");
	bench_print_spread("  ws_engine_add_tenants, one call", all, reps, "s");
	printf("  ratio batch / one call each: %.2f\n", bench_median(all, reps) / bench_median(one, reps));
	bench_print_spread("  restart over the stored streams, one call (nothing new: every tail Empty; target < 5 s "
			   "at 10,000)", again, reps, "s");
	free(one);
	free(all);
	free(again);
	/* Let first-contact wake-ups (the -wal files SQLite creates) settle. */
	struct timespec settle = { 2, 0 };
	nanosleep(&settle, NULL);
	uint64_t req0 = __atomic_load_n(&d_requests, __ATOMIC_RELAXED);
	uint64_t wake0 = 0, tails0 = 0, wake1 = 0, tails1 = 0;
	for (unsigned s = 0; s < 2; s++) {
		struct ws_shard_metrics m;
		if (ws_engine_shard_metrics(e, s, &m) == 0) {
			wake0 += m.wakeups;
			tails0 += m.tails;
		}
	}
	fprintf(stderr, "bench_engine: idle window of %u s begins\n", secs);
	double c0 = cpu_s(), w0 = bench_now_s();
	struct timespec ts = { secs, 0 };
	nanosleep(&ts, NULL);
	double c1 = cpu_s(), w1 = bench_now_s();
	uint64_t req1 = __atomic_load_n(&d_requests, __ATOMIC_RELAXED);
	for (unsigned s = 0; s < 2; s++) {
		struct ws_shard_metrics m;
		if (ws_engine_shard_metrics(e, s, &m) == 0) {
			wake1 += m.wakeups;
			tails1 += m.tails;
		}
	}
	double cpu_pct = (c1 - c0) / (w1 - w0) * 100.0;
	double per_hour = (double)(req1 - req0) * 3600.0 / (w1 - w0);
	printf("idle tenants: %u registered (2 shards)\n", n);
	printf("  CPU over %.1f s idle: %.3f%% of one core (target < 2%%)\n", w1 - w0, cpu_pct);
	printf("  object-store requests while idle: %" PRIu64 " (%.0f per hour; target 0)\n", req1 - req0, per_hour);
	printf("  shard wake-ups while idle: %" PRIu64 ", tails: %" PRIu64 "\n", wake1 - wake0, tails1 - tails0);
	stop_engine(e);
}

int main(int argc, char **argv)
{
	uint64_t mb = 256, ntenants = 8, nidle = 10000, idle_s = 10, reps = 3, start_reps = 7;
	const char *base = NULL;
	char dir[4096];
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--tiny")) {
			mb = 8;
			ntenants = 4;
			nidle = 200;
			idle_s = 2;
			reps = 1;
			start_reps = 1;
		} else if (!strcmp(a, "--mb") && v) {
			mb = bench_parse_num(a, v, 1, 1u << 20), i++;
		} else if (!strcmp(a, "--tenants") && v) {
			ntenants = bench_parse_num(a, v, 2, 4096), i++;
		} else if (!strcmp(a, "--idle") && v) {
			nidle = bench_parse_num(a, v, 0, 100000), i++;
		} else if (!strcmp(a, "--idle-s") && v) {
			idle_s = bench_parse_num(a, v, 1, 3600), i++;
		} else if (!strcmp(a, "--reps") && v) {
			reps = bench_parse_num(a, v, 1, 99), i++;
		} else if (!strcmp(a, "--start-reps") && v) {
			start_reps = bench_parse_num(a, v, 1, 99), i++;
		} else if (!strcmp(a, "--ring-mb") && v) {
			ring_opt = bench_parse_num(a, v, 1, 4096) << 20, i++;
		} else if (!strcmp(a, "--batch-kb") && v) {
			batch_opt = bench_parse_num(a, v, 65, 1u << 20) << 10, i++;
		} else if (!strcmp(a, "--sqpoll")) {
			sqpoll = true;
		} else if (!strcmp(a, "--dir") && v) {
			base = v, i++;
		} else {
			bench_die("usage: bench_engine [--mb N] [--tenants N] [--idle N] [--idle-s S] [--reps N] "
				  "[--start-reps N] [--dir DIR] [--ring-mb N] [--batch-kb N] [--sqpoll] [--tiny]");
		}
	}
	snprintf(dir, sizeof(dir), "%s/bench-engine-XXXXXX", base ? base : "/tmp");
	if (!mkdtemp(dir))
		bench_die("mkdtemp %s: %s", dir, strerror(errno));
	ws_engine_open_store_hook = open_discard;

	char **dbs = calloc(ntenants, sizeof(*dbs)), **wals = calloc(ntenants, sizeof(*wals));
	uint64_t wal_bytes = 0;
	for (unsigned i = 0; i < ntenants; i++) {
		if (asprintf(&dbs[i], "%s/t%u.db", dir, i) < 0 || asprintf(&wals[i], "%s-wal", dbs[i]) < 0)
			bench_die("out of memory");
		make_db(dbs[i], (mb << 20) / ntenants);
		wal_bytes += file_size(wals[i]);
	}
	uint64_t frames_total = 0;
	for (unsigned i = 0; i < ntenants; i++) {
		uint64_t sz = file_size(wals[i]);
		frames_total += sz > 32 ? (sz - 32) / FRAME : 0;
	}
	printf("bench_engine: %" PRIu64 " tenants, %.1f MiB of WAL (%" PRIu64 " frames), %" PRIu64 " reps, median\n",
	       ntenants, (double)wal_bytes / (1 << 20), frames_total, reps);
	uint64_t dummy;
	(void)bare_read(wals, (unsigned)ntenants, NULL, &dummy); /* page cache */
	/* The application keeps its databases open (as a host does), so the
	 * WAL index stays valid and no connection of walship's has to rebuild
	 * it from the whole WAL (SQLite's recovery), which is not shipping work. */
	sqlite3 **apps = calloc(ntenants, sizeof(*apps));
	for (unsigned i = 0; i < ntenants; i++) {
		if (sqlite3_open(dbs[i], &apps[i]) != SQLITE_OK)
			bench_die("open %s", dbs[i]);
		sqlite3_db_config(apps[i], SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, (int *)NULL);
		sql(apps[i], "PRAGMA wal_autocheckpoint=0; SELECT count(*) FROM t");
	}

	double a[99], b1[99], b2[99];
	struct ws_engine *e1 = engine(1, ring_opt), *e2 = engine(2, ring_opt);
	uint64_t warm;
	/* One pass each first: ring memory is touched once, as in any engine
	 * that has run for a moment. */
	(void)ship(e1, dbs, (unsigned)ntenants, 0, &warm);
	(void)ship(e2, dbs, (unsigned)ntenants, 0, &warm);
	for (unsigned r = 0; r < reps; r++) {
		uint64_t bytes, f1, f2;
		/* Let SQ pollers of the other measurements go to sleep first
		 * (they spin 100 ms after their last request). */
		struct timespec calm = { 0, 300 * 1000000L };
		nanosleep(&calm, NULL);
		double ta = bare_read(wals, (unsigned)ntenants, NULL, &bytes);
		nanosleep(&calm, NULL);
		double t1 = ship(e1, dbs, (unsigned)ntenants, r + 1, &f1);
		nanosleep(&calm, NULL);
		double t2 = ship(e2, dbs, (unsigned)ntenants, r + 1, &f2);
		if (f1 != frames_total || f2 != frames_total)
			bench_die("shipped %" PRIu64 " / %" PRIu64 " frames, expected %" PRIu64, f1, f2, frames_total);
		a[r] = (double)(bytes > 32 * ntenants ? (bytes - 32 * ntenants) / FRAME : 0) / ta;
		b1[r] = (double)f1 / t1;
		b2[r] = (double)f2 / t2;
	}
	double ma = bench_median(a, (unsigned)reps), m1 = bench_median(b1, (unsigned)reps),
	       m2 = bench_median(b2, (unsigned)reps);
	printf("first contact (each tenant registered afresh: opens, read marks, re-base, whole WAL):\n");
	printf("  bare io_uring fixed-buffer read : %10.0f frames/s  (%.0f MB/s)\n", ma, ma * FRAME / 1e6);
	printf("  walship, 1 shard                : %10.0f frames/s  ratio to bare read %.2f\n", m1, m1 / ma);
	printf("  walship, 2 shards               : %10.0f frames/s  ratio to 1 shard %.2f (%ld cores online)\n", m2,
	       m2 / m1, sysconf(_SC_NPROCESSORS_ONLN));
	fflush(stdout);

	/* Steady state: registered once (their first ship is not measured),
	 * then each repetition appends and ships only what is new. */
	char name[32];
	for (unsigned i = 0; i < ntenants; i++) {
		snprintf(name, sizeof(name), "c1t%u", i);
		add(e1, name, dbs[i], 0);
		snprintf(name, sizeof(name), "c2t%u", i);
		add(e2, name, dbs[i], (int)(i % 2));
	}
	if (ws_engine_flush(e1) || ws_engine_flush(e2))
		bench_die("flush: %s", ws_errmsg());
	uint64_t *from = calloc(ntenants, sizeof(*from));
	if (!from)
		bench_die("out of memory");
	for (unsigned r = 0; r < reps; r++) {
		uint64_t bytes, f1, f2, want = 0;
		struct timespec calm = { 0, 300 * 1000000L };
		for (unsigned i = 0; i < ntenants; i++) {
			from[i] = file_size(wals[i]);
			append_db(apps[i], (mb << 20) / ntenants);
			want += (file_size(wals[i]) - from[i]) / FRAME;
		}
		/* Read the new pages twice first, untimed: the second read of a
		 * page moves it to the kernel's active list, a cost that would
		 * otherwise fall on whichever side read second. */
		(void)bare_read(wals, (unsigned)ntenants, from, &bytes);
		(void)bare_read(wals, (unsigned)ntenants, from, &bytes);
		nanosleep(&calm, NULL);
		double ta = bare_read(wals, (unsigned)ntenants, from, &bytes);
		nanosleep(&calm, NULL);
		double t1 = flush_timed(e1, &f1);
		nanosleep(&calm, NULL);
		double t2 = flush_timed(e2, &f2);
		if (f1 != want || f2 != want || bytes / FRAME != want)
			bench_die("steady state: shipped %" PRIu64 " / %" PRIu64 ", read %" PRIu64 " frames, expected %" PRIu64,
				  f1, f2, bytes / FRAME, want);
		a[r] = (double)want / ta;
		b1[r] = (double)f1 / t1;
		b2[r] = (double)f2 / t2;
	}
	free(from);
	ma = bench_median(a, (unsigned)reps);
	m1 = bench_median(b1, (unsigned)reps);
	m2 = bench_median(b2, (unsigned)reps);
	printf("steady state (registered tenants, %" PRIu64 " MiB appended per repetition, one tail each):\n", mb);
	printf("  bare io_uring fixed-buffer read : %10.0f frames/s  (%.0f MB/s)\n", ma, ma * FRAME / 1e6);
	printf("  walship, 1 shard                : %10.0f frames/s  ratio to bare read %.2f (target >= 0.7)\n", m1,
	       m1 / ma);
	printf("  walship, 2 shards               : %10.0f frames/s  ratio to 1 shard %.2f (%ld cores online)\n", m2,
	       m2 / m1, sysconf(_SC_NPROCESSORS_ONLN));
	fflush(stdout);
	if (ws_engine_stop(e1) || ws_engine_stop(e2))
		bench_die("stop: %s", ws_errmsg());
	ws_engine_destroy(e1);
	ws_engine_destroy(e2);

	for (unsigned i = 0; i < ntenants; i++)
		sqlite3_close(apps[i]);
	free(apps);
	if (nidle)
		idle(dir, (unsigned)nidle, (unsigned)idle_s, (unsigned)start_reps);

	char cmd[4200];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "bench_engine: could not remove %s\n", dir);
	for (unsigned i = 0; i < ntenants; i++) {
		free(dbs[i]);
		free(wals[i]);
	}
	free(dbs);
	free(wals);
	discard_reset();
	free(d_kept);
	return 0;
}
