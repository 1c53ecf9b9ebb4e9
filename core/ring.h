/*
 * The spill ring: a single-producer, single-consumer ring of fixed-size
 * slots in one contiguous region of memory that the shard registers with
 * its io_uring. The shard thread (producer) reserves slots and publishes
 * them: it reads WAL frames into some with fixed-buffer reads itself, and
 * leaves others for the upload thread (consumer) to read with a ring of its
 * own over the same memory; the consumer sends each slot's bytes to the
 * sink from that memory and releases it.
 * Nothing is copied between reading and sending, and the ring never grows:
 * when every slot is taken the producer waits or gives up (the policy's
 * choice), it never allocates.
 *
 * Indices are free-running 32-bit counters (head: published, tail:
 * released); slot i is desc[i & mask]. The memory behind a slot is not
 * fixed: at reserve the producer gives the slot the buffer released most
 * recently (a stack only the producer touches, fed from the consumer's
 * releases), so a consumer that keeps up cycles through two or three
 * buffers that stay in cache instead of the whole ring, which would send
 * every read through DRAM. The buffer's number travels with the slot
 * (published with head). Only the producer writes head,
 * only the consumer writes tail. Each side reads the other's counter with
 * acquire and writes its own sequentially consistent (a release, and also
 * one side of the waiting-flag handshake below), so a slot's bytes and
 * descriptor are visible to the side that takes it over. A side that must
 * wait sleeps on the other's counter (the consumer: on a doorbell) with a
 * futex, announced through a waiting flag so the fast path makes no system
 * call. ring.c labels each atomic with the one it pairs with:
 *   P1 publish stores head        pairs with C1, the consumer's loads of head:
 *                                 the slot's bytes and descriptor go with it;
 *   C2 release stores tail        pairs with P2, the producer's loads of tail:
 *                                 the consumer's results (rc) go with it, and
 *                                 the slot is not reused before it is sent;
 *   F1/F2 a sleeper raises its flag, then loads the word (both seq_cst); a
 *         waker stores the word (P1, C2, X1), then loads the flag: one of
 *         the two sees the other, so no wake-up is lost;
 *   D1 the doorbell bump          pairs with D2, the consumer's load of the
 *                                 bell before its last look at head;
 *   X1 close stores closed        pairs with X2, both sides' loads of it.
 * Invariants, asserted: 0 <= head - tail <= nslots; tail never passes head.
 */
#ifndef WS_RING_H
#define WS_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ws_fail.h"

struct ws_ring {
	uint8_t *mem;            /* nslots * slot_bytes, page aligned (not owned) */
	size_t slot_bytes;
	uint32_t nslots;
	uint32_t mask;           /* positions - 1: positions is nslots rounded up to a power of two */
	void *desc;              /* a descriptor of desc_bytes per position (owned) */
	size_t desc_bytes;
	uint32_t *buf_of;        /* slot i uses buffer buf_of[i & mask] (owned) */
	/* Producer only: buffers free for reuse, most recently released on top;
	 * releases up to `folded` are on it; slots up to `assigned` have a buffer. */
	uint32_t *free_stk;
	uint32_t nfree;
	uint32_t folded;
	uint32_t assigned;

	_Alignas(64) uint32_t head;      /* written by the producer */
	uint32_t cons_waiting;           /* consumer sleeps on doorbell */
	uint32_t doorbell;               /* bumped to wake a sleeping consumer (publish, close) */
	_Alignas(64) uint32_t tail;      /* written by the consumer */
	uint32_t prod_waiting;           /* producer sleeps on tail */
	_Alignas(64) uint32_t closed;    /* set once: wakes and stops the consumer */
};

/* mem must hold nslots * slot_bytes. Errors: -EINVAL, -ENOMEM. */
int ws_ring_init(struct ws_ring *r, uint8_t *mem, size_t slot_bytes, uint32_t nslots, size_t desc_bytes) WS_MUST_CHECK;
void ws_ring_destroy(struct ws_ring *r);
/* Start the counters at `start` (an empty ring; tests use it to cross 2^32). */
void ws_ring_start_at(struct ws_ring *r, uint32_t start);

/* The memory of slot i: valid from its reserve (producer) or publish
 * (consumer) until its release; for the producer, until a take folds its
 * release (ws_ring_take's upto). */
static inline uint8_t *ws_ring_slot(const struct ws_ring *r, uint32_t i)
{
	return r->mem + (size_t)r->buf_of[i & r->mask] * r->slot_bytes;
}
static inline void *ws_ring_desc(const struct ws_ring *r, uint32_t i)
{
	return (uint8_t *)r->desc + (size_t)(i & r->mask) * r->desc_bytes;
}

/* Slots published and not yet released (either side may ask). */
uint32_t ws_ring_used(const struct ws_ring *r);

/*
 * Producer: the index of the next free slot, waiting up to timeout_ms for
 * one (0: do not wait; -1: wait for ever). Returns 0 with *idx set, or
 * -EAGAIN when the ring stayed full, -EPIPE when closed. The buffers of
 * every slot released so far may go to the new one: a producer that still
 * reads a released slot (its results) uses the two steps below instead.
 */
int ws_ring_reserve(struct ws_ring *r, int timeout_ms, uint32_t *idx) WS_MUST_CHECK;

/*
 * ws_ring_reserve in two steps. wait_room: 0 once the next slot is free
 * (or -EAGAIN, -EPIPE as above), nothing assigned. take: that slot, given
 * a buffer of the slots released before `upto` only (a tail value read
 * after wait_room's 0): the producer reads slots released after `upto`
 * (whose buffers are not reused yet) until its next take passes them.
 */
int ws_ring_wait_room(struct ws_ring *r, int timeout_ms) WS_MUST_CHECK;
uint32_t ws_ring_take(struct ws_ring *r, uint32_t upto);
/* Producer: hand slot head (the one reserve returned) to the consumer. */
void ws_ring_publish(struct ws_ring *r);
/* Producer: the consumer's release count, to collect finished slots. */
uint32_t ws_ring_tail(const struct ws_ring *r);
/* Producer: wait until tail reaches want (or timeout_ms). 0 or -EAGAIN. */
int ws_ring_wait_tail(struct ws_ring *r, uint32_t want, int timeout_ms);

/*
 * Consumer: wait until at least one slot past `from` is published; returns
 * the producer's head (> from), or from itself when closed and drained.
 */
uint32_t ws_ring_wait_head(struct ws_ring *r, uint32_t from);
/* Consumer: release slots up to (not including) new_tail. */
void ws_ring_release(struct ws_ring *r, uint32_t new_tail);

/* Stop: the consumer's wait returns once everything published was taken. */
void ws_ring_close(struct ws_ring *r);

#endif
