/*
 * Checkpoint decision store: durable, CAS-decided checkpoint metadata on an
 * object store (the C port of the seed CheckpointDecisionStore). The durable
 * objects, byte by byte, and the convergence rules are docs/CHECKPOINTS.md.
 *
 * Every object lives under "checkpoints/" at the root of the sink, so
 * "checkpoints" is a reserved name that no tenant may take. Every object is
 * canonical JSON (keys sorted, no whitespace) with a "format" field naming
 * it and its version and a "deployment" field naming the namespace's
 * incarnation; anything else is WS_EFORMAT naming the key.
 *
 * Two authorities:
 *   shared (ws_ckpt_open_shared)  any ws_store with native conditional
 *       writes (s3, or file between processes); IDs advance one at a time by
 *       compare-and-swap. A store that ignores conditions is refused.
 *   local (ws_ckpt_open_local)    a certified single writer over a local
 *       directory, holding an exclusive flock lease for its lifetime; IDs are
 *       reserved durably WS_CKPT_LOCAL_ID_RANGE at a time and the unused rest
 *       of a range is burned by the next open, so no ID is handed out twice.
 *
 * Errors: every function returns 0 or a negative code (ws_err.h) and records
 * a detail (ws_errmsg()). Because many distinct protocol outcomes share a
 * code, every call also sets a per-thread kind, ws_ckpt_last_kind(), which
 * tells them apart (a different active attempt, a reused terminal attempt, a
 * conflicting body, a stale epoch, a forked predecessor, ...). Results that
 * are not errors (an identical retry converging, a durable winner returned)
 * carry their kind in the result struct as well.
 *
 * A handle is not thread-safe; use one per thread (or lock around it).
 */
#ifndef WS_CKPT_H
#define WS_CKPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ws_fail.h"
#include "ws_hash.h"
#include "ws_store.h"

#define WS_CKPT_PREFIX "checkpoints"
#define WS_CKPT_DEPLOYMENT_LEN 32        /* hex chars of a deployment id */
#define WS_CKPT_LOCAL_ID_RANGE 64u       /* IDs the local writer reserves per CAS */
#define WS_CKPT_ID_MAX (UINT64_MAX - 1)  /* the allocator's durable next must fit a u64 */
#define WS_CKPT_NAME_MAX 128u            /* pipeline identity / sink name, incl. NUL */
#define WS_CKPT_SINKS_MAX 256u
#define WS_CKPT_TENANTS_MAX 1000000u
#define WS_CKPT_ARTIFACTS_MAX 1000000u
#define WS_CKPT_INDEX_BYTES_MAX ((size_t)256 << 20)
#define WS_CKPT_SINGLETON_BYTES_MAX ((size_t)1 << 20)

/* What happened, per call. Errors map to codes as listed. */
enum ws_ckpt_kind {
	WS_CKPT_OK = 0,                  /* applied */
	WS_CKPT_CONVERGED,               /* an identical retry: the durable state already matched */
	WS_CKPT_STALE_EPOCH,             /* record_outcome: rc 0, winner returned */
	WS_CKPT_CONFLICTING_OUTCOME,     /* record_outcome: rc 0, winner returned; seal: WS_EPRECOND, committed */
	WS_CKPT_STALE_CHECKPOINT,        /* record_outcome: rc 0, a later id already decided */
	WS_CKPT_ACTIVE_ATTEMPT,          /* WS_EPRECOND: a different attempt is active */
	WS_CKPT_TERMINAL_ATTEMPT_REUSED, /* WS_EPRECOND: the attempt already ended */
	WS_CKPT_CONFLICTING_BODY,        /* WS_EPRECOND: the path holds other content */
	WS_CKPT_SEALED,                  /* WS_EPRECOND: the candidate path holds an abort seal */
	WS_CKPT_FORKED_PREDECESSOR,      /* WS_EPRECOND: Commit does not extend the latest Commit */
	WS_CKPT_STALE_CUT,               /* WS_EPRECOND: retention for a cut that is not the latest Commit */
	WS_CKPT_STATE_MISMATCH,          /* WS_EPRECOND: durable state differs from the expected one */
	WS_CKPT_CLUSTER_AUTHORITY,       /* WS_ECONFIG: cluster scope needs a cluster authority */
	WS_CKPT_INVALID_INPUT,           /* WS_ECONFIG: the caller's argument breaks an invariant */
	WS_CKPT_FOREIGN,                 /* WS_EFORMAT: another deployment's or authority's object */
	WS_CKPT_MALFORMED,               /* WS_EFORMAT/WS_ECORRUPT: not a valid object of ours */
	WS_CKPT_REF_MISMATCH,            /* WS_ECORRUPT: length or hash differs from the reference */
	WS_CKPT_MISSING,                 /* WS_ENOTFOUND */
	WS_CKPT_EXHAUSTED,               /* WS_ETOOBIG: the u64 ID space is used up */
	WS_CKPT_NO_CONDITIONAL,          /* WS_ECONFIG: the shared store ignores conditional writes */
	WS_CKPT_LEASE_HELD,              /* WS_EFENCED: another local writer holds the lease */
	WS_CKPT_IO,                      /* anything the object store returned */
};

