/*
 * Seed objects for the fuzz targets, made by the library's own encoders so
 * that every seed is a valid object the decoder accepts (each is decoded
 * before it is written; a seed the decoder refuses stops the run).
 *
 *   fuzz_gen_corpus OUT_DIR WAL_FILE
 *
 * WAL_FILE is a real SQLite WAL (gen_corpus.py makes one): batches are cut
 * from its frames and snapshot parts from its pages, so the seeds carry
 * SQLite's own checksum chain. Writes OUT_DIR/{batch,snap,manifest,
 * watermark,ckpt_json}/gen-*.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckpt_internal.h"
#include "ws_format.h"
#include "ws_artseal.h"
#include "ws_seal.h"
#include "ws_hash.h"
#include "ws_wal.h"

static const char *g_out;

static void die(const char *what)
{
	fprintf(stderr, "fuzz_gen_corpus: %s\n", what);
	exit(1);
}

static void put(const char *dir, const char *name, const void *p, size_t n)
{
	char path[4096];
	FILE *f;
	snprintf(path, sizeof(path), "%s/%s", g_out, dir);
	if (mkdir(path, 0755) != 0 && errno != EEXIST)
		die("mkdir");
	snprintf(path, sizeof(path), "%s/%s/gen-%s", g_out, dir, name);
	f = fopen(path, "wb");
	if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0)
		die(path);
}

static uint8_t *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	size_t cap = 0, n = 0, r;
	if (!f)
		die(path);
	do {
		if (n == cap) {
			cap = cap ? cap * 2 : 65536;
			buf = realloc(buf, cap);
			if (!buf)
				die("out of memory");
		}
		r = fread(buf + n, 1, cap - n, f);
		n += r;
	} while (r > 0);
	fclose(f);
	*len = n;
	return buf;
}

/* The key the fuzz targets' keyring holds (fuzz_sealed.h). */
#define FUZZ_KEY "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"

/* Version 2 seeds of a payload: no codec, zstd, encrypted, both. */
static const struct ws_seal *seal_variant(int i, struct ws_keyring *kr, char *tag, size_t cap)
{
	static struct ws_seal s;
	static const char *names[] = { "v2plain", "zstd", "aes", "zstd-aes" };
	if (!kr->count && ws_keyring_parse(kr, "fuzz", FUZZ_KEY, 64) != 0)
		die("fuzz key");
	s = (struct ws_seal){ .codec = (uint32_t)(i & 1), .key = i & 2 ? &kr->keys[0] : NULL };
	snprintf(tag, cap, "%s", names[i]);
	return &s;
}

static void sealed_put(const char *dir, const char *name, const char *tag, const uint8_t *hdr, size_t hl,
		       const uint8_t *payload, size_t n)
{
	char full[256];
	uint8_t *obj = malloc(hl + n);
	if (!obj)
		die("out of memory");
	memcpy(obj, hdr, hl);
	memcpy(obj + hl, payload, n);
	snprintf(full, sizeof(full), "%s-%s", name, tag);
	put(dir, full, obj, hl + n);
	free(obj);
}

static void sealed_batch(const char *name, const struct ws_fmt_batch *b, const uint8_t *frames, size_t len)
{
	static struct ws_keyring kr;
	for (int i = 0; i < 4; i++) {
		char tag[16];
		const struct ws_seal *s = seal_variant(i, &kr, tag, sizeof(tag));
		struct ws_fmt_batch v = *b;
		uint8_t hdr[WS_OBJ_HDR_MAX], *out = malloc(ws_seal_bound(s, len));
		size_t hl = 0, stored = 0;
		if (!out || ws_seal_batch(s, &v, &(struct iovec){ (void *)(uintptr_t)frames, len }, 1, hdr, &hl, out,
					  ws_seal_bound(s, len), &stored) != 0)
			die("seal a batch");
		sealed_put("batch", name, tag, hdr, hl, out, stored);
		free(out);
	}
}

/* Sealed checkpoint artifacts of an image (4 KiB chunks: several of them). */
static void artifacts(const char *name, const uint8_t *img, size_t len)
{
	static struct ws_keyring kr;
	struct ws_buf out;
	ws_buf_init(&out, 0);
	for (int i = 0; i < 4; i++) {
		char tag[16], full[64];
		const struct ws_seal *s = seal_variant(i, &kr, tag, sizeof(tag));
		if (ws_art_seal_buf(s, WS_ART_CHUNK_MIN, img, len, &out) != 0)
			die("seal an artifact");
		snprintf(full, sizeof(full), "%s-%s", name, tag);
		put("artifact", full, out.data, out.len);
	}
	ws_buf_free(&out);
}

