/*
 * Following a tenant from the sink alone (core/follow.c): a real SQLite
 * writer shipped by a stream, every state it committed recorded (xxh64 of
 * its image), and a replica built in memory from the follower's callbacks
 * alone, checked at every image and transaction to be a recorded state,
 * each transaction exactly the next one, and at the end the source's last;
 * across checkpoints of every mode, WAL restarts, shrinking databases,
 * carried and merged manifests, re-bases, retention removing what the
 * follower holds, a follower started again, and bad input (unknown tenant,
 * bad names and URLs, damaged and truncated objects read back).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "chain.h"
#include "coreutil.h"
#include "folreplica.h"
#include "follow.h"
#include "sink.h"

#define TENANT "fol"

static const struct ws_follow_ops mem_ops = { mem_image, mem_apply };

/* ---- a source: a writer and its stream ----------------------------------- */

struct src {
	struct wt_env e;
	struct ws_stream *st;
	struct record rec;
	struct ws_stream_config cfg;
};

static void src_stream(struct src *s)
{
	int err = -1;
	s->cfg.tenant = TENANT;
	s->cfg.db_path = s->e.db;
	s->st = ws_stream_open(s->e.sink, &s->cfg, &err);
	if (!s->st)
		fail_msg("ws_stream_open: %s (%s)", ws_strerror(err), ws_errmsg());
}

/* inline_max: inline_batch_bytes_max (UINT64_MAX: never), ckpt: wal_checkpoint_bytes. */
static void src_init(struct src *s, const char *tag, uint64_t inline_max, uint64_t ckpt, enum ws_carry carry)
{
	memset(s, 0, sizeof(*s));
	wt_env_init(&s->e, tag, 0);
	s->cfg.epoch = 1;
	s->cfg.pointer_generation = 1;
	s->cfg.inline_batch_bytes_max = inline_max;
	s->cfg.wal_checkpoint_bytes = ckpt;
	s->cfg.carry = carry;
	record_state(&s->rec, s->e.w);
	src_stream(s);
}

static void src_free(struct src *s)
{
	if (s->st)
		ws_stream_close(s->st);
	wt_env_free(&s->e);
}

/* One transaction of rows × bytes, recorded. */
static void src_txn(struct src *s, int rows, int bytes)
{
	wt_write_txn(s->e.w, rows, bytes);
	record_state(&s->rec, s->e.w);
}

static void src_tail(struct src *s)
{
	struct ws_outcome o;
	wt_tail_ok(s->st, &o);
}

static struct ws_follow *follower(struct src *s, struct mem *m)
{
	struct ws_follow_config c = { .tenant = TENANT };
	struct ws_follow *f = NULL;
	mem_init(m, &s->rec);
	if (ws_follow_open(s->e.sink, &c, &mem_ops, m, &f) != 0)
		fail_msg("ws_follow_open: %s", ws_errmsg());
	return f;
}

/* Poll: it must succeed and bring the replica to the source's last commit. */
static void catch_up(struct ws_follow *f, struct mem *m)
{
	unsigned handed = 0;
	if (ws_follow_poll(f, &handed) != 0)
		fail_msg("poll: %s", ws_errmsg());
	if (m->at != (int)m->rec->n - 1)
		fail_msg("after a poll the replica is state %d of %u", m->at, m->rec->n);
	/* Nothing new: the next poll hands nothing. */
	assert_int_equal(ws_follow_poll(f, &handed), 0);
	assert_int_equal(handed, 0);
}

static struct ws_follow_stats stats_of(struct ws_follow *f)
{
	struct ws_follow_stats st;
	ws_follow_stats(f, &st);
	return st;
}

/* ---- tests ---------------------------------------------------------------- */

static const char *const ckpt_modes[] = { NULL, "PASSIVE", "FULL", "RESTART", "TRUNCATE" };

