/*
 * Batch objects (".wsb") as read back from a store, versions 1 and 2:
 * ws_fmt_batch_decode, ws_seal_open_batch with a keyring of one key (a
 * sealed batch: zstd, AES-256-GCM), then what the engine does with an
 * accepted batch's frames (the SQLite checksum chain, by every kernel: they
 * must agree). Each input is tried as is and with its payload and header
 * hashes made right, so mutations of the fields behind the hashes are
 * reached too; frames accepted are sealed again under every codec, with
 * and without the key, and must open to the same bytes.
 */
#include "fuzz_sealed.h"
#include "ws_format.h"
#include "ws_seal.h"
#include "ws_wal.h"

/* Sealed again under s, the frames open to themselves. */
static void reseal(const struct ws_seal *s, const struct ws_fmt_batch *b, const uint8_t *frames)
{
	const size_t len = (size_t)ws_fmt_batch_plain_len(b), cap = ws_seal_bound(s, len);
	uint8_t hdr[WS_OBJ_HDR_MAX], *obj = malloc(WS_OBJ_HDR_MAX + cap);
	struct ws_fmt_batch sealed = *b, back;
	struct ws_buf out;
	size_t hl, stored;
	const uint8_t *got;

	FUZZ_CHECK(obj != NULL);
	memset(&sealed.seal, 0, sizeof(sealed.seal));
	FUZZ_CHECK(ws_seal_batch(s, &sealed, &(struct iovec){ (void *)(uintptr_t)frames, len }, 1, hdr, &hl,
				 obj + WS_OBJ_HDR_MAX, cap, &stored) == 0);
	memmove(obj + hl, obj + WS_OBJ_HDR_MAX, stored);
	memcpy(obj, hdr, hl);
	ws_buf_init(&out, (size_t)64 << 20);
	FUZZ_CHECK(ws_seal_open_batch(&ring, obj, hl + stored, &back, &out, &got) == 0);
	FUZZ_CHECK(back.frame_count == b->frame_count && !memcmp(got, frames, len));
	ws_buf_free(&out);
	free(obj);
}

static void accepted(const uint8_t *obj, size_t len, const struct ws_fmt_batch *b, const uint8_t *frames,
		     bool opened)
{
	uint8_t hdr[WS_OBJ_HDR_MAX];
	struct ws_fmt_batch again;
	size_t n, hl, fsz = ws_wal_frame_size(b->gen.page_size);
	bool be = b->gen.wal_magic == WS_WAL_MAGIC_BE;

	FUZZ_CHECK(b->frame_count >= 1);
	if (!opened) {
		hl = ws_get_le32(obj + 12);
		FUZZ_CHECK(frames == obj + hl && hl + b->frame_count * fsz == len);
	}
	/* The header the encoder writes for these fields decodes to the same fields. */
	hl = ws_fmt_batch_encode_hdr(b, hdr);
	{
		uint8_t *whole = fuzz_dup(obj, len);
		memcpy(whole, hdr, hl);
		FUZZ_CHECK(ws_fmt_batch_decode_hdr(whole, len, &again, &hl) == 0);
		FUZZ_CHECK(ws_fmt_gen_equal(&again.gen, &b->gen) && again.first_frame == b->first_frame &&
			   again.frame_count == b->frame_count && again.payload_xxh == b->payload_xxh &&
			   !memcmp(again.seed_cksum, b->seed_cksum, sizeof(again.seed_cksum)) &&
			   !memcmp(again.end_cksum, b->end_cksum, sizeof(again.end_cksum)) &&
			   !memcmp(&again.seal, &b->seal, sizeof(again.seal)));
		free(whole);
	}
	n = ws_wal_verify_frames_plain(be, b->gen.page_size, frames, b->frame_count, b->seed_cksum);
	FUZZ_CHECK(n <= b->frame_count);
	for (int k = WS_WAL_SIMD_NONE; k <= WS_WAL_SIMD_AVX2; k++)
		if (ws_wal_simd_available((enum ws_wal_simd)k))
			FUZZ_CHECK(ws_wal_verify_frames_with((enum ws_wal_simd)k, be, b->gen.page_size, frames,
							     b->frame_count, b->seed_cksum) == n);
	if (ws_fmt_batch_plain_len(b) <= (1u << 20))
		for (unsigned c = WS_FMT_CODEC_NONE; c <= WS_FMT_CODEC_ZSTD; c++) {
			reseal(&(struct ws_seal){ .codec = c }, b, frames);
			reseal(&(struct ws_seal){ .codec = c, .key = &ring.keys[0] }, b, frames);
		}
}

static void try_all(const uint8_t *obj, size_t size)
{
	struct ws_fmt_batch b;
	const uint8_t *frames = NULL;
	if (ws_fmt_batch_decode(obj, size, &b, &frames) == 0)
		accepted(obj, size, &b, frames, false);
	if (ws_seal_open_batch(&ring, obj, size, &b, &plain, &frames) == 0)
		accepted(obj, size, &b, frames, !ws_fmt_seal_plain(&b.seal));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *fixed;
	uint32_t hl;

	try_all(data, size);
	if (size < WS_BATCH_HDR_SIZE)
		return 0;
	/* The hashes made right for the header size the object names. */
	hl = ws_get_le32(data + 12) == WS_BATCH_HDR2_SIZE ? WS_BATCH_HDR2_SIZE : WS_BATCH_HDR_SIZE;
	if (size < hl)
		return 0;
	fixed = fuzz_dup(data, size);
	fuzz_put_le64(fixed + 72, ws_xxh64(fixed + hl, size - hl));
	fuzz_put_le64(fixed + hl - 8, ws_xxh64(fixed, hl - 8));
	try_all(fixed, size);
	free(fixed);
	return 0;
}
