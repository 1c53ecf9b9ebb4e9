/*
 * The event channel from the shards (workers) to the host: the engine's
 * side (events.c) and the host's (events_host.c). docs/EVENTS.md is the
 * reference; this header is what the engine, the stream and the two
 * halves call.
 *
 * Each shard writes its events once into a ring of its own (struct
 * ws_ev_ring, bytes below), whatever the number of channels reading them:
 * a channel (struct ws_events) keeps a cursor per shard, copies each
 * record out and checks after the copy that the shard has not written
 * over it. The shard never waits for a channel: one that falls
 * lag_bytes_max behind, or leaves an event unread past its deadline, is
 * shed (its queries on that shard faulted, push_deadline) and skips ahead.
 *
 * RING RECORD (host byte order, every field 8-byte aligned; a record is a
 * multiple of 16 bytes and never wraps: a PAD record fills a ring's end):
 *   0  u64 pos        the record's ring position (bytes since the ring began)
 *   8  u32 len        header and payload, bytes
 *  12  u16 kind       REC_PAD, REC_HYDRATED, REC_CHANGED, REC_PROGRESSED,
 *                     REC_FAULT, REC_WORKER_LOST
 *  14  u16 cause      REC_FAULT: enum ws_fault_cause
 *  16  u64 tenant_id  the tenant (struct tenant.ev_id; 0: none)
 *  24  u64 tx         CHANGED: (chain << 32) | first frame; PROGRESSED: the
 *                     tx_id; HYDRATED: the image's tx_id
 *  32  u64 query_id   HYDRATED: the query
 *  40  u32 count      CHANGED: pages; HYDRATED: the channel slot
 *  44  u32 page_size
 *  48  i64 mono_ns    when it was written (the deadline counts from here)
 *  56  u64 aux        HYDRATED: the channel slot's generation; CHANGED: the
 *                     database's pages after the commit it ends with (0: none);
 *                     PROGRESSED: WS_EV_MARKER for an idle tenant's marker (its
 *                     tx the last Progressed's: nothing new), else 0
 *  64  payload        CHANGED: count u32 page numbers (padded to 8), then
 *                     count pages; FAULT: the reason, NUL-terminated
 * A reader that finds pos not the position it read at, or the ring's write
 * limit past its copy, was overrun and discards the copy.
 */
#ifndef WS_EVENTS_INTERNAL_H
#define WS_EVENTS_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "core_internal.h"
#include "pipe.h"

#define WS_EV_SLOTS 64u                 /* channels open at once per engine */
#define WS_EV_RING_DEFAULT ((uint64_t)8 << 20)
#define WS_EV_RING_MIN ((uint64_t)1 << 20)
#define WS_EV_SLICE_BYTES ((size_t)256 << 10) /* one Changed record at most, header included */
#define WS_EV_MARKER 1u                 /* ev_rec.aux of a REC_PROGRESSED that is a marker */
#define WS_EV_MARKER_MS_DEFAULT 10u     /* ws_events_config.marker_ms when 0 */

enum ev_rec_kind { REC_PAD = 1, REC_HYDRATED, REC_CHANGED, REC_PROGRESSED, REC_FAULT, REC_WORKER_LOST };

struct ev_rec {
	uint64_t pos;
	uint32_t len;
	uint16_t kind;
	uint16_t cause;
	uint64_t tenant_id;
	uint64_t tx;
	uint64_t query_id;
	uint32_t count;
	uint32_t page_size;
	int64_t mono_ns;
	uint64_t aux;
};
_Static_assert(sizeof(struct ev_rec) == 64, "record header layout");

/* One shard's ring: written under the shard's read_mu only (its thread, or a lane running a tail). */
struct ws_ev_ring {
	uint8_t *mem;
	uint64_t cap;           /* bytes, a power of two */
	uint64_t head;          /* (atomic) published up to here */
	uint64_t wlim;          /* (atomic) the shard may have written up to here */
	uint32_t dead;          /* (atomic) the shard thread ended (REC_WORKER_LOST written) */
	uint64_t whead;         /* shard only: written up to here (published as head by ws_ev_flush) */
};

