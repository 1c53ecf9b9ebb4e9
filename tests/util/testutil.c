#include "testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

char *wt_tmpdir(const char *tag)
{
	const char *base = getenv("WS_TEST_TMP");
	char *p;
	if (!base || !*base)
		base = "/tmp";
	mkdir(base, 0755);
	if (asprintf(&p, "%s/%s.XXXXXX", base, tag) < 0)
		return NULL;
	if (!mkdtemp(p)) {
		free(p);
		return NULL;
	}
	return p;
}

void wt_rmrf(const char *path)
{
	if (path && *path && strcmp(path, "/") != 0)
		wt_sh("rm -rf '%s'", path);
}

uint8_t *wt_read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	long n;
	*len = 0;
	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
		buf = malloc((size_t)n + 1);
		if (buf && fread(buf, 1, (size_t)n, f) == (size_t)n)
			*len = (size_t)n;
	}
	fclose(f);
	return buf;
}

int wt_write_file(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "wb");
	int rc;
	if (!f)
		return -errno;
	rc = fwrite(data, 1, len, f) == len ? 0 : -EIO;
	if (fclose(f) != 0 && rc == 0)
		rc = -errno;
	return rc;
}

char *wt_path(const char *dir, const char *name)
{
	char *p;
	if (asprintf(&p, "%s/%s", dir, name) < 0)
		return NULL;
	return p;
}

int wt_sh(const char *fmt, ...)
{
	char *cmd;
	va_list ap;
	int rc;
	va_start(ap, fmt);
	rc = vasprintf(&cmd, fmt, ap);
	va_end(ap);
	if (rc < 0)
		return -1;
	rc = system(cmd);
	free(cmd);
	if (rc == -1 || !WIFEXITED(rc))
		return -1;
	return WEXITSTATUS(rc);
}

uint64_t wt_rand(uint64_t *state)
{
	uint64_t x = *state ? *state : 0x9e3779b97f4a7c15ull;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*state = x;
	return x * 0x2545f4914f6cdd1dull;
}

char *wt_dir_digest(const char *dir)
{
	char *tmp, *out;
	size_t len = 0;
	assert_int_not_equal(asprintf(&tmp, "%s.digest", dir), -1);
	assert_int_equal(wt_sh("cd '%s' && { find . -printf '%%p %%y %%s %%m\\n' | LC_ALL=C sort; "
			       "find . -type f -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum; } > '%s'",
			       dir, tmp),
			 0);
	out = (char *)wt_read_file(tmp, &len);
	assert_non_null(out);
	out[len] = '\0';
	unlink(tmp);
	free(tmp);
	return out;
}

uint64_t wt_env_u64(const char *name, uint64_t dflt)
{
	const char *v = getenv(name);
	return v && *v ? strtoull(v, NULL, 0) : dflt;
}

int64_t wt_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void wt_sleep_ms(unsigned ms)
{
	struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

int wt_run_group(const char *name, const struct CMUnitTest *tests, size_t n, CMFixtureFunction setup,
		 CMFixtureFunction teardown)
{
	const char *filter = getenv("WS_TEST_FILTER");
	const char *part = getenv("WS_TEST_PART");
	struct CMUnitTest *mine;
	unsigned long k, parts;
	size_t m = 0;
	char *end;
	int rc;

	if (filter && *filter)
		cmocka_set_test_filter(filter);
	if (!part || !*part)
		return _cmocka_run_group_tests(name, tests, n, setup, teardown);
	errno = 0;
	k = strtoul(part, &end, 10);
	if (errno || end == part || *end != '/')
		goto bad;
	part = end + 1;
	parts = strtoul(part, &end, 10);
	if (errno || end == part || *end || k < 1 || k > parts || parts > n)
		goto bad;
	mine = calloc(n, sizeof(*mine));
	if (!mine) {
		fprintf(stderr, "%s: out of memory selecting WS_TEST_PART\n", program_invocation_short_name);
		return 1;
	}
	for (size_t i = k - 1; i < n; i += parts)
		mine[m++] = tests[i];
	rc = _cmocka_run_group_tests(name, mine, m, setup, teardown);
	free(mine);
	return rc;
bad:
	fprintf(stderr, "%s: WS_TEST_PART=%s: want K/N with 1 <= K <= N <= %zu (the number of cases)\n",
		program_invocation_short_name, getenv("WS_TEST_PART"), n);
	return 1;
}

void wt_fnv(uint64_t *h, const void *p, size_t n)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++) {
		*h ^= b[i];
		*h *= 0x100000001b3ull;
	}
}

