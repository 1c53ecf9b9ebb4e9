/*
 * Decoders of walship's own objects (store/format.c) on objects that hash
 * correctly but say something impossible: each case is an input the fuzz
 * targets of tests/fuzz found accepted (their corpus keeps it as
 * regress-*), rebuilt here with the encoder so the intent is readable.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "testutil.h"
#include "ws_format.h"

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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_manifest_valid_baseline),
		cmocka_unit_test(test_rebase_frames_from_one),
		cmocka_unit_test(test_manifest_batch_range_wraps),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
