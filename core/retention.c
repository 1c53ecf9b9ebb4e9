/*
 * Retention of a sink's history behind its checkpoints (docs/CHECKPOINTS.md
 * "Retention"): protect the latest Commit (and the `keep` before it), then
 * sweep, phase by phase, what no kept cut and no live chain names: manifests
 * and objects behind the kept cuts, the artifacts and then the indexes of
 * older checkpoints. Each phase is recorded before it runs, so a killed run
 * resumes where it stopped.
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
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "artifact.h"
#include "chain.h"
#include "ckpt_read.h"
#include "probes.h"
#include "tenant_removal.h"
#include "sink.h"
#include "ws_assert.h"
#include "ws_clock.h"
#include "ws_fault.h"
#include "ws_logging.h"

/* ---- retention ---------------------------------------------------------------------------- */

struct ret_ctx {
	struct ws_ckpt *c;
	struct ws_store *s;
	bool dry;
	ws_retention_fn fn;
	void *arg;
	struct ws_retention_report *rep;
	/* Dry run: keys already reported (nothing is deleted, so walks that
	 * a real run finds already swept would name them again). */
	char **seen;
	size_t seen_count, seen_cap;   /* open addressing; cap a power of two */
	/* Finishing a run for an older cut whose artifacts no longer verify:
	 * its sweep deletes nothing (the run for the newer, verified cut
	 * deletes all of it). */
	bool older_run;
	bool older_skipped;   /* the older run's protected cut did not verify: none of its sweep runs */
	unsigned keep;        /* committed checkpoints kept, the protected one the newest (>= 1) */
};

static uint64_t key_hash(const char *k)
{
	uint64_t h = 1469598103934665603ull;
	for (; *k; k++)
		h = (h ^ (uint8_t)*k) * 1099511628211ull;
	return h;
}

/* Insert key; 1 if it was new, 0 if seen, -ENOMEM. */
static int seen_add(struct ret_ctx *x, const char *key)
{
	size_t i;
	if (2 * (x->seen_count + 1) > x->seen_cap) {
		size_t ncap = x->seen_cap ? x->seen_cap * 2 : 1024;
		char **n = calloc(ncap, sizeof(*n));
		if (!n)
			return -ENOMEM;
		for (size_t j = 0; j < x->seen_cap; j++) {
			if (!x->seen[j])
				continue;
			for (i = key_hash(x->seen[j]) & (ncap - 1); n[i]; i = (i + 1) & (ncap - 1))
				;
			n[i] = x->seen[j];
		}
		free(x->seen);
		x->seen = n;
		x->seen_cap = ncap;
	}
	/* Open addressing: a power of two, never more than half full, so the
	 * probe below ends at a free slot. */
	WS_ASSERT((x->seen_cap & (x->seen_cap - 1)) == 0 && 2 * x->seen_count < x->seen_cap);
	for (i = key_hash(key) & (x->seen_cap - 1); x->seen[i]; i = (i + 1) & (x->seen_cap - 1))
		if (strcmp(x->seen[i], key) == 0)
			return 0;
	if (!(x->seen[i] = strdup(key)))
		return -ENOMEM;
	x->seen_count++;
	return 1;
}

static void seen_free(struct ret_ctx *x)
{
	for (size_t i = 0; i < x->seen_cap; i++)
		free(x->seen[i]);
	free(x->seen);
}

static int ret_delete(struct ret_ctx *x, const char *key)
{
	int rc;
	/* An inline batch has no key of its own: it goes with its manifest. */
	WS_ASSERT(key[0] != '\0');
	if (x->dry && (rc = seen_add(x, key)) <= 0)
		return rc;
	/* A dry run reports what a real run would delete: not a key already
	 * gone (a crashed run's, resumed). */
	if (x->dry) {
		struct ws_obj_info info;
		if (ws_store_head(x->s, key, &info) == WS_ENOTFOUND)
			return 0;
	}
	if (x->fn)
		x->fn(key, x->arg);
	x->rep->deleted++;
	if (x->dry)
		return 0;
	if ((rc = WS_FAULT("retention.before_delete")) != 0)
		return ws_fail(rc, "fault retention.before_delete at %s", key);
	rc = ws_store_del(x->s, key);
	if (rc)
		return ws_fail_wrap(rc, "retention: delete %s", key);
	if ((rc = WS_FAULT("retention.after_delete")) != 0)
		return ws_fail(rc, "fault retention.after_delete at %s", key);
	return 0;
}

/* A sorted set of keys: what a tenant's live stream and protected cut need. */
struct keyset {
	char (*k)[WS_KEY_MAX];
	size_t n, cap;
	char head[WS_KEY_MAX];  /* the watermark's manifest when the live chain was last added */
	uint64_t cut_seq;       /* the protected cut manifest's watermark sequence (0: not stored) */
	uint64_t wm_seq;        /* the watermark's sequence when last read (0: none) */
};

static int keyset_add(struct keyset *ks, const char *key)
{
	if (ks->n == ks->cap) {
		size_t ncap = ks->cap ? ks->cap * 2 : 64;
		void *n = realloc(ks->k, ncap * sizeof(*ks->k));
		if (!n)
			return -ENOMEM;
		ks->k = n;
		ks->cap = ncap;
	}
	WS_ASSERT(ks->n < ks->cap);
	snprintf(ks->k[ks->n++], WS_KEY_MAX, "%s", key);
	return 0;
}

static int key_cmp(const void *a, const void *b)
{
	return strcmp(a, b);
}

static bool keyset_has(const struct keyset *ks, const char *key)
{
	return ks->n && bsearch(key, ks->k, ks->n, sizeof(*ks->k), key_cmp) != NULL;
}

