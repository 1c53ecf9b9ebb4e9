/*
 * Sealed streams end to end: a real SQLite writer shipped by ws_stream (and
 * by an engine) to a real file:// sink under every codec, with and without
 * a key: the re-base's snapshot parts, tails whose batches go inside their
 * manifests and into the watermark (carried, merged), tails of several
 * batches; then every commit restored by frame and the latest, checked
 * against the digests the source had. Without the key a restore fails with
 * WS_ENOKEY naming the object and the key's id and writes nothing, and
 * verify reports each object it could not open; the sink holds none of
 * the pages' text, and no message a key's.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <ftw.h>
#include <inttypes.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "chain.h"
#include "coreutil.h"
#include "prefetch.h"
#include "walship.h"
#include "ws_fault.h"
#include "ws_format.h"
#include "ws_hash.h"
#include "ws_seal.h"

#define TENANT "sealed"
#define KEY_HEX "8d1f6a0b3c2e4f5061728394a5b6c7d8e9f0011223344556677889aabbccddee"
#define MARK "walship-seal-marker"
#define TXNS 12

static uint64_t wal_frames(const struct wt_env *e)
{
	struct stat sb;
	uint64_t n = stat(e->wal, &sb) == 0 ? (uint64_t)sb.st_size : 0;
	return n < 32 ? 0 : (n - 32) / (24u + e->page_size);
}

/* One commit: compressible text (the marker) and some random bytes. */
static void write_marked(sqlite3 *w, int rows)
{
	wt_exec(w, "BEGIN");
	for (int i = 0; i < rows; i++)
		wt_exec(w, "INSERT INTO t(v) VALUES(replace(hex(zeroblob(120)), '00', '" MARK " '))");
	wt_exec(w, "INSERT INTO t(v) VALUES(randomblob(300))");
	wt_exec(w, "COMMIT");
}

/* ---- what the sink holds ------------------------------------------------- */

static struct {
	unsigned files, v2, v1, marked;
} scan;

static int scan_file(const char *path, const struct stat *sb, int type, struct FTW *f)
{
	size_t len = 0;
	uint8_t *b;
	(void)sb;
	(void)f;
	if (type != FTW_F)
		return 0;
	b = wt_read_file(path, &len);
	if (!b)
		return 0;
	scan.files++;
	if (len >= 16 && (memcmp(b, "WSBATCH1", 8) == 0 || memcmp(b, "WSSNAPP1", 8) == 0))
		(*(ws_get_le32(b + 8) == 2 ? &scan.v2 : &scan.v1))++;
	if (memmem(b, len, MARK, strlen(MARK)))
		scan.marked++;
	free(b);
	return 0;
}

static void scan_sink(const struct wt_env *e)
{
	memset(&scan, 0, sizeof(scan));
	assert_int_equal(nftw(e->sink_dir, scan_file, 16, FTW_PHYS), 0);
}

/* ---- restores without the key ---------------------------------------------- */

struct problems {
	unsigned n, nokey;
	char first_key[WS_KEY_MAX];
	bool leaked;
};

static void on_problem(const char *tenant, const char *key, int err, const char *detail, void *arg)
{
	struct problems *p = arg;
	(void)tenant;
	if (p->n++ == 0)
		snprintf(p->first_key, sizeof(p->first_key), "%s", key);
	p->nokey += err == WS_ENOKEY;
	p->leaked |= strstr(detail, KEY_HEX) != NULL || strstr(detail, KEY_HEX + 8) != NULL;
}

/* A sink opened without the key: restore fails naming an object and the
 * key's id, with nothing at the output; verify reports what it could not
 * open and fails. */
