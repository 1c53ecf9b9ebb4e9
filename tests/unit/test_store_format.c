/*
 * Decoders of walship's own objects (store/format.c) on objects that hash
 * correctly but say something impossible: each case is an input the fuzz
 * targets of tests/fuzz found accepted (their corpus keeps it as
 * regress-*), rebuilt here with the encoder so the intent is readable.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>

#include "testutil.h"
#include "ws_format.h"
#include "ws_hash.h"

/* A valid re-base of frames 1..3 in one batch, on top of which cases mutate. */
static void rebase(struct ws_fmt_manifest *m, struct ws_fmt_objref *batches, uint32_t batch_count)
{
	memset(m, 0, sizeof(*m));
	snprintf(m->tenant, sizeof(m->tenant), "app");
	m->epoch = 1;
	m->wm_seq = 1;
	m->gen = (struct ws_fmt_gen){ 0x377f0682u, 0, 1, 2, 4096 };
	m->kind = WS_MANIFEST_REBASE;
	m->first_frame = 1;
	m->last_frame = 3;
	m->valid_from_frame = 3;
	m->batches = batches;
	m->batch_count = batch_count;
	for (uint32_t i = 0; i < batch_count; i++) {
		memset(&batches[i], 0, sizeof(batches[i]));
		snprintf(batches[i].key, sizeof(batches[i].key), "app/b%016x", i + 1);
		batches[i].length = 96;
	}
}

static int decode(const struct ws_fmt_manifest *m)
{
	struct ws_buf b;
	struct ws_fmt_manifest out;
	int rc;

	ws_buf_init(&b, 1u << 20);
	assert_int_equal(ws_fmt_manifest_encode(m, &b), 0);
	rc = ws_fmt_manifest_decode(b.data, b.len, &out);
	if (rc == 0)
		ws_fmt_manifest_free(&out);
	ws_buf_free(&b);
	return rc;
}

static void test_manifest_valid_baseline(void **state)
{
	struct ws_fmt_objref batches[2];
	struct ws_fmt_manifest m;
	(void)state;
	rebase(&m, batches, 2);
	batches[0].first = 1;
	batches[0].count = 2;
	batches[1].first = 3;
	batches[1].count = 1;
	assert_int_equal(decode(&m), 0);
}

/*
 * A batch whose frame count runs past frame 2^64-1 wrapped the tiling check:
 * one batch of 2^64-1 frames from frame 1 "ended" at frame 0 - 1, so any
 * last_frame passed, and a second batch could then start at frame 0, which
 * no WAL has (fuzz_manifest, crash-c925faee).
 */
static void test_manifest_batch_range_wraps(void **state)
{
	struct ws_fmt_objref batches[2];
	struct ws_fmt_manifest m;
	(void)state;

	rebase(&m, batches, 1);
	batches[0].first = 1;
	batches[0].count = UINT64_MAX;
	assert_int_equal(decode(&m), WS_EFORMAT);
	assert_non_null(strstr(ws_errmsg(), "past"));

	rebase(&m, batches, 2);
	batches[0].first = 1;
	batches[0].count = UINT64_MAX;
	batches[1].first = 0;
	batches[1].count = 4;
	assert_int_equal(decode(&m), WS_EFORMAT);
	assert_non_null(strstr(ws_errmsg(), "past"));

	/* The largest range that does not wrap is still a well-formed manifest. */
	rebase(&m, batches, 1);
	batches[0].first = 1;
	batches[0].count = UINT64_MAX - 1;
	assert_int_equal(decode(&m), 0);
}

/*
 * A re-base holds its generation's frames 1..last. One whose frames start
 * later, its seed checksum made to fit the batch it starts at, left the
 * earlier commits of the generation out: verify passed it and restore
 * published a state the source never had.
 */
static void test_rebase_frames_from_one(void **state)
{
	struct ws_fmt_objref batches[1];
	struct ws_fmt_manifest m;
	(void)state;
	rebase(&m, batches, 1);
	m.first_frame = 2;
	batches[0].first = 2;
	batches[0].count = 2;
	assert_int_equal(decode(&m), WS_EFORMAT);
	assert_non_null(strstr(ws_errmsg(), "start at 2, not 1"));
}

/*
 * Version 2: batches carried inside the manifest (key ""), their bytes
 * after the refs in ref order. The decoder points at each (inline_off)
 * and refuses every layout that does not add up; a version 1 manifest
 * never names an inline batch, and a snapshot part is never inline.
 */
