/*
 * Manifest slots (docs/SLOTS.md, docs/FORMAT.md "Watermark" version 4,
 * "Close record", "Keys"): this walship writes none, and only restore and
 * verify read them (core/slots.c; test_core_slots.c), so a tenant whose
 * watermark is version 4 is refused by every other reader and by the
 * shipper, loudly and whole, and a slot key met in a listing is never
 * taken for a manifest (nor deleted). A real file:// sink shipped by a real
 * stream, then turned into a slot tenant with the encoders; the sink's bytes
 * are compared before and after each command.
 */
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "coreutil.h"
#include "follow.h"
#include "sink.h"
#include "ws_format.h"
#include "ws_hash.h"

#define TENANT "ledger"
#define LANE 0x5107c0ffee000001ull

/* ---- the sink's bytes: every file's path, size and hash, in order ------ */

static char **snap_lines;
static size_t snap_n, snap_cap;
static size_t snap_root;

static int snap_one(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
	/* The file store's lock files (empty, .lock.*: store_file.c) are not objects. */
	if (type != FTW_F || strncmp(path + ftw->base, ".lock.", 6) == 0)
		return 0;
	size_t len = 0;
	uint8_t *b = wt_read_file(path, &len);
	assert_non_null(b);
	assert_int_equal(len, (size_t)sb->st_size);
	if (snap_n == snap_cap) {
		snap_cap = snap_cap ? snap_cap * 2 : 64;
		snap_lines = realloc(snap_lines, snap_cap * sizeof(*snap_lines));
		assert_non_null(snap_lines);
	}
	assert_int_not_equal(asprintf(&snap_lines[snap_n++], "%s %zu %016llx", path + snap_root, len,
				      (unsigned long long)ws_xxh64(b, len)), -1);
	free(b);
	return 0;
}

static int line_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* One line per file under dir (relative path, size, XXH3-64), sorted. */
static char *sink_state(const char *dir)
{
	size_t total = 1;
	char *out;
	snap_n = 0;
	snap_root = strlen(dir);
	assert_int_equal(nftw(dir, snap_one, 16, FTW_PHYS), 0);
	qsort(snap_lines, snap_n, sizeof(*snap_lines), line_cmp);
	for (size_t i = 0; i < snap_n; i++)
		total += strlen(snap_lines[i]) + 1;
	out = calloc(1, total);
	assert_non_null(out);
	for (size_t i = 0; i < snap_n; i++) {
		strcat(out, snap_lines[i]);
		strcat(out, "\n");
		free(snap_lines[i]);
	}
	return out;
}

/* The lines of a not in b, printed (how many). */
static unsigned lines_missing(const char *a, const char *b, const char *what, const char *how)
{
	unsigned n = 0;
	for (const char *l = a; *l;) {
		const char *nl = strchr(l, '\n');
		char line[WS_KEY_MAX + 64];
		snprintf(line, sizeof(line), "\n%.*s\n", (int)(nl - l), l);
		if (!strstr(b, line) && strncmp(b, line + 1, strlen(line + 1)) != 0) {
			fprintf(stderr, "%s %s: %s", what, how, line + 1);
			n++;
		}
		l = nl + 1;
	}
	return n;
}

static void state_same(const char *before, const char *dir, const char *what)
{
	char *now = sink_state(dir);
	if (strcmp(before, now) != 0) {
		unsigned n = lines_missing(before, now, what, "changed or removed");
		n += lines_missing(now, before, what, "wrote");
		fail_msg("%s changed the sink (%u objects, listed above)", what, n);
	}
	free(now);
}

/* ---- a shipped tenant, turned into one with manifest slots ------------- */

static struct ws_stream *stream_for(struct wt_env *e)
{
	struct ws_stream_config c;
	struct ws_stream *st;
	int err = 0;
	memset(&c, 0, sizeof(c));
	c.tenant = TENANT;
	c.db_path = e->db;
	c.epoch = 1;
	c.pointer_generation = 1;
	c.wal_checkpoint_bytes = UINT64_MAX;
	st = ws_stream_open(e->sink, &c, &err);
	if (!st)
		fail_msg("stream: %s (%s)", ws_strerror(err), ws_errmsg());
	return st;
}