/* One channel's place in the engine, per shard: what the shard may read of it. */
struct ws_ev_slot {
	uint32_t live;          /* (atomic) a channel holds the slot */
	uint32_t waiting;       /* (atomic) the channel sleeps on efd */
	uint64_t gen;           /* (atomic) bumped at every open of the slot */
	int efd;                /* the slot's eventfd, for the hub's life */
	uint64_t deadline_ns, lag_bytes;
	uint32_t paused;        /* (atomic) the host is in ws_events_subscribe: no deadline runs */
	int64_t resume_ns;      /* (atomic) when it last came out: no deadline counts from before */
	uint32_t marker_ms;     /* a marker asked by the channel comes no sooner than this after the last */
	/* Per shard, nshards entries: */
	uint64_t *cursor;       /* (atomic) the channel has read up to here */
	uint32_t *interest;     /* (atomic) the channel has live queries there */
	uint64_t *shed_seq;     /* (atomic) bumped by the shard at each shed */
	int64_t *shed_ns;       /* (atomic) when; shed_why says why */
	uint32_t *shed_why;     /* (atomic) 1 deadline, 2 lag */
	uint64_t *shed_ack;     /* (atomic) the last shed_seq the channel has handled */
	uint64_t *mark_req;     /* (atomic) a tenant of the shard the channel asks a marker of (0: none) */
};

struct ws_ev_hub {
	unsigned nshards;
	struct ws_ev_ring *rings;
	struct ws_ev_slot slots[WS_EV_SLOTS];
	pthread_mutex_t mu;     /* slot allocation */
	uint64_t next_query;    /* (atomic) */
};

/*
 * One tenant's emitter, on its shard's thread while a query follows it:
 * where in the WAL its events stand. Created by the first subscription
 * (at the baseline's position), dropped by the last one going or by a
 * fault of the tenant (every query of it ends).
 */
struct ws_ev_tap {
	struct ws_ev_hub *hub;
	unsigned shard;
	uint64_t tenant_id;
	uint32_t *chain;        /* the tenant's chain counter (struct tenant), kept across taps */
	uint32_t *chain_salt;   /* [2]: the salts that chain counts */
	uint32_t subs;          /* queries following it */
	uint32_t salt1, salt2;  /* the WAL generation its position is in */
	uint64_t commit;        /* the last commit frame it emitted Progressed for (0: none yet) */
	uint64_t spec_next;     /* the next frame to emit; > commit + 1 while frames past the last
				 * commit were emitted (speculative, Changed before their commit) */
	uint32_t spec_ck[2];    /* the stored checksum of frame spec_next - 1, if ck_known */
	uint32_t commit_ck[2];  /* the stored checksum of frame commit, if commit_ck_known */
	bool ck_known;          /* it emitted frame spec_next - 1 (not so when hydrated from the file,
				 * or at a new generation, where no frame was emitted yet) */
	bool commit_ck_known;
	bool faulted;           /* a fault ended it in this tail: emit nothing more */
	bool single;            /* single-thread mode (events_single.c): a fault writes no REC_FAULT;
				 * the channel hydrates its queries again instead */
	/* An idle tenant's marker (docs/EVENTS.md "Markers"): asked by a channel, emitted by the shard. */
	bool mark_want;         /* asked, and no Progressed of it emitted since */
	uint64_t mark_at_ms;    /* not before (mono ms) */
	uint64_t mark_last_ms;  /* the last marker's time */
	/* This tail's start (ws_ev_tap_begin): how its frames follow the tap's. */
	bool began;
	uint32_t kind;          /* WS_MANIFEST_CONTINUE, _NEXT_GEN, _REBASE */
	bool prev_have;
	uint32_t prev_salt1, prev_salt2;
	uint64_t prev_last;
};

/* ---- the engine's side (events.c) --------------------------------------- */

int ws_ev_hub_create(struct ws_ev_hub **out, unsigned nshards, uint64_t ring_bytes) WS_MUST_CHECK;
void ws_ev_hub_destroy(struct ws_ev_hub *h);

/* A tail of the tapped tenant begins its scan (stream_steps.c). */
void ws_ev_tap_begin(struct ws_ev_tap *tap, uint32_t kind, bool prev_have, uint32_t prev_salt1, uint32_t prev_salt2,
		     uint64_t prev_last);
/* A collected slot of checked frames, in WAL order (stream_scan.c part_done). */
void ws_ev_tap_slot(struct ws_ev_tap *tap, const struct ws_pipe_desc *d, const uint8_t *frames);
/* Checked frames of generation gen (run: where they start, how many are
 * valid), in WAL order: what ws_ev_tap_slot hands on, and the stream's
 * read-ahead (stream_scan.c). Frames it emitted before are skipped. */
void ws_ev_tap_frames(struct ws_ev_tap *tap, const struct ws_fmt_gen *gen, const struct ws_wal_run *run,
		      const uint8_t *frames);
