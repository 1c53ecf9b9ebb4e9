/*
 * A re-base names the unchanged parts of the image before it
 * (core/snap_reuse.c). A real SQLite writer fills a database of a few
 * hundred pages, walship ships it, the stream closes and the history is
 * re-based the ways an application makes it happen while walship is down
 * (its last connection closing, a WAL restart, the file replaced), after a
 * few pages changed. Each re-base must upload only the parts whose pages
 * changed (counted in the sink: a part keyed with an older sequence than
 * its manifest's is one named again), and every acknowledged state must
 * restore exactly, by --time and by --frame GENERATION:N, in every chain;
 * verify passes and verify --orphans lists nothing. The re-base is paused
 * at each new site while the writer commits and checkpoints (every mode)
 * under it; retention runs between a re-base that names parts again and
 * its restore (and inside its call); forged references are refused.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "chain.h"
#include "core_internal.h"
#include "coreutil.h"
#include "sink.h"
#include "walship.h"
#include "ws_clock.h"
#include "ws_fault.h"
#include "ws_format.h"
#include "ws_hash.h"
#include "ws_store.h"

#define TENANT "reuse"
#define POINTS_MAX 64
/* Ring slots of 128 KiB (batch_bytes_max): a database past one slot is
 * cut into parts of 16 pages (64 KiB), as a larger one at the default. */
#define SLOT_BYTES (128u << 10)

struct point {
	uint64_t hash;
	int64_t acked_ms;
	char gen[32];
	uint64_t frame;
};

struct rr {
	struct wt_env e;
	struct ws_stream *st;
	struct ws_seal_config seal; /* the stream's (none by default) */
	char *key_file;             /* seal.key_file's, in e.dir */
	struct point p[POINTS_MAX];
	unsigned n;
};

static void open_stream(struct rr *h)
{
	struct ws_stream_config c;
	int err = -1;
	memset(&c, 0, sizeof(c));
	c.tenant = TENANT;
	c.db_path = h->e.db;
	c.epoch = 1;
	c.pointer_generation = 1;
	c.batch_bytes_max = SLOT_BYTES;
	c.seal = h->seal;
	c.wal_checkpoint_bytes = UINT64_MAX; /* frame numbers stay the WAL's size */
	h->st = ws_stream_open(h->e.sink, &c, &err);
	if (!h->st)
		fail_msg("ws_stream_open: %s (%s)", ws_strerror(err), ws_errmsg());
}

static void close_stream(struct rr *h)
{
	ws_stream_close(h->st);
	h->st = NULL;
}

/* The source's state, acknowledged now, with its WAL position. */
static void record(struct rr *h)
{
	struct point *p;
	assert_true(h->n < POINTS_MAX);
	p = &h->p[h->n++];
	p->acked_ms = ws_wall_ms();
	p->hash = wt_content_hash(h->e.w, NULL);
	/* No WAL (a re-base of the file alone): checked by time only. */
	if (!wt_wal_pos(&h->e, p->gen, &p->frame))
		p->gen[0] = '\0';
	wt_sleep_ms(3);
}

/* want WS_OUTCOME_EMPTY: streamed, or restarted by the WAL's first
 * commit after a re-base of the file alone (a new generation). */
static void ship(struct rr *h, int rows, enum ws_outcome_kind want)
{
	struct ws_outcome o;
	wt_write_txn(h->e.w, rows, 300);
	wt_tail_ok(h->st, &o);
	if (want == WS_OUTCOME_EMPTY ? o.kind != WS_OUTCOME_STREAMED && o.kind != WS_OUTCOME_RESTARTED : o.kind != want)
		fail_msg("tail_frames after point %u: %s, expected %s", h->n, ws_outcome_name(o.kind),
			 ws_outcome_name(want));
	record(h);
}

/* A few pages changed, scattered: rows of the first hundred updated. */
static void touch_pages(struct rr *h)
{
	wt_exec(h->e.w, "UPDATE t SET v = randomblob(3000) WHERE k IN (3, 41, 97)");
}

static void rebase_down(struct rr *h, enum wt_rebase_how how)
{
	close_stream(h);
	touch_pages(h);
	wt_rebase_while_down(&h->e, how);
	open_stream(h);
}