/* Ship two tails (a checkpoint between them), then: watermark version 4
 * naming the head as its hint, the slot after it (a version 4 manifest) and
 * a close record after that, as a slot-aware writer would leave them. */
static void slot_tenant(struct wt_env *e, char slot_key[WS_KEY_MAX], char close_key[WS_KEY_MAX])
{
	struct ws_stream *st = stream_for(e);
	struct ws_checkpoint_info ci;
	struct ws_fmt_watermark w;
	struct ws_fmt_manifest m;
	struct ws_fmt_objref ref;
	struct ws_fmt_close c;
	struct ws_outcome o;
	struct ws_buf b;
	size_t len = 0;
	char *wp;
	uint8_t *raw;

	wt_write_txn(e->w, 20, 300);
	wt_tail_ok(st, &o);
	assert_int_equal(ws_checkpoint_take(e->sink, NULL, &ci), 0);
	assert_true(ci.committed);
	wt_write_txn(e->w, 5, 300);
	wt_tail_ok(st, &o);
	ws_stream_close(st);

	wp = wt_path(e->sink_dir, TENANT "/wm");
	raw = wt_read_file(wp, &len);
	assert_non_null(raw);
	assert_int_equal(ws_fmt_watermark_decode(raw, len, &w), 0);
	assert_true(w.version == 2);
	ws_buf_init(&b, 1u << 20);

	/* Slot seq + 1 in the lane: one tail on top of the head. */
	memset(&m, 0, sizeof(m));
	snprintf(m.tenant, sizeof(m.tenant), "%s", TENANT);
	m.epoch = 1;
	m.pointer_generation = 1;
	m.wm_seq = w.seq + 1;
	m.time_ms = w.time_ms + 1;
	m.durable_ms = w.time_ms + 2;
	m.lane = LANE;
	m.gen = w.gen;
	m.kind = WS_MANIFEST_CONTINUE;
	m.first_frame = w.last_frame + 1;
	m.last_frame = w.last_frame + 1;
	m.valid_from_frame = m.first_frame;
	snprintf(m.prev_key, sizeof(m.prev_key), "%s", w.manifest_key);
	memcpy(m.prev_sha, w.manifest_sha, WS_SHA256_LEN);
	m.prev_length = w.manifest_length;
	memset(&ref, 0, sizeof(ref));
	snprintf(ref.key, sizeof(ref.key), "%s/e1-p1/l%016llx/b-not-stored", TENANT, (unsigned long long)LANE);
	ref.first = m.first_frame;
	ref.count = 1;
	ref.length = 96 + 24 + w.gen.page_size;
	m.batches = &ref;
	m.batch_count = 1;
	assert_int_equal(ws_fmt_manifest_encode(&m, &b), 0);
	assert_int_equal(ws_key_slot(slot_key, WS_KEY_MAX, TENANT, 1, 1, LANE, w.seq + 1), 0);
	wt_sink_put(e, slot_key, b.data, b.len);

	/* Closed after it by a higher pointer generation. */
	memset(&c, 0, sizeof(c));
	snprintf(c.tenant, sizeof(c.tenant), "%s", TENANT);
	c.epoch = 1;
	c.pointer_generation = 1;
	c.lane = LANE;
	c.seq = w.seq + 2;
	c.closer_epoch = 1;
	c.closer_pg = 2;
	c.closer_lane = LANE + 1;
	snprintf(c.prev_key, sizeof(c.prev_key), "%s", slot_key);
	ws_sha256(b.data, b.len, c.prev_sha);
	c.prev_length = b.len;
	c.time_ms = m.durable_ms + 1;
	assert_int_equal(ws_fmt_close_encode(&c, &b), 0);
	assert_int_equal(ws_key_slot(close_key, WS_KEY_MAX, TENANT, 1, 1, LANE, w.seq + 2), 0);
	wt_sink_put(e, close_key, b.data, b.len);

	/* The watermark: the lane's opener, its hint the head shipped. */
	w.lane = LANE;
	assert_int_equal(ws_fmt_watermark_encode(&w, &b), 0);
	assert_int_equal(ws_get_le32(b.data + 8), 4);
	wt_sink_put(e, TENANT "/wm", b.data, b.len);
	ws_buf_free(&b);
	free(raw);
	free(wp);
}

