/*
 * A re-base names the parts of the image before it whose pages did not
 * change (docs/DESIGN.md "Status and limits", docs/CHECKPOINTS.md
 * "Retention"). The image before it is the REBASE base of the chain the
 * watermark it replaces names: retention keeps every part of a chain the
 * watermark names, and deletes a REBASE manifest before its parts, with a
 * read of the watermark between (so the base still stored after the new
 * watermark is written proves its parts are kept: ws_snap_prev_still).
 * A part is the same when the header the re-base would upload, made from
 * the pages read now, hashes to the header hash its ref records (and the
 * lengths agree): that hash covers the page size, page range and the
 * pages' XXH3-64, and for a compressed part the codec and stored length.
 * Encrypted parts (a fresh nonce each) never match: an encrypting stream
 * uploads every part.
 */
#include "snap_reuse.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chain.h"
#include "ws_fail.h"
#include "ws_logging.h"

void ws_snap_prev_free(struct ws_snap_prev *p)
{
	free(p->refs);
	memset(p, 0, sizeof(*p));
}

int ws_snap_prev_load(struct ws_store *s, const char *tenant, const struct ws_fmt_watermark *wm,
		      struct ws_snap_prev *out)
{
	const uint64_t floor = wm->seq > WS_SNAP_PREV_WALK_MAX ? wm->seq - WS_SNAP_PREV_WALK_MAX : 0;
	struct ws_chain c;
	int rc;

	memset(out, 0, sizeof(*out));
	if (wm->manifest_key[0] == '\0' || wm->carried_len != 0)
		return 0;
	rc = ws_chain_load_since(s, tenant, wm, NULL, floor, &c, NULL);
	if (rc == WS_ENOTFOUND || rc == WS_EINCOMPLETE) {
		/* Nothing to name again: the re-base uploads every part. */
		ws_info("tenant %s: the chain of %s does not reach its base (%s): the re-base uploads every part",
			tenant, wm->manifest_key, ws_errmsg());
		return 0;
	}
	if (rc == WS_ECORRUPT || rc == WS_EFORMAT) {
		ws_warn("tenant %s: the chain of %s is damaged (%s): the re-base uploads every part", tenant,
			wm->manifest_key, ws_errmsg());
		return 0;
	}
	if (rc)
		return rc;
	const struct ws_fmt_manifest *b = &c.m[0];
	if (b->kind != WS_MANIFEST_REBASE || b->snap_count == 0) {
		ws_info("tenant %s: the chain of %s does not reach its base (cut by retention, or more than %u "
			"manifests): the re-base uploads every part", tenant, wm->manifest_key, WS_SNAP_PREV_WALK_MAX);
		ws_chain_free(&c);
		return 0;
	}
	out->refs = malloc(sizeof(*out->refs) * b->snap_count);
	if (!out->refs) {
		ws_chain_free(&c);
		return -ENOMEM;
	}
	memcpy(out->refs, b->snaps, sizeof(*out->refs) * b->snap_count);
	out->count = b->snap_count;
	snprintf(out->base.key, sizeof(out->base.key), "%s", c.keys[0]);
	if (c.count > 1) {
		memcpy(out->base.sha, c.m[1].prev_sha, WS_SHA256_LEN);
		out->base.length = c.m[1].prev_length;
	} else {
		memcpy(out->base.sha, wm->manifest_sha, WS_SHA256_LEN);
		out->base.length = wm->manifest_length;
	}
	out->have = true;
	ws_chain_free(&c);
	return 0;
}

const struct ws_fmt_objref *ws_snap_prev_find(const struct ws_snap_prev *p, uint64_t first, uint64_t count)
{
	size_t lo = 0, hi = p->have ? p->count : 0;
	/* The refs tile pages 1..n in order (a reader refuses anything else). */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (p->refs[mid].first < first)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < (p->have ? p->count : 0) && p->refs[lo].first == first && p->refs[lo].count == count)
		return &p->refs[lo];
	return NULL;
}

int ws_snap_prev_still(struct ws_store *s, const struct ws_snap_prev *p)
{
	struct ws_fmt_manifest m;
	struct ws_buf b;
	ws_buf_init(&b, 256u << 20);
	int rc = ws_manifest_read(s, p->base.key, p->base.sha, p->base.length, &b, &m);
	if (rc == 0)
		ws_fmt_manifest_free(&m);
	ws_buf_free(&b);
	return rc;
}

uint32_t ws_snap_grid_pages(uint64_t pages, uint32_t ps, uint32_t slot_pages, uint32_t parts_max)
{
	/* 64 KiB parts: a scattered change of 1 MiB dirties about as many
	 * parts as pages (docs/bench/README.md "Re-base cost"). A database
	 * that fits one slot goes as one part, as before: re-uploading it
	 * whole costs one request. Never more than half the parts a
	 * manifest may name: the grid doubles for a larger database. */
	uint32_t g = ps >= WS_SNAP_GRID_BYTES ? 1 : WS_SNAP_GRID_BYTES / ps;
	if (pages <= slot_pages || g >= slot_pages)
		return slot_pages;
	while (g < slot_pages && (pages + g - 1) / g > parts_max / 2)
		g *= 2;
	return g;
}
