/*
 * Reading the stream back: watermark, manifest chain, verified objects.
 * Every byte read here is checked before use (DESIGN invariant 6): SHA-256
 * and length for manifests, XXH3-64 and length for batches and snapshot
 * parts, SQLite's cumulative checksum for every frame, and the links
 * between manifests (watermark sequence, generation, frame and checksum
 * continuity). A mismatch is an error naming the object.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chain.h"
#include "sink.h"
#include "ws_assert.h"
#include "ws_fault.h"

#define CHAIN_MAX (1u << 20)

static int wm_load(struct ws_store *s, const char *tenant, struct ws_fmt_watermark *wm, struct ws_etag *etag,
		   struct ws_buf *keep, bool slots)
{
	char key[WS_KEY_MAX];
	struct ws_buf own, *b = keep ? keep : &own;
	struct ws_obj_info info;
	int rc;

	rc = ws_key_watermark(key, sizeof(key), tenant);
	if (rc)
		return ws_fail(rc, "tenant %s: watermark key too long", tenant);
	/* A watermark may carry its manifest (up to 16 MiB of inline batches). */
	if (keep)
		ws_buf_reset(keep);
	else
		ws_buf_init(&own, WS_WM_BYTES_MAX);
	rc = ws_store_get(s, key, 0, UINT64_MAX, b, &info);
	if (rc == WS_ENOTFOUND)
		goto out;
	if (rc == WS_ETOOBIG) { /* larger than any watermark walship writes: bad data, not a limit */
		rc = ws_fail(WS_EFORMAT, "tenant %s: watermark %s is larger than the %u bytes a watermark can be",
			     tenant, key, WS_WM_BYTES_MAX);
		goto out;
	}
	if (rc) {
		ws_fail_wrap(rc, "tenant %s: read watermark %s", tenant, key);
		goto out;
	}
	rc = ws_fmt_watermark_decode(b->data, b->len, wm);
	if (rc) {
		ws_fail_wrap(rc, "tenant %s: watermark %s", tenant, key);
		goto out;
	}
	if (strcmp(wm->tenant, tenant) != 0) {
		rc = ws_fail(WS_EFORMAT, "tenant %s: watermark %s belongs to tenant '%s' (foreign object)",
			     tenant, key, wm->tenant);
		goto out;
	}
	if (!slots && (rc = ws_wm_slots_refuse(tenant, key, wm)) != 0)
		goto out;
	if (!keep)
		wm->carried = NULL; /* its bytes go with own; carried_len says there was one */
	if (etag)
		*etag = info.etag;
out:
	if (!keep)
		ws_buf_free(&own);
	return rc;
}

int ws_wm_load_keep(struct ws_store *s, const char *tenant, struct ws_fmt_watermark *wm, struct ws_etag *etag,
		    struct ws_buf *keep)
{
	return wm_load(s, tenant, wm, etag, keep, false);
}

int ws_wm_load_any(struct ws_store *s, const char *tenant, struct ws_fmt_watermark *wm, struct ws_etag *etag,
		   struct ws_buf *keep)
{
	return wm_load(s, tenant, wm, etag, keep, true);
}

int ws_wm_load(struct ws_store *s, const char *tenant, struct ws_fmt_watermark *wm, struct ws_etag *etag)
{
	return ws_wm_load_keep(s, tenant, wm, etag, NULL);
}

int ws_wm_slots_refuse(const char *tenant, const char *key, const struct ws_fmt_watermark *wm)
{
	if (wm->version < 4)
		return 0;
	return ws_fail(WS_EFORMAT, "tenant %s uses manifest slots (its watermark %s is version %u), which this "
		       "walship does not read yet: refused, nothing read or written for it", tenant, key, wm->version);
}