static void sealed_snap(const char *name, const struct ws_fmt_snap *sn, const uint8_t *pages, size_t len)
{
	static struct ws_keyring kr;
	for (int i = 0; i < 4; i++) {
		char tag[16];
		const struct ws_seal *s = seal_variant(i, &kr, tag, sizeof(tag));
		struct ws_fmt_snap v = *sn;
		uint8_t hdr[WS_OBJ_HDR_MAX], *out = malloc(ws_seal_bound(s, len));
		size_t hl = 0, stored = 0;
		if (!out || ws_seal_snap(s, &v, &(struct iovec){ (void *)(uintptr_t)pages, len }, 1, hdr, &hl, out,
					 ws_seal_bound(s, len), &stored) != 0)
			die("seal a snapshot part");
		sealed_put("snap", name, tag, hdr, hl, out, stored);
		free(out);
	}
}

/* A batch of frames [first, first + count) of the scanned WAL. */
static void batch(const char *name, const uint8_t *wal, const struct ws_wal_hdr *h, uint64_t first, uint64_t count)
{
	size_t fsz = ws_wal_frame_size(h->page_size), len = WS_BATCH_HDR_SIZE + count * fsz;
	const uint8_t *frames = wal + ws_wal_frame_offset(h->page_size, first);
	const uint8_t *last = frames + (count - 1) * fsz;
	struct ws_fmt_batch b = {
		.gen = { h->magic, h->checkpoint_seq, h->salt1, h->salt2, h->page_size },
		.first_frame = first,
		.frame_count = count,
	};
	struct ws_fmt_batch back;
	uint8_t *obj = malloc(len);

	if (!obj)
		die("out of memory");
	if (first == 1) {
		b.seed_cksum[0] = h->cksum1;
		b.seed_cksum[1] = h->cksum2;
	} else {
		b.seed_cksum[0] = ws_get_be32(frames - fsz + 16);
		b.seed_cksum[1] = ws_get_be32(frames - fsz + 20);
	}
	b.end_cksum[0] = ws_get_be32(last + 16);
	b.end_cksum[1] = ws_get_be32(last + 20);
	b.payload_xxh = ws_xxh64(frames, count * fsz);
	ws_fmt_batch_encode_hdr(&b, obj);
	memcpy(obj + WS_BATCH_HDR_SIZE, frames, count * fsz);
	if (ws_fmt_batch_decode(obj, len, &back, NULL) != 0)
		die("a generated batch does not decode");
	put("batch", name, obj, len);
	sealed_batch(name, &b, obj + WS_BATCH_HDR_SIZE, count * fsz);
	free(obj);
}

/* A snapshot part of the pages that the WAL's frames carry (any page images will do). */
static void snap(const char *name, const uint8_t *wal, const struct ws_wal_hdr *h, uint32_t first_page,
		 uint32_t count)
{
	size_t len = WS_SNAP_HDR_SIZE + (size_t)count * h->page_size;
	struct ws_fmt_snap s = { .page_size = h->page_size, .first_page = first_page, .page_count = count };
	struct ws_fmt_snap back;
	uint8_t *obj = malloc(len);

	if (!obj)
		die("out of memory");
	for (uint32_t i = 0; i < count; i++)
		memcpy(obj + WS_SNAP_HDR_SIZE + (size_t)i * h->page_size,
		       wal + ws_wal_frame_offset(h->page_size, i + 1) + WS_WAL_FRAME_HDR_SIZE, h->page_size);
	s.payload_xxh = ws_xxh64(obj + WS_SNAP_HDR_SIZE, len - WS_SNAP_HDR_SIZE);
	ws_fmt_snap_encode_hdr(&s, obj);
	if (ws_fmt_snap_decode(obj, len, &back, NULL) != 0)
		die("a generated snapshot part does not decode");
	put("snap", name, obj, len);
	sealed_snap(name, &s, obj + WS_SNAP_HDR_SIZE, len - WS_SNAP_HDR_SIZE);
	artifacts(name, obj + WS_SNAP_HDR_SIZE, len - WS_SNAP_HDR_SIZE);
	free(obj);
}

