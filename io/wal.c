/*
 * SQLite WAL format: header and frame parsing, checksums, verification.
 *
 * This file owns the format, so here it is byte by byte (after SQLite's
 * src/wal.c, which is the authority; where this comment and SQLite differ,
 * SQLite wins).
 *
 * FILE
 *   A WAL file is a 32-byte header followed by zero or more frames. It only
 *   ever grows from the start towards the end; after a WAL reset SQLite
 *   rewrites the header in place (new salts) and overwrites frames from
 *   frame 1 again, so bytes past the newest frame may be frames of an older
 *   generation.
 *
 * HEADER (32 bytes, eight big-endian u32, whatever the checksum byte order)
 *    0  magic           0x377f0682: checksums are over little-endian u32 words
 *                       0x377f0683: checksums are over big-endian u32 words
 *                       (SQLite writes the host's order, so x86 gives ...82)
 *    4  version         3007000; nothing else exists
 *    8  page size       a power of two, 512..65536, stored as the plain value
 *                       (65536 is 0x00010000). The "1 means 65536" encoding
 *                       belongs to the database header and the wal-index, not
 *                       to this file: SQLite writes the plain value here and
 *                       its recovery treats a WAL header with page size 1
 *                       (or any value below 512) as no WAL at all, so do we.
 *   12  checkpoint seq  incremented by each WAL reset
 *   16  salt-1          incremented by each WAL reset
 *   20  salt-2          a fresh random value at each WAL reset
 *   24  checksum-1      checksum (below) of bytes 0..23, seeded with 0, 0
 *   28  checksum-2
 *
 * FRAME (24-byte header of six big-endian u32, then one page)
 *    0  page number     1-based; 0 is never valid
 *    4  db size         for a commit frame the database size in pages after
 *                       the commit; 0 for every other frame
 *    8  salt-1          copied from the WAL header when the frame was written
 *   12  salt-2
 *   16  checksum-1      cumulative checksum, see below
 *   20  checksum-2
 *   24  page data       page size bytes
 *   Frame n (1-based) starts at 32 + (n - 1) * (24 + page size).
 *
 * CHECKSUM
 *   Over a byte string whose length is a multiple of 8, taken as u32 words
 *   x[0], x[1], ... in the byte order named by the magic, with a running pair
 *   (s1, s2) of u32 that wraps modulo 2^32:
 *       for (i = 0; i < n; i += 2) {
 *               s1 += x[i] + s2;
 *               s2 += x[i + 1] + s1;
 *       }
 *   The header checksum runs over header bytes 0..23 from (0, 0). Frame 1's
 *   checksum runs over its header bytes 0..7 and then its page, seeded with
 *   the header checksum; frame n's is seeded with frame n-1's. So each frame
 *   commits to every frame before it in this generation.
 *
 * VALIDITY (SQLite's walDecodeFrame and walIndexRecover)
 *   The header is valid when magic, page size and checksum check out; a
 *   version other than 3007000 is an error. A frame is valid when its salts
 *   equal the header's, its page number is not 0, and its checksum equals
 *   the running checksum computed as above. Scanning stops at the first
 *   frame that is not valid, or at a frame the file does not hold in full.
 *   Of the valid prefix, only frames up to and including the last commit
 *   frame are part of the database: valid frames after it are a transaction
 *   still being written (or one whose commit frame was torn) and are
 *   ignored, exactly as SQLite ignores them on recovery.
 *
 * TORN TAIL
 *   A crash mid-append leaves a partial frame, a frame of zeros (a file
 *   extended but not yet written), or a frame whose bytes are partly old and
 *   partly new. A reader never treats any of these as an error: the checksum
 *   (or the short length) ends the WAL there, and the database is what the
 *   last commit frame before that point says. Stale frames from an older
 *   generation carry the old salts and end the WAL the same way.
 *
 *   SQLite also treats a header that fails its checks (including a 0-byte
 *   file, which is what a TRUNCATE WAL checkpoint leaves) as an empty WAL.
 *   ws_wal_hdr_parse reports WS_ENOTWAL for these so the caller can tell a
 *   foreign file from a WAL; a caller mirroring SQLite maps a 0-byte file to
 *   "no frames".
 *
 * WAL-INDEX HEADER (SQLite's WalIndexHdr; the -shm's first 96 bytes)
 *   Two copies of a 48-byte header. A writer stores the second copy, then
 *   the first; a reader copies the first, then the second, and takes them
 *   only when both are equal, initialised and their checksum right
 *   (walIndexTryHdr); otherwise a writer is between its stores: read again.
 *   Every field is in the host's byte order except the salts:
 *    0  iVersion        3007000
 *    4  unused
 *    8  iChange         counts transactions
 *   12  isInit          1 once a connection has built the wal-index
 *   13  bigEndCksum     the WAL's checksum word order
 *   14  szPage          u16 page size, 65536 written as 1
 *   16  mxFrame         the last frame readers may use (a commit), 0 none
 *   20  nPage           the database's size in pages at mxFrame
 *   24  aFrameCksum     checksum of frame mxFrame, two u32
 *   32  aSalt           the WAL header's bytes 16..23 as they are (so
 *                       big-endian words, the WAL header's salts)
 *   40  aCksum          checksum (above) of bytes 0..39, native word order
 *   A restart (a writer beginning the WAL again) sets mxFrame to 0 and
 *   salt-1 to the old one plus 1 before the file's header is rewritten.
 *
 * DATABASE HEADER (the first 100 bytes of page 1, big-endian; the fields
 * this project reads)
 *    0  magic           "SQLite format 3\0"
 *   16  page size       u16, 1 means 65536
 *   18  write version   1 rollback journal, 2 WAL
 *   19  read version    the same
 *   24  change counter  bumped by every transaction (rollback mode)
 *   28  page count      the database's size in pages, valid only when
 *                       version-valid-for equals the change counter
 *                       (SQLite >= 3.7.0 writes both); else the file's size
 *   92  version-valid-for
 */
