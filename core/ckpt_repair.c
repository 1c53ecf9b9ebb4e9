/*
 * Rebuilding the checkpoint control objects whose true value the rest of
 * the sink gives (docs/CHECKPOINTS.md "Damaged control objects"):
 * checkpoints/inventory and checkpoints/witness, by every writer before its
 * attempt's recovery (ckpt_take.c), so a damaged one never stops every
 * later checkpoint; and checkpoints/deployment and checkpoints/head, by the
 * operator's `walship repair` (ws_checkpoint_repair, below), which every
 * command that meets one of those two undecodable (or lost) names.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "ckpt_read.h"
#include "ckpt_repair.h"
#include "ws_assert.h"
#include "ws_logging.h"

/* A decode error of a singleton: the object is there and damaged (not the store failing). */
static bool undecodable(int rc)
{
	return rc == WS_EFORMAT || rc == WS_ECORRUPT;
}

/* One stored artifact key into the rebuilt inventory (listed in order: sorted). */
struct keys_acc {
	struct ws_ckpt_inventory *inv;
	size_t cap;
};

static int add_key(const char *key, void *arg)
{
	struct keys_acc *k = arg;
	int rc = ws_ckread_grow((void **)&k->inv->keys, &k->cap, k->inv->key_count, sizeof(*k->inv->keys));
	if (rc == 0)
		snprintf(k->inv->keys[k->inv->key_count++], WS_KEY_MAX, "%s", key);
	return rc;
}

/* The inventory, damaged: rebuilt from the witness (wit NULL: none, or damaged too). */
static int repair_inventory(struct ws_ckpt *c, const struct ws_ckpt_witness *wit, const char *why)
{
	struct ws_ckpt_inventory inv;
	bool rebuilt = false, open = wit && wit->state == WS_CKPT_WITNESS_OPEN;
	int rc = 0;

	memset(&inv, 0, sizeof(inv));
	if (open) {
		/* Its attempt is the one in flight (crashed: recovery aborts it):
		 * what it may have written is what is stored under its ID. */
		struct keys_acc k = { &inv, 0 };
		inv.attempt = wit->attempt;
		rc = ws_ckread_each_artifact(ws_ckpt_store(c), wit->attempt.checkpoint_id, add_key, &k);
	}
	if (!rc)
		rc = ws_ckpt_rebuild_inventory(c, open ? &inv : NULL, wit && !open ? &wit->attempt : NULL, &rebuilt);
	if (!rc && rebuilt)
		ws_info("checkpoint: %s could not be decoded (%s); rebuilt from %s: %s", WS_CKPT_PREFIX "/inventory",
			why, wit ? WS_CKPT_PREFIX "/witness" : "nothing (no readable witness)",
			open ? "the open attempt and its stored artifacts" : "idle");
	free(inv.keys);
	return rc ? ws_fail_wrap(rc, "checkpoint: rebuild %s", WS_CKPT_PREFIX "/inventory") : 0;
}

/* The witness, damaged: rebuilt closed, naming the attempt the inventory or the head last knew. */
static int repair_witness(struct ws_ckpt *c, const char *pipeline, uint64_t participant, const char *sink_name,
			  const char *why)
{
	struct ws_ckpt_witness w;
	struct ws_ckpt_inventory inv;
	struct ws_ckpt_outcome term;
	bool active = false, tfound = false, rebuilt = false;
	int rc;

	memset(&w, 0, sizeof(w));
	memset(&inv, 0, sizeof(inv));
	w.attempt.checkpoint_id = 1;
	w.attempt.epoch = 1;
	w.attempt.token = 1;
	if ((rc = ws_ckpt_active_inventory(c, &inv, &active)) != 0)
		return ws_fail_wrap(rc, "checkpoint: rebuild %s", WS_CKPT_PREFIX "/witness");
	if (active) {
		w.attempt = inv.attempt; /* recovery finishes it from the inventory */
	} else if ((rc = ws_ckpt_latest_terminal(c, &term, &tfound)) == 0 && tfound) {
		w.attempt.checkpoint_id = term.checkpoint_id;
		w.attempt.epoch = term.epoch ? term.epoch : 1;
	}
	ws_ckpt_inventory_free(&inv);
	if (rc)
		return ws_fail_wrap(rc, "checkpoint: rebuild %s", WS_CKPT_PREFIX "/witness");
	snprintf(w.pipeline, sizeof(w.pipeline), "%s", pipeline);
	w.participant_id = participant;
	w.sink_count = 1;
	snprintf(w.sinks[0], sizeof(w.sinks[0]), "%s", sink_name);
	if ((rc = ws_ckpt_rebuild_witness(c, &w, &rebuilt)) != 0)
		return ws_fail_wrap(rc, "checkpoint: rebuild %s", WS_CKPT_PREFIX "/witness");
	if (rebuilt)
		ws_info("checkpoint: %s could not be decoded (%s); rebuilt closed (attempt %" PRIu64 ")",
			WS_CKPT_PREFIX "/witness", why, w.attempt.checkpoint_id);
	return 0;
}

