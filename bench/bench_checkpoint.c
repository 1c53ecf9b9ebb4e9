/*
 * Checkpoints: restore speed-up and the cost of a checkpoint, as ratios and
 * request counts measured in one run (docs/DESIGN.md, "Performance model").
 *
 *   bench_checkpoint [--tiny] [--generations N] [--txns N] [--rows N] [--tenants N] [--reps N]
 *                    [--dir DIR] [--keep]
 *
 * (1) Long history. One tenant's database (--rows rows of 200 bytes) gets
 *     --generations WAL generations of --txns transactions each (every
 *     transaction rewrites 10% of the rows; after each generation the
 *     engine's WAL checkpoint and an application TRUNCATE start a new WAL),
 *     all shipped to a file:// sink. A checkpoint is taken, then a few more
 *     transactions are shipped after its cut. Then, interleaved --reps
 *     times:
 *       full:  restore from the whole frame history (ws_restore with
 *              frame = UINT64_MAX, which never starts from a checkpoint);
 *       ckpt:  restore of the latest state, which starts from the
 *              checkpoint's artifact and replays only the frames after it.
 *     Both outputs must be byte-identical. Printed: medians, the ratio
 *     full / ckpt (target >= 10), and the objects each read.
 * (2) Wide cut. --tenants small tenants (one shipped transaction each) on
 *     one sink; one checkpoint of all of them, timed, with the object-store
 *     requests it cost (ws_sink_get_stats), then a second checkpoint with
 *     nothing new (incremental: every image starts from the first one's).
 *
 * --tiny: a seconds-long smoke (4 generations x 3 txns, 20 tenants).
 * The exit status is 0 unless something failed; ratios are reported, never
 * enforced here.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <ftw.h>
#include <inttypes.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench_util.h"
#include "walship.h"

#define REPS_MAX 99

struct opts {
	unsigned generations, txns, rows, tenants, reps;
	const char *dir;
	bool keep;
};

static void usage(void)
{
	fprintf(stderr, "usage: bench_checkpoint [--tiny] [--generations N] [--txns N] [--rows N] [--tenants N]\n"
			"                        [--reps N] [--dir DIR] [--keep]\n");
	exit(2);
}

static void exec_sql(sqlite3 *db, const char *sql)
{
	char *err = NULL;
	if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK)
		bench_die("sqlite: %s: %s", sql, err ? err : sqlite3_errmsg(db));
}

static sqlite3 *writer_open(const char *path)
{
	sqlite3 *db = NULL;
	if (sqlite3_open(path, &db) != SQLITE_OK)
		bench_die("open %s: %s", path, sqlite3_errmsg(db));
	sqlite3_busy_timeout(db, 5000);
	exec_sql(db, "PRAGMA journal_mode=WAL; PRAGMA wal_autocheckpoint=0; PRAGMA synchronous=OFF;"
		     "CREATE TABLE IF NOT EXISTS t(id INTEGER PRIMARY KEY, v BLOB)");
	return db;
}

static struct ws_stream *stream_open(struct ws_sink *sink, const char *tenant, const char *db)
{
	struct ws_stream_config cfg;
	struct ws_stream *st;
	int err = 0;
	memset(&cfg, 0, sizeof(cfg));
	cfg.tenant = tenant;
	cfg.db_path = db;
	cfg.epoch = 1;
	cfg.pointer_generation = 1;
	cfg.wal_checkpoint_bytes = 1; /* a WAL checkpoint once everything is shipped */
	st = ws_stream_open(sink, &cfg, &err);
	if (!st)
		bench_die("stream %s: %s", tenant, ws_errmsg());
	return st;
}

static void tail(struct ws_stream *st)
{
	struct ws_outcome o;
	int rc = ws_stream_tail_frames(st, &o);
	if (rc)
		bench_die("tail: %s", ws_errmsg());
}

/* Rewrite every 10th row starting at k % 10 (10% of the rows). */
static void txn(sqlite3 *db, unsigned rows, unsigned k)
{
	char sql[256];
	snprintf(sql, sizeof(sql),
		 "BEGIN; WITH RECURSIVE s(x) AS (SELECT %u UNION ALL SELECT x + 10 FROM s WHERE x + 10 <= %u) "
		 "INSERT OR REPLACE INTO t(id, v) SELECT x, randomblob(200) FROM s; COMMIT",
		 k % 10, rows);
	exec_sql(db, sql);
}

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
	(void)sb;
	(void)flag;
	(void)f;
	return remove(p);
}

