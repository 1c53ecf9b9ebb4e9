/*
 * A tenant's history across re-bases. A re-base starts a new chain; its
 * REBASE base records the manifest the watermark named before it (the old
 * chain's head, by key, SHA-256 and length), so every chain still stored
 * is reached from the watermark by links alone, no LIST. Retention removes
 * old chains behind the cut it protects: a link to history it removed ends
 * the walk cleanly; a link to history it did not remove that is not there
 * is damage, named.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "chain.h"
#include "ckpt_read.h"
#include "history.h"
#include "sink.h"
#include "ws_assert.h"

void ws_gen_id(const struct ws_fmt_gen *g, char out[WS_GEN_ID_MAX])
{
	if (g->wal_magic == 0)
		snprintf(out, WS_GEN_ID_MAX, "g-none");
	else
		snprintf(out, WS_GEN_ID_MAX, "g%08x-%08x%08x", g->checkpoint_seq, g->salt1, g->salt2);
}

void ws_hist_chain_free(struct ws_hist_chain *h)
{
	ws_chain_free(&h->c);
	memset(h, 0, sizeof(*h));
}

/* Whether the manifest of sequence seq is history retention removed: at or
 * behind the cut its latest run protected for tenant. */
static bool removed_by_retention(struct ws_sink *sink, const char *tenant, uint64_t seq)
{
	struct ws_chain_stop kept;
	uint64_t id = 0, kept_seq;
	if (ws_checkpoint_retained_cut(sink, tenant, &kept, &id) != 0)
		return false;
	kept_seq = ws_key_manifest_seq(kept.key);
	return kept_seq != 0 && seq <= kept_seq;
}

int ws_hist_prev(struct ws_sink *sink, const char *tenant, const struct ws_chain *c, bool retained,
		 struct ws_cut_skip *skip, struct ws_hist_chain *out, enum ws_hist_end *end)
{
	const struct ws_fmt_manifest *b;
	struct ws_chain_stop head;
	struct ws_fmt_watermark link;
	uint64_t missing;
	int rc;

	memset(out, 0, sizeof(*out));
	*end = WS_HIST_FIRST;
	WS_ASSERT(c->count > 0);
	b = &c->m[0];
	/* Only a REBASE links to another chain; the tenant's first names
	 * none, nor one written before re-bases recorded links (or while the
	 * watermark carried its manifest): a watermark came before those. */
	if (b->kind != WS_MANIFEST_REBASE)
		return 0;
	if (!b->prev_key[0]) {
		if (b->wm_seq > 1)
			*end = WS_HIST_UNLINKED;
		return 0;
	}
	snprintf(head.key, sizeof(head.key), "%s", b->prev_key);
	memcpy(head.sha, b->prev_sha, WS_SHA256_LEN);
	head.length = b->prev_length;
	rc = ws_chain_load_from(sink->store, tenant, &head, NULL, WS_CHAIN_UPTO_MISSING, &out->c, NULL);
	if (rc == WS_EINCOMPLETE) {
		struct ws_obj_info info;
		int hrc = ws_store_head(sink->store, head.key, &info);
		if (hrc == WS_ENOTFOUND && removed_by_retention(sink, tenant, b->wm_seq - 1)) {
			*end = WS_HIST_REMOVED;
			return 0;
		}
		if (hrc == WS_ENOTFOUND)
			return ws_fail(WS_EINCOMPLETE, "tenant %s: manifest %s, the last of the chain before re-base "
				       "%s, is missing, and no retention run removed it", tenant, head.key,
				       c->keys[0]);
		if (hrc)
			return ws_fail_wrap(hrc, "tenant %s: read %s", tenant, head.key);
	}
	if (rc)
		return ws_fail_wrap(rc, "tenant %s: the chain before re-base %s", tenant, c->keys[0]);
	if (out->c.m[out->c.count - 1].wm_seq + 1 != b->wm_seq) {
		ws_hist_chain_free(out);
		return ws_fail(WS_EFORMAT, "tenant %s: re-base %s links to manifest %s, which is not the one "
			       "written just before it (watermark sequence gap)", tenant, c->keys[0], head.key);
	}
	*end = WS_HIST_MORE;
	if (!ws_chain_truncated(&out->c))
		return 0;
	/* Its start is gone: it starts at a stored checkpoint's cut, or the
	 * rest is history retention removes (a run that stopped part way). */
	missing = out->c.m[0].wm_seq - 1;
	memset(&link, 0, sizeof(link));
	snprintf(link.manifest_key, sizeof(link.manifest_key), "%s", head.key);
	memcpy(link.manifest_sha, head.sha, WS_SHA256_LEN);
	link.manifest_length = head.length;
	link.seq = b->wm_seq - 1;
	rc = retained ? ws_chain_from_cut_retained(sink, tenant, &link, &out->c, &out->base)
		      : ws_chain_from_cut(sink, tenant, &link, &out->c, &out->base, skip);
	if (rc == 0) {
		out->from_cut = true;
		return 0;
	}
	if (removed_by_retention(sink, tenant, missing)) {
		ws_hist_chain_free(out);
		*end = WS_HIST_REMOVED;
		return 0;
	}
	ws_hist_chain_free(out);
	return rc;
}

