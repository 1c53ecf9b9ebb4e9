/*
 * io/wal.c: the SQLite WAL format.
 *
 * Synthetic WALs are written here with an independent, byte-at-a-time
 * checksum (the spec's loop, nothing shared with wal.c but the header
 * encoder), for every legal page size in both checksum byte orders. Real
 * WALs come from libsqlite3 itself, read while the connection is open.
 */
#include "testutil.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ws_wal.h"

static const uint32_t page_sizes[] = { 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536 };
#define N_PAGE_SIZES (sizeof(page_sizes) / sizeof(page_sizes[0]))

/* The spec's checksum loop, one byte at a time, as the oracle. */
static void ref_checksum(bool be, const uint8_t *p, size_t len, uint32_t s[2])
{
	size_t i;

	for (i = 0; i < len; i += 8) {
		uint32_t x0, x1;

		if (be) {
			x0 = (uint32_t)p[i] << 24 | (uint32_t)p[i + 1] << 16 |
			     (uint32_t)p[i + 2] << 8 | p[i + 3];
			x1 = (uint32_t)p[i + 4] << 24 | (uint32_t)p[i + 5] << 16 |
			     (uint32_t)p[i + 6] << 8 | p[i + 7];
		} else {
			x0 = (uint32_t)p[i + 3] << 24 | (uint32_t)p[i + 2] << 16 |
			     (uint32_t)p[i + 1] << 8 | p[i];
			x1 = (uint32_t)p[i + 7] << 24 | (uint32_t)p[i + 6] << 16 |
			     (uint32_t)p[i + 5] << 8 | p[i + 4];
		}
		s[0] += x0 + s[1];
		s[1] += x1 + s[0];
	}
}

/* A WAL being written: header, then frames appended with the running checksum. */
struct wb {
	uint8_t *buf;
	size_t len, cap;
	struct ws_wal_hdr hdr;
	uint32_t s[2];
	uint64_t frames;
	uint64_t rng;
};

static void wb_init(struct wb *w, uint32_t page_size, bool be, uint32_t salt1, uint32_t salt2)
{
	memset(w, 0, sizeof(*w));
	w->hdr.magic = be ? WS_WAL_MAGIC_BE : WS_WAL_MAGIC_LE;
	w->hdr.version = WS_WAL_VERSION;
	w->hdr.page_size = page_size;
	w->hdr.checkpoint_seq = 7;
	w->hdr.salt1 = salt1;
	w->hdr.salt2 = salt2;
	w->cap = WS_WAL_HDR_SIZE + 8 * (size_t)ws_wal_frame_size(page_size);
	w->buf = malloc(w->cap);
	assert_non_null(w->buf);
	ws_wal_hdr_encode(&w->hdr, w->buf);
	w->len = WS_WAL_HDR_SIZE;
	w->s[0] = w->hdr.cksum1;
	w->s[1] = w->hdr.cksum2;
	w->rng = 0x9e3779b97f4a7c15ull ^ page_size ^ (be ? 1u : 0u);
}

/* Append a frame with explicit salts (stale frames use foreign ones). */
static void wb_frame_salted(struct wb *w, uint32_t pgno, uint32_t db_size, uint32_t salt1, uint32_t salt2)
{
	uint32_t ps = w->hdr.page_size;
	size_t fsz = ws_wal_frame_size(ps), i;
	bool be = w->hdr.magic == WS_WAL_MAGIC_BE;
	uint8_t *f;

	if (w->len + fsz > w->cap) {
		w->cap *= 2;
		w->buf = realloc(w->buf, w->cap);
		assert_non_null(w->buf);
	}
	f = w->buf + w->len;
	ws_put_be32(f, pgno);
	ws_put_be32(f + 4, db_size);
	ws_put_be32(f + 8, salt1);
	ws_put_be32(f + 12, salt2);
	for (i = 0; i < ps; i += 8) {
		uint64_t v = wt_rand(&w->rng);
		memcpy(f + WS_WAL_FRAME_HDR_SIZE + i, &v, 8);
	}
	ref_checksum(be, f, 8, w->s);
	ref_checksum(be, f + WS_WAL_FRAME_HDR_SIZE, ps, w->s);
	ws_put_be32(f + 16, w->s[0]);
	ws_put_be32(f + 20, w->s[1]);
	w->len += fsz;
	w->frames++;
}

static void wb_frame(struct wb *w, uint32_t pgno, uint32_t db_size)
{
	wb_frame_salted(w, pgno, db_size, w->hdr.salt1, w->hdr.salt2);
}

static uint8_t *wb_frame_ptr(struct wb *w, uint64_t n)
{
	return w->buf + ws_wal_frame_offset(w->hdr.page_size, n);
}

static void wb_free(struct wb *w)
{
	free(w->buf);
	w->buf = NULL;
}

/* Frames 1..6, commits at 2 (db 10 pages), 4 (db 12) and 6 (db 13). */
static void wb_standard(struct wb *w, uint32_t page_size, bool be)
{
	wb_init(w, page_size, be, 0x11111111u + page_size, 0xabcdef01u);
	wb_frame(w, 3, 0);
	wb_frame(w, 1, 10);
	wb_frame(w, 11, 0);
	wb_frame(w, 12, 12);
	wb_frame(w, 5, 0);
	wb_frame(w, 13, 13);
}

static void scan_ok(const uint8_t *buf, size_t len, struct ws_wal_hdr *hdr, struct ws_wal_cursor *c)
{
	int rc = ws_wal_scan(buf, len, hdr, c);

	if (rc != 0)
		fail_msg("scan: %d %s", rc, ws_errmsg());
}

