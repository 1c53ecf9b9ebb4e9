/*
 * A client-side rate limiter for an object store's write requests, after
 * the token bucket of the AWS SDKs' "adaptive" retry mode.
 *
 * It stays out of the way until the store first says slow down (503
 * SlowDown, 429): until then every request goes at once, so an
 * unthrottled store sees no change at all. From the first throttled
 * answer on, each request takes a token from a bucket refilled at the
 * sending rate (bursts of at most 1/8 s of it). A throttled answer sets
 * that rate to BETA (0.7) times the pace it was sent at (before pacing:
 * the answers of the last second), once a round: the refusals that come
 * back within ROUND_MS (1 s) of the one that cut it were sent at the old
 * pace and do not cut it again (as TCP halves once per window); answers that go through, while the
 * pace holds requests back, grow it at 50 %/s up to NEAR (0.85) of the
 * rate last throttled and then by 1 %/s, faster the longer the store has
 * not refused (as CUBIC's convex half). The store's limit is met some
 * ten seconds apart rather than every second: each refusal costs a
 * Retry-After wait to whatever waits on that request. Accepted past PAST
 * (1.05) times the rate last throttled, the store takes more than it did
 * (its limit lifted or raised): 50 %/s again, until the next refusal.
 *
 * Pure decisions with an explicit clock (tested in test_store_pacer.c,
 * with a simulated store); thread-safe; store_s3.c shares one per
 * endpoint and bucket among every handle of the process (the store's
 * limit is the bucket's, not a connection's).
 */
#ifndef WS_PACER_H
#define WS_PACER_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#define WS_PACER_SEEN 64u

struct ws_pacer {
	pthread_mutex_t mu;
	bool enabled;            /* a throttled answer was seen */
	double fill_rate;        /* tokens per second */
	double capacity;         /* most tokens held */
	double tokens;           /* below 0: reserved ahead */
	uint64_t refill_ms;      /* last refill (0: never) */
	double measured;         /* answers in the last second */
	uint64_t seen[WS_PACER_SEEN]; /* the last answers' times */
	unsigned nseen, seen_next;
	uint64_t answer_ms;      /* the last answer */
	double last_max;         /* the rate last throttled */
	bool stable;             /* and the one before was within STABLE of it */
	uint64_t throttle_ms;    /* when */
	uint64_t cut_ms;         /* the last refusal that cut the rate (one cut a round) */
	uint64_t held_ms;        /* a request last had to wait for its token */
	uint64_t throttles;      /* throttled answers fed */
	uint64_t waited_ms;      /* waits handed out, in total */
};

void ws_pacer_init(struct ws_pacer *p);
void ws_pacer_destroy(struct ws_pacer *p);
/* One request about to be sent at now_ms: reserves its token and returns
 * how long to wait first (0: go now). */
uint64_t ws_pacer_reserve(struct ws_pacer *p, uint64_t now_ms);
/* The store's answer to one request at now_ms: throttled (503 SlowDown,
 * 429) or not (anything else, success or not). */
void ws_pacer_answer(struct ws_pacer *p, bool throttled, uint64_t now_ms);
/* Whether the store is holding this sender back at now_ms: it refused a
 * request in the last WS_PACER_PRESSED_MS, or a request had to wait for
 * its token in the last second. */
#define WS_PACER_PRESSED_MS 10000u
bool ws_pacer_pressed(struct ws_pacer *p, uint64_t now_ms);
/* The sending rate in requests per second (0 while not enabled). */
double ws_pacer_rate(struct ws_pacer *p);

#endif
