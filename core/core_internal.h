/* Engine internals shared by the core sources; not part of the public API. */
#ifndef WS_CORE_INTERNAL_H
#define WS_CORE_INTERNAL_H

#include "walship.h"
#include "ws_format.h"
#include "ws_store.h"
#include "ws_wal.h"

struct ws_sink {
	struct ws_store *store;
};

/* Key layout (docs/FORMAT.md "Keys"). */
#define WS_WM_NAME "wm"
int ws_key_watermark(char *out, size_t cap, const char *tenant);
/* "<tenant>/e<epoch>-p<pg>/g<seq>-<salt1><salt2>" (or ".../g-none"). */
int ws_key_gen_prefix(char *out, size_t cap, const char *tenant, uint64_t epoch, uint64_t pg,
		      const struct ws_fmt_gen *gen);

/* The watermark sequence a manifest key carries (".../m<seq:016x>-<sha>"), or 0. */
uint64_t ws_key_manifest_seq(const char *key);

/* The watermark sequence a batch or snapshot part key carries, or 0 (none:
 * a key of the format before keys carried it, or no such key). */
uint64_t ws_key_object_seq(const char *key);

/* The largest watermark read: one that carries a manifest of inline batches
 * (at most 16 MiB of them, README "Configuration file"). */
#define WS_WM_BYTES_MAX (64u << 20)
/* Load a tenant's watermark. Returns WS_ENOTFOUND when the tenant has none.
 * A watermark that carries its manifest (carried_len) gets carried NULL:
 * a reader that walks the chain from it loads it with ws_wm_load_keep,
 * whose keep holds the bytes wm->carried points into (a later read may
 * meet a newer watermark: the manifest this one carried is then gone). */
int ws_wm_load_keep(struct ws_store *s, const char *tenant, struct ws_fmt_watermark *wm, struct ws_etag *etag,
		    struct ws_buf *keep) WS_MUST_CHECK;
int ws_wm_load(struct ws_store *s, const char *tenant, struct ws_fmt_watermark *wm,
	       struct ws_etag *etag) WS_MUST_CHECK;

/* Calls fn for each manifest key under prefix (with the watermark sequence it
 * carries), in key order, every page; stops at fn's non-zero return. */
typedef int (*ws_manifest_key_fn)(const char *key, uint64_t seq, void *arg);
int ws_manifests_each(struct ws_store *s, const char *prefix, ws_manifest_key_fn fn, void *arg) WS_MUST_CHECK;

/*
 * Whether the watermark went back (a store that lost its later writes): a
 * manifest written for sequence wm->seq + 2 whose predecessor, verified by
 * its SHA-256 and length, was written for wm->seq + 1 on top of the
 * manifest the watermark names. A tail writes sequence N + 2 only after
 * reading watermark N + 1, so such a manifest proves watermark N + 1 was
 * acknowledged. thorough: look in every generation of the tenant (a LIST
 * of all its objects); else only in the watermark's manifest's own
 * directory (one LIST). The watermark is read again when evidence is
 * found: a writer may have gone on since the caller read wm, which is no
 * loss. 1 with evidence[] the manifest's key, 0 when none is found (a
 * re-base or a new generation right after the watermark hides it from this
 * check), or an error.
 */
int ws_wm_went_back(struct ws_store *s, const char *tenant, const struct ws_fmt_watermark *wm, bool thorough,
		    char evidence[WS_KEY_MAX]) WS_MUST_CHECK;

/* Read and decode manifest key into *m (b holds its bytes); with sha, it
 * must be that one (SHA-256 and len). 0, 1 when it is absent, not that one
 * or does not decode, or the read's error (negative). */
int ws_manifest_read(struct ws_store *s, const char *key, const uint8_t *sha, uint64_t len, struct ws_buf *b,
		     struct ws_fmt_manifest *m) WS_MUST_CHECK;

