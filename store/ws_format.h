/*
 * walship's durable object formats: batch, snapshot part, manifest, watermark.
 * docs/FORMAT.md is the byte-level specification; format.c implements it.
 *
 * Decoders trust nothing: every length, count, magic, version and hash is
 * checked, and a mismatch is WS_EFORMAT (malformed/foreign) or WS_ECORRUPT
 * (hash mismatch) with a detail saying which field. Callers add the key.
 * Verification of SQLite's own checksum chain inside a batch is done by the
 * caller (core), which owns the WAL rules; this layer checks xxHash and SHA.
 */
#ifndef WS_FORMAT_H
#define WS_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "ws_fail.h"
#include "ws_hash.h"
#include "ws_store.h"

#define WS_BATCH_HDR_SIZE 96u
#define WS_SNAP_HDR_SIZE 64u
/* Version 2 headers (docs/FORMAT.md "Sealed objects"): version 1's fields
 * and codec, cipher, key id, nonce and stored payload length. */
#define WS_BATCH_HDR2_SIZE 136u
#define WS_SNAP_HDR2_SIZE 104u
#define WS_OBJ_HDR_MAX WS_BATCH_HDR2_SIZE
/* Offsets of the header hash (XXH3-64 of the header before it, which
 * includes the payload hash): an object's identity in keys and references.
 * Always the last 8 bytes of the header (ws_fmt_obj_hdr_hash). */
#define WS_BATCH_HDR_HASH_OFF 88u
#define WS_SNAP_HDR_HASH_OFF 56u

/* How a version 2 payload is stored: compressed (codec), then encrypted
 * (cipher). Values are the bytes' (docs/FORMAT.md). */
enum ws_fmt_codec { WS_FMT_CODEC_NONE = 0, WS_FMT_CODEC_ZSTD = 1 };
enum ws_fmt_cipher { WS_FMT_CIPHER_NONE = 0, WS_FMT_CIPHER_AES256GCM = 1 };
#define WS_SEAL_NONCE_LEN 12u
#define WS_SEAL_TAG_LEN 16u

/* A version 2 object's sealing fields; version 0 or 1 = a version 1 object. */
struct ws_fmt_seal {
	uint32_t version;
	uint32_t codec;            /* enum ws_fmt_codec */
	uint32_t cipher;           /* enum ws_fmt_cipher */
	uint64_t key_id;           /* the key's fingerprint (ws_seal.h); 0 without a cipher */
	uint8_t nonce[WS_SEAL_NONCE_LEN];
	uint64_t stored_len;       /* payload bytes as stored (with the tag) */
};

/* The payload is stored as it is (a version 1 object, or version 2 with
 * neither codec nor cipher): the reader uses it in place. */
static inline bool ws_fmt_seal_plain(const struct ws_fmt_seal *s)
{
	return s->codec == WS_FMT_CODEC_NONE && s->cipher == WS_FMT_CIPHER_NONE;
}
#define WS_TENANT_NAME_MAX 128u   /* including NUL */
#define WS_MANIFEST_ITEMS_MAX 65536u

/* Identity of a WAL generation as stored: sequence, salts, checksum order. */
struct ws_fmt_gen {
	uint32_t wal_magic;        /* 0x377f0682 or 0x377f0683; 0 = no WAL (db file only) */
	uint32_t checkpoint_seq;
	uint32_t salt1, salt2;
	uint32_t page_size;
};

static inline bool ws_fmt_gen_equal(const struct ws_fmt_gen *a, const struct ws_fmt_gen *b)
{
	return a->wal_magic == b->wal_magic && a->checkpoint_seq == b->checkpoint_seq &&
	       a->salt1 == b->salt1 && a->salt2 == b->salt2 && a->page_size == b->page_size;
}

/* ---- batch: a contiguous run of WAL frames, verbatim ------------------- */

struct ws_fmt_batch {
	struct ws_fmt_gen gen;
	uint64_t first_frame;
	uint64_t frame_count;
	uint32_t seed_cksum[2];    /* running checksum before first_frame */
	uint32_t end_cksum[2];     /* checksum of the last frame */
	uint64_t payload_xxh;      /* XXH3-64 of the frames (as SQLite wrote them, before sealing) */
	struct ws_fmt_seal seal;   /* version 2 only (seal.version 2); zero: version 1 */
};