static void without_key(struct wt_env *e, uint64_t key_id)
{
	int rc;
	struct ws_sink *bare = ws_sink_open(e->sink_url, &rc);
	char *out = wt_path(e->out_dir, "nokey.db"), id[17];
	struct problems p = { 0 };

	assert_non_null(bare);
	snprintf(id, sizeof(id), "%016" PRIx64, key_id);
	rc = ws_restore(bare, TENANT, NULL, out);
	assert_int_equal(rc, WS_ENOKEY);
	if (!strstr(ws_errmsg(), id) || !strstr(ws_errmsg(), TENANT "/"))
		fail_msg("restore without the key: '%s' names no key id %s or object", ws_errmsg(), id);
	assert_null(strstr(ws_errmsg(), KEY_HEX));
	assert_int_equal(access(out, F_OK), -1);
	rc = ws_verify(bare, TENANT, on_problem, &p);
	assert_int_equal(rc, WS_ENOKEY);
	assert_true(p.n > 0 && p.nokey == p.n);
	assert_false(p.leaked);
	/* With the key added, both go through. */
	char *kf = wt_path(e->dir, "keys");
	assert_int_equal(ws_sink_add_key_file(bare, kf), 0);
	assert_int_equal(ws_restore(bare, TENANT, NULL, out), 0);
	assert_int_equal(ws_verify(bare, TENANT, NULL, NULL), 0);
	unlink(out);
	ws_sink_close(bare);
	free(kf);
	free(out);
}

/* ---- the stream ---------------------------------------------------------- */

struct record {
	uint64_t frame[TXNS * 2 + 1], hash[TXNS * 2 + 1];
	unsigned n;
};

static void commit_recorded(struct wt_env *e, struct record *r, int rows)
{
	write_marked(e->w, rows);
	r->frame[r->n] = wal_frames(e);
	r->hash[r->n] = wt_content_hash(e->w, NULL);
	r->n++;
}

static void check_restores(struct wt_env *e, const struct record *r, unsigned from)
{
	struct ws_restore_opts ro;
	for (unsigned i = from; i < r->n; i++) {
		memset(&ro, 0, sizeof(ro));
		ro.frame = r->frame[i];
		assert_true(wt_restore_hash(e, TENANT, &ro, NULL) == r->hash[i]);
		/* A frame inside the next transaction: the commit before it. */
		if (i + 1 < r->n && r->frame[i + 1] > r->frame[i] + 1) {
			ro.frame = r->frame[i + 1] - 1;
			assert_true(wt_restore_hash(e, TENANT, &ro, NULL) == r->hash[i]);
		}
	}
	assert_true(wt_restore_hash(e, TENANT, NULL, NULL) == r->hash[r->n - 1]);
}

/* Ship a stream sealed so (a re-base, then tails inline, carried and of
 * several batches), recording every commit; the stream is closed after. */
static void ship(struct wt_env *e, enum ws_codec codec, const char *key_file, enum ws_carry carry,
		 struct record *r)
{
	struct ws_outcome o;
	int rc;

	/* A database file with pages of its own: the re-base ships them. */
	for (int i = 0; i < 4; i++)
		write_marked(e->w, 20);
	wt_exec(e->w, "PRAGMA wal_checkpoint(TRUNCATE)");
	commit_recorded(e, r, 3);
	struct ws_stream_config sc = {
		.tenant = TENANT, .db_path = e->db, .policy = WS_POLICY_BLOCK, .carry = carry,
		.batch_bytes_max = 256 << 10, .wal_checkpoint_bytes = UINT64_MAX,
		.seal = { .codec = codec, .key_file = key_file },
	};
	struct ws_stream *st = ws_stream_open(e->sink, &sc, &rc);
	if (!st)
		fail_msg("open: %s", ws_errmsg());
	wt_tail_ok(st, &o); /* the re-base: snapshot parts and the frames so far */
	for (int i = 0; i < TXNS; i++) {
		/* Small tails go inline (and carried); every fourth spans batches. */
		commit_recorded(e, r, i % 4 == 3 ? 200 : 2);
		if (i % 2 == 1 || i % 4 == 3)
			wt_tail_ok(st, &o);
	}
	wt_tail_ok(st, &o);
	ws_stream_close(st);
}

static char *key_file(struct wt_env *e, const char *name, const char *hex)
{
	char *kf = wt_path(e->dir, name), text[128];
	snprintf(text, sizeof(text), "# sealed\n%s\n", hex);
	assert_int_equal(wt_write_file(kf, text, strlen(text)), 0);
	return kf;
}

