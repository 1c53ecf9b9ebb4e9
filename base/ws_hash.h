/* Hashes used for verification: XXH3-64 for bulk bytes, SHA-256 for content addressing. */
#ifndef WS_HASH_H
#define WS_HASH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#define WS_SHA256_LEN 32
#define WS_SHA256_HEX_LEN 64

uint64_t ws_xxh64(const void *data, size_t len);
/* XXH3-64 over the concatenation of the iovecs (streaming, no copy). */
uint64_t ws_xxh64v(const struct iovec *iov, int iovcnt);
/* XXH3-64 fed in pieces: the same value as ws_xxh64 over their concatenation. */
struct ws_xxh_state {
	_Alignas(64) unsigned char opaque[640];
};
void ws_xxh_reset(struct ws_xxh_state *s);
void ws_xxh_update(struct ws_xxh_state *s, const void *data, size_t len);
uint64_t ws_xxh_digest(const struct ws_xxh_state *s);
void ws_sha256(const void *data, size_t len, uint8_t out[WS_SHA256_LEN]);
/* SHA-256 over the concatenation of the iovecs (streaming, no copy). */
void ws_sha256v(const struct iovec *iov, int iovcnt, uint8_t out[WS_SHA256_LEN]);
/*
 * SHA-256 fed in pieces (an object read in ranges): the same value as
 * ws_sha256 over their concatenation. ws_sha256_begin returns -ENOMEM when
 * OpenSSL cannot allocate its context; ws_sha256_end frees it (also after a
 * failed update, with out NULL to only free).
 */
struct ws_sha256_state {
	void *ctx;
};
int ws_sha256_begin(struct ws_sha256_state *s);
void ws_sha256_update(struct ws_sha256_state *s, const void *data, size_t len);
void ws_sha256_end(struct ws_sha256_state *s, uint8_t out[WS_SHA256_LEN]);
/* Value of one hex digit (either case), or -1. */
int ws_hexval(char c);
/* Lower-case hex of n bytes into out (2n+1 bytes). */
void ws_hex(const uint8_t *in, size_t n, char *out);

#endif
