/*
 * Durable object formats. The byte-level specification is docs/FORMAT.md;
 * this file must match it field for field. All integers are little-endian.
 *
 * Batch (".wsb"), header 96 bytes, then frames verbatim from the WAL:
 *   0  8  magic "WSBATCH1"        8  4  version (1)       12 4  header size (96)
 *   16 4  page size               20 4  WAL magic          24 4  checkpoint seq
 *   28 4  salt-1                  32 4  salt-2             36 4  reserved (0)
 *   40 8  first frame             48 8  frame count
 *   56 4  seed checksum-1         60 4  seed checksum-2
 *   64 4  end checksum-1          68 4  end checksum-2
 *   72 8  XXH3-64 of the frames   80 8  reserved (0)       88 8  XXH3-64 of bytes 0..87
 *   Object length must equal 96 + count * (24 + page size).
 *
 * Snapshot part (".wss"), header 64 bytes, then pages:
 *   0 8 magic "WSSNAPP1"  8 4 version (1)  12 4 header size (64)  16 4 page size
 *   20 4 first page (1-based)  24 4 page count  28 4 reserved  32 8 XXH3-64 of pages
 *   40 16 reserved (0)  56 8 XXH3-64 of bytes 0..55
 *
 * Version 2 of both (docs/FORMAT.md "Sealed objects"): the same fields, the
 * v1 header hash's place and on holding codec, cipher, key id, nonce and
 * the stored payload length (put_seal), the header hash last; header 136
 * (batch) / 104 (snapshot part) bytes; the payload is stored compressed
 * and/or encrypted (store/seal.c opens it).
 *
 * Manifest (".wsm"), watermark and close record are a fixed head, variable
 * records and a trailing XXH3-64 of everything before it; see docs/FORMAT.md. A reader that
 * finds any length, count or hash out of place rejects the whole object.
 */
#include "ws_format.h"
#include "ws_assert.h"
#include "ws_hash.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BATCH_MAGIC "WSBATCH1"
#define SNAP_MAGIC "WSSNAPP1"
#define MANIFEST_MAGIC "WSMANIF1"
#define WM_MAGIC "WSWMARK1"
#define CLOSE_MAGIC "WSCLOSE1"
#define MANIFEST_VERSION 1u
#define MANIFEST_VERSION_INLINE 2u /* carries batches of its own (docs/FORMAT.md) */
#define MANIFEST_VERSION_TAILS 3u  /* version 2 and the time of each tail merged into it */
#define WM_VERSION_CURRENT 2u
#define MANIFEST_VERSION_SLOT 4u   /* version 2 (no tail index) in a lane: lane and durable_ms */
#define WM_VERSION_CARRY 3u /* version 2 and the manifest it names, carried whole */
#define WM_VERSION_SLOTS 4u /* version 2 naming a hint slot, and the writer's lane */
#define CLOSE_VERSION 1u

static bool wal_magic_ok(uint32_t m, bool allow_zero)
{
	return m == 0x377f0682u || m == 0x377f0683u || (allow_zero && m == 0);
}

static bool page_size_ok(uint32_t ps)
{
	return ps >= 512 && ps <= 65536 && (ps & (ps - 1)) == 0;
}

bool ws_tenant_name_valid(const char *name)
{
	size_t n = name ? strlen(name) : 0;
	if (n == 0 || n >= WS_TENANT_NAME_MAX || name[0] == '.' || name[0] == '_')
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return false;
	}
	/* "checkpoints" holds the checkpoint decision store (docs/CHECKPOINTS.md). */
	return strcmp(name, "..") != 0 && strcmp(name, "checkpoints") != 0;
}

/* ---- version 2's sealing fields (batch and snapshot part alike) -------- */

/*
 * At `off` (88 in a batch, 56 in a snapshot part), 40 bytes, then the
 * header hash:
 *   +0 4 codec  +4 4 cipher  +8 8 key id  +16 12 nonce  +28 4 reserved (0)
 *   +32 8 stored payload length
 */
#define SEAL_FIELDS_BYTES 40u

static void put_seal(uint8_t *h, size_t off, const struct ws_fmt_seal *s)
{
	ws_put_le32(h + off, s->codec);
	ws_put_le32(h + off + 4, s->cipher);
	ws_put_le64(h + off + 8, s->key_id);
	memcpy(h + off + 16, s->nonce, WS_SEAL_NONCE_LEN);
	ws_put_le64(h + off + 32, s->stored_len);
}

static bool all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

/* Read and check the sealing fields against the plaintext's length. */
static int get_seal(const uint8_t *h, size_t off, uint64_t plain_len, const char *what, struct ws_fmt_seal *s)
{
	s->version = 2;
	s->codec = ws_get_le32(h + off);
	s->cipher = ws_get_le32(h + off + 4);
	s->key_id = ws_get_le64(h + off + 8);
	memcpy(s->nonce, h + off + 16, WS_SEAL_NONCE_LEN);
	s->stored_len = ws_get_le64(h + off + 32);
	if (s->codec > WS_FMT_CODEC_ZSTD)
		return ws_fail(WS_EFORMAT, "%s names unknown codec %u", what, s->codec);
	if (s->cipher > WS_FMT_CIPHER_AES256GCM)
		return ws_fail(WS_EFORMAT, "%s names unknown cipher %u", what, s->cipher);
	if (ws_get_le32(h + off + 28) != 0 ||
	    (s->cipher == WS_FMT_CIPHER_NONE && (s->key_id != 0 || !all_zero(s->nonce, WS_SEAL_NONCE_LEN))))
		return ws_fail(WS_EFORMAT, "%s has a key id or nonce without a cipher, or reserved bytes set", what);
	const uint64_t tag = s->cipher ? WS_SEAL_TAG_LEN : 0;
	if (s->stored_len < tag || (s->codec == WS_FMT_CODEC_NONE && s->stored_len != plain_len + tag))
		return ws_fail(WS_EFORMAT, "%s stores %llu payload bytes, which cannot hold %llu bytes under "
			       "codec %u, cipher %u", what, (unsigned long long)s->stored_len,
			       (unsigned long long)plain_len, s->codec, s->cipher);
	return 0;
}

/*
 * The version, header size and header hash every batch and snapshot part
 * share; *hdr_len: the header's size (v1_size or v2_size).
 */
