/*
 * walship command line tool. The only place that parses argv.
 *
 *   walship replicate [--sink URL] [--config FILE] [--shards N] [--policy P] [--metrics-addr HOST:PORT]
 *                     [--epoch N] [--pointer-generation N] [--interval-ms N] [--checkpoint-interval-s N]
 *                     [--once] [--json] [NAME=]DB_PATH...
 *   walship restore   --sink URL --tenant NAME [--frame [GEN:]N | --time RFC3339 | --checkpoint ID|latest]
 *                     [--force] -o OUT_DB
 *   walship ls        --sink URL [--tenant NAME | --checkpoints | TENANT] [--json]
 *   walship verify    --sink URL [--tenant NAME] [--orphans | --fail-on-orphans]
 *   walship checkpoint --sink URL [--config FILE]
 *   walship retention --sink URL [--dry-run] [--json]
 *   walship forget    --sink URL --tenant NAME [--json]
 *   walship repair    --sink URL [--dry-run] [--json]
 *   walship help [COMMAND]    (and `walship COMMAND -h|--help`: the command table at the end)
 *
 * Exit status: 0 success; 2 usage or configuration error; 3 every tenant was
 * fenced; 1 anything else. Errors go to stderr naming tenant, object, cause.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "cmd_checkpoint.h"
#include "cmd_follow.h"
#include "config.h"
#include "metrics_http.h"
#include "walship.h"
#include "ws_clock.h"
#include "ws_logging.h"

#define EXIT_OK 0
#define EXIT_FAIL 1
#define DRAIN_MS_MAX_DEFAULT 60000u /* under systemd's 90 s stop timeout */
#define EXIT_USAGE WS_CLI_EXIT_USAGE
#define EXIT_FENCED 3
#define EXIT_UNCHECKED 4 /* verify: all that was checked passed; some contents could not be (no key) */

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	ws_cli_verror(NULL, 0, "run 'walship help' for usage", fmt, ap);
	va_end(ap);
	return EXIT_USAGE;
}

/* The command table and each command's help are at the end of this file. */
static void print_usage(FILE *f);

/* RFC 3339: 2026-11-30T12:34:56[.123][Z|+hh:mm|-hh:mm] -> ms since epoch. */
static int parse_rfc3339(const char *s, int64_t *out_ms)
{
	struct tm tm;
	int y, mo, d, h, mi, sec, n = 0, ms = 0;
	const char *p;
	long off = 0;

	memset(&tm, 0, sizeof(tm));
	/* Digits where digits belong: sscanf alone takes "-1" or "+5" for a field. */
	for (int i = 0; i < 19; i++) {
		bool sep = i == 4 || i == 7 || i == 10 || i == 13 || i == 16;
		if (!s[i] || (!sep && (s[i] < '0' || s[i] > '9')))
			return -1;
	}
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
		if (p[1] < '0' || p[1] > '9' || p[2] < '0' || p[2] > '9' || p[3] != ':' || p[4] < '0' || p[4] > '9' ||
		    p[5] < '0' || p[5] > '9')
			return -1;
		if (sscanf(p + 1, "%2d:%2d%n", &oh, &om, &m2) != 2 || m2 != 5 || oh > 23 || om > 59)
			return -1;
		off = (oh * 60L + om) * 60L * (*p == '-' ? -1 : 1);
		p += 6;
	} else {
		return -1;
	}
	/* Second 60 (a leap second) is refused: timegm() takes it as the next
	 * day's first second, a moment the user did not name. */
	if (*p || mo < 1 || mo > 12 || d < 1 || h > 23 || mi > 59 || sec > 59)
		return -1;
	{
		/* timegm() would take 2026-02-30 as 2026-03-02: a day the user did not name. */
		static const int mdays[12] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
		bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
		if (d > mdays[mo - 1] + (mo == 2 && leap))
			return -1;
	}
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

/* ---- replicate -------------------------------------------------------- */

enum {
	OPT_SINK = 1000, OPT_CONFIG, OPT_EPOCH, OPT_PG, OPT_INTERVAL, OPT_ONCE, OPT_JSON,
	OPT_TENANT, OPT_FRAME, OPT_TIME, OPT_FORCE, OPT_CHECKPOINT, OPT_CHECKPOINTS, OPT_CKPT_INTERVAL, OPT_EVENTS, OPT_FOLLOW, OPT_FORCE_PREAD, OPT_QUIET, OPT_VERBOSE,
	OPT_SHARDS, OPT_POLICY, OPT_METRICS_ADDR, OPT_ORPHANS, OPT_FAIL_ORPHANS, OPT_KEY_FILE, OPT_COMPRESSION,
	OPT_PARALLELISM,
};

/* Every command answers -h and --help (stdout, exit 0) with its own help. */
#define OPT_HELP_ENTRY { "help", no_argument, NULL, 'h' }

/* What the outcome callback knows of one tenant. */
struct tenant_state {
	bool reported;               /* some tail of it has finished */
	bool fenced;                 /* its last tail was Fenced */
	bool failed;                 /* its last tail failed */
	char *error;                 /* the failure last printed for it */
};

/* Shared by the shards' threads (on_outcome) and the main thread: all under mu. */
struct run {
	pthread_mutex_t mu;
	const struct ws_cli_config *cfg;
	struct tenant_state *tenant; /* cfg->tenants' order */
	size_t fenced_count, failed_count;
	uint64_t errors;             /* failed tails reported */
	bool json;
	int wake_fd;                 /* written once every tenant is fenced; -1 with --once */
};

/* Most of the engine's messages name the tenant already; say it where not. */
static void print_tenant_error(const char *tenant, const char *msg)
{
	char needle[WS_TENANT_MAX + 8];
	snprintf(needle, sizeof(needle), "tenant %s", tenant);
	if (strstr(msg, needle))
		fprintf(stderr, "walship: error: %s\n", msg);
	else
		fprintf(stderr, "walship: error: tenant %s: %s\n", tenant, msg);
}

/*
 * The engine calls this on a shard's thread after every tail. It prints what
 * the old one-pass-per-interval loop printed: every outcome that did
 * something, a tenant's first outcome even when Empty (so --once says one
 * line per tenant), Fenced once per tenant, and a failure once until it
 * changes or clears; the engine's extra tails (flush, the final drain) that
 * found nothing stay quiet.
 */
static void on_outcome(const char *tenant, const struct ws_outcome *o, int err, void *arg)
{
	struct run *r = arg;
	const char *msg = err ? ws_errmsg() : NULL; /* thread-local: read on this thread */
	long i = ws_cli_config_tenant_index(r->cfg, tenant);
	struct tenant_state *t;

	if (i < 0)
		return; /* not registered by this run: cannot happen */
	pthread_mutex_lock(&r->mu);
	t = &r->tenant[i];
	if (r->json && (err || o->kind == WS_OUTCOME_SHED))
		ws_cli_print_outcome_json(tenant, o); /* every failed, deferred or shed tail */
	if (err && o->u.error.deferred) {
		/* Deferred to the store's Retry-After: not a failure; a tenant
		 * deferred too long is warned about by the engine. */
		pthread_mutex_unlock(&r->mu);
		return;
	}
	if (err) {
		r->errors++;
		if (!t->failed || !t->error || strcmp(t->error, msg)) {
			print_tenant_error(tenant, msg);
			free(t->error);
			t->error = strdup(msg);
		}
		if (!t->failed)
			r->failed_count++;
		t->failed = true;
		if (t->fenced)
			r->fenced_count--;
		t->fenced = false;
	} else {
		if (t->failed)
			r->failed_count--;
		t->failed = false;
		free(t->error);
		t->error = NULL;
		if (o->kind == WS_OUTCOME_FENCED) {
			if (!t->fenced) {
				if (r->json)
					ws_cli_print_outcome_json(tenant, o);
				fprintf(stderr,
					"walship: tenant %s: fenced: the sink is owned by epoch %" PRIu64
					" / pointer generation %" PRIu64 " (ours %" PRIu64 " / %" PRIu64 "); stopped\n",
					tenant, o->u.fenced.current_epoch, o->u.fenced.current_pointer_generation,
					o->u.fenced.our_epoch, o->u.fenced.our_pointer_generation);
				t->fenced = true;
				r->fenced_count++;
				if (r->fenced_count == r->cfg->tenant_count && r->wake_fd >= 0)
					(void)!write(r->wake_fd, "f", 1);
			}
		} else {
			if (t->fenced)
				r->fenced_count--;
			t->fenced = false;
			if (r->json && o->kind != WS_OUTCOME_SHED && (o->kind != WS_OUTCOME_EMPTY || !t->reported))
				ws_cli_print_outcome_json(tenant, o);
		}
	}
	/* A tail after a failed one is printed even when it found nothing, as
	 * the first is: a reader of --json sees the tenant recover. */
	t->reported = !err;
	pthread_mutex_unlock(&r->mu);
}

/* The tenants a stop's drain left, and what the next start ships. */
static int print_undrained(const struct ws_tenant_metrics *m, void *arg)
{
	(void)arg;
	if (m->undrained)
		fprintf(stderr, "walship: tenant %s: left unshipped past frame %" PRIu64 " (RPO %" PRIu64 ".%03u s); "
			"the next start ships it\n", m->tenant, m->last_frame, m->rpo.watermark_age_ms / 1000,
			(unsigned)(m->rpo.watermark_age_ms % 1000));
	return 0;
}