/* The kind of the last ws_ckpt_* call on this thread. */
enum ws_ckpt_kind ws_ckpt_last_kind(void);
const char *ws_ckpt_kind_name(enum ws_ckpt_kind k);

enum ws_ckpt_scope { WS_CKPT_SCOPE_LOCAL = 0, WS_CKPT_SCOPE_CLUSTER = 1 };
enum ws_ckpt_verdict { WS_CKPT_ABORT = 0, WS_CKPT_COMMIT = 1 };

/* Proofs a cluster-scope decision needs; this store decides local scope only. */
struct ws_ckpt_leader_proof {
	uint64_t term;
	uint64_t leader_id;
};
struct ws_ckpt_assignment_fence {
	uint64_t epoch;
	uint64_t assignment_generation;
};

/* The exact address of one committed index. */
struct ws_ckpt_ref {
	uint64_t id;
	uint64_t length;
	char sha256[WS_SHA256_HEX_LEN + 1];   /* lower-case hex */
	char key[WS_KEY_MAX];                 /* checkpoints/committed/<id16hex>-<sha>.json */
};

struct ws_ckpt_tenant_entry {
	char tenant[128];                     /* ws_tenant_name_valid, never "checkpoints" */
	uint64_t wal_generation;
	uint64_t last_frame;
	char manifest_key[WS_KEY_MAX];
	char manifest_sha256[WS_SHA256_HEX_LEN + 1];
	uint64_t manifest_length;
};

struct ws_ckpt_artifact {
	char key[WS_KEY_MAX];
	uint64_t length;
	char sha256[WS_SHA256_HEX_LEN + 1];
};

/*
 * A committed checkpoint index. Invariants: deployment is this store's,
 * 1 <= checkpoint_id <= WS_CKPT_ID_MAX, tenants strictly sorted by name,
 * artifacts strictly sorted by key, every key valid, predecessor (if any)
 * has a smaller id.
 */
struct ws_ckpt_index {
	char deployment[WS_CKPT_DEPLOYMENT_LEN + 1];
	uint64_t checkpoint_id;
	uint64_t epoch;
	size_t tenant_count;
	struct ws_ckpt_tenant_entry *tenants;
	size_t artifact_count;
	struct ws_ckpt_artifact *artifacts;
	bool has_predecessor;
	struct ws_ckpt_ref predecessor;
};
/* Frees what ws_ckpt_load_committed allocated inside idx. */
void ws_ckpt_index_free(struct ws_ckpt_index *idx);

struct ws_ckpt_outcome {
	uint64_t checkpoint_id;
	uint64_t epoch;
	enum ws_ckpt_scope scope;
	enum ws_ckpt_verdict verdict;
	bool has_committed;                   /* verdict == COMMIT */
	struct ws_ckpt_ref committed;
};

/* The singleton checkpoints/head. */
struct ws_ckpt_head {
	uint64_t epoch;                       /* highest epoch that decided */
	uint64_t decisions;                   /* CAS generation: decisions recorded */
	struct ws_ckpt_outcome latest_terminal;
	bool has_commit;
	struct ws_ckpt_outcome latest_commit;
};

struct ws_ckpt_record_result {
	enum ws_ckpt_kind kind;               /* OK, CONVERGED, STALE_EPOCH, CONFLICTING_OUTCOME, STALE_CHECKPOINT */
	struct ws_ckpt_outcome winner;        /* the durable latest terminal outcome */
};

