/*
 * The upload pipeline of a shard: the spill ring (ring.h) plus the thread
 * that sends published slots to the sink, up to in_flight at once. The
 * producer (a tail on the shard thread) reserves a slot, reads WAL frames
 * into it, fills the slot's descriptor (key, object header, payload
 * length, policy) and publishes it; it collects each slot's result, in
 * order, before the slot is used again, and drains the pipeline before it
 * writes a manifest.
 *
 * Inline pipelines (a stream opened on its own, outside an engine) have one
 * slot and upload on the caller's thread at publish time.
 *
 * Policy on the upload side: a slot published under `block` is retried
 * until it lands or the pipeline stops (the sink's own retries first, then
 * a capped backoff, for ever): memory stays bounded, RPO grows. Under
 * `throttle` and `shed` a failure after the store's bounded retries is the
 * slot's result, and the tail decides (fail the call, or shed).
 */
#ifndef WS_PIPE_H
#define WS_PIPE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "adapt.h"
#include "core_internal.h"
#include "ring.h"
#include "walship.h"
#include "ws_format.h"
#include "ws_reader.h"
#include "ws_seal.h"
#include "ws_store.h"
#include "ws_wal.h"

#define WS_PIPE_HDR_MAX WS_OBJ_HDR_MAX
/* The pause before a block policy's next try: doubling, capped. */
#define WS_PIPE_BACKOFF_MIN_MS 10u
#define WS_PIPE_BACKOFF_MAX_MS 1000u
static inline uint32_t ws_pipe_backoff_next(uint32_t ms)
{
	return ms * 2 > WS_PIPE_BACKOFF_MAX_MS ? WS_PIPE_BACKOFF_MAX_MS : ms * 2;
}

/*
 * One slot's descriptor. Who writes what:
 *   T  the tail (producer), between reserve and publish;
 *   R  whichever thread reads the slot (the tail, or the upload thread for
 *      a delegated slot), in ws_pipe_fill;
 *   U  the upload thread, after publish; the tail reads R and U fields only
 *      once the slot is collected (on_done), which the ring orders (P1/C2).
 */
struct ws_pipe_desc {
	char key[WS_KEY_MAX];     /* T (snapshot part) or R (batch) */
	uint8_t hdr[WS_PIPE_HDR_MAX]; /* T or R, likewise */
	uint32_t hdr_len;         /* T or R */
	uint64_t payload_len;     /* T or R: bytes of the slot sent after hdr */
	enum ws_policy policy;    /* T */
	/* How the object is sealed (T; NULL or not ws_seal_on: version 1 from
	 * the slot as it is). A batch is sealed by its reader, a snapshot part
	 * by the tail, into the slot's seal buffer (ws_pipe_seal_buf). */
	const struct ws_seal *seal;
	bool sealed;              /* T (snapshot part) or R (batch): the payload is in the seal buffer */
	/*
	 * A WAL batch (checked): up to `want` frames from batch.first_frame,
	 * read into the slot and checked there by whichever thread read them
	 * (ws_pipe_fill): salts, page number and SQLite's checksum chain, then
	 * hashed, cut, encoded into hdr and named key_prefix/b...-key_seq. The pipe
	 * decides which thread reads a slot (ws_pipe_reads_here), so no freshly
	 * read byte has to cross to the other core.
	 */
	bool checked;             /* T */
	bool delegated;           /* T: the upload thread reads it (wal_fd, wal_off) */
	bool first_slot;          /* T: first batch of a tail: batch.seed_cksum is known */
	bool hold;                /* T: read and check, but do not send: its manifest carries it (inline) */
	int wal_fd;               /* T */
	uint64_t wal_off;         /* T: file offset of batch.first_frame */
	uint32_t want, per_chunk; /* T: frames to read; a full slot's frames */
	/* T: a tail's first slot whose first src_frames frames were read
	 * ahead of it (the stream's read-ahead, stream_scan.c): copied from
	 * here, the WAL is not read again for them (the rest of the slot is).
	 * The tail keeps them until the slot is filled. */
	const uint8_t *src;
	uint32_t src_frames;
	struct ws_fmt_batch batch; /* T: gen, first frame, seed (R: seed of a later slot, header) */
	char key_prefix[WS_KEY_MAX]; /* T */
	uint64_t key_seq;         /* T: the manifest's watermark sequence (docs/FORMAT.md "Keys") */
	struct ws_batch_check chk; /* R (dropped: U) */
	uint64_t hdr_xxh;         /* R */
	int fill_rc;              /* R: the sealing thread's read of a delegated slot */
	int rc;                   /* U: the upload's result */
	char why[1024];           /* U: its detail, when the upload found one worth keeping ("" otherwise) */
	uint32_t throttle_retries; /* U */
};

