#ifndef WS_STREAM_INTERNAL_H
#define WS_STREAM_INTERNAL_H

/*
 * One tenant stream and tail_frames: the state the files core/stream*.c
 * share.
 *
 * WAL checkpoints (docs/DESIGN.md of this repo, "WAL checkpoints"): the
 * stream holds a SQLite read transaction on the tenant's database at all
 * times while it is open, handing it over between two connections so there
 * is never a moment without one (the new one is taken before the old one is
 * let go). While a reader holds a WAL read mark, no checkpoint can copy
 * frames past that mark into the database and no writer can restart the
 * WAL; a reader on read mark 0 only exists when every frame was already
 * backfilled, which the handover proves were all shipped. So while the
 * stream stays open, a WAL generation can end only at a frame that is
 * already durable at the sink, and the next generation's frames continue
 * the stream (manifest kind NEXT_GEN) with no gap.
 *
 * A watermark whose generation is still the live WAL's (same salts, and the
 * frame it stops at still carries the checksum it recorded) is continued
 * from, whoever wrote it. Otherwise, when continuity cannot be proven (first
 * contact, the process restarted, another owner's watermark, a watermark
 * without salts, no WAL on either side), the stream re-bases:
 * it uploads the raw database file read under the read transaction plus
 * every committed frame of the live WAL generation (kind REBASE). Pages a
 * checkpoint may be writing into the file during that read all come from
 * frames at or below our read mark, which the frames overlay, so the image
 * is exact at the last shipped commit.
 *
 * tail_frames, in steps (each a function below, "step_*"), each effect
 * durable before the next:
 *   1 read the live WAL generation;      2 decide continuity (or Fenced, Empty);
 *   3 fence: read the watermark before any upload (a stale owner writes
 *     nothing);                          4 scan and check the WAL, uploading
 *     batches;                           5 a re-base's snapshot;
 *   6 settle: all durable, the WAL and the file unmoved, what to name;
 *   7 write the manifest;                8 write the watermark by CAS, hand
 *     the read mark over;                9 report.
 */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "chain.h"
#include "events.h"
#include "core_internal.h"
#include "outcome.h"
#include "pipe.h"
#include "sink.h"
#include "snap_reuse.h"
#include "ws_assert.h"
#include "ws_clock.h"
#include "ws_fault.h"
#include "ws_hash.h"
#include "ws_logging.h"
#include "ws_reader.h"
#include "ws_stream.h"
#include "ws_wal.h"
#include "walidx.h"

#define BATCH_BYTES_DEFAULT ((size_t)4 << 20)
#define BATCH_BYTES_MIN ((size_t)WS_WAL_PAGE_MAX + WS_WAL_FRAME_HDR_SIZE)
/* Batches one call names at most (a longer backlog is read in larger
 * batches, scan_checked); a snapshot names as many parts as the database
 * needs, up to what one manifest holds. The per-call arrays start small
 * and grow to these. */
#define MAX_REFS 4096u
#define MAX_SNAPS (WS_MANIFEST_ITEMS_MAX - MAX_REFS)
#define MAX_PARTS WS_MANIFEST_ITEMS_MAX
#define WORK_INITIAL 64u
#define WAL_CKPT_DEFAULT ((uint64_t)4 << 20)
/* A tail whose frames fit one batch this small sends it inside its manifest. */
#define INLINE_DEFAULT ((uint64_t)1 << 20)
#define INLINE_MAX ((uint64_t)16 << 20)
#define OWN_SMALL_BYTES ((size_t)128 << 10) /* a stream opened alone: header/probe reads, >= one 64 KiB frame */
#define WRITE_LOCK_WAIT_MS 200

/*
 * The tail's state, grouped by how long each part lives, so that a reset
 * is one assignment: the stream's own fields (set at open, for its life),
 * then the read transaction (until parked), the reader and the WAL file
 * open in it, the watermark (as last read or written), the call, the
 * attempt (a call retries a re-base under a moving WAL), and the carried
 * manifest.
 */

/* The read-transaction handover (stream_txn.c; see the top of this file). */
struct ws_stream_txn {
	sqlite3 *conn[2];
	int held;             /* index of the connection holding a read txn, -1 none */
	bool continuous;      /* held without a gap since our own last watermark write */
	/* The database file both connections have open (invariant 9): set when
	 * the first of them opens, checked for every later one and at the
	 * start and end of every tail. A file replaced at its path is another
	 * database: its life starts with a re-base, never a continuation. */
	bool have_ident;
	dev_t db_dev;
	ino_t db_ino;
	int locker;           /* connection holding the write lock this call, -1 none */
};