static int check_hdr(const uint8_t *obj, size_t len, const char *magic, const char *what, size_t v1_size,
		     size_t v2_size, size_t *hdr_len)
{
	uint32_t version, size;
	if (len < v1_size || memcmp(obj, magic, 8) != 0)
		return ws_fail(WS_EFORMAT, "not a walship %s (bad magic or %zu bytes)", what, len);
	version = ws_get_le32(obj + 8);
	size = ws_get_le32(obj + 12);
	if ((version != 1 && version != 2) || size != (version == 1 ? v1_size : v2_size))
		return ws_fail(WS_EFORMAT, "unsupported %s version %u (header of %u bytes); this reader knows "
			       "versions 1 and 2", what, version, size);
	if (len < size)
		return ws_fail(WS_EFORMAT, "%s of %zu bytes is shorter than its %u-byte header", what, len, size);
	if (ws_get_le64(obj + size - 8) != ws_xxh64(obj, size - 8))
		return ws_fail(WS_ECORRUPT, "%s header hash mismatch", what);
	*hdr_len = size;
	return 0;
}

bool ws_fmt_obj_hdr_hash(const uint8_t *obj, size_t len, uint64_t *xxh)
{
	uint32_t size = len >= 16 ? ws_get_le32(obj + 12) : 0;
	if (size < 16 || size > len)
		return false;
	*xxh = ws_get_le64(obj + size - 8);
	return true;
}

/* The object's length: its header and the payload as stored. */
static int check_len(size_t len, size_t hdr_len, const struct ws_fmt_seal *s, uint64_t plain_len,
		     const char *what)
{
	uint64_t want = hdr_len + (s->version == 2 ? s->stored_len : plain_len);
	if (s->version == 2 && s->stored_len > UINT64_MAX - hdr_len)
		want = 0;
	if (want != len)
		return ws_fail(WS_EFORMAT, "%s is %zu bytes, header says %llu (truncated or padded)", what, len,
			       (unsigned long long)want);
	return 0;
}

/* ---- batch ------------------------------------------------------------ */

size_t ws_fmt_batch_encode_hdr(const struct ws_fmt_batch *b, uint8_t h[WS_OBJ_HDR_MAX])
{
	const bool v2 = b->seal.version == 2;
	const size_t size = v2 ? WS_BATCH_HDR2_SIZE : WS_BATCH_HDR_SIZE;
	memset(h, 0, size);
	memcpy(h, BATCH_MAGIC, 8);
	ws_put_le32(h + 8, v2 ? 2 : 1);
	ws_put_le32(h + 12, (uint32_t)size);
	ws_put_le32(h + 16, b->gen.page_size);
	ws_put_le32(h + 20, b->gen.wal_magic);
	ws_put_le32(h + 24, b->gen.checkpoint_seq);
	ws_put_le32(h + 28, b->gen.salt1);
	ws_put_le32(h + 32, b->gen.salt2);
	ws_put_le64(h + 40, b->first_frame);
	ws_put_le64(h + 48, b->frame_count);
	ws_put_le32(h + 56, b->seed_cksum[0]);
	ws_put_le32(h + 60, b->seed_cksum[1]);
	ws_put_le32(h + 64, b->end_cksum[0]);
	ws_put_le32(h + 68, b->end_cksum[1]);
	ws_put_le64(h + 72, b->payload_xxh);
	if (v2)
		put_seal(h, 88, &b->seal);
	ws_put_le64(h + size - 8, ws_xxh64(h, size - 8));
	return size;
}

static void get_batch_fields(const uint8_t *obj, struct ws_fmt_batch *b)
{
	memset(b, 0, sizeof(*b));
	b->gen.page_size = ws_get_le32(obj + 16);
	b->gen.wal_magic = ws_get_le32(obj + 20);
	b->gen.checkpoint_seq = ws_get_le32(obj + 24);
	b->gen.salt1 = ws_get_le32(obj + 28);
	b->gen.salt2 = ws_get_le32(obj + 32);
	b->first_frame = ws_get_le64(obj + 40);
	b->frame_count = ws_get_le64(obj + 48);
	b->seed_cksum[0] = ws_get_le32(obj + 56);
	b->seed_cksum[1] = ws_get_le32(obj + 60);
	b->end_cksum[0] = ws_get_le32(obj + 64);
	b->end_cksum[1] = ws_get_le32(obj + 68);
	b->payload_xxh = ws_get_le64(obj + 72);
}

int ws_fmt_batch_decode_hdr(const uint8_t *obj, size_t len, struct ws_fmt_batch *b, size_t *hdr_len)
{
	int rc = check_hdr(obj, len, BATCH_MAGIC, "batch", WS_BATCH_HDR_SIZE, WS_BATCH_HDR2_SIZE, hdr_len);
	if (rc)
		return rc;
	get_batch_fields(obj, b);
	if (!page_size_ok(b->gen.page_size) || !wal_magic_ok(b->gen.wal_magic, false))
		return ws_fail(WS_EFORMAT, "batch has page size %u / WAL magic %#x", b->gen.page_size,
			       b->gen.wal_magic);
	if (b->first_frame == 0 || b->frame_count == 0 || b->frame_count > (1u << 26))
		return ws_fail(WS_EFORMAT, "batch frame range %llu+%llu invalid",
			       (unsigned long long)b->first_frame, (unsigned long long)b->frame_count);
	if (*hdr_len == WS_BATCH_HDR2_SIZE &&
	    (rc = get_seal(obj, 88, ws_fmt_batch_plain_len(b), "batch", &b->seal)) != 0)
		return rc;
	return check_len(len, *hdr_len, &b->seal, ws_fmt_batch_plain_len(b), "batch");
}

/* A payload stored as it is: its hash; what it holds starts at obj + hdr_len. */
static int plain_payload(const uint8_t *obj, size_t len, size_t hdr_len, const struct ws_fmt_seal *s,
			 uint64_t xxh, const char *what)
{
	if (!ws_fmt_seal_plain(s))
		return ws_fail(WS_EFORMAT, "%s is sealed (codec %u, cipher %u): it must be opened", what, s->codec,
			       s->cipher);
	if (ws_xxh64(obj + hdr_len, len - hdr_len) != xxh)
		return ws_fail(WS_ECORRUPT, "%s payload hash mismatch", what);
	return 0;
}