/* One round: commits, the application's checkpoint of mode k, more commits, shipped. */
static void round_of(struct src *s, unsigned k)
{
	char sql[64];
	src_txn(s, 3, 500);
	src_txn(s, 40, 700); /* many pages: several batches */
	if (ckpt_modes[k % 5]) {
		/* Modes that wait for readers give up at once when the stream
		 * holds its read mark (as an application's would, busy). */
		snprintf(sql, sizeof(sql), "PRAGMA wal_checkpoint(%s)", ckpt_modes[k % 5]);
		sqlite3_busy_timeout(s->e.w, 0);
		wt_exec(s->e.w, sql);
		sqlite3_busy_timeout(s->e.w, 5000);
	}
	src_txn(s, 2, 300);
	if (k == 7) {
		/* The database shrinks: the replica follows its size down. */
		wt_exec(s->e.w, "DELETE FROM t WHERE rowid % 3 = 0");
		record_state(&s->rec, s->e.w);
		wt_exec(s->e.w, "VACUUM");
		record_state(&s->rec, s->e.w);
	}
	src_tail(s);
}

/*
 * Every commit of a writer, one at a time, across the application's
 * checkpoints of every mode and walship's own WAL checkpoints (WAL
 * restarts: new generations the follower crosses without a rebuild,
 * tx_id growing across them), batches stored and inline, a database
 * that shrinks. The steady state never lists the sink.
 */
/*
 * A sealed stream (zstd and a key; docs/FORMAT.md "Sealed objects"): the
 * follower opens its snapshot parts and batches, inline and carried ones
 * too, with its sink's keys (the writer's joined them); a follower whose
 * sink lacks the key fails with WS_ENOKEY and hands nothing.
 */
static void test_sealed(void **state)
{
	static const char key[] = "5c5d5e5f606162636465666768696a6b6c6d6e6f707172737475767778797a7b\n";
	struct src s;
	struct mem m, bare_m;
	struct ws_follow *bare_f = NULL;
	struct ws_follow_config c = { .tenant = TENANT };
	unsigned handed = 0;
	int err;
	(void)state;
	memset(&s, 0, sizeof(s));
	wt_env_init(&s.e, "follow-sealed", 0);
	char *kf = wt_path(s.e.dir, "keys");
	assert_int_equal(wt_write_file(kf, key, strlen(key)), 0);
	s.cfg.inline_batch_bytes_max = 64 << 10;
	s.cfg.wal_checkpoint_bytes = 256 << 10;
	s.cfg.carry = WS_CARRY_ALWAYS;
	s.cfg.seal = (struct ws_seal_config){ .codec = WS_CODEC_ZSTD, .key_file = kf };
	record_state(&s.rec, s.e.w);
	src_stream(&s);
	src_txn(&s, 5, 500);
	src_tail(&s);
	struct ws_follow *f = follower(&s, &m);
	catch_up(f, &m);
	for (unsigned k = 0; k < 6; k++) {
		round_of(&s, k);
		catch_up(f, &m);
	}
	struct ws_sink *bare = ws_sink_open(s.e.sink_url, &err);
	assert_non_null(bare);
	mem_init(&bare_m, &s.rec);
	assert_int_equal(ws_follow_open(bare, &c, &mem_ops, &bare_m, &bare_f), 0);
	assert_int_equal(ws_follow_poll(bare_f, &handed), WS_ENOKEY);
	assert_int_equal(bare_m.images + bare_m.txns, 0);
	ws_follow_close(bare_f);
	mem_free(&bare_m);
	ws_sink_close(bare);
	ws_follow_close(f);
	mem_free(&m);
	free(kf);
	src_free(&s);
}

static void test_every_commit(void **state)
{
	struct src s;
	struct mem m;
	(void)state;
	src_init(&s, "follow-every", 4096, 256 << 10, WS_CARRY_NEVER);
	src_txn(&s, 5, 500);
	src_tail(&s);
	struct ws_follow *f = follower(&s, &m);
	catch_up(f, &m);
	const int at0 = m.at;
	uint64_t lists = s.e.sink->store->stats.lists;
	for (unsigned k = 0; k < 15; k++) {
		round_of(&s, k);
		catch_up(f, &m);
	}
	struct ws_follow_stats st = stats_of(f);
	assert_int_equal(st.rebuilds, 1);
	assert_int_equal(m.images, 1);
	assert_true(st.manifests >= 15);
	assert_int_equal(m.txns, (unsigned)(m.at - at0)); /* every commit after the image */
	assert_true(WS_TX_CHAIN(m.last_tx) > 1); /* generations crossed */
	assert_int_equal(s.e.sink->store->stats.lists, lists);
	assert_true(st.unchanged >= 15);
	ws_follow_close(f);
	mem_free(&m);
	src_free(&s);
}