/* drain_ms_max: the stop ends by then. The engine stops its drain a little
 * before (ws_engine_config.drain_ms_max); this is for a tail that does not
 * end at its work bound in time (one slow request): whatever is in flight is
 * left, and nothing acknowledged is lost (the watermark is written last). */
struct drain_watch {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool done;
	uint32_t ms;
	struct ws_engine *e;
};

static void *drain_watch_main(void *arg)
{
	struct drain_watch *w = arg;
	struct timespec ts;
	int rc = 0;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += w->ms / 1000;
	ts.tv_nsec += (long)(w->ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&w->mu);
	while (!w->done && rc != ETIMEDOUT)
		rc = pthread_cond_timedwait(&w->cv, &w->mu, &ts);
	bool late = !w->done;
	pthread_mutex_unlock(&w->mu);
	if (late) {
		fprintf(stderr, "walship: drain_ms_max (%u ms) reached; stopping now\n", w->ms);
		(void)ws_engine_foreach_tenant(w->e, print_undrained, NULL);
		_exit(EXIT_FAIL);
	}
	return NULL;
}

/* ws_engine_stop, bounded by drain_ms_max (0: not bounded). A stop past the
 * deadline does not return: it lists what it left and exits 1. */
static int stop_within(struct ws_engine *e, uint32_t drain_ms_max)
{
	struct drain_watch w = { .ms = drain_ms_max, .e = e };
	pthread_condattr_t ca;
	pthread_t th;
	bool watching = false;
	int rc;

	pthread_mutex_init(&w.mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w.cv, &ca);
	pthread_condattr_destroy(&ca);
	if (drain_ms_max)
		watching = pthread_create(&th, NULL, drain_watch_main, &w) == 0;
	rc = ws_engine_stop(e);
	pthread_mutex_lock(&w.mu);
	w.done = true;
	pthread_cond_signal(&w.cv);
	pthread_mutex_unlock(&w.mu);
	if (watching)
		pthread_join(th, NULL);
	pthread_mutex_destroy(&w.mu);
	pthread_cond_destroy(&w.cv);
	if (rc == -ETIMEDOUT) {
		/* The deadline covers the whole stop: tearing the engine down
		 * would wait for the requests still in flight (a slow store
		 * makes that seconds). Nothing acknowledged is lost by leaving
		 * them; every --json line is already flushed. */
		fprintf(stderr, "walship: drain_ms_max (%u ms) reached\n", drain_ms_max);
		(void)ws_engine_foreach_tenant(e, print_undrained, NULL);
		fflush(stdout);
		fflush(stderr);
		_exit(EXIT_FAIL);
	}
	return rc;
}

struct run_opts {
	bool once, json, quiet;
	bool events;                     /* --events: print the events of ... */
	const char *events_names;        /* ... these tenants (comma-separated; NULL: all) */
	struct ws_cli_follow_spec *follow; /* --follow NAME=REPLICA_DB, each */
	size_t follow_count;
	unsigned reader_flags;
	uint64_t checkpoint_interval_s;  /* 0 = none */
	uint64_t epoch;                  /* the engine's epoch, which checkpoints decide at too */
	struct ws_checkpoint_opts ck;    /* checkpoints' artifacts sealed as the tenants' batches */
};

/* "walship: tenant NAME: PATH -> SINK (shard N, WAL read path: P)" */
static void print_registered(struct ws_engine *e, const struct ws_cli_config *cfg, const struct ws_cli_tenant *t)
{
	struct ws_tenant_metrics tm;
	struct ws_shard_metrics sm;
	unsigned shard = t->shard >= 0 ? (unsigned)t->shard : ws_engine_shard_of(e, t->name);
	const char *path = "unknown";

	if (ws_engine_tenant_metrics(e, t->name, &tm) == 0)
		shard = tm.shard;
	if (ws_engine_shard_metrics(e, shard, &sm) == 0 && sm.read_path)
		path = sm.read_path;
	fprintf(stderr, "walship: tenant %s: %s -> %s (shard %u, WAL read path: %s)\n", t->name, t->path, cfg->sink,
		shard, path);
}

/* Every tenant of the config, registered at once (ws_engine_add_tenants: a
 * start with thousands of tenants waits for no tail per tenant); the first
 * that failed is named. */
static int add_tenants(struct ws_engine *e, const struct ws_cli_config *cfg, bool quiet)
{
	size_t n = cfg->tenant_count;
	struct ws_tenant_config *tcs = calloc(n ? n : 1, sizeof(*tcs));
	int *rcs = calloc(n ? n : 1, sizeof(*rcs));
	int rc;

	if (!tcs || !rcs) {
		free(tcs);
		free(rcs);
		fprintf(stderr, "walship: out of memory registering %zu tenants\n", n);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		const struct ws_cli_tenant *t = &cfg->tenants[i];
		tcs[i] = (struct ws_tenant_config){
			.name = t->name,
			.db_path = t->path,
			.shard = t->shard,
			.has_policy = t->has_policy,
			.policy = t->policy,
			.has_seal = t->has_seal,
			.seal = t->seal,
		};
	}
	char why[512];
	rc = ws_engine_add_tenants(e, tcs, n, rcs);
	snprintf(why, sizeof(why), "%s", rc ? ws_errmsg() : "");
	for (size_t i = 0; i < n; i++) {
		if (rcs[i] == 0 && !quiet)
			print_registered(e, cfg, &cfg->tenants[i]);
	}
	for (size_t i = 0; rc && i < n; i++) {
		if (rcs[i]) {
			print_tenant_error(cfg->tenants[i].name, why);
			break;
		}
	}
	free(tcs);
	free(rcs);
	return rc;
}

/* Every interval: everything committed so far shipped, then a checkpoint. */
/* 0 when a checkpoint was committed (ours or another writer's); else failed. */
static int take_checkpoint(struct ws_engine *e, struct ws_sink *sink, const struct ws_checkpoint_opts *ck,
			   uint64_t epoch, bool json)
{
	struct ws_checkpoint_opts co;
	struct ws_checkpoint_info ci;
	int rc = ws_engine_flush(e);
	if (rc) {
		fprintf(stderr, "walship: checkpoint skipped: a tail failed: %s\n", ws_errmsg());
		return rc;
	}
	co = *ck;
	co.epoch = epoch; /* replicate's own --epoch: a stale one is an error naming the current */
	rc = ws_checkpoint_take(sink, &co, &ci);
	if (rc) {
		fprintf(stderr, "walship: checkpoint failed: %s\n", ws_errmsg());
		return rc;
	}
	if (json) {
		flockfile(stdout); /* whole lines among the shards' (cli_json.c) */
		printf("{\"checkpoint\":%" PRIu64 ",\"committed\":%s,\"reference\":\"%s\"}\n", ci.id,
		       ci.committed ? "true" : "false", ci.ref_key);
		fflush(stdout);
		funlockfile(stdout);
	}
	if (!ci.own)
		fprintf(stderr, "walship: checkpoint not taken: another writer's checkpoint %" PRIu64 " was decided "
			"first (%s)\n", ci.id, ci.committed ? "commit" : "abort");
	else
		fprintf(stderr, "walship: checkpoint %" PRIu64 " %s (%s)\n", ci.id,
			ci.committed ? "committed" : "aborted", ci.ref_key);
	return ci.committed ? 0 : -EAGAIN;
}

/*
 * A periodic checkpoint runs on a thread of its own while this one keeps
 * watching for SIGINT and SIGTERM: its flush, under block, waits out a sink
 * that keeps refusing for as long as it refuses, and a signal must still
 * stop the process. A signal meanwhile makes the engine give up its waits
 * (ws_engine_give_up): the flush ends with its error, no checkpoint is
 * taken, and the caller stops.
 */
struct ckpt_job {
	struct ws_engine *e;
	struct ws_sink *sink;
	const struct ws_checkpoint_opts *ck;
	uint64_t epoch;
	bool json;
	int rc;
	int done_fd;
};

static void *ckpt_job_main(void *arg)
{
	struct ckpt_job *j = arg;
	uint64_t one = 1;
	j->rc = take_checkpoint(j->e, j->sink, j->ck, j->epoch, j->json);
	if (write(j->done_fd, &one, sizeof(one)) != (ssize_t)sizeof(one))
		fprintf(stderr, "walship: checkpoint thread: cannot say it ended: %s\n", strerror(errno));
	return NULL;
}

