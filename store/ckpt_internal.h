/* Checkpoint decision store internals shared by ckpt.c (protocol), ckpt_index.c and ckpt_records.c
 * (over it) and ckpt_json.c (objects). */
#ifndef WS_CKPT_INTERNAL_H
#define WS_CKPT_INTERNAL_H

#include <jansson.h>

#include "ws_ckpt.h"

#define CKPT_FMT_DEPLOYMENT "walship.ckpt.deployment.v1"
#define CKPT_FMT_INDEX "walship.ckpt.committed.v1"
#define CKPT_FMT_SEAL "walship.ckpt.sealed.v1"
#define CKPT_FMT_HEAD "walship.ckpt.head.v1"
#define CKPT_FMT_INVENTORY "walship.ckpt.inventory.v1"
#define CKPT_FMT_RETENTION "walship.ckpt.retention.v1"
#define CKPT_FMT_WITNESS "walship.ckpt.witness.v1"
#define CKPT_FMT_REMOVED "walship.ckpt.removed.v1"

/* checkpoints/deployment */
struct ckpt_deployment {
	char id[WS_CKPT_DEPLOYMENT_LEN + 1];
	bool local;          /* authority: "local" or "shared" */
	uint64_t next_id;    /* lowest ID never handed out nor reserved; UINT64_MAX = exhausted */
};

/* checkpoints/inventory */
struct ckpt_inventory_rec {
	bool active;
	struct ws_ckpt_inventory inv;     /* when active; keys malloc'd */
	bool has_completed;
	struct ws_ckpt_attempt completed; /* the last attempt whose cleanup completed */
};

/* The body a seal puts at an aborted candidate's path. */
struct ckpt_seal {
	uint64_t checkpoint_id;
	uint64_t length;
	char sha256[WS_SHA256_HEX_LEN + 1];
};

void ckpt_kind_set(enum ws_ckpt_kind k);
/* ws_fail(code, ...) and set the thread's kind; returns code. */
int ckpt_fail(enum ws_ckpt_kind k, int code, const char *fmt, ...) WS_PRINTF(3, 4);

/* Canonical encoders: malloc'd bytes (no NUL counted in *len), NULL = -ENOMEM. */
char *ckpt_enc_index(const struct ws_ckpt_index *idx, size_t *len);
char *ckpt_enc_seal(const char *dep, uint64_t id, const char *sha, uint64_t length, size_t *len);
char *ckpt_enc_deployment(const struct ckpt_deployment *d, size_t *len);
char *ckpt_enc_head(const char *dep, const struct ws_ckpt_head *h, size_t *len);
char *ckpt_enc_inventory(const char *dep, const struct ckpt_inventory_rec *r, size_t *len);
char *ckpt_enc_retention(const char *dep, const struct ws_ckpt_retention *r, size_t *len);
char *ckpt_enc_witness(const char *dep, const struct ws_ckpt_witness *w, size_t *len);
char *ckpt_enc_removed(const char *dep, const char *tenant, uint64_t after, size_t *len);

/*
 * Strict decoders of the object at key. dep: the deployment the object must
 * carry (NULL: any). Errors: WS_EFORMAT (MALFORMED, FOREIGN), -ENOMEM.
 */
int ckpt_dec_deployment(const char *key, const uint8_t *data, size_t len, struct ckpt_deployment *d);
int ckpt_dec_index(const char *key, const uint8_t *data, size_t len, const char *dep, struct ws_ckpt_index *idx);
int ckpt_dec_seal(const char *key, const uint8_t *data, size_t len, const char *dep, struct ckpt_seal *s);
int ckpt_dec_head(const char *key, const uint8_t *data, size_t len, const char *dep, struct ws_ckpt_head *h);
int ckpt_dec_inventory(const char *key, const uint8_t *data, size_t len, const char *dep,
		       struct ckpt_inventory_rec *r);
int ckpt_dec_retention(const char *key, const uint8_t *data, size_t len, const char *dep,
		       struct ws_ckpt_retention *r);
int ckpt_dec_witness(const char *key, const uint8_t *data, size_t len, const char *dep, struct ws_ckpt_witness *w);
bool ckpt_is_seal(const uint8_t *data, size_t len);
/* checkpoints/removed/<tenant>: it must name tenant; *after its checkpoint. */
int ckpt_dec_removed(const char *key, const uint8_t *data, size_t len, const char *dep, const char *tenant,
		     uint64_t *after);

/* Why idx breaks a committed-index invariant (into why), or NULL when it is valid. */
const char *ckpt_index_invalid(const struct ws_ckpt_index *idx, char *why, size_t cap);
bool ckpt_parse_u64(const char *s, size_t n, uint64_t *out);
bool ckpt_hex_ok(const char *s, size_t n);
bool ckpt_ref_shape_ok(const struct ws_ckpt_ref *r);
bool ckpt_name_ok(const char *s);
bool ckpt_ref_equal(const struct ws_ckpt_ref *a, const struct ws_ckpt_ref *b);
bool ckpt_outcome_equal(const struct ws_ckpt_outcome *a, const struct ws_ckpt_outcome *b);
bool ckpt_attempt_ok(const struct ws_ckpt_attempt *a);

