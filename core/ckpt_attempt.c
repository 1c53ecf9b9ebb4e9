/*
 * The end of a checkpoint attempt that did not finish (docs/CHECKPOINTS.md
 * "Taking a checkpoint"): an abort after step 3 or a crash leaves the
 * sink-open witness open or the artifact inventory active; recovery records
 * Abort (unless the head shows the Commit won), seals the candidate indexes,
 * deletes every inventoried artifact, completes the inventory and closes the
 * witness, from the durable state alone.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ckpt_attempt.h"
#include "ckpt_read.h"
#include "ws_assert.h"
#include "ws_clock.h"
#include "ws_fault.h"
#include "ws_logging.h"

/* ---- aborting an attempt ---------------------------------------------------------- */

/* Seal one candidate index (ws_ckpt_list_candidates) of an aborted attempt. */
static int seal_one(const struct ws_ckpt_ref *ref, void *arg)
{
	struct ws_ckpt *c = arg;
	struct ws_ckpt_index idx;
	int rc = ws_ckpt_load_committed(c, ref, &idx);

	if (rc == WS_EPRECOND || rc == WS_ENOTFOUND || rc == WS_ECORRUPT)
		return 0; /* sealed already (or not ours to seal) */
	if (rc)
		return rc;
	rc = ws_ckpt_seal_aborted_candidate(c, &idx);
	ws_ckpt_index_free(&idx);
	return rc;
}

/* Seal every candidate index of checkpoint id. */
static int seal_candidates(struct ws_ckpt *c, uint64_t id)
{
	return ws_ckpt_list_candidates(c, id, seal_one, c);
}


/*
 * Is checkpoint id decided, and as a Commit? A Commit older than the latest
 * one is found on the predecessor chain: a crashed attempt's clean-up must
 * never seal or delete what a Commit names.
 */
int ws_attempt_decided(struct ws_ckpt *c, uint64_t id, bool *is_decided, bool *is_commit)
{
	struct ws_ckpt_head h;
	bool found;
	int rc = ws_ckpt_decision_head(c, &h, &found);
	*is_decided = *is_commit = false;
	if (rc || !found)
		return rc;
	*is_decided = h.latest_terminal.checkpoint_id >= id;
	*is_commit = h.has_commit && h.latest_commit.checkpoint_id == id;
	if (*is_decided && !*is_commit && h.has_commit && h.latest_commit.checkpoint_id > id) {
		struct ws_ckpt_ref ref;
		struct ws_ckpt_index idx;
		memset(&ref, 0, sizeof(ref));
		rc = ws_ckread_find_ref(c, id, &ref, &idx);
		if (rc == 0) {
			WS_ASSERT(!id || idx.checkpoint_id == id); /* find_ref returns id's own index */
			*is_commit = true;
			ws_ckpt_index_free(&idx);
		} else if (rc == WS_ECORRUPT && ref.id == id) {
			/* On the chain, its index damaged or missing: a Commit. */
			*is_commit = true;
			rc = 0;
		} else if (rc == WS_ENOTFOUND) {
			rc = 0;
		}
	}
	return rc;
}

/*
 * Finish attempt a: if the head committed it, keep everything; otherwise
 * decide Abort, seal its candidate, delete its artifacts. Then complete
 * inventory (when it is a's) and close the witness (when it is a's).
 */