/* Encode the header (version 1, or 2 when b->seal.version is 2); returns
 * its size. The payload follows it (sent from the caller's buffer). */
size_t ws_fmt_batch_encode_hdr(const struct ws_fmt_batch *b, uint8_t hdr[WS_OBJ_HDR_MAX]);
/* The frames' bytes (the plaintext) a batch's header names. */
static inline uint64_t ws_fmt_batch_plain_len(const struct ws_fmt_batch *b)
{
	return b->frame_count * (24u + (uint64_t)b->gen.page_size);
}
/*
 * Decode and check a batch's header (version 1 or 2): magic, header hash,
 * version, fields, codec and cipher values, and the object's exact length
 * (version 2: header + stored payload length). The payload is not looked
 * at. *hdr_len: the header's size. Errors: WS_EFORMAT, WS_ECORRUPT.
 */
int ws_fmt_batch_decode_hdr(const uint8_t *obj, size_t len, struct ws_fmt_batch *out,
			    size_t *hdr_len) WS_MUST_CHECK;
/*
 * Decode and check a whole batch object whose payload is stored as it is
 * (ws_fmt_seal_plain): header, exact length, payload hash. *frames points
 * into obj. A sealed one is WS_EFORMAT (ws_seal_open_batch opens it).
 * Errors: WS_EFORMAT, WS_ECORRUPT.
 */
int ws_fmt_batch_decode(const uint8_t *obj, size_t len, struct ws_fmt_batch *out,
			const uint8_t **frames) WS_MUST_CHECK;

/* ---- snapshot part: a run of database pages --------------------------- */

struct ws_fmt_snap {
	uint32_t page_size;
	uint32_t first_page;       /* 1-based page number of the first page */
	uint32_t page_count;
	uint64_t payload_xxh;      /* XXH3-64 of the pages (before sealing) */
	struct ws_fmt_seal seal;   /* as a batch's */
};
size_t ws_fmt_snap_encode_hdr(const struct ws_fmt_snap *s, uint8_t hdr[WS_OBJ_HDR_MAX]);
static inline uint64_t ws_fmt_snap_plain_len(const struct ws_fmt_snap *s)
{
	return (uint64_t)s->page_count * s->page_size;
}
/* As the batch's. */
int ws_fmt_snap_decode_hdr(const uint8_t *obj, size_t len, struct ws_fmt_snap *out,
			   size_t *hdr_len) WS_MUST_CHECK;
int ws_fmt_snap_decode(const uint8_t *obj, size_t len, struct ws_fmt_snap *out,
		       const uint8_t **pages) WS_MUST_CHECK;

/* The header hash of a batch or snapshot part of either version (the last
 * 8 bytes of its header, whose size is at offset 12); false when obj is
 * too short to hold the header it names. */
bool ws_fmt_obj_hdr_hash(const uint8_t *obj, size_t len, uint64_t *xxh);

/* ---- manifest: makes a range of batches part of the stream ------------ */

enum ws_manifest_kind {
	WS_MANIFEST_CONTINUE = 0,  /* same generation, continues prev */
	WS_MANIFEST_NEXT_GEN = 1,  /* new generation on top of prev's final state (proven) */
	WS_MANIFEST_REBASE = 2,    /* new base: snapshot parts + frames 1..last of this generation */
};

struct ws_fmt_objref {
	char key[WS_KEY_MAX];
	uint64_t first;            /* batch: first frame; snapshot: first page */
	uint64_t count;            /* batch: frames;     snapshot: pages */
	uint64_t xxh;              /* the object's header hash (covers its payload hash) */
	uint64_t length;           /* object length in bytes */
	/* An inline batch (key ""): its offset inside the manifest that names
	 * it (set by the decoder; docs/FORMAT.md "Manifest", version 2). */
	uint64_t inline_off;
};

/* One acknowledged tail merged into a carried manifest before its last
 * one: the commit frame it ended at and its time (docs/FORMAT.md
 * "Manifest", version 3). */