static void refused_msg(int rc, const char *what)
{
	if (rc != WS_EFORMAT)
		fail_msg("%s gave %d (%s), not a refusal", what, rc, ws_errmsg());
	if (!strstr(ws_errmsg(), "tenant " TENANT " uses manifest slots") ||
	    !strstr(ws_errmsg(), "does not read yet"))
		fail_msg("%s's error does not say the tenant uses manifest slots: %s", what, ws_errmsg());
}

struct seen {
	unsigned tenants, errors;
	char err[1024];
};

static int tenant_cb(const struct ws_tenant_info *info, void *arg)
{
	struct seen *s = arg;
	s->tenants++;
	if (info->error) {
		s->errors++;
		snprintf(s->err, sizeof(s->err), "%s", info->error);
	}
	return 0;
}

static void problem_cb(const char *tenant, const char *key, int err, const char *detail, void *arg)
{
	struct seen *s = arg;
	(void)tenant, (void)key, (void)err;
	if (s->errors++ == 0)
		snprintf(s->err, sizeof(s->err), "%s", detail);
}

/*
 * ls, checkpoint, retention, forget, a follower and the shipper's own tail
 * each refuse the tenant, saying it uses manifest slots, and leave the sink
 * as it was (the checkpoint: its tenant's objects and every committed
 * checkpoint; see below). Restore and verify read it: they find the slot
 * as the head (the close after it leads to an empty lane) and refuse it,
 * naming it, for it does not continue the checksum chain (a made-up tail
 * over a batch that is not stored), writing nothing.
 */
