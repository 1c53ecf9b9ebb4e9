/* A checkpoint's artifact: fetch and verify it (artifact.c). */
#ifndef WS_CORE_ARTIFACT_H
#define WS_CORE_ARTIFACT_H

#include "core_internal.h"
#include "ws_artseal.h"

/*
 * Fetch the artifact base names, verify its length and SHA-256, write it to
 * fd. cut (may be NULL): the cut manifest, whose state the artifact is: its
 * size must be the cut's db_pages x page size, and page 1 must say that
 * page size and page count (an index naming another database's image).
 */
int ws_artifact_fetch(struct ws_store *s, const char *key, uint64_t length, const char *sha256_hex,
		      const struct ws_fmt_manifest *cut, int fd) WS_MUST_CHECK;
/* base's artifact, checked against its cut manifest when that is still stored. */
int ws_artifact_fetch_base(struct ws_store *s, const struct ws_restore_base *base, int fd) WS_MUST_CHECK;

/*
 * Verify base's artifact as verify does: length and SHA-256 against the
 * committed index, and that it opens as a SQLite database with PRAGMA
 * integrity_check ok (in a temporary file, removed). Errors name its key.
 */
int ws_artifact_verify(struct ws_store *s, const struct ws_restore_base *base) WS_MUST_CHECK;

/* ---- sealed artifacts (artifact_seal.c) ---- */

/* The seal each tenant's artifact gets (ws_checkpoint_opts' seal, tenant_seal). */
struct ws_art_tenant_seal {
	char tenant[WS_TENANT_MAX];
	struct ws_seal seal;
	struct ws_keyring keys;
};
struct ws_art_seals {
	struct ws_seal dflt;
	struct ws_keyring keys;          /* dflt's key file's */
	struct ws_art_tenant_seal *t;
	size_t count;
};
/* o's seals resolved (key files loaded, their keys added to sink's). Free
 * with ws_art_seals_free, also after an error (WS_ECONFIG, key files'). */
int ws_art_seals_resolve(struct ws_sink *sink, const struct ws_checkpoint_opts *o,
			 struct ws_art_seals *out) WS_MUST_CHECK;
const struct ws_seal *ws_art_seals_for(const struct ws_art_seals *s, const char *tenant);
void ws_art_seals_free(struct ws_art_seals *s);

/* The version 2 artifact of img (len bytes, SHA-256 sha) sealed with s into
 * a new file at path (removed on error), a chunk in memory at a time. */
int ws_artifact_seal_file(const struct ws_seal *s, const uint8_t *img, size_t len, const uint8_t sha[WS_SHA256_LEN],
			  const char *path) WS_MUST_CHECK;

/*
 * An artifact of either version read as its stored bytes arrive, in order
 * (feed: any split): a version 1 image written to fd as it comes; a version
 * 2 one's chunks each opened (kr's keys) once whole and their plaintext
 * written. Without the key nothing is written and finish, called after the
 * stored bytes' length and SHA-256 are checked, is WS_ENOKEY naming the
 * artifact and key id. head / plain_off: the image's first bytes and length.
 */
struct ws_art_reader {
	const struct ws_keyring *kr;
	const char *key;
	uint64_t length;                 /* the stored object's, as its index records */
	int fd, state;
	struct ws_buf acc;               /* the header, then one chunk's stored bytes */
	size_t want;                     /* what acc must reach */
	struct ws_art_hdr h;
	uint32_t k;                      /* the chunk acc gathers */
	uint8_t *plain;                  /* one chunk's plaintext */
	struct ws_sha256_state sha;      /* of the plaintext */
	bool sha_done;
	uint8_t head[100];
	size_t head_len;
	uint64_t plain_off;
};
int ws_art_reader_init(struct ws_art_reader *r, const struct ws_keyring *kr, const char *key, uint64_t length,
		       int fd) WS_MUST_CHECK;
int ws_art_reader_feed(struct ws_art_reader *r, const uint8_t *p, size_t len) WS_MUST_CHECK;
/* All fed: a version 2 image's chunk count, length and SHA-256 checked. */
int ws_art_reader_finish(struct ws_art_reader *r) WS_MUST_CHECK;
void ws_art_reader_free(struct ws_art_reader *r);

#endif
