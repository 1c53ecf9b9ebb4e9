/*
 * A re-base naming the unchanged parts of the image before it
 * (core/snap_reuse.c) on an s3:// sink at its defaults: parts compressed
 * with zstd (version 2, no cipher), so a part is named again when the
 * object this re-base would upload for the same pages is byte for byte the
 * earlier one. A real SQLite writer; the restored state is the source's.
 * Needs the S3 fixture.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <inttypes.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "chain.h"
#include "core_internal.h"
#include "coreutil.h"
#include "sink.h"
#include "walship.h"
#include "ws_format.h"
#include "ws_store.h"

#define TENANT "reuse-s3"

static char g_url[1024];

static int setup_bucket(void **state)
{
	(void)state;
	return wt_s3_new_bucket("ws-reuse", g_url, sizeof(g_url));
}

static struct ws_stream *open_stream(struct ws_sink *sink, const char *db)
{
	struct ws_stream_config c;
	struct ws_stream *st;
	int err = -1;
	memset(&c, 0, sizeof(c));
	c.tenant = TENANT;
	c.db_path = db;
	c.epoch = 1;
	c.pointer_generation = 1;
	c.batch_bytes_max = 128u << 10; /* past one slot: parts of 16 pages */
	st = ws_stream_open(sink, &c, &err);
	if (!st)
		fail_msg("ws_stream_open: %s (%s)", ws_strerror(err), ws_errmsg());
	return st;
}

static void test_s3_rebase_names_unchanged_parts(void **state)
{
	struct wt_env e;
	struct ws_sink *sink;
	struct ws_stream *st;
	struct ws_outcome o;
	struct ws_fmt_watermark wm;
	struct ws_chain c;
	uint32_t reused = 0;
	char *out;
	int err = 0;
	(void)state;

	wt_env_init(&e, "reuse_s3", 0);
	sink = ws_sink_open(g_url, &err);
	if (!sink)
		fail_msg("ws_sink_open %s: %s", g_url, ws_strerror(err));
	wt_write_txn(e.w, 300, 3000);
	wt_exec(e.w, "PRAGMA wal_checkpoint(TRUNCATE)");
	st = open_stream(sink, e.db);
	wt_tail_ok(st, &o);
	ws_stream_close(st);
	/* A few pages changed while walship is down, the last connection
	 * closed: the next tail re-bases. */
	wt_exec(e.w, "UPDATE t SET v = randomblob(3000) WHERE k IN (5, 77)");
	wt_rebase_while_down(&e, WT_CLOSE_LAST_CONNECTION);
	st = open_stream(sink, e.db);
	wt_tail_ok(st, &o);
	assert_int_equal(o.kind, WS_OUTCOME_RESTARTED);
	ws_stream_close(st);

	assert_int_equal(ws_wm_load(sink->store, TENANT, &wm, NULL), 0);
	assert_int_equal(ws_chain_load(sink->store, TENANT, &wm, &c), 0);
	assert_int_equal(c.m[0].kind, WS_MANIFEST_REBASE);
	for (uint32_t k = 0; k < c.m[0].snap_count; k++)
		reused += ws_key_object_seq(c.m[0].snaps[k].key) < c.m[0].wm_seq;
	if (reused + 4 < c.m[0].snap_count)
		fail_msg("%u of %u compressed parts named again (2 rows changed)", reused, c.m[0].snap_count);
	{
		/* Sealed: version 2, zstd (codec 1 at offset 56), no cipher. */
		struct ws_buf b;
		ws_buf_init(&b, 1u << 20);
		assert_int_equal(ws_store_get(sink->store, c.m[0].snaps[0].key, 0, 64, &b, NULL), 0);
		assert_true(b.len >= 64);
		assert_int_equal(b.data[8], 2);
		assert_int_equal(b.data[56], 1);
		assert_int_equal(b.data[60], 0);
		ws_buf_free(&b);
	}
	ws_chain_free(&c);

	out = wt_out_path(&e);
	err = ws_restore(sink, TENANT, NULL, out);
	if (err)
		fail_msg("restore: %s (%s)", ws_strerror(err), ws_errmsg());
	assert_true(wt_file_hash(out, NULL) == wt_content_hash(e.w, NULL));
	unlink(out);
	free(out);
	err = ws_verify(sink, TENANT, NULL, NULL);
	if (err)
		fail_msg("verify: %s (%s)", ws_strerror(err), ws_errmsg());
	ws_sink_close(sink);
	wt_env_free(&e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_s3_rebase_names_unchanged_parts),
	};
	if (wt_s3_load_env("test_core_rebase_reuse_s3") != 0)
		return 1;
	return cmocka_run_group_tests(tests, setup_bucket, NULL);
}
