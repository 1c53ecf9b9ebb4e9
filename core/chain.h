/*
 * Reading a tenant's stream back (chain.c): its watermark, the manifest chain
 * from the watermark back to its base, and each object verified before use.
 */
#ifndef WS_CORE_CHAIN_H
#define WS_CORE_CHAIN_H

#include "core_internal.h"

/* Load a tenant's watermark. Returns WS_ENOTFOUND when the tenant has none,
 * and WS_EFORMAT (ws_wm_slots_refuse) when it is version 4: a tenant with
 * manifest slots, which this walship does not read yet.
 * A watermark that carries its manifest (carried_len) gets carried NULL:
 * a reader that walks the chain from it loads it with ws_wm_load_keep,
 * whose keep holds the bytes wm->carried points into (a later read may
 * meet a newer watermark: the manifest this one carried is then gone). */
int ws_wm_load_keep(struct ws_store *s, const char *tenant, struct ws_fmt_watermark *wm, struct ws_etag *etag,
		    struct ws_buf *keep) WS_MUST_CHECK;
int ws_wm_load(struct ws_store *s, const char *tenant, struct ws_fmt_watermark *wm,
	       struct ws_etag *etag) WS_MUST_CHECK;
/* ws_wm_load_keep that reads a version 4 watermark instead of refusing it:
 * for ws_head_load (slots.c) alone, which resolves the head it hints at. */
int ws_wm_load_any(struct ws_store *s, const char *tenant, struct ws_fmt_watermark *wm, struct ws_etag *etag,
		   struct ws_buf *keep) WS_MUST_CHECK;

/*
 * Every reader and writer refuses a tenant with manifest slots (docs/FORMAT.md
 * "Watermark", version 4; docs/SLOTS.md), whole, before it reads or writes
 * anything else of it: WS_EFORMAT naming the tenant and key (the watermark's,
 * or a slot key met in a listing: ws_key_slot_any). 0 for versions 1..3.
 */
int ws_wm_slots_refuse(const char *tenant, const char *key, const struct ws_fmt_watermark *wm) WS_MUST_CHECK;
int ws_slot_key_refuse(const char *what, const char *key) WS_MUST_CHECK;
/* The same for a command that must refuse before it writes anything and
 * has not read the watermark yet: one GET, judged by its version field
 * alone (a damaged watermark is the command's to handle as before: 0, as
 * for none). Read errors other than not found are returned, named. */
int ws_wm_slots_check(struct ws_store *s, const char *tenant, const char *what) WS_MUST_CHECK;

/* Calls fn for each manifest key under prefix (with the watermark sequence it
 * carries), in key order, every page; stops at fn's non-zero return. */
typedef int (*ws_manifest_key_fn)(const char *key, uint64_t seq, void *arg);
int ws_manifests_each(struct ws_store *s, const char *prefix, ws_manifest_key_fn fn, void *arg) WS_MUST_CHECK;

/*
 * Whether the watermark went back (a store that lost its later writes): a
 * manifest written for sequence wm->seq + 2 whose predecessor, verified by
 * its SHA-256 and length, was written for wm->seq + 1 on top of the
 * manifest the watermark names. A tail writes sequence N + 2 only after
 * reading watermark N + 1, so such a manifest proves watermark N + 1 was
 * acknowledged. thorough: look in every generation of the tenant (a LIST
 * of all its objects); else only in the watermark's manifest's own
 * directory (one LIST). The watermark is read again when evidence is
 * found: a writer may have gone on since the caller read wm, which is no
 * loss. 1 with evidence[] the manifest's key, 0 when none is found (a
 * re-base or a new generation right after the watermark hides it from this
 * check), or an error.
 */
int ws_wm_went_back(struct ws_store *s, const char *tenant, const struct ws_fmt_watermark *wm, bool thorough,
		    char evidence[WS_KEY_MAX]) WS_MUST_CHECK;

/* Read and decode manifest key into *m (b holds its bytes); with sha, it
 * must be that one (SHA-256 and len). 0, 1 when it is absent, not that one
 * or does not decode, or the read's error (negative). */
int ws_manifest_read(struct ws_store *s, const char *key, const uint8_t *sha, uint64_t len, struct ws_buf *b,
		     struct ws_fmt_manifest *m) WS_MUST_CHECK;

/* Fetch one object and check it is the one referenced: length, and the
 * header hash (the last 8 bytes of its header). The caller's decoder then
 * checks every hash.
 * mkey: the manifest naming it, which holds it when it is inline (key ""). */
int ws_obj_fetch(struct ws_store *s, const char *mkey, const struct ws_fmt_objref *ref,
		 struct ws_buf *out) WS_MUST_CHECK;
/* ws_obj_fetch in two steps, for reads made elsewhere (ws_store_get_many):
 * the read of ref into out (out reset by the caller), then the judgement of
 * the read's answer rc (WS_ENOTFOUND: missing) and of what out got. */
int ws_obj_get_req(const char *mkey, const struct ws_fmt_objref *ref, struct ws_buf *out,
		   struct ws_get_req *r) WS_MUST_CHECK;
int ws_obj_fetched(int rc, const char *mkey, const struct ws_fmt_objref *ref, struct ws_buf *out) WS_MUST_CHECK;