static int keyset_add_chain(struct keyset *ks, const struct ws_chain *c)
{
	int rc = 0;
	for (size_t i = 0; i < c->count && !rc; i++) {
		const struct ws_fmt_manifest *m = &c->m[i];
		rc = keyset_add(ks, c->keys[i]);
		for (uint32_t k = 0; k < m->snap_count && !rc; k++)
			rc = keyset_add(ks, m->snaps[k].key);
		for (uint32_t k = 0; k < m->batch_count && !rc; k++)
			if (!ws_fmt_objref_inline(&m->batches[k]))
				rc = keyset_add(ks, m->batches[k].key);
	}
	return rc;
}

/* How many chains back through REBASE links the keep set follows. */
#define KEEP_LINKS_MAX 4096u

/*
 * The chains before the live one that restore reaches through the links
 * re-bases record (docs/FORMAT.md "Manifest", REBASE), back to the one the
 * cut is in: history after the cut, kept whole. A re-base names parts of
 * the image before it (core/snap_reuse.c), so such a chain may name parts
 * keyed at or behind the cut's sequence: every deletion spares them. A
 * link to a manifest that is gone ends the walk (history a run removed).
 */
static int keep_links(struct ret_ctx *x, const struct ws_ckpt_tenant_entry *t, struct keyset *ks,
		      const struct ws_fmt_manifest *base, bool stopped)
{
	struct ws_chain_stop cut, link;
	uint32_t kind = base->kind;
	uint64_t seq = base->wm_seq;
	int rc = 0;

	ws_ckread_cut_of(t, &cut);
	snprintf(link.key, sizeof(link.key), "%s", base->prev_key);
	memcpy(link.sha, base->prev_sha, WS_SHA256_LEN);
	link.length = base->prev_length;
	for (unsigned n = 0; !rc && !stopped && kind == WS_MANIFEST_REBASE && link.key[0] && n < KEEP_LINKS_MAX;
	     n++) {
		struct ws_chain c;
		/* The link names sequence seq - 1: behind the cut, it is history
		 * this run may delete (and the cut's chain was added already). */
		if (ks->cut_seq && seq - 1 < ks->cut_seq)
			break;
		rc = ws_chain_load_from(x->s, t->tenant, &link, &cut, WS_CHAIN_UPTO_MISSING, &c, &stopped);
		if (rc == WS_EINCOMPLETE || rc == WS_ENOTFOUND)
			return 0;
		if (rc)
			return ws_fail_wrap(rc, "retention: tenant %s: the chain before a re-base (%s)", t->tenant, link.key);
		rc = keyset_add_chain(ks, &c);
		kind = c.m[0].kind;
		seq = c.m[0].wm_seq;
		snprintf(link.key, sizeof(link.key), "%s", c.m[0].prev_key);
		memcpy(link.sha, c.m[0].prev_sha, WS_SHA256_LEN);
		link.length = c.m[0].prev_length;
		ws_chain_free(&c);
	}
	return rc;
}

/*
 * What must stay for tenant t: every object of the live chain (from the
 * watermark back to the protected cut, or to its REBASE base when it no
 * longer passes through the cut) and the cut manifest with its objects.
 * Batches and snapshot parts carry their manifest's sequence in their keys,
 * so no two chains share one; objects written before they did are keyed by
 * content and may be shared: deletions are always checked against this set.
 */
/*
 * Add the live chain (the watermark back to the cut, or to its REBASE
 * base) to ks when the watermark names a manifest ks has not seen yet.
 * Called before every delete batch: nothing any watermark written before
 * the delete names is deleted (the cut's own manifest and objects, and
 * objects an older chain shares under content keys of the old format).
 */
static int keep_refresh_kept(struct ret_ctx *x, const struct ws_ckpt_tenant_entry *t, struct keyset *ks,
			     struct ws_buf *wmraw)
{
	struct ws_fmt_watermark wm;
	struct ws_chain_stop cut;
	struct ws_chain c;
	bool stopped;
	int rc = ws_wm_load_keep(x->s, t->tenant, &wm, NULL, wmraw);

	if (rc == WS_ENOTFOUND) {
		ks->wm_seq = 0;
		return 0;
	}
	if (rc)
		return ws_fail_wrap(rc, "retention: tenant %s: watermark", t->tenant);
	ks->wm_seq = wm.seq;
	if (strcmp(wm.manifest_key, ks->head) == 0)
		return 0;
	ws_ckread_cut_of(t, &cut);
	if ((rc = ws_chain_load_stop(x->s, t->tenant, &wm, &cut, &c, &stopped)) != 0)
		return ws_fail_wrap(rc, "retention: tenant %s: live chain", t->tenant);
	rc = keyset_add_chain(ks, &c);
	if (!rc)
		rc = keep_links(x, t, ks, &c.m[0], stopped);
	ws_chain_free(&c);
	if (rc)
		return rc;
	snprintf(ks->head, sizeof(ks->head), "%s", wm.manifest_key);
	qsort(ks->k, ks->n, sizeof(*ks->k), key_cmp);
	return 0;
}

/* The watermark's bytes are kept while its chain is read: a manifest it
 * carries is stored nowhere else. */
static int keep_refresh(struct ret_ctx *x, const struct ws_ckpt_tenant_entry *t, struct keyset *ks)
{
	struct ws_buf wmraw;
	ws_buf_init(&wmraw, WS_WM_BYTES_MAX);
	int rc = keep_refresh_kept(x, t, ks, &wmraw);
	ws_buf_free(&wmraw);
	return rc;
}

static int keep_set(struct ret_ctx *x, const struct ws_ckpt_tenant_entry *t, struct keyset *ks)
{
	struct ws_chain_stop cut;
	struct ws_chain c;
	bool stopped;
	int rc;

	memset(ks, 0, sizeof(*ks));
	ws_ckread_cut_of(t, &cut);
	rc = ws_chain_load_from(x->s, t->tenant, &cut, &cut, 0, &c, &stopped);
	if (rc == 0) {
		ks->cut_seq = c.m[c.count - 1].wm_seq;
		rc = keyset_add_chain(ks, &c);
		ws_chain_free(&c);
	} else if (rc == WS_EINCOMPLETE) {
		rc = 0; /* the cut manifest is gone: the tenant was removed */
	}
	if (!rc)
		rc = keep_refresh(x, t, ks);
	/* keep_refresh sorts only what it adds to: the set is searched. */
	if (!rc && ks->n)
		qsort(ks->k, ks->n, sizeof(*ks->k), key_cmp);
	if (rc) {
		free(ks->k); /* the caller frees only what a success returns */
		memset(ks, 0, sizeof(*ks));
	}
	return rc;
}