static struct ws_fmt_objref ref(const char *key, uint64_t first, uint64_t count, uint64_t len)
{
	struct ws_fmt_objref r = { .first = first, .count = count, .xxh = 0x1234567890abcdefull ^ first, .length = len };
	snprintf(r.key, sizeof(r.key), "%s", key);
	return r;
}

static void manifest(const char *name, const struct ws_fmt_manifest *m)
{
	struct ws_buf b;
	struct ws_fmt_manifest back;
	ws_buf_init(&b, 1u << 20);
	if (ws_fmt_manifest_encode(m, &b) != 0 || ws_fmt_manifest_decode(b.data, b.len, &back) != 0)
		die("a generated manifest does not decode");
	ws_fmt_manifest_free(&back);
	put("manifest", name, b.data, b.len);
	ws_buf_free(&b);
}

static void manifests(const struct ws_wal_hdr *h, uint64_t frames, uint64_t last_commit)
{
	struct ws_fmt_objref snaps[2], batches[3];
	struct ws_fmt_manifest m = {
		.tenant = "app",
		.epoch = 1,
		.pointer_generation = 1,
		.wm_seq = 1,
		.time_ms = 1767225600000,
		.gen = { h->magic, h->checkpoint_seq, h->salt1, h->salt2, h->page_size },
		.kind = WS_MANIFEST_REBASE,
		.first_frame = 1,
		.last_frame = last_commit,
		.valid_from_frame = last_commit,
		.seed_cksum = { h->cksum1, h->cksum2 },
		.end_cksum = { 0x11111111, 0x22222222 },
		.db_pages = 3,
	};
	uint64_t half = frames / 2 ? frames / 2 : 1;

	snaps[0] = ref("app/s0000000000000001/00000000-0000000000000001", 1, 2, 64 + 2 * h->page_size);
	snaps[1] = ref("app/s0000000000000001/00000001-0000000000000003", 3, 1, 64 + h->page_size);
	batches[0] = ref("app/b0000000000000001", 1, half, 96 + half * (24 + h->page_size));
	batches[1] = ref("app/b0000000000000002", 1 + half, frames - half, 96);
	m.snaps = snaps;
	m.snap_count = 2;
	m.batches = batches;
	m.batch_count = frames > half ? 2 : 1;
	manifest("rebase", &m);

	/* A re-base of an empty WAL: the database file alone. */
	m.gen.wal_magic = 0;
	m.first_frame = 1;
	m.last_frame = m.valid_from_frame = 0;
	m.batch_count = 0;
	m.batches = NULL;
	manifest("rebase-empty", &m);

	/* A continuation of a predecessor, and a next generation on top of one. */
	m.gen.wal_magic = h->magic;
	m.kind = WS_MANIFEST_CONTINUE;
	m.wm_seq = 2;
	m.snap_count = 0;
	m.snaps = NULL;
	m.first_frame = 5;
	m.last_frame = 7;
	m.valid_from_frame = 5;
	batches[0] = ref("app/b0000000000000005", 5, 2, 96);
	batches[1] = ref("app/b0000000000000007", 7, 1, 96);
	m.batches = batches;
	m.batch_count = 2;
	snprintf(m.prev_key, sizeof(m.prev_key), "app/m0000000000000001-%064d", 0);
	memset(m.prev_sha, 0xab, sizeof(m.prev_sha));
	m.prev_length = 400;
	manifest("continue", &m);
	m.kind = WS_MANIFEST_NEXT_GEN;
	m.gen.salt1++;
	m.first_frame = 1;
	m.valid_from_frame = 1;
	m.last_frame = 3;
	batches[0] = ref("app/b0000000000000001", 1, 3, 96);
	m.batch_count = 1;
	manifest("next-gen", &m);
	{
		/* Version 2: the second batch carried inside the manifest. */
		uint8_t inl[96];
		struct iovec iov = { inl, sizeof(inl) };
		memset(inl, 0x5a, sizeof(inl));
		m.kind = WS_MANIFEST_CONTINUE;
		m.first_frame = 5;
		m.last_frame = 7;
		m.valid_from_frame = 5;
		batches[0] = ref("app/b0000000000000005", 5, 2, 96);
		batches[1] = ref("", 7, 1, sizeof(inl));
		m.batch_count = 2;
		m.inline_iov = &iov;
		m.inline_iovcnt = 1;
		manifest("continue-inline", &m);
		{
			/* Version 3: tails merged into a carried manifest, each
			 * before the last with its end frame and time. */
			uint8_t inl3[3][96];
			struct iovec iov3[3] = { { inl3[0], 96 }, { inl3[1], 96 }, { inl3[2], 96 } };
			struct ws_fmt_tail tails[2] = { { 5, 1767225599000 }, { 6, 1767225599500 } };
			memset(inl3, 0x5b, sizeof(inl3));
			batches[0] = ref("", 5, 1, 96);
			batches[1] = ref("", 6, 1, 96);
			batches[2] = ref("", 7, 1, 96);
			m.batch_count = 3;
			m.inline_iov = iov3;
			m.inline_iovcnt = 3;
			m.tails = tails;
			m.tail_count = 2;
			manifest("continue-merged", &m);
			m.tails = NULL;
			m.tail_count = 0;
		}
		/* Version 4: a slot in a lane, its batch inline, and with its
		 * batches all objects of their own. */
		m.lane = 0x5107c0ffee000001ull;
		m.durable_ms = m.time_ms + 40;
		batches[0] = ref("app/b0000000000000005", 5, 2, 96);
		batches[1] = ref("", 7, 1, sizeof(inl));
		m.batch_count = 2;
		m.inline_iov = &iov;
		m.inline_iovcnt = 1;
		manifest("slot-inline", &m);
		batches[1] = ref("app/b0000000000000007", 7, 1, 96);
		m.inline_iov = NULL;
		m.inline_iovcnt = 0;
		manifest("slot", &m);
		m.lane = 0;
		m.durable_ms = 0;
		m.inline_iov = NULL;
		m.inline_iovcnt = 0;
	}
}

