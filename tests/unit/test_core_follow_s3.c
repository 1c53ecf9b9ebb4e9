/*
 * The follower against radosgw (core/follow.c): a writer shipped by the
 * engine to an s3:// sink, a follower reading it through its own handle,
 * every state it reaches one the writer committed and, once the engine
 * flushed, the last; the steady state polls the watermark with
 * If-None-Match and never lists the bucket. Needs the S3 fixture.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "coreutil.h"
#include "folreplica.h"
#include "walship.h"
#include "ws_store.h"

static char g_url[1024];

static int setup_bucket(void **state)
{
	(void)state;
	return wt_s3_new_bucket("ws-fol", g_url, sizeof(g_url));
}

static void test_s3_engine_writer(void **state)
{
	uint64_t rebuilds = 0, lists = 0;
	(void)state;
	fol_engine_scenario("follow-s3", g_url, 16, &rebuilds, &lists);
	assert_int_equal(lists, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_s3_engine_writer),
	};
	if (wt_s3_load_env("test_core_follow_s3") != 0)
		return 1;
	return cmocka_run_group_tests(tests, setup_bucket, NULL);
}
