/*
 * A checkpoint artifact larger than S3's largest single PUT (5 GiB, also
 * radosgw's default rgw_max_put_size) through radosgw at walship's
 * defaults: sent from a mapping of a sparse image as checkpoint sends it
 * (ws_store_putv, create-once: a multipart upload of 16 MiB parts), then
 * read back as restore and verify read it (ws_artifact_fetch: ranges
 * several at once, hashed in order against the SHA-256 taken before
 * sending), byte for byte where the image has data.
 *
 * Its size: WS_S3_LARGE_BYTES (default 5 GiB + 3 MiB + 7 bytes). radosgw's
 * memstore then holds the whole object in memory: run with
 * WS_RGW_MEM_BYTES of 9 GiB (ceph-osd grows to about 9.3 GB), and room for the image read back
 * under the build's testtmp. Registered disabled unless configured with
 * -DWS_S3_LARGE=ON (label s3_large): ctest -L s3_large.
 *
 * Without $WS_S3_DIR the test FAILS: it must never pass without a server.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "artifact.h"
#include "testutil.h"
#include "ws_hash.h"
#include "ws_store.h"

#define MARK 4096u

/* Where the image has data (the rest is a hole, read as zeros). */
static uint64_t mark_at(uint64_t n, int i)
{
	const uint64_t at[] = { 0, (16u << 20) - 100, n / 2, (5ull << 30) - 10, n - MARK };
	return at[i] + MARK <= n ? at[i] : n - MARK;
}

static void fill(uint8_t *p, size_t n, uint64_t seed)
{
	uint64_t st = seed | 1;
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(wt_rand(&st) >> 24);
}

static struct ws_store *open_bucket(void)
{
	char url[1024];
	int err = 0;
	snprintf(url, sizeof(url), "s3://ws-large-%ld-%lld?endpoint=%s", (long)getpid(), (long long)time(NULL),
		 getenv("WS_S3_ENDPOINT"));
	struct ws_store *s = ws_store_open_flags(url, WS_STORE_EXISTING, &err);
	if (!s)
		fail_msg("open %s: %s", url, ws_errmsg());
	assert_int_equal(ws_store_s3_create_bucket(s), 0);
	return s;
}

/* A sparse image of n bytes with random data at the marks, mapped. */
static uint8_t *make_image(const char *path, uint64_t n)
{
	uint8_t buf[MARK];
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)n), 0);
	for (int i = 0; i < 5; i++) {
		fill(buf, sizeof(buf), (uint64_t)i + 1);
		assert_int_equal(pwrite(fd, buf, sizeof(buf), (off_t)mark_at(n, i)), (ssize_t)sizeof(buf));
	}
	uint8_t *map = mmap(NULL, (size_t)n, PROT_READ, MAP_SHARED, fd, 0);
	assert_true(map != MAP_FAILED);
	close(fd);
	return map;
}

static void test_artifact_over_5gib(void **state)
{
	const uint64_t n = wt_env_u64("WS_S3_LARGE_BYTES", (5ull << 30) + (3u << 20) + 7);
	char *dir = wt_tmpdir("artifact_s3_large"), src[600], dst[600], hex[WS_SHA256_HEX_LEN + 1];
	uint8_t sha[WS_SHA256_LEN], want[MARK], got[MARK];
	struct ws_obj_info info;
	(void)state;

	assert_true(n >= 2 * MARK);
	snprintf(src, sizeof(src), "%s/image", dir);
	snprintf(dst, sizeof(dst), "%s/back", dir);
	struct ws_store *s = open_bucket();
	uint8_t *map = make_image(src, n);
	int64_t t0 = wt_now_ms();
	ws_sha256(map, (size_t)n, sha);
	ws_hex(sha, sizeof(sha), hex);
	struct iovec iov = { map, (size_t)n };
	int rc = ws_store_putv(s, "checkpoints/artifacts/big", &iov, 1, WS_PUT_CREATE, NULL, NULL);
	if (rc)
		fail_msg("put %" PRIu64 " bytes: %s", n, ws_errmsg());
	int64_t t1 = wt_now_ms();
	assert_int_equal(ws_store_head(s, "checkpoints/artifacts/big", &info), 0);
	assert_int_equal(info.size_bytes, n);
	assert_non_null(strchr(info.etag.s, '-')); /* completed from parts */
	int fd = open(dst, O_RDWR | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	rc = ws_artifact_fetch(s, "checkpoints/artifacts/big", n, hex, NULL, fd);
	if (rc)
		fail_msg("fetch: %s", ws_errmsg());
	print_message("  %" PRIu64 " bytes: hashed and sent in %" PRId64 " ms, read back in %" PRId64 " ms\n", n,
		      t1 - t0, wt_now_ms() - t1);
	struct stat st;
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal((uint64_t)st.st_size, n);
	for (int i = 0; i < 5; i++) {
		memcpy(want, map + mark_at(n, i), MARK);
		assert_int_equal(pread(fd, got, MARK, (off_t)mark_at(n, i)), (ssize_t)MARK);
		assert_memory_equal(got, want, MARK);
	}
	close(fd);
	munmap(map, (size_t)n);
	assert_int_equal(ws_store_del(s, "checkpoints/artifacts/big"), 0);
	ws_store_close(s);
	unlink(src);
	unlink(dst);
	rmdir(dir);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_artifact_over_5gib),
	};
	if (wt_s3_load_env("test_core_artifact_s3_large") != 0)
		return 1;
	return WT_RUN_GROUP(tests, NULL, NULL);
}
