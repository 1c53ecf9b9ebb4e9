/*
 * Reading a tenant with manifest slots (docs/SLOTS.md "core/slots.c",
 * docs/FORMAT.md "Watermark" version 4, "Close record", "Keys"): restore
 * (latest, --frame, --time) and verify find the head from the watermark's
 * hint by probing slots, across close records, and walk back through the
 * slots into the content-named manifests shipped before the lane opened.
 *
 * Nothing writes slots yet, so each test ships a tenant with a real SQLite
 * writer and a real stream into a file:// sink, recording every state the
 * source committed, then re-encodes the stream's later manifests as slots
 * (same batches, inline ones carried over byte for byte; their originals
 * deleted) and writes a version 4 watermark over them, as a slot writer
 * would leave the sink. Every state is then checked by restore --frame
 * against the record, and the latest state by restore and verify.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "chain.h"
#include "coreutil.h"
#include "sink.h"
#include "slots.h"
#include "ws_fault.h"
#include "ws_format.h"
#include "ws_hash.h"

#define TENANT "ledger"
#define LANE_A 0x5107c0ffee00000aull
#define LANE_B 0x5107c0ffee00000bull
#define LANE_C 0x5107c0ffee00000cull
#define TAILS 12
#define KEPT 3 /* tails 1..KEPT stay content-named; the rest become slots */

/* One tail shipped: the watermark after it and the source's state. */
struct rec {
	uint64_t seq, last_frame, hash;
	int64_t time_ms;
	struct ws_fmt_gen gen;
	uint32_t end_cksum[2];
	char key[WS_KEY_MAX];    /* its manifest's key: content-named, or the slot it became */
	uint8_t sha[WS_SHA256_LEN];
	uint64_t len;
	uint8_t *bytes;          /* the slot's bytes (slots only) */
	struct ws_fmt_manifest m; /* decoded (slots only) */
};

struct tenant {
	struct wt_env e;
	struct rec r[TAILS];
	/* 0: one lane (A); else A closed at it by B (epoch 1, pointer
	 * generation 2), and with two_closes B closed there too, empty, by C
	 * (pointer generation 3); the last lane goes on. */
	uint64_t close_seq;
	bool two_closes;
	char close_key[2][WS_KEY_MAX];
	uint8_t *close_bytes[2];
	size_t close_len[2];
};

/* ---- the sink as files ------------------------------------------------- */

static void del_obj(const struct wt_env *e, const char *key)
{
	char *p = wt_path(e->sink_dir, key);
	if (unlink(p) != 0 && errno != ENOENT)
		fail_msg("unlink %s: %s", p, strerror(errno));
	free(p);
}

static bool obj_there(const struct wt_env *e, const char *key)
{
	char *p = wt_path(e->sink_dir, key);
	bool there = access(p, F_OK) == 0;
	free(p);
	return there;
}

/* ---- building the tenant ------------------------------------------------ */

static uint64_t lane_of(const struct tenant *t, uint64_t seq, uint64_t *pg)
{
	if (!t->close_seq || seq < t->close_seq) {
		*pg = 1;
		return LANE_A;
	}
	*pg = t->two_closes ? 3 : 2;
	return t->two_closes ? LANE_C : LANE_B;
}

/* Ship TAILS tails (one commit each), recording each state. */
static void ship(struct tenant *t, const char *tag)
{
	struct ws_stream_config c;
	struct ws_stream *st;
	struct ws_outcome o;
	int err = 0;

	wt_env_init(&t->e, tag, 0);
	memset(&c, 0, sizeof(c));
	c.tenant = TENANT;
	c.db_path = t->e.db;
	c.epoch = 1;
	c.pointer_generation = 1;
	c.wal_checkpoint_bytes = UINT64_MAX;
	c.inline_batch_bytes_max = 32768;
	st = ws_stream_open(t->e.sink, &c, &err);
	if (!st)
		fail_msg("stream: %s (%s)", ws_strerror(err), ws_errmsg());
	for (int i = 0; i < TAILS; i++) {
		struct ws_fmt_watermark w;
		struct rec *r = &t->r[i];
		/* Small and large transactions: inline batches and stored ones. */
		wt_write_txn(t->e.w, i % 4 == 3 ? 20 : 2 + i % 3, i % 4 == 3 ? 3000 : 200);
		wt_tail_ok(st, &o);
		assert_int_equal(ws_wm_load(t->e.sink->store, TENANT, &w, NULL), 0);
		assert_int_equal(w.seq, (uint64_t)i + 1);
		r->seq = w.seq;
		r->last_frame = w.last_frame;
		r->time_ms = w.time_ms;
		r->gen = w.gen;
		r->end_cksum[0] = w.end_cksum[0];
		r->end_cksum[1] = w.end_cksum[1];
		r->hash = wt_content_hash(t->e.w, NULL);
		snprintf(r->key, sizeof(r->key), "%s", w.manifest_key);
		memcpy(r->sha, w.manifest_sha, WS_SHA256_LEN);
		r->len = w.manifest_length;
	}
	ws_stream_close(st);
}