/* The reader and the WAL file open in it (stream_wal.c). */
struct ws_stream_io {
	struct ws_reader *reader;
	int wal_fd, wal_slot;
	size_t small_off;      /* reader buffer offset for header and probe reads */
	size_t small_bytes;
	size_t ring_off;       /* reader buffer offset of the pipe's slots */
};

/* The watermark as this stream last read or wrote it, and its own writes. */
struct ws_stream_mark {
	bool loaded;          /* wm/etag reflect the sink (have says if one exists) */
	bool have;
	struct ws_fmt_watermark wm;
	struct ws_etag etag;
	uint64_t own_seq;     /* our last watermark write's sequence (0: none yet) ... */
	uint8_t own_msha[WS_SHA256_LEN]; /* ... and the SHA-256 of the manifest it named */
	uint64_t own_mono_ms;        /* monotonic time of our last watermark's time_ms (0: none) */
	uint64_t pend_seq;    /* a watermark write whose outcome is not known (0: none) ... */
	uint8_t pend_msha[WS_SHA256_LEN];
	uint64_t pend_mono_ms;
	uint64_t sent_mono_ms;       /* when our last watermark write went out (ws_store.write_sent_ms; 0: none) */
	char stamp_key[WS_KEY_MAX];  /* a manifest whose time_ms is known: stamp_ms (stamp_floor) */
	int64_t stamp_ms;
	/* etag is the one our own last watermark write got back, wm and the
	 * carried manifest (carry.buf) are that write's, and nothing was read
	 * since: a tail whose one write is the watermark may fence with that
	 * write's compare-and-swap instead of a read (step_fence). */
	bool wrote_last;
	/* The store refused a swap on our own write's etag while the
	 * watermark there was still that write (an etag form its If-Match
	 * does not take): every tail of this stream fences by a read. */
	bool own_etag_refused;
	/* Manifest slots (st->slots; docs/SLOTS.md): wm above is the head
	 * (the last slot, synthesized as ws_head_load does; have: a head
	 * exists), pend_* a slot create whose outcome is not known. stored is
	 * the watermark object as last read or written (any version), with
	 * its etag. */
	struct ws_fmt_watermark stored;
	struct ws_etag stored_etag;
	bool stored_have;
	/* The lane the next slot goes in (head_lane, its token), whether a
	 * removal closed it, and ours when that lane is ours and open (0: a
	 * lane must be opened first). */
	uint64_t head_lane, head_lane_epoch, head_lane_pg;
	bool head_closed;
	uint64_t lane;
	bool just_opened;     /* this call opened it (slot_fence) */
	/* The hint's sequence as stored, and when our last hint went out. */
	uint64_t hint_seq;
	uint64_t hint_mono_ms;
	/* A token known to fence us (the watermark's opener, the head lane's
	 * owner, a close record on our lane): fenced, naming it. */
	bool fence_have;
	uint64_t fence_epoch, fence_pg;
};

/* One call of ws_stream_tail_frames: reset as a whole at its start. */
struct ws_stream_call_state {
	struct ws_stream_call report; /* what ws_stream_last_call answers */
	int64_t wall_ms;             /* when this call began: wall clock ... */
	uint64_t mono_ms;            /* ... and monotonic */
	uint64_t throttle;           /* throttle retries of this call's parts */
	uint64_t throttle_at_start;  /* store's throttle_retries when this call began */
	bool locked;                 /* this call holds the database's write lock */
	/* The shard's per-call arrays (struct ws_tail_work), taken at the start
	 * of the call and after each growth (use_work). */
	struct ws_fmt_objref *batches;
	struct ws_fmt_objref *snaps;
	struct ws_part *parts;
};

/* One attempt of a call (a call starts over when the WAL moves under a
 * re-base): reset as a whole before each. */