void wt_exec(sqlite3 *db, const char *sql)
{
	char *msg = NULL;
	if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK)
		fail_msg("sqlite: '%s': %s", sql, msg ? msg : sqlite3_errmsg(db));
}

static int first_col_cb(void *arg, int n, char **vals, char **names)
{
	(void)names;
	if (n > 0 && vals[0])
		snprintf(arg, 64, "%s", vals[0]);
	return 0;
}

void wt_query1(sqlite3 *db, const char *sql, char out[64])
{
	char *msg = NULL;
	out[0] = '\0';
	if (sqlite3_exec(db, sql, first_col_cb, out, &msg) != SQLITE_OK)
		fail_msg("sqlite: '%s': %s", sql, msg ? msg : sqlite3_errmsg(db));
}

int wt_each_row(sqlite3 *db, const char *sql, void (*row)(sqlite3_stmt *st, void *arg), void *arg)
{
	sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
	if (rc != SQLITE_OK)
		return rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW)
		row(st, arg);
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

sqlite3 *wt_writer_open(const char *path, unsigned page_size)
{
	sqlite3 *db = NULL;
	char sql[64], res[64];
	if (sqlite3_open(path, &db) != SQLITE_OK)
		fail_msg("open %s: %s", path, sqlite3_errmsg(db));
	sqlite3_busy_timeout(db, 5000);
	if (page_size) {
		snprintf(sql, sizeof(sql), "PRAGMA page_size=%u", page_size);
		wt_exec(db, sql);
	}
	wt_query1(db, "PRAGMA journal_mode=WAL", res);
	assert_string_equal(res, "wal");
	/* Frame numbers stay predictable: only tests that want WAL
	 * checkpoints run them. */
	wt_exec(db, "PRAGMA wal_autocheckpoint=0");
	wt_exec(db, "CREATE TABLE IF NOT EXISTS t(k INTEGER PRIMARY KEY, v BLOB)");
	return db;
}

void wt_write_txn(sqlite3 *db, int rows, int bytes)
{
	sqlite3_stmt *s = NULL;
	wt_exec(db, "BEGIN");
	assert_int_equal(sqlite3_prepare_v2(db, "INSERT INTO t(v) VALUES(randomblob(?))", -1, &s, NULL),
			 SQLITE_OK);
	for (int i = 0; i < rows; i++) {
		sqlite3_bind_int(s, 1, bytes);
		if (sqlite3_step(s) != SQLITE_DONE)
			fail_msg("insert: %s", sqlite3_errmsg(db));
		sqlite3_reset(s);
	}
	sqlite3_finalize(s);
	wt_exec(db, "COMMIT");
}

sqlite3 *wt_open_checked(const char *path)
{
	sqlite3 *db = NULL;
	char res[64];
	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK)
		fail_msg("open %s: %s", path, sqlite3_errmsg(db));
	wt_query1(db, "PRAGMA integrity_check", res);
	if (strcmp(res, "ok") != 0)
		fail_msg("%s: integrity_check: %s", path, res);
	return db;
}

int wt_s3_load_env(const char *test)
{
	const char *dir = getenv("WS_S3_DIR"), *ep, *sec;
	char path[1024], line[1024];
	FILE *f;

	if (!dir || !*dir) {
		fprintf(stderr, "%s: FAIL: WS_S3_DIR is not set. This test needs a real S3 server: run it "
			"through ctest (its \"s3\" fixture starts radosgw), or start one with "
			"tests/s3/radosgw.sh start DIR and set WS_S3_DIR=DIR.\n", test);
		return -1;
	}
	snprintf(path, sizeof(path), "%s/env", dir);
	f = fopen(path, "r");
	if (!f) {
		fprintf(stderr, "%s: FAIL: cannot read %s: %s (did radosgw.sh start fail?)\n", test, path,
			strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof(line), f)) {
		char *eq = strchr(line, '=');
		line[strcspn(line, "\r\n")] = '\0';
		if (!eq)
			continue;
		*eq = '\0';
		if (setenv(line, eq + 1, 1) != 0) {
			fclose(f);
			return -1;
		}
	}
	fclose(f);
	ep = getenv("WS_S3_ENDPOINT");
	sec = getenv("AWS_SECRET_ACCESS_KEY");
	if (!ep || strncmp(ep, "http://127.0.0.1:", 17) != 0 || !sec || !*sec || !getenv("AWS_ACCESS_KEY_ID")) {
		fprintf(stderr, "%s: FAIL: %s lacks WS_S3_ENDPOINT/AWS_* settings\n", test, path);
		return -1;
	}
	return 0;
}
