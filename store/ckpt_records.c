/*
 * Checkpoint decision store, part 4: the singleton records, each updated
 * by ckpt.c's read-decide-write loop: the decision head, the artifact
 * inventory, retention and the sink-open witness.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "ckpt_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ws_assert.h"

/* ---- decisions ------------------------------------------------------------------ */

static int cluster_refused(const char *what)
{
	return ckpt_fail(WS_CKPT_CLUSTER_AUTHORITY, WS_ECONFIG,
			 "checkpoint store: %s: cluster scope needs a cluster authority (a leader proof "
			 "and an assignment fence checked by the cluster decision store); this store "
			 "decides local scope only", what);
}

static void winner(struct ws_ckpt_record_result *res, enum ws_ckpt_kind k, const struct ws_ckpt_outcome *w)
{
	res->kind = k;
	res->winner = *w;
	ckpt_kind_set(k);
}

struct record_ctx {
	struct ws_ckpt_outcome want;
	const struct ws_ckpt_index *idx;     /* the Commit's verified index, NULL for an Abort */
	struct ws_ckpt_record_result *res;
};

/*
 * The decision: the head names want as latest terminal, or an earlier
 * decision stands and its winner goes back (rc 0, nothing written).
 */
static int record_decide(struct ws_ckpt *c, struct cas_op *op, bool found, char **body, size_t *len)
{
	const struct record_ctx *x = op->in;
	const struct ws_ckpt_head *h = op->cur;
	const struct ws_ckpt_outcome *lt = &h->latest_terminal, *want = &x->want;
	bool head_commit = found && h->has_commit;
	struct ws_ckpt_head next;

	if (found && lt->checkpoint_id == want->checkpoint_id && ckpt_outcome_equal(lt, want))
		return winner(x->res, WS_CKPT_CONVERGED, lt), 0;
	/* A retry of a Commit that a later decision followed: the head no
	 * longer names it as the latest terminal, but the Commit stands while
	 * it is on the committed chain (the latest Commit, or a predecessor
	 * reached from it), whatever epoch decided since. */
	if (found && x->idx && want->checkpoint_id < lt->checkpoint_id) {
		bool on = false;
		int rc = ckpt_commit_on_chain(c, h, &want->committed, &on);
		if (rc)
			return rc;
		if (on)
			return winner(x->res, WS_CKPT_CONVERGED, want), 0;
	}
	if (found && want->epoch < h->epoch)
		return winner(x->res, WS_CKPT_STALE_EPOCH, lt), 0;
	if (found && lt->checkpoint_id == want->checkpoint_id)
		return winner(x->res, WS_CKPT_CONFLICTING_OUTCOME, lt), 0;
	if (found && want->checkpoint_id < lt->checkpoint_id)
		return winner(x->res, WS_CKPT_STALE_CHECKPOINT, lt), 0;
	if (x->idx && (head_commit != x->idx->has_predecessor ||
		       (head_commit && !ckpt_ref_equal(&x->idx->predecessor, &h->latest_commit.committed))))
		return ckpt_fail(WS_CKPT_FORKED_PREDECESSOR, WS_EPRECOND,
				 "checkpoint store: Commit of %" PRIu64 " names predecessor %s, the latest "
				 "Commit is %s", want->checkpoint_id,
				 x->idx->has_predecessor ? x->idx->predecessor.key : "(none)",
				 head_commit ? h->latest_commit.committed.key : "(none)");
	/* decisions only grows (no ABA): at its maximum no further decision
	 * can be recorded, and wrapping to 0 would break the head for good. */
	if (found && h->decisions == UINT64_MAX)
		return ckpt_fail(WS_CKPT_EXHAUSTED, WS_ETOOBIG, "checkpoint object %s: the decision counter is "
				 "at its maximum (%" PRIu64 "); no further checkpoint can be decided", KEY_HEAD,
				 h->decisions);
	memset(&next, 0, sizeof(next));
	next.epoch = found && h->epoch > want->epoch ? h->epoch : want->epoch;
	next.decisions = found ? h->decisions + 1 : 1;
	next.latest_terminal = *want;
	next.has_commit = x->idx || head_commit;
	if (x->idx)
		next.latest_commit = *want;
	else if (head_commit)
		next.latest_commit = h->latest_commit;
	*body = ckpt_enc_head(c->dep, &next, len);
	return 1;
}

int ws_ckpt_record_outcome(struct ws_ckpt *c, uint64_t epoch, uint64_t checkpoint_id, enum ws_ckpt_scope scope,
			   const struct ws_ckpt_assignment_fence *fence, const struct ws_ckpt_leader_proof *proof,
			   enum ws_ckpt_verdict verdict, const struct ws_ckpt_ref *committed,
			   struct ws_ckpt_record_result *res)
{
	struct ws_ckpt_index idx;
	struct ws_ckpt_outcome want;
	struct ws_ckpt_head h;
	struct record_ctx ctx;
	struct cas_op op = { OBJ_HEAD, "ckpt.record.before_cas", &h, record_decide, &ctx };
	bool wrote;
	int rc;