static void test_slot_tenant_refused(void **state)
{
	struct wt_env e;
	char slot_key[WS_KEY_MAX], close_key[WS_KEY_MAX], *before, *out, *tdir;
	struct ws_retention_report rr;
	struct ws_forget_report fr;
	struct ws_checkpoint_info ci;
	struct ws_follow_config fc;
	struct ws_follow_ops ops = { wt_follow_no_image, wt_follow_no_apply };
	struct ws_follow *f = NULL;
	struct ws_stream *st;
	struct ws_outcome o;
	struct seen s;
	unsigned handed = 0;
	int rc;
	(void)state;

	wt_env_init(&e, "slots_refused", 0);
	slot_tenant(&e, slot_key, close_key);
	before = sink_state(e.sink_dir);
	assert_non_null(strstr(before, slot_key + strlen(TENANT)));
	assert_non_null(strstr(before, close_key + strlen(TENANT)));

	out = wt_path(e.out_dir, "r.db");
	rc = ws_restore(e.sink, TENANT, NULL, out);
	if (rc == 0 || !strstr(ws_errmsg(), slot_key))
		fail_msg("restore: %d (%s), not a refusal naming %s", rc, ws_errmsg(), slot_key);
	assert_int_equal(access(out, F_OK), -1);
	state_same(before, e.sink_dir, "restore");

	memset(&s, 0, sizeof(s));
	rc = ws_verify(e.sink, TENANT, problem_cb, &s);
	if (rc == 0 || s.errors == 0 || !strstr(s.err, slot_key))
		fail_msg("verify: %d, %u problems (%s), not one naming %s", rc, s.errors, s.err, slot_key);
	assert_int_not_equal(ws_verify(e.sink, NULL, NULL, NULL), 0);
	state_same(before, e.sink_dir, "verify");

	/* ls: the tenant is listed with the refusal as its error, and the
	 * listing fails with it. */
	memset(&s, 0, sizeof(s));
	rc = ws_list_tenants(e.sink, NULL, tenant_cb, &s);
	assert_int_equal(s.tenants, 1);
	assert_int_equal(s.errors, 1);
	if (!strstr(s.err, "uses manifest slots"))
		fail_msg("ls names the tenant with: %s", s.err);
	assert_int_not_equal(rc, 0);
	state_same(before, e.sink_dir, "ls");

	{
		enum ws_history_end end;
		refused_msg(ws_list_generations(e.sink, TENANT, NULL, NULL, &end), "ls TENANT");
		state_same(before, e.sink_dir, "ls TENANT");
	}
	{
		uint64_t n = 0;
		refused_msg(ws_verify_orphans(e.sink, TENANT, NULL, NULL, &n), "verify --orphans");
		state_same(before, e.sink_dir, "verify --orphans");
	}

	refused_msg(ws_retention_run(e.sink, false, NULL, NULL, &rr), "retention");
	state_same(before, e.sink_dir, "retention");
	refused_msg(ws_retention_run(e.sink, true, NULL, NULL, &rr), "retention --dry-run");
	state_same(before, e.sink_dir, "retention --dry-run");

	refused_msg(ws_tenant_forget(e.sink, TENANT, &fr), "forget");
	state_same(before, e.sink_dir, "forget");

	memset(&fc, 0, sizeof(fc));
	fc.tenant = TENANT;
	assert_int_equal(ws_follow_open(e.sink, &fc, &ops, NULL, &f), 0);
	refused_msg(ws_follow_poll(f, &handed), "follow");
	assert_int_equal(handed, 0);
	ws_follow_close(f);
	state_same(before, e.sink_dir, "follow");

	/* The shipper: its fencing read refuses before anything is uploaded. */
	wt_write_txn(e.w, 5, 300);
	st = stream_for(&e);
	refused_msg(ws_stream_tail_frames(st, &o), "a tail");
	refused_msg(ws_stream_tail_frames(st, &o), "a second tail");
	ws_stream_close(st);
	state_same(before, e.sink_dir, "a tail");

	/* A checkpoint refuses too. It allocates its ID before it reads the
	 * cut (ckpt_take.c take_allocate): that bookkeeping under
	 * checkpoints/ may move, nothing of the tenant's and no Commit. */
	refused_msg(ws_checkpoint_take(e.sink, NULL, &ci), "checkpoint");
	assert_false(ci.committed);
	tdir = wt_path(e.sink_dir, TENANT);
	{
		char *tb = sink_state(tdir), *again;
		/* The tenant's part of before: its lines, "/<tenant>/..." */
		state_same(tb, tdir, "checkpoint (the tenant)");
		free(tb);
		again = sink_state(e.sink_dir);
		for (char *l = before; *l;) {
			char *nl = strchr(l, '\n');
			*nl = '\0';
			if (strncmp(l, "/" TENANT "/", strlen(TENANT) + 2) == 0 || strstr(l, "/committed/"))
				if (!strstr(again, l))
					fail_msg("checkpoint changed or removed %s", l);
			*nl = '\n';
			l = nl + 1;
		}
		/* No new Commit index: the committed checkpoints are those before. */
		for (char *l = again; *l;) {
			char *nl = strchr(l, '\n');
			*nl = '\0';
			if ((strncmp(l, "/" TENANT "/", strlen(TENANT) + 2) == 0 || strstr(l, "/committed/")) &&
			    !strstr(before, l))
				fail_msg("checkpoint wrote %s", l);
			*nl = '\n';
			l = nl + 1;
		}
		free(again);
	}
	free(tdir);
	free(out);
	free(before);
	wt_env_free(&e);
}

/* The lines of before naming the slot and the close record are in the sink now. */
static void slots_kept(const char *before, const struct wt_env *e, const char *slot_key, const char *close_key,
		       const char *what)
{
	char *now = sink_state(e->sink_dir);
	const char *keys[2] = { slot_key, close_key };
	for (int i = 0; i < 2; i++) {
		const char *l = strstr(before, keys[i] + strlen(TENANT));
		assert_non_null(l);
		const char *nl = strchr(l, '\n');
		char line[WS_KEY_MAX + 64];
		snprintf(line, sizeof(line), "%.*s", (int)(nl - l), l);
		if (!strstr(now, line))
			fail_msg("%s changed or deleted %s", what, keys[i]);
	}
	free(now);
}