static void expect_end(const uint8_t *buf, size_t len, uint64_t next_frame, uint64_t last_commit,
		       uint32_t commit_db_size)
{
	struct ws_wal_hdr hdr;
	struct ws_wal_cursor c;

	scan_ok(buf, len, &hdr, &c);
	assert_int_equal(c.next_frame, next_frame);
	assert_int_equal(c.last_commit, last_commit);
	assert_int_equal(c.commit_db_size, commit_db_size);
}

static void test_checksum_matches_reference(void **state)
{
	uint64_t rng = 42;
	uint8_t *buf = malloc(4096 + 8);
	int iter;

	(void)state;
	assert_non_null(buf);
	for (size_t i = 0; i < 4096 + 8; i++)
		buf[i] = (uint8_t)wt_rand(&rng);
	for (iter = 0; iter < 2000; iter++) {
		bool be = iter & 1;
		size_t len = (size_t)(wt_rand(&rng) % 513) * 8;
		size_t shift = (size_t)(wt_rand(&rng) % 8); /* unaligned starts too */
		uint32_t a[2], b[2];

		a[0] = b[0] = (uint32_t)wt_rand(&rng);
		a[1] = b[1] = (uint32_t)wt_rand(&rng);
		ws_wal_checksum(be, buf + shift, len, a);
		ref_checksum(be, buf + shift, len, b);
		assert_int_equal(a[0], b[0]);
		assert_int_equal(a[1], b[1]);
	}
	free(buf);
}

/*
 * Every verification kernel (the plain loop and each vector one this CPU
 * has) against the byte-at-a-time oracle: chains of random frames of every
 * page size in both byte orders, whole, then with one bit flipped in each
 * checksummed region (frame header words, first, middle and last page word,
 * stored checksum), and seeded wrong. All must stop at the same frame.
 */
static void test_verify_kernels_agree(void **state)
{
	const enum ws_wal_simd kernels[] = { WS_WAL_SIMD_NONE, WS_WAL_SIMD_AVX2 };
	uint64_t rng = 0x5eed;
	unsigned ran = 0;

	(void)state;
	for (size_t pi = 0; pi < N_PAGE_SIZES; pi++) {
		for (int be = 0; be <= 1; be++) {
			uint32_t ps = page_sizes[pi];
			size_t fsz = ws_wal_frame_size(ps);
			struct wb w;
			wb_init(&w, ps, be, 0x1234u + ps, 0x9abcu);
			for (uint32_t i = 0; i < 12; i++)
				wb_frame(&w, 1 + i, i % 4 == 3 ? 20 + i : 0);
			/* Words of all ones in some pages, then the chain sealed again. */
			for (uint32_t i = 0; i < 12; i += 5)
				memset(wb_frame_ptr(&w, 1 + i) + WS_WAL_FRAME_HDR_SIZE, 0xff, 64);
			uint32_t run[2] = { w.hdr.cksum1, w.hdr.cksum2 };
			for (uint32_t i = 0; i < 12; i++) {
				uint8_t *f = wb_frame_ptr(&w, 1 + i);
				ref_checksum(be, f, 8, run);
				ref_checksum(be, f + WS_WAL_FRAME_HDR_SIZE, ps, run);
				ws_put_be32(f + 16, run[0]);
				ws_put_be32(f + 20, run[1]);
			}
			const uint8_t *frames = wb_frame_ptr(&w, 1);
			const uint32_t seed[2] = { w.hdr.cksum1, w.hdr.cksum2 };
			const uint32_t bad_seed[2] = { w.hdr.cksum1 + 1, w.hdr.cksum2 };
			/* Offsets in a frame to damage, and the frames to damage. */
			const size_t spots[] = { 0, 5, 9, 16, 23, WS_WAL_FRAME_HDR_SIZE, WS_WAL_FRAME_HDR_SIZE + ps / 2 + 3,
						 fsz - 1 };
			for (size_t k = 0; k < sizeof(kernels) / sizeof(kernels[0]); k++) {
				if (!ws_wal_simd_available(kernels[k]))
					continue;
				ran++;
				assert_int_equal(ws_wal_verify_frames_with(kernels[k], be, ps, frames, 12, seed), 12);
				assert_int_equal(ws_wal_verify_frames_with(kernels[k], be, ps, frames, 0, seed), 0);
				assert_int_equal(ws_wal_verify_frames_with(kernels[k], be, ps, frames, 12, bad_seed), 0);
				/* Later frames verify on their own from their predecessor's checksum. */
				const uint8_t *f5 = wb_frame_ptr(&w, 5);
				const uint32_t seed5[2] = { ws_get_be32(f5 - fsz + 16), ws_get_be32(f5 - fsz + 20) };
				assert_int_equal(ws_wal_verify_frames_with(kernels[k], be, ps, f5, 8, seed5), 8);
				for (size_t sp = 0; sp < sizeof(spots) / sizeof(spots[0]); sp++) {
					size_t frame = (size_t)(wt_rand(&rng) % 12);
					uint8_t *b = wb_frame_ptr(&w, 1 + frame) + spots[sp];
					uint8_t bit = (uint8_t)(1u << (wt_rand(&rng) % 8));
					*b ^= bit;
					/* Salt bytes (8..15) are not checksummed: damage there passes. */
					size_t expect = spots[sp] >= 8 && spots[sp] < 16 ? 12 : frame;
					assert_int_equal(ws_wal_verify_frames_with(kernels[k], be, ps, frames, 12, seed),
							 expect);
					assert_int_equal(ws_wal_verify_frames_plain(be, ps, frames, 12, seed), expect);
					*b ^= bit;
				}
			}
			wb_free(&w);
		}
	}
	/* The plain loop always runs; a vector kernel where the CPU has one. */
	assert_true(ran >= N_PAGE_SIZES * 2);
	if (ws_wal_simd_available(WS_WAL_SIMD_AVX2))
		assert_int_equal(ran, N_PAGE_SIZES * 2 * 2);
}

