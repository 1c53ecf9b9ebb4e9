/*
 * Conditional-write probes a killed process left (core/probes.c,
 * docs/CHECKPOINTS.md "Orphans"): the next checkpoint and retention remove
 * those older than WS_PROBE_STALE_MS and keep a fresh one (a live
 * process's), so `verify --fail-on-orphans` passes again after one kill.
 *
 * The checkpoint store's probe is left by a real kill (a child SIGKILLed
 * at ckpt.probe.after_create, its shared open over the file store). The S3
 * backend's probe (_walship/probe-<16 hex>) is written here directly: the
 * file store never makes one (the kill at s3.probe.after_create is
 * test_core_checkpoint_s3's, on radosgw). Age is the store's
 * last-modified time: a probe is made old by setting its file's mtime
 * back, what a probe left two hours ago looks like.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core_internal.h"
#include "coreutil.h"
#include "probes.h"
#include "walship.h"
#include "ws_ckpt.h"
#include "ws_clock.h"
#include "ws_fault.h"
#include "ws_store.h"

#define FRESH_CKPT_PROBE "checkpoints/probe/0123456789abcdef0123456789abcdef"
#define OLD_S3_PROBE "_walship/probe-00000000deadbeef"

static void put_str(struct ws_store *s, const char *key, const char *text)
{
	assert_int_equal(ws_store_put(s, key, text, strlen(text), WS_PUT_OVERWRITE, NULL, NULL), 0);
}

struct orphans {
	unsigned n, probes;
	char first[512];
};

static void on_orphan(const char *key, const char *kind, void *arg)
{
	struct orphans *o = arg;
	if (!o->n++)
		snprintf(o->first, sizeof(o->first), "%s (%s)", key, kind);
	o->probes += strcmp(kind, "probe") == 0;
}

static struct orphans orphans_of(struct ws_sink *s)
{
	struct orphans o;
	uint64_t count = 0;
	memset(&o, 0, sizeof(o));
	assert_int_equal(ws_verify_orphans(s, NULL, on_orphan, &o, &count), 0);
	assert_int_equal(count, o.n);
	return o;
}

/* The probe keys under prefix, into keys (at most max); their number. */
static size_t probes_under(struct ws_store *s, const char *prefix, char keys[][WS_KEY_MAX], size_t max)
{
	struct ws_list_page page;
	size_t n = 0;
	memset(&page, 0, sizeof(page));
	assert_int_equal(ws_store_list(s, prefix, NULL, WS_LIST_PAGE_MAX, &page), 0);
	for (size_t i = 0; i < page.count; i++)
		if (n < max)
			snprintf(keys[n++], WS_KEY_MAX, "%s", page.keys[i]);
	assert_false(page.truncated);
	ws_list_page_free(&page);
	return n;
}

/* Set the object's last-modified time ago_s seconds back (the file store's mtime). */
static void age(struct wt_env *e, const char *key, unsigned ago_s)
{
	char path[4096];
	struct timeval tv[2];
	struct ws_obj_info info;
	snprintf(path, sizeof(path), "%s/%s", e->sink_dir, key);
	gettimeofday(&tv[0], NULL);
	tv[0].tv_sec -= ago_s;
	tv[1] = tv[0];
	if (utimes(path, tv) != 0)
		fail_msg("utimes %s: %s", path, strerror(errno));
	assert_int_equal(ws_store_head(e->sink->store, key, &info), 0);
	assert_true(ws_wall_ms() - info.mtime_ms >= (int64_t)ago_s * 1000 - 1000);
}

/* A process killed right after its shared open created the probe. */
static void killed_at_probe(const char *sink_dir)
{
	int status = 0;
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int err = 0;
		struct ws_store *s = ws_store_file_open(sink_dir, &err);
		ws_fault_arm("ckpt.probe.after_create", 1, 1);
		_exit(s && ws_ckpt_open_shared(s, 0, &err) ? 0 : 3);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
}

struct seen {
	unsigned n;
	char last[WS_KEY_MAX];
};

static void on_deleted(const char *key, void *arg)
{
	struct seen *s = arg;
	s->n += ws_probe_key(key);
	if (ws_probe_key(key))
		snprintf(s->last, sizeof(s->last), "%s", key);
}