/* Re-encode manifest i (seq i + 1) as a slot on top of r[i - 1]; m is the
 * shipped one. Its bytes in r->bytes. */
static void encode_slot(struct tenant *t, int i, uint8_t *orig, size_t orig_len)
{
	struct rec *r = &t->r[i], *p = &t->r[i - 1];
	struct ws_fmt_manifest m;
	struct iovec iov[64];
	struct ws_buf b;
	uint64_t pg, lane;
	int n = 0;

	assert_int_equal(ws_fmt_manifest_decode(orig, orig_len, &m), 0);
	assert_int_equal(m.tail_count, 0);
	for (uint32_t k = 0; k < m.batch_count; k++)
		if (ws_fmt_objref_inline(&m.batches[k])) {
			assert_true(n < 64);
			iov[n].iov_base = orig + m.batches[k].inline_off;
			iov[n++].iov_len = (size_t)m.batches[k].length;
		}
	lane = lane_of(t, r->seq, &pg);
	m.inline_iov = iov;
	m.inline_iovcnt = n;
	m.epoch = 1;
	m.pointer_generation = pg;
	m.lane = lane;
	m.durable_ms = m.time_ms + 1;
	snprintf(m.prev_key, sizeof(m.prev_key), "%s", p->key);
	memcpy(m.prev_sha, p->sha, WS_SHA256_LEN);
	m.prev_length = p->len;
	ws_buf_init(&b, 64u << 20);
	assert_int_equal(ws_fmt_manifest_encode(&m, &b), 0);
	assert_int_equal(ws_key_slot(r->key, sizeof(r->key), TENANT, 1, pg, lane, r->seq), 0);
	ws_sha256(b.data, b.len, r->sha);
	r->len = b.len;
	r->bytes = malloc(b.len);
	assert_non_null(r->bytes);
	memcpy(r->bytes, b.data, b.len);
	ws_buf_free(&b);
	m.inline_iov = NULL;
	m.inline_iovcnt = 0;
	assert_int_equal(ws_fmt_manifest_decode(r->bytes, (size_t)r->len, &r->m), 0);
	ws_fmt_manifest_free(&m);
}

/* Close record n: lane (1, pg, lane) closed at close_seq after prev by
 * (1, closer_pg, closer_lane). */
static void encode_close(struct tenant *t, int n, uint64_t pg, uint64_t lane, uint64_t closer_pg,
			 uint64_t closer_lane, const struct rec *prev)
{
	struct ws_fmt_close c;
	struct ws_buf b;
	memset(&c, 0, sizeof(c));
	snprintf(c.tenant, sizeof(c.tenant), "%s", TENANT);
	c.epoch = 1;
	c.pointer_generation = pg;
	c.lane = lane;
	c.seq = t->close_seq;
	c.closer_epoch = 1;
	c.closer_pg = closer_pg;
	c.closer_lane = closer_lane;
	snprintf(c.prev_key, sizeof(c.prev_key), "%s", prev->key);
	memcpy(c.prev_sha, prev->sha, WS_SHA256_LEN);
	c.prev_length = prev->len;
	c.time_ms = prev->time_ms + 2;
	ws_buf_init(&b, 1u << 16);
	assert_int_equal(ws_fmt_close_encode(&c, &b), 0);
	assert_int_equal(ws_key_slot(t->close_key[n], WS_KEY_MAX, TENANT, 1, pg, lane, t->close_seq), 0);
	free(t->close_bytes[n]);
	t->close_bytes[n] = malloc(b.len);
	assert_non_null(t->close_bytes[n]);
	memcpy(t->close_bytes[n], b.data, b.len);
	t->close_len[n] = b.len;
	ws_buf_free(&b);
	wt_sink_put(&t->e, t->close_key[n], t->close_bytes[n], t->close_len[n]);
}