struct ws_stream_attempt {
	uint32_t batch_count, snap_count, part_count;
	uint32_t snap_reused;        /* snapshot refs naming the earlier image's parts (no ws_part) */
	uint32_t part_base;          /* ring index of parts[0] in this call */
	uint64_t high_water;         /* the most the ring held for it */
	char upload_why_key[WS_KEY_MAX]; /* this attempt's first failed upload with a detail kept (pipe.h why) */
	char upload_why[1024];
	uint64_t frames_shed;
	bool shed_stop;              /* shed: the ring was full, reading stopped */
	bool shed_nowait;            /* this attempt sheds at a full ring */
	uint64_t tail_stop_ms;       /* stop publishing at this mono time (0: never) */
	bool early_stop;             /* the attempt stopped there */
	bool past_index;             /* it left frames of its generation past the wal-index */
	/* This call's batch held in its ring slot for the manifest (inline),
	 * not sent on its own: the slot is not reserved again before the
	 * manifest is written (no reserve follows a scan but a snapshot's,
	 * and a re-base holds nothing). */
	bool inl_held;
	uint32_t inl_idx;
	/* The fencing read was skipped (step_fence): the watermark's
	 * compare-and-swap fences, unless something else is to be uploaded
	 * first, which reads it then (fence_before_upload). */
	bool fence_deferred;
};

/* The manifest the watermark wm carries (wm.carried_len; docs/FORMAT.md
 * "Watermark"): its bytes, from this call's fencing read, or kept from
 * our own watermark write that carried them until the next fencing read
 * or until the stream parks (mark.wrote_last). own: this stream wrote it and it is stored nowhere
 * else, so the next tail may merge what it ships into it, replacing it; a
 * carried manifest another writer left is stored before anything links
 * to it. Heap buffers: released, never assigned over. */
struct ws_stream_carry {
	enum ws_carry mode;
	struct ws_buf buf;
	struct ws_buf next;          /* this call's carried manifest, until its watermark lands */
	bool own;
};

/*
 * Frames read ahead of the next tail (ws_stream_read_ahead): while a
 * tapped tenant's tail waits for the store, or for a lane, the shard reads
 * the commits that land meanwhile, checks them and hands them to the event
 * channel at once; the next tail ships them from here (its first slot is
 * filled from buf), so the WAL is read once. Armed by a tail that settled
 * (the frames after the last one it ships, chained from its commit's
 * checksum); the next tail's scan takes them only if it starts exactly
 * there, in the same generation, from the same checksum, and drops them
 * either way.
 */
struct ws_stream_ahead {
	bool armed;
	struct ws_fmt_gen gen;       /* the settled tail's generation */
	uint64_t first;              /* the frame after the last one it ships */
	uint32_t seed[2];            /* the stored checksum of frame first - 1 (its commit) */
	uint32_t n;                  /* frames held in buf: first .. first + n - 1, the last a commit */
	uint32_t end[2];             /* the stored checksum of frame first + n - 1 (seed while n is 0) */
	uint32_t cap;                /* at most this many (one slot's worth) */
	struct ws_buf buf;
};

struct ws_stream {
	/* The stream: set at open, for its life. */
	struct ws_sink *sink;
	/* How its batches and snapshot parts are sealed (seal.key points into
	 * seal_keys, its key file's keys; ws_seal_on false: version 1). */
	struct ws_seal seal;
	struct ws_keyring seal_keys;
	char tenant[WS_TENANT_MAX];
	char *db_path;
	char *wal_path;
	uint64_t epoch, pg;
	enum ws_policy policy;
	size_t batch_bytes_max;
	uint32_t batch_frames_max;
	uint64_t inline_max;         /* a tail's frames up to this many bytes go inside its manifest (0: never) */
	bool slots;                  /* manifest slots (docs/SLOTS.md): asked for, and the store's conditions fence */
	uint32_t hint_slots;         /* the watermark's hint is written once this many slots behind */
	bool own_reader;             /* reader, pipe and work are this stream's own (no engine) */
	struct ws_pipe *pipe;        /* where batches and snapshot parts go */
	struct ws_pipe own_pipe;
	struct ws_tail_work *work;
	struct ws_tail_work own_work;
	int64_t opened_ms;
	uint64_t wal_checkpoint_bytes;
	/* Set between calls by the engine. */
	bool drain;                  /* never shed (ws_stream_set_drain) */
	struct ws_ev_tap *ev_tap;    /* the event channel's tap (ws_stream_set_events) */
	struct ws_events *ev_single; /* its single-thread channel (ws_events_open_stream), or NULL */
	uint32_t tail_ms, key_ms;    /* the work bound (ws_stream_set_tail_bound) */
	bool key_wait;               /* the watermark write waits for key_ms (ws_stream_set_key_wait) */
	uint32_t lead_ms;            /* ... which the tail was started this much ahead of */
	const uint32_t *key_wait_stop; /* (atomic) non-zero: the wait ends at once */
	struct ws_stream_lane lane;  /* whose store and work a call uses (ws_stream_set_lane) */
	/* Across calls. */
	bool last_ok;                /* the last call shipped what it read (the sink answers) */
	uint64_t wal_checkpoints;

