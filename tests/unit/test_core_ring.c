/*
 * The spill ring (core/ring.h): one producer and one consumer thread,
 * wrap-around far past 2^32 slot indices is not reachable here, so the
 * counters start near the wrap point instead; full and empty edges; close.
 * Runs under TSan in CI.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ring.h"
#include "testutil.h"

struct item {
	uint64_t seq;
	uint64_t sum;
};

struct stress {
	struct ws_ring r;
	uint8_t *mem;
	size_t slot_bytes;
	uint64_t items;
	uint64_t seed;
	uint64_t got, bad;
};

static uint64_t slot_sum(const uint8_t *p, size_t n)
{
	uint64_t h = 1469598103934665603ull;
	wt_fnv(&h, p, n);
	return h;
}

static void *consumer(void *arg)
{
	struct stress *s = arg;
	uint32_t next = s->r.tail;
	uint64_t rng = s->seed ^ 0x9e3779b97f4a7c15ull;
	uint64_t expect = 0;
	for (;;) {
		uint32_t head = ws_ring_wait_head(&s->r, next);
		if (head == next)
			break;
		/* Release in random-sized groups, as an uploader with several in flight. */
		uint32_t n = head - next;
		uint32_t take = 1 + (uint32_t)(wt_rand(&rng) % n);
		for (uint32_t i = 0; i < take; i++) {
			const struct item *d = ws_ring_desc(&s->r, next + i);
			const uint8_t *p = ws_ring_slot(&s->r, next + i);
			if (d->seq != expect || slot_sum(p, s->slot_bytes) != d->sum)
				s->bad++;
			expect++;
			s->got++;
		}
		next += take;
		ws_ring_release(&s->r, next);
	}
	return NULL;
}

static void run_stress(uint32_t nslots, size_t slot_bytes, uint64_t items, uint32_t start)
{
	struct stress s;
	pthread_t th;
	uint64_t rng = 42;
	memset(&s, 0, sizeof(s));
	s.slot_bytes = slot_bytes;
	s.items = items;
	s.seed = 7;
	s.mem = calloc(nslots, slot_bytes);
	assert_non_null(s.mem);
	assert_int_equal(ws_ring_init(&s.r, s.mem, slot_bytes, nslots, sizeof(struct item)), 0);
	/* Start near the 32-bit wrap so the free-running counters cross it. */
	ws_ring_start_at(&s.r, start);
	assert_int_equal(pthread_create(&th, NULL, consumer, &s), 0);
	for (uint64_t i = 0; i < items; i++) {
		uint32_t idx;
		assert_int_equal(ws_ring_reserve(&s.r, -1, &idx), 0);
		assert_int_equal(idx, (uint32_t)(start + i));
		uint8_t *p = ws_ring_slot(&s.r, idx);
		for (size_t b = 0; b < slot_bytes; b += 8) {
			uint64_t v = wt_rand(&rng);
			memcpy(p + b, &v, slot_bytes - b < 8 ? slot_bytes - b : 8);
		}
		struct item *d = ws_ring_desc(&s.r, idx);
		d->seq = i;
		d->sum = slot_sum(p, slot_bytes);
		ws_ring_publish(&s.r);
	}
	assert_int_equal(ws_ring_wait_tail(&s.r, s.r.head, -1), 0);
	ws_ring_close(&s.r);
	pthread_join(th, NULL);
	assert_int_equal(s.got, items);
	assert_int_equal(s.bad, 0);
	assert_int_equal(ws_ring_used(&s.r), 0);
	ws_ring_destroy(&s.r);
	free(s.mem);
}

static void test_stress_small_ring(void **state)
{
	(void)state;
	run_stress(2, 64, wt_env_u64("WS_RING_ITEMS", 200000), 0);
}

static void test_stress_wraps_counter(void **state)
{
	(void)state;
	run_stress(8, 256, 100000, UINT32_MAX - 5000);
}

/* Slot counts that are no power of two (a ring_bytes of 12 or 5 batches):
 * across the 32-bit wrap, indices UINT32_MAX and 0 must not share a
 * descriptor or a buffer while both are in flight. */
static void test_stress_wraps_odd_counts(void **state)
{
	(void)state;
	for (uint32_t n = 3; n <= 7; n++)
		run_stress(n, 64, 40000, UINT32_MAX - 2000);
	run_stress(12, 64, 40000, UINT32_MAX - 2000);
}

static void test_stress_one_slot(void **state)
{
	(void)state;
	run_stress(1, 16, 20000, UINT32_MAX - 3);
}