int ws_fmt_batch_decode(const uint8_t *obj, size_t len, struct ws_fmt_batch *b, const uint8_t **frames)
{
	size_t hl;
	int rc = ws_fmt_batch_decode_hdr(obj, len, b, &hl);
	if (!rc)
		rc = plain_payload(obj, len, hl, &b->seal, b->payload_xxh, "batch");
	if (!rc && frames)
		*frames = obj + hl;
	return rc;
}

/* ---- snapshot part ---------------------------------------------------- */

size_t ws_fmt_snap_encode_hdr(const struct ws_fmt_snap *s, uint8_t h[WS_OBJ_HDR_MAX])
{
	const bool v2 = s->seal.version == 2;
	const size_t size = v2 ? WS_SNAP_HDR2_SIZE : WS_SNAP_HDR_SIZE;
	memset(h, 0, size);
	memcpy(h, SNAP_MAGIC, 8);
	ws_put_le32(h + 8, v2 ? 2 : 1);
	ws_put_le32(h + 12, (uint32_t)size);
	ws_put_le32(h + 16, s->page_size);
	ws_put_le32(h + 20, s->first_page);
	ws_put_le32(h + 24, s->page_count);
	ws_put_le64(h + 32, s->payload_xxh);
	if (v2)
		put_seal(h, 56, &s->seal);
	ws_put_le64(h + size - 8, ws_xxh64(h, size - 8));
	return size;
}

int ws_fmt_snap_decode_hdr(const uint8_t *obj, size_t len, struct ws_fmt_snap *s, size_t *hdr_len)
{
	int rc = check_hdr(obj, len, SNAP_MAGIC, "snapshot part", WS_SNAP_HDR_SIZE, WS_SNAP_HDR2_SIZE, hdr_len);
	if (rc)
		return rc;
	memset(s, 0, sizeof(*s));
	s->page_size = ws_get_le32(obj + 16);
	s->first_page = ws_get_le32(obj + 20);
	s->page_count = ws_get_le32(obj + 24);
	s->payload_xxh = ws_get_le64(obj + 32);
	if (!page_size_ok(s->page_size) || s->first_page == 0 || s->page_count == 0)
		return ws_fail(WS_EFORMAT, "snapshot part geometry invalid (page size %u, pages %u+%u)",
			       s->page_size, s->first_page, s->page_count);
	if (*hdr_len == WS_SNAP_HDR2_SIZE &&
	    (rc = get_seal(obj, 56, ws_fmt_snap_plain_len(s), "snapshot part", &s->seal)) != 0)
		return rc;
	return check_len(len, *hdr_len, &s->seal, ws_fmt_snap_plain_len(s), "snapshot part");
}

int ws_fmt_snap_decode(const uint8_t *obj, size_t len, struct ws_fmt_snap *s, const uint8_t **pages)
{
	size_t hl;
	int rc = ws_fmt_snap_decode_hdr(obj, len, s, &hl);
	if (!rc)
		rc = plain_payload(obj, len, hl, &s->seal, s->payload_xxh, "snapshot part");
	if (!rc && pages)
		*pages = obj + hl;
	return rc;
}

/* ---- variable-length records: a tiny writer and a bounds-checked reader - */

static void w_bytes(struct ws_buf *b, const void *p, size_t n) { ws_buf_append(b, p, n); }
static void w32(struct ws_buf *b, uint32_t v) { uint8_t t[4]; ws_put_le32(t, v); w_bytes(b, t, 4); }
static void w64(struct ws_buf *b, uint64_t v) { uint8_t t[8]; ws_put_le64(t, v); w_bytes(b, t, 8); }
static void wstr(struct ws_buf *b, const char *s)
{
	size_t n = strlen(s);
	/* Only names and keys (< WS_KEY_MAX) are written as strings: the length fits its two bytes. */
	WS_ASSERT(n <= UINT16_MAX);
	uint8_t t[2] = { (uint8_t)n, (uint8_t)(n >> 8) };
	w_bytes(b, t, 2);
	w_bytes(b, s, n);
}

struct rd {
	const uint8_t *p;
	size_t left;
	int err;
	const char *what;
};

static const uint8_t *r_take(struct rd *r, size_t n, const char *what)
{
	const uint8_t *p;
	if (r->err)
		return NULL;
	if (n > r->left) {
		r->err = WS_EFORMAT;
		r->what = what;
		return NULL;
	}
	p = r->p;
	r->p += n;
	r->left -= n;
	return p;
}
static uint32_t r32(struct rd *r, const char *what)
{
	const uint8_t *p = r_take(r, 4, what);
	return p ? ws_get_le32(p) : 0;
}
static uint64_t r64(struct rd *r, const char *what)
{
	const uint8_t *p = r_take(r, 8, what);
	return p ? ws_get_le64(p) : 0;
}
static void rstr(struct rd *r, char *dst, size_t cap, const char *what)
{
	const uint8_t *p = r_take(r, 2, what);
	size_t n;
	dst[0] = '\0';
	if (!p)
		return;
	n = (size_t)p[0] | (size_t)p[1] << 8;
	if (n >= cap) {
		r->err = WS_EFORMAT;
		r->what = what;
		return;
	}
	p = r_take(r, n, what);
	if (!p)
		return;
	memcpy(dst, p, n);
	dst[n] = '\0';
	if (memchr(dst, '\0', n)) {
		r->err = WS_EFORMAT;
		r->what = what;
	}
}

/* Common framing: magic(8) version(4) length(4) ... xxh3(8). */
static int open_framed(const uint8_t *obj, size_t len, const char *magic, const char *name,
		       struct rd *r, uint32_t *version)
{
	if (len < 24 || memcmp(obj, magic, 8) != 0)
		return ws_fail(WS_EFORMAT, "not a walship %s (bad magic or %zu bytes)", name, len);
	if (ws_get_le32(obj + 12) != len)
		return ws_fail(WS_EFORMAT, "%s is %zu bytes, header says %u (truncated or padded)", name,
			       len, ws_get_le32(obj + 12));
	if (ws_get_le64(obj + len - 8) != ws_xxh64(obj, len - 8))
		return ws_fail(WS_ECORRUPT, "%s hash mismatch", name);
	*version = ws_get_le32(obj + 8);
	r->p = obj + 16;
	r->left = len - 24;
	r->err = 0;
	r->what = NULL;
	return 0;
}