int ws_repair_controls(struct ws_ckpt *c, const char *pipeline, uint64_t participant, const char *sink_name)
{
	struct ws_ckpt_witness wit;
	struct ws_ckpt_inventory inv;
	bool wfound = false, iactive = false;
	char why[512], dep[WS_CKPT_DEPLOYMENT_LEN + 1];
	int wrc, irc, rc = 0;

	WS_ASSERT(pipeline && sink_name);
	/* Every object decodes against the deployment record: one that does
	 * not decode (or is lost) is no damaged witness or inventory, and only
	 * `walship repair` rebuilds it (the error says so). */
	if ((rc = ws_ckpt_deployment_id(c, dep)) != 0)
		return rc;
	wrc = ws_ckpt_sink_open_witness(c, &wit, &wfound);
	if (wrc && !undecodable(wrc))
		return wrc;
	snprintf(why, sizeof(why), "%s", wrc ? ws_errmsg() : "");
	irc = ws_ckpt_active_inventory(c, &inv, &iactive);
	if (irc == 0)
		ws_ckpt_inventory_free(&inv);
	else if (!undecodable(irc))
		return irc;
	else
		rc = repair_inventory(c, wrc == 0 && wfound ? &wit : NULL, ws_errmsg());
	if (!rc && wrc)
		rc = repair_witness(c, pipeline, participant, sink_name, why);
	return rc;
}

/* ---- walship repair: checkpoints/deployment and checkpoints/head ---------------------- */

/*
 * A shared writer allocates one ID per compare-and-swap of the deployment
 * record and may hold it unseen (allocated, its witness not opened yet)
 * while the record is damaged; a rebuilt next_id leaves this many IDs of
 * room above every one the sink shows, so such a writer's ID is not handed
 * out again. A local writer holds the lease, as repair does, so none is in
 * flight there.
 */
#define REPAIR_SHARED_ID_GAP 64u

/* What one object read during the survey says (ws_ckpt_peek, kept small). */
struct seen {
	enum ws_ckpt_peek_kind kind;
	char key[WS_KEY_MAX];
	char dep[WS_CKPT_DEPLOYMENT_LEN + 1];
	uint64_t id_max, epoch_max;
	struct ws_ckpt_ref ref;      /* INDEX, SEAL */
	uint64_t epoch;              /* INDEX */
	bool witness_open, has_attempt, has_completed;
	struct ws_ckpt_attempt attempt, completed;
};

struct survey {
	struct seen *s;
	size_t n, cap;
	uint64_t artifact_id_max;    /* highest checkpoints/artifacts/<id>/ seen */
};

/* checkpoints/artifacts/<16 hex>/...: its id (0: another key). */
static uint64_t artifact_id(const char *key)
{
	static const char prefix[] = WS_CKPT_ART_PREFIX "/";
	const char *p = key + sizeof(prefix) - 1;
	uint64_t id = 0;

	if (strncmp(key, prefix, sizeof(prefix) - 1) != 0 || strlen(p) < 18 || p[16] != '/')
		return 0;
	for (int i = 0; i < 16; i++) {
		int v = ws_hexval(p[i]);
		if (v < 0)
			return 0;
		id = id << 4 | (uint64_t)v;
	}
	return id;
}

