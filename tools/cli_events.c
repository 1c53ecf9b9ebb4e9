/*
 * replicate --events: every event of the chosen tenants as one JSON line on
 * stdout (Jansson), the seed's field names (query_id, update, reason,
 * cause, worker, tx_id); logs stay on stderr. One query per tenant, read by
 * a thread of its own; a query faulted by anything but the end of its
 * worker is subscribed again (its new Hydrated follows). The channel and
 * its thread serve --follow too (cli_follow.c), with another handler.
 */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

struct ws_cli_events {
	struct ws_engine *e;
	struct ws_events *ev;
	pthread_t thread;
	bool started;
	int stop;               /* (atomic) the engine has stopped: drain and end */
	size_t n;
	char (*names)[WS_TENANT_MAX];
	uint64_t *query;        /* per name: its live query (0: none) */
	ws_cli_event_fn fn;     /* what is done with each event */
	void *ctx;
};

static json_t *u64(uint64_t v) { return json_integer((json_int_t)v); }

/* The event as the seed names it: {"event":..., "query_id", "update"} and so on. */
void ws_cli_print_event_json(const struct ws_event *x)
{
	json_t *o = json_object();
	switch (x->kind) {
	case WS_EVENT_UPDATE: {
		json_t *u = json_object();
		json_object_set_new(o, "event", json_string("update"));
		json_object_set_new(o, "query_id", u64(x->u.update.query_id));
		json_object_set_new(u, "kind", json_string(ws_update_kind_name(x->u.update.kind)));
		json_object_set_new(u, "page_size", u64(x->u.update.page_size));
		if (x->u.update.kind == WS_UPDATE_HYDRATED) {
			json_object_set_new(u, "tx_id", u64(x->u.update.u.hydrated.tx_id));
			json_object_set_new(u, "pages", u64(x->u.update.u.hydrated.pages));
		} else {
			json_t *pg = json_array();
			for (uint32_t i = 0; i < x->u.update.u.changed.count; i++)
				json_array_append_new(pg, u64(x->u.update.u.changed.pgno[i]));
			json_object_set_new(u, "position", u64(x->u.update.u.changed.position));
			json_object_set_new(u, "pgno", pg);
			json_object_set_new(u, "db_pages", u64(x->u.update.u.changed.db_pages));
		}
		json_object_set_new(o, "update", u);
		break;
	}
	case WS_EVENT_FAULTED:
		json_object_set_new(o, "event", json_string("faulted"));
		json_object_set_new(o, "query_id", u64(x->u.faulted.query_id));
		json_object_set_new(o, "reason", json_string(x->u.faulted.reason));
		json_object_set_new(o, "cause", json_string(ws_fault_cause_name(x->u.faulted.cause)));
		break;
	case WS_EVENT_PROGRESSED:
		json_object_set_new(o, "event", json_string("progressed"));
		json_object_set_new(o, "worker", u64(x->u.progressed.worker));
		json_object_set_new(o, "tx_id", u64(x->u.progressed.tx_id));
		break;
	}
	json_object_set_new(o, "tenant", x->tenant ? json_string(x->tenant) : json_null());
	ws_cli_emit_json(o);
}

static int subscribe_one(struct ws_cli_events *c, size_t i)
{
	const char *name = c->names[i];
	int rc = ws_events_subscribe(c->ev, &name, 1, &c->query[i]);
	if (rc) {
		c->query[i] = 0;
		fprintf(stderr, "walship: events: tenant %s: %s\n", name, ws_errmsg());
	}
	return rc;
}

/* The name an event is for: its query's (an update, a fault), or the tenant a Progressed names. */
static size_t event_index(const struct ws_cli_events *c, const struct ws_event *x)
{
	uint64_t q = x->kind == WS_EVENT_UPDATE ? x->u.update.query_id
		     : x->kind == WS_EVENT_FAULTED ? x->u.faulted.query_id : 0;
	for (size_t i = 0; i < c->n; i++)
		if (q ? c->query[i] == q : x->tenant && strcmp(x->tenant, c->names[i]) == 0)
			return i;
	return SIZE_MAX;
}

/* Query i is over (faulted, or its handler gave up on it): a fresh baseline, unless the worker is gone. */
static void resubscribe(struct ws_cli_events *c, size_t i, bool worker_lost, bool stopping)
{
	if (c->query[i] && ws_events_unsubscribe(c->ev, c->query[i]) != 0)
		fprintf(stderr, "walship: events: %s\n", ws_errmsg());
	c->query[i] = 0;
	if (!worker_lost && !stopping)
		(void)subscribe_one(c, i);
}

static void *reader(void *arg)
{
	struct ws_cli_events *c = arg;
	for (;;) {
		struct ws_event x;
		bool stopping = __atomic_load_n(&c->stop, __ATOMIC_ACQUIRE);
		int rc = ws_events_next(c->ev, &x, stopping ? 0 : 200);
		if (rc == -EAGAIN) {
			if (stopping)
				return NULL;
			continue;
		}
		if (rc) {
			fprintf(stderr, "walship: events: %s\n", ws_errmsg());
			return NULL;
		}
		size_t i = event_index(c, &x);
		bool again = c->fn(c->ctx, i == SIZE_MAX ? NULL : c->names[i], &x);
		if (i != SIZE_MAX && (again || x.kind == WS_EVENT_FAULTED))
			resubscribe(c, i, x.kind == WS_EVENT_FAULTED && x.u.faulted.cause == WS_CAUSE_WORKER_LOST,
				    stopping);
	}
}

static bool print_event(void *ctx, const char *name, const struct ws_event *x)
{
	(void)ctx;
	(void)name;
	ws_cli_print_event_json(x);
	return false;
}

struct ws_cli_events *ws_cli_events_start(struct ws_engine *e, const char *const *names, size_t n)
{
	return ws_cli_channel_start(e, names, n, print_event, NULL);
}

struct ws_cli_events *ws_cli_channel_start(struct ws_engine *e, const char *const *names, size_t n,
					   ws_cli_event_fn fn, void *ctx)
{
	struct ws_cli_events *c = calloc(1, sizeof(*c));
	int err = 0;
	if (!c || !(c->names = calloc(n, sizeof(*c->names))) || !(c->query = calloc(n, sizeof(*c->query)))) {
		fprintf(stderr, "walship: events: out of memory\n");
		goto fail;
	}
	c->e = e;
	c->n = n;
	c->fn = fn;
	c->ctx = ctx;
	for (size_t i = 0; i < n; i++)
		snprintf(c->names[i], sizeof(c->names[i]), "%s", names[i]);
	c->ev = ws_events_open(e, NULL, &err);
	if (!c->ev) {
		fprintf(stderr, "walship: events: %s\n", ws_errmsg());
		goto fail;
	}
	for (size_t i = 0; i < n; i++)
		if (subscribe_one(c, i) != 0)
			goto fail;
	if (pthread_create(&c->thread, NULL, reader, c) != 0) {
		fprintf(stderr, "walship: events: cannot start its thread\n");
		goto fail;
	}
	c->started = true;
	return c;
fail:
	ws_cli_events_stop(c);
	return NULL;
}

void ws_cli_events_stop(struct ws_cli_events *c)
{
	if (!c)
		return;
	if (c->started) {
		__atomic_store_n(&c->stop, 1, __ATOMIC_RELEASE);
		pthread_join(c->thread, NULL);
	}
	ws_events_close(c->ev);
	free(c->names);
	free(c->query);
	free(c);
}