struct ws_fmt_tail {
	uint64_t frame;
	int64_t time_ms;
};

struct ws_fmt_manifest {
	char tenant[WS_TENANT_NAME_MAX];
	uint64_t epoch, pointer_generation;
	uint64_t wm_seq;           /* watermark seq this manifest was written for */
	int64_t time_ms;           /* when the frames were read from the WAL */
	struct ws_fmt_gen gen;
	uint32_t kind;             /* enum ws_manifest_kind */
	uint64_t first_frame;      /* first frame of the batches (1 for NEXT_GEN/REBASE) */
	uint64_t last_frame;       /* a commit frame, or 0 (REBASE of an empty WAL) */
	uint64_t valid_from_frame; /* restore points in this manifest start here */
	uint32_t seed_cksum[2];
	uint32_t end_cksum[2];
	uint32_t db_pages;         /* database size in pages at last_frame */
	char prev_key[WS_KEY_MAX]; /* "" = none */
	uint8_t prev_sha[WS_SHA256_LEN];
	uint64_t prev_length;
	uint32_t snap_count;
	uint32_t batch_count;
	struct ws_fmt_objref *snaps;   /* snap_count entries (owned; ws_fmt_manifest_free) */
	struct ws_fmt_objref *batches; /* batch_count entries */
	/* Encode only: the bytes of the inline batches (refs with key ""), in
	 * ref order, each a whole batch object. The manifest then carries them
	 * (version 2); a decoded one points at them with inline_off. */
	const struct iovec *inline_iov;
	int inline_iovcnt;
	/* Version 4 (a manifest slot, docs/FORMAT.md "Manifest"): the lane it
	 * was written in (0: an older version, no lane) and when its tail was
	 * durable at the sink as far as its writer knew (never before time_ms).
	 * Encoding with a lane writes version 4, which has no tail index. */
	uint64_t lane;
	int64_t durable_ms;
	/* The tails merged into it before its last (version 3): frames
	 * increasing, each in first_frame..last_frame - 1, times never
	 * decreasing and never after time_ms (the last tail's). Owned by a
	 * decoded manifest (ws_fmt_manifest_free). */
	uint32_t tail_count;
	struct ws_fmt_tail *tails;
};

/* An inline batch: carried by its manifest, no object (and no key) of its own. */
static inline bool ws_fmt_objref_inline(const struct ws_fmt_objref *r) { return r->key[0] == '\0'; }

/* Errors: -EINVAL when inline_iov does not hold exactly the inline refs'
 * lengths, or a lane (version 4) with merged tails. */
int ws_fmt_manifest_encode(const struct ws_fmt_manifest *m, struct ws_buf *out) WS_MUST_CHECK;
/* Errors: WS_EFORMAT, WS_ECORRUPT (trailer hash), -ENOMEM. Free with ws_fmt_manifest_free. */
int ws_fmt_manifest_decode(const uint8_t *obj, size_t len, struct ws_fmt_manifest *out) WS_MUST_CHECK;
void ws_fmt_manifest_free(struct ws_fmt_manifest *m);

/* ---- watermark: what is durably at the sink, and who owns it ---------- */

struct ws_fmt_watermark {
	uint32_t version;          /* 1 = legacy, no salts; 2 = current; 3 = carried; 4 = slots */
	char tenant[WS_TENANT_NAME_MAX];
	uint64_t epoch, pointer_generation;
	uint64_t seq;
	int64_t time_ms;
	struct ws_fmt_gen gen;     /* salts meaningful only when version >= 2 */
	uint64_t last_frame;
	uint32_t end_cksum[2];
	char manifest_key[WS_KEY_MAX];
	uint8_t manifest_sha[WS_SHA256_LEN];
	uint64_t manifest_length;
	/* Version 3: the manifest named above, carried whole (docs/FORMAT.md
	 * "Watermark"); carried_len 0: none. Decoding points carried into the
	 * object decoded (borrowed: valid while those bytes are); a reader that
	 * keeps no copy sets it NULL and keeps carried_len. */
	const uint8_t *carried;
	uint64_t carried_len;
	/* Version 4 (manifest slots, docs/FORMAT.md "Watermark"): the lane its
	 * writer (epoch, pointer_generation) opened, never 0; the manifest
	 * named is a hint (a slot at or behind the head), seq 0 and key ""
	 * when the lane has no slot yet. 0: versions 1..3. Written with
	 * slots = on (core/stream_slots.c); restore and verify read it
	 * (core/slots.c), every other reader refuses a tenant whose
	 * watermark is version 4 (core/chain.c ws_wm_slots_refuse). */
	uint64_t lane;
};