/* Between a manifest naming snapshot parts and its parts' delete. */
static int parts_refresh(struct ret_ctx *x, const struct ws_ckpt_tenant_entry *t, struct keyset *keep)
{
	int rc = WS_FAULT("retention.before_parts_delete");
	if (rc)
		return ws_fail(rc, "fault retention.before_parts_delete at %s", t->tenant);
	return keep_refresh(x, t, keep);
}

/*
 * Delete the chain from head back (manifests and the batches and snapshot
 * parts they name), oldest first, each manifest before its objects, sparing
 * every key in keep. A crash leaves the chain from head back to a manifest
 * whose every object is still there: the chain then starts after the
 * missing one, and a restore of a point after the cut starts from the
 * cut's artifact (a manifest left naming deleted objects had restore
 * --time and --frame of such points fail on the missing object until the
 * next run). The objects left behind a deleted manifest are the next run's
 * (sweep_unreachable finds them by their keys' sequences).
 */
static int sweep_chain(struct ret_ctx *x, const struct ws_ckpt_tenant_entry *t, const struct ws_chain_stop *head,
		       struct keyset *keep)
{
	const char *tenant = t->tenant;
	struct ws_chain c;
	int rc = ws_chain_load_from(x->s, tenant, head, NULL, WS_CHAIN_UPTO_MISSING, &c, NULL);

	if (rc == WS_EINCOMPLETE && c.count == 0)
		return 0; /* head itself is gone: swept already */
	if (rc)
		return ws_fail_wrap(rc, "retention: tenant %s", tenant);
	for (size_t i = 0; i < c.count && !rc; i++) {
		const struct ws_fmt_manifest *m = &c.m[i];
		/* Each manifest's objects are one delete batch: re-read the
		 * watermark first (x->dry deletes nothing: the set it has is
		 * enough). */
		if (!x->dry && (rc = keep_refresh(x, t, keep)) != 0)
			break;
		/* Only sequences the watermark has passed: a stream only ever
		 * names objects keyed with a higher sequence than its watermark's
		 * (docs/FORMAT.md "Keys"), so none of these can be named later.
		 * A higher one is a tenant removed and shipped anew (its
		 * sequences restart; no watermark at all: 0): kept, and the
		 * chain stays walkable from head (its sequences only grow). */
		if (m->wm_seq > keep->wm_seq)
			break;
		if (!keyset_has(keep, c.keys[i]))
			rc = ret_delete(x, c.keys[i]);
		/* A re-base may be naming these parts again (core/snap_reuse.c):
		 * it checks, after its watermark is written, that this manifest
		 * is still stored, so the watermark is read again after the
		 * manifest's delete and before its parts'. */
		if (!rc && m->snap_count && !x->dry)
			rc = parts_refresh(x, t, keep);
		for (uint32_t k = 0; k < m->snap_count && !rc; k++)
			if (!keyset_has(keep, m->snaps[k].key))
				rc = ret_delete(x, m->snaps[k].key);
		for (uint32_t k = 0; k < m->batch_count && !rc; k++)
			if (!ws_fmt_objref_inline(&m->batches[k]) && !keyset_has(keep, m->batches[k].key))
				rc = ret_delete(x, m->batches[k].key);
	}
	ws_chain_free(&c);
	return rc;
}

static int manifest_seq_cmp(const void *a, const void *b)
{
	uint64_t x = ws_key_manifest_seq(a), y = ws_key_manifest_seq(b);
	return x < y ? -1 : x > y;
}

/*
 * The manifests of tenant t at or below the protected cut's sequence that
 * no walk reaches: an old chain's manifests after an older checkpoint's cut
 * that a REBASE then cut off from the live stream (retention's walks end
 * at a REBASE; the link it records is restore's), and a tail's manifest
 * that never became its watermark's.
 * All of it is history before the cut, as retention's to delete as the
 * cut's own ancestors. Then every batch and snapshot part keyed with such a
 * sequence that nothing kept names: an upload whose tail stopped before its
 * manifest. A stream only ever names objects keyed with a higher sequence
 * than its watermark's (docs/FORMAT.md "Keys"), and the watermark is at or
 * past the cut, so nothing in flight is among them. Each manifest after the
 * objects it names, sparing the keep set.
 */
/* The watermark (as last read) is behind the cut, or gone: the tenant was
 * removed and is shipped anew, its sequences restarting below the cut's. */
static bool shipped_anew(const struct keyset *keep)
{
	return keep->wm_seq < keep->cut_seq;
}