/* The tenant's events cannot go on: REC_FAULT for every query of it; the tap ends. */
void ws_ev_tap_fault(struct ws_ev_tap *tap, enum ws_fault_cause cause, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Publish what was written, check every channel's deadline and lag, wake sleepers.
 * Returns the mono ms by which to look again (UINT64_MAX: nothing pending). */
uint64_t ws_ev_flush(struct ws_ev_hub *h, unsigned shard);
/* A channel asks the tapped tenant's marker (gap_ms: its marker_ms). */
void ws_ev_tap_want_mark(struct ws_ev_tap *tap, uint32_t gap_ms);
/* On the shard's thread, the tenant's tail not in flight: the marker asked
 * of it, if it is due and nothing of a transaction is out past its last
 * Progressed. Returns the mono ms by which to look again (UINT64_MAX:
 * nothing to wait for by time). */
uint64_t ws_ev_tap_mark(struct ws_ev_tap *tap, uint64_t now_ms);
/* The shard thread ends: REC_WORKER_LOST. */
void ws_ev_worker_lost(struct ws_ev_hub *h, unsigned shard);

struct ws_ev_hydrate {
	/* in */
	const char *tenant;
	const char *db_path;
	uint64_t query_id;
	uint32_t slot;
	uint64_t slot_gen;
	uint64_t image_bytes_max;
	/* out */
	uint8_t *image;         /* sqlite3_malloc'd (sqlite3_free) */
	uint64_t pages;
	uint32_t page_size;
	uint64_t tx_id;
};
/*
 * On the shard thread: the committed image of the tenant's database now
 * (under its write lock, for a moment) and its position; creates the tap
 * at it (or checks the one there follows it) and writes REC_HYDRATED.
 */
int ws_ev_hydrate(struct ws_ev_hub *h, unsigned shard, struct ws_ev_tap **tapp, uint64_t tenant_id, uint32_t *chain,
		  uint32_t *chain_salt, struct ws_ev_hydrate *hy) WS_MUST_CHECK;
/* One query of the tap goes (UNSUBSCRIBE); the last one ends it. */
void ws_ev_tap_release(struct ws_ev_tap **tapp);

/* ---- single-thread mode (events_single.c) --------------------------------- */

/*
 * A channel over one stream (ws_events_open_stream): one shard, no shard
 * thread, its ring written by ws_events_tail and read by ws_events_next on
 * the host's thread. The channel (events_host.c) calls these where a
 * threaded channel posts a command to a shard.
 */
struct ws_ev_single;
/* The tenant id of the stream's tenant name; WS_ENOTFOUND (named) otherwise. */
int ws_ev_single_find(struct ws_ev_single *s, const char *name, uint64_t *tenant_id) WS_MUST_CHECK;
/* A baseline inline (ws_ev_hydrate on the channel's own hub); *tap_epoch: the tap it counts in. */
int ws_ev_single_hydrate(struct ws_ev_single *s, struct ws_ev_hydrate *hy, uint64_t *tap_epoch) WS_MUST_CHECK;
/* A query no longer counts in the tap of tap_epoch (a newer tap: nothing to do). */
void ws_ev_single_release(struct ws_ev_single *s, uint64_t tap_epoch);
/* The tap goes whatever its count: every query is to be hydrated again. */
void ws_ev_single_drop_tap(struct ws_ev_single *s);
/* The channel closes: the stream is free for another, the hub goes. */
void ws_ev_single_free(struct ws_ev_single *s);
/* ws_stream_close of the channel's stream: its calls fail WS_ECONFIG from now on. */
void ws_ev_single_stream_closed(struct ws_events *ev);

/* The channel over hub (events_host.c): e NULL and single set for a single-thread channel. */
struct ws_events *ws_ev_chan_open(struct ws_engine *e, struct ws_ev_hub *hub, struct ws_ev_single *single,
				  const struct ws_events_config *cfg, int *err);
struct ws_ev_single *ws_ev_chan_single(const struct ws_events *ev);
/* Where the channel has read shard 0's ring up to, and its bound; false: no live query reads it. */
bool ws_ev_chan_cursor(const struct ws_events *ev, uint64_t *cursor, uint64_t *lag_bytes_max);
/* Single-thread: the events since the channel's last read cannot be
 * delivered (why): they are dropped, and every query of the channel gets a
 * Hydrated again at its next ws_events_next. */
void ws_ev_chan_rehydrate(struct ws_events *ev, const char *why);

#endif