static void test_hdr_roundtrip(void **state)
{
	(void)state;
	for (size_t i = 0; i < N_PAGE_SIZES; i++) {
		for (int be = 0; be < 2; be++) {
			struct ws_wal_hdr in = { .magic = be ? WS_WAL_MAGIC_BE : WS_WAL_MAGIC_LE,
						 .version = WS_WAL_VERSION,
						 .page_size = page_sizes[i],
						 .checkpoint_seq = 99,
						 .salt1 = 0xdeadbeef,
						 .salt2 = 0x01020304 };
			struct ws_wal_hdr out;
			uint8_t buf[WS_WAL_HDR_SIZE];
			uint32_t s[2] = { 0, 0 };

			ws_wal_hdr_encode(&in, buf);
			/* Fields big-endian at their offsets; checksum per the oracle. */
			assert_int_equal(ws_get_be32(buf), in.magic);
			assert_int_equal(ws_get_be32(buf + 8), page_sizes[i]);
			ref_checksum(be, buf, 24, s);
			assert_int_equal(ws_get_be32(buf + 24), s[0]);
			assert_int_equal(ws_get_be32(buf + 28), s[1]);
			assert_int_equal(ws_wal_hdr_parse(buf, &out), 0);
			assert_memory_equal(&in, &out, sizeof(in));
		}
	}
}

static void test_frame_hdr_decode(void **state)
{
	uint8_t b[WS_WAL_FRAME_HDR_SIZE];
	struct ws_wal_frame_hdr h;

	(void)state;
	for (unsigned i = 0; i < sizeof(b); i++)
		b[i] = (uint8_t)(i + 1);
	ws_wal_frame_hdr_decode(b, &h);
	assert_int_equal(h.pgno, 0x01020304u);
	assert_int_equal(h.db_size, 0x05060708u);
	assert_int_equal(h.salt1, 0x090a0b0cu);
	assert_int_equal(h.salt2, 0x0d0e0f10u);
	assert_int_equal(h.cksum1, 0x11121314u);
	assert_int_equal(h.cksum2, 0x15161718u);
}

static void test_valid_chain_all_page_sizes(void **state)
{
	(void)state;
	for (size_t i = 0; i < N_PAGE_SIZES; i++) {
		for (int be = 0; be < 2; be++) {
			struct wb w;
			struct ws_wal_hdr hdr;
			struct ws_wal_cursor c;
			struct ws_wal_frame_hdr fh;

			wb_standard(&w, page_sizes[i], be);
			expect_end(w.buf, w.len, 7, 6, 13);

			/* Step by step: commits tracked as they pass. */
			scan_ok(w.buf, WS_WAL_HDR_SIZE, &hdr, &c);
			assert_int_equal(hdr.page_size, page_sizes[i]);
			assert_int_equal(c.big_endian, be);
			assert_int_equal(c.next_frame, 1);
			assert_int_equal(c.last_commit, 0);
			for (uint64_t n = 1; n <= 6; n++) {
				assert_int_equal(ws_wal_cursor_step(&c, wb_frame_ptr(&w, n), &fh), 1);
				assert_int_equal(c.next_frame, n + 1);
				assert_int_equal(c.last_commit, n % 2 == 0 ? n : n - 1);
			}
			assert_int_equal(fh.pgno, 13);
			assert_int_equal(fh.db_size, 13);
			assert_int_equal(c.cksum[0], w.s[0]);
			assert_int_equal(c.cksum[1], w.s[1]);
			assert_memory_equal(c.commit_cksum, w.s, sizeof(w.s));

			/* Valid frames past the last commit are not the database. */
			wb_frame(&w, 2, 0);
			expect_end(w.buf, w.len, 8, 6, 13);
			wb_free(&w);
		}
	}
}

static void test_torn_tail(void **state)
{
	(void)state;
	for (size_t i = 0; i < N_PAGE_SIZES; i++) {
		for (int be = 0; be < 2; be++) {
			uint32_t ps = page_sizes[i];
			size_t fsz = ws_wal_frame_size(ps);
			struct wb w;
			uint8_t *copy;

			wb_standard(&w, ps, be);
			copy = malloc(w.len);
			assert_non_null(copy);

			/* Truncated last frame: short by one byte, by half, to its header. */
			expect_end(w.buf, w.len - 1, 6, 4, 12);
			expect_end(w.buf, w.len - ps / 2, 6, 4, 12);
			expect_end(w.buf, w.len - ps, 6, 4, 12);
			expect_end(w.buf, w.len - fsz + 3, 6, 4, 12);
			expect_end(w.buf, w.len - fsz, 6, 4, 12);

			/* Zeroed last frame (file extended, never written). */
			memcpy(copy, w.buf, w.len);
			memset(copy + w.len - fsz, 0, fsz);
			expect_end(copy, w.len, 6, 4, 12);

			/* Last frame half new, half zeros (torn page write). */
			memcpy(copy, w.buf, w.len);
			memset(copy + w.len - ps / 2, 0, ps / 2);
			expect_end(copy, w.len, 6, 4, 12);

			/* Zeroed frame mid-chain: everything after it is gone. */
			memcpy(copy, w.buf, w.len);
			memset(wb_frame_ptr(&w, 3) - w.buf + copy, 0, fsz);
			expect_end(copy, w.len, 3, 2, 10);
			free(copy);
			wb_free(&w);
		}
	}
}

