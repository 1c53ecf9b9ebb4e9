/*
 * SQLite WAL format: parsing and verification (no I/O here; see ws_reader.h).
 *
 * The byte-level specification lives at the top of wal.c. In short: a 32-byte
 * big-endian header (magic 0x377f0682 = checksums over little-endian words,
 * 0x377f0683 = big-endian words; version 3007000; page size as the plain value
 * 512..65536, SQLite writing 65536 as 0x00010000 (the "1 means 65536" encoding
 * is the database header's, not the WAL's); checkpoint sequence; salt-1;
 * salt-2; checksum of the first 24 bytes), then frames of a 24-byte header
 * (page number, database size in pages after a commit or 0, salt-1, salt-2,
 * cumulative checksum-1, checksum-2) and one page. A frame is valid only if
 * its salts equal the header's, its page number is not 0, and its checksum
 * equals the running checksum over (frame header bytes 0..7, page) seeded by
 * the previous frame's checksum (or the header's for frame 1). The first
 * invalid frame ends the WAL: everything from it on is a torn or stale tail.
 */
#ifndef WS_WAL_H
#define WS_WAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ws_fail.h"

#define WS_WAL_HDR_SIZE 32u
#define WS_WAL_FRAME_HDR_SIZE 24u
#define WS_WAL_MAGIC_LE 0x377f0682u
#define WS_WAL_MAGIC_BE 0x377f0683u
#define WS_WAL_VERSION 3007000u
#define WS_WAL_PAGE_MIN 512u
#define WS_WAL_PAGE_MAX 65536u

struct ws_wal_hdr {
	uint32_t magic;          /* WS_WAL_MAGIC_LE or WS_WAL_MAGIC_BE */
	uint32_t version;
	uint32_t page_size;      /* decoded: 512..65536, power of two */
	uint32_t checkpoint_seq;
	uint32_t salt1;
	uint32_t salt2;
	uint32_t cksum1;         /* header checksum = seed for frame 1 */
	uint32_t cksum2;
};

struct ws_wal_frame_hdr {
	uint32_t pgno;
	uint32_t db_size;        /* pages after commit; 0 = not a commit frame */
	uint32_t salt1;
	uint32_t salt2;
	uint32_t cksum1;
	uint32_t cksum2;
};

/*
 * Parse and validate a WAL header.
 * Errors: WS_ENOTWAL (wrong magic, version, page size or header checksum;
 * the detail says which).
 */
int ws_wal_hdr_parse(const uint8_t buf[WS_WAL_HDR_SIZE], struct ws_wal_hdr *out) WS_MUST_CHECK;

/*
 * True when SQLite reads a WAL file whose first len bytes are buf as an
 * empty WAL (walIndexRecover): shorter than a header, or a header with a
 * wrong magic, page size or checksum (a crash before the header was
 * synced, a file zeroed). A wrong version alone is SQLite's error, not an
 * empty WAL.
 */
bool ws_wal_hdr_sqlite_empty(const uint8_t *buf, size_t len);

/* Encode a header (computing its checksum). Used by tests and tools. */
void ws_wal_hdr_encode(struct ws_wal_hdr *hdr, uint8_t buf[WS_WAL_HDR_SIZE]);

/* Decode the 24-byte frame header (no validation). */
void ws_wal_frame_hdr_decode(const uint8_t buf[WS_WAL_FRAME_HDR_SIZE], struct ws_wal_frame_hdr *out);

/*
 * SQLite's cumulative checksum over `len` bytes (a multiple of 8) seeded by
 * s[0], s[1]; big_endian selects the word byte order (magic 0x377f0683).
 */
void ws_wal_checksum(bool big_endian, const uint8_t *data, size_t len, uint32_t s[2]);

static inline uint32_t ws_wal_frame_size(uint32_t page_size)
{
	return WS_WAL_FRAME_HDR_SIZE + page_size;
}

/*
 * A cursor verifies frames in order. It carries the running checksum, so a
 * scan can resume at any frame whose predecessor's checksum is known (for
 * instance one recorded in a watermark) without re-reading from frame 1.
 */
struct ws_wal_cursor {
	bool big_endian;
	uint32_t page_size;
	uint32_t salt1, salt2;
	uint32_t cksum[2];        /* checksum of the last accepted frame */
	uint64_t next_frame;      /* 1-based index of the next frame expected */
	uint64_t last_commit;     /* index of the last accepted commit frame, 0 = none */
	uint32_t commit_cksum[2]; /* running checksum at last_commit */
	uint32_t commit_db_size;  /* db_size of last_commit */
};

/* Start at frame 1 of the WAL whose header is hdr. */
void ws_wal_cursor_init(struct ws_wal_cursor *c, const struct ws_wal_hdr *hdr);