#include "ws_wal.h"
#include "ws_assert.h"
#include "ws_hash.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if !defined(__BYTE_ORDER__) || \
	(__BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__ && __BYTE_ORDER__ != __ORDER_BIG_ENDIAN__)
#error "walship needs a little- or big-endian host"
#endif

static_assert(WS_WAL_HDR_SIZE % 8 == 0 && WS_WAL_FRAME_HDR_SIZE % 8 == 0,
	      "checksummed ranges must be whole 8-byte pairs");

static bool page_size_valid(uint32_t page_size)
{
	return page_size >= WS_WAL_PAGE_MIN && page_size <= WS_WAL_PAGE_MAX &&
	       (page_size & (page_size - 1)) == 0;
}

/*
 * One 8-byte pair as two u32 words in the WAL's checksum byte order. A single
 * 8-byte load (memcpy compiles to one mov) plus at most one bswap replaces
 * eight byte loads and shifts; with want_be a compile-time constant in each
 * caller the branch disappears.
 */
static inline __attribute__((always_inline)) void
load_pair(const uint8_t *p, bool want_be, uint32_t *x0, uint32_t *x1)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	if (want_be)
		v = __builtin_bswap64(v);
	/* LE words: word 0 is the low half; BE (after bswap): the high half. */
	*x0 = want_be ? (uint32_t)(v >> 32) : (uint32_t)v;
	*x1 = want_be ? (uint32_t)v : (uint32_t)(v >> 32);
#else
	if (!want_be)
		v = __builtin_bswap64(v);
	*x0 = want_be ? (uint32_t)(v >> 32) : (uint32_t)v;
	*x1 = want_be ? (uint32_t)v : (uint32_t)(v >> 32);
#endif
}

/*
 * The recurrence is linear: one pair maps (s1, s2) to M (s1, s2) + u with
 * M = [[1, 1], [1, 2]] and u = (x0, x0 + x1). Four pairs therefore map it to
 * M^4 (s1, s2) + t, where M^4 = [[13, 21], [21, 34]] (M^n holds Fibonacci
 * numbers) and t is the same recurrence run over the four pairs from (0, 0).
 * t does not depend on the running state, so the CPU computes the next
 * block's t while the previous block's state update is still in flight; the
 * loop-carried chain shrinks from eight dependent adds per 32 bytes to one
 * multiply-add. All arithmetic is modulo 2^32, like SQLite's, so the result
 * is bit-identical (the unit tests compare against the plain loop).
 */