/* Each WAL generation of h, newest first. */
static int gens_of(const char *tenant, const struct ws_hist_chain *h, unsigned chain, ws_generation_fn fn,
		   void *arg)
{
	const struct ws_chain *c = &h->c;
	size_t last = c->count;
	while (last-- > 0) {
		struct ws_generation_info g;
		size_t first = last;
		while (first > 0 && c->m[first].kind == WS_MANIFEST_CONTINUE)
			first--;
		memset(&g, 0, sizeof(g));
		snprintf(g.tenant, sizeof(g.tenant), "%s", tenant);
		ws_gen_id(&c->m[first].gen, g.generation);
		g.chain = chain;
		if (first == 0 && h->from_cut)
			g.start = "checkpoint";
		else
			g.start = c->m[first].kind == WS_MANIFEST_REBASE ? "rebase" : "wal-restart";
		g.first_frame = first == 0 && h->from_cut ? c->m[0].last_frame : c->m[first].valid_from_frame;
		g.last_frame = c->m[last].last_frame;
		g.first_time_ms = c->m[first].time_ms;
		g.last_time_ms = c->m[last].time_ms;
		g.manifests = last - first + 1;
		int rc = fn(&g, arg);
		if (rc)
			return rc;
		last = first;
	}
	return 0;
}

static int list_generations(struct ws_sink *sink, const char *tenant, ws_generation_fn fn, void *arg,
			    enum ws_history_end *out_end, struct ws_buf *wmraw)
{
	struct ws_fmt_watermark wm;
	struct ws_hist_chain h;
	int rc;

	memset(&h, 0, sizeof(h));
	rc = ws_wm_load_keep(sink->store, tenant, &wm, NULL, wmraw);
	if (rc == WS_ENOTFOUND)
		return ws_fail(WS_ENOTFOUND, "tenant %s has no watermark at %s: nothing was shipped", tenant,
			       sink->store->url);
	if (rc)
		return rc;
	rc = ws_chain_load_flags(sink->store, tenant, &wm, WS_CHAIN_UPTO_MISSING, &h.c);
	if (rc == 0 && ws_chain_truncated(&h.c)) {
		rc = ws_chain_from_cut(sink, tenant, &wm, &h.c, &h.base, NULL);
		h.from_cut = rc == 0;
		if (rc)
			ws_chain_free(&h.c);
	}
	/* A chain that starts at a cut links nowhere: its REBASE base is
	 * gone, and with it everything before. */
	for (unsigned chain = 0; rc == 0; chain++) {
		struct ws_hist_chain prev;
		enum ws_hist_end end = WS_HIST_REMOVED;
		rc = gens_of(tenant, &h, chain, fn, arg);
		if (!rc && !h.from_cut)
			rc = ws_hist_prev(sink, tenant, &h.c, false, NULL, &prev, &end);
		if (rc || end != WS_HIST_MORE) {
			*out_end = end == WS_HIST_REMOVED ? WS_HISTORY_REMOVED :
				   end == WS_HIST_UNLINKED ? WS_HISTORY_UNLINKED : WS_HISTORY_FIRST;
			break;
		}
		ws_hist_chain_free(&h);
		h = prev;
	}
	ws_hist_chain_free(&h);
	return rc;
}

int ws_list_generations(struct ws_sink *sink, const char *tenant, ws_generation_fn fn, void *arg,
			enum ws_history_end *end)
{
	struct ws_buf wmraw;
	int rc;
	*end = WS_HISTORY_FIRST;
	if (!ws_tenant_name_valid(tenant))
		return ws_fail(WS_ECONFIG, "tenant name '%s' is invalid", tenant);
	ws_buf_init(&wmraw, WS_WM_BYTES_MAX);
	rc = list_generations(sink, tenant, fn, arg, end, &wmraw);
	ws_buf_free(&wmraw);
	return rc == WS_ECONFIG ? WS_EFORMAT : rc;
}
