/*
 * The engine's parts (engine.c: the registry, commands and the engine's
 * life; engine_shard.c: the shard thread, its inotify names and commands;
 * engine_tail.c: one tail and what it tells the host; engine_lane.c: tails
 * in flight; engine_metrics.c).
 * Their shared structures, and who may touch which field.
 */
#ifndef WS_ENGINE_INTERNAL_H
#define WS_ENGINE_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "core_internal.h"
#include "engine.h"
#include "outcome.h"
#include "sink.h"
#include "ws_stream.h"
#include "pipe.h"
#include "events.h"
#include "ws_assert.h"

#define SMALL_BYTES ((size_t)128 << 10)   /* header/probe reads; >= one 64 KiB-page frame */
#define FDS_PER_STREAM 7
#define RETRY_MIN_MS 100
#define RETRY_MAX_MS 30000
/* While events keep coming, the inotify queue is read at most this often
 * (and at most every quarter of batch_age_ms_max): a busy writer makes one
 * event per WAL write, and waking for each of them cost more CPU than
 * shipping its frames. Identical events wait merged in the kernel's queue. */
#define EVENTS_GAP_MAX_MS 10
/* The default stall_warn_ms stays under this; repeats come at most this often. */
#define STALL_WARN_MS_MAX 60000
#define STALL_REPEAT_MS 30000
#define TAILS_IN_FLIGHT_DEFAULT 4u

struct tenant;

/* One file name a tenant answers to in its watched directory (shard.names). */
struct name_ent {
	struct name_ent *next;
	struct tenant *t;
	bool wal;            /* the -wal file (else the database file) */
};

struct tenant {
	char name[WS_TENANT_MAX];
	char *db_path;
	char *dir;           /* directory watched */
	char *db_base;       /* "x.db" and "x.db-wal" as inotify names them */
	char *wal_base;
	unsigned shard;
	struct ws_seal_config seal; /* the tenant's, or its shard's; key_file is seal_key_file */
	char *seal_key_file;
	enum ws_policy policy;
	bool removing;       /* under reg_mu: a remove's REMOVE is queued or running */
	bool adding;         /* under reg_mu: its add still waits for its ADD (the add holds it) */
	bool removed;        /* under reg_mu: a remove is done with it while adding; the add frees it */
	struct tenant *hnext; /* under reg_mu: the next of its bucket in the registry's index */

	/* Shard thread only (under read_mu: the shard thread, or the lane that
	 * runs this tenant's tail; so for every "shard thread only" below). */
	struct ws_stream *st;
	int dir_idx;
	size_t idx;          /* position in shard.tenants */
	struct name_ent ent[2];
	bool dirty;
	uint64_t due_ms;
	uint32_t retry_ms;
	uint64_t retry_at;   /* mono ms: after a failed tail, not due before this (0: none) */
	uint32_t age_ms;     /* gather time of the next tail (adapt.h; 0 or batch_age_ms_max unless throttled) */
	uint32_t index_wait_ms; /* a followed tenant's next look at a commit under way (0: none pending) */
	uint64_t wm_sent_ms; /* mono time our last watermark write for it went out (0: none yet) */
	uint32_t lead_ms, lead_dev_ms; /* its tails' time to their watermark write (ws_adapt_lead_next) */
	bool open;
	bool in_flight;      /* under the shard's read_mu: a lane runs its tail */
	struct tenant *lru_prev, *lru_next;

	/* Metrics: written by the shard thread, read by anyone (relaxed atomics). */
	uint64_t tails, errors, frames, bytes, puts, throttle, shed_frames, sheds, last_frame;
	uint64_t read_ahead;      /* frames read ahead of its next tail (ws_stream_read_ahead) */
	uint64_t ahead_at_ms;     /* shard thread: read ahead again then (a commit under way), 0: no */
	uint32_t ahead_wait_ms;   /* ... after this wait, doubled while it stays under way */
	/* The RPO's base, on the monotonic clock (a wall clock stepped back
	 * must not read a backlog as 0): the watermark's time, or when the
	 * tenant was added while no watermark is known. 0: none yet. */
	int64_t wm_mono_ms;
	int64_t added_mono_ms;
	uint32_t last_outcome;
	uint32_t fenced;
	uint64_t deferrals;
	int64_t ack_mono_ms;     /* mono ms of its last acknowledged tail (0: none yet) */
	uint32_t stalled;        /* warned: no acknowledged tail for stall_warn_ms */
	uint32_t drained;        /* the stop's drain shipped all it had */