static void run_stream(enum ws_codec codec, bool keyed, enum ws_carry carry)
{
	struct wt_env e;
	struct record r = { .n = 0 };

	wt_env_init(&e, "seal", 0);
	char *kf = key_file(&e, "keys", KEY_HEX);
	ship(&e, codec, keyed ? kf : NULL, carry, &r);
	check_restores(&e, &r, 0);
	assert_int_equal(ws_verify(e.sink, TENANT, NULL, NULL), 0);
	scan_sink(&e);
	if (codec == WS_CODEC_ZSTD || keyed) {
		assert_true(scan.v2 > 0 && scan.v1 == 0);
	} else {
		assert_true(scan.v1 > 0 && scan.v2 == 0); /* nothing sealed: version 1 as before */
	}
	if (keyed) {
		struct ws_keyring kr = { 0 };
		assert_int_equal(scan.marked, 0);
		assert_int_equal(ws_keyring_load(&kr, kf), 0);
		without_key(&e, kr.keys[0].id);
		ws_keyring_free(&kr);
	} else {
		assert_true(scan.marked > 0);
	}
	free(kf);
	wt_env_free(&e);
}

static void test_stream_plain(void **state) { (void)state; run_stream(WS_CODEC_DEFAULT, false, WS_CARRY_ALWAYS); }
static void test_stream_zstd(void **state) { (void)state; run_stream(WS_CODEC_ZSTD, false, WS_CARRY_ALWAYS); }
static void test_stream_encrypted(void **state) { (void)state; run_stream(WS_CODEC_NONE, true, WS_CARRY_ALWAYS); }
static void test_stream_zstd_encrypted(void **state) { (void)state; run_stream(WS_CODEC_ZSTD, true, WS_CARRY_ALWAYS); }
static void test_stream_zstd_encrypted_stored(void **state)
{
	(void)state;
	run_stream(WS_CODEC_ZSTD, true, WS_CARRY_NEVER); /* every manifest stored, inline batches in them */
}

/* A bad key file fails the open, naming the file and line. */
static void test_stream_bad_key_file(void **state)
{
	(void)state;
	struct wt_env e;
	int rc;
	wt_env_init(&e, "seal_badkey", 0);
	char *kf = wt_path(e.dir, "keys");
	assert_int_equal(wt_write_file(kf, "0123\n", 5), 0);
	struct ws_stream_config sc = { .tenant = TENANT, .db_path = e.db, .seal = { .key_file = kf } };
	assert_null(ws_stream_open(e.sink, &sc, &rc));
	assert_int_equal(rc, WS_ECONFIG);
	assert_non_null(strstr(ws_errmsg(), kf));
	assert_non_null(strstr(ws_errmsg(), "line 1"));
	sc.seal.key_file = NULL;
	sc.seal.codec = (enum ws_codec)9;
	assert_null(ws_stream_open(e.sink, &sc, &rc));
	assert_int_equal(rc, WS_ECONFIG);
	free(kf);
	wt_env_free(&e);
}

/* ---- damaged objects --------------------------------------------------- */

static char batch_path[4096], snap_path[4096];

/* The first stored (not inline) batch object and snapshot part. */
static int find_objects(const char *path, const struct stat *sb, int type, struct FTW *f)
{
	size_t len = 0;
	uint8_t *b;
	(void)f;
	if (type != FTW_F || sb->st_size < 16)
		return 0;
	b = wt_read_file(path, &len);
	if (b && memcmp(b, "WSBATCH1", 8) == 0 && !batch_path[0])
		snprintf(batch_path, sizeof(batch_path), "%s", path);
	if (b && memcmp(b, "WSSNAPP1", 8) == 0 && !snap_path[0])
		snprintf(snap_path, sizeof(snap_path), "%s", path);
	free(b);
	return 0;
}

enum damage { FLIP_PAYLOAD, FLIP_TAG, FLIP_HEADER, TRUNCATE, GARBLE_ZSTD };

static void apply(enum damage d, uint8_t *b, size_t *len)
{
	const size_t hl = ws_get_le32(b + 12);
	switch (d) {
	case FLIP_PAYLOAD: b[hl + 10] ^= 0x01; break;
	case FLIP_TAG: b[*len - 1] ^= 0x80; break;
	case FLIP_HEADER: /* a field and the header hash made to fit */
		b[hl - 20] ^= 0x01;
		ws_put_le64(b + hl - 8, ws_xxh64(b, hl - 8));
		break;
	case TRUNCATE: *len -= 7; break;
	case GARBLE_ZSTD: memset(b + hl, 0xee, 16); break;
	}
}

/*
 * The object at path damaged so: a restore through reader fails with want
 * (its message saying says, never the key), nothing at the output; verify
 * reports the object. The object is put back after.
 */