static inline __attribute__((always_inline)) void
checksum_body(bool want_be, const uint8_t *p, size_t len, uint32_t s[2])
{
	uint32_t s1 = s[0], s2 = s[1];
	const uint8_t *end = p + len;
	uint32_t a, b;

	while (end - p >= 32) {
		uint32_t t1 = 0, t2 = 0, n1, n2;

		load_pair(p, want_be, &a, &b);
		t1 += a + t2; t2 += b + t1;
		load_pair(p + 8, want_be, &a, &b);
		t1 += a + t2; t2 += b + t1;
		load_pair(p + 16, want_be, &a, &b);
		t1 += a + t2; t2 += b + t1;
		load_pair(p + 24, want_be, &a, &b);
		t1 += a + t2; t2 += b + t1;
		n1 = 13u * s1 + 21u * s2 + t1;
		n2 = 21u * s1 + 34u * s2 + t2;
		s1 = n1;
		s2 = n2;
		p += 32;
	}
	while (p < end) {
		load_pair(p, want_be, &a, &b);
		s1 += a + s2;
		s2 += b + s1;
		p += 8;
	}
	s[0] = s1;
	s[1] = s2;
}

static void checksum_le(const uint8_t *p, size_t len, uint32_t s[2])
{
	checksum_body(false, p, len, s);
}

static void checksum_be(const uint8_t *p, size_t len, uint32_t s[2])
{
	checksum_body(true, p, len, s);
}

void ws_wal_checksum(bool big_endian, const uint8_t *data, size_t len, uint32_t s[2])
{
	/* A trailing partial pair would silently be skipped: callers pass only
	 * the 24-byte header prefix, the 8-byte frame prefix and whole pages. */
	WS_ASSERT(len % 8 == 0);
	if (big_endian)
		checksum_be(data, len, s);
	else
		checksum_le(data, len, s);
}

int ws_wal_hdr_parse(const uint8_t buf[WS_WAL_HDR_SIZE], struct ws_wal_hdr *out)
{
	struct ws_wal_hdr h;
	uint32_t s[2] = { 0, 0 };

	h.magic = ws_get_be32(buf);
	h.version = ws_get_be32(buf + 4);
	h.page_size = ws_get_be32(buf + 8);
	h.checkpoint_seq = ws_get_be32(buf + 12);
	h.salt1 = ws_get_be32(buf + 16);
	h.salt2 = ws_get_be32(buf + 20);
	h.cksum1 = ws_get_be32(buf + 24);
	h.cksum2 = ws_get_be32(buf + 28);

	/* Checks in SQLite's order (walIndexRecover): magic and page size, then
	 * the checksum, then the version, so the detail names the first thing
	 * SQLite itself would have tripped over. */
	if (h.magic != WS_WAL_MAGIC_LE && h.magic != WS_WAL_MAGIC_BE)
		return ws_fail(WS_ENOTWAL, "WAL header: bad magic 0x%08x (want 0x%08x or 0x%08x)",
			       h.magic, WS_WAL_MAGIC_LE, WS_WAL_MAGIC_BE);
	if (!page_size_valid(h.page_size))
		return ws_fail(WS_ENOTWAL,
			       "WAL header: bad page size %u (want a power of two in %u..%u)",
			       h.page_size, WS_WAL_PAGE_MIN, WS_WAL_PAGE_MAX);
	ws_wal_checksum(h.magic == WS_WAL_MAGIC_BE, buf, WS_WAL_HDR_SIZE - 8, s);
	if (s[0] != h.cksum1 || s[1] != h.cksum2)
		return ws_fail(WS_ENOTWAL,
			       "WAL header: bad checksum %08x%08x (computed %08x%08x)",
			       h.cksum1, h.cksum2, s[0], s[1]);
	if (h.version != WS_WAL_VERSION)
		return ws_fail(WS_ENOTWAL, "WAL header: bad version %u (want %u)",
			       h.version, WS_WAL_VERSION);
	*out = h;
	return 0;
}

bool ws_wal_hdr_sqlite_empty(const uint8_t *buf, size_t len)
{
	uint32_t magic, s[2] = { 0, 0 };

	if (len < WS_WAL_HDR_SIZE)
		return true;
	magic = ws_get_be32(buf);
	if ((magic != WS_WAL_MAGIC_LE && magic != WS_WAL_MAGIC_BE) || !page_size_valid(ws_get_be32(buf + 8)))
		return true;
	ws_wal_checksum(magic == WS_WAL_MAGIC_BE, buf, WS_WAL_HDR_SIZE - 8, s);
	return s[0] != ws_get_be32(buf + 24) || s[1] != ws_get_be32(buf + 28);
}