struct ws_ckpt_attempt {
	uint64_t checkpoint_id;
	uint64_t epoch;
	uint64_t token;                       /* unique per attempt, non-zero */
};

/* One local attempt's artifacts, admitted before any is written. */
struct ws_ckpt_inventory {
	char deployment[WS_CKPT_DEPLOYMENT_LEN + 1];
	enum ws_ckpt_scope scope;
	struct ws_ckpt_attempt attempt;
	size_t key_count;
	char (*keys)[WS_KEY_MAX];             /* strictly sorted, valid keys */
};

struct ws_ckpt_inventory_result {
	enum ws_ckpt_kind kind;               /* OK or CONVERGED */
	bool active;                          /* the durable inventory now holds an attempt */
	struct ws_ckpt_attempt attempt;       /* the active or the last completed attempt */
};

enum ws_ckpt_retention_phase {
	WS_CKPT_RET_IDLE = 0,                 /* no run in flight */
	WS_CKPT_RET_SWEEP_ARTIFACTS = 1,      /* deleting artifacts not reachable from the cut */
	WS_CKPT_RET_SWEEP_INDEXES = 2,        /* deleting committed indexes older than the cut */
};

struct ws_ckpt_retention {
	enum ws_ckpt_retention_phase phase;
	uint64_t generation;                  /* bumps on every transition */
	struct ws_ckpt_ref protected_ref;     /* the cut being kept */
	/* The oldest checkpoint kept, older than protected_ref: the sweeps run
	 * for it, and every checkpoint from it on stays (absent: the run keeps
	 * protected_ref alone). Readers hide what is older than it. */
	bool has_kept;
	struct ws_ckpt_ref kept_ref;
};

struct ws_ckpt_retention_result {
	enum ws_ckpt_kind kind;               /* OK or CONVERGED */
	struct ws_ckpt_retention state;       /* the durable state after the call */
};

enum ws_ckpt_witness_state { WS_CKPT_WITNESS_OPEN = 0, WS_CKPT_WITNESS_CLOSED = 1 };

struct ws_ckpt_witness {
	enum ws_ckpt_witness_state state;
	uint64_t sequence;                    /* bumps on every open */
	char pipeline[WS_CKPT_NAME_MAX];      /* pipeline identity */
	uint64_t participant_id;
	struct ws_ckpt_attempt attempt;
	size_t sink_count;
	char sinks[WS_CKPT_SINKS_MAX][WS_CKPT_NAME_MAX];
};

struct ws_ckpt;

/*
 * Wrap shared storage. s stays the caller's and must outlive the handle.
 * Unless flags has WS_CKPT_TRUST_CONDITIONAL, a probe proves the store honours
 * create-once and compare-and-swap (two creates of one probe key, a CAS with
 * a wrong etag; both must lose) and removes the probe key.
 * Errors: WS_ECONFIG (NO_CONDITIONAL), -ENOMEM, store I/O.
 */
#define WS_CKPT_TRUST_CONDITIONAL 1u
struct ws_ckpt *ws_ckpt_open_shared(struct ws_store *s, unsigned flags, int *err);

/*
 * Open crash-durable metadata in a caller-owned local directory (created if
 * needed) for a certified single writer: takes an exclusive flock lease on
 * <root>/.lock.ckpt-lease, held until ws_ckpt_close.
 * Errors: WS_EFENCED (LEASE_HELD), WS_ECONFIG (relative root), I/O errors.
 */
struct ws_ckpt *ws_ckpt_open_local(const char *root, int *err);

/*
 * A read-only handle on the namespace at s (either authority): no lease, no
 * probe, every write refused (WS_ECONFIG, INVALID_INPUT). Readers (restore,
 * verify, ls) use it so that a writer holding the local lease never makes
 * them wait or fail: every object they read is create-once or replaced by
 * one atomic write, so a reader sees either state, never half of one.
 */
struct ws_ckpt *ws_ckpt_open_reader(struct ws_store *s, int *err);

/* Releases the lease (local) and closes the store only if the handle opened it. */
void ws_ckpt_close(struct ws_ckpt *c);

/* The store the handle writes through (for tests and tools). */
struct ws_store *ws_ckpt_store(struct ws_ckpt *c);

