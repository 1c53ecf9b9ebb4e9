/*
 * `walship replicate --config FILE`: the INI file, read with Debian's libinih.
 *
 * Shape (docs/CLI.md "Configuration file" lists every key, default and range):
 *
 *   [engine]          sink, shards, metrics_addr, epoch, pointer_generation,
 *                     wal_checkpoint_bytes, drain_ms_max, interval_ms (older name of
 *                     batch_age_ms_max); and any [shard.N] key but core,
 *                     as the default of every shard
 *   [shard.N]         0 <= N < shards; overrides only the keys it sets
 *   [tenant.NAME]     path (required), shard, policy; compression,
 *                     compression_level, key_file (the others from [engine])
 *   [s3]              credentials for s3:// sinks (the environment wins)
 *
 * Lines: "[section]", "key = value", blank, or a comment starting with '#'
 * or ';'. A '#' or ';' after whitespace starts a comment anywhere. Leading
 * whitespace is ignored (no continuation lines). A line holds at most
 * INI_MAX_LINE - 2 bytes (198 in Debian's libinih build): inih's buffer.
 *
 * How the line numbers are known: inih calls its reader once per line and
 * its handler synchronously for that line, so the reader below counts lines
 * and the handler reads the count. The reader also normalises each line
 * (comments, leading whitespace) and handles section headers itself: inih
 * truncates section names to 49 bytes and never reports a section without
 * keys, and a [tenant.NAME] may be 127 bytes long and must be reported even
 * when empty. inih reports syntax errors (a line that is neither a header
 * nor key = value) by returning the first bad line; the first error of all
 * wins.
 */
#include <errno.h>
#include <getopt.h>
#include <fcntl.h>
#include <ini.h>
#include <inttypes.h>
#include <limits.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "metrics_http.h"

#define ERR_BYTES_MAX 512
/* A raw line, comments included, is cut off here while it is read: a file
 * without newlines (/dev/zero) must not grow a buffer without bound. */
#define RAW_LINE_BYTES_MAX 4096
#define MS_MAX 86400000u                /* a day */
#define RING_BYTES_MAX (64ull << 30)
/* As the engine checks them (core/engine.c check_shard); here they get a line. */
#define BATCH_BYTES_MIN 65656u          /* one 64 KiB page frame (65560) and a batch header (96) */
#define UPLOADS_IN_FLIGHT_MAX 64u
#define BATCH_BYTES_MAX (1ull << 30)

/* ---- strict value parsers ---------------------------------------------- */

/* The decimal digits s starts with (at least one) into *v; *end after them. */
static int leading_u64(const char *s, unsigned long long *v, char **end)
{
	if (!s || *s < '0' || *s > '9')
		return -1;
	errno = 0;
	*v = strtoull(s, end, 10);
	return errno ? -1 : 0;
}

const char *ws_cli_twice(const struct option *opts, int c, uint64_t *seen)
{
	for (unsigned i = 0; i < 64 && opts[i].name; i++) {
		if (opts[i].val != c || opts[i].flag || opts[i].has_arg != required_argument)
			continue;
		if (*seen & (UINT64_C(1) << i))
			return opts[i].name;
		*seen |= UINT64_C(1) << i;
		return NULL;
	}
	return NULL;
}

int ws_cli_parse_u64(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	if (leading_u64(s, &v, &end) || *end)
		return -1;
	*out = v;
	return 0;
}

int ws_cli_parse_token(const char *s, uint64_t *out)
{
	return ws_cli_parse_u64(s, out) || *out > INT64_MAX ? -1 : 0;
}

int ws_cli_parse_size(const char *s, uint64_t *out)
{
	static const struct {
		const char *suffix;
		unsigned shift;
	} units[] = { { "", 0 }, { "KiB", 10 }, { "K", 10 }, { "MiB", 20 }, { "M", 20 }, { "GiB", 30 }, { "G", 30 } };
	char *end;
	unsigned long long v;
	if (leading_u64(s, &v, &end))
		return -1;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(end, units[i].suffix))
			continue;
		if (v > (UINT64_MAX >> units[i].shift))
			return -1;
		*out = (uint64_t)v << units[i].shift;
		return 0;
	}
	return -1;
}

int ws_cli_parse_codec(const char *s, enum ws_codec *out)
{
	if (!strcmp(s, "zstd"))
		*out = WS_CODEC_ZSTD;
	else if (!strcmp(s, "none"))
		*out = WS_CODEC_NONE;
	else
		return -1;
	return 0;
}

int ws_cli_parse_policy(const char *s, enum ws_policy *out)
{
	if (!strcmp(s, "block"))
		*out = WS_POLICY_BLOCK;
	else if (!strcmp(s, "throttle"))
		*out = WS_POLICY_THROTTLE;
	else if (!strcmp(s, "shed"))
		*out = WS_POLICY_SHED;
	else
		return -1;
	return 0;
}

static int parse_bool(const char *s, bool *out)
{
	static const char *const yes[] = { "on", "true", "yes", "1" }, *const no[] = { "off", "false", "no", "0" };
	for (size_t i = 0; i < 4; i++) {
		if (!strcmp(s, yes[i]) || !strcmp(s, no[i])) {
			*out = !strcmp(s, yes[i]);
			return 0;
		}
	}
	return -1;
}

bool ws_cli_tenant_name_ok(const char *name)
{
	size_t n = strlen(name);
	if (n == 0 || n >= WS_TENANT_MAX)
		return false;
	for (const char *p = name; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
		      *p == '.' || *p == '_' || *p == '-'))
			return false;
	/* As the sink takes them (ws_tenant_name_valid): '.' and '_' start the
	 * store's own names, and "checkpoints" is the checkpoint store. */
	return name[0] != '.' && name[0] != '_' && strcmp(name, "checkpoints") != 0;
}

/* ---- keys -------------------------------------------------------------- */

enum shard_key {
	SK_CORE, SK_RING_BYTES, SK_BATCH_BYTES_MAX, SK_BATCH_FRAMES_MAX, SK_BATCH_AGE_MS_MAX, SK_POLICY,
	SK_UPLOADS_IN_FLIGHT, SK_RETRY_ATTEMPTS_MAX, SK_RETRY_DEADLINE_MS, SK_SQPOLL, SK_ADAPTIVE,
	SK_THROTTLE_AGE_MS_MAX, SK_KEY_WRITE_INTERVAL_MS, SK_TAIL_MS_MAX, SK_INLINE_BATCH_BYTES_MAX, SK_CARRY_IN_WATERMARK,
	SK_STALL_WARN_MS, SK_COMPRESSION, SK_COMPRESSION_LEVEL, SK_KEY_FILE, SK_TAILS_IN_FLIGHT, SK_SLOTS, SK_HINT_SLOTS, SK_COUNT,
};

enum key_kind { K_CORE, K_SIZE, K_U32, K_POLICY, K_BOOL, K_CARRY, K_CODEC, K_KEY_FILE };