/*
 * A checked WAL batch as the tail describes it: every T field of a batch
 * slot (the stream<->pipe seam). The seed is known for a tail's first
 * slot only; a later slot's reader takes it from the frame before.
 */
struct ws_pipe_batch_spec {
	struct ws_fmt_gen gen;
	uint64_t first_frame;
	uint32_t seed_cksum[2];
	bool first_slot;
	bool hold;
	bool delegated;
	int wal_fd;
	uint64_t wal_off;          /* file offset of first_frame */
	uint32_t want, per_chunk;
	const uint8_t *src;        /* frames read ahead (a first slot read on the tail's thread), or NULL */
	uint32_t src_frames;       /* how many, at most want */
	const char *key_prefix;
	uint64_t key_seq;
	const struct ws_seal *seal; /* NULL: not sealed */
};

/* Producer (T): describe reserved slot d as the batch s; nothing of the
 * slot's last use stays (R fills chk). */
void ws_pipe_describe_batch(struct ws_pipe_desc *d, const struct ws_pipe_batch_spec *s);

/* Called by the producer for each finished slot, in publish order. */
typedef void (*ws_pipe_done_fn)(void *arg, uint32_t idx, const struct ws_pipe_desc *d);

struct ws_pipe {
	struct ws_ring ring;
	struct ws_store *store;   /* where slots go (the uploader's own instance when threaded) */
	bool threaded;
	bool started;
	pthread_t thread;
	unsigned in_flight;
	uint32_t collected;       /* producer: results delivered up to here */
	uint64_t outstanding;     /* producer: payload bytes published, not collected */
	ws_pipe_done_fn on_done;  /* producer: set per tail */
	void *arg;
	struct ws_reader *reader; /* consumer: reads delegated slots (NULL: none are) */
	/* Consumer: uploads in flight follow this window when adaptive (adapt.h);
	 * window (the current one) and decreases are read by metrics (relaxed). */
	bool adaptive;
	struct ws_aimd aimd;
	uint32_t window;
	uint64_t decreases;
	bool chain_broken;        /* consumer: a checked slot of this tail ended the chain */
	uint32_t chain_end[2];    /* consumer: where the chain of this tail's slots so far ends */
	uint32_t giving_up;       /* any thread: block waits out no more failures (ws_pipe_give_up) */
	/* One seal buffer per slot (ws_pipe_seal_reserve), seal_slot_bytes
	 * each; NULL until a stream that seals uses the pipe. Written by the
	 * producer before it publishes a slot that seals; read for published
	 * slots only (the ring's P1/C2 orders the two). */
	uint8_t *seal_mem;
	size_t seal_slot_bytes;
	/*
	 * The sealing thread (started by ws_pipe_seal_reserve where the upload
	 * thread could read slots itself): it reads, checks and seals the
	 * delegated slots from seal_from on, in publish order, with a ring of
	 * its own, so compressing and encrypting a batch overlaps the tail's
	 * read of the next and the upload of the one before instead of
	 * delaying the uploads behind it. A pipe that never seals has none
	 * and is as without it. The producer passes published indices (s_pub)
	 * and the thread its progress (s_done) under s_mu; seal_from and
	 * sealing are set before any slot from seal_from is published.
	 */
	struct ws_reader *s_reader;
	pthread_t s_thread;
	pthread_mutex_t s_mu;
	pthread_cond_t s_cv;
	uint32_t s_pub, s_done, s_stop;
	uint32_t seal_from;
	uint32_t sealing;         /* atomic: the sealing thread runs */
};

/*
 * Producer, before it publishes a slot that seals: give every slot a seal
 * buffer of the most a slot's payload seals to (ws_seal_bound of a full
 * slot under zstd and a key): about as much memory again as the ring; and
 * where the upload thread reads delegated slots, start the sealing thread
 * that takes that reading and sealing off it (one more io_uring; without
 * one the pipe goes on as before). Once per pipe; freed by
 * ws_pipe_destroy. Errors: -ENOMEM.
 */
