/*
 * S3 PUT throughput against a real radosgw, and walship's HTTP client
 * against a trivial local HTTP server, each as a ratio against baselines
 * measured in the same run. bench/run_s3_bench.sh sets everything up.
 *
 *   bench_s3 [--s3 URL] [--http URL] [--n64 N] [--n1m N] [--http-n64 N]
 *            [--http-n1m N] [--reps N] [--http-reps N] [--inflight N] [--curl PATH]
 *            [--dir DIR] [--http-multi-only 1]
 *
 * Part 1 (--s3 s3://BUCKET[/PREFIX]?endpoint=http://HOST:PORT[&...]; credentials
 * from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_REGION):
 *   (a) walship: ws_store_put(WS_PUT_OVERWRITE) of N distinct objects, one
 *       after the other, through one s3 store (open, bucket and warm-up
 *       outside the timer), opened with payload_signing=signed: walship
 *       signs the real SHA-256 of each payload, which radosgw then verifies.
 *   (a-u) the same with payload_signing=unsigned: x-amz-content-sha256:
 *       UNSIGNED-PAYLOAD, nothing hashed on either side, as curl in (b).
 *   (a') walship: one ws_store_putv_many of the same N objects through a
 *       store opened with max_in_flight=--inflight (default 8): the PUTs
 *       run concurrently, each hashed, signed and retried on its own.
 *   (a'-u) (a') with payload_signing=unsigned, the fair match for (d).
 *   (b) the curl command line tool: one process uploads the same N files
 *       (from the page cache) to N distinct keys over one reused connection
 *       (a -K config with one `next` section per file), with
 *       x-amz-content-sha256: UNSIGNED-PAYLOAD (curl 7.88's --aws-sigv4 needs
 *       that header; nothing is hashed on either side). Timed from spawn to
 *       exit. Also reported: the sum of curl's own %{time_total}, i.e. its
 *       transfers only (no process start, no config parsing, no file opens).
 *   (c) the same curl run with the real hex SHA-256 of each file (computed
 *       outside the timer): radosgw verifies it, as for walship.
 *   (d), (e) (b) and (c) with `--parallel --parallel-immediate --parallel-max
 *       --inflight`: curl's own concurrent uploads, the fair baseline for (a').
 *   Profile: walship's SHA-256 of the same payloads is timed on its own, and
 *   client CPU (getrusage; wait4 for curl) is reported per object.
 *
 * Part 2 (--http http://HOST:PORT of a server answering 200 to any PUT):
 *   (a1) ws_http_perform, one request per call (what the s3 store does);
 *   (a2) ws_http_perform of all N requests at once, max_in_flight --inflight;
 *   (b)  a bare libcurl easy loop: one handle, options set once,
 *        curl_easy_perform per request, connection reuse;
 *   (b') bare libcurl multi with --inflight easy handles: (a2)'s shape.
 *   All send the same bodies (read callbacks from memory) and the same
 *   headers (Content-Length, x-amz-meta-ws-attempt, empty Expect).
 *   --http-multi-only 1 runs (a2) and (b') only: the pair the in-flight
 *   target compares, more repetitions in the same time.
 *
 * Every variant runs --reps (S3, default 5) or --http-reps (default 7)
 * times, interleaved, the order rotated each rep. Rates are medians; each
 * ratio is the median of the per-rep time ratios (the variants of one rep
 * run back to back, so drift in the machine's other load mostly cancels),
 * printed with their range. MB = 10^6 bytes.
 * The exit status is 0 unless something failed (a non-2xx status, a
 * transport error, a short run): the ratios are reported, never enforced.
 */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <limits.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "ws_hash.h"
#include "ws_http.h"
#include "ws_store.h"

extern char **environ;

#define REPS_MAX 99
#define NSIZES 2

static const size_t sizes[NSIZES] = { (size_t)64 << 10, (size_t)1 << 20 };
static const char *const size_names[NSIZES] = { "64KiB", "1MiB" };

struct opts {
	const char *s3_url;
	const char *http_url;
	unsigned n[NSIZES];       /* S3 objects per rep */
	unsigned hn[NSIZES];      /* HTTP requests per rep */
	unsigned reps;            /* S3 reps */
	unsigned http_reps;
	unsigned inflight;
	bool http_multi_only;     /* part 2: the in-flight pair only */
	const char *curl;
	const char *dir;
};

/* One size class: n objects of size bytes, contiguous, each also a file. */
struct objs {
	size_t size;
	unsigned n;
	uint8_t *data;
	char (*sha)[WS_SHA256_HEX_LEN + 1];
	char **files;
};

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		bench_die("out of memory (%zu bytes)", n);
	return p;
}

static char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *xasprintf(const char *fmt, ...)
{
	va_list ap;
	char *s = NULL;
	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		bench_die("out of memory");
	va_end(ap);
	return s;
}

static void usage(void)
{
	fputs("usage: bench_s3 [--s3 URL] [--http URL] [--n64 N] [--n1m N] [--http-n64 N] [--http-n1m N]\n"
	      "                [--reps N] [--http-reps N] [--inflight N] [--curl PATH] [--dir DIR]\n"
	      "  --s3 URL        s3://BUCKET[/PREFIX]?endpoint=http://HOST:PORT[&...]\n"
	      "                  (AWS_* credentials from the environment); part 1 is skipped without it;\n"
	      "                  walship runs with &payload_signing=signed and =unsigned appended\n"
	      "  --http URL      http://HOST:PORT of a server answering 200 to PUT; part 2 is skipped without it\n"
	      "  --n64 N         64 KiB objects per S3 rep (default 200)\n"
	      "  --n1m N         1 MiB objects per S3 rep (default 60)\n"
	      "  --http-n64 N    64 KiB requests per HTTP rep (default 2000)\n"
	      "  --http-n1m N    1 MiB requests per HTTP rep (default 300)\n"
	      "  --reps N        S3 measurements of each variant, interleaved; medians reported (default 5)\n"
	      "  --http-reps N   the same for the HTTP part (default 7; it is quick)\n"
	      "  --inflight N    requests in flight for put_many, curl --parallel-max and the concurrent\n"
	      "                  ws_http variant (default 8)\n"
	      "  --curl PATH     the curl command line tool (default curl)\n"
	      "  --dir DIR       where the object files go (default $WS_TEST_TMP or /tmp)\n"
	      "  --http-multi-only 1  part 2 runs only ws_http with --inflight in flight and the bare\n"
	      "                  libcurl multi loop of as many (the pair the in-flight target compares)\n",
	      stderr);
}