int ws_attempt_finish(struct ws_ckpt *c, const struct ws_ckpt_attempt *a, const struct ws_ckpt_inventory *inv,
		      const struct ws_ckpt_witness *wit)
{
	struct ws_ckpt_inventory_result ir;
	bool is_decided, is_commit;
	int rc = ws_attempt_decided(c, a->checkpoint_id, &is_decided, &is_commit);

	if (rc)
		return rc;
	if (!is_decided) {
		struct ws_ckpt_record_result rr;
		rc = ws_ckpt_record_outcome(c, a->epoch, a->checkpoint_id, WS_CKPT_SCOPE_LOCAL, NULL, NULL,
					    WS_CKPT_ABORT, NULL, &rr);
		if (rc)
			return ws_fail_wrap(rc, "checkpoint %" PRIu64 ": record Abort", a->checkpoint_id);
		is_commit = rr.winner.checkpoint_id == a->checkpoint_id && rr.winner.verdict == WS_CKPT_COMMIT;
	}
	if (!is_commit) {
		if ((rc = seal_candidates(c, a->checkpoint_id)) != 0)
			return rc;
		if (inv && inv->key_count) {
			const char **keys = malloc(inv->key_count * sizeof(*keys));
			size_t nkeys = 0;
			if (!keys)
				return -ENOMEM;
			for (size_t i = 0; i < inv->key_count; i++) {
				WS_ASSERT(nkeys <= i);
				if (ws_ckread_artifact_key_of(inv->keys[i], a->checkpoint_id))
					keys[nkeys++] = inv->keys[i];
				else
					ws_warn("checkpoint %" PRIu64 ": its inventory names %s, no artifact of it; "
						"left alone (a damaged or foreign record)", a->checkpoint_id, inv->keys[i]);
			}
			if ((rc = WS_FAULT("checkpoint.abort.before_delete")) == 0)
				rc = ws_store_del_many(ws_ckpt_store(c), keys, nkeys);
			free(keys);
			if (rc)
				return ws_fail_wrap(rc, "checkpoint %" PRIu64 ": delete artifacts", a->checkpoint_id);
		}
	}
	if (inv && (rc = ws_ckpt_complete_inventory(c, inv, &ir)) != 0)
		return ws_fail_wrap(rc, "checkpoint %" PRIu64 ": complete inventory", a->checkpoint_id);
	if (wit && (rc = ws_ckpt_clear_sink_open_witness(c, wit)) != 0)
		return ws_fail_wrap(rc, "checkpoint %" PRIu64 ": close witness", a->checkpoint_id);
	return 0;
}

/* Recover whatever attempt a crash left: its witness open or its inventory active. */
int ws_attempt_recover_locked(struct ws_ckpt *c, bool *recovered)
{
	struct ws_ckpt_witness wit;
	struct ws_ckpt_inventory inv;
	bool wfound, wopen, iactive;
	int rc;

	*recovered = false;
	if ((rc = ws_ckpt_sink_open_witness(c, &wit, &wfound)) != 0)
		return rc;
	wopen = wfound && wit.state == WS_CKPT_WITNESS_OPEN;
	if ((rc = ws_ckpt_active_inventory(c, &inv, &iactive)) != 0)
		return rc;
	if (iactive)
		rc = ws_attempt_finish(c, &inv.attempt, &inv,
				       wopen && ws_ckpt_attempt_equal(&wit.attempt, &inv.attempt) ? &wit : NULL);
	if (!rc && wopen && (!iactive || !ws_ckpt_attempt_equal(&wit.attempt, &inv.attempt)))
		rc = ws_attempt_finish(c, &wit.attempt, NULL, &wit);
	*recovered = !rc && (iactive || wopen);
	ws_ckpt_inventory_free(&inv);
	return rc;
}

int ws_checkpoint_recover(struct ws_sink *sink, bool *recovered)
{
	struct ws_ckpt *c;
	bool r = false;
	int rc = ws_ckread_open(sink, true, WS_CKPT_LEASE_WAIT_MS, &c);
	if (rc)
		return rc;
	rc = ws_attempt_recover_locked(c, &r);
	ws_ckpt_close(c);
	if (recovered)
		*recovered = r;
	return rc;
}

/*
 * An attempt whose witness another writer opened and that is decided, or
 * that stayed undecided past the wait: finish it as recovery would (its
 * inventory too when it is the same attempt's).
 */
int ws_attempt_recover_peer(struct ws_ckpt *c, const struct ws_ckpt_witness *peer)
{
	struct ws_ckpt_inventory inv;
	bool iactive;
	int rc = ws_ckpt_active_inventory(c, &inv, &iactive);
	if (rc)
		return rc;
	iactive = iactive && ws_ckpt_attempt_equal(&inv.attempt, &peer->attempt);
	rc = ws_attempt_finish(c, &peer->attempt, iactive ? &inv : NULL, peer);
	if (rc == WS_EPRECOND && ws_ckpt_last_kind() == WS_CKPT_STATE_MISMATCH)
		rc = 0; /* its owner (or another recoverer) moved first: start over */
	ws_ckpt_inventory_free(&inv);
	return rc;
}

