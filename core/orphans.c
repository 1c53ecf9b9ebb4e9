/*
 * verify --orphans: every key the sink holds that nothing names. What the
 * checkpoint namespace names (its singletons, the committed indexes and
 * their artifacts, the attempt in flight, the seals) and what each tenant's
 * chains name (from its watermark and from each stored checkpoint's cut)
 * is collected first; every other key is an orphan.
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

#include "chain.h"
#include "ckpt_read.h"
#include "inspect.h"
#include "sink.h"
#include "ws_assert.h"

/* ---- what the namespace names (verify --orphans) ----------------------------------------- */

/*
 * Every key the checkpoint namespace names, for verify --orphans: its
 * singletons (present or not), each stored committed index from the latest
 * Commit back and the artifacts it names, the protected index of the
 * retention record, the keys the attempt in flight inventoried and its
 * candidate indexes, and every seal. For each stored checkpoint's cut of a
 * tenant, fn gets the cut too (key: its manifest), so the caller names the
 * chain behind it. fn's non-zero return ends the walk and is returned.
 */
typedef int (*named_fn)(const char *key, const char *tenant, const struct ws_chain_stop *cut, void *arg);


struct named_walk {
	named_fn fn;
	void *arg;
};

static int named_one(const struct ws_ckpt_ref *ref, const struct ws_ckpt_index *idx, void *arg)
{
	struct named_walk *w = arg;
	int rc = w->fn(ref->key, NULL, NULL, w->arg);
	for (size_t i = 0; i < idx->artifact_count && !rc; i++)
		rc = w->fn(idx->artifacts[i].key, NULL, NULL, w->arg);
	for (size_t i = 0; i < idx->tenant_count && !rc; i++) {
		struct ws_chain_stop cut;
		ws_ckread_cut_of(&idx->tenants[i], &cut);
		rc = w->fn(cut.key, idx->tenants[i].tenant, &cut, w->arg);
	}
	return rc;
}

/* The candidate length a seal at key records ("length":"N"), when it holds one. */
static bool seal_length(struct ws_ckpt *c, const char *key, uint64_t *out)
{
	struct ws_buf b;
	const char *p;
	bool ok = false;

	ws_buf_init(&b, 4096);
	if (ws_store_get(ws_ckpt_store(c), key, 0, UINT64_MAX, &b, NULL) == 0 && ws_buf_append(&b, "", 1) == 0 &&
	    strstr((const char *)b.data, "\"format\":\"walship.ckpt.sealed.v1\"") &&
	    (p = strstr((const char *)b.data, "\"length\":\"")) != NULL) {
		char *end;
		errno = 0;
		*out = strtoull(p + 10, &end, 10);
		ok = errno == 0 && end != p + 10 && *end == '"';
	}
	ws_buf_free(&b);
	return ok;
}

/*
 * A committed-index path a listing found that is no stored checkpoint's:
 * named when it holds a seal (which occupies the path for good) or a
 * candidate of the attempt in flight. The ref is built from the path (its
 * id and SHA-256) and the listed length, then, for a seal, the length it
 * records, so loading it tells a seal (WS_EPRECOND, verified by the store
 * as any load is) from a candidate.
 */
static int named_committed_path(struct ws_ckpt *c, const char *key, uint64_t size, uint64_t active_id,
				bool *named)
{
	static const char prefix[] = WS_CKPT_PREFIX "/committed/";
	const char *p = key + sizeof(prefix) - 1;
	struct ws_ckpt_ref ref;
	struct ws_ckpt_index idx;
	uint64_t id = 0;
	int rc;

	*named = false;
	if (strlen(p) != 16 + 1 + 64 + 5 || p[16] != '-' || strcmp(p + 81, ".json") != 0)
		return 0;
	for (int i = 0; i < 16; i++) {
		int h = ws_hexval(p[i]);
		if (h < 0)
			return 0;
		id = id << 4 | (uint64_t)h;
	}
	memset(&ref, 0, sizeof(ref));
	ref.id = id;
	ref.length = size;
	snprintf(ref.sha256, sizeof(ref.sha256), "%.64s", p + 17);
	snprintf(ref.key, sizeof(ref.key), "%s", key);
	rc = ws_ckpt_load_committed(c, &ref, &idx);
	if (rc == WS_ECORRUPT && ws_ckpt_last_kind() == WS_CKPT_REF_MISMATCH && seal_length(c, key, &ref.length))
		rc = ws_ckpt_load_committed(c, &ref, &idx); /* a seal records its candidate's length */
	if (rc == 0) {
		*named = active_id && id == active_id;
		ws_ckpt_index_free(&idx);
	} else if (rc == WS_EPRECOND) {
		*named = true; /* a seal */
	}
	return rc == 0 || rc == WS_EPRECOND || rc == WS_ENOTFOUND || rc == WS_ECORRUPT || rc == WS_EFORMAT
		       ? 0
		       : ws_fail_wrap(rc, "read %s", key);
}