static void test_bad_checksum_mid_chain(void **state)
{
	(void)state;
	for (size_t i = 0; i < N_PAGE_SIZES; i++) {
		for (int be = 0; be < 2; be++) {
			/* Offsets within frame 3 that each break it: pgno, db_size,
			 * both stored checksum words, first/last page byte. */
			size_t ps = page_sizes[i];
			const size_t offs[] = { 3, 7, 16, 23, WS_WAL_FRAME_HDR_SIZE,
						WS_WAL_FRAME_HDR_SIZE + ps - 1 };
			struct wb w;

			wb_standard(&w, page_sizes[i], be);
			for (size_t k = 0; k < sizeof(offs) / sizeof(offs[0]); k++) {
				uint8_t *p = wb_frame_ptr(&w, 3) + offs[k];
				struct ws_wal_hdr hdr;
				struct ws_wal_cursor c, before;

				*p ^= 0x40;
				expect_end(w.buf, w.len, 3, 2, 10);
				/* A rejected frame never moves the cursor. */
				scan_ok(w.buf, w.len, &hdr, &c);
				before = c;
				assert_int_equal(ws_wal_cursor_step(&c, wb_frame_ptr(&w, 3), NULL), 0);
				assert_int_equal(ws_wal_cursor_step(&c, wb_frame_ptr(&w, 3), NULL), 0);
				assert_memory_equal(&c, &before, sizeof(c));
				*p ^= 0x40;
			}
			expect_end(w.buf, w.len, 7, 6, 13);
			wb_free(&w);
		}
	}
}

static void test_foreign_salt(void **state)
{
	(void)state;
	for (size_t i = 0; i < N_PAGE_SIZES; i++) {
		for (int be = 0; be < 2; be++) {
			uint32_t ps = page_sizes[i];
			struct wb old, w;

			/* A frame with the wrong salt but a checksum that chains
			 * correctly: the salt check alone must reject it. */
			wb_init(&w, ps, be, 100, 200);
			wb_frame(&w, 1, 1);
			wb_frame_salted(&w, 2, 2, 101, 200);
			expect_end(w.buf, w.len, 2, 1, 1);
			wb_free(&w);
			wb_init(&w, ps, be, 100, 200);
			wb_frame(&w, 1, 1);
			wb_frame_salted(&w, 2, 2, 100, 201);
			expect_end(w.buf, w.len, 2, 1, 1);
			wb_free(&w);

			/* A WAL reset: the new generation (salt-1 + 1, new salt-2)
			 * overwrites the header and frames 1..2 in place; frames 3..6
			 * of the old generation stay behind and must not be read. */
			wb_standard(&old, ps, be);
			wb_init(&w, ps, be, old.hdr.salt1 + 1, 0x5a5a5a5au);
			wb_frame(&w, 1, 0);
			wb_frame(&w, 2, 2);
			memcpy(old.buf, w.buf, w.len);
			expect_end(old.buf, old.len, 3, 2, 2);
			wb_free(&w);
			wb_free(&old);

			/* Page number 0 is never valid, whatever its checksum. */
			wb_init(&w, ps, be, 1, 2);
			wb_frame(&w, 1, 1);
			wb_frame(&w, 0, 2);
			expect_end(w.buf, w.len, 2, 1, 1);
			wb_free(&w);
		}
	}
}

static void expect_notwal(const uint8_t *buf, size_t len, const char *why)
{
	struct ws_wal_hdr hdr;
	struct ws_wal_cursor c;
	int rc;

	ws_errclear();
	rc = ws_wal_scan(buf, len, &hdr, &c);
	assert_int_equal(rc, WS_ENOTWAL);
	if (!strstr(ws_errmsg(), why))
		fail_msg("detail '%s' does not mention '%s'", ws_errmsg(), why);
}

static void test_not_a_wal(void **state)
{
	uint8_t rnd[4096];
	uint64_t rng = 7;
	struct wb w;
	char *dir, *path;
	sqlite3 *db;
	uint8_t *dbfile;
	size_t dblen;

	(void)state;
	for (size_t i = 0; i < sizeof(rnd); i++)
		rnd[i] = (uint8_t)wt_rand(&rng);
	expect_notwal(rnd, sizeof(rnd), "magic");
	expect_notwal(rnd, 0, "empty");
	expect_notwal(NULL, 0, "empty");

	wb_standard(&w, 4096, false);
	expect_notwal(w.buf, 31, "shorter than");
	expect_notwal(w.buf, 1, "shorter than");
	expect_end(w.buf, 32, 1, 0, 0); /* header only: a WAL with no frames */
	wb_free(&w);

	/* An SQLite database file (rollback journal mode). */
	dir = wt_tmpdir("walnot");
	assert_non_null(dir);
	path = wt_path(dir, "plain.db");
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, "CREATE TABLE t(x); INSERT INTO t VALUES (randomblob(3000));",
				      NULL, NULL, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_close(db), SQLITE_OK);
	dbfile = wt_read_file(path, &dblen);
	assert_non_null(dbfile);
	assert_true(dblen >= 4096);
	expect_notwal(dbfile, dblen, "magic");
	free(dbfile);
	free(path);
	wt_rmrf(dir);
	free(dir);
}

