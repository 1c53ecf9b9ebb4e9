#include "ws_pacer.h"

#include <math.h>
#include <string.h>

#define BETA 0.7           /* rate kept on a throttled answer */
#define NEAR 0.85          /* of the rate last throttled: from here, grow slowly */
#define GROWTH_FAR 0.5     /* per second, below NEAR */
#define GROWTH_NEAR 0.01   /* per second, above it */
#define PAST 1.05          /* of the rate last throttled: accepted past it, the cap has moved */
#define STABLE 0.1         /* two refusals this close (of the earlier rate): the store's limit holds */
#define HOLD 0.95          /* of a limit that holds: the pace kept until the next probe */
#define PROBE_MS 30000u    /* a limit that holds is probed again this long after its last refusal */
#define MIN_FILL 0.5       /* requests per second, at the least */
#define MIN_CAPACITY 1.0
#define BURST 8.0          /* a burst takes at most 1/8 s of the rate at once */
#define WAIT_MAX_MS 5000u  /* one request never waits longer for its token */
#define ROUND_MS 1000u     /* refusals this soon after a cut answer requests sent before it: no second cut */

void ws_pacer_init(struct ws_pacer *p)
{
	memset(p, 0, sizeof(*p));
	pthread_mutex_init(&p->mu, NULL);
	p->fill_rate = MIN_FILL;
	p->capacity = MIN_CAPACITY;
}

void ws_pacer_destroy(struct ws_pacer *p) { pthread_mutex_destroy(&p->mu); }

static void refill(struct ws_pacer *p, uint64_t now)
{
	if (p->refill_ms && now > p->refill_ms) {
		p->tokens += (double)(now - p->refill_ms) / 1000.0 * p->fill_rate;
		if (p->tokens > p->capacity)
			p->tokens = p->capacity;
	}
	if (!p->refill_ms || now > p->refill_ms)
		p->refill_ms = now;
}

uint64_t ws_pacer_reserve(struct ws_pacer *p, uint64_t now)
{
	uint64_t wait = 0;
	pthread_mutex_lock(&p->mu);
	if (p->enabled) {
		refill(p, now);
		/* Never reserve further ahead than one request may wait: a
		 * burst of callers does not push the last one minutes out. */
		if (p->tokens - 1.0 < -(double)WAIT_MAX_MS / 1000.0 * p->fill_rate)
			p->tokens = 1.0 - (double)WAIT_MAX_MS / 1000.0 * p->fill_rate;
		p->tokens -= 1.0;
		if (p->tokens < 0) {
			wait = (uint64_t)ceil(-p->tokens / p->fill_rate * 1000.0);
			p->held_ms = now;
		}
		p->waited_ms += wait;
	}
	pthread_mutex_unlock(&p->mu);
	return wait;
}

/* Answers per second over the last second, from the last WS_PACER_SEEN
 * answer times (a faster sender: over the span they cover). */
static double measured(const struct ws_pacer *p, uint64_t now)
{
	unsigned n = 0;
	uint64_t oldest = now;
	for (unsigned i = 0; i < p->nseen; i++) {
		uint64_t t = p->seen[i];
		if (t + 1000 > now) {
			n++;
			oldest = t < oldest ? t : oldest;
		}
	}
	if (n == WS_PACER_SEEN && now > oldest)
		return (double)n * 1000.0 / (double)(now - oldest);
	return (double)n;
}

static void measure(struct ws_pacer *p, uint64_t now)
{
	p->seen[p->seen_next] = now;
	p->seen_next = (p->seen_next + 1) % WS_PACER_SEEN;
	if (p->nseen < WS_PACER_SEEN)
		p->nseen++;
	p->measured = measured(p, now);
}