	ckpt_kind_set(WS_CKPT_OK);
	memset(res, 0, sizeof(*res));
	memset(&idx, 0, sizeof(idx));
	if (scope != WS_CKPT_SCOPE_LOCAL)
		return cluster_refused("record_outcome");
	if (fence || proof)
		return ckpt_fail(WS_CKPT_INVALID_INPUT, WS_ECONFIG, "checkpoint store: record_outcome: "
				 "a local decision takes no leader proof or assignment fence");
	if (checkpoint_id == 0 || checkpoint_id > WS_CKPT_ID_MAX ||
	    (verdict != WS_CKPT_COMMIT && verdict != WS_CKPT_ABORT))
		return ckpt_fail(WS_CKPT_INVALID_INPUT, WS_ECONFIG, "checkpoint store: record_outcome: "
				 "checkpoint id %" PRIu64 " or verdict out of range", checkpoint_id);
	if ((verdict == WS_CKPT_COMMIT) != (committed != NULL) ||
	    (committed && committed->id != checkpoint_id))
		return ckpt_fail(WS_CKPT_INVALID_INPUT, WS_ECONFIG, "checkpoint store: record_outcome: a "
				 "Commit of %" PRIu64 " names exactly its own committed index, an Abort none",
				 checkpoint_id);
	if ((rc = ckpt_ensure_dep(c)) != 0)
		return rc;
	memset(&want, 0, sizeof(want));
	want.checkpoint_id = checkpoint_id;
	want.epoch = epoch;
	want.scope = WS_CKPT_SCOPE_LOCAL;
	want.verdict = verdict;
	if (committed) {
		want.has_committed = true;
		want.committed = *committed;
		if ((rc = ws_ckpt_load_committed(c, committed, &idx)) != 0)
			return ws_fail_wrap(rc, "record_outcome of %" PRIu64, checkpoint_id);
		if (idx.epoch != epoch) {
			ws_ckpt_index_free(&idx);
			return ckpt_fail(WS_CKPT_INVALID_INPUT, WS_ECONFIG,
					 "checkpoint store: record_outcome: index %s has epoch %" PRIu64
					 ", the decision %" PRIu64, committed->key, idx.epoch, epoch);
		}
	}
	ctx.want = want;
	ctx.idx = committed ? &idx : NULL;
	ctx.res = res;
	rc = ckpt_cas_loop(c, &op, &wrote);
	if (rc == 0 && wrote) {
		winner(res, WS_CKPT_OK, &want);
		rc = ckpt_fault("ckpt.record.after_cas");
	}
	ws_ckpt_index_free(&idx);
	return rc;
}

int ws_ckpt_decision_head(struct ws_ckpt *c, struct ws_ckpt_head *out, bool *found)
{
	return ckpt_read_singleton(c, OBJ_HEAD, out, found);
}

int ws_ckpt_latest_terminal(struct ws_ckpt *c, struct ws_ckpt_outcome *out, bool *found)
{
	struct ws_ckpt_head h;
	int rc = ws_ckpt_decision_head(c, &h, found);
	if (rc == 0 && *found)
		*out = h.latest_terminal;
	return rc;
}

int ws_ckpt_latest_commit(struct ws_ckpt *c, struct ws_ckpt_outcome *out, bool *found)
{
	struct ws_ckpt_head h;
	int rc = ws_ckpt_decision_head(c, &h, found);
	if (rc == 0 && *found) {
		*found = h.has_commit;
		if (h.has_commit)
			*out = h.latest_commit;
	}
	return rc;
}

/* ---- artifact inventory --------------------------------------------------------- */

static int check_inventory_input(struct ws_ckpt *c, const struct ws_ckpt_inventory *inv, const char *op)
{
	int rc;
	if (!inv)
		return ckpt_fail(WS_CKPT_INVALID_INPUT, WS_ECONFIG, "checkpoint store: %s: no inventory", op);
	if (inv->scope != WS_CKPT_SCOPE_LOCAL)
		return cluster_refused(op);
	if (!ckpt_attempt_ok(&inv->attempt) || inv->key_count > WS_CKPT_ARTIFACTS_MAX ||
	    (inv->key_count && !inv->keys))
		return ckpt_fail(WS_CKPT_INVALID_INPUT, WS_ECONFIG, "checkpoint store: %s: attempt needs a "
				 "non-zero token, an id in 1..%" PRIu64 " and at most %u keys", op,
				 (uint64_t)WS_CKPT_ID_MAX, WS_CKPT_ARTIFACTS_MAX);
	for (size_t i = 0; i < inv->key_count; i++)
		if (!memchr(inv->keys[i], 0, WS_KEY_MAX) || !ws_key_valid(inv->keys[i]) ||
		    (i && strcmp(inv->keys[i - 1], inv->keys[i]) >= 0))
			return ckpt_fail(WS_CKPT_INVALID_INPUT, WS_ECONFIG, "checkpoint store: %s: artifact "
					 "key %zu is invalid or not strictly sorted", op, i);
	if ((rc = ckpt_ensure_dep(c)) != 0)
		return rc;
	if (!memchr(inv->deployment, 0, sizeof(inv->deployment)) || strcmp(inv->deployment, c->dep) != 0)
		return ckpt_fail(WS_CKPT_FOREIGN, WS_EFORMAT, "checkpoint store: %s: inventory of attempt "
				 "%" PRIu64 " belongs to another deployment than %s", op,
				 inv->attempt.checkpoint_id, c->dep);
	return 0;
}

