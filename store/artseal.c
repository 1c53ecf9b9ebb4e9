/*
 * Sealed checkpoint artifacts (ws_artseal.h; docs/FORMAT.md "Sealed
 * checkpoint artifacts"). Each chunk is sealed as a batch's payload is
 * (store/seal.c's zstd and AES-256-GCM), its additional data the header's
 * fixed part (which holds the artifact's random salt, the image's length
 * and SHA-256), the chunk's index and its own table entry: a chunk moved
 * to another place, into another artifact, or given another entry fails
 * its authentication.
 */
#include "ws_artseal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <zstd.h>

#define AAD_LEN (WS_ART_FIXED + 4u + WS_ART_ENTRY)

bool ws_art_sealed(const uint8_t *p, size_t len)
{
	return len >= 8 && memcmp(p, WS_ART_MAGIC, 8) == 0;
}

size_t ws_art_hdr_size(uint32_t chunk_count)
{
	return WS_ART_FIXED + (size_t)chunk_count * WS_ART_ENTRY + 8u;
}

size_t ws_art_chunk_plain(const struct ws_art_hdr *h, uint32_t k)
{
	uint64_t at = (uint64_t)k * h->chunk_size;
	return h->plain_len - at < h->chunk_size ? (size_t)(h->plain_len - at) : h->chunk_size;
}

uint64_t ws_art_chunk_off(const struct ws_art_hdr *h, uint32_t k)
{
	uint64_t off = ws_art_hdr_size(h->chunk_count);
	for (uint32_t i = 0; i < k; i++)
		off += h->chunks[i].stored_len;
	return off;
}

uint64_t ws_art_length(const struct ws_art_hdr *h)
{
	return ws_art_chunk_off(h, h->chunk_count);
}

static uint64_t chunks_for(uint64_t plain_len, uint32_t chunk_size)
{
	return plain_len / chunk_size + (plain_len % chunk_size != 0);
}

int ws_art_begin(const struct ws_seal *s, uint64_t plain_len, uint32_t chunk_size, const uint8_t sha[WS_SHA256_LEN],
		 struct ws_art_hdr *h)
{
	uint64_t n = chunks_for(plain_len, chunk_size);
	memset(h, 0, sizeof(*h));
	if (ws_art_hdr_size(0) + n * WS_ART_ENTRY > WS_ART_HDR_MAX)
		return ws_fail(WS_ETOOBIG, "sealed artifact: %" PRIu64 " chunks of %u bytes are more than a header "
			       "holds", n, chunk_size);
	if (n && !(h->chunks = calloc((size_t)n, sizeof(*h->chunks))))
		return ws_fail(-ENOMEM, "sealed artifact: no memory for %" PRIu64 " chunks", n);
	h->codec = s->codec;
	h->cipher = s->key ? WS_FMT_CIPHER_AES256GCM : WS_FMT_CIPHER_NONE;
	h->key_id = s->key ? s->key->id : 0;
	h->plain_len = plain_len;
	h->chunk_size = chunk_size;
	h->chunk_count = (uint32_t)n;
	memcpy(h->sha, sha, WS_SHA256_LEN);
	return ws_seal_random(h->salt, sizeof(h->salt));
}

void ws_art_hdr_free(struct ws_art_hdr *h)
{
	free(h->chunks);
	h->chunks = NULL;
}

size_t ws_art_chunk_bound(const struct ws_seal *s, uint32_t chunk_size)
{
	return ws_seal_bound(s, chunk_size);
}

static void encode_fixed(const struct ws_art_hdr *h, uint8_t *p)
{
	memcpy(p, WS_ART_MAGIC, 8);
	ws_put_le32(p + 8, WS_ART_VERSION);
	ws_put_le32(p + 12, (uint32_t)ws_art_hdr_size(h->chunk_count));
	ws_put_le32(p + 16, h->codec);
	ws_put_le32(p + 20, h->cipher);
	ws_put_le64(p + 24, h->key_id);
	memcpy(p + 32, h->salt, WS_ART_SALT_LEN);
	ws_put_le64(p + 48, h->plain_len);
	ws_put_le32(p + 56, h->chunk_size);
	ws_put_le32(p + 60, h->chunk_count);
	memcpy(p + 64, h->sha, WS_SHA256_LEN);
}

