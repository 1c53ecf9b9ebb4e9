/*
 * Sealed batches and snapshot parts (store/seal.c, version 2 of
 * store/format.c): round trips under every codec with and without a key,
 * key rotation, key files, and every way a sealed object can be bad: each a
 * clear error, never a plaintext handed out, never a key's text in a
 * message.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "testutil.h"
#include "ws_format.h"
#include "ws_hash.h"
#include "ws_seal.h"

#define KEY_A "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
#define KEY_B "f0e1d2c3b4a5968778695a4b3c2d1e0ff0e1d2c3b4a5968778695a4b3c2d1e0f"
#define PS 4096u
#define FSZ (24u + PS)
#define SLOT_FRAMES ((4u << 20) / FSZ) /* a full 4 MiB slot */

static struct ws_keyring ring_of(const char *text)
{
	struct ws_keyring kr = { 0 };
	assert_int_equal(ws_keyring_parse(&kr, "test", text, strlen(text)), 0);
	return kr;
}

/* Frames that compress somewhat: a page of a counter and some noise. */
static uint8_t *frames_of(uint32_t n, uint64_t seed)
{
	uint8_t *f = malloc((size_t)n * FSZ);
	assert_non_null(f);
	for (size_t i = 0; i < (size_t)n * FSZ; i++)
		f[i] = (uint8_t)(i % 97 == 0 ? wt_rand(&seed) : i / 64);
	return f;
}

static struct ws_fmt_batch batch_of(const uint8_t *frames, uint32_t n)
{
	struct ws_fmt_batch b;
	memset(&b, 0, sizeof(b));
	b.gen = (struct ws_fmt_gen){ 0x377f0682u, 3, 11, 22, PS };
	b.first_frame = 5;
	b.frame_count = n;
	b.seed_cksum[0] = 7;
	b.end_cksum[1] = 9;
	b.payload_xxh = ws_xxh64(frames, (size_t)n * FSZ);
	return b;
}

/* A sealed batch object: header and stored payload back to back. */
static uint8_t *seal_batch(const struct ws_seal *s, const uint8_t *frames, uint32_t n, size_t *len)
{
	struct ws_fmt_batch b = batch_of(frames, n);
	uint8_t hdr[WS_OBJ_HDR_MAX];
	size_t hl, stored, cap = ws_seal_bound(s, (size_t)n * FSZ);
	uint8_t *out = malloc(cap), *obj;
	assert_non_null(out);
	assert_int_equal(ws_seal_batch(s, &b, &(struct iovec){ (void *)(uintptr_t)frames, (size_t)n * FSZ }, 1, hdr,
				       &hl, out, cap, &stored), 0);
	assert_int_equal(hl, WS_BATCH_HDR2_SIZE);
	assert_true(stored <= cap);
	obj = malloc(hl + stored);
	assert_non_null(obj);
	memcpy(obj, hdr, hl);
	memcpy(obj + hl, out, stored);
	free(out);
	*len = hl + stored;
	return obj;
}

static int open_batch(const struct ws_keyring *kr, const uint8_t *obj, size_t len, const uint8_t *want, uint32_t n)
{
	struct ws_buf plain;
	struct ws_fmt_batch b;
	const uint8_t *fr = NULL;
	ws_buf_init(&plain, (size_t)64 << 20);
	int rc = ws_seal_open_batch(kr, obj, len, &b, &plain, &fr);
	if (rc == 0) {
		assert_int_equal(b.frame_count, n);
		assert_int_equal(b.first_frame, 5);
		assert_memory_equal(fr, want, (size_t)n * FSZ);
	}
	ws_buf_free(&plain);
	return rc;
}

/* Rewrite the header hash after a header byte changed: only the
 * authentication (or the field checks) can catch the change then. */
static void rehash(uint8_t *obj)
{
	uint32_t size = ws_get_le32(obj + 12);
	ws_put_le64(obj + size - 8, ws_xxh64(obj, size - 8));
}