void ws_wal_hdr_encode(struct ws_wal_hdr *hdr, uint8_t buf[WS_WAL_HDR_SIZE])
{
	uint32_t s[2] = { 0, 0 };

	ws_put_be32(buf, hdr->magic);
	ws_put_be32(buf + 4, hdr->version);
	ws_put_be32(buf + 8, hdr->page_size);
	ws_put_be32(buf + 12, hdr->checkpoint_seq);
	ws_put_be32(buf + 16, hdr->salt1);
	ws_put_be32(buf + 20, hdr->salt2);
	ws_wal_checksum(hdr->magic == WS_WAL_MAGIC_BE, buf, WS_WAL_HDR_SIZE - 8, s);
	hdr->cksum1 = s[0];
	hdr->cksum2 = s[1];
	ws_put_be32(buf + 24, s[0]);
	ws_put_be32(buf + 28, s[1]);
}

void ws_wal_frame_hdr_decode(const uint8_t buf[WS_WAL_FRAME_HDR_SIZE], struct ws_wal_frame_hdr *out)
{
	out->pgno = ws_get_be32(buf);
	out->db_size = ws_get_be32(buf + 4);
	out->salt1 = ws_get_be32(buf + 8);
	out->salt2 = ws_get_be32(buf + 12);
	out->cksum1 = ws_get_be32(buf + 16);
	out->cksum2 = ws_get_be32(buf + 20);
}

void ws_wal_cursor_init(struct ws_wal_cursor *c, const struct ws_wal_hdr *hdr)
{
	memset(c, 0, sizeof(*c));
	c->big_endian = hdr->magic == WS_WAL_MAGIC_BE;
	c->page_size = hdr->page_size;
	c->salt1 = hdr->salt1;
	c->salt2 = hdr->salt2;
	c->cksum[0] = hdr->cksum1;
	c->cksum[1] = hdr->cksum2;
	c->next_frame = 1;
	/* No commit yet: a restore of "up to last_commit" then means the
	 * header's seed, which is what resuming at frame 1 needs. */
	c->commit_cksum[0] = hdr->cksum1;
	c->commit_cksum[1] = hdr->cksum2;
}

void ws_wal_cursor_resume(struct ws_wal_cursor *c, const struct ws_wal_hdr *hdr,
			  uint64_t next_frame, const uint32_t cksum[2])
{
	WS_ASSERT(next_frame > 1);
	ws_wal_cursor_init(c, hdr);
	c->cksum[0] = cksum[0];
	c->cksum[1] = cksum[1];
	c->next_frame = next_frame;
	c->last_commit = next_frame - 1;
	c->commit_cksum[0] = cksum[0];
	c->commit_cksum[1] = cksum[1];
	/* The commit frame's db_size is not part of a resumption point; the
	 * caller that needs it keeps it with the checksum. */
	c->commit_db_size = 0;
}

int ws_wal_cursor_step(struct ws_wal_cursor *c, const uint8_t *frame, struct ws_wal_frame_hdr *out)
{
	struct ws_wal_frame_hdr h;
	uint32_t s[2];

	ws_wal_frame_hdr_decode(frame, &h);
	if (out)
		*out = h;
	/* Salts first: a stale frame of an older generation is the common way a
	 * WAL ends, and this rejects it without checksumming a page. */
	if (h.salt1 != c->salt1 || h.salt2 != c->salt2 || h.pgno == 0)
		return 0;
	/* The frame verifies when its stored checksum is the chain's next
	 * value; verify_frames computes that with the fastest kernel. */
	if (ws_wal_verify_frames(c->big_endian, c->page_size, frame, 1, c->cksum) != 1)
		return 0;
	s[0] = h.cksum1;
	s[1] = h.cksum2;

	c->cksum[0] = s[0];
	c->cksum[1] = s[1];
	if (h.db_size != 0) {
		c->last_commit = c->next_frame;
		c->commit_cksum[0] = s[0];
		c->commit_cksum[1] = s[1];
		c->commit_db_size = h.db_size;
	}
	c->next_frame++;
	return 1;
}

