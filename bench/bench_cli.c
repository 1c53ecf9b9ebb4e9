/*
 * The CLI path, end to end: `walship replicate --once` of one tenant into a
 * fresh file:// sink, as a user runs it (a whole process: start-up, config,
 * sink open and probe, engine, drain, exit), as a ratio against a baseline
 * measured in the same run (docs/DESIGN.md, "Performance model").
 *
 *   bench_cli --walship PATH [--compare PATH] [--mb N] [--reps N] [--batch-bytes N] [--page-size N]
 *             [--dir DIR] [--json FILE] [--keep] [-- extra walship arguments]
 *
 * Setup: a SQLite database in WAL mode with autocheckpoint off gets N MiB of
 * committed WAL from real SQLite writes (transactions of ~1 MiB of random
 * rows) through a connection that stays open for the whole run (so no
 * close anywhere checkpoints the WAL away), then the WAL is read once so it
 * sits in the page cache. walship's config sets wal_checkpoint_bytes = off
 * so every repetition ships the same WAL.
 *
 * (a) walship: fork+exec of `walship replicate --once --quiet --config F
 *     --sink file://SINK bench=DB` into a fresh, empty, durably created
 *     sink directory, timed from before the fork to after its exit
 *     (wait4, which also gives its CPU time); exit status 0 required, and
 *     `walship ls --json` (untimed) must show every frame of the WAL.
 * (b) baseline: the same WAL bytes, pread in chunks of whole frames of the
 *     batch size walship uses, each written to a temp file in a fresh
 *     directory with write + fdatasync + rename + fsync of the directory
 *     (bench_walfile.c), timed from the first read to the last fsync.
 *
 * (c) with --compare PATH: (a) again with another walship binary (a build
 *     from before a change), so before and after come from the same run.
 *
 * Repetitions are interleaved, and the order rotates (a b, b a, ...; with
 * (c): a b c, b c a, c a b) so no side always runs on a cache or journal
 * another just dirtied; sync() before each. Per repetition the ratio is
 * baseline seconds / walship seconds (walship throughput over baseline
 * throughput, > 1: walship faster); the median, min and max of those
 * ratios are printed and written as JSON. The exit status is 0 unless
 * something failed (walship's exit status, a short shipment, an I/O
 * error): the ratio is reported, never enforced here.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "bench_walfile.h"

#define REPS_MAX 99
#define EXTRA_MAX 32
/* WS_BATCH_HDR_SIZE (store/ws_format.h): what a batch object holds besides frames. */
#define BATCH_HDR_BYTES 96u

extern char **environ;

struct opts {
	char *walship;
	char *compare;            /* another walship binary, run alongside (a build before a change) */
	uint64_t wal_mib;
	uint64_t batch_bytes;
	unsigned reps;
	unsigned page_size;
	const char *dir;
	const char *json;
	bool keep;
	int extra_count;
	char **extra;
};

static void usage(void)
{
	fputs("usage: bench_cli --walship PATH [--compare PATH] [--mb N] [--reps N] [--batch-bytes N] [--page-size N]\n"
	      "                 [--dir DIR] [--json FILE] [--keep] [-- walship replicate arguments]\n"
	      "  --walship PATH   the walship binary to run\n"
	      "  --compare PATH   another walship binary (a build before a change) run the same way in\n"
	      "                   each repetition, its own ratio against the same baseline reported\n"
	      "  --mb N           MiB of WAL to ship (default 250)\n"
	      "  --reps N         repetitions of each, interleaved (default 7)\n"
	      "  --batch-bytes N  walship's batch_bytes_max (default 4194304, walship's default); the\n"
	      "                   baseline writes files of the whole frames one batch holds\n"
	      "  --page-size N    SQLite page size (default 4096)\n"
	      "  --dir DIR        where the database and sinks go (default $WS_TEST_TMP or /tmp)\n"
	      "  --json FILE      also write the results there as JSON\n"
	      "  --keep           leave the work directory behind\n",
	      stderr);
}