	struct ws_stream_txn txn;
	struct ws_stream_io io;
	struct ws_stream_mark mark;
	struct ws_stream_call_state call;
	struct ws_stream_attempt at;
	struct ws_stream_carry carry;
	struct ws_stream_ahead ahead;
	/* A re-base's earlier image (snap_reuse.h), from its snapshot until
	 * its watermark is written; rebase_next: the last re-base named parts
	 * retention may have removed, so the next call re-bases uploading
	 * every part. */
	struct ws_snap_prev reuse;
	bool rebase_next;
};

/* ---- the scan --------------------------------------------------------- */

struct scan {
	struct ws_fmt_gen gen;
	char prefix[WS_KEY_MAX];
	struct ws_wal_cursor cur;
	uint64_t first_frame;     /* first frame this call uploads */
	uint32_t seed[2];
	int64_t read_ms;
};

/* How a call's scan meets the batch limit (scan_checked). */
enum at_limit {
	LIMIT_STOP,      /* ship the prefix read, up to its last commit */
	LIMIT_ONE_TXN,   /* the scan goes on past a stop that met no commit: one transaction too large */
	LIMIT_REBASE,    /* a re-base must reach its read mark in one manifest */
};

/* ---- tail_frames ------------------------------------------------------ */

/* tail_inner: the call must start over (the WAL moved under a re-base). */
#define TAIL_RETRY 1
#define TAIL_ATTEMPTS 3

/*
 * One call, as the steps the top of this file lists, each a function of its
 * own over the call's state (struct tail). A step returns 0 to go on,
 * TAIL_DONE when it has decided the outcome (*out), TAIL_RETRY when the
 * call must start over, or an error (nothing acknowledged).
 */
#define TAIL_DONE 2

struct tail {
	struct scan sc;
	struct ws_wal_hdr wh;     /* the live WAL's header (sc.gen.wal_magic != 0) */
	uint64_t wal_bytes;       /* the WAL file's size when the call began */
	uint32_t kind;            /* WS_MANIFEST_CONTINUE, _NEXT_GEN or _REBASE */
	bool locked;              /* we hold the write lock: nothing commits meanwhile */
	bool fresh;               /* the watermark was first read by this call */
	bool unheld;              /* empty_unheld's look: no connection open, no WAL is no answer */
	uint64_t last;            /* the last committed frame this call ships */
	uint32_t db_pages;        /* database size in pages at last */
	char mkey[WS_KEY_MAX];    /* the manifest written */
	uint8_t msha[WS_SHA256_LEN];
	uint64_t mlen;
	struct ws_fmt_watermark prev; /* the watermark before ours (report) */
	bool had;
	bool unproven;            /* a CONTINUE on a fresh read mark that cannot prove where its
				   * generation ended (step_write_watermark) */
	bool merged;              /* the manifest replaces the carried one the watermark names (same seq) */
	bool carried;             /* the watermark carries the manifest: it is stored nowhere else */
	int64_t durable_ms;       /* slots: the slot's durable_ms (the hint's time) */
};

/* ---- cross-file calls (one block per file) ---------------------------- */

/* Calls between the stream's files only: outside the library's export map
 * (walship.map), and no file but core/stream*.c includes this header. */