/* The checkpoint's result; *signalled when a signal came meanwhile. */
static int checkpoint_watched(struct ws_engine *e, struct ws_sink *sink, const struct run_opts *ro, int sig_fd,
			      bool *signalled)
{
	struct ckpt_job j = { .e = e, .sink = sink, .ck = &ro->ck, .epoch = ro->epoch, .json = ro->json };
	struct pollfd pf[2];
	pthread_t th;

	*signalled = false;
	int terr;
	j.done_fd = eventfd(0, EFD_CLOEXEC);
	if (j.done_fd < 0)
		terr = errno;
	else
		terr = pthread_create(&th, NULL, ckpt_job_main, &j);
	if (terr) {
		fprintf(stderr, "walship: checkpoint thread: %s; a signal is read once the checkpoint ends\n",
			strerror(terr));
		if (j.done_fd >= 0)
			close(j.done_fd);
		return take_checkpoint(e, sink, &ro->ck, ro->epoch, ro->json);
	}
	pf[0] = (struct pollfd){ .fd = sig_fd, .events = POLLIN };
	pf[1] = (struct pollfd){ .fd = j.done_fd, .events = POLLIN };
	for (;;) {
		if (poll(pf, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			fprintf(stderr, "walship: poll: %s; waiting for the checkpoint to end\n", strerror(errno));
			break;
		}
		if (pf[1].revents)
			break;
		if (pf[0].revents) {
			/* Left unread: the caller's poll sees it next and stops. */
			*signalled = true;
			pf[0].fd = -1;
			fprintf(stderr, "walship: stopping: the checkpoint in progress gives up waiting on the sink\n");
			ws_engine_give_up(e);
		}
	}
	pthread_join(th, NULL);
	close(j.done_fd);
	return j.rc;
}

/* Runs until SIGINT or SIGTERM (read from sig_fd), or every tenant is fenced
 * (wake_fd); returns the last periodic checkpoint's result (0 when none was
 * due). */
static int wait_for_stop(int sig_fd, int wake_fd, struct ws_engine *e, struct ws_sink *ck_sink,
			 const struct run_opts *ro)
{
	int last = 0;
	struct pollfd pf[2] = { { .fd = sig_fd, .events = POLLIN }, { .fd = wake_fd, .events = POLLIN } };
	uint64_t period = ro->checkpoint_interval_s * 1000, next = period ? ws_mono_ms() + period : 0;
	for (;;) {
		int timeout = -1, n;
		if (period) {
			uint64_t now = ws_mono_ms();
			if (now >= next) {
				bool signalled;
				last = checkpoint_watched(e, ck_sink, ro, sig_fd, &signalled);
				if (signalled)
					return last;
				next = ws_mono_ms() + period;
				continue;
			}
			/* At most a minute at a time: a period of weeks in
			 * milliseconds does not fit poll's int. */
			timeout = next - now < 60000 ? (int)(next - now) : 60000;
		}
		n = poll(pf, 2, timeout);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			fprintf(stderr, "walship: poll: %s; stopping\n", strerror(errno));
			return last;
		}
		if (pf[0].revents || pf[1].revents)
			return last;
	}
}

/*
 * The engine, as ws_engine_create makes it; but a long-running replicate
 * (sig_fd >= 0) whose store throttles its start (the conditional-write
 * probe, or the first reads, refused with 503 SlowDown or 429 until the
 * store's retries ran out) waits and tries again, 1 s, then twice as long
 * each time up to 30 s, until the store accepts or SIGINT/SIGTERM comes: a
 * store that pushes back for minutes must not make a restarted shipper
 * exit. Any other failure, or --once, is returned at once. A signal while
 * waiting returns NULL with *err 0 (the caller reports it).
 */
static struct ws_engine *create_engine_waiting(const struct ws_engine_config *ec, int sig_fd, int *err)
{
	int wait_ms = 1000;
	for (;;) {
		struct ws_engine *e = ws_engine_create(ec, err);
		if (e || sig_fd < 0 || *err != WS_ETHROTTLED)
			return e;
		fprintf(stderr, "walship: %s; the store is throttling: trying again in %d s\n", ws_errmsg(),
			wait_ms / 1000);
		struct pollfd pf = { .fd = sig_fd, .events = POLLIN };
		uint64_t until = ws_mono_ms() + (uint64_t)wait_ms;
		for (uint64_t now = ws_mono_ms(); now < until; now = ws_mono_ms()) {
			int n = poll(&pf, 1, (int)(until - now));
			if (n < 0 && errno != EINTR) {
				fprintf(stderr, "walship: poll: %s; stopping\n", strerror(errno));
				return NULL;
			}
			if (n > 0) {
				fprintf(stderr, "walship: stopping: a signal came before the store accepted the start\n");
				*err = 0;
				return NULL;
			}
		}
		wait_ms = wait_ms >= 15000 ? 30000 : wait_ms * 2;
	}
}

/* The tenants --events=NAME,... names: each one replicate ships. */
static size_t event_names(const struct ws_cli_config *cfg, const char *list, const char **out, char *buf, size_t cap)
{
	size_t n = 0;
	if (!list) {
		for (size_t i = 0; i < cfg->tenant_count; i++)
			out[n++] = cfg->tenants[i].name;
		return n;
	}
	snprintf(buf, cap, "%s", list);
	for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
		if (n < cfg->tenant_count)
			out[n++] = tok;
	return n;
}

static int check_event_names(const struct ws_cli_config *cfg, const char *list)
{
	char buf[4096];
	size_t n = 0;
	if (strlen(list) >= sizeof(buf))
		return usage_error("--events: the list is longer than %zu bytes", sizeof(buf) - 1);
	snprintf(buf, sizeof(buf), "%s", list);
	for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		bool known = false;
		for (size_t i = 0; i < cfg->tenant_count; i++)
			known |= strcmp(cfg->tenants[i].name, tok) == 0;
		if (!known)
			return usage_error("--events: '%s' is not a tenant replicate ships", tok);
		if (++n > cfg->tenant_count)
			return usage_error("--events: a tenant is named twice");
	}
	if (n == 0)
		return usage_error("--events=: name at least one tenant, or give --events alone for all");
	return 0;
}

/* --follow NAME=REPLICA_DB: split at the first '=' (argv's own bytes). */
static int follow_arg(struct run_opts *ro, char *arg, size_t max)
{
	char *eq = strchr(arg, '=');
	if (!eq || eq == arg || !eq[1])
		return usage_error("--follow: '%s' is not NAME=REPLICA_DB", arg);
	if (!ro->follow && !(ro->follow = calloc(max, sizeof(*ro->follow))))
		return usage_error("out of memory");
	*eq = '\0';
	ro->follow[ro->follow_count++] = (struct ws_cli_follow_spec){ .name = arg, .replica = eq + 1 };
	return 0;
}

/* p with its directory resolved (the file itself may not exist yet); p as given when it cannot be. */
static void canon_path(const char *p, char out[PATH_MAX])
{
	char dir[PATH_MAX], real[PATH_MAX];
	const char *slash = strrchr(p, '/');
	snprintf(out, PATH_MAX, "%s", p);
	if (slash == p)
		return;
	if ((size_t)snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - p) : 1, slash ? p : ".") >= sizeof(dir) ||
	    !realpath(dir, real))
		return;
	if ((size_t)snprintf(out, PATH_MAX, "%s/%s", real, slash ? slash + 1 : p) >= PATH_MAX)
		snprintf(out, PATH_MAX, "%s", p);
}

/* The same file: by inode when both exist, else by their resolved paths. */
static bool same_file(const char *a, const char *b)
{
	struct stat sa, sb;
	char ca[PATH_MAX], cb[PATH_MAX];
	if (stat(a, &sa) == 0 && stat(b, &sb) == 0)
		return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
	canon_path(a, ca);
	canon_path(b, cb);
	return strcmp(ca, cb) == 0;
}

/* Each --follow names a tenant replicate ships, once, into a file of its own that is no source. */
static int check_follow(const struct ws_cli_config *cfg, const struct run_opts *ro)
{
	for (size_t i = 0; i < ro->follow_count; i++) {
		const struct ws_cli_follow_spec *f = &ro->follow[i];
		const struct ws_cli_tenant *t = NULL;
		for (size_t k = 0; k < cfg->tenant_count; k++)
			if (strcmp(cfg->tenants[k].name, f->name) == 0)
				t = &cfg->tenants[k];
		if (!t)
			return usage_error("--follow: '%s' is not a tenant replicate ships", f->name);
		for (size_t k = 0; k < cfg->tenant_count; k++)
			if (same_file(cfg->tenants[k].path, f->replica))
				return usage_error("--follow: %s=%s: the replica would be tenant %s's own database",
						   f->name, f->replica, cfg->tenants[k].name);
		for (size_t k = 0; k < i; k++) {
			if (strcmp(ro->follow[k].name, f->name) == 0)
				return usage_error("--follow: tenant %s is followed twice", f->name);
			if (same_file(ro->follow[k].replica, f->replica))
				return usage_error("--follow: %s is the replica of two tenants", f->replica);
		}
	}
	return 0;
}

/* SIGINT and SIGTERM: the signals that stop replicate (and drain it). */
static void stop_signals(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGINT);
	sigaddset(set, SIGTERM);
}