/* ---- the protocol's shared parts: ckpt.c, for ckpt_index.c and ckpt_records.c ---- */

#define KEY_DEPLOYMENT WS_CKPT_PREFIX "/deployment"
#define KEY_HEAD WS_CKPT_PREFIX "/head"
#define KEY_INVENTORY WS_CKPT_PREFIX "/inventory"
#define KEY_RETENTION WS_CKPT_PREFIX "/retention"
#define KEY_WITNESS WS_CKPT_PREFIX "/witness"
#define KEY_PROBE_DIR WS_CKPT_PREFIX "/probe"
#define RETRY_MAX 256

struct ws_ckpt {
	struct ws_store *s;
	bool owns_store;
	bool local;
	bool reader;         /* ws_ckpt_open_reader: either authority, no writes */
	int lease_fd;
	bool dep_known;
	char dep[WS_CKPT_DEPLOYMENT_LEN + 1];
	/* local: IDs [mem_next, mem_end) are reserved durably and not handed out yet */
	uint64_t mem_next, mem_end;
};

/* The CAS'd singletons, each one fixed key read with one GET (never a listing). */
enum singleton { OBJ_HEAD, OBJ_INVENTORY, OBJ_RETENTION, OBJ_WITNESS };

/*
 * The read-decide-write loop of every singleton update. decide() looks at
 * the state just read into op->cur (absent when !found) and returns 1 with a
 * new body for a conditional write, 0 when the call is done without writing
 * (an identical retry), or an error. A lost condition re-reads and decides
 * again. *wrote tells the caller which way a 0 came.
 */
struct cas_op;
typedef int (*cas_decide_fn)(struct ws_ckpt *c, struct cas_op *op, bool found, char **body, size_t *len);
struct cas_op {
	enum singleton obj;
	const char *site;       /* fault site right before the write */
	void *cur;              /* the state load_singleton fills */
	cas_decide_fn decide;
	const void *in;         /* the call's input */
};

/* ws_fail_wrap(rc) naming the operation and key, kind WS_CKPT_IO. */
int ckpt_io_fail(int rc, const char *op, const char *key);
/* GET key into b (ws_buf_init'd here with max). *found false (rc 0) when the object is absent. */
int ckpt_get_obj(struct ws_ckpt *c, const char *key, size_t max, struct ws_buf *b, struct ws_etag *etag,
		 bool *found);
/* A read-only handle (ws_ckpt_open_reader) never writes: WS_ECONFIG for one, else 0. */
int ckpt_reader_refused(const struct ws_ckpt *c, const char *what);
/* RETRY_MAX compare-and-swaps of key lost in a row: WS_EPRECOND. */
int ckpt_contention(const char *key);
/* Fault site `site` (crash tests): 0, or the error it injects. */
int ckpt_fault(const char *site);
/* Set the kind of a finished update (written, or an identical retry) and pass its after-write site. */
int ckpt_finish(bool wrote, const char *after_site);
/*
 * rc for key (checkpoints/deployment or checkpoints/head) that cannot be
 * decoded, or a lost deployment record: the detail names the object and
 * `walship repair --sink URL`. Any other rc is returned as it is.
 */
int ckpt_repair_hint(struct ws_ckpt *c, int rc, const char *key);
/* The expected deployment for reads: "" (matches nothing) when none exists yet. */
const char *ckpt_dep_or_none(struct ws_ckpt *c);
/* GET and strictly decode one singleton into out (its struct); *found false when absent. */
int ckpt_load_singleton(struct ws_ckpt *c, enum singleton o, void *out, struct ws_etag *etag, bool *found);
/* op's read-decide-write loop, bounded by RETRY_MAX; *wrote: a 0 came from a write. */
int ckpt_cas_loop(struct ws_ckpt *c, struct cas_op *op, bool *wrote);
/* The deployment record, read (or created when create) into c->dep. */
int ckpt_refresh_dep(struct ws_ckpt *c, bool create);
/* The deployment record, created when absent. */
int ckpt_ensure_dep(struct ws_ckpt *c);
/* A public read of one singleton: no deployment record yet means nothing is there. */
int ckpt_read_singleton(struct ws_ckpt *c, enum singleton o, void *out, bool *found);
/* A reference a caller passed in, by its shape and length: 0, or WS_ECONFIG (INVALID_INPUT). */
int ckpt_check_ref_input(const struct ws_ckpt_ref *ref);
/*
 * Is ref a Commit on the committed chain of head h: its latest Commit, or a
 * predecessor reached from it (each index loaded and verified; ids fall at
 * every link, so the walk ends)? A predecessor retention removed ends the
 * walk (*on false). Errors: those of ws_ckpt_load_committed for a link that
 * is there but does not verify. Leaves the thread's kind as it found it.
 */
int ckpt_commit_on_chain(struct ws_ckpt *c, const struct ws_ckpt_head *h, const struct ws_ckpt_ref *ref, bool *on);

#endif