static int survey_add(struct ws_ckpt *c, struct survey *sv, const char *key)
{
	struct ws_ckpt_peek p;
	struct seen *e;
	int rc;

	if ((rc = ws_ckpt_peek(c, key, NULL, &p)) != 0)
		return rc;
	if (p.kind == WS_CKPT_PEEK_OTHER || p.kind == WS_CKPT_PEEK_ABSENT)
		return 0;
	if ((rc = ws_ckread_grow((void **)&sv->s, &sv->cap, sv->n, sizeof(*sv->s))) != 0)
		return rc;
	e = &sv->s[sv->n++];
	memset(e, 0, sizeof(*e));
	e->kind = p.kind;
	snprintf(e->key, sizeof(e->key), "%s", key);
	memcpy(e->dep, p.deployment, sizeof(e->dep));
	e->id_max = p.id_max;
	e->epoch_max = p.epoch_max;
	e->ref = p.ref;
	e->epoch = p.epoch;
	e->witness_open = p.witness_open;
	e->has_attempt = p.has_attempt;
	e->attempt = p.attempt;
	e->has_completed = p.has_completed;
	e->completed = p.completed;
	return 0;
}

/*
 * One LIST of checkpoints/ (repair is no steady state), then each record
 * read. The witness is read after the listing: a candidate index the
 * listing shows was written after its attempt opened the witness, which
 * cannot close while the head is damaged (closing reads it), so it is read
 * open and its candidate is not taken for a Commit.
 */
static int survey_read(struct ws_ckpt *c, struct survey *sv)
{
	char token[WS_KEY_MAX] = "", **keys = NULL;
	size_t nkeys = 0, cap = 0;
	int rc = 0;

	memset(sv, 0, sizeof(*sv));
	for (;;) {
		struct ws_list_page page;
		bool more;
		memset(&page, 0, sizeof(page));
		if ((rc = ws_store_list(ws_ckpt_store(c), WS_CKPT_PREFIX "/", token, WS_LIST_PAGE_MAX, &page)) != 0) {
			ws_list_page_free(&page);
			rc = ws_fail_wrap(rc, "repair: list " WS_CKPT_PREFIX "/");
			goto out;
		}
		for (size_t i = 0; i < page.count && !rc; i++) {
			uint64_t aid = artifact_id(page.keys[i]);
			if (aid) {
				sv->artifact_id_max = aid > sv->artifact_id_max ? aid : sv->artifact_id_max;
				continue;
			}
			if ((rc = ws_ckread_grow((void **)&keys, &cap, nkeys, sizeof(*keys))) == 0 &&
			    !(keys[nkeys++] = strdup(page.keys[i])))
				rc = -ENOMEM;
		}
		more = !rc && page.truncated && strcmp(page.next_token, token) > 0;
		if (more)
			snprintf(token, sizeof(token), "%s", page.next_token);
		ws_list_page_free(&page);
		if (rc)
			goto out;
		if (!more)
			break;
	}
	for (size_t i = 0; i < nkeys && !rc; i++)
		rc = survey_add(c, sv, keys[i]);
out:
	for (size_t i = 0; i < nkeys; i++)
		free(keys[i]);
	free(keys);
	return rc;
}

/*
 * The deployment every record carries; two that disagree: WS_EFORMAT naming
 * both. *any false: no record decodes at all.
 */
static int survey_deployment(const struct survey *sv, char dep[WS_CKPT_DEPLOYMENT_LEN + 1], bool *any)
{
	const struct seen *first = NULL;

	*any = false;
	for (size_t i = 0; i < sv->n; i++) {
		const struct seen *e = &sv->s[i];
		if (e->kind == WS_CKPT_PEEK_DAMAGED || !e->dep[0])
			continue;
		if (!first) {
			first = e;
			continue;
		}
		if (strcmp(first->dep, e->dep) != 0)
			return ws_fail(WS_EFORMAT, "repair: %s carries deployment %s but %s carries %s: the sink holds "
				       "two namespaces, and which one %s belonged to cannot be told; nothing written",
				       first->key, first->dep, e->key, e->dep, WS_CKPT_PREFIX "/deployment");
	}
	if (first) {
		memcpy(dep, first->dep, WS_CKPT_DEPLOYMENT_LEN + 1);
		*any = true;
	}
	return 0;
}

/* What every ID handed out is at most: the next_id of a rebuilt record must pass it. */
static uint64_t survey_id_floor(const struct survey *sv)
{
	uint64_t m = sv->artifact_id_max;
	for (size_t i = 0; i < sv->n; i++)
		if (sv->s[i].kind != WS_CKPT_PEEK_DAMAGED && sv->s[i].id_max > m)
			m = sv->s[i].id_max;
	return m;
}