int ws_wm_slots_check(struct ws_store *s, const char *tenant, const char *what)
{
	char key[WS_KEY_MAX];
	struct ws_fmt_watermark wm;
	struct ws_buf b;
	int rc;

	if ((rc = ws_key_watermark(key, sizeof(key), tenant)) != 0)
		return ws_fail(rc, "%s: tenant %s: watermark key too long", what, tenant);
	ws_buf_init(&b, WS_WM_BYTES_MAX);
	rc = ws_store_get(s, key, 0, UINT64_MAX, &b, NULL);
	memset(&wm, 0, sizeof(wm));
	if (rc == 0)
		wm.version = ws_fmt_watermark_peek_version(b.data, b.len);
	ws_buf_free(&b);
	if (rc == WS_ENOTFOUND || rc == WS_ETOOBIG)
		return 0;
	if (rc)
		return ws_fail_wrap(rc, "%s: tenant %s: read watermark %s", what, tenant, key);
	if ((rc = ws_wm_slots_refuse(tenant, key, &wm)) != 0)
		return ws_fail_wrap(rc, "%s", what);
	return 0;
}

int ws_slot_key_refuse(const char *what, const char *key)
{
	const char *slash = strchr(key, '/');
	return ws_fail(WS_EFORMAT, "%s: %s is a manifest slot: tenant %.*s uses manifest slots, which this walship "
		       "does not read yet: refused, nothing deleted for it", what, key,
		       (int)(slash ? slash - key : 0), key);
}

/* The bytes read for ref are the object it names: its length, and (the
 * decoder checks the header and payload hashes) its header hash, the last
 * 8 bytes of its header whichever its version. */
static int obj_is_named(const struct ws_buf *out, const struct ws_fmt_objref *ref, const char *key, const char *what)
{
	uint64_t xxh;
	if (out->len != ref->length)
		return ws_fail(WS_ECORRUPT, "object %s%s is %zu bytes, manifest says %llu (truncated?)", key, what,
			       out->len, (unsigned long long)ref->length);
	if (!ws_fmt_obj_hdr_hash(out->data, out->len, &xxh) || xxh != ref->xxh)
		return ws_fail(WS_ECORRUPT, "object %s%s is not the object its manifest names (hash mismatch)",
			       key, what);
	return 0;
}

int ws_obj_fetch(struct ws_store *s, const char *mkey, const struct ws_fmt_objref *ref, struct ws_buf *out)
{
	/* An inline batch is read from the manifest that carries it; the
	 * manifest was verified whole (SHA-256) when the chain was read, and
	 * the bytes read now are held to the hash it names, as an object's. */
	struct ws_get_req r;
	int rc;
	ws_buf_reset(out);
	if ((rc = ws_obj_get_req(mkey, ref, out, &r)) != 0)
		return rc;
	return ws_obj_fetched(ws_store_get(s, r.key, r.off, r.len, out, NULL), mkey, ref, out);
}

int ws_obj_get_req(const char *mkey, const struct ws_fmt_objref *ref, struct ws_buf *out, struct ws_get_req *r)
{
	const bool inl = ws_fmt_objref_inline(ref);
	if (inl && !mkey)
		return ws_fail(WS_EFORMAT, "an inline object outside a manifest");
	*r = (struct ws_get_req){ .key = inl ? mkey : ref->key, .off = inl ? ref->inline_off : 0,
				  .len = inl ? ref->length : UINT64_MAX, .out = out };
	return 0;
}

int ws_obj_fetched(int rc, const char *mkey, const struct ws_fmt_objref *ref, struct ws_buf *out)
{
	const bool inl = ws_fmt_objref_inline(ref);
	const char *key = inl ? mkey : ref->key;
	const char *what = inl ? " (inline batch)" : "";
	if (rc == WS_ENOTFOUND)
		return ws_fail(WS_EINCOMPLETE, "object %s%s is missing", key, what);
	if (rc)
		return ws_fail_wrap(rc, "read %s%s", key, what);
	return obj_is_named(out, ref, key, what);
}