static int checkpoint_named(struct ws_sink *sink, named_fn fn, void *arg)
{
	static const char *const singletons[] = {
		WS_CKPT_PREFIX "/deployment", WS_CKPT_HEAD_KEY, WS_CKPT_PREFIX "/inventory", WS_CKPT_PREFIX "/retention",
		WS_CKPT_PREFIX "/witness",
	};
	char prefix[WS_KEY_MAX], token[WS_KEY_MAX] = "";
	struct named_walk w = { fn, arg };
	struct ws_ckpt *c;
	struct ws_ckpt_outcome latest;
	struct ws_ckpt_retention st;
	struct ws_ckpt_inventory inv;
	bool found, active;
	uint64_t active_id = 0;
	int rc = 0;

	for (size_t i = 0; i < sizeof(singletons) / sizeof(singletons[0]) && !rc; i++)
		rc = fn(singletons[i], NULL, NULL, arg);
	if (rc)
		return rc;
	if ((rc = ws_ckread_open(sink, false, 0, &c)) != 0)
		return rc;
	rc = ws_ckpt_latest_commit(c, &latest, &found);
	if (!rc && found)
		rc = ws_ckread_walk_committed(c, latest.committed, false, named_one, &w);
	/* The run in flight protects its cut's index until it is idle. */
	if (!rc && (rc = ws_ckpt_retention_state(c, &st, &found)) == 0 && found)
		rc = fn(st.protected_ref.key, NULL, NULL, arg);
	/* The attempt in flight: every key it inventoried, its candidates. */
	if (!rc && (rc = ws_ckpt_active_inventory(c, &inv, &active)) == 0 && active) {
		active_id = inv.attempt.checkpoint_id;
		for (size_t i = 0; i < inv.key_count && !rc; i++)
			rc = fn(inv.keys[i], NULL, NULL, arg);
		ws_ckpt_inventory_free(&inv);
	}
	snprintf(prefix, sizeof(prefix), WS_CKPT_PREFIX "/committed/");
	while (!rc) {
		struct ws_list_page page;
		bool more;
		memset(&page, 0, sizeof(page));
		if ((rc = ws_store_list(sink->store, prefix, token, WS_LIST_PAGE_MAX, &page)) != 0) {
			ws_fail_wrap(rc, "list %s", prefix);
			break;
		}
		for (size_t i = 0; i < page.count && !rc; i++) {
			bool named;
			rc = named_committed_path(c, page.keys[i], page.sizes ? page.sizes[i] : 0, active_id, &named);
			if (!rc && named)
				rc = fn(page.keys[i], NULL, NULL, arg);
		}
		more = page.truncated && strcmp(page.next_token, token) > 0;
		if (more)
			snprintf(token, sizeof(token), "%s", page.next_token);
		ws_list_page_free(&page);
		if (!more)
			break;
	}
	ws_ckpt_close(c);
	return rc;
}


/* ---- verify --orphans ------------------------------------------------------------------- */

/* A set of keys, each with a value (open addressing; cap a power of two). */
struct keymap {
	char **k;
	uint64_t *v;
	size_t n, cap;
};

static uint64_t keymap_hash(const char *k)
{
	uint64_t h = 1469598103934665603ull;
	for (; *k; k++)
		h = (h ^ (uint8_t)*k) * 1099511628211ull;
	return h;
}

static size_t keymap_slot(const struct keymap *m, const char *key)
{
	/* A power of two, at most half full (keymap_put): a probe ends. */
	WS_ASSERT(m->cap && (m->cap & (m->cap - 1)) == 0 && 2 * m->n <= m->cap);
	size_t i = keymap_hash(key) & (m->cap - 1);
	while (m->k[i] && strcmp(m->k[i], key) != 0)
		i = (i + 1) & (m->cap - 1);
	return i;
}