static void test_manifest_inline_batches(void **state)
{
	struct ws_fmt_objref batches[3];
	struct ws_fmt_manifest m, out;
	uint8_t a[100], c[130];
	struct iovec iov[2] = { { a, sizeof(a) }, { c, sizeof(c) } };
	struct ws_buf b;
	(void)state;

	memset(a, 0xa1, sizeof(a));
	memset(c, 0xc3, sizeof(c));
	ws_buf_init(&b, 1u << 20);
	rebase(&m, batches, 3);
	batches[0].first = 1;
	batches[0].count = 1;
	batches[0].key[0] = '\0';
	batches[0].length = sizeof(a);
	batches[1].first = 2;
	batches[1].count = 1;
	batches[2].first = 3;
	batches[2].count = 1;
	batches[2].key[0] = '\0';
	batches[2].length = sizeof(c);
	m.inline_iov = iov;
	m.inline_iovcnt = 2;
	assert_int_equal(ws_fmt_manifest_encode(&m, &b), 0);
	assert_int_equal(ws_get_le32(b.data + 8), 2); /* version 2 */
	assert_int_equal(ws_fmt_manifest_decode(b.data, b.len, &out), 0);
	assert_string_equal(out.batches[0].key, "");
	assert_string_equal(out.batches[1].key, batches[1].key);
	assert_int_equal(out.batches[1].inline_off, 0);
	assert_memory_equal(b.data + out.batches[0].inline_off, a, sizeof(a));
	assert_memory_equal(b.data + out.batches[2].inline_off, c, sizeof(c));
	assert_int_equal(out.batches[2].inline_off + sizeof(c) + 8, b.len);
	ws_fmt_manifest_free(&out);

	/* Bytes that do not match the inline refs' lengths: not encoded. */
	iov[1].iov_len = sizeof(c) - 1;
	assert_int_equal(ws_fmt_manifest_encode(&m, &b), -EINVAL);
	iov[1].iov_len = sizeof(c);
	m.inline_iovcnt = 0;
	assert_int_equal(ws_fmt_manifest_encode(&m, &b), -EINVAL);

	/* A ref that says it is longer than what the object carries. */
	batches[2].length = sizeof(c) + 200;
	{
		uint8_t big[430];
		struct iovec one = { big, sizeof(a) + sizeof(c) + 200 };
		memset(big, 0, sizeof(big));
		m.inline_iov = &one;
		m.inline_iovcnt = 1;
		assert_int_equal(ws_fmt_manifest_encode(&m, &b), 0);
		/* Cut the carried bytes by 200 and fix length and hash: the
		 * frame holds, the inline refs do not add up. */
		uint8_t *cut = malloc(b.len - 200);
		assert_non_null(cut);
		memcpy(cut, b.data, b.len - 208);
		ws_put_le32(cut + 12, (uint32_t)(b.len - 200));
		ws_put_le64(cut + b.len - 208, ws_xxh64(cut, b.len - 208));
		assert_int_equal(ws_fmt_manifest_decode(cut, b.len - 200, &out), WS_EFORMAT);
		assert_non_null(strstr(ws_errmsg(), "inline batch 2"));
		free(cut);
	}

	/* Version 1 with a key "": an empty key is not a reference there. */
	rebase(&m, batches, 1);
	batches[0].first = 1;
	batches[0].count = 3;
	assert_int_equal(ws_fmt_manifest_encode(&m, &b), 0);
	{
		/* Rewrite the key to "" by hand: find it, drop it, re-frame. */
		const char *key = batches[0].key;
		size_t kl = strlen(key);
		uint8_t *p = memmem(b.data, b.len, key, kl);
		assert_non_null(p);
		size_t at = (size_t)(p - b.data), n = b.len - kl;
		uint8_t *v1 = malloc(n);
		assert_non_null(v1);
		memcpy(v1, b.data, at - 2);
		v1[at - 2] = 0;
		v1[at - 1] = 0;
		memcpy(v1 + at, p + kl, b.len - at - kl);
		ws_put_le32(v1 + 12, (uint32_t)n);
		ws_put_le64(v1 + n - 8, ws_xxh64(v1, n - 8));
		assert_int_equal(ws_fmt_manifest_decode(v1, n, &out), WS_EFORMAT);
		assert_non_null(strstr(ws_errmsg(), "object reference"));
		/* The same as version 2 carrying nothing: the refs name 96 bytes. */
		ws_put_le32(v1 + 8, 2);
		ws_put_le64(v1 + n - 8, ws_xxh64(v1, n - 8));
		assert_int_equal(ws_fmt_manifest_decode(v1, n, &out), WS_EFORMAT);
		free(v1);
	}

	/* A snapshot part is never inline. */
	{
		struct ws_fmt_objref snap;
		memset(&snap, 0, sizeof(snap));
		snap.first = 1;
		snap.count = 1;
		snap.length = 96;
		rebase(&m, batches, 1);
		batches[0].first = 1;
		batches[0].count = 3;
		m.snaps = &snap;
		m.snap_count = 1;
		m.db_pages = 1;
		assert_int_equal(ws_fmt_manifest_encode(&m, &b), -EINVAL);
	}
	ws_buf_free(&b);
}

/* Re-seal a framed object after a change: its length field and XXH3. */
static void reframe(struct ws_buf *b, size_t len)
{
	b->len = len - 8;
	ws_put_le32(b->data + 12, (uint32_t)len);
	ws_put_le64(b->data + len - 8, ws_xxh64(b->data, len - 8));
	b->len = len;
}

/*
 * Version 3: a carried manifest that tails were merged into keeps each
 * merged tail's end frame and time before its last (restore --time). It
 * round-trips; an index that is empty, cut short, out of order in frames
 * or in time, stamped after the manifest, or naming a frame outside the
 * manifest's restorable frames before its last is refused, naming it; an
 * index without inline batches is not encoded.
 */
