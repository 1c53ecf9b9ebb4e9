/*
 * End-to-end shipping throughput, as a ratio against a baseline measured in
 * the same run (docs/DESIGN.md, "Performance model").
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
#include "bench_walfile.h"
#include "walship.h"

#define REPS_MAX 99

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
	db_path = bench_path_join(work, "bench.db");
	wal_path = bench_path_join(work, "bench.db-wal");

	frame_bytes = BENCH_FRAME_HDR_BYTES + o.page_size;
	if (o.batch_bytes < frame_bytes)
		bench_die("--batch-bytes %" PRIu64 " is below one frame (%zu)", o.batch_bytes, frame_bytes);
	/* walship's batches hold whole frames: the baseline's files match them. */
	chunk_bytes = (size_t)(o.batch_bytes / frame_bytes * frame_bytes);
	buf = malloc(chunk_bytes);
	if (!buf)
		bench_die("out of memory");

	double t0 = bench_now_s();
	writer = bench_make_wal(db_path, wal_path, o.wal_mib << 20, o.page_size);
	wal_bytes = bench_file_bytes(wal_path);
	if (wal_bytes < BENCH_WAL_HDR_BYTES + frame_bytes || (wal_bytes - BENCH_WAL_HDR_BYTES) % frame_bytes)
		bench_die("%s: unexpected size %" PRIu64, wal_path, wal_bytes);
	frames = (wal_bytes - BENCH_WAL_HDR_BYTES) / frame_bytes;
	bench_warm(wal_path, buf, chunk_bytes);
	printf("bench_e2e: WAL %.1f MiB (%" PRIu64 " frames, page %u) written in %.1f s; batch %zu bytes; "
	       "dir %s (%s); %u reps, interleaved\n",
	       (double)wal_bytes / 1048576.0, frames, o.page_size, bench_now_s() - t0, chunk_bytes, work,
	       bench_fs_name(work), o.reps);
	fflush(stdout);

	for (unsigned i = 0; i < o.reps; i++) {
		char name[32];
		char *sink_dir, *base_dir;
		struct result a;
		struct bench_baseline b;

		snprintf(name, sizeof(name), "sink-%u", i);
		sink_dir = bench_path_join(work, name);
		snprintf(name, sizeof(name), "base-%u", i);
		base_dir = bench_path_join(work, name);

		sync();
		a = run_walship(&o, db_path, sink_dir, frames);
		sync();
		b = bench_run_baseline(wal_path, wal_bytes, chunk_bytes, base_dir, buf);
		ws_mbs[i] = (double)wal_bytes / a.seconds / 1e6;
		base_mbs[i] = (double)wal_bytes / b.seconds / 1e6;
		printf("rep %u: walship %8.1f MB/s (%.3f s, %" PRIu64 " puts)   baseline %8.1f MB/s (%.3f s, %" PRIu64
		       " files)\n",
		       i + 1, ws_mbs[i], a.seconds, a.objects, base_mbs[i], b.seconds, b.files);
		fflush(stdout);
		if (!o.keep) {
			bench_rm_rf(sink_dir);
			bench_rm_rf(base_dir);
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
		bench_rm_rf(work);
	free(buf);
	free(db_path);
	free(wal_path);
	return 0;
}