static void damaged(struct wt_env *e, struct ws_sink *reader, const char *path, enum damage d, int want,
		    const char *says)
{
	size_t len = 0, n;
	uint8_t *orig = wt_read_file(path, &len), *b = malloc(len);
	char *out = wt_path(e->out_dir, "damaged.db");
	struct problems p = { 0 };
	int rc;

	assert_non_null(orig);
	memcpy(b, orig, len);
	n = len;
	apply(d, b, &n);
	assert_int_equal(wt_write_file(path, b, n), 0);
	/* Through the window (opened ahead of the replay), then one object
	 * at a time (opened by the replay): the same refusal. */
	for (unsigned at_once = WS_FETCH_PARALLELISM_DEFAULT; at_once >= 1; at_once /= 8) {
		assert_int_equal(ws_sink_set_fetch_parallelism(reader, at_once), 0);
		rc = ws_restore(reader, TENANT, NULL, out);
		if (rc != want || !strstr(ws_errmsg(), says))
			fail_msg("damage %d, %u at once: restore %s (%s), expected %s saying '%s'", (int)d, at_once,
				 ws_strerror(rc), ws_errmsg(), ws_strerror(want), says);
		assert_null(strstr(ws_errmsg(), KEY_HEX));
		assert_int_equal(access(out, F_OK), -1);
	}
	assert_int_equal(ws_sink_set_fetch_parallelism(reader, WS_FETCH_PARALLELISM_DEFAULT), 0);
	assert_int_equal(ws_verify(reader, TENANT, on_problem, &p), want);
	assert_true(p.n >= 1 && strstr(path, p.first_key) != NULL);
	assert_int_equal(wt_write_file(path, orig, len), 0);
	free(out);
	free(b);
	free(orig);
}

static void test_damaged_objects(void **state)
{
	(void)state;
	struct wt_env e;
	struct record r = { .n = 0 };
	int rc;

	wt_env_init(&e, "seal_damage", 0);
	char *kf = key_file(&e, "keys", KEY_HEX);
	char *other = key_file(&e, "other", "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff");
	ship(&e, WS_CODEC_ZSTD, kf, WS_CARRY_ALWAYS, &r);
	batch_path[0] = snap_path[0] = '\0';
	assert_int_equal(nftw(e.sink_dir, find_objects, 16, FTW_PHYS), 0);
	assert_true(batch_path[0] && snap_path[0]);
	damaged(&e, e.sink, batch_path, FLIP_PAYLOAD, WS_ECORRUPT, "authentication failed");
	damaged(&e, e.sink, batch_path, FLIP_TAG, WS_ECORRUPT, "authentication failed");
	damaged(&e, e.sink, snap_path, FLIP_PAYLOAD, WS_ECORRUPT, "authentication failed");
	damaged(&e, e.sink, batch_path, FLIP_HEADER, WS_ECORRUPT, "not the object its manifest names");
	damaged(&e, e.sink, snap_path, TRUNCATE, WS_ECORRUPT, "truncated");
	/* The wrong key: a reader holding another one. */
	struct ws_sink *wrong = ws_sink_open(e.sink_url, &rc);
	assert_non_null(wrong);
	assert_int_equal(ws_sink_add_key_file(wrong, other), 0);
	char *out = wt_path(e.out_dir, "wrong.db");
	assert_int_equal(ws_restore(wrong, TENANT, NULL, out), WS_ENOKEY);
	assert_int_equal(access(out, F_OK), -1);
	ws_sink_close(wrong);
	/* Everything put back: it restores again. */
	assert_true(wt_restore_hash(&e, TENANT, NULL, NULL) == r.hash[r.n - 1]);
	free(out);
	free(other);
	free(kf);
	wt_env_free(&e);
}

/* A garbled zstd stream (no encryption): zstd's error, nothing written. */
static void test_garbled_zstd(void **state)
{
	(void)state;
	struct wt_env e;
	struct record r = { .n = 0 };

	wt_env_init(&e, "seal_zstd", 0);
	ship(&e, WS_CODEC_ZSTD, NULL, WS_CARRY_NEVER, &r);
	batch_path[0] = snap_path[0] = '\0';
	assert_int_equal(nftw(e.sink_dir, find_objects, 16, FTW_PHYS), 0);
	assert_true(batch_path[0] && snap_path[0]);
	damaged(&e, e.sink, batch_path, GARBLE_ZSTD, WS_ECORRUPT, "zstd");
	damaged(&e, e.sink, snap_path, GARBLE_ZSTD, WS_ECORRUPT, "zstd");
	assert_true(wt_restore_hash(&e, TENANT, NULL, NULL) == r.hash[r.n - 1]);
	wt_env_free(&e);
}