static void test_stale_probes_removed(void **state)
{
	struct wt_env e;
	struct ws_stream_config cfg;
	struct ws_stream *st;
	struct ws_outcome o;
	struct ws_checkpoint_info info;
	struct ws_retention_report rep;
	struct ws_obj_info oi;
	struct orphans orph;
	struct seen seen;
	char left[4][WS_KEY_MAX];
	int err = 0, rc;
	(void)state;

	wt_env_init(&e, "ckpt-probes", 0);
	wt_write_txn(e.w, 20, 300);
	memset(&cfg, 0, sizeof(cfg));
	cfg.tenant = "orders";
	cfg.db_path = e.db;
	cfg.epoch = 1;
	cfg.pointer_generation = 1;
	cfg.wal_checkpoint_bytes = 1;
	st = ws_stream_open(e.sink, &cfg, &err);
	if (!st)
		fail_msg("stream: %s", ws_errmsg());
	wt_tail_ok(st, &o);
	rc = ws_checkpoint_take(e.sink, NULL, &info);
	if (rc)
		fail_msg("checkpoint: %s (%s)", ws_strerror(rc), ws_errmsg());
	assert_int_equal(orphans_of(e.sink).n, 0);

	/* Two kills at the probe, an old S3 probe, and a live process's fresh probe. */
	killed_at_probe(e.sink_dir);
	killed_at_probe(e.sink_dir);
	assert_int_equal(probes_under(e.sink->store, "checkpoints/probe/", left, 4), 2);
	age(&e, left[0], 2 * 3600);
	age(&e, left[1], 3600 + 60);
	put_str(e.sink->store, OLD_S3_PROBE, "walship conditional-write probe 1");
	age(&e, OLD_S3_PROBE, 26 * 3600);
	put_str(e.sink->store, FRESH_CKPT_PROBE, "1");
	age(&e, FRESH_CKPT_PROBE, 3600 - 120); /* a minute or two short of stale */
	orph = orphans_of(e.sink);
	assert_int_equal(orph.probes, 4);
	assert_int_equal(orph.n, 4);

	/* The next checkpoint removes the stale ones and keeps the fresh one. */
	wt_write_txn(e.w, 3, 100);
	wt_tail_ok(st, &o);
	rc = ws_checkpoint_take(e.sink, NULL, &info);
	if (rc)
		fail_msg("checkpoint: %s (%s)", ws_strerror(rc), ws_errmsg());
	assert_int_equal(ws_store_head(e.sink->store, left[0], &oi), WS_ENOTFOUND);
	assert_int_equal(ws_store_head(e.sink->store, left[1], &oi), WS_ENOTFOUND);
	assert_int_equal(ws_store_head(e.sink->store, OLD_S3_PROBE, &oi), WS_ENOTFOUND);
	assert_int_equal(ws_store_head(e.sink->store, FRESH_CKPT_PROBE, &oi), 0);
	orph = orphans_of(e.sink);
	if (orph.n != 1 || orph.probes != 1)
		fail_msg("after the checkpoint: %u orphans (first %s), want the fresh probe only", orph.n, orph.first);

	/* Its writer deletes it as every open does: verify --fail-on-orphans passes. */
	assert_int_equal(ws_store_del(e.sink->store, FRESH_CKPT_PROBE), 0);
	assert_int_equal(orphans_of(e.sink).n, 0);

	/* Retention: a dry run names a stale probe, the real run removes it. */
	killed_at_probe(e.sink_dir);
	assert_int_equal(probes_under(e.sink->store, "checkpoints/probe/", left, 4), 1);
	age(&e, left[0], 7200);
	memset(&seen, 0, sizeof(seen));
	assert_int_equal(ws_retention_run(e.sink, true, on_deleted, &seen, &rep), 0);
	assert_int_equal(seen.n, 1);
	assert_string_equal(seen.last, left[0]);
	assert_int_equal(ws_store_head(e.sink->store, left[0], &oi), 0);
	memset(&seen, 0, sizeof(seen));
	assert_int_equal(ws_retention_run(e.sink, false, on_deleted, &seen, &rep), 0);
	assert_int_equal(seen.n, 1);
	assert_int_equal(ws_store_head(e.sink->store, left[0], &oi), WS_ENOTFOUND);
	assert_int_equal(orphans_of(e.sink).n, 0);

	ws_stream_close(st);
	wt_env_free(&e);
}

/* Only walship's own probe keys are probes: nothing else under those names is touched. */
static void test_probe_keys(void **state)
{
	(void)state;
	assert_true(ws_probe_key("checkpoints/probe/0123456789abcdef0123456789abcdef"));
	assert_true(ws_probe_key("_walship/probe-0123456789abcdef"));
	assert_false(ws_probe_key("checkpoints/probe/0123456789abcdef0123456789abcde"));
	assert_false(ws_probe_key("checkpoints/probe/0123456789abcdef0123456789abcdef0"));
	assert_false(ws_probe_key("checkpoints/probe/0123456789ABCDEF0123456789abcdef"));
	assert_false(ws_probe_key("_walship/probe-0123456789abcdef/x"));
	assert_false(ws_probe_key("_walship/probe-"));
	assert_false(ws_probe_key("orders/probe-0123456789abcdef"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_probe_keys),
		cmocka_unit_test(test_stale_probes_removed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
