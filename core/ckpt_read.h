/*
 * Reading a sink's checkpoints (ckpt_read.c): the only checkpoint file the
 * readers (restore, verify, ls) depend on.
 */
#ifndef WS_CORE_CKPT_READ_H
#define WS_CORE_CKPT_READ_H

#include "core_internal.h"
#include "ws_ckpt.h"

/*
 * The latest Commit's base for tenant: its cut manifest and
 * artifact. WS_ENOTFOUND when there is no Commit or it does not name the
 * tenant; other errors when the metadata cannot be read.
 */
int ws_checkpoint_base_for(struct ws_sink *sink, const char *tenant, struct ws_restore_base *out) WS_MUST_CHECK;

/*
 * The bases of every stored committed checkpoint that names tenant, newest
 * first (*out malloc'd, *count may be 0). WS_ENOTFOUND when nothing is
 * decided at the sink.
 */
int ws_checkpoint_bases_for(struct ws_sink *sink, const char *tenant, struct ws_restore_base **out,
			    size_t *count) WS_MUST_CHECK;

/*
 * verify's part for checkpoints: checkpoints/head present when committed
 * indexes are; the latest Commit loads; each tenant it names (only: just
 * that one) still has a readable watermark, and its artifact matches its
 * length and SHA-256 and passes PRAGMA integrity_check. Each problem goes
 * to fn; returns the first error. *verified_id: the Commit whose artifacts
 * were checked (0: none).
 */
int ws_checkpoint_verify(struct ws_sink *sink, const char *only, ws_problem_fn fn, void *arg,
			 uint64_t *verified_id) WS_MUST_CHECK;

/*
 * The cut of tenant in the checkpoint the latest retention run protected
 * (checkpoints/retention): history behind it may be gone by retention's
 * doing, history in front of it never. WS_ENOTFOUND when no run protected
 * a checkpoint that names tenant.
 */
int ws_checkpoint_retained_cut(struct ws_sink *sink, const char *tenant, struct ws_chain_stop *cut,
			       uint64_t *id) WS_MUST_CHECK;

/* ---- what the taking side, retention and verify --orphans share ---- */

#define WS_CKPT_ART_PREFIX WS_CKPT_PREFIX "/artifacts"
#define WS_CKPT_HEAD_KEY WS_CKPT_PREFIX "/head"
#define WS_CKPT_LEASE_WAIT_MS 5000u      /* a writer's wait for the file:// lease */
#define WS_CKPT_PREDECESSORS_MAX 1000000u

/*
 * The decision store of the sink. A writer of a file:// sink holds the local
 * lease for one call; wait up to wait_ms for it. A reader never takes it.
 */
int ws_ckread_open(struct ws_sink *sink, bool writer, unsigned wait_ms, struct ws_ckpt **out) WS_MUST_CHECK;

void ws_ckread_hex_of(const uint8_t *sha, char out[WS_SHA256_HEX_LEN + 1]);
/* false: hex is not WS_SHA256_LEN bytes of hex. */
bool ws_ckread_hex_to_sha(const char *hex, uint8_t out[WS_SHA256_LEN]);
/* checkpoints/artifacts/<id:016x>/<tenant> */
void ws_ckread_artifact_key(char out[WS_KEY_MAX], uint64_t id, const char *tenant);
/* Whether key has the form ws_ckread_artifact_key gives checkpoint id's artifacts. */
bool ws_ckread_artifact_key_of(const char *key, uint64_t id);
/*
 * Each artifact key stored under checkpoint id (one LIST of its prefix, only
 * keys ws_ckread_artifact_key_of accepts): what a damaged index named, or a
 * crashed attempt wrote. fn's non-zero return ends it.
 */
int ws_ckread_each_artifact(struct ws_store *s, uint64_t id, int (*fn)(const char *key, void *arg), void *arg)
	WS_MUST_CHECK;