/*
 * A slot key and a close record under a tenant whose watermark is an older
 * version (what a tenant forgotten by a slot-aware walship and shipped anew
 * without slots would leave): never a manifest to the sweeps (their
 * sequence is 0 to ws_key_manifest_seq and ws_key_object_seq); retention
 * and the orphan listing refuse them, naming the key, and delete nothing;
 * restore and verify, which do not list, are unaffected.
 */
static void test_stray_slot_keys_kept(void **state)
{
	struct wt_env e;
	char slot_key[WS_KEY_MAX], close_key[WS_KEY_MAX], *before, *wp, *out;
	struct ws_retention_report rr;
	struct ws_checkpoint_info ci;
	uint64_t n = 0;
	size_t len = 0;
	uint8_t *legacy;
	int rc;
	(void)state;

	wt_env_init(&e, "slots_stray", 0);
	wp = wt_path(e.sink_dir, TENANT "/wm");
	slot_tenant(&e, slot_key, close_key);
	{
		/* The watermark of the head shipped, without the lane: version 2 as shipped. */
		struct ws_fmt_watermark w;
		struct ws_buf b;
		legacy = wt_read_file(wp, &len);
		assert_non_null(legacy);
		assert_int_equal(ws_fmt_watermark_decode(legacy, len, &w), 0);
		w.lane = 0;
		w.version = 2;
		ws_buf_init(&b, 1u << 16);
		assert_int_equal(ws_fmt_watermark_encode(&w, &b), 0);
		wt_sink_put(&e, TENANT "/wm", b.data, b.len);
		ws_buf_free(&b);
	}
	assert_int_equal(ws_key_manifest_seq(slot_key), 0);
	assert_int_equal(ws_key_object_seq(slot_key), 0);
	assert_int_equal(ws_key_manifest_seq(close_key), 0);
	assert_int_equal(ws_key_object_seq(close_key), 0);
	/* A checkpoint over it (its cut: the head), so that retention sweeps. */
	assert_int_equal(ws_checkpoint_take(e.sink, NULL, &ci), 0);
	assert_true(ci.committed);
	before = sink_state(e.sink_dir);

	/* Retention deletes history behind the cut as before, and refuses at
	 * the first slot key its sweep of the tenant's keys meets: both kept. */
	rc = ws_retention_run(e.sink, false, NULL, NULL, &rr);
	if (rc != WS_EFORMAT || !strstr(ws_errmsg(), "is a manifest slot") || !strstr(ws_errmsg(), slot_key))
		fail_msg("retention: %d (%s)", rc, ws_errmsg());
	slots_kept(before, &e, slot_key, close_key, "retention");
	free(before);
	before = sink_state(e.sink_dir);
	rc = ws_verify_orphans(e.sink, TENANT, NULL, NULL, &n);
	if (rc != WS_EFORMAT || !strstr(ws_errmsg(), "is a manifest slot"))
		fail_msg("orphans: %d (%s)", rc, ws_errmsg());
	state_same(before, e.sink_dir, "verify --orphans");

	/* Restore and verify read the chain from the watermark, no listing. */
	out = wt_path(e.out_dir, "r.db");
	assert_int_equal(ws_restore(e.sink, TENANT, NULL, out), 0);
	assert_int_equal(ws_verify(e.sink, TENANT, NULL, NULL), 0);
	state_same(before, e.sink_dir, "restore and verify");
	free(before);

	/* Forgotten: the removal sweep meets them and refuses, deleting none. */
	{
		struct ws_forget_report fr;
		assert_int_equal(ws_tenant_forget(e.sink, TENANT, &fr), 0);
		before = sink_state(e.sink_dir);
		rc = ws_retention_run(e.sink, false, NULL, NULL, &rr);
		if (rc != WS_EFORMAT || !strstr(ws_errmsg(), "is a manifest slot"))
			fail_msg("retention after forget: %d (%s)", rc, ws_errmsg());
		slots_kept(before, &e, slot_key, close_key, "the removal sweep");
		free(before);
	}
	free(out);
	free(legacy);
	free(wp);
	wt_env_free(&e);
}