static void outcome(struct ws_ckpt_outcome *o, uint64_t id, uint64_t epoch, const struct ws_ckpt_ref *committed)
{
	memset(o, 0, sizeof(*o));
	o->checkpoint_id = id;
	o->epoch = epoch;
	o->scope = WS_CKPT_SCOPE_LOCAL;
	o->verdict = committed ? WS_CKPT_COMMIT : WS_CKPT_ABORT;
	o->has_committed = committed != NULL;
	if (committed)
		o->committed = *committed;
}

/*
 * The head the sink shows (docs/CHECKPOINTS.md "Damaged control objects"),
 * from the records of deployment dep:
 *
 * latest Commit: the newest committed index that loads as an index (not a
 * seal) and is not the candidate of an attempt in flight (the open
 * witness's, or the active inventory's): that one may be undecided, and
 * recovery aborts and seals it. Every other loadable index is a Commit: an
 * attempt that ends without one records Abort, seals its candidates, and
 * only then closes its witness (ws_attempt_finish, core/ckpt_attempt.c;
 * take_abort and every recovery end there, and a witness closes only once
 * the head decided its attempt or a later one), so an unsealed candidate of
 * an Abort has its witness still open.
 *
 * latest terminal: that Commit, or an Abort at the highest id a seal or
 * the closed witness's attempt (with no loadable index) shows, when higher.
 * Nothing shows one: an Abort just below the attempt in flight (every ID
 * below it was decided or never used), or at that attempt itself when it
 * is the first (a head exists only after a decision), or below next_id.
 *
 * epoch: the highest any index or attempt shows. decisions: next_id - 1:
 * each decision is for a distinct ID below next_id, so it is at least the
 * true count; an upper bound only moves the exhaustion point nearer, and
 * the counter only grows from there, so no earlier head's bytes come back.
 *
 * *none: nothing at the sink shows that a checkpoint ID was ever handed
 * out, so nothing was ever decided.
 */
static void derive_head(const struct survey *sv, const char *dep, uint64_t next_id, struct ws_ckpt_head *h,
			uint64_t *in_flight, bool *evidence, bool *none)
{
	const struct seen *wit = NULL, *inv = NULL, *commit = NULL;
	uint64_t abort_id = 0, abort_epoch = 0, epoch = 0, fly = 0;

	for (size_t i = 0; i < sv->n; i++) {
		const struct seen *e = &sv->s[i];
		if (strcmp(e->dep, dep) != 0)
			continue;
		if (e->kind == WS_CKPT_PEEK_WITNESS)
			wit = e;
		else if (e->kind == WS_CKPT_PEEK_INVENTORY)
			inv = e;
		if (e->kind == WS_CKPT_PEEK_INDEX || e->kind == WS_CKPT_PEEK_WITNESS || e->kind == WS_CKPT_PEEK_INVENTORY)
			epoch = e->epoch_max > epoch ? e->epoch_max : epoch;
	}
	if (wit && wit->witness_open)
		fly = wit->attempt.checkpoint_id;
	for (size_t i = 0; i < sv->n; i++) {
		const struct seen *e = &sv->s[i];
		bool flying = e->kind == WS_CKPT_PEEK_INDEX &&
			      (e->ref.id == fly || (inv && inv->has_attempt && e->ref.id == inv->attempt.checkpoint_id));
		if (strcmp(e->dep, dep) != 0)
			continue;
		if (e->kind == WS_CKPT_PEEK_INDEX && !flying && (!commit || e->ref.id > commit->ref.id))
			commit = e;
		if (e->kind == WS_CKPT_PEEK_SEAL && e->ref.id > abort_id)
			abort_id = e->ref.id;
	}
	if (wit && !wit->witness_open && wit->attempt.checkpoint_id > abort_id) {
		bool indexed = false;
		for (size_t i = 0; i < sv->n && !indexed; i++)
			indexed = sv->s[i].kind == WS_CKPT_PEEK_INDEX && !strcmp(sv->s[i].dep, dep) &&
				  sv->s[i].ref.id == wit->attempt.checkpoint_id;
		if (!indexed) {
			abort_id = wit->attempt.checkpoint_id;
			abort_epoch = wit->attempt.epoch;
		}
	}
	*evidence = commit || abort_id;
	*none = false;
	if (!*evidence) {
		/* Nothing shows a decision: every ID below the attempt in flight
		 * (or below next_id) was decided or never used. */
		abort_id = fly > 1 ? fly - 1 : fly ? fly : next_id > 1 ? next_id - 1 : 0;
		*none = abort_id == 0;
	}
	if (epoch == 0)
		epoch = 1;
	memset(h, 0, sizeof(*h));
	h->epoch = epoch;
	h->decisions = next_id > 2 ? next_id - 1 : 1;
	if (commit) {
		h->has_commit = true;
		outcome(&h->latest_commit, commit->ref.id, commit->epoch, &commit->ref);
	}
	if (commit && commit->ref.id >= abort_id)
		h->latest_terminal = h->latest_commit;
	else
		outcome(&h->latest_terminal, abort_id, abort_epoch ? abort_epoch : epoch, NULL);
	/* The head's invariants (docs/CHECKPOINTS.md): the Commit no later than the terminal, epochs under the head's. */
	WS_ASSERT(!h->has_commit || h->latest_commit.checkpoint_id <= h->latest_terminal.checkpoint_id);
	WS_ASSERT(h->latest_terminal.epoch <= h->epoch && h->latest_commit.epoch <= h->epoch);
	*in_flight = fly;
}

