/*
 * Sealed checkpoint artifacts (store/artseal.c): round trips under every
 * codec with and without a key, at chunk boundaries and for an empty
 * image; every damage (a byte of a chunk, of the header, a chunk cut short,
 * chunks swapped with their entries, a chunk from another artifact sealed
 * with the same key) and every foreign value (version, codec, cipher, chunk
 * size) a named error; a missing or wrong key WS_ENOKEY naming the key id,
 * never a key's text.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "ws_artseal.h"
#include "ws_format.h"
#include "ws_hash.h"
#include "ws_seal.h"

#define KEY_A "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
#define KEY_B "f0e1d2c3b4a5968778695a4b3c2d1e0ff0e1d2c3b4a5968778695a4b3c2d1e0f"
#define CH WS_ART_CHUNK_MIN

static struct ws_keyring ring_a, ring_b;

static int setup(void **state)
{
	(void)state;
	assert_int_equal(ws_keyring_parse(&ring_a, "a", KEY_A, 64), 0);
	assert_int_equal(ws_keyring_parse(&ring_b, "b", KEY_B, 64), 0);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	ws_keyring_free(&ring_a);
	ws_keyring_free(&ring_b);
	return 0;
}

static uint8_t *image_of(size_t len, uint64_t seed)
{
	uint8_t *p = malloc(len ? len : 1);
	assert_non_null(p);
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)(i % 61 == 0 ? wt_rand(&seed) : i / 100);
	return p;
}

static struct ws_seal seal_of(int variant)
{
	return (struct ws_seal){ .codec = (uint32_t)(variant & 1), .key = variant & 2 ? &ring_a.keys[0] : NULL };
}

/* obj (a copy) opened with kr: the error, and the message has no key. */
static int open_copy(const struct ws_keyring *kr, const uint8_t *obj, size_t len, struct ws_buf *plain)
{
	uint8_t *c = malloc(len ? len : 1);
	assert_non_null(c);
	memcpy(c, obj, len);
	int rc = ws_art_open_buf(kr, c, len, plain);
	free(c);
	if (rc) {
		assert_null(strstr(ws_errmsg(), KEY_A));
		assert_null(strstr(ws_errmsg(), KEY_B));
	}
	return rc;
}

static void test_round_trip(void **state)
{
	static const size_t lens[] = { 0, 1, CH - 1, CH, 2 * CH, 3 * CH + 123 };
	struct ws_buf obj, plain;
	(void)state;
	ws_buf_init(&obj, 0);
	ws_buf_init(&plain, 0);
	for (int v = 0; v < 4; v++) {
		struct ws_seal s = seal_of(v);
		for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
			uint8_t *img = image_of(lens[i], i + 1);
			struct ws_art_hdr h;
			assert_int_equal(ws_art_seal_buf(&s, CH, img, lens[i], &obj), 0);
			assert_true(ws_art_sealed(obj.data, obj.len));
			assert_int_equal(ws_art_hdr_decode(obj.data, obj.len, &h), 0);
			assert_int_equal(h.chunk_count, (lens[i] + CH - 1) / CH);
			assert_int_equal(ws_art_length(&h), obj.len);
			ws_art_hdr_free(&h);
			assert_int_equal(open_copy(&ring_a, obj.data, obj.len, &plain), 0);
			assert_int_equal(plain.len, lens[i]);
			assert_true(lens[i] == 0 || memcmp(plain.data, img, lens[i]) == 0);
			/* Encrypted: no run of the image shows in the object. */
			if (s.key && lens[i] >= 64)
				assert_null(memmem(obj.data, obj.len, img + lens[i] - 64, 64));
			free(img);
		}
	}
	ws_buf_free(&obj);
	ws_buf_free(&plain);
}

/* Header hash made right after a change to the header's bytes. */
static void rehash(uint8_t *p)
{
	size_t hs = ws_get_le32(p + 12);
	ws_put_le64(p + hs - 8, ws_xxh64(p, hs - 8));
}

static void expect(const struct ws_keyring *kr, const uint8_t *obj, size_t len, int want, const char *words)
{
	struct ws_buf plain;
	ws_buf_init(&plain, 0);
	int rc = open_copy(kr, obj, len, &plain);
	if (rc != want || (words && !strstr(ws_errmsg(), words)))
		fail_msg("got %s '%s', want %s '%s'", ws_strerror(rc), ws_errmsg(), ws_strerror(want), words);
	ws_buf_free(&plain);
}