/* Fetch one object and check it is the one referenced: length, and the
 * header hash at hash_off. The caller's decoder then checks every hash.
 * mkey: the manifest naming it, which holds it when it is inline (key ""). */
int ws_obj_fetch(struct ws_store *s, const char *mkey, const struct ws_fmt_objref *ref, size_t hash_off,
		 struct ws_buf *out) WS_MUST_CHECK;

/* A verified manifest chain, oldest (the base) first. */
struct ws_chain {
	struct ws_fmt_manifest *m;
	char (*keys)[WS_KEY_MAX];
	size_t count;
	/* The head's bytes when the watermark carried it (m[count - 1]); NULL
	 * when the head is a stored object. */
	uint8_t *carried;
	size_t carried_len;
};

/*
 * Load the chain from the manifest the watermark names back to its REBASE
 * base, verifying each manifest's SHA-256, length and links (generation,
 * frame and checksum continuity).
 * Errors name the object: WS_ENOTFOUND/WS_EINCOMPLETE (missing link),
 * WS_ECORRUPT, WS_EFORMAT, I/O.
 */
int ws_chain_load(struct ws_store *s, const char *tenant, const struct ws_fmt_watermark *wm,
		  struct ws_chain *out) WS_MUST_CHECK;
void ws_chain_free(struct ws_chain *c);

/* ws_obj_fetch for c->m[i]'s object ref: an inline batch of a head the
 * watermark carried comes from the chain's copy of it. */
int ws_chain_obj_fetch(struct ws_store *s, const struct ws_chain *c, size_t i, const struct ws_fmt_objref *ref,
		       size_t hash_off, struct ws_buf *out) WS_MUST_CHECK;
/* Verify one batch object fully, including SQLite's checksum chain. */
int ws_batch_verify(const uint8_t *obj, size_t len, const struct ws_fmt_manifest *m,
		    const struct ws_fmt_objref *ref, const char *name, const uint32_t seed[2], uint32_t end[2],
		    struct ws_fmt_batch *hdr, const uint8_t **frames) WS_MUST_CHECK;

/* A stored generation as the seed's WalGeneration; salted=false: salts unknown. */
void ws_gen_to_public(const struct ws_fmt_gen *g, bool salted, struct ws_wal_generation *out);
void ws_gen_from_fmt(const struct ws_fmt_watermark *wm, struct ws_wal_generation *out);
/* The public view of a stored watermark. */
void ws_wm_to_public(const struct ws_fmt_watermark *w, struct ws_watermark *out);

/* ---- streams inside an engine (engine.c) ------------------------------- */

struct ws_pipe;
struct ws_reader;

/*
 * What reading and checking one slot of WAL frames found: the one result
 * the pipe fills and the tail merges (a part keeps a copy of it). `run`
 * holds the checksum chain's facts (io/ws_wal.h), the rest what the slot
 * means for the stream.
 */
struct ws_batch_check {
	bool filled;              /* read and checked (everything below holds) */
	bool cont;                /* all `want` valid and a full slot: the chain may go on */
	bool dropped;             /* past the end of the chain: not sent */
	uint32_t ship;            /* frames the object holds (0: nothing to send) */
	struct ws_wal_run run;    /* first frame, seed, valid frames, last commit, end checksum */
};

/* One object uploaded through the pipe by a tail, in publish order. */
struct ws_part {
	bool snap;                   /* snapshot part, else batch */
	bool done;
	uint32_t ref;                /* index into batches or snaps */
	int rc;
	uint64_t last_commit;        /* batch: the cursor's last commit after it */
	uint32_t commit_cksum[2];
	uint32_t commit_db_size;
	/* A checked batch (pipe.h): what its reader found, as it found it. */
	struct ws_batch_check chk;
};

/* Per-call arrays; a shard's tails run one at a time and share one. */
struct ws_tail_work {
	struct ws_fmt_objref *batches;
	struct ws_fmt_objref *snaps;
	struct ws_part *parts;
	uint32_t batches_cap, snaps_cap, parts_cap; /* grown on demand (stream.c) */
	struct ws_buf scratch;
};
int ws_tail_work_init(struct ws_tail_work *w) WS_MUST_CHECK;
void ws_tail_work_free(struct ws_tail_work *w);