static int repair_deployment(struct ws_ckpt *c, const struct ws_ckpt_peek *dp, const struct survey *sv, bool dry_run,
			     struct ws_repair_report *rep)
{
	uint64_t floor = survey_id_floor(sv), gap = ws_ckpt_is_local(c) ? 0 : REPAIR_SHARED_ID_GAP;
	bool any;
	int rc;

	if ((rc = survey_deployment(sv, rep->deployment, &any)) != 0)
		return rc;
	if (!any && dp->kind == WS_CKPT_PEEK_ABSENT)
		return 0; /* nothing of the namespace at all: the first checkpoint creates it */
	if (!any) {
		/* No record carries one: a fresh identity is as good as the lost one. */
		uint8_t raw[WS_CKPT_DEPLOYMENT_LEN / 2];
		if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
			return ws_fail(-errno, "repair: getrandom failed");
		ws_hex(raw, sizeof(raw), rep->deployment);
		rep->deployment_fresh = true;
	}
	rep->deployment_repaired = true;
	rep->deployment_local = ws_ckpt_is_local(c);
	/* Above every ID and witness sequence any record or artifact shows. */
	rep->next_id = floor >= UINT64_MAX - 1 - gap ? UINT64_MAX : floor + 1 + gap;
	snprintf(rep->deployment_damage, sizeof(rep->deployment_damage), "%s",
		 dp->kind == WS_CKPT_PEEK_ABSENT ? "missing while other checkpoint objects are there" : dp->detail);
	if (dry_run)
		return 0;
	if ((rc = ws_ckpt_repair_deployment(c, dp, rep->deployment, rep->next_id)) != 0)
		return ws_fail_wrap(rc, "repair " WS_CKPT_PREFIX "/deployment");
	ws_info("repair: %s rebuilt (deployment %s, next_id %" PRIu64 "): it was %s", WS_CKPT_PREFIX "/deployment",
		rep->deployment, rep->next_id, rep->deployment_damage);
	return 0;
}

