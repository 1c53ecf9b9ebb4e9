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
/* epoch must be at least the head's highest decided epoch. */
int ws_attempt_epoch_check(struct ws_ckpt *c, uint64_t epoch) WS_MUST_CHECK;

#endif
