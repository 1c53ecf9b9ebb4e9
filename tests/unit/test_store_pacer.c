/*
 * The write pacer of store/ws_pacer.h, fed scripted answers with explicit
 * times: out of the way until the first throttled answer, the rate cut
 * on a throttle, and (against a simulated store that accepts C writes in
 * any one-second window, as tests/s3/throttle.sh's haproxy does) a
 * sender that goes near C without crawling and with few refusals.
 */
#include <pthread.h>
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

/* Pressed (a watermark then carries its manifest): from a refusal for
 * WS_PACER_PRESSED_MS, and while requests wait for their tokens; never
 * before the first refusal; not once both have passed. */
static void test_pressed_while_refused_or_held(void **state)
{
	struct ws_pacer p;
	uint64_t t = 20000;
	(void)state;
	ws_pacer_init(&p);
	for (int i = 0; i < 100; i++, t += 10) {
		assert_int_equal(ws_pacer_reserve(&p, t), 0);
		ws_pacer_answer(&p, false, t);
	}
	assert_false(ws_pacer_pressed(&p, t));
	ws_pacer_answer(&p, true, t);
	assert_true(ws_pacer_pressed(&p, t));
	assert_true(ws_pacer_pressed(&p, t + WS_PACER_PRESSED_MS - 1));
	assert_false(ws_pacer_pressed(&p, t + WS_PACER_PRESSED_MS));
	/* Long after: a burst that has to wait for its tokens presses again,
	 * for a second after the last wait. */
	t += 60000;
	uint64_t waited = 0;
	for (int i = 0; i < 50; i++)
		waited += ws_pacer_reserve(&p, t);
	assert_true(waited > 0);
	assert_true(ws_pacer_pressed(&p, t + 999));
	assert_false(ws_pacer_pressed(&p, t + 1000));
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

/*
 * A shard's tail lanes send at once: when the store's window is full, the
 * writes of one burst are all refused within a moment, each sent at the
 * pace of before the first refusal. They cut the rate once (0.7), not once
 * each (0.7^4 would leave a quarter, every lane's next write waiting
 * seconds for its token while the store has room); a refusal a round
 * (1 s) after the cut cuts it again.
 */
static void test_one_cut_per_round(void **state)
{
	struct ws_pacer p;
	uint64_t t = 10000;
	(void)state;
	ws_pacer_init(&p);
	for (int i = 0; i < 40; i++, t += 100) /* 10 answers a second */
		ws_pacer_answer(&p, false, t);
	ws_pacer_answer(&p, true, t);
	double r = ws_pacer_rate(&p);
	assert_true(r > 0.7 * 10 * 0.8 && r < 0.7 * 10 * 1.2);
	/* Three more lanes' refusals of the same burst. */
	for (int i = 1; i <= 3; i++)
		ws_pacer_answer(&p, true, t + 20 * (uint64_t)i);
	assert_true(ws_pacer_rate(&p) > 0.99 * r && ws_pacer_rate(&p) < 1.01 * r);
	assert_int_equal(p.throttles, 4); /* each counted all the same */
	assert_true(ws_pacer_pressed(&p, t + 60 + WS_PACER_PRESSED_MS - 1));
	/* The next round's refusal: cut again. */
	ws_pacer_answer(&p, true, t + 1000);
	assert_true(ws_pacer_rate(&p) < 0.75 * r);
	ws_pacer_destroy(&p);
}

/* A store that accepts at most cap writes in any 1000 ms window (refusals
 * not counted), cap2 from lift_ms on; the client sends one at a time, each
 * answered after rtt ms, as soon as the pacer lets it. */
struct sim {
	unsigned cap, cap2;
	uint64_t lift_ms, rtt, from, to;
	unsigned reach;        /* accepted in one window that counts as recovered */
	/* results */
	unsigned got;          /* writes accepted in [from, to) */
	unsigned refused;      /* refusals in [from, to) */
	uint64_t reached_ms;   /* first time after lift_ms with reach accepted in the last second; 0: never */
};

static void simulate(struct ws_pacer *p, struct sim *s)
{
	static uint64_t acc[100000];
	size_t n = 0, head = 0;
	uint64_t t = 1000;
	s->got = s->refused = 0;
	s->reached_ms = 0;
	while (t < s->to) {
		if (p)
			t += ws_pacer_reserve(p, t);
		while (head < n && acc[head] + 1000 <= t)
			head++;
		bool ok = n - head < (t >= s->lift_ms ? s->cap2 : s->cap);
		if (ok) {
			assert_true(n < sizeof(acc) / sizeof(acc[0]));
			acc[n++] = t;
			if (t >= s->from)
				s->got++;
			if (t >= s->lift_ms && !s->reached_ms && s->reach && n - head >= s->reach)
				s->reached_ms = t;
		} else if (t >= s->from) {
			s->refused++;
		}
		t += s->rtt;
		if (p)
			ws_pacer_answer(p, !ok, t);
		/* A refused write waits for the store's Retry-After: 1. */
		if (!ok)
			t += 1000;
	}
}

static void test_converges_near_the_cap(void **state)
{
	static const unsigned caps[] = { 5, 22, 80 };
	(void)state;
	for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++) {
		struct ws_pacer p;
		/* 120 s; the last 60 s measured. The sender alone could do 100/s. */
		struct sim paced = { .cap = caps[i], .cap2 = caps[i], .lift_ms = UINT64_MAX, .rtt = 10,
				     .from = 61000, .to = 121000 };
		struct sim unpaced = paced;
		ws_pacer_init(&p);
		simulate(&p, &paced);
		simulate(NULL, &unpaced);
		print_message("cap %u/s: paced %.1f accepted/s, %u refused in 60 s (rate now %.1f); unpaced %.1f/s, "
			      "%u refused\n", caps[i], paced.got / 60.0, paced.refused, ws_pacer_rate(&p),
			      unpaced.got / 60.0, unpaced.refused);
		/* Near the cap, never a crawl, and a fraction of the refusals
		 * (each a Retry-After wait for whatever waits on it): a cap
		 * that holds is kept to and probed about every 30 s. */
		assert_true(paced.got >= (unsigned)(0.88 * caps[i] * 60));
		assert_true(paced.refused <= 3);
		assert_true(paced.refused * 3 <= unpaced.refused);
		ws_pacer_destroy(&p);
	}
}