int ws_chain_obj_fetch(struct ws_store *s, const struct ws_chain *c, size_t i, const struct ws_fmt_objref *ref,
		       struct ws_buf *out)
{
	WS_ASSERT(i < c->count); /* an index into the chain the caller walks */
	/* The head manifest carried by the watermark is stored nowhere else:
	 * its inline batches are read from the copy the walk kept. */
	if (c->carried && i + 1 == c->count && ws_fmt_objref_inline(ref)) {
		ws_buf_reset(out);
		if (ref->inline_off > c->carried_len || ref->length > c->carried_len - ref->inline_off)
			return ws_fail(WS_ECORRUPT, "object %s (inline batch, carried by the watermark) lies "
				       "outside its manifest", c->keys[i]);
		if (ws_buf_append(out, c->carried + ref->inline_off, (size_t)ref->length) != 0)
			return ws_fail(WS_ETOOBIG, "object %s (inline batch): %llu bytes", c->keys[i],
				       (unsigned long long)ref->length);
		return obj_is_named(out, ref, c->keys[i], " (inline batch, carried by the watermark)");
	}
	return ws_obj_fetch(s, c->keys[i], ref, out);
}

int ws_batch_verify(const struct ws_keyring *kr, const uint8_t *obj, size_t len, const struct ws_fmt_manifest *m,
		    const struct ws_fmt_objref *ref, const char *name, const uint32_t seed[2], uint32_t end[2],
		    const struct ws_obj_opened *pre, struct ws_fmt_batch *b, struct ws_buf *plain,
		    const uint8_t **frames)
{
	struct ws_wal_hdr wh;
	struct ws_wal_cursor c;
	size_t hl;
	/* The header first: what it says is checked against the manifest and
	 * the chain even when the payload cannot be opened (no key). */
	int rc = ws_fmt_batch_decode_hdr(obj, len, b, &hl);
	if (rc)
		return ws_fail_wrap(rc, "batch %s", name);
	if (b->gen.wal_magic != m->gen.wal_magic || b->gen.checkpoint_seq != m->gen.checkpoint_seq ||
	    b->gen.salt1 != m->gen.salt1 || b->gen.salt2 != m->gen.salt2 ||
	    b->gen.page_size != m->gen.page_size || b->first_frame != ref->first ||
	    b->frame_count != ref->count)
		return ws_fail(WS_EFORMAT, "batch %s does not match its manifest entry (generation or range)",
			       name);
	if (b->seed_cksum[0] != seed[0] || b->seed_cksum[1] != seed[1])
		return ws_fail(WS_EINCOMPLETE, "batch %s does not continue the checksum chain", name);
	if (pre && pre->done) {
		if ((rc = pre->rc) != 0)
			return ws_fail(rc, "batch %s: %s", name, pre->msg);
		*frames = pre->payload;
	} else if ((rc = ws_seal_open_batch(kr, obj, len, b, plain, frames)) != 0) {
		return ws_fail_wrap(rc, "batch %s", name);
	}
	memset(&wh, 0, sizeof(wh));
	wh.magic = b->gen.wal_magic;
	wh.page_size = b->gen.page_size;
	wh.salt1 = b->gen.salt1;
	wh.salt2 = b->gen.salt2;
	ws_wal_cursor_init(&c, &wh);
	if (b->first_frame > 1)
		ws_wal_cursor_resume(&c, &wh, b->first_frame, seed);
	else {
		c.cksum[0] = seed[0];
		c.cksum[1] = seed[1];
	}
	const uint32_t fsz = ws_wal_frame_size(b->gen.page_size);
	for (uint64_t i = 0; i < b->frame_count; i++) {
		if (ws_wal_cursor_step(&c, *frames + i * fsz, NULL) != 1)
			return ws_fail(WS_ECORRUPT, "batch %s: frame %llu fails SQLite's checksum chain", name,
				       (unsigned long long)(b->first_frame + i));
	}
	if (c.cksum[0] != b->end_cksum[0] || c.cksum[1] != b->end_cksum[1])
		return ws_fail(WS_ECORRUPT, "batch %s: end checksum mismatch", name);
	end[0] = c.cksum[0];
	end[1] = c.cksum[1];
	return 0;
}