static int replicate_run(const struct ws_cli_config *cfg, const struct run_opts *ro)
{
	struct run r;
	struct ws_engine_config ec;
	struct ws_engine *e = NULL;
	struct ws_metrics_http *mh = NULL;
	struct ws_sink *ck_sink = NULL;
	struct ws_cli_events *evs = NULL;
	struct ws_cli_follow *fol = NULL;
	int pipe_fds[2] = { -1, -1 }, sig_fd = -1;
	int exit_code = EXIT_FAIL, err = 0, flush_rc = 0, stop_rc = 0, ckpt_rc = 0, rc;
	sigset_t sigs;

	memset(&r, 0, sizeof(r));
	pthread_mutex_init(&r.mu, NULL);
	r.cfg = cfg;
	r.json = ro->json;
	r.wake_fd = -1;
	r.tenant = calloc(cfg->tenant_count, sizeof(*r.tenant));
	if (!r.tenant) {
		fprintf(stderr, "walship: out of memory\n");
		goto out;
	}
	if (!ro->once) {
		/* SIGINT and SIGTERM are read from a signalfd on this thread. Blocked
		 * before any thread starts, so the shards' and MHD's threads inherit
		 * the mask and none of them takes the signal. (With --once they keep
		 * their default action: the run is crash-safe at any instant.) */
		stop_signals(&sigs);
		if (pthread_sigmask(SIG_BLOCK, &sigs, NULL) || (sig_fd = signalfd(-1, &sigs, SFD_CLOEXEC)) < 0 ||
		    pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK)) {
			fprintf(stderr, "walship: signals: %s\n", strerror(errno));
			goto out;
		}
		r.wake_fd = pipe_fds[1];
	} else {
		/* --once: the default actions (main blocked them while parsing). */
		stop_signals(&sigs);
		pthread_sigmask(SIG_UNBLOCK, &sigs, NULL);
	}

	memset(&ec, 0, sizeof(ec));
	ec.sink_url = cfg->sink;
	ec.shards = cfg->shards;
	ec.shard = cfg->shard;
	ec.epoch = cfg->epoch;
	ec.pointer_generation = cfg->pointer_generation;
	ec.wal_checkpoint_bytes = cfg->wal_checkpoint_bytes;
	ec.reader_flags = ro->reader_flags;
	ec.on_outcome = on_outcome;
	ec.arg = &r;
	/* The engine's own bound a little before the deadline, so its drain
	 * usually ends cleanly and names what it left. */
	const uint32_t drain_ms = cfg->has_drain_ms_max ? cfg->drain_ms_max : DRAIN_MS_MAX_DEFAULT;
	ec.drain_ms_max = drain_ms - drain_ms / 10;
	e = create_engine_waiting(&ec, ro->once ? -1 : sig_fd, &err);
	if (!e) {
		if (err)
			fprintf(stderr, "walship: %s\n", ws_errmsg());
		exit_code = err == WS_ECONFIG ? EXIT_USAGE : EXIT_FAIL;
		goto out;
	}
	if (cfg->metrics_addr) {
		char why[320];
		mh = ws_metrics_http_start(cfg->metrics_addr, e, why, sizeof(why));
		if (!mh) {
			fprintf(stderr, "walship: %s\n", why);
			goto out;
		}
		/* Said even with --quiet: with port 0 it is the only way to learn the port. */
		fprintf(stderr, "walship: metrics at %s\n", ws_metrics_http_url(mh));
	}
	rc = add_tenants(e, cfg, ro->quiet);
	if (rc) {
		exit_code = rc == WS_ECONFIG ? EXIT_USAGE : EXIT_FAIL;
		goto out;
	}

	if (ro->checkpoint_interval_s && !ro->once) {
		/* The engine has made the sink and probed its conditional
		 * writes: not probed again at open, where a throttling store
		 * would end the run. (With etag_quotes auto the If-Match form is
		 * probed at this handle's first compare-and-swap, in the first
		 * checkpoint: a throttled one fails that checkpoint, and the
		 * next interval tries again.) */
		ck_sink = ws_sink_open_flags(cfg->sink, WS_SINK_EXISTING, &err);
		if (!ck_sink) {
			fprintf(stderr, "walship: %s\n", ws_errmsg());
			goto out;
		}
		/* It reads what every tenant wrote (an incremental image). */
		if (ws_cli_add_config_keys(ck_sink, cfg))
			goto out;
	}
	if (ro->events) {
		char buf[4096];
		const char **names = calloc(cfg->tenant_count, sizeof(*names));
		size_t n = names ? event_names(cfg, ro->events_names, names, buf, sizeof(buf)) : 0;
		evs = names ? ws_cli_events_start(e, names, n) : NULL;
		free(names);
		if (!evs)
			goto out;
	}
	if (ro->follow_count && !(fol = ws_cli_follow_start(e, ro->follow, ro->follow_count, ro->json)))
		goto out;
	if (ro->once)
		flush_rc = ws_engine_flush(e);
	else
		ckpt_rc = wait_for_stop(sig_fd, pipe_fds[0], e, ck_sink, ro);
	ws_metrics_http_stop(mh);
	mh = NULL;
	stop_rc = stop_within(e, drain_ms); /* the last tail of every tenant, made durable */
	/* After the stop: its worker_lost faults are printed too. */
	ws_cli_events_stop(evs);
	evs = NULL;
	ws_cli_follow_stop(fol);
	fol = NULL;

	pthread_mutex_lock(&r.mu);
	if (r.fenced_count == cfg->tenant_count) {
		exit_code = EXIT_FENCED;
	} else if (r.failed_count) {
		exit_code = EXIT_FAIL;
	} else if ((flush_rc || stop_rc) && !r.errors) {
		/* A failure no tail reported (the callback saw none). */
		fprintf(stderr, "walship: error: %s\n", ws_errmsg());
		exit_code = EXIT_FAIL;
	} else if (ckpt_rc) {
		/* Asked for checkpoints, it did not take the last one (a stale
		 * --epoch never takes any): not a clean run. */
		fprintf(stderr, "walship: the last periodic checkpoint was not taken (above)\n");
		exit_code = EXIT_FAIL;
	} else {
		exit_code = EXIT_OK;
	}
	pthread_mutex_unlock(&r.mu);
out:
	ws_metrics_http_stop(mh);
	ws_cli_events_stop(evs);
	ws_cli_follow_stop(fol);
	if (e)
		ws_engine_destroy(e);
	ws_sink_close(ck_sink);
	if (sig_fd >= 0)
		close(sig_fd);
	for (int i = 0; i < 2; i++)
		if (pipe_fds[i] >= 0)
			close(pipe_fds[i]);
	if (r.tenant)
		for (size_t i = 0; i < cfg->tenant_count; i++)
			free(r.tenant[i].error);
	free(r.tenant);
	pthread_mutex_destroy(&r.mu);
	return exit_code;
}

static int cmd_replicate(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "sink", required_argument, NULL, OPT_SINK },
		{ "config", required_argument, NULL, OPT_CONFIG },
		{ "shards", required_argument, NULL, OPT_SHARDS },
		{ "policy", required_argument, NULL, OPT_POLICY },
		{ "metrics-addr", required_argument, NULL, OPT_METRICS_ADDR },
		{ "epoch", required_argument, NULL, OPT_EPOCH },
		{ "pointer-generation", required_argument, NULL, OPT_PG },
		{ "interval-ms", required_argument, NULL, OPT_INTERVAL },
		{ "once", no_argument, NULL, OPT_ONCE },
		{ "json", no_argument, NULL, OPT_JSON },
		{ "force-pread", no_argument, NULL, OPT_FORCE_PREAD },
		{ "quiet", no_argument, NULL, OPT_QUIET },
		{ "verbose", no_argument, NULL, OPT_VERBOSE },
		{ "checkpoint-interval-s", required_argument, NULL, OPT_CKPT_INTERVAL },
		{ "events", optional_argument, NULL, OPT_EVENTS },
		{ "follow", required_argument, NULL, OPT_FOLLOW },
		{ "compression", required_argument, NULL, OPT_COMPRESSION },
		{ "key-file", required_argument, NULL, OPT_KEY_FILE },
		OPT_HELP_ENTRY,
		{ NULL, 0, NULL, 0 },
	};
	struct ws_cli_config cfg;
	struct ws_cli_overrides ov;
	struct run_opts ro = { 0 };
	struct ws_checkpoint_seal *ck_seals = NULL;
	const char *config_file = NULL;
	bool verbose = false;
	uint64_t v;
	char why[160];
	int rc, c;

	memset(&cfg, 0, sizeof(cfg));
	memset(&ov, 0, sizeof(ov));
	uint64_t seen = 0;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		const char *twice = c == OPT_FOLLOW ? NULL : ws_cli_twice(opts, c, &seen); /* --follow repeats */
		if (twice)
			return usage_error("--%s given twice", twice);
		switch (c) {
		case 'h': return ws_cli_help("replicate");
		case OPT_SINK: ov.sink = optarg; break;
		case OPT_CONFIG: config_file = optarg; break;
		case OPT_SHARDS:
			if (ws_cli_parse_u64(optarg, &v) || v < 1 || v > WS_SHARDS_MAX)
				return usage_error("--shards: '%s' must be 1..%d", optarg, WS_SHARDS_MAX);
			ov.shards = (unsigned)v;
			ov.has_shards = true;
			break;
		case OPT_POLICY:
			if (ws_cli_parse_policy(optarg, &ov.policy))
				return usage_error("--policy: '%s' is not block, throttle or shed", optarg);
			ov.has_policy = true;
			break;
		case OPT_METRICS_ADDR:
			if (ws_metrics_addr_resolve(optarg, why, sizeof(why)))
				return usage_error("--metrics-addr: '%s': %s", optarg, why);
			ov.metrics_addr = optarg;
			break;
		case OPT_EPOCH:
			if (ws_cli_parse_token(optarg, &ov.epoch))
				return usage_error("--epoch: '%s' is not an integer " WS_CLI_TOKEN_RANGE, optarg);
			ov.has_epoch = true;
			break;
		case OPT_PG:
			if (ws_cli_parse_token(optarg, &ov.pointer_generation))
				return usage_error("--pointer-generation: '%s' is not an integer " WS_CLI_TOKEN_RANGE,
						   optarg);
			ov.has_pointer_generation = true;
			break;
		case OPT_INTERVAL:
			if (ws_cli_parse_u64(optarg, &v) || v == 0 || v > 86400000)
				return usage_error("--interval-ms: '%s' must be 1..86400000", optarg);
			ov.interval_ms = (uint32_t)v;
			ov.has_interval = true;
			break;
		case OPT_CKPT_INTERVAL:
			if (ws_cli_parse_u64(optarg, &v) || v == 0 || v > 31u * 86400)
				return usage_error("--checkpoint-interval-s: '%s' must be 1..2678400", optarg);
			ro.checkpoint_interval_s = v;
			break;
		case OPT_EVENTS:
			ro.events = true;
			ro.events_names = optarg && optarg[0] ? optarg : NULL;
			break;
		case OPT_FOLLOW:
			if ((rc = follow_arg(&ro, optarg, (size_t)argc)) != 0)
				goto out;
			break;
		case OPT_COMPRESSION:
			if (ws_cli_parse_codec(optarg, &ov.codec))
				return usage_error("--compression: '%s' is not zstd or none", optarg);
			ov.has_codec = true;
			break;
		case OPT_KEY_FILE: ov.key_file = optarg; break;
		case OPT_ONCE: ro.once = true; break;
		case OPT_JSON: ro.json = true; break;
		case OPT_FORCE_PREAD: ro.reader_flags |= WS_READ_FORCE_PREAD; break;
		case OPT_QUIET: ro.quiet = true; break;
		case OPT_VERBOSE: verbose = true; break;
		default: return usage_error("replicate: unknown or incomplete option");
		}
	}
	/* The environment's key file, as --key-file would (the command line wins). */
	if (!ov.key_file && getenv("WALSHIP_KEY_FILE") && *getenv("WALSHIP_KEY_FILE"))
		ov.key_file = getenv("WALSHIP_KEY_FILE");
	if (config_file && (rc = ws_cli_config_load(&cfg, config_file)) != 0)
		goto out;
	for (int i = optind; i < argc; i++)
		if ((rc = ws_cli_config_add_tenant_arg(&cfg, argv[i])) != 0)
			goto out;
	rc = ws_cli_config_finish(&cfg, &ov);
	if (rc == -ENOMEM) {
		fprintf(stderr, "walship: out of memory\n");
		rc = EXIT_FAIL;
	}
	if (rc)
		goto out;
	if (!cfg.sink) {
		rc = usage_error("replicate: --sink URL is required (or [engine] sink in --config)");
		goto out;
	}
	if (cfg.tenant_count == 0) {
		rc = usage_error("replicate: no databases given");
		goto out;
	}
	if (ro.once && ro.checkpoint_interval_s) {
		rc = usage_error("replicate: --checkpoint-interval-s takes a checkpoint every N seconds of a run; "
				 "--once does not run on (take one after it with `walship checkpoint`)");
		goto out;
	}
	if (ro.events && ro.events_names && (rc = check_event_names(&cfg, ro.events_names)) != 0)
		goto out;
	if ((rc = check_follow(&cfg, &ro)) != 0)
		goto out;
	if (verbose)
		ws_log_set_level(WS_LOG_DEBUG);
	else if (!ro.quiet)
		ws_log_set_level(WS_LOG_INFO);
	ro.epoch = cfg.epoch;
	if (ws_cli_checkpoint_seal(&cfg, &ro.ck, &ck_seals) != 0) {
		fprintf(stderr, "walship: out of memory\n");
		rc = EXIT_FAIL;
		goto out;
	}
	rc = replicate_run(&cfg, &ro);
