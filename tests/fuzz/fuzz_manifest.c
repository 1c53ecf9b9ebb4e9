/*
 * Manifests (".wsm") as read back from a store: ws_fmt_manifest_decode,
 * tried as is and with the length field and trailing hash made right. An
 * accepted manifest must encode back to exactly its bytes (one manifest,
 * one byte string: its SHA-256 is what the next manifest and the watermark
 * pin), and must hold the invariants the decoder promises its callers.
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

static void accepted(const uint8_t *obj, size_t len, const struct ws_fmt_manifest *m_in)
{
	struct ws_fmt_manifest mm = *m_in, *m = &mm;
	struct ws_buf b;
	uint64_t next, inl_at = 0, inl_end = 0;
	struct iovec inl;

	FUZZ_CHECK(m->kind <= WS_MANIFEST_REBASE && ws_tenant_name_valid(m->tenant));
	FUZZ_CHECK(m->batch_count == 0 || m->batches != NULL);
	FUZZ_CHECK(m->snap_count == 0 || m->snaps != NULL);
	FUZZ_CHECK(m->first_frame >= 1 && m->valid_from_frame <= m->last_frame);
	/* The batches tile first_frame.. without gap or overlap and cover
	 * last_frame: frame numbers only grow (none wraps past 2^64). */
	next = m->first_frame;
	for (uint32_t i = 0; i < m->batch_count; i++) {
		FUZZ_CHECK(m->batches[i].first == next && m->batches[i].count >= 1);
		if (m->batches[i].key[0] == '\0') {
			/* Inline (version 2): back to back, in ref order, each
			 * inside the object before its trailing hash. */
			const uint64_t off = m->batches[i].inline_off;
			FUZZ_CHECK(off >= 16 && (inl_end == 0 || off == inl_end));
			FUZZ_CHECK(m->batches[i].length >= WS_BATCH_HDR_SIZE && m->batches[i].length <= len - 8 - off);
			if (!inl_end)
				inl_at = off;
			inl_end = off + m->batches[i].length;
		} else {
			FUZZ_CHECK(ws_key_valid(m->batches[i].key) && m->batches[i].inline_off == 0);
		}
		FUZZ_CHECK(m->batches[i].count <= UINT64_MAX - next);
		next += m->batches[i].count;
	}
	FUZZ_CHECK(m->batch_count == 0 || next - 1 >= m->last_frame);
	for (uint32_t i = 0; i < m->snap_count; i++)
		FUZZ_CHECK(ws_key_valid(m->snaps[i].key) && m->snaps[i].count >= 1);
	/* The inline bytes fill the object up to its trailing hash. */
	FUZZ_CHECK(inl_end == 0 || inl_end == len - 8);
	/* The merged tails' index (version 3): only with inline batches,
	 * inside the restorable frames before the last, in order, stamped in
	 * order and never after the manifest. */
	FUZZ_CHECK(m->tail_count == 0 || (m->tails != NULL && inl_end != 0));
	for (uint32_t i = 0; i < m->tail_count; i++) {
		FUZZ_CHECK(m->tails[i].frame >= m->valid_from_frame && m->tails[i].frame < m->last_frame);
		FUZZ_CHECK(m->tails[i].time_ms <= m->time_ms);
		FUZZ_CHECK(i == 0 || (m->tails[i].frame > m->tails[i - 1].frame &&
				      m->tails[i].time_ms >= m->tails[i - 1].time_ms));
	}
	/* A slot (version 4): a lane, no tail index, durable after it was read. */
	FUZZ_CHECK(m->lane == 0 || (m->tail_count == 0 && m->durable_ms >= m->time_ms));
	FUZZ_CHECK(m->lane != 0 || m->durable_ms == 0);
	if (inl_end) {
		inl.iov_base = (void *)(uintptr_t)(obj + inl_at);
		inl.iov_len = (size_t)(inl_end - inl_at);
		m->inline_iov = &inl;
		m->inline_iovcnt = 1;
	}
	ws_buf_init(&b, 64u << 20);
	FUZZ_CHECK(ws_fmt_manifest_encode(m, &b) == 0);
	FUZZ_CHECK(b.len == len && memcmp(b.data, obj, len) == 0);
	ws_buf_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ws_fmt_manifest m;
	uint8_t *fixed;

	if (ws_fmt_manifest_decode(data, size, &m) == 0) {
		accepted(data, size, &m);
		ws_fmt_manifest_free(&m);
	}
	if (size < 24 || size > UINT32_MAX)
		return 0;
	fixed = fuzz_dup(data, size);
	ws_put_le32(fixed + 12, (uint32_t)size);
	fuzz_put_le64(fixed + size - 8, ws_xxh64(fixed, size - 8));
	if (ws_fmt_manifest_decode(fixed, size, &m) == 0) {
		accepted(fixed, size, &m);
		ws_fmt_manifest_free(&m);
	}
	free(fixed);
	return 0;
}
