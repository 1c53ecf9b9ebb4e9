/*
 * walship command line tool. The only place that parses argv.
 *
 *   walship replicate --sink URL [--config FILE] [--epoch N] [--pointer-generation N]
 *                     [--interval-ms N] [--once] [--json] [NAME=]DB_PATH...
 *   walship restore   --sink URL --tenant NAME [--frame N | --time RFC3339] [--force] -o OUT_DB
 *   walship ls        --sink URL [--tenant NAME] [--json]
 *   walship verify    --sink URL [--tenant NAME]
 *
 * Exit status: 0 success; 2 usage or configuration error; 3 every tenant was
 * fenced; 1 anything else. Errors go to stderr naming tenant, object, cause.
 */
#include <errno.h>
#include <getopt.h>
#include <ini.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "walship.h"
#include "ws_log.h"

#define EXIT_OK 0
#define EXIT_FAIL 1
#define EXIT_USAGE 2
#define EXIT_FENCED 3
#define TENANTS_MAX 100000

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
	(void)sig;
	stop_requested = 1;
}

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...)
{
	va_list ap;
	fputs("walship: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\nrun 'walship help' for usage\n", stderr);
	return EXIT_USAGE;
}

static void print_usage(FILE *f)
{
	fputs("usage:\n"
	      "  walship replicate --sink URL [--config FILE] [--epoch N] [--pointer-generation N]\n"
	      "                    [--interval-ms N] [--once] [--json] [NAME=]DB_PATH...\n"
	      "  walship restore   --sink URL --tenant NAME [--frame N | --time RFC3339] [--force] -o OUT_DB\n"
	      "  walship ls        --sink URL [--tenant NAME] [--json]\n"
	      "  walship verify    --sink URL [--tenant NAME]\n"
	      "URL: file:///absolute/dir\n",
	      f);
}

/* Strict unsigned parse: digits only, no overflow. */
static int parse_u64(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	if (!s || !*s || *s == '-' || *s == '+')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end)
		return -1;
	*out = v;
	return 0;
}

/* "4MiB", "512KiB", "1GiB", "4096" */
static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	uint64_t mul = 1;
	if (!s || !*s || *s == '-')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -1;
	if (*end) {
		if (!strcmp(end, "KiB") || !strcmp(end, "K"))
			mul = 1ull << 10;
		else if (!strcmp(end, "MiB") || !strcmp(end, "M"))
			mul = 1ull << 20;
		else if (!strcmp(end, "GiB") || !strcmp(end, "G"))
			mul = 1ull << 30;
		else
			return -1;
	}
	if (v > UINT64_MAX / mul)
		return -1;
	*out = v * mul;
	return 0;
}

