/*
 * Checkpoint decision store, part 3: the committed indexes (create-once
 * objects named by their bytes), their seals and their deletion, over the
 * protocol of ckpt.c.
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

/* ---- committed indexes ------------------------------------------------------- */

static int check_index_input(struct ws_ckpt *c, const struct ws_ckpt_index *idx)
{
	char why[256];
	int rc;
	if (!idx)
		return ckpt_fail(WS_CKPT_INVALID_INPUT, WS_ECONFIG, "checkpoint store: no index");
	if (ckpt_index_invalid(idx, why, sizeof(why)))
		return ckpt_fail(WS_CKPT_INVALID_INPUT, WS_ECONFIG,
				 "checkpoint store: committed index %" PRIu64 " is invalid: %s", idx->checkpoint_id,
				 why);
	if ((rc = ckpt_ensure_dep(c)) != 0)
		return rc;
	if (strcmp(idx->deployment, c->dep) != 0)
		return ckpt_fail(WS_CKPT_FOREIGN, WS_EFORMAT,
				 "checkpoint store: index %" PRIu64 " belongs to deployment %s, this namespace is %s",
				 idx->checkpoint_id, idx->deployment, c->dep);
	return 0;
}

/* The canonical body of idx and its reference. */
static int index_body(const struct ws_ckpt_index *idx, char **body, size_t *len, struct ws_ckpt_ref *ref)
{
	uint8_t sha[WS_SHA256_LEN];
	*body = ckpt_enc_index(idx, len);
	if (!*body)
		return ckpt_fail(WS_CKPT_IO, -ENOMEM, "checkpoint store: encode index: out of memory");
	ws_sha256(*body, *len, sha);
	memset(ref, 0, sizeof(*ref));
	ref->id = idx->checkpoint_id;
	ref->length = *len;
	ws_hex(sha, sizeof(sha), ref->sha256);
	ws_ckpt_committed_key(ref->id, ref->sha256, ref->key);
	return 0;
}

int ckpt_check_ref_input(const struct ws_ckpt_ref *ref)
{
	if (!ref || !memchr(ref->key, 0, sizeof(ref->key)) || !memchr(ref->sha256, 0, sizeof(ref->sha256)) ||
	    !ckpt_ref_shape_ok(ref))
		return ckpt_fail(WS_CKPT_INVALID_INPUT, WS_ECONFIG,
				 "checkpoint store: reference %s does not name its own id and SHA-256",
				 ref && memchr(ref->key, 0, sizeof(ref->key)) ? ref->key : "(invalid)");
	if (ref->length == 0 || ref->length > WS_CKPT_INDEX_BYTES_MAX)
		return ckpt_fail(WS_CKPT_INVALID_INPUT, WS_ECONFIG,
				 "checkpoint store: reference %s records length %" PRIu64 " (1..%zu)", ref->key,
				 ref->length, WS_CKPT_INDEX_BYTES_MAX);
	return 0;
}

/*
 * Verify b (the object at ref->key) is exactly ref's index, into out (may be
 * NULL). A seal for ref is SEALED; anything else a mismatch or malformed.
 */
static int verify_index(struct ws_ckpt *c, const struct ws_ckpt_ref *ref, const struct ws_buf *b,
			struct ws_ckpt_index *out)
{
	uint8_t sha[WS_SHA256_LEN];
	char hex[WS_SHA256_HEX_LEN + 1];
	struct ws_ckpt_index idx;
	int rc;

