/*
 * Reading the checkpoints of a sink (docs/CHECKPOINTS.md): the committed
 * indexes from the latest Commit back through their predecessors, the
 * base (cut and artifact) restore starts from, the cut retention protected,
 * ls, verify of the checkpoint namespace, and restore by checkpoint. The
 * readers (restore, verify, ls) reach checkpoints through this file only,
 * never through the side that takes them (ckpt_take.c).
 *
 * A reader never takes the writer's lease: every object it reads is
 * create-once or replaced by one atomic write.
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
#include "publish.h"
#include "sink.h"
#include "ws_assert.h"
#include "ws_clock.h"

/*
 * The decision store of the sink. A writer of a file:// sink holds the local
 * lease for one call; wait up to wait_ms for it. A reader (restore, verify,
 * ls) never takes it: it reads through a read-only handle, so a busy writer
 * never makes a reader wait or fall back (every object it reads is
 * create-once or replaced by one atomic write).
 */
int ws_ckread_open(struct ws_sink *sink, bool writer, unsigned wait_ms, struct ws_ckpt **out)
{
	int err = 0;
	unsigned waited = 0;

	*out = NULL;
	if (!writer) {
		*out = ws_ckpt_open_reader(sink->store, &err);
		return *out ? 0 : err;
	}
	if (ws_store_kind(sink->store) != WS_STORE_FILE) {
		*out = ws_ckpt_open_shared(sink->store, 0, &err);
		return *out ? 0 : err;
	}
	/* The file backend's own directory, however the URL spelled it. */
	WS_ASSERT(ws_store_file_root(sink->store) != NULL);
	for (;;) {
		*out = ws_ckpt_open_local(ws_store_file_root(sink->store), &err);
		if (*out)
			return 0;
		if (err != WS_EFENCED || waited >= wait_ms)
			return err;
		ws_sleep_ms(10);
		waited += 10;
	}
}

void ws_ckread_hex_of(const uint8_t *sha, char out[WS_SHA256_HEX_LEN + 1])
{
	ws_hex(sha, WS_SHA256_LEN, out);
}