	/* Shard thread only: a tenant that cannot ship (engine_tail.c). */
	uint64_t trouble_ms;     /* mono ms of its first unacknowledged tail since the last acknowledged one */
	uint64_t warn_ms;        /* of the last warning about it (0: none) */
	uint64_t pending_throttle; /* refusals not yet counted in an outcome (block, throttle) */
	char answer[WS_OUTCOME_MSG_MAX]; /* the store's last answer, for the warning */

	/* The event channel (events.h): ev_id is set at add and never changes;
	 * the rest is the shard thread's. */
	uint64_t ev_id;
	struct ws_ev_tap *tap;   /* while a query follows it */
	uint64_t tap_epoch;      /* bumped at every new tap: a query's UNSUBSCRIBE names the tap it counted in */
	uint32_t ev_chain;       /* tx_id's chain: the WAL generations its events have followed */
	uint32_t ev_chain_salt[2];
};

struct watched_dir {
	int wd;
	char *path;
	unsigned refs;
};

enum cmd_kind { CMD_ADD, CMD_REMOVE, CMD_FLUSH, CMD_STOP, CMD_SUBSCRIBE, CMD_UNSUBSCRIBE };

struct cmd {
	enum cmd_kind kind;
	struct tenant *t;
	int rc;
	char err[512];
	bool done;
	bool ran;            /* run by the shard (false: refused, queued behind STOP) */
	struct cmd *next;
	/* SUBSCRIBE, UNSUBSCRIBE: the tenant by name (the shard finds it among
	 * its own, so a remove meanwhile leaves nothing dangling). */
	char name[WS_TENANT_MAX];
	struct ws_ev_hydrate *hy;  /* SUBSCRIBE: in and out */
	uint64_t tap_epoch;        /* SUBSCRIBE: out; UNSUBSCRIBE: in */
	bool detached;             /* nobody waits: the shard frees it when done */
};

/*
 * One tail in flight (engine_lane.c): a thread with its own connection to
 * the sink (fencing reads, manifests, watermarks) and its own per-call
 * arrays. It runs a tail under the shard's read_mu and lets it go while
 * the tail waits for the store (ws_stream_lane).
 */
struct lane {
	struct shard *sh;
	unsigned id;
	struct ws_sink sink;       /* store: its own; keys: the shard's (sink.ring is unused) */
	struct ws_tail_work work;
	pthread_t thread;
	bool started;              /* shard thread: its store, work and thread, from its first tail on */
	bool failed;               /* shard thread: they could not be had; left out */
	struct tenant *t;          /* under read_mu: the tail to run (NULL: idle) */
};

struct shard {
	struct ws_engine *e;
	unsigned id;
	struct ws_shard_config cfg;
	pthread_t thread;
	bool started;
	struct ws_sink sink;            /* manifests, watermarks, reads */
	struct ws_store *up_store;      /* the upload thread's connection */
	struct ws_reader *reader;
	struct ws_pipe pipe;
	bool pipe_ok;
	struct ws_tail_work work;
	int ifd, evfd;

	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct cmd *cmds, *cmds_tail;

	/*
	 * Tails in flight (cfg.tails_in_flight > 1). read_mu is held by the
	 * shard thread but while it polls or waits for its lanes, and by a
	 * lane while it runs a tail but while that tail waits for the store:
	 * every field marked "shard thread only", the pipe's producer side,
	 * the reader and the event rings are touched under it.
	 */
	pthread_mutex_t read_mu;
	pthread_cond_t lane_cv;         /* a lane was given a tail, or lanes_stop */
	pthread_cond_t idle_cv;         /* a lane finished its tail */
	struct lane *lanes;
	unsigned nlanes, lanes_busy, lanes_failed;
	bool lanes_stop;
	struct ws_store *(*lane_open)(struct shard *sh, int *err); /* a lane's own connection */

	/* Shard thread only. */
	struct tenant **tenants;
	size_t n, cap;
	struct watched_dir *dirs;
	size_t ndirs;
	/* (watch descriptor, file name) -> tenants, so an inotify event costs
	 * the same with ten thousand tenants on the shard as with one. */
	struct name_ent **names;
	size_t nnames_buckets, nnames;
	struct tenant *lru_head, *lru_tail;
	unsigned open_count, open_max;
	bool stopped;

	/* Metrics. */
	uint64_t tails, wakeups, errors, frames, bytes, puts, throttle, shed_frames, high_water;
	uint64_t ended_early, coalesced, carried, deferred, key_waits;
	uint32_t tenant_count;
};

