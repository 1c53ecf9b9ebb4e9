/*
 * How a shard adapts to a store that pushes back (issue 14, "a shipper
 * that adapts"): pure decisions, no clock and no I/O, so each one is
 * tested on its own (tests/unit/test_core_adapt.c). The callers (pipe.c's
 * upload thread, engine.c's shard loop) feed them what happened and the
 * time; what they decide is only ever *when* or *how many* requests go,
 * never what is acknowledged.
 *
 * 1. Uploads in flight (ws_aimd): additive increase, multiplicative
 *    decrease, as the AWS SDKs' adaptive retry mode. A round of uploads
 *    that the store throttled (503 SlowDown, 429, after the store's own
 *    retries) halves the window, once per round; a round that went through
 *    adds one slot per window's worth of successes; the window stays in
 *    1..uploads_in_flight. A Retry-After the store sent holds every new
 *    round back until it has passed.
 * 2. Coalescing (ws_adapt_age_next): how long a tenant's changes gather
 *    before its next tail. Throttled: the longer bound at once (each PUT
 *    then carries more frames and the tails, each with its manifest and
 *    watermark, come less often); accepted again: halfway back to
 *    batch_age_ms_max per tail.
 * 3. One write per second to one key (ws_adapt_key_due): a tenant's
 *    watermark write goes out no sooner than key_write_interval_ms after
 *    its last one went out. The tail that ends with it starts earlier by
 *    the time its tails take to be ready for that write (ws_adapt_lead_next,
 *    learnt from the last ones: read, uploads, manifest), and only the
 *    watermark write waits for the interval (the stream's key wait); the
 *    write then goes out the moment the interval allows, and commits wait
 *    one interval, not an interval plus a tail. Nothing is acknowledged
 *    early: a tail that does not run writes nothing and reports nothing.
 */
#ifndef WS_ADAPT_H
#define WS_ADAPT_H

#include <stdbool.h>
#include <stdint.h>

/* The window in 1/256 slots, so additive increase needs no floating point. */
#define WS_AIMD_ONE 256u
/* Retry-After is honoured up to this long (the S3 parser caps it too). */
#define WS_AIMD_HOLD_MAX_MS 60000u

struct ws_aimd {
	uint32_t max;          /* uploads_in_flight */
	uint32_t win;          /* in 1/256 slots, WS_AIMD_ONE..max*WS_AIMD_ONE */
	uint64_t hold_until_ms; /* no new round before this (Retry-After) */
	uint64_t decreases, increases; /* counted for metrics and tests */
};

/* Starts at the full window: an unthrottled store sees no change at all. */
void ws_aimd_init(struct ws_aimd *a, uint32_t max);
/* Requests the next round may send at once (1..max). */
uint32_t ws_aimd_window(const struct ws_aimd *a);
/*
 * One round's results at now_ms: ok requests went through, throttled ones
 * were refused at least once for throttling (the store's own retries may
 * have landed them); retry_until_ms is the mono time before which the
 * store asked for no new request (Retry-After, counted from its answer; 0:
 * none; the store's own retries waited for it already, so it is usually
 * past). A throttled round halves the window once, however many of its
 * requests were refused: they were all sent before any answer came.
 */
void ws_aimd_round(struct ws_aimd *a, uint32_t ok, uint32_t throttled, uint64_t retry_until_ms, uint64_t now_ms);
/* Milliseconds to wait before the next round (0: go). */
uint64_t ws_aimd_wait_ms(const struct ws_aimd *a, uint64_t now_ms);

/*
 * The gather time of a tenant's next tail: cur_ms the one in use (0: none
 * yet, i.e. age_ms), age_ms batch_age_ms_max, bound_ms the longest it may
 * grow to when throttled (below age_ms: age_ms), throttled whether the
 * tail just done was.
 */
uint32_t ws_adapt_age_next(uint32_t cur_ms, uint32_t age_ms, uint32_t bound_ms, bool throttled);

/* The earliest a tail may start whose due time is due_ms, when the key it
 * writes was last written at last_sent_ms (when that write went out; 0:
 * never), one key takes a write at most every interval_ms (0: no limit),
 * and a tail takes lead_ms to be ready for that write (at most interval_ms
 * counts): its write then waits for the interval, the tail does not. */
uint64_t ws_adapt_key_due(uint64_t due_ms, uint64_t last_sent_ms, uint32_t interval_ms, uint32_t lead_ms);

/* A tenant's lead, learnt: *lead_ms the estimate in use and *dev_ms its
 * mean deviation (both 0: none yet), sample_ms the time the last tail took
 * from its start to its watermark write being ready. The lead is a moving
 * mean plus its deviation (as TCP's retransmission timer), so a tail is
 * more often ready before the interval allows than after; returns it,
 * at most cap_ms. */
uint32_t ws_adapt_lead_next(uint32_t *lead_ms, uint32_t *dev_ms, uint64_t sample_ms, uint32_t cap_ms);

#endif
