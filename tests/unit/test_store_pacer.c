/*
 * The write pacer of store/ws_pacer.h, fed scripted answers with explicit
 * times: out of the way until the first throttled answer, the rate cut
 * on a throttle, and (against a simulated store that accepts C writes in
 * any one-second window, as tests/s3/throttle.sh's haproxy does) a
 * sender that goes near C without crawling and with few refusals.
 */
#include <stdbool.h>
#include <stdint.h>

#include "testutil.h"
#include "ws_pacer.h"

static void test_out_of_the_way_until_throttled(void **state)
{
	struct ws_pacer p;
	(void)state;
	ws_pacer_init(&p);
	/* A thousand requests in one millisecond, all answered: none waits. */
	for (int i = 0; i < 1000; i++) {
		assert_int_equal(ws_pacer_reserve(&p, 5000), 0);
		ws_pacer_answer(&p, false, 5000 + (uint64_t)i);
	}
	assert_true(ws_pacer_rate(&p) == 0);
	assert_int_equal(p.waited_ms, 0);
	ws_pacer_destroy(&p);
}

static void test_throttle_cuts_the_rate_and_spaces_requests(void **state)
{
	struct ws_pacer p;
	uint64_t t = 10000, w, prev = 0;
	(void)state;
	ws_pacer_init(&p);
	/* 40 answers a second for three seconds, then one throttled. */
	for (int i = 0; i < 120; i++, t += 25)
		ws_pacer_answer(&p, false, t);
	ws_pacer_answer(&p, true, t);
	double r = ws_pacer_rate(&p);
	assert_true(r > 0.7 * 40 * 0.8 && r < 0.7 * 40 * 1.2); /* BETA x the rate being sent */
	/* A burst at one instant: each request waits about 1/r more than the one before. */
	for (int i = 0; i < 10; i++) {
		w = ws_pacer_reserve(&p, t);
		if (i > 1) {
			assert_true(w > prev);
			assert_true(w - prev >= (uint64_t)(1000 / r) - 1 && w - prev <= (uint64_t)(1000 / r) + 2);
		}
		prev = w;
	}
	/* Reservations never push a request more than 5 s out. */
	for (int i = 0; i < 1000; i++)
		assert_true(ws_pacer_reserve(&p, t) <= 5000);
	ws_pacer_destroy(&p);
}

/* A store that accepts at most cap writes in any 1000 ms window (refusals
 * not counted); the client sends one at a time, each answered after rtt
 * ms, as soon as the pacer lets it. Returns writes accepted in [from, to). */
static unsigned simulate(struct ws_pacer *p, unsigned cap, uint64_t rtt, uint64_t to, uint64_t from,
			 unsigned *refused)
{
	static uint64_t acc[100000];
	size_t n = 0, head = 0;
	unsigned in_window = 0;
	uint64_t t = 1000;
	*refused = 0;
	while (t < to) {
		if (p)
			t += ws_pacer_reserve(p, t);
		while (head < n && acc[head] + 1000 <= t)
			head++;
		bool ok = n - head < cap;
		if (ok) {
			assert_true(n < sizeof(acc) / sizeof(acc[0]));
			acc[n++] = t;
			if (t >= from && t < to)
				in_window++;
		} else if (t >= from) {
			(*refused)++;
		}
		t += rtt;
		if (p)
			ws_pacer_answer(p, !ok, t);
		/* A refused write waits for the store's Retry-After: 1. */
		if (!ok)
			t += 1000;
	}
	return in_window;
}

static void test_converges_near_the_cap(void **state)
{
	static const unsigned caps[] = { 5, 22, 80 };
	(void)state;
	for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++) {
		struct ws_pacer p;
		unsigned refused, got, refused_unpaced, got_unpaced;
		ws_pacer_init(&p);
		/* 120 s; the last 60 s measured. The sender alone could do 100/s. */
		got = simulate(&p, caps[i], 10, 121000, 61000, &refused);
		got_unpaced = simulate(NULL, caps[i], 10, 121000, 61000, &refused_unpaced);
		print_message("cap %u/s: paced %.1f accepted/s, %u refused in 60 s (rate now %.1f); unpaced %.1f/s, "
			      "%u refused\n", caps[i], got / 60.0, refused, ws_pacer_rate(&p), got_unpaced / 60.0,
			      refused_unpaced);
		/* Near the cap, never a crawl, and a fraction of the refusals
		 * (each a Retry-After wait for whatever waits on it). */
		assert_true(got >= (unsigned)(0.75 * caps[i] * 60));
		assert_true(refused <= 10);
		assert_true(refused * 3 <= refused_unpaced);
		ws_pacer_destroy(&p);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_out_of_the_way_until_throttled),
		cmocka_unit_test(test_throttle_cuts_the_rate_and_spaces_requests),
		cmocka_unit_test(test_converges_near_the_cap),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
