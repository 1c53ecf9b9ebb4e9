/*
 * A checkpoint's artifact (a tenant's whole database at a cut): fetch it
 * into an image checked against its committed index (length, SHA-256 of
 * the stored object), opened when sealed (artifact_seal.c), and against
 * its cut manifest (size, page 1), and verify it as verify does.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "artifact.h"
#include "publish.h"
#include "replay.h"
#include "ws_assert.h"
#include "ws_logging.h"

/* The artifact's bytes are the state of cut: its size (len) and page 1
 * (head: its first 100 bytes, or all of a shorter one) agree: as long as
 * the image of that state (ws_image_pages: the cut's size, or page 1's valid
 * in-header size when that is smaller), page 1 naming the cut's page size
 * and, when its in-header size is valid, a size no larger than the cut's. */
static int artifact_shape(const char *key, const uint8_t *head, uint64_t len, const struct ws_fmt_manifest *cut)
{
	const uint64_t ps = cut->gen.page_size, full = (uint64_t)cut->db_pages * ps;
	uint32_t hdr_ps, hdr_pages;

	if (len == 0 && full == 0)
		return 0;
	if (len < 100)
		return ws_fail(WS_ECORRUPT, "checkpoint artifact %s is %" PRIu64 " bytes; the state it stands for "
			       "(cut manifest, %u pages of %llu bytes) is %llu bytes: not that state's image", key,
			       len, cut->db_pages, (unsigned long long)ps, (unsigned long long)full);
	hdr_ps = ws_db_hdr_page_size(head);
	hdr_pages = ws_image_header_pages(head);
	if (hdr_ps != ps || hdr_pages > cut->db_pages)
		return ws_fail(WS_ECORRUPT, "checkpoint artifact %s: page 1 says %u pages of %u bytes; the state it "
			       "stands for (cut manifest) has %u pages of %llu bytes", key, hdr_pages, hdr_ps,
			       cut->db_pages, (unsigned long long)ps);
	if (len != (uint64_t)ws_image_pages(head, cut->db_pages) * ps && len != full)
		return ws_fail(WS_ECORRUPT, "checkpoint artifact %s is %" PRIu64 " bytes; the state it stands for "
			       "(cut manifest, %u pages of %llu bytes, page 1 saying %u) is %llu bytes: not that "
			       "state's image", key, len, cut->db_pages, (unsigned long long)ps, hdr_pages,
			       (unsigned long long)ws_image_pages(head, cut->db_pages) * ps);
	return 0;
}

/*
 * An artifact is a whole database image, as large as the database: it is
 * read in ranges of this size, each written to fd and hashed as it comes,
 * so memory stays bounded whatever the database's size.
 */
#define ARTIFACT_RANGE ((uint64_t)8 << 20)