static bool inventory_equal(const struct ws_ckpt_inventory *a, const struct ws_ckpt_inventory *b)
{
	if (!ws_ckpt_attempt_equal(&a->attempt, &b->attempt) || a->key_count != b->key_count)
		return false;
	for (size_t i = 0; i < a->key_count; i++)
		if (strcmp(a->keys[i], b->keys[i]) != 0)
			return false;
	return true;
}

/* begin: admit op->in unless another attempt is active or op->in is already terminal. */
static int inventory_begin_decide(struct ws_ckpt *c, struct cas_op *op, bool found, char **body, size_t *len)
{
	struct ckpt_inventory_rec *cur = op->cur, next;
	const struct ws_ckpt_inventory *inv = op->in;
	bool active = found && cur->active, same = active && inventory_equal(&cur->inv, inv);
	struct ws_ckpt_head h;
	bool hfound;
	int rc;

	free(cur->inv.keys);
	cur->inv.keys = NULL;
	if (same)
		return 0;
	if (active)
		return ckpt_fail(WS_CKPT_ACTIVE_ATTEMPT, WS_EPRECOND,
				 "checkpoint object %s: attempt %" PRIu64 "/%" PRIu64 " is active; attempt %"
				 PRIu64 "/%" PRIu64 " must wait for its cleanup", KEY_INVENTORY,
				 cur->inv.attempt.checkpoint_id, cur->inv.attempt.token, inv->attempt.checkpoint_id,
				 inv->attempt.token);
	if (found && cur->has_completed && (cur->completed.token == inv->attempt.token ||
					    inv->attempt.checkpoint_id <= cur->completed.checkpoint_id))
		return ckpt_fail(WS_CKPT_TERMINAL_ATTEMPT_REUSED, WS_EPRECOND,
				 "checkpoint object %s: attempt %" PRIu64 "/%" PRIu64 " reuses a completed "
				 "attempt (last completed %" PRIu64 "/%" PRIu64 ")", KEY_INVENTORY,
				 inv->attempt.checkpoint_id, inv->attempt.token, cur->completed.checkpoint_id,
				 cur->completed.token);
	/* An attempt the head already decided is terminal: it may not write artifacts again. */
	if ((rc = ckpt_load_singleton(c, OBJ_HEAD, &h, NULL, &hfound)) != 0)
		return rc;
	if (hfound && inv->attempt.checkpoint_id <= h.latest_terminal.checkpoint_id)
		return ckpt_fail(WS_CKPT_TERMINAL_ATTEMPT_REUSED, WS_EPRECOND,
				 "checkpoint store: attempt of checkpoint %" PRIu64 " is already terminal "
				 "(latest decided %" PRIu64 ")", inv->attempt.checkpoint_id,
				 h.latest_terminal.checkpoint_id);
	memset(&next, 0, sizeof(next));
	if (found)
		next = *cur;
	next.active = true;
	next.inv = *inv;
	*body = ckpt_enc_inventory(c->dep, &next, len);
	return 1;
}

/* complete: exactly op->in active becomes the last completed attempt. */
static int inventory_complete_decide(struct ws_ckpt *c, struct cas_op *op, bool found, char **body, size_t *len)
{
	struct ckpt_inventory_rec *cur = op->cur, next;
	const struct ws_ckpt_inventory *expected = op->in;
	bool same = found && cur->active && inventory_equal(&cur->inv, expected);

	free(cur->inv.keys);
	cur->inv.keys = NULL;
	if (!found)
		return ckpt_fail(WS_CKPT_MISSING, WS_ENOTFOUND, "checkpoint object %s: no inventory to complete",
				 KEY_INVENTORY);
	if (!cur->active && cur->has_completed && ws_ckpt_attempt_equal(&cur->completed, &expected->attempt))
		return 0;
	if (!same)
		return ckpt_fail(WS_CKPT_STATE_MISMATCH, WS_EPRECOND,
				 "checkpoint object %s: does not hold attempt %" PRIu64 "/%" PRIu64 " with the "
				 "expected artifacts", KEY_INVENTORY, expected->attempt.checkpoint_id,
				 expected->attempt.token);
	memset(&next, 0, sizeof(next));
	next.has_completed = true;
	next.completed = expected->attempt;
	*body = ckpt_enc_inventory(c->dep, &next, len);
	return 1;
}

