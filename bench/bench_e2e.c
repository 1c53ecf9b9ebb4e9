/*
 * End-to-end shipping throughput, as a ratio against a baseline measured in
 * the same run (DESIGN.md, "Performance model").
 *
 *   bench_e2e [--mb N] [--batch-bytes N] [--reps N] [--page-size N] [--dir DIR] [--keep]
 *
 * Setup: a SQLite database in WAL mode with autocheckpoint off gets N MiB of
 * committed WAL (transactions of ~1 MiB of random rows), written through a
 * connection that stays open, then the WAL is read once so it sits in the
 * page cache.
 *
 * (a) walship: ws_sink_open on a fresh file:// directory, ws_stream_open
 *     (outside the timer), then one ws_stream_tail_frames call, timed, which
 *     ships every frame in batches of at most batch_bytes_max.
 * (b) baseline: the same WAL bytes, read with pread in chunks of the same
 *     size (whole frames, as walship's batches), each written to a temp file
 *     in a fresh directory with write + fdatasync + rename + fsync of the
 *     directory: what the file sink's put does, without anything else.
 *
 * Each is measured --reps times (default 3), interleaved a, b, a, b, ...;
 * the medians and their ratio (walship / baseline, target >= 0.8) are
 * printed. Throughput is WAL bytes per second, MB = 10^6 bytes.
 *
 * The exit status is 0 unless something failed (a crash, an I/O error, a
 * short shipment): the ratio is reported, never enforced here.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "walship.h"

#define REPS_MAX 99
#define WAL_HDR_BYTES 32u
#define FRAME_HDR_BYTES 24u

struct opts {
	uint64_t wal_mib;
	uint64_t batch_bytes;
	unsigned reps;
	unsigned page_size;
	const char *dir;
	bool keep;
};

static void usage(void)
{
	fputs("usage: bench_e2e [--mb N] [--batch-bytes N] [--reps N] [--page-size N] [--dir DIR] [--keep]\n"
	      "  --mb N           MiB of WAL to ship (default 256)\n"
	      "  --batch-bytes N  batch_bytes_max and the baseline's file size (default 4194304)\n"
	      "  --reps N         measurements of each, interleaved; medians reported (default 3)\n"
	      "  --page-size N    SQLite page size (default 4096)\n"
	      "  --dir DIR        where the database and sinks go (default $WS_TEST_TMP or /tmp)\n"
	      "  --keep           leave the work directory behind\n",
	      stderr);
}

static void parse_args(int argc, char **argv, struct opts *o)
{
	o->wal_mib = 256;
	o->batch_bytes = (uint64_t)4 << 20;
	o->reps = 3;
	o->page_size = 4096;
	o->dir = getenv("WS_TEST_TMP");
	if (!o->dir || !*o->dir)
		o->dir = "/tmp";
	o->keep = false;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--mb")) {
			o->wal_mib = bench_parse_num(a, v, 1, 1u << 20);
			i++;
		} else if (!strcmp(a, "--batch-bytes")) {
			o->batch_bytes = bench_parse_num(a, v, 65560, (uint64_t)1 << 30);
			i++;
		} else if (!strcmp(a, "--reps")) {
			o->reps = (unsigned)bench_parse_num(a, v, 1, REPS_MAX);
			i++;
		} else if (!strcmp(a, "--page-size")) {
			o->page_size = (unsigned)bench_parse_num(a, v, 512, 65536);
			if (o->page_size & (o->page_size - 1))
				bench_die("--page-size must be a power of two");
			i++;
		} else if (!strcmp(a, "--dir")) {
			if (!v)
				bench_die("--dir needs a directory");
			o->dir = v;
			i++;
		} else if (!strcmp(a, "--keep")) {
			o->keep = true;
		} else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage();
			exit(0);
		} else {
			usage();
			bench_die("unknown argument '%s'", a);
		}
	}
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	if (remove(path) < 0 && errno != ENOENT)
		fprintf(stderr, "bench_e2e: cannot remove %s: %s\n", path, strerror(errno));
	return 0;
}

static void rm_rf(const char *path)
{
	nftw(path, rm_entry, 32, FTW_DEPTH | FTW_PHYS);
}

static char *path_join(const char *a, const char *b)
{
	size_t n = strlen(a) + strlen(b) + 2;
	char *p = malloc(n);
	if (!p)
		bench_die("out of memory");
	snprintf(p, n, "%s/%s", a, b);
	return p;
}

static uint64_t file_bytes(const char *path)
{
	struct stat sb;
	if (stat(path, &sb) < 0)
		return 0;
	return (uint64_t)sb.st_size;
}

static void sql(sqlite3 *db, const char *s)
{
	char *msg = NULL;
	if (sqlite3_exec(db, s, NULL, NULL, &msg) != SQLITE_OK)
		bench_die("sqlite: %s: %s", s, msg ? msg : sqlite3_errmsg(db));
}

/* Write committed WAL until it holds at least wal_mib MiB; returns the open writer. */
static sqlite3 *make_wal(const struct opts *o, const char *db_path, const char *wal_path)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *ins = NULL;
	char pragma[64];
	const uint64_t want = o->wal_mib << 20;

	if (sqlite3_open(db_path, &db) != SQLITE_OK)
		bench_die("sqlite: open %s: %s", db_path, db ? sqlite3_errmsg(db) : "out of memory");
	/* Closing must leave the WAL alone (the bench deletes it anyway). */
	sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, (int *)NULL);
	snprintf(pragma, sizeof(pragma), "PRAGMA page_size=%u;", o->page_size);
	sql(db, pragma);
	sql(db, "PRAGMA journal_mode=WAL;");
	sql(db, "PRAGMA wal_autocheckpoint=0;");
	sql(db, "PRAGMA synchronous=OFF;"); /* the writer's speed is not what is measured */
	sql(db, "PRAGMA cache_size=-65536;");
	sql(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB);");
	if (sqlite3_prepare_v2(db,
			       "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 1200) "
			       "INSERT INTO t(v) SELECT randomblob(800) FROM c;",
			       -1, &ins, NULL) != SQLITE_OK)
		bench_die("sqlite: prepare: %s", sqlite3_errmsg(db));
	while (file_bytes(wal_path) < want) {
		if (sqlite3_step(ins) != SQLITE_DONE)
			bench_die("sqlite: insert: %s", sqlite3_errmsg(db));
		sqlite3_reset(ins);
	}
	sqlite3_finalize(ins);
	return db;
}