static void parse_args(int argc, char **argv, struct opts *o)
{
	memset(o, 0, sizeof(*o));
	o->n[0] = 200;
	o->n[1] = 60;
	o->hn[0] = 2000;
	o->hn[1] = 300;
	o->reps = 5;
	o->http_reps = 7;
	o->inflight = 8;
	o->curl = "curl";
	o->dir = getenv("WS_TEST_TMP");
	if (!o->dir || !*o->dir)
		o->dir = "/tmp";
	for (int i = 1; i < argc; i += 2) { /* every option takes a value */
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage();
			exit(0);
		}
		if (!v) {
			usage();
			bench_die("%s needs a value", a);
		}
		if (!strcmp(a, "--s3"))
			o->s3_url = v;
		else if (!strcmp(a, "--http"))
			o->http_url = v;
		else if (!strcmp(a, "--n64"))
			o->n[0] = (unsigned)bench_parse_num(a, v, 1, 100000);
		else if (!strcmp(a, "--n1m"))
			o->n[1] = (unsigned)bench_parse_num(a, v, 1, 10000);
		else if (!strcmp(a, "--http-n64"))
			o->hn[0] = (unsigned)bench_parse_num(a, v, 1, 1000000);
		else if (!strcmp(a, "--http-n1m"))
			o->hn[1] = (unsigned)bench_parse_num(a, v, 1, 100000);
		else if (!strcmp(a, "--reps"))
			o->reps = (unsigned)bench_parse_num(a, v, 1, REPS_MAX);
		else if (!strcmp(a, "--http-reps"))
			o->http_reps = (unsigned)bench_parse_num(a, v, 1, REPS_MAX);
		else if (!strcmp(a, "--inflight"))
			o->inflight = (unsigned)bench_parse_num(a, v, 1, 256);
		else if (!strcmp(a, "--curl"))
			o->curl = v;
		else if (!strcmp(a, "--dir"))
			o->dir = v;
		else if (!strcmp(a, "--http-multi-only"))
			o->http_multi_only = bench_parse_num(a, v, 0, 1) == 1;
		else {
			usage();
			bench_die("unknown argument '%s'", a);
		}
	}
	if (!o->s3_url && !o->http_url) {
		usage();
		bench_die("nothing to do: give --s3 and/or --http");
	}
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

/* ---- objects ------------------------------------------------------------ */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
	uint64_t x = rng_state;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	rng_state = x;
	return x * 0x2545f4914f6cdd1dull;
}

static void write_file(const char *path, const void *p, size_t n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	size_t done = 0;
	if (fd < 0)
		bench_die("create %s: %s", path, strerror(errno));
	while (done < n) {
		ssize_t w = write(fd, (const char *)p + done, n - done);
		if (w < 0)
			bench_die("write %s: %s", path, strerror(errno));
		done += (size_t)w;
	}
	close(fd);
}

/* Incompressible, distinct objects; with files (for curl) when files_dir is set. */
static void make_objs(struct objs *o, size_t size, unsigned n, const char *files_dir)
{
	o->size = size;
	o->n = n;
	o->data = xmalloc(size * n);
	for (size_t i = 0; i < size * n; i += 8) {
		uint64_t r = rnd();
		memcpy(o->data + i, &r, 8);
	}
	o->sha = xmalloc(sizeof(*o->sha) * n);
	o->files = NULL;
	for (unsigned i = 0; i < n; i++) {
		uint8_t md[WS_SHA256_LEN];
		ws_sha256(o->data + (size_t)i * size, size, md);
		ws_hex(md, WS_SHA256_LEN, o->sha[i]);
	}
	if (!files_dir)
		return;
	o->files = xmalloc(sizeof(*o->files) * n);
	for (unsigned i = 0; i < n; i++) {
		o->files[i] = xasprintf("%s/%zu-%05u", files_dir, size, i);
		write_file(o->files[i], o->data + (size_t)i * size, size);
	}
}

/* "1.00 0.90 0.80" from /proc/loadavg: the machine's other load, for the record. */
static const char *loadavg(void)
{
	static char buf[64];
	FILE *f = fopen("/proc/loadavg", "r");
	buf[0] = '\0';
	if (f) {
		if (!fgets(buf, sizeof(buf), f))
			buf[0] = '\0';
		fclose(f);
	}
	char *p = buf;
	for (int sp = 0; *p; p++)
		if (*p == ' ' && ++sp == 3)
			break;
	*p = '\0';
	return buf[0] ? buf : "?";
}

static const uint8_t *obj(const struct objs *o, unsigned i)
{
	return o->data + (size_t)i * o->size;
}

/* ---- measurement and reporting ---------------------------------------------- */

#define VAR_MAX 10

struct run_result {
	double seconds;
	double cpu_s;             /* client CPU (user + system): this process, or the curl child */
	double curl_transfer_s;   /* curl: sum of its %{time_total} */
	unsigned connects;        /* connections opened during the run */
	uint64_t retries;
};

/* Per size, variant and rep; reported as medians and median per-rep ratios. */
struct table {
	unsigned reps;
	int nvar;
	const char *names[VAR_MAX];
	double secs[NSIZES][VAR_MAX][REPS_MAX];
	double cpu[NSIZES][VAR_MAX][REPS_MAX];
};

static double cpu_self_s(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
	       (double)ru.ru_stime.tv_usec / 1e6;
}

static void table_put(struct table *t, int z, int var, unsigned rep, const struct run_result *r)
{
	t->secs[z][var][rep] = r->seconds;
	t->cpu[z][var][rep] = r->cpu_s;
}

/* Median over reps of base/var (time ratios: > 1 means var is faster), and the range. */
static double paired_ratio(const struct table *t, int z, int var, int base, double *lo, double *hi)
{
	double r[REPS_MAX];
	*lo = 1e300;
	*hi = 0;
	for (unsigned i = 0; i < t->reps; i++) {
		r[i] = t->secs[z][base][i] / t->secs[z][var][i];
		*lo = r[i] < *lo ? r[i] : *lo;
		*hi = r[i] > *hi ? r[i] : *hi;
	}
	return bench_median(r, t->reps);
}