static void watermarks(const struct ws_wal_hdr *h, uint64_t last_commit)
{
	struct ws_fmt_watermark w = {
		.version = 2,
		.tenant = "app",
		.epoch = 1,
		.pointer_generation = 1,
		.seq = 3,
		.time_ms = 1767225600000,
		.gen = { h->magic, h->checkpoint_seq, h->salt1, h->salt2, h->page_size },
		.last_frame = last_commit,
		.end_cksum = { 0x11111111, 0x22222222 },
		.manifest_length = 400,
	};
	struct ws_fmt_watermark back;
	struct ws_buf b;

	snprintf(w.manifest_key, sizeof(w.manifest_key), "app/m0000000000000003-%064d", 0);
	memset(w.manifest_sha, 0xcd, sizeof(w.manifest_sha));
	ws_buf_init(&b, 1u << 20);
	for (int v = 2; v >= 1; v--) {
		w.version = (uint32_t)v;
		if (ws_fmt_watermark_encode(&w, &b) != 0 || ws_fmt_watermark_decode(b.data, b.len, &back) != 0)
			die("a generated watermark does not decode");
		put("watermark", v == 2 ? "v2" : "v1-legacy", b.data, b.len);
	}
	/* No WAL: a database file alone. */
	w.version = 2;
	w.gen.wal_magic = 0;
	w.gen.salt1 = w.gen.salt2 = 0;
	w.last_frame = 0;
	if (ws_fmt_watermark_encode(&w, &b) != 0 || ws_fmt_watermark_decode(b.data, b.len, &back) != 0)
		die("a generated watermark does not decode");
	put("watermark", "v2-no-wal", b.data, b.len);
	/* Carrying the manifest it names (version 3). */
	{
		uint8_t man[400];
		for (size_t i = 0; i < sizeof(man); i++)
			man[i] = (uint8_t)(i * 13 + 5);
		w.gen = (struct ws_fmt_gen){ h->magic, h->checkpoint_seq, h->salt1, h->salt2, h->page_size };
		w.last_frame = last_commit;
		char shahex[17];
		ws_sha256(man, sizeof(man), w.manifest_sha);
		ws_hex(w.manifest_sha, 8, shahex);
		/* A carried manifest's key is m<seq>-<sha8>, as its writer names it. */
		snprintf(w.manifest_key, sizeof(w.manifest_key), "app/m%016llx-%s", (unsigned long long)w.seq, shahex);
		w.manifest_length = sizeof(man);
		w.carried = man;
		w.carried_len = sizeof(man);
		if (ws_fmt_watermark_encode(&w, &b) != 0 || ws_fmt_watermark_decode(b.data, b.len, &back) != 0 ||
		    back.version != 3)
			die("a generated watermark does not decode");
		put("watermark", "v3-carried", b.data, b.len);
		w.carried = NULL;
		w.carried_len = 0;
	}
	/* Version 4 (manifest slots): a hint slot and the writer's lane; and
	 * a lane opened with no slot yet. */
	w.lane = 0x5107c0ffee000001ull;
	snprintf(w.manifest_key, sizeof(w.manifest_key), "app/e1-p1/l5107c0ffee000001/m%016llx",
		 (unsigned long long)w.seq);
	if (ws_fmt_watermark_encode(&w, &b) != 0 || ws_fmt_watermark_decode(b.data, b.len, &back) != 0 ||
	    back.version != 4)
		die("a generated watermark does not decode");
	put("watermark", "v4-slots", b.data, b.len);
	w.seq = 0;
	w.manifest_key[0] = '\0';
	memset(w.manifest_sha, 0, sizeof(w.manifest_sha));
	w.manifest_length = 0;
	w.last_frame = 0;
	w.end_cksum[0] = w.end_cksum[1] = 0;
	memset(&w.gen, 0, sizeof(w.gen));
	if (ws_fmt_watermark_encode(&w, &b) != 0 || ws_fmt_watermark_decode(b.data, b.len, &back) != 0)
		die("a generated watermark does not decode");
	put("watermark", "v4-lane-opened", b.data, b.len);
	ws_buf_free(&b);
}

