/* A checkpoint's artifact: fetch and verify it (artifact.c). */
#ifndef WS_CORE_ARTIFACT_H
#define WS_CORE_ARTIFACT_H

#include "core_internal.h"

/*
 * Fetch the artifact base names, verify its length and SHA-256, write it to
 * fd. cut (may be NULL): the cut manifest, whose state the artifact is: its
 * size must be the cut's db_pages x page size, and page 1 must say that
 * page size and page count (an index naming another database's image).
 */
int ws_artifact_fetch(struct ws_store *s, const char *key, uint64_t length, const char *sha256_hex,
		      const struct ws_fmt_manifest *cut, int fd) WS_MUST_CHECK;
/* base's artifact, checked against its cut manifest when that is still stored. */
int ws_artifact_fetch_base(struct ws_store *s, const struct ws_restore_base *base, int fd) WS_MUST_CHECK;

/*
 * Verify base's artifact as verify does: length and SHA-256 against the
 * committed index, and that it opens as a SQLite database with PRAGMA
 * integrity_check ok (in a temporary file, removed). Errors name its key.
 */
int ws_artifact_verify(struct ws_store *s, const struct ws_restore_base *base) WS_MUST_CHECK;

#endif