static void merged(struct ws_fmt_manifest *m, struct ws_fmt_objref batches[3], struct iovec iov[3],
		   uint8_t bytes[3][100], struct ws_fmt_tail tails[2])
{
	memset(m, 0, sizeof(*m));
	snprintf(m->tenant, sizeof(m->tenant), "app");
	m->epoch = 1;
	m->wm_seq = 4;
	m->time_ms = 3000;
	m->gen = (struct ws_fmt_gen){ 0x377f0682u, 0, 1, 2, 4096 };
	m->kind = WS_MANIFEST_CONTINUE;
	m->first_frame = 5;
	m->last_frame = 7;
	m->valid_from_frame = 5;
	snprintf(m->prev_key, sizeof(m->prev_key), "app/m0000000000000003-0011223344556677");
	m->prev_length = 200;
	m->batches = batches;
	m->batch_count = 3;
	for (uint32_t i = 0; i < 3; i++) {
		memset(&batches[i], 0, sizeof(batches[i]));
		batches[i].first = 5 + i;
		batches[i].count = 1;
		batches[i].length = 100;
		memset(bytes[i], 0xa0 + (int)i, 100);
		iov[i].iov_base = bytes[i];
		iov[i].iov_len = 100;
	}
	m->inline_iov = iov;
	m->inline_iovcnt = 3;
	tails[0] = (struct ws_fmt_tail){ 5, 1000 };
	tails[1] = (struct ws_fmt_tail){ 6, 2000 };
	m->tails = tails;
	m->tail_count = 2;
}

static void test_manifest_tail_index(void **state)
{
	struct ws_fmt_objref batches[3];
	struct iovec iov[3];
	uint8_t bytes[3][100];
	struct ws_fmt_tail tails[2];
	struct ws_fmt_manifest m, out;
	struct ws_buf b;
	(void)state;

	ws_buf_init(&b, 1u << 20);
	merged(&m, batches, iov, bytes, tails);
	assert_int_equal(ws_fmt_manifest_encode(&m, &b), 0);
	assert_int_equal(ws_get_le32(b.data + 8), 3); /* version 3 */
	assert_int_equal(ws_fmt_manifest_decode(b.data, b.len, &out), 0);
	assert_int_equal(out.tail_count, 2);
	assert_int_equal(out.tails[0].frame, 5);
	assert_int_equal(out.tails[0].time_ms, 1000);
	assert_int_equal(out.tails[1].frame, 6);
	assert_int_equal(out.tails[1].time_ms, 2000);
	assert_memory_equal(b.data + out.batches[2].inline_off, bytes[2], 100);
	ws_fmt_manifest_free(&out);
	assert_null(out.tails);

	/* No index: version 2, as before. */
	m.tail_count = 0;
	assert_int_equal(ws_fmt_manifest_encode(&m, &b), 0);
	assert_int_equal(ws_get_le32(b.data + 8), 2);
	assert_int_equal(ws_fmt_manifest_decode(b.data, b.len, &out), 0);
	assert_int_equal(out.tail_count, 0);
	ws_fmt_manifest_free(&out);

	/* Times that go back, or after the manifest's own. */
	merged(&m, batches, iov, bytes, tails);
	tails[1].time_ms = 999;
	assert_int_equal(decode(&m), WS_EFORMAT);
	assert_non_null(strstr(ws_errmsg(), "merged tail 1 is stamped 999"));
	merged(&m, batches, iov, bytes, tails);
	tails[1].time_ms = 3001;
	assert_int_equal(decode(&m), WS_EFORMAT);
	assert_non_null(strstr(ws_errmsg(), "times must not decrease"));

	/* Frames beyond the manifest, before it, at its last, out of order. */
	static const uint64_t bad[][2] = { { 5, 9 }, { 4, 6 }, { 5, 7 }, { 6, 5 }, { 5, 5 } };
	for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		merged(&m, batches, iov, bytes, tails);
		tails[0].frame = bad[k][0];
		tails[1].frame = bad[k][1];
		assert_int_equal(decode(&m), WS_EFORMAT);
		assert_non_null(strstr(ws_errmsg(), "merged tail"));
		assert_non_null(strstr(ws_errmsg(), "within frames 5..6"));
	}

	/* An index without inline batches: not encoded. */
	merged(&m, batches, iov, bytes, tails);
	for (uint32_t i = 0; i < 3; i++)
		snprintf(batches[i].key, sizeof(batches[i].key), "app/b%016x", i + 5);
	m.inline_iovcnt = 0;
	assert_int_equal(ws_fmt_manifest_encode(&m, &b), -EINVAL);

	/* Cut short: a count the object cannot hold, and an empty index. */
	merged(&m, batches, iov, bytes, tails);
	assert_int_equal(ws_fmt_manifest_encode(&m, &b), 0);
	{
		/* The count sits right before the index's 32 bytes, which sit
		 * right before the 300 inline bytes and the trailing hash. */
		size_t at = b.len - 8 - 300 - 32 - 4;
		assert_int_equal(ws_get_le32(b.data + at), 2);
		ws_put_le32(b.data + at, 30);
		reframe(&b, b.len);
		assert_int_equal(ws_fmt_manifest_decode(b.data, b.len, &out), WS_EFORMAT);
		assert_non_null(strstr(ws_errmsg(), "30 merged tails"));
		ws_put_le32(b.data + at, 0);
		reframe(&b, b.len);
		assert_int_equal(ws_fmt_manifest_decode(b.data, b.len, &out), WS_EFORMAT);
		assert_non_null(strstr(ws_errmsg(), "0 merged tails"));
		/* The object ends inside the index. */
		ws_put_le32(b.data + at, 2);
		reframe(&b, at + 4 + 16 + 8);
		assert_int_equal(ws_fmt_manifest_decode(b.data, b.len, &out), WS_EFORMAT);
		assert_non_null(strstr(ws_errmsg(), "merged tails"));
	}
	ws_buf_free(&b);
}