static void print_rates(const struct table *t, int z, const struct objs *o, const char *unit)
{
	printf("%-6s %-32s %10s %9s %10s %14s\n", "size", "variant (medians)", unit, "MB/s", "ms/each",
	       "client CPU ms");
	for (int v = 0; v < t->nvar; v++) {
		double m = bench_median(t->secs[z][v], t->reps), c = bench_median(t->cpu[z][v], t->reps);
		if (m <= 0)
			continue; /* not run (--http-multi-only) */
		printf("%-6s %-32s %10.1f %9.1f %10.3f", size_names[z], t->names[v], o->n / m,
		       (double)o->n * (double)o->size / m / 1e6, m * 1e3 / o->n);
		if (c > 0)
			printf(" %14.3f\n", c * 1e3 / o->n);
		else
			printf(" %14s\n", "-");
	}
}

static void print_ratio(const struct table *t, int z, int var, int base, const char *label, double target)
{
	double lo, hi, r = paired_ratio(t, z, var, base, &lo, &hi);
	printf("%-6s %-44s %5.2f  (per-rep %.2f..%.2f)", size_names[z], label, r, lo, hi);
	if (target > 0)
		printf("  target >= %.2f: %s", target, r >= target ? "met" : "MISSED");
	putchar('\n');
}

/* ---- part 1: S3 ----------------------------------------------------------- */

struct s3_target {
	char endpoint[512];   /* http://host:port */
	char bucket[64];
	char prefix[WS_KEY_MAX]; /* "" or "p/q" */
	char region[64];
	const char *access_key, *secret_key;
};

/* The parts of the store URL that the curl runs need. */
static void parse_s3_url(const char *url, struct s3_target *t)
{
	const char *p, *q, *slash, *e;
	size_t n;
	memset(t, 0, sizeof(*t));
	if (strncmp(url, "s3://", 5))
		bench_die("--s3 %s: not an s3:// URL", url);
	p = url + 5;
	q = strchr(p, '?');
	if (!q)
		bench_die("--s3 %s: needs ?endpoint=http://HOST:PORT", url);
	slash = memchr(p, '/', (size_t)(q - p));
	n = (size_t)((slash ? slash : q) - p);
	if (n == 0 || n >= sizeof(t->bucket))
		bench_die("--s3 %s: bad bucket", url);
	memcpy(t->bucket, p, n);
	if (slash) {
		const char *ps = slash + 1, *pe = q;
		while (pe > ps && pe[-1] == '/')
			pe--;
		if ((size_t)(pe - ps) >= sizeof(t->prefix))
			bench_die("--s3 %s: prefix too long", url);
		memcpy(t->prefix, ps, (size_t)(pe - ps));
	}
	e = strstr(q, "endpoint=");
	if (!e || (e[-1] != '?' && e[-1] != '&'))
		bench_die("--s3 %s: needs ?endpoint=http://HOST:PORT", url);
	e += 9;
	n = 0;
	while (*e && *e != '&' && n + 1 < sizeof(t->endpoint)) {
		int ch = (unsigned char)*e++;
		if (ch == '%' && ws_hexval((char)e[0]) >= 0 && ws_hexval((char)e[1]) >= 0) {
			ch = ws_hexval((char)e[0]) * 16 + ws_hexval((char)e[1]);
			e += 2;
		}
		t->endpoint[n++] = (char)ch;
	}
	while (n > 0 && t->endpoint[n - 1] == '/')
		t->endpoint[--n] = '\0';
	t->access_key = getenv("AWS_ACCESS_KEY_ID");
	t->secret_key = getenv("AWS_SECRET_ACCESS_KEY");
	if (!t->access_key || !t->secret_key)
		bench_die("AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set");
	snprintf(t->region, sizeof(t->region), "%s", getenv("AWS_REGION") ? getenv("AWS_REGION") : "us-east-1");
}

enum {
	S3_WS, S3_WSU, S3_WSM, S3_WSMU, S3_CURL, S3_CURL_SHA, S3_CURLP, S3_CURLP_SHA, S3_NVAR,
	S3_CURL_XFER = S3_NVAR
};
static const char *const s3_var_tags[S3_NVAR] = { "ws",   "wsu",     "wsmany",  "wsmanyu",
						  "curl", "curlsha", "curlpar", "curlparsha" };

/* Key of object i (without the URL's prefix). */
static void obj_key(char *out, size_t cap, const char *tag, unsigned rep, size_t size, unsigned i)
{
	snprintf(out, cap, "bench/%s/r%u/%zu/%05u", tag, rep, size, i);
}

static struct run_result run_ws_s3(struct ws_store *st, const struct objs *o, const char *tag, unsigned rep)
{
	struct run_result r = { 0, 0, 0, 0, 0 };
	uint64_t retries0 = st->stats.retries;
	char key[WS_KEY_MAX];
	double c0 = cpu_self_s(), t0 = bench_now_s();
	for (unsigned i = 0; i < o->n; i++) {
		obj_key(key, sizeof(key), tag, rep, o->size, i);
		if (ws_store_put(st, key, obj(o, i), o->size, WS_PUT_OVERWRITE, NULL, NULL) != 0)
			bench_die("walship put %s: %s", key, ws_errmsg());
	}
	r.seconds = bench_now_s() - t0;
	r.cpu_s = cpu_self_s() - c0;
	r.retries = st->stats.retries - retries0;
	return r;
}

/* (a') all n objects in one ws_store_putv_many (st opened with max_in_flight). */
static struct run_result run_ws_s3_many(struct ws_store *st, const struct objs *o, const char *tag, unsigned rep)
{
	struct run_result r = { 0, 0, 0, 0, 0 };
	uint64_t retries0 = st->stats.retries;
	struct ws_put_req *reqs = xmalloc(sizeof(*reqs) * o->n);
	struct iovec *iov = xmalloc(sizeof(*iov) * o->n);
	char (*keys)[96] = xmalloc(sizeof(*keys) * o->n);
	double c0, t0;
	for (unsigned i = 0; i < o->n; i++) {
		obj_key(keys[i], sizeof(keys[i]), tag, rep, o->size, i);
		iov[i].iov_base = (void *)(uintptr_t)obj(o, i);
		iov[i].iov_len = o->size;
		reqs[i] = (struct ws_put_req){ .key = keys[i], .iov = &iov[i], .iovcnt = 1, .mode = WS_PUT_OVERWRITE };
	}
	c0 = cpu_self_s();
	t0 = bench_now_s();
	if (ws_store_putv_many(st, reqs, o->n) != 0)
		bench_die("walship put_many: %s", ws_errmsg());
	r.seconds = bench_now_s() - t0;
	r.cpu_s = cpu_self_s() - c0;
	for (unsigned i = 0; i < o->n; i++)
		if (reqs[i].rc)
			bench_die("walship put_many %s: %s", keys[i], ws_strerror(reqs[i].rc));
	r.retries = st->stats.retries - retries0;
	free(reqs);
	free(iov);
	free(keys);
	return r;
}