	ws_sha256(b->data, b->len, sha);
	ws_hex(sha, sizeof(sha), hex);
	if (ckpt_is_seal(b->data, b->len)) {
		struct ckpt_seal seal;
		if ((rc = ckpt_dec_seal(ref->key, b->data, b->len, ckpt_dep_or_none(c), &seal)) != 0)
			return rc;
		if (seal.checkpoint_id == ref->id && seal.length == ref->length &&
		    strcmp(seal.sha256, ref->sha256) == 0)
			return ckpt_fail(WS_CKPT_SEALED, WS_EPRECOND,
					 "checkpoint object %s: sealed: the attempt of checkpoint %" PRIu64
					 " was aborted", ref->key, ref->id);
		return ckpt_fail(WS_CKPT_REF_MISMATCH, WS_ECORRUPT,
				 "checkpoint object %s: holds a seal for another candidate", ref->key);
	}
	if (b->len != ref->length)
		return ckpt_fail(WS_CKPT_REF_MISMATCH, WS_ECORRUPT,
				 "checkpoint object %s: %zu bytes, the reference records %" PRIu64, ref->key,
				 b->len, ref->length);
	if (strcmp(hex, ref->sha256) != 0)
		return ckpt_fail(WS_CKPT_REF_MISMATCH, WS_ECORRUPT,
				 "checkpoint object %s: SHA-256 is %s, the reference records %s", ref->key, hex,
				 ref->sha256);
	if ((rc = ckpt_dec_index(ref->key, b->data, b->len, ckpt_dep_or_none(c), &idx)) != 0)
		return rc;
	if (idx.checkpoint_id != ref->id) {
		ws_ckpt_index_free(&idx);
		return ckpt_fail(WS_CKPT_REF_MISMATCH, WS_ECORRUPT,
				 "checkpoint object %s: holds checkpoint %" PRIu64, ref->key, idx.checkpoint_id);
	}
	if (out)
		*out = idx;
	else
		ws_ckpt_index_free(&idx);
	return 0;
}

int ws_ckpt_create_committed(struct ws_ckpt *c, const struct ws_ckpt_index *idx, struct ws_ckpt_ref *ref)
{
	struct ws_ckpt_ref r;
	struct ws_buf b;
	char *body = NULL;
	size_t len = 0;
	bool found;
	int rc;

	ckpt_kind_set(WS_CKPT_OK);
	if ((rc = ckpt_reader_refused(c, "create committed index")) != 0)
		return rc;
	if ((rc = check_index_input(c, idx)) != 0 || (rc = index_body(idx, &body, &len, &r)) != 0)
		return rc;
	if (len > WS_CKPT_INDEX_BYTES_MAX) {
		free(body);
		return ckpt_fail(WS_CKPT_INVALID_INPUT, WS_ETOOBIG, "checkpoint store: index %" PRIu64
				 " encodes to %zu bytes (max %zu)", r.id, len, WS_CKPT_INDEX_BYTES_MAX);
	}
	if ((rc = ckpt_fault("ckpt.create.before_put")) != 0) {
		free(body);
		return rc;
	}
	rc = ws_store_put(c->s, r.key, body, len, WS_PUT_CREATE, NULL, NULL);
	if (rc == 0) {
		free(body);
		*ref = r;
		return ckpt_fault("ckpt.create.after_put");
	}
	if (rc != WS_EPRECOND) {
		free(body);
		return ckpt_io_fail(rc, "put", r.key);
	}
	/* The path exists: our own earlier write (converge), a seal, or a stranger. */
	rc = ckpt_get_obj(c, r.key, len + 1, &b, NULL, &found);
	if (rc == WS_EFORMAT && ws_ckpt_last_kind() == WS_CKPT_MALFORMED)
		rc = ckpt_fail(WS_CKPT_CONFLICTING_BODY, WS_EPRECOND,
			       "checkpoint object %s: holds a different, larger body", r.key);
	else if (rc == 0 && !found)
		rc = ckpt_fail(WS_CKPT_CONFLICTING_BODY, WS_EPRECOND,
			       "checkpoint object %s: create lost, then the object vanished", r.key);
	else if (rc == 0 && b.len == len && memcmp(b.data, body, len) == 0) {
		*ref = r;
		ckpt_kind_set(WS_CKPT_CONVERGED);
	} else if (rc == 0) {
		rc = verify_index(c, &r, &b, NULL);
		if (rc == 0 || ws_ckpt_last_kind() != WS_CKPT_SEALED)
			rc = ckpt_fail(WS_CKPT_CONFLICTING_BODY, WS_EPRECOND,
				       "checkpoint object %s: holds a different body than index %" PRIu64, r.key,
				       r.id);
	}
	ws_buf_free(&b);
	free(body);
	return rc;
}