static void parse_args(int argc, char **argv, struct opts *o)
{
	memset(o, 0, sizeof(*o));
	o->wal_mib = 250;
	o->batch_bytes = (uint64_t)4 << 20;
	o->reps = 7;
	o->page_size = 4096;
	o->dir = getenv("WS_TEST_TMP");
	if (!o->dir || !*o->dir)
		o->dir = "/tmp";
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--walship")) {
			if (!v)
				bench_die("--walship needs a path");
			o->walship = argv[i + 1];
			i++;
		} else if (!strcmp(a, "--compare")) {
			if (!v)
				bench_die("--compare needs a path");
			o->compare = argv[i + 1];
			i++;
		} else if (!strcmp(a, "--mb")) {
			o->wal_mib = bench_parse_num(a, v, 1, 1u << 20);
			i++;
		} else if (!strcmp(a, "--reps")) {
			o->reps = (unsigned)bench_parse_num(a, v, 1, REPS_MAX);
			i++;
		} else if (!strcmp(a, "--batch-bytes")) {
			o->batch_bytes = bench_parse_num(a, v, 65656, (uint64_t)1 << 30);
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
		} else if (!strcmp(a, "--json")) {
			if (!v)
				bench_die("--json needs a file");
			o->json = v;
			i++;
		} else if (!strcmp(a, "--keep")) {
			o->keep = true;
		} else if (!strcmp(a, "--")) {
			o->extra_count = argc - i - 1;
			o->extra = argv + i + 1;
			if (o->extra_count > EXTRA_MAX)
				bench_die("at most %d walship arguments after --", EXTRA_MAX);
			break;
		} else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage();
			exit(0);
		} else {
			usage();
			bench_die("unknown argument '%s'", a);
		}
	}
	if (!o->walship) {
		usage();
		bench_die("--walship PATH is required");
	}
	if (access(o->walship, X_OK) < 0)
		bench_die("--walship %s: %s", o->walship, strerror(errno));
	if (o->compare && access(o->compare, X_OK) < 0)
		bench_die("--compare %s: %s", o->compare, strerror(errno));
}

struct child {
	double seconds;
	double user_s, sys_s;
	long max_rss_kib;
	int status;
};

/* Runs argv to completion, stdout to out_path (or inherited), timed around fork..exit. */
static struct child run_child(char *const argv[], const char *out_path)
{
	posix_spawn_file_actions_t fa;
	struct child c;
	struct rusage ru;
	pid_t pid;
	double t0;
	int rc;