static int inventory_update(struct ws_ckpt *c, const struct ws_ckpt_inventory *inv, bool begin,
			    struct ws_ckpt_inventory_result *res)
{
	struct ckpt_inventory_rec cur;
	struct cas_op op = { OBJ_INVENTORY, begin ? "ckpt.inventory.before_begin" : "ckpt.inventory.before_complete",
			     &cur, begin ? inventory_begin_decide : inventory_complete_decide, inv };
	bool wrote;
	int rc;

	ckpt_kind_set(WS_CKPT_OK);
	memset(res, 0, sizeof(*res));
	memset(&cur, 0, sizeof(cur));
	rc = check_inventory_input(c, inv, begin ? "begin_checkpoint_artifact_inventory"
					       : "complete_checkpoint_artifact_cleanup");
	if (rc || (rc = ckpt_cas_loop(c, &op, &wrote)) != 0)
		return rc;
	res->kind = wrote ? WS_CKPT_OK : WS_CKPT_CONVERGED;
	res->active = begin;
	res->attempt = inv->attempt;
	return ckpt_finish(wrote, begin ? "ckpt.inventory.after_begin" : "ckpt.inventory.after_complete");
}

int ws_ckpt_begin_inventory(struct ws_ckpt *c, const struct ws_ckpt_inventory *inv,
			    struct ws_ckpt_inventory_result *res)
{
	return inventory_update(c, inv, true, res);
}

int ws_ckpt_complete_inventory(struct ws_ckpt *c, const struct ws_ckpt_inventory *expected,
			       struct ws_ckpt_inventory_result *res)
{
	return inventory_update(c, expected, false, res);
}

int ws_ckpt_active_inventory(struct ws_ckpt *c, struct ws_ckpt_inventory *inv, bool *active)
{
	struct ckpt_inventory_rec rec;
	bool found;
	int rc;

	memset(inv, 0, sizeof(*inv));
	*active = false;
	memset(&rec, 0, sizeof(rec));
	rc = ckpt_read_singleton(c, OBJ_INVENTORY, &rec, &found);
	if (rc || !found)
		return rc;
	if (!rec.active) {
		free(rec.inv.keys); /* NULL: the decoder allocates keys for an active attempt only */
		return 0;
	}
	/* The decoder checked the deployment against this store's, which is
	 * known once a singleton was read. */
	WS_ASSERT(c->dep_known && strcmp(rec.inv.deployment, c->dep) == 0);
	*inv = rec.inv;
	inv->scope = WS_CKPT_SCOPE_LOCAL;
	*active = true;
	return 0;
}

void ws_ckpt_inventory_free(struct ws_ckpt_inventory *inv)
{
	if (!inv)
		return;
	free(inv->keys);
	inv->keys = NULL;
	inv->key_count = 0;
}

int ws_ckpt_list_candidates(struct ws_ckpt *c, uint64_t id, ws_ckpt_ref_fn fn, void *arg)
{
	char prefix[WS_KEY_MAX], token[WS_KEY_MAX] = "";
	int rc;

	snprintf(prefix, sizeof(prefix), WS_CKPT_PREFIX "/committed/%016" PRIx64 "-", id);
	for (;;) {
		struct ws_list_page page;
		bool more;
		memset(&page, 0, sizeof(page));
		rc = ws_store_list(c->s, prefix, token, WS_LIST_PAGE_MAX, &page);
		if (rc)
			return ws_fail_wrap(rc, "checkpoint %" PRIu64 ": list candidates", id);
		for (size_t i = 0; i < page.count && !rc; i++) {
			struct ws_ckpt_ref ref;
			memset(&ref, 0, sizeof(ref));
			ref.id = id;
			ref.length = page.sizes ? page.sizes[i] : 0;
			/* The name's hash part as the key spells it; loading the
			 * ref checks it against the body. */
			snprintf(ref.sha256, sizeof(ref.sha256), "%.64s", page.keys[i] + strlen(prefix));
			snprintf(ref.key, sizeof(ref.key), "%s", page.keys[i]);
			rc = fn(&ref, arg);
		}
		more = page.truncated;
		if (more)
			snprintf(token, sizeof(token), "%s", page.next_token);
		ws_list_page_free(&page);
		if (rc || !more)
			return rc;
	}
}

/* ---- retention ---------------------------------------------------------------------- */