static int close_framed(struct rd *r, const char *name)
{
	if (r->err)
		return ws_fail(r->err, "%s field '%s' out of bounds or malformed", name, r->what);
	if (r->left != 0)
		return ws_fail(WS_EFORMAT, "%s has %zu trailing bytes", name, r->left);
	return 0;
}

static void begin_framed(struct ws_buf *b, const char *magic, uint32_t version)
{
	w_bytes(b, magic, 8);
	w32(b, version);
	w32(b, 0); /* length, patched in finish_framed */
}

static int finish_framed(struct ws_buf *b)
{
	if (b->err)
		return b->err;
	if (b->len > UINT32_MAX - 8)
		return WS_ETOOBIG;
	WS_ASSERT(b->len >= 16); /* begin_framed's magic, version and length are there to patch */
	ws_put_le32(b->data + 12, (uint32_t)(b->len + 8));
	w64(b, ws_xxh64(b->data, b->len));
	return b->err;
}

static void w_gen(struct ws_buf *b, const struct ws_fmt_gen *g)
{
	w32(b, g->wal_magic);
	w32(b, g->checkpoint_seq);
	w32(b, g->salt1);
	w32(b, g->salt2);
	w32(b, g->page_size);
}

static void r_gen(struct rd *r, struct ws_fmt_gen *g)
{
	g->wal_magic = r32(r, "wal_magic");
	g->checkpoint_seq = r32(r, "checkpoint_seq");
	g->salt1 = r32(r, "salt1");
	g->salt2 = r32(r, "salt2");
	g->page_size = r32(r, "page_size");
}

/* ---- manifest --------------------------------------------------------- */

static void w_refs(struct ws_buf *b, const struct ws_fmt_objref *refs, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		wstr(b, refs[i].key);
		w64(b, refs[i].first);
		w64(b, refs[i].count);
		w64(b, refs[i].xxh);
		w64(b, refs[i].length);
	}
}

/* Bytes of the inline batches a manifest names; false if it names none. */
static bool inline_bytes(const struct ws_fmt_objref *refs, uint32_t n, uint64_t *total)
{
	bool any = false;
	*total = 0;
	for (uint32_t i = 0; i < n; i++)
		if (refs[i].key[0] == '\0') {
			any = true;
			*total += refs[i].length;
		}
	return any;
}

int ws_fmt_manifest_encode(const struct ws_fmt_manifest *m, struct ws_buf *b)
{
	uint64_t want = 0, have = 0;
	const bool inl = inline_bytes(m->batches, m->batch_count, &want);

	for (int i = 0; i < m->inline_iovcnt; i++)
		have += m->inline_iov[i].iov_len;
	if (have != want || (inl && want == 0))
		return -EINVAL;
	for (uint32_t i = 0; i < m->snap_count; i++)
		if (m->snaps[i].key[0] == '\0')
			return -EINVAL;
	/* Tails merged into one manifest carry their batches inline. */
	if (m->tail_count && (!inl || !m->tails))
		return -EINVAL;
	/* A slot is one tail (no index), durable after it was read. */
	if (m->lane && (m->tail_count || m->durable_ms < m->time_ms))
		return -EINVAL;
	ws_buf_reset(b);
	begin_framed(b, MANIFEST_MAGIC, m->lane ? MANIFEST_VERSION_SLOT
				      : m->tail_count ? MANIFEST_VERSION_TAILS
				      : inl ? MANIFEST_VERSION_INLINE : MANIFEST_VERSION);
	wstr(b, m->tenant);
	w64(b, m->epoch);
	w64(b, m->pointer_generation);
	w64(b, m->wm_seq);
	w64(b, (uint64_t)m->time_ms);
	w_gen(b, &m->gen);
	w32(b, m->kind);
	w64(b, m->first_frame);
	w64(b, m->last_frame);
	w64(b, m->valid_from_frame);
	w32(b, m->seed_cksum[0]);
	w32(b, m->seed_cksum[1]);
	w32(b, m->end_cksum[0]);
	w32(b, m->end_cksum[1]);
	w32(b, m->db_pages);
	wstr(b, m->prev_key);
	w_bytes(b, m->prev_sha, WS_SHA256_LEN);
	w64(b, m->prev_length);
	w32(b, m->snap_count);
	w32(b, m->batch_count);
	w_refs(b, m->snaps, m->snap_count);
	w_refs(b, m->batches, m->batch_count);
	if (m->tail_count) {
		w32(b, m->tail_count);
		for (uint32_t i = 0; i < m->tail_count; i++) {
			w64(b, m->tails[i].frame);
			w64(b, (uint64_t)m->tails[i].time_ms);
		}
	}
	if (m->lane) {
		w64(b, m->lane);
		w64(b, (uint64_t)m->durable_ms);
	}
	for (int i = 0; i < m->inline_iovcnt; i++)
		w_bytes(b, m->inline_iov[i].iov_base, m->inline_iov[i].iov_len);
	return finish_framed(b);
}

/* inline_ok: a key "" (an inline batch) is allowed. */
static int r_refs(struct rd *r, uint32_t n, bool inline_ok, struct ws_fmt_objref **out)
{
	struct ws_fmt_objref *refs;
	*out = NULL;
	if (n == 0)
		return 0;
	/* Each record is at least 34 bytes: refuse counts the object cannot hold
	 * before allocating for them. */
	if (n > WS_MANIFEST_ITEMS_MAX || (size_t)n * 34 > r->left) {
		r->err = WS_EFORMAT;
		r->what = "object count";
		return WS_EFORMAT;
	}
	refs = calloc(n, sizeof(*refs));
	if (!refs)
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++) {
		rstr(r, refs[i].key, sizeof(refs[i].key), "object key");
		refs[i].first = r64(r, "object first");
		refs[i].count = r64(r, "object count");
		refs[i].xxh = r64(r, "object hash");
		refs[i].length = r64(r, "object length");
		if (!r->err && ((refs[i].key[0] == '\0' ? !inline_ok : !ws_key_valid(refs[i].key)) ||
				refs[i].count == 0)) {
			r->err = WS_EFORMAT;
			r->what = "object reference";
		}
	}
	*out = refs;
	return 0;
}

