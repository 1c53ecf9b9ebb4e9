/*
 * The adaptive decisions of core/adapt.h, each fed a scripted history with
 * explicit times: AIMD window, Retry-After hold, coalescing gather time and
 * the one-write-per-key-per-interval due time. No clock is read.
 */
#include <stdbool.h>
#include <stdint.h>

#include "adapt.h"
#include "testutil.h"

static void test_aimd_starts_full_and_halves_once_per_round(void **state)
{
	(void)state;
	struct ws_aimd a;
	ws_aimd_init(&a, 8);
	assert_int_equal(ws_aimd_window(&a), 8);
	/* Eight requests of one round all throttled: one halving, not eight. */
	ws_aimd_round(&a, 0, 8, 0, 1000);
	assert_int_equal(ws_aimd_window(&a), 4);
	ws_aimd_round(&a, 3, 1, 0, 1001);
	assert_int_equal(ws_aimd_window(&a), 2);
	ws_aimd_round(&a, 0, 2, 0, 1002);
	assert_int_equal(ws_aimd_window(&a), 1);
	/* Never below one: a shard always makes progress. */
	ws_aimd_round(&a, 0, 1, 0, 1003);
	assert_int_equal(ws_aimd_window(&a), 1);
	assert_int_equal(a.decreases, 4);
}

static void test_aimd_additive_increase_bounded(void **state)
{
	(void)state;
	struct ws_aimd a;
	ws_aimd_init(&a, 4);
	ws_aimd_round(&a, 0, 4, 0, 0);
	ws_aimd_round(&a, 0, 2, 0, 0);
	assert_int_equal(ws_aimd_window(&a), 1);
	/* Window 1: one success is a window's worth, +1 slot. */
	ws_aimd_round(&a, 1, 0, 0, 0);
	assert_int_equal(ws_aimd_window(&a), 2);
	/* Window 2: one success adds half a slot, a round of two a whole one. */
	ws_aimd_round(&a, 1, 0, 0, 0);
	assert_int_equal(a.win, 2 * WS_AIMD_ONE + WS_AIMD_ONE / 2);
	assert_int_equal(ws_aimd_window(&a), 2);
	a.win = 2 * WS_AIMD_ONE;
	ws_aimd_round(&a, 2, 0, 0, 0);
	assert_int_equal(ws_aimd_window(&a), 3);
	for (int i = 0; i < 100; i++)
		ws_aimd_round(&a, 4, 0, 0, 0);
	assert_int_equal(ws_aimd_window(&a), 4); /* uploads_in_flight bounds it */
	assert_int_equal(a.win, 4 * WS_AIMD_ONE);
	/* An empty round says nothing about the store. */
	ws_aimd_round(&a, 0, 0, 0, 0);
	assert_int_equal(ws_aimd_window(&a), 4);
}

static void test_aimd_max_one(void **state)
{
	(void)state;
	struct ws_aimd a;
	ws_aimd_init(&a, 1);
	ws_aimd_round(&a, 0, 1, 0, 0);
	assert_int_equal(ws_aimd_window(&a), 1);
	ws_aimd_round(&a, 5, 0, 0, 0);
	assert_int_equal(ws_aimd_window(&a), 1);
	ws_aimd_init(&a, 0); /* nonsense in, one slot out */
	assert_int_equal(ws_aimd_window(&a), 1);
}

static void test_aimd_retry_after_holds(void **state)
{
	(void)state;
	struct ws_aimd a;
	ws_aimd_init(&a, 8);
	assert_int_equal(ws_aimd_wait_ms(&a, 500), 0);
	/* The store asked for quiet until 3000; the round ended at 1000. */
	ws_aimd_round(&a, 0, 1, 3000, 1000);
	assert_int_equal(ws_aimd_wait_ms(&a, 1000), 2000);
	assert_int_equal(ws_aimd_wait_ms(&a, 2500), 500);
	assert_int_equal(ws_aimd_wait_ms(&a, 3000), 0);
	/* A hold the store's own retries already waited out: no extra wait. */
	ws_aimd_init(&a, 8);
	ws_aimd_round(&a, 0, 1, 900, 1000);
	assert_int_equal(ws_aimd_wait_ms(&a, 1000), 0);
	/* A shorter hold later does not shorten a longer one. */
	ws_aimd_round(&a, 0, 1, 6000, 1000);
	ws_aimd_round(&a, 0, 1, 2100, 1100);
	assert_int_equal(ws_aimd_wait_ms(&a, 1100), 4900);
	/* A hostile Retry-After is held at most WS_AIMD_HOLD_MAX_MS. */
	ws_aimd_init(&a, 8);
	ws_aimd_round(&a, 0, 1, UINT64_MAX / 2, 10);
	assert_int_equal(ws_aimd_wait_ms(&a, 10), WS_AIMD_HOLD_MAX_MS);
}