/* Insert key with value v (an existing key keeps its value). */
static int keymap_put(struct keymap *m, const char *key, uint64_t v)
{
	size_t i;
	if (2 * (m->n + 1) > m->cap) {
		size_t ncap = m->cap ? m->cap * 2 : 1024;
		struct keymap g = { calloc(ncap, sizeof(char *)), calloc(ncap, sizeof(uint64_t)), m->n, ncap };
		if (!g.k || !g.v) {
			free(g.k);
			free(g.v);
			return -ENOMEM;
		}
		for (size_t j = 0; j < m->cap; j++) {
			if (!m->k[j])
				continue;
			i = keymap_slot(&g, m->k[j]);
			g.k[i] = m->k[j];
			g.v[i] = m->v[j];
		}
		free(m->k);
		free(m->v);
		*m = g;
	}
	WS_ASSERT(2 * (m->n + 1) <= m->cap);
	i = keymap_slot(m, key);
	if (m->k[i])
		return 0;
	if (!(m->k[i] = strdup(key)))
		return -ENOMEM;
	m->v[i] = v;
	m->n++;
	return 0;
}

static const uint64_t *keymap_get(const struct keymap *m, const char *key)
{
	size_t i;
	if (!m->cap)
		return NULL;
	i = keymap_slot(m, key);
	return m->k[i] ? &m->v[i] : NULL;
}

static void keymap_free(struct keymap *m)
{
	for (size_t i = 0; i < m->cap; i++)
		free(m->k[i]);
	free(m->k);
	free(m->v);
	memset(m, 0, sizeof(*m));
}

static int keymap_put_chain(struct keymap *m, const struct ws_chain *c)
{
	int rc = 0;
	for (size_t i = 0; i < c->count && !rc; i++) {
		const struct ws_fmt_manifest *mf = &c->m[i];
		rc = keymap_put(m, c->keys[i], 0);
		for (uint32_t k = 0; k < mf->snap_count && !rc; k++)
			rc = keymap_put(m, mf->snaps[k].key, 0);
		for (uint32_t k = 0; k < mf->batch_count && !rc; k++)
			if (!ws_fmt_objref_inline(&mf->batches[k]))
				rc = keymap_put(m, mf->batches[k].key, 0);
	}
	return rc;
}

enum orphan_kind { ORPHAN_UNPUBLISHED = 1, ORPHAN_CUT_OFF, ORPHAN_ARTIFACT, ORPHAN_INDEX, ORPHAN_PROBE,
		   ORPHAN_FOREIGN };

static const char *orphan_kind_name(uint64_t k)
{
	switch (k) {
	case ORPHAN_UNPUBLISHED: return "unpublished";
	case ORPHAN_CUT_OFF: return "cut-off";
	case ORPHAN_ARTIFACT: return "artifact";
	case ORPHAN_INDEX: return "checkpoint-index";
	case ORPHAN_PROBE: return "probe";
	default: return "foreign";
	}
}

struct orphan_ctx {
	struct ws_store *s;
	const char *only;        /* the one tenant, or NULL */
	struct keymap named;     /* every named key (value unused) */
	struct keymap wm_seq;    /* tenant -> its watermark's sequence + 1 (0 never stored) */
};

/* A missing object ends a chain walk here: what is still stored is named,
 * what is gone is nobody's orphan (verify reports a missing link). */
static bool ws_walk_end(int rc)
{
	return rc == WS_ENOTFOUND || rc == WS_EINCOMPLETE;
}

static int orphan_named(const char *key, const char *tenant, const struct ws_chain_stop *cut, void *arg)
{
	struct orphan_ctx *x = arg;
	struct ws_chain c;
	int rc = keymap_put(&x->named, key, 0);
	if (rc || !cut || (x->only && strcmp(x->only, tenant) != 0))
		return rc;
	rc = ws_chain_load_from(x->s, tenant, cut, NULL, WS_CHAIN_UPTO_MISSING, &c, NULL);
	if (rc == 0 || (ws_walk_end(rc) && c.count)) {
		int arc = keymap_put_chain(&x->named, &c);
		ws_chain_free(&c);
		return arc;
	}
	return ws_walk_end(rc) ? 0 : ws_fail_wrap(rc, "checkpoint cut %s", key);
}