static int repair_head(struct ws_ckpt *c, const struct ws_ckpt_peek *hp, const struct survey *sv, const char *dep,
		       uint64_t next_id, bool dry_run, struct ws_repair_report *rep)
{
	struct ws_ckpt_head h;
	bool evidence, none;
	int rc;

	derive_head(sv, dep, next_id, &h, &rep->in_flight, &evidence, &none);
	if (hp->kind == WS_CKPT_PEEK_ABSENT && !evidence)
		return 0; /* nothing decided yet (or the first attempt in flight): no head to lose */
	rep->head_repaired = true;
	snprintf(rep->head_damage, sizeof(rep->head_damage), "%s",
		 hp->kind == WS_CKPT_PEEK_ABSENT ? "missing while committed indexes are there" : hp->detail);
	if (none) {
		/* No ID was ever handed out, so no decision: the head holds
		 * nothing true, and the sink's state is "nothing decided". No
		 * writer can write a head while it does not decode, so the
		 * delete races nothing but another repair that finds the same. */
		rep->head_removed = true;
		if (dry_run)
			return 0;
		if ((rc = ws_store_del(ws_ckpt_store(c), WS_CKPT_HEAD_KEY)) != 0)
			return ws_fail_wrap(rc, "repair: delete %s", WS_CKPT_HEAD_KEY);
		ws_info("repair: %s removed: no checkpoint ID was ever handed out, so nothing was decided; it was %s",
			WS_CKPT_HEAD_KEY, rep->head_damage);
		return 0;
	}
	rep->latest_commit = h.has_commit ? h.latest_commit.checkpoint_id : 0;
	rep->latest_terminal = h.latest_terminal.checkpoint_id;
	rep->terminal_commit = h.latest_terminal.verdict == WS_CKPT_COMMIT;
	rep->epoch = h.epoch;
	rep->decisions = h.decisions;
	if (dry_run)
		return 0;
	if ((rc = ws_ckpt_repair_head(c, hp, &h)) != 0)
		return ws_fail_wrap(rc, "repair %s", WS_CKPT_HEAD_KEY);
	ws_info("repair: %s rebuilt (latest Commit %" PRIu64 ", latest terminal %s %" PRIu64 ", epoch %" PRIu64
		", decisions %" PRIu64 "): it was %s", WS_CKPT_HEAD_KEY, rep->latest_commit,
		rep->terminal_commit ? "Commit" : "Abort", rep->latest_terminal, rep->epoch, rep->decisions,
		rep->head_damage);
	return 0;
}

int ws_checkpoint_repair(struct ws_sink *sink, bool dry_run, struct ws_repair_report *rep)
{
	struct ws_repair_report none;
	struct ws_ckpt *c = NULL;
	struct ws_ckpt_peek dp, hp;
	struct survey sv;
	char dep[WS_CKPT_DEPLOYMENT_LEN + 1] = "";
	uint64_t next_id = 1;
	int rc;

	if (!rep)
		rep = &none;
	memset(rep, 0, sizeof(*rep));
	memset(&sv, 0, sizeof(sv));
	rep->dry_run = dry_run;
	/* A file:// sink: the writers' lease, held for the whole repair, so no
	 * local writer holds IDs reserved from the record being replaced. */
	if ((rc = ws_ckread_open(sink, true, WS_CKPT_LEASE_WAIT_MS, &c)) != 0)
		return rc;
	/* Their etags first: each write is a compare-and-swap against the
	 * bytes read here, so anything that moves them meanwhile wins. */
	if ((rc = ws_ckpt_peek(c, WS_CKPT_PREFIX "/deployment", NULL, &dp)) != 0 ||
	    (rc = ws_ckpt_peek(c, WS_CKPT_HEAD_KEY, NULL, &hp)) != 0)
		goto out;
	if (dp.kind == WS_CKPT_PEEK_DEPLOYMENT) {
		snprintf(dep, sizeof(dep), "%s", dp.deployment);
		next_id = dp.next_id;
		if (hp.kind == WS_CKPT_PEEK_HEAD && !strcmp(hp.deployment, dep))
			goto out; /* both decode: nothing to repair, nothing read further */
		if ((rc = ws_ckpt_peek(c, WS_CKPT_HEAD_KEY, dep, &hp)) != 0)
			goto out;
	}
	if ((rc = survey_read(c, &sv)) != 0)
		goto out;
	rep->objects_read = sv.n;
	if (dp.kind != WS_CKPT_PEEK_DEPLOYMENT) {
		if ((rc = repair_deployment(c, &dp, &sv, dry_run, rep)) != 0 || !rep->deployment_repaired)
			goto out;
		snprintf(dep, sizeof(dep), "%s", rep->deployment);
		next_id = rep->next_id;
		/* The head as the namespace's: one of another deployment is no head of it. */
		if (hp.kind == WS_CKPT_PEEK_HEAD && strcmp(hp.deployment, dep) != 0) {
			hp.kind = WS_CKPT_PEEK_DAMAGED;
			snprintf(hp.detail, sizeof(hp.detail), "it carries deployment %s, not %s", hp.deployment, dep);
		}
	}
	if (hp.kind != WS_CKPT_PEEK_HEAD)
		rc = repair_head(c, &hp, &sv, dep, next_id, dry_run, rep);
out:
	free(sv.s);
	ws_ckpt_close(c);
	return rc;
}