out:
	free(ck_seals);
	free(ro.follow);
	ws_cli_config_free(&cfg);
	return rc;
}

/* ---- restore / ls / verify -------------------------------------------- */

struct ws_sink *ws_cli_sink_open(const char *url, const char *key_file, int *exit_code)
{
	int rc = 0;
	struct ws_sink *sink = ws_sink_open_flags(url, WS_SINK_EXISTING, &rc);
	if (!key_file)
		key_file = getenv("WALSHIP_KEY_FILE");
	if (sink && key_file && *key_file && (rc = ws_sink_add_key_file(sink, key_file)) != 0) {
		ws_sink_close(sink);
		sink = NULL;
	}
	if (!sink) {
		fprintf(stderr, "walship: %s\n", ws_errmsg());
		*exit_code = rc == WS_ECONFIG ? EXIT_USAGE : EXIT_FAIL;
	}
	return sink;
}

/* --frame N, or GENERATION:N (g<8 hex>-<16 hex>, or g-none): 0, or -1. */
static int parse_frame(const char *arg, char gen[32], uint64_t *frame)
{
	const char *colon = strrchr(arg, ':');
	gen[0] = '\0';
	if (colon) {
		size_t n = (size_t)(colon - arg);
		bool ok = n == 6 && !strncmp(arg, "g-none", 6);
		if (n == 26 && arg[0] == 'g' && arg[9] == '-') {
			ok = true;
			for (size_t i = 1; i < n; i++)
				if (i != 9 && !((arg[i] >= '0' && arg[i] <= '9') || (arg[i] >= 'a' && arg[i] <= 'f')))
					ok = false;
		}
		if (!ok)
			return -1;
		memcpy(gen, arg, n);
		gen[n] = '\0';
		arg = colon + 1;
	}
	return ws_cli_parse_u64(arg, frame) || *frame == 0 ? -1 : 0;
}

/* --parallelism N: objects fetched at once, 1..WS_FETCH_PARALLELISM_MAX. 0, or -1 (said why). */
static int parse_parallelism(const char *cmd, const char *arg, unsigned *n)
{
	uint64_t v;
	if (ws_cli_parse_u64(arg, &v) || v < 1 || v > WS_FETCH_PARALLELISM_MAX) {
		usage_error("%s: --parallelism: '%s' must be a whole number of objects fetched at once, from 1 "
			    "to %u", cmd, arg, WS_FETCH_PARALLELISM_MAX);
		return -1;
	}
	*n = (unsigned)v;
	return 0;
}

/* ws_cli_sink_open, reading parallelism objects at once (0: the default). */
static struct ws_sink *sink_open_par(const char *url, const char *key_file, unsigned parallelism, int *exit_code)
{
	struct ws_sink *sink = ws_cli_sink_open(url, key_file, exit_code);
	if (sink && parallelism && ws_sink_set_fetch_parallelism(sink, parallelism) != 0) {
		fprintf(stderr, "walship: %s\n", ws_errmsg());
		ws_sink_close(sink);
		*exit_code = EXIT_USAGE;
		return NULL;
	}
	return sink;
}

static int cmd_restore(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "sink", required_argument, NULL, OPT_SINK },
		{ "tenant", required_argument, NULL, OPT_TENANT },
		{ "frame", required_argument, NULL, OPT_FRAME },
		{ "time", required_argument, NULL, OPT_TIME },
		{ "force", no_argument, NULL, OPT_FORCE },
		{ "checkpoint", required_argument, NULL, OPT_CHECKPOINT },
		{ "output", required_argument, NULL, 'o' },
		{ "key-file", required_argument, NULL, OPT_KEY_FILE },
		{ "parallelism", required_argument, NULL, OPT_PARALLELISM },
		OPT_HELP_ENTRY,
		{ NULL, 0, NULL, 0 },
	};
	const char *sink_url = NULL, *tenant = NULL, *out = NULL, *checkpoint = NULL, *key_file = NULL;
	struct ws_restore_opts ro = { 0 };
	unsigned parallelism = 0;
	char gen[32] = "";
	struct ws_sink *sink;
	int c, rc;

	uint64_t seen = 0;
	while ((c = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
		const char *twice = ws_cli_twice(opts, c, &seen);
		if (twice)
			return usage_error("--%s given twice", twice);
		switch (c) {
		case 'h': return ws_cli_help("restore");
		case OPT_SINK: sink_url = optarg; break;
		case OPT_KEY_FILE: key_file = optarg; break;
		case OPT_TENANT: tenant = optarg; break;
		case OPT_FRAME:
			if (parse_frame(optarg, gen, &ro.frame))
				return usage_error("--frame: '%s' must be a positive integer N, or GENERATION:N with "
						   "a generation as `walship ls --sink URL TENANT` names it "
						   "(g00000000-0123456789abcdef:N)", optarg);
			if (gen[0])
				ro.generation = gen;
			break;
		case OPT_TIME:
			if (parse_rfc3339(optarg, &ro.time_ms))
				return usage_error("--time: '%s' is not an RFC 3339 time of a real day "
						   "(e.g. 2026-11-30T12:00:00Z)", optarg);
			if (ro.time_ms <= 0)
				return usage_error("--time: '%s' is not after 1970-01-01T00:00:00Z", optarg);
			break;
		case OPT_FORCE: ro.force = true; break;
		case OPT_CHECKPOINT: checkpoint = optarg; break;
		case 'o': out = optarg; break;
		case OPT_PARALLELISM:
			if (parse_parallelism("restore", optarg, &parallelism))
				return EXIT_USAGE;
			break;
		default: return usage_error("restore: unknown or incomplete option");
		}
	}
	if (optind < argc)
		return usage_error("restore: unexpected argument '%s'", argv[optind]);
	if (!sink_url || !tenant || !out)
		return usage_error("restore: --sink, --tenant and -o are required");
	if (!*out)
		return usage_error("restore: -o: the output path is empty");
	{
		const char *base = strrchr(out, '/');
		base = base ? base + 1 : out;
		if (strlen(out) >= PATH_MAX)
			return usage_error("restore: -o: the path is %zu bytes; at most %d", strlen(out), PATH_MAX - 1);
		if (strlen(base) > NAME_MAX)
			return usage_error("restore: -o: the file name (%.32s...) is %zu bytes; at most %d", base,
					   strlen(base), NAME_MAX);
		if (!*base || !strcmp(base, ".") || !strcmp(base, ".."))
			return usage_error("restore: -o: '%s' names a directory; give a file name", out);
	}
	if (ro.frame && ro.time_ms)
		return usage_error("restore: --frame and --time exclude each other");
	if (checkpoint && (ro.frame || ro.time_ms))
		return usage_error("restore: --checkpoint excludes --frame and --time");
	if (checkpoint)
		return cmd_restore_checkpoint(sink_url, tenant, checkpoint, out, ro.force, key_file);
	if (!(sink = sink_open_par(sink_url, key_file, parallelism, &rc)))
		return rc;
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
	unsigned unreadable;  /* tenants passed with an error */
	unsigned nothing;     /* tenants with no watermark and no object */
};

