/*
 * A chain that retention shortened: the history before a checkpoint's cut may
 * be gone, and the cut's artifact then stands for it. Restore and verify walk
 * the chain from the watermark; when the walk ends at a missing predecessor,
 * this file finds the stored checkpoint whose cut is in the chain and starts
 * the chain there (ckpt_read.c names the cuts; it never takes a checkpoint).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chain.h"
#include "chain_cut.h"
#include "ckpt_read.h"
#include "ws_assert.h"

/* Where in c (walked from wm) the manifest stop is, or c->count. */
static size_t chain_find(const struct ws_chain *c, const struct ws_fmt_watermark *wm, const struct ws_chain_stop *stop)
{
	for (size_t i = c->count; i-- > 0;) {
		/* What the newer manifest (or the watermark) records for c->m[i]. */
		bool head = i + 1 == c->count;
		const uint8_t *sha = head ? wm->manifest_sha : c->m[i + 1].prev_sha;
		uint64_t len = head ? wm->manifest_length : c->m[i + 1].prev_length;
		if (strcmp(c->keys[i], stop->key) == 0 && len == stop->length &&
		    memcmp(sha, stop->sha, WS_SHA256_LEN) == 0)
			return i;
	}
	return c->count;
}

/*
 * Every stored checkpoint whose cut is in c and whose artifact is present
 * (its recorded length) is a base; the one whose cut is oldest in c keeps
 * the most history restorable (a newer checkpoint never shrinks the window),
 * the newest checkpoint winning a tie.
 */
static bool skipped(const struct ws_cut_skip *skip, uint64_t id)
{
	for (size_t k = 0; skip && k < skip->n; k++)
		if (skip->ids[k] == id)
			return true;
	return false;
}

static int from_cut(struct ws_sink *sink, const char *tenant, const struct ws_fmt_watermark *wm,
		    struct ws_chain *c, struct ws_restore_base *base, bool retained, struct ws_cut_skip *skip)
{
	struct ws_restore_base *bases = NULL;
	struct ws_chain_stop kept;
	size_t nb = 0, best = c->count, bad = c->count, i;
	uint64_t kept_id = 0;

	/* Called on a chain whose walk ended at a missing predecessor. */
	WS_ASSERT(c->count > 0 && ws_chain_truncated(c));
	if (skip)
		skip->passed_over[0] = '\0';

	if (retained) {
		/* verify: only retention removes history, and only behind the cut
		 * it protected. */
		if (ws_checkpoint_retained_cut(sink, tenant, &kept, &kept_id) != 0 ||
		    chain_find(c, wm, &kept) == c->count)
			return ws_fail(WS_EINCOMPLETE, "tenant %s: manifest %s is missing (no retention run "
				       "removed it: %s)", tenant, c->m[0].prev_key,
				       kept_id ? "it lies after the cut retention protected" :
				       "no retention run protected a cut of this tenant");
	}
	if (ws_checkpoint_bases_for(sink, tenant, &bases, &nb) == 0) {
		for (size_t k = 0; k < nb; k++) {
			struct ws_obj_info info;
			int hrc;
			i = chain_find(c, wm, &bases[k].cut);
			if (i >= c->count || skipped(skip, bases[k].checkpoint_id))
				continue;
			hrc = ws_store_head(sink->store, bases[k].artifact_key, &info);
			if (hrc || info.size_bytes != bases[k].artifact_length) {
				/* Not there whole: said when it is older than the cut
				 * used (it would have served more), or none serves. */
				if (skip && i < bad) {
					bad = i;
					snprintf(skip->passed_over, sizeof(skip->passed_over),
						 "checkpoint artifact %s %s", bases[k].artifact_key,
						 hrc == WS_ENOTFOUND ? "is missing" : hrc ? "cannot be read" :
						 "is not the size its index records");
				}
				continue;
			}
			if (i >= best)
				continue;
			best = i;
			*base = bases[k];
		}
	}
	free(bases);
	if (skip && bad >= best)
		skip->passed_over[0] = '\0'; /* not older than the cut used: it would serve nothing more */
	if (best == c->count && skip && skip->passed_over[0])
		return ws_fail(WS_EINCOMPLETE, "tenant %s: manifest %s is missing (history before a checkpoint's "
			       "cut), and %s", tenant, c->m[0].prev_key, skip->passed_over);
	if (best == c->count)
		return ws_chain_missing(tenant, c->m[0].prev_key);
	i = best;
	WS_ASSERT(i < c->count && strcmp(c->keys[i], base->cut.key) == 0);
	/* The manifests before the cut are history its artifact replaces. */
	for (size_t k = 0; k < i; k++)
		ws_fmt_manifest_free(&c->m[k]);
	memmove(c->m, c->m + i, (c->count - i) * sizeof(*c->m));
	memmove(c->keys, c->keys + i, (c->count - i) * sizeof(*c->keys));
	c->count -= i;
	/* The cut is the chain's base now: its state is the artifact. */
	WS_ASSERT(c->count > 0 && strcmp(c->keys[0], base->cut.key) == 0);
	return 0;
}

int ws_chain_from_cut(struct ws_sink *sink, const char *tenant, const struct ws_fmt_watermark *wm,
		      struct ws_chain *c, struct ws_restore_base *base, struct ws_cut_skip *skip)
{
	return from_cut(sink, tenant, wm, c, base, false, skip);
}

int ws_chain_from_cut_retained(struct ws_sink *sink, const char *tenant, const struct ws_fmt_watermark *wm,
			       struct ws_chain *c, struct ws_restore_base *base)
{
	return from_cut(sink, tenant, wm, c, base, true, NULL);
}