static void encode_entry(const struct ws_art_chunk *c, uint8_t *p)
{
	ws_put_le32(p, c->stored_len);
	memcpy(p + 4, c->nonce, WS_SEAL_NONCE_LEN);
	ws_put_le64(p + 16, c->xxh);
}

void ws_art_hdr_encode(const struct ws_art_hdr *h, uint8_t *out)
{
	size_t at = WS_ART_FIXED;
	encode_fixed(h, out);
	for (uint32_t k = 0; k < h->chunk_count; k++, at += WS_ART_ENTRY)
		encode_entry(&h->chunks[k], out + at);
	ws_put_le64(out + at, ws_xxh64(out, at));
}

/* Chunk k's additional data: the fixed header, k, its entry. */
static void chunk_aad(const struct ws_art_hdr *h, uint32_t k, uint8_t aad[AAD_LEN])
{
	encode_fixed(h, aad);
	ws_put_le32(aad + WS_ART_FIXED, k);
	encode_entry(&h->chunks[k], aad + WS_ART_FIXED + 4);
}

int ws_art_seal_chunk(const struct ws_seal *s, struct ws_art_hdr *h, uint32_t k, const uint8_t *plain,
		      uint8_t *out, size_t cap, size_t *stored)
{
	struct ws_art_chunk *c = &h->chunks[k];
	const size_t len = ws_art_chunk_plain(h, k), tag = s->key ? WS_SEAL_TAG_LEN : 0;
	uint8_t aad[AAD_LEN];
	size_t clen = len;
	int rc = 0;

	if (cap < len + tag && s->codec == WS_FMT_CODEC_NONE)
		return ws_fail(WS_ETOOBIG, "sealed artifact: a %zu-byte buffer cannot hold a chunk", cap);
	if (s->codec == WS_FMT_CODEC_ZSTD)
		rc = ws_seal_compress(s, plain, len, out, cap - tag, &clen);
	else
		memcpy(out, plain, len);
	if (rc)
		return rc;
	c->xxh = ws_xxh64(plain, len);
	c->stored_len = (uint32_t)(clen + tag);
	*stored = clen + tag;
	if (!s->key)
		return 0;
	if ((rc = ws_seal_random(c->nonce, WS_SEAL_NONCE_LEN)) != 0)
		return rc;
	chunk_aad(h, k, aad);
	return ws_seal_gcm(true, s->key, c->nonce, aad, sizeof(aad), out, clen, out + clen);
}

int ws_art_hdr_peek(const uint8_t *p, size_t len, size_t *hdr_size)
{
	uint32_t v, size;
	if (len < WS_ART_PEEK || !ws_art_sealed(p, len))
		return ws_fail(WS_EFORMAT, "not a sealed artifact (magic %s)", WS_ART_MAGIC);
	v = ws_get_le32(p + 8);
	size = ws_get_le32(p + 12);
	if (v != WS_ART_VERSION)
		return ws_fail(WS_EFORMAT, "artifact version %u is unknown (this reader knows 1 and 2)", v);
	if (size < ws_art_hdr_size(0) || size > WS_ART_HDR_MAX || (size - ws_art_hdr_size(0)) % WS_ART_ENTRY)
		return ws_fail(WS_EFORMAT, "sealed artifact: header size %u is not 104 + 24 x chunks (at most %u)",
			       size, WS_ART_HDR_MAX);
	*hdr_size = size;
	return 0;
}