static void close_seed(const char *name, const struct ws_fmt_close *c)
{
	struct ws_fmt_close back;
	struct ws_buf b;
	ws_buf_init(&b, 1u << 16);
	if (ws_fmt_close_encode(c, &b) != 0 || ws_fmt_close_decode(b.data, b.len, &back) != 0)
		die("a generated close record does not decode");
	put("close", name, b.data, b.len);
	ws_buf_free(&b);
}

/* Close records: a lane closed by a higher token, one closed by forget,
 * and the first slot of a lane closed (no previous slot). */
static void closes(void)
{
	struct ws_fmt_close c = {
		.tenant = "app",
		.epoch = 1,
		.pointer_generation = 1,
		.lane = 0x5107c0ffee000001ull,
		.seq = 4,
		.closer_epoch = 1,
		.closer_pg = 2,
		.closer_lane = 0x5107c0ffee000002ull,
		.prev_length = 349,
		.time_ms = 1767225600100,
	};

	snprintf(c.prev_key, sizeof(c.prev_key), "app/e1-p1/l5107c0ffee000001/m0000000000000003");
	memset(c.prev_sha, 0xef, sizeof(c.prev_sha));
	close_seed("closed", &c);
	c.removed = true;
	c.closer_epoch = c.closer_pg = c.closer_lane = 0;
	close_seed("removed", &c);
	c.seq = 1;
	c.prev_key[0] = '\0';
	memset(c.prev_sha, 0, sizeof(c.prev_sha));
	c.prev_length = 0;
	close_seed("removed-first", &c);
}

static void ckpt(const char *name, char *enc, size_t len)
{
	if (!enc)
		die("a checkpoint object did not encode");
	put("ckpt_json", name, enc, len);
	free(enc);
}

