/*
 * walship follow: a live replica of one tenant on another host, from the
 * sink alone (the follower of walship.h, "Following a tenant from the
 * sink"), written by the replica applier so that sqlite3 readers of the
 * replica always see a committed state of the source.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "cmd_follow.h"
#include "config.h"
#include "follow.h"
#include "replica.h"
#include "walship.h"

#define EXIT_OK 0
#define EXIT_FAIL 1
#define EXIT_USAGE WS_CLI_EXIT_USAGE

enum { OPT_SINK = 1000, OPT_TENANT, OPT_JSON, OPT_INTERVAL, OPT_KEY_FILE };

static volatile int g_stop;

static void on_signal(int sig)
{
	(void)sig;
	g_stop = 1;
}

struct fol {
	struct ws_follow *f;
	struct ws_replica *r;
	const char *tenant;
	bool json;
	int replica_rc;           /* the replica refused a state: not the sink's problem */
};

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One JSON line per state applied: its tx_id and its lag behind the source. */
static void print_applied(const struct fol *x, const char *what, uint64_t tx, uint32_t pages, uint32_t db_pages)
{
	json_t *o = ws_cli_applied_json(x->tenant, what, tx, pages, db_pages);
	int64_t src = ws_follow_source_ms(x->f);
	json_object_set_new(o, "source_ms", json_integer(src));
	json_object_set_new(o, "lag_ms", json_integer(now_ms() - src));
	ws_cli_emit_json(o);
}

static int on_image(void *arg, uint64_t tx, const uint8_t *img, uint64_t pages, uint32_t ps)
{
	struct fol *x = arg;
	int rc = ws_replica_image(x->r, tx, img, pages, ps);
	x->replica_rc = rc;
	if (!rc)
		fprintf(stderr, "walship: follow: tenant %s: replica rebuilt at tx_id %" PRIu64 "\n", x->tenant, tx);
	if (!rc && x->json)
		print_applied(x, "image", tx, (uint32_t)pages, (uint32_t)pages);
	return rc;
}

static int on_apply(void *arg, uint64_t tx, const uint32_t *pgno, const uint8_t *pages, uint32_t n, uint32_t ps,
		    uint32_t db_pages)
{
	struct fol *x = arg;
	int rc = ws_replica_apply(x->r, tx, pgno, pages, n, ps, db_pages);
	x->replica_rc = rc;
	if (!rc && x->json)
		print_applied(x, "transaction", tx, n, db_pages);
	return rc;
}

/* An error the next poll may not meet again (the store, a race with
 * retention or a writer): logged, and the follower goes on. */
static bool passing(int rc)
{
	return rc != WS_ENOTFOUND && rc != WS_ECORRUPT && rc != WS_EFORMAT && rc != WS_ECONFIG && rc != -EINVAL &&
	       rc != -ENOMEM && rc != WS_ETOOBIG;
}

/* Follow until SIGINT/SIGTERM (0) or an error that stays. */
static int follow_loop(struct ws_sink *sink, struct fol *x, uint32_t poll_ms)
{
	static const struct ws_follow_ops ops = { on_image, on_apply };
	struct ws_follow_config fc = { .tenant = x->tenant, .poll_ms = poll_ms };
	struct sigaction sa;
	int rc;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	if ((rc = ws_follow_open(sink, &fc, &ops, x, &x->f)) != 0)
		return rc;
	for (;;) {
		x->replica_rc = 0;
		rc = ws_follow_run(x->f, &g_stop);
		if (!rc || x->replica_rc || !passing(rc))
			break;
		fprintf(stderr, "walship: follow: tenant %s: %s; trying again\n", x->tenant, ws_errmsg());
		nanosleep(&(struct timespec){ .tv_sec = 1 }, NULL);
	}
	ws_follow_close(x->f);
	return rc;
}

int cmd_follow(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "sink", required_argument, NULL, OPT_SINK },
		{ "tenant", required_argument, NULL, OPT_TENANT },
		{ "output", required_argument, NULL, 'o' },
		{ "interval-ms", required_argument, NULL, OPT_INTERVAL },
		{ "json", no_argument, NULL, OPT_JSON },
		{ "key-file", required_argument, NULL, OPT_KEY_FILE },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *sink_url = NULL, *out = NULL, *key_file = NULL;
	struct fol x = { 0 };
	unsigned long interval = 0;
	struct ws_sink *sink;
	char *end;
	int c, rc, err = 0;

	while ((c = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
		switch (c) {
		case 'h': return ws_cli_help("follow");
		case OPT_SINK: sink_url = optarg; break;
		case OPT_KEY_FILE: key_file = optarg; break;
		case OPT_TENANT: x.tenant = optarg; break;
		case 'o': out = optarg; break;
		case OPT_JSON: x.json = true; break;
		case OPT_INTERVAL:
			errno = 0;
			interval = strtoul(optarg, &end, 10);
			if (errno || *end || !*optarg || interval < 1 || interval > 60000)
				return ws_cli_usage("--interval-ms: '%s' must be 1..60000", optarg);
			break;
		default: return ws_cli_usage("follow: unknown or incomplete option");
		}
	}
	if (optind < argc)
		return ws_cli_usage("follow: unexpected argument '%s'", argv[optind]);
	if (!sink_url || !x.tenant || !out || !*out)
		return ws_cli_usage("follow: --sink, --tenant and -o are required");
	if (!(sink = ws_cli_sink_open(sink_url, key_file, &rc)))
		return rc;
	x.r = ws_replica_open(out, &err);
	if (!x.r) {
		fprintf(stderr, "walship: follow: %s\n", ws_errmsg()); /* it names the replica */
		ws_sink_close(sink);
		return EXIT_FAIL;
	}
	rc = follow_loop(sink, &x, (uint32_t)interval);
	if (rc)
		fprintf(stderr, "walship: follow: tenant %s: %s\n", x.tenant, ws_errmsg());
	ws_replica_close(x.r);
	ws_sink_close(sink);
	if (rc == -EINVAL || rc == WS_ECONFIG)
		return x.replica_rc ? EXIT_FAIL : EXIT_USAGE;
	return rc ? EXIT_FAIL : EXIT_OK;
}