/* What the stream's reader buffer and pipe look like inside a shard. */
struct ws_stream_shared {
	struct ws_reader *reader;
	size_t small_off, small_bytes; /* header/probe reads land here */
	size_t ring_off;               /* the pipe's slot memory in the reader buffer */
	struct ws_pipe *pipe;
	struct ws_tail_work *work;
};
struct ws_stream *ws_stream_open_shared(struct ws_sink *sink, const struct ws_stream_config *cfg,
					const struct ws_stream_shared *sh, int *err);

/* Release the stream's SQLite connections and WAL descriptor (an idle
 * tenant); the next tail reopens them and re-proves continuity. */
void ws_stream_park(struct ws_stream *st);
bool ws_stream_parked(const struct ws_stream *st);

/* What the last tail_frames call cost, for metrics. */
struct ws_stream_call {
	uint64_t puts;               /* objects written (parts, manifest, watermark) */
	uint64_t bytes;              /* bytes of them */
	uint64_t throttle_retries;
	uint64_t frames_shed;
	uint64_t spill_high_water;
	bool ended_early;            /* the tail stopped at its work bound (ws_stream_set_tail_bound) */
	bool carried;                /* its watermark carried its manifest (one write for the call) */
	bool past_index;             /* frames of the live generation lie past the wal-index's last
				      * commit: most often a commit whose writer has not yet
				      * written the wal-index, which wakes no one: look again */	/* The frames the call set out to ship (0..0: none found), so a refused
	 * call can say which it left: its generation's sequence too. */
	uint64_t first_frame, last_frame;
	uint32_t checkpoint_seq;
};
/*
 * A bound on one tail's work, so the durable watermark advances while a
 * backlog drains: a tail that has scanned for tail_ms and whose last
 * watermark write is at least key_ms old stops publishing batches there,
 * ships what it has up to the last commit in them (manifest, watermark)
 * and reports ended_early; the next tail goes on from that watermark.
 * tail_ms 0: no bound (the default; a flush and the final drain always
 * go to the end). Never while re-basing (the snapshot must be whole), and
 * a tail that met no commit yet goes on to the end.
 */
void ws_stream_set_tail_bound(struct ws_stream *st, uint32_t tail_ms, uint32_t key_ms);
/* drain: the next calls ship everything committed or fail, never shed, even
 * under the shed policy (a full ring is waited for, as under block, and an
 * upload that runs out of retries is an error): the final drain and a
 * tenant's removal, which promise everything committed is shipped. */
void ws_stream_set_drain(struct ws_stream *st, bool drain);
void ws_stream_last_call(const struct ws_stream *st, struct ws_stream_call *out);
uint64_t ws_stream_wm_last_frame(const struct ws_stream *st);
/* The watermark the stream knows (loaded or written): its time_ms; 0: none. */
int64_t ws_stream_wm_time_ms(const struct ws_stream *st);

/*
 * Test hook: when set, every store an engine opens comes from here (one for
 * each shard's own requests, one for its upload thread), so tests can put a
 * fault-injecting store in front of the real one. Not for production use.
 */
typedef struct ws_store *(*ws_engine_store_fn)(const char *url, unsigned shard, bool uploader, void *arg,
					       int *err);
extern ws_engine_store_fn ws_engine_open_store_hook;
/*
 * Test hook: when set (before ws_engine_create, cleared after
 * ws_engine_destroy), each shard thread calls it before its poll; a
 * negative return makes that poll fail with that error, as poll(2) can
 * with ENOMEM, which no test can make the kernel do on demand. Not a fault
 * site: the shard threads reach it all the time, while tests arm sites.
 */
extern int (*ws_engine_poll_hook)(void);
extern void *ws_engine_open_store_arg;

#endif