/*
 * The cap lifted after a minute of throttling (to four times the cap): the
 * pace goes back to what the sender has to send once the next probe finds
 * the store taking more (a cap that held is probed some 30 s after its
 * last refusal), not the minutes that growing a per cent a second from the
 * old cap takes. The recovery is timed to twice the old cap accepted in
 * one second.
 */
static void test_recovers_when_the_cap_lifts(void **state)
{
	static const unsigned caps[] = { 5, 22 };
	(void)state;
	for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++) {
		struct ws_pacer p;
		struct sim s = { .cap = caps[i], .cap2 = 4 * caps[i], .lift_ms = 61000, .rtt = 10, .from = 61000,
				 .to = 121000, .reach = 2 * caps[i] };
		ws_pacer_init(&p);
		simulate(&p, &s);
		print_message("cap %u/s lifted to %u/s: %u accepted a second after %.1f s, %u refused in the 60 s "
			      "after (rate now %.1f)\n", s.cap, s.cap2, s.reach,
			      s.reached_ms ? (double)(s.reached_ms - s.lift_ms) / 1000.0 : -1.0, s.refused,
			      ws_pacer_rate(&p));
		assert_true(s.reached_ms != 0);
		assert_true(s.reached_ms - s.lift_ms <= 40000);
		ws_pacer_destroy(&p);
	}
}

/*
 * A cap that held and then falls (to half, after a minute): the held pace
 * is refused, and the pacer settles under the new cap within seconds
 * rather than holding a rate the store no longer takes. Measured over the
 * minute after a 30 s settling.
 */
static void test_follows_a_cap_that_falls(void **state)
{
	static const unsigned caps[] = { 10, 22, 80 };
	(void)state;
	for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++) {
		struct ws_pacer p;
		struct sim s = { .cap = caps[i], .cap2 = caps[i] / 2, .lift_ms = 61000, .rtt = 10, .from = 91000,
				 .to = 151000 };
		ws_pacer_init(&p);
		simulate(&p, &s);
		print_message("cap %u/s fallen to %u/s: %.1f accepted/s, %u refused in the minute after 30 s "
			      "(rate now %.1f)\n", s.cap, s.cap2, s.got / 60.0, s.refused, ws_pacer_rate(&p));
		assert_true(s.got >= (unsigned)(0.85 * s.cap2 * 60));
		assert_true(s.refused <= 3);
		assert_true(ws_pacer_rate(&p) <= 1.1 * s.cap2);
		ws_pacer_destroy(&p);
	}
}

/*
 * The pacer is shared by every handle of one endpoint in a process: answers
 * come from several threads at once. Each is decided under the lock; the
 * rate was read before it, so an accepted answer could write back the rate
 * from before a concurrent throttle's cut (TSan in CI reports the race on
 * the code before; a plain build shows nothing).
 */
struct answers {
	struct ws_pacer *p;
	bool throttled;
};

static void *answer_many(void *arg)
{
	struct answers *a = arg;
	for (uint64_t i = 0; i < 20000; i++)
		ws_pacer_answer(a->p, a->throttled && i % 8 == 0, 1000 + i);
	return NULL;
}

static void test_answers_from_threads(void **state)
{
	struct ws_pacer p;
	struct answers a = { &p, true }, b = { &p, false };
	pthread_t ta, tb;
	(void)state;
	ws_pacer_init(&p);
	assert_int_equal(pthread_create(&ta, NULL, answer_many, &a), 0);
	assert_int_equal(pthread_create(&tb, NULL, answer_many, &b), 0);
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	assert_true(ws_pacer_rate(&p) > 0);
	ws_pacer_destroy(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_out_of_the_way_until_throttled),
		cmocka_unit_test(test_throttle_cuts_the_rate_and_spaces_requests),
		cmocka_unit_test(test_one_cut_per_round),
		cmocka_unit_test(test_pressed_while_refused_or_held),
		cmocka_unit_test(test_converges_near_the_cap),
		cmocka_unit_test(test_recovers_when_the_cap_lifts),
		cmocka_unit_test(test_follows_a_cap_that_falls),
		cmocka_unit_test(test_answers_from_threads),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