/*
 * A watermark that carries its manifest, and the next tails merging into
 * it at the same sequence (docs/FORMAT.md "Watermark"): the follower that
 * applied the carried manifest goes on from inside its merge.
 */
static void test_carried_and_merged(void **state)
{
	struct src s;
	struct mem m;
	(void)state;
	src_init(&s, "follow-carried", 0, UINT64_MAX, WS_CARRY_ALWAYS);
	src_txn(&s, 2, 300);
	src_tail(&s);
	struct ws_follow *f = follower(&s, &m);
	catch_up(f, &m);
	for (unsigned k = 0; k < 12; k++) {
		src_txn(&s, 1 + (int)k % 3, 300);
		if (k % 4 == 3)
			src_txn(&s, 30, 600);
		src_tail(&s);
		catch_up(f, &m);
	}
	assert_int_equal(stats_of(f).rebuilds, 1);
	ws_follow_close(f);
	mem_free(&m);
	src_free(&s);
}

enum rebase_how { CLOSE_LAST_CONNECTION, WAL_RESTART, FILE_REPLACED };

/* With the stream down, make the history re-base onto another WAL; the stream opens again. */
static void rebase(struct src *s, enum rebase_how how)
{
	char sql[600];
	char *tmp;
	ws_stream_close(s->st);
	s->st = NULL;
	switch (how) {
	case CLOSE_LAST_CONNECTION:
		sqlite3_close(s->e.w);
		s->e.w = wt_writer_open(s->e.db, 0);
		break;
	case WAL_RESTART:
		src_txn(s, 2, 300);
		wt_exec(s->e.w, "PRAGMA wal_checkpoint(TRUNCATE)");
		break;
	case FILE_REPLACED:
		tmp = wt_path(s->e.dir, "new.db");
		snprintf(sql, sizeof(sql), "VACUUM INTO '%s'", tmp);
		wt_exec(s->e.w, sql);
		sqlite3_close(s->e.w);
		assert_int_equal(rename(tmp, s->e.db), 0);
		free(tmp);
		s->e.w = wt_writer_open(s->e.db, 0);
		record_state(&s->rec, s->e.w);
		break;
	}
	src_stream(s);
}

/*
 * Re-bases onto another WAL generation: nothing proves the new base
 * continues what the follower applied, so it rebuilds by itself, once per
 * re-base, and goes on applying from there.
 */
static void test_rebases(void **state)
{
	static const enum rebase_how hows[] = { CLOSE_LAST_CONNECTION, WAL_RESTART, FILE_REPLACED };
	struct src s;
	struct mem m;
	(void)state;
	src_init(&s, "follow-rebase", 4096, UINT64_MAX, WS_CARRY_NEVER);
	src_txn(&s, 3, 300);
	src_tail(&s);
	struct ws_follow *f = follower(&s, &m);
	catch_up(f, &m);
	for (unsigned i = 0; i < 3; i++) {
		rebase(&s, hows[i]);
		src_txn(&s, 3, 300);
		src_tail(&s);
		catch_up(f, &m);
		src_txn(&s, 20, 500);
		src_txn(&s, 1, 100);
		src_tail(&s);
		catch_up(f, &m);
		assert_int_equal(stats_of(f).rebuilds, 2 + i);
	}
	ws_follow_close(f);
	mem_free(&m);
	src_free(&s);
}

/*
 * Retention removes the manifest the follower holds (a checkpoint taken
 * past it, retention run): the follower cannot walk back to it, rebuilds
 * from the checkpoint's artifact and the chain after its cut, and goes on.
 */