size_t ws_wal_verify_frames_plain(bool big_endian, uint32_t page_size, const uint8_t *frames, size_t n,
				  const uint32_t seed[2])
{
	const uint32_t fsz = ws_wal_frame_size(page_size);
	uint32_t prev[2] = { seed[0], seed[1] };

	for (size_t i = 0; i < n; i++) {
		const uint8_t *f = frames + i * fsz;
		uint32_t s[2] = { prev[0], prev[1] };
		ws_wal_checksum(big_endian, f, 8, s);
		ws_wal_checksum(big_endian, f + WS_WAL_FRAME_HDR_SIZE, page_size, s);
		prev[0] = ws_get_be32(f + 16);
		prev[1] = ws_get_be32(f + 20);
		if (s[0] != prev[0] || s[1] != prev[1])
			return i;
	}
	return n;
}

int ws_wal_scan(const uint8_t *buf, size_t len, struct ws_wal_hdr *hdr, struct ws_wal_cursor *c)
{
	size_t frame_bytes, off;
	int rc;

	if (len < WS_WAL_HDR_SIZE)
		return ws_fail(WS_ENOTWAL, "%zu bytes: %s", len,
			       len == 0 ? "empty file, no WAL header" :
					  "shorter than the 32-byte WAL header");
	rc = ws_wal_hdr_parse(buf, hdr);
	if (rc < 0)
		return rc;
	ws_wal_cursor_init(c, hdr);
	frame_bytes = ws_wal_frame_size(hdr->page_size);
	/* A frame the buffer does not hold in full is a torn tail, not an error. */
	for (off = WS_WAL_HDR_SIZE; len - off >= frame_bytes; off += frame_bytes)
		if (ws_wal_cursor_step(c, buf + off, NULL) == 0)
			break;
	return 0;
}

/* Frames checked, then hashed, together: both passes read them from L1. */
#define RUN_CHECK_FRAMES 8

uint32_t ws_wal_run_check(struct ws_wal_run *run, bool big_endian, uint32_t page_size, uint32_t salt1,
			  uint32_t salt2, const uint8_t *frames, uint32_t n, struct ws_xxh_state *hs)
{
	const uint32_t fsz = ws_wal_frame_size(page_size);
	uint32_t done = 0;
	if (run->valid == 0) {
		run->end_cksum[0] = run->seed[0];
		run->end_cksum[1] = run->seed[1];
	}
	while (done < n && !run->ended) {
		uint32_t m = n - done < RUN_CHECK_FRAMES ? n - done : RUN_CHECK_FRAMES, ok;
		const uint8_t *piece = frames + (size_t)done * fsz;
		/* Salts and page numbers first: a stale frame of an older
		 * generation is the common end of a WAL. */
		for (ok = 0; ok < m; ok++) {
			const uint8_t *h = piece + (size_t)ok * fsz;
			if (ws_get_be32(h) == 0 || ws_get_be32(h + 8) != salt1 || ws_get_be32(h + 12) != salt2)
				break;
		}
		ok = (uint32_t)ws_wal_verify_frames(big_endian, page_size, piece, ok, run->end_cksum);
		for (uint32_t k = 0; k < ok; k++) {
			const uint8_t *h = piece + (size_t)k * fsz;
			if (ws_get_be32(h + 4) != 0) {
				run->last_commit = run->first_frame + run->valid + k;
				run->commit_cksum[0] = ws_get_be32(h + 16);
				run->commit_cksum[1] = ws_get_be32(h + 20);
				run->commit_db_size = ws_get_be32(h + 4);
			}
		}
		if (ok) {
			const uint8_t *h = piece + (size_t)(ok - 1) * fsz;
			run->end_cksum[0] = ws_get_be32(h + 16);
			run->end_cksum[1] = ws_get_be32(h + 20);
			if (hs)
				ws_xxh_update(hs, piece, (size_t)ok * fsz);
		}
		run->valid += ok;
		done += ok;
		if (ok < m)
			run->ended = true;
	}
	return done;
}

bool ws_wal_page_size_valid(uint32_t page_size)
{
	return page_size_valid(page_size);
}

/* ---- the wal-index header ---------------------------------------------- */

static uint32_t get_ne32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, sizeof(v));
	return v;
}