static void ckpt_objects(void)
{
	static const char dep[] = "0123456789abcdef0123456789abcdef";
	static const char sha[] = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
	struct ckpt_deployment d = { .local = true, .next_id = 65 };
	struct ws_ckpt_tenant_entry tenants[2];
	struct ws_ckpt_artifact arts[1];
	struct ws_ckpt_index idx = { .checkpoint_id = 7, .epoch = 1 };
	struct ws_ckpt_head head = { .epoch = 1, .decisions = 3 };
	struct ckpt_inventory_rec inv = { .active = true, .has_completed = true };
	char keys[2][WS_KEY_MAX] = { "app/b0000000000000001", "app/m0000000000000001" };
	struct ws_ckpt_retention ret = { .phase = WS_CKPT_RET_SWEEP_ARTIFACTS, .generation = 4 };
	static struct ws_ckpt_witness wit = { .state = WS_CKPT_WITNESS_OPEN, .sequence = 2, .participant_id = 9,
					      .sink_count = 2 };
	struct ws_ckpt_ref pred = { .id = 6 };
	size_t len = 0;

	snprintf(d.id, sizeof(d.id), "%s", dep);
	ckpt("deployment", ckpt_enc_deployment(&d, &len), len);

	memset(tenants, 0, sizeof(tenants));
	snprintf(tenants[0].tenant, sizeof(tenants[0].tenant), "app");
	snprintf(tenants[1].tenant, sizeof(tenants[1].tenant), "billing");
	for (int i = 0; i < 2; i++) {
		tenants[i].wal_generation = 2;
		tenants[i].last_frame = 17;
		snprintf(tenants[i].manifest_key, sizeof(tenants[i].manifest_key), "%s/m0000000000000002-x",
			 tenants[i].tenant);
		snprintf(tenants[i].manifest_sha256, sizeof(tenants[i].manifest_sha256), "%s", sha);
		tenants[i].manifest_length = 512;
	}
	memset(arts, 0, sizeof(arts));
	snprintf(arts[0].key, sizeof(arts[0].key), "app/b0000000000000001");
	arts[0].length = 4096;
	snprintf(arts[0].sha256, sizeof(arts[0].sha256), "%s", sha);
	snprintf(idx.deployment, sizeof(idx.deployment), "%s", dep);
	idx.tenants = tenants;
	idx.tenant_count = 2;
	idx.artifacts = arts;
	idx.artifact_count = 1;
	snprintf(pred.sha256, sizeof(pred.sha256), "%s", sha);
	pred.length = 300;
	ws_ckpt_committed_key(pred.id, pred.sha256, pred.key);
	idx.has_predecessor = true;
	idx.predecessor = pred;
	ckpt("index", ckpt_enc_index(&idx, &len), len);
	idx.has_predecessor = false;
	idx.tenant_count = idx.artifact_count = 0;
	ckpt("index-empty", ckpt_enc_index(&idx, &len), len);

	ckpt("seal", ckpt_enc_seal(dep, 8, sha, 1234, &len), len);

	head.latest_terminal = (struct ws_ckpt_outcome){ .checkpoint_id = 7, .epoch = 1, .verdict = WS_CKPT_COMMIT,
							 .has_committed = true };
	head.latest_terminal.committed = pred;
	head.latest_terminal.committed.id = 7;
	ws_ckpt_committed_key(7, sha, head.latest_terminal.committed.key);
	head.has_commit = true;
	head.latest_commit = head.latest_terminal;
	ckpt("head-commit", ckpt_enc_head(dep, &head, &len), len);
	head.latest_terminal = (struct ws_ckpt_outcome){ .checkpoint_id = 8, .epoch = 1, .verdict = WS_CKPT_ABORT };
	ckpt("head-abort", ckpt_enc_head(dep, &head, &len), len);

	inv.inv.attempt = (struct ws_ckpt_attempt){ .checkpoint_id = 9, .epoch = 1, .token = 77 };
	inv.inv.keys = keys;
	inv.inv.key_count = 2;
	inv.completed = (struct ws_ckpt_attempt){ .checkpoint_id = 8, .epoch = 1, .token = 76 };
	ckpt("inventory", ckpt_enc_inventory(dep, &inv, &len), len);
	inv.active = false;
	ckpt("inventory-idle", ckpt_enc_inventory(dep, &inv, &len), len);

	ret.protected_ref = pred;
	ckpt("retention", ckpt_enc_retention(dep, &ret, &len), len);

	snprintf(wit.pipeline, sizeof(wit.pipeline), "etl-nightly");
	snprintf(wit.sinks[0], sizeof(wit.sinks[0]), "s3-archive");
	snprintf(wit.sinks[1], sizeof(wit.sinks[1]), "warehouse");
	wit.attempt = (struct ws_ckpt_attempt){ .checkpoint_id = 9, .epoch = 1, .token = 77 };
	ckpt("witness", ckpt_enc_witness(dep, &wit, &len), len);
}

int main(int argc, char **argv)
{
	struct ws_wal_hdr h;
	struct ws_wal_cursor c;
	uint8_t *wal;
	size_t len;
	uint64_t frames;

	if (argc != 3)
		die("usage: fuzz_gen_corpus OUT_DIR WAL_FILE");
	g_out = argv[1];
	wal = slurp(argv[2], &len);
	if (ws_wal_scan(wal, len, &h, &c) != 0 || c.last_commit < 2)
		die("WAL_FILE is not a WAL with at least two commits");
	frames = c.next_frame - 1;
	batch("frame1", wal, &h, 1, 1);
	batch("all", wal, &h, 1, frames);
	batch("tail", wal, &h, 2, frames - 1);
	snap("page1", wal, &h, 1, 1);
	snap("pages2", wal, &h, 2, 2);
	manifests(&h, frames, c.last_commit);
	watermarks(&h, c.last_commit);
	closes();
	ckpt_objects();
	free(wal);
	return 0;
}