/* core/stream.c */
void use_work(struct ws_stream *st, struct ws_tail_work *w);
int room_batch(struct ws_stream *st, uint32_t n);
int room_snap(struct ws_stream *st, uint32_t n);
int room_part(struct ws_stream *st, uint32_t n);
void carry_drop(struct ws_stream *st);
void carry_take(struct ws_stream *st, struct ws_buf *raw, const struct ws_fmt_watermark *w);
void fill_rpo(const struct ws_stream *st, struct ws_rpo_status *rpo);
uint64_t call_throttle(const struct ws_stream *st);
void fill_bp(const struct ws_stream *st, struct ws_backpressure_report *bp);
int refresh_wm(struct ws_stream *st);
bool own_or_not(struct ws_stream *st, const struct ws_fmt_watermark *w);
int fence_before_upload(struct ws_stream *st);
bool wm_same_write(const struct ws_fmt_watermark *w, const struct ws_fmt_watermark *nw);
bool fenced_by(const struct ws_stream *st, const struct ws_fmt_watermark *w);
void fill_fenced(const struct ws_stream *st, struct ws_outcome *out);
int put_immutable(struct ws_stream *st, const char *key, const struct iovec *iov, int iovcnt);
/* Around a wait for the store (a fencing read, a manifest or watermark
 * write): the shard's other tails may read and publish meanwhile
 * (ws_stream_lane). lane_in takes the pipe back for this call. */
void lane_out(struct ws_stream *st);
void lane_in(struct ws_stream *st);

/* core/stream_slots.c (docs/SLOTS.md 3.1; only with st->slots) */
int refresh_head(struct ws_stream *st);
bool mark_fenced(const struct ws_stream *st);
int slot_fence(struct ws_stream *st, struct tail *t, struct ws_outcome *out);
int slot_read_fence(struct ws_stream *st);
int put_slot(struct ws_stream *st, struct tail *t, const struct iovec *iov, bool inl, struct ws_outcome *out);
void maybe_hint(struct ws_stream *st, const struct tail *t);

/* core/stream_txn.c */
enum db_mode { DB_NO_HEADER, DB_WAL, DB_ROLLBACK };
bool ident_same(const struct ws_stream *st);
void conn_end_read(struct ws_stream *st, int i);
enum db_mode conn_db_mode(struct ws_stream *st, int i);
int hold_read(struct ws_stream *st);
void handover_read(struct ws_stream *st);
bool write_lock_try(struct ws_stream *st);
void write_lock_release(struct ws_stream *st);
void wal_checkpoint_locked(struct ws_stream *st);

/* core/stream_wal.c */
void file_close(struct ws_stream *st, int *fd, int *slot);
int file_refresh(struct ws_stream *st, const char *path, int *fd, int *slot);
uint64_t file_size(int fd);
int db_size(struct ws_stream *st, uint64_t *size);
ssize_t db_read(struct ws_stream *st, uint64_t off, size_t len, uint8_t *dst);
int db_header(struct ws_stream *st, uint32_t *page_size, uint32_t *pages);
int wal_index_bound(struct ws_stream *st, const struct ws_wal_hdr *wh, uint64_t *wal_bytes);
bool wal_index_mx(struct ws_stream *st, uint32_t salt1, uint32_t salt2, uint32_t *mx);
int read_wal_gen(struct ws_stream *st, struct ws_wal_hdr *wh);
int wal_unmoved(struct ws_stream *st, const struct scan *sc);

/* core/stream_scan.c */
void part_done(void *arg, uint32_t idx, const struct ws_pipe_desc *d);
int scan_checked(struct ws_stream *st, struct scan *sc, uint64_t wal_bytes, enum at_limit at_limit);
int scan_rest(struct ws_stream *st, struct scan *sc, uint64_t wal_bytes);
void ahead_arm(struct ws_stream *st, const struct scan *sc, uint64_t last);
void ahead_drop(struct ws_stream *st);
int upload_snapshot(struct ws_stream *st, const struct scan *sc, uint32_t db_pages);
int settle(struct ws_stream *st, struct scan *sc, uint32_t kind, uint64_t *last, uint32_t *db_pages);
void name_parts(struct ws_stream *st);

/* core/stream_manifest.c */
int step_write_manifest(struct ws_stream *st, struct tail *t, struct ws_outcome *out);
int step_write_watermark(struct ws_stream *st, struct tail *t, struct ws_outcome *out);
int store_carried(struct ws_stream *st);
int put_inline_manifest(struct ws_stream *st, struct tail *t, const struct iovec *iov, bool slot,
			struct ws_outcome *out);

/* core/stream_steps.c */
int done_shed(const struct ws_stream *st, const struct tail *t, struct ws_outcome *out);

#endif