static void test_round_trips(void **state)
{
	(void)state;
	struct ws_keyring kr = ring_of(KEY_A "\n");
	const uint32_t sizes[] = { 1, 2, 37, SLOT_FRAMES };
	for (unsigned codec = WS_FMT_CODEC_NONE; codec <= WS_FMT_CODEC_ZSTD; codec++) {
		for (int keyed = 0; keyed < 2; keyed++) {
			const struct ws_seal s = { .codec = codec, .key = keyed ? ws_keyring_writer(&kr) : NULL };
			for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
				uint8_t *fr = frames_of(sizes[i], i);
				size_t len;
				uint8_t *obj = seal_batch(&s, fr, sizes[i], &len);
				assert_int_equal(ws_get_le32(obj + 8), 2);
				assert_int_equal(ws_get_le32(obj + 88), codec);
				assert_int_equal(ws_get_le32(obj + 92), keyed ? 1 : 0);
				if (codec == WS_FMT_CODEC_ZSTD)
					assert_true(len < WS_BATCH_HDR2_SIZE + (size_t)sizes[i] * FSZ);
				/* Encrypted: the plaintext's first frame is nowhere in it. */
				if (keyed)
					assert_null(memmem(obj, len, fr, 64));
				assert_int_equal(open_batch(&kr, obj, len, fr, sizes[i]), 0);
				/* Neither codec nor key: the format decoder reads it in place. */
				if (!keyed && codec == WS_FMT_CODEC_NONE) {
					struct ws_fmt_batch b;
					assert_int_equal(ws_fmt_batch_decode(obj, len, &b, NULL), 0);
				}
				free(obj);
				free(fr);
			}
		}
	}
	ws_keyring_free(&kr);
}

static void test_snapshot_round_trip(void **state)
{
	(void)state;
	struct ws_keyring kr = ring_of(KEY_A);
	const struct ws_seal s = { .codec = WS_FMT_CODEC_ZSTD, .key = ws_keyring_writer(&kr) };
	uint8_t *pages = frames_of(9, 3); /* 9 * 4120 bytes: 9 pages and more */
	struct ws_fmt_snap sn = { .page_size = PS, .first_page = 4, .page_count = 9 };
	uint8_t hdr[WS_OBJ_HDR_MAX], *out;
	size_t hl, stored, cap = ws_seal_bound(&s, 9 * PS);
	struct ws_buf plain, obj;
	const uint8_t *got;
	struct ws_fmt_snap back;

	sn.payload_xxh = ws_xxh64(pages, 9 * PS);
	out = malloc(cap);
	assert_int_equal(ws_seal_snap(&s, &sn, &(struct iovec){ pages, 9 * PS }, 1, hdr, &hl, out, cap, &stored), 0);
	assert_int_equal(hl, WS_SNAP_HDR2_SIZE);
	ws_buf_init(&obj, 0);
	ws_buf_init(&plain, 0);
	assert_int_equal(ws_buf_append(&obj, hdr, hl), 0);
	assert_int_equal(ws_buf_append(&obj, out, stored), 0);
	assert_int_equal(ws_seal_open_snap(&kr, obj.data, obj.len, &back, &plain, &got), 0);
	assert_int_equal(back.first_page, 4);
	assert_memory_equal(got, pages, 9 * PS);
	/* The format decoder alone refuses to hand out a sealed payload. */
	assert_int_equal(ws_fmt_snap_decode(obj.data, obj.len, &back, &got), WS_EFORMAT);
	/* Without the key. */
	assert_int_equal(ws_seal_open_snap(NULL, obj.data, obj.len, &back, &plain, &got), WS_ENOKEY);
	ws_buf_free(&obj);
	ws_buf_free(&plain);
	free(out);
	free(pages);
	ws_keyring_free(&kr);
}

