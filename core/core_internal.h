/*
 * The structures the core sources share; not part of the public API. Only
 * definitions live here: each file's functions are declared in its own
 * header (chain.h for chain.c, ckpt_read.h for ckpt_read.c, ...), so a
 * file's #include lines say which files it depends on
 * (tools/include_graph.sh checks they never form a cycle).
 */
#ifndef WS_CORE_INTERNAL_H
#define WS_CORE_INTERNAL_H

#include "walship.h"
#include "ws_format.h"
#include "ws_seal.h"
#include "ws_store.h"
#include "ws_wal.h"

struct ws_sink {
	struct ws_store *store;
	/* Keys its readers open sealed objects with (store->keys points
	 * here): ws_sink_add_key_file's, and every writer's on this sink. */
	struct ws_keyring ring;
};

/* Key layout (docs/FORMAT.md "Keys"): a tenant's watermark's name. */
#define WS_WM_NAME "wm"

/* The largest watermark read: one that carries a manifest of inline batches
 * (at most 16 MiB of them, docs/CLI.md "Configuration file"). */
#define WS_WM_BYTES_MAX (64u << 20)
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

/* A manifest named exactly: key, SHA-256 and length. */
struct ws_chain_stop {
	char key[WS_KEY_MAX];
	uint8_t sha[WS_SHA256_LEN];
	uint64_t length;
};

/*
 * A chain's base that is a stored checkpoint's: the cut manifest for the
 * tenant and its artifact (the database at that cut).
 */
struct ws_restore_base {
	struct ws_chain_stop cut;            /* the checkpoint's cut manifest for the tenant */
	char artifact_key[WS_KEY_MAX];       /* its database image */
	uint64_t artifact_length;
	char artifact_sha256[WS_SHA256_HEX_LEN + 1];
	uint64_t checkpoint_id;              /* the checkpoint whose cut this is */
};

/* ---- a stream's tails inside an engine (stream.c, pipe.c, engine.c) ---- */

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

/*
 * What one part came to: the object the manifest names (its key, frame or
 * page range, hash and length), what its reader found, how its upload
 * ended, and (a kept batch) where the chain's commits stand after it. The
 * publish step starts it, the pipe's result (part_done) completes it once,
 * the in-order merge adds the commit; the manifest reads `ref` from here.
 */
struct ws_part_result {
	bool done;
	int rc;
	struct ws_fmt_objref ref;    /* as the manifest names it (batch: key "" when inline) */
	/* A checked batch (pipe.h): what its reader found, as it found it. */
	struct ws_batch_check chk;
	uint64_t last_commit;        /* batch: the cursor's last commit after it */
	uint32_t commit_cksum[2];
	uint32_t commit_db_size;
};

/* One object uploaded through the pipe by a tail, in publish order. */
struct ws_part {
	bool snap;                   /* snapshot part, else batch */
	uint32_t ref;                /* its place among the call's batches or snaps */
	struct ws_part_result res;
};

/* Per-call arrays; a shard's tails run one at a time and share one.
 * batches and snaps are the manifest's lists, filled from the parts'
 * results when the manifest is written. */
struct ws_tail_work {
	struct ws_fmt_objref *batches;
	struct ws_fmt_objref *snaps;
	struct ws_part *parts;
	uint32_t batches_cap, snaps_cap, parts_cap; /* grown on demand (stream.c) */
	struct ws_buf scratch;
};

/* What the stream's reader buffer and pipe look like inside a shard. */
struct ws_stream_shared {
	struct ws_reader *reader;
	size_t small_off, small_bytes; /* header/probe reads land here */
	size_t ring_off;               /* the pipe's slot memory in the reader buffer */
	struct ws_pipe *pipe;
	struct ws_tail_work *work;
};

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
				      * written the wal-index, which wakes no one: look again */
	uint64_t wm_ready_ms;        /* mono ms its watermark write was ready to go (0: none was) */
	uint64_t key_wait_ms;        /* how long that write then waited for key_ms (ws_stream_set_key_wait) */
	/* The frames the call set out to ship (0..0: none found), so a refused
	 * call can say which it left: its generation's sequence too. */
	uint64_t first_frame, last_frame;
	uint32_t checkpoint_seq;
};

#endif
