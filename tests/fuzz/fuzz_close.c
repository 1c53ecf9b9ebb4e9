/*
 * Close records (manifest slots, docs/FORMAT.md "Close record") as read back
 * from a store: ws_fmt_close_decode, tried as is and with the length field
 * and trailing hash made right. An accepted one must encode back to exactly
 * its bytes, hold the rules the decoder promises (a sequence and a lane,
 * closed by removal with no closer or by a token that fences the closed
 * one), and be a close record to ws_fmt_slot_kind.
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

static void accepted(const uint8_t *obj, size_t len, const struct ws_fmt_close *c)
{
	enum ws_fmt_slot_kind kind;
	struct ws_buf b;

	FUZZ_CHECK(c->seq >= 1 && c->lane != 0 && ws_tenant_name_valid(c->tenant));
	if (c->removed)
		FUZZ_CHECK(c->closer_epoch == 0 && c->closer_pg == 0 && c->closer_lane == 0);
	else
		FUZZ_CHECK(c->closer_lane != 0 && ws_fmt_token_fences(c->closer_epoch, c->closer_pg, c->epoch,
								      c->pointer_generation));
	FUZZ_CHECK((c->seq == 1) == (c->prev_key[0] == '\0'));
	FUZZ_CHECK(c->prev_key[0] == '\0' || ws_key_valid(c->prev_key));
	FUZZ_CHECK(ws_fmt_slot_kind(obj, len, &kind) == 0 && kind == WS_FMT_SLOT_CLOSE);
	ws_buf_init(&b, 1u << 20);
	FUZZ_CHECK(ws_fmt_close_encode(c, &b) == 0);
	FUZZ_CHECK(b.len == len && memcmp(b.data, obj, len) == 0);
	ws_buf_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ws_fmt_close c;
	enum ws_fmt_slot_kind kind;
	uint8_t *fixed;

	if (ws_fmt_close_decode(data, size, &c) == 0)
		accepted(data, size, &c);
	(void)!ws_fmt_slot_kind(data, size, &kind);
	if (size < 24 || size > UINT32_MAX)
		return 0;
	fixed = fuzz_dup(data, size);
	ws_put_le32(fixed + 12, (uint32_t)size);
	fuzz_put_le64(fixed + size - 8, ws_xxh64(fixed, size - 8));
	if (ws_fmt_close_decode(fixed, size, &c) == 0)
		accepted(fixed, size, &c);
	free(fixed);
	return 0;
}