/* RFC 3339: 2026-11-30T12:34:56[.123][Z|+hh:mm|-hh:mm] -> ms since epoch. */
static int parse_rfc3339(const char *s, int64_t *out_ms)
{
	struct tm tm;
	int y, mo, d, h, mi, sec, n = 0, ms = 0;
	const char *p;
	long off = 0;

	memset(&tm, 0, sizeof(tm));
	if (sscanf(s, "%4d-%2d-%2d%*1[Tt ]%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &sec, &n) != 6 || n != 19)
		return -1;
	p = s + n;
	if (*p == '.') {
		int digits = 0;
		p++;
		while (*p >= '0' && *p <= '9') {
			if (digits < 3)
				ms = ms * 10 + (*p - '0');
			digits++;
			p++;
		}
		if (!digits)
			return -1;
		while (digits < 3) {
			ms *= 10;
			digits++;
		}
	}
	if (*p == 'Z' || *p == 'z') {
		p++;
	} else if (*p == '+' || *p == '-') {
		int oh, om, m2 = 0;
		if (sscanf(p + 1, "%2d:%2d%n", &oh, &om, &m2) != 2 || m2 != 5 || oh > 23 || om > 59)
			return -1;
		off = (oh * 60L + om) * 60L * (*p == '-' ? -1 : 1);
		p += 6;
	} else {
		return -1;
	}
	if (*p || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60)
		return -1;
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = sec;
	time_t t = timegm(&tm); /* -1 is also 1969-12-31T23:59:59Z; the caller bounds the range */
	*out_ms = ((int64_t)t - off) * 1000 + ms;
	return 0;
}

/* ---- configuration ---------------------------------------------------- */

struct tenant_cfg {
	char *name;
	char *path;
	enum ws_policy policy;
	int line;     /* of its [tenant.NAME] header, 0 = from the command line */
};

struct config {
	char *sink;
	uint64_t epoch, pg;
	uint64_t interval_ms;
	uint64_t batch_bytes_max;
	uint64_t wal_checkpoint_bytes;
	struct tenant_cfg *tenants;
	size_t tenant_count;
	/* parse error */
	const char *file;
	int err_line;
	char err[256];
};

static struct tenant_cfg *tenant_get(struct config *c, const char *name)
{
	for (size_t i = 0; i < c->tenant_count; i++)
		if (!strcmp(c->tenants[i].name, name))
			return &c->tenants[i];
	if (c->tenant_count >= TENANTS_MAX)
		return NULL;
	struct tenant_cfg *n = realloc(c->tenants, (c->tenant_count + 1) * sizeof(*n));
	if (!n)
		return NULL;
	c->tenants = n;
	n = &c->tenants[c->tenant_count++];
	memset(n, 0, sizeof(*n));
	n->name = strdup(name);
	return n->name ? n : NULL;
}

static int parse_policy(const char *v, enum ws_policy *p)
{
	if (!strcmp(v, "block"))
		*p = WS_POLICY_BLOCK;
	else if (!strcmp(v, "throttle"))
		*p = WS_POLICY_THROTTLE;
	else if (!strcmp(v, "shed"))
		*p = WS_POLICY_SHED;
	else
		return -1;
	return 0;
}

static int cfg_fail(struct config *c, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int cfg_fail(struct config *c, int line, const char *fmt, ...)
{
	va_list ap;
	if (!c->err[0]) {
		c->err_line = line;
		va_start(ap, fmt);
		vsnprintf(c->err, sizeof(c->err), fmt, ap);
		va_end(ap);
	}
	return 0;
}

static int cfg_handler(void *user, const char *section, const char *key, const char *value)
{
	const int line = 0; /* inih reports the line: ini_parse returns the first failing one */
	struct config *c = user;
	uint64_t v;

	if (!key) /* a section header on its own */
		return 1;
	if (!strcmp(section, "engine")) {
		if (!strcmp(key, "sink")) {
			free(c->sink);
			c->sink = strdup(value);
		} else if (!strcmp(key, "epoch") || !strcmp(key, "pointer_generation") ||
			   !strcmp(key, "interval_ms")) {
			if (parse_u64(value, &v))
				return cfg_fail(c, line, "[engine] %s: '%s' is not a non-negative integer", key, value);
			if (!strcmp(key, "epoch"))
				c->epoch = v;
			else if (!strcmp(key, "pointer_generation"))
				c->pg = v;
			else if (v == 0 || v > 86400000)
				return cfg_fail(c, line, "[engine] interval_ms: '%s' must be 1..86400000", value);
			else
				c->interval_ms = v;
		} else if (!strcmp(key, "batch_bytes_max")) {
			if (parse_size(value, &v) || v < 65560 || v > (1ull << 30))
				return cfg_fail(c, line, "[engine] batch_bytes_max: '%s' must be a size between 65560 "
						"and 1GiB (e.g. 4MiB)", value);
			c->batch_bytes_max = v;
		} else if (!strcmp(key, "wal_checkpoint_bytes")) {
			if (!strcmp(value, "off"))
				v = UINT64_MAX;
			else if (parse_size(value, &v) || v == 0)
				return cfg_fail(c, line, "[engine] wal_checkpoint_bytes: '%s' must be a positive size "
						"(e.g. 4MiB) or off", value);
			c->wal_checkpoint_bytes = v;
		} else {
			return cfg_fail(c, line, "[engine]: unknown key '%s'", key);
		}
		return 1;
	}
	if (!strcmp(section, "s3")) {
		/* Credentials for s3:// sinks. The environment wins over the file,
		 * as with AWS's own tools; the store reads them from there. */
		static const char *const keys[][2] = {
			{ "access_key_id", "AWS_ACCESS_KEY_ID" },
			{ "secret_access_key", "AWS_SECRET_ACCESS_KEY" },
			{ "session_token", "AWS_SESSION_TOKEN" },
			{ "region", "AWS_REGION" },
		};
		for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
			if (!strcmp(key, keys[i][0])) {
				if (!*value)
					return cfg_fail(c, line, "[s3] %s is empty", key);
				setenv(keys[i][1], value, 0);
				return 1;
			}
		}
		return cfg_fail(c, line, "[s3]: unknown key '%s'", key);
	}
	if (!strncmp(section, "tenant.", 7)) {
		const char *name = section + 7;
		struct tenant_cfg *t;
		if (!*name)
			return cfg_fail(c, line, "[tenant.]: empty tenant name");
		t = tenant_get(c, name);
		if (!t)
			return cfg_fail(c, line, "[%s]: too many tenants or out of memory", section);
		if (!strcmp(key, "path")) {
			free(t->path);
			t->path = strdup(value);
		} else if (!strcmp(key, "policy")) {
			if (parse_policy(value, &t->policy))
				return cfg_fail(c, line, "[%s] policy: '%s' is not block, throttle or shed", section,
						value);
		} else {
			return cfg_fail(c, line, "[%s]: unknown key '%s'", section, key);
		}
		return 1;
	}
	return cfg_fail(c, line, "unknown section [%s]", section);
}

static int syntax_only(void *user, const char *section, const char *key, const char *value)
{
	(void)user;
	(void)section;
	(void)key;
	(void)value;
	return 1;
}

/* Sections are checked here, with their line numbers: inih never reports a
 * section that has no keys, and a tenant without a path is named by the line
 * of its header. */
static int config_sections(struct config *c, const char *file)
{
	FILE *f = fopen(file, "r");
	char buf[1024];
	int line = 0;
	if (!f)
		return usage_error("config %s: cannot open: %s", file, strerror(errno));
	while (fgets(buf, sizeof(buf), f)) {
		char *p = buf, *end;
		line++;
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p != '[')
			continue;
		end = strchr(p, ']');
		if (!end)
			continue; /* inih reports the syntax error */
		*end = '\0';
		p++;
		if (!strcmp(p, "engine") || !strcmp(p, "s3"))
			continue;
		if (!strncmp(p, "tenant.", 7) && p[7]) {
			struct tenant_cfg *t = tenant_get(c, p + 7);
			if (t && !t->line)
				t->line = line;
			continue;
		}
		fclose(f);
		return usage_error("config %s:%d: unknown section [%s] (expected [engine], [s3] or [tenant.NAME])",
				   file, line, p);
	}
	fclose(f);
	return 0;
}

static int config_load(struct config *c, const char *file)
{
	int rc;
	c->file = file;
	rc = config_sections(c, file);
	if (rc)
		return rc;
	/* First pass accepts every key, so its error line is a syntax error. */
	rc = ini_parse(file, syntax_only, NULL);
	if (rc == -1)
		return usage_error("config %s: cannot open: %s", file, strerror(errno));
	if (rc == -2)
		return usage_error("config %s: out of memory", file);
	if (rc > 0)
		return usage_error("config %s:%d: syntax error (expected [section] or key = value)", file, rc);
	rc = ini_parse(file, cfg_handler, c);
	if (rc != 0 || c->err[0])
		return usage_error("config %s:%d: %s", file, rc, c->err[0] ? c->err : "invalid");
	for (size_t i = 0; i < c->tenant_count; i++)
		if (!c->tenants[i].path)
			return usage_error("config %s:%d: [tenant.%s] has no path", file, c->tenants[i].line,
					   c->tenants[i].name);
	return 0;
}

static void config_free(struct config *c)
{
	for (size_t i = 0; i < c->tenant_count; i++) {
		free(c->tenants[i].name);
		free(c->tenants[i].path);
	}
	free(c->tenants);
	free(c->sink);
}

/* NAME defaults to the file name without its extension. */
static int add_cli_tenant(struct config *c, const char *arg)
{
	const char *eq = strchr(arg, '=');
	char name[WS_TENANT_MAX];
	const char *path;
	struct tenant_cfg *t;

	if (eq && eq != arg && !memchr(arg, '/', (size_t)(eq - arg))) {
		size_t n = (size_t)(eq - arg);
		if (n >= sizeof(name))
			return usage_error("tenant name in '%s' is too long", arg);
		memcpy(name, arg, n);
		name[n] = '\0';
		path = eq + 1;
	} else {
		const char *base = strrchr(arg, '/');
		const char *dot;
		size_t n;
		base = base ? base + 1 : arg;
		dot = strrchr(base, '.');
		n = dot && dot != base ? (size_t)(dot - base) : strlen(base);
		if (n == 0 || n >= sizeof(name))
			return usage_error("cannot derive a tenant name from '%s'; use NAME=PATH", arg);
		memcpy(name, base, n);
		name[n] = '\0';
		path = arg;
	}
	if (!*path)
		return usage_error("empty database path in '%s'", arg);
	for (size_t i = 0; i < c->tenant_count; i++)
		if (!strcmp(c->tenants[i].name, name) && c->tenants[i].path && strcmp(c->tenants[i].path, path))
			return usage_error("tenant '%s' given twice with different paths", name);
	t = tenant_get(c, name);
	if (!t)
		return usage_error("too many tenants");
	free(t->path);
	t->path = strdup(path);
	return 0;
}

/* ---- replicate -------------------------------------------------------- */

enum {
	OPT_SINK = 1000, OPT_CONFIG, OPT_EPOCH, OPT_PG, OPT_INTERVAL, OPT_ONCE, OPT_JSON,
	OPT_TENANT, OPT_FRAME, OPT_TIME, OPT_FORCE, OPT_FORCE_PREAD, OPT_QUIET, OPT_VERBOSE,
};

static int tail_all(struct ws_stream **streams, size_t n, bool *fenced, bool json, size_t *fenced_count,
		    size_t *errors)
{
	*errors = 0;
	for (size_t i = 0; i < n; i++) {
		struct ws_outcome oc;
		int rc;
		if (fenced[i])
			continue;
		rc = ws_stream_tail_frames(streams[i], &oc);
		if (rc) {
			fprintf(stderr, "walship: error: %s\n", ws_errmsg());
			(*errors)++;
			continue;
		}
		if (json)
			ws_cli_print_outcome_json(ws_stream_tenant(streams[i]), &oc);
		if (oc.kind == WS_OUTCOME_FENCED) {
			fprintf(stderr,
				"walship: tenant %s: fenced: the sink is owned by epoch %" PRIu64
				" / pointer generation %" PRIu64 " (ours %" PRIu64 " / %" PRIu64 "); stopped\n",
				ws_stream_tenant(streams[i]), oc.u.fenced.current_epoch,
				oc.u.fenced.current_pointer_generation, oc.u.fenced.our_epoch,
				oc.u.fenced.our_pointer_generation);
			fenced[i] = true;
			(*fenced_count)++;
		}
	}
	return 0;
}

static int cmd_replicate(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "sink", required_argument, NULL, OPT_SINK },
		{ "config", required_argument, NULL, OPT_CONFIG },
		{ "epoch", required_argument, NULL, OPT_EPOCH },
		{ "pointer-generation", required_argument, NULL, OPT_PG },
		{ "interval-ms", required_argument, NULL, OPT_INTERVAL },
		{ "once", no_argument, NULL, OPT_ONCE },
		{ "json", no_argument, NULL, OPT_JSON },
		{ "force-pread", no_argument, NULL, OPT_FORCE_PREAD },
		{ "quiet", no_argument, NULL, OPT_QUIET },
		{ "verbose", no_argument, NULL, OPT_VERBOSE },
		{ NULL, 0, NULL, 0 },
	};
	struct config cfg;
	const char *sink_url = NULL, *config_file = NULL;
	uint64_t epoch = 0, pg = 0, interval = 1000;
	bool have_epoch = false, have_pg = false, have_interval = false;
	bool once = false, json = false, quiet = false, verbose = false;
	unsigned reader_flags = 0;
	struct ws_sink *sink = NULL;
	struct ws_stream **streams = NULL;
	bool *fenced = NULL;
	size_t fenced_count = 0, errors = 0;
	int rc, c, exit_code = EXIT_FAIL;

	memset(&cfg, 0, sizeof(cfg));
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case OPT_SINK: sink_url = optarg; break;
		case OPT_CONFIG: config_file = optarg; break;
		case OPT_EPOCH:
			if (parse_u64(optarg, &epoch))
				return usage_error("--epoch: '%s' is not a non-negative integer", optarg);
			have_epoch = true;
			break;
		case OPT_PG:
			if (parse_u64(optarg, &pg))
				return usage_error("--pointer-generation: '%s' is not a non-negative integer", optarg);
			have_pg = true;
			break;
		case OPT_INTERVAL:
			if (parse_u64(optarg, &interval) || interval == 0 || interval > 86400000)
				return usage_error("--interval-ms: '%s' must be 1..86400000", optarg);
			have_interval = true;
			break;
		case OPT_ONCE: once = true; break;
		case OPT_JSON: json = true; break;
		case OPT_FORCE_PREAD: reader_flags |= 1u; break;
		case OPT_QUIET: quiet = true; break;
		case OPT_VERBOSE: verbose = true; break;
		default: return usage_error("replicate: unknown or incomplete option");
		}
	}
	if (config_file && (rc = config_load(&cfg, config_file)) != 0)
		goto out_usage;
	for (int i = optind; i < argc; i++)
		if ((rc = add_cli_tenant(&cfg, argv[i])) != 0)
			goto out_usage;
	if (!sink_url)
		sink_url = cfg.sink;
	if (!sink_url) {
		rc = usage_error("replicate: --sink URL is required (or [engine] sink in --config)");
		goto out_usage;
	}
	if (cfg.tenant_count == 0) {
		rc = usage_error("replicate: no databases given");
		goto out_usage;
	}
	if (!have_epoch)
		epoch = cfg.epoch;
	if (!have_pg)
		pg = cfg.pg;
	if (!have_interval && cfg.interval_ms)
		interval = cfg.interval_ms;

	if (verbose)
		ws_log_set_level(WS_LOG_DEBUG);
	else if (!quiet)
		ws_log_set_level(WS_LOG_INFO);
	sink = ws_sink_open(sink_url, &rc);
	if (!sink) {
		fprintf(stderr, "walship: %s\n", ws_errmsg());
		exit_code = rc == WS_ECONFIG ? EXIT_USAGE : EXIT_FAIL;
		goto out;
	}
	streams = calloc(cfg.tenant_count, sizeof(*streams));
	fenced = calloc(cfg.tenant_count, sizeof(*fenced));
	if (!streams || !fenced) {
		fprintf(stderr, "walship: out of memory\n");
		goto out;
	}
	for (size_t i = 0; i < cfg.tenant_count; i++) {
		struct ws_stream_config sc = {
			.tenant = cfg.tenants[i].name,
			.db_path = cfg.tenants[i].path,
			.epoch = epoch,
			.pointer_generation = pg,
			.policy = cfg.tenants[i].policy,
			.batch_bytes_max = cfg.batch_bytes_max,
			.reader_flags = reader_flags,
			.wal_checkpoint_bytes = cfg.wal_checkpoint_bytes,
		};
		streams[i] = ws_stream_open(sink, &sc, &rc);
		if (!streams[i]) {
			fprintf(stderr, "walship: tenant %s: %s\n", cfg.tenants[i].name, ws_errmsg());
			exit_code = rc == WS_ECONFIG ? EXIT_USAGE : EXIT_FAIL;
			goto out;
		}
		if (!quiet)
			fprintf(stderr, "walship: tenant %s: %s -> %s (WAL read path: %s)\n", cfg.tenants[i].name,
				cfg.tenants[i].path, sink_url, ws_stream_read_path(streams[i]));
	}

	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	for (;;) {
		tail_all(streams, cfg.tenant_count, fenced, json, &fenced_count, &errors);
		if (once || stop_requested || fenced_count == cfg.tenant_count)
			break;
		/* Sleep in small steps so a signal is honoured promptly. */
		for (uint64_t slept = 0; slept < interval && !stop_requested; slept += 50) {
			struct timespec ts = { 0, (long)((interval - slept < 50 ? interval - slept : 50) * 1000000) };
			nanosleep(&ts, NULL);
		}
		if (stop_requested) {
			/* One last pass so everything committed is durable on exit. */
			tail_all(streams, cfg.tenant_count, fenced, json, &fenced_count, &errors);
			break;
		}
	}
	if (fenced_count == cfg.tenant_count)
		exit_code = EXIT_FENCED;
	else
		exit_code = errors ? EXIT_FAIL : EXIT_OK;