/* 300 rows of 3000 bytes: about 300 pages, ~19 parts of 16 pages. */
static void rr_init_sealed(struct rr *h, const char *tag, enum ws_codec codec, const char *key_hex);

static void rr_init_base(struct rr *h, const char *tag)
{
	rr_init_sealed(h, tag, WS_CODEC_NONE, NULL);
}

/* key_hex: the stream encrypts under that key (a key file in e.dir). */
static void rr_init_sealed(struct rr *h, const char *tag, enum ws_codec codec, const char *key_hex)
{
	memset(h, 0, sizeof(*h));
	h->seal.codec = codec;
	wt_env_init(&h->e, tag, 0);
	if (key_hex) {
		char text[80];
		h->key_file = wt_path(h->e.dir, "keys");
		snprintf(text, sizeof(text), "%s\n", key_hex);
		assert_int_equal(wt_write_file(h->key_file, text, strlen(text)), 0);
		h->seal.key_file = h->key_file;
	}
	wt_write_txn(h->e.w, 300, 3000);
	/* In the file, not the WAL: the first image holds the pages (an image
	 * is the file as read, which its frames overlay). */
	wt_exec(h->e.w, "PRAGMA wal_checkpoint(TRUNCATE)");
	open_stream(h);
	{
		struct ws_outcome o;
		wt_tail_ok(h->st, &o);
	}
}

/* Then the first commit, which makes a WAL: a generation after none. */
static void rr_init(struct rr *h, const char *tag)
{
	struct ws_outcome o;
	rr_init_base(h, tag);
	wt_write_txn(h->e.w, 1, 300);
	wt_tail_ok(h->st, &o);
	record(h);
}

static void rr_free(struct rr *h)
{
	if (h->st)
		close_stream(h);
	wt_env_free(&h->e);
	free(h->key_file);
}

/* The live chain's base: its parts, and how many of them an earlier
 * manifest's sequence keys (named again, not uploaded). */
static void live_base_parts(struct rr *h, uint32_t *parts, uint32_t *reused)
{
	struct ws_fmt_watermark wm;
	struct ws_chain c;
	assert_int_equal(ws_wm_load(h->e.sink->store, TENANT, &wm, NULL), 0);
	assert_int_equal(ws_chain_load(h->e.sink->store, TENANT, &wm, &c), 0);
	assert_int_equal(c.m[0].kind, WS_MANIFEST_REBASE);
	*parts = c.m[0].snap_count;
	*reused = 0;
	for (uint32_t k = 0; k < c.m[0].snap_count; k++) {
		uint64_t seq = ws_key_object_seq(c.m[0].snaps[k].key);
		assert_true(seq != 0 && seq <= c.m[0].wm_seq);
		if (seq < c.m[0].wm_seq)
			(*reused)++;
	}
	ws_chain_free(&c);
}

static int try_restore(struct rr *h, const struct ws_restore_opts *o, uint64_t *hash)
{
	return wt_try_restore(&h->e, TENANT, o, hash);
}

/* Every recorded point from `from`, by time and by GENERATION:frame. */
static void check_points(struct rr *h, unsigned from)
{
	for (unsigned i = from; i < h->n; i++) {
		char label[32];
		snprintf(label, sizeof(label), "point %u", i);
		wt_point_check(&h->e, TENANT, label, h->p[i].hash, h->p[i].acked_ms, h->p[i].gen, h->p[i].frame);
	}
}

static void orphan_cb(const char *key, const char *kind, void *arg)
{
	(void)arg;
	fail_msg("verify --orphans: %s (%s)", key, kind);
}

static void sink_sound(struct rr *h)
{
	uint64_t n = 0;
	int rc = ws_verify(h->e.sink, TENANT, NULL, NULL);
	if (rc)
		fail_msg("verify: %s (%s)", ws_strerror(rc), ws_errmsg());
	rc = ws_verify_orphans(h->e.sink, TENANT, orphan_cb, NULL, &n);
	if (rc)
		fail_msg("verify --orphans: %s (%s)", ws_strerror(rc), ws_errmsg());
	assert_int_equal(n, 0);
}

/* Each way of re-basing names the unchanged parts again; every state of
 * every chain restores; a re-base of an unchanged file uploads no part. */
