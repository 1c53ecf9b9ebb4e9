/*
 * XXH3-64 as walship computes it (base/hash.c): the AVX2 kernel, the
 * baseline kernel and the system's libxxhash must agree on every length
 * and alignment (object names and batch headers carry these hashes, so a
 * kernel that differed would make a sink written on one CPU unreadable on
 * another), and the iovec form must equal the one-shot form however the
 * bytes are split.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h> /* the shared library's XXH3, as the reference */

#include "hash_impl.h"
#include "testutil.h"
#include "ws_hash.h"

static uint8_t *random_bytes(size_t n, uint64_t *rng)
{
	uint8_t *b = malloc(n + 64);
	assert_non_null(b);
	for (size_t i = 0; i < n + 64; i++)
		b[i] = (uint8_t)wt_rand(rng);
	return b;
}

static void check(const uint8_t *p, size_t len)
{
	uint64_t want = XXH3_64bits(p, len);
	assert_int_equal(ws_xxh64_base(p, len), want);
	assert_int_equal(ws_xxh64(p, len), want);
	if (ws_xxh_avx2_usable())
		assert_int_equal(ws_xxh64_avx2(p, len), want);
}

static void test_kernels_agree(void **state)
{
	uint64_t rng = 42;
	const size_t big = (size_t)3 << 20;
	uint8_t *b = random_bytes(big, &rng);
	(void)state;
	/* Every short length (XXH3 has separate paths up to 240 bytes), at
	 * every alignment within a vector. */
	for (size_t len = 0; len <= 1100; len++)
		check(b + len % 32, len);
	/* Stripe and block boundaries and large inputs. */
	const size_t sizes[] = { 1024, 1025, 4095, 4096, 4120, 65536, 65537, 1 << 20, big - 7, big };
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		check(b, sizes[i]);
		check(b + 1 + i % 63, sizes[i] - (sizes[i] > 64 ? 64 : 0));
	}
	free(b);
}

static void test_iovec_equals_oneshot(void **state)
{
	uint64_t rng = 7;
	const size_t n = 300000;
	uint8_t *b = random_bytes(n, &rng);
	(void)state;
	for (int round = 0; round < 40; round++) {
		struct iovec iov[8];
		size_t len = (size_t)(wt_rand(&rng) % n), off = 0;
		int k = 0;
		while (off < len && k < 7) {
			size_t piece = (size_t)(wt_rand(&rng) % (len - off + 1));
			iov[k].iov_base = b + off;
			iov[k].iov_len = piece;
			off += piece;
			k++;
		}
		iov[k].iov_base = b + off;
		iov[k].iov_len = len - off;
		k++;
		uint64_t want = XXH3_64bits(b, len);
		assert_int_equal(ws_xxh64v(iov, k), want);
		assert_int_equal(ws_xxh64v_base(iov, k), want);
		if (ws_xxh_avx2_usable())
			assert_int_equal(ws_xxh64v_avx2(iov, k), want);
	}
	free(b);
}

/* The streaming form, fed in random pieces, equals the one-shot form. */
static void test_stream_equals_oneshot(void **state)
{
	uint64_t rng = 99;
	const size_t n = 200000;
	uint8_t *b = random_bytes(n, &rng);
	(void)state;
	for (int round = 0; round < 60; round++) {
		struct ws_xxh_state st;
		size_t len = round < 5 ? (size_t)round : (size_t)(wt_rand(&rng) % n), off = 0;
		ws_xxh_reset(&st);
		while (off < len) {
			size_t piece = 1 + (size_t)(wt_rand(&rng) % (round % 3 == 0 ? 64 : 9000));
			if (piece > len - off)
				piece = len - off;
			ws_xxh_update(&st, b + off, piece);
			off += piece;
		}
		assert_int_equal(ws_xxh_digest(&st), XXH3_64bits(b, len));
	}
	free(b);
}

/* SHA-256 fed in pieces (an artifact read in ranges) equals the one-shot
 * form, and a context ended without a digest is only freed. */
static void test_sha256_pieces_equal_oneshot(void **state)
{
	uint64_t rng = 7;
	const size_t n = 100000;
	uint8_t *b = random_bytes(n, &rng), want[WS_SHA256_LEN], got[WS_SHA256_LEN];
	(void)state;
	for (int round = 0; round < 20; round++) {
		struct ws_sha256_state st;
		size_t len = round < 3 ? (size_t)round : (size_t)(wt_rand(&rng) % n), off = 0;
		assert_int_equal(ws_sha256_begin(&st), 0);
		while (off < len) {
			size_t piece = 1 + (size_t)(wt_rand(&rng) % 5000);
			if (piece > len - off)
				piece = len - off;
			ws_sha256_update(&st, b + off, piece);
			off += piece;
		}
		ws_sha256_end(&st, got);
		ws_sha256(b, len, want);
		assert_memory_equal(got, want, WS_SHA256_LEN);
		assert_null(st.ctx);
	}
	struct ws_sha256_state st;
	assert_int_equal(ws_sha256_begin(&st), 0);
	ws_sha256_update(&st, b, 10);
	ws_sha256_end(&st, NULL);
	assert_null(st.ctx);
	free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kernels_agree),
		cmocka_unit_test(test_iovec_equals_oneshot),
		cmocka_unit_test(test_stream_equals_oneshot),
		cmocka_unit_test(test_sha256_pieces_equal_oneshot),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