static void test_full_and_empty_edges(void **state)
{
	struct ws_ring r;
	uint8_t mem[4 * 32];
	uint32_t idx;
	(void)state;
	assert_int_equal(ws_ring_init(&r, mem, 32, 4, 8), 0);
	assert_int_equal(ws_ring_used(&r), 0);
	for (uint32_t i = 0; i < 4; i++) {
		assert_int_equal(ws_ring_reserve(&r, 0, &idx), 0);
		assert_int_equal(idx, i);
		/* Reserving again without publishing gives the same slot. */
		assert_int_equal(ws_ring_reserve(&r, 0, &idx), 0);
		assert_int_equal(idx, i);
		ws_ring_publish(&r);
	}
	assert_int_equal(ws_ring_used(&r), 4);
	/* Full: no wait fails at once, a short wait times out. */
	assert_int_equal(ws_ring_reserve(&r, 0, &idx), -EAGAIN);
	int64_t t0 = wt_now_ms();
	assert_int_equal(ws_ring_reserve(&r, 30, &idx), -EAGAIN);
	assert_true(wt_now_ms() - t0 >= 25);
	assert_int_equal(ws_ring_wait_tail(&r, 1, 0), -EAGAIN);
	/* The slot index wraps onto memory slot 0. */
	assert_ptr_equal(ws_ring_slot(&r, 4), mem);
	ws_ring_release(&r, 1);
	assert_int_equal(ws_ring_used(&r), 3);
	assert_int_equal(ws_ring_reserve(&r, 0, &idx), 0);
	assert_int_equal(idx, 4);
	ws_ring_release(&r, 4);
	assert_int_equal(ws_ring_used(&r), 0);
	assert_int_equal(ws_ring_wait_tail(&r, 4, 0), 0);
	/* Empty and closed: the consumer's wait returns its own index. */
	ws_ring_close(&r);
	assert_int_equal(ws_ring_wait_head(&r, 4), 4);
	assert_int_equal(ws_ring_reserve(&r, 0, &idx), -EPIPE);
	ws_ring_destroy(&r);
}

/*
 * A consumer that keeps up makes the producer reuse the buffer released
 * last (still in cache), not walk the whole ring; buffers of slots still in
 * flight are never handed out twice.
 */
static void test_reuses_hot_buffer(void **state)
{
	struct ws_ring r;
	uint8_t mem[8 * 32];
	uint32_t idx;
	(void)state;
	assert_int_equal(ws_ring_init(&r, mem, 32, 8, 8), 0);
	/* Keeping up: one slot in flight at a time, always buffer 0. */
	for (uint32_t i = 0; i < 20; i++) {
		assert_int_equal(ws_ring_reserve(&r, 0, &idx), 0);
		assert_int_equal(idx, i);
		assert_ptr_equal(ws_ring_slot(&r, idx), mem);
		ws_ring_publish(&r);
		ws_ring_release(&r, i + 1);
	}
	/* Three in flight: three distinct buffers. */
	uint8_t *b[3];
	for (uint32_t i = 0; i < 3; i++) {
		assert_int_equal(ws_ring_reserve(&r, 0, &idx), 0);
		b[i] = ws_ring_slot(&r, idx);
		for (uint32_t j = 0; j < i; j++)
			assert_ptr_not_equal(b[i], b[j]);
		ws_ring_publish(&r);
	}
	/* Release the first two: the next slot takes the one released last. */
	ws_ring_release(&r, 20 + 2);
	assert_int_equal(ws_ring_reserve(&r, 0, &idx), 0);
	assert_ptr_equal(ws_ring_slot(&r, idx), b[1]);
	/* Reserving again before publishing keeps the same buffer. */
	assert_int_equal(ws_ring_reserve(&r, 0, &idx), 0);
	assert_ptr_equal(ws_ring_slot(&r, idx), b[1]);
	ws_ring_publish(&r);
	/* Fill the ring: every buffer in flight exactly once. */
	bool seen[8] = { false };
	for (uint32_t i = 0; i < 6; i++) {
		assert_int_equal(ws_ring_reserve(&r, 0, &idx), 0);
		ws_ring_publish(&r);
	}
	assert_int_equal(ws_ring_used(&r), 8);
	for (uint32_t i = r.tail; i != r.head; i++) {
		size_t k = (size_t)(ws_ring_slot(&r, i) - mem) / 32;
		assert_true(k < 8);
		assert_false(seen[k]);
		seen[k] = true;
	}
	assert_int_equal(ws_ring_reserve(&r, 0, &idx), -EAGAIN);
	ws_ring_destroy(&r);
}

static void test_bad_init(void **state)
{
	struct ws_ring r;
	uint8_t mem[64];
	(void)state;
	assert_int_equal(ws_ring_init(&r, NULL, 32, 2, 8), -EINVAL);
	assert_int_equal(ws_ring_init(&r, mem, 0, 2, 8), -EINVAL);
	assert_int_equal(ws_ring_init(&r, mem, 32, 0, 8), -EINVAL);
	assert_int_equal(ws_ring_init(&r, mem, 32, 2, 0), -EINVAL);
}

/* A consumer asleep on an empty ring wakes for a publish (no lost wake-up). */
static void *late_consumer(void *arg)
{
	struct ws_ring *r = arg;
	uint32_t head = ws_ring_wait_head(r, 0);
	ws_ring_release(r, head);
	return NULL;
}

static void test_sleeping_consumer_wakes(void **state)
{
	struct ws_ring r;
	uint8_t mem[2 * 16];
	pthread_t th;
	uint32_t idx;
	(void)state;
	assert_int_equal(ws_ring_init(&r, mem, 16, 2, 8), 0);
	assert_int_equal(pthread_create(&th, NULL, late_consumer, &r), 0);
	wt_sleep_ms(50);
	assert_int_equal(ws_ring_reserve(&r, 0, &idx), 0);
	ws_ring_publish(&r);
	assert_int_equal(ws_ring_wait_tail(&r, 1, 5000), 0);
	pthread_join(th, NULL);
	ws_ring_destroy(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_full_and_empty_edges),
		cmocka_unit_test(test_bad_init),
		cmocka_unit_test(test_reuses_hot_buffer),
		cmocka_unit_test(test_sleeping_consumer_wakes),
		cmocka_unit_test(test_stress_small_ring),
		cmocka_unit_test(test_stress_wraps_counter),
		cmocka_unit_test(test_stress_wraps_odd_counts),
		cmocka_unit_test(test_stress_one_slot),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