int ws_walidx_hdr_decode(const uint8_t *both, size_t len, struct ws_walidx_hdr *out)
{
	uint32_t s[2] = { 0, 0 };
	if (len < WS_WALIDX_HDR_BOTH)
		return -EINVAL;
	if (memcmp(both, both + WS_WALIDX_HDR_SIZE, WS_WALIDX_HDR_SIZE) != 0)
		return -EAGAIN;
	if (both[12] != 1)
		return -ENODATA;
	ws_wal_checksum(__BYTE_ORDER__ == __ORDER_BIG_ENDIAN__, both, 40, s);
	if (s[0] != get_ne32(both + 40) || s[1] != get_ne32(both + 44))
		return -EAGAIN;
	uint16_t sz;
	memcpy(&sz, both + 14, sizeof(sz));
	out->version = get_ne32(both);
	out->change = get_ne32(both + 8);
	out->big_endian_cksum = both[13] != 0;
	/* SQLite stores 65536 as 1 (walIndexWriteHdr: szPage & 0xff00 | szPage >> 16). */
	out->page_size = (uint32_t)(sz & 0xfe00) + ((uint32_t)(sz & 1) << 16);
	out->mx_frame = get_ne32(both + 16);
	out->n_page = get_ne32(both + 20);
	out->frame_cksum[0] = get_ne32(both + 24);
	out->frame_cksum[1] = get_ne32(both + 28);
	out->salt1 = ws_get_be32(both + 32);
	out->salt2 = ws_get_be32(both + 36);
	out->cksum[0] = s[0];
	out->cksum[1] = s[1];
	return 0;
}

static void put_ne32(uint8_t *p, uint32_t v) { memcpy(p, &v, sizeof(v)); }

void ws_walidx_hdr_encode(struct ws_walidx_hdr *h, uint8_t out[WS_WALIDX_HDR_SIZE])
{
	uint32_t s[2] = { 0, 0 };
	/* walIndexWriteHdr stores szPage as (szPage & 0xff00) | (szPage >> 16): 65536 as 1. */
	uint16_t sz = (uint16_t)((h->page_size & 0xff00) | (h->page_size >> 16));

	memset(out, 0, WS_WALIDX_HDR_SIZE);
	put_ne32(out, h->version);
	put_ne32(out + 8, h->change);
	out[12] = 1;
	out[13] = h->big_endian_cksum ? 1 : 0;
	memcpy(out + 14, &sz, sizeof(sz));
	put_ne32(out + 16, h->mx_frame);
	put_ne32(out + 20, h->n_page);
	put_ne32(out + 24, h->frame_cksum[0]);
	put_ne32(out + 28, h->frame_cksum[1]);
	ws_put_be32(out + 32, h->salt1);
	ws_put_be32(out + 36, h->salt2);
	ws_wal_checksum(__BYTE_ORDER__ == __ORDER_BIG_ENDIAN__, out, 40, s);
	h->cksum[0] = s[0];
	h->cksum[1] = s[1];
	put_ne32(out + 40, s[0]);
	put_ne32(out + 44, s[1]);
}

/* ---- the database header ----------------------------------------------- */

bool ws_db_hdr_is_sqlite(const uint8_t *buf, size_t len)
{
	return len >= WS_DB_HDR_MAGIC_SIZE && memcmp(buf, "SQLite format 3", WS_DB_HDR_MAGIC_SIZE) == 0;
}

uint32_t ws_db_hdr_page_size(const uint8_t buf[WS_DB_HDR_MODE_END])
{
	uint32_t ps = (uint32_t)buf[16] << 8 | buf[17];
	return ps == 1 ? 65536 : ps;
}

bool ws_db_hdr_wal_mode(const uint8_t buf[WS_DB_HDR_MODE_END])
{
	return buf[18] == 2 && buf[19] == 2;
}

uint32_t ws_db_hdr_page_count(const uint8_t buf[WS_DB_HDR_SIZE])
{
	return ws_get_be32(buf + 92) == ws_get_be32(buf + 24) ? ws_get_be32(buf + 28) : 0;
}

int ws_db_hdr_decode(const uint8_t *buf, size_t len, struct ws_db_hdr *out)
{
	if (len < WS_DB_HDR_SIZE || !ws_db_hdr_is_sqlite(buf, len))
		return WS_EFORMAT;
	out->page_size = ws_db_hdr_page_size(buf);
	out->write_version = buf[18];
	out->read_version = buf[19];
	out->change_counter = ws_get_be32(buf + 24);
	out->page_count = ws_get_be32(buf + 28);
	out->version_valid_for = ws_get_be32(buf + 92);
	return 0;
}

bool ws_db_hdr_is_wal(const struct ws_db_hdr *h)
{
	return h->write_version == 2 && h->read_version == 2;
}

uint32_t ws_db_hdr_pages(const struct ws_db_hdr *h)
{
	return h->version_valid_for == h->change_counter ? h->page_count : 0;
}