static void test_rebase_names_unchanged_parts(void **state)
{
	static const enum wt_rebase_how hows[] = { WT_CLOSE_LAST_CONNECTION, WT_WAL_RESTART, WT_FILE_REPLACED };
	struct rr h;
	uint32_t parts, reused;
	(void)state;

	rr_init(&h, "reuse_ways");
	ship(&h, 2, WS_OUTCOME_STREAMED);
	for (size_t i = 0; i < sizeof(hows) / sizeof(hows[0]); i++) {
		rebase_down(&h, hows[i]);
		ship(&h, 2, WS_OUTCOME_RESTARTED);
		live_base_parts(&h, &parts, &reused);
		assert_true(parts >= 18); /* 16-page parts */
		/* VACUUM INTO lays the file out anew: what it keeps is luck. */
		if (hows[i] != WT_FILE_REPLACED && reused + 6 < parts)
			fail_msg("re-base %zu: %u of %u parts named again (3 rows and the appended ones changed)", i,
				 reused, parts);
		ship(&h, 3, WS_OUTCOME_STREAMED);
	}
	/* A re-base of the file alone, then another with nothing changed
	 * since (no WAL: a stream that opens again cannot prove the file
	 * unchanged): every part named again. */
	close_stream(&h);
	sqlite3_close(h.e.w);
	h.e.w = wt_writer_open(h.e.db, 0);
	for (int i = 0; i < 2; i++) {
		struct ws_outcome o;
		open_stream(&h);
		wt_tail_ok(h.st, &o);
		assert_int_equal(o.kind, WS_OUTCOME_RESTARTED);
		record(&h);
		if (i == 0)
			close_stream(&h);
	}
	live_base_parts(&h, &parts, &reused);
	assert_int_equal(reused, parts);
	check_points(&h, 0);
	assert_true(wt_restore_hash(&h.e, TENANT, NULL, NULL) == wt_content_hash(h.e.w, NULL));
	sink_sound(&h);
	rr_free(&h);
}

/*
 * Sealed parts: compressed without a cipher, the same pages make the same
 * object (zstd at one level), so a re-base names them again; encrypted,
 * each sealing draws a fresh nonce and nothing is named again. Both
 * restore every state.
 */
static void test_sealed_parts(void **state)
{
	static const char key_hex[] = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
	(void)state;
	for (int enc = 0; enc < 2; enc++) {
		struct rr h;
		uint32_t parts, reused;
		rr_init_sealed(&h, enc ? "reuse_sealed_enc" : "reuse_sealed_zstd", WS_CODEC_ZSTD, enc ? key_hex : NULL);
		rebase_down(&h, WT_CLOSE_LAST_CONNECTION);
		ship(&h, 2, WS_OUTCOME_RESTARTED);
		live_base_parts(&h, &parts, &reused);
		if (enc ? reused != 0 : reused + 6 < parts)
			fail_msg("%s: %u of %u parts named again", enc ? "encrypted" : "zstd", reused, parts);
		check_points(&h, 0);
		assert_int_equal(ws_verify(h.e.sink, TENANT, NULL, NULL), 0);
		rr_free(&h);
	}
}

#ifdef WS_FAULTS
/*
 * Each new site paused while the writer commits and checkpoints under it
 * (every wt_mutate mode): the re-base's state is one the source committed
 * before its scan, the next tail ships the rest, every acknowledged point
 * still restores exactly.
 */
