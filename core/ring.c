#include "ring.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "ws_assert.h"
#include "ws_clock.h"

static void futex_wait(uint32_t *addr, uint32_t val, int timeout_ms)
{
	struct timespec ts, *tp = NULL;
	if (timeout_ms >= 0) {
		ts.tv_sec = timeout_ms / 1000;
		ts.tv_nsec = (long)(timeout_ms % 1000) * 1000000L;
		tp = &ts;
	}
	syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, val, tp, NULL, 0);
}

static void futex_wake(uint32_t *addr)
{
	syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

int ws_ring_init(struct ws_ring *r, uint8_t *mem, size_t slot_bytes, uint32_t nslots, size_t desc_bytes)
{
	memset(r, 0, sizeof(*r));
	if (!mem || slot_bytes == 0 || nslots == 0 || nslots > (1u << 20) || desc_bytes == 0)
		return -EINVAL;
	/* Slot indices run free through 2^32: a position per index modulo a
	 * power of two (which divides 2^32) keeps consecutive indices on
	 * distinct positions across the wrap; modulo nslots, UINT32_MAX and 0
	 * would share one while both are in flight. Buffers stay nslots. */
	uint32_t positions = 1;
	while (positions < nslots)
		positions <<= 1;
	r->mask = positions - 1;
	r->desc = calloc(positions, desc_bytes);
	r->buf_of = calloc(positions, sizeof(*r->buf_of));
	r->free_stk = calloc(nslots, sizeof(*r->free_stk));
	if (!r->desc || !r->buf_of || !r->free_stk) {
		ws_ring_destroy(r);
		return -ENOMEM;
	}
	/* Buffer 0 on top: a fresh ring starts at the front of its memory. */
	for (uint32_t b = 0; b < nslots; b++)
		r->free_stk[b] = nslots - 1 - b;
	r->nfree = nslots;
	r->mem = mem;
	r->slot_bytes = slot_bytes;
	r->nslots = nslots;
	r->desc_bytes = desc_bytes;
	return 0;
}

void ws_ring_destroy(struct ws_ring *r)
{
	free(r->desc);
	free(r->buf_of);
	free(r->free_stk);
	r->desc = NULL;
	r->buf_of = NULL;
	r->free_stk = NULL;
}

void ws_ring_start_at(struct ws_ring *r, uint32_t start)
{
	r->head = r->tail = r->folded = r->assigned = start;
}

/*
 * Producer: give slot `head` a buffer, once. Buffers of slots released
 * since the last call go on the stack first, oldest first, so the one
 * released last (still in cache) is taken. Slots in flight are
 * assigned - folded <= nslots - 1 here, so the stack is never empty.
 */
static void assign_buffer(struct ws_ring *r, uint32_t head, uint32_t tail)
{
	if (r->assigned != head)
		return; /* reserved again before publishing: keep its buffer */
	while (r->folded != tail) {
		WS_ASSERT(r->nfree < r->nslots);
		r->free_stk[r->nfree++] = r->buf_of[r->folded & r->mask];
		r->folded++;
	}
	WS_ASSERT(r->nfree > 0);
	r->buf_of[head & r->mask] = r->free_stk[--r->nfree];
	r->assigned = head + 1;
}

uint32_t ws_ring_used(const struct ws_ring *r)
{
	/* C1/P2: a racy difference is only a snapshot (metrics, drain checks). */
	/* Tail first: read after head, a tail the consumer moved meanwhile
	 * could pass it, and the difference wrap to 2^32. Clamped as well. */
	uint32_t tail = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
	uint32_t used = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE) - tail;
	return used <= r->nslots ? used : r->nslots;
}

uint32_t ws_ring_tail(const struct ws_ring *r)
{
	return __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE); /* P2: pairs with C2 */
}

/*
 * Sleep while *word == seen. The waiting flag is raised before the final
 * check, both sequentially consistent, and a waker moves the word before it
 * reads the flag: either we see the new value, or the waker sees the flag
 * and wakes us. No lost wake-up; no system call when nobody waits.
 */
static void sleep_on(uint32_t *word, uint32_t *flag, uint32_t seen, int timeout_ms)
{
	__atomic_store_n(flag, 1, __ATOMIC_SEQ_CST);          /* F1: pairs with the waker's flag load */
	if (__atomic_load_n(word, __ATOMIC_SEQ_CST) == seen) /* F2: pairs with the waker's word store */
		futex_wait(word, seen, timeout_ms);
	__atomic_store_n(flag, 0, __ATOMIC_SEQ_CST);
}

static void wake(uint32_t *word, uint32_t *flag)
{
	if (__atomic_load_n(flag, __ATOMIC_SEQ_CST)) /* F1's pair, after our word store */
		futex_wake(word);
}

static int remaining_ms(uint64_t deadline)
{
	uint64_t now = ws_mono_ms();
	return now >= deadline ? 0 : (int)(deadline - now);
}

/* Producer: sleep until tail may have moved past `seen`; false once the
 * time is up (timeout_ms 0: at once; -1: never). */