/*
 * Load the chain from the manifest the watermark names back to its REBASE
 * base, verifying each manifest's SHA-256, length and links (generation,
 * frame and checksum continuity), and that a manifest slot is the one its
 * key names (ws_slot_manifest_bound). Links may cross lanes and lead from
 * slots into content-named manifests: wm may be ws_head_load's head.
 * Errors name the object: WS_ENOTFOUND/WS_EINCOMPLETE (missing link),
 * WS_ECORRUPT, WS_EFORMAT, I/O.
 */
int ws_chain_load(struct ws_store *s, const char *tenant, const struct ws_fmt_watermark *wm,
		  struct ws_chain *out) WS_MUST_CHECK;
void ws_chain_free(struct ws_chain *c);

/* ws_obj_fetch for c->m[i]'s object ref: an inline batch of a head the
 * watermark carried comes from the chain's copy of it. */
int ws_chain_obj_fetch(struct ws_store *s, const struct ws_chain *c, size_t i, const struct ws_fmt_objref *ref,
		       struct ws_buf *out) WS_MUST_CHECK;
/*
 * An object's payload opened ahead of its turn (prefetch.c), by
 * ws_seal_open_batch / ws_seal_open_snap on the object as fetched: its
 * plaintext (in the object's buffer or the plain buffer that came with it)
 * and its XXH3 checked, or the error and message of that opening. done
 * false: not opened ahead; the reader opens it itself.
 */
struct ws_obj_opened {
	bool done;
	int rc;
	const uint8_t *payload;
	char msg[1024];
};

/*
 * Verify one batch object fully, including SQLite's checksum chain: its
 * header against the manifest's entry and the chain first, then its
 * payload, opened with kr into plain when sealed (*frames points there or
 * into obj); or, with pre done, what pre found opening it (the same call
 * made earlier on the same bytes), still only after the header's checks. Errors: as ws_seal_open_batch (WS_ENOKEY: only the header
 * could be checked), WS_EFORMAT, WS_EINCOMPLETE, WS_ECORRUPT.
 */
int ws_batch_verify(const struct ws_keyring *kr, const uint8_t *obj, size_t len, const struct ws_fmt_manifest *m,
		    const struct ws_fmt_objref *ref, const char *name, const uint32_t seed[2], uint32_t end[2],
		    const struct ws_obj_opened *pre, struct ws_fmt_batch *hdr, struct ws_buf *plain,
		    const uint8_t **frames) WS_MUST_CHECK;

/*
 * ws_chain_load, but the walk also ends at stop (when the chain passes
 * through it, *stopped = true and stop is c->m[0]).
 */
int ws_chain_load_stop(struct ws_store *s, const char *tenant, const struct ws_fmt_watermark *wm,
		       const struct ws_chain_stop *stop, struct ws_chain *out, bool *stopped) WS_MUST_CHECK;

/* A missing predecessor ends the walk (the chain so far is returned). */
#define WS_CHAIN_UPTO_MISSING 1u
/*
 * The chain from the manifest head names (no watermark check) back to its
 * REBASE base or to stop (may be NULL). Errors as ws_chain_load.
 */
int ws_chain_load_from(struct ws_store *s, const char *tenant, const struct ws_chain_stop *head,
		       const struct ws_chain_stop *stop, unsigned flags, struct ws_chain *out,
		       bool *stopped) WS_MUST_CHECK;

/*
 * The chain the watermark names, walked back with flags (ws_chain_load with
 * WS_CHAIN_UPTO_MISSING: ws_chain_truncated(out) when a predecessor is
 * missing).
 */
int ws_chain_load_flags(struct ws_store *s, const char *tenant, const struct ws_fmt_watermark *wm, unsigned flags,
			struct ws_chain *out) WS_MUST_CHECK;

/*
 * The newest part of the chain the watermark names: walked back to stop
 * (*stopped), to the first manifest of watermark sequence floor_seq or
 * earlier, to a REBASE base, or to a missing predecessor (then c->m[0] is
 * the oldest still stored), whichever comes first; each included. What a
 * reader that holds the state of a manifest of sequence floor_seq needs
 * to go on from it. Errors as ws_chain_load.
 */
int ws_chain_load_since(struct ws_store *s, const char *tenant, const struct ws_fmt_watermark *wm,
			const struct ws_chain_stop *stop, uint64_t floor_seq, struct ws_chain *out,
			bool *stopped) WS_MUST_CHECK;

/* The walk ended at a missing predecessor, not at a REBASE base. */
static inline bool ws_chain_truncated(const struct ws_chain *c)
{
	return c->count > 0 && c->m[0].kind != WS_MANIFEST_REBASE;
}
/* WS_EINCOMPLETE naming tenant's missing manifest key (the error recorded). */
int ws_chain_missing(const char *tenant, const char *key);
/* The first object key m names outside "<m->tenant>/" (a foreign object),
 * or NULL: readers refuse such a manifest, retention deletes none of its
 * objects. */
const char *ws_manifest_foreign_ref(const struct ws_fmt_manifest *m);
/* Whether key lies under "<tenant>/". */
bool ws_key_in_tenant(const char *tenant, const char *key);

#endif