/* A version 4 watermark: lane opened by (1, pg, lane), hint r[hint] (-1: none). */
static void put_wm(struct tenant *t, int hint, uint64_t pg, uint64_t lane)
{
	struct ws_fmt_watermark w;
	struct ws_buf b;
	assert_int_equal(ws_wm_load_any(t->e.sink->store, TENANT, &w, NULL, NULL), 0);
	w.version = 0;
	w.carried = NULL;
	w.carried_len = 0;
	w.epoch = 1;
	w.pointer_generation = pg;
	w.lane = lane;
	if (hint < 0) {
		w.seq = 0;
		w.manifest_key[0] = '\0';
		memset(w.manifest_sha, 0, WS_SHA256_LEN);
		w.manifest_length = 0;
		w.last_frame = 0;
		w.end_cksum[0] = w.end_cksum[1] = 0;
		memset(&w.gen, 0, sizeof(w.gen));
	} else {
		const struct rec *r = &t->r[hint];
		w.seq = r->seq;
		w.last_frame = r->last_frame;
		w.time_ms = r->time_ms;
		snprintf(w.manifest_key, sizeof(w.manifest_key), "%s", r->key);
		memcpy(w.manifest_sha, r->sha, WS_SHA256_LEN);
		w.manifest_length = r->len;
		w.gen = r->gen;
		w.end_cksum[0] = r->end_cksum[0];
		w.end_cksum[1] = r->end_cksum[1];
	}
	ws_buf_init(&b, 1u << 16);
	assert_int_equal(ws_fmt_watermark_encode(&w, &b), 0);
	assert_int_equal(ws_get_le32(b.data + 8), 4);
	wt_sink_put(&t->e, TENANT "/wm", b.data, b.len);
	ws_buf_free(&b);
}

static void put_slot(struct tenant *t, int i)
{
	wt_sink_put(&t->e, t->r[i].key, t->r[i].bytes, (size_t)t->r[i].len);
}

/*
 * Ship, then make tails KEPT + 1.. slots in the lanes struct tenant says
 * (their content-named originals deleted), the watermark hinting at the
 * last content-named manifest.
 */
static void slot_tenant(struct tenant *t, const char *tag, uint64_t close_seq, bool two_closes)
{
	memset(t, 0, sizeof(*t));
	ship(t, tag);
	t->close_seq = close_seq;
	t->two_closes = two_closes;
	for (int i = KEPT; i < TAILS; i++) {
		size_t len = 0;
		char *p = wt_path(t->e.sink_dir, t->r[i].key);
		uint8_t *orig = wt_read_file(p, &len);
		assert_non_null(orig);
		char old[WS_KEY_MAX];
		snprintf(old, sizeof(old), "%s", t->r[i].key);
		encode_slot(t, i, orig, len);
		free(orig);
		free(p);
		del_obj(&t->e, old);
		put_slot(t, i);
		if (close_seq && t->r[i].seq + 1 == close_seq) {
			encode_close(t, 0, 1, LANE_A, 2, LANE_B, &t->r[i]);
			if (two_closes)
				encode_close(t, 1, 2, LANE_B, 3, LANE_C, &t->r[i]);
		}
	}
	put_wm(t, KEPT - 1, 1, LANE_A);
	/* The slots carry inline batches and name stored ones. */
	{
		unsigned inl = 0, stored = 0;
		for (int i = KEPT; i < TAILS; i++)
			for (uint32_t k = 0; k < t->r[i].m.batch_count; k++)
				ws_fmt_objref_inline(&t->r[i].m.batches[k]) ? inl++ : stored++;
		if (!inl || !stored)
			fail_msg("the slots hold %u inline batches and name %u stored ones: both wanted", inl, stored);
	}
}

static void tenant_free(struct tenant *t)
{
	for (int i = 0; i < TAILS; i++) {
		free(t->r[i].bytes);
		if (t->r[i].bytes)
			ws_fmt_manifest_free(&t->r[i].m);
	}
	free(t->close_bytes[0]);
	free(t->close_bytes[1]);
	wt_env_free(&t->e);
}

/* ---- checks ------------------------------------------------------------ */

/* Restore-latest, every --frame and verify agree with the record (states
 * 0..upto). */
static void check_all(struct tenant *t, int upto, const char *what)
{
	struct wt_problems pb = { 0 };
	uint64_t h = wt_restore_hash(&t->e, TENANT, NULL, NULL);
	if (h != t->r[upto].hash)
		fail_msg("%s: restore-latest is not state %d, the head", what, upto);
	for (int i = 0; i <= upto; i++) {
		struct ws_restore_opts o = { 0 };
		o.frame = t->r[i].last_frame;
		if (wt_restore_hash(&t->e, TENANT, &o, NULL) != t->r[i].hash)
			fail_msg("%s: restore --frame %llu is not state %d", what, (unsigned long long)o.frame, i);
	}
	if (ws_verify(t->e.sink, TENANT, wt_problem, &pb) != 0 || pb.n)
		fail_msg("%s: verify: %u problems, first %s (%s)", what, pb.n, pb.first, ws_errmsg());
}

/* Restore-latest refuses, naming key (and key2), writing nothing; verify
 * reports the same. */