static void test_bad_header(void **state)
{
	const uint32_t bad_sizes[] = { 0, 1, 3, 256, 511, 513, 65535, 131072, 0xffffffffu };
	struct ws_wal_hdr h = { .magic = WS_WAL_MAGIC_LE, .version = WS_WAL_VERSION,
				.page_size = 4096, .salt1 = 1, .salt2 = 2 };
	struct ws_wal_hdr out;
	uint8_t buf[WS_WAL_HDR_SIZE];

	(void)state;
	for (int be = 0; be < 2; be++) {
		h.magic = be ? WS_WAL_MAGIC_BE : WS_WAL_MAGIC_LE;

		h.page_size = 4096;
		ws_wal_hdr_encode(&h, buf);
		assert_int_equal(ws_wal_hdr_parse(buf, &out), 0);
		/* Any single flipped checksum bit, and a changed salt under the
		 * old checksum. */
		for (unsigned bit = 0; bit < 64; bit++) {
			buf[24 + bit / 8] ^= (uint8_t)(1u << (bit % 8));
			expect_notwal(buf, sizeof(buf), "checksum");
			buf[24 + bit / 8] ^= (uint8_t)(1u << (bit % 8));
		}
		buf[19] ^= 1;
		expect_notwal(buf, sizeof(buf), "checksum");

		/* Checksum in the other byte order than the magic says. */
		ws_wal_hdr_encode(&h, buf);
		ws_put_be32(buf, be ? WS_WAL_MAGIC_LE : WS_WAL_MAGIC_BE);
		expect_notwal(buf, sizeof(buf), "checksum");

		h.version = 3007001;
		ws_wal_hdr_encode(&h, buf);
		expect_notwal(buf, sizeof(buf), "version");
		h.version = WS_WAL_VERSION;

		for (size_t i = 0; i < sizeof(bad_sizes) / sizeof(bad_sizes[0]); i++) {
			h.page_size = bad_sizes[i];
			ws_wal_hdr_encode(&h, buf);
			expect_notwal(buf, sizeof(buf), "page size");
		}
		h.page_size = 4096;
	}
	h.magic = 0x377f0681u;
	ws_wal_hdr_encode(&h, buf);
	expect_notwal(buf, sizeof(buf), "magic");
	h.magic = 0x377f0684u;
	ws_wal_hdr_encode(&h, buf);
	expect_notwal(buf, sizeof(buf), "magic");
}

static void test_resume_equals_full_scan(void **state)
{
	(void)state;
	for (int be = 0; be < 2; be++) {
		for (size_t i = 0; i < N_PAGE_SIZES; i += 3) {
			struct wb w;
			struct ws_wal_hdr hdr;
			struct ws_wal_cursor full, c;
			uint32_t at_commit[16][2];
			uint64_t n;

			/* 12 frames, commits at 3, 7, 10 and 12. */
			wb_init(&w, page_sizes[i], be, 77, 88);
			for (n = 1; n <= 12; n++)
				wb_frame(&w, (uint32_t)n, (n == 3 || n == 7 || n == 10 || n == 12) ? (uint32_t)n : 0);
			scan_ok(w.buf, w.len, &hdr, &full);
			assert_int_equal(full.last_commit, 12);

			/* Record the running checksum at each commit, as a watermark would. */
			scan_ok(w.buf, WS_WAL_HDR_SIZE, &hdr, &c);
			for (n = 1; n <= 12; n++) {
				assert_int_equal(ws_wal_cursor_step(&c, wb_frame_ptr(&w, n), NULL), 1);
				memcpy(at_commit[n], c.cksum, sizeof(c.cksum));
			}
			for (uint64_t k = 3; k <= 10; k++) {
				if (k != 3 && k != 7 && k != 10)
					continue;
				ws_wal_cursor_resume(&c, &hdr, k + 1, at_commit[k]);
				assert_int_equal(c.last_commit, k);
				assert_int_equal(c.next_frame, k + 1);
				assert_int_equal(c.commit_db_size, 0); /* not in a resumption point */
				assert_memory_equal(c.commit_cksum, at_commit[k], 8);
				assert_memory_equal(c.cksum, at_commit[k], 8);
				for (n = k + 1; n <= 12; n++)
					assert_int_equal(ws_wal_cursor_step(&c, wb_frame_ptr(&w, n), NULL), 1);
				assert_int_equal(c.next_frame, full.next_frame);
				assert_int_equal(c.last_commit, full.last_commit);
				assert_int_equal(c.commit_db_size, full.commit_db_size);
				assert_memory_equal(c.cksum, full.cksum, sizeof(c.cksum));
				assert_memory_equal(c.commit_cksum, full.commit_cksum, sizeof(c.cksum));
				/* A wrong seed makes the very next frame invalid. */
				at_commit[k][1] ^= 1;
				ws_wal_cursor_resume(&c, &hdr, k + 1, at_commit[k]);
				assert_int_equal(ws_wal_cursor_step(&c, wb_frame_ptr(&w, k + 1), NULL), 0);
				at_commit[k][1] ^= 1;
			}
			wb_free(&w);
		}
	}
}

/* ---- real SQLite ---- */

static int64_t query_int(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *st;
	int64_t v;

	assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return v;
}