/* ---- the sealing thread under a writer -------------------------------- */

struct seal_pause {
	struct wt_mutator *m;
	bool mutated;
};

/* A pause in the WAL reads of a flush: the source mutated once, from the
 * first read the shard's sealing thread makes (a delegated slot). */
static void mutate_in_sealer(const char *site, void *arg)
{
	struct seal_pause *sp = arg;
	char name[16] = "";
	pthread_getname_np(pthread_self(), name, sizeof(name));
	/* Reached by the shard's thread and the sealing thread: only the
	 * sealing thread sets it. */
	if (strcmp(name, "ws-seal") != 0 || __atomic_load_n(&sp->mutated, __ATOMIC_ACQUIRE))
		return;
	__atomic_store_n(&sp->mutated, true, __ATOMIC_RELEASE);
	wt_mutate(site, sp->m);
}

/*
 * An engine shard sealing (zstd and a key) its tenant's tails of several
 * slots, paused where its sealing thread reads a slot the shard handed it
 * (stream.before_wal_read) while a real writer commits, runs each kind of
 * WAL checkpoint or spills a transaction (each in turn, one engine): what
 * each flush acknowledged is a state the source committed, no older than
 * the one before it was called, and verifies; after a last flush and stop
 * the restore is the source's last state.
 */
static void test_engine_sealing_paused_under_writer(void **state)
{
	(void)state;
	struct wt_env e;
	struct ws_shard_config shc;
	int rc;

	wt_env_init(&e, "seal_pause", 0);
	char *kf = wt_path(e.dir, "keys");
	assert_int_equal(wt_write_file(kf, KEY_HEX "\n", 65), 0);
	assert_int_equal(ws_sink_add_key_file(e.sink, kf), 0);
	ws_shard_config_default(&shc);
	shc.ring_bytes = 2 << 20;
	shc.batch_bytes_max = 128 << 10;
	/* Tails only when flushed: the backlog is one tail of several slots,
	 * however slowly it is written. */
	shc.batch_age_ms_max = 600000;
	shc.seal = (struct ws_seal_config){ .codec = WS_CODEC_ZSTD, .key_file = kf };
	struct ws_engine_config ec = { .sink_url = e.sink_url, .shards = 1, .shard = &shc };
	struct ws_engine *eng = ws_engine_create(&ec, &rc);
	if (!eng)
		fail_msg("engine: %s", ws_errmsg());
	assert_int_equal(ws_engine_add_tenant(eng, &(struct ws_tenant_config){ .name = TENANT, .db_path = e.db,
										 .shard = -1 }), 0);
	write_marked(e.w, 3);
	assert_int_equal(ws_engine_flush(eng), 0);
	for (unsigned how = 0; how < WT_MUTATIONS; how++) {
		struct wt_mutator m;
		struct seal_pause sp = { .m = &m };
		int at_flush = 0, got;

		wt_mutator_init(&m, &e, how);
		/* Which thread reads which slot first is a race: four reads of a
		 * flush are armed (at most four sites at once; the shard's own go
		 * on at once), the 1st-4th, then the 5th-8th .. 13th-16th, and a
		 * round whose armed reads were all the shard's goes again. */
		for (int round = 0; round < 16 && !__atomic_load_n(&sp.mutated, __ATOMIC_ACQUIRE); round++) {
			/* A backlog of several slots: the shard and its sealing thread read it. */
			for (int i = 0; i < 4; i++)
				write_marked(e.w, 400);
			wt_mutator_record(&m);
			at_flush = (int)m.nstates - 1;
			for (unsigned nth = 1 + 4 * ((unsigned)round % 4), j = 0; j < 4; nth++, j++)
				assert_int_equal(ws_fault_add("stream.before_wal_read", nth, WS_FAULT_PAUSE, mutate_in_sealer,
							      &sp), 0);
			rc = ws_engine_flush(eng);
			ws_fault_disarm();
			if (rc)
				fail_msg("mutation %u: flush: %s (%s)", how, ws_strerror(rc), ws_errmsg());
		}
		if (!__atomic_load_n(&sp.mutated, __ATOMIC_ACQUIRE))
			fail_msg("mutation %u: no read of the sealing thread paused in 16 rounds: the test does not test", how);
		got = wt_mutator_find(&m, wt_restore_hash(&e, TENANT, NULL, NULL));
		if (got < at_flush)
			fail_msg("mutation %u: the flush acknowledged %s", how,
				 got < 0 ? "no state the source committed" : "a state older than the one before it");
		assert_int_equal(ws_verify(e.sink, TENANT, NULL, NULL), 0);
		wt_mutator_free(&m);
	}
	assert_int_equal(ws_engine_flush(eng), 0);
	assert_int_equal(ws_engine_stop(eng), 0);
	ws_engine_destroy(eng);
	assert_true(wt_restore_hash(&e, TENANT, NULL, NULL) == wt_content_hash(e.w, NULL));
	assert_int_equal(ws_verify(e.sink, TENANT, NULL, NULL), 0);
	free(kf);
	wt_env_free(&e);
}