/* The order of an index's tenant entries (by name). */
int ws_ckread_tenant_cmp(const void *a, const void *b);
/* An index's entry for tenant or artifact key, or NULL. */
const struct ws_ckpt_tenant_entry *ws_ckread_index_tenant(const struct ws_ckpt_index *idx, const char *tenant);
const struct ws_ckpt_artifact *ws_ckread_index_artifact(const struct ws_ckpt_index *idx, const char *key);
/* The base restore needs for tenant from a loaded index: its cut and artifact. */
int ws_ckread_base_from_index(const struct ws_ckpt_index *idx, const char *tenant,
			      struct ws_restore_base *out) WS_MUST_CHECK;
void ws_ckread_info_from(const struct ws_ckpt_ref *ref, const struct ws_ckpt_index *idx, bool own,
			 struct ws_checkpoint_info *out);
/* Tenant entry t's cut manifest (a hash that is not hex never matches). */
void ws_ckread_cut_of(const struct ws_ckpt_tenant_entry *t, struct ws_chain_stop *out);
/* The ref and loaded index of checkpoint id (0: the latest Commit), walking predecessors. */
int ws_ckread_find_ref(struct ws_ckpt *c, uint64_t id, struct ws_ckpt_ref *ref,
		       struct ws_ckpt_index *idx) WS_MUST_CHECK;

/*
 * The walk of the committed checkpoints, newest first: fn for each index
 * that loads, dfn (may be NULL) for each damaged or missing one, which the
 * walk goes past (the next older found by one LIST of
 * checkpoints/committed/, only then). It ends at the oldest stored, or at
 * a missing index older than what the last retention run kept. A non-zero
 * return of fn or dfn ends it and is returned; so is the store's error.
 */
typedef int (*ws_committed_fn)(const struct ws_ckpt_ref *ref, const struct ws_ckpt_index *idx, void *arg);
typedef int (*ws_damaged_fn)(const struct ws_ckpt_ref *ref, const char *detail, void *arg);
int ws_ckread_walk_past(struct ws_ckpt *c, struct ws_ckpt_ref ref, ws_committed_fn fn, ws_damaged_fn dfn,
			void *arg) WS_MUST_CHECK;
/*
 * The same walk down to the oldest index stored, not bounded by what the
 * last retention run kept: retention's own, which removes what is older.
 */
int ws_ckread_walk_stored(struct ws_ckpt *c, struct ws_ckpt_ref ref, ws_committed_fn fn, ws_damaged_fn dfn,
			  void *arg) WS_MUST_CHECK;
/* The walk without dfn. quiet: a store error ends it too, returning 0. */
int ws_ckread_walk_committed(struct ws_ckpt *c, struct ws_ckpt_ref ref, bool quiet, ws_committed_fn fn,
			     void *arg) WS_MUST_CHECK;
/*
 * Whether a load error (rc, and the kind ws_ckpt_last_kind() gave right
 * after it) says the index itself is damaged or missing, not the store
 * failing.
 */
bool ws_ckread_damaged(int rc, enum ws_ckpt_kind kind);
/*
 * checkpoints/head is absent (the caller read so): 0 when nothing was
 * decided (no committed/ object, or only the candidate of the attempt the
 * open witness names: the sink's first checkpoint between its candidate
 * and its decision), else WS_EINCOMPLETE naming the lost head and the
 * command that rebuilds it (`walship repair`). One LIST of at most two keys.
 */
int ws_ckread_head_lost(struct ws_ckpt *c) WS_MUST_CHECK;
/* Room for one more element in a growing array (*cap elements of elem bytes). */
int ws_ckread_grow(void **arr, size_t *cap, size_t count, size_t elem) WS_MUST_CHECK;
/* Tenant t was removed for good (walship forget) while checkpoint id or a later one was the latest Commit. */
bool ws_ckread_removed_since(struct ws_ckpt *c, const char *t, uint64_t id);
/* Checkpoints older than *below are being removed by retention (0: none). */
int ws_ckread_retiring_below(struct ws_ckpt *c, uint64_t *below) WS_MUST_CHECK;

#endif