void ws_pacer_answer(struct ws_pacer *p, bool throttled, uint64_t now)
{
	double rate;
	pthread_mutex_lock(&p->mu);
	rate = p->fill_rate; /* under the lock: another answer's decrease must not be written over */
	measure(p, now);
	if (throttled && p->enabled && p->cut_ms && now < p->cut_ms + ROUND_MS) {
		/* Another refusal of the round already cut for (a shard's lanes
		 * send at once, at the pace of before the cut; a store's window is
		 * a second): counted, the store still pressing, but the rate is not
		 * cut again, or k refusals of one burst would leave 0.7^k of it
		 * and every lane's next write waiting seconds for its token. */
		p->throttles++;
		p->throttle_ms = now;
	} else if (throttled) {
		/* Below the rate that was throttled: the pace once pacing (what
		 * was measured also counts the Retry-After waits), else what was
		 * being sent. */
		double base = p->enabled ? p->fill_rate : p->measured;
		/* Refused near where the store refused before: its limit
		 * holds, and probing it every ten seconds would only buy a
		 * Retry-After wait each time. */
		if (!p->enabled || now >= p->throttle_ms + 1000) /* not one burst's answers */
			p->stable = p->enabled && fabs(base - p->last_max) <= STABLE * p->last_max;
		p->enabled = true;
		p->throttles++;
		p->throttle_ms = now;
		p->last_max = base;
		p->cut_ms = now;
		rate = base * BETA;
	} else if (p->enabled && now > p->answer_ms) {
		/* Accepted: quickly back to near the rate last throttled, then a
		 * per cent more each second past it, so the next refusal (each
		 * costs a Retry-After wait) comes some ten seconds later. */
		double dt = (double)(now - p->answer_ms) / 1000.0;
		/* A limit that holds: quickly to HOLD of it, kept there until
		 * PROBE_MS after the refusal, then probed as below from then. */
		uint64_t probe_ms = p->throttle_ms + (p->stable ? PROBE_MS : 0);
		double since = now > probe_ms ? (double)(now - probe_ms) / 10000.0 : 0; /* in 10 s */
		/* Past the rate last throttled, growing faster the longer the
		 * store has not refused (as CUBIC's convex half). */
		/* Only while the pace holds requests back: a sender with less
		 * to send does not talk the rate up to what it never tried. */
		if (p->held_ms + 1000 > now) {
			double near = (p->stable ? HOLD : NEAR) * p->last_max;
			if (rate < near) {
				rate *= 1.0 + GROWTH_FAR * dt;
				if (rate > near)
					rate = near;
			} else if (now < probe_ms) {
				/* held */
			} else if (rate < PAST * p->last_max) {
				rate *= 1.0 + GROWTH_NEAR * (1.0 + since * since) * dt;
			} else {
				/* Accepted past the rate that was refused: the
				 * store takes more than it did (its cap lifted
				 * or raised); find the new one quickly, as from
				 * a refusal. */
				rate *= 1.0 + GROWTH_FAR * dt;
			}
		}
	}
	if (now > p->answer_ms)
		p->answer_ms = now;
	if (p->enabled) {
		refill(p, now);
		p->fill_rate = rate > MIN_FILL ? rate : MIN_FILL;
		p->capacity = rate / BURST > MIN_CAPACITY ? rate / BURST : MIN_CAPACITY;
		if (p->tokens > p->capacity)
			p->tokens = p->capacity;
	}
	pthread_mutex_unlock(&p->mu);
}

bool ws_pacer_pressed(struct ws_pacer *p, uint64_t now)
{
	bool r;
	pthread_mutex_lock(&p->mu);
	r = p->enabled && ((p->throttle_ms && p->throttle_ms + WS_PACER_PRESSED_MS > now) ||
			   (p->held_ms && p->held_ms + 1000 > now));
	pthread_mutex_unlock(&p->mu);
	return r;
}

double ws_pacer_rate(struct ws_pacer *p)
{
	double r;
	pthread_mutex_lock(&p->mu);
	r = p->enabled ? p->fill_rate : 0;
	pthread_mutex_unlock(&p->mu);
	return r;
}