/* Version 3's tail index: a count (at least 1), then (frame, time) each. */
static int r_tails(struct rd *r, struct ws_fmt_manifest *m)
{
	uint32_t n = r32(r, "tail_count");
	if (r->err)
		return 0;
	if (n == 0 || n > WS_MANIFEST_ITEMS_MAX || (size_t)n * 16 > r->left)
		return ws_fail(WS_EFORMAT, "manifest version 3 names %u merged tails, which its %zu bytes left "
			       "cannot hold (1..%u of 16 bytes each)", n, r->left, WS_MANIFEST_ITEMS_MAX);
	m->tails = calloc(n, sizeof(*m->tails));
	if (!m->tails)
		return -ENOMEM;
	m->tail_count = n;
	for (uint32_t i = 0; i < n; i++) {
		m->tails[i].frame = r64(r, "tail frame");
		m->tails[i].time_ms = (int64_t)r64(r, "tail time_ms");
	}
	return 0;
}

/* The tails merged before the last: inside the manifest's restorable
 * frames, before its last, in frame order, stamped in order and never
 * after the manifest (the last tail's time). */
static int tails_check(const struct ws_fmt_manifest *m)
{
	for (uint32_t i = 0; i < m->tail_count; i++) {
		const struct ws_fmt_tail *t = &m->tails[i];
		if (t->frame < m->valid_from_frame || t->frame >= m->last_frame ||
		    (i > 0 && t->frame <= m->tails[i - 1].frame))
			return ws_fail(WS_EFORMAT, "manifest merged tail %u ends at frame %llu, not after the tail "
				       "before it within frames %llu..%llu (the last tail ends at %llu)", i,
				       (unsigned long long)t->frame, (unsigned long long)m->valid_from_frame,
				       (unsigned long long)(m->last_frame ? m->last_frame - 1 : 0),
				       (unsigned long long)m->last_frame);
		if ((i > 0 && t->time_ms < m->tails[i - 1].time_ms) || t->time_ms > m->time_ms)
			return ws_fail(WS_EFORMAT, "manifest merged tail %u is stamped %lld ms, before the tail "
				       "before it or after the manifest's %lld ms: times must not decrease", i,
				       (long long)t->time_ms, (long long)m->time_ms);
	}
	return 0;
}

