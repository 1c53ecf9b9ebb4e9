/*
 * Rebuilding the checkpoint control objects whose true value the rest of
 * the sink gives (docs/CHECKPOINTS.md "Damaged control objects"):
 * checkpoints/inventory and checkpoints/witness. Called by a writer before
 * its attempt's recovery (ckpt_take.c), so a damaged one never stops every
 * later checkpoint; what cannot be derived (head, deployment, retention,
 * seals) is left for the error that names it.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
	char why[512];
	int wrc, irc, rc = 0;

	WS_ASSERT(pipeline && sink_name);
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