/*
 * Version 3 watermarks carry the manifest they name (docs/FORMAT.md
 * "Watermark"): it round-trips, and every carried part that does not add
 * up is refused, also when the object's own hash is right.
 */
static void test_watermark_carries_manifest(void **state)
{
	struct ws_fmt_watermark w, out;
	struct ws_buf b;
	uint8_t man[300];
	size_t len;
	(void)state;

	for (size_t i = 0; i < sizeof(man); i++)
		man[i] = (uint8_t)(i * 7 + 1);
	memset(&w, 0, sizeof(w));
	snprintf(w.tenant, sizeof(w.tenant), "app");
	w.epoch = 1;
	w.seq = 5;
	w.gen = (struct ws_fmt_gen){ 0x377f0682u, 0, 1, 2, 4096 };
	w.last_frame = 9;
	ws_sha256(man, sizeof(man), w.manifest_sha);
	{
		/* m<seq>-<sha8>: the key a carried manifest must have. */
		char shahex[17];
		ws_hex(w.manifest_sha, 8, shahex);
		snprintf(w.manifest_key, sizeof(w.manifest_key),
			 "app/e1-p0/g00000000-0000000100000002/m0000000000000005-%s", shahex);
	}
	w.manifest_length = sizeof(man);
	ws_buf_init(&b, 1u << 20);

	/* Version 2 without, version 3 with; the decoder points into the object. */
	assert_int_equal(ws_fmt_watermark_encode(&w, &b), 0);
	assert_int_equal(ws_fmt_watermark_decode(b.data, b.len, &out), 0);
	assert_int_equal(out.version, 2);
	assert_null(out.carried);
	assert_int_equal(out.carried_len, 0);
	w.carried = man;
	w.carried_len = sizeof(man);
	assert_int_equal(ws_fmt_watermark_encode(&w, &b), 0);
	assert_int_equal(ws_fmt_watermark_decode(b.data, b.len, &out), 0);
	assert_int_equal(out.version, 3);
	assert_int_equal(out.carried_len, sizeof(man));
	assert_true(out.carried > b.data && out.carried + sizeof(man) <= b.data + b.len);
	assert_memory_equal(out.carried, man, sizeof(man));

	/* A carried manifest under a key its sequence and hash do not name
	 * (another manifest's, say): refused, though every hash holds. */
	{
		char keep[sizeof(w.manifest_key)];
		memcpy(keep, w.manifest_key, sizeof(keep));
		w.manifest_key[strlen(w.manifest_key) - 18] = '4'; /* m...04-: the predecessor's sequence */
		assert_int_equal(ws_fmt_watermark_encode(&w, &b), 0);
		assert_int_equal(ws_fmt_watermark_decode(b.data, b.len, &out), WS_EFORMAT);
		assert_non_null(strstr(ws_errmsg(), "carried manifest's key"));
		memcpy(w.manifest_key, keep, sizeof(keep));
		w.manifest_key[strlen(w.manifest_key) - 1] ^= 1; /* another hash */
		assert_int_equal(ws_fmt_watermark_encode(&w, &b), 0);
		assert_int_equal(ws_fmt_watermark_decode(b.data, b.len, &out), WS_EFORMAT);
		memcpy(w.manifest_key, keep, sizeof(keep));
	}

	/* The encoder refuses a carried length that is not the named one. */
	w.carried_len = sizeof(man) - 1;
	assert_int_equal(ws_fmt_watermark_encode(&w, &b), -EINVAL);
	w.carried_len = sizeof(man);
	w.carried = NULL;
	assert_int_equal(ws_fmt_watermark_encode(&w, &b), -EINVAL);
	w.carried = man;

	/* One carried byte changed, the object re-hashed: not the manifest named. */
	assert_int_equal(ws_fmt_watermark_encode(&w, &b), 0);
	len = b.len;
	b.data[len - 8 - 100] ^= 0x40;
	reframe(&b, len);
	assert_int_equal(ws_fmt_watermark_decode(b.data, b.len, &out), WS_ECORRUPT);
	assert_non_null(strstr(ws_errmsg(), "carried manifest"));

	/* The carried length field says more, or less, than the watermark names. */
	assert_int_equal(ws_fmt_watermark_encode(&w, &b), 0);
	len = b.len;
	ws_put_le64(b.data + len - 8 - sizeof(man) - 8, sizeof(man) + 1);
	reframe(&b, len);
	assert_int_equal(ws_fmt_watermark_decode(b.data, b.len, &out), WS_EFORMAT);
	ws_put_le64(b.data + len - 8 - sizeof(man) - 8, UINT64_MAX);
	reframe(&b, len);
	assert_int_equal(ws_fmt_watermark_decode(b.data, b.len, &out), WS_EFORMAT);

	/* Cut short (the bytes end before the carried length says), re-framed. */
	assert_int_equal(ws_fmt_watermark_encode(&w, &b), 0);
	len = b.len;
	memmove(b.data + len - 8 - 50, b.data + len - 8, 8);
	reframe(&b, len - 50);
	assert_int_equal(ws_fmt_watermark_decode(b.data, b.len, &out), WS_EFORMAT);

	/* A version 2 watermark with bytes after its fields: trailing bytes. */
	w.carried = NULL;
	w.carried_len = 0;
	assert_int_equal(ws_fmt_watermark_encode(&w, &b), 0);
	len = b.len;
	assert_int_equal(ws_buf_append(&b, man, 16), 0);
	memmove(b.data + len + 8, b.data + len - 8, 8);
	memcpy(b.data + len - 8, man, 16);
	reframe(&b, len + 16);
	assert_int_equal(ws_fmt_watermark_decode(b.data, b.len, &out), WS_EFORMAT);

	/* Version 5 is not known: refused, naming the version. */
	assert_int_equal(ws_fmt_watermark_encode(&w, &b), 0);
	ws_put_le32(b.data + 8, 5);
	reframe(&b, b.len);
	assert_int_equal(ws_fmt_watermark_decode(b.data, b.len, &out), WS_EFORMAT);
	assert_non_null(strstr(ws_errmsg(), "unsupported watermark version 5"));
	ws_buf_free(&b);
}