/* Open a WAL-mode database at dir/name with this page size, never auto-checkpointed. */
static sqlite3 *open_wal_db(const char *dir, const char *name, uint32_t page_size)
{
	char *path = wt_path(dir, name);
	char sql[64];
	sqlite3 *db;

	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	free(path);
	snprintf(sql, sizeof(sql), "PRAGMA page_size=%u", page_size);
	wt_exec(db, sql);
	wt_exec(db, "PRAGMA journal_mode=WAL; PRAGMA wal_autocheckpoint=0;");
	wt_exec(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB)");
	return db;
}

static void test_sqlite_real_wal(void **state)
{
	const uint32_t sizes[] = { 512, 1024, 4096, 16384, 65536 };
	char *dir = wt_tmpdir("walreal");

	(void)state;
	assert_non_null(dir);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		char name[32], *walpath;
		struct ws_wal_hdr hdr;
		struct ws_wal_cursor c;
		sqlite3 *db;
		uint8_t *wal;
		size_t len, fsz = ws_wal_frame_size(sizes[i]);
		uint32_t s[2] = { 0, 0 };

		snprintf(name, sizeof(name), "real%u.db", sizes[i]);
		db = open_wal_db(dir, name, sizes[i]);
		assert_int_equal(query_int(db, "PRAGMA page_size"), sizes[i]);
		for (int t = 0; t < 8; t++) {
			char sql[192];

			/* One transaction of 1 + t rows of growing size. */
			snprintf(sql, sizeof(sql),
				 "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i<%d) "
				 "INSERT INTO t(v) SELECT randomblob(%d) FROM n",
				 1 + t, 300 + 97 * t);
			wt_exec(db, sql);
		}
		wt_exec(db, "UPDATE t SET v = randomblob(50) WHERE id % 3 = 0");

		/* The connection is open, so the -wal file is still there. */
		snprintf(name, sizeof(name), "real%u.db-wal", sizes[i]);
		walpath = wt_path(dir, name);
		wal = wt_read_file(walpath, &len);
		assert_non_null(wal);
		assert_true(len > WS_WAL_HDR_SIZE);
		assert_int_equal((len - WS_WAL_HDR_SIZE) % fsz, 0);

		scan_ok(wal, len, &hdr, &c);
		assert_int_equal(hdr.page_size, sizes[i]);
		assert_int_equal(hdr.version, WS_WAL_VERSION);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
		/* SQLite checksums in host order: little-endian words here. */
		assert_int_equal(hdr.magic, WS_WAL_MAGIC_LE);
		assert_false(c.big_endian);
		ref_checksum(false, wal, 24, s);
		assert_int_equal(s[0], hdr.cksum1);
#else
		assert_int_equal(hdr.magic, WS_WAL_MAGIC_BE);
#endif
		/* Every frame in the file is valid and the last one commits. */
		assert_int_equal(c.next_frame - 1, (len - WS_WAL_HDR_SIZE) / fsz);
		assert_int_equal(c.last_commit, c.next_frame - 1);
		assert_int_equal(c.commit_db_size, query_int(db, "PRAGMA page_count"));

		free(wal);
		free(walpath);
		assert_int_equal(sqlite3_close(db), SQLITE_OK);
	}
	wt_rmrf(dir);
	free(dir);
}

/*
 * A real WAL reset: after a full checkpoint, SQLite's next write rewrites the
 * header with new salts and overwrites from frame 1, leaving the previous
 * generation's frames behind it in the file.
 */
static void test_sqlite_wal_reset_stale_tail(void **state)
{
	char *dir = wt_tmpdir("walreset");
	char *walpath;
	struct ws_wal_hdr h1, h2;
	struct ws_wal_cursor c1, c2;
	uint8_t *wal;
	size_t len1, len2;
	sqlite3 *db;

	(void)state;
	assert_non_null(dir);
	db = open_wal_db(dir, "reset.db", 1024);
	wt_exec(db, "PRAGMA journal_size_limit=-1");
	for (int t = 0; t < 10; t++)
		wt_exec(db, "INSERT INTO t(v) VALUES (randomblob(2500))");
	walpath = wt_path(dir, "reset.db-wal");
	wal = wt_read_file(walpath, &len1);
	assert_non_null(wal);
	scan_ok(wal, len1, &h1, &c1);
	assert_int_equal(c1.last_commit, c1.next_frame - 1);
	free(wal);

	wt_exec(db, "PRAGMA wal_checkpoint(RESTART)");
	wt_exec(db, "INSERT INTO t(v) VALUES (1)");
	wal = wt_read_file(walpath, &len2);
	assert_non_null(wal);
	assert_int_equal(len2, len1); /* not truncated: the old frames are still there */
	scan_ok(wal, len2, &h2, &c2);
	assert_int_equal(h2.salt1, h1.salt1 + 1);
	assert_int_not_equal(h2.salt2, h1.salt2);
	assert_int_equal(h2.checkpoint_seq, h1.checkpoint_seq + 1);
	/* Only the new generation's frames count; the scan stops at stale ones. */
	assert_true(c2.next_frame - 1 < c1.next_frame - 1);
	assert_int_equal(c2.last_commit, c2.next_frame - 1);
	assert_int_equal(c2.commit_db_size, query_int(db, "PRAGMA page_count"));
	free(wal);

	free(walpath);
	assert_int_equal(sqlite3_close(db), SQLITE_OK);
	wt_rmrf(dir);
	free(dir);
}

/*
 * The wal-index header SQLite's own connection wrote (the -shm file), and
 * the database header of the same database: decoded, they agree with the
 * WAL they describe and with what SQLite says.
 */
