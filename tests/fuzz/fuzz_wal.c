/*
 * The WAL header and frame parser and the checksum cursor (io/wal.c) on any
 * bytes as a WAL file: ws_wal_scan, then properties an accepted scan must
 * have: resuming at its last commit gives the same end, and every checksum
 * kernel agrees with the plain loop on every run of whole frames. Each input
 * is tried as is and with its header and frame checksums made right (salts
 * and page numbers left as mutated), so the frame checks behind the
 * checksums are reached too.
 */
#include "fuzz.h"
#include "ws_wal.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fuzz_quiet();
	return 0;
}

static void kernels_agree(const struct ws_wal_hdr *h, const uint8_t *frames, size_t n)
{
	uint32_t seed[2] = { h->cksum1, h->cksum2 };
	bool be = h->magic == WS_WAL_MAGIC_BE;
	size_t plain = ws_wal_verify_frames_plain(be, h->page_size, frames, n, seed);

	FUZZ_CHECK(plain <= n);
	for (int k = WS_WAL_SIMD_NONE; k <= WS_WAL_SIMD_AVX2; k++)
		if (ws_wal_simd_available((enum ws_wal_simd)k))
			FUZZ_CHECK(ws_wal_verify_frames_with((enum ws_wal_simd)k, be, h->page_size, frames, n, seed) ==
				   plain);
}

static void check(const uint8_t *buf, size_t len)
{
	struct ws_wal_hdr h;
	struct ws_wal_cursor c, r;
	size_t fsz, whole;

	if (ws_wal_scan(buf, len, &h, &c) != 0)
		return;
	fsz = ws_wal_frame_size(h.page_size);
	whole = (len - WS_WAL_HDR_SIZE) / fsz;
	FUZZ_CHECK(c.next_frame >= 1 && c.next_frame - 1 <= whole);
	FUZZ_CHECK(c.last_commit < c.next_frame);
	kernels_agree(&h, buf + WS_WAL_HDR_SIZE, whole);
	/* The valid frames are a checksum chain from the header's seed. */
	{
		uint32_t seed[2] = { h.cksum1, h.cksum2 };
		FUZZ_CHECK(ws_wal_verify_frames_plain(h.magic == WS_WAL_MAGIC_BE, h.page_size, buf + WS_WAL_HDR_SIZE,
						      c.next_frame - 1, seed) == c.next_frame - 1);
	}
	if (c.last_commit == 0)
		return;
	/* Resuming at the last commit, as a tail does from its watermark, ends where the scan did. */
	ws_wal_cursor_resume(&r, &h, c.last_commit + 1, c.commit_cksum);
	while (r.next_frame < c.next_frame)
		FUZZ_CHECK(ws_wal_cursor_step(&r, buf + ws_wal_frame_offset(h.page_size, r.next_frame), NULL) == 1);
	if ((len - WS_WAL_HDR_SIZE) / fsz >= c.next_frame)
		FUZZ_CHECK(ws_wal_cursor_step(&r, buf + ws_wal_frame_offset(h.page_size, r.next_frame), NULL) == 0);
	FUZZ_CHECK(r.next_frame == c.next_frame && r.last_commit == c.last_commit);
	FUZZ_CHECK(r.cksum[0] == c.cksum[0] && r.cksum[1] == c.cksum[1]);
	FUZZ_CHECK(r.commit_cksum[0] == c.commit_cksum[0] && r.commit_cksum[1] == c.commit_cksum[1]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *fixed;
	uint32_t s[2] = { 0, 0 }, ps;
	bool be;

	check(data, size);
	if (size < WS_WAL_HDR_SIZE)
		return 0;
	fixed = fuzz_dup(data, size);
	be = ws_get_be32(fixed) == WS_WAL_MAGIC_BE;
	ws_wal_checksum(be, fixed, WS_WAL_HDR_SIZE - 8, s);
	ws_put_be32(fixed + 24, s[0]);
	ws_put_be32(fixed + 28, s[1]);
	ps = ws_get_be32(fixed + 8);
	if (ps >= WS_WAL_PAGE_MIN && ps <= WS_WAL_PAGE_MAX && (ps & (ps - 1)) == 0) {
		size_t fsz = ws_wal_frame_size(ps);
		for (size_t off = WS_WAL_HDR_SIZE; size - off >= fsz; off += fsz) {
			ws_wal_checksum(be, fixed + off, 8, s);
			ws_wal_checksum(be, fixed + off + WS_WAL_FRAME_HDR_SIZE, ps, s);
			ws_put_be32(fixed + off + 16, s[0]);
			ws_put_be32(fixed + off + 20, s[1]);
		}
	}
	check(fixed, size);
	free(fixed);
	return 0;
}