int ws_pipe_seal_reserve(struct ws_pipe *p) WS_MUST_CHECK;
/* Slot idx's seal buffer (ws_pipe_seal_reserve ran). */
static inline uint8_t *ws_pipe_seal_buf(struct ws_pipe *p, uint32_t idx)
{
	return p->seal_mem + (size_t)p->ring.buf_of[idx & p->ring.mask] * p->seal_slot_bytes;
}
/* Where slot idx's payload is sent from: its seal buffer when sealed. */
static inline uint8_t *ws_pipe_payload(struct ws_pipe *p, uint32_t idx, const struct ws_pipe_desc *d)
{
	return d->sealed ? ws_pipe_seal_buf(p, idx) : ws_ring_slot(&p->ring, idx);
}

/*
 * mem holds nslots * slot_bytes (the caller's registered memory).
 * threaded: start the upload thread (it owns store for its lifetime).
 * uring: the upload thread may read slots itself through an io_uring of
 * its own (false: the tail reads them all, as with --force-pread).
 */
int ws_pipe_init(struct ws_pipe *p, uint8_t *mem, size_t slot_bytes, uint32_t nslots, struct ws_store *store,
		 unsigned in_flight, bool threaded, bool uring) WS_MUST_CHECK;
/* Before the first publish: uploads in flight adapt (AIMD, Retry-After). */
void ws_pipe_set_adaptive(struct ws_pipe *p, bool on);
/* Stops the upload thread after what is published has been taken. */
void ws_pipe_destroy(struct ws_pipe *p);
/* Any thread: from now on a failed upload is not retried by the block
 * policy's own waiting (each request keeps the store's bounded retries):
 * an engine stopping must not wait for ever on a sink that is gone. */
void ws_pipe_give_up(struct ws_pipe *p);
/* An upload that failed with err under policy is tried again (after a
 * pause): block, a transient error, and a shard's (threaded) pipeline
 * that is neither closing nor giving up. */
bool ws_pipe_waits_out(struct ws_pipe *p, enum ws_policy policy, int err);

/* Producer: a free slot, collecting finished ones first; wait as
 * ws_ring_reserve (0 = do not wait, -1 = for ever). 0 or -EAGAIN. */
int ws_pipe_reserve(struct ws_pipe *p, int timeout_ms, uint32_t *idx) WS_MUST_CHECK;
static inline uint8_t *ws_pipe_slot(struct ws_pipe *p, uint32_t idx) { return ws_ring_slot(&p->ring, idx); }
static inline struct ws_pipe_desc *ws_pipe_desc(struct ws_pipe *p, uint32_t idx)
{
	return (struct ws_pipe_desc *)ws_ring_desc(&p->ring, idx);
}
/* Producer: publish the reserved slot (inline: upload it now). */
void ws_pipe_publish(struct ws_pipe *p);
/* Producer: wait for every published slot and deliver its result. */
void ws_pipe_drain(struct ws_pipe *p);
/*
 * Read d->want frames at d->wal_off into slot idx with reader r (its file
 * slot fslot; ring_off: where the ring's memory starts in r's buffer) in
 * pieces, checking and hashing each piece while it is in cache; fills d's
 * results, header and key. For a slot that is not its tail's first, the
 * seed is the stored checksum of the frame before it (read here): if that
 * frame is not part of the chain, neither is this slot, and the in-order
 * merge drops it. Returns 0, or a negative errno from a read.
 */
int ws_pipe_fill(struct ws_pipe *p, struct ws_reader *r, int fslot, size_t ring_off, uint32_t idx,
		 struct ws_pipe_desc *d) WS_MUST_CHECK;
/*
 * Which thread reads the k-th slot of a tail (0-based): every other slot
 * goes to the upload thread, which has a ring of its own; when the tail
 * spans more than one slot (multi) the first goes there too, so both
 * threads start at once; a tail of one slot reads it on its own thread.
 * Without an upload thread's ring (inline pipes, no io_uring) the tail
 * reads them all.
 */
static inline bool ws_pipe_reads_here(const struct ws_pipe *p, uint32_t k, bool multi)
{
	return !p->reader || (k & 1) != (multi ? 0u : 1u);
}
/* Slots published and not yet finished. */
static inline uint32_t ws_pipe_used(const struct ws_pipe *p) { return ws_ring_used(&p->ring); }

#endif