/*
 * Load the create-once deployment incarnation, creating it when absent; out
 * gets WS_CKPT_DEPLOYMENT_LEN hex chars and a NUL. Concurrent creators
 * converge on the winner. Errors: WS_EFORMAT (MALFORMED, FOREIGN: the other
 * authority's namespace), store I/O.
 */
int ws_ckpt_deployment_id(struct ws_ckpt *c, char out[WS_CKPT_DEPLOYMENT_LEN + 1]) WS_MUST_CHECK;

/*
 * The next globally ordered ID >= minimum (ID 0 is never handed out).
 * Errors: WS_ETOOBIG (EXHAUSTED), WS_EFORMAT, store I/O.
 */
int ws_ckpt_allocate_id_at_least(struct ws_ckpt *c, uint64_t minimum, uint64_t *out) WS_MUST_CHECK;

/*
 * Create the canonical content-addressed body of idx; ref gets its address.
 * Identical retries converge. Errors: WS_ECONFIG (INVALID_INPUT), WS_EFORMAT
 * (FOREIGN: idx->deployment), WS_EPRECOND (SEALED, CONFLICTING_BODY), I/O.
 */
int ws_ckpt_create_committed(struct ws_ckpt *c, const struct ws_ckpt_index *idx,
			     struct ws_ckpt_ref *ref) WS_MUST_CHECK;

/*
 * Load and verify the exact index ref names (path, recorded and observed
 * length, canonical bytes, SHA-256, deployment, invariants); free with
 * ws_ckpt_index_free. Errors: WS_ENOTFOUND (MISSING), WS_EPRECOND (SEALED),
 * WS_ECORRUPT (REF_MISMATCH), WS_EFORMAT (MALFORMED, FOREIGN), I/O.
 */
int ws_ckpt_load_committed(struct ws_ckpt *c, const struct ws_ckpt_ref *ref,
			   struct ws_ckpt_index *out) WS_MUST_CHECK;

/*
 * Replace (or pre-empt) the candidate body of an aborted attempt with a
 * permanent seal at the same path. Identical retries converge. The index a
 * Commit names (the head's latest Commit or one on its chain) is never
 * sealed.
 * Errors: WS_ECONFIG, WS_EFORMAT (FOREIGN), WS_EPRECOND (CONFLICTING_BODY;
 * CONFLICTING_OUTCOME: the candidate is committed), I/O.
 */
int ws_ckpt_seal_aborted_candidate(struct ws_ckpt *c, const struct ws_ckpt_index *idx) WS_MUST_CHECK;

/*
 * Delete the exact committed index ref names, after validating the body
 * there. A missing object is success. A seal at ref's path is refused and
 * stays (it occupies an aborted candidate's path for good, so a create of
 * the candidate still in flight loses to it).
 * Errors: WS_ECONFIG, WS_EPRECOND (SEALED), WS_ECORRUPT/WS_EFORMAT (the body
 * is not ref's), I/O.
 */
int ws_ckpt_delete_committed(struct ws_ckpt *c, const struct ws_ckpt_ref *ref) WS_MUST_CHECK;

/*
 * Durably admit one local attempt before any of its artifacts is written.
 * Errors: WS_EPRECOND (ACTIVE_ATTEMPT, TERMINAL_ATTEMPT_REUSED), WS_ECONFIG
 * (CLUSTER_AUTHORITY, INVALID_INPUT), WS_EFORMAT (FOREIGN, MALFORMED), I/O.
 */
int ws_ckpt_begin_inventory(struct ws_ckpt *c, const struct ws_ckpt_inventory *inv,
			    struct ws_ckpt_inventory_result *res) WS_MUST_CHECK;
/* Clear exactly expected once its Abort paths are sealed. Errors as above, plus STATE_MISMATCH. */
int ws_ckpt_complete_inventory(struct ws_ckpt *c, const struct ws_ckpt_inventory *expected,
			       struct ws_ckpt_inventory_result *res) WS_MUST_CHECK;
/*
 * The active attempt of checkpoints/inventory, decoded as strictly as every
 * object here (one GET, never a listing): *active false (rc 0) when the
 * object is absent or holds no active attempt. inv->deployment is this
 * store's, inv->scope local; free inv->keys with ws_ckpt_inventory_free.
 * Errors: WS_EFORMAT (MALFORMED, FOREIGN; the detail names the object),
 * -ENOMEM, I/O.
 */