/* The slot key: its shape exactly, and nothing else. */
static void test_slot_keys(void **state)
{
	char k[WS_KEY_MAX];
	uint64_t ep, pg, lane, seq;
	(void)state;

	assert_int_equal(ws_key_slot(k, sizeof(k), "app", 12, 3, 0xabcdef0123456789ull, 0x42), 0);
	assert_string_equal(k, "app/e12-p3/labcdef0123456789/m0000000000000042");
	assert_true(ws_key_slot_parse(k, "app", &ep, &pg, &lane, &seq));
	assert_int_equal(ep, 12);
	assert_int_equal(pg, 3);
	assert_int_equal(lane, 0xabcdef0123456789ull);
	assert_int_equal(seq, 0x42);
	assert_true(ws_key_slot_any(k));
	assert_int_equal(ws_key_slot(k, sizeof(k), "app", UINT64_MAX, 0, 1, UINT64_MAX), 0);
	assert_true(ws_key_slot_parse(k, "app", &ep, &pg, &lane, &seq));
	assert_true(ep == UINT64_MAX && pg == 0 && lane == 1 && seq == UINT64_MAX);
	assert_int_equal(ws_key_slot(k, 20, "app", 12, 3, 1, 1), WS_ETOOBIG);

	static const char *const bad[] = {
		"app/e12-p3/labcdef0123456789/m0000000000000042x",   /* something after */
		"app/e12-p3/labcdef0123456789/m000000000000042",     /* short */
		"app/e12-p3/lABCDEF0123456789/m0000000000000042",    /* upper-case hex */
		"app/e12-p3/labcdef0123456789/m000000000000004G",    /* not hex */
		"app/e12-p3/l0000000000000000/m0000000000000042",    /* lane 0 */
		"app/e12-p3/labcdef0123456789/m0000000000000000",    /* seq 0 */
		"app/e012-p3/labcdef0123456789/m0000000000000042",   /* not as %llu writes it */
		"app/e12-p/labcdef0123456789/m0000000000000042",     /* no number */
		"app/e18446744073709551616-p3/labcdef0123456789/m0000000000000042", /* 2^64 */
		"app/e12-p3/g00000001-0000000100000002/m0000000000000042-0011223344556677", /* a manifest */
		"app/e12-p3/labcdef0123456789/m0000000000000042-0011223344556677",
		"app/e12-p3/labcdef0123456789/b0000000000000042",
		"apps/e12-p3/labcdef0123456789/m0000000000000042",   /* another tenant */
		"app/x/e12-p3/labcdef0123456789/m0000000000000042",
		"app/wm",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (ws_key_slot_parse(bad[i], "app", &ep, &pg, &lane, &seq))
			fail_msg("%s parsed as a slot key of app", bad[i]);
	assert_true(ws_key_slot_any("apps/e12-p3/labcdef0123456789/m0000000000000042"));
	assert_false(ws_key_slot_any("app/wm"));
	assert_false(ws_key_slot_any("noslash"));
	/* Today's keys keep their sequences; a slot key has none to them. */
	assert_int_equal(ws_key_manifest_seq("app/e1-p0/g00000000-0000000100000002/m0000000000000005-0011223344556677"),
			 5);
	assert_int_equal(ws_key_manifest_seq("app/e1-p0/labcdef0123456789/m0000000000000005"), 0);
	assert_int_equal(ws_key_object_seq("app/e1-p0/labcdef0123456789/m0000000000000005"), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_slot_keys),
		cmocka_unit_test(test_slot_tenant_refused),
		cmocka_unit_test(test_stray_slot_keys_kept),
	};
	return WT_RUN_GROUP(tests, NULL, NULL);
}