/*
 * Resume at frame `next_frame` (> 1) with the checksum of frame next_frame-1.
 * last_commit is set to next_frame-1 (resumption points are commit frames).
 */
void ws_wal_cursor_resume(struct ws_wal_cursor *c, const struct ws_wal_hdr *hdr,
			  uint64_t next_frame, const uint32_t cksum[2]);

/*
 * Check one frame (ws_wal_frame_size(page_size) bytes) as the next in order.
 * Returns 1 and advances the cursor when the frame is valid; returns 0 and
 * leaves the cursor unchanged when the frame ends the WAL (salt mismatch or
 * checksum mismatch: a torn tail, a stale frame of an older generation, or
 * foreign bytes). Never fails otherwise. *out (if non-NULL) gets the header.
 */
int ws_wal_cursor_step(struct ws_wal_cursor *c, const uint8_t *frame, struct ws_wal_frame_hdr *out);

/*
 * A run of frames checked in pieces as they are read (a slot of the spill
 * ring): where it starts, what it chains from, and what the check found.
 * Set first_frame and seed, zero the rest; then ws_wal_run_check each piece
 * in order until it returns fewer frames than given (the chain ended).
 */
struct ws_wal_run {
	uint64_t first_frame;       /* absolute number of the run's first frame */
	uint32_t seed[2];           /* the checksum its first frame chains from */
	uint32_t valid;             /* frames, in order, that belong to the chain */
	bool ended;                 /* a frame did not: the chain ends inside the run */
	uint64_t last_commit;       /* absolute number of the last valid commit frame, 0 none */
	uint32_t commit_cksum[2];   /* its stored checksum */
	uint32_t commit_db_size;    /* its database size in pages */
	uint32_t end_cksum[2];      /* stored checksum of the last valid frame (seed when none) */
};

struct ws_xxh_state;
/*
 * Check n frames (in memory, following the run's valid ones) for salts,
 * a page number, and SQLite's checksum chain, eight at a time so each
 * stays in L1 while it is checked and then hashed into hs (if non-NULL).
 * Advances the run; returns the frames of the piece that are valid.
 */
uint32_t ws_wal_run_check(struct ws_wal_run *run, bool big_endian, uint32_t page_size, uint32_t salt1,
			  uint32_t salt2, const uint8_t *frames, uint32_t n, struct ws_xxh_state *hs);

/*
 * Verify n consecutive frames against SQLite's checksum chain, starting
 * from seed (the running checksum before the first). Each frame's stored
 * checksum seeds the next, so pieces of one chain can be verified apart.
 * Returns how many frames verify, in order (n when all do).
 */
size_t ws_wal_verify_frames(bool big_endian, uint32_t page_size, const uint8_t *frames, size_t n,
			    const uint32_t seed[2]);

/*
 * The kernels behind ws_wal_verify_frames (io/wal_simd.c): the plain loop,
 * and a vector one where the CPU has it. ws_wal_verify_frames uses the best
 * available unless the environment says WS_SIMD=none. All give the same
 * answer; tests compare them.
 */
enum ws_wal_simd { WS_WAL_SIMD_NONE, WS_WAL_SIMD_AVX2 };
bool ws_wal_simd_available(enum ws_wal_simd k);
enum ws_wal_simd ws_wal_simd_best(void);
size_t ws_wal_verify_frames_with(enum ws_wal_simd k, bool big_endian, uint32_t page_size, const uint8_t *frames,
				 size_t n, const uint32_t seed[2]);
size_t ws_wal_verify_frames_plain(bool big_endian, uint32_t page_size, const uint8_t *frames, size_t n,
				  const uint32_t seed[2]);

/*
 * Parse the header of a whole in-memory WAL of len bytes and verify its frames
 * in order. *c ends as a cursor past the last valid frame (c->last_commit is
 * the database's end). A partial frame at the end is a torn tail, not an error.
 * Errors: WS_ENOTWAL (len < 32, including 0, or a bad header; see
 * ws_wal_hdr_parse). SQLite reads a 0-byte WAL as an empty one; callers that
 * mirror it check len == 0 first.
 */
int ws_wal_scan(const uint8_t *buf, size_t len, struct ws_wal_hdr *hdr,
		struct ws_wal_cursor *c) WS_MUST_CHECK;

/* Byte offset of frame n (1-based) in a WAL with this page size. */
static inline uint64_t ws_wal_frame_offset(uint32_t page_size, uint64_t n)
{
	return WS_WAL_HDR_SIZE + (n - 1) * (uint64_t)ws_wal_frame_size(page_size);
}

/*
 * Page sizes SQLite can have: a power of two, WS_WAL_PAGE_MIN..WS_WAL_PAGE_MAX
 * (the same for the WAL header, the wal-index and the database header).
 */