static int orphan_tenant_kept(const char *tenant, struct orphan_ctx *x, struct ws_buf *wmraw)
{
	struct ws_fmt_watermark wm;
	struct ws_chain c;
	char key[WS_KEY_MAX];
	int rc = ws_key_watermark(key, sizeof(key), tenant);

	if (!rc)
		rc = keymap_put(&x->named, key, 0);
	if (!rc)
		rc = ws_wm_load_keep(x->s, tenant, &wm, NULL, wmraw);
	if (rc == WS_ENOTFOUND)
		return 0;
	if (rc)
		return ws_fail_wrap(rc, "tenant %s: watermark", tenant);
	if ((rc = keymap_put(&x->wm_seq, tenant, wm.seq + 1)) != 0)
		return rc;
	rc = ws_chain_load_flags(x->s, tenant, &wm, WS_CHAIN_UPTO_MISSING, &c);
	if (rc)
		return ws_walk_end(rc) ? 0 : ws_fail_wrap(rc, "tenant %s: chain", tenant);
	rc = keymap_put_chain(&x->named, &c);
	/* And each chain before it, linked from its successor's re-base
	 * (restore --time reaches them), down to what retention removed. */
	while (!rc && c.m[0].kind == WS_MANIFEST_REBASE && c.m[0].prev_key[0]) {
		struct ws_chain_stop head;
		struct ws_chain p;
		snprintf(head.key, sizeof(head.key), "%s", c.m[0].prev_key);
		memcpy(head.sha, c.m[0].prev_sha, WS_SHA256_LEN);
		head.length = c.m[0].prev_length;
		rc = ws_chain_load_from(x->s, tenant, &head, NULL, WS_CHAIN_UPTO_MISSING, &p, NULL);
		if (rc) {
			rc = ws_walk_end(rc) ? 0 : ws_fail_wrap(rc, "tenant %s: the chain before re-base %s", tenant,
								  c.keys[0]);
			break;
		}
		ws_chain_free(&c);
		c = p;
		rc = keymap_put_chain(&x->named, &c);
	}
	ws_chain_free(&c);
	return rc;
}

static int orphan_tenant(const char *tenant, void *arg)
{
	struct ws_buf wmraw;
	ws_buf_init(&wmraw, WS_WM_BYTES_MAX);
	int rc = orphan_tenant_kept(tenant, arg, &wmraw);
	ws_buf_free(&wmraw);
	return rc;
}

/* checkpoints/removed/<tenant>: a tenant removed for good (walship forget), a record of ours. */
static bool removal_record(const char *key)
{
	const size_t n = strlen(WS_CKPT_REMOVED_PREFIX);
	return strncmp(key, WS_CKPT_REMOVED_PREFIX, n) == 0 && ws_tenant_name_valid(key + n) &&
	       strcmp(key + n, WS_CKPT_PREFIX) != 0;
}

/* The kind of an unnamed key; objects of a tenant: 0 (decided later). */
static uint64_t orphan_kind(const struct orphan_ctx *x, const char *key)
{
	char top[WS_KEY_MAX];
	const char *slash = strchr(key, '/');
	const uint64_t *seq;
	uint64_t mseq;

	if (strncmp(key, WS_CKPT_PREFIX "/", sizeof(WS_CKPT_PREFIX)) == 0) {
		const char *rest = key + sizeof(WS_CKPT_PREFIX);
		if (strncmp(rest, "probe/", 6) == 0)
			return ORPHAN_PROBE;
		if (strncmp(rest, "artifacts/", 10) == 0)
			return ORPHAN_ARTIFACT;
		if (strncmp(rest, "committed/", 10) == 0)
			return ORPHAN_INDEX;
		return ORPHAN_FOREIGN;
	}
	/* The S3 backend's conditional-write probe at open (store_s3.c). */
	if (strncmp(key, "_walship/probe-", 15) == 0)
		return ORPHAN_PROBE;
	if (!slash || (size_t)(slash - key) >= sizeof(top))
		return ORPHAN_FOREIGN;
	memcpy(top, key, (size_t)(slash - key));
	top[slash - key] = '\0';
	if (!ws_tenant_name_valid(top) || strncmp(slash + 1, "e", 1) != 0)
		return ORPHAN_FOREIGN;
	if ((mseq = ws_key_manifest_seq(key)) == 0)
		return 0;
	seq = keymap_get(&x->wm_seq, top);
	return seq && mseq < *seq ? ORPHAN_CUT_OFF : ORPHAN_UNPUBLISHED;
}

/*
 * The objects an unnamed manifest names take its kind (a cut-off chain's
 * batches are cut-off too); those no manifest names are unpublished.
 */