static void test_reuse_sites_paused(void **state)
{
	static const char *const sites[] = { "stream.reuse_loaded", "stream.before_snapshot_put",
					     "stream.after_snapshot", "stream.before_reuse_check" };
	(void)state;
	for (size_t s = 0; s < sizeof(sites) / sizeof(sites[0]); s++)
		for (unsigned how = 0; how < WT_MUTATIONS; how++) {
			struct rr h;
			struct wt_mutator m;
			struct ws_outcome o;
			struct ws_restore_opts ro = { 0 };
			uint64_t got = 0;
			uint32_t parts, reused;
			char tag[64];
			snprintf(tag, sizeof(tag), "reuse_pause_%zu_%u", s, how);
			rr_init(&h, tag);
			rebase_down(&h, WT_CLOSE_LAST_CONNECTION);
			wt_mutator_init(&m, &h.e, how);
			wt_mutator_record(&m);
			assert_int_equal(ws_fault_arm_pause(sites[s], 1, wt_mutate, &m), 0);
			wt_tail_ok(h.st, &o);
			ws_fault_disarm();
			if (m.fired != 1)
				fail_msg("%s (mode %u): the pause fired %d times", sites[s], how, m.fired);
			assert_int_equal(o.kind, WS_OUTCOME_RESTARTED);
			live_base_parts(&h, &parts, &reused);
			if (reused == 0)
				fail_msg("%s (mode %u): nothing named again", sites[s], how);
			ro.time_ms = ws_wall_ms();
			assert_int_equal(try_restore(&h, &ro, &got), 0);
			if (wt_mutator_find(&m, got) < 0)
				fail_msg("%s (mode %u): the re-base restored a state the source never committed", sites[s],
					 how);
			/* The commits of the pause ship next (the WAL may have
			 * restarted meanwhile: then as another re-base). */
			wt_tail_ok(h.st, &o);
			assert_true(o.kind == WS_OUTCOME_STREAMED || o.kind == WS_OUTCOME_RESTARTED ||
				    o.kind == WS_OUTCOME_EMPTY);
			if (wt_restore_hash(&h.e, TENANT, NULL, NULL) != wt_content_hash(h.e.w, NULL))
				fail_msg("%s (mode %u): the latest state does not restore", sites[s], how);
			record(&h);
			wt_mutator_free(&m);
			check_points(&h, 0);
			sink_sound(&h);
			rr_free(&h);
		}
}

/* Take a checkpoint and run retention keeping only it. */
static void ckpt_and_retention(struct rr *h)
{
	struct ws_checkpoint_info ci;
	struct ws_retention_report rep;
	int rc = ws_checkpoint_take(h->e.sink, NULL, &ci);
	if (rc)
		fail_msg("checkpoint: %s (%s)", ws_strerror(rc), ws_errmsg());
	rc = ws_retention_run(h->e.sink, false, NULL, NULL, &rep);
	if (rc)
		fail_msg("retention: %s (%s)", ws_strerror(rc), ws_errmsg());
	assert_true(rep.ran);
}

static void retention_in_pause(const char *site, void *arg)
{
	(void)site;
	ckpt_and_retention(arg);
}

struct ret_thread {
	struct ws_sink *sink;
	int rc;
	char msg[512];
};

static void *retention_thread(void *arg)
{
	struct ret_thread *r = arg;
	struct ws_retention_report rep;
	r->rc = ws_retention_run(r->sink, false, NULL, NULL, &rep);
	snprintf(r->msg, sizeof(r->msg), "%s", r->rc ? ws_errmsg() : "");
	return NULL;
}

/*
 * A retention run that read the watermark before a re-base wrote its own,
 * then deletes the earlier image the re-base names parts of: paused before
 * its first delete (that image's manifest: the oldest of the chain behind
 * the cut), the re-base goes through whole (the manifest is still there
 * when it looks), and the run, let go, reads the watermark again between
 * that manifest and its parts: the parts the new base names stay.
 */
static void test_retention_reads_again_before_parts(void **state)
{
	struct rr h;
	struct wt_gate gate = WT_GATE_INIT;
	struct ret_thread r;
	struct ws_checkpoint_info ci;
	struct ws_outcome o;
	pthread_t th;
	uint32_t parts, reused;
	int rc;
	(void)state;

	rr_init(&h, "reuse_ret_race");
	ship(&h, 2, WS_OUTCOME_STREAMED);
	rc = ws_checkpoint_take(h.e.sink, NULL, &ci);
	if (rc)
		fail_msg("checkpoint: %s (%s)", ws_strerror(rc), ws_errmsg());
	rebase_down(&h, WT_CLOSE_LAST_CONNECTION);
	memset(&r, 0, sizeof(r));
	r.sink = h.e.sink;
	assert_int_equal(ws_fault_add("retention.before_delete", 1, WS_FAULT_PAUSE, wt_gate_wait, &gate), 0);
	assert_int_equal(pthread_create(&th, NULL, retention_thread, &r), 0);
	wt_gate_until_paused(&gate);
	wt_write_txn(h.e.w, 2, 300);
	wt_tail_ok(h.st, &o);
	assert_int_equal(o.kind, WS_OUTCOME_RESTARTED);
	record(&h);
	live_base_parts(&h, &parts, &reused);
	assert_true(reused > 0);
	wt_gate_open(&gate);
	assert_int_equal(pthread_join(th, NULL), 0);
	ws_fault_disarm();
	if (r.rc)
		fail_msg("retention: %s (%s)", ws_strerror(r.rc), r.msg);
	if (wt_restore_hash(&h.e, TENANT, NULL, NULL) != wt_content_hash(h.e.w, NULL))
		fail_msg("the re-base's state does not restore after retention");
	check_points(&h, h.n - 1);
	sink_sound(&h);
	rr_free(&h);
}

