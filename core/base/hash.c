#include "ws_hash.h"

#include <openssl/sha.h>
/* Compiled in (XXH_INLINE_ALL): about twice the shared library's speed. */
#define XXH_INLINE_ALL
#include <xxhash.h>

uint64_t ws_xxh64(const void *data, size_t len)
{
	return XXH3_64bits(data, len);
}

uint64_t ws_xxh64v(const struct iovec *iov, int iovcnt)
{
	XXH3_state_t st;
	XXH3_64bits_reset(&st);
	for (int i = 0; i < iovcnt; i++)
		XXH3_64bits_update(&st, iov[i].iov_base, iov[i].iov_len);
	return XXH3_64bits_digest(&st);
}

void ws_sha256(const void *data, size_t len, uint8_t out[WS_SHA256_LEN])
{
	SHA256(data, len, out);
}

void ws_hex(const uint8_t *in, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[in[i] >> 4];
		out[2 * i + 1] = digits[in[i] & 15];
	}
	out[2 * n] = '\0';
}
