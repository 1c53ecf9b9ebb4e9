/*
 * A host that embeds libwalship, through its public API only (walship.h):
 * it owns a few SQLite databases and writes to them, while an engine ships
 * their WAL to a sink. It shows the calls a storage host makes:
 *
 *   ws_engine_create       shards (threads) and the sink connections
 *   ws_engine_add_tenant   one per database, while the engine runs
 *   on_outcome             what each tail did (called on a shard's thread)
 *   ws_engine_flush        "ship everything committed so far, now"
 *   ws_events_open, ws_events_subscribe, ws_events_next, ws_events_close
 *                          follow the tenants in the same process: each
 *                          one's baseline (Hydrated), then the pages of
 *                          every transaction (Changed) and its commit
 *                          (Progressed), printed as they are read
 *   ws_engine_foreach_tenant, ws_engine_shard_metrics, ws_engine_metrics_text
 *   ws_engine_stop, ws_engine_destroy
 *
 *   usage: host SINK_URL WORKDIR [TENANTS]
 *
 * Creates WORKDIR/tenant-N.db (N = 0..TENANTS-1, default 3), each in WAL
 * mode, replicates them to SINK_URL (file:///abs/dir or s3://...) while
 * writing rows, subscribes to them all and prints the events of each
 * transaction as it is shipped ("host: event ..."), flushes, prints each
 * tenant's and shard's metrics and exits 0 only when every tenant's rows
 * were shipped without an error and every transaction was seen committed
 * on the event channel (docs/EVENTS.md). Restore
 * any tenant afterwards with `walship restore --sink SINK_URL --tenant
 * tenant-N -o OUT.db`.
 *
 * Build against an installed walship: examples/CMakeLists.txt
 * (find_package(walship)) or examples/Makefile (pkg-config).
 */
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "walship.h"
#include "ws_log.h"

#define TENANTS_MAX 64
#define PATH_BYTES 4096
#define ROWS_BEFORE 50   /* written before the tenant is added: its first tail re-bases */
#define ROUNDS 5         /* then this many transactions while the engine runs */
#define ROWS_PER_ROUND 40

/* Outcome counts, by kind; on_outcome runs on the shard threads. */
static atomic_ulong outcomes[WS_OUTCOME_ERROR + 1];
static atomic_ulong tail_errors, tails_deferred;

static void on_outcome(const char *tenant, const struct ws_outcome *o, int err, void *arg)
{
	(void)arg;
	atomic_fetch_add(&outcomes[o->kind], 1);
	if (o->kind == WS_OUTCOME_ERROR && o->u.error.deferred) {
		/* The store throttled: tried again after its Retry-After, and
		 * the next Streamed counts these refusals. Not a failure. */
		atomic_fetch_add(&tails_deferred, 1);
		return;
	}
	if (o->kind == WS_OUTCOME_ERROR) {
		/* err == o->u.error.code; the message names the tenant. */
		fprintf(stderr, "host: tail failed (%d): %s\n", err, o->u.error.message);
		atomic_fetch_add(&tail_errors, 1);
		return;
	}
	if (o->kind == WS_OUTCOME_STREAMED && o->u.streamed.frame_count)
		printf("host: tenant %s: streamed frames %llu..%llu\n", tenant,
		       (unsigned long long)o->u.streamed.first_frame, (unsigned long long)o->u.streamed.last_frame);
	else if (o->kind == WS_OUTCOME_RESTARTED)
		printf("host: tenant %s: restarted, frames 1..%llu\n", tenant,
		       (unsigned long long)o->u.restarted.last_frame);
	else if (o->kind != WS_OUTCOME_EMPTY)
		printf("host: tenant %s: %s\n", tenant, ws_outcome_name(o->kind));
}

/* walship's log lines, through the host's own logging. */
static void on_log(enum ws_log_level level, const char *msg, void *arg)
{
	(void)arg;
	fprintf(stderr, "host: walship %s: %s\n", level == WS_LOG_ERROR ? "error" : "warning", msg);
}