int ws_fmt_manifest_decode(const uint8_t *obj, size_t len, struct ws_fmt_manifest *m)
{
	struct rd r;
	uint32_t version;
	int rc;
	const uint8_t *p;

	memset(m, 0, sizeof(*m));
	rc = open_framed(obj, len, MANIFEST_MAGIC, "manifest", &r, &version);
	if (rc)
		return rc;
	if (version < MANIFEST_VERSION || version > MANIFEST_VERSION_SLOT)
		return ws_fail(WS_EFORMAT, "unsupported manifest version %u (written by a newer walship?)", version);
	const bool inl = version >= MANIFEST_VERSION_INLINE;
	rstr(&r, m->tenant, sizeof(m->tenant), "tenant");
	m->epoch = r64(&r, "epoch");
	m->pointer_generation = r64(&r, "pointer_generation");
	m->wm_seq = r64(&r, "wm_seq");
	m->time_ms = (int64_t)r64(&r, "time_ms");
	r_gen(&r, &m->gen);
	m->kind = r32(&r, "kind");
	m->first_frame = r64(&r, "first_frame");
	m->last_frame = r64(&r, "last_frame");
	m->valid_from_frame = r64(&r, "valid_from_frame");
	m->seed_cksum[0] = r32(&r, "seed_cksum");
	m->seed_cksum[1] = r32(&r, "seed_cksum");
	m->end_cksum[0] = r32(&r, "end_cksum");
	m->end_cksum[1] = r32(&r, "end_cksum");
	m->db_pages = r32(&r, "db_pages");
	rstr(&r, m->prev_key, sizeof(m->prev_key), "prev_key");
	p = r_take(&r, WS_SHA256_LEN, "prev_sha");
	if (p)
		memcpy(m->prev_sha, p, WS_SHA256_LEN);
	m->prev_length = r64(&r, "prev_length");
	m->snap_count = r32(&r, "snap_count");
	m->batch_count = r32(&r, "batch_count");
	if (!r.err && (rc = r_refs(&r, m->snap_count, false, &m->snaps)) == -ENOMEM)
		goto fail;
	if (!r.err && (rc = r_refs(&r, m->batch_count, inl, &m->batches)) == -ENOMEM)
		goto fail;
	if (!r.err && version == MANIFEST_VERSION_TAILS && (rc = r_tails(&r, m)) != 0)
		goto fail;
	if (version == MANIFEST_VERSION_SLOT) {
		m->lane = r64(&r, "lane");
		m->durable_ms = (int64_t)r64(&r, "durable_ms");
	}
	if (!r.err && inl) {
		/* The inline batches follow the refs, in ref order, and fill the
		 * rest of the object exactly; each is at least a batch header.
		 * Their own hashes are checked where they are read. */
		uint64_t total = 0;
		bool any = false;
		for (uint32_t i = 0; i < m->batch_count; i++) {
			struct ws_fmt_objref *ref = &m->batches[i];
			if (ref->key[0] != '\0')
				continue;
			any = true;
			if (ref->length < WS_BATCH_HDR_SIZE || ref->length > r.left - total) {
				rc = ws_fail(WS_EFORMAT, "manifest inline batch %u of %llu bytes does not fit the %zu "
					     "bytes it carries", i, (unsigned long long)ref->length, r.left - total);
				goto fail;
			}
			ref->inline_off = (uint64_t)(r.p - obj) + total;
			total += ref->length;
		}
		/* A slot's batches may all be objects of their own. */
		if ((!any && version != MANIFEST_VERSION_SLOT) || total != r.left) {
			rc = ws_fail(WS_EFORMAT, "manifest version %u carries %zu bytes of batches, its inline refs "
				     "name %llu", version, r.left, (unsigned long long)total);
			goto fail;
		}
		r.p += total;
		r.left = 0;
	}
	rc = close_framed(&r, "manifest");
	if (rc)
		goto fail;
	/* Semantic invariants a well-formed manifest always satisfies. */
	if (!ws_tenant_name_valid(m->tenant)) {
		rc = ws_fail(WS_EFORMAT, "manifest tenant name invalid");
		goto fail;
	}
	if (m->kind > WS_MANIFEST_REBASE || !page_size_ok(m->gen.page_size) ||
	    !wal_magic_ok(m->gen.wal_magic, m->kind == WS_MANIFEST_REBASE)) {
		rc = ws_fail(WS_EFORMAT, "manifest kind %u / page size %u / WAL magic %#x invalid", m->kind,
			     m->gen.page_size, m->gen.wal_magic);
		goto fail;
	}
	if (m->kind != WS_MANIFEST_REBASE && (m->prev_key[0] == '\0' || m->batch_count == 0)) {
		rc = ws_fail(WS_EFORMAT, "manifest of kind %u lacks a predecessor or batches", m->kind);
		goto fail;
	}
	if (m->kind == WS_MANIFEST_REBASE && m->snap_count == 0 && m->db_pages != 0) {
		rc = ws_fail(WS_EFORMAT, "rebase manifest of %u pages has no snapshot", m->db_pages);
		goto fail;
	}
	if (m->kind != WS_MANIFEST_REBASE && m->snap_count != 0) {
		rc = ws_fail(WS_EFORMAT, "manifest of kind %u names %u snapshot parts; only a rebase has any",
			     m->kind, m->snap_count);
		goto fail;
	}
	/* A re-base's image is exact only at its last frame: a restore may
	 * stop nowhere before it. */
	if (m->kind == WS_MANIFEST_REBASE && m->valid_from_frame != m->last_frame) {
		rc = ws_fail(WS_EFORMAT, "rebase manifest valid from frame %llu, not its last frame %llu",
			     (unsigned long long)m->valid_from_frame, (unsigned long long)m->last_frame);
		goto fail;
	}
	if (m->kind == WS_MANIFEST_REBASE && m->batch_count && m->first_frame != 1) {
		/* A re-base holds its generation's frames from the first: one
		 * starting later (its seed made to fit) would leave out commits
		 * of the snapshot's own generation. */
		rc = ws_fail(WS_EFORMAT, "rebase manifest frames start at %llu, not 1",
			     (unsigned long long)m->first_frame);
		goto fail;
	}
	if (m->kind == WS_MANIFEST_REBASE) {
		/* Snapshot parts tile pages 1..n, n <= db_pages (frames of the
		 * re-base carry pages past the file's end); with no frames the
		 * parts are the whole image: n == db_pages. */
		uint64_t next = 1;
		for (uint32_t i = 0; i < m->snap_count; i++) {
			if (m->snaps[i].first != next || m->snaps[i].count == 0 ||
			    m->snaps[i].count > (uint64_t)m->db_pages + 1 - next) {
				rc = ws_fail(WS_EFORMAT, "rebase manifest snapshot part %u (pages %llu, %llu of them) "
					     "does not continue pages 1..%llu within the database's %u pages", i,
					     (unsigned long long)m->snaps[i].first,
					     (unsigned long long)m->snaps[i].count, (unsigned long long)(next - 1),
					     m->db_pages);
				goto fail;
			}
			next += m->snaps[i].count;
		}
		if (m->last_frame == 0 && next - 1 != m->db_pages) {
			rc = ws_fail(WS_EFORMAT, "rebase manifest without frames has snapshot parts of %llu pages "
				     "for a database of %u", (unsigned long long)(next - 1), m->db_pages);
			goto fail;
		}
	}
	if (m->last_frame < m->valid_from_frame || (m->batch_count && m->last_frame < m->first_frame) ||
	    m->first_frame == 0) {
		rc = ws_fail(WS_EFORMAT, "manifest frame range %llu..%llu (valid from %llu) invalid",
			     (unsigned long long)m->first_frame, (unsigned long long)m->last_frame,
			     (unsigned long long)m->valid_from_frame);
		goto fail;
	}
	{
		/* Batches must tile first_frame..(>= last_frame) with no gap or overlap. */
		uint64_t next = m->first_frame;
		for (uint32_t i = 0; i < m->batch_count; i++) {
			if (m->batches[i].first != next) {
				rc = ws_fail(WS_EFORMAT, "manifest batch %u starts at frame %llu, expected %llu", i,
					     (unsigned long long)m->batches[i].first, (unsigned long long)next);
				goto fail;
			}
			/* A count that wraps would make any last_frame look covered. */
			if (m->batches[i].count > UINT64_MAX - next) {
				rc = ws_fail(WS_EFORMAT, "manifest batch %u of %llu frames from frame %llu runs past "
					     "the last frame number", i, (unsigned long long)m->batches[i].count,
					     (unsigned long long)next);
				goto fail;
			}
			next += m->batches[i].count;
		}
		if (m->batch_count && next - 1 < m->last_frame) {
			rc = ws_fail(WS_EFORMAT, "manifest batches end at frame %llu before last frame %llu",
				     (unsigned long long)(next - 1), (unsigned long long)m->last_frame);
			goto fail;
		}
		if (m->batch_count == 0 && m->last_frame != 0) {
			rc = ws_fail(WS_EFORMAT, "manifest names frames but no batches");
			goto fail;
		}
	}
	if ((rc = tails_check(m)) != 0)
		goto fail;
	if (version == MANIFEST_VERSION_SLOT && m->lane == 0) {
		rc = ws_fail(WS_EFORMAT, "manifest version 4 (a slot) of tenant %.64s names lane 0: a slot is "
			     "always in a lane", m->tenant);
		goto fail;
	}
	if (version == MANIFEST_VERSION_SLOT && m->durable_ms < m->time_ms) {
		rc = ws_fail(WS_EFORMAT, "manifest version 4 (a slot) of tenant %.64s is durable at %lld ms, "
			     "before its frames were read at %lld ms", m->tenant, (long long)m->durable_ms,
			     (long long)m->time_ms);
		goto fail;
	}
	return 0;
fail:
	ws_fmt_manifest_free(m);
	return rc;
}

void ws_fmt_manifest_free(struct ws_fmt_manifest *m)
{
	free(m->snaps);
	free(m->batches);
	free(m->tails);
	m->snaps = NULL;
	m->batches = NULL;
	m->tails = NULL;
	m->tail_count = 0;
}