/* Decode expecting err, with a message holding want. */
static void refused(int rc, int err, const char *want)
{
	if (rc != err)
		fail_msg("returned %d, not %d (wanted a refusal naming \"%s\")", rc, err, want);
	if (!strstr(ws_errmsg(), want))
		fail_msg("message \"%s\" does not name \"%s\"", ws_errmsg(), want);
}

/*
 * Manifest version 4 (a slot): version 2's layout, batches inline or not,
 * plus lane and durable_ms; no tail index. Round trips; lane 0 and a tail
 * durable before it was read are refused, and neither is encoded (nor a
 * tail index with a lane).
 */
static void test_manifest_slot(void **state)
{
	struct ws_fmt_objref batches[3];
	struct iovec iov[3];
	uint8_t bytes[3][100];
	struct ws_fmt_tail tails[2];
	struct ws_fmt_manifest m, out;
	enum ws_fmt_slot_kind kind;
	struct ws_buf b;
	size_t len;
	(void)state;

	ws_buf_init(&b, 1u << 20);
	merged(&m, batches, iov, bytes, tails);
	m.lane = 0x8badf00ddeadbeefull;
	m.durable_ms = 3400;
	assert_int_equal(ws_fmt_manifest_encode(&m, &b), -EINVAL); /* a slot has no tail index */
	m.tail_count = 0;
	m.tails = NULL;
	assert_int_equal(ws_fmt_manifest_encode(&m, &b), 0);
	assert_int_equal(ws_get_le32(b.data + 8), 4);
	assert_int_equal(ws_fmt_manifest_decode(b.data, b.len, &out), 0);
	assert_int_equal(out.lane, m.lane);
	assert_int_equal(out.durable_ms, 3400);
	assert_int_equal(out.time_ms, 3000);
	assert_int_equal(out.tail_count, 0);
	assert_int_equal(out.batch_count, 3);
	for (uint32_t i = 0; i < 3; i++) {
		assert_true(ws_fmt_objref_inline(&out.batches[i]));
		assert_memory_equal(b.data + out.batches[i].inline_off, bytes[i], 100);
	}
	assert_string_equal(out.prev_key, m.prev_key);
	ws_fmt_manifest_free(&out);
	assert_int_equal(ws_fmt_slot_kind(b.data, b.len, &kind), 0);
	assert_int_equal(kind, WS_FMT_SLOT_MANIFEST);

	/* Lane 0 (the lane field is the 16 bytes before the inline batches). */
	len = b.len;
	ws_put_le64(b.data + len - 8 - 300 - 16, 0);
	reframe(&b, len);
	refused(ws_fmt_manifest_decode(b.data, b.len, &out), WS_EFORMAT, "lane 0");
	/* Durable before it was read. */
	assert_int_equal(ws_fmt_manifest_encode(&m, &b), 0);
	ws_put_le64(b.data + len - 8 - 300 - 8, 2999);
	reframe(&b, len);
	refused(ws_fmt_manifest_decode(b.data, b.len, &out), WS_EFORMAT, "durable at 2999 ms, before");
	m.durable_ms = 2999;
	assert_int_equal(ws_fmt_manifest_encode(&m, &b), -EINVAL);
	m.durable_ms = 3000; /* durable as it was read: allowed */
	assert_int_equal(ws_fmt_manifest_encode(&m, &b), 0);
	assert_int_equal(ws_fmt_manifest_decode(b.data, b.len, &out), 0);
	ws_fmt_manifest_free(&out);

	/* Batches of their own (no inline bytes) are a slot too. */
	for (uint32_t i = 0; i < 3; i++)
		snprintf(batches[i].key, sizeof(batches[i].key), "app/e1-p0/g1/b%016x", i + 5);
	m.inline_iov = NULL;
	m.inline_iovcnt = 0;
	assert_int_equal(ws_fmt_manifest_encode(&m, &b), 0);
	assert_int_equal(ws_get_le32(b.data + 8), 4);
	assert_int_equal(ws_fmt_manifest_decode(b.data, b.len, &out), 0);
	assert_int_equal(out.lane, m.lane);
	assert_false(ws_fmt_objref_inline(&out.batches[0]));
	ws_fmt_manifest_free(&out);
	/* The same without a lane is version 1, as before, and decodes lane 0. */
	m.lane = 0;
	m.durable_ms = 0;
	assert_int_equal(ws_fmt_manifest_encode(&m, &b), 0);
	assert_int_equal(ws_get_le32(b.data + 8), 1);
	assert_int_equal(ws_fmt_manifest_decode(b.data, b.len, &out), 0);
	assert_int_equal(out.lane, 0);
	assert_int_equal(out.durable_ms, 0);
	ws_fmt_manifest_free(&out);
	/* Version 5: unknown, named. */
	ws_put_le32(b.data + 8, 5);
	reframe(&b, b.len);
	refused(ws_fmt_manifest_decode(b.data, b.len, &out), WS_EFORMAT, "unsupported manifest version 5");
	ws_buf_free(&b);
}