int ws_manifests_each(struct ws_store *s, const char *prefix, ws_manifest_key_fn fn, void *arg)
{
	char token[WS_KEY_MAX] = "";
	int rc = WS_FAULT("chain.before_manifest_list");
	if (rc)
		return ws_fail(rc, "injected fault before listing %s", prefix);
	for (;;) {
		struct ws_list_page page;
		memset(&page, 0, sizeof(page));
		if ((rc = ws_store_list(s, prefix, token, WS_LIST_PAGE_MAX, &page)) != 0)
			return ws_fail_wrap(rc, "list %s", prefix);
		for (size_t i = 0; i < page.count && !rc; i++) {
			uint64_t seq = ws_key_manifest_seq(page.keys[i]);
			if (seq)
				rc = fn(page.keys[i], seq, arg);
		}
		bool more = !rc && page.truncated && strcmp(page.next_token, token) > 0;
		if (more)
			snprintf(token, sizeof(token), "%s", page.next_token);
		ws_list_page_free(&page);
		if (!more)
			return rc;
	}
}

#define WENT_BACK_CANDIDATES 16

struct went_back {
	uint64_t seq, seq_sib;   /* sequences whose manifests are candidates (seq_sib 0: none) */
	char (*keys)[WS_KEY_MAX];
	size_t n;
};

static int went_back_key(const char *key, uint64_t seq, void *arg)
{
	struct went_back *w = arg;
	if ((seq == w->seq || (w->seq_sib && seq == w->seq_sib)) && w->n < WENT_BACK_CANDIDATES)
		snprintf(w->keys[w->n++], WS_KEY_MAX, "%s", key);
	return 0;
}

int ws_manifest_read(struct ws_store *s, const char *key, const uint8_t *sha, uint64_t len, struct ws_buf *b,
		     struct ws_fmt_manifest *m)
{
	uint8_t got[WS_SHA256_LEN];
	ws_buf_reset(b);
	int rc = ws_store_get(s, key, 0, UINT64_MAX, b, NULL);
	if (rc == WS_ENOTFOUND)
		return 1;
	if (rc)
		return ws_fail_wrap(rc, "read manifest %s", key);
	if (sha) {
		ws_sha256(b->data, b->len, got);
		if (b->len != len || memcmp(got, sha, WS_SHA256_LEN) != 0)
			return 1;
	}
	return ws_fmt_manifest_decode(b->data, b->len, m) == 0 ? 0 : 1;
}

/* The manifest listing prefix for sequence seq in the watermark's manifest
 * directory (thorough: every key of the tenant). */
static bool went_back_prefix(const char *tenant, const struct ws_fmt_watermark *wm, bool thorough, uint64_t seq,
			     char prefix[WS_KEY_MAX])
{
	const char *slash = strrchr(wm->manifest_key, '/');
	if (thorough || !slash)
		return snprintf(prefix, WS_KEY_MAX, "%s/", tenant) < WS_KEY_MAX;
	return snprintf(prefix, WS_KEY_MAX, "%.*sm%016" PRIx64 "-", (int)(slash - wm->manifest_key + 1),
			wm->manifest_key, seq) < WS_KEY_MAX;
}