/* ---- watermark -------------------------------------------------------- */

int ws_fmt_watermark_encode(const struct ws_fmt_watermark *w, struct ws_buf *b)
{
	uint32_t version = w->lane ? WM_VERSION_SLOTS
			   : w->carried_len ? WM_VERSION_CARRY : w->version ? w->version : WM_VERSION_CURRENT;
	struct ws_fmt_gen g = w->gen;

	if (w->carried_len && (!w->carried || w->carried_len != w->manifest_length))
		return -EINVAL;
	/* Version 4 has a lane and no carried part; a lane-less one is 1..3. */
	if ((w->lane && w->carried_len) || (!w->lane && version > WM_VERSION_CARRY))
		return -EINVAL;
	if (version < 2)
		g.salt1 = g.salt2 = 0;
	ws_buf_reset(b);
	begin_framed(b, WM_MAGIC, version);
	wstr(b, w->tenant);
	w64(b, w->epoch);
	w64(b, w->pointer_generation);
	w64(b, w->seq);
	w64(b, (uint64_t)w->time_ms);
	w_gen(b, &g);
	w64(b, w->last_frame);
	w32(b, w->end_cksum[0]);
	w32(b, w->end_cksum[1]);
	wstr(b, w->manifest_key);
	w_bytes(b, w->manifest_sha, WS_SHA256_LEN);
	w64(b, w->manifest_length);
	if (version == WM_VERSION_CARRY) {
		w64(b, w->carried_len);
		w_bytes(b, w->carried, w->carried_len);
	}
	if (version == WM_VERSION_SLOTS)
		w64(b, w->lane);
	return finish_framed(b);
}

/*
 * A carried manifest is stored at its key by the next tail: the key must be
 * the one its writer names it by, m<seq>-<first 8 bytes of its SHA-256 in
 * hex>, so that a forged watermark cannot point that store at another
 * manifest's key (the good predecessor the chain needs, which would then
 * be "damaged" in every later tail's eyes).
 */
static int carried_key_check(const struct ws_fmt_watermark *w)
{
	const char *base = strrchr(w->manifest_key, '/');
	char want[1 + 16 + 1 + 16 + 1], shahex[17];

	ws_hex(w->manifest_sha, 8, shahex);
	snprintf(want, sizeof(want), "m%016llx-%s", (unsigned long long)w->seq, shahex);
	base = base ? base + 1 : w->manifest_key;
	if (strcmp(base, want) != 0)
		return ws_fail(WS_EFORMAT, "watermark %llu of tenant %.64s: its carried manifest's key %.200s is not "
			       "the one its sequence and hash name (.../%s): a forged or damaged watermark",
			       (unsigned long long)w->seq, w->tenant, w->manifest_key, want);
	return 0;
}

/* A version 4 watermark with no hint (seq 0): its lane is open, no slot
 * written yet; everything about a slot is zero. */
static int wm_lane_opened_check(const struct ws_fmt_watermark *w)
{
	static const struct ws_fmt_gen none;
	if (!ws_tenant_name_valid(w->tenant))
		return ws_fail(WS_EFORMAT, "watermark version 4: tenant name invalid");
	if (w->manifest_key[0] || !all_zero(w->manifest_sha, WS_SHA256_LEN) || w->manifest_length ||
	    w->last_frame || w->end_cksum[0] || w->end_cksum[1] || !ws_fmt_gen_equal(&w->gen, &none))
		return ws_fail(WS_EFORMAT, "watermark version 4 of tenant %.64s names no slot (seq 0) but has a "
			       "manifest key, hash, length, frame, checksum or generation", w->tenant);
	return 0;
}

int ws_fmt_watermark_decode(const uint8_t *obj, size_t len, struct ws_fmt_watermark *w)
{
	struct rd r;
	const uint8_t *p;
	int rc;

	memset(w, 0, sizeof(*w));
	rc = open_framed(obj, len, WM_MAGIC, "watermark", &r, &w->version);
	if (rc)
		return rc;
	if (w->version < 1 || w->version > WM_VERSION_SLOTS)
		return ws_fail(WS_EFORMAT, "unsupported watermark version %u (written by a newer walship?)",
			       w->version);
	rstr(&r, w->tenant, sizeof(w->tenant), "tenant");
	w->epoch = r64(&r, "epoch");
	w->pointer_generation = r64(&r, "pointer_generation");
	w->seq = r64(&r, "seq");
	w->time_ms = (int64_t)r64(&r, "time_ms");
	r_gen(&r, &w->gen);
	w->last_frame = r64(&r, "last_frame");
	w->end_cksum[0] = r32(&r, "end_cksum");
	w->end_cksum[1] = r32(&r, "end_cksum");
	rstr(&r, w->manifest_key, sizeof(w->manifest_key), "manifest_key");
	p = r_take(&r, WS_SHA256_LEN, "manifest_sha");
	if (p)
		memcpy(w->manifest_sha, p, WS_SHA256_LEN);
	w->manifest_length = r64(&r, "manifest_length");
	if (w->version == WM_VERSION_SLOTS) {
		w->lane = r64(&r, "lane");
		if (!r.err && r.left != 0)
			return ws_fail(WS_EFORMAT, "watermark version 4 of tenant %.64s has %zu bytes after its lane: "
				       "version 4 carries no manifest", w->tenant, r.left);
		if (!r.err && w->lane == 0)
			return ws_fail(WS_EFORMAT, "watermark version 4 of tenant %.64s names lane 0: a version 4 "
				       "watermark always names its writer's lane", w->tenant);
	}
	if (w->version == WM_VERSION_CARRY) {
		/* The manifest it names, whole: the same length and SHA-256 a
		 * stored one is held to, checked here so that no reader can use
		 * carried bytes that are not the manifest named. */
		w->carried_len = r64(&r, "carried manifest length");
		if (w->carried_len != w->manifest_length || w->carried_len > SIZE_MAX)
			return ws_fail(WS_EFORMAT, "watermark: carried manifest is %llu bytes, the watermark names "
				       "%llu", (unsigned long long)w->carried_len,
				       (unsigned long long)w->manifest_length);
		w->carried = r_take(&r, (size_t)w->carried_len, "carried manifest");
	}
	rc = close_framed(&r, "watermark");
	if (rc)
		return rc;
	if (w->carried) {
		uint8_t sha[WS_SHA256_LEN];
		ws_sha256(w->carried, (size_t)w->carried_len, sha);
		if (memcmp(sha, w->manifest_sha, WS_SHA256_LEN) != 0)
			return ws_fail(WS_ECORRUPT, "watermark: carried manifest's SHA-256 is not the one the "
				       "watermark names");
		rc = carried_key_check(w);
		if (rc)
			return rc;
	}
	if (w->version == WM_VERSION_SLOTS && w->seq == 0)
		return wm_lane_opened_check(w);
	if (!ws_tenant_name_valid(w->tenant) || !ws_key_valid(w->manifest_key) || w->seq == 0 ||
	    !page_size_ok(w->gen.page_size) || !wal_magic_ok(w->gen.wal_magic, true))
		return ws_fail(WS_EFORMAT, "watermark fields invalid (tenant, manifest key, seq or page size)");
	if (w->version < 2)
		w->gen.salt1 = w->gen.salt2 = 0;
	return 0;
}