int ws_ckpt_active_inventory(struct ws_ckpt *c, struct ws_ckpt_inventory *inv, bool *active) WS_MUST_CHECK;
/* Frees the keys ws_ckpt_active_inventory allocated; inv may be zeroed. */
void ws_ckpt_inventory_free(struct ws_ckpt_inventory *inv);
/* One attempt: the same id, epoch and token. */
bool ws_ckpt_attempt_equal(const struct ws_ckpt_attempt *a, const struct ws_ckpt_attempt *b);

/*
 * Each candidate index of checkpoint id stored (checkpoints/committed/
 * <id:016x>-<sha>.json, a body or a seal): fn gets the ref the listing
 * names (length as listed, hash as the key spells it; ws_ckpt_load_committed
 * checks both), and its non-zero return ends the walk and is returned.
 * Errors: those of ws_store_list, or fn's.
 */
typedef int (*ws_ckpt_ref_fn)(const struct ws_ckpt_ref *ref, void *arg);
int ws_ckpt_list_candidates(struct ws_ckpt *c, uint64_t id, ws_ckpt_ref_fn fn, void *arg) WS_MUST_CHECK;

/*
 * Publish the terminal outcome of checkpoint_id: the CAS of checkpoints/head
 * is the decision. Equal retries converge (CONVERGED), a Commit's even after
 * a later decision while it is on the committed chain; a stale epoch, an
 * older checkpoint or a conflicting outcome return rc 0 with the durable
 * winner and their kind in res. committed must be given exactly for COMMIT;
 * its index is loaded and verified, must carry epoch and id, and must name
 * the latest Commit as predecessor.
 * Errors: WS_ECONFIG (CLUSTER_AUTHORITY, INVALID_INPUT), WS_EPRECOND
 * (FORKED_PREDECESSOR), the errors of ws_ckpt_load_committed, WS_EFORMAT, I/O.
 */
int ws_ckpt_record_outcome(struct ws_ckpt *c, uint64_t epoch, uint64_t checkpoint_id,
			   enum ws_ckpt_scope scope, const struct ws_ckpt_assignment_fence *fence,
			   const struct ws_ckpt_leader_proof *proof, enum ws_ckpt_verdict verdict,
			   const struct ws_ckpt_ref *committed,
			   struct ws_ckpt_record_result *res) WS_MUST_CHECK;

/* One GET of checkpoints/head, never a listing. *found false: nothing decided yet. */
int ws_ckpt_decision_head(struct ws_ckpt *c, struct ws_ckpt_head *out, bool *found) WS_MUST_CHECK;
int ws_ckpt_latest_terminal(struct ws_ckpt *c, struct ws_ckpt_outcome *out, bool *found) WS_MUST_CHECK;
int ws_ckpt_latest_commit(struct ws_ckpt *c, struct ws_ckpt_outcome *out, bool *found) WS_MUST_CHECK;

/*
 * Start (or resume) retention protecting the latest Commit.
 * Errors: WS_EPRECOND (STALE_CUT, STATE_MISMATCH: another run in flight), the
 * errors of ws_ckpt_load_committed (the cut, and each index of its chain
 * back to the oldest kept), WS_ECONFIG (INVALID_INPUT: kept is not on the
 * cut's chain), WS_EFORMAT, I/O.
 */
int ws_ckpt_begin_retention(struct ws_ckpt *c, const struct ws_ckpt_ref *protected_ref,
			    struct ws_ckpt_retention_result *res) WS_MUST_CHECK;
/*
 * The same, keeping every checkpoint from kept (older than protected_ref,
 * on its chain of predecessors, each index from protected_ref to kept
 * stored and verified; NULL or protected_ref itself: none older). A run
 * for the same cut and kept resumes (or is done); for the same cut and
 * another kept, a finished run is followed by a new one.
 */
int ws_ckpt_begin_retention_keep(struct ws_ckpt *c, const struct ws_ckpt_ref *protected_ref,
				 const struct ws_ckpt_ref *kept, struct ws_ckpt_retention_result *res) WS_MUST_CHECK;
/* Advance one phase by CAS from exactly expected. Errors: WS_ECONFIG (idle or invalid), WS_EPRECOND, I/O. */
int ws_ckpt_advance_retention(struct ws_ckpt *c, const struct ws_ckpt_retention *expected,
			      struct ws_ckpt_retention_result *res) WS_MUST_CHECK;