static void slot_wm(struct ws_fmt_watermark *w)
{
	memset(w, 0, sizeof(*w));
	snprintf(w->tenant, sizeof(w->tenant), "app");
	w->epoch = 2;
	w->pointer_generation = 1;
	w->seq = 7;
	w->time_ms = 12345;
	w->gen = (struct ws_fmt_gen){ 0x377f0682u, 3, 1, 2, 4096 };
	w->last_frame = 9;
	w->end_cksum[0] = 11;
	w->end_cksum[1] = 12;
	snprintf(w->manifest_key, sizeof(w->manifest_key), "app/e2-p1/l00000000000000aa/m0000000000000007");
	memset(w->manifest_sha, 0x5a, sizeof(w->manifest_sha));
	w->manifest_length = 321;
	w->lane = 0xaa;
}

/*
 * Watermark version 4: version 2's fields (the manifest named is a hint
 * slot) and the writer's lane, never 0, never anything carried. Round
 * trips, also with no slot yet (seq 0, key ""); lane 0, carried bytes
 * after the lane and a slot-less one naming a slot's fields are refused.
 */
static void test_watermark_slots(void **state)
{
	struct ws_fmt_watermark w, out;
	enum ws_fmt_slot_kind kind;
	uint8_t man[40];
	struct ws_buf b;
	size_t len;
	(void)state;

	ws_buf_init(&b, 1u << 20);
	slot_wm(&w);
	assert_int_equal(ws_fmt_watermark_encode(&w, &b), 0);
	assert_int_equal(ws_get_le32(b.data + 8), 4);
	assert_int_equal(ws_fmt_watermark_decode(b.data, b.len, &out), 0);
	assert_int_equal(out.version, 4);
	assert_int_equal(out.lane, 0xaa);
	assert_int_equal(out.seq, 7);
	assert_int_equal(out.epoch, 2);
	assert_int_equal(out.pointer_generation, 1);
	assert_int_equal(out.time_ms, 12345);
	assert_int_equal(out.gen.salt2, 2);
	assert_int_equal(out.last_frame, 9);
	assert_int_equal(out.end_cksum[1], 12);
	assert_string_equal(out.manifest_key, w.manifest_key);
	assert_memory_equal(out.manifest_sha, w.manifest_sha, WS_SHA256_LEN);
	assert_int_equal(out.manifest_length, 321);
	assert_null(out.carried);
	assert_int_equal(out.carried_len, 0);
	/* Not a slot object. */
	refused(ws_fmt_slot_kind(b.data, b.len, &kind), WS_EFORMAT, "not a manifest slot or close record");

	/* Lane 0 in the bytes (the last field before the trailer). */
	len = b.len;
	ws_put_le64(b.data + len - 16, 0);
	reframe(&b, len);
	refused(ws_fmt_watermark_decode(b.data, b.len, &out), WS_EFORMAT, "names lane 0");

	/* The encoder: a lane with carried bytes, or version 4 without a lane. */
	for (size_t i = 0; i < sizeof(man); i++)
		man[i] = (uint8_t)i;
	w.carried = man;
	w.carried_len = sizeof(man);
	w.manifest_length = sizeof(man);
	assert_int_equal(ws_fmt_watermark_encode(&w, &b), -EINVAL);
	w.carried = NULL;
	w.carried_len = 0;
	w.lane = 0;
	w.version = 4;
	assert_int_equal(ws_fmt_watermark_encode(&w, &b), -EINVAL);
	/* A lane wins over an older version asked for. */
	w.lane = 0xaa;
	w.version = 2;
	assert_int_equal(ws_fmt_watermark_encode(&w, &b), 0);
	assert_int_equal(ws_get_le32(b.data + 8), 4);

	/* A version 3 (carried) object relabelled 4: bytes after the lane. */
	{
		char shahex[17];
		struct ws_fmt_watermark c = w;
		c.lane = 0;
		c.version = 0;
		ws_sha256(man, sizeof(man), c.manifest_sha);
		ws_hex(c.manifest_sha, 8, shahex);
		snprintf(c.manifest_key, sizeof(c.manifest_key), "app/e2-p1/g1/m0000000000000007-%s", shahex);
		c.carried = man;
		c.carried_len = sizeof(man);
		assert_int_equal(ws_fmt_watermark_encode(&c, &b), 0);
		assert_int_equal(ws_get_le32(b.data + 8), 3);
		assert_int_equal(ws_fmt_watermark_decode(b.data, b.len, &out), 0);
		assert_int_equal(out.lane, 0);
		ws_put_le32(b.data + 8, 4);
		reframe(&b, b.len);
		refused(ws_fmt_watermark_decode(b.data, b.len, &out), WS_EFORMAT, "version 4 carries no manifest");
	}

	/* A lane opened, no slot written yet: seq 0, key "", nothing of a slot. */
	slot_wm(&w);
	w.seq = 0;
	w.manifest_key[0] = '\0';
	memset(w.manifest_sha, 0, sizeof(w.manifest_sha));
	w.manifest_length = 0;
	w.last_frame = 0;
	w.end_cksum[0] = w.end_cksum[1] = 0;
	memset(&w.gen, 0, sizeof(w.gen));
	assert_int_equal(ws_fmt_watermark_encode(&w, &b), 0);
	assert_int_equal(ws_fmt_watermark_decode(b.data, b.len, &out), 0);
	assert_int_equal(out.seq, 0);
	assert_int_equal(out.lane, 0xaa);
	assert_string_equal(out.manifest_key, "");
	w.manifest_length = 5;
	assert_int_equal(ws_fmt_watermark_encode(&w, &b), 0);
	refused(ws_fmt_watermark_decode(b.data, b.len, &out), WS_EFORMAT, "names no slot (seq 0)");
	w.manifest_length = 0;
	snprintf(w.manifest_key, sizeof(w.manifest_key), "app/e2-p1/l00000000000000aa/m0000000000000001");
	assert_int_equal(ws_fmt_watermark_encode(&w, &b), 0);
	refused(ws_fmt_watermark_decode(b.data, b.len, &out), WS_EFORMAT, "names no slot (seq 0)");
	/* Seq 0 is still refused below version 4. */
	w.lane = 0;
	w.manifest_key[0] = '\0';
	w.gen = (struct ws_fmt_gen){ 0x377f0682u, 3, 1, 2, 4096 };
	assert_int_equal(ws_fmt_watermark_encode(&w, &b), 0);
	refused(ws_fmt_watermark_decode(b.data, b.len, &out), WS_EFORMAT, "watermark fields invalid");
	ws_buf_free(&b);
}