/*
 * Retention between a re-base that names parts of the image before it and
 * the restore: the checkpoint's cut is past that image, so its chain goes,
 * and the parts the live base names again must stay. Then retention inside
 * the re-base's own call: after the earlier image was read (the run
 * deletes it: the call fails naming it, acknowledging nothing, and the
 * next call re-bases uploading every part), and after its watermark (the
 * new base is the cut: kept).
 */
static void test_retention_between_reuse_and_restore(void **state)
{
	struct rr h;
	struct ws_outcome o;
	uint32_t parts, reused;
	int rc;
	(void)state;

	rr_init(&h, "reuse_retention");
	ship(&h, 2, WS_OUTCOME_STREAMED);
	ship(&h, 2, WS_OUTCOME_STREAMED);
	/* A checkpoint whose cut is past the first image's base. */
	{
		struct ws_checkpoint_info ci;
		rc = ws_checkpoint_take(h.e.sink, NULL, &ci);
		if (rc)
			fail_msg("checkpoint: %s (%s)", ws_strerror(rc), ws_errmsg());
	}
	rebase_down(&h, WT_CLOSE_LAST_CONNECTION);
	ship(&h, 2, WS_OUTCOME_RESTARTED);
	live_base_parts(&h, &parts, &reused);
	assert_true(reused > 0);
	{
		struct ws_retention_report rep;
		rc = ws_retention_run(h.e.sink, false, NULL, NULL, &rep);
		if (rc)
			fail_msg("retention: %s (%s)", ws_strerror(rc), ws_errmsg());
		assert_true(rep.deleted > 0); /* the first chain, behind the cut */
	}
	assert_true(wt_restore_hash(&h.e, TENANT, NULL, NULL) == wt_content_hash(h.e.w, NULL));
	check_points(&h, h.n - 1);
	assert_int_equal(ws_verify(h.e.sink, TENANT, NULL, NULL), 0);

	/* Retention inside the call, after the earlier image was read: the
	 * checkpoint's cut is the watermark's head, past that image. */
	ship(&h, 2, WS_OUTCOME_STREAMED);
	rebase_down(&h, WT_WAL_RESTART);
	assert_int_equal(ws_fault_arm_pause("stream.reuse_loaded", 1, retention_in_pause, &h), 0);
	wt_tail_ok(h.st, &o);
	ws_fault_disarm();
	/* The call found the image gone after its watermark and re-based
	 * again, uploading every part: what it acknowledges names no part
	 * retention may have removed. */
	assert_int_equal(o.kind, WS_OUTCOME_RESTARTED);
	record(&h);
	live_base_parts(&h, &parts, &reused);
	assert_int_equal(reused, 0);
	assert_true(wt_restore_hash(&h.e, TENANT, NULL, NULL) == wt_content_hash(h.e.w, NULL));
	ship(&h, 2, WS_OUTCOME_EMPTY);

	/* After its watermark: the checkpoint cuts at the new base itself. */
	rebase_down(&h, WT_CLOSE_LAST_CONNECTION);
	assert_int_equal(ws_fault_arm_pause("stream.before_reuse_check", 1, retention_in_pause, &h), 0);
	wt_tail_ok(h.st, &o);
	ws_fault_disarm();
	/* The earlier image's manifest went with its chain: the call cannot
	 * prove its parts kept (they are: the cut names them) and re-bases
	 * again, uploading every part. */
	assert_int_equal(o.kind, WS_OUTCOME_RESTARTED);
	live_base_parts(&h, &parts, &reused);
	assert_int_equal(reused, 0);
	assert_true(wt_restore_hash(&h.e, TENANT, NULL, NULL) == wt_content_hash(h.e.w, NULL));
	ship(&h, 2, WS_OUTCOME_EMPTY);
	ckpt_and_retention(&h);
	assert_true(wt_restore_hash(&h.e, TENANT, NULL, NULL) == wt_content_hash(h.e.w, NULL));
	assert_int_equal(ws_verify(h.e.sink, TENANT, NULL, NULL), 0);
	rr_free(&h);
}
#endif