bool ws_ckread_hex_to_sha(const char *hex, uint8_t out[WS_SHA256_LEN])
{
	for (size_t i = 0; i < WS_SHA256_LEN; i++) {
		int hi = ws_hexval(hex[2 * i]), lo = hi < 0 ? -1 : ws_hexval(hex[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return false;
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	return hex[2 * WS_SHA256_LEN] == '\0';
}

void ws_ckread_artifact_key(char out[WS_KEY_MAX], uint64_t id, const char *tenant)
{
	snprintf(out, WS_KEY_MAX, WS_CKPT_ART_PREFIX "/%016" PRIx64 "/%s", id, tenant);
}

/*
 * Whether key has the form artifact_key gives checkpoint id's artifacts.
 * Recovery and retention delete the keys an inventory or an older index
 * names: only such keys, never another (a record naming a watermark, say,
 * is damaged or hostile; what it names is left alone, with a warning).
 */
bool ws_ckread_artifact_key_of(const char *key, uint64_t id)
{
	char want[WS_KEY_MAX];
	int n = snprintf(want, sizeof(want), WS_CKPT_ART_PREFIX "/%016" PRIx64 "/", id);
	return n > 0 && strncmp(key, want, (size_t)n) == 0 && ws_tenant_name_valid(key + n);
}

int ws_ckread_each_artifact(struct ws_store *s, uint64_t id, int (*fn)(const char *key, void *arg), void *arg)
{
	char prefix[WS_KEY_MAX], token[WS_KEY_MAX] = "";
	int rc;

	snprintf(prefix, sizeof(prefix), WS_CKPT_ART_PREFIX "/%016" PRIx64 "/", id);
	for (;;) {
		struct ws_list_page page;
		bool more;
		memset(&page, 0, sizeof(page));
		if ((rc = ws_store_list(s, prefix, token, WS_LIST_PAGE_MAX, &page)) != 0)
			return ws_fail_wrap(rc, "list %s", prefix);
		for (size_t i = 0; i < page.count && !rc; i++)
			if (ws_ckread_artifact_key_of(page.keys[i], id))
				rc = fn(page.keys[i], arg);
		more = page.truncated;
		if (more)
			snprintf(token, sizeof(token), "%s", page.next_token);
		ws_list_page_free(&page);
		if (rc || !more)
			return rc;
	}
}

int ws_ckread_tenant_cmp(const void *a, const void *b)
{
	return strcmp(((const struct ws_ckpt_tenant_entry *)a)->tenant,
		      ((const struct ws_ckpt_tenant_entry *)b)->tenant);
}

static int artifact_cmp(const void *a, const void *b)
{
	return strcmp(((const struct ws_ckpt_artifact *)a)->key, ((const struct ws_ckpt_artifact *)b)->key);
}

const struct ws_ckpt_tenant_entry *ws_ckread_index_tenant(const struct ws_ckpt_index *idx, const char *tenant)
{
	struct ws_ckpt_tenant_entry k;
	snprintf(k.tenant, sizeof(k.tenant), "%s", tenant);
	return bsearch(&k, idx->tenants, idx->tenant_count, sizeof(k), ws_ckread_tenant_cmp);
}

const struct ws_ckpt_artifact *ws_ckread_index_artifact(const struct ws_ckpt_index *idx, const char *key)
{
	struct ws_ckpt_artifact k;
	snprintf(k.key, sizeof(k.key), "%s", key);
	return bsearch(&k, idx->artifacts, idx->artifact_count, sizeof(k), artifact_cmp);
}

/* The base restore needs for tenant from a loaded index: its cut and artifact. */
int ws_ckread_base_from_index(const struct ws_ckpt_index *idx, const char *tenant, struct ws_restore_base *out)
{
	const struct ws_ckpt_tenant_entry *t = ws_ckread_index_tenant(idx, tenant);
	const struct ws_ckpt_artifact *a;
	char key[WS_KEY_MAX];

	memset(out, 0, sizeof(*out));
	if (!t)
		return ws_fail(WS_ENOTFOUND, "checkpoint %" PRIu64 " does not include tenant %s",
			       idx->checkpoint_id, tenant);
	ws_ckread_artifact_key(key, idx->checkpoint_id, tenant);
	a = ws_ckread_index_artifact(idx, key);
	if (!a) {
		snprintf(out->artifact_key, sizeof(out->artifact_key), "%s", key); /* the one missing */
		return ws_fail(WS_EFORMAT, "checkpoint %" PRIu64 " names tenant %s but no artifact %s",
			       idx->checkpoint_id, tenant, key);
	}
	snprintf(out->cut.key, sizeof(out->cut.key), "%s", t->manifest_key);
	if (!ws_ckread_hex_to_sha(t->manifest_sha256, out->cut.sha))
		return ws_fail(WS_EFORMAT, "checkpoint %" PRIu64 ": tenant %s manifest hash is not hex",
			       idx->checkpoint_id, tenant);
	out->cut.length = t->manifest_length;
	snprintf(out->artifact_key, sizeof(out->artifact_key), "%s", a->key);
	out->artifact_length = a->length;
	snprintf(out->artifact_sha256, sizeof(out->artifact_sha256), "%s", a->sha256);
	out->checkpoint_id = idx->checkpoint_id;
	return 0;
}

void ws_ckread_info_from(const struct ws_ckpt_ref *ref, const struct ws_ckpt_index *idx, bool own,
			 struct ws_checkpoint_info *out)
{
	memset(out, 0, sizeof(*out));
	out->id = ref->id;
	out->own = own;
	out->committed = true;
	out->ref_length = ref->length;
	snprintf(out->ref_key, sizeof(out->ref_key), "%s", ref->key);
	snprintf(out->ref_sha256, sizeof(out->ref_sha256), "%s", ref->sha256);
	if (!idx)
		return;
	out->epoch = idx->epoch;
	out->tenants = idx->tenant_count;
	out->artifacts = idx->artifact_count;
	for (size_t i = 0; i < idx->artifact_count; i++)
		out->artifact_bytes += idx->artifacts[i].length;
	out->has_predecessor = idx->has_predecessor;
	out->predecessor_id = idx->has_predecessor ? idx->predecessor.id : 0;
}

void ws_ckread_cut_of(const struct ws_ckpt_tenant_entry *t, struct ws_chain_stop *out)
{
	memset(out, 0, sizeof(*out));
	snprintf(out->key, sizeof(out->key), "%s", t->manifest_key);
	if (!ws_ckread_hex_to_sha(t->manifest_sha256, out->sha))
		memset(out->sha, 0, sizeof(out->sha)); /* never matches: nothing is taken for the cut */
	out->length = t->manifest_length;
}

/* ---- reading checkpoints -------------------------------------------------------------- */

/* ws_ckread_find_ref's walk: checkpoint id's index, or where it fails. */
struct find_walk {
	uint64_t id;
	struct ws_ckpt_ref *ref;
	bool found;
};

static int find_one(const struct ws_ckpt_ref *ref, const struct ws_ckpt_index *idx, void *arg)
{
	struct find_walk *w = arg;
	if (idx->checkpoint_id > w->id)
		return 0;
	if (idx->checkpoint_id < w->id)
		return 1; /* only an older checkpoint's predecessors could hold id: none does */
	*w->ref = *ref;
	w->found = true;
	return 1;
}

static int find_damaged(const struct ws_ckpt_ref *ref, const char *detail, void *arg)
{
	struct find_walk *w = arg;
	if (ref->id > w->id)
		return 0; /* walked past: the one sought is older */
	if (ref->id < w->id)
		return 1;
	*w->ref = *ref;
	return ws_fail(WS_ECORRUPT, "checkpoint %" PRIu64 " cannot be read: its committed index %s is damaged "
		       "or missing (%s); `walship verify` names it, the next `walship checkpoint` commits past "
		       "it and `walship retention` removes it", w->id, ref->key, detail);
}

/*
 * The ref of checkpoint id (0: the latest Commit), walking predecessors
 * past damaged indexes. id's own index damaged or missing: WS_ECORRUPT
 * naming it (*ref is its ref).
 */
int ws_ckread_find_ref(struct ws_ckpt *c, uint64_t id, struct ws_ckpt_ref *ref, struct ws_ckpt_index *idx)
{
	struct ws_ckpt_outcome latest;
	struct find_walk w = { id, ref, false };
	bool found;
	int rc = ws_ckpt_latest_commit(c, &latest, &found);
	if (rc)
		return rc;
	if (!found) {
		/* No head: none decided, or the head that names them was lost. */
		struct ws_obj_info info;
		rc = ws_store_head(ws_ckpt_store(c), WS_CKPT_HEAD_KEY, &info);
		if (rc == WS_ENOTFOUND && (rc = ws_ckread_head_lost(c)) != 0)
			return rc;
		return ws_fail(WS_ENOTFOUND, "no committed checkpoint at this sink");
	}
	memset(idx, 0, sizeof(*idx));
	if (!id)
		w.id = latest.checkpoint_id;
	rc = ws_ckread_walk_past(c, latest.committed, find_one, find_damaged, &w);
	if (w.found)
		return ws_ckpt_load_committed(c, ref, idx);
	if (rc && rc != 1)
		return rc;
	return ws_fail(WS_ENOTFOUND, "checkpoint %" PRIu64 " is not stored (retention removed it, or it was "
		       "never committed)", w.id);
}

int ws_checkpoint_base_for(struct ws_sink *sink, const char *tenant, struct ws_restore_base *out)
{
	struct ws_ckpt *c;
	struct ws_ckpt_ref ref;
	struct ws_ckpt_index idx;
	struct ws_obj_info info;
	int rc = ws_store_head(sink->store, WS_CKPT_HEAD_KEY, &info);

	if (rc)
		return rc; /* WS_ENOTFOUND: nothing decided, the common case */
	if ((rc = ws_ckread_open(sink, false, WS_CKPT_LEASE_WAIT_MS, &c)) != 0)
		return rc;
	rc = ws_ckread_find_ref(c, 0, &ref, &idx);
	if (rc == 0) {
		rc = ws_ckread_base_from_index(&idx, tenant, out);
		ws_ckpt_index_free(&idx);
	}
	ws_ckpt_close(c);
	return rc;
}

bool ws_ckread_damaged(int rc, enum ws_ckpt_kind kind)
{
	return rc == WS_ENOTFOUND || rc == WS_ECORRUPT || rc == WS_EFORMAT ||
	       (rc == WS_EPRECOND && kind == WS_CKPT_SEALED) || (rc == WS_ECONFIG && kind == WS_CKPT_INVALID_INPUT);
}

/* The committed-index keys a LIST shows, as refs (id, SHA-256 and length from the listing). */
struct listed {
	struct ws_ckpt_ref *r;
	size_t n, cap;
	bool done;
};

static int listed_cmp_desc(const void *a, const void *b)
{
	const struct ws_ckpt_ref *x = a, *y = b;
	if (x->id != y->id)
		return x->id < y->id ? 1 : -1;
	return strcmp(x->key, y->key);
}

/* checkpoints/committed/<16 hex>-<64 hex>.json: its ref; false for any other name. */
static bool listed_ref(const char *key, uint64_t size, struct ws_ckpt_ref *out)
{
	memset(out, 0, sizeof(*out));
	if (!ws_ckpt_committed_key_parse(key, &out->id, out->sha256))
		return false;
	out->length = size;
	snprintf(out->key, sizeof(out->key), "%s", key);
	return true;
}

/* One LIST of checkpoints/committed/, newest id first (only where a walk met a damaged index). */
static int listed_read(struct ws_ckpt *c, struct listed *l)
{
	char token[WS_KEY_MAX] = "";
	int rc;

	if (l->done)
		return 0;
	for (;;) {
		struct ws_list_page page;
		bool more;
		memset(&page, 0, sizeof(page));
		rc = ws_store_list(ws_ckpt_store(c), WS_CKPT_PREFIX "/committed/", token, WS_LIST_PAGE_MAX, &page);
		if (rc)
			return ws_fail_wrap(rc, "list " WS_CKPT_PREFIX "/committed/");
		for (size_t i = 0; i < page.count && !rc; i++) {
			struct ws_ckpt_ref ref;
			if (!listed_ref(page.keys[i], page.sizes ? page.sizes[i] : 0, &ref))
				continue;
			if ((rc = ws_ckread_grow((void **)&l->r, &l->cap, l->n, sizeof(*l->r))) == 0)
				l->r[l->n++] = ref;
		}
		more = page.truncated;
		if (more)
			snprintf(token, sizeof(token), "%s", page.next_token);
		ws_list_page_free(&page);
		if (rc)
			return rc;
		if (!more)
			break;
	}
	if (l->n > 1)
		qsort(l->r, l->n, sizeof(*l->r), listed_cmp_desc);
	l->done = true;
	return 0;
}

/*
 * Each committed checkpoint from ref back through its predecessors, newest
 * first: fn for each index that loads, dfn (may be NULL) for each that is
 * damaged or missing, the walk going on past it. A damaged index names no
 * predecessor: the next older is found by one LIST of
 * checkpoints/committed/ (only then), the newest stored index older than it
 * that loads (a seal is an aborted candidate's, never on the chain; one that
 * loads neither way is damaged too, reported to dfn). Nothing older than the
 * checkpoint the last retention run kept is walked past: a missing index
 * there is retention's doing, and ends the walk. A non-zero return of fn or
 * dfn ends the walk and is returned; so is an error of the store.
 */
static int walk_past(struct ws_ckpt *c, struct ws_ckpt_ref ref, ws_committed_fn fn, ws_damaged_fn dfn, void *arg,
		     bool bounded)
{
	struct listed l = { NULL, 0, 0, false };
	struct ws_ckpt_peek p;
	char dep[WS_CKPT_DEPLOYMENT_LEN + 1] = "";
	uint64_t below = 0;
	bool below_known = !bounded;
	char why[1024];
	int rc = 0;

	for (unsigned n = 0; n < WS_CKPT_PREDECESSORS_MAX; n++) {
		struct ws_ckpt_index idx;
		bool more, found = false;
		rc = ws_ckpt_load_committed(c, &ref, &idx);
		if (rc == 0) {
			rc = fn(&ref, &idx, arg);
			more = idx.has_predecessor;
			if (more)
				ref = idx.predecessor;
			ws_ckpt_index_free(&idx);
			if (rc || !more)
				break;
			continue;
		}
		if (!ws_ckread_damaged(rc, ws_ckpt_last_kind()))
			break;
		snprintf(why, sizeof(why), "%s", ws_errmsg());
		if (!below_known && (rc = ws_ckread_retiring_below(c, &below)) != 0)
			break;
		below_known = true;
		rc = 0;
		if (ref.id < below)
			break; /* retention is removing it, and every older one */
		if (dfn && (rc = dfn(&ref, why, arg)) != 0)
			break;
		if ((rc = listed_read(c, &l)) != 0)
			break;
		if (!dep[0] && (rc = ws_ckpt_deployment_id(c, dep)) != 0)
			break;
		for (size_t i = 0; i < l.n && !found && !rc; i++) {
			struct ws_ckpt_ref *r = &l.r[i];
			int lrc;
			if (r->id >= ref.id)
				continue;
			if (r->id < below)
				break;
			/* A seal records its candidate's length, not its own (the
			 * listed one): it is told apart by what it holds. */
			if ((lrc = ws_ckpt_peek(c, r->key, dep, &p)) == 0 && p.kind == WS_CKPT_PEEK_SEAL)
				continue; /* an aborted candidate's seal */
			if (lrc == 0 && p.kind == WS_CKPT_PEEK_DAMAGED)
				lrc = ws_fail(WS_ECORRUPT, "%s", p.detail);
			else if (lrc == 0 && (lrc = ws_ckpt_load_committed(c, r, &idx)) == 0) {
				ws_ckpt_index_free(&idx);
				found = true;
				ref = *r;
				continue;
			}
			if (lrc == WS_ECORRUPT || ws_ckread_damaged(lrc, ws_ckpt_last_kind())) {
				if (dfn) {
					snprintf(why, sizeof(why), "%s", ws_errmsg());
					rc = dfn(r, why, arg);
				}
			} else {
				rc = lrc;
			}
		}
		if (rc || !found)
			break;
	}
	free(l.r);
	return rc;
}

int ws_ckread_walk_past(struct ws_ckpt *c, struct ws_ckpt_ref ref, ws_committed_fn fn, ws_damaged_fn dfn, void *arg)
{
	return walk_past(c, ref, fn, dfn, arg, true);
}

int ws_ckread_walk_stored(struct ws_ckpt *c, struct ws_ckpt_ref ref, ws_committed_fn fn, ws_damaged_fn dfn,
			  void *arg)
{
	return walk_past(c, ref, fn, dfn, arg, false);
}

/*
 * Each committed checkpoint from ref back through its predecessors, newest
 * first, while they are stored, past any damaged or missing index
 * (ws_ckread_walk_past): fn's non-zero return ends the walk and is
 * returned. quiet: an error of the store ends the walk too, returning 0 (a
 * search that has other ways to go).
 */
int ws_ckread_walk_committed(struct ws_ckpt *c, struct ws_ckpt_ref ref, bool quiet, ws_committed_fn fn, void *arg)
{
	int rc = ws_ckread_walk_past(c, ref, fn, NULL, arg);
	return quiet && rc < 0 ? 0 : rc;
}

/* Room for one more element in a growing array (*cap elements of elem bytes). */
int ws_ckread_grow(void **arr, size_t *cap, size_t count, size_t elem)
{
	void *n;
	size_t ncap;
	WS_ASSERT(count <= *cap && elem > 0);
	if (count < *cap)
		return 0;
	ncap = *cap ? *cap * 2 : 8;
	n = realloc(*arr, ncap * elem);
	if (!n)
		return -ENOMEM;
	*arr = n;
	*cap = ncap;
	return 0;
}

struct bases_walk {
	const char *tenant;
	struct ws_restore_base *bases;
	size_t count, cap;
};

static int add_base(const struct ws_ckpt_ref *ref, const struct ws_ckpt_index *idx, void *arg)
{
	struct bases_walk *w = arg;
	struct ws_restore_base b;
	(void)ref;
	if (ws_ckread_base_from_index(idx, w->tenant, &b) != 0)
		return 0;
	if (ws_ckread_grow((void **)&w->bases, &w->cap, w->count, sizeof(*w->bases)) != 0)
		return -ENOMEM;
	WS_ASSERT(w->count < w->cap && b.checkpoint_id == idx->checkpoint_id);
	w->bases[w->count++] = b;
	return 0;
}

int ws_checkpoint_bases_for(struct ws_sink *sink, const char *tenant, struct ws_restore_base **out, size_t *count)
{
	struct ws_ckpt *c;
	struct ws_ckpt_outcome latest;
	struct ws_obj_info info;
	bool found;
	int rc = ws_store_head(sink->store, WS_CKPT_HEAD_KEY, &info);

	*out = NULL;
	*count = 0;
	if (rc)
		return rc;
	if ((rc = ws_ckread_open(sink, false, 0, &c)) != 0)
		return rc;
	rc = ws_ckpt_latest_commit(c, &latest, &found);
	if (!rc && found) {
		struct bases_walk w = { tenant, NULL, 0, 0 };
		rc = ws_ckread_walk_committed(c, latest.committed, false, add_base, &w);
		*out = w.bases;
		*count = w.count;
	}
	ws_ckpt_close(c);
	if (rc) {
		free(*out);
		*out = NULL;
		*count = 0;
	}
	return rc;
}

int ws_checkpoint_retained_cut(struct ws_sink *sink, const char *tenant, struct ws_chain_stop *cut, uint64_t *id)
{
	struct ws_ckpt *c;
	struct ws_ckpt_retention st;
	struct ws_ckpt_index idx;
	const struct ws_ckpt_tenant_entry *t;
	bool found;
	int rc;

	if ((rc = ws_ckread_open(sink, false, 0, &c)) != 0)
		return rc;
	rc = ws_ckpt_retention_state(c, &st, &found);
	if (!rc && !found)
		rc = WS_ENOTFOUND;
	if (!rc)
		rc = ws_ckpt_load_committed(c, &st.protected_ref, &idx);
	if (!rc) {
		t = ws_ckread_index_tenant(&idx, tenant);
		if (t) {
			WS_ASSERT(strcmp(t->tenant, tenant) == 0);
			ws_ckread_cut_of(t, cut);
			*id = idx.checkpoint_id;
		} else {
			rc = WS_ENOTFOUND;
		}
		ws_ckpt_index_free(&idx);
	}
	ws_ckpt_close(c);
	return rc;
}

/*
 * Committed checkpoints older than the last retention run's protected one
 * are being removed (their artifacts may be gone already): *below is that
 * protected checkpoint's id, or 0 when no run was recorded. Listing,
 * restore by id and verify all leave them out alike. In every phase, idle
 * too: a run resumed for an older cut ends idle having deleted the
 * artifacts, not the indexes, of the checkpoints before it, and the newer
 * run that deletes those indexes may not start (a kill, its protected
 * checkpoint failing to verify, a checkpoint committed meanwhile); after a
 * run that finished, nothing older is left to hide.
 */
int ws_ckread_retiring_below(struct ws_ckpt *c, uint64_t *below)
{
	struct ws_ckpt_retention st;
	bool found;
	int rc = ws_ckpt_retention_state(c, &st, &found);

	*below = 0;
	if (rc)
		return rc;
	if (found)
		*below = st.has_kept ? st.kept_ref.id : st.protected_ref.id;
	return 0;
}

static int problem(ws_problem_fn fn, void *arg, const char *tenant, const char *key, int rc, int *first);

/* ws_checkpoint_verify's walk over the older stored checkpoints. */
struct older_verify {
	struct ws_sink *sink;
	const char *only;
	ws_problem_fn fn;
	void *arg;
	uint64_t below;
	int *first;
};

/* Every artifact of one stored checkpoint: what restore --checkpoint reads. */
static int verify_older(const struct ws_ckpt_ref *ref, const struct ws_ckpt_index *idx, void *arg)
{
	struct older_verify *w = arg;
	(void)ref;
	if (idx->checkpoint_id < w->below)
		return 1; /* being removed by retention, and every older one: done */
	for (size_t i = 0; i < idx->tenant_count; i++) {
		const char *t = idx->tenants[i].tenant;
		struct ws_restore_base base;
		int rc;
		if (w->only && strcmp(w->only, t) != 0)
			continue;
		memset(&base, 0, sizeof(base));
		if ((rc = ws_ckread_base_from_index(idx, t, &base)) != 0 ||
		    (rc = ws_artifact_verify(w->sink->store, &base)) != 0) {
			ws_fail_wrap(rc, "checkpoint %" PRIu64, idx->checkpoint_id);
			problem(w->fn, w->arg, t, base.artifact_key, rc, w->first);
		}
	}
	return 0;
}

static int problem(ws_problem_fn fn, void *arg, const char *tenant, const char *key, int rc, int *first)
{
	if (fn)
		fn(tenant, key, rc, ws_errmsg(), arg);
	if (!*first)
		*first = rc;
	return rc;
}

/* The latest Commit's checks: its tenants' watermarks and its artifacts. */
static void verify_latest(struct ws_ckpt *c, struct ws_sink *sink, const char *only, const struct ws_ckpt_index *idx,
			  ws_problem_fn fn, void *arg, int *first)
{
	for (size_t i = 0; i < idx->tenant_count; i++) {
		const char *t = idx->tenants[i].tenant;
		struct ws_fmt_watermark wm;
		struct ws_restore_base base;
		char key[WS_KEY_MAX];
		int rc;
		if (only && strcmp(only, t) != 0)
			continue;
		/* The tenant a Commit names must still have a watermark: without
		 * one, nothing restores its latest state. Any version: verify
		 * reads a tenant with manifest slots (its head, below it). */
		if (ws_key_watermark(key, sizeof(key), t) != 0)
			key[0] = '\0';
		rc = ws_wm_load_any(sink->store, t, &wm, NULL, NULL);
		if (rc == WS_ENOTFOUND && ws_ckread_removed_since(c, t, idx->checkpoint_id))
			rc = 0; /* removed for good (walship forget) */
		else if (rc == WS_ENOTFOUND)
			rc = ws_fail(WS_EINCOMPLETE, "tenant %s: watermark %s is missing, but checkpoint %" PRIu64
				     " names the tenant", t, key, idx->checkpoint_id);
		if (rc)
			problem(fn, arg, t, key, rc, first);
		/* The artifact the latest state starts from: its bytes and that
		 * it opens as a database (one damaged bit is reported here). */
		if ((rc = ws_ckread_base_from_index(idx, t, &base)) != 0 ||
		    (rc = ws_artifact_verify(sink->store, &base)) != 0)
			problem(fn, arg, t, base.artifact_key, rc, first);
	}
}

/* committed/ keys the walk met (loaded, or named as damaged): the listing below skips them. */
struct key_set {
	char (*k)[WS_KEY_MAX];
	size_t n, cap;
};

static void key_set_add(struct key_set *ks, const char *key)
{
	/* Out of memory only costs a second read of that key. */
	if (ws_ckread_grow((void **)&ks->k, &ks->cap, ks->n, sizeof(*ks->k)) == 0)
		snprintf(ks->k[ks->n++], WS_KEY_MAX, "%s", key);
}

static bool key_set_has(const struct key_set *ks, const char *key)
{
	for (size_t i = 0; i < ks->n; i++)
		if (strcmp(ks->k[i], key) == 0)
			return true;
	return false;
}

/* ws_checkpoint_verify's walk: the latest Commit, then every older one stored. */
struct verify_walk {
	struct ws_ckpt *c;
	struct older_verify o;
	uint64_t latest_id;
	uint64_t *verified_id;
	struct key_set met;
};

static int verify_any(const struct ws_ckpt_ref *ref, const struct ws_ckpt_index *idx, void *arg)
{
	struct verify_walk *w = arg;
	key_set_add(&w->met, ref->key);
	if (idx->checkpoint_id != w->latest_id)
		return verify_older(ref, idx, &w->o);
	verify_latest(w->c, w->o.sink, w->o.only, idx, w->o.fn, w->o.arg, w->o.first);
	*w->verified_id = idx->checkpoint_id;
	return 0;
}

/*
 * Every committed/ object the walk did not meet (one LIST): an aborted
 * candidate's seal, a candidate in flight, or an index older than what
 * retention keeps are not problems; one that decodes as neither an index
 * nor a seal of this namespace is (a damaged seal, say): named. Retention
 * deletes it once it is older than the oldest checkpoint kept, as it does
 * a damaged index (one older than what the last run kept included: seals
 * stay for good, so nothing else removes it).
 */
static void verify_committed(struct ws_ckpt *c, const struct key_set *met, ws_problem_fn fn, void *arg, int *first)
{
	char dep[WS_CKPT_DEPLOYMENT_LEN + 1], token[WS_KEY_MAX] = "";
	int rc;

	if ((rc = ws_ckpt_deployment_id(c, dep)) != 0) {
		problem(fn, arg, NULL, WS_CKPT_PREFIX "/deployment", rc, first);
		return;
	}
	for (;;) {
		struct ws_list_page page;
		bool more;
		memset(&page, 0, sizeof(page));
		if ((rc = ws_store_list(ws_ckpt_store(c), WS_CKPT_PREFIX "/committed/", token, WS_LIST_PAGE_MAX,
					&page)) != 0) {
			problem(fn, arg, NULL, WS_CKPT_PREFIX "/committed/", ws_fail_wrap(rc, "list "
				WS_CKPT_PREFIX "/committed/"), first);
			ws_list_page_free(&page);
			return;
		}
		for (size_t i = 0; i < page.count; i++) {
			struct ws_ckpt_peek p;
			if (met && key_set_has(met, page.keys[i]))
				continue;
			if ((rc = ws_ckpt_peek(c, page.keys[i], dep, &p)) != 0)
				problem(fn, arg, NULL, page.keys[i], rc, first);
			else if (p.kind == WS_CKPT_PEEK_DAMAGED)
				problem(fn, arg, NULL, page.keys[i],
					ws_fail(WS_ECORRUPT, "%s decodes as neither a committed index nor a seal (%s); "
						"`walship retention` removes it once it is older than the oldest "
						"checkpoint kept", page.keys[i], p.detail), first);
			else if (p.kind == WS_CKPT_PEEK_OTHER)
				problem(fn, arg, NULL, page.keys[i],
					ws_fail(WS_EFORMAT, "%s: not a committed index name (<16 hex id>-<SHA-256>"
						".json)", page.keys[i]), first);
		}
		more = page.truncated && strcmp(page.next_token, token) > 0;
		if (more)
			snprintf(token, sizeof(token), "%s", page.next_token);
		ws_list_page_free(&page);
		if (!more)
			return;
	}
}

/* A committed index on the chain that does not load: named, the walk goes on past it. */
static int verify_damaged(const struct ws_ckpt_ref *ref, const char *detail, void *arg)
{
	struct verify_walk *w = arg;
	key_set_add(&w->met, ref->key);
	problem(w->o.fn, w->o.arg, NULL, ref->key,
		ws_fail(WS_ECORRUPT, "checkpoint %" PRIu64 ": committed index %s is damaged or missing (%s); the "
			"next `walship checkpoint` commits past it, `walship retention` removes it", ref->id,
			ref->key, detail), w->o.first);
	return 0;
}

/*
 * The control objects besides the head (read with the latest Commit): each
 * that cannot be decoded is named, with what repairs it: an inventory or
 * witness the next checkpoint rebuilds, a retention record the next
 * retention run.
 */
static void verify_controls(struct ws_ckpt *c, ws_problem_fn fn, void *arg, int *first)
{
	struct ws_ckpt_retention st;
	struct ws_ckpt_inventory inv;
	struct ws_ckpt_witness wit;
	bool found;
	int rc;

	if ((rc = ws_ckpt_active_inventory(c, &inv, &found)) == 0)
		ws_ckpt_inventory_free(&inv);
	else
		problem(fn, arg, NULL, WS_CKPT_PREFIX "/inventory",
			ws_fail_wrap(rc, "cannot be decoded; the next `walship checkpoint` rebuilds it"), first);
	if ((rc = ws_ckpt_sink_open_witness(c, &wit, &found)) != 0)
		problem(fn, arg, NULL, WS_CKPT_PREFIX "/witness",
			ws_fail_wrap(rc, "cannot be decoded; the next `walship checkpoint` rebuilds it"), first);
	if ((rc = ws_ckpt_retention_state(c, &st, &found)) != 0)
		problem(fn, arg, NULL, WS_CKPT_PREFIX "/retention",
			ws_fail_wrap(rc, "cannot be decoded; the next `walship retention` rebuilds it"), first);
}

/*
 * No head, one committed/ key: the sink's first checkpoint between its
 * candidate index and its decision (in flight, or killed there: the next
 * checkpoint aborts and seals it), not a lost head, when the witness is
 * open for that very attempt. A lost head after commits leaves older
 * indexes, or a closed witness.
 */
static bool first_attempt_in_flight(struct ws_ckpt *c, const char *key)
{
	struct ws_ckpt_witness wit;
	char want[WS_KEY_MAX];
	bool found = false;

	if (ws_ckpt_sink_open_witness(c, &wit, &found) == 0 && found && wit.state == WS_CKPT_WITNESS_OPEN) {
		ws_ckpt_committed_key(wit.attempt.checkpoint_id, "", want);
		/* want ends "<id>-.json": its candidate is "<id>-<sha>.json" */
		size_t n = strlen(want) - strlen(".json");
		return strncmp(key, want, n) == 0;
	}
	return false;
}

int ws_ckread_head_lost(struct ws_ckpt *c)
{
	struct ws_store *s = ws_ckpt_store(c);
	struct ws_list_page page;
	bool lost;
	int rc;

	memset(&page, 0, sizeof(page));
	rc = ws_store_list(s, WS_CKPT_PREFIX "/committed/", "", 2, &page);
	if (rc) {
		ws_list_page_free(&page);
		return ws_fail_wrap(rc, "list " WS_CKPT_PREFIX "/committed/");
	}
	lost = page.count > 0 && !(page.count == 1 && !page.truncated && first_attempt_in_flight(c, page.keys[0]));
	ws_list_page_free(&page);
	if (!lost)
		return 0;
	return ws_fail(WS_EINCOMPLETE, "checkpoint object %s is missing, but committed checkpoint indexes exist under "
		       WS_CKPT_PREFIX "/committed/: the head that names the latest was lost (run: walship repair "
		       "--sink %s)", WS_CKPT_HEAD_KEY, s->url);
}

/*
 * verify of the deployment record before anything that reads through it:
 * one that cannot be decoded, or is missing while other checkpoint objects
 * are there, is named with the command that rebuilds it, and so is each
 * other control object that does not decode even on its own (nothing else
 * can be checked without the record). *ok: the record decodes (or nothing
 * is there).
 */
static void verify_deployment(struct ws_ckpt *c, ws_problem_fn fn, void *arg, int *first, bool *ok)
{
	static const char *const others[] = { WS_CKPT_HEAD_KEY, WS_CKPT_PREFIX "/inventory",
					      WS_CKPT_PREFIX "/retention", WS_CKPT_PREFIX "/witness" };
	const char *url = ws_ckpt_store(c)->url;
	struct ws_ckpt_peek dp, p;
	const char *present = NULL;
	int rc;

	*ok = false;
	if ((rc = ws_ckpt_peek(c, WS_CKPT_PREFIX "/deployment", NULL, &dp)) != 0) {
		problem(fn, arg, NULL, WS_CKPT_PREFIX "/deployment", rc, first);
		return;
	}
	if (dp.kind == WS_CKPT_PEEK_DEPLOYMENT) {
		*ok = true;
		return;
	}
	for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++) {
		if ((rc = ws_ckpt_peek(c, others[i], NULL, &p)) != 0) {
			problem(fn, arg, NULL, others[i], rc, first);
			continue;
		}
		if (p.kind != WS_CKPT_PEEK_ABSENT && !present)
			present = others[i];
		if (p.kind == WS_CKPT_PEEK_DAMAGED)
			problem(fn, arg, NULL, others[i],
				ws_fail(WS_EFORMAT, "%s cannot be decoded (%s)", others[i], p.detail), first);
	}
	if (dp.kind == WS_CKPT_PEEK_DAMAGED)
		problem(fn, arg, NULL, WS_CKPT_PREFIX "/deployment",
			ws_fail(WS_EFORMAT, WS_CKPT_PREFIX "/deployment cannot be decoded (run: walship repair --sink %s): "
				"%s", url, dp.detail), first);
	else if (present)
		problem(fn, arg, NULL, WS_CKPT_PREFIX "/deployment",
			ws_fail(WS_EINCOMPLETE, WS_CKPT_PREFIX "/deployment is missing, but %s is there (run: walship "
				"repair --sink %s)", present, url), first);
	else
		*ok = true; /* nothing of the namespace yet */
}

int ws_checkpoint_verify(struct ws_sink *sink, const char *only, ws_problem_fn fn, void *arg, uint64_t *verified_id)
{
	struct ws_ckpt *c = NULL;
	struct ws_ckpt_outcome latest;
	struct ws_obj_info info;
	bool found;
	int rc, first = 0;

	*verified_id = 0;
	if ((rc = ws_ckread_open(sink, false, 0, &c)) != 0)
		return problem(fn, arg, NULL, WS_CKPT_HEAD_KEY, rc, &first);
	verify_deployment(c, fn, arg, &first, &found);
	if (!found)
		goto out; /* nothing reads through a deployment record that does not decode */
	rc = ws_store_head(sink->store, WS_CKPT_HEAD_KEY, &info);
	if (rc == WS_ENOTFOUND) {
		/* Nothing decided, the common case; unless committed indexes are
		 * there: then the head that names the latest was lost. */
		if ((rc = ws_ckread_head_lost(c)) != 0)
			problem(fn, arg, NULL, WS_CKPT_HEAD_KEY, rc, &first);
		verify_controls(c, fn, arg, &first);
		goto out;
	}
	if (rc) {
		problem(fn, arg, NULL, WS_CKPT_HEAD_KEY, ws_fail_wrap(rc, "read %s", WS_CKPT_HEAD_KEY), &first);
		goto out;
	}
	rc = ws_ckpt_latest_commit(c, &latest, &found);
	if (rc)
		problem(fn, arg, NULL, WS_CKPT_HEAD_KEY, rc, &first);
	verify_controls(c, fn, arg, &first);
	if (rc) {
		verify_committed(c, NULL, fn, arg, &first);
		goto out;
	}
	if (!found) {
		verify_committed(c, NULL, fn, arg, &first);
		goto out;
	}
	{
		/* The latest Commit, then the older checkpoints restore
		 * --checkpoint still takes: verify passes none of them that
		 * restore would refuse, and names every index that does not load. */
		struct verify_walk w = { c, { sink, only, fn, arg, 0, &first }, latest.checkpoint_id, verified_id,
					 { NULL, 0, 0 } };
		rc = ws_ckread_retiring_below(c, &w.o.below);
		if (rc == 0)
			rc = ws_ckread_walk_past(c, latest.committed, verify_any, verify_damaged, &w);
		if (rc != 0 && rc != 1)
			problem(fn, arg, NULL, latest.committed.key,
				ws_fail_wrap(rc, "checkpoints from %" PRIu64, latest.checkpoint_id), &first);
		else
			verify_committed(c, &w.met, fn, arg, &first);
		free(w.met.k);
	}
out:
	ws_ckpt_close(c);
	return first;
}

/* Tenant t was removed for good while checkpoint id (or a later one) was the latest Commit. */
bool ws_ckread_removed_since(struct ws_ckpt *c, const char *t, uint64_t id)
{
	bool found = false;
	uint64_t after = 0;
	return ws_ckpt_removed(c, t, &found, &after) == 0 && found && after >= id;
}

struct list_walk {
	ws_checkpoint_fn fn;
	void *arg;
	uint64_t below;          /* retiring_below */
	struct ws_store *store;
};

/*
 * When the checkpoint was decided (its committed index's date at the
 * store) and the commit time of its cut: the newest time_ms among the
 * manifests it names (a carried head's included: the cut is the newest
 * state acknowledged). What cannot be read stays 0 (unknown): listing
 * never fails for it.
 */
static void list_times(struct ws_store *s, const struct ws_ckpt_ref *ref, const struct ws_ckpt_index *idx,
		       struct ws_checkpoint_info *info)
{
	struct ws_obj_info oi;
	struct ws_buf b;

	if (ws_store_head(s, ref->key, &oi) == 0)
		info->decided_ms = oi.mtime_ms;
	ws_buf_init(&b, 256u << 20);
	for (size_t i = 0; i < idx->tenant_count; i++) {
		struct ws_chain_stop cut;
		struct ws_fmt_manifest m;
		ws_ckread_cut_of(&idx->tenants[i], &cut);
		ws_buf_reset(&b);
		if (ws_manifest_read(s, cut.key, cut.sha, cut.length, &b, &m) != 0)
			continue;
		if (m.time_ms > info->cut_time_ms)
			info->cut_time_ms = m.time_ms;
		ws_fmt_manifest_free(&m);
	}
	ws_buf_free(&b);
}

static int list_one(const struct ws_ckpt_ref *ref, const struct ws_ckpt_index *idx, void *arg)
{
	struct list_walk *w = arg;
	struct ws_checkpoint_info info;
	if (idx->checkpoint_id < w->below)
		return 1; /* being removed by retention, and every older one */
	ws_ckread_info_from(ref, idx, true, &info);
	list_times(w->store, ref, idx, &info);
	return w->fn(&info, w->arg);
}

/* A damaged or missing index: listed, marked, so what it was is not silently dropped. */
static int list_damaged(const struct ws_ckpt_ref *ref, const char *detail, void *arg)
{
	struct list_walk *w = arg;
	struct ws_checkpoint_info info;
	ws_ckread_info_from(ref, NULL, true, &info);
	info.damaged = true;
	snprintf(info.damage, sizeof(info.damage), "%s", detail);
	return w->fn(&info, w->arg);
}

int ws_checkpoint_list(struct ws_sink *sink, ws_checkpoint_fn fn, void *arg)
{
	struct ws_ckpt *c;
	struct ws_ckpt_outcome latest;
	struct list_walk w = { fn, arg, 0, sink->store };
	bool found;
	int rc = ws_ckread_open(sink, false, WS_CKPT_LEASE_WAIT_MS, &c);

	if (rc)
		return rc;
	rc = ws_ckpt_latest_commit(c, &latest, &found);
	if (!rc && !found) {
		/* Nothing decided, or the head that names it all was lost: said so. */
		struct ws_obj_info info;
		rc = ws_store_head(sink->store, WS_CKPT_HEAD_KEY, &info);
		rc = rc == WS_ENOTFOUND ? ws_ckread_head_lost(c) : rc;
	} else if (!rc && (rc = ws_ckread_retiring_below(c, &w.below)) == 0) {
		rc = ws_ckread_walk_past(c, latest.committed, list_one, list_damaged, &w);
		if (rc == 1)
			rc = 0;
	}
	ws_ckpt_close(c);
	return rc;
}


int ws_restore_checkpoint(struct ws_sink *sink, const char *tenant, uint64_t checkpoint_id, const char *out_path,
			  bool force)
{
	struct ws_ckpt *c = NULL;
	struct ws_ckpt_ref ref;
	struct ws_ckpt_index idx;
	struct ws_restore_base base;
	char *tmp = NULL;
	int fd = -1, rc;

	if ((rc = ws_restore_prepare(sink->store, tenant, out_path, force)) != 0)
		return rc;
	if ((rc = ws_ckread_open(sink, false, WS_CKPT_LEASE_WAIT_MS, &c)) != 0)
		return rc;
	rc = ws_ckread_find_ref(c, checkpoint_id, &ref, &idx);
	if (rc)
		goto out;
	{
		uint64_t below;
		rc = ws_ckread_retiring_below(c, &below);
		if (rc == 0 && idx.checkpoint_id < below)
			rc = ws_fail(WS_ENOTFOUND, "checkpoint %" PRIu64 " is being removed: retention keeps "
				     "checkpoint %" PRIu64 " and later (run `walship retention` to finish "
				     "removing it)", idx.checkpoint_id, below);
		if (rc) {
			ws_ckpt_index_free(&idx);
			goto out;
		}
	}
	rc = ws_ckread_base_from_index(&idx, tenant, &base);
	ws_ckpt_index_free(&idx);
	if (rc)
		goto out;
	if ((rc = ws_restore_tmp_open(out_path, &tmp, &fd)) != 0)
		goto out;
	rc = ws_artifact_fetch_base(sink->store, &base, fd);
	if (!rc && fsync(fd) != 0)
		rc = ws_fail(-errno, "fsync %s", tmp);
out:
	rc = ws_restore_end(fd, tmp, out_path, force, tenant, rc);
	ws_ckpt_close(c);
	return rc;
}
