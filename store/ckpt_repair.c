/*
 * Rebuilding a checkpoint singleton that cannot be decoded
 * (docs/CHECKPOINTS.md "Damaged control objects"): checkpoints/inventory,
 * checkpoints/witness and checkpoints/retention from what the rest of the
 * sink shows, and, for `walship repair` (core/ckpt_repair.c), the
 * checkpoints/deployment and checkpoints/head its caller derived from
 * what ws_ckpt_peek reads of every other object. Only an object that is
 * there and does not decode (or, for those two, is lost) is replaced, by
 * one compare-and-swap against the damaged bytes' etag (create-once where
 * it is absent): a writer that moved meanwhile wins, and a valid object is
 * never touched.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt_internal.h"
#include "ws_assert.h"
#include "ws_clock.h"
#include "ws_format.h"

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

/*
 * The one write of a rebuild or repair: body (freed here) over what was
 * read, create-once when etag is NULL (it was absent), else CAS against the
 * damaged bytes' etag. A lost condition: STATE_MISMATCH, saying so.
 */
static int replace_damaged(struct ws_ckpt *c, const char *key, const struct ws_etag *etag, char *body, size_t len)
{
	int rc = ws_store_put(c->s, key, body, len, etag ? WS_PUT_CAS : WS_PUT_CREATE, etag, NULL);
	free(body);
	if (rc == WS_EPRECOND)
		return ckpt_fail(WS_CKPT_STATE_MISMATCH, WS_EPRECOND, "checkpoint object %s: changed while it was "
				 "repaired (another writer or repair moved first); run again", key);
	if (rc)
		return ckpt_io_fail(rc, "put", key);
	ckpt_kind_set(WS_CKPT_OK);
	return 0;
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
	if ((rc = replace_damaged(c, key, &etag, body, len)) == 0)
		*rebuilt = true;
	return rc;
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

/* ---- reading any checkpoint object without trusting the deployment record ---- */

bool ws_ckpt_committed_key_parse(const char *key, uint64_t *id, char sha[WS_SHA256_HEX_LEN + 1])
{
	static const char prefix[] = WS_CKPT_PREFIX "/committed/";
	const char *p = key + sizeof(prefix) - 1;

	if (strncmp(key, prefix, sizeof(prefix) - 1) != 0 || strlen(p) != 16 + 1 + WS_SHA256_HEX_LEN + 5 ||
	    p[16] != '-' || strcmp(p + 17 + WS_SHA256_HEX_LEN, ".json") != 0)
		return false;
	for (int i = 0; i < 16 + 1 + WS_SHA256_HEX_LEN; i++)
		if (i != 16 && !((p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'f')))
			return false;
	*id = 0;
	for (int i = 0; i < 16; i++)
		*id = *id << 4 | (uint64_t)(p[i] <= '9' ? p[i] - '0' : p[i] - 'a' + 10);
	memcpy(sha, p + 17, WS_SHA256_HEX_LEN);
	sha[WS_SHA256_HEX_LEN] = '\0';
	return *id != 0;
}

/* The "deployment" field of an object that decoded (so it is canonical JSON with one). */
static void carried_dep(const uint8_t *data, size_t len, char out[WS_CKPT_DEPLOYMENT_LEN + 1])
{
	json_t *o = json_loadb((const char *)data, len, 0, NULL), *v = o ? json_object_get(o, "deployment") : NULL;
	snprintf(out, WS_CKPT_DEPLOYMENT_LEN + 1, "%s", json_is_string(v) ? json_string_value(v) : "");
	json_decref(o);
}

static uint64_t max3(uint64_t a, uint64_t b, uint64_t c)
{
	uint64_t m = a > b ? a : b;
	return m > c ? m : c;
}

static void peek_attempt(struct ws_ckpt_peek *out, const struct ws_ckpt_attempt *a)
{
	out->id_max = max3(out->id_max, a->checkpoint_id, 0);
	out->epoch_max = max3(out->epoch_max, a->epoch, 0);
}

/* A committed/ object: the index its name names, or the seal of that candidate, or damaged. */
static int peek_committed(const char *key, const struct ws_buf *b, const char *dep, struct ws_ckpt_peek *out)
{
	uint64_t id;
	char sha[WS_SHA256_HEX_LEN + 1], hex[WS_SHA256_HEX_LEN + 1];
	uint8_t digest[WS_SHA256_LEN];
	int rc;

	if (!ws_ckpt_committed_key_parse(key, &id, sha)) {
		out->kind = WS_CKPT_PEEK_OTHER;
		return 0;
	}
	memset(&out->ref, 0, sizeof(out->ref));
	out->ref.id = id;
	snprintf(out->ref.key, sizeof(out->ref.key), "%s", key);
	snprintf(out->ref.sha256, sizeof(out->ref.sha256), "%s", sha);
	out->id_max = id;
	if (ckpt_is_seal(b->data, b->len)) {
		struct ckpt_seal seal;
		if ((rc = ckpt_dec_seal(key, b->data, b->len, dep, &seal)) != 0)
			return rc;
		if (seal.checkpoint_id != id || strcmp(seal.sha256, sha) != 0)
			return ckpt_fail(WS_CKPT_REF_MISMATCH, WS_ECORRUPT, "checkpoint object %s: holds a seal for "
					 "another candidate (%" PRIu64 "-%s)", key, seal.checkpoint_id, seal.sha256);
		out->kind = WS_CKPT_PEEK_SEAL;
		out->ref.length = seal.length;
		return 0;
	}
	ws_sha256(b->data, b->len, digest);
	ws_hex(digest, sizeof(digest), hex);
	if (strcmp(hex, sha) != 0)
		return ckpt_fail(WS_CKPT_REF_MISMATCH, WS_ECORRUPT, "checkpoint object %s: SHA-256 is %s, its name "
				 "records %s", key, hex, sha);
	{
		struct ws_ckpt_index idx;
		if ((rc = ckpt_dec_index(key, b->data, b->len, dep, &idx)) != 0)
			return rc;
		if (idx.checkpoint_id != id)
			rc = ckpt_fail(WS_CKPT_REF_MISMATCH, WS_ECORRUPT, "checkpoint object %s: holds checkpoint %"
				       PRIu64, key, idx.checkpoint_id);
		out->epoch = idx.epoch;
		out->epoch_max = idx.epoch;
		ws_ckpt_index_free(&idx);
		if (rc)
			return rc;
	}
	out->kind = WS_CKPT_PEEK_INDEX;
	out->ref.length = b->len;
	return 0;
}

/* Decode b as the singleton or removal record at key into out. */
static int peek_record(const char *key, const struct ws_buf *b, const char *dep, struct ws_ckpt_peek *out)
{
	static const char removed[] = WS_CKPT_REMOVED_PREFIX;
	int rc;

	if (strcmp(key, KEY_DEPLOYMENT) == 0) {
		struct ckpt_deployment d;
		if ((rc = ckpt_dec_deployment(key, b->data, b->len, &d)) != 0)
			return rc;
		if (dep && strcmp(d.id, dep) != 0)
			return ckpt_fail(WS_CKPT_FOREIGN, WS_EFORMAT, "checkpoint object %s: deployment %s, not %s",
					 key, d.id, dep);
		out->kind = WS_CKPT_PEEK_DEPLOYMENT;
		out->local = d.local;
		out->next_id = d.next_id;
		return 0;
	}
	if (strcmp(key, KEY_HEAD) == 0) {
		if ((rc = ckpt_dec_head(key, b->data, b->len, dep, &out->head)) != 0)
			return rc;
		out->kind = WS_CKPT_PEEK_HEAD;
		out->id_max = out->head.latest_terminal.checkpoint_id;
		out->epoch_max = out->head.epoch;
		return 0;
	}
	if (strcmp(key, KEY_WITNESS) == 0) {
		struct ws_ckpt_witness *w = calloc(1, sizeof(*w));
		if (!w)
			return -ENOMEM;
		rc = ckpt_dec_witness(key, b->data, b->len, dep, w);
		if (rc == 0) {
			out->kind = WS_CKPT_PEEK_WITNESS;
			out->witness_open = w->state == WS_CKPT_WITNESS_OPEN;
			out->has_attempt = true;
			out->attempt = w->attempt;
			peek_attempt(out, &w->attempt);
			/* rebuild_witness writes next_id as the sequence: next_id must stay above it. */
			out->id_max = max3(out->id_max, w->sequence, 0);
		}
		free(w);
		return rc;
	}
	if (strcmp(key, KEY_INVENTORY) == 0) {
		struct ckpt_inventory_rec r;
		memset(&r, 0, sizeof(r));
		if ((rc = ckpt_dec_inventory(key, b->data, b->len, dep, &r)) != 0)
			return rc;
		out->kind = WS_CKPT_PEEK_INVENTORY;
		if ((out->has_attempt = r.active)) {
			out->attempt = r.inv.attempt;
			peek_attempt(out, &r.inv.attempt);
		}
		if ((out->has_completed = r.has_completed)) {
			out->completed = r.completed;
			peek_attempt(out, &r.completed);
		}
		free(r.inv.keys);
		return 0;
	}
	if (strcmp(key, KEY_RETENTION) == 0) {
		struct ws_ckpt_retention r;
		if ((rc = ckpt_dec_retention(key, b->data, b->len, dep, &r)) != 0)
			return rc;
		out->kind = WS_CKPT_PEEK_RETENTION;
		out->id_max = max3(r.protected_ref.id, r.has_kept ? r.kept_ref.id : 0, 0);
		return 0;
	}
	if (strncmp(key, removed, sizeof(removed) - 1) == 0 && ws_tenant_name_valid(key + sizeof(removed) - 1)) {
		uint64_t after = 0;
		if ((rc = ckpt_dec_removed(key, b->data, b->len, dep, key + sizeof(removed) - 1, &after)) != 0)
			return rc;
		out->kind = WS_CKPT_PEEK_REMOVED;
		out->id_max = after;
		return 0;
	}
	return peek_committed(key, b, dep, out);
}

/* Keys that hold a record ws_ckpt_peek decodes (the rest are not read). */
static bool peek_reads(const char *key)
{
	static const char *const fixed[] = { KEY_DEPLOYMENT, KEY_HEAD, KEY_INVENTORY, KEY_RETENTION, KEY_WITNESS };
	uint64_t id;
	char sha[WS_SHA256_HEX_LEN + 1];

	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
		if (strcmp(key, fixed[i]) == 0)
			return true;
	return strncmp(key, WS_CKPT_REMOVED_PREFIX, strlen(WS_CKPT_REMOVED_PREFIX)) == 0 ||
	       ws_ckpt_committed_key_parse(key, &id, sha);
}

int ws_ckpt_peek(struct ws_ckpt *c, const char *key, const char *dep, struct ws_ckpt_peek *out)
{
	struct ws_obj_info info;
	struct ws_buf b;
	int rc;

	memset(out, 0, sizeof(*out));
	ckpt_kind_set(WS_CKPT_OK);
	if (!peek_reads(key)) {
		out->kind = WS_CKPT_PEEK_OTHER;
		return 0;
	}
	ws_buf_init(&b, strncmp(key, WS_CKPT_PREFIX "/committed/", strlen(WS_CKPT_PREFIX "/committed/")) == 0 ||
				strcmp(key, KEY_INVENTORY) == 0
			? WS_CKPT_INDEX_BYTES_MAX
			: WS_CKPT_SINGLETON_BYTES_MAX);
	memset(&info, 0, sizeof(info));
	rc = ws_store_get(c->s, key, 0, UINT64_MAX, &b, &info);
	if (rc == WS_ENOTFOUND) {
		ws_buf_free(&b);
		out->kind = WS_CKPT_PEEK_ABSENT;
		return 0;
	}
	if (rc && rc != WS_ETOOBIG) {
		ws_buf_free(&b);
		return ckpt_io_fail(rc, "get", key);
	}
	out->etag = info.etag;
	if (rc == WS_ETOOBIG)
		rc = ckpt_fail(WS_CKPT_MALFORMED, WS_EFORMAT, "checkpoint object %s: larger than %zu bytes", key, b.max);
	else if (info.size_bytes != b.len)
		rc = ckpt_fail(WS_CKPT_MALFORMED, WS_ECORRUPT, "checkpoint object %s: read %zu bytes of %" PRIu64, key,
			       b.len, info.size_bytes);
	else
		rc = peek_record(key, &b, dep, out);
	if (rc == 0 && out->kind != WS_CKPT_PEEK_OTHER)
		carried_dep(b.data, b.len, out->deployment);
	ws_buf_free(&b);
	if (rc == WS_EFORMAT || rc == WS_ECORRUPT) {
		/* Damaged (or another deployment's): the bytes are no record of
		 * ours. A committed/ key keeps the ref its name spells. */
		struct ws_etag etag = out->etag;
		struct ws_ckpt_ref ref = out->ref;
		memset(out, 0, sizeof(*out));
		out->kind = WS_CKPT_PEEK_DAMAGED;
		out->etag = etag;
		out->ref = ref;
		out->ref.length = info.size_bytes;
		snprintf(out->detail, sizeof(out->detail), "%s", ws_errmsg());
		ckpt_kind_set(WS_CKPT_MALFORMED);
		return 0;
	}
	return rc;
}

/* ---- writing a rebuilt deployment record or head ---- */

bool ws_ckpt_is_local(const struct ws_ckpt *c)
{
	return c->local;
}

/* One write over what was read: create-once where it was absent, else CAS against the damaged bytes. */
static int repair_put(struct ws_ckpt *c, const char *key, const struct ws_ckpt_peek *was, char *body, size_t len)
{
	int rc;

	if (!body)
		return ckpt_fail(WS_CKPT_IO, -ENOMEM, "checkpoint store: encode %s: out of memory", key);
	if ((rc = ckpt_fault("ckpt.repair.before_put")) != 0) {
		free(body);
		return rc;
	}
	return replace_damaged(c, key, was->kind == WS_CKPT_PEEK_ABSENT ? NULL : &was->etag, body, len);
}

/* Only an absent or undecodable object is repaired: never a valid one. */
static int repair_allowed(struct ws_ckpt *c, const char *key, const struct ws_ckpt_peek *was)
{
	int rc;
	if ((rc = ckpt_reader_refused(c, "repair")) != 0)
		return rc;
	if (!was || (was->kind != WS_CKPT_PEEK_ABSENT && was->kind != WS_CKPT_PEEK_DAMAGED))
		return ckpt_fail(WS_CKPT_INVALID_INPUT, WS_ECONFIG, "checkpoint store: repair %s: it decodes; a "
				 "valid object is never replaced", key);
	return 0;
}

int ws_ckpt_repair_deployment(struct ws_ckpt *c, const struct ws_ckpt_peek *was, const char *dep, uint64_t next_id)
{
	struct ckpt_deployment d;
	char *body;
	size_t len = 0;
	int rc;

	ckpt_kind_set(WS_CKPT_OK);
	if ((rc = repair_allowed(c, KEY_DEPLOYMENT, was)) != 0)
		return rc;
	if (!dep || !ckpt_hex_ok(dep, WS_CKPT_DEPLOYMENT_LEN) || dep[WS_CKPT_DEPLOYMENT_LEN] != '\0' || next_id == 0)
		return ckpt_fail(WS_CKPT_INVALID_INPUT, WS_ECONFIG, "checkpoint store: repair %s: needs a deployment "
				 "of %d lower-case hex digits and a next_id of at least 1", KEY_DEPLOYMENT,
				 WS_CKPT_DEPLOYMENT_LEN);
	memset(&d, 0, sizeof(d));
	memcpy(d.id, dep, sizeof(d.id));
	/* The authority is the handle's kind, as ckpt_refresh_dep creates it. */
	d.local = c->local;
	d.next_id = next_id;
	body = ckpt_enc_deployment(&d, &len); /* len is set here, not in the call's arguments */
	if ((rc = repair_put(c, KEY_DEPLOYMENT, was, body, len)) != 0)
		return rc;
	memcpy(c->dep, d.id, sizeof(c->dep));
	c->dep_known = true;
	c->mem_next = c->mem_end = 0; /* nothing reserved from the record replaced */
	return 0;
}

int ws_ckpt_repair_head(struct ws_ckpt *c, const struct ws_ckpt_peek *was, const struct ws_ckpt_head *h)
{
	struct ws_ckpt_head check;
	char *body;
	size_t len = 0;
	int rc;

	ckpt_kind_set(WS_CKPT_OK);
	if ((rc = repair_allowed(c, KEY_HEAD, was)) != 0)
		return rc;
	c->dep_known = false; /* the record as it is now: the head must carry it */
	if ((rc = ckpt_refresh_dep(c, false)) != 0)
		return rc;
	if (!c->dep_known)
		return ckpt_fail(WS_CKPT_MISSING, WS_ENOTFOUND, "checkpoint store: repair %s: no deployment record",
				 KEY_HEAD);
	body = ckpt_enc_head(c->dep, h, &len);
	/* What is written must be a head every reader accepts. */
	if (body && (rc = ckpt_dec_head(KEY_HEAD, (const uint8_t *)body, len, c->dep, &check)) != 0) {
		free(body);
		return ckpt_fail(WS_CKPT_INVALID_INPUT, WS_ECONFIG, "checkpoint store: repair %s: the derived head "
				 "breaks an invariant (%s)", KEY_HEAD, ws_errmsg());
	}
	return repair_put(c, KEY_HEAD, was, body, len);
}