/* ---- the restore's window ------------------------------------------------ */

/* What holding an object opened takes: its stored bytes, and its
 * plaintext apart (and the decrypted compressed bytes) when sealed. */
static uint64_t opened_need(const struct ws_buf *b, bool snap)
{
	struct ws_fmt_batch bh;
	struct ws_fmt_snap sh;
	const struct ws_fmt_seal *fs;
	uint64_t plain;
	size_t hl;
	if (snap) {
		assert_int_equal(ws_fmt_snap_decode_hdr(b->data, b->len, &sh, &hl), 0);
		fs = &sh.seal;
		plain = ws_fmt_snap_plain_len(&sh);
	} else {
		assert_int_equal(ws_fmt_batch_decode_hdr(b->data, b->len, &bh, &hl), 0);
		fs = &bh.seal;
		plain = ws_fmt_batch_plain_len(&bh);
	}
	assert_false(ws_fmt_seal_plain(fs));
	return b->len + plain + (fs->cipher && fs->codec ? fs->stored_len - WS_SEAL_TAG_LEN : 0);
}

/* Every object of chain c through a window of n under budget (0: one at a
 * time, no window): each opened ahead when there is a window, with its
 * plaintext's hash checked there; *need_max the most one object holds, *need_n
 * what the first n hold together. */
static void through_window(struct wt_env *e, const struct ws_chain *c, unsigned n, uint64_t budget,
			   struct ws_prefetch_stats *st, uint64_t *need_max, uint64_t *need_n)
{
	struct ws_prefetch *p = budget ? ws_prefetch_start_budget(e->sink->store, c, 0, c->count - 1, n, budget) : NULL;
	struct ws_buf b, plain;
	struct ws_obj_opened op;
	unsigned taken = 0;

	ws_buf_init(&b, (size_t)1 << 30);
	ws_buf_init(&plain, (size_t)1 << 31);
	assert_true(!budget || p);
	*need_max = *need_n = 0;
	for (size_t i = 0; i < c->count; i++) {
		const struct ws_fmt_manifest *m = &c->m[i];
		uint32_t snaps = m->kind == WS_MANIFEST_REBASE ? m->snap_count : 0;
		for (uint32_t k = 0; k < snaps + m->batch_count; k++) {
			const struct ws_fmt_objref *ref = k < snaps ? &m->snaps[k] : &m->batches[k - snaps];
			assert_int_equal(ws_prefetch_or_fetch(p, e->sink->store, c, i, ref, &b, &plain, &op), 0);
			assert_true(op.done == (p != NULL));
			assert_true(!op.done || op.rc == 0);
			uint64_t need = opened_need(&b, k < snaps);
			if (p)
				usleep(3000); /* a slow replay: the window fills up to what it may hold */
			*need_max = need > *need_max ? need : *need_max;
			if (taken++ < n)
				*need_n += need;
		}
	}
	ws_prefetch_end(p, st);
	ws_buf_free(&b);
	ws_buf_free(&plain);
}