static void refused(struct tenant *t, const char *key, const char *key2, const char *what)
{
	struct wt_problems pb = { 0 };
	char *out = wt_out_path(&t->e);
	int rc = ws_restore(t->e.sink, TENANT, NULL, out);
	if (rc == 0)
		fail_msg("%s: restore-latest succeeded", what);
	if (!strstr(ws_errmsg(), key) || (key2 && !strstr(ws_errmsg(), key2)))
		fail_msg("%s: restore's error does not name %s%s%s: %s", what, key, key2 ? " and " : "",
			 key2 ? key2 : "", ws_errmsg());
	if (access(out, F_OK) == 0)
		fail_msg("%s: restore wrote %s", what, out);
	free(out);
	rc = ws_verify(t->e.sink, TENANT, wt_problem, &pb);
	if (rc == 0 || pb.n == 0)
		fail_msg("%s: verify passed what restore refuses", what);
	if (!strstr(pb.first, key) || (key2 && !strstr(pb.first, key2)))
		fail_msg("%s: verify's problem does not name %s: %s", what, key, pb.first);
}

/* ---- tests ------------------------------------------------------------- */

/* One lane: from every hint (the content-named head before the lane, each
 * slot), every state restores and verify passes; the head probed is the
 * last slot. */
static void test_slot_lane_every_hint(void **state)
{
	struct tenant t;
	(void)state;
	slot_tenant(&t, "slots_hint", 0, false);
	for (int hint = KEPT - 1; hint < TAILS; hint++) {
		struct ws_head h;
		char what[64];
		put_wm(&t, hint, 1, LANE_A);
		assert_int_equal(ws_head_load(t.e.sink->store, TENANT, WS_HEAD_HOLES, &h), 0);
		assert_int_equal(h.head.seq, TAILS);
		assert_string_equal(h.head.manifest_key, t.r[TAILS - 1].key);
		assert_int_equal(h.head.last_frame, t.r[TAILS - 1].last_frame);
		assert_int_equal(h.lane, LANE_A);
		assert_false(h.closed);
		assert_int_equal(h.restarts, 0);
		/* Every slot after the hint, the absent one and the hole check's. */
		assert_int_equal(h.probes, TAILS - 1 - hint + 2);
		ws_head_free(&h);
		snprintf(what, sizeof(what), "hint %d slots behind", TAILS - 1 - hint);
		check_all(&t, TAILS - 1, what);
	}
	/* --time: a slot's own time (the shipped manifest's) restores its state. */
	{
		struct ws_restore_opts o = { 0 };
		o.time_ms = t.r[TAILS - 2].m.time_ms;
		if (t.r[TAILS - 2].m.time_ms < t.r[TAILS - 1].m.time_ms)
			assert_true(wt_restore_hash(&t.e, TENANT, &o, NULL) == t.r[TAILS - 2].hash);
	}
	/* The lane's first slot not written yet: the hint's state, nothing more. */
	for (int i = KEPT; i < TAILS; i++)
		del_obj(&t.e, t.r[i].key);
	put_wm(&t, KEPT - 1, 1, LANE_A);
	assert_true(wt_restore_hash(&t.e, TENANT, NULL, NULL) == t.r[KEPT - 1].hash);
	tenant_free(&t);
}

/* A close record moves the probe to the closer's lane at the same
 * sequence, any number in a row (two_closes: lane B opened and closed
 * empty by C); the walk back crosses from the last lane into lane A and on
 * into the content-named manifests. From every hint. */
static void close_switches_lane(bool two_closes)
{
	struct tenant t;
	struct ws_head h;
	const uint64_t last_lane = two_closes ? LANE_C : LANE_B, last_pg = two_closes ? 3 : 2;
	slot_tenant(&t, two_closes ? "slots_close2" : "slots_close", KEPT + 4, two_closes);
	assert_true(obj_there(&t.e, t.close_key[0]));
	for (int hint = KEPT - 1; hint < TAILS; hint++) {
		uint64_t pg = 1, lane = LANE_A;
		if (hint >= KEPT)
			lane = lane_of(&t, t.r[hint].seq, &pg);
		put_wm(&t, hint, pg, lane);
		assert_int_equal(ws_head_load(t.e.sink->store, TENANT, WS_HEAD_HOLES, &h), 0);
		assert_int_equal(h.head.seq, TAILS);
		assert_string_equal(h.head.manifest_key, t.r[TAILS - 1].key);
		assert_int_equal(h.lane, last_lane);
		assert_int_equal(h.lane_pg, last_pg);
		assert_int_equal(h.head.pointer_generation, last_pg);
		ws_head_free(&h);
		check_all(&t, TAILS - 1, two_closes ? "across two closes" : "across a close");
	}
	/* Lane A closed right after the hint, nothing in the last lane yet:
	 * the head is the close's predecessor. */
	for (int i = (int)t.close_seq - 1; i < TAILS; i++)
		del_obj(&t.e, t.r[i].key);
	put_wm(&t, (int)t.close_seq - 2, 1, LANE_A);
	assert_int_equal(ws_head_load(t.e.sink->store, TENANT, WS_HEAD_HOLES, &h), 0);
	assert_int_equal(h.head.seq, t.close_seq - 1);
	assert_int_equal(h.lane, last_lane);
	ws_head_free(&h);
	check_all(&t, (int)t.close_seq - 2, "a lane closed, its closer's empty");
	tenant_free(&t);
}