struct ws_engine {
	struct ws_engine_config cfg;
	struct ws_shard_config *shard_cfg;  /* our copy; cfg.shard points at it */
	char *sink_url;
	struct shard *shards;
	unsigned nshards;
	bool stopped;
	int stop_rc;
	/* mono ms by which ws_engine_stop's drain ends (0: no bound); set
	 * before its STOP is posted, read by the shards that run it. */
	uint64_t drain_deadline_ms;
	uint32_t stopping;              /* (atomic) ws_engine_stop has begun */

	/* The event channel's rings and channel slots: created by the first
	 * ws_events_open (under reg_mu), read by the shards (acquire). */
	struct ws_ev_hub *hub;
	uint64_t next_ev_id;            /* (atomic) tenant ids of the event channel */

	pthread_mutex_t reg_mu;         /* the registry */
	struct tenant **reg;
	size_t nreg, capreg;
	/* Its index by name: chains through tenant.hnext, nbuckets a power
	 * of two kept at least nreg (a start with 10,000 tenants looks each
	 * up as it registers it, and the CLI again for its metrics). */
	struct tenant **buckets;
	size_t nbuckets;
};

static inline uint64_t ld(const uint64_t *p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
static inline void add(uint64_t *p, uint64_t v) { __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }
static inline void st64(uint64_t *p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }
static inline void max64(uint64_t *p, uint64_t v)
{
	uint64_t cur = ld(p);
	while (v > cur && !__atomic_compare_exchange_n(p, &cur, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

/* Why a tail runs, and so what it may leave for the next one. */
enum tail_mode {
	TAIL_DUE,   /* the shard's own schedule: may stop at its work bound, may shed */
	TAIL_FLUSH, /* ws_engine_flush: ships everything committed, unless it sheds */
	TAIL_DRAIN, /* the final drain, a removal: everything committed, or an error */
};

/* The first failure of several, with its detail (for ws_fail at the end). */
struct first_err {
	int rc;
	char msg[512];
};

/* engine.c */
struct tenant *ws_eng_reg_find(struct ws_engine *e, const char *name);
void ws_eng_cmd_finish(struct shard *sh, struct cmd *c, int rc);
void ws_eng_first_err_note(struct first_err *f, int rc);
int ws_eng_first_err_done(const struct first_err *f);

/* Queue c for the shard (c->detached: and forget it); wait for a queued one. */
int ws_eng_shard_post(struct shard *sh, struct cmd *c);
/* Wake the shard's loop (its eventfd): from any thread. */
void ws_eng_shard_wake(struct shard *sh);
int ws_eng_shard_wait(struct shard *sh, struct cmd *c);

/* engine_shard.c */
void *ws_eng_shard_main(void *arg);

/* engine_tail.c */
uint64_t ws_eng_key_due(const struct shard *sh, const struct tenant *t, uint64_t at);
uint64_t ws_eng_due_after_change(const struct shard *sh, const struct tenant *t, uint64_t now);
void ws_eng_mark_due(struct tenant *t, uint64_t due);
void ws_eng_park(struct shard *sh, struct tenant *t);
/* One tail of t on lane ln (NULL: the shard thread's own sink and work). */
int ws_eng_tail_one(struct shard *sh, struct lane *ln, struct tenant *t, enum tail_mode mode);

/* engine_lane.c */
/* At shard init, before its thread: the lanes (none when tails_in_flight
 * is 1). Each opens its connection (open), work and thread when a tail
 * first needs it, so a shard with few due tenants starts few. Freed by
 * ws_eng_lanes_free. */
int ws_eng_lanes_init(struct shard *sh, struct ws_store *(*open)(struct shard *sh, int *err)) WS_MUST_CHECK;
/* The sink, work and hold a tail on lane ln uses (NULL: the shard thread's, no hold). */
void ws_eng_lane_of(struct shard *sh, struct lane *ln, struct ws_stream_lane *out);
/* Shard thread, read_mu held: hand t's due tail to an idle lane; false: none idle. */
bool ws_eng_lane_take(struct shard *sh, struct tenant *t);
static inline bool ws_eng_lane_idle(const struct shard *sh) { return sh->lanes_busy + sh->lanes_failed < sh->nlanes; }
/* Whether the shard hands its tails to lanes (else it tails on its own thread). */
static inline bool ws_eng_lanes_on(const struct shard *sh) { return sh->nlanes > sh->lanes_failed; }
/* Shard thread, read_mu held: wait until no tail is in flight. */
void ws_eng_lanes_quiesce(struct shard *sh);
/* After the shard thread ended: stop and join the lanes, close their stores. */
void ws_eng_lanes_free(struct shard *sh);
/* Warn about t if it has not shipped for stall_warn_ms; when to look again (UINT64_MAX: no trouble). */
uint64_t ws_eng_stall_check(struct shard *sh, struct tenant *t, uint64_t now);

#endif