/* The fixed fields, checked. */
static int decode_fixed(const uint8_t *p, struct ws_art_hdr *h)
{
	h->codec = ws_get_le32(p + 16);
	h->cipher = ws_get_le32(p + 20);
	h->key_id = ws_get_le64(p + 24);
	memcpy(h->salt, p + 32, WS_ART_SALT_LEN);
	h->plain_len = ws_get_le64(p + 48);
	h->chunk_size = ws_get_le32(p + 56);
	h->chunk_count = ws_get_le32(p + 60);
	memcpy(h->sha, p + 64, WS_SHA256_LEN);
	if (h->codec != WS_FMT_CODEC_NONE && h->codec != WS_FMT_CODEC_ZSTD)
		return ws_fail(WS_EFORMAT, "sealed artifact: codec %u is unknown (0 none, 1 zstd)", h->codec);
	if (h->cipher != WS_FMT_CIPHER_NONE && h->cipher != WS_FMT_CIPHER_AES256GCM)
		return ws_fail(WS_EFORMAT, "sealed artifact: cipher %u is unknown (0 none, 1 AES-256-GCM)", h->cipher);
	if (!h->cipher && h->key_id)
		return ws_fail(WS_EFORMAT, "sealed artifact: a key id without a cipher");
	if (h->chunk_size < WS_ART_CHUNK_MIN || h->chunk_size > WS_ART_CHUNK_MAX)
		return ws_fail(WS_EFORMAT, "sealed artifact: chunk size %u is not %u..%u", h->chunk_size,
			       WS_ART_CHUNK_MIN, WS_ART_CHUNK_MAX);
	if (chunks_for(h->plain_len, h->chunk_size) != h->chunk_count ||
	    ws_art_hdr_size(h->chunk_count) != ws_get_le32(p + 12))
		return ws_fail(WS_EFORMAT, "sealed artifact: %u chunks of %u bytes do not hold %" PRIu64 " bytes "
			       "(or the header's size is not theirs)", h->chunk_count, h->chunk_size, h->plain_len);
	return 0;
}

/* Entry k, checked against its codec and cipher. */
static int decode_entry(const uint8_t *p, struct ws_art_hdr *h, uint32_t k)
{
	static const uint8_t zero[WS_SEAL_NONCE_LEN];
	struct ws_art_chunk *c = &h->chunks[k];
	const size_t plain = ws_art_chunk_plain(h, k), tag = h->cipher ? WS_SEAL_TAG_LEN : 0;
	const size_t most = (h->codec ? ZSTD_compressBound(plain) : plain) + tag;

	c->stored_len = ws_get_le32(p);
	memcpy(c->nonce, p + 4, WS_SEAL_NONCE_LEN);
	c->xxh = ws_get_le64(p + 16);
	if (!h->cipher && memcmp(c->nonce, zero, sizeof(zero)) != 0)
		return ws_fail(WS_EFORMAT, "sealed artifact: chunk %u has a nonce without a cipher", k);
	if (c->stored_len > most || c->stored_len < tag + (h->codec ? 1 : plain) ||
	    (!h->codec && c->stored_len != plain + tag))
		return ws_fail(WS_EFORMAT, "sealed artifact: chunk %u stores %u bytes, which no chunk of %zu "
			       "plaintext bytes does under codec %u%s", k, c->stored_len, plain, h->codec,
			       h->cipher ? " with a cipher" : "");
	return 0;
}

int ws_art_hdr_decode(const uint8_t *p, size_t len, struct ws_art_hdr *h)
{
	size_t size, at = WS_ART_FIXED;
	int rc;

	memset(h, 0, sizeof(*h));
	if ((rc = ws_art_hdr_peek(p, len, &size)) != 0)
		return rc;
	if (len < size)
		return ws_fail(WS_EFORMAT, "sealed artifact: %zu bytes, its header is %zu", len, size);
	if (ws_xxh64(p, size - 8) != ws_get_le64(p + size - 8))
		return ws_fail(WS_ECORRUPT, "sealed artifact: header hash mismatch");
	if ((rc = decode_fixed(p, h)) != 0)
		return rc;
	if (h->chunk_count && !(h->chunks = calloc(h->chunk_count, sizeof(*h->chunks))))
		return ws_fail(-ENOMEM, "sealed artifact: no memory for %u chunks", h->chunk_count);
	for (uint32_t k = 0; k < h->chunk_count && !rc; k++, at += WS_ART_ENTRY)
		rc = decode_entry(p + at, h, k);
	if (rc)
		ws_art_hdr_free(h);
	return rc;
}

