/*
 * Watermarks as read back from a store: ws_fmt_watermark_decode, tried as is
 * and with the length field and trailing hash made right. An accepted
 * current-version watermark must encode back to exactly its bytes (the CAS
 * compares etags of these bytes); a legacy one to the same fields. One that
 * carries its manifest (version 3) carries exactly the bytes it names: the
 * named length, inside the object, with the named SHA-256. Version 4
 * (manifest slots) names a lane, carries nothing, and names no slot only
 * with a sequence of 0.
 */
#include "fuzz.h"
#include "ws_format.h"
#include "ws_hash.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fuzz_quiet();
	return 0;
}

static void accepted(const uint8_t *obj, size_t len, const struct ws_fmt_watermark *w)
{
	struct ws_buf b;
	struct ws_fmt_watermark again;

	FUZZ_CHECK(w->version >= 1 && w->version <= 4 && (w->seq != 0 || w->version == 4));
	FUZZ_CHECK(ws_tenant_name_valid(w->tenant));
	FUZZ_CHECK(w->seq == 0 ? w->manifest_key[0] == '\0' && w->manifest_length == 0
			       : ws_key_valid(w->manifest_key));
	FUZZ_CHECK((w->version == 3) == (w->carried != NULL));
	FUZZ_CHECK((w->version == 4) == (w->lane != 0));
	if (w->carried) {
		uint8_t sha[WS_SHA256_LEN];
		FUZZ_CHECK(w->carried_len == w->manifest_length && w->carried >= obj &&
			   w->carried + w->carried_len <= obj + len);
		ws_sha256(w->carried, (size_t)w->carried_len, sha);
		FUZZ_CHECK(memcmp(sha, w->manifest_sha, WS_SHA256_LEN) == 0);
	}
	ws_buf_init(&b, 1u << 26);
	FUZZ_CHECK(ws_fmt_watermark_encode(w, &b) == 0);
	if (w->version >= 2)
		FUZZ_CHECK(b.len == len && memcmp(b.data, obj, len) == 0);
	FUZZ_CHECK(ws_fmt_watermark_decode(b.data, b.len, &again) == 0);
	FUZZ_CHECK(again.version == w->version && again.seq == w->seq && again.last_frame == w->last_frame &&
		   ws_fmt_gen_equal(&again.gen, &w->gen) && !strcmp(again.tenant, w->tenant) &&
		   !strcmp(again.manifest_key, w->manifest_key) &&
		   !memcmp(again.manifest_sha, w->manifest_sha, sizeof(again.manifest_sha)) &&
		   again.carried_len == w->carried_len && again.lane == w->lane);
	ws_buf_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ws_fmt_watermark w;
	uint8_t *fixed;

	if (ws_fmt_watermark_decode(data, size, &w) == 0)
		accepted(data, size, &w);
	if (size < 24 || size > UINT32_MAX)
		return 0;
	fixed = fuzz_dup(data, size);
	ws_put_le32(fixed + 12, (uint32_t)size);
	fuzz_put_le64(fixed + size - 8, ws_xxh64(fixed, size - 8));
	if (ws_fmt_watermark_decode(fixed, size, &w) == 0)
		accepted(fixed, size, &w);
	free(fixed);
	return 0;
}