uint32_t ws_fmt_watermark_peek_version(const uint8_t *obj, size_t len)
{
	return len >= 24 && memcmp(obj, WM_MAGIC, 8) == 0 ? ws_get_le32(obj + 8) : 0;
}

/* ---- close record ----------------------------------------------------- */

#define CLOSE_FLAG_REMOVED 1u

/* Why a close record's fields cannot be one (NULL: they can). */
static const char *close_invalid(const struct ws_fmt_close *c)
{
	if (!ws_tenant_name_valid(c->tenant))
		return "its tenant name is invalid";
	if (c->seq == 0)
		return "it closes at sequence 0 (slots start at 1)";
	if (c->lane == 0)
		return "the lane it closes is 0";
	if (c->removed && (c->closer_epoch || c->closer_pg || c->closer_lane))
		return "it is closed by removal (forget) but names a closer";
	if (!c->removed && c->closer_lane == 0)
		return "its closer's lane is 0";
	if (!c->removed && !ws_fmt_token_fences(c->closer_epoch, c->closer_pg, c->epoch, c->pointer_generation))
		return "its closer's token (epoch, pointer generation) does not fence the closed lane's: neither "
		       "is higher";
	if (c->prev_key[0] ? !ws_key_valid(c->prev_key) : (c->prev_length || !all_zero(c->prev_sha, WS_SHA256_LEN)))
		return "its previous slot's key is invalid, or it names a hash or length without a key";
	if ((c->seq == 1) != (c->prev_key[0] == '\0'))
		return "it names a previous slot at sequence 1, or none after it";
	return NULL;
}

int ws_fmt_close_encode(const struct ws_fmt_close *c, struct ws_buf *b)
{
	if (close_invalid(c))
		return -EINVAL;
	ws_buf_reset(b);
	begin_framed(b, CLOSE_MAGIC, CLOSE_VERSION);
	wstr(b, c->tenant);
	w64(b, c->epoch);
	w64(b, c->pointer_generation);
	w64(b, c->lane);
	w64(b, c->seq);
	w64(b, c->closer_epoch);
	w64(b, c->closer_pg);
	w64(b, c->closer_lane);
	w32(b, c->removed ? CLOSE_FLAG_REMOVED : 0);
	wstr(b, c->prev_key);
	w_bytes(b, c->prev_sha, WS_SHA256_LEN);
	w64(b, c->prev_length);
	w64(b, (uint64_t)c->time_ms);
	return finish_framed(b);
}

int ws_fmt_close_decode(const uint8_t *obj, size_t len, struct ws_fmt_close *c)
{
	struct rd r;
	const uint8_t *p;
	uint32_t version, flags;
	const char *why;
	int rc;

	memset(c, 0, sizeof(*c));
	rc = open_framed(obj, len, CLOSE_MAGIC, "close record", &r, &version);
	if (rc)
		return rc;
	if (version != CLOSE_VERSION)
		return ws_fail(WS_EFORMAT, "unsupported close record version %u (written by a newer walship?)",
			       version);
	rstr(&r, c->tenant, sizeof(c->tenant), "tenant");
	c->epoch = r64(&r, "epoch");
	c->pointer_generation = r64(&r, "pointer_generation");
	c->lane = r64(&r, "lane");
	c->seq = r64(&r, "seq");
	c->closer_epoch = r64(&r, "closer_epoch");
	c->closer_pg = r64(&r, "closer_pointer_generation");
	c->closer_lane = r64(&r, "closer_lane");
	flags = r32(&r, "flags");
	rstr(&r, c->prev_key, sizeof(c->prev_key), "prev_key");
	p = r_take(&r, WS_SHA256_LEN, "prev_sha");
	if (p)
		memcpy(c->prev_sha, p, WS_SHA256_LEN);
	c->prev_length = r64(&r, "prev_length");
	c->time_ms = (int64_t)r64(&r, "time_ms");
	rc = close_framed(&r, "close record");
	if (rc)
		return rc;
	if (flags & ~CLOSE_FLAG_REMOVED)
		return ws_fail(WS_EFORMAT, "close record has unknown flags %#x", flags & ~CLOSE_FLAG_REMOVED);
	c->removed = flags & CLOSE_FLAG_REMOVED;
	if ((why = close_invalid(c)) != NULL)
		return ws_fail(WS_EFORMAT, "close record of tenant %.64s, lane %016llx at sequence %llu: %s",
			       c->tenant, (unsigned long long)c->lane, (unsigned long long)c->seq, why);
	return 0;
}

int ws_fmt_slot_kind(const uint8_t *obj, size_t len, enum ws_fmt_slot_kind *kind)
{
	if (len >= 8 && memcmp(obj, MANIFEST_MAGIC, 8) == 0)
		*kind = WS_FMT_SLOT_MANIFEST;
	else if (len >= 8 && memcmp(obj, CLOSE_MAGIC, 8) == 0)
		*kind = WS_FMT_SLOT_CLOSE;
	else
		return ws_fail(WS_EFORMAT, "not a manifest slot or close record (bad magic or %zu bytes)", len);
	return 0;
}