	memset(&c, 0, sizeof(c));
	posix_spawn_file_actions_init(&fa);
	if (out_path)
		posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	t0 = bench_now_s();
	rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
	if (rc)
		bench_die("spawn %s: %s", argv[0], strerror(rc));
	while (wait4(pid, &c.status, 0, &ru) < 0)
		if (errno != EINTR)
			bench_die("wait4 %s: %s", argv[0], strerror(errno));
	c.seconds = bench_now_s() - t0;
	posix_spawn_file_actions_destroy(&fa);
	c.user_s = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6;
	c.sys_s = (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
	c.max_rss_kib = ru.ru_maxrss;
	return c;
}

static void check_exit(const struct child *c, const char *what)
{
	if (WIFEXITED(c->status) && WEXITSTATUS(c->status) == 0)
		return;
	if (WIFEXITED(c->status))
		bench_die("%s exited %d", what, WEXITSTATUS(c->status));
	bench_die("%s killed by signal %d", what, WTERMSIG(c->status));
}

/* Every regular file under dir: count and bytes (what the sink holds). */
static void tree_size(const char *dir, uint64_t *files, uint64_t *bytes)
{
	char cmd[PATH_MAX + 64];
	FILE *p;
	snprintf(cmd, sizeof(cmd), "find '%s' -type f -printf '%%s\\n'", dir);
	p = popen(cmd, "r");
	if (!p)
		bench_die("popen find: %s", strerror(errno));
	*files = 0;
	*bytes = 0;
	for (unsigned long long n; fscanf(p, "%llu", &n) == 1;) {
		(*files)++;
		*bytes += n;
	}
	pclose(p);
}

/* The "last_frame" walship ls --json reports for the tenant. */
static uint64_t shipped_last_frame(const struct opts *o, char *url, const char *work)
{
	char *out = bench_path_join(work, "ls.json");
	char *argv[] = { o->walship, "ls", "--sink", url, "--json", NULL };
	struct child c = run_child(argv, out);
	char buf[65536];
	const char *p;
	size_t n;
	FILE *f;

	check_exit(&c, "walship ls");
	f = fopen(out, "r");
	if (!f)
		bench_die("open %s: %s", out, strerror(errno));
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	p = strstr(buf, "\"last_frame\"");
	if (!p)
		bench_die("walship ls --json printed no last_frame: %s", buf);
	p = strchr(p, ':');
	free(out);
	return p ? strtoull(p + 1, NULL, 10) : 0;
}

/* One timed `replicate --once` of bin into a fresh sink_dir, then checked (untimed). */
static struct child run_walship(const struct opts *o, char *bin, const char *sink_dir, char *ini_path,
				char *tenant_arg, const char *work, uint64_t frames, uint64_t *objects, uint64_t *bytes)
{
	char url[PATH_MAX + 16];
	char *cargv[16 + EXTRA_MAX];
	struct child c;
	uint64_t last;
	int n = 0;

	snprintf(url, sizeof(url), "file://%s", sink_dir);
	cargv[n++] = bin;
	cargv[n++] = "replicate";
	cargv[n++] = "--once";
	cargv[n++] = "--quiet";
	cargv[n++] = "--config";
	cargv[n++] = ini_path;
	cargv[n++] = "--sink";
	cargv[n++] = url;
	for (int k = 0; k < o->extra_count; k++)
		cargv[n++] = o->extra[k];
	cargv[n++] = tenant_arg;
	cargv[n] = NULL;

	bench_mkdir_durable(sink_dir);
	sync();
	c = run_child(cargv, "/dev/null");
	check_exit(&c, "walship replicate --once");
	last = shipped_last_frame(o, url, work);
	if (last != frames)
		bench_die("%s shipped through frame %" PRIu64 ", the WAL has %" PRIu64, bin, last, frames);
	tree_size(sink_dir, objects, bytes);
	return c;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static void min_max(const double *v, unsigned n, double *mn, double *mx)
{
	double *s = malloc(n * sizeof(*s));
	if (!s)
		bench_die("out of memory");
	memcpy(s, v, n * sizeof(*v));
	qsort(s, n, sizeof(*s), cmp_double);
	*mn = s[0];
	*mx = s[n - 1];
	free(s);
}

static void json_array(FILE *f, const char *name, const double *v, unsigned n, const char *sep)
{
	fprintf(f, "  \"%s\": [", name);
	for (unsigned i = 0; i < n; i++)
		fprintf(f, "%s%.6f", i ? ", " : "", v[i]);
	fprintf(f, "]%s\n", sep);
}

int main(int argc, char **argv)
{
	struct opts o;
	char tmpl[PATH_MAX];
	char *work, *db_path, *wal_path, *ini_path, *tenant_arg;
	sqlite3 *writer;
	uint8_t *buf;
	uint64_t wal_bytes, frames, ws_objects = 0, ws_bytes = 0;
	size_t frame_bytes, chunk_bytes;
	double ws_s[REPS_MAX], base_s[REPS_MAX], ratio[REPS_MAX], ws_cpu[REPS_MAX];
	double cmp_s[REPS_MAX], cmp_ratio[REPS_MAX];
	uint64_t cmp_objects = 0, cmp_bytes = 0;
	uint64_t base_files = 0;
	long rss_max = 0;
	FILE *f;

	parse_args(argc, argv, &o);
	snprintf(tmpl, sizeof(tmpl), "%s/ws-bench-cli.XXXXXX", o.dir);
	work = mkdtemp(tmpl);
	if (!work)
		bench_die("mkdtemp %s: %s", tmpl, strerror(errno));
	db_path = bench_path_join(work, "bench.db");
	wal_path = bench_path_join(work, "bench.db-wal");
	ini_path = bench_path_join(work, "walship.ini");
	tenant_arg = malloc(strlen(db_path) + 8);
	if (!tenant_arg)
		bench_die("out of memory");
	sprintf(tenant_arg, "bench=%s", db_path);

	frame_bytes = BENCH_FRAME_HDR_BYTES + o.page_size;
	if (o.batch_bytes < frame_bytes + BATCH_HDR_BYTES)
		bench_die("--batch-bytes %" PRIu64 " holds no frame of page size %u", o.batch_bytes, o.page_size);
	/* A batch holds the whole frames that fit in a slot after its header. */
	chunk_bytes = (size_t)((o.batch_bytes - BATCH_HDR_BYTES) / frame_bytes * frame_bytes);
	buf = malloc(chunk_bytes);
	if (!buf)
		bench_die("out of memory");

	f = fopen(ini_path, "w");
	if (!f)
		bench_die("create %s: %s", ini_path, strerror(errno));
	/* Ship the same WAL every repetition: no WAL checkpoint by walship. */
	fprintf(f, "[engine]\nwal_checkpoint_bytes = off\nbatch_bytes_max = %" PRIu64 "\n", o.batch_bytes);
	fclose(f);

	double t0 = bench_now_s();
	writer = bench_make_wal(db_path, wal_path, o.wal_mib << 20, o.page_size);
	wal_bytes = bench_file_bytes(wal_path);
	if (wal_bytes < BENCH_WAL_HDR_BYTES + frame_bytes || (wal_bytes - BENCH_WAL_HDR_BYTES) % frame_bytes)
		bench_die("%s: unexpected size %" PRIu64, wal_path, wal_bytes);
	frames = (wal_bytes - BENCH_WAL_HDR_BYTES) / frame_bytes;
	bench_warm(wal_path, buf, chunk_bytes);
	printf("bench_cli: WAL %.1f MiB (%" PRIu64 " frames, page %u) written by SQLite in %.1f s; "
	       "batch_bytes_max %" PRIu64 " (baseline files of %zu bytes); dir %s (%s); %u reps, interleaved, "
	       "order rotating\n",
	       (double)wal_bytes / 1048576.0, frames, o.page_size, bench_now_s() - t0, o.batch_bytes, chunk_bytes,
	       work, bench_fs_name(work), o.reps);
	printf("walship: %s replicate --once --quiet --config %s --sink file://SINK", o.walship, ini_path);
	for (int i = 0; i < o.extra_count; i++)
		printf(" %s", o.extra[i]);
	printf(" %s\n", tenant_arg);
	fflush(stdout);

	for (unsigned i = 0; i < o.reps; i++) {
		char name[32];
		char *base_dir;
		struct bench_baseline b = { 0, 0, 0 };
		struct child a[2];
		unsigned nside = o.compare ? 3 : 2;

		memset(a, 0, sizeof(a));
		snprintf(name, sizeof(name), "base-%u", i);
		base_dir = bench_path_join(work, name);
		/* Sides: 0 walship, 1 baseline, 2 --compare; rep i starts at side i mod nside. */
		for (unsigned k = 0; k < nside; k++) {
			unsigned side = (i + k) % nside;
			if (side == 1) {
				sync();
				b = bench_run_baseline(wal_path, wal_bytes, chunk_bytes, base_dir, buf);
			} else {
				unsigned w = side == 0 ? 0 : 1;
				snprintf(name, sizeof(name), "sink-%u-%u", i, w);
				char *sink_dir = bench_path_join(work, name);
				a[w] = run_walship(&o, w ? o.compare : o.walship, sink_dir, ini_path, tenant_arg, work,
						   frames, w ? &cmp_objects : &ws_objects, w ? &cmp_bytes : &ws_bytes);
				if (!o.keep)
					bench_rm_rf(sink_dir);
				free(sink_dir);
			}
		}
		base_files = b.files;
		ws_s[i] = a[0].seconds;
		base_s[i] = b.seconds;
		ratio[i] = b.seconds / a[0].seconds;
		ws_cpu[i] = a[0].user_s + a[0].sys_s;
		if (a[0].max_rss_kib > rss_max)
			rss_max = a[0].max_rss_kib;
		printf("rep %u (%s first): walship %7.3f s %7.1f MB/s (cpu user %.3f s sys %.3f s, %" PRIu64
		       " files %.1f MiB in the sink)   baseline %7.3f s %7.1f MB/s (%" PRIu64 " files)   ratio %.3f\n",
		       i + 1, i % nside == 0 ? "walship" : i % nside == 1 ? "baseline" : "compare", a[0].seconds,
		       (double)wal_bytes / a[0].seconds / 1e6, a[0].user_s, a[0].sys_s, ws_objects,
		       (double)ws_bytes / 1048576.0, b.seconds, (double)wal_bytes / b.seconds / 1e6, b.files, ratio[i]);
		if (o.compare) {
			cmp_s[i] = a[1].seconds;
			cmp_ratio[i] = b.seconds / a[1].seconds;
			printf("      compare: %7.3f s %7.1f MB/s (cpu user %.3f s sys %.3f s, %" PRIu64
			       " files)   ratio %.3f\n",
			       a[1].seconds, (double)wal_bytes / a[1].seconds / 1e6, a[1].user_s, a[1].sys_s, cmp_objects,
			       cmp_ratio[i]);
		}
		fflush(stdout);
		if (!o.keep)
			bench_rm_rf(base_dir);
		free(base_dir);
	}

	double mw = bench_median(ws_s, o.reps), mb = bench_median(base_s, o.reps);
	double mr = bench_median(ratio, o.reps), rmin, rmax, cr = 0, cmin = 0, cmax = 0;
	min_max(ratio, o.reps, &rmin, &rmax);
	printf("median: walship %.3f s (%.1f MB/s), baseline (write+fdatasync+rename+dir fsync) %.3f s (%.1f MB/s); "
	       "walship peak RSS %.1f MiB, CPU %.3f s median\n",
	       mw, (double)wal_bytes / mw / 1e6, mb, (double)wal_bytes / mb / 1e6, (double)rss_max / 1024.0,
	       bench_median(ws_cpu, o.reps));
	printf("ratio walship/baseline: median %.3f, min %.3f, max %.3f over %u reps (target >= 0.95)\n", mr, rmin,
	       rmax, o.reps);
	if (o.compare) {
		cr = bench_median(cmp_ratio, o.reps);
		min_max(cmp_ratio, o.reps, &cmin, &cmax);
		printf("ratio compare/baseline: median %.3f, min %.3f, max %.3f over %u reps (%s, median %.3f s)\n", cr,
		       cmin, cmax, o.reps, o.compare, bench_median(cmp_s, o.reps));
	}

	if (o.json) {
		f = fopen(o.json, "w");
		if (!f)
			bench_die("create %s: %s", o.json, strerror(errno));
		fprintf(f, "{\n  \"bench\": \"cli_replicate_once_file\",\n");
		fprintf(f, "  \"wal_bytes\": %" PRIu64 ",\n  \"frames\": %" PRIu64 ",\n  \"page_size\": %u,\n", wal_bytes,
			frames, o.page_size);
		fprintf(f, "  \"batch_bytes_max\": %" PRIu64 ",\n  \"baseline_file_bytes\": %zu,\n", o.batch_bytes,
			chunk_bytes);
		fprintf(f, "  \"filesystem\": \"%s\",\n  \"reps\": %u,\n", bench_fs_name(work), o.reps);
		fprintf(f, "  \"walship_files\": %" PRIu64 ",\n  \"baseline_files\": %" PRIu64 ",\n", ws_objects,
			base_files);
		fprintf(f, "  \"walship_peak_rss_kib\": %ld,\n", rss_max);
		json_array(f, "walship_seconds", ws_s, o.reps, ",");
		json_array(f, "walship_cpu_seconds", ws_cpu, o.reps, ",");
		json_array(f, "baseline_seconds", base_s, o.reps, ",");
		json_array(f, "ratio", ratio, o.reps, ",");
		if (o.compare) {
			json_array(f, "compare_seconds", cmp_s, o.reps, ",");
			json_array(f, "compare_ratio", cmp_ratio, o.reps, ",");
			fprintf(f, "  \"compare_ratio_median\": %.4f,\n  \"compare_ratio_min\": %.4f,\n"
				"  \"compare_ratio_max\": %.4f,\n", cr, cmin, cmax);
		}
		fprintf(f, "  \"ratio_median\": %.4f,\n  \"ratio_min\": %.4f,\n  \"ratio_max\": %.4f\n}\n", mr, rmin,
			rmax);
		if (fclose(f))
			bench_die("write %s: %s", o.json, strerror(errno));
	}

	sqlite3_close(writer);
	if (!o.keep)
		bench_rm_rf(work);
	free(buf);
	free(db_path);
	free(wal_path);
	free(ini_path);
	free(tenant_arg);
	return 0;
}
