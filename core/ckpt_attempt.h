/* Recovering and aborting a checkpoint attempt (ckpt_attempt.c). */
#ifndef WS_CORE_CKPT_ATTEMPT_H
#define WS_CORE_CKPT_ATTEMPT_H

#include "core_internal.h"
#include "ws_ckpt.h"

/* Is checkpoint id decided, and as a Commit (found on the predecessor chain)? */
int ws_attempt_decided(struct ws_ckpt *c, uint64_t id, bool *is_decided, bool *is_commit) WS_MUST_CHECK;
/*
 * Finish attempt a as an abort unless it was committed: record Abort, seal
 * its candidates, delete what inv inventoried, complete inv and close wit
 * (each when it is a's; may be NULL).
 */
int ws_attempt_finish(struct ws_ckpt *c, const struct ws_ckpt_attempt *a, const struct ws_ckpt_inventory *inv,
		      const struct ws_ckpt_witness *wit) WS_MUST_CHECK;
/* Recover whatever attempt a crash left: its witness open or its inventory active. */
int ws_attempt_recover_locked(struct ws_ckpt *c, bool *recovered) WS_MUST_CHECK;
/* Finish another writer's attempt that is decided or stayed undecided past the wait. */
int ws_attempt_recover_peer(struct ws_ckpt *c, const struct ws_ckpt_witness *peer) WS_MUST_CHECK;
/*
 * Wait until checkpoint peer_id (another writer's attempt) is terminal and
 * put the durable winner in out (own false). The wait ends by a monotonic
 * deadline wait_ms after the call (plus at most one read of the head in
 * flight), polling checkpoints/head with backoff (WS_PEER_POLL_FIRST_MS
 * doubling to WS_PEER_POLL_MAX_MS: at most a few GETs a second); a read the
 * store throttles is retried after its Retry-After, within the same
 * deadline. Still undecided at the deadline: *timed_out (rc 0), or, with
 * timed_out NULL, WS_EPRECOND.
 */
#define WS_PEER_POLL_FIRST_MS 50u
#define WS_PEER_POLL_MAX_MS 500u
int ws_attempt_wait_peer(struct ws_ckpt *c, uint64_t peer_id, unsigned wait_ms, struct ws_checkpoint_info *out,
			 bool *timed_out) WS_MUST_CHECK;
/* epoch must be at least the head's highest decided epoch. */
int ws_attempt_epoch_check(struct ws_ckpt *c, uint64_t epoch) WS_MUST_CHECK;

#endif