static void a_close(struct ws_fmt_close *c, bool removed)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->tenant, sizeof(c->tenant), "app");
	c->epoch = 3;
	c->pointer_generation = 4;
	c->lane = 0x1111;
	c->seq = 9;
	c->removed = removed;
	if (!removed) {
		c->closer_epoch = 3;
		c->closer_pg = 5;
		c->closer_lane = 0x2222;
	}
	snprintf(c->prev_key, sizeof(c->prev_key), "app/e3-p4/l0000000000001111/m0000000000000008");
	memset(c->prev_sha, 0x77, sizeof(c->prev_sha));
	c->prev_length = 555;
	c->time_ms = 99999;
}

/* Byte offsets in an encoded close record of tenant "app" (docs/FORMAT.md "Close record"). */
enum { C_EPOCH = 21, C_PG = 29, C_LANE = 37, C_SEQ = 45, C_CEPOCH = 53, C_CPG = 61, C_CLANE = 69, C_FLAGS = 77,
       C_PREV = 81 };

static void close_patched(const struct ws_fmt_close *c, size_t off, uint64_t v, int width, const char *want)
{
	struct ws_fmt_close out;
	struct ws_buf b;
	ws_buf_init(&b, 1u << 16);
	assert_int_equal(ws_fmt_close_encode(c, &b), 0);
	if (width == 8)
		ws_put_le64(b.data + off, v);
	else if (width == 4)
		ws_put_le32(b.data + off, (uint32_t)v);
	else
		b.data[off] = (uint8_t)v;
	reframe(&b, b.len);
	refused(ws_fmt_close_decode(b.data, b.len, &out), WS_EFORMAT, want);
	ws_buf_free(&b);
}

/*
 * The close record: round trips closed by a higher token and closed by
 * removal; every field the decoder checks, refused with a message naming
 * it; the encoder refuses what the decoder would.
 */