/* Version 4 exactly when w->lane != 0 (-EINVAL with carried bytes, or a
 * version above 3 asked for without a lane); else as before: 3 with
 * carried bytes, else w->version (0: 2). */
int ws_fmt_watermark_encode(const struct ws_fmt_watermark *w, struct ws_buf *out) WS_MUST_CHECK;
/* Versions 1..4. Errors: WS_EFORMAT (naming the field or the version),
 * WS_ECORRUPT. */
int ws_fmt_watermark_decode(const uint8_t *obj, size_t len, struct ws_fmt_watermark *out) WS_MUST_CHECK;

/* The version field of what looks like a watermark (its magic and
 * framing; nothing else checked), or 0. */
uint32_t ws_fmt_watermark_peek_version(const uint8_t *obj, size_t len);

/* ---- manifest slots (docs/FORMAT.md "Close record"; core/stream_slots.c) --- */

/*
 * Whether a token (epoch, pointer generation) fences another: either is
 * higher (not a lexicographic order). The rule a stream applies to the
 * watermark it reads (core/stream.c fenced_by) and a close record's closer
 * to the lane it closes.
 */
static inline bool ws_fmt_token_fences(uint64_t epoch, uint64_t pg, uint64_t over_epoch, uint64_t over_pg)
{
	return epoch > over_epoch || pg > over_pg;
}

/*
 * A close record: lane (epoch, pointer_generation, lane) of tenant ends
 * before slot seq, whose key it occupies; the next slot is seq in the
 * closer's lane. removed: closed by `forget` (closer fields 0), after which
 * the same token may open a new lane. prev names the slot it closes after
 * (slot seq - 1, of the closed lane or of whichever lane held it).
 */
struct ws_fmt_close {
	char tenant[WS_TENANT_NAME_MAX];
	uint64_t epoch, pointer_generation, lane;          /* the lane closed */
	uint64_t seq;                                      /* >= 1 */
	uint64_t closer_epoch, closer_pg, closer_lane;     /* all 0 when removed */
	bool removed;
	char prev_key[WS_KEY_MAX];                         /* "" = none */
	uint8_t prev_sha[WS_SHA256_LEN];
	uint64_t prev_length;
	int64_t time_ms;
};

/* Errors: -EINVAL (fields the decoder would refuse: seq or lane 0, closer
 * fields with removed or a closer that does not fence the lane). */
int ws_fmt_close_encode(const struct ws_fmt_close *c, struct ws_buf *out) WS_MUST_CHECK;
/* Errors: WS_EFORMAT (naming the field), WS_ECORRUPT (trailer hash). */
int ws_fmt_close_decode(const uint8_t *obj, size_t len, struct ws_fmt_close *out) WS_MUST_CHECK;

enum ws_fmt_slot_kind { WS_FMT_SLOT_MANIFEST = 1, WS_FMT_SLOT_CLOSE = 2 };
/* What a slot object is, from its magic alone (a manifest or a close
 * record; nothing else is checked). Errors: WS_EFORMAT. */
int ws_fmt_slot_kind(const uint8_t *obj, size_t len, enum ws_fmt_slot_kind *kind) WS_MUST_CHECK;

/* Tenant names: 1..127 bytes of [A-Za-z0-9._-], not starting with '.' or '_'. */
bool ws_tenant_name_valid(const char *name);

/* Little-endian helpers. */
static inline void ws_put_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}
static inline void ws_put_le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint32_t ws_get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t ws_get_le64(const uint8_t *p)
{
	return (uint64_t)ws_get_le32(p) | (uint64_t)ws_get_le32(p + 4) << 32;
}

#endif