static void test_rotation(void **state)
{
	(void)state;
	struct ws_keyring a = ring_of("# first key\n" KEY_A "\n");
	struct ws_keyring ab = ring_of(KEY_A "\n\n# rotated\n  " KEY_B "  \r\n");
	struct ws_keyring b = ring_of(KEY_B);
	uint8_t *fr = frames_of(3, 1);
	size_t la, lb;
	char hex[17];

	assert_int_equal(ab.count, 2);
	assert_true(ws_keyring_writer(&ab)->id == ws_keyring_writer(&b)->id);
	uint8_t *oa = seal_batch(&(struct ws_seal){ .codec = 1, .key = ws_keyring_writer(&a) }, fr, 3, &la);
	uint8_t *ob = seal_batch(&(struct ws_seal){ .codec = 1, .key = ws_keyring_writer(&ab) }, fr, 3, &lb);
	assert_int_equal(open_batch(&ab, oa, la, fr, 3), 0);
	assert_int_equal(open_batch(&ab, ob, lb, fr, 3), 0);
	assert_int_equal(open_batch(&b, ob, lb, fr, 3), 0);
	/* Only B: A's object names A's id. */
	assert_int_equal(open_batch(&b, oa, la, fr, 3), WS_ENOKEY);
	snprintf(hex, sizeof(hex), "%016llx", (unsigned long long)ws_keyring_writer(&a)->id);
	assert_non_null(strstr(ws_errmsg(), hex));
	assert_null(strstr(ws_errmsg(), KEY_A));
	/* The key id is the fingerprint the format names. */
	assert_int_equal(ws_get_le64(oa + 96), ws_keyring_writer(&a)->id);
	free(oa);
	free(ob);
	free(fr);
	ws_keyring_free(&a);
	ws_keyring_free(&ab);
	ws_keyring_free(&b);
}

/* Each damage to a sealed object is refused with code; nothing opened. */
static void expect_bad(const struct ws_keyring *kr, uint8_t *obj, size_t len, const uint8_t *fr, int code,
		       const char *says)
{
	assert_int_equal(open_batch(kr, obj, len, fr, 4), code);
	if (says && !strstr(ws_errmsg(), says))
		fail_msg("message '%s' does not say '%s'", ws_errmsg(), says);
	assert_null(strstr(ws_errmsg(), KEY_A));
	assert_null(strstr(ws_errmsg(), KEY_B));
}

