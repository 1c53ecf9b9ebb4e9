/*
 * Sealed objects: a batch's or snapshot part's payload compressed (zstd)
 * and then, when a key is given, encrypted (AES-256-GCM) under a version 2
 * header (docs/FORMAT.md "Sealed objects"). The header stays plaintext: it
 * is the GCM additional data, so a changed header byte fails the
 * authentication as a changed ciphertext byte does.
 *
 * Keys come from key files: text, one 256-bit key per line as 64 hex
 * characters, blank lines and '#' comments allowed. The last key of a file
 * is the one a writer uses; every key of a ring opens what it sealed
 * (rotation: append a line). A key is known by its id, the first 8 bytes
 * (little-endian) of SHA-256("walship key id\0" || key): a fingerprint that
 * goes in headers and messages; the key's bytes never do, and are wiped
 * when freed.
 */
#ifndef WS_SEAL_H
#define WS_SEAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "ws_fail.h"
#include "ws_format.h"
#include "ws_store.h"

#define WS_SEAL_KEY_LEN 32u
#define WS_KEYRING_MAX 1024u       /* keys one ring holds at most */
#define WS_ZSTD_LEVEL_DEFAULT 3

struct ws_seal_key {
	uint64_t id;
	uint8_t bytes[WS_SEAL_KEY_LEN];
};

/* Keys in the order they were added; a writer's is its file's last. */
struct ws_keyring {
	struct ws_seal_key *keys;
	size_t count;
	uint64_t last_id;          /* the last key parsed: a writer's (ws_keyring_writer) */
};

uint64_t ws_seal_key_id(const uint8_t key[WS_SEAL_KEY_LEN]);

/*
 * Append the keys of a key file's text (name: what messages call it) or of
 * the file at path to kr. A line that is not blank, a comment or 64 hex
 * characters is WS_ECONFIG naming the file and line (never the line's
 * text); so is a file without a key. Keys already in kr are not added
 * twice. Errors: WS_ECONFIG, WS_ETOOBIG (more than WS_KEYRING_MAX keys),
 * -ENOMEM, and the file's open/read errno (load).
 */
int ws_keyring_parse(struct ws_keyring *kr, const char *name, const char *text, size_t len) WS_MUST_CHECK;
int ws_keyring_load(struct ws_keyring *kr, const char *path) WS_MUST_CHECK;
/* Append src's keys to kr (those it lacks). Errors: WS_ETOOBIG, -ENOMEM. */
int ws_keyring_merge(struct ws_keyring *kr, const struct ws_keyring *src) WS_MUST_CHECK;
/* The key of that id, or NULL. */
const struct ws_seal_key *ws_keyring_find(const struct ws_keyring *kr, uint64_t id);
/* The key a writer seals with: the last line of the last file parsed. */
static inline const struct ws_seal_key *ws_keyring_writer(const struct ws_keyring *kr)
{
	return kr->count ? ws_keyring_find(kr, kr->last_id) : NULL;
}
/* Wipes the keys' bytes and frees them. */
void ws_keyring_free(struct ws_keyring *kr);

/* How a writer seals: codec (enum ws_fmt_codec), its level (0: the
 * default), and the key (NULL: no encryption). */
struct ws_seal {
	uint32_t codec;
	int level;
	const struct ws_seal_key *key;
};

/* Whether objects are sealed at all (otherwise version 1 is written). */
static inline bool ws_seal_on(const struct ws_seal *s)
{
	return s && (s->codec != WS_FMT_CODEC_NONE || s->key);
}
/* The most bytes sealing plain_len bytes of payload stores. */
size_t ws_seal_bound(const struct ws_seal *s, size_t plain_len);

/*
 * Seal a batch (b: every version 1 field set) or a snapshot part: its
 * payload (iov) is compressed into out (cap >= ws_seal_bound), a fresh
 * nonce drawn, the version 2 header encoded into hdr (*hdr_len) and the
 * payload encrypted in place with the header as additional data, the tag
 * after it (*stored_len bytes in out). b's / sn's seal fields are set.
 * Errors: WS_ETOOBIG (cap), -ENOMEM, -EIO (zstd or OpenSSL failed).
 */
int ws_seal_batch(const struct ws_seal *s, struct ws_fmt_batch *b, const struct iovec *iov, int iovcnt,
		  uint8_t hdr[WS_OBJ_HDR_MAX], size_t *hdr_len, uint8_t *out, size_t cap,
		  size_t *stored_len) WS_MUST_CHECK;
int ws_seal_snap(const struct ws_seal *s, struct ws_fmt_snap *sn, const struct iovec *iov, int iovcnt,
		 uint8_t hdr[WS_OBJ_HDR_MAX], size_t *hdr_len, uint8_t *out, size_t cap,
		 size_t *stored_len) WS_MUST_CHECK;

/*
 * Decode and check a batch or snapshot part of either version and give its
 * plaintext payload (*frames / *pages): in obj for a payload stored as it
 * is, else opened into plain (reset first). kr may be NULL (no keys).
 * The plaintext's XXH3-64 is checked against the header's in both cases.
 * Errors: WS_EFORMAT and WS_ECORRUPT as ws_fmt_batch_decode; WS_ENOKEY
 * "key <id> not available"; WS_ECORRUPT "authentication failed" (the
 * ciphertext, its tag or the header changed), naming zstd's error for a
 * stream it cannot decompress, or when it decompresses to another length
 * than the header's; WS_ETOOBIG / -ENOMEM (plain cannot hold it).
 */
int ws_seal_open_batch(const struct ws_keyring *kr, const uint8_t *obj, size_t len, struct ws_fmt_batch *b,
		       struct ws_buf *plain, const uint8_t **frames) WS_MUST_CHECK;
int ws_seal_open_snap(const struct ws_keyring *kr, const uint8_t *obj, size_t len, struct ws_fmt_snap *sn,
		      struct ws_buf *plain, const uint8_t **pages) WS_MUST_CHECK;

/*
 * The primitives the objects above are sealed with, for other layouts
 * (checkpoint artifacts, ws_artseal.h): zstd one-shot compression (cap >=
 * ZSTD_compressBound) and decompression to exactly plain_len bytes;
 * AES-256-GCM of len bytes in place (enc: the tag written, else checked:
 * WS_ECORRUPT "authentication failed"); random bytes (nonces).
 */
int ws_seal_compress(const struct ws_seal *s, const uint8_t *src, size_t len, uint8_t *out, size_t cap,
		     size_t *clen) WS_MUST_CHECK;
int ws_seal_decompress(const uint8_t *src, size_t len, uint8_t *dst, size_t plain_len) WS_MUST_CHECK;
int ws_seal_gcm(bool enc, const struct ws_seal_key *k, const uint8_t nonce[WS_SEAL_NONCE_LEN], const uint8_t *aad,
		size_t aad_len, uint8_t *buf, size_t len, uint8_t tag[WS_SEAL_TAG_LEN]) WS_MUST_CHECK;
int ws_seal_random(uint8_t *out, size_t len) WS_MUST_CHECK;

#endif