static bool kept_equal(const struct ws_ckpt_retention *a, const struct ws_ckpt_retention *b)
{
	return a->has_kept == b->has_kept && (!a->has_kept || ckpt_ref_equal(&a->kept_ref, &b->kept_ref));
}

static bool retention_equal(const struct ws_ckpt_retention *a, const struct ws_ckpt_retention *b)
{
	return a->phase == b->phase && a->generation == b->generation &&
	       ckpt_ref_equal(&a->protected_ref, &b->protected_ref) && kept_equal(a, b);
}

/* begin: a new run for op->in, unless one for it exists (resume) or another is in flight. */
static int retention_begin_decide(struct ws_ckpt *c, struct cas_op *op, bool found, char **body, size_t *len)
{
	/* op->in: the run wanted (its cut and what it keeps; phase and
	 * generation unset). */
	struct ws_ckpt_retention *cur = op->cur, next = *(const struct ws_ckpt_retention *)op->in;
	const struct ws_ckpt_ref *protected_ref = &next.protected_ref;

	if (found && ckpt_ref_equal(&cur->protected_ref, protected_ref) && kept_equal(cur, &next))
		return 0; /* resume, or already done */
	if (found && cur->phase != WS_CKPT_RET_IDLE)
		return ckpt_fail(WS_CKPT_STATE_MISMATCH, WS_EPRECOND,
				 "checkpoint object %s: a run protecting %s is in flight; finish it first",
				 KEY_RETENTION, cur->protected_ref.key);
	if (found && cur->protected_ref.id > protected_ref->id)
		return ckpt_fail(WS_CKPT_STALE_CUT, WS_EPRECOND,
				 "checkpoint object %s: already retained a later cut %s", KEY_RETENTION,
				 cur->protected_ref.key);
	next.phase = WS_CKPT_RET_SWEEP_ARTIFACTS;
	next.generation = found ? cur->generation + 1 : 1;
	*cur = next;
	*body = ckpt_enc_retention(c->dep, &next, len);
	return 1;
}

static struct ws_ckpt_retention retention_successor(const struct ws_ckpt_retention *s)
{
	struct ws_ckpt_retention next;
	memset(&next, 0, sizeof(next));
	next.phase = s->phase == WS_CKPT_RET_SWEEP_ARTIFACTS ? WS_CKPT_RET_SWEEP_INDEXES : WS_CKPT_RET_IDLE;
	next.generation = s->generation + 1;
	next.protected_ref = s->protected_ref;
	next.has_kept = s->has_kept;
	next.kept_ref = s->kept_ref;
	return next;
}

/* advance: exactly op->in becomes its successor phase. */
static int retention_advance_decide(struct ws_ckpt *c, struct cas_op *op, bool found, char **body, size_t *len)
{
	struct ws_ckpt_retention *cur = op->cur;
	const struct ws_ckpt_retention *expected = op->in;
	struct ws_ckpt_retention next = retention_successor(expected);

	if (found && retention_equal(cur, &next))
		return 0;
	if (!found || !retention_equal(cur, expected))
		return ckpt_fail(WS_CKPT_STATE_MISMATCH, WS_EPRECOND,
				 "checkpoint object %s: does not hold the expected retention state "
				 "(generation %" PRIu64 ")", KEY_RETENTION, expected->generation);
	*cur = next;
	*body = ckpt_enc_retention(c->dep, &next, len);
	return 1;
}

static int retention_update(struct ws_ckpt *c, struct cas_op *op, bool begin, struct ws_ckpt_retention_result *res)
{
	bool wrote;
	int rc = ckpt_cas_loop(c, op, &wrote);
	if (rc)
		return rc;
	res->kind = wrote ? WS_CKPT_OK : WS_CKPT_CONVERGED;
	res->state = *(struct ws_ckpt_retention *)op->cur;
	return ckpt_finish(wrote, begin ? "ckpt.retention.after_begin" : "ckpt.retention.after_advance");
}

/*
 * A run that keeps from kept keeps every checkpoint from protected_ref back
 * to kept: each index on the way must load and verify, and kept must be on
 * that chain (reached by predecessors), or the run would keep a checkpoint
 * that is not the cut's history and delete the one between that is. A
 * damaged or missing index on the way names no predecessor: the chain is
 * followed to it, and kept, older, must verify.
 */
