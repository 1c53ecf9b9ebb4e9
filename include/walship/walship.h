/*
 * walship: continuous shipping of SQLite write-ahead logs to object storage,
 * and exact restore.
 *
 * Conventions: functions return 0 or a negative error (negative errno, or a
 * WS_E* code from ws_err.h); ws_errmsg() gives the detail of the last failure
 * on the calling thread, naming the tenant, the object and the cause.
 * Constructors return NULL and put the error in *err.
 */
#ifndef WALSHIP_H
#define WALSHIP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ws_err.h"

#ifdef __cplusplus
extern "C" {
#endif

#define WS_TENANT_MAX 128        /* bytes, including NUL */
#define WS_GEN_KEY_MAX 512

const char *ws_version(void);

/* ---- sinks ---------------------------------------------------------- */

/*
 * A sink handle is for one thread at a time (it holds one connection and
 * per-call state): threads that restore, verify or tail concurrently each
 * open their own. The engine opens one per shard and per upload thread.
 */
struct ws_sink;

/* "file:///abs/dir" or "s3://bucket/prefix?..." (docs/CLI.md). Errors: WS_ECONFIG, I/O errors. */
struct ws_sink *ws_sink_open(const char *url, int *err);
/* WS_SINK_EXISTING: fail with WS_ENOTFOUND rather than create the sink. */
#define WS_SINK_EXISTING 1u
struct ws_sink *ws_sink_open_flags(const char *url, unsigned flags, int *err);
void ws_sink_close(struct ws_sink *sink);

/* Object-store requests made through this sink so far (for metrics and tests). */
struct ws_sink_stats {
	uint64_t puts, gets, heads, lists, deletes;
	uint64_t bytes_put, bytes_got;
};
void ws_sink_get_stats(const struct ws_sink *sink, struct ws_sink_stats *out);

/* ---- generations, policies, outcomes --------------------------------- */

/* One incarnation of a -wal file: checkpoint sequence and salt pair. */
struct ws_wal_generation {
	uint32_t checkpoint_seq;
	bool has_salt;              /* false: watermark predates salts (format v1) */
	uint32_t salt1, salt2;
};

enum ws_policy {
	WS_POLICY_BLOCK = 0,
	WS_POLICY_THROTTLE = 1,
	WS_POLICY_SHED = 2,
};
const char *ws_policy_name(enum ws_policy p);

/*
 * When a tail's watermark carries its manifest (docs/FORMAT.md "Watermark"):
 * a tail whose frames go inside its manifest (inline_batch_bytes_max) then
 * writes one object, the watermark, and the tails after it merge what they
 * ship into that manifest until it is stored. PRESSED (the default): while
 * the store holds writes back (it refused one in the last 10 s, or the
 * pacer is spacing them out); ALWAYS; NEVER.
 */
enum ws_carry {
	WS_CARRY_PRESSED = 0,
	WS_CARRY_ALWAYS = 1,
	WS_CARRY_NEVER = 2,
};
const char *ws_carry_name(enum ws_carry c);
/* The enum ws_carry whose ws_carry_name is name: 0, or WS_ECONFIG. */
int ws_carry_parse(const char *name, enum ws_carry *out) WS_MUST_CHECK;

struct ws_backpressure_report {
	enum ws_policy policy;
	uint64_t spill_high_water;  /* high-water spill occupancy in this call, bytes */
	uint64_t frames_shed;
	uint64_t throttle_retries;
};

struct ws_rpo_status {
	/* now - the watermark's time: everything the source had committed by
	 * then is durable (when the tail that wrote it began, if it shipped all
	 * it found; a partial ship, shed or stopped at its work bound, leaves it
	 * where the last complete one put it). The age of the stream's own
	 * watermark is measured on the monotonic clock. */
	uint64_t watermark_age_ms;
	bool has_watermark;         /* false: no watermark known yet, none at the sink or none read
				       yet (age counts from stream open) */
};

struct ws_watermark {
	uint64_t epoch;
	uint64_t pointer_generation;
	struct ws_wal_generation generation;
	uint64_t last_frame;        /* last committed WAL frame durable at the sink */
	uint64_t seq;               /* its manifest's sequence: bumps on every watermark write but one that
				     * merges into the manifest it carries (carried) */
	int64_t time_ms;            /* wall clock as of which all committed is durable (watermark_age_ms) */
	char manifest_key[WS_GEN_KEY_MAX];
	bool carried;               /* it carries that manifest (enum ws_carry), stored nowhere else yet */
};

enum ws_outcome_kind {
	WS_OUTCOME_EMPTY = 0,
	WS_OUTCOME_STREAMED,
	WS_OUTCOME_RESTARTED,
	WS_OUTCOME_SHED,
	WS_OUTCOME_FENCED,
	/* A tail that failed (only from the engine's on_outcome: the stream's
	 * own call returns the error instead). Never Empty: a host switching
	 * on the kind cannot take a failure for "nothing new". */
	WS_OUTCOME_ERROR,
};
const char *ws_outcome_name(enum ws_outcome_kind k); /* "empty", "streamed", ..., "error" */

#define WS_OUTCOME_MSG_MAX 512

/* What one ws_stream_tail_frames call did: a tagged union, one member per kind. */
struct ws_outcome {
	enum ws_outcome_kind kind;
	union {
		struct {
			struct ws_watermark watermark;
			struct ws_rpo_status rpo;
		} empty;
		struct {
			char generation_key[WS_GEN_KEY_MAX];
			uint64_t first_frame, last_frame;
			uint32_t checkpoint_seq;
			uint64_t frame_count;
			struct ws_backpressure_report backpressure;
			struct ws_rpo_status rpo;
		} streamed;
		struct {
			char generation_key[WS_GEN_KEY_MAX];
			struct ws_wal_generation previous_generation;
			struct ws_wal_generation new_generation;
			uint64_t first_frame, last_frame;
			uint64_t frame_count;
			struct ws_backpressure_report backpressure;
			struct ws_rpo_status rpo;
		} restarted;
		struct {
			uint32_t checkpoint_seq;
			uint64_t first_frame, last_frame;
			struct ws_backpressure_report backpressure;
			struct ws_rpo_status rpo;
		} shed;
		struct {
			uint64_t current_epoch, our_epoch;
			uint64_t current_pointer_generation, our_pointer_generation;
		} fenced;
		struct {
			int code;            /* the error: negative errno or WS_E* (ws_strerror) */
			char message[WS_OUTCOME_MSG_MAX]; /* its detail (ws_errmsg()), naming the tenant */
			/* The store throttled and the tail was deferred to its
			 * Retry-After (policy block or throttle): nothing
			 * acknowledged; its refusals are counted in the
			 * throttle_retries of the next Streamed/Restarted. */
			bool deferred;
			struct ws_rpo_status rpo;
		} error;
	} u;
};

/* This call's RPO snapshot (Error's too: how stale the sink is while failing);
 * NULL for Fenced (a stale owner's view is not the stream's RPO). */
const struct ws_rpo_status *ws_outcome_rpo(const struct ws_outcome *o);
/* This call's backpressure activity; NULL for Empty, Fenced (never reached the drain loop) and Error. */
const struct ws_backpressure_report *ws_outcome_backpressure(const struct ws_outcome *o);

/* ---- streams -------------------------------------------------------- */

/* ---- sealed objects: compression and encryption ------------------------ */

/*
 * How batches and snapshot parts are stored (docs/FORMAT.md "Sealed
 * objects"). WS_CODEC_DEFAULT is walship's choice by the sink: ZSTD on
 * s3:// (fewer bytes over the network, faster ships and restores), NONE on
 * file:// (README.md "Compression and encryption").
 */
enum ws_codec { WS_CODEC_DEFAULT = 0, WS_CODEC_NONE, WS_CODEC_ZSTD };

struct ws_seal_config {
	enum ws_codec codec;
	int level;                   /* zstd level, 1..19; 0 = the default (3) */
	/* A key file (one 256-bit key a line as 64 hex characters; blank lines
	 * and '#' comments allowed): the last key encrypts (AES-256-GCM), every
	 * key of it is added to the sink's keys for reading. NULL: no encryption. */
	const char *key_file;
};

/*
 * Add the keys of a key file (as ws_seal_config's) to those the sink opens
 * encrypted objects with: restore, verify and follow read through them.
 * Not while another thread reads through the sink (nor opening a stream
 * with a key file on it, which adds that file's keys too).
 * Errors: WS_ECONFIG naming the file and line (never a key), WS_ETOOBIG
 * (more than 1024 keys), -ENOENT and the file's other errors, -ENOMEM.
 */
int ws_sink_add_key_file(struct ws_sink *sink, const char *path) WS_MUST_CHECK;

/*
 * How many objects restore and verify (and every other read of a chain
 * through this sink: follow, checkpoints' images) fetch at once, ahead of
 * the one being verified and applied; WS_FETCH_PARALLELISM_DEFAULT unless
 * set. Each object is still verified in chain order before a byte of it
 * is applied, and a bad one stops a restore with it named, nothing written.
 * Memory: up to n objects held at once, and at most 32 MiB of them unless
 * one object alone is larger (docs/CLI.md "restore"). 1: one after another.
 * Not while another thread reads through the sink.
 * Errors: WS_ECONFIG (n is 0 or over WS_FETCH_PARALLELISM_MAX).
 */
#define WS_FETCH_PARALLELISM_DEFAULT 8u
#define WS_FETCH_PARALLELISM_MAX 256u
int ws_sink_set_fetch_parallelism(struct ws_sink *sink, unsigned n) WS_MUST_CHECK;

/* reader_flags: how WAL frames are read. */
#define WS_READ_FORCE_PREAD (1u << 0) /* pread(2), never io_uring (operators, tests) */
#define WS_READ_SQPOLL (1u << 1)      /* ask io_uring for a kernel submission-polling thread */

/* hint_slots at most (ws_stream_config). */
#define WS_HINT_SLOTS_MAX 1024u
#define WS_HINT_SLOTS_DEFAULT 32u

struct ws_stream_config {
	const char *tenant;          /* [A-Za-z0-9._-], 1..WS_TENANT_MAX-1 bytes */
	const char *db_path;         /* the SQLite database; its WAL is db_path + "-wal" */
	uint64_t epoch;
	uint64_t pointer_generation;
	enum ws_policy policy;
	size_t batch_bytes_max;      /* 0 = 4 MiB; also the read buffer size */
	unsigned reader_flags;       /* WS_READ_* (0 = io_uring, falling back to pread) */
	/*
	 * Once the WAL file is at least this large and fully shipped, run a
	 * PASSIVE WAL checkpoint so the application's next write restarts it.
	 * 0 = the default (4 MiB); UINT64_MAX = never (the WAL then grows while
	 * the stream holds its read mark, unless the application's own
	 * checkpoints happen to catch every frame backfilled).
	 */
	uint64_t wal_checkpoint_bytes;
	uint32_t batch_frames_max;   /* 0 = as many as batch_bytes_max holds */
	/*
	 * A tail whose new frames fit one batch of at most this many bytes
	 * (with its 96-byte header) sends that batch inside its manifest: two
	 * object writes (manifest, watermark) instead of three. 0 = the default
	 * (1 MiB); UINT64_MAX = never; at most 16 MiB (larger is taken as 16 MiB).
	 */
	uint64_t inline_batch_bytes_max;
	/* When the watermark carries the manifest (enum ws_carry; 0 = PRESSED).
	 * A carried manifest, merges included, is at most a bound drawn per
	 * tenant and sequence between 1/2 and 3/2 of inline_batch_bytes_max. */
	enum ws_carry carry;
	/*
	 * Manifest slots (docs/SLOTS.md, stage 1: restore and verify read
	 * such a tenant, checkpoint, retention, follow, ls and forget refuse
	 * it): each tail is acknowledged by one create-once manifest slot, and
	 * the watermark becomes a lane opener and a hint written at most once
	 * per hint_slots tails (0 = 32; 1..WS_HINT_SLOTS_MAX). Effective only
	 * on a store whose conditional writes fence (ws_store_cas_fences);
	 * elsewhere one log line and the watermark per tail.
	 */
	bool slots;
	uint32_t hint_slots;
	/* Compression and encryption of batches and snapshot parts; all zero:
	 * neither (version 1 objects). A key file's keys join the sink's. */
	struct ws_seal_config seal;
};


struct ws_stream;

/*
 * Open a stream: validates the config and opens the database (it never writes it)
 * (holding a read transaction while shipping: docs/DESIGN.md, "WAL checkpoints").
 * Does not touch the sink. Errors: WS_ECONFIG, -ENOENT (database missing), I/O.
 */
struct ws_stream *ws_stream_open(struct ws_sink *sink, const struct ws_stream_config *cfg, int *err);
void ws_stream_close(struct ws_stream *st);
/* WAL checkpoints this stream ran (see wal_checkpoint_bytes). */
uint64_t ws_stream_wal_checkpoints(const struct ws_stream *st);

/*
 * Ship every newly committed frame, durably, then advance the watermark.
 * On success (0) *out says what happened. Errors: WS_ENOTWAL (the -wal file
 * is not a WAL: nothing uploaded), WS_ECORRUPT/WS_EFORMAT (sink objects fail
 * verification), I/O errors; the watermark is unchanged on every error.
 */
int ws_stream_tail_frames(struct ws_stream *st, struct ws_outcome *out) WS_MUST_CHECK;

/* ---- engine: shards and tenants --------------------------------------- */

/*
 * An engine runs N shards, each one thread pinned to a core with its own
 * io_uring, its own spill ring (registered memory, WAL reads land there and
 * uploads send from there) and its own tenants. A shard wakes on change
 * (inotify on each tenant's directory), never by polling: an idle tenant
 * costs no object-store request and no CPU. docs/DESIGN.md "Engine" and
 * docs/CLI.md "Configuration file" describe every setting.
 */
#define WS_SHARDS_MAX 256

struct ws_shard_config {
	int core;                    /* CPU to pin the shard to; -1 = not pinned */
	uint64_t ring_bytes;         /* spill ring size; fixed, never grows */
	uint64_t batch_bytes_max;    /* one batch object (one ring slot) at most */
	uint32_t batch_frames_max;   /* frames per batch at most */
	uint32_t batch_age_ms_max;   /* ship a change at most this long after it is seen */
	enum ws_policy policy;       /* default for the shard's tenants */
	uint32_t uploads_in_flight;  /* batch PUTs outstanding at once */
	uint32_t retry_attempts_max; /* per request, on throttling and transient errors */
	uint32_t retry_deadline_ms;  /* per request */
	bool sqpoll;                 /* io_uring SQ polling thread */
	/*
	 * Adapting to a store that pushes back (docs/DESIGN.md, "Under throttling").
	 * adaptive: uploads in flight follow AIMD (halved on throttling, one
	 * more per window of successes, up to uploads_in_flight; Retry-After
	 * holds new uploads back), and the keys below apply; off: none of it.
	 */
	bool adaptive;
	uint32_t throttle_age_ms_max;  /* changes gather up to this long while throttled; 0 = 3/2 x batch_age_ms_max */
	uint32_t key_write_interval_ms; /* a tenant's watermark is written at most once per this long (0: no limit) */
	uint32_t tail_ms_max;          /* a tail that scanned this long ships what it has and the next goes on;
				        * 0 = batch_age_ms_max / 2 */
	uint64_t inline_batch_bytes_max; /* as ws_stream_config's: 0 = 1 MiB, UINT64_MAX = never */
	enum ws_carry carry;            /* as ws_stream_config's: 0 = PRESSED */
	bool slots;                     /* as ws_stream_config's (docs/SLOTS.md; stage 1, off by default) */
	uint32_t hint_slots;            /* as ws_stream_config's: 0 = 32 */
	/* A tenant with no acknowledged tail this long (its tails deferred,
	 * failing, or a Shed) logs a warning naming it, how many tails were
	 * deferred, the store's last answer and its RPO, again at most
	 * once per max(stall_warn_ms, 30 s) while it lasts, and one line when
	 * it ships again. 0 = 4 x batch_age_ms_max, at most 60000. */
	uint32_t stall_warn_ms;
	struct ws_seal_config seal;     /* as ws_stream_config's, for the shard's tenants */
	/*
	 * Tails of different tenants in flight at once (docs/DESIGN.md "Tails
	 * in flight"): while one waits for its fencing read, manifest or
	 * watermark write, the shard reads and ships the next due tenant. Each
	 * is a thread with its own connection to the sink; a tenant has at
	 * most one tail in flight. 1: one tail at a time, on the shard's
	 * thread; 0 = 4; at most WS_TAILS_IN_FLIGHT_MAX.
	 */
	uint32_t tails_in_flight;
	/*
	 * With tails in flight, a tenant a query follows has the commits that
	 * land while its tail writes to the store (or waits for a lane) read
	 * at once, their events sent, and shipped by its next tail without a
	 * second read (docs/EVENTS.md "Latency"). true: they wait for that
	 * next tail to read them (the baseline the benchmark compares with).
	 */
	bool read_ahead_off;
};
#define WS_TAILS_IN_FLIGHT_MAX 64
/* The defaults: core -1, 64 MiB ring, 4 MiB / 4096-frame batches, 1000 ms,
 * block, 8 uploads in flight, 10 attempts, 30000 ms, no SQPOLL; adaptive
 * on, throttle_age_ms_max 0 (1500 ms), key_write_interval_ms 1000,
 * tail_ms_max 0 (500 ms), inline_batch_bytes_max 0 (1 MiB), carry PRESSED,
 * stall_warn_ms 0 (4000 ms), tails_in_flight 4. */
void ws_shard_config_default(struct ws_shard_config *c);

/*
 * Called after every tail the engine runs, once per tail, on the shard's
 * thread or the thread of the tail's lane (tails_in_flight > 1), one call at
 * a time per shard. err != 0: the tail failed or was deferred; o->kind is then
 * WS_OUTCOME_ERROR with o->u.error.code == err and its message (also
 * ws_errmsg()). Under policy shed, a tail the throttling store refused is
 * a Shed (its frames, frames_shed, throttle_retries), err 0; under block
 * and throttle it is an Error with u.error.deferred, and the Streamed or
 * Restarted that lands next counts every refusal since the tenant's last
 * acknowledged tail in throttle_retries: summing the field over outcomes
 * counts each refusal once. Must not block long.
 */
typedef void (*ws_outcome_fn)(const char *tenant, const struct ws_outcome *o, int err, void *arg);

struct ws_engine_config {
	const char *sink_url;        /* each shard opens its own connection to it */
	unsigned shards;             /* 1..WS_SHARDS_MAX */
	const struct ws_shard_config *shard; /* shards entries */
	uint64_t epoch;              /* fencing token of every stream */
	uint64_t pointer_generation;
	uint64_t wal_checkpoint_bytes; /* as ws_stream_config; 0 = default */
	unsigned reader_flags;       /* WS_READ_* for every stream (0 = io_uring, falling back to pread) */
	ws_outcome_fn on_outcome;    /* may be NULL */
	void *arg;
	/* ws_engine_stop's drain is bounded by this long after the call: its
	 * tails end at their work bound (tail_ms_max), so the drain can stop
	 * between two, and none starts past the deadline; a tail in flight
	 * then runs to its end, each request within its own retries (a host
	 * that must stop by a hard time keeps a margin: walship's CLI gives
	 * this 90% of its own drain_ms_max). A tenant not drained by then is
	 * left (its watermark names what is durable; the next start ships the
	 * rest), marked undrained, and the stop returns -ETIMEDOUT;
	 * ws_engine_destroy then still waits for the requests in flight (the
	 * CLI exits without it). 0 = no bound (each request still has its own). */
	uint32_t drain_ms_max;
	/* Each shard's event ring (docs/EVENTS.md), allocated when the first
	 * channel opens (ws_events_open): bytes, rounded up to a power of two;
	 * 0 = 8 MiB; at least 1 MiB. */
	uint64_t events_ring_bytes;
};

struct ws_tenant_config {
	const char *name;
	const char *db_path;
	int shard;                   /* -1: a stable hash of the name picks it */
	bool has_policy;             /* override the shard's policy */
	enum ws_policy policy;
	bool has_seal;               /* override the shard's seal */
	struct ws_seal_config seal;
};

struct ws_engine;

/* Starts the shard threads. Errors: WS_ECONFIG (naming the field), sink errors. */
struct ws_engine *ws_engine_create(const struct ws_engine_config *cfg, int *err);
/* Register a tenant while shards run; it is tailed at once. Errors:
 * WS_ECONFIG (bad name, shard out of range, duplicate), -ENOENT (no database),
 * -ESHUTDOWN (the engine is stopping or stopped: it would never be shipped),
 * -EBUSY (a tenant of that name is being removed: add it once that remove
 * has returned). */
int ws_engine_add_tenant(struct ws_engine *e, const struct ws_tenant_config *t) WS_MUST_CHECK;
/* Register n tenants at once, as n ws_engine_add_tenant calls would, but
 * each shard takes all of its tenants before it tails the first (a start
 * with many tenants waits for no tail per tenant). rcs (may be NULL; n
 * entries) gets each tenant's result. Returns 0 when every tenant was
 * added, else the error of the lowest index that failed, with its detail
 * (ws_errmsg); the others stay registered. */
int ws_engine_add_tenants(struct ws_engine *e, const struct ws_tenant_config *tcs, size_t n, int *rcs) WS_MUST_CHECK;
/* Ship what the tenant has committed (never shed, as ws_engine_stop), then
 * stop streaming it. WS_ENOTFOUND if unknown; -EBUSY while another call
 * removes it; -ESHUTDOWN once the engine is stopping or stopped (the tenant
 * stays registered; ws_engine_destroy releases it). */
int ws_engine_remove_tenant(struct ws_engine *e, const char *name) WS_MUST_CHECK;
/* Tail every tenant now and wait until each tail has finished; returns the
 * first tail error (0 when all succeeded; Fenced and Shed are not errors). */
int ws_engine_flush(struct ws_engine *e) WS_MUST_CHECK;
/* From any thread, while another is in ws_engine_flush or a tenant's add or
 * remove: block stops waiting out a failing sink, now (a tail in flight
 * too) and from then on, as ws_engine_stop does first; each upload gets its
 * requests' own bounded retries, and a flush waiting on a sink that keeps
 * refusing returns its error. For a host that is stopping (a signal) while
 * a flush runs; there is no undoing it. */
void ws_engine_give_up(struct ws_engine *e);
/* Drain: a last tail of every tenant, every shard stopped, within the
 * config's drain_ms_max when set (then -ETIMEDOUT, the tenants left
 * marked undrained in their metrics). The last tails
 * ship everything committed, whatever the policy: under shed they wait for
 * ring space as block does, and an upload that runs out of retries is an
 * error, not a Shed. From the call on, block no longer waits out a failing
 * sink (a tail in flight too): each upload gets its requests' own bounded
 * retries, so a sink that is gone ends the stop with an error instead of
 * holding it for ever. Returns the first error of the final tails.
 * Idempotent. */
int ws_engine_stop(struct ws_engine *e) WS_MUST_CHECK;
/* Stops (if needed) and frees. */
void ws_engine_destroy(struct ws_engine *e);
unsigned ws_engine_shard_of(const struct ws_engine *e, const char *name); /* the stable hash choice */

struct ws_tenant_metrics {
	char tenant[WS_TENANT_MAX];
	unsigned shard;
	enum ws_policy policy;
	struct ws_rpo_status rpo;    /* watermark age now */
	uint64_t tails, errors;
	uint64_t frames_shipped, bytes_shipped, puts;
	uint64_t throttle_retries, frames_shed, sheds;
	uint64_t last_frame;         /* of the watermark */
	enum ws_outcome_kind last_outcome;
	bool fenced;                 /* the last tail was Fenced */
	uint64_t deferrals;          /* tails a throttling store refused, deferred to its Retry-After */
	uint64_t since_ack_ms;       /* since its last acknowledged tail (or its add, before one) */
	bool stalled;                /* no acknowledged tail for stall_warn_ms (warned) */
	bool undrained;              /* ws_engine_stop has begun and its final tail has not (yet) shipped
				      * all it had: after a stop, what drain_ms_max or an error left */
	uint64_t frames_read_ahead;  /* frames a query's events took from a read ahead of the next tail
				      * (while a tail wrote, or waited for a lane); that tail ships them */
};

struct ws_shard_metrics {
	unsigned shard;
	int core;
	enum ws_policy policy;
	unsigned tenants;
	uint64_t ring_bytes, ring_used, ring_high_water;
	uint64_t tails, wakeups, errors;
	uint64_t frames_shipped, bytes_shipped, puts;
	uint64_t throttle_retries, frames_shed;
	const char *read_path;       /* "io_uring" or "pread" */
	uint32_t uploads_window;     /* uploads in flight the shard allows now (AIMD; adaptive) */
	uint64_t window_decreases;   /* rounds of uploads the store throttled (each halved the window) */
	uint64_t tails_ended_early;  /* tails that stopped at tail_ms_max, the rest left to the next */
	uint64_t tails_coalesced;    /* tails started later than batch_age_ms_max while throttled */
	uint64_t tails_carried;      /* tails whose watermark carried their manifest (enum ws_carry) */
	uint64_t tails_deferred;     /* tails a throttling store refused (nothing acknowledged), tried
				      * again after its Retry-After while the shard's other tenants went on */
	uint64_t tails_key_waited;   /* tails whose watermark write waited for key_write_interval_ms, the
				      * rest of the tail done (started ahead of it: adaptive, with lanes) */
};

int ws_engine_shard_metrics(struct ws_engine *e, unsigned shard, struct ws_shard_metrics *out) WS_MUST_CHECK;
int ws_engine_tenant_metrics(struct ws_engine *e, const char *name, struct ws_tenant_metrics *out) WS_MUST_CHECK;
typedef int (*ws_tenant_metrics_fn)(const struct ws_tenant_metrics *m, void *arg);
/* Every tenant, in registration order; stops at fn's first non-zero return. */
int ws_engine_foreach_tenant(struct ws_engine *e, ws_tenant_metrics_fn fn, void *arg);
unsigned ws_engine_shards(const struct ws_engine *e);
/* All metrics in Prometheus text exposition format; *out is malloc'd. */
int ws_engine_metrics_text(struct ws_engine *e, char **out, size_t *len) WS_MUST_CHECK;

/* ---- events: the channel to the host (docs/EVENTS.md) ------------------ */

/*
 * A host subscribes to a tenant, or to a set of tenants on any shards (a
 * query), on a channel, and reads the channel's events: Update{query_id,
 * Hydrated} once per tenant of the query (a committed baseline: the
 * database image at a transaction), then Update{query_id, Changed} slices
 * (the pages each transaction writes, in WAL order) and Progressed{worker,
 * tx_id} once the worker saw the commit and put every Changed slice of it
 * on the channel before; Faulted{query_id, reason, cause} ends a query.
 *
 * tx_id: (chain << 32) | commit frame. chain counts the WAL generations of
 * the tenant this engine has read (a WAL restart or a re-base onto another
 * WAL starts the next one); the commit frame is the frame number of the
 * transaction's commit frame in that WAL. Monotonic per tenant for the
 * engine's life; a Hydrated image of a database with no frame in its WAL
 * is at frame 0 of its chain.
 */
#define WS_TX_CHAIN(tx) ((uint32_t)((tx) >> 32))
#define WS_TX_FRAME(tx) ((uint32_t)(tx))
#define WS_EVENTS_REASON_MAX 256

enum ws_event_kind {
	WS_EVENT_UPDATE = 1,
	WS_EVENT_FAULTED,
	WS_EVENT_PROGRESSED,
};
enum ws_update_kind {
	WS_UPDATE_HYDRATED = 1,
	WS_UPDATE_CHANGED,
};
/* Why a query was faulted (the seed's FaultCause). */
enum ws_fault_cause {
	WS_CAUSE_DERIVE = 1,         /* the tenant's WAL could not be decoded, or its events cannot be
				      * derived without a gap (a re-base onto a WAL no tail followed) */
	WS_CAUSE_WORKER_LOST,        /* a shard thread of the query ended (the engine stopped) */
	WS_CAUSE_ROLLBACK,           /* frames delivered as Changed never committed (rolled back, or the
				      * WAL restarted over them) */
	WS_CAUSE_PUSH_DEADLINE,      /* the host did not drain in deadline_ms, or fell lag_bytes_max
				      * behind: this channel's queries on that shard were shed */
};
/* "derive", "worker_lost", "rollback", "push_deadline" ("?" otherwise). */
const char *ws_fault_cause_name(enum ws_fault_cause c);
const char *ws_update_kind_name(enum ws_update_kind k); /* "hydrated", "changed" */

/*
 * One event. Pointers (tenant, pgno, pages, image) stay valid until the
 * next ws_events_next or ws_events_close on the channel.
 */
struct ws_event {
	enum ws_event_kind kind;
	const char *tenant;          /* the tenant it concerns (NULL: a Faulted for no one tenant) */
	union {
		struct {
			uint64_t query_id;
			enum ws_update_kind kind;
			uint32_t page_size;
			union {
				struct {
					uint64_t tx_id;        /* the image is the tenant's committed state at tx_id */
					const uint8_t *image;  /* pages 1..pages, page_size bytes each */
					uint64_t pages;
				} hydrated;
				struct {
					uint64_t position;     /* (chain << 32) | frame of its first page's frame:
								* after the last Progressed tx_id of the tenant,
								* at most the next one */
					uint32_t count;        /* pages in this slice */
					uint32_t db_pages;     /* the slice ends with its transaction's commit:
								* the database's size after it, in pages
								* (0: the transaction goes on) */
					const uint32_t *pgno;  /* count page numbers, in WAL order */
					const uint8_t *pages;  /* count pages, page_size bytes each, in that order */
				} changed;
			} u;
		} update;
		struct {
			uint64_t query_id;
			enum ws_fault_cause cause;
			char reason[WS_EVENTS_REASON_MAX];
		} faulted;
		struct {
			unsigned worker;             /* the shard */
			uint64_t tx_id;              /* the tenant's transaction that committed; the
						      * tenant's last tx_id again for a marker (an
						      * idle tenant of a combined query: nothing new,
						      * nothing to apply) */
		} progressed;
	} u;
};

struct ws_events_config {
	/* The host must read an event within this long of its emission, or
	 * this channel's queries on that shard are faulted (push_deadline);
	 * the shard never waits for it. 0 = 500. A single-thread channel has
	 * none (must be 0). */
	uint32_t deadline_ms;
	/* Or fall at most this far behind a shard's event ring; 0 = the
	 * ring's size (ws_engine_config.events_ring_bytes). A single-thread
	 * channel's ring is this, rounded up to a power of two (0: 8 MiB), and
	 * past it its queries are hydrated again instead. */
	uint64_t lag_bytes_max;
	/* Queries open at once on the channel; 0 = 4096. */
	uint32_t queries_max;
	/* A Hydrated image larger than this fails the subscribe (WS_ETOOBIG);
	 * 0 = 1 GiB. */
	uint64_t image_bytes_max;
	/* A combined query's idle tenant's marker (a Progressed at its
	 * unchanged tx_id, docs/EVENTS.md "Markers") comes at most once per
	 * this many ms of the tenant's last; 0 = 10. */
	uint32_t marker_ms;
};

/* A channel: for one thread at a time. At most 64 open per engine. */
struct ws_events;

/* Errors: WS_ECONFIG (NULL engine, bad config), WS_ETOOBIG (64 channels open), -ENOMEM. */
struct ws_events *ws_events_open(struct ws_engine *e, const struct ws_events_config *cfg, int *err);
/* Unsubscribes every query of the channel and frees it. Close every channel before ws_engine_destroy. */
void ws_events_close(struct ws_events *ev);
/* Readable (POLLIN) when ws_events_next may have an event; the channel's own. */
int ws_events_fd(const struct ws_events *ev);
/*
 * Subscribe to n tenants (n >= 1, on any shards) as one query. Returns once
 * every tenant's Hydrated is on the channel (read it with ws_events_next).
 * Errors: WS_ECONFIG (NULL argument, n 0, a tenant named twice), WS_ENOTFOUND
 * (a tenant that is not registered, named), WS_ETOOBIG (queries_max, or an
 * image over image_bytes_max), -ESHUTDOWN (the engine stopped), -EAGAIN (the
 * WAL restarted under the baseline twice: try again), the database's
 * errors (named). Nothing is left subscribed on an error.
 */
int ws_events_subscribe(struct ws_events *ev, const char *const *tenants, size_t n, uint64_t *query_id) WS_MUST_CHECK;
/* No event of query_id follows. Errors: WS_ENOTFOUND (no such query, or unsubscribed already). */
int ws_events_unsubscribe(struct ws_events *ev, uint64_t query_id) WS_MUST_CHECK;
/*
 * The next event, waiting up to timeout_ms (-1: for ever, 0: not at all).
 * 0 and *out; -EAGAIN when none came in time; WS_ECONFIG on NULL.
 */
int ws_events_next(struct ws_events *ev, struct ws_event *out, int timeout_ms) WS_MUST_CHECK;

/*
 * Single-thread mode (docs/EVENTS.md "Single-thread mode"): a channel over
 * one stream (ws_stream_open), for a host that runs walship without
 * threads. One shard (worker 0), one tenant (the stream's), no shard or
 * channel thread: ws_events_tail tails the stream on the calling thread
 * and puts that tail's events on the channel; ws_events_next (timeout_ms
 * 0) reads them. As the seed's single-thread Db it never emits Faulted:
 *  - a WAL that cannot be decoded fails the ws_events_tail call
 *    (WS_ENOTWAL, naming the tenant and the file); the queries stay, and
 *    their events go on once a tail reads the WAL again;
 *  - a frame reaches the host only with its commit: what a tail read past
 *    its last commit (it stopped or failed inside a transaction) is held
 *    back and emitted by a later tail with its Progressed, so no rollback
 *    can follow a delivery;
 *  - the host that leaves more than lag_bytes_max of events unread (the
 *    seed's delta overflow), and a WAL the events cannot follow without a
 *    gap (a re-base no tail proved continuous, frames shipped by a
 *    ws_stream_tail_frames call that bypassed the channel), drop the
 *    events not read yet: every query of the channel gets a Hydrated
 *    again, at its next ws_events_next, which replaces all the host held.
 * Everything else is as an engine's channel: ws_events_subscribe,
 * unsubscribe, next, close, cv_init/cv_note; the ordering and tx_id too.
 * ws_events_fd is -1 (nothing arrives between calls).
 *
 * ws_events_open_stream errors: WS_ECONFIG (NULL stream; a stream with a
 * channel already; deadline_ms set: a single-thread channel has none, its
 * bound is lag_bytes_max, which also sizes its ring), -ENOMEM. Close the
 * channel before the stream: once the stream is closed, ws_events_tail,
 * ws_events_subscribe and a Hydrated again fail WS_ECONFIG (named). Under this mode, ws_events_subscribe also
 * fails with WS_ECONFIG for n > 1 (one shard, one tenant) and WS_ENOTFOUND
 * for a name other than the stream's; -EAGAIN when the WAL restarted since
 * the last ws_events_tail while another query follows it (tail, then
 * subscribe again); ws_events_next also fails with WS_ECONFIG for a
 * timeout_ms other than 0 (no thread emits while it waits), and with the
 * database's errors when it takes a Hydrated again (-EBUSY: its write lock
 * held 2 s, or the WAL restarted under it three times; call it again).
 */
struct ws_stream;
struct ws_events *ws_events_open_stream(struct ws_stream *st, const struct ws_events_config *cfg, int *err);
/*
 * One tail of the channel's stream (ws_stream_tail_frames: its outcome in
 * *out, its errors: WS_ENOTWAL, WS_ECORRUPT, WS_EFORMAT, I/O), its events
 * put on the channel. Also WS_ECONFIG: NULL, or an engine's channel
 * (its shards tail). A failed call still leaves on the channel the
 * transactions it read whole, each with its Progressed.
 */
int ws_events_tail(struct ws_events *ev, struct ws_outcome *out) WS_MUST_CHECK;

/*
 * A combined query's consistent view (the seed's cv_min): the host feeds
 * it every event it reads (ws_events_cv_note); cv_min advances, and note
 * returns true, only once every worker the query's tenants are on has
 * progressed since the last advance. The host then releases the Changed
 * slices it buffered for all of them. A worker whose tenants of the query
 * are idle progresses by a marker (a Progressed at a tenant's unchanged
 * tx_id, asked by the channel once another worker of the query progressed:
 * docs/EVENTS.md "Markers"), so cv_min follows a busy worker.
 */
struct ws_events_cv {
	uint64_t query_id;
	unsigned workers;            /* relevant workers */
	unsigned worker[WS_SHARDS_MAX];
	bool progressed[WS_SHARDS_MAX];
	uint64_t cv_min;             /* rounds completed */
};
/* Errors: WS_ECONFIG (NULL), WS_ENOTFOUND (no such live query). */
int ws_events_cv_init(struct ws_events *ev, uint64_t query_id, struct ws_events_cv *cv) WS_MUST_CHECK;
bool ws_events_cv_note(struct ws_events_cv *cv, const struct ws_event *e);

/* ---- restore, inspection -------------------------------------------- */

struct ws_restore_opts {
	uint64_t frame;             /* 0 = latest; else last commit <= frame of the newest generation */
	int64_t time_ms;            /* 0 = latest; else last shipped state observed at or before, in
				     * any chain still stored (across re-bases) */
	bool force;                 /* overwrite out_path if it exists */
	/* With frame: the WAL generation the frame counts in, as
	 * ws_list_generations names it (g<ckpt_seq>-<salt1><salt2>), in any
	 * chain still stored (its newest run); NULL or "": the newest of the
	 * live chain. */
	const char *generation;
};

/*
 * Rebuild tenant's database at out_path. Verifies every object and chain
 * first; on any failure writes nothing at out_path. Errors: WS_ENOTFOUND,
 * WS_EINCOMPLETE, WS_ECORRUPT, WS_EFORMAT, WS_ERANGE_, -EEXIST (no force), I/O.
 */
int ws_restore(struct ws_sink *sink, const char *tenant, const struct ws_restore_opts *opts,
	       const char *out_path) WS_MUST_CHECK;

struct ws_tenant_info {
	char tenant[WS_TENANT_MAX];
	bool has_watermark;
	struct ws_watermark watermark;
	uint32_t page_size;
	uint64_t manifests;         /* manifests in the chain (filled by verify) */
	uint64_t objects;           /* objects under the tenant's prefix */
	uint64_t bytes;
	/* Non-NULL: the watermark (or the listing) could not be read, and why;
	 * has_watermark is false. Valid during the callback only. */
	const char *error;
};

/*
 * Calls fn for each tenant (or just `tenant` if non-NULL), in name order. A
 * tenant whose watermark cannot be read is passed with info->error set and
 * the walk goes on; the first such error is returned at the end (a damaged
 * object is never WS_ECONFIG: that is for the arguments).
 */
typedef int (*ws_tenant_fn)(const struct ws_tenant_info *info, void *arg);
int ws_list_tenants(struct ws_sink *sink, const char *tenant, ws_tenant_fn fn, void *arg) WS_MUST_CHECK;

/* One WAL generation of a tenant's stored history: a run of manifests of
 * one WAL, from the live chain back through every chain a re-base links. */
struct ws_generation_info {
	char tenant[WS_TENANT_MAX];
	char generation[32];        /* g<ckpt_seq:08x>-<salt1:08x><salt2:08x> as in keys, or g-none */
	unsigned chain;             /* 0: the live chain (the watermark's); 1: the one before its re-base; ... */
	const char *start;          /* "rebase", "wal-restart", or "checkpoint" (history before its cut removed) */
	uint64_t first_frame;       /* the first frame a restore may stop at */
	uint64_t last_frame;
	int64_t first_time_ms;      /* when the first restorable state was shipped */
	int64_t last_time_ms;
	uint64_t manifests;
};
typedef int (*ws_generation_fn)(const struct ws_generation_info *g, void *arg);
/* Where a tenant's stored history ends, going back. */
enum ws_history_end {
	WS_HISTORY_FIRST = 0,   /* at the tenant's first chain: nothing was shipped before it */
	WS_HISTORY_REMOVED,     /* at history retention removed */
	WS_HISTORY_UNLINKED,    /* at a re-base that records no link to the chain before it (written
				 * by a walship that did not record links, or while the watermark
				 * carried its manifest): older chains may be stored, unreachable
				 * but by restore --checkpoint */
};
/*
 * Calls fn for each stored WAL generation of tenant, newest first, walking
 * back from the watermark through the links re-bases record (no LIST).
 * *end: where the walk ended. Errors: WS_ENOTFOUND (no watermark), a link
 * or manifest missing or damaged (named), I/O.
 */
int ws_list_generations(struct ws_sink *sink, const char *tenant, ws_generation_fn fn, void *arg,
			enum ws_history_end *end) WS_MUST_CHECK;

/* One problem found by verify. */
typedef void (*ws_problem_fn)(const char *tenant, const char *key, int err, const char *detail, void *arg);
/*
 * Verify every object of the chain the watermark names, down to its base:
 * hashes, lengths, SQLite's checksum chain, continuity. Returns 0 only when
 * everything verifies; otherwise the first error, with every problem reported
 * through fn.
 */
int ws_verify(struct ws_sink *sink, const char *tenant, ws_problem_fn fn, void *arg) WS_MUST_CHECK;

/* One object nothing names; kind says why it is there (below). */
typedef void (*ws_orphan_fn)(const char *key, const char *kind, void *arg);
/*
 * Every object under the sink (or under `tenant`/ only) that nothing names:
 * no watermark's chain, no stored checkpoint (its index, artifacts and the
 * chain behind its cut), no attempt in flight, no checkpoint singleton or
 * seal. Calls fn per orphan in key order and sets *count. Kinds
 * (docs/CHECKPOINTS.md "Orphans"): "unpublished" (a tenant object no
 * manifest names, or a manifest above its watermark's sequence: an upload
 * whose tail stopped before its watermark), "cut-off" (a manifest at or
 * below the watermark's sequence that no chain reaches, and the objects
 * only such manifests name: a chain a re-base cut off), "artifact" (of no
 * stored checkpoint nor attempt in flight), "checkpoint-index" (neither on
 * the committed chain, a seal, nor the attempt in flight's), "probe" (a
 * conditional-write probe left by a crash), "foreign" (no walship key).
 * Read-only; an object a writer is creating at that moment may be listed.
 */
int ws_verify_orphans(struct ws_sink *sink, const char *tenant, ws_orphan_fn fn, void *arg,
		      uint64_t *count) WS_MUST_CHECK;

/* ---- checkpoints and retention (docs/CHECKPOINTS.md) ------------------- */

/*
 * A checkpoint is a consistent cut across every tenant of a sink (each
 * tenant's watermark: WAL generation, last frame, manifest), decided
 * durably (Commit or Abort) in the sink's checkpoint decision store, with
 * one artifact per tenant: its whole database at the cut. An s3:// sink
 * decides through conditional writes on the bucket; a file:// sink through
 * a single-writer lease on the sink directory.
 */
struct ws_checkpoint_seal {
	const char *tenant;
	struct ws_seal_config seal;
};

struct ws_checkpoint_opts {
	uint64_t epoch;              /* decision epoch; 0 = 1 */
	const char *pipeline;        /* witness pipeline identity; NULL = "walship" */
	uint64_t participant;        /* witness participant id; 0 = 1 */
	const char *tmp_dir;         /* where images are built; NULL = $TMPDIR or /tmp */
	uint32_t wait_ms;            /* wait for a file sink's lease; 0 = 5000 */
	uint32_t peer_wait_ms;       /* wait for another writer's attempt to end; 0 = 30000 */
	bool recover;                /* shared sinks: first abort an attempt left open (crashed) */
	/* How artifacts are sealed (docs/CHECKPOINTS.md "Sealed artifacts"),
	 * as the tenants' batches are: a tenant named in tenant_seal gets its
	 * entry's, every other tenant seal. Zero: version 1 artifacts (the
	 * image as it is). Each key file's keys also join the sink's, so the
	 * previous checkpoint's artifact opens for an incremental image. */
	struct ws_seal_config seal;
	const struct ws_checkpoint_seal *tenant_seal;
	size_t tenant_seal_count;
};

struct ws_checkpoint_info {
	uint64_t id;
	uint64_t epoch;
	bool committed;              /* the decision is Commit (take: false = the winner aborted) */
	bool own;                    /* take: this call's attempt; false = another writer's durable winner */
	bool cleanup_pending;        /* take: committed, clean-up left for the next call */
	char ref_key[512];           /* checkpoints/committed/<id>-<sha>.json */
	char ref_sha256[65];
	uint64_t ref_length;
	uint64_t tenants, artifacts;
	uint64_t artifact_bytes;
	uint64_t incremental;        /* take: images built from the previous checkpoint's artifact */
	bool has_predecessor;
	uint64_t predecessor_id;
	/* list: when it was decided (its committed index written, as the store
	 * dates it) and its cut's commit time (the newest time_ms of the
	 * manifests it names, each read and checked); 0 when not known. */
	int64_t decided_ms;
	int64_t cut_time_ms;
	/* ls: its committed index (ref_key) is damaged or missing: nothing of it
	 * restores; damage says why. Only id and ref_* are set besides. */
	bool damaged;
	char damage[512];
};

/*
 * Take one checkpoint of every tenant of the sink now (protocol in
 * docs/CHECKPOINTS.md). On an error the attempt is aborted: Abort recorded,
 * its candidate sealed, its artifacts deleted; a crash leaves that to the
 * next call (or ws_checkpoint_recover).
 * Errors: WS_EFENCED (another process holds a file sink's lease),
 * WS_EPRECOND (another writer's attempt did not end in peer_wait_ms), the
 * decision store's errors (WS_EPRECOND, WS_EFORMAT, WS_ECORRUPT, WS_ECONFIG,
 * WS_ETOOBIG: docs/CHECKPOINTS.md), restore errors naming the tenant whose
 * image could not be built, I/O.
 */
int ws_checkpoint_take(struct ws_sink *sink, const struct ws_checkpoint_opts *opts,
		       struct ws_checkpoint_info *out) WS_MUST_CHECK;

/*
 * Remove tenant from the sink for good (docs/CHECKPOINTS.md "Removing a
 * tenant"): record checkpoints/removed/<tenant> with the latest Commit's ID
 * and delete the tenant's watermark, so checkpoints stop requiring it (a
 * checkpoint whose cut misses a tenant the previous one named is refused
 * otherwise) and retention deletes its objects. Stop shipping the tenant
 * first: a tenant of that name shipped again is a new tenant. Errors:
 * WS_ECONFIG (not a tenant name), WS_ENOTFOUND (nothing stored under it and
 * the latest checkpoint does not name it), the decision store's, I/O.
 */
struct ws_forget_report {
	uint64_t after_checkpoint;   /* the latest Commit when removed (0: none) */
	bool had_watermark;          /* its watermark was there and is deleted */
	bool had_objects;            /* objects are stored under it (retention deletes them) */
};
int ws_tenant_forget(struct ws_sink *sink, const char *tenant, struct ws_forget_report *rep) WS_MUST_CHECK;

/* Finish an attempt a crash left open (abort it, or finish its clean-up). */
int ws_checkpoint_recover(struct ws_sink *sink, bool *recovered) WS_MUST_CHECK;

/* What ws_checkpoint_repair found and wrote (dry run: would write). */
struct ws_repair_report {
	bool dry_run;
	uint64_t objects_read;       /* checkpoint records read to derive what was rebuilt */
	/* checkpoints/deployment */
	bool deployment_repaired;    /* rebuilt (dry run: would be) */
	char deployment_damage[512]; /* what was wrong with it */
	char deployment[33];         /* the rebuilt record: its deployment id, */
	bool deployment_fresh;       /* chosen afresh (no other record carries one), */
	bool deployment_local;       /* its authority (the sink's kind: file:// local), */
	uint64_t next_id;            /* and next_id */
	/* checkpoints/head */
	bool head_repaired;          /* rebuilt or removed (dry run: would be) */
	bool head_removed;           /* removed: no checkpoint ID was ever handed out */
	char head_damage[512];
	uint64_t latest_commit;      /* the rebuilt head: its latest Commit (0: none), */
	uint64_t latest_terminal;    /* its latest terminal, */
	bool terminal_commit;        /* which is that Commit (else an Abort), */
	uint64_t epoch, decisions;   /* its epoch and decision count */
	uint64_t in_flight;          /* the attempt whose open witness kept its candidate from counting (0: none) */
};

/*
 * Rebuild checkpoints/deployment and checkpoints/head when they cannot be
 * decoded (the head also when it is missing while committed indexes are
 * there, the deployment record when other checkpoint objects are), from
 * the rest of the sink (docs/CHECKPOINTS.md "Damaged control objects"):
 * each by one compare-and-swap against the damaged bytes (create-once when
 * absent); a valid object is never touched (both valid: nothing repaired,
 * rc 0). dry_run: derive and report, write nothing. A file:// sink's
 * writers' lease is held throughout. Errors: WS_EPRECOND (the object
 * changed while it was repaired: run again), WS_EFORMAT (records carry two
 * deployments: which one was lost cannot be told), WS_EFENCED (the lease is
 * held), I/O.
 */
int ws_checkpoint_repair(struct ws_sink *sink, bool dry_run, struct ws_repair_report *rep) WS_MUST_CHECK;

/*
 * Every stored committed checkpoint, newest first, one whose committed index
 * is damaged or missing too (info->damaged); stops at fn's non-zero return.
 */
typedef int (*ws_checkpoint_fn)(const struct ws_checkpoint_info *info, void *arg);
int ws_checkpoint_list(struct ws_sink *sink, ws_checkpoint_fn fn, void *arg) WS_MUST_CHECK;

#define WS_CHECKPOINT_LATEST 0
/*
 * Restore tenant exactly as it was at checkpoint_id's cut (or the latest
 * Commit's): its artifact, verified by length and SHA-256, then PRAGMA
 * integrity_check; a sealed artifact opened with the sink's keys. Errors:
 * WS_ENOTFOUND (no such checkpoint or tenant), WS_ECORRUPT, WS_EFORMAT (an
 * artifact version, codec or cipher this reader does not know), WS_ENOKEY
 * (the key id named; nothing written), WS_EINCOMPLETE (artifact missing),
 * -EEXIST, I/O.
 * (ws_restore of the latest state also starts from the latest Commit's
 * artifact when the tenant's chain passes through its cut.)
 */
int ws_restore_checkpoint(struct ws_sink *sink, const char *tenant, uint64_t checkpoint_id,
			  const char *out_path, bool force) WS_MUST_CHECK;

/* One key retention deletes (or, dry run, would delete). */
typedef void (*ws_retention_fn)(const char *key, void *arg);

struct ws_retention_report {
	bool ran;                    /* false: no Commit yet, nothing to protect */
	uint64_t protected_id;       /* the latest Commit, kept with everything newer */
	uint64_t deleted;            /* keys deleted (dry run: that would be) */
	uint64_t checkpoints_deleted;
	bool resumed;                /* finished a run a crash had left in flight first */
	uint64_t kept_from_id;       /* the oldest checkpoint kept (ws_retention_run_keep; else protected_id) */
};

/*
 * Retention: protect the latest Commit and everything newer; delete older
 * checkpoints (artifacts, then committed indexes) and every tenant's
 * manifests, batches and snapshot parts strictly older than the protected
 * cut's manifest. Phases advance by compare-and-swap; after a crash the
 * next run resumes from the durable phase. Errors: the decision store's,
 * I/O (the run stays in its phase and resumes).
 */
int ws_retention_run(struct ws_sink *sink, bool dry_run, ws_retention_fn fn, void *arg,
		     struct ws_retention_report *rep) WS_MUST_CHECK;
/*
 * The same, keeping the keep newest committed checkpoints (keep >= 1; 1 is
 * ws_retention_run): what is deleted is what retention would delete were
 * the oldest of them the latest, so every checkpoint kept can still be
 * restored, and restore --time reaches back to the oldest one's cut. With
 * fewer checkpoints stored, the oldest one stored is the oldest kept.
 * Errors: WS_ECONFIG (keep 0), as ws_retention_run.
 */
int ws_retention_run_keep(struct ws_sink *sink, bool dry_run, unsigned keep, ws_retention_fn fn, void *arg,
			  struct ws_retention_report *rep) WS_MUST_CHECK;

#ifdef __cplusplus
}
#endif

#endif