/* Read the whole file once so it is in the page cache. */
static void warm(const char *path, uint8_t *buf, size_t buf_bytes)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		bench_die("open %s: %s", path, strerror(errno));
	while (read(fd, buf, buf_bytes) > 0)
		;
	close(fd);
}

static void mkdir_durable(const char *path)
{
	char parent[PATH_MAX];
	char *slash;
	int fd;
	if (mkdir(path, 0755) < 0)
		bench_die("mkdir %s: %s", path, strerror(errno));
	snprintf(parent, sizeof(parent), "%s", path);
	slash = strrchr(parent, '/');
	if (slash && slash != parent)
		*slash = '\0';
	fd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fsync(fd) < 0)
		bench_die("fsync %s: %s", parent, strerror(errno));
	close(fd);
}

struct result {
	double seconds;
	uint64_t objects;
};

/* (a) walship: one tail_frames call ships the whole WAL into a fresh sink. */
static struct result run_walship(const struct opts *o, const char *db_path, const char *sink_dir,
				 uint64_t frames)
{
	char url[PATH_MAX + 16];
	struct ws_sink *sink;
	struct ws_stream *st;
	struct ws_outcome oc;
	struct ws_sink_stats stats;
	struct result r;
	double t0;
	int err = 0, rc;

	snprintf(url, sizeof(url), "file://%s", sink_dir);
	sink = ws_sink_open(url, &err);
	if (!sink)
		bench_die("ws_sink_open %s: %s", url, ws_errmsg());
	struct ws_stream_config sc = {
		.tenant = "bench",
		.db_path = db_path,
		.epoch = 1,
		.pointer_generation = 0,
		.policy = WS_POLICY_BLOCK,
		.batch_bytes_max = (size_t)o->batch_bytes,
		.reader_flags = 0,
		.wal_checkpoint_bytes = UINT64_MAX, /* ship only; keep the WAL for the next rep */
	};
	st = ws_stream_open(sink, &sc, &err);
	if (!st)
		bench_die("ws_stream_open: %s", ws_errmsg());

	t0 = bench_now_s();
	rc = ws_stream_tail_frames(st, &oc);
	r.seconds = bench_now_s() - t0;
	if (rc)
		bench_die("ws_stream_tail_frames: %s", ws_errmsg());
	if (oc.kind != WS_OUTCOME_STREAMED)
		bench_die("ws_stream_tail_frames: outcome %s, want streamed", ws_outcome_name(oc.kind));
	if (oc.u.streamed.last_frame != frames)
		bench_die("shipped through frame %" PRIu64 ", the WAL has %" PRIu64, oc.u.streamed.last_frame, frames);
	ws_sink_get_stats(sink, &stats);
	r.objects = stats.puts;
	ws_stream_close(st);
	ws_sink_close(sink);
	return r;
}

