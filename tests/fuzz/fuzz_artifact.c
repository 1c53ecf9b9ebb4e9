/*
 * Sealed checkpoint artifacts (version 2) as read back from a store:
 * ws_art_hdr_decode, and ws_art_open_buf with a keyring of one key, tried
 * as is and with the header hash made right. An accepted header encodes
 * back to the same bytes; an opened artifact's image has the length its
 * header gives.
 */
#include "fuzz_sealed.h"
#include "ws_artseal.h"
#include "ws_format.h"
#include "ws_seal.h"

static void one(uint8_t *obj, size_t len)
{
	struct ws_art_hdr h;
	if (ws_art_hdr_decode(obj, len, &h) != 0)
		return;
	const size_t hs = ws_art_hdr_size(h.chunk_count);
	uint8_t *again = malloc(hs);
	FUZZ_CHECK(again && hs <= len && hs == ws_get_le32(obj + 12));
	ws_art_hdr_encode(&h, again);
	FUZZ_CHECK(memcmp(again, obj, hs) == 0);
	free(again);
	/* Images of at most 16 MiB are opened (the header may claim more). */
	if (h.plain_len <= (16u << 20) && ws_art_open_buf(&ring, obj, len, &plain) == 0)
		FUZZ_CHECK(plain.len == h.plain_len && ws_art_length(&h) == len);
	ws_art_hdr_free(&h);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *c = malloc(size ? size : 1);
	if (!c)
		return 0;
	memcpy(c, data, size);
	one(c, size);
	/* The header hash made right, so mutations reach the checks behind it. */
	if (size >= WS_ART_PEEK && ws_art_sealed(data, size)) {
		size_t hs = ws_get_le32(data + 12);
		if (hs >= 16 && hs <= size) {
			memcpy(c, data, size);
			ws_put_le64(c + hs - 8, ws_xxh64(c, hs - 8));
			one(c, size);
		}
	}
	free(c);
	return 0;
}
