#ifndef WS_CLI_H
#define WS_CLI_H

#include <jansson.h>

#include "walship.h"

/* o as one whole line on stdout (whatever other threads print), then json_decref(o). */
void ws_cli_emit_json(json_t *o);

/* One JSON line on stdout for a tail_frames outcome. */
void ws_cli_print_outcome_json(const char *tenant, const struct ws_outcome *o);
/* One JSON line on stdout for a tenant listing. */
void ws_cli_print_tenant_json(const struct ws_tenant_info *t);
/* One JSON line on stdout for a stored WAL generation (ls TENANT). */
void ws_cli_print_generation_json(const struct ws_generation_info *g);
/* replicate --events (cli_events.c): one JSON line on stdout per event. */
void ws_cli_print_event_json(const struct ws_event *x);
/* A follower's line for a state it applied to its replica ("image" or
 * "transaction"), {"tenant","applied","tx_id","pages","db_pages"}, for the
 * caller to add to and emit (replicate --follow --json, walship follow --json). */
json_t *ws_cli_applied_json(const char *tenant, const char *what, uint64_t tx_id, uint32_t pages, uint32_t db_pages);
struct ws_cli_events;
/* Subscribe to each of names (one query each) and print their events from a
 * thread of its own; NULL (said on stderr) when a subscription fails. */
struct ws_cli_events *ws_cli_events_start(struct ws_engine *e, const char *const *names, size_t n);
/* After ws_engine_stop: prints what is left (the worker_lost faults), ends the thread, closes. */
void ws_cli_events_stop(struct ws_cli_events *c);
/*
 * The same channel with another handler: fn(ctx, name, event) for every
 * event, on the channel's thread (name: the tenant of names it is for,
 * NULL none); true asks for that query to be subscribed again (a fresh
 * Hydrated). A Faulted query is subscribed again whatever fn says, unless
 * its worker is gone. Stopped with ws_cli_events_stop.
 */
typedef bool (*ws_cli_event_fn)(void *ctx, const char *name, const struct ws_event *x);
struct ws_cli_events *ws_cli_channel_start(struct ws_engine *e, const char *const *names, size_t n,
					   ws_cli_event_fn fn, void *ctx);

/* replicate --follow NAME=REPLICA_DB (cli_follow.c): live SQLite replicas from the events. */
struct ws_cli_follow_spec {
	const char *name;       /* the tenant */
	const char *replica;    /* the replica's path */
};
struct ws_cli_follow;
/* Open every replica and subscribe; NULL (said on stderr) when one cannot be.
 * json: a ws_cli_applied_json line on stdout for each state applied. */
struct ws_cli_follow *ws_cli_follow_start(struct ws_engine *e, const struct ws_cli_follow_spec *specs, size_t n,
					  bool json);
void ws_cli_follow_stop(struct ws_cli_follow *f);

/* `walship NAME --help`: NAME's help on stdout; returns the exit status (0,
 * or 2 for a name that is no command). The texts are main.c's command table. */
int ws_cli_help(const char *name);

/* The sink url names, opened for reading (WS_SINK_EXISTING), with the keys
 * of key_file (--key-file), else of $WALSHIP_KEY_FILE when set, to open
 * encrypted objects. NULL (said on stderr) with *exit_code set. */
struct ws_sink *ws_cli_sink_open(const char *url, const char *key_file, int *exit_code);

#endif