static void test_behind_retention(void **state)
{
	struct src s;
	struct mem m;
	struct ws_checkpoint_info info;
	struct ws_retention_report rep;
	(void)state;
	src_init(&s, "follow-retention", 4096, UINT64_MAX, WS_CARRY_NEVER);
	src_txn(&s, 3, 300);
	src_tail(&s);
	struct ws_follow *f = follower(&s, &m);
	catch_up(f, &m);
	for (int i = 0; i < 3; i++) {
		src_txn(&s, 5, 400);
		src_tail(&s);
	}
	memset(&info, 0, sizeof(info));
	assert_int_equal(ws_checkpoint_take(s.e.sink, NULL, &info), 0);
	assert_true(info.committed);
	src_txn(&s, 5, 400);
	src_tail(&s);
	memset(&rep, 0, sizeof(rep));
	assert_int_equal(ws_retention_run(s.e.sink, false, NULL, NULL, &rep), 0);
	assert_true(rep.ran && rep.deleted > 0);
	src_txn(&s, 2, 400);
	src_tail(&s);
	catch_up(f, &m);
	assert_int_equal(stats_of(f).rebuilds, 2);
	src_txn(&s, 2, 400);
	src_tail(&s);
	catch_up(f, &m);
	assert_int_equal(stats_of(f).rebuilds, 2);
	ws_follow_close(f);
	mem_free(&m);
	src_free(&s);
}

/*
 * Sealed batches and a sealed checkpoint artifact (zstd and a key),
 * retention run past the cut: a follower started then rebuilds from the
 * artifact, opened with the sink's keys, and the chain after it.
 */
static void test_sealed_artifact(void **state)
{
	struct src s;
	struct mem m;
	struct ws_checkpoint_info info;
	struct ws_retention_report rep;
	static const char key[] = "5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a\n";
	(void)state;
	memset(&s, 0, sizeof(s));
	wt_env_init(&s.e, "follow-sealed", 0);
	char *kf = wt_path(s.e.dir, "keys");
	assert_int_equal(wt_write_file(kf, key, strlen(key)), 0);
	s.cfg.epoch = 1;
	s.cfg.pointer_generation = 1;
	s.cfg.wal_checkpoint_bytes = UINT64_MAX;
	s.cfg.seal = (struct ws_seal_config){ .codec = WS_CODEC_ZSTD, .key_file = kf };
	record_state(&s.rec, s.e.w);
	src_stream(&s);
	for (int i = 0; i < 4; i++) {
		src_txn(&s, 20, 400);
		src_tail(&s);
	}
	struct ws_checkpoint_opts co = { .seal = s.cfg.seal };
	assert_int_equal(ws_checkpoint_take(s.e.sink, &co, &info), 0);
	assert_true(info.committed);
	src_txn(&s, 5, 400);
	src_tail(&s);
	assert_int_equal(ws_retention_run(s.e.sink, false, NULL, NULL, &rep), 0);
	assert_true(rep.ran && rep.deleted > 0);
	struct ws_follow *f = follower(&s, &m);
	catch_up(f, &m);
	assert_int_equal(stats_of(f).rebuilds, 1);
	src_txn(&s, 2, 400);
	src_tail(&s);
	catch_up(f, &m);
	ws_follow_close(f);
	mem_free(&m);
	free(kf);
	src_free(&s);
}

/* A follower stopped and another started: it rebuilds at the latest state and goes on. */
static void test_stopped_and_started(void **state)
{
	struct src s;
	struct mem m, m2;
	(void)state;
	src_init(&s, "follow-restart", 4096, 128 << 10, WS_CARRY_NEVER);
	src_txn(&s, 3, 300);
	src_tail(&s);
	struct ws_follow *f = follower(&s, &m);
	catch_up(f, &m);
	round_of(&s, 1);
	catch_up(f, &m);
	ws_follow_close(f);
	for (unsigned k = 2; k < 6; k++)
		round_of(&s, k);
	f = follower(&s, &m2);
	catch_up(f, &m2);
	assert_int_equal(m2.images, 1);
	for (unsigned k = 6; k < 9; k++) {
		round_of(&s, k);
		catch_up(f, &m2);
	}
	assert_int_equal(stats_of(f).rebuilds, 1);
	ws_follow_close(f);
	mem_free(&m);
	mem_free(&m2);
	src_free(&s);
}