static int ls_cb(const struct ws_tenant_info *t, void *arg)
{
	struct ls_print *p = arg;
	if (t->error) {
		p->unreadable++;
		print_tenant_error(t->tenant, t->error);
	}
	if (!t->error && !t->has_watermark && t->objects == 0)
		p->nothing++;
	if (p->json) {
		ws_cli_print_tenant_json(t);
		return 0;
	}
	if (t->error) {
		printf("%-24s (unreadable: see stderr) objects=%" PRIu64 "\n", t->tenant, t->objects);
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
	       " watermark=%s objects=%" PRIu64 " bytes=%" PRIu64 "%s\n",
	       t->tenant, t->watermark.epoch, t->watermark.pointer_generation,
	       t->watermark.generation.checkpoint_seq, t->watermark.generation.has_salt ? "yes" : "none",
	       t->watermark.last_frame, when, t->objects, t->bytes,
	       t->watermark.carried ? " manifest=carried" : "");
	return 0;
}

static int gen_cb(const struct ws_generation_info *g, void *arg)
{
	bool json = *(bool *)arg;
	char a[WS_TIME_STR_MAX], b[WS_TIME_STR_MAX];
	if (json) {
		ws_cli_print_generation_json(g);
		return 0;
	}
	printf("%-5u %-27s %-11s %11" PRIu64 " %11" PRIu64 "  %-24s  %-24s %9" PRIu64 "\n", g->chain,
	       g->generation, g->start, g->first_frame, g->last_frame, ws_time_str(g->first_time_ms, a),
	       ws_time_str(g->last_time_ms, b), g->manifests);
	return 0;
}

/* ls TENANT: each stored WAL generation, newest first, across re-bases. */
static int cmd_ls_generations(const char *sink_url, const char *tenant, bool json)
{
	struct ws_sink *sink;
	enum ws_history_end end = WS_HISTORY_FIRST;
	int rc;

	sink = ws_sink_open_flags(sink_url, WS_SINK_EXISTING, &rc);
	if (!sink) {
		fprintf(stderr, "walship: %s\n", ws_errmsg());
		return rc == WS_ECONFIG ? EXIT_USAGE : EXIT_FAIL;
	}
	if (!json)
		printf("%-5s %-27s %-11s %11s %11s  %-24s  %-24s %9s\n", "chain", "generation", "start",
		       "first_frame", "last_frame", "first_time", "last_time", "manifests");
	rc = ws_list_generations(sink, tenant, gen_cb, &json, &end);
	ws_sink_close(sink);
	if (rc) {
		fprintf(stderr, "walship: ls: %s\n", ws_errmsg());
		return rc == WS_ECONFIG ? EXIT_USAGE : EXIT_FAIL;
	}
	if (!json)
		printf("%s\n", end == WS_HISTORY_REMOVED ? "(older history was removed by retention)" :
				       end == WS_HISTORY_UNLINKED ? "(the oldest re-base listed records no link to the "
								    "history before it: restore --checkpoint ID may reach it)" :
				       "(the tenant's first chain: nothing was shipped before it)");
	return EXIT_OK;
}

static int cmd_ls(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "sink", required_argument, NULL, OPT_SINK },
		{ "tenant", required_argument, NULL, OPT_TENANT },
		{ "json", no_argument, NULL, OPT_JSON },
		{ "checkpoints", no_argument, NULL, OPT_CHECKPOINTS },
		OPT_HELP_ENTRY,
		{ NULL, 0, NULL, 0 },
	};
	const char *sink_url = NULL, *tenant = NULL;
	struct ls_print p = { false, 0, 0 };
	bool checkpoints = false;
	struct ws_sink *sink;
	int c, rc;

	uint64_t seen = 0;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		const char *twice = ws_cli_twice(opts, c, &seen);
		if (twice)
			return usage_error("--%s given twice", twice);
		switch (c) {
		case 'h': return ws_cli_help("ls");
		case OPT_SINK: sink_url = optarg; break;
		case OPT_TENANT: tenant = optarg; break;
		case OPT_JSON: p.json = true; break;
		case OPT_CHECKPOINTS: checkpoints = true; break;
		default: return usage_error("ls: unknown or incomplete option");
		}
	}
	if (optind + 1 < argc)
		return usage_error("ls: unexpected argument '%s'", argv[optind + 1]);
	if (!sink_url)
		return usage_error("ls: --sink URL is required");
	if (optind < argc) {
		if (tenant || checkpoints)
			return usage_error("ls: TENANT lists one tenant's generations; drop --tenant and --checkpoints");
		return cmd_ls_generations(sink_url, argv[optind], p.json);
	}
	if (checkpoints && tenant)
		return usage_error("ls: --checkpoints lists the whole sink; drop --tenant");
	if (checkpoints)
		return cmd_ls_checkpoints(sink_url, p.json);
	sink = ws_sink_open_flags(sink_url, WS_SINK_EXISTING, &rc);
	if (!sink) {
		fprintf(stderr, "walship: %s\n", ws_errmsg());
		return rc == WS_ECONFIG ? EXIT_USAGE : EXIT_FAIL;
	}
	rc = ws_list_tenants(sink, tenant, ls_cb, &p);
	ws_sink_close(sink);
	if (rc) {
		/* A tenant's own problem was printed with it; say how it ended. */
		if (p.unreadable)
			fprintf(stderr, "walship: ls: %u tenant%s could not be read\n", p.unreadable,
				p.unreadable == 1 ? "" : "s");
		else
			fprintf(stderr, "walship: ls: %s\n", ws_errmsg());
		return rc == WS_ECONFIG ? EXIT_USAGE : EXIT_FAIL;
	}
	if (tenant && p.nothing) {
		/* As verify and restore say of it: a name nothing was shipped under. */
		fprintf(stderr, "walship: ls: tenant %s: nothing stored (no watermark, no object)\n", tenant);
		return EXIT_FAIL;
	}
	return EXIT_OK;
}

/* Problems verify found; nokey of them: contents it could not check (no key). */
struct verify_count {
	unsigned n, nokey;
};

static void verify_problem(const char *tenant, const char *key, int err, const char *detail, void *arg)
{
	struct verify_count *c = arg;
	c->n++;
	c->nokey += err == WS_ENOKEY;
	(void)tenant;
	(void)key;
	fprintf(stderr, "walship: verify: %s%s\n", err == WS_ENOKEY ? "not checked: " : "", detail);
}

static void verify_orphan(const char *key, const char *kind, void *arg)
{
	(void)arg;
	printf("orphan %s %s\n", kind, key);
}

/*
 * --orphans also lists every object nothing names (one "orphan KIND KEY"
 * line each, then "orphans: N"); they never change the exit status, unless
 * --fail-on-orphans: then any orphan exits 1.
 */