static int sweep_unreachable(struct ret_ctx *x, const struct ws_ckpt_tenant_entry *t, struct keyset *keep)
{
	char prefix[WS_KEY_MAX], token[WS_KEY_MAX] = "";
	char (*keys)[WS_KEY_MAX] = NULL;
	struct keyset loose, done;
	size_t n = 0, cap = 0;
	struct ws_buf b;
	int rc = 0;

	/* A watermark behind the cut is a tenant removed and shipped anew:
	 * its sequences restart, and lower ones may be its live stream. Read
	 * again after every refresh below: the tenant may be shipped anew
	 * while the listing runs, and what the listing then shows of the new
	 * stream is keyed with the low sequences this sweep deletes. */
	if (keep->cut_seq == 0 || shipped_anew(keep))
		return 0;
	if ((rc = WS_FAULT("retention.before_unreachable_list")) != 0)
		return ws_fail(rc, "fault retention.before_unreachable_list at %s", t->tenant);
	memset(&loose, 0, sizeof(loose));
	memset(&done, 0, sizeof(done));
	snprintf(prefix, sizeof(prefix), "%s/", t->tenant);
	for (unsigned pages = 0;; pages++) {
		struct ws_list_page page;
		bool more;
		memset(&page, 0, sizeof(page));
		if ((rc = ws_store_list(x->s, prefix, token, WS_LIST_PAGE_MAX, &page)) != 0) {
			ws_fail_wrap(rc, "retention: tenant %s: list %s", t->tenant, prefix);
			break;
		}
		for (size_t i = 0; i < page.count && !rc; i++) {
			uint64_t seq = ws_key_manifest_seq(page.keys[i]), oseq;
			if (keyset_has(keep, page.keys[i]))
				continue;
			/* A slot is no content-named manifest (sink.h ws_key_manifest_seq). */
			if (ws_key_slot_any(page.keys[i])) {
				rc = ws_slot_key_refuse("retention", page.keys[i]);
				break;
			}
			if (seq == 0) {
				oseq = ws_key_object_seq(page.keys[i]);
				if (oseq != 0 && oseq <= keep->cut_seq)
					rc = keyset_add(&loose, page.keys[i]);
				continue;
			}
			if (seq > keep->cut_seq)
				continue;
			if (n == cap) {
				size_t ncap = cap ? cap * 2 : 64;
				void *nk = realloc(keys, ncap * sizeof(*keys));
				if (!nk) {
					rc = -ENOMEM;
					break;
				}
				keys = nk;
				cap = ncap;
			}
			snprintf(keys[n++], WS_KEY_MAX, "%s", page.keys[i]);
		}
		more = page.truncated && strcmp(page.next_token, token) > 0;
		if (more)
			snprintf(token, sizeof(token), "%s", page.next_token);
		ws_list_page_free(&page);
		if (rc || !more)
			break;
	}
	/* Oldest first (sequences are unique per tenant). */
	if (!rc && n > 1)
		qsort(keys, n, sizeof(*keys), manifest_seq_cmp);
	ws_buf_init(&b, 256u << 20);
	for (size_t i = 0; i < n && !rc; i++) {
		struct ws_fmt_manifest m;
		ws_buf_reset(&b);
		rc = ws_store_get(x->s, keys[i], 0, UINT64_MAX, &b, NULL);
		if (rc == WS_ENOTFOUND) {
			rc = 0;
			continue;
		}
		if (rc) {
			ws_fail_wrap(rc, "retention: tenant %s: read %s", t->tenant, keys[i]);
			break;
		}
		if (ws_fmt_manifest_decode(b.data, b.len, &m) != 0)
			continue; /* not a manifest: never ours to delete */
		if (strcmp(m.tenant, t->tenant) != 0) {
			ws_fmt_manifest_free(&m);
			continue;
		}
		if (!x->dry)
			rc = keep_refresh(x, t, keep);
		if (!rc && shipped_anew(keep)) {
			ws_fmt_manifest_free(&m);
			break;
		}
		/* An object outside the tenant's prefix is never this tenant's
		 * to delete, whatever a manifest of it names. */
		const char *foreign = ws_manifest_foreign_ref(&m);
		if (foreign)
			ws_warn("retention: tenant %s: manifest %s names object %s, which is not under %s/ (foreign "
				"object): it is left alone", t->tenant, keys[i], foreign, t->tenant);
		/* A manifest naming snapshot parts goes before them, the
		 * watermark read again between (as in sweep_chain). */
		if (!rc && m.snap_count && !keyset_has(keep, keys[i])) {
			rc = ret_delete(x, keys[i]);
			if (!rc && !x->dry)
				rc = parts_refresh(x, t, keep);
			if (!rc && shipped_anew(keep)) {
				ws_fmt_manifest_free(&m);
				break;
			}
		}
		for (uint32_t k = 0; k < m.snap_count && !rc; k++)
			if (!keyset_has(keep, m.snaps[k].key) && ws_key_in_tenant(t->tenant, m.snaps[k].key) &&
			    (rc = ret_delete(x, m.snaps[k].key)) == 0)
				rc = keyset_add(&done, m.snaps[k].key);
		for (uint32_t k = 0; k < m.batch_count && !rc; k++)
			if (!ws_fmt_objref_inline(&m.batches[k]) && !keyset_has(keep, m.batches[k].key) &&
			    ws_key_in_tenant(t->tenant, m.batches[k].key) && (rc = ret_delete(x, m.batches[k].key)) == 0)
				rc = keyset_add(&done, m.batches[k].key);
		if (!rc && !m.snap_count && !keyset_has(keep, keys[i]))
			rc = ret_delete(x, keys[i]);
		ws_fmt_manifest_free(&m);
	}
	/* The uploads no manifest names (those a manifest above named are
	 * gone already): one more delete batch, after one more read of the
	 * watermark, sparing what a chain it names now holds. */
	if (!rc && done.n)
		qsort(done.k, done.n, sizeof(*done.k), key_cmp);
	if (!rc && loose.n && !x->dry)
		rc = keep_refresh(x, t, keep);
	for (size_t i = 0; i < loose.n && !rc && !shipped_anew(keep); i++)
		if (!keyset_has(&done, loose.k[i]) && !keyset_has(keep, loose.k[i]))
			rc = ret_delete(x, loose.k[i]);
	ws_buf_free(&b);
	free(keys);
	free(loose.k);
	free(done.k);
	return rc;
}

/*
 * The refs of the checkpoints older than p that are still stored, newest
 * first, with those whose committed index is damaged or missing (damaged:
 * nothing of them restores; their artifacts are found by their keys' prefix
 * and deleted with the index).
 */
struct old_ref {
	struct ws_ckpt_ref ref;
	bool damaged;
};

struct refs_walk {
	struct old_ref *refs;
	size_t count, cap;
};

static int add_old(struct refs_walk *w, const struct ws_ckpt_ref *ref, bool damaged)
{
	if (ws_ckread_grow((void **)&w->refs, &w->cap, w->count, sizeof(*w->refs)) != 0)
		return -ENOMEM;
	w->refs[w->count].ref = *ref;
	w->refs[w->count++].damaged = damaged;
	return 0;
}