int ws_ckpt_load_committed(struct ws_ckpt *c, const struct ws_ckpt_ref *ref, struct ws_ckpt_index *out)
{
	struct ws_buf b;
	bool found;
	int rc;

	ckpt_kind_set(WS_CKPT_OK);
	memset(out, 0, sizeof(*out));
	if ((rc = ckpt_check_ref_input(ref)) != 0 || (rc = ckpt_refresh_dep(c, false)) != 0)
		return rc;
	/* One byte past the recorded length tells "longer than recorded" from "as recorded". */
	rc = ckpt_get_obj(c, ref->key, (size_t)ref->length + 1, &b, NULL, &found);
	if (rc == WS_EFORMAT && ws_ckpt_last_kind() == WS_CKPT_MALFORMED)
		rc = ckpt_fail(WS_CKPT_REF_MISMATCH, WS_ECORRUPT,
			       "checkpoint object %s: longer than the %" PRIu64 " bytes the reference records",
			       ref->key, ref->length);
	else if (rc == 0 && !found)
		rc = ckpt_fail(WS_CKPT_MISSING, WS_ENOTFOUND, "checkpoint object %s: not found", ref->key);
	else if (rc == 0)
		rc = verify_index(c, ref, &b, out);
	ws_buf_free(&b);
	return rc;
}

int ckpt_commit_on_chain(struct ws_ckpt *c, const struct ws_ckpt_head *h, const struct ws_ckpt_ref *ref, bool *on)
{
	enum ws_ckpt_kind kind = ws_ckpt_last_kind();
	struct ws_ckpt_ref cur;
	int rc = 0;

	*on = false;
	if (!h->has_commit)
		return 0;
	cur = h->latest_commit.committed;
	while (!(*on = ckpt_ref_equal(&cur, ref)) && cur.id > ref->id) {
		struct ws_ckpt_index idx;
		uint64_t id = cur.id;
		if ((rc = ws_ckpt_load_committed(c, &cur, &idx)) != 0)
			break;
		if (!idx.has_predecessor) {
			ws_ckpt_index_free(&idx);
			break;
		}
		cur = idx.predecessor;
		ws_ckpt_index_free(&idx);
		/* A loaded index names only an older predecessor (its invariant). */
		WS_ASSERT(cur.id < id);
	}
	if (rc == WS_ENOTFOUND)
		rc = 0; /* retention removed the rest of the chain */
	if (rc == 0)
		ckpt_kind_set(kind);
	return rc;
}