/* The key of the first stored batch of the manifest the watermark names, and that manifest's. */
static void head_keys(struct src *s, char batch[WS_KEY_MAX], char manifest[WS_KEY_MAX])
{
	struct ws_fmt_watermark wm;
	struct ws_chain c;
	assert_int_equal(ws_wm_load(s->e.sink->store, TENANT, &wm, NULL), 0);
	assert_int_equal(ws_chain_load_since(s->e.sink->store, TENANT, &wm, NULL, wm.seq, &c, NULL), 0);
	snprintf(manifest, WS_KEY_MAX, "%s", c.keys[c.count - 1]);
	batch[0] = '\0';
	for (uint32_t k = 0; k < c.m[c.count - 1].batch_count && !batch[0]; k++)
		snprintf(batch, WS_KEY_MAX, "%s", c.m[c.count - 1].batches[k].key);
	ws_chain_free(&c);
	assert_true(batch[0] != '\0');
}

/* Damage the object at key (damage: flip a byte in the middle, else cut it
 * short), poll: an error naming it, nothing handed; put it back: caught up. */
static void damaged_then_whole(struct src *s, struct ws_follow *f, struct mem *m, const char *key, bool flip)
{
	char *path;
	size_t len = 0;
	unsigned handed = 9;
	int at = m->at, rc;
	assert_int_not_equal(asprintf(&path, "%s/%s", s->e.sink_dir, key), -1);
	uint8_t *saved = wt_read_file(path, &len);
	assert_non_null(saved);
	assert_true(len > 100);
	chmod(path, 0644);
	saved[len / 2] ^= flip ? 0x10 : 0;
	assert_int_equal(wt_write_file(path, saved, flip ? len : len - 7), 0);
	saved[len / 2] ^= flip ? 0x10 : 0;
	rc = ws_follow_poll(f, &handed);
	if (rc != WS_ECORRUPT && rc != WS_EFORMAT)
		fail_msg("poll over damaged %s: %d (%s)", key, rc, ws_errmsg());
	if (!strstr(ws_errmsg(), key))
		fail_msg("the error does not name %s: %s", key, ws_errmsg());
	assert_int_equal(handed, 0);
	assert_int_equal(m->at, at);
	/* Still refused on the next poll: the same watermark is read again. */
	assert_int_equal(ws_follow_poll(f, &handed), rc);
	assert_int_equal(wt_write_file(path, saved, len), 0);
	catch_up(f, m);
	free(saved);
	free(path);
}

/*
 * Bad input: a tenant name that is not one, no callbacks, a sink URL that
 * is not one, a tenant that was never shipped; objects damaged or cut
 * short as read back (a batch, a manifest, the watermark): each an error
 * naming it, nothing of it handed, and the follower goes on once the
 * object is whole again.
 */