out:
	if (streams)
		for (size_t i = 0; i < cfg.tenant_count; i++)
			ws_stream_close(streams[i]);
	free(streams);
	free(fenced);
	ws_sink_close(sink);
	config_free(&cfg);
	return exit_code;
out_usage:
	config_free(&cfg);
	return rc;
}

/* ---- restore / ls / verify -------------------------------------------- */

static int cmd_restore(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "sink", required_argument, NULL, OPT_SINK },
		{ "tenant", required_argument, NULL, OPT_TENANT },
		{ "frame", required_argument, NULL, OPT_FRAME },
		{ "time", required_argument, NULL, OPT_TIME },
		{ "force", no_argument, NULL, OPT_FORCE },
		{ "output", required_argument, NULL, 'o' },
		{ NULL, 0, NULL, 0 },
	};
	const char *sink_url = NULL, *tenant = NULL, *out = NULL;
	struct ws_restore_opts ro = { 0 };
	struct ws_sink *sink;
	int c, rc;

	while ((c = getopt_long(argc, argv, "o:", opts, NULL)) != -1) {
		switch (c) {
		case OPT_SINK: sink_url = optarg; break;
		case OPT_TENANT: tenant = optarg; break;
		case OPT_FRAME:
			if (parse_u64(optarg, &ro.frame) || ro.frame == 0)
				return usage_error("--frame: '%s' must be a positive integer", optarg);
			break;
		case OPT_TIME:
			if (parse_rfc3339(optarg, &ro.time_ms))
				return usage_error("--time: '%s' is not RFC 3339 (e.g. 2026-11-30T12:00:00Z)", optarg);
			if (ro.time_ms <= 0)
				return usage_error("--time: '%s' is not after 1970-01-01T00:00:00Z", optarg);
			break;
		case OPT_FORCE: ro.force = true; break;
		case 'o': out = optarg; break;
		default: return usage_error("restore: unknown or incomplete option");
		}
	}
	if (optind < argc)
		return usage_error("restore: unexpected argument '%s'", argv[optind]);
	if (!sink_url || !tenant || !out)
		return usage_error("restore: --sink, --tenant and -o are required");
	if (ro.frame && ro.time_ms)
		return usage_error("restore: --frame and --time exclude each other");
	sink = ws_sink_open_flags(sink_url, WS_SINK_EXISTING, &rc);
	if (!sink) {
		fprintf(stderr, "walship: %s\n", ws_errmsg());
		return rc == WS_ECONFIG ? EXIT_USAGE : EXIT_FAIL;
	}
	rc = ws_restore(sink, tenant, &ro, out);
	ws_sink_close(sink);
	if (rc) {
		fprintf(stderr, "walship: restore refused: %s\n", ws_errmsg());
		return rc == WS_ECONFIG ? EXIT_USAGE : EXIT_FAIL;
	}
	fprintf(stderr, "walship: tenant %s restored to %s\n", tenant, out);
	return EXIT_OK;
}