static void test_bad_sealed_objects(void **state)
{
	(void)state;
	struct ws_keyring kr = ring_of(KEY_A), other = ring_of(KEY_B);
	const struct ws_seal enc = { .codec = WS_FMT_CODEC_ZSTD, .key = ws_keyring_writer(&kr) };
	const struct ws_seal zst = { .codec = WS_FMT_CODEC_ZSTD };
	uint8_t *fr = frames_of(4, 9);
	size_t len, zlen;
	uint8_t *good = seal_batch(&enc, fr, 4, &len), *zgood = seal_batch(&zst, fr, 4, &zlen);
	uint8_t *o = malloc(len > zlen ? len : zlen);

	expect_bad(&other, good, len, fr, WS_ENOKEY, "not available");
	expect_bad(NULL, good, len, fr, WS_ENOKEY, "not available");
	/* A ciphertext byte, the tag's last byte. */
	memcpy(o, good, len);
	o[WS_BATCH_HDR2_SIZE + 3] ^= 1;
	expect_bad(&kr, o, len, fr, WS_ECORRUPT, "authentication failed");
	memcpy(o, good, len);
	o[len - 1] ^= 0x80;
	expect_bad(&kr, o, len, fr, WS_ECORRUPT, "authentication failed");
	/* A header byte (the additional data): as it is, the header hash;
	 * with the hash made to fit, the authentication. */
	memcpy(o, good, len);
	o[60] ^= 1; /* seed checksum */
	expect_bad(&kr, o, len, fr, WS_ECORRUPT, "header hash");
	rehash(o);
	expect_bad(&kr, o, len, fr, WS_ECORRUPT, "authentication failed");
	memcpy(o, good, len);
	o[104] ^= 1; /* the nonce */
	rehash(o);
	expect_bad(&kr, o, len, fr, WS_ECORRUPT, "authentication failed");
	/* Truncated: the object's length; with the header made to fit, the tag. */
	expect_bad(&kr, good, len - 5, fr, WS_EFORMAT, "truncated");
	memcpy(o, good, len);
	ws_put_le64(o + 120, ws_get_le64(o + 120) - 5);
	rehash(o);
	expect_bad(&kr, o, len - 5, fr, WS_ECORRUPT, "authentication failed");
	/* A garbled zstd stream (no encryption): zstd's error, or a stream
	 * that decodes to other bytes: the plaintext's hash. */
	memcpy(o, zgood, zlen);
	memset(o + WS_BATCH_HDR2_SIZE, 0xee, 8);
	expect_bad(&kr, o, zlen, fr, WS_ECORRUPT, "zstd");
	memcpy(o, zgood, zlen);
	ws_put_le64(o + 120, ws_get_le64(o + 120) - 9);
	rehash(o);
	expect_bad(&kr, o, zlen - 9, fr, WS_ECORRUPT, "zstd");
	/* Foreign version, unknown codec and cipher: named. */
	memcpy(o, good, len);
	ws_put_le32(o + 8, 3);
	rehash(o);
	expect_bad(&kr, o, len, fr, WS_EFORMAT, "version 3");
	memcpy(o, good, len);
	ws_put_le32(o + 88, 7);
	rehash(o);
	expect_bad(&kr, o, len, fr, WS_EFORMAT, "codec 7");
	memcpy(o, good, len);
	ws_put_le32(o + 92, 9);
	rehash(o);
	expect_bad(&kr, o, len, fr, WS_EFORMAT, "cipher 9");
	/* The intact objects still open. */
	assert_int_equal(open_batch(&kr, good, len, fr, 4), 0);
	assert_int_equal(open_batch(NULL, zgood, zlen, fr, 4), 0);
	free(o);
	free(good);
	free(zgood);
	free(fr);
	ws_keyring_free(&kr);
	ws_keyring_free(&other);
}

/* A version 1 object keeps decoding; its version byte made 3 is named. */
static void test_version_one_and_foreign(void **state)
{
	(void)state;
	uint8_t *fr = frames_of(2, 4);
	struct ws_fmt_batch b = batch_of(fr, 2), back;
	uint8_t *obj = malloc(WS_BATCH_HDR_SIZE + 2 * FSZ);
	struct ws_buf plain;
	const uint8_t *got;

	assert_int_equal(ws_fmt_batch_encode_hdr(&b, obj), WS_BATCH_HDR_SIZE);
	memcpy(obj + WS_BATCH_HDR_SIZE, fr, 2 * FSZ);
	ws_buf_init(&plain, 0);
	assert_int_equal(ws_seal_open_batch(NULL, obj, WS_BATCH_HDR_SIZE + 2 * FSZ, &back, &plain, &got), 0);
	assert_ptr_equal(got, obj + WS_BATCH_HDR_SIZE);
	assert_int_equal(plain.len, 0);
	ws_put_le32(obj + 8, 3);
	rehash(obj);
	assert_int_equal(ws_fmt_batch_decode(obj, WS_BATCH_HDR_SIZE + 2 * FSZ, &back, NULL), WS_EFORMAT);
	assert_non_null(strstr(ws_errmsg(), "version 3"));
	ws_buf_free(&plain);
	free(obj);
	free(fr);
}

static void expect_keyfile_bad(const char *text, int code, const char *says)
{
	struct ws_keyring kr = { 0 };
	assert_int_equal(ws_keyring_parse(&kr, "keys.txt", text, strlen(text)), code);
	if (!strstr(ws_errmsg(), says))
		fail_msg("message '%s' does not say '%s'", ws_errmsg(), says);
	assert_non_null(strstr(ws_errmsg(), "keys.txt"));
	assert_null(strstr(ws_errmsg(), KEY_A));
	assert_null(strstr(ws_errmsg(), KEY_A + 2));
	ws_keyring_free(&kr);
}

