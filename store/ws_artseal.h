/*
 * Sealed checkpoint artifacts (version 2; docs/FORMAT.md "Sealed checkpoint
 * artifacts"): a database image cut into chunks of chunk_size plaintext
 * bytes, each compressed and encrypted on its own (ws_seal.h's primitives)
 * under a plaintext header that records every chunk's stored length, so
 * that chunk k is found without reading those before it and an image of
 * any size is sealed and opened a chunk at a time. A version 1 artifact is
 * the image as it is (it starts "SQLite format 3", or is empty).
 */
#ifndef WS_ARTSEAL_H
#define WS_ARTSEAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ws_hash.h"
#include "ws_seal.h"

#define WS_ART_MAGIC "WSARTIF1"
#define WS_ART_VERSION 2u
#define WS_ART_SALT_LEN 16u
#define WS_ART_FIXED 96u               /* header bytes before the chunk table */
#define WS_ART_ENTRY 24u               /* one chunk's table entry */
#define WS_ART_PEEK 16u                /* bytes that give the header's size */
#define WS_ART_CHUNK_DEFAULT (8u << 20)
#define WS_ART_CHUNK_MIN (4u << 10)
#define WS_ART_CHUNK_MAX (64u << 20)
#define WS_ART_HDR_MAX (8u << 20)      /* a header is at most this (about 349,000 chunks) */

struct ws_art_chunk {
	uint32_t stored_len;               /* compressed (or not) + the tag with a cipher */
	uint8_t nonce[WS_SEAL_NONCE_LEN];  /* zero without a cipher */
	uint64_t xxh;                      /* XXH3-64 of its plaintext */
};

struct ws_art_hdr {
	uint32_t codec, cipher;            /* enum ws_fmt_codec, enum ws_fmt_cipher */
	uint64_t key_id;                   /* 0 without a cipher */
	uint8_t salt[WS_ART_SALT_LEN];     /* random per artifact: in every chunk's AAD */
	uint64_t plain_len;                /* the image's length */
	uint32_t chunk_size, chunk_count;
	uint8_t sha[WS_SHA256_LEN];        /* the image's SHA-256 */
	struct ws_art_chunk *chunks;       /* chunk_count */
};

/* Whether p (len bytes of an artifact's start) begins with the version 2 magic. */
bool ws_art_sealed(const uint8_t *p, size_t len);
/* The header's size for that many chunks. */
size_t ws_art_hdr_size(uint32_t chunk_count);
/* A chunk's plaintext length (the last one may be shorter). */
size_t ws_art_chunk_plain(const struct ws_art_hdr *h, uint32_t k);
/* Where chunk k's stored bytes start in the artifact. */
uint64_t ws_art_chunk_off(const struct ws_art_hdr *h, uint32_t k);
/* The artifact's whole length: header and every chunk. */
uint64_t ws_art_length(const struct ws_art_hdr *h);

/*
 * Begin sealing a plain_len-byte image whose SHA-256 is sha: h's fields set,
 * its chunk table allocated (ws_art_hdr_free), the salt drawn. Errors:
 * WS_ETOOBIG (more chunks than a header holds), -ENOMEM, -EIO.
 */
int ws_art_begin(const struct ws_seal *s, uint64_t plain_len, uint32_t chunk_size, const uint8_t sha[WS_SHA256_LEN],
		 struct ws_art_hdr *h) WS_MUST_CHECK;
/* The most bytes one chunk stores (the buffer ws_art_seal_chunk needs). */
size_t ws_art_chunk_bound(const struct ws_seal *s, uint32_t chunk_size);
/*
 * Seal chunk k (plain: ws_art_chunk_plain(h, k) bytes) into out: its
 * table entry set, *stored bytes written. Errors: as ws_seal_compress,
 * ws_seal_gcm.
 */
int ws_art_seal_chunk(const struct ws_seal *s, struct ws_art_hdr *h, uint32_t k, const uint8_t *plain,
		      uint8_t *out, size_t cap, size_t *stored) WS_MUST_CHECK;
/* The header (ws_art_hdr_size(h->chunk_count) bytes) into out. */
void ws_art_hdr_encode(const struct ws_art_hdr *h, uint8_t *out);

/*
 * The header's size from its first WS_ART_PEEK bytes. Errors: WS_EFORMAT
 * (not the magic; a version other than 2, named; a size no chunk count
 * gives or above WS_ART_HDR_MAX).
 */
int ws_art_hdr_peek(const uint8_t *p, size_t len, size_t *hdr_size) WS_MUST_CHECK;
/*
 * Decode and check a whole header (len >= its size): magic, version, header
 * hash, every field (an unknown codec or cipher named; a key id or nonce
 * without a cipher; a chunk count that is not the plaintext length's; a
 * stored length no chunk of that codec has). h->chunks is allocated.
 * Errors: WS_EFORMAT, WS_ECORRUPT (header hash), -ENOMEM.
 */
int ws_art_hdr_decode(const uint8_t *p, size_t len, struct ws_art_hdr *h) WS_MUST_CHECK;
/*
 * Open chunk k: stored (its table entry's stored_len bytes; decrypted in
 * place) into plain (ws_art_chunk_plain bytes; *out points at the
 * plaintext, in plain or in stored), its XXH3-64 checked. Errors:
 * WS_ENOKEY "key <id> not available", WS_ECORRUPT (authentication failed,
 * zstd's error, the chunk's hash).
 */
int ws_art_open_chunk(const struct ws_keyring *kr, const struct ws_art_hdr *h, uint32_t k, uint8_t *stored,
		      uint8_t *plain, const uint8_t **out) WS_MUST_CHECK;
void ws_art_hdr_free(struct ws_art_hdr *h);

/*
 * A whole artifact in memory, for small images (tests, fuzzing seeds): img
 * sealed into out; obj (decrypted in place) opened into plain, every check
 * above and the image's SHA-256 made. Errors: as the functions above,
 * WS_ECORRUPT for an object of another length than its header gives.
 */
int ws_art_seal_buf(const struct ws_seal *s, uint32_t chunk_size, const uint8_t *img, size_t len,
		    struct ws_buf *out) WS_MUST_CHECK;
int ws_art_open_buf(const struct ws_keyring *kr, uint8_t *obj, size_t len, struct ws_buf *plain) WS_MUST_CHECK;

#endif