static int add_ref(const struct ws_ckpt_ref *ref, const struct ws_ckpt_index *idx, void *arg)
{
	(void)idx;
	return add_old(arg, ref, false);
}

static int add_damaged(const struct ws_ckpt_ref *ref, const char *detail, void *arg)
{
	ws_info("retention: checkpoint %" PRIu64 "'s committed index %s is damaged or missing (%s); it is removed "
		"with its artifacts", ref->id, ref->key, detail);
	return add_old(arg, ref, true);
}

/*
 * committed/ objects older than p that the walk did not meet and that
 * decode as neither an index nor a seal (a damaged seal, or a damaged index
 * off the chain): removed as a damaged index is. One LIST per sweep;
 * seals and loadable indexes stay (a seal occupies its path for good).
 */
static int older_damaged(struct ret_ctx *x, const struct ws_ckpt_index *p, struct refs_walk *w)
{
	char dep[WS_CKPT_DEPLOYMENT_LEN + 1], token[WS_KEY_MAX] = "";
	int rc = ws_ckpt_deployment_id(x->c, dep);

	while (rc == 0) {
		struct ws_list_page page;
		bool more;
		memset(&page, 0, sizeof(page));
		if ((rc = ws_store_list(x->s, WS_CKPT_PREFIX "/committed/", token, WS_LIST_PAGE_MAX, &page)) != 0) {
			ws_list_page_free(&page);
			return ws_fail_wrap(rc, "retention: list " WS_CKPT_PREFIX "/committed/");
		}
		for (size_t i = 0; i < page.count && rc == 0; i++) {
			struct ws_ckpt_peek pk;
			char sha[WS_SHA256_HEX_LEN + 1];
			uint64_t id = 0;
			bool met = false;
			/* Only what is older than p is read: by the id its name spells. */
			if (ws_ckpt_committed_key_parse(page.keys[i], &id, sha) && id >= p->checkpoint_id)
				continue;
			for (size_t k = 0; k < w->count && !met; k++)
				met = strcmp(w->refs[k].ref.key, page.keys[i]) == 0;
			if (met || (rc = ws_ckpt_peek(x->c, page.keys[i], dep, &pk)) != 0)
				continue;
			if (pk.kind != WS_CKPT_PEEK_DAMAGED || !pk.ref.id || pk.ref.id >= p->checkpoint_id)
				continue;
			ws_info("retention: %s decodes as neither a committed index nor a seal (%s); it is removed",
				page.keys[i], pk.detail);
			rc = add_old(w, &pk.ref, true);
		}
		more = rc == 0 && page.truncated && strcmp(page.next_token, token) > 0;
		if (more)
			snprintf(token, sizeof(token), "%s", page.next_token);
		ws_list_page_free(&page);
		if (!more)
			break;
	}
	return rc;
}

static int older_refs(struct ret_ctx *x, const struct ws_ckpt_index *p, struct old_ref **out, size_t *count)
{
	struct refs_walk w = { NULL, 0, 0 };
	int rc = p->has_predecessor ? ws_ckread_walk_stored(x->c, p->predecessor, add_ref, add_damaged, &w) : 0;

	if (rc == 0)
		rc = older_damaged(x, p, &w);

	if (rc) {
		free(w.refs);
		w.refs = NULL;
		w.count = 0;
	}
	*out = w.refs;
	*count = w.count;
	return rc;
}

static int delete_one(const char *key, void *arg)
{
	return ret_delete(arg, key);
}

/*
 * Phase SWEEP_ARTIFACTS: the artifacts of older checkpoints; each tenant's
 * stream before the protected cut; and the chains behind older checkpoints'
 * cuts that a REBASE has since cut off from the live stream.
 */
static int sweep_artifacts(struct ret_ctx *x, const struct ws_ckpt_index *p)
{
	struct old_ref *refs;
	size_t n;
	int rc = older_refs(x, p, &refs, &n);

	for (size_t i = 0; i < n && !rc; i++) {
		struct ws_ckpt_index idx;
		if (refs[i].damaged) {
			rc = ws_ckread_each_artifact(x->s, refs[i].ref.id, delete_one, x);
			continue;
		}
		rc = ws_ckpt_load_committed(x->c, &refs[i].ref, &idx);
		if (rc)
			break;
		for (size_t k = 0; k < idx.artifact_count && !rc; k++) {
			if (ws_ckread_index_artifact(p, idx.artifacts[k].key))
				continue;
			if (!ws_ckread_artifact_key_of(idx.artifacts[k].key, idx.checkpoint_id)) {
				ws_warn("retention: checkpoint %" PRIu64 " names %s, no artifact of it; left alone (a "
					"damaged or foreign index)", idx.checkpoint_id, idx.artifacts[k].key);
				continue;
			}
			rc = ret_delete(x, idx.artifacts[k].key);
		}
		ws_ckpt_index_free(&idx);
	}
	for (size_t i = 0; i < p->tenant_count && !rc; i++) {
		const struct ws_ckpt_tenant_entry *t = &p->tenants[i];
		struct ws_chain_stop head;
		struct keyset keep;
		if ((rc = keep_set(x, t, &keep)) != 0)
			break;
		ws_ckread_cut_of(t, &head);
		rc = sweep_chain(x, t, &head, &keep);
		/* Older cuts of this tenant: usually already gone with the sweep
		 * above (they are the cut's ancestors), else a superseded chain. */
		for (size_t r = 0; r < n && !rc; r++) {
			struct ws_ckpt_index idx;
			const struct ws_ckpt_tenant_entry *ot;
			if (refs[r].damaged)
				continue; /* its cut is unknown: the live sweeps above and below cover it */
			if ((rc = ws_ckpt_load_committed(x->c, &refs[r].ref, &idx)) != 0)
				break;
			ot = ws_ckread_index_tenant(&idx, t->tenant);
			if (ot && strcmp(ot->manifest_key, t->manifest_key) != 0) {
				ws_ckread_cut_of(ot, &head);
				rc = sweep_chain(x, t, &head, &keep);
			}
			ws_ckpt_index_free(&idx);
		}
		if (!rc)
			rc = sweep_unreachable(x, t, &keep);
		free(keep.k);
	}
	free(refs);
	return rc;
}