int ws_wm_went_back(struct ws_store *s, const char *tenant, const struct ws_fmt_watermark *wm, bool thorough,
		    char evidence[WS_KEY_MAX])
{
	char prefix[WS_KEY_MAX], keys[WENT_BACK_CANDIDATES][WS_KEY_MAX];
	struct went_back w = { wm->seq + 2, 0, keys, 0 };
	struct ws_fmt_manifest head;
	bool have_head = false;
	struct ws_buf b;
	int rc = 0, found = 0;

	evidence[0] = '\0';
	if (wm->seq > UINT64_MAX - 2)
		return 0;
	/* A carried head (docs/FORMAT.md "Watermark") is replaced in place by
	 * its owner's merges, and stored merged before anything links to it: a
	 * manifest for seq + 1 on a stored manifest for seq that is not this
	 * head but continues the same predecessor proves a later watermark
	 * named that merge. */
	if (wm->carried && ws_fmt_manifest_decode(wm->carried, (size_t)wm->carried_len, &head) == 0) {
		have_head = true;
		if (head.prev_key[0])
			w.seq_sib = wm->seq + 1;
	}
	for (int pass = 0; pass < (w.seq_sib && !thorough ? 2 : 1) && rc == 0; pass++) {
		if (!went_back_prefix(tenant, wm, thorough, pass ? w.seq_sib : w.seq, prefix))
			goto done;
		if ((rc = ws_manifests_each(s, prefix, went_back_key, &w)) != 0)
			rc = ws_fail_wrap(rc, "tenant %s: looking for manifests after its watermark", tenant);
	}
	if (rc)
		goto done;
	ws_buf_init(&b, 256u << 20);
	for (size_t i = 0; i < w.n && !found; i++) {
		struct ws_fmt_manifest m, p;
		rc = ws_manifest_read(s, keys[i], NULL, 0, &b, &m);
		if (rc < 0)
			break;
		if (rc > 0)
			continue;
		bool sib = m.wm_seq == w.seq_sib && w.seq_sib;
		bool linked = !strcmp(m.tenant, tenant) && (m.wm_seq == w.seq || sib) && m.prev_key[0];
		if (linked && (rc = ws_manifest_read(s, m.prev_key, m.prev_sha, m.prev_length, &b, &p)) == 0) {
			if (sib)
				linked = p.wm_seq == wm->seq && strcmp(m.prev_key, wm->manifest_key) != 0 &&
					 !strcmp(p.prev_key, head.prev_key) && p.prev_length == head.prev_length &&
					 !memcmp(p.prev_sha, head.prev_sha, WS_SHA256_LEN);
			else
				linked = p.wm_seq == wm->seq + 1 && !strcmp(p.prev_key, wm->manifest_key) &&
					 p.prev_length == wm->manifest_length &&
					 !memcmp(p.prev_sha, wm->manifest_sha, WS_SHA256_LEN);
			ws_fmt_manifest_free(&p);
		} else {
			linked = false;
		}
		ws_fmt_manifest_free(&m);
		if (rc < 0)
			break;
		rc = 0;
		if (linked) {
			snprintf(evidence, WS_KEY_MAX, "%s", keys[i]);
			found = 1;
		}
	}
	ws_buf_free(&b);
	if (rc >= 0 && found) {
		/* Evidence, or a writer that went on since the caller read the
		 * watermark (it wrote seq + 1 and a manifest on top of it): only
		 * a watermark still at seq, or behind it, went back. A carried
		 * head the writer has since stored merged, at the same seq, is
		 * no longer what the watermark names. */
		struct ws_fmt_watermark now;
		rc = ws_wm_load(s, tenant, &now, NULL);
		if (rc == 0 && (now.seq > wm->seq ||
				(now.seq == wm->seq && memcmp(now.manifest_sha, wm->manifest_sha, WS_SHA256_LEN) != 0))) {
			found = 0;
			evidence[0] = '\0';
		}
		if (rc == WS_ENOTFOUND)
			rc = 0;
	}
done:
	if (have_head)
		ws_fmt_manifest_free(&head);
	return rc < 0 ? rc : found;
}

/* A version-1 watermark carries no salts (decode zeroes them); its manifest
 * is still bound to it by SHA-256 and length, salts included. */
static bool wm_gen_eq(const struct ws_fmt_watermark *wm, const struct ws_fmt_gen *g)
{
	if (wm->version < 2)
		return g->wal_magic == wm->gen.wal_magic && g->checkpoint_seq == wm->gen.checkpoint_seq &&
		       g->page_size == wm->gen.page_size;
	return ws_fmt_gen_equal(g, &wm->gen);
}

void ws_chain_free(struct ws_chain *c)
{
	for (size_t i = 0; i < c->count; i++)
		ws_fmt_manifest_free(&c->m[i]);
	free(c->m);
	free(c->keys);
	free(c->carried);
	memset(c, 0, sizeof(*c));
}