static const struct {
	const char *name;
	enum key_kind kind;
	uint64_t min, max;
} shard_keys[SK_COUNT] = {
	[SK_CORE] = { "core", K_CORE, 0, 0 },
	[SK_RING_BYTES] = { "ring_bytes", K_SIZE, 2ull * BATCH_BYTES_MIN, RING_BYTES_MAX },
	[SK_BATCH_BYTES_MAX] = { "batch_bytes_max", K_SIZE, BATCH_BYTES_MIN, BATCH_BYTES_MAX },
	[SK_BATCH_FRAMES_MAX] = { "batch_frames_max", K_U32, 1, 1u << 20 },
	[SK_BATCH_AGE_MS_MAX] = { "batch_age_ms_max", K_U32, 0, MS_MAX },
	[SK_POLICY] = { "policy", K_POLICY, 0, 0 },
	[SK_UPLOADS_IN_FLIGHT] = { "uploads_in_flight", K_U32, 1, UPLOADS_IN_FLIGHT_MAX },
	[SK_RETRY_ATTEMPTS_MAX] = { "retry_attempts_max", K_U32, 1, 1000 },
	[SK_RETRY_DEADLINE_MS] = { "retry_deadline_ms", K_U32, 1, MS_MAX },
	[SK_SQPOLL] = { "sqpoll", K_BOOL, 0, 0 },
	[SK_ADAPTIVE] = { "adaptive", K_BOOL, 0, 0 },
	[SK_THROTTLE_AGE_MS_MAX] = { "throttle_age_ms_max", K_U32, 0, MS_MAX },
	[SK_KEY_WRITE_INTERVAL_MS] = { "key_write_interval_ms", K_U32, 0, MS_MAX },
	[SK_TAIL_MS_MAX] = { "tail_ms_max", K_U32, 0, MS_MAX },
	[SK_INLINE_BATCH_BYTES_MAX] = { "inline_batch_bytes_max", K_SIZE, 4096, 16ull << 20 },
	[SK_CARRY_IN_WATERMARK] = { "carry_in_watermark", K_CARRY, 0, 0 },
	[SK_STALL_WARN_MS] = { "stall_warn_ms", K_U32, 0, MS_MAX },
	[SK_COMPRESSION] = { "compression", K_CODEC, 0, 0 },
	[SK_COMPRESSION_LEVEL] = { "compression_level", K_U32, 1, 19 },
	[SK_KEY_FILE] = { "key_file", K_KEY_FILE, 0, 0 },
	[SK_TAILS_IN_FLIGHT] = { "tails_in_flight", K_U32, 1, WS_TAILS_IN_FLIGHT_MAX },
	[SK_SLOTS] = { "slots", K_BOOL, 0, 0 },
	[SK_HINT_SLOTS] = { "hint_slots", K_U32, 1, WS_HINT_SLOTS_MAX },
};

enum engine_key { EK_SINK, EK_SHARDS, EK_METRICS_ADDR, EK_EPOCH, EK_PG, EK_WAL_CKPT, EK_DRAIN_MS_MAX, EK_COUNT };
static const char *const engine_keys[EK_COUNT] = {
	"sink", "shards", "metrics_addr", "epoch", "pointer_generation", "wal_checkpoint_bytes", "drain_ms_max",
};

/* The keys one [shard.N] (or [engine], as defaults) sets, with their lines. */
struct shard_sec {
	int line;                  /* header; 0: no such section */
	int key_line[SK_COUNT];    /* 0: not set here */
	struct ws_shard_config v;  /* v.seal.key_file: owned (key_file below) */
	char *key_file;
};

enum sec_kind { SEC_NONE, SEC_ENGINE, SEC_S3, SEC_SHARD, SEC_TENANT };

struct ws_cli_config_parse {
	FILE *f;
	char *buf;
	size_t buf_cap;
	int line;
	enum sec_kind sec;
	char sec_name[INI_MAX_LINE];
	unsigned shard_index;            /* SEC_SHARD */
	size_t tenant_index;             /* SEC_TENANT */
	int engine_line, s3_line;        /* headers; 0: absent */
	int engine_key_line[EK_COUNT];
	int s3_key_line[4];
	struct shard_sec defaults;       /* keys of [engine] */
	struct shard_sec shard[WS_SHARDS_MAX];
	int err_line;                    /* first error; 0: none */
	char err[ERR_BYTES_MAX];
};