bool ws_wal_page_size_valid(uint32_t page_size);

/*
 * WAL-INDEX HEADER (wal.c, "WAL-INDEX HEADER"): two 48-byte copies at the
 * start of the -shm, native byte order but for the salts. A reader copies
 * both (the first, a fence, the second) and decodes them here.
 */
#define WS_WALIDX_HDR_SIZE 48u
#define WS_WALIDX_HDR_BOTH (2u * WS_WALIDX_HDR_SIZE)

struct ws_walidx_hdr {
	uint32_t version;        /* iVersion: 3007000 */
	uint32_t change;         /* iChange: counts the transactions written */
	bool big_endian_cksum;   /* bigEndCksum: the WAL's checksum word order */
	uint32_t page_size;      /* szPage decoded (1 = 65536) */
	uint32_t mx_frame;       /* the last frame a reader may use, 0 none */
	uint32_t n_page;         /* the database's size in pages at mx_frame */
	uint32_t frame_cksum[2]; /* the checksum of frame mx_frame */
	uint32_t salt1, salt2;   /* the WAL header's salts, as the WAL header's words */
	uint32_t cksum[2];       /* over bytes 0..39, native order */
};

/*
 * Decode the two copies of the wal-index header as SQLite's readers take
 * them (walIndexTryHdr): equal, initialised and the checksum right.
 * Errors: -EINVAL (len < WS_WALIDX_HDR_BOTH); -ENODATA (equal but not
 * initialised: no connection has built the wal-index); -EAGAIN (the copies
 * differ or the checksum is wrong: a writer is between its stores, read
 * them again).
 */
int ws_walidx_hdr_decode(const uint8_t *both, size_t len, struct ws_walidx_hdr *out) WS_MUST_CHECK;
/*
 * Encode one copy of the header as SQLite's writer stores it
 * (walIndexWriteHdr): isInit 1, the checksum over bytes 0..39 in native
 * order, which it also puts in h->cksum. The writer stores the copy at 48
 * first, then a full barrier, then the one at 0.
 */
void ws_walidx_hdr_encode(struct ws_walidx_hdr *h, uint8_t out[WS_WALIDX_HDR_SIZE]);

/*
 * DATABASE HEADER (wal.c, "DATABASE HEADER"): the first 100 bytes of page 1,
 * big-endian. The accessors read one field of a buffer the caller knows
 * holds it (the offsets below); ws_db_hdr_decode checks and takes them all.
 */
#define WS_DB_HDR_SIZE 100u
#define WS_DB_HDR_MAGIC_SIZE 16u /* "SQLite format 3\0" */
#define WS_DB_HDR_MODE_END 20u   /* bytes a reader needs for the journal mode */

struct ws_db_hdr {
	uint32_t page_size;          /* 16: decoded (1 = 65536), not validated */
	uint8_t write_version;       /* 18: 1 rollback journal, 2 WAL */
	uint8_t read_version;        /* 19 */
	uint32_t change_counter;     /* 24 */
	uint32_t page_count;         /* 28: the in-header database size */
	uint32_t version_valid_for;  /* 92 */
};

/* Whether buf (len bytes) starts with the database header's magic string. */
bool ws_db_hdr_is_sqlite(const uint8_t *buf, size_t len);
/* The page size at 16..17, decoded (1 = 65536), not validated. */
uint32_t ws_db_hdr_page_size(const uint8_t buf[WS_DB_HDR_MODE_END]);
/* Whether bytes 18 and 19 both say WAL (2). */
bool ws_db_hdr_wal_mode(const uint8_t buf[WS_DB_HDR_MODE_END]);
/*
 * The in-header page count at 28 when SQLite takes it as the database's
 * size: the change counter at 24 equals version-valid-for at 92. 0 when
 * SQLite goes by the file's size instead (or the field is 0).
 */
uint32_t ws_db_hdr_page_count(const uint8_t buf[WS_DB_HDR_SIZE]);

/*
 * Decode a database header. Errors: WS_EFORMAT (len < WS_DB_HDR_SIZE or no
 * magic string: not a SQLite database). The fields are not validated: the
 * caller decides what a wrong page size or journal mode means.
 */
int ws_db_hdr_decode(const uint8_t *buf, size_t len, struct ws_db_hdr *out) WS_MUST_CHECK;
/* Whether the header says WAL mode (write and read version both 2). */
bool ws_db_hdr_is_wal(const struct ws_db_hdr *h);
/* The header's page count when valid (ws_db_hdr_page_count), else 0. */
uint32_t ws_db_hdr_pages(const struct ws_db_hdr *h);

/* Big-endian helpers shared by the format code. */
static inline uint32_t ws_get_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static inline void ws_put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24); p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8); p[3] = (uint8_t)v;
}

#endif