struct ls_print {
	bool json;
};

static int ls_cb(const struct ws_tenant_info *t, void *arg)
{
	struct ls_print *p = arg;
	if (p->json) {
		ws_cli_print_tenant_json(t);
		return 0;
	}
	if (!t->has_watermark) {
		printf("%-24s (no watermark) objects=%" PRIu64 "\n", t->tenant, t->objects);
		return 0;
	}
	time_t secs = (time_t)(t->watermark.time_ms / 1000);
	struct tm tm;
	char when[32];
	gmtime_r(&secs, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	printf("%-24s epoch=%" PRIu64 " pg=%" PRIu64 " wal_ckpt_seq=%u salt=%s last_frame=%" PRIu64
	       " watermark=%s objects=%" PRIu64 " bytes=%" PRIu64 "\n",
	       t->tenant, t->watermark.epoch, t->watermark.pointer_generation,
	       t->watermark.generation.checkpoint_seq, t->watermark.generation.has_salt ? "yes" : "none",
	       t->watermark.last_frame, when, t->objects, t->bytes);
	return 0;
}

static int cmd_ls(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "sink", required_argument, NULL, OPT_SINK },
		{ "tenant", required_argument, NULL, OPT_TENANT },
		{ "json", no_argument, NULL, OPT_JSON },
		{ NULL, 0, NULL, 0 },
	};
	const char *sink_url = NULL, *tenant = NULL;
	struct ls_print p = { false };
	struct ws_sink *sink;
	int c, rc;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case OPT_SINK: sink_url = optarg; break;
		case OPT_TENANT: tenant = optarg; break;
		case OPT_JSON: p.json = true; break;
		default: return usage_error("ls: unknown or incomplete option");
		}
	}
	if (optind < argc)
		return usage_error("ls: unexpected argument '%s'", argv[optind]);
	if (!sink_url)
		return usage_error("ls: --sink URL is required");
	sink = ws_sink_open_flags(sink_url, WS_SINK_EXISTING, &rc);
	if (!sink) {
		fprintf(stderr, "walship: %s\n", ws_errmsg());
		return rc == WS_ECONFIG ? EXIT_USAGE : EXIT_FAIL;
	}
	rc = ws_list_tenants(sink, tenant, ls_cb, &p);
	ws_sink_close(sink);
	if (rc) {
		fprintf(stderr, "walship: ls: %s\n", ws_errmsg());
		return rc == WS_ECONFIG ? EXIT_USAGE : EXIT_FAIL;
	}
	return EXIT_OK;
}