static void test_walidx_and_db_hdr_real(void **state)
{
	const uint32_t sizes[] = { 4096, 65536 };
	char *dir = wt_tmpdir("walidx");

	(void)state;
	assert_non_null(dir);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		char name[32], *path;
		struct ws_wal_hdr hdr;
		struct ws_wal_cursor c;
		struct ws_walidx_hdr ih;
		struct ws_db_hdr dh;
		uint8_t *buf;
		size_t len;
		sqlite3 *db;

		snprintf(name, sizeof(name), "idx%u.db", sizes[i]);
		db = open_wal_db(dir, name, sizes[i]);
		for (int t = 0; t < 5; t++)
			wt_exec(db, "INSERT INTO t(v) VALUES (randomblob(3000))");

		snprintf(name, sizeof(name), "idx%u.db-wal", sizes[i]);
		path = wt_path(dir, name);
		buf = wt_read_file(path, &len);
		assert_non_null(buf);
		scan_ok(buf, len, &hdr, &c);
		free(buf);
		free(path);

		snprintf(name, sizeof(name), "idx%u.db-shm", sizes[i]);
		path = wt_path(dir, name);
		buf = wt_read_file(path, &len);
		assert_non_null(buf);
		assert_true(len >= WS_WALIDX_HDR_BOTH);
		assert_int_equal(ws_walidx_hdr_decode(buf, len, &ih), 0);
		assert_int_equal(ih.version, WS_WAL_VERSION);
		assert_int_equal(ih.page_size, sizes[i]);
		assert_int_equal(ih.mx_frame, c.last_commit);
		assert_int_equal(ih.n_page, c.commit_db_size);
		assert_int_equal(ih.frame_cksum[0], c.commit_cksum[0]);
		assert_int_equal(ih.frame_cksum[1], c.commit_cksum[1]);
		assert_int_equal(ih.salt1, hdr.salt1);
		assert_int_equal(ih.salt2, hdr.salt2);
		assert_int_equal(ih.big_endian_cksum, hdr.magic == WS_WAL_MAGIC_BE);
		free(buf);
		free(path);

		/* Page 1 reaches the database file at a checkpoint. */
		wt_exec(db, "PRAGMA wal_checkpoint(TRUNCATE)");
		snprintf(name, sizeof(name), "idx%u.db", sizes[i]);
		path = wt_path(dir, name);
		buf = wt_read_file(path, &len);
		assert_non_null(buf);
		assert_true(ws_db_hdr_is_sqlite(buf, len));
		assert_int_equal(ws_db_hdr_decode(buf, len, &dh), 0);
		assert_true(ws_db_hdr_is_wal(&dh));
		assert_true(ws_db_hdr_wal_mode(buf));
		assert_int_equal(dh.page_size, sizes[i]);
		assert_int_equal(ws_db_hdr_page_size(buf), sizes[i]);
		assert_true(ws_wal_page_size_valid(dh.page_size));
		assert_int_equal(ws_db_hdr_pages(&dh), query_int(db, "PRAGMA page_count"));
		assert_int_equal(ws_db_hdr_page_count(buf), ws_db_hdr_pages(&dh));
		assert_int_equal(len, (size_t)ws_db_hdr_pages(&dh) * sizes[i]);
		free(buf);
		free(path);
		assert_int_equal(sqlite3_close(db), SQLITE_OK);
	}
	wt_rmrf(dir);
	free(dir);
}

/* A wal-index header as SQLite writes it: fields, checksum, two copies. */
static void walidx_make(uint8_t both[WS_WALIDX_HDR_BOTH], uint32_t mx, uint32_t salt1, uint32_t salt2)
{
	const uint32_t version = WS_WAL_VERSION, change = 7, npage = 3;
	const uint16_t szpage = 1; /* 65536 */
	uint32_t s[2] = { 0, 0 };

	memset(both, 0, WS_WALIDX_HDR_BOTH);
	memcpy(both, &version, 4);
	memcpy(both + 8, &change, 4);
	both[12] = 1;
	memcpy(both + 14, &szpage, 2);
	memcpy(both + 16, &mx, 4);
	memcpy(both + 20, &npage, 4);
	ws_put_be32(both + 32, salt1);
	ws_put_be32(both + 36, salt2);
	ws_wal_checksum(__BYTE_ORDER__ == __ORDER_BIG_ENDIAN__, both, 40, s);
	memcpy(both + 40, s, 8);
	memcpy(both + WS_WALIDX_HDR_SIZE, both, WS_WALIDX_HDR_SIZE);
}