static void test_damage(void **state)
{
	struct ws_buf a, b;
	struct ws_art_hdr h;
	const size_t len = 3 * CH + 500;
	uint8_t *img = image_of(len, 7), *m;
	struct ws_seal s = seal_of(3);
	(void)state;
	ws_buf_init(&a, 0);
	ws_buf_init(&b, 0);
	assert_int_equal(ws_art_seal_buf(&s, CH, img, len, &a), 0);
	assert_int_equal(ws_art_seal_buf(&s, CH, img, len, &b), 0); /* the same image, another salt */
	assert_int_equal(ws_art_hdr_decode(a.data, a.len, &h), 0);
	m = malloc(a.len);
	const uint64_t c1 = ws_art_chunk_off(&h, 1);

	/* A byte of chunk 1, of its tag, of the header. */
	memcpy(m, a.data, a.len);
	m[c1 + 3] ^= 1;
	expect(&ring_a, m, a.len, WS_ECORRUPT, "chunk 1: authentication failed");
	memcpy(m, a.data, a.len);
	m[ws_art_chunk_off(&h, 2) - 1] ^= 1;
	expect(&ring_a, m, a.len, WS_ECORRUPT, "authentication failed");
	memcpy(m, a.data, a.len);
	m[70] ^= 1;
	expect(&ring_a, m, a.len, WS_ECORRUPT, "header hash");
	rehash(m); /* the image's SHA-256 changed, the hash made right: every chunk's AAD differs */
	expect(&ring_a, m, a.len, WS_ECORRUPT, "chunk 0: authentication failed");
	/* Cut short. */
	expect(&ring_a, a.data, a.len - 5, WS_ECORRUPT, "header gives");
	/* Chunks 0 and 1 swapped with their entries (same lengths: the image compresses alike). */
	memcpy(m, a.data, a.len);
	{
		const size_t l0 = h.chunks[0].stored_len, l1 = h.chunks[1].stored_len, o0 = ws_art_chunk_off(&h, 0);
		uint8_t e[WS_ART_ENTRY], *t = malloc(l0 + l1);
		memcpy(t, a.data + o0 + l0, l1);
		memcpy(t + l1, a.data + o0, l0);
		memcpy(m + o0, t, l0 + l1);
		memcpy(e, m + WS_ART_FIXED, WS_ART_ENTRY);
		memcpy(m + WS_ART_FIXED, m + WS_ART_FIXED + WS_ART_ENTRY, WS_ART_ENTRY);
		memcpy(m + WS_ART_FIXED + WS_ART_ENTRY, e, WS_ART_ENTRY);
		rehash(m);
		free(t);
	}
	expect(&ring_a, m, a.len, WS_ECORRUPT, "chunk 0: authentication failed");
	/* Chunk 1 (and its entry) from another artifact of the same image and key. */
	if (b.len == a.len) {
		memcpy(m, a.data, a.len);
		memcpy(m + c1, b.data + c1, h.chunks[1].stored_len);
		memcpy(m + WS_ART_FIXED + WS_ART_ENTRY, b.data + WS_ART_FIXED + WS_ART_ENTRY, WS_ART_ENTRY);
		rehash(m);
		expect(&ring_a, m, a.len, WS_ECORRUPT, "chunk 1: authentication failed");
	}
	/* No key, a wrong key: the key id named. */
	char id[17];
	snprintf(id, sizeof(id), "%016" PRIx64, ring_a.keys[0].id);
	expect(NULL, a.data, a.len, WS_ENOKEY, id);
	expect(&ring_b, a.data, a.len, WS_ENOKEY, id);
	ws_art_hdr_free(&h);
	free(m);
	free(img);
	ws_buf_free(&a);
	ws_buf_free(&b);
}

/* Every foreign value a WS_EFORMAT naming it. */
static void test_foreign(void **state)
{
	struct ws_buf a;
	const size_t len = 2 * CH;
	uint8_t *img = image_of(len, 9);
	struct ws_seal s = seal_of(3);
	static const struct { size_t off; uint32_t v; const char *words; } f[] = {
		{ 8, 3, "version 3 is unknown" }, { 8, 1, "version 1 is unknown" },
		{ 16, 2, "codec 2 is unknown" }, { 20, 9, "cipher 9 is unknown" },
		{ 56, 100, "chunk size 100" }, { 60, 3, "3 chunks" }, { 12, 1u << 30, "header size" },
	};
	(void)state;
	ws_buf_init(&a, 0);
	assert_int_equal(ws_art_seal_buf(&s, CH, img, len, &a), 0);
	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
		uint8_t *m = malloc(a.len);
		memcpy(m, a.data, a.len);
		ws_put_le32(m + f[i].off, f[i].v);
		if (f[i].off != 12)
			rehash(m);
		expect(&ring_a, m, a.len, WS_EFORMAT, f[i].words);
		free(m);
	}
	/* A key id without a cipher; a nonce without one. */
	uint8_t *m = malloc(a.len);
	memcpy(m, a.data, a.len);
	ws_put_le32(m + 20, 0);
	rehash(m);
	expect(&ring_a, m, a.len, WS_EFORMAT, "key id without a cipher");
	ws_put_le64(m + 24, 0);
	rehash(m);
	expect(&ring_a, m, a.len, WS_EFORMAT, "nonce without a cipher");
	/* Too short for a header; not the magic. */
	expect(&ring_a, a.data, 10, WS_EFORMAT, "not a sealed artifact");
	memcpy(m, "SQLite format 3", 16);
	expect(&ring_a, m, a.len, WS_EFORMAT, "not a sealed artifact");
	free(m);
	free(img);
	ws_buf_free(&a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_damage),
		cmocka_unit_test(test_foreign),
	};
	return WT_RUN_GROUP(tests, setup, teardown);
}
