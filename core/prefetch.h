/*
 * Fetching a chain's objects ahead of a replay (prefetch.c): a window of
 * up to n objects read at once by a thread of its own while the replay
 * takes them, strictly in chain order, and verifies each before it applies
 * a byte of it.
 */
#ifndef WS_CORE_PREFETCH_H
#define WS_CORE_PREFETCH_H

#include "chain.h"
#include "core_internal.h"

/* The most bytes (objects' recorded lengths, and the room their opened
 * payloads take) the window holds at once, whatever n is: one object
 * larger than this is still fetched and opened, alone.
 * Eight batches of the default batch_bytes_max (4 MiB): a checkpoint
 * builds its image under a 64 MiB heap (test_bounded_memory). */
#define WS_PREFETCH_BYTES_MAX ((uint64_t)32 << 20)

struct ws_prefetch;

/*
 * Start fetching the objects of c->m[from..upto] in the order a replay
 * takes them (each REBASE's snapshot parts, then each manifest's batches),
 * n at a time (capped by WS_PREFETCH_BYTES_MAX), on a thread that is the
 * only user of s until ws_prefetch_end. NULL when n <= 1, when the range
 * holds at most one object, or when the thread cannot start (the caller
 * then fetches each object itself, one after another, as with n = 1).
 * c must outlive the window.
 */
struct ws_prefetch *ws_prefetch_start(struct ws_store *s, const struct ws_chain *c, size_t from, size_t upto,
				      unsigned n);
/* ws_prefetch_start with a budget of its own instead of WS_PREFETCH_BYTES_MAX (tests). */
struct ws_prefetch *ws_prefetch_start_budget(struct ws_store *s, const struct ws_chain *c, size_t from, size_t upto,
					     unsigned n, uint64_t budget);

/* What a window held at most: bytes counted against its budget, bytes its
 * objects and their plaintexts filled, and its slots' buffers' capacity. */
struct ws_prefetch_stats {
	uint64_t held_max;
	uint64_t used_max;
	uint64_t cap_max;
};

/*
 * The next object of the window, which is c->m[i]'s ref (the caller takes
 * them in the order ws_prefetch_start lists them), into out (swapped: out's
 * old bytes are dropped), checked as ws_chain_obj_fetch checks it, and what
 * opening it found in *op (op->done false: not opened; the caller opens
 * it), its plaintext in plain (swapped likewise) or out. Waits for it.
 * Errors: those of ws_chain_obj_fetch, with its message.
 */
int ws_prefetch_take(struct ws_prefetch *p, size_t i, const struct ws_fmt_objref *ref, struct ws_buf *out,
		     struct ws_buf *plain, struct ws_obj_opened *op) WS_MUST_CHECK;

/* Stop fetching (objects not taken are dropped), wait for the thread, free;
 * st (may be NULL) gets what it held at most. NULL p: nothing. */
void ws_prefetch_end(struct ws_prefetch *p, struct ws_prefetch_stats *st);

/* One object of c->m[i]: from the window when there is one (opened ahead
 * as ws_prefetch_take says), else fetched now (op->done false). A window
 * that ran out of memory (-ENOMEM) is given up, warned of, and this object
 * and the rest are fetched now, one at a time. */
int ws_prefetch_or_fetch(struct ws_prefetch *p, struct ws_store *s, const struct ws_chain *c, size_t i,
			 const struct ws_fmt_objref *ref, struct ws_buf *out, struct ws_buf *plain,
			 struct ws_obj_opened *op) WS_MUST_CHECK;

#endif