int ws_chain_missing(const char *tenant, const char *key)
{
	return ws_fail(WS_EINCOMPLETE, "tenant %s: manifest %s is missing", tenant, key);
}

bool ws_key_in_tenant(const char *tenant, const char *key)
{
	const size_t tl = strlen(tenant);
	return strncmp(key, tenant, tl) == 0 && key[tl] == '/';
}

/*
 * Every batch and snapshot part of a tenant is keyed under its prefix
 * (docs/FORMAT.md "Keys"): a manifest that names another tenant's object
 * is refused, so a reader never uses it and retention never deletes it as
 * this tenant's.
 */
const char *ws_manifest_foreign_ref(const struct ws_fmt_manifest *m)
{
	for (uint32_t k = 0; k < m->snap_count + m->batch_count; k++) {
		const struct ws_fmt_objref *r = k < m->snap_count ? &m->snaps[k] : &m->batches[k - m->snap_count];
		if (!ws_fmt_objref_inline(r) && !ws_key_in_tenant(m->tenant, r->key))
			return r->key;
	}
	return NULL;
}

/*
 * Walk back from the manifest (start_key, start_sha, start_len). wm (may be
 * NULL) is the watermark the head must match. stop (may be NULL): a manifest
 * at which to end the walk early, included as the oldest entry (a
 * checkpoint's cut: its state comes from the checkpoint's artifact). With
 * WS_CHAIN_UPTO_MISSING a missing predecessor ends the walk instead of
 * failing (retention resuming over a chain it already shortened).
 */