int ws_ckpt_seal_aborted_candidate(struct ws_ckpt *c, const struct ws_ckpt_index *idx)
{
	struct ws_ckpt_ref r;
	char *cand = NULL, *seal = NULL;
	size_t cand_len = 0, seal_len = 0;
	bool wrote = false;
	int rc;

	ckpt_kind_set(WS_CKPT_OK);
	if ((rc = ckpt_reader_refused(c, "seal candidate")) != 0)
		return rc;
	if ((rc = check_index_input(c, idx)) != 0 || (rc = index_body(idx, &cand, &cand_len, &r)) != 0)
		return rc;
	/* Only an aborted candidate is sealed: never the index a Commit names
	 * (the head's latest Commit or one on its chain), which would make a
	 * decided checkpoint unloadable for good. */
	{
		struct ws_ckpt_head h;
		bool hfound = false, on = false;
		if ((rc = ckpt_load_singleton(c, OBJ_HEAD, &h, NULL, &hfound)) == 0 && hfound)
			rc = ckpt_commit_on_chain(c, &h, &r, &on);
		if (rc == 0 && on)
			rc = ckpt_fail(WS_CKPT_CONFLICTING_OUTCOME, WS_EPRECOND,
				       "checkpoint object %s: checkpoint %" PRIu64 " is committed (%s names it); "
				       "only an aborted candidate is sealed", r.key, r.id, KEY_HEAD);
		if (rc) {
			free(cand);
			return rc;
		}
	}
	seal = ckpt_enc_seal(c->dep, r.id, r.sha256, r.length, &seal_len);
	if (!seal) {
		rc = ckpt_fail(WS_CKPT_IO, -ENOMEM, "checkpoint store: encode seal: out of memory");
		goto out;
	}
	rc = ckpt_contention(r.key);
	for (int i = 0; i < RETRY_MAX; i++) {
		struct ws_etag etag;
		struct ws_buf b;
		bool found;
		size_t max = cand_len > seal_len ? cand_len : seal_len;

		rc = ckpt_get_obj(c, r.key, max + 1, &b, &etag, &found);
		if (rc == WS_EFORMAT && ws_ckpt_last_kind() == WS_CKPT_MALFORMED)
			rc = ckpt_fail(WS_CKPT_CONFLICTING_BODY, WS_EPRECOND,
				       "checkpoint object %s: holds a different, larger body", r.key);
		if (rc)
			break;
		if (found && b.len == seal_len && memcmp(b.data, seal, seal_len) == 0) {
			ws_buf_free(&b);
			ckpt_kind_set(wrote ? WS_CKPT_OK : WS_CKPT_CONVERGED);
			rc = 0;
			break;
		}
		if (found && !(b.len == cand_len && memcmp(b.data, cand, cand_len) == 0)) {
			ws_buf_free(&b);
			rc = ckpt_fail(WS_CKPT_CONFLICTING_BODY, WS_EPRECOND,
				       "checkpoint object %s: holds neither candidate %" PRIu64 " nor its seal",
				       r.key, r.id);
			break;
		}
		ws_buf_free(&b);
		/* Absent: pre-empt a create still in flight. Candidate: replace it exactly. */
		if ((rc = ckpt_fault("ckpt.seal.before_put")) != 0)
			break;
		rc = ws_store_put(c->s, r.key, seal, seal_len, found ? WS_PUT_CAS : WS_PUT_CREATE,
				  found ? &etag : NULL, NULL);
		if (rc && rc != WS_EPRECOND) {
			rc = ckpt_io_fail(rc, "put", r.key);
			break;
		}
		if (rc == 0) {
			wrote = true;
			if ((rc = ckpt_fault("ckpt.seal.after_put")) != 0)
				break;
		}
		rc = ckpt_contention(r.key); /* loop: re-read and confirm the exact seal is there */
	}
out:
	free(cand);
	free(seal);
	return rc;
}

int ws_ckpt_delete_committed(struct ws_ckpt *c, const struct ws_ckpt_ref *ref)
{
	struct ws_obj_info info;
	struct ws_buf b;
	bool found;
	int rc;

	ckpt_kind_set(WS_CKPT_OK);
	if ((rc = ckpt_reader_refused(c, "delete committed index")) != 0)
		return rc;
	if ((rc = ckpt_check_ref_input(ref)) != 0 || (rc = ckpt_refresh_dep(c, false)) != 0)
		return rc;
	rc = ckpt_get_obj(c, ref->key, (size_t)ref->length + 4096, &b, NULL, &found);
	if (rc == 0 && !found) {
		ckpt_kind_set(WS_CKPT_CONVERGED);
		return 0;
	}
	/* A seal stays: it occupies an aborted candidate's path for good, so
	 * that a create of the candidate still in flight loses to it
	 * (verify_index refuses it with SEALED). */
	if (rc == 0)
		rc = verify_index(c, ref, &b, NULL);
	ws_buf_free(&b);
	if (rc)
		return ws_fail_wrap(rc, "delete refused");
	if ((rc = ckpt_fault("ckpt.delete.before_del")) != 0)
		return rc;
	rc = ws_store_del(c->s, ref->key);
	if (rc) {
		/* An ambiguous delete that did remove the object is a successful retry. */
		int hrc = ws_store_head(c->s, ref->key, &info);
		if (hrc == WS_ENOTFOUND)
			return 0;
		return ckpt_io_fail(rc, "delete", ref->key);
	}
	ckpt_kind_set(WS_CKPT_OK);
	return 0;
}
