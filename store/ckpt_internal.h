/* Checkpoint decision store internals shared by ckpt.c (protocol) and ckpt_json.c (objects). */
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

/* Why idx breaks a committed-index invariant (into why), or NULL when it is valid. */
const char *ckpt_index_invalid(const struct ws_ckpt_index *idx, char *why, size_t cap);
bool ckpt_parse_u64(const char *s, size_t n, uint64_t *out);
bool ckpt_hex_ok(const char *s, size_t n);
bool ckpt_ref_shape_ok(const struct ws_ckpt_ref *r);
bool ckpt_name_ok(const char *s);
bool ckpt_ref_equal(const struct ws_ckpt_ref *a, const struct ws_ckpt_ref *b);
bool ckpt_outcome_equal(const struct ws_ckpt_outcome *a, const struct ws_ckpt_outcome *b);
bool ckpt_attempt_ok(const struct ws_ckpt_attempt *a);

#endif