static int chain_walk(struct ws_store *s, const char *tenant, const char *start_key,
		      const uint8_t start_sha[WS_SHA256_LEN], uint64_t start_len,
		      const struct ws_fmt_watermark *wm, const struct ws_chain_stop *stop, unsigned flags,
		      uint64_t floor_seq, struct ws_chain *out, bool *stopped)
{
	struct ws_buf b;
	char key[WS_KEY_MAX];
	uint8_t want_sha[WS_SHA256_LEN];
	uint64_t want_len;
	size_t cap = 0;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	if (stopped)
		*stopped = false;
	ws_buf_init(&b, 256u << 20);
	snprintf(key, sizeof(key), "%s", start_key);
	memcpy(want_sha, start_sha, WS_SHA256_LEN);
	want_len = start_len;

	for (;;) {
		struct ws_fmt_manifest m;
		uint8_t sha[WS_SHA256_LEN];

		if (out->count >= CHAIN_MAX) {
			rc = ws_fail(WS_ETOOBIG, "tenant %s: manifest chain longer than %u (one manifest per tail "
				     "with manifest slots: see batch_age_ms_max; a checkpoint bounds it)", tenant, CHAIN_MAX);
			goto fail;
		}
		ws_buf_reset(&b);
		if (out->count == 0 && wm && wm->carried_len) {
			/* The head is carried by the watermark (docs/FORMAT.md
			 * "Watermark"), checked against its SHA-256 when it was
			 * decoded and again below; stored nowhere else. */
			if (!wm->carried) {
				rc = ws_fail(-EINVAL, "tenant %s: the watermark carries manifest %s, and its "
					     "bytes were not kept", tenant, key);
				goto fail;
			}
			out->carried = malloc((size_t)wm->carried_len);
			if (!out->carried || ws_buf_append(&b, wm->carried, (size_t)wm->carried_len) != 0) {
				rc = -ENOMEM;
				goto fail;
			}
			memcpy(out->carried, wm->carried, (size_t)wm->carried_len);
			out->carried_len = (size_t)wm->carried_len;
			rc = 0;
		} else {
			rc = ws_store_get(s, key, 0, UINT64_MAX, &b, NULL);
		}
		if (rc == WS_ENOTFOUND && out->count > 0 && (flags & WS_CHAIN_UPTO_MISSING)) {
			rc = 0;
			break;
		}
		if (rc == WS_ENOTFOUND) {
			rc = ws_chain_missing(tenant, key);
			goto fail;
		}
		if (rc) {
			ws_fail_wrap(rc, "tenant %s: read manifest %s", tenant, key);
			goto fail;
		}
		ws_sha256(b.data, b.len, sha);
		if (b.len != want_len || memcmp(sha, want_sha, WS_SHA256_LEN) != 0) {
			rc = ws_fail(WS_ECORRUPT, "tenant %s: manifest %s does not match the SHA-256/length "
				     "recorded for it", tenant, key);
			goto fail;
		}
		rc = ws_fmt_manifest_decode(b.data, b.len, &m);
		if (rc) {
			ws_fail_wrap(rc, "tenant %s: manifest %s", tenant, key);
			goto fail;
		}
		if (strcmp(m.tenant, tenant) != 0) {
			ws_fmt_manifest_free(&m);
			rc = ws_fail(WS_EFORMAT, "tenant %s: manifest %s belongs to '%s'", tenant, key, m.tenant);
			goto fail;
		}
		const char *foreign = ws_manifest_foreign_ref(&m);
		if (foreign) {
			rc = ws_fail(WS_EFORMAT, "tenant %s: manifest %s names object %s, which is not under %s/ "
				     "(foreign object)", tenant, key, foreign, tenant);
			ws_fmt_manifest_free(&m);
			goto fail;
		}
		if ((rc = ws_slot_manifest_bound(tenant, key, &m)) != 0) {
			ws_fmt_manifest_free(&m);
			goto fail;
		}
		if (out->count == cap) {
			size_t ncap = cap ? cap * 2 : 16;
			void *nm = realloc(out->m, ncap * sizeof(*out->m));
			if (nm)
				out->m = nm;
			void *nk = nm ? realloc(out->keys, ncap * sizeof(*out->keys)) : NULL;
			if (!nm || !nk) {
				ws_fmt_manifest_free(&m);
				rc = -ENOMEM;
				goto fail;
			}
			out->keys = nk;
			cap = ncap;
		}
		/* Link check against the newer manifest (already stored). */
		if (out->count > 0) {
			const struct ws_fmt_manifest *n = &out->m[out->count - 1];
			const char *why = NULL;
			if (m.wm_seq + 1 != n->wm_seq)
				why = "watermark sequence gap";
			else if (n->kind == WS_MANIFEST_CONTINUE &&
				 (!ws_fmt_gen_equal(&m.gen, &n->gen) || m.last_frame + 1 != n->first_frame ||
				  m.end_cksum[0] != n->seed_cksum[0] || m.end_cksum[1] != n->seed_cksum[1]))
				why = "frame range or checksum does not continue";
			else if (n->kind == WS_MANIFEST_NEXT_GEN && (ws_fmt_gen_equal(&m.gen, &n->gen) || n->first_frame != 1))
				why = "next generation does not start a new WAL";
			else if (n->kind == WS_MANIFEST_NEXT_GEN && m.gen.page_size != n->gen.page_size)
				/* SQLite cannot change a WAL database's page size:
				 * frames of both sizes would make one image. */
				why = "next generation changes the page size";
			if (why) {
				ws_fmt_manifest_free(&m);
				rc = ws_fail(WS_EINCOMPLETE, "tenant %s: manifest %s is not the predecessor of %s: %s",
					     tenant, key, out->keys[out->count - 1], why);
				goto fail;
			}
		} else if (wm && (m.wm_seq != wm->seq || m.last_frame != wm->last_frame || !wm_gen_eq(wm, &m.gen))) {
			ws_fmt_manifest_free(&m);
			rc = ws_fail(WS_EINCOMPLETE, "tenant %s: manifest %s does not match its watermark", tenant,
				     key);
			goto fail;
		} else if (out->count == 0 && out->carried && (m.kind == WS_MANIFEST_REBASE || !m.prev_key[0])) {
			/* Only a manifest on a stored one (a continuation, or a
			 * next generation's first) is carried: the owner's next
			 * tails link to that one, or to the head once stored. */
			ws_fmt_manifest_free(&m);
			rc = ws_fail(WS_EFORMAT, "tenant %s: manifest %s carried by the watermark does not continue "
				     "a stored manifest", tenant, key);
			goto fail;
		}
		WS_ASSERT(out->count < cap);
		out->m[out->count] = m;
		snprintf(out->keys[out->count], WS_KEY_MAX, "%s", key);
		out->count++;
		if (stop && strcmp(key, stop->key) == 0 && memcmp(sha, stop->sha, WS_SHA256_LEN) == 0 &&
		    b.len == stop->length) {
			if (stopped)
				*stopped = true;
			break;
		}
		if (m.kind == WS_MANIFEST_REBASE || (floor_seq && m.wm_seq <= floor_seq))
			break;
		snprintf(key, sizeof(key), "%s", m.prev_key);
		memcpy(want_sha, m.prev_sha, WS_SHA256_LEN);
		want_len = m.prev_length;
	}
	/* Every way out of the walk above has added the head at least. */
	WS_ASSERT(out->count > 0);
	/* Oldest first. */
	for (size_t i = 0, j = out->count - 1; i < j; i++, j--) {
		struct ws_fmt_manifest t = out->m[i];
		char tk[WS_KEY_MAX];
		out->m[i] = out->m[j];
		out->m[j] = t;
		memcpy(tk, out->keys[i], WS_KEY_MAX);
		memcpy(out->keys[i], out->keys[j], WS_KEY_MAX);
		memcpy(out->keys[j], tk, WS_KEY_MAX);
	}
	/* Chain order: each manifest the predecessor of the next (the link
	 * check above), the base first: a REBASE, the stop, or (UPTO_MISSING)
	 * the oldest still stored. */
	for (size_t i = 1; i < out->count; i++)
		WS_ASSERT(out->m[i - 1].wm_seq + 1 == out->m[i].wm_seq);
	WS_ASSERT(!stopped || !*stopped || strcmp(out->keys[0], stop->key) == 0);
	ws_buf_free(&b);
	return 0;
fail:
	ws_buf_free(&b);
	ws_chain_free(out);
	return rc;
}