/* One read of the head, a throttled answer returned at once (WS_ETHROTTLED, *until set). */
static int peer_head(struct ws_ckpt *c, struct ws_ckpt_head *h, bool *found, uint64_t *until)
{
	struct ws_store *s = ws_ckpt_store(c);
	bool was = s->throttle_fail_fast;
	int rc;

	s->throttle_fail_fast = true;
	s->throttle_until_ms = 0;
	rc = ws_ckpt_decision_head(c, h, found);
	*until = s->throttle_until_ms;
	s->throttle_fail_fast = was;
	return rc;
}

int ws_attempt_wait_peer(struct ws_ckpt *c, uint64_t peer_id, unsigned wait_ms, struct ws_checkpoint_info *out,
			 bool *timed_out)
{
	const uint64_t deadline = ws_mono_ms() + wait_ms;
	uint64_t delay = WS_PEER_POLL_FIRST_MS;
	unsigned throttled = 0;

	if (timed_out)
		*timed_out = false;
	for (;;) {
		struct ws_ckpt_head h;
		bool found = false;
		uint64_t until = 0, now, next;
		int rc = peer_head(c, &h, &found, &until);

		if (rc && rc != WS_ETHROTTLED)
			return rc;
		if (rc == 0 && found && h.latest_terminal.checkpoint_id >= peer_id) {
			struct ws_ckpt_index idx;
			const struct ws_ckpt_outcome *w = &h.latest_terminal;
			memset(out, 0, sizeof(*out));
			out->id = w->checkpoint_id;
			out->own = false;
			out->committed = w->verdict == WS_CKPT_COMMIT;
			if (out->committed && ws_ckpt_load_committed(c, &w->committed, &idx) == 0) {
				ws_ckread_info_from(&w->committed, &idx, false, out);
				ws_ckpt_index_free(&idx);
			}
			return 0;
		}
		throttled += rc == WS_ETHROTTLED;
		now = ws_mono_ms();
		if (now >= deadline) {
			if (throttled)
				ws_info("checkpoint: the store throttled %u of the reads of %s while waiting for "
					"attempt %" PRIu64, throttled, WS_CKPT_PREFIX "/head", peer_id);
			if (timed_out) {
				*timed_out = true;
				return 0;
			}
			return ws_fail(WS_EPRECOND, "checkpoint: attempt %" PRIu64 " of another writer is "
				       "still active after %u ms", peer_id, wait_ms);
		}
		/* Backoff, or the store's Retry-After when it throttled; never past the deadline. */
		next = now + delay;
		if (until > next)
			next = until;
		if (next > deadline)
			next = deadline;
		WS_ASSERT(next >= now && next - now <= (uint64_t)wait_ms);
		ws_sleep_ms((unsigned)(next - now));
		delay = delay * 2 > WS_PEER_POLL_MAX_MS ? WS_PEER_POLL_MAX_MS : delay * 2;
	}
}

/*
 * epoch must be at least the highest epoch that decided (the head's): a
 * lower one can never decide. An error naming the epoch to use.
 */
int ws_attempt_epoch_check(struct ws_ckpt *c, uint64_t epoch)
{
	struct ws_ckpt_head h;
	bool found;
	int rc = ws_ckpt_decision_head(c, &h, &found);
	if (rc)
		return rc;
	/* A head lost after decisions: committing now would start the chain
	 * afresh (no predecessor) and drop the epoch fence; refused, naming the
	 * command that rebuilds it. */
	if (!found && (rc = ws_ckread_head_lost(c)) != 0)
		return rc;
	if (found && h.decisions == UINT64_MAX)
		return ws_fail(WS_ETOOBIG, "checkpoint: %s has recorded %" PRIu64 " decisions, the most it can "
			       "count; no further checkpoint can be decided at this sink", WS_CKPT_HEAD_KEY, h.decisions);
	if (found && epoch < h.epoch)
		return ws_fail(WS_EFENCED, "checkpoint: epoch %" PRIu64 " is stale: this sink's checkpoints are "
			       "decided at epoch %" PRIu64 " (pass --epoch %" PRIu64 " or higher, the epoch of "
			       "the replicate that owns the sink)", epoch, h.epoch, h.epoch);
	return 0;
}