static void verify_problem(const char *tenant, const char *key, int err, const char *detail, void *arg)
{
	unsigned *n = arg;
	(*n)++;
	(void)tenant;
	(void)key;
	(void)err;
	fprintf(stderr, "walship: verify: %s\n", detail);
}

static int cmd_verify(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "sink", required_argument, NULL, OPT_SINK },
		{ "tenant", required_argument, NULL, OPT_TENANT },
		{ NULL, 0, NULL, 0 },
	};
	const char *sink_url = NULL, *tenant = NULL;
	struct ws_sink *sink;
	unsigned problems = 0;
	int c, rc;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case OPT_SINK: sink_url = optarg; break;
		case OPT_TENANT: tenant = optarg; break;
		default: return usage_error("verify: unknown or incomplete option");
		}
	}
	if (optind < argc)
		return usage_error("verify: unexpected argument '%s'", argv[optind]);
	if (!sink_url)
		return usage_error("verify: --sink URL is required");
	sink = ws_sink_open_flags(sink_url, WS_SINK_EXISTING, &rc);
	if (!sink) {
		fprintf(stderr, "walship: %s\n", ws_errmsg());
		return rc == WS_ECONFIG ? EXIT_USAGE : EXIT_FAIL;
	}
	rc = ws_verify(sink, tenant, verify_problem, &problems);
	ws_sink_close(sink);
	if (rc == WS_ECONFIG) {
		fprintf(stderr, "walship: verify: %s\n", ws_errmsg());
		return EXIT_USAGE;
	}
	if (rc) {
		if (!problems)
			fprintf(stderr, "walship: verify: %s\n", ws_errmsg());
		printf("verify: FAILED (%u problem%s)\n", problems ? problems : 1, problems == 1 ? "" : "s");
		return EXIT_FAIL;
	}
	printf("verify: ok\n");
	return EXIT_OK;
}

int main(int argc, char **argv)
{
	const char *cmd = argc > 1 ? argv[1] : NULL;
	if (!cmd)
		return usage_error("missing command");
	if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
		print_usage(stdout);
		return EXIT_OK;
	}
	if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
		printf("walship %s\n", ws_version());
		return EXIT_OK;
	}
	/* getopt starts at argv[1] = the command name. */
	if (!strcmp(cmd, "replicate"))
		return cmd_replicate(argc - 1, argv + 1);
	if (!strcmp(cmd, "restore"))
		return cmd_restore(argc - 1, argv + 1);
	if (!strcmp(cmd, "ls"))
		return cmd_ls(argc - 1, argv + 1);
	if (!strcmp(cmd, "verify"))
		return cmd_verify(argc - 1, argv + 1);
	return usage_error("unknown command '%s'", cmd);
}