/* Phase SWEEP_INDEXES: older committed indexes, oldest first (the chain stays walkable). */
static int sweep_indexes(struct ret_ctx *x, const struct ws_ckpt_index *p)
{
	struct old_ref *refs;
	size_t n;
	int rc = older_refs(x, p, &refs, &n);

	for (size_t i = n; i > 0 && !rc; i--) {
		const struct ws_ckpt_ref *r = &refs[i - 1].ref;
		if (refs[i - 1].damaged) {
			/* Not an index ws_ckpt_delete_committed accepts (it would
			 * refuse the bytes): deleted as the object it is, when it
			 * is there at all. */
			struct ws_obj_info info;
			int hrc = ws_store_head(x->s, r->key, &info);
			if (hrc == WS_ENOTFOUND)
				continue;
			if (hrc) {
				rc = ws_fail_wrap(hrc, "retention: read %s", r->key);
				break;
			}
			x->rep->checkpoints_deleted++;
			rc = ret_delete(x, r->key);
			continue;
		}
		if (x->fn)
			x->fn(r->key, x->arg);
		x->rep->deleted++;
		x->rep->checkpoints_deleted++;
		if (x->dry)
			continue;
		if ((rc = WS_FAULT("retention.before_delete")) != 0) {
			ws_fail(rc, "fault retention.before_delete at %s", r->key);
			break;
		}
		rc = ws_ckpt_delete_committed(x->c, r);
		if (!rc && (rc = WS_FAULT("retention.after_delete")) != 0)
			ws_fail(rc, "fault retention.after_delete at %s", r->key);
	}
	free(refs);
	return rc;
}

/* A tenant a damaged index's artifact key names, checked as omitted_live checks an index's tenants. */
struct omitted_damaged {
	struct ret_ctx *x;
	const struct ws_ckpt_index *p;
	uint64_t id;
};

static int omitted_key(const char *key, void *arg)
{
	const struct omitted_damaged *od = arg;
	struct ret_ctx *x = od->x;
	const char *t = strrchr(key, '/') + 1;
	struct ws_fmt_watermark wm;
	int wrc;

	if (ws_ckread_index_tenant(od->p, t))
		return 0;
	wrc = ws_wm_load(x->s, t, &wm, NULL);
	if (wrc == WS_ENOTFOUND)
		return 0;
	return ws_fail(wrc ? wrc : WS_EINCOMPLETE, "retention refused, nothing deleted: tenant %s has a watermark%s, "
		       "but the protected checkpoint %" PRIu64 " does not name it; checkpoint %" PRIu64 " (its index "
		       "damaged) has an artifact of it, which may be the tenant's only base (take a new checkpoint)",
		       t, wrc ? " that cannot be read" : "", od->p->checkpoint_id, od->id);
}

/*
 * A tenant an older checkpoint names but the protected one does not may
 * still be live: missed by the cut (a listing that did not show it, a
 * watermark unreadable while the cut was read) or shipped again since. Its
 * history behind the older cut may be gone already, that checkpoint's
 * artifact being its only base; deleting the artifact (and the index that
 * names it) would lose the tenant. While such a tenant has a watermark (or
 * one that cannot be read) nothing is deleted.
 */
static int omitted_live(struct ret_ctx *x, const struct ws_ckpt_index *p)
{
	struct old_ref *refs;
	size_t n;
	int rc = older_refs(x, p, &refs, &n);

	for (size_t i = 0; i < n && !rc; i++) {
		struct ws_ckpt_index idx;
		if (refs[i].damaged) {
			/* Its tenants are those its artifacts' keys name. */
			struct omitted_damaged od = { x, p, refs[i].ref.id };
			rc = ws_ckread_each_artifact(x->s, refs[i].ref.id, omitted_key, &od);
			continue;
		}
		if ((rc = ws_ckpt_load_committed(x->c, &refs[i].ref, &idx)) != 0)
			break;
		for (size_t k = 0; k < idx.tenant_count && !rc; k++) {
			const char *t = idx.tenants[k].tenant;
			struct ws_fmt_watermark wm;
			int wrc;
			if (ws_ckread_index_tenant(p, t))
				continue;
			wrc = ws_wm_load(x->s, t, &wm, NULL);
			if (wrc == WS_ENOTFOUND)
				continue; /* gone: its older checkpoints go with retention */
			rc = ws_fail(wrc ? wrc : WS_EINCOMPLETE, "retention refused, nothing deleted: tenant %s has "
				     "a watermark%s, but the protected checkpoint %" PRIu64 " does not name it; "
				     "checkpoint %" PRIu64 " does, and its artifact may be the tenant's only base "
				     "(take a new checkpoint)", t, wrc ? " that cannot be read" : "",
				     p->checkpoint_id, idx.checkpoint_id);
		}
		ws_ckpt_index_free(&idx);
	}
	free(refs);
	return rc;
}

/*
 * The protected checkpoint's artifacts replace the history retention
 * deletes: each must be there with its recorded length and SHA-256 and open
 * as a database before anything goes; and no tenant left out of it may
 * still be live (omitted_live).
 */
static int protected_verify(struct ret_ctx *x, const struct ws_ckpt_index *p)
{
	for (size_t i = 0; i < p->tenant_count; i++) {
		struct ws_restore_base base;
		/* A tenant with manifest slots: refused before anything is
		 * written (the sweeps would refuse it halfway). One GET each. */
		int rc = ws_wm_slots_check(x->s, p->tenants[i].tenant, "retention refused, nothing deleted");
		if (rc)
			return rc;
		rc = ws_ckread_base_from_index(p, p->tenants[i].tenant, &base);
		if (!rc)
			rc = ws_artifact_verify(x->s, &base);
		if (rc == WS_ENOKEY)
			return ws_fail_wrap(rc, "retention refused, nothing deleted: protected checkpoint %" PRIu64
					    " cannot be checked without its key (give the key file: --config with "
					    "key_file, or WALSHIP_KEY_FILE)", p->checkpoint_id);
		if (rc)
			return ws_fail_wrap(rc, "retention refused, nothing deleted: protected checkpoint %" PRIu64
					    " does not verify (take a new checkpoint)", p->checkpoint_id);
	}
	return omitted_live(x, p);
}