static void test_bad_input(void **state)
{
	struct ws_follow_config c = { .tenant = "../x" };
	struct ws_follow *f = NULL;
	struct src s;
	struct mem m;
	char batch[WS_KEY_MAX], manifest[WS_KEY_MAX], wm[WS_KEY_MAX];
	int err = 0;
	(void)state;
	src_init(&s, "follow-bad", 4096, UINT64_MAX, WS_CARRY_NEVER);
	assert_int_equal(ws_follow_open(s.e.sink, &c, &mem_ops, NULL, &f), -EINVAL);
	assert_non_null(strstr(ws_errmsg(), "../x"));
	c.tenant = TENANT;
	assert_int_equal(ws_follow_open(s.e.sink, &c, NULL, NULL, &f), -EINVAL);
	assert_null(f);
	assert_null(ws_sink_open("nosuch://bucket", &err));
	assert_int_equal(err, WS_ECONFIG);
	/* Never shipped. */
	c.tenant = "nobody";
	assert_int_equal(ws_follow_open(s.e.sink, &c, &mem_ops, NULL, &f), 0);
	assert_int_equal(ws_follow_poll(f, NULL), WS_ENOTFOUND);
	assert_non_null(strstr(ws_errmsg(), "nobody"));
	ws_follow_close(f);

	src_txn(&s, 3, 300);
	src_tail(&s);
	f = follower(&s, &m);
	catch_up(f, &m);
	src_txn(&s, 30, 600);
	src_tail(&s);
	head_keys(&s, batch, manifest);
	damaged_then_whole(&s, f, &m, batch, true);
	src_txn(&s, 30, 600);
	src_tail(&s);
	head_keys(&s, batch, manifest);
	damaged_then_whole(&s, f, &m, batch, false);
	src_txn(&s, 2, 600);
	src_tail(&s);
	head_keys(&s, batch, manifest);
	damaged_then_whole(&s, f, &m, manifest, false);
	src_txn(&s, 2, 600);
	src_tail(&s);
	assert_int_equal(ws_key_watermark(wm, sizeof(wm), TENANT), 0);
	damaged_then_whole(&s, f, &m, wm, true);
	assert_int_equal(stats_of(f).rebuilds, 1);
	ws_follow_close(f);
	mem_free(&m);
	src_free(&s);
}

/*
 * The watermark goes back (a store that lost acknowledged writes: an older
 * watermark put back): refused, naming it, nothing handed, the replica
 * where it was; once the newer watermark is back it goes on.
 */
static void test_watermark_went_back(void **state)
{
	struct src s;
	struct mem m;
	char wm[WS_KEY_MAX], *path;
	size_t old_len = 0, new_len = 0;
	unsigned handed = 9;
	(void)state;
	src_init(&s, "follow-back", 4096, UINT64_MAX, WS_CARRY_NEVER);
	src_txn(&s, 3, 300);
	src_tail(&s);
	assert_int_equal(ws_key_watermark(wm, sizeof(wm), TENANT), 0);
	assert_int_not_equal(asprintf(&path, "%s/%s", s.e.sink_dir, wm), -1);
	uint8_t *old = wt_read_file(path, &old_len);
	assert_non_null(old);
	struct ws_follow *f = follower(&s, &m);
	src_txn(&s, 3, 300);
	src_tail(&s);
	catch_up(f, &m);
	uint8_t *cur = wt_read_file(path, &new_len);
	assert_non_null(cur);
	int at = m.at;
	assert_int_equal(wt_write_file(path, old, old_len), 0);
	assert_int_equal(ws_follow_poll(f, &handed), WS_ECORRUPT);
	if (!strstr(ws_errmsg(), "went back") || !strstr(ws_errmsg(), wm))
		fail_msg("a watermark that went back: %s", ws_errmsg());
	assert_int_equal(handed, 0);
	assert_int_equal(m.at, at);
	assert_int_equal(wt_write_file(path, cur, new_len), 0);
	catch_up(f, &m);
	assert_int_equal(stats_of(f).rebuilds, 1);
	ws_follow_close(f);
	free(old);
	free(cur);
	free(path);
	mem_free(&m);
	src_free(&s);
}

/*
 * A writer shipped by the engine's shard threads while the follower polls
 * between its commits: every state the follower reaches is one the writer
 * committed, each transaction the next one, and after the engine flushed
 * the follower is at the writer's last commit; its steady state never
 * lists the sink.
 */
static void test_engine_writer(void **state)
{
	uint64_t rebuilds = 0, lists = 0;
	(void)state;
	fol_engine_scenario("follow-engine", NULL, 24, &rebuilds, &lists);
	assert_int_equal(lists, 0);
}

/*
 * The watermark's cadence (ws_follow_cadence_*): reads every poll_ms until
 * a cadence is seen, then every dense_ms in a window around the next write
 * expected, opened from the earliest the last write can have been, and
 * every poll_ms again once it passed with nothing; a source that writes
 * often, or a dense_ms no shorter than poll_ms, leaves every read at
 * poll_ms.
 */