static struct ws_sink *sink_in(const char *dir, const char *name, char *url, size_t cap)
{
	int err = 0;
	struct ws_sink *s;
	snprintf(url, cap, "file://%s/%s", dir, name);
	s = ws_sink_open(url, &err);
	if (!s)
		bench_die("sink %s: %s", url, ws_errmsg());
	return s;
}

static uint8_t *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	uint8_t *b;
	long n;
	if (!f || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0)
		bench_die("read %s", path);
	b = malloc((size_t)n + 1);
	if (!b || fread(b, 1, (size_t)n, f) != (size_t)n)
		bench_die("read %s", path);
	fclose(f);
	*len = (size_t)n;
	return b;
}

static uint64_t requests(const struct ws_sink_stats *a, const struct ws_sink_stats *b)
{
	return (b->puts - a->puts) + (b->gets - a->gets) + (b->heads - a->heads) + (b->lists - a->lists) +
	       (b->deletes - a->deletes);
}

static void long_history(const struct opts *o, const char *dir)
{
	char db[4096], url[4200], out_full[4096], out_ckpt[4096];
	double full[REPS_MAX], ck[REPS_MAX];
	struct ws_sink_stats s0, s1, s2;
	struct ws_checkpoint_info info;
	struct ws_sink *sink;
	struct ws_stream *st;
	sqlite3 *w;
	uint64_t got_full = 0, got_ckpt = 0;
	double t0;
	unsigned k = 0;

	snprintf(db, sizeof(db), "%s/history.db", dir);
	sink = sink_in(dir, "sink-history", url, sizeof(url));
	w = writer_open(db);
	txn(w, o->rows, k++);
	st = stream_open(sink, "history", db);
	t0 = bench_now_s();
	for (unsigned g = 0; g < o->generations; g++) {
		for (unsigned i = 0; i < o->txns; i++)
			txn(w, o->rows, k++);
		tail(st);
		tail(st); /* all shipped: the engine runs its WAL checkpoint */
		exec_sql(w, "PRAGMA wal_checkpoint(TRUNCATE)");
	}
	printf("history: %u WAL generations x %u txns of %u rows/10 (shipped in %.2f s)\n", o->generations,
	       o->txns, o->rows, bench_now_s() - t0);
	ws_sink_get_stats(sink, &s0);
	t0 = bench_now_s();
	if (ws_checkpoint_take(sink, NULL, &info) != 0)
		bench_die("checkpoint: %s", ws_errmsg());
	ws_sink_get_stats(sink, &s1);
	printf("checkpoint %" PRIu64 ": %.3f s, %" PRIu64 " requests, artifact %" PRIu64 " bytes\n", info.id,
	       bench_now_s() - t0, requests(&s0, &s1), info.artifact_bytes);
	for (unsigned i = 0; i < 3; i++)
		txn(w, o->rows, k++);
	tail(st);

	snprintf(out_full, sizeof(out_full), "%s/restore-full.db", dir);
	snprintf(out_ckpt, sizeof(out_ckpt), "%s/restore-ckpt.db", dir);
	for (unsigned r = 0; r < o->reps; r++) {
		struct ws_restore_opts ro;
		memset(&ro, 0, sizeof(ro));
		ro.force = true;
		ro.frame = UINT64_MAX; /* the whole frame history, never a checkpoint */
		ws_sink_get_stats(sink, &s0);
		t0 = bench_now_s();
		if (ws_restore(sink, "history", &ro, out_full) != 0)
			bench_die("restore (full history): %s", ws_errmsg());
		full[r] = bench_now_s() - t0;
		ws_sink_get_stats(sink, &s1);
		memset(&ro, 0, sizeof(ro));
		ro.force = true;
		t0 = bench_now_s();
		if (ws_restore(sink, "history", &ro, out_ckpt) != 0)
			bench_die("restore (from checkpoint): %s", ws_errmsg());
		ck[r] = bench_now_s() - t0;
		ws_sink_get_stats(sink, &s2);
		got_full = s1.bytes_got - s0.bytes_got;
		got_ckpt = s2.bytes_got - s1.bytes_got;
		if (r == 0)
			printf("reads: full history %" PRIu64 " GETs / %" PRIu64 " bytes; from checkpoint %" PRIu64
			       " GETs / %" PRIu64 " bytes\n", s1.gets - s0.gets, got_full, s2.gets - s1.gets, got_ckpt);
	}
	{
		size_t la, lb;
		uint8_t *a = slurp(out_full, &la), *b = slurp(out_ckpt, &lb);
		if (la != lb || memcmp(a, b, la) != 0)
			bench_die("the two restores differ (%zu vs %zu bytes)", la, lb);
		free(a);
		free(b);
	}
	double mf = bench_median(full, o->reps), mc = bench_median(ck, o->reps);
	printf("restore full history: median %.4f s\n", mf);
	printf("restore from checkpoint + frames after it: median %.4f s\n", mc);
	printf("ratio full / checkpoint: %.1fx (target >= 10x)\n", mf / mc);
	ws_stream_close(st);
	sqlite3_close(w);
	ws_sink_close(sink);
}