static int fail_at(struct ws_cli_config_parse *p, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail_at(struct ws_cli_config_parse *p, int line, const char *fmt, ...)
{
	va_list ap;
	if (!p->err_line) {
		p->err_line = line;
		va_start(ap, fmt);
		vsnprintf(p->err, sizeof(p->err), fmt, ap);
		va_end(ap);
	}
	return 0; /* inih: stop calling, this line is bad */
}

int ws_cli_verror(const char *file, int line, const char *hint, const char *fmt, va_list ap)
{
	if (file && line > 0)
		fprintf(stderr, "walship: config %s:%d: ", file, line);
	else if (file)
		fprintf(stderr, "walship: config %s: ", file);
	else
		fputs("walship: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	if (hint)
		fprintf(stderr, "%s\n", hint);
	return WS_CLI_EXIT_USAGE;
}

int ws_cli_usage(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	ws_cli_verror(NULL, 0, "walship: run 'walship help' for usage", fmt, ap);
	va_end(ap);
	return WS_CLI_EXIT_USAGE;
}

/* line <= 0: an error of the whole file (or of the command line, without one). */
static int report(const struct ws_cli_config *c, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int report(const struct ws_cli_config *c, int line, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	ws_cli_verror(c->file, line, NULL, fmt, ap);
	va_end(ap);
	return WS_CLI_EXIT_USAGE;
}

/* ---- tenants: an array and an open-addressing index over it -------------- */

static uint64_t name_hash(const char *s)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

long ws_cli_config_tenant_index(const struct ws_cli_config *c, const char *name)
{
	if (!c->index_cap)
		return -1;
	for (size_t i = (size_t)name_hash(name) & (c->index_cap - 1);; i = (i + 1) & (c->index_cap - 1)) {
		uint32_t slot = c->index[i];
		if (!slot)
			return -1;
		if (!strcmp(c->tenants[slot - 1].name, name))
			return (long)(slot - 1);
	}
}

static int index_insert(struct ws_cli_config *c, size_t at)
{
	if (2 * (c->tenant_count + 1) > c->index_cap) {
		size_t cap = c->index_cap ? 2 * c->index_cap : 64;
		uint32_t *n = calloc(cap, sizeof(*n));
		if (!n)
			return -ENOMEM;
		free(c->index);
		c->index = n;
		c->index_cap = cap;
		for (size_t t = 0; t < c->tenant_count; t++)
			if (t != at && index_insert(c, t))
				return -ENOMEM; /* not reached: the table has room */
	}
	size_t i = (size_t)name_hash(c->tenants[at].name) & (c->index_cap - 1);
	while (c->index[i])
		i = (i + 1) & (c->index_cap - 1);
	c->index[i] = (uint32_t)at + 1;
	return 0;
}

/* The tenant called name, created if new; NULL when too many or out of memory. */
static struct ws_cli_tenant *tenant_get(struct ws_cli_config *c, const char *name, bool *created)
{
	long found = ws_cli_config_tenant_index(c, name);
	struct ws_cli_tenant *t;
	*created = false;
	if (found >= 0)
		return &c->tenants[found];
	if (c->tenant_count >= WS_CLI_TENANTS_MAX)
		return NULL;
	if (c->tenant_count == c->tenant_cap) {
		size_t cap = c->tenant_cap ? 2 * c->tenant_cap : 16;
		struct ws_cli_tenant *n = realloc(c->tenants, cap * sizeof(*n));
		if (!n)
			return NULL;
		c->tenants = n;
		c->tenant_cap = cap;
	}
	t = &c->tenants[c->tenant_count];
	memset(t, 0, sizeof(*t));
	t->shard = -1;
	t->name = strdup(name);
	if (!t->name || index_insert(c, c->tenant_count)) {
		free(t->name);
		return NULL;
	}
	c->tenant_count++;
	*created = true;
	return t;
}

/* ---- section headers (from the reader) ----------------------------------- */

/* "[name]" at line: start a section, or record the error. 0 on error. */
static int section_begin(struct ws_cli_config *c, const char *name)
{
	struct ws_cli_config_parse *p = c->parse;
	const int line = p->line;
	int *seen = NULL;

	snprintf(p->sec_name, sizeof(p->sec_name), "%s", name);
	if (!strcmp(name, "engine")) {
		p->sec = SEC_ENGINE;
		seen = &p->engine_line;
	} else if (!strcmp(name, "s3")) {
		p->sec = SEC_S3;
		seen = &p->s3_line;
	} else if (!strncmp(name, "shard.", 6)) {
		const char *n = name + 6;
		uint64_t v;
		/* Canonical decimal only, so [shard.1] and [shard.01] cannot both exist. */
		if (ws_cli_parse_u64(n, &v) || (n[0] == '0' && n[1]))
			return fail_at(p, line, "[%s]: the shard index must be a decimal number 0..%d", name,
				       WS_SHARDS_MAX - 1);
		if (v >= WS_SHARDS_MAX)
			return fail_at(p, line, "[%s]: shard index %s is not below the maximum of %d shards", name, n,
				       WS_SHARDS_MAX);
		p->sec = SEC_SHARD;
		p->shard_index = (unsigned)v;
		seen = &p->shard[v].line;
	} else if (!strncmp(name, "tenant.", 7)) {
		struct ws_cli_tenant *t;
		bool created;
		if (!ws_cli_tenant_name_ok(name + 7))
			return fail_at(p, line,
				       "[%s]: a tenant name is 1..%d bytes of A-Z a-z 0-9 . _ -, not starting with "
				       "'.' or '_' and not 'checkpoints' (got '%s')", name,
				       WS_TENANT_MAX - 1, name + 7);
		t = tenant_get(c, name + 7, &created);
		if (!t)
			return fail_at(p, line, "[%s]: more than %u tenants, or out of memory", name,
				       WS_CLI_TENANTS_MAX);
		p->sec = SEC_TENANT;
		p->tenant_index = (size_t)(t - c->tenants);
		if (!created) /* from an earlier [tenant.NAME]: the file is read before the command line */
			return fail_at(p, line, "duplicate section [%s] (first at line %d)", name, t->line);
		t->line = line;
		return 1;
	} else {
		return fail_at(p, line,
			       "unknown section [%s] (expected [engine], [shard.N], [tenant.NAME] or [s3])", name);
	}
	if (*seen)
		return fail_at(p, line, "duplicate section [%s] (first at line %d)", name, *seen);
	*seen = line;
	return 1;
}

/*
 * inih's reader: one line per call, normalised (see the top of the file).
 * Returns NULL at the end of the file or at the first error.
 */
static char *read_line(char *out, int out_bytes, void *stream)
{
	struct ws_cli_config *c = stream;
	struct ws_cli_config_parse *p = c->parse;
	size_t n;
	char *s, *e;

	if (p->err_line)
		return NULL;
	if (!p->buf) {
		p->buf_cap = RAW_LINE_BYTES_MAX + 1;
		p->buf = malloc(p->buf_cap);
		if (!p->buf) {
			fail_at(p, p->line + 1, "out of memory");
			return NULL;
		}
	}
	n = 0;
	for (;;) {
		int ch = getc(p->f);
		if (ch == EOF)
			break;
		if (ch == '\0') {
			fail_at(p, p->line + 1, "a NUL byte (is this a text file?)");
			return NULL;
		}
		if (n == RAW_LINE_BYTES_MAX) {
			fail_at(p, p->line + 1, "line longer than %d bytes", RAW_LINE_BYTES_MAX);
			return NULL;
		}
		p->buf[n++] = (char)ch;
		if (ch == '\n')
			break;
	}
	if (n == 0)
		return NULL;
	p->buf[n] = '\0';
	p->line++;
	s = p->buf;
	if (p->line == 1 && !strncmp(s, "\xEF\xBB\xBF", 3)) /* UTF-8 BOM */
		s += 3;
	while (*s == ' ' || *s == '\t')
		s++;
	if (*s == '#' || *s == ';')
		*s = '\0';
	for (e = s; *e; e++)
		if ((*e == '#' || *e == ';') && (e[-1] == ' ' || e[-1] == '\t')) {
			*e = '\0';
			break;
		}
	e = s + strlen(s);
	while (e > s && (e[-1] == '\n' || e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t'))
		*--e = '\0';
	/* inih's buffer (INI_MAX_LINE, 200 in Debian's build) bounds a line. */
	if (e - s + 2 > out_bytes) {
		fail_at(p, p->line, "line longer than %d bytes (without comments and surrounding blanks)",
			out_bytes - 2);
		return NULL;
	}
	if (*s && *s != '[') {
		/* inih also takes "key: value"; the format is key = value only
		 * (a value may hold ':', a key never does). */
		const char *colon = strchr(s, ':'), *eq = strchr(s, '=');
		if (colon && (!eq || colon < eq)) {
			fail_at(p, p->line, "syntax error (expected key = value; ':' does not separate a key from "
				"its value)");
			return NULL;
		}
	}
	if (*s == '[') {
		char *close = strchr(s, ']');
		if (close) { /* without one, inih reports the syntax error */
			if (close[1]) {
				fail_at(p, p->line, "unexpected '%s' after the section header", close + 1);
				return NULL;
			}
			*close = '\0';
			if (!section_begin(c, s + 1))
				return NULL;
			*close = ']';
		}
	}
	memcpy(out, s, (size_t)(e - s));
	out[e - s] = '\n';
	out[e - s + 1] = '\0';
	return out;
}

/* ---- values ---------------------------------------------------------------- */

static int set_shard_key(struct ws_cli_config_parse *p, struct shard_sec *sec, const char *where, const char *key,
			 const char *value)
{
	const int line = p->line;
	enum shard_key k = SK_COUNT;
	uint64_t v = 0;

	for (int i = 0; i < SK_COUNT; i++)
		if (!strcmp(key, shard_keys[i].name))
			k = (enum shard_key)i;
	if (k == SK_COUNT)
		return -1; /* not a shard key: the caller decides */
	if (sec->key_line[k])
		return fail_at(p, line, "[%s] %s: set twice (first at line %d)", where, key, sec->key_line[k]);
	switch (shard_keys[k].kind) {
	case K_CORE: {
		char *end;
		long core;
		errno = 0;
		core = strtol(value, &end, 10);
		if (errno || *end || end == value || core < -1 || core >= CPU_SETSIZE)
			return fail_at(p, line, "[%s] core: '%s' is not a CPU number (or -1: not pinned)", where,
				       value);
		sec->v.core = (int)core;
		break;
	}
	case K_SIZE:
		if (k == SK_INLINE_BATCH_BYTES_MAX && !strcmp(value, "off")) {
			sec->v.inline_batch_bytes_max = UINT64_MAX;
			break;
		}
		if (k == SK_INLINE_BATCH_BYTES_MAX &&
		    (ws_cli_parse_size(value, &v) || v < shard_keys[k].min || v > shard_keys[k].max))
			return fail_at(p, line,
				       "[%s] %s: '%s' must be a size from %" PRIu64 " bytes to %" PRIu64
				       " MiB (e.g. 1MiB, 256KiB) or off",
				       where, key, value, shard_keys[k].min, shard_keys[k].max >> 20);
		if (ws_cli_parse_size(value, &v) || v < shard_keys[k].min || v > shard_keys[k].max)
			return fail_at(p, line,
				       "[%s] %s: '%s' must be a size from %" PRIu64 " bytes to %" PRIu64
				       " GiB (e.g. 4MiB, 64KiB, 65536)",
				       where, key, value, shard_keys[k].min, shard_keys[k].max >> 30);
		if (k == SK_INLINE_BATCH_BYTES_MAX)
			sec->v.inline_batch_bytes_max = v;
		else if (k == SK_RING_BYTES)
			sec->v.ring_bytes = v;
		else
			sec->v.batch_bytes_max = v;
		break;
	case K_U32:
		if (ws_cli_parse_u64(value, &v) || v < shard_keys[k].min || v > shard_keys[k].max)
			return fail_at(p, line, "[%s] %s: '%s' must be an integer %" PRIu64 "..%" PRIu64, where, key,
				       value, shard_keys[k].min, shard_keys[k].max);
		if (k == SK_BATCH_FRAMES_MAX)
			sec->v.batch_frames_max = (uint32_t)v;
		else if (k == SK_BATCH_AGE_MS_MAX)
			sec->v.batch_age_ms_max = (uint32_t)v;
		else if (k == SK_UPLOADS_IN_FLIGHT)
			sec->v.uploads_in_flight = (uint32_t)v;
		else if (k == SK_RETRY_ATTEMPTS_MAX)
			sec->v.retry_attempts_max = (uint32_t)v;
		else if (k == SK_THROTTLE_AGE_MS_MAX)
			sec->v.throttle_age_ms_max = (uint32_t)v;
		else if (k == SK_KEY_WRITE_INTERVAL_MS)
			sec->v.key_write_interval_ms = (uint32_t)v;
		else if (k == SK_TAIL_MS_MAX)
			sec->v.tail_ms_max = (uint32_t)v;
		else if (k == SK_STALL_WARN_MS)
			sec->v.stall_warn_ms = (uint32_t)v;
		else if (k == SK_COMPRESSION_LEVEL)
			sec->v.seal.level = (int)v;
		else if (k == SK_TAILS_IN_FLIGHT)
			sec->v.tails_in_flight = (uint32_t)v;
		else if (k == SK_HINT_SLOTS)
			sec->v.hint_slots = (uint32_t)v;
		else
			sec->v.retry_deadline_ms = (uint32_t)v;
		break;
	case K_POLICY:
		if (ws_cli_parse_policy(value, &sec->v.policy))
			return fail_at(p, line, "[%s] policy: '%s' is not block, throttle or shed", where, value);
		break;
	case K_CARRY:
		if (ws_carry_parse(value, &sec->v.carry))
			return fail_at(p, line, "[%s] %s: '%s' is not pressed, always or never", where, key, value);
		break;
	case K_CODEC:
		if (ws_cli_parse_codec(value, &sec->v.seal.codec))
			return fail_at(p, line, "[%s] compression: '%s' is not zstd or none", where, value);
		break;
	case K_KEY_FILE:
		sec->key_file = strdup(value);
		if (!sec->key_file)
			return fail_at(p, line, "out of memory");
		sec->v.seal.key_file = sec->key_file;
		break;
	case K_BOOL:
		if (parse_bool(value, k == SK_ADAPTIVE ? &sec->v.adaptive
				      : k == SK_SLOTS	 ? &sec->v.slots
							 : &sec->v.sqpoll))
			return fail_at(p, line, "[%s] %s: '%s' is not on, off, true, false, yes, no, 1 or 0", where,
				       key, value);
		break;
	}
	sec->key_line[k] = line;
	return 1;
}

static int engine_key(struct ws_cli_config *c, const char *key, const char *value)
{
	struct ws_cli_config_parse *p = c->parse;
	const int line = p->line;
	int k = -1, r;
	uint64_t v;

	if (!strcmp(key, "interval_ms")) { /* the older name of batch_age_ms_max, with its old range */
		if (p->defaults.key_line[SK_BATCH_AGE_MS_MAX])
			return fail_at(p, line, "[engine] interval_ms: batch_age_ms_max set twice (first at line %d; "
				       "interval_ms is its older name)", p->defaults.key_line[SK_BATCH_AGE_MS_MAX]);
		if (ws_cli_parse_u64(value, &v) || v == 0 || v > MS_MAX)
			return fail_at(p, line, "[engine] interval_ms: '%s' must be an integer 1..%u", value, MS_MAX);
		p->defaults.v.batch_age_ms_max = (uint32_t)v;
		p->defaults.key_line[SK_BATCH_AGE_MS_MAX] = line;
		return 1;
	}
	for (int i = 0; i < EK_COUNT; i++)
		if (!strcmp(key, engine_keys[i]))
			k = i;
	if (k < 0) {
		if (!strcmp(key, "core"))
			return fail_at(p, line, "[engine] core: a core is per shard; set it in [shard.N]");
		r = set_shard_key(p, &p->defaults, "engine", key, value);
		if (r < 0)
			return fail_at(p, line, "[engine]: unknown key '%s'", key);
		return r;
	}
	if (p->engine_key_line[k])
		return fail_at(p, line, "[engine] %s: set twice (first at line %d)", key, p->engine_key_line[k]);
	p->engine_key_line[k] = line;
	switch ((enum engine_key)k) {
	case EK_SINK:
		c->sink = strdup(value);
		if (!c->sink)
			return fail_at(p, line, "out of memory");
		break;
	case EK_METRICS_ADDR: {
		char err[160];
		/* Resolved in ws_cli_config_finish, and only where replicate
		 * binds it: checkpoint and retention read the same file on
		 * hosts where the name may not resolve. */
		if (ws_metrics_addr_check(value, err, sizeof(err)))
			return fail_at(p, line, "[engine] metrics_addr: '%s': %s", value, err);
		c->metrics_addr = strdup(value);
		if (!c->metrics_addr)
			return fail_at(p, line, "out of memory");
		break;
	}
	case EK_SHARDS:
		if (ws_cli_parse_u64(value, &v) || v < 1 || v > WS_SHARDS_MAX)
			return fail_at(p, line, "[engine] shards: '%s' must be an integer 1..%d", value, WS_SHARDS_MAX);
		c->shards = (unsigned)v;
		break;
	case EK_EPOCH:
	case EK_PG:
		if (ws_cli_parse_token(value, &v))
			return fail_at(p, line, "[engine] %s: '%s' is not an integer " WS_CLI_TOKEN_RANGE, key, value);
		if (k == EK_EPOCH)
			c->epoch = v;
		else
			c->pointer_generation = v;
		break;
	case EK_WAL_CKPT:
		if (!strcmp(value, "off"))
			v = UINT64_MAX;
		else if (ws_cli_parse_size(value, &v) || v == 0 || v == UINT64_MAX)
			return fail_at(p, line,
				       "[engine] wal_checkpoint_bytes: '%s' must be a positive size (e.g. 4MiB) or off",
				       value);
		c->wal_checkpoint_bytes = v;
		break;
	case EK_DRAIN_MS_MAX:
		if (!strcmp(value, "off"))
			v = 0;
		else if (ws_cli_parse_u64(value, &v) || v < 1 || v > MS_MAX)
			return fail_at(p, line, "[engine] drain_ms_max: '%s' must be an integer 1..%u or off", value,
				       (unsigned)MS_MAX);
		c->drain_ms_max = (uint32_t)v;
		c->has_drain_ms_max = true;
		break;
	case EK_COUNT:
		break;
	}
	return 1;
}

static int s3_key(struct ws_cli_config *c, const char *key, const char *value)
{
	/* The environment wins over the file, as with AWS's own tools; the
	 * store reads the credentials from there. */
	static const char *const keys[][2] = {
		{ "access_key_id", "AWS_ACCESS_KEY_ID" },
		{ "secret_access_key", "AWS_SECRET_ACCESS_KEY" },
		{ "session_token", "AWS_SESSION_TOKEN" },
		{ "region", "AWS_REGION" },
	};
	struct ws_cli_config_parse *p = c->parse;
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		if (strcmp(key, keys[i][0]))
			continue;
		if (p->s3_key_line[i])
			return fail_at(p, p->line, "[s3] %s: set twice (first at line %d)", key, p->s3_key_line[i]);
		p->s3_key_line[i] = p->line;
		if (setenv(keys[i][1], value, 0))
			return fail_at(p, p->line, "[s3] %s: %s", key, strerror(errno));
		return 1;
	}
	return fail_at(p, p->line, "[s3]: unknown key '%s'", key);
}

/* A [tenant.NAME] seal key: how its objects are compressed and encrypted,
 * over [engine]'s (docs/CLI.md "Configuration file"). */
static int tenant_seal_key(struct ws_cli_config_parse *p, struct ws_cli_tenant *t, const char *key,
			   const char *value)
{
	const int line = p->line;
	int *set = !strcmp(key, "compression") ? &t->codec_line
		   : !strcmp(key, "key_file") ? &t->key_file_line : &t->level_line;
	uint64_t v;

	if (*set)
		return fail_at(p, line, "[tenant.%s] %s: set twice (first at line %d)", t->name, key, *set);
	*set = line;
	if (set == &t->codec_line) {
		if (ws_cli_parse_codec(value, &t->seal.codec))
			return fail_at(p, line, "[tenant.%s] compression: '%s' is not zstd or none", t->name, value);
	} else if (set == &t->level_line) {
		if (ws_cli_parse_u64(value, &v) || v < 1 || v > 19)
			return fail_at(p, line, "[tenant.%s] compression_level: '%s' must be an integer 1..19", t->name,
				       value);
		t->seal.level = (int)v;
	} else {
		t->key_file = strdup(value);
		if (!t->key_file)
			return fail_at(p, line, "out of memory");
		t->seal.key_file = t->key_file;
	}
	t->has_seal = true;
	return 1;
}

/* The sections' key file names outlive the parse: c owns them. */
static int keep_key_files(struct ws_cli_config *c, struct ws_cli_config_parse *p)
{
	c->key_files = calloc(WS_SHARDS_MAX + 1, sizeof(*c->key_files));
	if (!c->key_files)
		return -ENOMEM;
	for (unsigned i = 0; i <= WS_SHARDS_MAX; i++) {
		struct shard_sec *sec = i == WS_SHARDS_MAX ? &p->defaults : &p->shard[i];
		if (sec->key_file) {
			c->key_files[c->key_file_count++] = sec->key_file;
			sec->key_file = NULL;
		}
	}
	return 0;
}

/* A tenant that sets a seal key takes the others from [engine] (and the
 * command line), not from its shard's section. */
static void tenant_seals(struct ws_cli_config *c, const struct ws_cli_config_parse *p)
{
	const struct shard_sec *d = &p->defaults;
	for (size_t i = 0; i < c->tenant_count; i++) {
		struct ws_cli_tenant *t = &c->tenants[i];
		if (!t->has_seal)
			continue;
		if (!t->codec_line && d->key_line[SK_COMPRESSION])
			t->seal.codec = d->v.seal.codec;
		if (!t->level_line && d->key_line[SK_COMPRESSION_LEVEL])
			t->seal.level = d->v.seal.level;
		if (!t->key_file_line && d->key_line[SK_KEY_FILE])
			t->seal.key_file = d->v.seal.key_file;
	}
}

/* A key file that cannot be read is a configuration error, said before
 * anything starts (its contents are checked where it is loaded). */
static int key_file_unreadable(struct ws_cli_config *c, int line, const char *where, const char *path)
{
	if (access(path, R_OK) == 0)
		return 0;
	return report(c, line, "%s%s cannot read '%s': %s", where, line > 0 ? " key_file:" : ":", path,
		      strerror(errno));
}

static int check_key_files(struct ws_cli_config *c, const struct ws_cli_config_parse *p)
{
	char where[WS_TENANT_MAX + 16];
	const struct shard_sec *d = &p->defaults;
	if (d->v.seal.key_file &&
	    key_file_unreadable(c, d->key_line[SK_KEY_FILE], d->key_line[SK_KEY_FILE] > 0 ? "[engine]" : "--key-file (or WALSHIP_KEY_FILE)",
				d->v.seal.key_file))
		return -1;
	for (unsigned i = 0; i < WS_SHARDS_MAX; i++) {
		snprintf(where, sizeof(where), "[shard.%u]", i);
		if (p->shard[i].key_line[SK_KEY_FILE] &&
		    key_file_unreadable(c, p->shard[i].key_line[SK_KEY_FILE], where, p->shard[i].v.seal.key_file))
			return -1;
	}
	for (size_t i = 0; i < c->tenant_count; i++) {
		const struct ws_cli_tenant *t = &c->tenants[i];
		snprintf(where, sizeof(where), "[tenant.%s]", t->name);
		if (t->key_file && key_file_unreadable(c, t->key_file_line, where, t->key_file))
			return -1;
	}
	return 0;
}

static int tenant_key(struct ws_cli_config *c, const char *key, const char *value)
{
	struct ws_cli_config_parse *p = c->parse;
	struct ws_cli_tenant *t = &c->tenants[p->tenant_index];
	const int line = p->line;
	int *set;
	uint64_t v;

	if (!strcmp(key, "path"))
		set = &t->path_line;
	else if (!strcmp(key, "shard"))
		set = &t->shard_line;
	else if (!strcmp(key, "policy"))
		set = &t->policy_line;
	else if (!strcmp(key, "compression") || !strcmp(key, "compression_level") || !strcmp(key, "key_file"))
		return tenant_seal_key(p, t, key, value);
	else
		return fail_at(p, line, "[tenant.%s]: unknown key '%s' (expected path, shard, policy, compression, "
			       "compression_level or key_file)", t->name, key);
	if (*set)
		return fail_at(p, line, "[tenant.%s] %s: set twice (first at line %d)", t->name, key, *set);
	*set = line;
	if (set == &t->path_line) {
		t->path = strdup(value);
		if (!t->path)
			return fail_at(p, line, "out of memory");
	} else if (set == &t->shard_line) {
		if (ws_cli_parse_u64(value, &v) || v >= WS_SHARDS_MAX)
			return fail_at(p, line, "[tenant.%s] shard: '%s' must be a shard index 0..%d", t->name, value,
				       WS_SHARDS_MAX - 1);
		t->shard = (int)v;
	} else {
		if (ws_cli_parse_policy(value, &t->policy))
			return fail_at(p, line, "[tenant.%s] policy: '%s' is not block, throttle or shed", t->name,
				       value);
		t->has_policy = true;
	}
	return 1;
}

static int on_key(void *user, const char *section, const char *key, const char *value)
{
	struct ws_cli_config *c = user;
	struct ws_cli_config_parse *p = c->parse;
	int r;

	(void)section; /* inih's copy is truncated to 49 bytes; the reader keeps the real one */
	if (p->err_line)
		return 0;
	if (!key)
		return 1;
	if (!*key)
		return fail_at(p, p->line, "a key is missing before '='");
	if (!*value)
		return fail_at(p, p->line, "%s: empty value", key);
	switch (p->sec) {
	case SEC_NONE:
		return fail_at(p, p->line, "'%s' is outside any section (start with [engine])", key);
	case SEC_ENGINE:
		return engine_key(c, key, value);
	case SEC_S3:
		return s3_key(c, key, value);
	case SEC_TENANT:
		return tenant_key(c, key, value);
	case SEC_SHARD:
		r = set_shard_key(p, &p->shard[p->shard_index], p->sec_name, key, value);
		if (r < 0)
			return fail_at(p, p->line, "[%s]: unknown key '%s'", p->sec_name, key);
		return r;
	}
	return 0;
}

int ws_cli_config_load(struct ws_cli_config *c, const char *file)
{
	/* O_NONBLOCK: a FIFO must not hang the open; only a regular file is read. */
	struct stat st;
	FILE *f;
	int fd = open(file, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	c->file = file;
	if (fd < 0)
		return report(c, 0, "cannot open: %s", strerror(errno));
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return report(c, 0, "not a regular file (%s); a config is a text file",
			      S_ISDIR(st.st_mode) ? "a directory" : S_ISFIFO(st.st_mode) ? "a FIFO" :
			      S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device" : "not readable as one");
	}
	if (fcntl(fd, F_SETFL, 0) != 0 || !(f = fdopen(fd, "r"))) {
		close(fd);
		return report(c, 0, "cannot open: %s", strerror(errno));
	}
	return ws_cli_config_load_stream(c, f, file);
}

int ws_cli_config_load_stream(struct ws_cli_config *c, FILE *f, const char *name)
{
	struct ws_cli_config_parse *p;
	int rc;

	c->file = name;
	p = calloc(1, sizeof(*p));
	if (!p) {
		fclose(f);
		return report(c, 0, "out of memory");
	}
	c->parse = p;
	p->f = f;
	rc = ini_parse_stream(read_line, c, on_key, c);
	if (ferror(p->f) && !p->err_line)
		fail_at(p, p->line + 1, "read error");
	fclose(p->f);
	p->f = NULL;
	free(p->buf);
	p->buf = NULL;
	if (rc == -2)
		return report(c, 0, "out of memory");
	/* inih's rc is its first bad line: ours (a handler error on that line),
	 * or a syntax error when earlier than any of ours. */
	if (rc > 0 && (!p->err_line || rc < p->err_line))
		return report(c, rc, "syntax error (expected [section], key = value, or a comment)");
	if (p->err_line)
		return report(c, p->err_line, "%s", p->err);
	return 0;
}

/* ---- the command line's tenants ---------------------------------------- */

int ws_cli_config_add_tenant_arg(struct ws_cli_config *c, const char *arg)
{
	const char *eq = strchr(arg, '=');
	char name[WS_TENANT_MAX];
	const char *path;
	struct ws_cli_tenant *t;
	bool created;
	size_t n;

	if (eq && eq != arg && !memchr(arg, '/', (size_t)(eq - arg))) {
		n = (size_t)(eq - arg);
		if (n >= sizeof(name))
			return report(c, -1, "tenant name in '%s' is longer than %d bytes", arg, WS_TENANT_MAX - 1);
		memcpy(name, arg, n);
		name[n] = '\0';
		path = eq + 1;
	} else {
		const char *base = strrchr(arg, '/');
		const char *dot;
		base = base ? base + 1 : arg;
		dot = strrchr(base, '.');
		n = dot && dot != base ? (size_t)(dot - base) : strlen(base);
		if (n == 0 || n >= sizeof(name))
			return report(c, -1, "cannot derive a tenant name from '%s'; use NAME=PATH", arg);
		memcpy(name, base, n);
		name[n] = '\0';
		path = arg;
		if (!ws_cli_tenant_name_ok(name))
			return report(c, -1, "tenant name '%s' (from '%s') is not one a sink takes (A-Z a-z 0-9 . _ -, "
				      "not starting with '.' or '_', not 'checkpoints'); use NAME=PATH", name, arg);
	}
	if (!ws_cli_tenant_name_ok(name))
		return report(c, -1, "invalid tenant name '%s' in '%s' (1..%d bytes of A-Z a-z 0-9 . _ -, not starting "
			      "with '.' or '_', not 'checkpoints')", name, arg, WS_TENANT_MAX - 1);
	if (!*path)
		return report(c, -1, "empty database path in '%s'", arg);
	t = tenant_get(c, name, &created);
	if (!t)
		return report(c, -1, "more than %u tenants, or out of memory", WS_CLI_TENANTS_MAX);
	if (t->path) {
		if (strcmp(t->path, path))
			return report(c, -1, "tenant '%s' given twice with different paths ('%s' and '%s')", name,
				      t->path, path);
		return 0;
	}
	t->path = strdup(path);
	if (!t->path)
		return report(c, -1, "out of memory");
	return 0;
}

/* ---- what spans sections ------------------------------------------------- */

/* "0-3,6" for the CPUs in set, into buf. */
static void cpus_text(const cpu_set_t *set, char *buf, size_t cap)
{
	size_t used = 0;
	buf[0] = '\0';
	for (int i = 0; i < CPU_SETSIZE && used < cap; i++) {
		int j = i;
		if (!CPU_ISSET((size_t)i, set))
			continue;
		while (j + 1 < CPU_SETSIZE && CPU_ISSET((size_t)j + 1, set))
			j++;
		used += (size_t)snprintf(buf + used, cap - used, i == j ? "%s%d" : "%s%d-%d", used ? "," : "", i, j);
		i = j;
	}
}

static int check_core(const struct ws_cli_config *c, unsigned shard, int core, int line)
{
	cpu_set_t allowed;
	char cpus[128];
	if (core < 0)
		return 0;
	CPU_ZERO(&allowed);
	if (sched_getaffinity(0, sizeof(allowed), &allowed)) {
		long online = sysconf(_SC_NPROCESSORS_ONLN);
		if (online > 0 && core < online)
			return 0;
		return report(c, line, "[shard.%u] core: CPU %d is not online (%ld CPUs)", shard, core, online);
	}
	if (CPU_ISSET((size_t)core, &allowed))
		return 0;
	cpus_text(&allowed, cpus, sizeof(cpus));
	return report(c, line, "[shard.%u] core: CPU %d is not one this process may run on (%s)", shard, core, cpus);
}

/* The [shard.N] line that set key k for shard i, else [engine]'s, else 0. */
static int key_line(const struct ws_cli_config_parse *p, unsigned i, enum shard_key k)
{
	return p->shard[i].key_line[k] ? p->shard[i].key_line[k] : p->defaults.key_line[k];
}

/* fs.inotify.max_user_instances, or -1 when it cannot be read. */
static long inotify_instances_max(void)
{
	FILE *f = fopen("/proc/sys/fs/inotify/max_user_instances", "re");
	long v = -1;
	if (!f)
		return -1;
	if (fscanf(f, "%ld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

struct path_id {
	dev_t dev;
	ino_t ino;
	const char *path;   /* compared when the file does not exist yet */
	size_t tenant;
};

static int cmp_path_id(const void *a, const void *b)
{
	const struct path_id *x = a, *y = b;
	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	if (x->ino != y->ino)
		return x->ino < y->ino ? -1 : 1;
	if (x->dev == 0 && x->ino == 0) {
		int r = strcmp(x->path, y->path);
		if (r)
			return r;
	}
	return x->tenant < y->tenant ? -1 : x->tenant > y->tenant;
}

/*
 * Two tenants on one database would ship the same WAL twice, each racing
 * the other's WAL checkpoints; a thousand would each hold its own streams.
 * Compared by device and inode (links, "./a.db" and "a.db" alike), by the
 * path as written for a file not created yet.
 */
static int check_paths_unique(const struct ws_cli_config *c)
{
	struct path_id *v;
	size_t n = 0;
	int rc = 0;

	if (c->tenant_count < 2)
		return 0;
	v = calloc(c->tenant_count, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < c->tenant_count; i++) {
		struct stat st;
		if (!c->tenants[i].path)
			continue;
		v[n].path = c->tenants[i].path;
		v[n].tenant = i;
		if (stat(c->tenants[i].path, &st) == 0) {
			v[n].dev = st.st_dev;
			v[n].ino = st.st_ino;
		}
		n++;
	}
	qsort(v, n, sizeof(*v), cmp_path_id);
	for (size_t i = 1; i < n && !rc; i++) {
		const struct ws_cli_tenant *a = &c->tenants[v[i - 1].tenant], *b = &c->tenants[v[i].tenant];
		bool same = v[i].dev || v[i].ino ? v[i].dev == v[i - 1].dev && v[i].ino == v[i - 1].ino
						 : !v[i - 1].dev && !v[i - 1].ino && !strcmp(v[i].path, v[i - 1].path);
		if (!same)
			continue;
		rc = report(c, b->path_line ? b->path_line : b->line ? b->line : -1,
			    "tenant %s: database %s is also tenant %s's (%s); one database is one tenant", b->name,
			    b->path, a->name, a->path);
	}
	free(v);
	return rc;
}

/* Whether a shard's own settings seal its tenants' objects: a key, zstd
 * named, or the default codec on an s3:// sink (core/sink.c decides it by
 * the opened store; the scheme is matched here as store.c opens it). */
static bool shard_seals(const struct ws_cli_config *c, const struct ws_shard_config *s)
{
	if (s->seal.key_file || s->seal.codec == WS_CODEC_ZSTD)
		return true;
	return s->seal.codec == WS_CODEC_DEFAULT && c->sink && !strncasecmp(c->sink, "s3://", 5);
}

int ws_cli_config_finish(struct ws_cli_config *c, const struct ws_cli_overrides *o)
{
	struct ws_cli_config_parse empty, *p = c->parse;
	uint64_t ring_total = 0, mem_bytes;
	long pages = sysconf(_SC_PHYS_PAGES), page_bytes = sysconf(_SC_PAGESIZE);

	if (!p) {
		memset(&empty, 0, sizeof(empty));
		p = &empty;
	}
	if (o->sink) {
		free(c->sink);
		c->sink = strdup(o->sink);
		if (!c->sink)
			return -ENOMEM;
	}
	if (o->metrics_addr) {
		free(c->metrics_addr);
		c->metrics_addr = strdup(o->metrics_addr);
		if (!c->metrics_addr)
			return -ENOMEM;
	} else if (c->metrics_addr && !o->sink_only) {
		char err[160];
		if (ws_metrics_addr_resolve(c->metrics_addr, err, sizeof(err)))
			return report(c, p->engine_key_line[EK_METRICS_ADDR], "[engine] metrics_addr: '%s': %s",
				      c->metrics_addr, err);
	}
	if (o->has_epoch)
		c->epoch = o->epoch;
	if (o->has_pointer_generation)
		c->pointer_generation = o->pointer_generation;
	if (o->has_shards)
		c->shards = o->shards;
	if (!c->shards)
		c->shards = 1;
	if (o->has_policy) {
		p->defaults.v.policy = o->policy;
		p->defaults.key_line[SK_POLICY] = -1;
	}
	if (o->has_interval) {
		p->defaults.v.batch_age_ms_max = o->interval_ms;
		p->defaults.key_line[SK_BATCH_AGE_MS_MAX] = -1;
	}
	if (o->has_codec) {
		p->defaults.v.seal.codec = o->codec;
		p->defaults.key_line[SK_COMPRESSION] = -1;
	}
	if (o->key_file) {
		p->defaults.v.seal.key_file = o->key_file;
		p->defaults.key_line[SK_KEY_FILE] = -1;
	}
	if (keep_key_files(c, p))
		return -ENOMEM;
	tenant_seals(c, p);
	if (p->defaults.key_line[SK_COMPRESSION])
		c->seal.codec = p->defaults.v.seal.codec;
	if (p->defaults.key_line[SK_COMPRESSION_LEVEL])
		c->seal.level = p->defaults.v.seal.level;
	if (p->defaults.key_line[SK_KEY_FILE])
		c->seal.key_file = p->defaults.v.seal.key_file;
	if (check_key_files(c, p))
		return WS_CLI_EXIT_USAGE;

	for (unsigned i = 0; i < WS_SHARDS_MAX; i++)
		if (p->shard[i].line && i >= c->shards)
			return report(c, p->shard[i].line, "[shard.%u] is beyond the engine's %u shard%s (%s)", i,
				      c->shards, c->shards == 1 ? "" : "s",
				      o->has_shards ? "--shards" : p->engine_key_line[EK_SHARDS] ? "[engine] shards"
											     : "the default");
	{
		/* Each shard holds one inotify instance, and the kernel limits them
		 * per user: past the limit a shard fails to start, mid-way. */
		long lim = inotify_instances_max();
		if (!o->sink_only && lim > 0 && c->shards > (unsigned long)lim)
			return report(c, o->has_shards ? -1 : p->engine_key_line[EK_SHARDS],
				      "%u shards need %u inotify instances (one each), more than this system's "
				      "fs.inotify.max_user_instances of %ld (shared with every other process of this "
				      "user); lower shards or raise that limit", c->shards, c->shards, lim);
	}
	c->shard = calloc(c->shards, sizeof(*c->shard));
	if (!c->shard)
		return -ENOMEM;
	for (unsigned i = 0; i < c->shards; i++) {
		struct ws_shard_config *s = &c->shard[i];
		const struct shard_sec *layers[2] = { &p->defaults, &p->shard[i] };
		int line;
		ws_shard_config_default(s);
		for (int l = 0; l < 2; l++) {
			const struct shard_sec *sec = layers[l];
			const int *set = sec->key_line;
			if (set[SK_CORE]) s->core = sec->v.core;
			if (set[SK_RING_BYTES]) s->ring_bytes = sec->v.ring_bytes;
			if (set[SK_BATCH_BYTES_MAX]) s->batch_bytes_max = sec->v.batch_bytes_max;
			if (set[SK_BATCH_FRAMES_MAX]) s->batch_frames_max = sec->v.batch_frames_max;
			if (set[SK_BATCH_AGE_MS_MAX]) s->batch_age_ms_max = sec->v.batch_age_ms_max;
			if (set[SK_POLICY]) s->policy = sec->v.policy;
			if (set[SK_UPLOADS_IN_FLIGHT]) s->uploads_in_flight = sec->v.uploads_in_flight;
			if (set[SK_RETRY_ATTEMPTS_MAX]) s->retry_attempts_max = sec->v.retry_attempts_max;
			if (set[SK_RETRY_DEADLINE_MS]) s->retry_deadline_ms = sec->v.retry_deadline_ms;
			if (set[SK_SQPOLL]) s->sqpoll = sec->v.sqpoll;
			if (set[SK_ADAPTIVE]) s->adaptive = sec->v.adaptive;
			if (set[SK_THROTTLE_AGE_MS_MAX]) s->throttle_age_ms_max = sec->v.throttle_age_ms_max;
			if (set[SK_KEY_WRITE_INTERVAL_MS]) s->key_write_interval_ms = sec->v.key_write_interval_ms;
			if (set[SK_TAIL_MS_MAX]) s->tail_ms_max = sec->v.tail_ms_max;
			if (set[SK_INLINE_BATCH_BYTES_MAX]) s->inline_batch_bytes_max = sec->v.inline_batch_bytes_max;
			if (set[SK_CARRY_IN_WATERMARK]) s->carry = sec->v.carry;
			if (set[SK_STALL_WARN_MS]) s->stall_warn_ms = sec->v.stall_warn_ms;
			if (set[SK_COMPRESSION]) s->seal.codec = sec->v.seal.codec;
			if (set[SK_COMPRESSION_LEVEL]) s->seal.level = sec->v.seal.level;
			if (set[SK_KEY_FILE]) s->seal.key_file = sec->v.seal.key_file;
			if (set[SK_TAILS_IN_FLIGHT]) s->tails_in_flight = sec->v.tails_in_flight;
			if (set[SK_SLOTS]) s->slots = sec->v.slots;
			if (set[SK_HINT_SLOTS]) s->hint_slots = sec->v.hint_slots;
		}
		if (!o->sink_only && check_core(c, i, s->core, p->shard[i].key_line[SK_CORE]))
			return WS_CLI_EXIT_USAGE;
		for (unsigned j = 0; j < i; j++)
			if (s->core >= 0 && c->shard[j].core == s->core)
				return report(c, p->shard[i].key_line[SK_CORE],
					      "[shard.%u] core: CPU %d is already shard %u's (one shard per core)", i,
					      s->core, j);
		/* The ring holds whole batches; with fewer than two, reading and
		 * uploading could never overlap. */
		if (s->ring_bytes / 2 < s->batch_bytes_max) {
			line = key_line(p, i, SK_RING_BYTES);
			if (line <= 0)
				line = key_line(p, i, SK_BATCH_BYTES_MAX);
			return report(c, line,
				      "[shard.%u]: ring_bytes %" PRIu64 " must hold at least two batches of "
				      "batch_bytes_max %" PRIu64 " (ring_bytes >= %" PRIu64 ")",
				      i, s->ring_bytes, s->batch_bytes_max, 2 * s->batch_bytes_max);
		}
		ring_total += s->ring_bytes;
		/* A shard that seals (a codec or a key; zstd is the default on
		 * s3://) also holds a seal buffer per slot: about its ring again
		 * (docs/DESIGN.md "Seal buffers"). */
		if (shard_seals(c, s))
			ring_total += s->ring_bytes;
		/* Rings are pinned (registered with two io_urings each) and never
		 * swapped: leave the other half to SQLite, the page cache and the
		 * rest of the machine. */
		mem_bytes = pages > 0 && page_bytes > 0 ? (uint64_t)pages * (uint64_t)page_bytes / 2 : UINT64_MAX;
		if (!o->sink_only && ring_total > mem_bytes) {
			line = key_line(p, i, SK_RING_BYTES);
			if (line <= 0)
				line = p->engine_key_line[EK_SHARDS];
			return report(c, line,
				      "the spill rings (and seal buffers, for shards that compress or encrypt) of "
				      "shards 0..%u need %" PRIu64 " bytes, more than half of this machine's memory "
				      "(%" PRIu64 " bytes); lower shards or ring_bytes",
				      i, ring_total, mem_bytes);
		}
	}
	{
		int r = check_paths_unique(c);
		if (r)
			return r;
	}
	for (size_t i = 0; i < c->tenant_count; i++) {
		const struct ws_cli_tenant *t = &c->tenants[i];
		if (!t->path)
			return report(c, t->line, "[tenant.%s] has no path", t->name);
		if (t->shard >= 0 && (unsigned)t->shard >= c->shards)
			return report(c, t->shard_line, "[tenant.%s] shard: %d is beyond the engine's %u shard%s", t->name,
				      t->shard, c->shards, c->shards == 1 ? "" : "s");
	}
	free(c->parse);
	c->parse = NULL;
	return 0;
}

int ws_cli_add_config_keys(struct ws_sink *sink, const struct ws_cli_config *c)
{
	int rc = 0;
	for (size_t i = 0; i < c->key_file_count && !rc; i++)
		rc = ws_sink_add_key_file(sink, c->key_files[i]);
	for (size_t i = 0; i < c->tenant_count && !rc; i++)
		if (c->tenants[i].key_file)
			rc = ws_sink_add_key_file(sink, c->tenants[i].key_file);
	if (!rc && c->seal.key_file)
		rc = ws_sink_add_key_file(sink, c->seal.key_file); /* the command line's or the environment's */
	if (rc)
		fprintf(stderr, "walship: %s\n", ws_errmsg());
	return rc;
}

int ws_cli_checkpoint_seal(const struct ws_cli_config *c, struct ws_checkpoint_opts *co,
			   struct ws_checkpoint_seal **owned)
{
	size_t n = 0;
	*owned = NULL;
	co->seal = c->seal;
	if (c->tenant_count && !(*owned = calloc(c->tenant_count, sizeof(**owned))))
		return -ENOMEM;
	for (size_t i = 0; i < c->tenant_count; i++) {
		const struct ws_cli_tenant *t = &c->tenants[i];
		if (t->has_seal)
			(*owned)[n++] = (struct ws_checkpoint_seal){ .tenant = t->name, .seal = t->seal };
		else if (t->shard >= 0 && (unsigned)t->shard < c->shards)
			(*owned)[n++] = (struct ws_checkpoint_seal){ .tenant = t->name, .seal = c->shard[t->shard].seal };
	}
	co->tenant_seal = *owned;
	co->tenant_seal_count = n;
	return 0;
}

void ws_cli_config_free(struct ws_cli_config *c)
{
	for (size_t i = 0; i < c->tenant_count; i++) {
		free(c->tenants[i].name);
		free(c->tenants[i].path);
		free(c->tenants[i].key_file);
	}
	for (size_t i = 0; i < c->key_file_count; i++)
		free(c->key_files[i]);
	free(c->key_files);
	free(c->tenants);
	free(c->index);
	free(c->shard);
	free(c->sink);
	free(c->metrics_addr);
	if (c->parse) {
		free(c->parse->defaults.key_file);
		for (unsigned i = 0; i < WS_SHARDS_MAX; i++)
			free(c->parse->shard[i].key_file);
		if (c->parse->f)
			fclose(c->parse->f);
		free(c->parse->buf);
		free(c->parse);
	}
	memset(c, 0, sizeof(*c));
}