/*
 * A chain after the checkpoint's cut that is no longer live names parts of
 * the image behind the cut: retention keeps them (it follows the links
 * re-bases record back to the cut), so every state of that chain still
 * restores. The image behind the cut is the first chain's base; the
 * second chain names its parts again; the third uploads every part
 * (compressed: no earlier part of the uncompressed image matches).
 */
static void test_retention_keeps_chains_after_the_cut(void **state)
{
	struct rr h;
	struct ws_retention_report rep;
	struct ws_checkpoint_info ci, ci2;
	uint32_t parts, reused;
	unsigned second;
	int rc;
	(void)state;

	rr_init(&h, "reuse_links");
	ship(&h, 2, WS_OUTCOME_STREAMED);
	rc = ws_checkpoint_take(h.e.sink, NULL, &ci);
	if (rc)
		fail_msg("checkpoint: %s (%s)", ws_strerror(rc), ws_errmsg());
	ship(&h, 2, WS_OUTCOME_STREAMED);
	rebase_down(&h, WT_CLOSE_LAST_CONNECTION);
	second = h.n;
	ship(&h, 2, WS_OUTCOME_RESTARTED);
	live_base_parts(&h, &parts, &reused);
	assert_true(reused > 0);
	/* A checkpoint whose cut is the re-base: its artifact is built from
	 * the parts it names again, and restores by its ID. */
	rc = ws_checkpoint_take(h.e.sink, NULL, &ci2);
	if (rc)
		fail_msg("checkpoint: %s (%s)", ws_strerror(rc), ws_errmsg());
	{
		char *out = wt_out_path(&h.e);
		rc = ws_restore_checkpoint(h.e.sink, TENANT, ci2.id, out, false);
		if (rc)
			fail_msg("restore --checkpoint: %s (%s)", ws_strerror(rc), ws_errmsg());
		if (wt_file_hash(out, NULL) != h.p[h.n - 1].hash)
			fail_msg("restore --checkpoint %" PRIu64 " gave another state than the re-base's", ci2.id);
		unlink(out);
		free(out);
	}
	ship(&h, 2, WS_OUTCOME_STREAMED);
	h.seal.codec = WS_CODEC_ZSTD;
	rebase_down(&h, WT_CLOSE_LAST_CONNECTION);
	ship(&h, 2, WS_OUTCOME_RESTARTED);
	live_base_parts(&h, &parts, &reused);
	assert_int_equal(reused, 0);
	/* Keeping both checkpoints: the cut retention works back from is the
	 * first one's, in the first chain. */
	rc = ws_retention_run_keep(h.e.sink, false, 2, NULL, NULL, &rep);
	if (rc)
		fail_msg("retention: %s (%s)", ws_strerror(rc), ws_errmsg());
	assert_true(rep.deleted > 0); /* the first chain behind the cut */
	check_points(&h, second);
	sink_sound(&h);
	rr_free(&h);
}

/*
 * Forged references in a re-base's manifest: a part of another tenant, a
 * key outside any tenant's prefix, a header hash that is not the part's.
 * Restore and verify refuse each, naming the key; verify never passes what
 * restore refuses.
 */