static void wide_cut(const struct opts *o, const char *dir)
{
	char url[4200];
	struct ws_sink_stats s0, s1;
	struct ws_checkpoint_info info;
	struct ws_sink *sink = sink_in(dir, "sink-wide", url, sizeof(url));
	double t0 = bench_now_s(), t;

	for (unsigned i = 0; i < o->tenants; i++) {
		char db[4096], name[32];
		sqlite3 *w;
		struct ws_stream *st;
		snprintf(name, sizeof(name), "t%05u", i);
		snprintf(db, sizeof(db), "%s/%s.db", dir, name);
		w = writer_open(db);
		txn(w, 100, i);
		st = stream_open(sink, name, db);
		tail(st);
		ws_stream_close(st);
		sqlite3_close(w);
		unlink(db);
	}
	printf("wide: %u tenants shipped in %.2f s\n", o->tenants, bench_now_s() - t0);
	for (int round = 0; round < 2; round++) {
		ws_sink_get_stats(sink, &s0);
		t0 = bench_now_s();
		if (ws_checkpoint_take(sink, NULL, &info) != 0)
			bench_die("checkpoint: %s", ws_errmsg());
		t = bench_now_s() - t0;
		ws_sink_get_stats(sink, &s1);
		printf("checkpoint of %" PRIu64 " tenants (%s): %.3f s, %" PRIu64 " requests (%" PRIu64 " PUT, %" PRIu64
		       " GET, %" PRIu64 " HEAD, %" PRIu64 " LIST, %" PRIu64 " DELETE), %.2f per tenant, %" PRIu64
		       " artifact bytes\n",
		       info.tenants, round ? "second, incremental" : "first", t, requests(&s0, &s1),
		       s1.puts - s0.puts, s1.gets - s0.gets, s1.heads - s0.heads, s1.lists - s0.lists,
		       s1.deletes - s0.deletes, (double)requests(&s0, &s1) / (double)(info.tenants ? info.tenants : 1),
		       info.artifact_bytes);
	}
	ws_sink_close(sink);
}

int main(int argc, char **argv)
{
	struct opts o = { 200, 10, 4000, 1000, 3, NULL, false };
	char *dir;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--tiny")) {
			o.generations = 4;
			o.txns = 3;
			o.rows = 500;
			o.tenants = 20;
			o.reps = 1;
		} else if (!strcmp(a, "--keep")) {
			o.keep = true;
		} else if (i + 1 < argc && !strcmp(a, "--generations")) {
			o.generations = (unsigned)bench_parse_num(a, argv[++i], 1, 100000);
		} else if (i + 1 < argc && !strcmp(a, "--txns")) {
			o.txns = (unsigned)bench_parse_num(a, argv[++i], 1, 100000);
		} else if (i + 1 < argc && !strcmp(a, "--rows")) {
			o.rows = (unsigned)bench_parse_num(a, argv[++i], 10, 10000000);
		} else if (i + 1 < argc && !strcmp(a, "--tenants")) {
			o.tenants = (unsigned)bench_parse_num(a, argv[++i], 1, 100000);
		} else if (i + 1 < argc && !strcmp(a, "--reps")) {
			o.reps = (unsigned)bench_parse_num(a, argv[++i], 1, REPS_MAX);
		} else if (i + 1 < argc && !strcmp(a, "--dir")) {
			o.dir = argv[++i];
		} else {
			usage();
		}
	}
	if (asprintf(&dir, "%s/bench_checkpoint.XXXXXX", o.dir ? o.dir : (getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp")) <
		    0 ||
	    !mkdtemp(dir))
		bench_die("cannot create a work directory");
	long_history(&o, dir);
	wide_cut(&o, dir);
	if (!o.keep)
		nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
	else
		printf("kept %s\n", dir);
	free(dir);
	return 0;
}