int ws_ckpt_retention_state(struct ws_ckpt *c, struct ws_ckpt_retention *out, bool *found) WS_MUST_CHECK;

/* The singleton sink-open witness (open or closed tombstone). */
int ws_ckpt_sink_open_witness(struct ws_ckpt *c, struct ws_ckpt_witness *out, bool *found) WS_MUST_CHECK;
/*
 * Open the witness before any committable sink begins. sinks: at least one;
 * strictly sorted, unique, non-empty names. Identical retries converge.
 * Errors: WS_ECONFIG (INVALID_INPUT), WS_EPRECOND (ACTIVE_ATTEMPT: another
 * live witness; TERMINAL_ATTEMPT_REUSED: this one was closed), WS_EFORMAT, I/O.
 */
int ws_ckpt_create_sink_open_witness(struct ws_ckpt *c, const char *pipeline, uint64_t participant_id,
				     const struct ws_ckpt_attempt *attempt, const char *const *sinks,
				     size_t sink_count, struct ws_ckpt_witness *out) WS_MUST_CHECK;
/*
 * Close exactly expected into a tombstone, once its attempt is terminal (the
 * head decided it or a later checkpoint, or decides at a higher epoch).
 * Errors: WS_EPRECOND (STATE_MISMATCH: another witness, or the attempt is not
 * terminal), WS_ENOTFOUND, WS_EFORMAT, I/O.
 */
int ws_ckpt_clear_sink_open_witness(struct ws_ckpt *c, const struct ws_ckpt_witness *expected) WS_MUST_CHECK;

/*
 * Tenants removed for good (checkpoints/removed/<tenant>, docs/CHECKPOINTS.md
 * "Removing a tenant"): record that tenant was removed while checkpoint
 * `after` was the latest Commit (0: none yet). A record with an equal or
 * later `after` stays (CONVERGED); an earlier one is replaced by CAS.
 * Errors: WS_ECONFIG (INVALID_INPUT: not a tenant name, a reader), WS_EFORMAT
 * (the record there is malformed or foreign), I/O.
 */
#define WS_CKPT_REMOVED_PREFIX WS_CKPT_PREFIX "/removed/"
int ws_ckpt_record_removed(struct ws_ckpt *c, const char *tenant, uint64_t after) WS_MUST_CHECK;
/* The removal record of tenant (one GET): *found, and *after its checkpoint. Errors as above. */
int ws_ckpt_removed(struct ws_ckpt *c, const char *tenant, bool *found, uint64_t *after) WS_MUST_CHECK;

/* The committed index key for (id, sha256 hex) into out (WS_KEY_MAX). */
void ws_ckpt_committed_key(uint64_t id, const char *sha256_hex, char *out);
/* The id (never 0) and SHA-256 a checkpoints/committed/<16 hex>-<64 hex>.json key spells; false for any other key. */
bool ws_ckpt_committed_key_parse(const char *key, uint64_t *id, char sha[WS_SHA256_HEX_LEN + 1]);

/*
 * Rebuild checkpoints/inventory or checkpoints/witness when the object there
 * does not decode (docs/CHECKPOINTS.md "Damaged control objects"): one CAS
 * against the damaged bytes. An absent or valid object is left as it is
 * (*rebuilt false, CONVERGED). The inventory: active (may be NULL: idle)
 * and last_completed (may be NULL). The witness: closed as given, its
 * sequence the deployment's next_id (above every sequence ever written).
 * A writer that moved meanwhile: WS_EPRECOND (STATE_MISMATCH).
 */
int ws_ckpt_rebuild_inventory(struct ws_ckpt *c, const struct ws_ckpt_inventory *active,
			      const struct ws_ckpt_attempt *last_completed, bool *rebuilt) WS_MUST_CHECK;
int ws_ckpt_rebuild_witness(struct ws_ckpt *c, const struct ws_ckpt_witness *closed, bool *rebuilt) WS_MUST_CHECK;
/*
 * Rebuild checkpoints/retention the same way: idle, protecting and keeping
 * what idle names, its generation above any a sink reached (the wall clock
 * in ms).
 */
int ws_ckpt_rebuild_retention(struct ws_ckpt *c, const struct ws_ckpt_retention *idle, bool *rebuilt) WS_MUST_CHECK;

