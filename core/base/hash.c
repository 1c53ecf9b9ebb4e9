#include "ws_hash.h"

#include <string.h>

#include <openssl/evp.h>
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

void ws_sha256v(const struct iovec *iov, int iovcnt, uint8_t out[WS_SHA256_LEN])
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	unsigned int n = 0;
	if (!ctx || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
		/* Out of memory in OpenSSL: a hash that cannot match anything real. */
		memset(out, 0, WS_SHA256_LEN);
		EVP_MD_CTX_free(ctx);
		return;
	}
	for (int i = 0; i < iovcnt; i++)
		EVP_DigestUpdate(ctx, iov[i].iov_base, iov[i].iov_len);
	EVP_DigestFinal_ex(ctx, out, &n);
	EVP_MD_CTX_free(ctx);
}

int ws_hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
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