static void test_slot_close_switches_lane(void **state)
{
	(void)state;
	close_switches_lane(false);
}

static void test_slot_two_closes_in_a_row(void **state)
{
	(void)state;
	close_switches_lane(true);
}

/* A version 4 watermark whose lane holds no slot yet (seq 0): nothing
 * shipped, restore says so and verify passes. */
static void test_slot_lane_opened_empty(void **state)
{
	struct tenant t;
	struct ws_head h;
	struct wt_problems pb = { 0 };
	char *out;
	(void)state;
	memset(&t, 0, sizeof(t));
	ship(&t, "slots_empty");
	put_wm(&t, -1, 1, LANE_A);
	assert_int_equal(ws_head_load(t.e.sink->store, TENANT, WS_HEAD_HOLES, &h), 0);
	assert_int_equal(h.head.seq, 0);
	ws_head_free(&h);
	out = wt_out_path(&t.e);
	assert_int_equal(ws_restore(t.e.sink, TENANT, NULL, out), WS_ENOTFOUND);
	assert_non_null(strstr(ws_errmsg(), "nothing was shipped"));
	assert_int_equal(access(out, F_OK), -1);
	assert_int_equal(ws_verify(t.e.sink, TENANT, wt_problem, &pb), 0);
	assert_int_equal(pb.n, 0);
	free(out);
	tenant_free(&t);
}

/* Slot head + 1 deleted while head + 2 is there: a lost acknowledged
 * write. Restore-latest refuses naming both, verify reports the same;
 * --frame of a state before the hole restores. */
static void test_slot_hole_is_lost_write(void **state)
{
	struct tenant t;
	const int gone = KEPT + 3;
	(void)state;
	slot_tenant(&t, "slots_hole", 0, false);
	del_obj(&t.e, t.r[gone].key);
	refused(&t, t.r[gone].key, t.r[gone + 1].key, "a hole");
	for (int i = 0; i < gone; i++) {
		struct ws_restore_opts o = { 0 };
		o.frame = t.r[i].last_frame;
		assert_true(wt_restore_hash(&t.e, TENANT, &o, NULL) == t.r[i].hash);
	}
	tenant_free(&t);
}

/* ---- the watermark re-read after a probe's 404 (docs/SLOTS.md item 2b) --- */

struct race {
	struct tenant *t;
	int new_hint, del_from, del_to; /* slots del_from..del_to deleted (indexes) */
	int write_from, write_to;       /* slots written */
	unsigned fired;
};

static void race_move(const char *site, void *arg)
{
	struct race *r = arg;
	(void)site;
	r->fired++;
	for (int i = r->write_from; i <= r->write_to && r->write_from; i++)
		put_slot(r->t, i);
	put_wm(r->t, r->new_hint, 1, LANE_A);
	for (int i = r->del_from; i <= r->del_to && r->del_from; i++)
		del_obj(&r->t->e, r->t->r[i].key);
}

/*
 * A reader's probe started from an old hint; before it reads the next slot
 * the owner moved the hint on and retention deleted the slots behind it
 * (paused at chain.before_slot_probe). Its 404 is no head: the re-read
 * watermark hints past it, the probe starts again and finds the newest
 * head. The chain behind it is gone (no checkpoint covers slots in this
 * build), so restore and verify refuse, naming the missing slot: never the
 * old hint's state. Without the re-read, restore returns that state.
 */
static void test_slot_reader_restarts_after_hint_moved(void **state)
{
	struct tenant t;
	struct ws_head h;
	struct race r;
	char *out;
	int rc;
	(void)state;
	slot_tenant(&t, "slots_race", 0, false);
	r = (struct race){ &t, TAILS - 1, KEPT + 1, TAILS - 2, 0, 0, 0 };
	put_wm(&t, KEPT, 1, LANE_A);
	assert_int_equal(ws_fault_add("chain.before_slot_probe", 1, WS_FAULT_PAUSE, race_move, &r), 0);
	rc = ws_head_load(t.e.sink->store, TENANT, WS_HEAD_HOLES, &h);
	ws_fault_disarm();
	assert_int_equal(r.fired, 1);
	if (rc)
		fail_msg("head: %s", ws_errmsg());
	assert_int_equal(h.restarts, 1);
	assert_int_equal(h.head.seq, TAILS);
	ws_head_free(&h);

	/* Again under restore, from the old hint with every slot back. */
	for (int i = KEPT; i < TAILS; i++)
		put_slot(&t, i);
	put_wm(&t, KEPT, 1, LANE_A);
	r.fired = 0;
	out = wt_out_path(&t.e);
	assert_int_equal(ws_fault_add("chain.before_slot_probe", 1, WS_FAULT_PAUSE, race_move, &r), 0);
	rc = ws_restore(t.e.sink, TENANT, NULL, out);
	ws_fault_disarm();
	assert_int_equal(r.fired, 1);
	if (rc == 0)
		fail_msg("restore succeeded: it restored a state older than the head (the old hint's?)");
	if (!strstr(ws_errmsg(), t.r[TAILS - 2].key))
		fail_msg("restore's error does not name the missing slot %s: %s", t.r[TAILS - 2].key, ws_errmsg());
	assert_int_equal(access(out, F_OK), -1);
	free(out);
	tenant_free(&t);
}