/* (b) baseline: the same bytes as files of the same size, durably. */
static struct result run_baseline(const char *wal_path, uint64_t wal_bytes, size_t chunk_bytes, const char *dir,
				  uint8_t *buf)
{
	struct result r = { 0, 0 };
	int wal_fd, dir_fd;
	double t0;

	mkdir_durable(dir);
	wal_fd = open(wal_path, O_RDONLY | O_CLOEXEC);
	dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (wal_fd < 0 || dir_fd < 0)
		bench_die("open %s / %s: %s", wal_path, dir, strerror(errno));

	t0 = bench_now_s();
	for (uint64_t off = 0; off < wal_bytes; off += chunk_bytes) {
		size_t n = wal_bytes - off < chunk_bytes ? (size_t)(wal_bytes - off) : chunk_bytes;
		char tmp[64], name[64];
		size_t done = 0;
		int fd;

		while (done < n) {
			ssize_t got = pread(wal_fd, buf + done, n - done, (off_t)(off + done));
			if (got <= 0)
				bench_die("pread %s: %s", wal_path, got < 0 ? strerror(errno) : "short file");
			done += (size_t)got;
		}
		snprintf(tmp, sizeof(tmp), ".tmp.%" PRIu64, r.objects);
		snprintf(name, sizeof(name), "b%016" PRIu64, r.objects);
		fd = openat(dir_fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (fd < 0)
			bench_die("create %s/%s: %s", dir, tmp, strerror(errno));
		for (done = 0; done < n;) {
			ssize_t put = write(fd, buf + done, n - done);
			if (put < 0)
				bench_die("write %s/%s: %s", dir, tmp, strerror(errno));
			done += (size_t)put;
		}
		if (fdatasync(fd) < 0)
			bench_die("fdatasync %s/%s: %s", dir, tmp, strerror(errno));
		close(fd);
		if (renameat(dir_fd, tmp, dir_fd, name) < 0)
			bench_die("rename %s/%s: %s", dir, tmp, strerror(errno));
		if (fsync(dir_fd) < 0)
			bench_die("fsync %s: %s", dir, strerror(errno));
		r.objects++;
	}
	r.seconds = bench_now_s() - t0;
	close(dir_fd);
	close(wal_fd);
	return r;
}

static const char *fs_name(const char *path)
{
	struct statfs sf;
	if (statfs(path, &sf) < 0)
		return "?";
	switch ((unsigned long)sf.f_type) {
	case 0xEF53: return "ext4";
	case 0x58465342: return "xfs";
	case 0x9123683E: return "btrfs";
	case 0x01021994: return "tmpfs (fsync is free)";
	case 0x794c7630: return "overlayfs";
	default: return "other";
	}
}

int main(int argc, char **argv)
{
	struct opts o;
	char tmpl[PATH_MAX];
	char *work, *db_path, *wal_path;
	sqlite3 *writer;
	uint8_t *buf;
	uint64_t wal_bytes, frames;
	size_t frame_bytes, chunk_bytes;
	double ws_mbs[REPS_MAX], base_mbs[REPS_MAX];

	parse_args(argc, argv, &o);
	snprintf(tmpl, sizeof(tmpl), "%s/ws-bench-e2e.XXXXXX", o.dir);
	work = mkdtemp(tmpl);
	if (!work)
		bench_die("mkdtemp %s: %s", tmpl, strerror(errno));
	db_path = path_join(work, "bench.db");
	wal_path = path_join(work, "bench.db-wal");

	frame_bytes = FRAME_HDR_BYTES + o.page_size;
	if (o.batch_bytes < frame_bytes)
		bench_die("--batch-bytes %" PRIu64 " is below one frame (%zu)", o.batch_bytes, frame_bytes);
	/* walship's batches hold whole frames: the baseline's files match them. */
	chunk_bytes = (size_t)(o.batch_bytes / frame_bytes * frame_bytes);
	buf = malloc(chunk_bytes);
	if (!buf)
		bench_die("out of memory");

	double t0 = bench_now_s();
	writer = make_wal(&o, db_path, wal_path);
	wal_bytes = file_bytes(wal_path);
	if (wal_bytes < WAL_HDR_BYTES + frame_bytes || (wal_bytes - WAL_HDR_BYTES) % frame_bytes)
		bench_die("%s: unexpected size %" PRIu64, wal_path, wal_bytes);
	frames = (wal_bytes - WAL_HDR_BYTES) / frame_bytes;
	warm(wal_path, buf, chunk_bytes);
	printf("bench_e2e: WAL %.1f MiB (%" PRIu64 " frames, page %u) written in %.1f s; batch %zu bytes; "
	       "dir %s (%s); %u reps, interleaved\n",
	       (double)wal_bytes / 1048576.0, frames, o.page_size, bench_now_s() - t0, chunk_bytes, work,
	       fs_name(work), o.reps);
	fflush(stdout);

	for (unsigned i = 0; i < o.reps; i++) {
		char name[32];
		char *sink_dir, *base_dir;
		struct result a, b;

		snprintf(name, sizeof(name), "sink-%u", i);
		sink_dir = path_join(work, name);
		snprintf(name, sizeof(name), "base-%u", i);
		base_dir = path_join(work, name);

		sync();
		a = run_walship(&o, db_path, sink_dir, frames);
		sync();
		b = run_baseline(wal_path, wal_bytes, chunk_bytes, base_dir, buf);
		ws_mbs[i] = (double)wal_bytes / a.seconds / 1e6;
		base_mbs[i] = (double)wal_bytes / b.seconds / 1e6;
		printf("rep %u: walship %8.1f MB/s (%.3f s, %" PRIu64 " puts)   baseline %8.1f MB/s (%.3f s, %" PRIu64
		       " files)\n",
		       i + 1, ws_mbs[i], a.seconds, a.objects, base_mbs[i], b.seconds, b.objects);
		fflush(stdout);
		if (!o.keep) {
			rm_rf(sink_dir);
			rm_rf(base_dir);
		}
		free(sink_dir);
		free(base_dir);
	}

	double mw = bench_median(ws_mbs, o.reps), mb = bench_median(base_mbs, o.reps);
	printf("median: walship %.1f MB/s, baseline (write+fdatasync+rename+dir fsync) %.1f MB/s, "
	       "ratio walship/baseline %.2f (target >= 0.80)\n",
	       mw, mb, mw / mb);

	sqlite3_close(writer);
	if (!o.keep)
		rm_rf(work);
	free(buf);
	free(db_path);
	free(wal_path);
	return 0;
}
