/*
 * Rebuilding a checkpoint singleton that cannot be decoded
 * (docs/CHECKPOINTS.md "Damaged control objects"): checkpoints/inventory and
 * checkpoints/witness, from what the rest of the sink shows. Only an object
 * that is there and does not decode is replaced, by one compare-and-swap
 * against the damaged bytes' etag: a writer that moved meanwhile wins, and
 * a valid object is never touched.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_internal.h"
#include "ws_clock.h"
#include "ws_assert.h"

/*
 * The damaged object at key, its etag in *etag: 1 when it is there and
 * does not decode (dec's error), 0 when it is absent or decodes, or the
 * store's error.
 */
static int damaged_at(struct ws_ckpt *c, enum singleton o, const char *key, struct ws_etag *etag)
{
	union {
		struct ckpt_inventory_rec inv;
		struct ws_ckpt_witness wit;
		struct ws_ckpt_retention ret;
	} cur;
	struct ws_buf b;
	bool found;
	int rc;

	memset(&cur, 0, sizeof(cur));
	if ((rc = ckpt_get_obj(c, key, WS_CKPT_INDEX_BYTES_MAX, &b, etag, &found)) != 0) {
		ws_buf_free(&b);
		return rc;
	}
	if (found && o == OBJ_INVENTORY)
		rc = ckpt_dec_inventory(key, b.data, b.len, c->dep, &cur.inv);
	else if (found && o == OBJ_WITNESS)
		rc = ckpt_dec_witness(key, b.data, b.len, c->dep, &cur.wit);
	else if (found)
		rc = ckpt_dec_retention(key, b.data, b.len, c->dep, &cur.ret);
	ws_buf_free(&b);
	if (!found)
		return 0;
	if (rc == 0) {
		if (o == OBJ_INVENTORY && cur.inv.active)
			ws_ckpt_inventory_free(&cur.inv.inv);
		return 0;
	}
	return rc == WS_EFORMAT || rc == WS_ECORRUPT ? 1 : rc;
}

static int rebuild(struct ws_ckpt *c, enum singleton o, const char *key, char *body, size_t len, bool *rebuilt)
{
	struct ws_etag etag;
	int rc;

	*rebuilt = false;
	if (!body)
		return ckpt_fail(WS_CKPT_IO, -ENOMEM, "checkpoint store: encode %s: out of memory", key);
	rc = damaged_at(c, o, key, &etag);
	if (rc <= 0) {
		free(body);
		ckpt_kind_set(WS_CKPT_CONVERGED);
		return rc;
	}
	rc = ws_store_put(c->s, key, body, len, WS_PUT_CAS, &etag, NULL);
	free(body);
	if (rc == WS_EPRECOND)
		return ckpt_fail(WS_CKPT_STATE_MISMATCH, WS_EPRECOND, "checkpoint object %s: changed while it was "
				 "rebuilt; read it again", key);
	if (rc)
		return ckpt_io_fail(rc, "put", key);
	*rebuilt = true;
	ckpt_kind_set(WS_CKPT_OK);
	return 0;
}

int ws_ckpt_rebuild_inventory(struct ws_ckpt *c, const struct ws_ckpt_inventory *active,
			      const struct ws_ckpt_attempt *last_completed, bool *rebuilt)
{
	struct ckpt_inventory_rec r;
	char *body;
	size_t len = 0;
	int rc;

	*rebuilt = false;
	ckpt_kind_set(WS_CKPT_OK);
	if ((rc = ckpt_reader_refused(c, "rebuild inventory")) != 0 || (rc = ckpt_refresh_dep(c, false)) != 0)
		return rc;
	if (!c->dep_known)
		return ckpt_fail(WS_CKPT_MISSING, WS_ENOTFOUND, "checkpoint store: no deployment record");
	memset(&r, 0, sizeof(r));
	if (active) {
		r.active = true;
		r.inv = *active;
		r.inv.scope = WS_CKPT_SCOPE_LOCAL;
		memcpy(r.inv.deployment, c->dep, sizeof(r.inv.deployment));
	}
	if (last_completed) {
		r.has_completed = true;
		r.completed = *last_completed;
	}
	body = ckpt_enc_inventory(c->dep, &r, &len);
	return rebuild(c, OBJ_INVENTORY, KEY_INVENTORY, body, len, rebuilt);
}

int ws_ckpt_rebuild_witness(struct ws_ckpt *c, const struct ws_ckpt_witness *closed, bool *rebuilt)
{
	struct ckpt_deployment d;
	struct ws_ckpt_witness w = *closed;
	struct ws_buf b;
	bool found;
	char *body;
	size_t len = 0;
	int rc;

	*rebuilt = false;
	ckpt_kind_set(WS_CKPT_OK);
	if ((rc = ckpt_reader_refused(c, "rebuild witness")) != 0 || (rc = ckpt_refresh_dep(c, false)) != 0)
		return rc;
	if (!c->dep_known)
		return ckpt_fail(WS_CKPT_MISSING, WS_ENOTFOUND, "checkpoint store: no deployment record");
	/* Every open took a fresh checkpoint ID and bumped the sequence by one,
	 * so every sequence ever written is below next_id: a rebuilt witness at
	 * next_id brings back no earlier state's bytes (no ABA). */
	rc = ckpt_get_obj(c, KEY_DEPLOYMENT, 4096, &b, NULL, &found);
	if (rc == 0 && found)
		rc = ckpt_dec_deployment(KEY_DEPLOYMENT, b.data, b.len, &d);
	ws_buf_free(&b);
	if (rc)
		return rc;
	if (!found)
		return ckpt_fail(WS_CKPT_MISSING, WS_ENOTFOUND, "checkpoint store: no deployment record");
	w.state = WS_CKPT_WITNESS_CLOSED;
	w.sequence = d.next_id;
	body = ckpt_enc_witness(c->dep, &w, &len);
	return rebuild(c, OBJ_WITNESS, KEY_WITNESS, body, len, rebuilt);
}

int ws_ckpt_rebuild_retention(struct ws_ckpt *c, const struct ws_ckpt_retention *idle, bool *rebuilt)
{
	struct ws_ckpt_retention r = *idle;
	int64_t now = ws_wall_ms();
	char *body;
	size_t len = 0;
	int rc;

	*rebuilt = false;
	ckpt_kind_set(WS_CKPT_OK);
	if ((rc = ckpt_reader_refused(c, "rebuild retention")) != 0 || (rc = ckpt_refresh_dep(c, false)) != 0)
		return rc;
	if (!c->dep_known)
		return ckpt_fail(WS_CKPT_MISSING, WS_ENOTFOUND, "checkpoint store: no deployment record");
	/* The generation counts transitions, a few per run: the wall clock in
	 * milliseconds is above any count a sink reached, so no earlier
	 * record's bytes come back (no ABA). */
	r.phase = WS_CKPT_RET_IDLE;
	r.generation = now > 0 && (uint64_t)now > r.generation ? (uint64_t)now : r.generation + 1;
	body = ckpt_enc_retention(c->dep, &r, &len);
	return rebuild(c, OBJ_RETENTION, KEY_RETENTION, body, len, rebuilt);
}