static int orphan_objects_kind(struct orphan_ctx *x, char **keys, uint64_t *kinds, size_t n)
{
	struct keymap of = { NULL, NULL, 0, 0 };
	struct ws_buf b;
	int rc = 0;

	ws_buf_init(&b, 256u << 20);
	for (size_t i = 0; i < n && !rc; i++) {
		struct ws_fmt_manifest m;
		if (kinds[i] != ORPHAN_CUT_OFF && kinds[i] != ORPHAN_UNPUBLISHED)
			continue;
		ws_buf_reset(&b);
		rc = ws_store_get(x->s, keys[i], 0, UINT64_MAX, &b, NULL);
		if (rc == WS_ENOTFOUND) {
			rc = 0;
			continue;
		}
		if (rc) {
			ws_fail_wrap(rc, "read %s", keys[i]);
			break;
		}
		if (ws_fmt_manifest_decode(b.data, b.len, &m) != 0)
			continue; /* a damaged manifest: its objects stay unpublished */
		for (uint32_t k = 0; k < m.snap_count && !rc; k++)
			rc = keymap_put(&of, m.snaps[k].key, kinds[i]);
		for (uint32_t k = 0; k < m.batch_count && !rc; k++)
			if (!ws_fmt_objref_inline(&m.batches[k]))
				rc = keymap_put(&of, m.batches[k].key, kinds[i]);
		ws_fmt_manifest_free(&m);
	}
	for (size_t i = 0; i < n && !rc; i++) {
		const uint64_t *k;
		if (kinds[i])
			continue;
		k = keymap_get(&of, keys[i]);
		kinds[i] = k ? *k : ORPHAN_UNPUBLISHED;
	}
	ws_buf_free(&b);
	keymap_free(&of);
	return rc;
}

int ws_verify_orphans(struct ws_sink *sink, const char *tenant, ws_orphan_fn fn, void *arg, uint64_t *count)
{
	struct orphan_ctx x;
	char prefix[WS_KEY_MAX] = "", token[WS_KEY_MAX] = "";
	char **keys = NULL;
	uint64_t *kinds = NULL;
	size_t n = 0, cap = 0;
	int rc;

	*count = 0;
	if (tenant && !ws_tenant_name_valid(tenant))
		return ws_fail(WS_ECONFIG, "tenant name '%s' is invalid", tenant);
	memset(&x, 0, sizeof(x));
	x.s = sink->store;
	x.only = tenant;
	/* What is named: the checkpoints' objects and cuts, then each
	 * tenant's live chain. */
	rc = checkpoint_named(sink, orphan_named, &x);
	if (!rc)
		rc = tenant ? orphan_tenant(tenant, &x) : ws_tenants_each(x.s, orphan_tenant, &x);
	if (tenant)
		snprintf(prefix, sizeof(prefix), "%s/", tenant);
	/* What is stored, in key order. */
	while (!rc) {
		struct ws_list_page page;
		bool more;
		memset(&page, 0, sizeof(page));
		if ((rc = ws_store_list(x.s, prefix, token, WS_LIST_PAGE_MAX, &page)) != 0) {
			ws_fail_wrap(rc, "list %s", x.s->url);
			break;
		}
		for (size_t i = 0; i < page.count && !rc; i++) {
			if (keymap_get(&x.named, page.keys[i]) || removal_record(page.keys[i]))
				continue;
			/* A slot is no content-named manifest (sink.h ws_key_manifest_seq). */
			if (ws_key_slot_any(page.keys[i])) {
				rc = ws_slot_key_refuse("orphans", page.keys[i]);
				break;
			}
			if (n == cap) {
				size_t ncap = cap ? cap * 2 : 64;
				char **nk = realloc(keys, ncap * sizeof(*keys));
				uint64_t *nv = nk ? realloc(kinds, ncap * sizeof(*kinds)) : NULL;
				if (nk)
					keys = nk;
				if (nv)
					kinds = nv;
				if (!nk || !nv) {
					rc = -ENOMEM;
					break;
				}
				cap = ncap;
			}
			if (!(keys[n] = strdup(page.keys[i]))) {
				rc = -ENOMEM;
				break;
			}
			kinds[n] = orphan_kind(&x, keys[n]);
			n++;
		}
		more = page.truncated && strcmp(page.next_token, token) > 0;
		if (more)
			snprintf(token, sizeof(token), "%s", page.next_token);
		ws_list_page_free(&page);
		if (!more)
			break;
	}
	if (!rc)
		rc = orphan_objects_kind(&x, keys, kinds, n);
	for (size_t i = 0; i < n; i++) {
		if (!rc && fn)
			fn(keys[i], orphan_kind_name(kinds[i]), arg);
		free(keys[i]);
	}
	if (!rc)
		*count = n;
	free(keys);
	free(kinds);
	keymap_free(&x.named);
	keymap_free(&x.wm_seq);
	return ws_read_err(rc);
}