static bool ckpt_ref_same(const struct ws_ckpt_ref *a, const struct ws_ckpt_ref *b)
{
	return a->id == b->id && a->length == b->length && strcmp(a->key, b->key) == 0;
}

/* The keep-th newest committed checkpoint from ref back (the oldest stored
 * when there are fewer). */
struct keep_walk {
	unsigned left;
	struct ws_ckpt_ref ref;
};

static int keep_step(const struct ws_ckpt_ref *ref, const struct ws_ckpt_index *idx, void *arg)
{
	struct keep_walk *w = arg;
	(void)idx;
	w->ref = *ref;
	return --w->left == 0 ? 1 : 0;
}

static int keep_base(struct ret_ctx *x, const struct ws_ckpt_ref *protected_ref, struct ws_ckpt_ref *out)
{
	struct keep_walk w = { x->keep, *protected_ref };
	int rc = x->keep > 1 ? ws_ckread_walk_committed(x->c, *protected_ref, false, keep_step, &w) : 0;
	if (rc < 0)
		return ws_fail_wrap(rc, "retention: the checkpoints before %" PRIu64, protected_ref->id);
	*out = w.ref;
	return 0;
}

static int run_phase(struct ret_ctx *x, const struct ws_ckpt_retention *st)
{
	const enum ws_ckpt_retention_phase phase = st->phase;
	/* Keeping older checkpoints than the protected one: the sweeps run for
	 * the oldest one kept, as if it were the protected one. Everything
	 * newer than it stays (the checkpoints between, and every tenant's
	 * chain from its cut), so restore --time and --checkpoint reach back
	 * to it. The run's record names both (readers hide only what is
	 * older). */
	const struct ws_ckpt_ref *base = st->has_kept ? &st->kept_ref : &st->protected_ref;
	struct ws_ckpt_index p;
	int rc = ws_ckpt_load_committed(x->c, base, &p);
	if (rc)
		return ws_fail_wrap(rc, "retention: protected checkpoint %" PRIu64, base->id);
	if (phase == WS_CKPT_RET_SWEEP_ARTIFACTS && (rc = protected_verify(x, &p)) != 0) {
		ws_ckpt_index_free(&p);
		if (!x->older_run)
			return rc;
		ws_info("retention: %s; its sweep is skipped", ws_errmsg());
		x->older_skipped = true;
		return 0;
	}
	/* An older run's index sweep is never made: had its artifact sweep
	 * been skipped (by this process, or by one a crash stopped after the
	 * phase advanced, which left no record of it), the indexes deleted
	 * without their artifacts would leave those named by no index the
	 * newer run walks, for ever. Kept, every one is the newer run's to
	 * delete, artifacts (already gone or not) and index alike. */
	if (phase == WS_CKPT_RET_SWEEP_INDEXES && x->older_run) {
		ws_ckpt_index_free(&p);
		return 0;
	}
	rc = phase == WS_CKPT_RET_SWEEP_ARTIFACTS ? sweep_artifacts(x, &p) : sweep_indexes(x, &p);
	ws_ckpt_index_free(&p);
	return rc;
}

/* st is the run for this cut, keeping from kept (the cut itself: none older). */
static bool run_for(const struct ws_ckpt_retention *st, const struct ws_ckpt_ref *cut, const struct ws_ckpt_ref *kept)
{
	const bool want_kept = !ckpt_ref_same(kept, cut);
	return ckpt_ref_same(&st->protected_ref, cut) && st->has_kept == want_kept &&
	       (!want_kept || ckpt_ref_same(&st->kept_ref, kept));
}

/* Run st's phases to IDLE, each advanced by an exact CAS. */
static int run_phases(struct ret_ctx *x, struct ws_ckpt_retention st)
{
	while (st.phase != WS_CKPT_RET_IDLE) {
		struct ws_ckpt_retention_result res;
		int rc = run_phase(x, &st);
		if (rc)
			return rc;
		if (x->dry) { /* as the run would go on, writing nothing */
			st.phase = st.phase == WS_CKPT_RET_SWEEP_ARTIFACTS ? WS_CKPT_RET_SWEEP_INDEXES : WS_CKPT_RET_IDLE;
			continue;
		}
		if ((rc = ws_ckpt_advance_retention(x->c, &st, &res)) != 0)
			return ws_fail_wrap(rc, "retention: advance");
		st = res.state;
	}
	return 0;
}

static int oldest_step(const struct ws_ckpt_ref *ref, const struct ws_ckpt_index *idx, void *arg)
{
	(void)idx;
	*(struct ws_ckpt_ref *)arg = *ref;
	return 0;
}

/*
 * checkpoints/retention cannot be decoded: its true value is lost, but a
 * safe one follows from the sink. Idle, protecting the latest Commit and
 * keeping the oldest committed checkpoint still stored: readers hide
 * nothing that is stored, and verify accepts history missing only behind
 * that oldest cut (what any earlier run may have deleted); the run below
 * then starts afresh.
 */