static void test_key_files(void **state)
{
	(void)state;
	char *dir = wt_tmpdir("seal_keys"), *path = wt_path(dir, "keys"), *missing = wt_path(dir, "nope");
	struct ws_keyring kr = { 0 };

	expect_keyfile_bad("", WS_ECONFIG, "holds no key");
	expect_keyfile_bad("# only a comment\n\n", WS_ECONFIG, "holds no key");
	expect_keyfile_bad(KEY_A "\nnot a key\n", WS_ECONFIG, "line 2");
	expect_keyfile_bad(KEY_A "0\n", WS_ECONFIG, "line 1");          /* 65 characters */
	expect_keyfile_bad("# k\n" KEY_B "\n0011\n", WS_ECONFIG, "line 3"); /* short */
	expect_keyfile_bad("00112233445566778899aabbccddeeff00112233445566778899aabbccddeefg\n", WS_ECONFIG,
			   "not a hex digit");
	expect_keyfile_bad(KEY_A " # trailing comment\n", WS_ECONFIG, "line 1");
	/* From a file; a missing one names itself. */
	assert_int_equal(wt_write_file(path, KEY_A "\n" KEY_B "\n", 130), 0);
	assert_int_equal(ws_keyring_load(&kr, path), 0);
	assert_int_equal(kr.count, 2);
	assert_true(ws_keyring_writer(&kr)->id == ws_seal_key_id(kr.keys[1].bytes));
	/* Loading it again adds nothing; the writer stays the last line's. */
	assert_int_equal(ws_keyring_load(&kr, path), 0);
	assert_int_equal(kr.count, 2);
	assert_int_equal(ws_keyring_load(&kr, missing), -ENOENT);
	assert_non_null(strstr(ws_errmsg(), missing));
	assert_int_equal(wt_write_file(path, "", 0), 0);
	assert_int_equal(ws_keyring_load(&kr, path), WS_ECONFIG);
	assert_non_null(strstr(ws_errmsg(), path));
	ws_keyring_free(&kr);
	assert_null(kr.keys);
	wt_rmrf(dir);
	free(missing);
	free(path);
	free(dir);
}

/*
 * One thread's cipher context serves every key, one object at a time: A,
 * then B, then a failed authentication, then A again. A context that kept
 * a key or a failed state would open the next object wrongly or not at
 * all.
 */
static void test_context_across_keys(void **state)
{
	(void)state;
	struct ws_keyring a = ring_of(KEY_A), b = ring_of(KEY_B), ab = ring_of(KEY_A "\n" KEY_B);
	uint8_t *fr = frames_of(4, 3);
	size_t la, lb, lt;
	uint8_t *oa = seal_batch(&(struct ws_seal){ .codec = 0, .key = ws_keyring_writer(&a) }, fr, 4, &la);
	uint8_t *ob = seal_batch(&(struct ws_seal){ .codec = 1, .key = ws_keyring_writer(&b) }, fr, 4, &lb);
	uint8_t *ot = seal_batch(&(struct ws_seal){ .codec = 1, .key = ws_keyring_writer(&a) }, fr, 4, &lt);
	ot[lt - 1] ^= 1; /* the tag */
	for (int round = 0; round < 3; round++) {
		assert_int_equal(open_batch(&a, oa, la, fr, 4), 0);
		assert_int_equal(open_batch(&b, ob, lb, fr, 4), 0);
		assert_int_equal(open_batch(&ab, ot, lt, fr, 4), WS_ECORRUPT);
		assert_non_null(strstr(ws_errmsg(), "authentication failed"));
		assert_int_equal(open_batch(&ab, oa, la, fr, 4), 0);
		assert_int_equal(open_batch(&ab, ob, lb, fr, 4), 0);
		/* A's object under B's key only: refused by id, never tried. */
		assert_int_equal(open_batch(&b, oa, la, fr, 4), WS_ENOKEY);
	}
	/* Sealing after a failure: a fresh object under B opens with B. */
	uint8_t *ob2 = seal_batch(&(struct ws_seal){ .codec = 1, .key = ws_keyring_writer(&b) }, fr, 4, &lb);
	assert_int_equal(open_batch(&b, ob2, lb, fr, 4), 0);
	free(ob2);
	free(oa);
	free(ob);
	free(ot);
	free(fr);
	ws_keyring_free(&a);
	ws_keyring_free(&b);
	ws_keyring_free(&ab);
}