/*
 * The restore's window opens sealed objects ahead of the replay and counts
 * what their opening takes against its budget: a chain of compressible
 * sealed objects (each stores a fraction of its plaintext) read through a
 * window of 16 under a budget of 3 objects opened: the bytes it counted
 * and the bytes its objects and plaintexts filled never pass the budget,
 * though its 16 first objects opened would, and its buffers' capacity
 * stays under three times the budget (twice what they hold, as they grow
 * by doubling, and what free slots keep).
 */
static void test_prefetch_bounded(void **state)
{
	(void)state;
	struct wt_env e;
	struct record r = { .n = 0 };
	struct ws_fmt_watermark wm;
	struct ws_chain c;
	struct ws_prefetch_stats st = { 0 };
	uint64_t need_max, need_n, budget;

	wt_env_init(&e, "seal_window", 0);
	char *kf = key_file(&e, "keys", KEY_HEX);
	ship(&e, WS_CODEC_ZSTD, kf, WS_CARRY_NEVER, &r);
	assert_int_equal(ws_wm_load(e.sink->store, TENANT, &wm, NULL), 0);
	assert_int_equal(ws_chain_load(e.sink->store, TENANT, &wm, &c), 0);
	through_window(&e, &c, 16, 0, NULL, &need_max, &need_n);
	budget = 3 * need_max;
	if (need_n <= budget)
		fail_msg("16 objects opened take %" PRIu64 " bytes, within a budget of %" PRIu64 ": the test does not "
			 "test", need_n, budget);
	through_window(&e, &c, 16, budget, &st, &need_max, &need_n);
	if (st.held_max > budget || st.used_max > budget || st.used_max < need_max / 2 || st.cap_max > 3 * budget)
		fail_msg("window of 16 under %" PRIu64 " bytes counted %" PRIu64 " and filled %" PRIu64 " at most (one "
			 "object opened: %" PRIu64 "), buffers of %" PRIu64 " bytes", budget, st.held_max, st.used_max,
			 need_max, st.cap_max);
	ws_chain_free(&c);
	free(kf);
	wt_env_free(&e);
}

/* ---- the version 2 fixture -------------------------------------------- */

/*
 * tests/data/format_v2: a sink of sealed objects (zstd, AES-256-GCM under
 * its `keys`; a re-base with snapshot parts, inline batches carried and
 * merged in the watermark, stored batches), and in expected.txt the
 * content hash (wt_content_hash) the source had at each commit frame and
 * at the head. Every later reader must restore it exactly; this case
 * checks it, and with WS_MAKE_FIXTURE_V2=DIR writes a new one to DIR
 * instead (never over the committed one).
 */
#define FIXTURE_V2 WS_SOURCE_DIR "/tests/data/format_v2"

static void make_fixture_v2(const char *dir)
{
	struct wt_env e;
	struct record r = { .n = 0 };
	wt_env_init(&e, "seal_fixture", 0);
	char *kf = key_file(&e, "keys", KEY_HEX);
	ship(&e, WS_CODEC_ZSTD, kf, WS_CARRY_ALWAYS, &r);
	assert_int_equal(wt_sh("mkdir -p '%s' && cp -r '%s' '%s/sink' && cp '%s' '%s/keys'", dir, e.sink_dir, dir, kf,
			       dir), 0);
	char *exp = wt_path(dir, "expected.txt");
	FILE *f = fopen(exp, "w");
	assert_non_null(f);
	fprintf(f, "# made by test_core_seal (WS_MAKE_FIXTURE_V2); tenant %s\n# frame N HASH | head HASH "
		"(wt_content_hash of the source)\n", TENANT);
	for (unsigned i = 0; i < r.n; i++)
		fprintf(f, "frame %" PRIu64 " %016" PRIx64 "\n", r.frame[i], r.hash[i]);
	fprintf(f, "head %016" PRIx64 "\n", r.hash[r.n - 1]);
	assert_int_equal(fclose(f), 0);
	free(exp);
	free(kf);
	wt_env_free(&e);
}

