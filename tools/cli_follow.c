/*
 * replicate --follow NAME=REPLICA_DB: a live SQLite replica of each named
 * tenant, fed by the event channel (core/replica.h, docs/EVENTS.md
 * "Replicas"). The channel's thread (cli_events.c) hands each event to the
 * tenant's feed: Changed slices are buffered until their Progressed, which
 * applies them as one transaction; a Hydrated rebuilds the replica; a
 * Faulted query, or one whose replica refused a transaction, is
 * subscribed again for a fresh Hydrated, its cause logged on stderr.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "replica.h"

struct ws_cli_follow {
	size_t n;
	struct ws_replica **replica;
	struct ws_replica_feed **feed;
	const char **names, **paths;
	struct ws_cli_events *channel;
	bool json;              /* a line on stdout for each state applied */
};

static size_t find(const struct ws_cli_follow *f, const char *name)
{
	for (size_t i = 0; name && i < f->n; i++)
		if (strcmp(f->names[i], name) == 0)
			return i;
	return SIZE_MAX;
}

static bool on_event(void *ctx, const char *name, const struct ws_event *x)
{
	struct ws_cli_follow *f = ctx;
	size_t i = find(f, name);
	if (i == SIZE_MAX)
		return false;
	uint64_t before = ws_replica_tx(f->replica[i]);
	int rc = ws_replica_feed(f->feed[i], x);
	if (rc == 1) { /* the channel subscribes a faulted query again itself, unless its worker is gone */
		bool lost = x->u.faulted.cause == WS_CAUSE_WORKER_LOST;
		fprintf(stderr, "walship: follow: tenant %s: faulted (%s): %s; %s\n", name,
			ws_fault_cause_name(x->u.faulted.cause), x->u.faulted.reason,
			lost ? "the replica stays at its last transaction" : "subscribing again");
		return false;
	}
	if (rc < 0) {
		fprintf(stderr, "walship: follow: tenant %s: %s; subscribing again for a new image\n", name,
			ws_errmsg());
		nanosleep(&(struct timespec){ .tv_nsec = 200 * 1000000L }, NULL); /* not a tight loop on a stuck replica */
		return true;
	}
	if (x->kind == WS_EVENT_UPDATE && x->u.update.kind == WS_UPDATE_HYDRATED) {
		fprintf(stderr, "walship: follow: tenant %s: replica %s rebuilt at tx_id %llu\n", name, f->paths[i],
			(unsigned long long)x->u.update.u.hydrated.tx_id);
		if (f->json)
			ws_cli_emit_json(ws_cli_applied_json(name, "image", x->u.update.u.hydrated.tx_id,
							     (uint32_t)x->u.update.u.hydrated.pages,
							     (uint32_t)x->u.update.u.hydrated.pages));
	} else if (f->json && x->kind == WS_EVENT_PROGRESSED && ws_replica_tx(f->replica[i]) != before) {
		struct ws_replica_feed_stats st;
		ws_replica_feed_stats(f->feed[i], &st);
		ws_cli_emit_json(ws_cli_applied_json(name, "transaction", x->u.progressed.tx_id, st.last_pages,
						     st.last_db_pages));
	}
	return false;
}

void ws_cli_follow_stop(struct ws_cli_follow *f)
{
	if (!f)
		return;
	ws_cli_events_stop(f->channel);
	for (size_t i = 0; i < f->n; i++) {
		ws_replica_feed_free(f->feed ? f->feed[i] : NULL);
		ws_replica_close(f->replica ? f->replica[i] : NULL);
	}
	free(f->replica);
	free(f->feed);
	free(f->names);
	free(f->paths);
	free(f);
}

static int open_one(struct ws_cli_follow *f, size_t i, const struct ws_cli_follow_spec *s)
{
	int err = 0;
	f->names[i] = s->name;
	f->paths[i] = s->replica;
	f->replica[i] = ws_replica_open(s->replica, &err);
	if (f->replica[i])
		f->feed[i] = ws_replica_feed_new(f->replica[i], 0, &err);
	if (!f->feed[i])
		fprintf(stderr, "walship: follow: tenant %s: %s\n", s->name, ws_errmsg());
	return f->feed[i] ? 0 : err;
}

struct ws_cli_follow *ws_cli_follow_start(struct ws_engine *e, const struct ws_cli_follow_spec *specs, size_t n,
					  bool json)
{
	struct ws_cli_follow *f = calloc(1, sizeof(*f));
	if (!f || !(f->replica = calloc(n, sizeof(*f->replica))) || !(f->feed = calloc(n, sizeof(*f->feed))) ||
	    !(f->names = calloc(n, sizeof(*f->names))) || !(f->paths = calloc(n, sizeof(*f->paths)))) {
		fprintf(stderr, "walship: follow: out of memory\n");
		goto fail;
	}
	f->n = n;
	f->json = json;
	for (size_t i = 0; i < n; i++)
		if (open_one(f, i, &specs[i]) != 0)
			goto fail;
	f->channel = ws_cli_channel_start(e, f->names, n, on_event, f);
	if (!f->channel)
		goto fail;
	return f;
fail:
	ws_cli_follow_stop(f);
	return NULL;
}