int ws_chain_load(struct ws_store *s, const char *tenant, const struct ws_fmt_watermark *wm,
		  struct ws_chain *out)
{
	return chain_walk(s, tenant, wm->manifest_key, wm->manifest_sha, wm->manifest_length, wm, NULL, 0, 0,
			  out, NULL);
}

int ws_chain_load_stop(struct ws_store *s, const char *tenant, const struct ws_fmt_watermark *wm,
		       const struct ws_chain_stop *stop, struct ws_chain *out, bool *stopped)
{
	return chain_walk(s, tenant, wm->manifest_key, wm->manifest_sha, wm->manifest_length, wm, stop, 0, 0,
			  out, stopped);
}

int ws_chain_load_from(struct ws_store *s, const char *tenant, const struct ws_chain_stop *head,
		       const struct ws_chain_stop *stop, unsigned flags, struct ws_chain *out, bool *stopped)
{
	return chain_walk(s, tenant, head->key, head->sha, head->length, NULL, stop, flags, 0, out, stopped);
}

int ws_chain_load_flags(struct ws_store *s, const char *tenant, const struct ws_fmt_watermark *wm, unsigned flags,
			struct ws_chain *out)
{
	return chain_walk(s, tenant, wm->manifest_key, wm->manifest_sha, wm->manifest_length, wm, NULL, flags, 0,
			  out, NULL);
}

int ws_chain_load_since(struct ws_store *s, const char *tenant, const struct ws_fmt_watermark *wm,
			const struct ws_chain_stop *stop, uint64_t floor_seq, struct ws_chain *out, bool *stopped)
{
	return chain_walk(s, tenant, wm->manifest_key, wm->manifest_sha, wm->manifest_length, wm, stop,
			  WS_CHAIN_UPTO_MISSING, floor_seq, out, stopped);
}
