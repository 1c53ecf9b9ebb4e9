/*
 * SQLite's WAL checksum, a frame at a time, with AVX2 (wal.c has the plain
 * loop, which stays the reference).
 *
 * The checksum is linear over integers modulo 2^32. One pair of words
 * (x0, x1) maps the running state (s1, s2) to M (s1, s2) + (x0, x0 + x1)
 * with M = [[1, 1], [1, 2]], and M^n holds Fibonacci numbers. Unrolling the
 * whole frame, with F the Fibonacci numbers modulo 2^32 (F(0) = 0,
 * F(1) = 1), a frame of P page words x[0..P-1] after the two checksummed
 * header words h0, h1, seeded with (s1, s2), ends at
 *
 *   s1' = F(P+1) (s1 + h0) + F(P+2) s2 + F(P) h1 + sum_p F(P-1-p) x[p]
 *   s2' = F(P+2) (s1 + h0) + F(P+3) s2 + F(P+1) h1 + sum_p F(P-p) x[p]
 *
 * (the coefficient of a word is F of its distance from the end, and
 * F of one more for s2). The two sums are dot products with no
 * loop-carried dependency: eight lanes of 32-bit multiply-add at a time,
 * instead of SQLite's chain of two dependent adds per eight bytes. Each
 * frame is seeded by the stored checksum of the one before it, so frames
 * verify independently. The result is bit-identical to the plain loop
 * (tests/unit/test_io_wal.c compares them on random frames of every page
 * size, in both byte orders).
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "ws_cpu.h"
#include "ws_wal.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_AVX2_KERNEL 1
#endif

#define PMAX (WS_WAL_PAGE_MAX / 4)

/* fib[k] = F(PMAX + 3 - k): reversed, so a frame's coefficients are read
 * forwards. Filled once. */
static uint32_t fib[PMAX + 4];
static pthread_once_t fib_once = PTHREAD_ONCE_INIT;

static void fib_init(void)
{
	uint32_t f[PMAX + 4];
	f[0] = 0;
	f[1] = 1;
	for (size_t k = 2; k < PMAX + 4; k++)
		f[k] = f[k - 1] + f[k - 2];
	for (size_t k = 0; k < PMAX + 4; k++)
		fib[k] = f[PMAX + 3 - k];
}

/* F(n) for 0 <= n <= PMAX + 3. */
static inline uint32_t F(uint32_t n) { return fib[PMAX + 3 - n]; }

#ifdef HAVE_AVX2_KERNEL
__attribute__((target("avx2"))) static inline uint32_t hsum(__m256i v)
{
	__m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
	s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
	s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
	return (uint32_t)_mm_cvtsi128_si32(s);
}

/*
 * sum_p F(P-1-p) x[p] and sum_p F(P-p) x[p] over one page. With c pointing
 * at F(P), c[p] = F(P-p) and c[p+1] = F(P-1-p). P is a multiple of 16.
 */
__attribute__((target("avx2"))) static void dots(bool be, const uint8_t *page, uint32_t P, uint32_t out[2])
{
	const uint32_t *c = &fib[PMAX + 3 - P];
	const __m256i swap = _mm256_setr_epi8(3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12, 3, 2, 1, 0, 7,
					      6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12);
	__m256i a1 = _mm256_setzero_si256(), a2 = a1, b1 = a1, b2 = a1;

	for (uint32_t p = 0; p < P; p += 16) {
		__m256i x0 = _mm256_loadu_si256((const __m256i *)(const void *)(page + 4 * p));
		__m256i x1 = _mm256_loadu_si256((const __m256i *)(const void *)(page + 4 * p + 32));
		if (be) {
			x0 = _mm256_shuffle_epi8(x0, swap);
			x1 = _mm256_shuffle_epi8(x1, swap);
		}
		a2 = _mm256_add_epi32(a2, _mm256_mullo_epi32(x0, _mm256_loadu_si256((const __m256i *)(c + p))));
		a1 = _mm256_add_epi32(a1, _mm256_mullo_epi32(x0, _mm256_loadu_si256((const __m256i *)(c + p + 1))));
		b2 = _mm256_add_epi32(b2, _mm256_mullo_epi32(x1, _mm256_loadu_si256((const __m256i *)(c + p + 8))));
		b1 = _mm256_add_epi32(b1, _mm256_mullo_epi32(x1, _mm256_loadu_si256((const __m256i *)(c + p + 9))));
	}
	out[0] = hsum(_mm256_add_epi32(a1, b1));
	out[1] = hsum(_mm256_add_epi32(a2, b2));
}

static inline uint32_t word(bool be, const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, sizeof(v));
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	return be ? __builtin_bswap32(v) : v;
#else
	return be ? v : __builtin_bswap32(v);
#endif
}

__attribute__((target("avx2"))) static size_t verify_avx2(bool be, uint32_t page_size, const uint8_t *frames,
							 size_t n, const uint32_t seed[2])
{
	const uint32_t fsz = ws_wal_frame_size(page_size), P = page_size / 4;
	const uint32_t fp = F(P), fp1 = F(P + 1), fp2 = F(P + 2), fp3 = F(P + 3);
	uint32_t s1 = seed[0], s2 = seed[1];

	for (size_t i = 0; i < n; i++) {
		const uint8_t *f = frames + i * fsz;
		uint32_t d[2], h0 = word(be, f), h1 = word(be, f + 4), want1, want2;
		dots(be, f + WS_WAL_FRAME_HDR_SIZE, P, d);
		uint32_t c1 = fp1 * (s1 + h0) + fp2 * s2 + fp * h1 + d[0];
		uint32_t c2 = fp2 * (s1 + h0) + fp3 * s2 + fp1 * h1 + d[1];
		want1 = ws_get_be32(f + 16);
		want2 = ws_get_be32(f + 20);
		if (c1 != want1 || c2 != want2)
			return i;
		s1 = want1;
		s2 = want2;
	}
	return n;
}
#endif

bool ws_wal_simd_available(enum ws_wal_simd k)
{
	switch (k) {
	case WS_WAL_SIMD_NONE:
		return true;
	case WS_WAL_SIMD_AVX2:
#ifdef HAVE_AVX2_KERNEL
		return __builtin_cpu_supports("avx2");
#else
		return false;
#endif
	}
	return false;
}

size_t ws_wal_verify_frames_with(enum ws_wal_simd k, bool big_endian, uint32_t page_size, const uint8_t *frames,
				 size_t n, const uint32_t seed[2])
{
#ifdef HAVE_AVX2_KERNEL
	if (k == WS_WAL_SIMD_AVX2 && page_size / 4 >= 16) {
		pthread_once(&fib_once, fib_init);
		return verify_avx2(big_endian, page_size, frames, n, seed);
	}
#else
	(void)k;
#endif
	return ws_wal_verify_frames_plain(big_endian, page_size, frames, n, seed);
}

/* The best kernel this CPU has (ws_cpu.h: WS_SIMD=none keeps the plain loop). */
enum ws_wal_simd ws_wal_simd_best(void)
{
#ifdef HAVE_AVX2_KERNEL
	if (ws_cpu_avx2())
		return WS_WAL_SIMD_AVX2;
#endif
	return WS_WAL_SIMD_NONE;
}

size_t ws_wal_verify_frames(bool big_endian, uint32_t page_size, const uint8_t *frames, size_t n,
			    const uint32_t seed[2])
{
	return ws_wal_verify_frames_with(ws_wal_simd_best(), big_endian, page_size, frames, n, seed);
}