/* What a reader that races a writer, or finds no wal-index, is told. */
static void test_walidx_hdr_bad(void **state)
{
	uint8_t both[WS_WALIDX_HDR_BOTH];
	struct ws_walidx_hdr h;

	(void)state;
	walidx_make(both, 42, 0x11223344u, 0xa5a5a5a5u);
	assert_int_equal(ws_walidx_hdr_decode(both, sizeof(both), &h), 0);
	assert_int_equal(h.mx_frame, 42);
	assert_int_equal(h.page_size, 65536);
	assert_int_equal(h.n_page, 3);
	assert_int_equal(h.change, 7);
	assert_int_equal(h.salt1, 0x11223344u);
	assert_int_equal(h.salt2, 0xa5a5a5a5u);

	/* Short buffers: one copy, or none. */
	assert_int_equal(ws_walidx_hdr_decode(both, 0, &h), -EINVAL);
	assert_int_equal(ws_walidx_hdr_decode(both, WS_WALIDX_HDR_SIZE, &h), -EINVAL);
	assert_int_equal(ws_walidx_hdr_decode(both, sizeof(both) - 1, &h), -EINVAL);

	/* Copies that differ: a writer between its two stores. */
	walidx_make(both, 42, 1, 2);
	both[WS_WALIDX_HDR_SIZE + 16] ^= 1; /* mxFrame of the second copy */
	assert_int_equal(ws_walidx_hdr_decode(both, sizeof(both), &h), -EAGAIN);
	walidx_make(both, 42, 1, 2);
	both[33] ^= 0x80; /* a salt byte of the first copy */
	assert_int_equal(ws_walidx_hdr_decode(both, sizeof(both), &h), -EAGAIN);

	/* Equal copies with a wrong checksum: read again too. */
	walidx_make(both, 42, 1, 2);
	both[16] ^= 1;
	both[WS_WALIDX_HDR_SIZE + 16] ^= 1;
	assert_int_equal(ws_walidx_hdr_decode(both, sizeof(both), &h), -EAGAIN);

	/* Not initialised (a zeroed -shm, or isInit 0 with equal copies). */
	memset(both, 0, sizeof(both));
	assert_int_equal(ws_walidx_hdr_decode(both, sizeof(both), &h), -ENODATA);
	walidx_make(both, 42, 1, 2);
	both[12] = 0;
	both[WS_WALIDX_HDR_SIZE + 12] = 0;
	assert_int_equal(ws_walidx_hdr_decode(both, sizeof(both), &h), -ENODATA);
	/* ... but differing copies are a writer at work, whatever isInit says. */
	both[WS_WALIDX_HDR_SIZE + 12] = 1;
	assert_int_equal(ws_walidx_hdr_decode(both, sizeof(both), &h), -EAGAIN);
}

/* Database headers that are short, foreign, in rollback mode, or whose
 * in-header size SQLite would not trust. */
static void test_db_hdr_bad(void **state)
{
	uint8_t b[WS_DB_HDR_SIZE];
	struct ws_db_hdr h;

	(void)state;
	memset(b, 0, sizeof(b));
	memcpy(b, "SQLite format 3", 16);
	b[16] = 0x10; /* 4096 */
	b[18] = b[19] = 2;
	ws_put_be32(b + 24, 9);
	ws_put_be32(b + 28, 12);
	ws_put_be32(b + 92, 9);
	assert_int_equal(ws_db_hdr_decode(b, sizeof(b), &h), 0);
	assert_int_equal(h.page_size, 4096);
	assert_true(ws_db_hdr_is_wal(&h));
	assert_int_equal(ws_db_hdr_pages(&h), 12);
	assert_int_equal(ws_db_hdr_page_count(b), 12);

	/* Short: no header, whatever its first bytes say. */
	assert_int_equal(ws_db_hdr_decode(b, sizeof(b) - 1, &h), WS_EFORMAT);
	assert_int_equal(ws_db_hdr_decode(b, 0, &h), WS_EFORMAT);
	assert_false(ws_db_hdr_is_sqlite(b, WS_DB_HDR_MAGIC_SIZE - 1));
	assert_true(ws_db_hdr_is_sqlite(b, WS_DB_HDR_MAGIC_SIZE));

	/* Stale in-header size: the file's size rules. */
	ws_put_be32(b + 92, 8);
	assert_int_equal(ws_db_hdr_decode(b, sizeof(b), &h), 0);
	assert_int_equal(ws_db_hdr_pages(&h), 0);
	assert_int_equal(ws_db_hdr_page_count(b), 0);
	ws_put_be32(b + 92, 9);

	/* Rollback journal mode, and the "1 means 65536" page size. */
	b[18] = 1;
	b[16] = 0;
	b[17] = 1;
	assert_int_equal(ws_db_hdr_decode(b, sizeof(b), &h), 0);
	assert_false(ws_db_hdr_is_wal(&h));
	assert_false(ws_db_hdr_wal_mode(b));
	assert_int_equal(h.page_size, 65536);
	assert_true(ws_wal_page_size_valid(h.page_size));
	/* Not a page size: decoded as it stands, the caller refuses it. */
	b[16] = 0x03;
	b[17] = 0x00;
	assert_int_equal(ws_db_hdr_decode(b, sizeof(b), &h), 0);
	assert_false(ws_wal_page_size_valid(h.page_size));

	/* Foreign bytes. */
	b[0] = 's';
	assert_int_equal(ws_db_hdr_decode(b, sizeof(b), &h), WS_EFORMAT);
	assert_false(ws_db_hdr_is_sqlite(b, sizeof(b)));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_checksum_matches_reference),
		cmocka_unit_test(test_verify_kernels_agree),
		cmocka_unit_test(test_hdr_roundtrip),
		cmocka_unit_test(test_frame_hdr_decode),
		cmocka_unit_test(test_valid_chain_all_page_sizes),
		cmocka_unit_test(test_torn_tail),
		cmocka_unit_test(test_bad_checksum_mid_chain),
		cmocka_unit_test(test_foreign_salt),
		cmocka_unit_test(test_not_a_wal),
		cmocka_unit_test(test_bad_header),
		cmocka_unit_test(test_resume_equals_full_scan),
		cmocka_unit_test(test_sqlite_real_wal),
		cmocka_unit_test(test_sqlite_wal_reset_stale_tail),
		cmocka_unit_test(test_walidx_and_db_hdr_real),
		cmocka_unit_test(test_walidx_hdr_bad),
		cmocka_unit_test(test_db_hdr_bad),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