static int cmd_verify(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "sink", required_argument, NULL, OPT_SINK },
		{ "tenant", required_argument, NULL, OPT_TENANT },
		{ "orphans", no_argument, NULL, OPT_ORPHANS },
		{ "fail-on-orphans", no_argument, NULL, OPT_FAIL_ORPHANS },
		{ "key-file", required_argument, NULL, OPT_KEY_FILE },
		{ "parallelism", required_argument, NULL, OPT_PARALLELISM },
		OPT_HELP_ENTRY,
		{ NULL, 0, NULL, 0 },
	};
	const char *sink_url = NULL, *tenant = NULL, *key_file = NULL;
	struct ws_sink *sink;
	struct verify_count problems = { 0, 0 };
	unsigned parallelism = 0;
	bool orphans = false, fail_orphans = false;
	uint64_t norphans = 0;
	int c, rc, orc = 0;

	uint64_t seen = 0;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		const char *twice = ws_cli_twice(opts, c, &seen);
		if (twice)
			return usage_error("--%s given twice", twice);
		switch (c) {
		case 'h': return ws_cli_help("verify");
		case OPT_SINK: sink_url = optarg; break;
		case OPT_KEY_FILE: key_file = optarg; break;
		case OPT_TENANT: tenant = optarg; break;
		case OPT_ORPHANS: orphans = true; break;
		case OPT_FAIL_ORPHANS: orphans = fail_orphans = true; break;
		case OPT_PARALLELISM:
			if (parse_parallelism("verify", optarg, &parallelism))
				return EXIT_USAGE;
			break;
		default: return usage_error("verify: unknown or incomplete option");
		}
	}
	if (optind < argc)
		return usage_error("verify: unexpected argument '%s'", argv[optind]);
	if (!sink_url)
		return usage_error("verify: --sink URL is required");
	if (!(sink = sink_open_par(sink_url, key_file, parallelism, &rc)))
		return rc;
	rc = ws_verify(sink, tenant, verify_problem, &problems);
	if (rc == WS_ECONFIG) {
		ws_sink_close(sink);
		fprintf(stderr, "walship: verify: %s\n", ws_errmsg());
		return EXIT_USAGE;
	}
	const bool unchecked = rc && problems.n && problems.n == problems.nokey;
	if (unchecked) {
		printf("verify: INCOMPLETE (everything checked passed; the contents of %u object%s not checked: "
		       "no key, give --key-file or WALSHIP_KEY_FILE)\n", problems.nokey, problems.nokey == 1 ? "" : "s");
	} else if (rc) {
		if (!problems.n)
			fprintf(stderr, "walship: verify: %s\n", ws_errmsg());
		printf("verify: FAILED (%u problem%s)\n", problems.n ? problems.n : 1, problems.n == 1 ? "" : "s");
	} else {
		printf("verify: ok\n");
	}
	if (orphans) {
		orc = ws_verify_orphans(sink, tenant, verify_orphan, NULL, &norphans);
		if (orc) {
			fprintf(stderr, "walship: verify --orphans: %s\n", ws_errmsg());
			printf("orphans: not listed\n");
		} else {
			printf("orphans: %" PRIu64 "\n", norphans);
			if (fail_orphans && norphans)
				fprintf(stderr, "walship: verify: %" PRIu64 " orphan%s (--fail-on-orphans)\n", norphans,
					norphans == 1 ? "" : "s");
		}
	}
	ws_sink_close(sink);
	if ((rc && !unchecked) || orc || (fail_orphans && norphans))
		return EXIT_FAIL;
	if (unchecked)
		return EXIT_UNCHECKED;
	return EXIT_OK;
}

/* ---- the command table ------------------------------------------------ */

static int cmd_help(int argc, char **argv);
static int cmd_version(int argc, char **argv);

/*
 * Every command, with the summary `walship help` lists and the help its
 * -h/--help prints. Each option the command's getopt table takes must
 * appear in its help (tests/integration/test_help.sh checks it against the
 * option tables of this file and cmd_checkpoint.c).
 */
static const struct command {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *summary;
	const char *help;
} commands[] = {
	{ "replicate", cmd_replicate, "ship the WAL of SQLite databases to a sink as it is written",
	  "usage: walship replicate [OPTIONS] [NAME=]DB_PATH...\n"
	  "\n"
	  "Ship the WAL of each database to the sink as it is written, until SIGINT or\n"
	  "SIGTERM (then drain: a last tail of every tenant, made durable; exit 0), or\n"
	  "once with --once. Tenants come from the arguments and from --config's\n"
	  "[tenant.NAME] sections; NAME defaults to the file's name without its\n"
	  "extension. Options override the config file's [engine] keys.\n"
	  "\n"
	  "options:\n"
	  "  --sink URL                  file:///absolute/dir or s3://BUCKET[/PREFIX][?PARAMS]\n"
	  "  --config FILE               INI file: [engine], [shard.N] and [tenant.NAME] sections\n"
	  "  --shards N                  shards, 1..256: each a thread with its own io_uring and ring\n"
	  "  --policy block|throttle|shed\n"
	  "                              backpressure policy of every shard that sets none\n"
	  "  --metrics-addr HOST:PORT    serve GET /metrics (Prometheus text) there; port 0 picks one\n"
	  "  --epoch N                   owner epoch written into every watermark (fencing)\n"
	  "  --pointer-generation N      owner pointer generation (fencing)\n"
	  "  --interval-ms N             batch_age_ms_max of every shard that sets none, 1..86400000\n"
	  "  --checkpoint-interval-s N   flush and take a checkpoint of the sink every N seconds\n"
	  "  --once                      ship what is committed now, drain and exit\n"
	  "  --json                      one JSON object per line on stdout for each outcome, and for\n"
	  "                              each state a --follow replica applied\n"
	  "  --events[=NAME,...]         one JSON line on stdout per event of those tenants (all when\n"
	  "                              none named): update, faulted, progressed (docs/EVENTS.md)\n"
	  "  --follow NAME=REPLICA_DB    keep REPLICA_DB a live SQLite replica of tenant NAME, readable\n"
	  "                              at any moment (repeatable; docs/EVENTS.md \"Replicas\")\n"
	  "  --compression zstd|none     how every shard that sets none compresses batches and snapshots\n"
	  "                              (default: zstd on s3://, none on file://)\n"
	  "  --key-file FILE             encrypt with FILE's last key (AES-256-GCM; one 64-hex-digit key\n"
	  "                              a line); default $WALSHIP_KEY_FILE; [shard.N] key_file still wins\n"
	  "  --quiet                     no per-tenant start-up lines\n"
	  "  --verbose                   debug log\n"
	  "  --force-pread               read the WAL with pread(2), not io_uring\n"
	  "  -h, --help                  this help\n"
	  "\n"
	  "exit status: 0 ok; 1 a tenant's last tail failed; 2 usage or configuration\n"
	  "error; 3 every tenant's last tail was fenced.\n" },
	{ "restore", cmd_restore, "write a tenant's database at its latest state, a frame, a time or a checkpoint",
	  "usage: walship restore --sink URL --tenant NAME [--frame N | --time RFC3339 | --checkpoint ID|latest]\n"
	  "                       [--force] [--key-file FILE] [--parallelism N] -o OUT_DB\n"
	  "\n"
	  "Write a standalone database (rollback-journal mode) equal to the tenant's\n"
	  "source at its latest shipped commit, or at the last commit at or before\n"
	  "--frame or --time, or at a checkpoint's cut. Everything is verified first;\n"
	  "nothing is written when the result cannot be proven complete.\n"
	  "\n"
	  "options:\n"
	  "  --sink URL                  the sink to read\n"
	  "  --tenant NAME               the tenant to restore\n"
	  "  --frame N                   the last commit at or before frame N of the current WAL generation\n"
	  "  --frame GENERATION:N        the same in a stored WAL generation, across re-bases (as\n"
	  "                              `walship ls --sink URL TENANT` names it: g00000000-0123456789abcdef:N)\n"
	  "  --time RFC3339              the last state shipped at or before that time (2026-11-30T12:00:00Z),\n"
	  "                              in any chain still stored (across re-bases)\n"
	  "  --checkpoint ID|latest      the tenant exactly at a checkpoint's cut\n"
	  "  --force                     replace a regular file at OUT_DB (never a link, device or live database)\n"
	  "  --key-file FILE             keys to open encrypted objects (default $WALSHIP_KEY_FILE)\n"
	  "  --parallelism N             objects fetched at once, 1 to 256 (default 8); each is still\n"
	  "                              verified in chain order before it is applied\n"
	  "  -o, --output OUT_DB         where to write the database\n"
	  "  -h, --help                  this help\n"
	  "\n"
	  "exit status: 0 restored; 1 refused or failed (nothing written); 2 usage error.\n" },
	{ "follow", cmd_follow, "keep a live SQLite replica of one tenant from the sink alone",
	  "usage: walship follow --sink URL --tenant NAME -o REPLICA_DB [--interval-ms N] [--json]\n"
	  "                      [--key-file FILE]\n"
	  "\n"
	  "Keep REPLICA_DB a live replica of the tenant on any host that reads the sink:\n"
	  "rebuilt from the newest checkpoint or the whole chain, then each committed\n"
	  "transaction of each new manifest applied atomically, so that sqlite3 readers\n"
	  "of REPLICA_DB (with a busy timeout) always see a committed state of the\n"
	  "source. The watermark is polled with a conditional read (no LIST); the replica\n"
	  "is rebuilt by itself after a re-base or when retention removed what it held.\n"
	  "Runs until SIGINT or SIGTERM.\n"
	  "\n"
	  "options:\n"
	  "  --sink URL                  the sink to read\n"
	  "  --tenant NAME               the tenant to follow\n"
	  "  -o, --output REPLICA_DB     the replica (created as an empty WAL database if missing)\n"
	  "  --interval-ms N             between watermark reads that found nothing new (default 100;\n"
	  "                              every 10 ms around the next watermark write expected, once\n"
	  "                              the source writes it at a steady pace of 4 x N or slower)\n"
	  "  --json                      one JSON line per state applied on stdout: tenant, applied\n"
	  "                              (image or transaction), tx_id, pages, db_pages, source_ms\n"
	  "                              and lag_ms (now minus the source time of its tail)\n"
	  "  --key-file FILE             keys to open encrypted objects (default $WALSHIP_KEY_FILE)\n"
	  "  -h, --help                  this help\n"
	  "\n"
	  "exit status: 0 stopped by a signal; 1 failed (an object that does not verify, an unknown\n"
	  "tenant, a replica that is no database or is in use); 2 usage error.\n" },
	{ "ls", cmd_ls, "list the tenants (or the checkpoints) a sink holds",
	  "usage: walship ls --sink URL [--tenant NAME | --checkpoints | TENANT] [--json]\n"
	  "\n"
	  "List each tenant's watermark (owner, WAL generation, last frame, when it was\n"
	  "written) and how many objects and bytes it holds; or, with --checkpoints,\n"
	  "every stored checkpoint, newest first; or, with TENANT, each WAL generation\n"
	  "of that tenant still stored, newest first, across re-bases: its chain (0 the\n"
	  "live one), how it started, its first and last restorable frame and time.\n"
	  "\n"
	  "options:\n"
	  "  --sink URL                  the sink to read\n"
	  "  --tenant NAME               only this tenant\n"
	  "  --checkpoints               list the sink's checkpoints instead of its tenants\n"
	  "  TENANT                      list that tenant's stored WAL generations\n"
	  "  --json                      one JSON object per line\n"
	  "  -h, --help                  this help\n"
	  "\n"
	  "exit status: 0 ok; 1 a tenant could not be read; 2 usage error.\n" },
	{ "verify", cmd_verify, "check every object and link a sink holds",
	  "usage: walship verify --sink URL [--tenant NAME] [--orphans | --fail-on-orphans] [--key-file FILE]\n"
	  "                      [--parallelism N]\n"
	  "\n"
	  "Check every object and link of each tenant's chain, and the artifacts\n"
	  "of every stored checkpoint; report each problem on stderr.\n"
	  "\n"
	  "options:\n"
	  "  --sink URL                  the sink to read\n"
	  "  --tenant NAME               only this tenant\n"
	  "  --orphans                   also list every object nothing names\n"
	  "                              (\"orphan KIND KEY\" lines, then \"orphans: N\")\n"
	  "  --fail-on-orphans           as --orphans, and any orphan exits 1\n"
	  "  --key-file FILE             keys to open encrypted objects (default $WALSHIP_KEY_FILE);\n"
	  "                              without them, their structure is checked, not their contents\n"
	  "  --parallelism N             objects fetched at once, 1 to 256 (default 8)\n"
	  "  -h, --help                  this help\n"
	  "\n"
	  "exit status: 0 everything verifies; 1 a problem was found (or an orphan,\n"
	  "with --fail-on-orphans); 2 usage error; 4 all that could be checked verifies,\n"
	  "but encrypted contents were not checked (no key).\n" },
	{ "checkpoint", cmd_checkpoint, "take a consistent checkpoint of every tenant of a sink",
	  "usage: walship checkpoint --sink URL [--config FILE] [--epoch N]\n"
	  "\n"
	  "Take a checkpoint: a consistent cut across every tenant of the sink, with\n"
	  "one standalone database per tenant, decided durably (Commit or Abort).\n"
	  "Prints the checkpoint as one JSON object.\n"
	  "\n"
	  "options:\n"
	  "  --sink URL                  the sink (else [engine] sink of --config)\n"
	  "  --config FILE               replicate's config file: its sink and epoch\n"
	  "  --epoch N                   the epoch to decide at (default: the config's, else 0)\n"
	  "  -h, --help                  this help\n"
	  "\n"
	  "exit status: 0 committed; 1 failed, aborted, or another writer's was decided\n"
	  "first; 2 usage error.\n" },
	{ "retention", cmd_retention, "delete what the latest committed checkpoint makes unneeded",
	  "usage: walship retention --sink URL [--config FILE] [--keep-checkpoints N] [--dry-run] [--json]\n"
	  "\n"
	  "Protect the latest committed checkpoint and everything newer; delete older\n"
	  "checkpoints and each tenant's objects older than the protected cut (never\n"
	  "one the live chain names). Prints each deleted key.\n"
	  "\n"
	  "options:\n"
	  "  --sink URL                  the sink (else [engine] sink of --config)\n"
	  "  --config FILE               replicate's config file: its sink\n"
	  "  --keep-checkpoints N        keep the N newest committed checkpoints and\n"
	  "                              everything since the oldest of them: a restore\n"
	  "                              by time or frame reaches back to its cut\n"
	  "                              (default 1, 1..1000000)\n"
	  "  --dry-run                   print what would be deleted, delete nothing\n"
	  "  --json                      one JSON object instead of one key per line\n"
	  "  -h, --help                  this help\n"
	  "\n"
	  "exit status: 0 ok; 1 failed (the protected checkpoint did not verify: nothing\n"
	  "deleted); 2 usage error.\n" },
	{ "forget", cmd_forget, "remove a tenant from a sink for good",
	  "usage: walship forget --sink URL [--config FILE] --tenant NAME [--json]\n"
	  "\n"
	  "Remove a tenant for good: record it as removed (checkpoints/removed/NAME)\n"
	  "and delete its watermark, so checkpoints stop requiring it (a checkpoint\n"
	  "that misses a tenant the previous one named is refused otherwise) and the\n"
	  "retention after the next checkpoint deletes its objects. Stop shipping it\n"
	  "first: a tenant of that name shipped again is a new tenant.\n"
	  "\n"
	  "options:\n"
	  "  --sink URL                  the sink (else [engine] sink of --config)\n"
	  "  --config FILE               replicate's config file: its sink\n"
	  "  --tenant NAME               the tenant to remove\n"
	  "  --json                      print the result as one JSON object\n"
	  "  -h, --help                  this help\n"
	  "\n"
	  "exit status: 0 removed; 1 failed (no such tenant, the sink); 2 usage error.\n" },
	{ "repair", cmd_repair, "rebuild a damaged or lost checkpoints/deployment or checkpoints/head",
	  "usage: walship repair --sink URL [--config FILE] [--dry-run] [--json]\n"
	  "\n"
	  "Rebuild checkpoints/deployment or checkpoints/head when it cannot be decoded\n"
	  "(or is missing while the rest of the checkpoint namespace is there), from\n"
	  "what every other checkpoint object at the sink shows; every command that\n"
	  "meets one names it and this command. Each is one compare-and-swap against\n"
	  "the damaged bytes, so a writer that moves first wins (run again). An object\n"
	  "that decodes is never touched: then nothing is repaired, exit 0.\n"
	  "Prints each object rebuilt, and what it holds now.\n"
	  "\n"
	  "options:\n"
	  "  --sink URL                  the sink (else [engine] sink of --config)\n"
	  "  --config FILE               replicate's config file: its sink\n"
	  "  --dry-run                   print what would be written, write nothing\n"
	  "  --json                      one JSON object instead of one line per object\n"
	  "  -h, --help                  this help\n"
	  "\n"
	  "exit status: 0 repaired, or nothing to repair; 1 failed (the object changed\n"
	  "meanwhile: run again; records of two deployments: nothing written); 2 usage error.\n" },
	{ "help", cmd_help, "list the commands, or show one command's options",
	  "usage: walship help [COMMAND]\n"
	  "       walship COMMAND --help\n"
	  "\n"
	  "Without COMMAND, list the commands; with it, that command's options.\n" },
	{ "version", cmd_version, "print walship's version",
	  "usage: walship version\n"
	  "       walship --version\n" },
};

