/* Shared helpers for cmocka tests: temp dirs, files, SQLite writers. */
#ifndef WS_TESTUTIL_H
#define WS_TESTUTIL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <sqlite3.h>

/* A fresh empty directory under $WS_TEST_TMP (or /tmp); caller frees. */
char *wt_tmpdir(const char *tag);
/* rm -rf path (best effort). */
void wt_rmrf(const char *path);
/* Read a whole file; returns malloc'd bytes (NULL if missing), *len set. */
uint8_t *wt_read_file(const char *path, size_t *len);
int wt_write_file(const char *path, const void *data, size_t len);
/* Path join into a static-lifetime-per-call malloc'd string. */
char *wt_path(const char *dir, const char *name);
/* Run a shell command; returns its exit status (or -1). */
int wt_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Deterministic PRNG (xorshift64*) for reproducible random tests. */
uint64_t wt_rand(uint64_t *state);
/* Names, types, sizes, modes and SHA-256 of every entry under dir; caller frees. */
char *wt_dir_digest(const char *dir);

/* A numeric environment variable (strtoull, any base), or dflt if unset/empty. */
uint64_t wt_env_u64(const char *name, uint64_t dflt);
/* CLOCK_MONOTONIC in milliseconds. */
int64_t wt_now_ms(void);
/* Sleep at least ms milliseconds (resumed after signals). */
void wt_sleep_ms(unsigned ms);

/*
 * Run the cases of tests[] this process is asked for, as
 * cmocka_run_group_tests does: all of them, or
 *   WS_TEST_FILTER=GLOB   those whose name matches (cmocka's * and ?);
 *   WS_TEST_PART=K/N      cases i with i % N == K - 1 (1 <= K <= N <= n),
 *                         so the N parts together run every case once:
 *                         ctest runs a long binary as N tests that share
 *                         the cores (ws_test_parts in tests/CMakeLists.txt).
 * A bad WS_TEST_PART (not K/N, K or N out of range) is named on stderr and
 * fails the run (returns 1): a mistyped part must not pass by running
 * nothing.
 */
int wt_run_group(const char *name, const struct CMUnitTest *tests, size_t n, CMFixtureFunction setup,
		 CMFixtureFunction teardown);
#define WT_RUN_GROUP(tests, setup, teardown) \
	wt_run_group(#tests, tests, sizeof(tests) / sizeof((tests)[0]), setup, teardown)

/* FNV-1a step: fold n bytes at p into *h (the caller picks the seed). */
void wt_fnv(uint64_t *h, const void *p, size_t n);

/* ---- SQLite --------------------------------------------------------------- */

/* sqlite3_exec that must succeed (fails the test with SQLite's message). */
void wt_exec(sqlite3 *db, const char *sql);
/* The first column of the first row of sql into out ("" if none); must succeed. */
void wt_query1(sqlite3 *db, const char *sql, char out[64]);
/* Calls row() for every row of sql; SQLITE_OK, or the prepare/step error. */
int wt_each_row(sqlite3 *db, const char *sql, void (*row)(sqlite3_stmt *st, void *arg), void *arg);
/* The test writer: opens (creates) path with a 5 s busy timeout, journal_mode
 * WAL, wal_autocheckpoint off and table t(k INTEGER PRIMARY KEY, v BLOB);
 * page_size 0 keeps SQLite's default. */
sqlite3 *wt_writer_open(const char *path, unsigned page_size);
/* One transaction of `rows` inserts into t of `bytes` random bytes each. */
void wt_write_txn(sqlite3 *db, int rows, int bytes);
/* Open path read-only; PRAGMA integrity_check must say ok. Caller closes. */
sqlite3 *wt_open_checked(const char *path);

/*
 * Load the S3 test server's settings ($WS_S3_DIR/env, written by
 * tests/s3/radosgw.sh) into the environment: WS_S3_ENDPOINT, AWS_*.
 * Returns 0, or -1 after printing why `test` cannot run (it must then fail:
 * an S3 test never passes without a server).
 */
int wt_s3_load_env(const char *test);

#endif
