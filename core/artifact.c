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
 * read in ranges of this size, ARTIFACT_RANGES at once (over the store's
 * connections: ws_store_get_many), each written to fd and hashed in order
 * as it comes, so memory stays bounded (ARTIFACT_RANGES buffers of
 * ARTIFACT_RANGE) whatever the database's size.
 */
#define ARTIFACT_RANGE ((uint64_t)4 << 20)
#define ARTIFACT_RANGES 4u

struct fetch {
	struct ws_store *s;
	const char *key, *sha256_hex;
	uint64_t length, off;   /* the recorded length; what is taken so far */
	int fd;
	struct ws_sha256_state h; /* of the stored bytes */
	struct ws_art_reader r;   /* the image out of them, written to fd */
	struct ws_buf b[ARTIFACT_RANGES];
};

/* The store's error for a read of the artifact, as the caller names it. */
static int fetch_failed(const struct fetch *f, int rc)
{
	if (rc == WS_ENOTFOUND)
		return ws_fail(WS_EINCOMPLETE, "checkpoint artifact %s is missing", f->key);
	return ws_fail_wrap(rc, "read checkpoint artifact %s", f->key);
}

/* The next range (want bytes at f->off) in b: checked, hashed, and fed to
 * the reader (the image: the range as it is, version 1, or each sealed
 * chunk it completes, opened, version 2). */
static int fetch_take(struct fetch *f, const struct ws_buf *b, uint64_t want)
{
	int rc;
	if (b->len != want)
		return ws_fail(WS_ECORRUPT, "checkpoint artifact %s is not the %" PRIu64 " bytes its index "
			       "records (SHA-256 %s): %zu bytes at offset %" PRIu64 " where %" PRIu64 " were asked",
			       f->key, f->length, f->sha256_hex, b->len, f->off, want);
	/* Bounds: each range asked for lies inside the recorded length. */
	WS_ASSERT(b->len <= f->length - f->off);
	ws_sha256_update(&f->h, b->data, b->len);
	if ((rc = ws_art_reader_feed(&f->r, b->data, b->len)) != 0)
		return rc;
	f->off += b->len;
	return 0;
}

/*
 * Up to ARTIFACT_RANGES ranges from f->off, read at once and taken in
 * order. A range that failed is read again alone (the detail of a failure
 * among several is not kept, and the store may answer now). 1: the store
 * answered the first range with the whole object (WS_ETOOBIG, as HTTP
 * allows a server to): the caller reads it whole instead.
 */
static int fetch_window(struct fetch *f)
{
	struct ws_get_req r[ARTIFACT_RANGES];
	uint64_t at = f->off;
	unsigned n = 0;
	int rc;

	for (; n < ARTIFACT_RANGES && at < f->length; n++) {
		uint64_t want = f->length - at < ARTIFACT_RANGE ? f->length - at : ARTIFACT_RANGE;
		ws_buf_reset(&f->b[n]);
		/* No object info asked: the file store would hash the whole
		 * object for its etag, reading it twice. The size is checked
		 * by what the ranges return, and by the read past its end. */
		r[n] = (struct ws_get_req){ .key = f->key, .off = at, .len = want, .out = &f->b[n] };
		at += want;
	}
	if ((rc = ws_store_get_many(f->s, r, n)) != 0)
		return fetch_failed(f, rc);
	for (unsigned i = 0; i < n; i++) {
		if (r[i].rc) {
			ws_buf_reset(&f->b[i]);
			r[i].rc = ws_store_get(f->s, f->key, r[i].off, r[i].len, &f->b[i], NULL);
		}
		if (r[i].rc == WS_ETOOBIG && r[i].off == 0 && f->length > ARTIFACT_RANGE)
			return 1;
		if (r[i].rc)
			return fetch_failed(f, r[i].rc);
		WS_ASSERT(f->off == r[i].off); /* taken in order */
		if ((rc = fetch_take(f, &f->b[i], r[i].len)) != 0)
			return rc;
	}
	return 0;
}

