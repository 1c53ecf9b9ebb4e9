#include "adapt.h"

void ws_aimd_init(struct ws_aimd *a, uint32_t max)
{
	a->max = max ? max : 1;
	a->win = a->max * WS_AIMD_ONE;
	a->hold_until_ms = 0;
	a->decreases = a->increases = 0;
}

uint32_t ws_aimd_window(const struct ws_aimd *a)
{
	uint32_t w = a->win / WS_AIMD_ONE;
	return w < 1 ? 1 : w > a->max ? a->max : w;
}

void ws_aimd_round(struct ws_aimd *a, uint32_t ok, uint32_t throttled, uint64_t retry_until_ms, uint64_t now_ms)
{
	const uint32_t top = a->max * WS_AIMD_ONE;
	if (retry_until_ms > now_ms) {
		uint64_t until = retry_until_ms - now_ms > WS_AIMD_HOLD_MAX_MS ? now_ms + WS_AIMD_HOLD_MAX_MS : retry_until_ms;
		if (until > a->hold_until_ms)
			a->hold_until_ms = until;
	}
	if (throttled) {
		a->win /= 2;
		if (a->win < WS_AIMD_ONE)
			a->win = WS_AIMD_ONE;
		a->decreases++;
		return;
	}
	if (ok == 0 || a->win >= top)
		return;
	/* One slot per window's worth of successes: ok / window slots. */
	uint64_t add = (uint64_t)ok * WS_AIMD_ONE * WS_AIMD_ONE / a->win;
	uint64_t w = a->win + (add ? add : 1);
	a->win = w > top ? top : (uint32_t)w;
	a->increases++;
}

uint64_t ws_aimd_wait_ms(const struct ws_aimd *a, uint64_t now_ms)
{
	return a->hold_until_ms > now_ms ? a->hold_until_ms - now_ms : 0;
}

uint32_t ws_adapt_age_next(uint32_t cur_ms, uint32_t age_ms, uint32_t bound_ms, bool throttled)
{
	if (bound_ms < age_ms)
		bound_ms = age_ms;
	if (cur_ms < age_ms)
		cur_ms = age_ms;
	if (cur_ms > bound_ms)
		cur_ms = bound_ms;
	if (throttled)
		return bound_ms;
	return age_ms + (cur_ms - age_ms) / 2;
}

uint64_t ws_adapt_key_due(uint64_t due_ms, uint64_t last_sent_ms, uint32_t interval_ms, uint32_t lead_ms)
{
	if (!interval_ms || !last_sent_ms)
		return due_ms;
	const uint64_t at = last_sent_ms + interval_ms - (lead_ms < interval_ms ? lead_ms : interval_ms);
	return at > due_ms ? at : due_ms;
}

uint32_t ws_adapt_lead_next(uint32_t *lead_ms, uint32_t *dev_ms, uint64_t sample_ms, uint32_t cap_ms)
{
	const uint32_t s = sample_ms > cap_ms ? cap_ms : (uint32_t)sample_ms;
	if (!*lead_ms && !*dev_ms) {
		*lead_ms = s; /* the first sample: the mean; a deviation of half of it */
		*dev_ms = s / 2;
	} else {
		const uint32_t d = s > *lead_ms ? s - *lead_ms : *lead_ms - s;
		*dev_ms = (uint32_t)(((uint64_t)*dev_ms * 3 + d) / 4);
		*lead_ms = (uint32_t)(((uint64_t)*lead_ms * 7 + s) / 8);
	}
	const uint64_t l = (uint64_t)*lead_ms + *dev_ms;
	return l > cap_ms ? cap_ms : (uint32_t)l;
}