static int rebuild_record(struct ret_ctx *x, const struct ws_ckpt_ref *latest, struct ws_ckpt_retention *st,
			  bool *found)
{
	struct ws_ckpt_retention r;
	struct ws_ckpt_ref oldest = *latest;
	char why[512];
	bool rebuilt = false;
	int rc;

	snprintf(why, sizeof(why), "%s", ws_errmsg());
	if ((rc = ws_ckread_walk_stored(x->c, *latest, oldest_step, NULL, &oldest)) != 0)
		return ws_fail_wrap(rc, "retention: rebuild " WS_CKPT_PREFIX "/retention");
	memset(&r, 0, sizeof(r));
	r.phase = WS_CKPT_RET_IDLE;
	r.protected_ref = *latest;
	r.has_kept = oldest.id != latest->id;
	if (r.has_kept)
		r.kept_ref = oldest;
	if ((rc = ws_ckpt_rebuild_retention(x->c, &r, &rebuilt)) != 0)
		return ws_fail_wrap(rc, "retention: rebuild " WS_CKPT_PREFIX "/retention");
	if (rebuilt)
		ws_info("retention: %s could not be decoded (%s); rebuilt idle, protecting checkpoint %" PRIu64
			" and keeping from checkpoint %" PRIu64 ", the oldest stored", WS_CKPT_PREFIX "/retention", why,
			latest->id, oldest.id);
	return ws_ckpt_retention_state(x->c, st, found);
}

int ws_retention_run(struct ws_sink *sink, bool dry_run, ws_retention_fn fn, void *arg,
		     struct ws_retention_report *rep)
{
	return ws_retention_run_keep(sink, dry_run, 1, fn, arg, rep);
}

int ws_retention_run_keep(struct ws_sink *sink, bool dry_run, unsigned keep, ws_retention_fn fn, void *arg,
			  struct ws_retention_report *rep)
{
	struct ws_retention_report none;
	struct ret_ctx x;
	struct ws_ckpt_outcome latest;
	struct ws_ckpt_retention st;
	struct ws_ckpt_retention_result res;
	struct ws_ckpt_ref kept;
	bool found, sfound;
	int rc;

	if (!rep)
		rep = &none;
	memset(rep, 0, sizeof(*rep));
	memset(&x, 0, sizeof(x));
	x.s = sink->store;
	x.dry = dry_run;
	x.fn = fn;
	x.arg = arg;
	x.rep = rep;
	if (keep == 0)
		return ws_fail(WS_ECONFIG, "retention: keep at least 1 checkpoint");
	x.keep = keep;
	if ((rc = ws_ckread_open(sink, true, WS_CKPT_LEASE_WAIT_MS, &x.c)) != 0)
		return rc;
	if ((rc = ws_ckpt_latest_commit(x.c, &latest, &found)) != 0)
		goto out;
	if (!found) {
		/* Nothing committed yet, or the head that names it was lost: said so. */
		struct ws_obj_info info;
		rc = ws_store_head(x.s, WS_CKPT_HEAD_KEY, &info);
		rc = rc == WS_ENOTFOUND ? ws_ckread_head_lost(x.c) : rc;
		goto out;
	}
	rep->ran = true;
	rep->protected_id = latest.checkpoint_id;
	/* A dry run goes the way the real one would, from the durable record
	 * (a run a crash left in flight resumes at its phase), writing nothing. */
	/* A run a crash left in flight for an older cut finishes first. */
	rc = ws_ckpt_retention_state(x.c, &st, &sfound);
	if ((rc == WS_EFORMAT || rc == WS_ECORRUPT) && !dry_run)
		rc = rebuild_record(&x, &latest.committed, &st, &sfound);
	if (rc)
		goto out;
	if ((rc = keep_base(&x, &latest.committed, &kept)) != 0)
		goto out;
	rep->kept_from_id = kept.id;
	if (sfound && st.phase != WS_CKPT_RET_IDLE && !run_for(&st, &latest.committed, &kept)) {
		struct ws_ckpt_index p;
		/* Only when the newer cut verifies may the older run skip its
		 * sweep: check the newer one first. */
		if ((rc = ws_ckpt_load_committed(x.c, &latest.committed, &p)) != 0)
			goto out;
		rc = protected_verify(&x, &p);
		ws_ckpt_index_free(&p);
		if (rc)
			goto out;
		rep->resumed = true;
		x.older_run = true;
		x.older_skipped = false;
		rc = run_phases(&x, st);
		x.older_run = false;
		if (rc)
			goto out;
	}
	/* Nothing is written, not even the run's record, while what the cut
	 * would replace history with does not verify. */
	{
		struct ws_ckpt_index p;
		if ((rc = ws_ckpt_load_committed(x.c, &latest.committed, &p)) != 0)
			goto out;
		rc = protected_verify(&x, &p);
		ws_ckpt_index_free(&p);
		if (rc)
			goto out;
	}
	if (dry_run) {
		struct ws_ckpt_retention cur = st;
		if (!sfound || !run_for(&st, &latest.committed, &kept)) {
			memset(&cur, 0, sizeof(cur));
			cur.phase = WS_CKPT_RET_SWEEP_ARTIFACTS;
			cur.protected_ref = latest.committed;
			cur.has_kept = !ckpt_ref_same(&kept, &latest.committed);
			cur.kept_ref = kept;
		} else if (cur.phase != WS_CKPT_RET_IDLE) {
			rep->resumed = true;
		}
		rc = run_phases(&x, cur);
		goto out;
	}
	if ((rc = ws_ckpt_begin_retention_keep(x.c, &latest.committed, &kept, &res)) != 0)
		goto out;
	if (res.kind == WS_CKPT_CONVERGED && res.state.phase != WS_CKPT_RET_IDLE)
		rep->resumed = true;
	rc = run_phases(&x, res.state);
out:
	if (rc == 0 && rep->ran) {
		/* Tenants removed for good (docs/CHECKPOINTS.md "Removing a tenant"). */
		uint64_t removed = 0;
		rc = ws_removal_sweep(x.c, dry_run, fn, arg, &removed);
		rep->deleted += removed;
	}
	if (rc == 0) {
		/* Probes a killed process left (docs/CHECKPOINTS.md "Orphans"). */
		uint64_t probes = 0;
		rc = ws_probes_sweep(x.s, ws_wall_ms(), WS_PROBE_STALE_MS, dry_run, fn, arg, &probes, NULL);
		rep->deleted += probes;
	}
	seen_free(&x);
	ws_ckpt_close(x.c);
	return rc;
}