/*
 * The probe met its 404 at the head (paused at chain.after_slot_probe);
 * meanwhile the owner created three more slots and moved the hint to the
 * last: the re-read watermark hints past the head found, the probe starts
 * again, and restore-latest is the newest state. Without the re-read it is
 * the state at the 404.
 */
static void test_slot_probe_restarts_on_newer_hint(void **state)
{
	struct tenant t;
	struct race r;
	(void)state;
	slot_tenant(&t, "slots_newer", 0, false);
	for (int i = TAILS - 3; i < TAILS; i++)
		del_obj(&t.e, t.r[i].key);
	put_wm(&t, KEPT, 1, LANE_A);
	r = (struct race){ &t, TAILS - 1, 0, 0, TAILS - 3, TAILS - 1, 0 };
	assert_int_equal(ws_fault_add("chain.after_slot_probe", 1, WS_FAULT_PAUSE, race_move, &r), 0);
	uint64_t got = wt_restore_hash(&t.e, TENANT, NULL, NULL);
	ws_fault_disarm();
	assert_int_equal(r.fired, 1);
	if (got != t.r[TAILS - 1].hash)
		fail_msg("restore-latest is %s", got == t.r[TAILS - 4].hash ?
			 "the state the probe's 404 found: the watermark was not read again" : "no recorded state");
	check_all(&t, TAILS - 1, "after the restart");
	tenant_free(&t);
}

/* A watermark hinting at a slot of lane A at seq that is not there (its
 * hash made up): the probe starts past it. */
static void put_wm_at(struct tenant *t, uint64_t seq)
{
	struct rec *r = &t->r[TAILS - 1], keep = *r;
	r->seq = seq;
	assert_int_equal(ws_key_slot(r->key, sizeof(r->key), TENANT, 1, 1, LANE_A, seq), 0);
	memset(r->sha, 0x5a, WS_SHA256_LEN);
	put_wm(t, TAILS - 1, 1, LANE_A);
	*r = keep;
}

struct mover {
	struct tenant *t;
	uint64_t seq;
	unsigned fired;
};

/* Each probe's 404: the hint moves past the head it found. */
static void hint_runs_ahead(const char *site, void *arg)
{
	struct mover *m = arg;
	(void)site;
	m->fired++;
	m->seq += 3;
	put_wm_at(m->t, m->seq);
}

/* A hint that keeps moving past every head found: the probe starts over
 * WS_HEAD_RESTARTS_MAX times, then gives up naming the tenant (-EAGAIN);
 * restore writes nothing. */
static void test_slot_restarts_bounded(void **state)
{
	struct tenant t;
	struct ws_head h;
	struct mover m;
	char *out;
	int rc;
	(void)state;
	slot_tenant(&t, "slots_bound", 0, false);
	m = (struct mover){ &t, TAILS + 10, 0 };
	put_wm_at(&t, m.seq);
	assert_int_equal(ws_fault_add_every("chain.after_slot_probe", 1, WS_FAULT_PAUSE, hint_runs_ahead, &m), 0);
	rc = ws_head_load(t.e.sink->store, TENANT, WS_HEAD_HOLES, &h);
	assert_int_equal(rc, -EAGAIN);
	assert_int_equal(h.restarts, WS_HEAD_RESTARTS_MAX);
	assert_int_equal(m.fired, WS_HEAD_RESTARTS_MAX + 1);
	if (!strstr(ws_errmsg(), "tenant " TENANT))
		fail_msg("the error does not name the tenant: %s", ws_errmsg());
	ws_head_free(&h);
	out = wt_out_path(&t.e);
	rc = ws_restore(t.e.sink, TENANT, NULL, out);
	ws_fault_disarm();
	assert_int_equal(rc, -EAGAIN);
	assert_int_equal(access(out, F_OK), -1);
	free(out);
	tenant_free(&t);
}

/* ---- forged and unreadable slots --------------------------------------- */

/* Replace key's bytes for one check, then put the original back. */
struct saved {
	char key[WS_KEY_MAX];
	uint8_t *bytes;
	size_t len;
};

static void save(const struct tenant *t, const char *key, struct saved *s)
{
	char *p = wt_path(t->e.sink_dir, key);
	snprintf(s->key, sizeof(s->key), "%s", key);
	s->bytes = wt_read_file(p, &s->len);
	free(p);
}