/* The artifact read whole, once, as large as it is (fetch_window's 1). */
static int fetch_whole(struct fetch *f)
{
	struct ws_buf b;
	int rc;

	ws_info("checkpoint artifact %s: the store answers ranges with the whole object; reading it whole "
		"(%" PRIu64 " bytes in memory)", f->key, f->length);
	ws_buf_init(&b, WS_BUF_DEFAULT_MAX);
	rc = ws_store_get(f->s, f->key, 0, UINT64_MAX, &b, NULL);
	if (rc)
		rc = fetch_failed(f, rc);
	if (rc == 0)
		rc = fetch_take(f, &b, f->length);
	ws_buf_free(&b);
	return rc;
}

/* Nothing past the recorded length: a longer object is not the one the
 * index names. */
static int fetch_past_end(struct fetch *f)
{
	int rc;
	ws_buf_reset(&f->b[0]);
	rc = ws_store_get(f->s, f->key, f->length, 1, &f->b[0], NULL);
	if (rc)
		return fetch_failed(f, rc);
	if (f->b[0].len)
		return ws_fail(WS_ECORRUPT, "checkpoint artifact %s is longer than the %" PRIu64 " bytes its "
			       "index records (SHA-256 %s)", f->key, f->length, f->sha256_hex);
	return 0;
}

/* All of it, in windows of ranges, or whole when the store answers so. */
static int fetch_all(struct fetch *f)
{
	int rc = 0;
	while (f->off < f->length && (rc = fetch_window(f)) == 0)
		;
	if (rc == 1) {
		WS_ASSERT(f->off == 0); /* nothing taken yet: the first range was the whole */
		for (unsigned i = 0; i < ARTIFACT_RANGES; i++)
			ws_buf_free(&f->b[i]);
		/* (read whole, its length is checked by fetch_take) */
		return fetch_whole(f);
	}
	if (rc == 0)
		rc = fetch_past_end(f);
	return rc;
}

/* The stored bytes' SHA-256 against the index, then the image's own checks. */
static int fetch_check(struct fetch *f, const struct ws_fmt_manifest *cut)
{
	uint8_t sha[WS_SHA256_LEN];
	char hex[WS_SHA256_HEX_LEN + 1];
	int rc;

	WS_ASSERT(f->off == f->length);
	ws_sha256_end(&f->h, sha);
	ws_hex(sha, sizeof(sha), hex);
	if (strcmp(hex, f->sha256_hex) != 0)
		return ws_fail(WS_ECORRUPT, "checkpoint artifact %s is %" PRIu64 " bytes with SHA-256 %s; its index "
			       "records %" PRIu64 " bytes and %s", f->key, f->off, hex, f->length, f->sha256_hex);
	if ((rc = ws_art_reader_finish(&f->r)) != 0)
		return rc;
	return cut ? artifact_shape(f->key, f->r.head, f->r.plain_off, cut) : 0;
}

int ws_artifact_fetch(struct ws_store *s, const char *key, uint64_t length, const char *sha256_hex,
		      const struct ws_fmt_manifest *cut, int fd)
{
	struct fetch f = { .s = s, .key = key, .sha256_hex = sha256_hex, .length = length, .fd = fd };
	int rc;

	if ((rc = ws_art_reader_init(&f.r, s->keys, key, length, fd)) != 0)
		return rc;
	if ((rc = ws_sha256_begin(&f.h)) != 0) {
		ws_art_reader_free(&f.r);
		return ws_fail(rc, "read checkpoint artifact %s: no memory for its hash", key);
	}
	for (unsigned i = 0; i < ARTIFACT_RANGES; i++)
		ws_buf_init(&f.b[i], (size_t)ARTIFACT_RANGE);
	rc = fetch_all(&f);
	for (unsigned i = 0; i < ARTIFACT_RANGES; i++)
		ws_buf_free(&f.b[i]);
	if (rc)
		ws_sha256_end(&f.h, NULL);
	else
		rc = fetch_check(&f, cut);
	ws_art_reader_free(&f.r);
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