static void test_fixture_v2(void **state)
{
	(void)state;
	struct wt_env e;
	char line[256], *exp = wt_path(FIXTURE_V2, "expected.txt");
	unsigned checked = 0;

	if (getenv("WS_MAKE_FIXTURE_V2")) {
		make_fixture_v2(getenv("WS_MAKE_FIXTURE_V2"));
		return;
	}
	wt_env_init(&e, "seal_fixture_read", 0);
	/* A copy: a restore never writes the sink, but the fixture stays as committed. */
	assert_int_equal(wt_sh("cp -r '%s/sink/.' '%s/'", FIXTURE_V2, e.sink_dir), 0);
	assert_int_equal(ws_sink_add_key_file(e.sink, FIXTURE_V2 "/keys"), 0);
	FILE *f = fopen(exp, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		struct ws_restore_opts ro = { .frame = 0 };
		uint64_t frame = 0, hash = 0;
		if (sscanf(line, "frame %" SCNu64 " %" SCNx64, &frame, &hash) == 2)
			ro.frame = frame;
		else if (sscanf(line, "head %" SCNx64, &hash) != 1)
			continue;
		assert_true(wt_restore_hash(&e, TENANT, &ro, NULL) == hash);
		checked++;
	}
	fclose(f);
	assert_true(checked > 10);
	assert_int_equal(ws_verify(e.sink, TENANT, NULL, NULL), 0);
	free(exp);
	wt_env_free(&e);
}

/* ---- the engine ----------------------------------------------------------- */

/* A shard that seals with zstd and a key, one tenant of it that overrides
 * it with nothing sealed: both restore exactly. */
static void test_engine_sealed(void **state)
{
	(void)state;
	struct wt_env e;
	struct ws_shard_config shc;
	int rc;

	wt_env_init(&e, "seal_engine", 0);
	char *kf = wt_path(e.dir, "keys"), *db2 = wt_path(e.dir, "plain.db");
	assert_int_equal(wt_write_file(kf, KEY_HEX "\n", 65), 0);
	sqlite3 *w2 = wt_writer_open(db2, 0);
	ws_shard_config_default(&shc);
	shc.ring_bytes = 4 << 20;
	shc.batch_bytes_max = 256 << 10;
	shc.seal = (struct ws_seal_config){ .codec = WS_CODEC_ZSTD, .level = 5, .key_file = kf };
	struct ws_engine_config ec = { .sink_url = e.sink_url, .shards = 1, .shard = &shc };
	struct ws_engine *eng = ws_engine_create(&ec, &rc);
	if (!eng)
		fail_msg("engine: %s", ws_errmsg());
	rc = ws_engine_add_tenant(eng, &(struct ws_tenant_config){ .name = TENANT, .db_path = e.db, .shard = -1 });
	if (rc)
		fail_msg("add: %s", ws_errmsg());
	rc = ws_engine_add_tenant(eng, &(struct ws_tenant_config){ .name = "open", .db_path = db2, .shard = -1,
								   .has_seal = true });
	if (rc)
		fail_msg("add: %s", ws_errmsg());
	for (int i = 0; i < 6; i++) {
		write_marked(e.w, i == 3 ? 150 : 3);
		write_marked(w2, 2);
		assert_int_equal(ws_engine_flush(eng), 0);
	}
	uint64_t h1 = wt_content_hash(e.w, NULL), h2 = wt_content_hash(w2, NULL);
	assert_int_equal(ws_engine_stop(eng), 0);
	ws_engine_destroy(eng);
	/* The engine's keys are not the reader's sink's: add them. */
	assert_int_equal(ws_sink_add_key_file(e.sink, kf), 0);
	assert_true(wt_restore_hash(&e, TENANT, NULL, NULL) == h1);
	assert_true(wt_restore_hash(&e, "open", NULL, NULL) == h2);
	scan_sink(&e);
	assert_true(scan.v2 > 0 && scan.v1 > 0); /* the sealed tenant's and the other's */
	sqlite3_close(w2);
	free(db2);
	free(kf);
	wt_env_free(&e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stream_plain),
		cmocka_unit_test(test_stream_zstd),
		cmocka_unit_test(test_stream_encrypted),
		cmocka_unit_test(test_stream_zstd_encrypted),
		cmocka_unit_test(test_stream_zstd_encrypted_stored),
		cmocka_unit_test(test_stream_bad_key_file),
		cmocka_unit_test(test_damaged_objects),
		cmocka_unit_test(test_garbled_zstd),
		cmocka_unit_test(test_prefetch_bounded),
		cmocka_unit_test(test_engine_sealed),
		cmocka_unit_test(test_engine_sealing_paused_under_writer),
		cmocka_unit_test(test_fixture_v2),
	};
	return WT_RUN_GROUP(tests, NULL, NULL);
}