static void restore_saved(const struct tenant *t, struct saved *s)
{
	if (s->bytes)
		wt_sink_put(&t->e, s->key, s->bytes, s->len);
	else
		del_obj(&t->e, s->key);
	free(s->bytes);
	s->bytes = NULL;
}

/* Re-encode slot i with one change, at key. */
static void put_slot_changed(struct tenant *t, int i, const char *key, const char *tenant, uint64_t seq, uint64_t pg,
			     uint64_t lane)
{
	struct ws_fmt_manifest m;
	struct iovec iov[64];
	struct ws_buf b;
	int n = 0;
	assert_int_equal(ws_fmt_manifest_decode(t->r[i].bytes, (size_t)t->r[i].len, &m), 0);
	for (uint32_t k = 0; k < m.batch_count; k++)
		if (ws_fmt_objref_inline(&m.batches[k])) {
			iov[n].iov_base = t->r[i].bytes + m.batches[k].inline_off;
			iov[n++].iov_len = (size_t)m.batches[k].length;
		}
	m.inline_iov = iov;
	m.inline_iovcnt = n;
	snprintf(m.tenant, sizeof(m.tenant), "%s", tenant);
	m.wm_seq = seq;
	m.pointer_generation = pg;
	m.lane = lane;
	ws_buf_init(&b, 64u << 20);
	assert_int_equal(ws_fmt_manifest_encode(&m, &b), 0);
	wt_sink_put(&t->e, key, b.data, b.len);
	ws_buf_free(&b);
	m.inline_iov = NULL;
	ws_fmt_manifest_free(&m);
}

/* Patch the close record's closer to a lower token, its trailer recomputed. */
static void put_close_lower(struct tenant *t)
{
	uint8_t *b = malloc(t->close_len[0]), pat[24];
	size_t off;
	memcpy(b, t->close_bytes[0], t->close_len[0]);
	ws_put_le64(pat, 1);
	ws_put_le64(pat + 8, 2);
	ws_put_le64(pat + 16, LANE_B);
	for (off = 0; off + 24 <= t->close_len[0] && memcmp(b + off, pat, 24) != 0; off++)
		;
	assert_true(off + 24 <= t->close_len[0]);
	ws_put_le64(b + off + 8, 0); /* closer (1, 0) over the lane's (1, 1): neither higher */
	ws_put_le64(b + t->close_len[0] - 8, ws_xxh64(b, t->close_len[0] - 8));
	wt_sink_put(&t->e, t->close_key[0], b, t->close_len[0]);
	free(b);
}