static int retention_chain_to_kept(struct ws_ckpt *c, const struct ws_ckpt_ref *protected_ref,
				   const struct ws_ckpt_ref *kept)
{
	struct ws_ckpt_ref cur = *protected_ref;
	int rc;

	while (!ckpt_ref_equal(&cur, kept)) {
		struct ws_ckpt_index idx;
		uint64_t id = cur.id;
		if (cur.id <= kept->id)
			return ckpt_fail(WS_CKPT_INVALID_INPUT, WS_ECONFIG, "checkpoint store: retention keeps %s, "
					 "which is not on the chain of %s (its predecessors pass %s instead)",
					 kept->key, protected_ref->key, cur.key);
		rc = ws_ckpt_load_committed(c, &cur, &idx);
		/* A damaged or missing index between (docs/CHECKPOINTS.md "Damaged
		 * control objects") names no predecessor: the caller found kept
		 * past it by listing; kept, older, must still verify (below). */
		if (rc && cur.id != protected_ref->id &&
		    (rc == WS_ENOTFOUND || rc == WS_ECORRUPT || rc == WS_EFORMAT))
			break;
		if (rc)
			return ws_fail_wrap(rc, "retention: the chain from %s to the oldest checkpoint kept %s",
					    protected_ref->key, kept->key);
		if (!idx.has_predecessor) {
			ws_ckpt_index_free(&idx);
			return ckpt_fail(WS_CKPT_INVALID_INPUT, WS_ECONFIG, "checkpoint store: retention keeps %s, "
					 "which is not on the chain of %s (it ends at %s)", kept->key,
					 protected_ref->key, cur.key);
		}
		cur = idx.predecessor;
		ws_ckpt_index_free(&idx);
		WS_ASSERT(cur.id < id); /* a verified index names an older predecessor */
	}
	/* kept itself must verify: the run keeps it as a base. */
	{
		struct ws_ckpt_index idx;
		if ((rc = ws_ckpt_load_committed(c, kept, &idx)) != 0)
			return ws_fail_wrap(rc, "retention: the oldest checkpoint kept");
		ws_ckpt_index_free(&idx);
	}
	return 0;
}

int ws_ckpt_begin_retention(struct ws_ckpt *c, const struct ws_ckpt_ref *protected_ref,
			    struct ws_ckpt_retention_result *res)
{
	return ws_ckpt_begin_retention_keep(c, protected_ref, NULL, res);
}

int ws_ckpt_begin_retention_keep(struct ws_ckpt *c, const struct ws_ckpt_ref *protected_ref,
				 const struct ws_ckpt_ref *kept, struct ws_ckpt_retention_result *res)
{
	struct ws_ckpt_retention cur, want;
	struct cas_op op = { OBJ_RETENTION, "ckpt.retention.before_begin", &cur, retention_begin_decide,
			     &want };
	struct ws_ckpt_index idx;
	struct ws_ckpt_head h;
	bool hfound;
	int rc;

	ckpt_kind_set(WS_CKPT_OK);
	memset(res, 0, sizeof(*res));
	if ((rc = ckpt_check_ref_input(protected_ref)) != 0 || (rc = ckpt_ensure_dep(c)) != 0)
		return rc;
	memset(&want, 0, sizeof(want));
	want.protected_ref = *protected_ref;
	if ((rc = ckpt_load_singleton(c, OBJ_HEAD, &h, NULL, &hfound)) != 0)
		return rc;
	if (!hfound || !h.has_commit || !ckpt_ref_equal(&h.latest_commit.committed, protected_ref))
		return ckpt_fail(WS_CKPT_STALE_CUT, WS_EPRECOND,
				 "checkpoint store: retention must protect the latest Commit (%s), not %s",
				 hfound && h.has_commit ? h.latest_commit.committed.key : "none yet",
				 protected_ref->key);
	/* The cut must load and verify, or retention would keep a chain that does not restore. */
	if ((rc = ws_ckpt_load_committed(c, protected_ref, &idx)) != 0)
		return ws_fail_wrap(rc, "retention cut");
	ws_ckpt_index_free(&idx);
	if (kept && !ckpt_ref_equal(kept, protected_ref)) {
		if ((rc = ckpt_check_ref_input(kept)) != 0)
			return rc;
		if (kept->id >= protected_ref->id)
			return ckpt_fail(WS_CKPT_INVALID_INPUT, WS_ECONFIG, "checkpoint store: retention keeps "
					 "checkpoint %" PRIu64 ", not older than the protected %" PRIu64, kept->id,
					 protected_ref->id);
		if ((rc = retention_chain_to_kept(c, protected_ref, kept)) != 0)
			return rc;
		want.has_kept = true;
		want.kept_ref = *kept;
	}
	return retention_update(c, &op, true, res);
}

int ws_ckpt_advance_retention(struct ws_ckpt *c, const struct ws_ckpt_retention *expected,
			      struct ws_ckpt_retention_result *res)
{
	struct ws_ckpt_retention cur;
	struct cas_op op = { OBJ_RETENTION, "ckpt.retention.before_advance", &cur, retention_advance_decide,
			     expected };
	int rc;