static bool wait_tail_moves(struct ws_ring *r, uint32_t seen, int timeout_ms, uint64_t deadline)
{
	int left = -1;
	if (timeout_ms == 0)
		return false;
	if (timeout_ms > 0 && (left = remaining_ms(deadline)) == 0)
		return false;
	sleep_on(&r->tail, &r->prod_waiting, seen, left);
	return true;
}

int ws_ring_wait_room(struct ws_ring *r, int timeout_ms)
{
	uint32_t head = r->head; /* only we write it */
	uint64_t deadline = timeout_ms > 0 ? ws_mono_ms() + (uint64_t)timeout_ms : 0;

	for (;;) {
		uint32_t tail = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE); /* P2: pairs with C2 */
		if (__atomic_load_n(&r->closed, __ATOMIC_ACQUIRE))        /* X2: pairs with X1 */
			return -EPIPE;
		WS_ASSERT(head - tail <= r->nslots);
		if (head - tail < r->nslots)
			return 0;
		if (!wait_tail_moves(r, tail, timeout_ms, deadline))
			return -EAGAIN;
	}
}

uint32_t ws_ring_take(struct ws_ring *r, uint32_t upto)
{
	uint32_t head = r->head;
	/* Released (P2: pairs with C2), and room for head below it. */
	WS_ASSERT(upto - r->folded <= __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE) - r->folded);
	WS_ASSERT(head - upto < r->nslots);
	assign_buffer(r, head, upto);
	return head;
}

int ws_ring_reserve(struct ws_ring *r, int timeout_ms, uint32_t *idx)
{
	int rc = ws_ring_wait_room(r, timeout_ms);
	if (rc == 0)
		*idx = ws_ring_take(r, __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE)); /* P2: pairs with C2 */
	return rc;
}

/* Ring the consumer's doorbell if it sleeps (or is about to). */
static void ring_bell(struct ws_ring *r)
{
	__atomic_fetch_add(&r->doorbell, 1, __ATOMIC_SEQ_CST); /* D1: pairs with D2 */
	futex_wake(&r->doorbell);
}

void ws_ring_publish(struct ws_ring *r)
{
	/* Only a reserved slot is published: at most nslots in flight. */
	WS_ASSERT(r->head - __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE) < r->nslots);
	WS_ASSERT(r->assigned == r->head + 1);
	__atomic_store_n(&r->head, r->head + 1, __ATOMIC_SEQ_CST); /* P1: pairs with C1 */
	if (__atomic_load_n(&r->cons_waiting, __ATOMIC_SEQ_CST))  /* F1's pair (the consumer's flag) */
		ring_bell(r);
}

int ws_ring_wait_tail(struct ws_ring *r, uint32_t want, int timeout_ms)
{
	uint64_t deadline = timeout_ms > 0 ? ws_mono_ms() + (uint64_t)timeout_ms : 0;
	for (;;) {
		uint32_t tail = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE); /* P2: pairs with C2 */
		if ((int32_t)(tail - want) >= 0)
			return 0;
		if (!wait_tail_moves(r, tail, timeout_ms, deadline))
			return -EAGAIN;
	}
}

/*
 * The consumer sleeps on a doorbell rather than on head, so that close can
 * wake it too, and with no timeout: an idle shard's upload thread makes no
 * system call at all. The bell's value is read before the final checks; a
 * publish or close after them bumps it, so the futex wait returns at once.
 */
uint32_t ws_ring_wait_head(struct ws_ring *r, uint32_t from)
{
	for (;;) {
		uint32_t head = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE), bell; /* C1: pairs with P1 */
		if (head != from)
			return head;
		if (__atomic_load_n(&r->closed, __ATOMIC_ACQUIRE)) /* X2: pairs with X1 */
			return from;
		bell = __atomic_load_n(&r->doorbell, __ATOMIC_SEQ_CST); /* D2: pairs with D1 */
		__atomic_store_n(&r->cons_waiting, 1, __ATOMIC_SEQ_CST); /* F1 */
		if (__atomic_load_n(&r->head, __ATOMIC_SEQ_CST) == from && /* F2 (C1) */
		    !__atomic_load_n(&r->closed, __ATOMIC_SEQ_CST))
			futex_wait(&r->doorbell, bell, -1);
		__atomic_store_n(&r->cons_waiting, 0, __ATOMIC_SEQ_CST);
	}
}

void ws_ring_release(struct ws_ring *r, uint32_t new_tail)
{
	/* Never past what was published, never backwards. */
	WS_ASSERT(new_tail - r->tail <= __atomic_load_n(&r->head, __ATOMIC_ACQUIRE) - r->tail);
	__atomic_store_n(&r->tail, new_tail, __ATOMIC_SEQ_CST); /* C2: pairs with P2 */
	wake(&r->tail, &r->prod_waiting);
}

void ws_ring_close(struct ws_ring *r)
{
	__atomic_store_n(&r->closed, 1, __ATOMIC_SEQ_CST); /* X1: pairs with X2 */
	ring_bell(r);
	futex_wake(&r->tail);
}