/*
 * What one checkpoint object holds, read without trusting the deployment
 * record (store/ckpt_repair.c): how `walship repair` derives
 * checkpoints/deployment and checkpoints/head from the rest of the sink
 * (docs/CHECKPOINTS.md "Damaged control objects"), and how verify and the
 * walks tell a seal from a damaged committed/ object.
 */
enum ws_ckpt_peek_kind {
	WS_CKPT_PEEK_ABSENT = 0,     /* no object at the key */
	WS_CKPT_PEEK_DAMAGED,        /* there, and not the object of ours its key names (detail says why) */
	WS_CKPT_PEEK_DEPLOYMENT,
	WS_CKPT_PEEK_HEAD,
	WS_CKPT_PEEK_INVENTORY,
	WS_CKPT_PEEK_RETENTION,
	WS_CKPT_PEEK_WITNESS,
	WS_CKPT_PEEK_INDEX,          /* committed/: the index its name names (id and SHA-256) */
	WS_CKPT_PEEK_SEAL,           /* committed/: the seal of the candidate its name names */
	WS_CKPT_PEEK_REMOVED,
	WS_CKPT_PEEK_OTHER,          /* a key that holds no record (artifacts, probes, foreign): not read */
};

struct ws_ckpt_peek {
	enum ws_ckpt_peek_kind kind;
	struct ws_etag etag;                         /* of the bytes read (not ABSENT/OTHER) */
	char deployment[WS_CKPT_DEPLOYMENT_LEN + 1]; /* the one it carries; "" when none */
	uint64_t id_max;          /* the highest checkpoint ID (or witness sequence) it names; 0: none */
	uint64_t epoch_max;       /* the highest epoch it names; 0: none */
	/* DEPLOYMENT */
	bool local;
	uint64_t next_id;
	/* HEAD */
	struct ws_ckpt_head head;
	/* WITNESS: its attempt and state; INVENTORY: the active attempt (has_attempt) and the last completed */
	bool witness_open;
	bool has_attempt;
	struct ws_ckpt_attempt attempt;
	bool has_completed;
	struct ws_ckpt_attempt completed;
	/* INDEX, SEAL: the reference of the index (a seal's: its candidate's); INDEX: its epoch.
	 * DAMAGED at a committed/ key: the id, SHA-256 and key its name spells, the length stored. */
	struct ws_ckpt_ref ref;
	uint64_t epoch;
	char detail[512];                            /* DAMAGED: why */
};

/*
 * GET key and decode it as the object its key names (deployment, head,
 * inventory, retention, witness, committed/<id>-<sha>.json as an index or
 * a seal, removed/<tenant>), strictly, as every reader does. dep: the
 * deployment it must carry (NULL: any, the one it carries goes to out); one
 * of another deployment is DAMAGED. A key that names no record is OTHER and
 * is not read. Errors: the store's (a damaged object is rc 0, DAMAGED),
 * -ENOMEM.
 */
int ws_ckpt_peek(struct ws_ckpt *c, const char *key, const char *dep, struct ws_ckpt_peek *out) WS_MUST_CHECK;

/*
 * Replace an undecodable checkpoints/deployment (was: as ws_ckpt_peek read
 * it, DAMAGED, compare-and-swap against its etag; ABSENT, create-once) with
 * deployment dep, next_id, the authority of this handle's kind. Replace an
 * undecodable or lost checkpoints/head the same way with h (its invariants
 * checked by decoding what is written; the deployment record must decode).
 * A valid object is never touched (was of its kind: WS_ECONFIG,
 * INVALID_INPUT). Errors: WS_EPRECOND (STATE_MISMATCH: the object changed
 * since was was read), WS_ECONFIG (INVALID_INPUT, a reader), I/O.
 * Fault site ckpt.repair.before_put, before the write.
 */
int ws_ckpt_repair_deployment(struct ws_ckpt *c, const struct ws_ckpt_peek *was, const char *dep,
			      uint64_t next_id) WS_MUST_CHECK;
int ws_ckpt_repair_head(struct ws_ckpt *c, const struct ws_ckpt_peek *was, const struct ws_ckpt_head *h) WS_MUST_CHECK;

/* Whether this handle writes as the local (single-writer) authority. */
bool ws_ckpt_is_local(const struct ws_ckpt *c);

#endif