#define COMMAND_COUNT (sizeof(commands) / sizeof(commands[0]))

static const struct command *command_find(const char *name)
{
	for (size_t i = 0; i < COMMAND_COUNT; i++)
		if (!strcmp(commands[i].name, name))
			return &commands[i];
	return NULL;
}

static void print_usage(FILE *f)
{
	fputs("usage: walship COMMAND [OPTIONS]\n\ncommands:\n", f);
	for (size_t i = 0; i < COMMAND_COUNT; i++)
		fprintf(f, "  %-11s %s\n", commands[i].name, commands[i].summary);
	fputs("\nURL: file:///absolute/dir or s3://BUCKET[/PREFIX][?PARAMS]\n"
	      "Run 'walship COMMAND --help' (or 'walship help COMMAND') for a command's options.\n",
	      f);
}

int ws_cli_help(const char *name)
{
	const struct command *c = command_find(name);
	if (!c)
		return usage_error("unknown command '%s'", name);
	fputs(c->help, stdout);
	return EXIT_OK;
}

static bool is_help(const char *arg) { return !strcmp(arg, "-h") || !strcmp(arg, "--help"); }

static int cmd_help(int argc, char **argv)
{
	if (argc > 2)
		return usage_error("help: one command at most ('%s' is one too many)", argv[2]);
	if (argc == 2)
		return ws_cli_help(is_help(argv[1]) ? "help" : argv[1]);
	print_usage(stdout);
	return EXIT_OK;
}

static int cmd_version(int argc, char **argv)
{
	if (argc > 1)
		return is_help(argv[1]) ? ws_cli_help("version") :
					  usage_error("version: unexpected argument '%s'", argv[1]);
	printf("walship %s\n", ws_version());
	return EXIT_OK;
}

int main(int argc, char **argv)
{
	const char *cmd = argc > 1 ? argv[1] : NULL;
	const struct command *c;
	/* A reader of stdout that goes away (a log shipper restarted) is no
	 * reason to die mid-drain: writes to it fail, replication goes on. */
	signal(SIGPIPE, SIG_IGN);
	if (cmd && !strcmp(cmd, "replicate")) {
		/* A SIGINT or SIGTERM from here until replicate_run reads them from
		 * its signalfd stays pending instead of killing the process with
		 * nothing said: a stop asked for while the configuration is read
		 * still drains (replicate_run unblocks them again for --once). */
		sigset_t stop;
		stop_signals(&stop);
		sigprocmask(SIG_BLOCK, &stop, NULL);
	}
	if (!cmd)
		return usage_error("missing command");
	if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h"))
		cmd = "help";
	else if (!strcmp(cmd, "--version"))
		cmd = "version";
	c = command_find(cmd);
	if (!c)
		return usage_error("unknown command '%s'", cmd);
	/* getopt starts at argv[1] = the command name. */
	return c->run(argc - 1, argv + 1);
}
