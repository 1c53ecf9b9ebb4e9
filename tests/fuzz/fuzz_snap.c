/*
 * Snapshot parts (".wss") as read back from a store: ws_fmt_snap_decode,
 * tried as is and with its payload and header hashes made right.
 */
#include "fuzz.h"
#include "ws_format.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fuzz_quiet();
	return 0;
}

static void accepted(const uint8_t *obj, size_t len, const struct ws_fmt_snap *s, const uint8_t *pages)
{
	uint8_t hdr[WS_SNAP_HDR_SIZE];
	struct ws_fmt_snap again;
	uint8_t *whole;

	FUZZ_CHECK(pages == obj + WS_SNAP_HDR_SIZE);
	FUZZ_CHECK(s->page_count >= 1 && s->first_page >= 1);
	FUZZ_CHECK(WS_SNAP_HDR_SIZE + (uint64_t)s->page_count * s->page_size == len);
	/* What the encoder writes for these fields decodes to the same fields. */
	ws_fmt_snap_encode_hdr(s, hdr);
	whole = fuzz_dup(obj, len);
	memcpy(whole, hdr, WS_SNAP_HDR_SIZE);
	FUZZ_CHECK(ws_fmt_snap_decode(whole, len, &again, NULL) == 0);
	FUZZ_CHECK(again.page_size == s->page_size && again.first_page == s->first_page &&
		   again.page_count == s->page_count && again.payload_xxh == s->payload_xxh);
	free(whole);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ws_fmt_snap s;
	const uint8_t *pages = NULL;
	uint8_t *fixed;

	if (ws_fmt_snap_decode(data, size, &s, &pages) == 0)
		accepted(data, size, &s, pages);
	if (size < WS_SNAP_HDR_SIZE)
		return 0;
	fixed = fuzz_dup(data, size);
	fuzz_put_le64(fixed + 32, ws_xxh64(fixed + WS_SNAP_HDR_SIZE, size - WS_SNAP_HDR_SIZE));
	fuzz_put_le64(fixed + WS_SNAP_HDR_HASH_OFF, ws_xxh64(fixed, WS_SNAP_HDR_HASH_OFF));
	if (ws_fmt_snap_decode(fixed, size, &s, &pages) == 0)
		accepted(fixed, size, &s, pages);
	free(fixed);
	return 0;
}
