/*
 * Batch objects (".wsb") as read back from a store: ws_fmt_batch_decode,
 * then what the engine does with an accepted batch's frames (the SQLite
 * checksum chain, by every kernel: they must agree). Each input is tried as
 * is and with its payload and header hashes made right, so mutations of the
 * fields behind the hashes are reached too.
 */
#include "fuzz.h"
#include "ws_format.h"
#include "ws_wal.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fuzz_quiet();
	return 0;
}

static void accepted(const uint8_t *obj, size_t len, const struct ws_fmt_batch *b, const uint8_t *frames)
{
	uint8_t hdr[WS_BATCH_HDR_SIZE];
	struct ws_fmt_batch again;
	size_t n, fsz = ws_wal_frame_size(b->gen.page_size);
	bool be = b->gen.wal_magic == WS_WAL_MAGIC_BE;

	FUZZ_CHECK(frames == obj + WS_BATCH_HDR_SIZE);
	FUZZ_CHECK(b->frame_count >= 1 && WS_BATCH_HDR_SIZE + b->frame_count * fsz == len);
	/* The header the encoder writes for these fields decodes to the same fields. */
	ws_fmt_batch_encode_hdr(b, hdr);
	{
		uint8_t *whole = fuzz_dup(obj, len);
		memcpy(whole, hdr, WS_BATCH_HDR_SIZE);
		FUZZ_CHECK(ws_fmt_batch_decode(whole, len, &again, NULL) == 0);
		FUZZ_CHECK(ws_fmt_gen_equal(&again.gen, &b->gen) && again.first_frame == b->first_frame &&
			   again.frame_count == b->frame_count && again.payload_xxh == b->payload_xxh &&
			   !memcmp(again.seed_cksum, b->seed_cksum, sizeof(again.seed_cksum)) &&
			   !memcmp(again.end_cksum, b->end_cksum, sizeof(again.end_cksum)));
		free(whole);
	}
	n = ws_wal_verify_frames_plain(be, b->gen.page_size, frames, b->frame_count, b->seed_cksum);
	FUZZ_CHECK(n <= b->frame_count);
	for (int k = WS_WAL_SIMD_NONE; k <= WS_WAL_SIMD_AVX2; k++)
		if (ws_wal_simd_available((enum ws_wal_simd)k))
			FUZZ_CHECK(ws_wal_verify_frames_with((enum ws_wal_simd)k, be, b->gen.page_size, frames,
							     b->frame_count, b->seed_cksum) == n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ws_fmt_batch b;
	const uint8_t *frames = NULL;
	uint8_t *fixed;

	if (ws_fmt_batch_decode(data, size, &b, &frames) == 0)
		accepted(data, size, &b, frames);
	if (size < WS_BATCH_HDR_SIZE)
		return 0;
	fixed = fuzz_dup(data, size);
	fuzz_put_le64(fixed + 72, ws_xxh64(fixed + WS_BATCH_HDR_SIZE, size - WS_BATCH_HDR_SIZE));
	fuzz_put_le64(fixed + WS_BATCH_HDR_HASH_OFF, ws_xxh64(fixed, WS_BATCH_HDR_HASH_OFF));
	if (ws_fmt_batch_decode(fixed, size, &b, &frames) == 0)
		accepted(fixed, size, &b, frames);
	free(fixed);
	return 0;
}