static void forge(struct rr *h, const char *what, void (*edit)(struct ws_fmt_objref *ref, const char *other))
{
	struct ws_fmt_watermark wm;
	struct ws_chain c;
	struct ws_fmt_manifest m;
	struct ws_buf b, enc;
	char mkey[WS_KEY_MAX], other[WS_KEY_MAX], *out;
	uint8_t sha[WS_SHA256_LEN];
	int rc;

	assert_int_equal(ws_wm_load(h->e.sink->store, TENANT, &wm, NULL), 0);
	assert_int_equal(ws_chain_load(h->e.sink->store, TENANT, &wm, &c), 0);
	assert_int_equal(c.count, 1);
	m = c.m[0];
	assert_true(m.snap_count > 2);
	snprintf(other, sizeof(other), "other/%s", strchr(m.snaps[1].key, '/') + 1);
	edit(&m.snaps[1], other);
	/* The forged manifest, under its own content key, and the watermark
	 * naming it (a writer holding the sink's credentials could). */
	ws_buf_init(&enc, 64u << 20);
	assert_int_equal(ws_fmt_manifest_encode(&m, &enc), 0);
	ws_sha256(enc.data, enc.len, sha);
	snprintf(mkey, sizeof(mkey), "%.*s-%02x%02x%02x%02x%02x%02x%02x%02x",
		 (int)(strrchr(c.keys[0], '-') - c.keys[0]), c.keys[0], sha[0], sha[1], sha[2], sha[3], sha[4], sha[5],
		 sha[6], sha[7]);
	wt_sink_put(&h->e, mkey, enc.data, enc.len);
	snprintf(wm.manifest_key, sizeof(wm.manifest_key), "%s", mkey);
	memcpy(wm.manifest_sha, sha, WS_SHA256_LEN);
	wm.manifest_length = enc.len;
	ws_buf_init(&b, WS_WM_BYTES_MAX);
	assert_int_equal(ws_fmt_watermark_encode(&wm, &b), 0);
	{
		char wkey[WS_KEY_MAX];
		snprintf(wkey, sizeof(wkey), "%s/wm", TENANT);
		wt_sink_put(&h->e, wkey, b.data, b.len);
	}
	out = wt_out_path(&h->e);
	rc = ws_restore(h->e.sink, TENANT, NULL, out);
	if (rc == 0)
		fail_msg("%s: restore took the forged reference", what);
	if (!strstr(ws_errmsg(), m.snaps[1].key) && !strstr(ws_errmsg(), other))
		fail_msg("%s: the refusal does not name the part: %s", what, ws_errmsg());
	assert_int_equal(access(out, F_OK), -1);
	free(out);
	if (ws_verify(h->e.sink, TENANT, NULL, NULL) == 0)
		fail_msg("%s: verify passed what restore refuses", what);
	ws_buf_free(&b);
	ws_buf_free(&enc);
	ws_chain_free(&c);
}

static void edit_other_tenant(struct ws_fmt_objref *ref, const char *other)
{
	snprintf(ref->key, sizeof(ref->key), "%s", other);
}

static void edit_outside(struct ws_fmt_objref *ref, const char *other)
{
	(void)other;
	snprintf(ref->key, sizeof(ref->key), "nowhere");
}

static void edit_hash(struct ws_fmt_objref *ref, const char *other)
{
	(void)other;
	ref->xxh ^= 1;
}

static void test_forged_references(void **state)
{
	static const struct {
		const char *what;
		void (*edit)(struct ws_fmt_objref *, const char *);
	} cases[] = { { "a part of another tenant", edit_other_tenant },
		      { "a key outside every tenant's prefix", edit_outside },
		      { "a header hash that is not the part's", edit_hash } };
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct rr h;
		char tag[32];
		snprintf(tag, sizeof(tag), "reuse_forged_%zu", i);
		rr_init_base(&h, tag);
		/* The part of another tenant exists, byte for byte. */
		if (cases[i].edit == edit_other_tenant) {
			struct ws_fmt_watermark wm;
			struct ws_chain c;
			struct ws_buf b;
			char other[WS_KEY_MAX];
			assert_int_equal(ws_wm_load(h.e.sink->store, TENANT, &wm, NULL), 0);
			assert_int_equal(ws_chain_load(h.e.sink->store, TENANT, &wm, &c), 0);
			ws_buf_init(&b, 64u << 20);
			assert_int_equal(ws_store_get(h.e.sink->store, c.m[0].snaps[1].key, 0, UINT64_MAX, &b, NULL), 0);
			snprintf(other, sizeof(other), "other/%s", strchr(c.m[0].snaps[1].key, '/') + 1);
			wt_sink_put(&h.e, other, b.data, b.len);
			ws_buf_free(&b);
			ws_chain_free(&c);
		}
		forge(&h, cases[i].what, cases[i].edit);
		rr_free(&h);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rebase_names_unchanged_parts),
		cmocka_unit_test(test_sealed_parts),
		cmocka_unit_test(test_retention_keeps_chains_after_the_cut),
#ifdef WS_FAULTS
		cmocka_unit_test(test_reuse_sites_paused),
		cmocka_unit_test(test_retention_between_reuse_and_restore),
		cmocka_unit_test(test_retention_reads_again_before_parts),
#endif
		cmocka_unit_test(test_forged_references),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