int ws_art_open_chunk(const struct ws_keyring *kr, const struct ws_art_hdr *h, uint32_t k, uint8_t *stored,
		      uint8_t *plain, const uint8_t **out)
{
	const struct ws_art_chunk *c = &h->chunks[k];
	const size_t len = ws_art_chunk_plain(h, k);
	size_t clen = c->stored_len;
	const uint8_t *p = stored;
	int rc;

	if (h->cipher) {
		const struct ws_seal_key *key = ws_keyring_find(kr, h->key_id);
		uint8_t aad[AAD_LEN];
		if (!key)
			return ws_fail(WS_ENOKEY, "key %016" PRIx64 " not available", h->key_id);
		clen -= WS_SEAL_TAG_LEN;
		chunk_aad(h, k, aad);
		if ((rc = ws_seal_gcm(false, key, c->nonce, aad, sizeof(aad), stored, clen, stored + clen)) != 0)
			return ws_fail_wrap(rc, "chunk %u", k);
	}
	if (h->codec == WS_FMT_CODEC_ZSTD) {
		if ((rc = ws_seal_decompress(stored, clen, plain, len)) != 0)
			return ws_fail_wrap(rc, "chunk %u", k);
		p = plain;
	}
	if (ws_xxh64(p, len) != c->xxh)
		return ws_fail(WS_ECORRUPT, "chunk %u: plaintext hash mismatch", k);
	*out = p;
	return 0;
}

/* ---- whole artifacts in memory (small images: tests, seeds) ------------ */

int ws_art_seal_buf(const struct ws_seal *s, uint32_t chunk_size, const uint8_t *img, size_t len,
		    struct ws_buf *out)
{
	struct ws_art_hdr h;
	uint8_t sha[WS_SHA256_LEN];
	size_t hs, n;
	int rc;

	ws_sha256(img, len, sha);
	if ((rc = ws_art_begin(s, len, chunk_size, sha, &h)) != 0)
		return rc;
	hs = ws_art_hdr_size(h.chunk_count);
	ws_buf_reset(out);
	rc = ws_buf_reserve(out, hs);
	out->len = rc ? 0 : hs;
	for (uint32_t k = 0; k < h.chunk_count && !rc; k++) {
		const size_t cap = ws_art_chunk_bound(s, chunk_size);
		if ((rc = ws_buf_reserve(out, cap)) == 0 &&
		    (rc = ws_art_seal_chunk(s, &h, k, img + (size_t)k * chunk_size, out->data + out->len, cap, &n)) == 0)
			out->len += n;
	}
	if (!rc)
		ws_art_hdr_encode(&h, out->data);
	ws_art_hdr_free(&h);
	return rc;
}

int ws_art_open_buf(const struct ws_keyring *kr, uint8_t *obj, size_t len, struct ws_buf *plain)
{
	struct ws_art_hdr h;
	uint8_t sha[WS_SHA256_LEN];
	int rc = ws_art_hdr_decode(obj, len, &h);
	if (rc)
		return rc;
	if (ws_art_length(&h) != len)
		rc = ws_fail(WS_ECORRUPT, "sealed artifact of %zu bytes, its header gives %" PRIu64, len,
			     ws_art_length(&h));
	ws_buf_reset(plain);
	if (!rc && (rc = ws_buf_reserve(plain, (size_t)h.plain_len + h.chunk_size)) != 0)
		rc = ws_fail(rc, "sealed artifact: no room for %" PRIu64 " bytes", h.plain_len);
	for (uint32_t k = 0; k < h.chunk_count && !rc; k++) {
		const uint8_t *p;
		uint8_t *dst = plain->data + plain->len;
		if ((rc = ws_art_open_chunk(kr, &h, k, obj + ws_art_chunk_off(&h, k), dst, &p)) == 0) {
			memmove(dst, p, ws_art_chunk_plain(&h, k));
			plain->len += ws_art_chunk_plain(&h, k);
		}
	}
	if (!rc) {
		ws_sha256(plain->data, plain->len, sha);
		if (memcmp(sha, h.sha, sizeof(sha)) != 0)
			rc = ws_fail(WS_ECORRUPT, "sealed artifact: the image's SHA-256 is not its header's");
	}
	ws_art_hdr_free(&h);
	return rc;
}
