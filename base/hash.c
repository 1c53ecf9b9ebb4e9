#include "ws_hash.h"

#include <errno.h>
#include <string.h>

#include "hash_impl.h"
#include "ws_cpu.h"

#include <openssl/evp.h>
#include <openssl/sha.h>
/* Compiled in (XXH_INLINE_ALL): about twice the shared library's speed. */
#define XXH_INLINE_ALL
#include <xxhash.h>

#define WS_XXH_FN(name) name##_base
#include "xxh_body.h"

/*
 * The AVX2 kernel hashes about twice as fast as the SSE2 one every x86-64
 * has; which one runs is decided once, from the CPU (ws_cpu.h).
 */
#ifdef WS_HAVE_XXH_AVX2
bool ws_xxh_avx2_usable(void)
{
	return ws_cpu_avx2();
}

uint64_t ws_xxh64(const void *data, size_t len)
{
	return ws_xxh_avx2_usable() ? ws_xxh64_avx2(data, len) : ws_xxh64_base(data, len);
}

uint64_t ws_xxh64v(const struct iovec *iov, int iovcnt)
{
	return ws_xxh_avx2_usable() ? ws_xxh64v_avx2(iov, iovcnt) : ws_xxh64v_base(iov, iovcnt);
}

void ws_xxh_update(struct ws_xxh_state *s, const void *data, size_t len)
{
	if (ws_xxh_avx2_usable())
		ws_xxh_update_avx2(s, data, len);
	else
		ws_xxh_update_base(s, data, len);
}
#else
bool ws_xxh_avx2_usable(void) { return false; }
void ws_xxh_update_avx2(struct ws_xxh_state *s, const void *data, size_t len) { ws_xxh_update_base(s, data, len); }
void ws_xxh_update(struct ws_xxh_state *s, const void *data, size_t len) { ws_xxh_update_base(s, data, len); }
uint64_t ws_xxh64_avx2(const void *data, size_t len) { return ws_xxh64_base(data, len); }
uint64_t ws_xxh64v_avx2(const struct iovec *iov, int iovcnt) { return ws_xxh64v_base(iov, iovcnt); }
uint64_t ws_xxh64(const void *data, size_t len) { return ws_xxh64_base(data, len); }
uint64_t ws_xxh64v(const struct iovec *iov, int iovcnt) { return ws_xxh64v_base(iov, iovcnt); }
#endif

/* The state is plain data whatever the kernel; only update runs one. */
void ws_xxh_reset(struct ws_xxh_state *s)
{
	(void)XXH3_64bits_reset((XXH3_state_t *)(void *)s->opaque);
}

uint64_t ws_xxh_digest(const struct ws_xxh_state *s)
{
	return XXH3_64bits_digest((const XXH3_state_t *)(const void *)s->opaque);
}

void ws_sha256(const void *data, size_t len, uint8_t out[WS_SHA256_LEN])
{
	SHA256(data, len, out);
}

int ws_sha256_begin(struct ws_sha256_state *s)
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	if (!ctx || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
		EVP_MD_CTX_free(ctx);
		s->ctx = NULL;
		return -ENOMEM;
	}
	s->ctx = ctx;
	return 0;
}

void ws_sha256_update(struct ws_sha256_state *s, const void *data, size_t len)
{
	EVP_DigestUpdate((EVP_MD_CTX *)s->ctx, data, len);
}

void ws_sha256_end(struct ws_sha256_state *s, uint8_t out[WS_SHA256_LEN])
{
	unsigned int n = 0;
	if (out && EVP_DigestFinal_ex((EVP_MD_CTX *)s->ctx, out, &n) != 1)
		memset(out, 0, WS_SHA256_LEN); /* a hash that cannot match anything real */
	EVP_MD_CTX_free((EVP_MD_CTX *)s->ctx);
	s->ctx = NULL;
}

void ws_sha256v(const struct iovec *iov, int iovcnt, uint8_t out[WS_SHA256_LEN])
{
	struct ws_sha256_state s;
	if (ws_sha256_begin(&s) != 0) {
		/* Out of memory in OpenSSL: a hash that cannot match anything real. */
		memset(out, 0, WS_SHA256_LEN);
		return;
	}
	for (int i = 0; i < iovcnt; i++)
		ws_sha256_update(&s, iov[i].iov_base, iov[i].iov_len);
	ws_sha256_end(&s, out);
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
