/*
 * The event tests' host (test_core_events*): a record of every state the
 * source committed (xxh64 of its database image after each commit), and a
 * replica rebuilt from the events, a page map that buffers Changed slices
 * until their Progressed and checks the ordering the channel promises
 * (docs/EVENTS.md) as it goes.
 */
#ifndef WS_EVREPLICA_H
#define WS_EVREPLICA_H

#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>

#include "testutil.h"
#include "walship.h"

#define STATES_MAX 4096

struct record {
	uint64_t hash[STATES_MAX]; /* xxh64 of the database image after each commit */
	unsigned n;
};

uint64_t image_hash(const uint8_t *img, uint64_t bytes);
/* The writer's database as it committed it (its own connection, no transaction open). */
void record_state(struct record *r, sqlite3 *w);
/* The index of the state of hash h, or -1: not a state the writer committed. */
int find_state(const struct record *r, uint64_t h);

struct replica {
	uint8_t *img;
	uint64_t pages;
	uint32_t page_size;
	/* Changed slices buffered until their Progressed. */
	uint32_t *pend_pgno;
	uint8_t *pend_pages;
	size_t npend, cap;
	uint32_t pend_db_pages;
	uint64_t last_tx;        /* the last tx_id applied (or hydrated at) */
	unsigned slices_in_txn, max_slices_in_txn;
	bool hydrated;
};

void replica_free(struct replica *r);
/* A Hydrated: the replica is its image, whatever it held or buffered. */
void replica_hydrate(struct replica *r, const struct ws_event *e);
/* A Changed: buffered (after the last Progressed, never a slice of one applied). */
void replica_buffer(struct replica *r, const struct ws_event *e);
/* Progressed: apply what was buffered, in WAL order; returns the image's hash. */
uint64_t replica_apply(struct replica *r, uint64_t tx);
/*
 * Any Progressed of the tenant: a marker (its last tx_id again, nothing
 * buffered: docs/EVENTS.md "Markers") applies nothing and returns false;
 * else replica_apply, its hash in *hash, true. A tx_id before the last
 * fails the test.
 */
bool replica_progress(struct replica *r, uint64_t tx, uint64_t *hash);

/* batch_age_ms_max of the engines ev_engine_up makes (default 50). */
extern uint32_t ev_engine_age_ms;
/* An engine of `shards` shards over a file:// sink (batch_frames_max 0: the default). */
struct ws_engine *ev_engine_up(const char *sink_url, unsigned shards, uint32_t batch_frames_max,
			       uint64_t wal_ckpt_bytes, uint64_t ring_bytes);
void ev_add_tenant(struct ws_engine *e, const char *name, const char *db, int shard);
struct ws_events *ev_channel(struct ws_engine *e, uint32_t deadline_ms);
uint64_t ev_subscribe1(struct ws_events *ev, const char *tenant);
/* The next event, which must come within 20 s. */
void ev_next_ok(struct ws_events *ev, struct ws_event *out);

#endif