/* A curl config: one `next` section per object, all in one process; parallel > 0: --parallel-max. */
static void write_curl_cfg(const char *path, const struct s3_target *t, const struct objs *o, const char *tag,
			   unsigned rep, bool real_sha, unsigned parallel)
{
	FILE *f;
	char key[WS_KEY_MAX];
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600); /* holds the secret */
	if (fd < 0 || !(f = fdopen(fd, "w")))
		bench_die("create %s: %s", path, strerror(errno));
	if (parallel) /* global options: they hold for every `next` section */
		fprintf(f, "parallel\nparallel-immediate\nparallel-max = %u\n", parallel);
	for (unsigned i = 0; i < o->n; i++) {
		obj_key(key, sizeof(key), tag, rep, o->size, i);
		if (i)
			fputs("next\n", f);
		fprintf(f,
			"aws-sigv4 = \"aws:amz:%s:s3\"\n"
			"user = \"%s:%s\"\n"
			"header = \"x-amz-content-sha256: %s\"\n"
			"silent\nshow-error\n"
			"write-out = \"%%{http_code} %%{num_connects} %%{time_total}\\n\"\n"
			"upload-file = \"%s\"\n"
			"output = \"/dev/null\"\n"
			"url = \"%s/%s/%s%s%s\"\n",
			t->region, t->access_key, t->secret_key, real_sha ? o->sha[i] : "UNSIGNED-PAYLOAD",
			o->files[i], t->endpoint, t->bucket, t->prefix, t->prefix[0] ? "/" : "", key);
	}
	if (fclose(f) != 0)
		bench_die("write %s: %s", path, strerror(errno));
}

/* Run `curl -q -K cfg`, timed from spawn to exit; its CPU time from wait4. */
static struct run_result run_curl_cfg(const char *curl, const char *cfg, const char *out_path, unsigned n)
{
	struct run_result r = { 0, 0, 0, 0, 0 };
	posix_spawn_file_actions_t fa;
	char *argv[] = { (char *)(uintptr_t)curl, (char *)(uintptr_t)"-q", (char *)(uintptr_t)"-K",
			 (char *)(uintptr_t)cfg, NULL };
	struct rusage ru;
	pid_t pid;
	int status, rc;
	double t0;
	FILE *f;
	char line[256];
	unsigned lines = 0;