	ckpt_kind_set(WS_CKPT_OK);
	memset(res, 0, sizeof(*res));
	if (!expected || expected->phase == WS_CKPT_RET_IDLE ||
	    (expected->phase != WS_CKPT_RET_SWEEP_ARTIFACTS && expected->phase != WS_CKPT_RET_SWEEP_INDEXES) ||
	    expected->generation == 0 || expected->generation == UINT64_MAX ||
	    !memchr(expected->protected_ref.key, 0, WS_KEY_MAX) || !ckpt_ref_shape_ok(&expected->protected_ref))
		return ckpt_fail(WS_CKPT_INVALID_INPUT, WS_ECONFIG, "checkpoint store: "
				 "advance_checkpoint_retention: the expected state is idle or invalid");
	if ((rc = ckpt_ensure_dep(c)) != 0)
		return rc;
	return retention_update(c, &op, false, res);
}

int ws_ckpt_retention_state(struct ws_ckpt *c, struct ws_ckpt_retention *out, bool *found)
{
	return ckpt_read_singleton(c, OBJ_RETENTION, out, found);
}

/* ---- sink-open witness ---------------------------------------------------------------- */

/* Same owner, attempt and sinks (state and sequence aside). */
static bool witness_same(const struct ws_ckpt_witness *a, const struct ws_ckpt_witness *b)
{
	if (strcmp(a->pipeline, b->pipeline) != 0 || a->participant_id != b->participant_id ||
	    !ws_ckpt_attempt_equal(&a->attempt, &b->attempt) || a->sink_count != b->sink_count)
		return false;
	for (size_t i = 0; i < a->sink_count; i++)
		if (strcmp(a->sinks[i], b->sinks[i]) != 0)
			return false;
	return true;
}

int ws_ckpt_sink_open_witness(struct ws_ckpt *c, struct ws_ckpt_witness *out, bool *found)
{
	return ckpt_read_singleton(c, OBJ_WITNESS, out, found);
}

/* create: open op->in unless another witness is live or op->in's attempt was closed. */
static int witness_open_decide(struct ws_ckpt *c, struct cas_op *op, bool found, char **body, size_t *len)
{
	struct ws_ckpt_witness *cur = op->cur;
	const struct ws_ckpt_witness *want = op->in;
	uint64_t sequence;

	if (found && cur->state == WS_CKPT_WITNESS_OPEN && witness_same(cur, want))
		return 0;
	if (found && cur->state == WS_CKPT_WITNESS_OPEN)
		return ckpt_fail(WS_CKPT_ACTIVE_ATTEMPT, WS_EPRECOND,
				 "checkpoint object %s: pipeline %s participant %" PRIu64 " attempt %" PRIu64
				 "/%" PRIu64 " holds the live witness", KEY_WITNESS, cur->pipeline,
				 cur->participant_id, cur->attempt.checkpoint_id, cur->attempt.token);
	if (found && witness_same(cur, want))
		return ckpt_fail(WS_CKPT_TERMINAL_ATTEMPT_REUSED, WS_EPRECOND,
				 "checkpoint object %s: the witness of attempt %" PRIu64 "/%" PRIu64 " was "
				 "already closed", KEY_WITNESS, cur->attempt.checkpoint_id, cur->attempt.token);
	if (found && cur->sequence == UINT64_MAX)
		return ckpt_fail(WS_CKPT_EXHAUSTED, WS_ETOOBIG, "checkpoint object %s: sequence exhausted",
				 KEY_WITNESS);
	/* cur becomes the new state: the durable one when this call returns. */
	sequence = found ? cur->sequence + 1 : 1;
	*cur = *want;
	cur->state = WS_CKPT_WITNESS_OPEN;
	cur->sequence = sequence;
	*body = ckpt_enc_witness(c->dep, cur, len);
	return 1;
}

/* clear: exactly op->in (same sequence) open becomes its closed tombstone. */
static int witness_close_decide(struct ws_ckpt *c, struct cas_op *op, bool found, char **body, size_t *len)
{
	struct ws_ckpt_witness *cur = op->cur;
	const struct ws_ckpt_witness *expected = op->in;

	if (!found)
		return ckpt_fail(WS_CKPT_MISSING, WS_ENOTFOUND, "checkpoint object %s: no witness to clear",
				 KEY_WITNESS);
	if (!witness_same(cur, expected) || cur->sequence != expected->sequence)
		return ckpt_fail(WS_CKPT_STATE_MISMATCH, WS_EPRECOND,
				 "checkpoint object %s: holds witness sequence %" PRIu64 " of attempt %" PRIu64
				 "/%" PRIu64 ", not the expected sequence %" PRIu64, KEY_WITNESS, cur->sequence,
				 cur->attempt.checkpoint_id, cur->attempt.token, expected->sequence);
	if (cur->state == WS_CKPT_WITNESS_CLOSED)
		return 0;
	cur->state = WS_CKPT_WITNESS_CLOSED;
	*body = ckpt_enc_witness(c->dep, cur, len);
	return 1;
}