static void test_slot_forged_objects(void **state)
{
	struct tenant t;
	struct saved s;
	const int i = KEPT + 2;
	const char *k = NULL;
	(void)state;
	slot_tenant(&t, "slots_forged", KEPT + 5, false);
	put_wm(&t, KEPT, 1, LANE_A);
	check_all(&t, TAILS - 1, "before forging");
	k = t.r[i].key;

	/* Another slot's bytes at this key. */
	save(&t, k, &s);
	wt_sink_put(&t.e, k, t.r[i + 1].bytes, (size_t)t.r[i + 1].len);
	refused(&t, k, NULL, "a slot at another key");
	restore_saved(&t, &s);

	/* The head slot (lane B) with one field not its key's, its link and
	 * frames intact: only the binding of bytes to key refuses these. */
	{
		const struct rec *hr = &t.r[TAILS - 1];
		static const char *const what[] = { "another tenant's slot", "a slot of another sequence",
						     "a slot of another token", "a slot of another lane" };
		for (int v = 0; v < 4; v++) {
			save(&t, hr->key, &s);
			put_slot_changed(&t, TAILS - 1, hr->key, v == 0 ? "other" : TENANT,
					 hr->seq + (v == 1 ? 7 : 0), v == 2 ? 5 : 2, v == 3 ? LANE_C : LANE_B);
			refused(&t, hr->key, NULL, what[v]);
			if (!strstr(ws_errmsg(), "does not name") && !strstr(ws_errmsg(), "belongs to"))
				fail_msg("%s: refused for another reason: %s", what[v], ws_errmsg());
			restore_saved(&t, &s);
		}
	}

	/* A damaged slot: one byte flipped. */
	save(&t, k, &s);
	{
		uint8_t *b = malloc(s.len);
		memcpy(b, s.bytes, s.len);
		b[s.len / 2] ^= 0x40;
		wt_sink_put(&t.e, k, b, s.len);
		free(b);
	}
	refused(&t, k, NULL, "a damaged slot");
	restore_saved(&t, &s);

	/* A close record by a lower token. */
	save(&t, t.close_key[0], &s);
	put_close_lower(&t);
	refused(&t, t.close_key[0], NULL, "a close by a lower token");
	restore_saved(&t, &s);

	/* A close record whose prev is not the slot before it. */
	save(&t, t.close_key[0], &s);
	encode_close(&t, 0, 1, LANE_A, 2, LANE_B, &t.r[t.close_seq - 3]);
	refused(&t, t.close_key[0], NULL, "a close after the wrong slot");
	restore_saved(&t, &s);

	/* A close record of another sequence at this one's key. */
	save(&t, t.close_key[0], &s);
	{
		struct ws_fmt_close c;
		struct ws_buf b;
		assert_int_equal(ws_fmt_close_decode(s.bytes, s.len, &c), 0);
		c.seq++;
		ws_buf_init(&b, 1u << 16);
		assert_int_equal(ws_fmt_close_encode(&c, &b), 0);
		wt_sink_put(&t.e, t.close_key[0], b.data, b.len);
		ws_buf_free(&b);
	}
	refused(&t, t.close_key[0], NULL, "a close of another sequence");
	if (!strstr(ws_errmsg(), "its sequence is not its key's"))
		fail_msg("a close of another sequence: refused for another reason: %s", ws_errmsg());
	restore_saved(&t, &s);

	/* A close record of another lane at this lane's key (B's close, as if
	 * lane A's). */
	save(&t, t.close_key[0], &s);
	{
		struct ws_fmt_close c;
		struct ws_buf b;
		assert_int_equal(ws_fmt_close_decode(s.bytes, s.len, &c), 0);
		c.pointer_generation = 2;
		c.lane = LANE_B;
		c.closer_pg = 3;
		c.closer_lane = LANE_C;
		ws_buf_init(&b, 1u << 16);
		assert_int_equal(ws_fmt_close_encode(&c, &b), 0);
		wt_sink_put(&t.e, t.close_key[0], b.data, b.len);
		ws_buf_free(&b);
	}
	refused(&t, t.close_key[0], NULL, "another lane's close");
	restore_saved(&t, &s);

	/* A hint naming a slot that is not there. */
	put_wm(&t, i, 1, LANE_A);
	save(&t, k, &s);
	del_obj(&t.e, k);
	refused(&t, k, NULL, "a hint naming an absent slot");
	restore_saved(&t, &s);
	put_wm(&t, KEPT, 1, LANE_A);

	/* A read that fails otherwise than 404 mid-probe: a link where the
	 * slot's file is (to the slot's own bytes), which the file store
	 * never follows and refuses to read (WS_EFORMAT). */
	save(&t, k, &s);
	{
		char *p = wt_path(t.e.sink_dir, k), *copy = NULL;
		assert_int_not_equal(asprintf(&copy, "%s.bytes", p), -1);
		assert_int_equal(rename(p, copy), 0);
		assert_int_equal(symlink(copy, p), 0);
		refused(&t, k, NULL, "a slot that cannot be read");
		assert_int_equal(unlink(p), 0);
		assert_int_equal(unlink(copy), 0);
		free(copy);
		free(p);
	}
	restore_saved(&t, &s);

	check_all(&t, TAILS - 1, "after every forgery was undone");
	tenant_free(&t);
}

/* Restore-latest refuses a head behind the latest committed checkpoint's
 * cut (docs/SLOTS.md item 3d); --frame still restores; verify reports it. */
static void test_slot_head_behind_cut(void **state)
{
	struct tenant t;
	struct ws_checkpoint_info ci;
	(void)state;
	memset(&t, 0, sizeof(t));
	ship(&t, "slots_cut");
	assert_int_equal(ws_checkpoint_take(t.e.sink, NULL, &ci), 0);
	assert_true(ci.committed);
	/* A lane opened on a hint two manifests behind the cut, nothing in it:
	 * what a lost watermark write and retention could leave. */
	put_wm(&t, TAILS - 3, 1, LANE_A);
	refused(&t, t.r[TAILS - 3].key, t.r[TAILS - 1].key, "a head behind the cut");
	{
		struct ws_restore_opts o = { 0 };
		o.frame = t.r[TAILS - 3].last_frame;
		assert_true(wt_restore_hash(&t.e, TENANT, &o, NULL) == t.r[TAILS - 3].hash);
	}
	tenant_free(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_slot_lane_every_hint),
		cmocka_unit_test(test_slot_close_switches_lane),
		cmocka_unit_test(test_slot_two_closes_in_a_row),
		cmocka_unit_test(test_slot_lane_opened_empty),
		cmocka_unit_test(test_slot_hole_is_lost_write),
		cmocka_unit_test(test_slot_reader_restarts_after_hint_moved),
		cmocka_unit_test(test_slot_probe_restarts_on_newer_hint),
		cmocka_unit_test(test_slot_restarts_bounded),
		cmocka_unit_test(test_slot_forged_objects),
		cmocka_unit_test(test_slot_head_behind_cut),
	};
	return WT_RUN_GROUP(tests, NULL, NULL);
}