/* Frames of random bytes: nothing for zstd to find. */
static uint8_t *noise_of(uint32_t n, uint64_t seed)
{
	uint8_t *f = malloc((size_t)n * FSZ);
	assert_non_null(f);
	for (size_t i = 0; i < (size_t)n * FSZ; i++)
		f[i] = (uint8_t)wt_rand(&seed);
	return f;
}

/*
 * A payload that outgrows the buffer it is sealed into: WS_ETOOBIG naming
 * the buffer, for each codec with and without a key (incompressible frames
 * need more than their own size: zstd's bound, the tag); the bound is
 * enough.
 */
static void test_outgrows_buffer(void **state)
{
	(void)state;
	struct ws_keyring kr = ring_of(KEY_A);
	const uint32_t n = 300;
	const size_t plain = (size_t)n * FSZ;
	uint8_t *fr = noise_of(n, 5);
	uint8_t *out = malloc(plain + 4096);
	uint8_t hdr[WS_OBJ_HDR_MAX];
	size_t hl, stored;
	assert_non_null(out);
	for (unsigned codec = WS_FMT_CODEC_NONE; codec <= WS_FMT_CODEC_ZSTD; codec++) {
		for (int keyed = 0; keyed < 2; keyed++) {
			const struct ws_seal s = { .codec = codec, .key = keyed ? ws_keyring_writer(&kr) : NULL };
			if (!ws_seal_on(&s))
				continue;
			struct ws_fmt_batch b = batch_of(fr, n);
			const size_t cap = codec ? plain : plain + (keyed ? WS_SEAL_TAG_LEN : 0) - 1;
			assert_int_equal(ws_seal_batch(&s, &b, &(struct iovec){ fr, plain }, 1, hdr, &hl, out, cap,
						       &stored), WS_ETOOBIG);
			if (!strstr(ws_errmsg(), "byte buffer"))
				fail_msg("message '%s' does not name the buffer", ws_errmsg());
			size_t len;
			uint8_t *obj = seal_batch(&s, fr, n, &len);
			assert_int_equal(open_batch(&kr, obj, len, fr, n), 0);
			free(obj);
		}
	}
	free(out);
	free(fr);
	ws_keyring_free(&kr);
}

/*
 * A batch's window is the whole batch: 2.5 MiB of noise followed by its
 * first 1.5 MiB again stores about 2.5 MiB (the repeat found 2.5 MiB back;
 * level 3's own 2 MiB window would store about 4). And one larger than the
 * largest window (8 MiB) still round-trips.
 */
static void test_whole_batch_window(void **state)
{
	(void)state;
	const size_t first = (size_t)5 << 19, again = (size_t)3 << 19;
	const uint32_t n = (uint32_t)((first + again) / FSZ);
	uint8_t *fr = malloc((size_t)n * FSZ);
	uint64_t seed = 9;
	assert_non_null(fr);
	for (size_t i = 0; i < first; i++)
		fr[i] = (uint8_t)wt_rand(&seed);
	memcpy(fr + first, fr, (size_t)n * FSZ - first);
	size_t len;
	uint8_t *obj = seal_batch(&(struct ws_seal){ .codec = 1 }, fr, n, &len);
	if (len > first + ((size_t)1 << 18))
		fail_msg("%zu stored bytes for %zu of noise and a repeat of it", len, first);
	assert_int_equal(open_batch(NULL, obj, len, fr, n), 0);
	free(obj);
	free(fr);

	const uint32_t big = (uint32_t)(((size_t)10 << 20) / FSZ);
	fr = frames_of(big, 4);
	obj = seal_batch(&(struct ws_seal){ .codec = 1 }, fr, big, &len);
	assert_int_equal(open_batch(NULL, obj, len, fr, big), 0);
	free(obj);
	free(fr);
}