int ws_ckpt_create_sink_open_witness(struct ws_ckpt *c, const char *pipeline, uint64_t participant_id,
				     const struct ws_ckpt_attempt *attempt, const char *const *sinks,
				     size_t sink_count, struct ws_ckpt_witness *out)
{
	struct ws_ckpt_witness *want = NULL, *cur = NULL;
	struct cas_op op = { OBJ_WITNESS, "ckpt.witness.before_open", NULL, witness_open_decide, NULL };
	bool wrote;
	int rc;

	ckpt_kind_set(WS_CKPT_OK);
	if (!pipeline || !ckpt_name_ok(pipeline) || !attempt || !ckpt_attempt_ok(attempt) ||
	    sink_count == 0 || sink_count > WS_CKPT_SINKS_MAX || !sinks)
		return ckpt_fail(WS_CKPT_INVALID_INPUT, WS_ECONFIG, "checkpoint store: create_sink_open_witness: "
				 "needs a printable pipeline identity, a valid attempt and 1 to %u committable "
				 "sinks (got %zu)", WS_CKPT_SINKS_MAX, sink_count);
	for (size_t i = 0; i < sink_count; i++)
		if (!sinks[i] || !ckpt_name_ok(sinks[i]) || (i && strcmp(sinks[i - 1], sinks[i]) >= 0))
			return ckpt_fail(WS_CKPT_INVALID_INPUT, WS_ECONFIG, "checkpoint store: "
					 "create_sink_open_witness: committable sink %zu (\"%s\") is not "
					 "printable or not strictly after the one before (sorted, unique)", i,
					 sinks[i] ? sinks[i] : "(null)");
	if ((rc = ckpt_ensure_dep(c)) != 0)
		return rc;
	want = calloc(1, sizeof(*want));
	cur = calloc(1, sizeof(*cur));
	if (!want || !cur) {
		rc = ckpt_fail(WS_CKPT_IO, -ENOMEM, "checkpoint store: out of memory");
		goto out;
	}
	snprintf(want->pipeline, sizeof(want->pipeline), "%s", pipeline);
	want->participant_id = participant_id;
	want->attempt = *attempt;
	want->sink_count = sink_count;
	for (size_t i = 0; i < sink_count; i++)
		snprintf(want->sinks[i], sizeof(want->sinks[i]), "%s", sinks[i]);
	op.cur = cur;
	op.in = want;
	if ((rc = ckpt_cas_loop(c, &op, &wrote)) != 0)
		goto out;
	*out = *cur;
	rc = ckpt_finish(wrote, "ckpt.witness.after_open");
out:
	free(want);
	free(cur);
	return rc;
}

/*
 * A witness closes only once its attempt is terminal: the head decided it
 * or a later checkpoint (which no record of it can overtake), or decides at
 * an epoch above the attempt's (which can then never decide). Closing it
 * earlier would let another attempt open while this one may still commit.
 * The head only moves on, so one read before the close is enough.
 */
static int witness_attempt_terminal(struct ws_ckpt *c, const struct ws_ckpt_attempt *a)
{
	struct ws_ckpt_head h;
	bool found;
	int rc = ckpt_load_singleton(c, OBJ_HEAD, &h, NULL, &found);
	if (rc)
		return rc;
	if (found && (h.latest_terminal.checkpoint_id >= a->checkpoint_id || a->epoch < h.epoch))
		return 0;
	return ckpt_fail(WS_CKPT_STATE_MISMATCH, WS_EPRECOND,
			 "checkpoint object %s: attempt %" PRIu64 "/%" PRIu64 " is not terminal (%s has not "
			 "decided it); record its outcome before closing its witness", KEY_WITNESS,
			 a->checkpoint_id, a->token, KEY_HEAD);
}

int ws_ckpt_clear_sink_open_witness(struct ws_ckpt *c, const struct ws_ckpt_witness *expected)
{
	struct cas_op op = { OBJ_WITNESS, "ckpt.witness.before_close", NULL, witness_close_decide, expected };
	bool wrote;
	int rc;

	ckpt_kind_set(WS_CKPT_OK);
	if (!expected || expected->state != WS_CKPT_WITNESS_OPEN || expected->sequence == 0)
		return ckpt_fail(WS_CKPT_INVALID_INPUT, WS_ECONFIG, "checkpoint store: "
				 "clear_sink_open_witness: the expected witness must be an open one");
	if ((rc = ckpt_ensure_dep(c)) != 0 || (rc = witness_attempt_terminal(c, &expected->attempt)) != 0)
		return rc;
	if (!(op.cur = calloc(1, sizeof(struct ws_ckpt_witness))))
		return ckpt_fail(WS_CKPT_IO, -ENOMEM, "checkpoint store: out of memory");
	rc = ckpt_cas_loop(c, &op, &wrote);
	free(op.cur);
	if (rc)
		return rc;
	return ckpt_finish(wrote, "ckpt.witness.after_close");
}