static void test_close_record(void **state)
{
	struct ws_fmt_close c, out;
	enum ws_fmt_slot_kind kind;
	struct ws_buf b;
	size_t len;
	(void)state;

	ws_buf_init(&b, 1u << 16);
	for (int removed = 0; removed <= 1; removed++) {
		a_close(&c, removed);
		assert_int_equal(ws_fmt_close_encode(&c, &b), 0);
		assert_memory_equal(b.data, "WSCLOSE1", 8);
		assert_int_equal(ws_get_le32(b.data + 8), 1);
		assert_int_equal(ws_get_le32(b.data + 12), b.len);
		assert_int_equal(ws_get_le64(b.data + C_SEQ), 9);
		assert_int_equal(ws_get_le32(b.data + C_FLAGS), (uint32_t)removed);
		assert_int_equal(ws_fmt_close_decode(b.data, b.len, &out), 0);
		assert_string_equal(out.tenant, "app");
		assert_int_equal(out.epoch, 3);
		assert_int_equal(out.pointer_generation, 4);
		assert_int_equal(out.lane, 0x1111);
		assert_int_equal(out.seq, 9);
		assert_int_equal(out.removed, removed);
		assert_int_equal(out.closer_epoch, removed ? 0 : 3);
		assert_int_equal(out.closer_pg, removed ? 0 : 5);
		assert_int_equal(out.closer_lane, removed ? 0 : 0x2222);
		assert_string_equal(out.prev_key, c.prev_key);
		assert_memory_equal(out.prev_sha, c.prev_sha, WS_SHA256_LEN);
		assert_int_equal(out.prev_length, 555);
		assert_int_equal(out.time_ms, 99999);
		assert_int_equal(ws_fmt_slot_kind(b.data, b.len, &kind), 0);
		assert_int_equal(kind, WS_FMT_SLOT_CLOSE);
	}
	/* A closer with a lower epoch and a higher pointer generation fences
	 * too (stream.c fenced_by: either higher). */
	a_close(&c, false);
	c.closer_epoch = 2;
	c.closer_pg = 9;
	assert_int_equal(ws_fmt_close_encode(&c, &b), 0);
	assert_int_equal(ws_fmt_close_decode(b.data, b.len, &out), 0);
	/* The first slot closed: no previous slot. */
	a_close(&c, true);
	c.seq = 1;
	c.prev_key[0] = '\0';
	memset(c.prev_sha, 0, sizeof(c.prev_sha));
	c.prev_length = 0;
	assert_int_equal(ws_fmt_close_encode(&c, &b), 0);
	assert_int_equal(ws_fmt_close_decode(b.data, b.len, &out), 0);
	assert_string_equal(out.prev_key, "");
	c.prev_length = 1;
	assert_int_equal(ws_fmt_close_encode(&c, &b), -EINVAL);
	c.seq = 2;
	c.prev_length = 0;
	assert_int_equal(ws_fmt_close_encode(&c, &b), -EINVAL);

	/* Framing: magic, version, length, trailer. */
	a_close(&c, false);
	assert_int_equal(ws_fmt_close_encode(&c, &b), 0);
	len = b.len;
	b.data[len - 20] ^= 1;
	refused(ws_fmt_close_decode(b.data, b.len, &out), WS_ECORRUPT, "close record hash mismatch");
	b.data[len - 20] ^= 1;
	refused(ws_fmt_close_decode(b.data, len - 1, &out), WS_EFORMAT, "header says");
	close_patched(&c, 0, 'X', 1, "not a walship close record");
	close_patched(&c, 8, 2, 4, "unsupported close record version 2");
	/* Each field. */
	close_patched(&c, C_SEQ, 0, 8, "sequence 0");
	close_patched(&c, C_LANE, 0, 8, "the lane it closes is 0");
	close_patched(&c, C_CLANE, 0, 8, "closer's lane is 0");
	close_patched(&c, C_CPG, 4, 8, "does not fence"); /* (3, 4) closing (3, 4) */
	close_patched(&c, C_CPG, 3, 8, "does not fence"); /* (3, 3): lower */
	c.closer_epoch = 4; /* (4, 4) fences (3, 4) */
	c.closer_pg = 4;
	close_patched(&c, C_CEPOCH, 3, 8, "does not fence"); /* (3, 4) */
	close_patched(&c, C_CEPOCH, 2, 8, "does not fence"); /* (2, 4) */
	a_close(&c, false);
	close_patched(&c, C_FLAGS, 1, 4, "closed by removal (forget) but names a closer");
	close_patched(&c, C_FLAGS, 2, 4, "unknown flags");
	close_patched(&c, 18, '/', 1, "tenant name is invalid");
	close_patched(&c, C_PREV + 2 + 4, '\0', 1, "prev_key"); /* a NUL inside the key */
	close_patched(&c, C_PREV + 2 + 4, 0x2f, 1, "previous slot's key is invalid"); /* "app//3-p4..." */
	close_patched(&c, C_PREV, 0xffff, 8, "prev_key"); /* a length past the object */
	a_close(&c, true);
	close_patched(&c, C_CLANE, 7, 8, "closed by removal (forget) but names a closer");
	close_patched(&c, C_FLAGS, 0, 4, "closer's lane is 0");
	/* The encoder refuses the same. */
	a_close(&c, true);
	c.closer_lane = 7;
	assert_int_equal(ws_fmt_close_encode(&c, &b), -EINVAL);
	a_close(&c, false);
	c.closer_pg = 4;
	assert_int_equal(ws_fmt_close_encode(&c, &b), -EINVAL);
	a_close(&c, false);
	c.seq = 0;
	assert_int_equal(ws_fmt_close_encode(&c, &b), -EINVAL);
	ws_buf_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_manifest_valid_baseline),
		cmocka_unit_test(test_rebase_frames_from_one),
		cmocka_unit_test(test_manifest_batch_range_wraps),
		cmocka_unit_test(test_manifest_inline_batches),
		cmocka_unit_test(test_manifest_tail_index),
		cmocka_unit_test(test_watermark_carries_manifest),
		cmocka_unit_test(test_manifest_slot),
		cmocka_unit_test(test_watermark_slots),
		cmocka_unit_test(test_close_record),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