static void test_cadence(void **state)
{
	struct ws_follow_cadence c = { 0 }, often = { 0 };
	bool d = true;
	(void)state;

	assert_int_equal(ws_follow_cadence_wait(&c, 1000, 100, 10, &d), 100);
	assert_false(d);
	/* Writes 1000 ms apart, each seen by a read 10 ms after one that did not see it. */
	for (uint64_t t = 10000; t <= 13000; t += 1000) {
		ws_follow_cadence_seen(&c, t - 10, false);
		ws_follow_cadence_seen(&c, t, true);
	}
	/* The window: 13000 - 10 + 1000 - 10 .. 13000 + 1000 + 10. */
	assert_int_equal(ws_follow_cadence_wait(&c, 13005, 100, 10, &d), 100);
	assert_false(d);
	assert_int_equal(ws_follow_cadence_wait(&c, 13905, 100, 10, &d), 75); /* the next read opens it */
	assert_false(d);
	assert_int_equal(ws_follow_cadence_wait(&c, 13980, 100, 10, &d), 10);
	assert_true(d);
	assert_int_equal(ws_follow_cadence_wait(&c, 14009, 100, 10, &d), 10);
	assert_true(d);
	assert_int_equal(ws_follow_cadence_wait(&c, 14010, 100, 10, &d), 100); /* passed, nothing came */
	assert_false(d);
	/* dense_ms no shorter than poll_ms: never denser. */
	assert_int_equal(ws_follow_cadence_wait(&c, 13990, 10, 10, &d), 10);
	assert_false(d);
	/* A write seen late by a sparse read (100 ms after the read before):
	 * the window opens from that read before (the write may have come
	 * right after it), and is at most 2 x poll_ms long. Gaps 1000 x 3 and
	 * 1160: 14160 - 100 + 1000 - 10 = 15050 .. 15250. */
	ws_follow_cadence_seen(&c, 14060, false);
	ws_follow_cadence_seen(&c, 14160, true);
	assert_int_equal(ws_follow_cadence_wait(&c, 15049, 100, 10, &d), 1);
	assert_false(d);
	assert_int_equal(ws_follow_cadence_wait(&c, 15050, 100, 10, &d), 10);
	assert_true(d);
	assert_int_equal(ws_follow_cadence_wait(&c, 15249, 100, 10, &d), 10);
	assert_true(d);
	assert_int_equal(ws_follow_cadence_wait(&c, 15250, 100, 10, &d), 100);
	assert_false(d);
	/* Whenever it is asked, it never waits longer than poll_ms: a change
	 * off the cadence is seen no later than with a fixed poll. */
	for (uint64_t now = 13000; now < 17000; now++) {
		assert_true(ws_follow_cadence_wait(&c, now, 100, 10, &d) <= 100);
		assert_true(ws_follow_cadence_wait(&c, now, 100, 10, &d) >= 1);
	}
	/* A source that writes every 300 ms (under 4 x poll_ms): every poll_ms. */
	for (uint64_t t = 1000; t <= 4000; t += 300)
		ws_follow_cadence_seen(&often, t, true);
	for (uint64_t t = 4000; t < 4400; t += 10) {
		assert_int_equal(ws_follow_cadence_wait(&often, t, 100, 10, &d), 100);
		assert_false(d);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cadence),
		cmocka_unit_test(test_every_commit),
		cmocka_unit_test(test_sealed),
		cmocka_unit_test(test_carried_and_merged),
		cmocka_unit_test(test_rebases),
		cmocka_unit_test(test_behind_retention),
		cmocka_unit_test(test_sealed_artifact),
		cmocka_unit_test(test_stopped_and_started),
		cmocka_unit_test(test_bad_input),
		cmocka_unit_test(test_watermark_went_back),
		cmocka_unit_test(test_engine_writer),
	};
	return WT_RUN_GROUP(tests, NULL, NULL);
}