static int exec_sql(sqlite3 *db, const char *sql)
{
	char *msg = NULL;
	if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) {
		fprintf(stderr, "host: sqlite: %s: %s\n", sql, msg ? msg : "?");
		sqlite3_free(msg);
		return -1;
	}
	return 0;
}

/* One transaction of n rows. */
static int write_rows(sqlite3 *db, int n, int round)
{
	char sql[256];
	if (exec_sql(db, "BEGIN"))
		return -1;
	for (int i = 0; i < n; i++) {
		snprintf(sql, sizeof(sql), "INSERT INTO events(round, body) VALUES(%d, printf('%%0300d', %d))",
			 round, i);
		if (exec_sql(db, sql))
			return -1;
	}
	return exec_sql(db, "COMMIT");
}

/* One event, as a line. Its pointers stay valid until the next ws_events_next. */
static void print_event(const struct ws_event *ev, bool marker)
{
	if (ev->kind == WS_EVENT_FAULTED) {
		printf("host: event faulted query %llu: %s (%s)\n", (unsigned long long)ev->u.faulted.query_id,
		       ev->u.faulted.reason, ws_fault_cause_name(ev->u.faulted.cause));
	} else if (ev->kind == WS_EVENT_PROGRESSED) {
		printf("host: event progressed %s worker %u tx %u:%u%s\n", ev->tenant, ev->u.progressed.worker,
		       WS_TX_CHAIN(ev->u.progressed.tx_id), WS_TX_FRAME(ev->u.progressed.tx_id),
		       marker ? " (a marker: nothing newer)" : "");
	} else if (ev->u.update.kind == WS_UPDATE_HYDRATED) {
		printf("host: event hydrated %s tx %u:%u, %llu pages of %u bytes\n", ev->tenant,
		       WS_TX_CHAIN(ev->u.update.u.hydrated.tx_id), WS_TX_FRAME(ev->u.update.u.hydrated.tx_id),
		       (unsigned long long)ev->u.update.u.hydrated.pages, ev->u.update.page_size);
	} else {
		printf("host: event changed %s %u pages from frame %u%s\n", ev->tenant, ev->u.update.u.changed.count,
		       WS_TX_FRAME(ev->u.update.u.changed.position),
		       ev->u.update.u.changed.db_pages ? ", with the commit" : "");
	}
}

/*
 * Read the channel until every tenant has seen `want` commits in all
 * (Progressed), printing each event; -1 on a Faulted or when none comes
 * for 10 s. A host that applies the pages keeps the Changed of a tenant
 * until its Progressed (docs/EVENTS.md); this one only prints them. A
 * Progressed at the tenant's last tx_id again (last_tx: its Hydrated's or
 * last Progressed's) is a marker: its worker has nothing newer of it, so
 * the combined query can advance; no commit, nothing to apply
 * (docs/EVENTS.md "Markers").
 */
static int read_events(struct ws_events *ch, const char (*name)[32], unsigned tenants, unsigned *progressed,
		       uint64_t *last_tx, unsigned want)
{
	for (;;) {
		struct ws_event ev;
		unsigned done = 0;
		for (unsigned i = 0; i < tenants; i++)
			done += progressed[i] >= want;
		if (done == tenants)
			return 0;
		if (ws_events_next(ch, &ev, 10000) != 0) {
			fprintf(stderr, "host: no event in 10 s\n");
			return -1;
		}
		bool marker = false;
		for (unsigned i = 0; ev.kind != WS_EVENT_FAULTED && i < tenants; i++) {
			if (strcmp(ev.tenant, name[i]) != 0)
				continue;
			if (ev.kind == WS_EVENT_UPDATE && ev.u.update.kind == WS_UPDATE_HYDRATED) {
				last_tx[i] = ev.u.update.u.hydrated.tx_id;
			} else if (ev.kind == WS_EVENT_PROGRESSED && ev.u.progressed.tx_id > last_tx[i]) {
				last_tx[i] = ev.u.progressed.tx_id;
				progressed[i]++;
			} else if (ev.kind == WS_EVENT_PROGRESSED) {
				marker = true;
			}
		}
		print_event(&ev, marker);
		if (ev.kind == WS_EVENT_FAULTED)
			return -1;
	}
}

