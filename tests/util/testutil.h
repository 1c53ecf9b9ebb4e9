/* Shared helpers for cmocka tests: temp dirs, files, SQLite writers. */
#ifndef WS_TESTUTIL_H
#define WS_TESTUTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

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

#endif