/* Many threads sealing and opening at once, each under its own key and
 * codec, each with its own contexts (a TSan build runs this too). */
#define SEAL_THREADS 8
#define SEAL_ROUNDS 40

struct sealer {
	int index;
	int failed;
};

static void *sealer_main(void *arg)
{
	struct sealer *w = arg;
	char hex[2 * WS_SEAL_KEY_LEN + 1];
	for (unsigned i = 0; i < 2 * WS_SEAL_KEY_LEN; i++)
		hex[i] = "0123456789abcdef"[((unsigned)w->index * 7 + i) % 16];
	hex[2 * WS_SEAL_KEY_LEN] = '\0';
	struct ws_keyring kr = { 0 };
	if (ws_keyring_parse(&kr, "thread", hex, strlen(hex)) != 0)
		return (w->failed = 1, NULL);
	uint8_t *fr = malloc((size_t)16 * FSZ);
	uint64_t seed = (uint64_t)w->index + 1;
	for (size_t i = 0; fr && i < (size_t)16 * FSZ; i++)
		fr[i] = (uint8_t)(i % 61 == 0 ? wt_rand(&seed) : i / 32);
	for (int r = 0; fr && r < SEAL_ROUNDS && !w->failed; r++) {
		const uint32_t n = 1 + (uint32_t)((w->index + r) % 16);
		const struct ws_seal s = { .codec = (uint32_t)(r % 2), .key = (w->index + r) % 3 ? ws_keyring_writer(&kr) : NULL };
		if (!ws_seal_on(&s))
			continue;
		struct ws_fmt_batch b = batch_of(fr, n);
		size_t cap = ws_seal_bound(&s, (size_t)n * FSZ), hl, stored;
		uint8_t *obj = malloc(WS_OBJ_HDR_MAX + cap);
		struct ws_buf plain;
		struct ws_fmt_batch back;
		const uint8_t *got = NULL;
		ws_buf_init(&plain, (size_t)1 << 20);
		if (!obj || ws_seal_batch(&s, &b, &(struct iovec){ fr, (size_t)n * FSZ }, 1, obj, &hl,
					  obj + WS_OBJ_HDR_MAX, cap, &stored) != 0)
			w->failed = 1;
		else {
			memmove(obj + hl, obj + WS_OBJ_HDR_MAX, stored);
			if (ws_seal_open_batch(&kr, obj, hl + stored, &back, &plain, &got) != 0 ||
			    memcmp(got, fr, (size_t)n * FSZ) != 0)
				w->failed = 1;
		}
		ws_buf_free(&plain);
		free(obj);
	}
	free(fr);
	ws_keyring_free(&kr);
	return NULL;
}

static void test_many_threads(void **state)
{
	(void)state;
	pthread_t t[SEAL_THREADS];
	struct sealer w[SEAL_THREADS];
	for (int i = 0; i < SEAL_THREADS; i++) {
		w[i] = (struct sealer){ .index = i };
		assert_int_equal(pthread_create(&t[i], NULL, sealer_main, &w[i]), 0);
	}
	for (int i = 0; i < SEAL_THREADS; i++) {
		assert_int_equal(pthread_join(t[i], NULL), 0);
		assert_int_equal(w[i].failed, 0);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trips),
		cmocka_unit_test(test_snapshot_round_trip),
		cmocka_unit_test(test_rotation),
		cmocka_unit_test(test_bad_sealed_objects),
		cmocka_unit_test(test_version_one_and_foreign),
		cmocka_unit_test(test_key_files),
		cmocka_unit_test(test_context_across_keys),
		cmocka_unit_test(test_outgrows_buffer),
		cmocka_unit_test(test_whole_batch_window),
		cmocka_unit_test(test_many_threads),
	};
	return WT_RUN_GROUP(tests, NULL, NULL);
}
