/*
 * A store that throttles on demand, in front of a real one (the file
 * store). The file store cannot be made to answer "slow down", so the
 * engine's backpressure tests use this fake for exactly that fault and
 * nothing else: every request it lets through goes to the real store.
 *
 * Throttling mimics the S3 backend: each throttled attempt counts in
 * stats.retries and stats.throttle_retries and sleeps delay_ms, up to
 * attempts_max attempts, then the put fails with WS_ETHROTTLED.
 */
#ifndef WT_THROTTLESTORE_H
#define WT_THROTTLESTORE_H

#include <stdint.h>

#include "ws_store.h"

/* Under throttle_fail_fast a refused PUT returns at once, its Retry-After this far off. */
#define WT_THROTTLE_RETRY_AFTER_MS 20

struct ws_store *wt_throttle_store_open(struct ws_store *inner, uint32_t attempts_max, uint32_t delay_ms);
/*
 * Throttle puts whose key contains `match` (NULL: every put): after the
 * next `pass` matching puts succeed, throttle `attempts` attempts (-1: until
 * changed; 0: stop throttling).
 */
void wt_throttle_set(struct ws_store *s, const char *match, int64_t pass, int64_t attempts);
/* Make every put take at least ms (a slow sink, not a failing one). */
void wt_throttle_slow(struct ws_store *s, uint32_t ms);
uint64_t wt_throttle_count(struct ws_store *s); /* attempts throttled so far */
/*
 * The next n puts whose key ends with suffix are written to the real store
 * and then answered WS_EPRECOND: a conditional write whose first attempt
 * landed, whose reply was lost, and whose retry met its own write (what the
 * S3 backend returns when it cannot tell the object is its own, its HEAD
 * failing too). The file store never loses a reply.
 */
void wt_throttle_lost_reply(struct ws_store *s, const char *suffix, unsigned n);
/* The same, answered rc instead (-EIO, say: an ambiguous failure, whose
 * write the caller must read back to know it landed). */
void wt_throttle_lost_reply_rc(struct ws_store *s, const char *suffix, unsigned n, int rc);
/* Report the real store's conditions as this store's (ws_store_cas_fences):
 * every put goes to it with its mode and etag unchanged, so a refused
 * create or swap fences as it would there (manifest slots need it). */
void wt_throttle_forward_conditions(struct ws_store *s);
/*
 * Record the monotonic time (ws_mono_ms) at which each put whose key ends
 * with `suffix` and that went through was sent (its call, or its last
 * throttled attempt's retry; a slow store answers after it) (NULL or "":
 * stop; clears the log), up to WT_THROTTLE_LOG_MAX; wt_throttle_logged
 * copies them out in the order they completed.
 */
#define WT_THROTTLE_LOG_MAX 4096
void wt_throttle_log(struct ws_store *s, const char *suffix);
size_t wt_throttle_logged(struct ws_store *s, uint64_t *ms, size_t max);

#endif