int ws_artifact_fetch(struct ws_store *s, const char *key, uint64_t length, const char *sha256_hex,
		      const struct ws_fmt_manifest *cut, int fd)
{
	struct ws_buf b;
	struct ws_sha256_state h;
	struct ws_art_reader r;
	uint8_t sha[WS_SHA256_LEN];
	char hex[WS_SHA256_HEX_LEN + 1];
	uint64_t off = 0;
	int rc;

	if ((rc = ws_art_reader_init(&r, s->keys, key, length, fd)) != 0)
		return rc;
	if ((rc = ws_sha256_begin(&h)) != 0) {
		ws_art_reader_free(&r);
		return ws_fail(rc, "read checkpoint artifact %s: no memory for its hash", key);
	}
	ws_buf_init(&b, (size_t)ARTIFACT_RANGE);
	bool whole = false;
	do {
		uint64_t want = length - off < ARTIFACT_RANGE ? length - off : ARTIFACT_RANGE;
		if (whole)
			want = length;
		ws_buf_reset(&b);
		/* No object info asked: the file store would hash the whole
		 * object for its etag, reading it twice. The size is checked
		 * by what the ranges return, and by the read past its end. */
		rc = ws_store_get(s, key, off, whole ? UINT64_MAX : want, &b, NULL);
		if (rc == WS_ETOOBIG && off == 0 && !whole && length > ARTIFACT_RANGE) {
			/* A store that answers a range with the whole object (HTTP
			 * allows it; the S3 backend keeps the range asked for): read
			 * it whole, once, as large as it is, rather than whole
			 * again for every range. */
			ws_info("checkpoint artifact %s: the store answers ranges with the whole object; reading it "
				"whole (%" PRIu64 " bytes in memory)", key, length);
			whole = true;
			ws_buf_free(&b);
			ws_buf_init(&b, WS_BUF_DEFAULT_MAX);
			continue;
		}
		if (rc == WS_ENOTFOUND) {
			rc = ws_fail(WS_EINCOMPLETE, "checkpoint artifact %s is missing", key);
			goto out;
		}
		if (rc) {
			ws_fail_wrap(rc, "read checkpoint artifact %s", key);
			goto out;
		}
		if (b.len != want) {
			rc = ws_fail(WS_ECORRUPT, "checkpoint artifact %s is not the %" PRIu64 " bytes its index "
				     "records (SHA-256 %s): %zu bytes at offset %" PRIu64 " where %" PRIu64 " were asked",
				     key, length, sha256_hex, b.len, off, want);
			goto out;
		}
		/* Bounds: each range asked for lies inside the recorded length. */
		WS_ASSERT(b.len <= length - off);
		ws_sha256_update(&h, b.data, b.len);
		/* The image: the range as it is (version 1), or each sealed
		 * chunk it completes, opened (version 2). */
		if ((rc = ws_art_reader_feed(&r, b.data, b.len)) != 0)
			goto out;
		off += b.len;
	} while (off < length);
	WS_ASSERT(off == length);
	if (!whole) {
		/* Nothing past the recorded length: a longer object is not the
		 * one the index names (read whole, its length was checked). */
		ws_buf_reset(&b);
		rc = ws_store_get(s, key, length, 1, &b, NULL);
		if (rc) {
			ws_fail_wrap(rc, "read checkpoint artifact %s", key);
			goto out;
		}
		if (b.len) {
			rc = ws_fail(WS_ECORRUPT, "checkpoint artifact %s is longer than the %" PRIu64 " bytes its "
				     "index records (SHA-256 %s)", key, length, sha256_hex);
			goto out;
		}
	}
	ws_sha256_end(&h, sha);
	ws_hex(sha, sizeof(sha), hex);
	if (strcmp(hex, sha256_hex) != 0) {
		rc = ws_fail(WS_ECORRUPT, "checkpoint artifact %s is %" PRIu64 " bytes with SHA-256 %s; its index "
			     "records %" PRIu64 " bytes and %s", key, off, hex, length, sha256_hex);
		goto out_freed;
	}
	if ((rc = ws_art_reader_finish(&r)) == 0 && cut)
		rc = artifact_shape(key, r.head, r.plain_off, cut);
	goto out_freed;
out:
	ws_sha256_end(&h, NULL);
out_freed:
	ws_art_reader_free(&r);
	ws_buf_free(&b);
	return rc;
}

int ws_artifact_fetch_base(struct ws_store *s, const struct ws_restore_base *base, int fd)
{
	struct ws_fmt_manifest cut;
	struct ws_buf b;
	uint8_t sha[WS_SHA256_LEN];
	bool have = false;
	int rc;

	/* The cut manifest, when still stored (retention keeps the protected
	 * checkpoint's): checked as the chain checks a link. */
	ws_buf_init(&b, WS_BUF_DEFAULT_MAX);
	rc = ws_store_get(s, base->cut.key, 0, UINT64_MAX, &b, NULL);
	if (rc == 0) {
		ws_sha256(b.data, b.len, sha);
		if (b.len != base->cut.length || memcmp(sha, base->cut.sha, WS_SHA256_LEN) != 0)
			rc = ws_fail(WS_ECORRUPT, "manifest %s (the cut of checkpoint artifact %s) is not the one "
				     "its index names (length or SHA-256)", base->cut.key, base->artifact_key);
		else if ((rc = ws_fmt_manifest_decode(b.data, b.len, &cut)) != 0)
			ws_fail_wrap(rc, "manifest %s (the cut of checkpoint artifact %s)", base->cut.key,
				     base->artifact_key);
		else
			have = true;
	} else if (rc == WS_ENOTFOUND) {
		rc = 0; /* gone with its history: the index's hashes alone vouch */
	} else {
		ws_fail_wrap(rc, "read manifest %s", base->cut.key);
	}
	ws_buf_free(&b);
	if (rc)
		return rc;
	rc = ws_artifact_fetch(s, base->artifact_key, base->artifact_length, base->artifact_sha256,
			       have ? &cut : NULL, fd);
	if (have)
		ws_fmt_manifest_free(&cut);
	return rc;
}

int ws_artifact_verify(struct ws_store *s, const struct ws_restore_base *base)
{
	char what[WS_KEY_MAX + 32];
	char *tmp;
	int fd, rc;

	snprintf(what, sizeof(what), "checkpoint artifact %s", base->artifact_key);
	if ((rc = ws_verify_tmp_open(what, &tmp, &fd)) != 0)
		return rc;
	rc = ws_artifact_fetch_base(s, base, fd);
	if (!rc && (rc = ws_image_integrity_check(tmp)) != 0)
		ws_fail_wrap(rc, "checkpoint artifact %s", base->artifact_key);
	ws_verify_no_room(rc, tmp);
	close(fd);
	unlink(tmp);
	free(tmp);
	return rc;
}