static int print_tenant(const struct ws_tenant_metrics *m, void *arg)
{
	unsigned *unshipped = arg;
	printf("host: tenant %-10s shard %u  tails %llu  frames %llu  bytes %llu  puts %llu  last frame %llu  "
	       "last outcome %s  watermark age %llu ms\n",
	       m->tenant, m->shard, (unsigned long long)m->tails, (unsigned long long)m->frames_shipped,
	       (unsigned long long)m->bytes_shipped, (unsigned long long)m->puts,
	       (unsigned long long)m->last_frame, ws_outcome_name(m->last_outcome),
	       (unsigned long long)m->rpo.watermark_age_ms);
	if (m->frames_shipped == 0 || m->errors || m->fenced || !m->rpo.has_watermark)
		(*unshipped)++;
	return 0;
}

int main(int argc, char **argv)
{
	struct ws_shard_config shard[2];
	struct ws_engine_config ec;
	struct ws_engine *e = NULL;
	struct ws_events *ch = NULL;
	const char *names[TENANTS_MAX];
	unsigned progressed[TENANTS_MAX] = { 0 };
	uint64_t last_tx[TENANTS_MAX] = { 0 };
	uint64_t query = 0;
	sqlite3 *db[TENANTS_MAX] = { 0 };
	char name[TENANTS_MAX][32];
	char path[PATH_BYTES];
	unsigned tenants = 3, unshipped = 0;
	char *text = NULL;
	size_t text_len = 0;
	int err = 0, rc = 1;

	if (argc < 3 || argc > 4) {
		fprintf(stderr, "usage: host SINK_URL WORKDIR [TENANTS]\n");
		return 2;
	}
	if (argc == 4 && (sscanf(argv[3], "%u", &tenants) != 1 || tenants == 0 || tenants > TENANTS_MAX)) {
		fprintf(stderr, "host: TENANTS: '%s' must be 1..%d\n", argv[3], TENANTS_MAX);
		return 2;
	}
	printf("host: libwalship %s\n", ws_version());
	ws_log_set_level(WS_LOG_WARN);
	ws_log_set_sink(on_log, NULL);

	/* The application's databases, with rows from before replication. */
	for (unsigned i = 0; i < tenants; i++) {
		snprintf(name[i], sizeof(name[i]), "tenant-%u", i);
		snprintf(path, sizeof(path), "%s/%s.db", argv[2], name[i]);
		if (sqlite3_open(path, &db[i]) != SQLITE_OK) {
			fprintf(stderr, "host: open %s: %s\n", path, sqlite3_errmsg(db[i]));
			goto out;
		}
		sqlite3_busy_timeout(db[i], 5000); /* walship may hold the write lock for one tail */
		if (exec_sql(db[i], "PRAGMA journal_mode=WAL") ||
		    exec_sql(db[i], "CREATE TABLE IF NOT EXISTS events(id INTEGER PRIMARY KEY, round INT, body TEXT)") ||
		    write_rows(db[i], ROWS_BEFORE, 0))
			goto out;
	}

	/* Two shards with the defaults (64 MiB ring each, block policy). */
	for (unsigned s = 0; s < 2; s++)
		ws_shard_config_default(&shard[s]);
	memset(&ec, 0, sizeof(ec));
	ec.sink_url = argv[1];
	ec.shards = 2;
	ec.shard = shard;
	ec.epoch = 1;
	ec.on_outcome = on_outcome;
	e = ws_engine_create(&ec, &err);
	if (!e) {
		fprintf(stderr, "host: engine: %s (%s)\n", ws_errmsg(), ws_strerror(err));
		goto out;
	}
	for (unsigned i = 0; i < tenants; i++) {
		struct ws_tenant_config tc = { .name = name[i], .shard = -1 };
		snprintf(path, sizeof(path), "%s/%s.db", argv[2], name[i]);
		tc.db_path = path;
		if ((err = ws_engine_add_tenant(e, &tc)) != 0) {
			fprintf(stderr, "host: add %s: %s\n", name[i], ws_errmsg());
			goto out;
		}
		printf("host: tenant %s on shard %u\n", name[i], ws_engine_shard_of(e, name[i]));
	}

	/* Follow every tenant, as one query: each one's Hydrated is on the
	 * channel when this returns. The host must read the channel within
	 * deadline_ms (500 by default) of each event, or the query is shed. */
	ch = ws_events_open(e, &(struct ws_events_config){ .deadline_ms = 0 }, &err);
	for (unsigned i = 0; i < tenants; i++)
		names[i] = name[i];
	if (!ch || (err = ws_events_subscribe(ch, names, tenants, &query)) != 0) {
		fprintf(stderr, "host: events: %s\n", ws_errmsg());
		goto out;
	}

	/* The application goes on writing; the shards ship on change, and
	 * each transaction comes back on the channel once its shard read it. */
	for (int round = 1; round <= ROUNDS; round++) {
		for (unsigned i = 0; i < tenants; i++)
			if (write_rows(db[i], ROWS_PER_ROUND, round))
				goto out;
		if (read_events(ch, name, tenants, progressed, last_tx, (unsigned)round))
			goto out;
	}
	printf("host: events: query %llu saw %d commits of each of %u tenants, 0 faulted\n",
	       (unsigned long long)query, ROUNDS, tenants);
	ws_events_close(ch); /* before the engine stops */
	ch = NULL;
	/* Everything committed so far, durable at the sink. */
	if ((err = ws_engine_flush(e)) != 0) {
		fprintf(stderr, "host: flush: %s\n", ws_errmsg());
		goto out;
	}

	if ((err = ws_engine_foreach_tenant(e, print_tenant, &unshipped)) != 0)
		goto out;
	for (unsigned s = 0; s < ws_engine_shards(e); s++) {
		struct ws_shard_metrics sm;
		if ((err = ws_engine_shard_metrics(e, s, &sm)) != 0)
			goto out;
		printf("host: shard %u  tenants %u  tails %llu  frames %llu  puts %llu  ring %llu bytes (high water "
		       "%llu)  reads by %s\n",
		       sm.shard, sm.tenants, (unsigned long long)sm.tails, (unsigned long long)sm.frames_shipped,
		       (unsigned long long)sm.puts, (unsigned long long)sm.ring_bytes,
		       (unsigned long long)sm.ring_high_water, sm.read_path);
	}
	if ((err = ws_engine_metrics_text(e, &text, &text_len)) != 0)
		goto out;
	printf("host: Prometheus metrics: %zu bytes, e.g. %.*s", text_len,
	       (int)(strchr(text, '\n') ? strchr(text, '\n') - text + 1 : 0), text);
	free(text);

	/* Drain: a last tail of every tenant, every upload durable. */
	if ((err = ws_engine_stop(e)) != 0) {
		fprintf(stderr, "host: stop: %s\n", ws_errmsg());
		goto out;
	}
	printf("host: outcomes: %lu streamed, %lu restarted, %lu empty, %lu shed, %lu fenced; %lu deferred, "
	       "%lu failed tails\n",
	       atomic_load(&outcomes[WS_OUTCOME_STREAMED]), atomic_load(&outcomes[WS_OUTCOME_RESTARTED]),
	       atomic_load(&outcomes[WS_OUTCOME_EMPTY]), atomic_load(&outcomes[WS_OUTCOME_SHED]),
	       atomic_load(&outcomes[WS_OUTCOME_FENCED]), atomic_load(&tails_deferred), atomic_load(&tail_errors));
	if (unshipped || atomic_load(&tail_errors)) {
		fprintf(stderr, "host: %u tenant(s) not shipped cleanly\n", unshipped);
		goto out;
	}
	rc = 0;
out:
	ws_events_close(ch);
	ws_engine_destroy(e); /* stops it first if still running */
	for (unsigned i = 0; i < tenants; i++)
		sqlite3_close(db[i]);
	return rc;
}
