/*
 * Snapshot parts (".wss") as read back from a store, versions 1 and 2:
 * ws_fmt_snap_decode and ws_seal_open_snap with a keyring of one key, tried
 * as is and with its payload and header hashes made right.
 */
#include "fuzz_sealed.h"
#include "ws_format.h"
#include "ws_seal.h"

static void accepted(const uint8_t *obj, size_t len, const struct ws_fmt_snap *s, const uint8_t *pages, bool opened)
{
	uint8_t hdr[WS_OBJ_HDR_MAX];
	struct ws_fmt_snap again;
	uint8_t *whole;
	size_t hl;

	FUZZ_CHECK(s->page_count >= 1 && s->first_page >= 1);
	if (!opened) {
		hl = ws_get_le32(obj + 12);
		FUZZ_CHECK(pages == obj + hl && hl + (uint64_t)s->page_count * s->page_size == len);
	} else {
		FUZZ_CHECK(plain.len == ws_fmt_snap_plain_len(s) && pages == plain.data);
	}
	/* What the encoder writes for these fields decodes to the same fields. */
	hl = ws_fmt_snap_encode_hdr(s, hdr);
	whole = fuzz_dup(obj, len);
	memcpy(whole, hdr, hl);
	FUZZ_CHECK(ws_fmt_snap_decode_hdr(whole, len, &again, &hl) == 0);
	FUZZ_CHECK(again.page_size == s->page_size && again.first_page == s->first_page &&
		   again.page_count == s->page_count && again.payload_xxh == s->payload_xxh &&
		   !memcmp(&again.seal, &s->seal, sizeof(again.seal)));
	free(whole);
}

static void try_all(const uint8_t *obj, size_t size)
{
	struct ws_fmt_snap s;
	const uint8_t *pages = NULL;
	if (ws_fmt_snap_decode(obj, size, &s, &pages) == 0)
		accepted(obj, size, &s, pages, false);
	if (ws_seal_open_snap(&ring, obj, size, &s, &plain, &pages) == 0)
		accepted(obj, size, &s, pages, !ws_fmt_seal_plain(&s.seal));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *fixed;
	uint32_t hl;

	try_all(data, size);
	if (size < WS_SNAP_HDR_SIZE)
		return 0;
	hl = ws_get_le32(data + 12) == WS_SNAP_HDR2_SIZE ? WS_SNAP_HDR2_SIZE : WS_SNAP_HDR_SIZE;
	if (size < hl)
		return 0;
	fixed = fuzz_dup(data, size);
	fuzz_put_le64(fixed + 32, ws_xxh64(fixed + hl, size - hl));
	fuzz_put_le64(fixed + hl - 8, ws_xxh64(fixed, hl - 8));
	try_all(fixed, size);
	free(fixed);
	return 0;
}