	char *err_path = xasprintf("%s.err", out_path);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	/* stderr too: --parallel draws a progress meter there whatever `silent` says (curl 7.88). */
	posix_spawn_file_actions_addopen(&fa, 2, err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	t0 = bench_now_s();
	rc = posix_spawnp(&pid, curl, &fa, NULL, argv, environ);
	if (rc)
		bench_die("spawn %s: %s", curl, strerror(rc));
	while (wait4(pid, &status, 0, &ru) < 0)
		if (errno != EINTR)
			bench_die("wait4: %s", strerror(errno));
	r.seconds = bench_now_s() - t0;
	r.cpu_s = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
		  (double)ru.ru_stime.tv_usec / 1e6;
	posix_spawn_file_actions_destroy(&fa);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		bench_die("%s -K %s: exit status %d (its stderr: %s)", curl, cfg,
			  WIFEXITED(status) ? WEXITSTATUS(status) : -1, err_path);
	unlink(err_path);
	free(err_path);
	if (!(f = fopen(out_path, "r")))
		bench_die("open %s: %s", out_path, strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		int code;
		unsigned conn;
		double tt;
		if (sscanf(line, "%d %u %lf", &code, &conn, &tt) != 3 || code != 200)
			bench_die("curl upload %u: got '%.40s', want HTTP 200", lines + 1, line);
		r.connects += conn;
		r.curl_transfer_s += tt;
		lines++;
	}
	fclose(f);
	if (lines != n)
		bench_die("curl reported %u uploads, want %u", lines, n);
	return r;
}

static void part_s3(const struct opts *o, struct objs *set, const char *work)
{
	struct s3_target t;
	struct ws_store *st, *stu, *stm, *stmu;
	int err = 0;
	static struct table tab;
	/* Later parameters win: these override any payload_signing in --s3. */
	char *signed_url = xasprintf("%s&payload_signing=signed", o->s3_url);
	char *unsigned_url = xasprintf("%s&payload_signing=unsigned", o->s3_url);
	char *many_url = xasprintf("%s&max_in_flight=%u", signed_url, o->inflight);
	char *many_unsigned_url = xasprintf("%s&max_in_flight=%u", unsigned_url, o->inflight);
	double sha_s[NSIZES][REPS_MAX], verify[NSIZES][REPS_MAX], start[NSIZES][REPS_MAX];
	char *cfg = xasprintf("%s/curl.cfg", work), *out = xasprintf("%s/curl.out", work);

	parse_s3_url(o->s3_url, &t);
	/* WS_STORE_EXISTING: no probe before the bucket exists; create it, then reopen normally. */
	st = ws_store_s3_open(o->s3_url, WS_STORE_EXISTING, &err);
	if (!st)
		bench_die("open %s: %s", o->s3_url, ws_errmsg());
	if (ws_store_s3_create_bucket(st) != 0)
		bench_die("create bucket %s: %s", t.bucket, ws_errmsg());
	ws_store_close(st);
	st = ws_store_s3_open(signed_url, 0, &err); /* the conditional-write probe runs here */
	if (!st)
		bench_die("open %s: %s", signed_url, ws_errmsg());
	stu = ws_store_s3_open(unsigned_url, 0, &err);
	if (!stu)
		bench_die("open %s: %s", unsigned_url, ws_errmsg());
	stm = ws_store_s3_open(many_url, 0, &err);
	if (!stm)
		bench_die("open %s: %s", many_url, ws_errmsg());
	stmu = ws_store_s3_open(many_unsigned_url, 0, &err);
	if (!stmu)
		bench_die("open %s: %s", many_unsigned_url, ws_errmsg());

	memset(&tab, 0, sizeof(tab));
	tab.reps = o->reps;
	tab.nvar = S3_NVAR + 1;
	char name_wsm[64], name_wsmu[64], name_cp[64], name_cps[64], lab[128];
	snprintf(name_wsm, sizeof(name_wsm), "walship put_many, %u in fl.", o->inflight);
	snprintf(name_wsmu, sizeof(name_wsmu), "walship put_many %u, UNSIGN.", o->inflight);
	snprintf(name_cp, sizeof(name_cp), "curl --parallel-max %u, UNSIGN.", o->inflight);
	snprintf(name_cps, sizeof(name_cps), "curl --parallel-max %u, SHA", o->inflight);
	tab.names[S3_WS] = "walship ws_store_put";
	tab.names[S3_WSU] = "walship put, UNSIGNED-PAYLOAD";
	tab.names[S3_WSM] = name_wsm;
	tab.names[S3_WSMU] = name_wsmu;
	tab.names[S3_CURL] = "curl, UNSIGNED-PAYLOAD";
	tab.names[S3_CURL_SHA] = "curl, real SHA-256";
	tab.names[S3_CURLP] = name_cp;
	tab.names[S3_CURLP_SHA] = name_cps;
	tab.names[S3_CURL_XFER] = "curl, its time_total sum";

	printf("\n== Part 1: S3 PUT to radosgw %s, bucket %s; sequential PUTs over one reused connection, and "
	       "%u in flight; %u reps, interleaved, order rotated ==\n",
	       t.endpoint, t.bucket, o->inflight, o->reps);
	printf("   walship: ws_store_put(WS_PUT_OVERWRITE), distinct keys; payload_signing=signed: signs the "
	       "real SHA-256 of each payload, which radosgw verifies\n"
	       "   walship UNSIGNED: the same with payload_signing=unsigned (UNSIGNED-PAYLOAD, as curl: the "
	       "same work on both sides)\n"
	       "   curl:    one `%s -q -K cfg` process, one `next` section per file (read from the page cache),\n"
	       "            --aws-sigv4 with x-amz-content-sha256: UNSIGNED-PAYLOAD: no payload hash on either "
	       "side.\n"
	       "            curl also sends Expect: 100-continue (an extra round trip; curl 7.88 signs an empty "
	       "Expect:\n"
	       "            header, which radosgw then refuses, so it cannot be turned off); wall time includes "
	       "process start\n"
	       "   curl-sha: the same with the real SHA-256 of each file (hashed outside the timer): the "
	       "server does walship's work\n"
	       "   in flight: walship ws_store_putv_many (max_in_flight=%u; signed and unsigned) vs the same "
	       "curl runs with --parallel --parallel-immediate --parallel-max %u\n",
	       o->curl, o->inflight, o->inflight);

	/* Warm-up, untimed: connections, the bucket index, curl's binary in the page cache. */
	for (int z = 0; z < NSIZES; z++) {
		struct objs w = set[z];
		w.n = w.n < 5 ? w.n : 5;
		(void)run_ws_s3(st, &w, "warm-ws", 0);
		(void)run_ws_s3(stu, &w, "warm-wsu", 0);
		w.n = set[z].n < 16 ? set[z].n : 16;
		(void)run_ws_s3_many(stm, &w, "warm-wsm", 0);
		(void)run_ws_s3_many(stmu, &w, "warm-wsmu", 0);
		w.n = set[z].n < 5 ? set[z].n : 5;
		write_curl_cfg(cfg, &t, &w, "warm-curl", 0, false, 0);
		(void)run_curl_cfg(o->curl, cfg, out, w.n);
		write_curl_cfg(cfg, &t, &w, "warm-curlp", 0, false, o->inflight);
		(void)run_curl_cfg(o->curl, cfg, out, w.n);
	}

	for (unsigned rep = 0; rep < o->reps; rep++) {
		for (int z = 0; z < NSIZES; z++) {
			const struct objs *s = &set[z];
			struct run_result res[S3_NVAR];
			double t0 = bench_now_s();
			for (unsigned i = 0; i < s->n; i++) {
				struct iovec v = { (void *)(uintptr_t)obj(s, i), s->size };
				uint8_t md[WS_SHA256_LEN];
				ws_sha256v(&v, 1, md); /* what s3_call does before signing */
			}
			sha_s[z][rep] = bench_now_s() - t0;
			for (int k = 0; k < S3_NVAR; k++) {
				int var = (int)(((unsigned)k + rep) % S3_NVAR); /* rotate the order */
				if (var == S3_WS || var == S3_WSU) {
					res[var] = run_ws_s3(var == S3_WS ? st : stu, s, s3_var_tags[var], rep);
				} else if (var == S3_WSM || var == S3_WSMU) {
					res[var] = run_ws_s3_many(var == S3_WSM ? stm : stmu, s, s3_var_tags[var], rep);
				} else {
					bool sha = var == S3_CURL_SHA || var == S3_CURLP_SHA;
					bool par = var == S3_CURLP || var == S3_CURLP_SHA;
					write_curl_cfg(cfg, &t, s, s3_var_tags[var], rep, sha, par ? o->inflight : 0);
					res[var] = run_curl_cfg(o->curl, cfg, out, s->n);
				}
				table_put(&tab, z, var, rep, &res[var]);
			}
			/* curl's own transfer time (no process start), as a fourth row */
			{
				struct run_result x = res[S3_CURL];
				x.seconds = x.curl_transfer_s;
				x.cpu_s = 0;
				table_put(&tab, z, S3_CURL_XFER, rep, &x);
			}
			verify[z][rep] = res[S3_CURL_SHA].seconds - res[S3_CURL].seconds;
			start[z][rep] = res[S3_CURL].seconds - res[S3_CURL].curl_transfer_s;
			printf("rep %u %-5s x%-4u walship %6.3f s (%" PRIu64 " retries), unsigned %6.3f s (%" PRIu64
			       " retries) | curl %6.3f s (%.3f s in transfers, %u connects) | curl-sha %6.3f s (%u "
			       "connects)\n"
			       "      in flight: walship put_many %6.3f s (%" PRIu64 " retries), unsigned %6.3f s (%" PRIu64
			       " retries) | curl --parallel %6.3f s (%u connects) | curl --parallel sha %6.3f s\n",
			       rep + 1, size_names[z], s->n, res[S3_WS].seconds, res[S3_WS].retries,
			       res[S3_WSU].seconds, res[S3_WSU].retries, res[S3_CURL].seconds,
			       res[S3_CURL].curl_transfer_s, res[S3_CURL].connects, res[S3_CURL_SHA].seconds,
			       res[S3_CURL_SHA].connects, res[S3_WSM].seconds, res[S3_WSM].retries, res[S3_WSMU].seconds,
			       res[S3_WSMU].retries, res[S3_CURLP].seconds, res[S3_CURLP].connects,
			       res[S3_CURLP_SHA].seconds);
		}
	}
	unlink(cfg); /* it holds the secret */
	unlink(out);

	for (int z = 0; z < NSIZES; z++) {
		const struct objs *s = &set[z];
		double mws = bench_median(tab.secs[z][S3_WS], o->reps), msha = bench_median(sha_s[z], o->reps);
		putchar('\n');
		print_rates(&tab, z, s, "objects/s");
		print_ratio(&tab, z, S3_WSU, S3_CURL, "ratio walship-unsigned/curl (both UNSIGNED)", 1.0);
		print_ratio(&tab, z, S3_WS, S3_CURL, "ratio walship-signed/curl (UNSIGNED-PAYLOAD)", 0);
		print_ratio(&tab, z, S3_WS, S3_CURL_SHA, "ratio walship-signed/curl-sha (same work)", 0);
		print_ratio(&tab, z, S3_WS, S3_CURL_XFER, "ratio walship-signed/curl time_total (transfers)", 0);
		snprintf(lab, sizeof(lab), "ratio put_many(%u)-signed/curl (sequential)", o->inflight);
		print_ratio(&tab, z, S3_WSM, S3_CURL, lab, 1.0);
		snprintf(lab, sizeof(lab), "ratio put_many(%u)-unsigned/curl --par(%u)", o->inflight,
			 o->inflight);
		print_ratio(&tab, z, S3_WSMU, S3_CURLP, lab, 1.0);
		snprintf(lab, sizeof(lab), "ratio put_many(%u)-signed/curl --par(%u)", o->inflight, o->inflight);
		print_ratio(&tab, z, S3_WSM, S3_CURLP, lab, 0);
		snprintf(lab, sizeof(lab), "ratio put_many(%u)-signed/curl-sha --par", o->inflight);
		print_ratio(&tab, z, S3_WSM, S3_CURLP_SHA, lab, 0);
		printf("%-6s profile (ms/object): walship's SHA-256 of the payload %.3f (%.1f%% of its PUT time, "
		       "%.0f MB/s), done before sending;\n"
		       "%-6s   radosgw verifying a real hash %+.3f (curl-sha - curl); curl process start + exit "
		       "%.3f (medians of per-rep differences)\n",
		       size_names[z], msha * 1e3 / s->n, 100.0 * msha / mws,
		       (double)s->n * (double)s->size / msha / 1e6, "", bench_median(verify[z], o->reps) * 1e3 / s->n,
		       bench_median(start[z], o->reps) * 1e3 / s->n);
	}
	ws_store_close(st);
	ws_store_close(stu);
	ws_store_close(stm);
	ws_store_close(stmu);
	free(signed_url);
	free(unsigned_url);
	free(many_url);
	free(many_unsigned_url);
	free(cfg);
	free(out);
}

/* ---- part 2: plain HTTP ---------------------------------------------------- */

enum { H_WS1, H_WSK, H_BARE, H_BAREK, H_NVAR };

struct http_req_mem {
	char url[256];
	char h_len[64];
	char h_attempt[64];
	const char *lines[3];
	struct iovec iov;
};

static void fill_http_req(struct http_req_mem *m, struct ws_http_req *r, const char *base, const struct objs *o,
			  unsigned i)
{
	snprintf(m->url, sizeof(m->url), "%s/put/%zu/%u", base, o->size, i);
	snprintf(m->h_len, sizeof(m->h_len), "Content-Length: %zu", o->size);
	snprintf(m->h_attempt, sizeof(m->h_attempt), "x-amz-meta-ws-attempt: %016" PRIx64 "%016" PRIx64, rnd(),
		 rnd());
	m->lines[0] = m->h_len;
	m->lines[1] = m->h_attempt;
	m->iov.iov_base = (void *)(uintptr_t)obj(o, i);
	m->iov.iov_len = o->size;
	/* Inputs only: ws_http_perform resets the outputs (the struct is ~18 KiB, mostly header room). */
	r->method = "PUT";
	r->url = m->url;
	r->headers = m->lines;
	r->header_count = 2;
	r->body = &m->iov;
	r->body_iovcnt = 1;
	r->on_body = NULL;
	r->on_body_arg = NULL;
}

static void check_http(const struct ws_http_req *r, unsigned i)
{
	if (r->err || r->status != 200)
		bench_die("ws_http PUT %u: err %d (%s), HTTP %ld", i, r->err, r->err_detail, r->status);
}

/* (a1) one ws_http_perform per request; (a2) all at once, up to max_in_flight. */
static struct run_result run_ws_http(struct ws_http *h, bool batch, const char *base, const struct objs *o,
				     struct http_req_mem *mem, struct ws_http_req *reqs)
{
	struct run_result r = { 0, 0, 0, 0, 0 };
	struct ws_http_stats s0, s1;
	double t0, c0;
	ws_http_get_stats(h, &s0);
	c0 = cpu_self_s();
	t0 = bench_now_s();
	if (batch) {
		for (unsigned i = 0; i < o->n; i++)
			fill_http_req(&mem[i], &reqs[i], base, o, i);
		if (ws_http_perform(h, reqs, o->n) != 0)
			bench_die("ws_http_perform: %s", ws_errmsg());
		for (unsigned i = 0; i < o->n; i++)
			check_http(&reqs[i], i);
	} else {
		for (unsigned i = 0; i < o->n; i++) {
			fill_http_req(&mem[0], &reqs[0], base, o, i);
			if (ws_http_perform(h, &reqs[0], 1) != 0)
				bench_die("ws_http_perform: %s", ws_errmsg());
			check_http(&reqs[0], i);
		}
	}
	r.seconds = bench_now_s() - t0;
	r.cpu_s = cpu_self_s() - c0;
	ws_http_get_stats(h, &s1);
	r.connects = (unsigned)(s1.connects - s0.connects);
	return r;
}

/* The bare baselines: a body read from memory, headers built per request. */
struct bare_xfer {
	CURL *e;
	struct curl_slist *hl;
	const uint8_t *p;
	size_t left;
	unsigned idx;
	char url[256];
};

static size_t bare_read(char *buf, size_t size, size_t nitems, void *arg)
{
	struct bare_xfer *b = arg;
	size_t n = size * nitems < b->left ? size * nitems : b->left;
	memcpy(buf, b->p, n);
	b->p += n;
	b->left -= n;
	return n;
}

static size_t bare_discard(char *data, size_t size, size_t nmemb, void *arg)
{
	(void)data;
	(void)arg;
	return size * nmemb;
}

static void bare_init(struct bare_xfer *b)
{
	memset(b, 0, sizeof(*b));
	if (!(b->e = curl_easy_init()))
		bench_die("curl_easy_init failed");
	curl_easy_setopt(b->e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(b->e, CURLOPT_TCP_NODELAY, 1L);
	curl_easy_setopt(b->e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
	curl_easy_setopt(b->e, CURLOPT_UPLOAD, 1L);
	curl_easy_setopt(b->e, CURLOPT_READFUNCTION, bare_read);
	curl_easy_setopt(b->e, CURLOPT_READDATA, (void *)b);
	curl_easy_setopt(b->e, CURLOPT_WRITEFUNCTION, bare_discard);
	curl_easy_setopt(b->e, CURLOPT_PRIVATE, (void *)b);
}

/* Set up request i on b's handle: URL, headers (same as ws_http's, plus an empty Expect), body. */
static void bare_setup(struct bare_xfer *b, const char *base, const struct objs *o, unsigned i)
{
	char h_len[64], h_attempt[64];
	snprintf(b->url, sizeof(b->url), "%s/put/%zu/%u", base, o->size, i);
	snprintf(h_len, sizeof(h_len), "Content-Length: %zu", o->size);
	snprintf(h_attempt, sizeof(h_attempt), "x-amz-meta-ws-attempt: %016" PRIx64 "%016" PRIx64, rnd(), rnd());
	b->hl = curl_slist_append(NULL, h_len);
	if (b->hl)
		b->hl = curl_slist_append(b->hl, h_attempt);
	if (b->hl)
		b->hl = curl_slist_append(b->hl, "Expect:");
	if (!b->hl)
		bench_die("out of memory");
	b->p = obj(o, i);
	b->left = o->size;
	b->idx = i;
	curl_easy_setopt(b->e, CURLOPT_URL, b->url);
	curl_easy_setopt(b->e, CURLOPT_HTTPHEADER, b->hl);
	curl_easy_setopt(b->e, CURLOPT_INFILESIZE_LARGE, (curl_off_t)o->size);
}

static unsigned bare_done(struct bare_xfer *b, CURLcode cc)
{
	long status = 0, conn = 0;
	curl_easy_getinfo(b->e, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_getinfo(b->e, CURLINFO_NUM_CONNECTS, &conn);
	curl_slist_free_all(b->hl);
	b->hl = NULL;
	if (cc != CURLE_OK || status != 200)
		bench_die("bare libcurl PUT %u: %s, HTTP %ld", b->idx, curl_easy_strerror(cc), status);
	return (unsigned)conn;
}

/* (b) one easy handle, curl_easy_perform per request. */
static struct run_result run_bare(struct bare_xfer *b, const char *base, const struct objs *o)
{
	struct run_result r = { 0, 0, 0, 0, 0 };
	double c0 = cpu_self_s(), t0 = bench_now_s();
	for (unsigned i = 0; i < o->n; i++) {
		bare_setup(b, base, o, i);
		r.connects += bare_done(b, curl_easy_perform(b->e));
	}
	r.seconds = bench_now_s() - t0;
	r.cpu_s = cpu_self_s() - c0;
	return r;
}

/* (b') k easy handles on a multi handle, k requests in flight: ws_http's shape without ws_http. */
static struct run_result run_bare_multi(CURLM *m, struct bare_xfer *bx, unsigned k, const char *base,
					const struct objs *o)
{
	struct run_result r = { 0, 0, 0, 0, 0 };
	unsigned next = 0, active = 0;
	struct bare_xfer *idle[256];
	unsigned nidle = 0;
	double c0 = cpu_self_s(), t0 = bench_now_s();
	for (unsigned j = 0; j < k; j++)
		idle[nidle++] = &bx[j];
	while (next < o->n || active) {
		int running, left;
		CURLMsg *msg;
		while (nidle && next < o->n) {
			struct bare_xfer *b = idle[--nidle];
			bare_setup(b, base, o, next++);
			if (curl_multi_add_handle(m, b->e) != CURLM_OK)
				bench_die("curl_multi_add_handle failed");
			active++;
		}
		if (curl_multi_perform(m, &running) != CURLM_OK)
			bench_die("curl_multi_perform failed");
		while ((msg = curl_multi_info_read(m, &left))) {
			char *priv = NULL;
			struct bare_xfer *b;
			if (msg->msg != CURLMSG_DONE)
				continue;
			curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &priv);
			b = (struct bare_xfer *)(void *)priv;
			r.connects += bare_done(b, msg->data.result);
			curl_multi_remove_handle(m, b->e);
			idle[nidle++] = b;
			active--;
		}
		if (nidle && next < o->n)
			continue;
		if (active && curl_multi_poll(m, NULL, 0, 1000, NULL) != CURLM_OK)
			bench_die("curl_multi_poll failed");
	}
	r.seconds = bench_now_s() - t0;
	r.cpu_s = cpu_self_s() - c0;
	return r;
}

static void part_http(const struct opts *o, struct objs *set)
{
	struct ws_http_opts ho1 = { .max_in_flight = 1 }, hok = { .max_in_flight = o->inflight };
	struct ws_http *h1, *hk;
	struct bare_xfer bare, *barek;
	CURLM *multi;
	int err = 0;
	char base[256];
	static struct table tab;
	unsigned nmax = set[0].n > set[1].n ? set[0].n : set[1].n;
	struct http_req_mem *mem = xmalloc(sizeof(*mem) * nmax);
	struct ws_http_req *reqs = xmalloc(sizeof(*reqs) * nmax);
	char name_k[64], name_bk[64], lab[96];

	/* Touch every page now: page faults are not what is measured. */
	memset(mem, 0, sizeof(*mem) * nmax);
	memset(reqs, 0, sizeof(*reqs) * nmax);
	snprintf(base, sizeof(base), "%s", o->http_url);
	for (size_t n = strlen(base); n > 0 && base[n - 1] == '/'; n--)
		base[n - 1] = '\0';
	memset(&tab, 0, sizeof(tab));
	tab.reps = o->http_reps;
	tab.nvar = H_NVAR;
	snprintf(name_k, sizeof(name_k), "ws_http, %u in flight", o->inflight);
	snprintf(name_bk, sizeof(name_bk), "bare libcurl multi, %u in fl.", o->inflight);
	tab.names[H_WS1] = "ws_http, 1 per perform call";
	tab.names[H_WSK] = name_k;
	tab.names[H_BARE] = "bare libcurl easy loop";
	tab.names[H_BAREK] = name_bk;

	h1 = ws_http_open(&ho1, &err);
	hk = ws_http_open(&hok, &err);
	if (!h1 || !hk)
		bench_die("ws_http_open: %s", ws_errmsg());
	bare_init(&bare);
	barek = xmalloc(sizeof(*barek) * o->inflight);
	for (unsigned j = 0; j < o->inflight; j++)
		bare_init(&barek[j]);
	if (!(multi = curl_multi_init()))
		bench_die("curl_multi_init failed");
	curl_multi_setopt(multi, CURLMOPT_MAX_HOST_CONNECTIONS, (long)o->inflight);
	curl_multi_setopt(multi, CURLMOPT_MAXCONNECTS, (long)o->inflight);

	printf("\n== Part 2: HTTP PUT to %s (answers 200 once it has read the whole body): %u reps, "
	       "interleaved, order rotated ==\n"
	       "   same bodies from memory, same headers (Content-Length, x-amz-meta-ws-attempt, no Expect); "
	       "no signing, no hashing;\n"
	       "   ws_http: net/'s client (curl multi, easy handles reset per request); bare: libcurl used "
	       "directly, options set once\n",
	       base, o->http_reps);

	/* Warm-up: open the connections. */
	for (int z = 0; z < NSIZES; z++) {
		struct objs w = set[z];
		w.n = w.n < 20 ? w.n : 20;
		if (!o->http_multi_only) {
			(void)run_ws_http(h1, false, base, &w, mem, reqs);
			(void)run_bare(&bare, base, &w);
		}
		(void)run_ws_http(hk, true, base, &w, mem, reqs);
		(void)run_bare_multi(multi, barek, o->inflight, base, &w);
	}

	for (unsigned rep = 0; rep < o->http_reps; rep++) {
		for (int z = 0; z < NSIZES; z++) {
			const struct objs *s = &set[z];
			struct run_result res[H_NVAR];
			memset(res, 0, sizeof(res));
			for (int k = 0; k < H_NVAR; k++) {
				int var = (int)(((unsigned)k + rep) % H_NVAR);
				if (o->http_multi_only && (var == H_WS1 || var == H_BARE))
					continue;
				if (var == H_BARE)
					res[var] = run_bare(&bare, base, s);
				else if (var == H_BAREK)
					res[var] = run_bare_multi(multi, barek, o->inflight, base, s);
				else
					res[var] = run_ws_http(var == H_WS1 ? h1 : hk, var == H_WSK, base, s, mem, reqs);
				table_put(&tab, z, var, rep, &res[var]);
			}
			printf("rep %u %-5s x%-5u ws_http/1 %6.3f s | ws_http/%u %6.3f s | bare %6.3f s | "
			       "bare multi/%u %6.3f s | new connections %u %u %u %u\n",
			       rep + 1, size_names[z], s->n, res[H_WS1].seconds, o->inflight, res[H_WSK].seconds,
			       res[H_BARE].seconds, o->inflight, res[H_BAREK].seconds, res[H_WS1].connects,
			       res[H_WSK].connects, res[H_BARE].connects, res[H_BAREK].connects);
		}
	}

	for (int z = 0; z < NSIZES; z++) {
		putchar('\n');
		print_rates(&tab, z, &set[z], "requests/s");
		if (o->http_multi_only) {
			snprintf(lab, sizeof(lab), "ratio ws_http(%u in flight)/bare multi(%u)", o->inflight,
				 o->inflight);
			print_ratio(&tab, z, H_WSK, H_BAREK, lab, 0);
			printf("%-6s client CPU per request: ws_http/%u %.1f us vs bare multi %.1f us\n", size_names[z],
			       o->inflight, bench_median(tab.cpu[z][H_WSK], o->http_reps) * 1e6 / set[z].n,
			       bench_median(tab.cpu[z][H_BAREK], o->http_reps) * 1e6 / set[z].n);
			continue;
		}
		print_ratio(&tab, z, H_WS1, H_BARE, "ratio ws_http(1 per call)/bare easy", 0.8);
		snprintf(lab, sizeof(lab), "ratio ws_http(%u in flight)/bare easy", o->inflight);
		print_ratio(&tab, z, H_WSK, H_BARE, lab, 0.8);
		snprintf(lab, sizeof(lab), "ratio ws_http(%u in flight)/bare multi(%u)", o->inflight, o->inflight);
		print_ratio(&tab, z, H_WSK, H_BAREK, lab, 0);
		printf("%-6s client CPU per request: ws_http/1 %.1f us vs bare easy %.1f us (ratio %.2f)\n",
		       size_names[z], bench_median(tab.cpu[z][H_WS1], o->http_reps) * 1e6 / set[z].n,
		       bench_median(tab.cpu[z][H_BARE], o->http_reps) * 1e6 / set[z].n,
		       bench_median(tab.cpu[z][H_BARE], o->http_reps) / bench_median(tab.cpu[z][H_WS1], o->http_reps));
	}
	curl_multi_cleanup(multi); /* before the handles it may still hold connections for */
	for (unsigned j = 0; j < o->inflight; j++)
		curl_easy_cleanup(barek[j].e);
	curl_easy_cleanup(bare.e);
	ws_http_close(h1);
	ws_http_close(hk);
	free(barek);
	free(mem);
	free(reqs);
}

int main(int argc, char **argv)
{
	struct opts o;
	char tmpl[PATH_MAX];
	char *work;
	struct objs s3set[NSIZES], httpset[NSIZES];
	curl_version_info_data *cv;

	parse_args(argc, argv, &o);
	setvbuf(stdout, NULL, _IOLBF, 0);
	snprintf(tmpl, sizeof(tmpl), "%s/ws-bench-s3.XXXXXX", o.dir);
	work = mkdtemp(tmpl);
	if (!work)
		bench_die("mkdtemp %s: %s", tmpl, strerror(errno));
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		bench_die("curl_global_init failed");
	cv = curl_version_info(CURLVERSION_NOW);
	printf("bench_s3: libcurl %s, %ld CPUs online, load average %s; MB = 10^6 bytes; ratios are median "
	       "per-rep time ratios, > 1 means walship is faster\n",
	       cv->version, sysconf(_SC_NPROCESSORS_ONLN), loadavg());

	if (o.s3_url) {
		for (int z = 0; z < NSIZES; z++)
			make_objs(&s3set[z], sizes[z], o.n[z], work);
		part_s3(&o, s3set, work);
	}
	if (o.http_url) {
		for (int z = 0; z < NSIZES; z++)
			make_objs(&httpset[z], sizes[z], o.hn[z], NULL);
		part_http(&o, httpset);
	}
	printf("\nbench_s3: done; load average now %s\n", loadavg());
	nftw(work, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	return 0;
}
