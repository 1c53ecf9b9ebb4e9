/* The XXH3 kernels behind ws_hash.h, for hash.c's dispatch and the tests. */
#ifndef WS_HASH_IMPL_H
#define WS_HASH_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/* SSE2 (every x86-64) or the generic C kernel elsewhere. */
uint64_t ws_xxh64_base(const void *data, size_t len);
uint64_t ws_xxh64v_base(const struct iovec *iov, int iovcnt);
struct ws_xxh_state;
void ws_xxh_update_base(struct ws_xxh_state *s, const void *data, size_t len);

/* AVX2: present only on x86-64; call only when ws_xxh_avx2_usable(). */
uint64_t ws_xxh64_avx2(const void *data, size_t len);
uint64_t ws_xxh64v_avx2(const struct iovec *iov, int iovcnt);
void ws_xxh_update_avx2(struct ws_xxh_state *s, const void *data, size_t len);
bool ws_xxh_avx2_usable(void);

#endif