static void test_age_coalesces_when_throttled(void **state)
{
	(void)state;
	/* Unthrottled from the start: stays at batch_age_ms_max. */
	assert_int_equal(ws_adapt_age_next(0, 1000, 1500, false), 1000);
	assert_int_equal(ws_adapt_age_next(1000, 1000, 1500, false), 1000);
	/* Throttled: the bound at once. */
	assert_int_equal(ws_adapt_age_next(1000, 1000, 1500, true), 1500);
	assert_int_equal(ws_adapt_age_next(1500, 1000, 1500, true), 1500);
	/* Accepted again: halfway back per tail, to the floor. */
	uint32_t cur = 1500;
	cur = ws_adapt_age_next(cur, 1000, 1500, false);
	assert_int_equal(cur, 1250);
	cur = ws_adapt_age_next(cur, 1000, 1500, false);
	assert_int_equal(cur, 1125);
	for (int i = 0; i < 20; i++)
		cur = ws_adapt_age_next(cur, 1000, 1500, false);
	assert_int_equal(cur, 1000);
	/* A bound below the age is no bound: never shorter than configured. */
	assert_int_equal(ws_adapt_age_next(1000, 1000, 10, true), 1000);
	/* batch_age_ms_max 0 (ship at once) still coalesces when throttled. */
	assert_int_equal(ws_adapt_age_next(0, 0, 300, true), 300);
	assert_int_equal(ws_adapt_age_next(300, 0, 300, false), 150);
}

static void test_key_due(void **state)
{
	(void)state;
	/* Never written: due when due. */
	assert_int_equal(ws_adapt_key_due(5000, 0, 1000, 0), 5000);
	/* Written 200 ms before it is due: waits out the interval. */
	assert_int_equal(ws_adapt_key_due(5000, 4800, 1000, 0), 5800);
	/* Written long ago: due when due. */
	assert_int_equal(ws_adapt_key_due(5000, 3000, 1000, 0), 5000);
	/* Exactly one interval: allowed. */
	assert_int_equal(ws_adapt_key_due(5000, 4000, 1000, 0), 5000);
	/* No limit configured. */
	assert_int_equal(ws_adapt_key_due(5000, 4999, 0, 0), 5000);
	/* A tail that takes 30 ms to be ready for its write starts 30 ms
	 * before the interval allows that write (the write itself waits). */
	assert_int_equal(ws_adapt_key_due(5000, 4800, 1000, 30), 5770);
	/* ... never before its own due time ... */
	assert_int_equal(ws_adapt_key_due(5790, 4800, 1000, 30), 5790);
	/* ... and a lead longer than the interval counts as the interval. */
	assert_int_equal(ws_adapt_key_due(5000, 4800, 1000, 5000), 5000);
	assert_int_equal(ws_adapt_key_due(4000, 4800, 1000, 5000), 4800);
}

static void test_lead_learnt(void **state)
{
	uint32_t lead = 0, dev = 0;
	(void)state;
	/* The first sample: itself plus half of it. */
	assert_int_equal(ws_adapt_lead_next(&lead, &dev, 20, 500), 30);
	/* Steady samples: the deviation decays, the lead goes to the sample. */
	for (int i = 0; i < 40; i++)
		ws_adapt_lead_next(&lead, &dev, 20, 500);
	assert_int_equal(lead, 20);
	assert_true(dev <= 1);
	/* One slow tail raises it at once by its deviation, not to the sample. */
	uint32_t l = ws_adapt_lead_next(&lead, &dev, 120, 500);
	assert_true(l > 40 && l < 120);
	/* Capped: a backlog's long tails never start one more than cap early. */
	for (int i = 0; i < 40; i++)
		l = ws_adapt_lead_next(&lead, &dev, 5000, 500);
	assert_int_equal(l, 500);
	assert_true(lead <= 500);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_aimd_starts_full_and_halves_once_per_round),
		cmocka_unit_test(test_aimd_additive_increase_bounded),
		cmocka_unit_test(test_aimd_max_one),
		cmocka_unit_test(test_aimd_retry_after_holds),
		cmocka_unit_test(test_age_coalesces_when_throttled),
		cmocka_unit_test(test_key_due),
		cmocka_unit_test(test_lead_learnt),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
