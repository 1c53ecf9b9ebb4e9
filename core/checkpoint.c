/*
 * Checkpoints of a sink, restore by checkpoint, and retention, on top of the
 * checkpoint decision store (store/ws_ckpt.h, docs/CHECKPOINTS.md).
 *
 * A checkpoint is a consistent cut across every tenant of one sink: for
 * each tenant the watermark at the cut (WAL generation, last frame, and the
 * manifest by key, SHA-256 and length), plus one artifact per tenant: the
 * tenant's whole database at the cut, as one standalone SQLite file
 * (rollback-journal header, exactly what `restore` writes), stored at
 *
 *     checkpoints/artifacts/<id:016x>/<tenant>
 *
 * and named in the committed index by length and SHA-256. The key carries
 * the checkpoint ID, which the store hands out once, so every artifact is
 * written create-once and no two attempts share one. Artifacts are built
 * incrementally: the image at the new cut starts from the previous Commit's
 * artifact when the tenant's chain passes through that Commit's cut, so a
 * checkpoint reads only the frames shipped since the last one.
 *
 * Protocol (docs/CHECKPOINTS.md "Taking a checkpoint"):
 *   0. recover an attempt a crash left behind (its witness open or its
 *      inventory active);
 *   1. allocate an ID;                        ws_ckpt_allocate_id_at_least
 *   2. read the cut: every tenant's watermark;
 *   3. open the sink-open witness;            ws_ckpt_create_sink_open_witness
 *   4. admit the artifact inventory;          ws_ckpt_begin_inventory
 *   5. write the artifacts;                   create-once PUTs
 *   6. create the committed index;            ws_ckpt_create_committed
 *   7. record Commit: the decision;           ws_ckpt_record_outcome
 *   8. clean up: complete the inventory, close the witness.
 * An error between 3 and 7 aborts: record Abort (unless the head shows the
 * Commit won), seal the candidate, delete every inventoried artifact,
 * complete the inventory, close the witness. A crash anywhere leaves the
 * witness open or the inventory active; the next checkpoint (or
 * ws_checkpoint_recover) finishes the same abort from the durable state.
 * ws_checkpoint_take runs each step as one function, in this order:
 * take_recover, take_allocate, take_read_cut, take_open_witness (take_peer
 * while another attempt holds the witness), take_admit_inventory,
 * take_write_artifacts, take_create_index, take_record_commit (take_lost
 * when another outcome won), take_clean_up; the abort path is take_abort.
 * Each asserts the invariant it relies on.
 *
 * Backends: an s3:// sink decides through the shared authority on the
 * sink's own store (conditional writes, probed); a file:// sink through the
 * local single-writer authority on the sink directory (an exclusive lease,
 * held only for one call here, so readers wait for it briefly).
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

#include "core_internal.h"
#include "ws_clock.h"
#include "replay.h"
#include "ws_assert.h"
#include "ws_ckpt.h"
#include "ws_fault.h"
#include "ws_logging.h"

#define ART_PREFIX WS_CKPT_PREFIX "/artifacts"
#define HEAD_KEY WS_CKPT_PREFIX "/head"
#define LEASE_WAIT_MS_DEFAULT 5000u
#define PEER_WAIT_MS_DEFAULT 30000u
#define PREDECESSORS_MAX 1000000u
#define PEER_ROUNDS_MAX 8u

/*
 * The decision store of the sink. A writer of a file:// sink holds the local
 * lease for one call; wait up to wait_ms for it. A reader (restore, verify,
 * ls) never takes it: it reads through a read-only handle, so a busy writer
 * never makes a reader wait or fall back (every object it reads is
 * create-once or replaced by one atomic write).
 */
static int ckpt_open(struct ws_sink *sink, bool writer, unsigned wait_ms, struct ws_ckpt **out)
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

static void hex_of(const uint8_t *sha, char out[WS_SHA256_HEX_LEN + 1])
{
	ws_hex(sha, WS_SHA256_LEN, out);
}

static bool hex_to_sha(const char *hex, uint8_t out[WS_SHA256_LEN])
{
	for (size_t i = 0; i < WS_SHA256_LEN; i++) {
		int hi = ws_hexval(hex[2 * i]), lo = hi < 0 ? -1 : ws_hexval(hex[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return false;
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	return hex[2 * WS_SHA256_LEN] == '\0';
}

static void artifact_key(char out[WS_KEY_MAX], uint64_t id, const char *tenant)
{
	snprintf(out, WS_KEY_MAX, ART_PREFIX "/%016" PRIx64 "/%s", id, tenant);
}

/*
 * Whether key has the form artifact_key gives checkpoint id's artifacts.
 * Recovery and retention delete the keys an inventory or an older index
 * names: only such keys, never another (a record naming a watermark, say,
 * is damaged or hostile; what it names is left alone, with a warning).
 */
static bool artifact_key_of(const char *key, uint64_t id)
{
	char want[WS_KEY_MAX];
	int n = snprintf(want, sizeof(want), ART_PREFIX "/%016" PRIx64 "/", id);
	return n > 0 && strncmp(key, want, (size_t)n) == 0 && ws_tenant_name_valid(key + n);
}

static int tenant_cmp(const void *a, const void *b)
{
	return strcmp(((const struct ws_ckpt_tenant_entry *)a)->tenant,
		      ((const struct ws_ckpt_tenant_entry *)b)->tenant);
}

static int artifact_cmp(const void *a, const void *b)
{
	return strcmp(((const struct ws_ckpt_artifact *)a)->key, ((const struct ws_ckpt_artifact *)b)->key);
}

static const struct ws_ckpt_tenant_entry *index_tenant(const struct ws_ckpt_index *idx, const char *tenant)
{
	struct ws_ckpt_tenant_entry k;
	snprintf(k.tenant, sizeof(k.tenant), "%s", tenant);
	return bsearch(&k, idx->tenants, idx->tenant_count, sizeof(k), tenant_cmp);
}

static const struct ws_ckpt_artifact *index_artifact(const struct ws_ckpt_index *idx, const char *key)
{
	struct ws_ckpt_artifact k;
	snprintf(k.key, sizeof(k.key), "%s", key);
	return bsearch(&k, idx->artifacts, idx->artifact_count, sizeof(k), artifact_cmp);
}

/* The base restore needs for tenant from a loaded index: its cut and artifact. */
static int base_from_index(const struct ws_ckpt_index *idx, const char *tenant, struct ws_restore_base *out)
{
	const struct ws_ckpt_tenant_entry *t = index_tenant(idx, tenant);
	const struct ws_ckpt_artifact *a;
	char key[WS_KEY_MAX];

	memset(out, 0, sizeof(*out));
	if (!t)
		return ws_fail(WS_ENOTFOUND, "checkpoint %" PRIu64 " does not include tenant %s",
			       idx->checkpoint_id, tenant);
	artifact_key(key, idx->checkpoint_id, tenant);
	a = index_artifact(idx, key);
	if (!a) {
		snprintf(out->artifact_key, sizeof(out->artifact_key), "%s", key); /* the one missing */
		return ws_fail(WS_EFORMAT, "checkpoint %" PRIu64 " names tenant %s but no artifact %s",
			       idx->checkpoint_id, tenant, key);
	}
	snprintf(out->cut.key, sizeof(out->cut.key), "%s", t->manifest_key);
	if (!hex_to_sha(t->manifest_sha256, out->cut.sha))
		return ws_fail(WS_EFORMAT, "checkpoint %" PRIu64 ": tenant %s manifest hash is not hex",
			       idx->checkpoint_id, tenant);
	out->cut.length = t->manifest_length;
	snprintf(out->artifact_key, sizeof(out->artifact_key), "%s", a->key);
	out->artifact_length = a->length;
	snprintf(out->artifact_sha256, sizeof(out->artifact_sha256), "%s", a->sha256);
	out->checkpoint_id = idx->checkpoint_id;
	return 0;
}

static void info_from(const struct ws_ckpt_ref *ref, const struct ws_ckpt_index *idx, bool own,
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

/* ---- the cut -------------------------------------------------------------------- */

struct cut {
	struct ws_ckpt_tenant_entry *t;
	size_t count, cap;
};

/*
 * A watermark that carries its manifest (docs/FORMAT.md "Watermark") names
 * a head stored nowhere else, which its owner replaces while it keeps
 * merging what it ships into it: the tenant's cut is the stored manifest
 * that head is on. A cut must be an object that retention keeps and whose
 * predecessors it may delete, and the owner's next manifest links to that
 * one, never to a carried head it replaced. A continuation's predecessor
 * ends where it begins, in its generation; a carried next generation's
 * first manifest is on the end of another generation, which only the
 * stored predecessor itself tells (read back, its SHA-256 and length
 * checked against the link).
 */
static int cut_of_carried(struct ws_store *s, const char *tenant, struct ws_fmt_watermark *wm)
{
	struct ws_fmt_manifest m, p;
	struct ws_buf b;
	int rc = ws_fmt_manifest_decode(wm->carried, (size_t)wm->carried_len, &m);
	if (rc)
		return ws_fail_wrap(rc, "tenant %s: manifest %s carried by its watermark", tenant, wm->manifest_key);
	if ((m.kind != WS_MANIFEST_CONTINUE && m.kind != WS_MANIFEST_NEXT_GEN) || !m.prev_key[0] ||
	    m.first_frame < 1 || (m.kind == WS_MANIFEST_NEXT_GEN && m.first_frame != 1) || m.wm_seq != wm->seq ||
	    strcmp(m.tenant, tenant) != 0) {
		ws_fmt_manifest_free(&m);
		return ws_fail(WS_EFORMAT, "tenant %s: manifest %s carried by its watermark is not on a stored "
			       "manifest", tenant, wm->manifest_key);
	}
	if (m.kind == WS_MANIFEST_NEXT_GEN) {
		ws_buf_init(&b, WS_WM_BYTES_MAX);
		rc = ws_manifest_read(s, m.prev_key, m.prev_sha, m.prev_length, &b, &p);
		ws_buf_free(&b);
		if (rc > 0)
			rc = ws_fail(WS_EFORMAT, "tenant %s: manifest %s, the predecessor of the one its watermark "
				     "carries, is missing or not the one it names (length or SHA-256 differs)",
				     tenant, m.prev_key);
		else if (rc < 0)
			rc = ws_fail_wrap(rc, "tenant %s: manifest %s, the predecessor of the one its watermark "
					  "carries", tenant, m.prev_key);
		if (rc) {
			ws_fmt_manifest_free(&m);
			return rc;
		}
		if (p.wm_seq + 1 != m.wm_seq || strcmp(p.tenant, tenant) != 0 || ws_fmt_gen_equal(&p.gen, &m.gen)) {
			ws_fmt_manifest_free(&p);
			ws_fmt_manifest_free(&m);
			return ws_fail(WS_EFORMAT, "tenant %s: manifest %s is not the predecessor of the next "
				       "generation its watermark carries", tenant, m.prev_key);
		}
		wm->gen = p.gen;
		wm->last_frame = p.last_frame;
		ws_fmt_manifest_free(&p);
	} else {
		wm->last_frame = m.first_frame - 1;
	}
	snprintf(wm->manifest_key, sizeof(wm->manifest_key), "%s", m.prev_key);
	memcpy(wm->manifest_sha, m.prev_sha, WS_SHA256_LEN);
	wm->manifest_length = m.prev_length;
	wm->seq--;
	wm->carried = NULL;
	wm->carried_len = 0;
	ws_fmt_manifest_free(&m);
	return 0;
}

static int cut_add(struct ws_store *s, const char *tenant, struct cut *cut)
{
	struct ws_fmt_watermark wm;
	struct ws_ckpt_tenant_entry *e;
	struct ws_buf wmraw;
	int rc;

	ws_buf_init(&wmraw, WS_WM_BYTES_MAX);
	rc = ws_wm_load_keep(s, tenant, &wm, NULL, &wmraw);
	if (rc == 0 && wm.carried_len)
		rc = cut_of_carried(s, tenant, &wm);
	ws_buf_free(&wmraw);
	if (rc == WS_ENOTFOUND)
		return 0; /* objects but no watermark yet: nothing durable to cut */
	if (rc)
		return rc;
	if (wm.manifest_key[0] == '\0')
		return 0;
	if (cut->count >= WS_CKPT_TENANTS_MAX)
		return ws_fail(WS_ETOOBIG, "checkpoint: more than %u tenants", WS_CKPT_TENANTS_MAX);
	if (cut->count == cut->cap) {
		size_t ncap = cut->cap ? cut->cap * 2 : 64;
		void *n = realloc(cut->t, ncap * sizeof(*cut->t));
		if (!n)
			return -ENOMEM;
		cut->t = n;
		cut->cap = ncap;
	}
	e = &cut->t[cut->count++];
	memset(e, 0, sizeof(*e));
	snprintf(e->tenant, sizeof(e->tenant), "%s", tenant);
	e->wal_generation = wm.gen.checkpoint_seq;
	e->last_frame = wm.last_frame;
	snprintf(e->manifest_key, sizeof(e->manifest_key), "%s", wm.manifest_key);
	hex_of(wm.manifest_sha, e->manifest_sha256);
	e->manifest_length = wm.manifest_length;
	return 0;
}

/*
 * Every tenant's watermark. One LIST per tenant: after a tenant's first key,
 * the listing resumes after "<segment>/~" ('~' sorts after every key
 * character), skipping the rest of its objects. The listing is in key
 * order, which is not the names' order ("db-2/" sorts before "db/": '-' <
 * '/'), and the committed index keeps tenants (and their artifact keys)
 * strictly sorted by name: the cut is sorted once read.
 */
static int cut_read(struct ws_store *s, struct cut *cut)
{
	char name[WS_KEY_MAX] = "", next[WS_KEY_MAX];
	int rc;

	memset(cut, 0, sizeof(*cut));
	for (;;) {
		/* One name at a time, each past the last: a top-level name of any
		 * length is stepped over, never listed again (ws_store_next_top). */
		rc = ws_store_next_top(s, name, next);
		if (rc)
			return ws_fail_wrap(rc, "checkpoint: list %s", s->url);
		if (!next[0])
			break;
		memcpy(name, next, sizeof(name));
		if (ws_tenant_name_valid(name) && (rc = cut_add(s, name, cut)) != 0)
			return ws_fail_wrap(rc, "checkpoint: tenant %s", name);
	}
	if (cut->count > 1)
		qsort(cut->t, cut->count, sizeof(*cut->t), tenant_cmp);
	return 0;
}

/* ---- aborting an attempt ---------------------------------------------------------- */

/* Seal one candidate index (ws_ckpt_list_candidates) of an aborted attempt. */
static int seal_one(const struct ws_ckpt_ref *ref, void *arg)
{
	struct ws_ckpt *c = arg;
	struct ws_ckpt_index idx;
	int rc = ws_ckpt_load_committed(c, ref, &idx);

	if (rc == WS_EPRECOND || rc == WS_ENOTFOUND || rc == WS_ECORRUPT)
		return 0; /* sealed already (or not ours to seal) */
	if (rc)
		return rc;
	rc = ws_ckpt_seal_aborted_candidate(c, &idx);
	ws_ckpt_index_free(&idx);
	return rc;
}

/* Seal every candidate index of checkpoint id. */
static int seal_candidates(struct ws_ckpt *c, uint64_t id)
{
	return ws_ckpt_list_candidates(c, id, seal_one, c);
}

static int find_ref(struct ws_ckpt *c, uint64_t id, struct ws_ckpt_ref *ref, struct ws_ckpt_index *idx);
static void cut_of(const struct ws_ckpt_tenant_entry *t, struct ws_chain_stop *out);

/*
 * Is checkpoint id decided, and as a Commit? A Commit older than the latest
 * one is found on the predecessor chain: a crashed attempt's clean-up must
 * never seal or delete what a Commit names.
 */
static int decided(struct ws_ckpt *c, uint64_t id, bool *is_decided, bool *is_commit)
{
	struct ws_ckpt_head h;
	bool found;
	int rc = ws_ckpt_decision_head(c, &h, &found);
	*is_decided = *is_commit = false;
	if (rc || !found)
		return rc;
	*is_decided = h.latest_terminal.checkpoint_id >= id;
	*is_commit = h.has_commit && h.latest_commit.checkpoint_id == id;
	if (*is_decided && !*is_commit && h.has_commit && h.latest_commit.checkpoint_id > id) {
		struct ws_ckpt_ref ref;
		struct ws_ckpt_index idx;
		rc = find_ref(c, id, &ref, &idx);
		if (rc == 0) {
			*is_commit = true;
			ws_ckpt_index_free(&idx);
		} else if (rc == WS_ENOTFOUND) {
			rc = 0;
		}
	}
	return rc;
}

/*
 * Finish attempt a: if the head committed it, keep everything; otherwise
 * decide Abort, seal its candidate, delete its artifacts. Then complete
 * inventory (when it is a's) and close the witness (when it is a's).
 */
static int finish_attempt(struct ws_ckpt *c, const struct ws_ckpt_attempt *a, const struct ws_ckpt_inventory *inv,
			  const struct ws_ckpt_witness *wit)
{
	struct ws_ckpt_inventory_result ir;
	bool is_decided, is_commit;
	int rc = decided(c, a->checkpoint_id, &is_decided, &is_commit);

	if (rc)
		return rc;
	if (!is_decided) {
		struct ws_ckpt_record_result rr;
		rc = ws_ckpt_record_outcome(c, a->epoch, a->checkpoint_id, WS_CKPT_SCOPE_LOCAL, NULL, NULL,
					    WS_CKPT_ABORT, NULL, &rr);
		if (rc)
			return ws_fail_wrap(rc, "checkpoint %" PRIu64 ": record Abort", a->checkpoint_id);
		is_commit = rr.winner.checkpoint_id == a->checkpoint_id && rr.winner.verdict == WS_CKPT_COMMIT;
	}
	if (!is_commit) {
		if ((rc = seal_candidates(c, a->checkpoint_id)) != 0)
			return rc;
		if (inv && inv->key_count) {
			const char **keys = malloc(inv->key_count * sizeof(*keys));
			size_t nkeys = 0;
			if (!keys)
				return -ENOMEM;
			for (size_t i = 0; i < inv->key_count; i++) {
				if (artifact_key_of(inv->keys[i], a->checkpoint_id))
					keys[nkeys++] = inv->keys[i];
				else
					ws_warn("checkpoint %" PRIu64 ": its inventory names %s, no artifact of it; "
						"left alone (a damaged or foreign record)", a->checkpoint_id, inv->keys[i]);
			}
			if ((rc = WS_FAULT("checkpoint.abort.before_delete")) == 0)
				rc = ws_store_del_many(ws_ckpt_store(c), keys, nkeys);
			free(keys);
			if (rc)
				return ws_fail_wrap(rc, "checkpoint %" PRIu64 ": delete artifacts", a->checkpoint_id);
		}
	}
	if (inv && (rc = ws_ckpt_complete_inventory(c, inv, &ir)) != 0)
		return ws_fail_wrap(rc, "checkpoint %" PRIu64 ": complete inventory", a->checkpoint_id);
	if (wit && (rc = ws_ckpt_clear_sink_open_witness(c, wit)) != 0)
		return ws_fail_wrap(rc, "checkpoint %" PRIu64 ": close witness", a->checkpoint_id);
	return 0;
}

/* Recover whatever attempt a crash left: its witness open or its inventory active. */
static int recover_locked(struct ws_ckpt *c, bool *recovered)
{
	struct ws_ckpt_witness wit;
	struct ws_ckpt_inventory inv;
	bool wfound, wopen, iactive;
	int rc;

	*recovered = false;
	if ((rc = ws_ckpt_sink_open_witness(c, &wit, &wfound)) != 0)
		return rc;
	wopen = wfound && wit.state == WS_CKPT_WITNESS_OPEN;
	if ((rc = ws_ckpt_active_inventory(c, &inv, &iactive)) != 0)
		return rc;
	if (iactive)
		rc = finish_attempt(c, &inv.attempt, &inv,
				    wopen && ws_ckpt_attempt_equal(&wit.attempt, &inv.attempt) ? &wit : NULL);
	if (!rc && wopen && (!iactive || !ws_ckpt_attempt_equal(&wit.attempt, &inv.attempt)))
		rc = finish_attempt(c, &wit.attempt, NULL, &wit);
	*recovered = !rc && (iactive || wopen);
	ws_ckpt_inventory_free(&inv);
	return rc;
}

int ws_checkpoint_recover(struct ws_sink *sink, bool *recovered)
{
	struct ws_ckpt *c;
	bool r = false;
	int rc = ckpt_open(sink, true, LEASE_WAIT_MS_DEFAULT, &c);
	if (rc)
		return rc;
	rc = recover_locked(c, &r);
	ws_ckpt_close(c);
	if (recovered)
		*recovered = r;
	return rc;
}

/*
 * An attempt whose witness another writer opened and that is decided, or
 * that stayed undecided past the wait: finish it as recovery would (its
 * inventory too when it is the same attempt's).
 */
static int recover_peer(struct ws_ckpt *c, const struct ws_ckpt_witness *peer)
{
	struct ws_ckpt_inventory inv;
	bool iactive;
	int rc = ws_ckpt_active_inventory(c, &inv, &iactive);
	if (rc)
		return rc;
	iactive = iactive && ws_ckpt_attempt_equal(&inv.attempt, &peer->attempt);
	rc = finish_attempt(c, &peer->attempt, iactive ? &inv : NULL, peer);
	if (rc == WS_EPRECOND && ws_ckpt_last_kind() == WS_CKPT_STATE_MISMATCH)
		rc = 0; /* its owner (or another recoverer) moved first: start over */
	ws_ckpt_inventory_free(&inv);
	return rc;
}

/*
 * epoch must be at least the highest epoch that decided (the head's): a
 * lower one can never decide. An error naming the epoch to use.
 */
static int epoch_check(struct ws_ckpt *c, uint64_t epoch)
{
	struct ws_ckpt_head h;
	bool found;
	int rc = ws_ckpt_decision_head(c, &h, &found);
	if (rc)
		return rc;
	if (found && h.decisions == UINT64_MAX)
		return ws_fail(WS_ETOOBIG, "checkpoint: %s has recorded %" PRIu64 " decisions, the most it can "
			       "count; no further checkpoint can be decided at this sink", HEAD_KEY, h.decisions);
	if (found && epoch < h.epoch)
		return ws_fail(WS_EFENCED, "checkpoint: epoch %" PRIu64 " is stale: this sink's checkpoints are "
			       "decided at epoch %" PRIu64 " (pass --epoch %" PRIu64 " or higher, the epoch of "
			       "the replicate that owns the sink)", epoch, h.epoch, h.epoch);
	return 0;
}

/* ---- taking a checkpoint ------------------------------------------------------------ */

/* The name this sink takes part in a checkpoint under: its URL, or a hash of it. */
static void sink_name(const struct ws_sink *sink, char out[WS_CKPT_NAME_MAX])
{
	const char *url = sink->store->url;
	bool ok = strlen(url) < WS_CKPT_NAME_MAX;
	for (const char *p = url; ok && *p; p++)
		ok = *p > ' ' && *p < 127;
	if (ok) {
		memcpy(out, url, strlen(url) + 1); /* fits: checked above */
	} else {
		uint8_t sha[WS_SHA256_LEN];
		char hex[WS_SHA256_HEX_LEN + 1];
		ws_sha256(url, strlen(url), sha);
		hex_of(sha, hex);
		snprintf(out, WS_CKPT_NAME_MAX, "sink-%.32s", hex);
	}
}

/*
 * The image at path, mapped read-only (*map NULL when it is empty): an
 * artifact is as large as its database, so it is hashed and sent from the
 * page cache, never copied whole into memory.
 */
static int map_file(const char *path, void **map, size_t *len)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc = 0;
	*map = NULL;
	*len = 0;
	if (fd < 0)
		return ws_fail(-errno, "open %s", path);
	if (fstat(fd, &st) != 0) {
		rc = ws_fail(-errno, "stat %s", path);
		goto out;
	}
	if (st.st_size == 0)
		goto out;
	if ((uint64_t)st.st_size > SIZE_MAX) {
		rc = ws_fail(WS_ETOOBIG, "%s is too large to map", path);
		goto out;
	}
	*map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	if (*map == MAP_FAILED) {
		*map = NULL;
		rc = ws_fail(-errno, "map %s", path);
		goto out;
	}
	*len = (size_t)st.st_size;
	(void)madvise(*map, *len, MADV_SEQUENTIAL);
out:
	close(fd);
	return rc;
}

/*
 * The walk of the committed checkpoints (walk_committed_to, with the
 * readers below): fn's non-zero return ends it; besides, it ends where end
 * says.
 */
typedef int (*committed_fn)(const struct ws_ckpt_ref *ref, const struct ws_ckpt_index *idx, void *arg);
enum walk_end {
	WALK_END_MISSING,              /* at a missing index: retention removed the older ones */
	WALK_END_MISSING_AFTER_FIRST,  /* likewise, but a missing first index is an error */
	WALK_END_ANY_FAILURE,          /* at any index that does not load: nothing older is usable */
};
static int walk_committed_to(struct ws_ckpt *c, struct ws_ckpt_ref ref, enum walk_end end, committed_fn fn,
			     void *arg);

struct older {
	struct ws_store *s;
	const char *tenant, *tmp;
	const struct ws_chain_stop *head;
	bool *used;
	int rc, first;
	char why[512];
};

/* One stored checkpoint for image_from_older: 1 when its artifact built the image. */
static int older_try(const struct ws_ckpt_ref *ref, const struct ws_ckpt_index *idx, void *arg)
{
	struct older *x = arg;
	struct ws_restore_base base;

	(void)ref;
	if (base_from_index(idx, x->tenant, &base) != 0)
		return 0;
	x->rc = ws_restore_image(x->s, x->tenant, x->head, &base, x->tmp, x->used);
	if (x->rc == 0 && *x->used)
		return 1;
	if (!x->first) {
		x->first = x->rc ? x->rc : WS_EINCOMPLETE;
		/* The first failure is the one to name (the object at fault). */
		snprintf(x->why, sizeof(x->why), "%s", x->rc ? ws_errmsg() : "its cut is not on the chain");
	}
	return 0;
}

/*
 * Build tenant's image at head into tmp from the artifact of the stored
 * checkpoint ref or one of its predecessors, newest first. Any index that
 * does not load ends what is stored (retention removed it and the older
 * ones).
 */
static int image_from_older(struct ws_ckpt *c, struct ws_store *s, const char *tenant,
			    const struct ws_chain_stop *head, const struct ws_ckpt_ref *ref, const char *tmp,
			    bool *used)
{
	struct older x = { s, tenant, tmp, head, used, WS_EINCOMPLETE, 0, "no checkpoint with this tenant is stored" };

	if (walk_committed_to(c, *ref, WALK_END_ANY_FAILURE, older_try, &x) == 1)
		return 0;
	return ws_fail(x.first ? x.first : x.rc, "tenant %s: no stored checkpoint's artifact and no full chain "
		       "builds its image (first: %s)", tenant, x.why);
}

/*
 * Build, hash and upload one tenant's artifact at its cut (create-once).
 * prev: the previous Commit's index, whose artifact is the base when the
 * tenant's chain passes through its cut.
 */
static int artifact_write(struct ws_ckpt *c, struct ws_store *s, const struct ws_ckpt_tenant_entry *t,
			  const char *key,
			  const struct ws_ckpt_index *prev, const char *tmp,
			  struct ws_ckpt_artifact *out, struct ws_checkpoint_info *info)
{
	void *map = NULL;
	size_t len = 0;
	struct iovec iov;
	struct ws_chain_stop head;
	struct ws_restore_base base;
	bool have_base = prev && base_from_index(prev, t->tenant, &base) == 0, used = false;
	uint8_t sha[WS_SHA256_LEN];
	int rc;

	memset(&head, 0, sizeof(head));
	snprintf(head.key, sizeof(head.key), "%s", t->manifest_key);
	if (!hex_to_sha(t->manifest_sha256, head.sha))
		return ws_fail(WS_EFORMAT, "tenant %s: bad manifest hash", t->tenant);
	head.length = t->manifest_length;
	rc = ws_restore_image(s, t->tenant, &head, have_base ? &base : NULL, tmp, &used);
	if (rc && have_base) {
		/* The previous artifact cannot be used (damaged, or gone): build
		 * from the chain's REBASE base instead, so one bad artifact never
		 * stops every later checkpoint. */
		ws_info("checkpoint: tenant %s: building from checkpoint %" PRIu64 "'s artifact failed (%s); "
			"building from the full chain", t->tenant, base.checkpoint_id, ws_errmsg());
		rc = ws_restore_image(s, t->tenant, &head, NULL, tmp, &used);
	}
	/* Retention removed the history before an older cut (and the previous
	 * checkpoint's artifact could not be used, or the previous checkpoint
	 * left the tenant out): start from an older checkpoint's artifact,
	 * newest first. */
	if (rc && prev && prev->has_predecessor)
		rc = image_from_older(c, s, t->tenant, &head, &prev->predecessor, tmp, &used);
	if (rc) {
		unlink(tmp); /* no temporary database is left behind */
		return ws_fail_wrap(rc, "checkpoint: build the image of tenant %s", t->tenant);
	}
	if (used)
		info->incremental++;
	rc = map_file(tmp, &map, &len);
	unlink(tmp); /* the mapping keeps the bytes until unmapped */
	if (rc)
		return rc;
	ws_sha256(map, len, sha);
	memset(out, 0, sizeof(*out));
	snprintf(out->key, sizeof(out->key), "%s", key);
	out->length = len;
	hex_of(sha, out->sha256);
	if ((rc = WS_FAULT("checkpoint.artifact.before_put")) != 0) {
		rc = ws_fail(rc, "fault checkpoint.artifact.before_put");
		goto out;
	}
	iov.iov_base = map;
	iov.iov_len = len;
	rc = ws_store_putv(s, key, &iov, len ? 1 : 0, WS_PUT_CREATE, NULL, NULL);
	if (rc) {
		ws_fail_wrap(rc, "checkpoint: write artifact %s", key);
		goto out;
	}
	if ((rc = WS_FAULT("checkpoint.artifact.after_put")) != 0) {
		rc = ws_fail(rc, "fault checkpoint.artifact.after_put");
		goto out;
	}
	info->artifact_bytes += len;
out:
	if (map)
		munmap(map, len);
	return rc;
}

static uint64_t random_token(void)
{
	uint64_t t = 0;
	while (t == 0) {
		if (getrandom(&t, sizeof(t), 0) != (ssize_t)sizeof(t))
			t = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
	}
	return t;
}

/*
 * Another attempt holds the witness: wait until it is terminal and return
 * the durable winner (the latest terminal outcome) as not our own. With
 * timed_out non-NULL, an attempt still undecided after wait_ms sets it
 * (rc 0) instead of failing.
 */
static int wait_for_peer(struct ws_ckpt *c, uint64_t peer_id, unsigned wait_ms, struct ws_checkpoint_info *out,
			 bool *timed_out)
{
	unsigned waited = 0;
	if (timed_out)
		*timed_out = false;
	for (;;) {
		struct ws_ckpt_head h;
		bool found;
		int rc = ws_ckpt_decision_head(c, &h, &found);
		if (rc)
			return rc;
		if (found && h.latest_terminal.checkpoint_id >= peer_id) {
			struct ws_ckpt_index idx;
			const struct ws_ckpt_outcome *w = &h.latest_terminal;
			memset(out, 0, sizeof(*out));
			out->id = w->checkpoint_id;
			out->own = false;
			out->committed = w->verdict == WS_CKPT_COMMIT;
			if (out->committed && ws_ckpt_load_committed(c, &w->committed, &idx) == 0) {
				info_from(&w->committed, &idx, false, out);
				ws_ckpt_index_free(&idx);
			}
			return 0;
		}
		if (waited >= wait_ms && timed_out) {
			*timed_out = true;
			return 0;
		}
		if (waited >= wait_ms)
			return ws_fail(WS_EPRECOND, "checkpoint: attempt %" PRIu64 " of another writer is "
				       "still active after %u ms", peer_id, wait_ms);
		ws_sleep_ms(20);
		waited += 20;
	}
}

/* ---- taking a checkpoint: one function per step of the protocol ---------------------- */

/*
 * One call of ws_checkpoint_take: the attempt and what each step leaves for
 * the next. The flags say which durable objects the attempt holds, which is
 * what the abort path undoes.
 */
struct take {
	struct ws_sink *sink;
	const struct ws_checkpoint_opts *opts;
	struct ws_checkpoint_info *out;
	struct ws_ckpt *c;
	struct ws_ckpt_attempt a;              /* 1 */
	struct ws_ckpt_outcome latest;         /* 2: the Commit this one extends */
	struct ws_ckpt_index prev;             /* 2: its index, when have_prev */
	struct cut cut;                        /* 2 */
	struct ws_ckpt_witness wit;            /* 3: ours, when wit_open */
	struct ws_ckpt_inventory inv;          /* 4 */
	struct ws_ckpt_index idx;              /* 5, 6: its tenants are cut.t */
	struct ws_ckpt_ref ref;                /* 6 */
	char name[WS_CKPT_NAME_MAX];
	const char *tmpdir;
	bool have_latest, have_prev;
	bool wit_open;                         /* 3 opened our witness */
	bool inv_tried;                        /* 4 sent the inventory: it may have landed */
	bool inv_active;                       /* 4 admitted it */
	bool created;                          /* 6 created the committed index */
	bool committed;                        /* 7 recorded our Commit */
	bool settled;                          /* out holds another attempt's outcome: the result */
};

static void take_init(struct take *t, struct ws_sink *sink, const struct ws_checkpoint_opts *opts,
		      struct ws_checkpoint_info *out)
{
	memset(t, 0, sizeof(*t));
	memset(out, 0, sizeof(*out));
	t->sink = sink;
	t->opts = opts;
	t->out = out;
	sink_name(sink, t->name);
	t->tmpdir = opts->tmp_dir ? opts->tmp_dir : getenv("TMPDIR");
	if (!t->tmpdir || !*t->tmpdir)
		t->tmpdir = "/tmp";
}

static void take_free(struct take *t)
{
	free(t->idx.artifacts);
	if (t->have_prev)
		ws_ckpt_index_free(&t->prev);
	free(t->cut.t);
	free(t->inv.keys);
	ws_ckpt_close(t->c);
}

/*
 * 0. A local writer holds the lease: an open witness or an active inventory
 * can only be a crashed attempt. A shared writer recovers when asked, and
 * otherwise when a peer's witness blocks step 3 (take_peer).
 */
static int take_recover(struct take *t)
{
	bool recovered;

	/* The handle is open and nothing of this call's attempt exists yet. */
	WS_ASSERT(t->c && !t->wit_open && !t->inv_tried);
	if (ws_store_kind(t->sink->store) != WS_STORE_FILE && !t->opts->recover)
		return 0;
	return recover_locked(t->c, &recovered);
}

/*
 * 1. ID and attempt, at an epoch no lower than the head's: a stale epoch
 * could never decide (the head refuses it), so it is an error naming the
 * epoch to use, before anything is written.
 */
static int take_allocate(struct take *t)
{
	int rc;

	/* Nothing of an earlier round is durable: a fresh ID abandons nothing. */
	WS_ASSERT(!t->wit_open && !t->inv_tried && !t->created);
	memset(&t->a, 0, sizeof(t->a));
	t->a.epoch = t->opts->epoch ? t->opts->epoch : 1;
	t->a.token = random_token();
	if ((rc = epoch_check(t->c, t->a.epoch)) != 0)
		return rc;
	if ((rc = ws_ckpt_allocate_id_at_least(t->c, 1, &t->a.checkpoint_id)) != 0)
		return rc;
	t->out->id = t->a.checkpoint_id;
	t->out->epoch = t->a.epoch;
	return 0;
}

/* 2. The cut, and the Commit it extends (read again each round). */
static int take_read_cut(struct take *t)
{
	int rc;

	/* The allocator never hands out ID 0; the token is never 0 (random_token). */
	WS_ASSERT(t->a.checkpoint_id != 0 && t->a.token != 0 && !t->wit_open);
	if (t->have_prev)
		ws_ckpt_index_free(&t->prev);
	t->have_prev = false;
	free(t->cut.t);
	memset(&t->cut, 0, sizeof(t->cut));
	if ((rc = ws_ckpt_latest_commit(t->c, &t->latest, &t->have_latest)) != 0)
		return rc;
	if (t->have_latest) {
		if ((rc = ws_ckpt_load_committed(t->c, &t->latest.committed, &t->prev)) != 0)
			return rc;
		t->have_prev = true;
	}
	return cut_read(t->sink->store, &t->cut);
}

/* Tenants strictly sorted by name: what the committed index and the inventory require. */
static bool cut_sorted(const struct cut *cut)
{
	for (size_t i = 1; i < cut->count; i++)
		if (strcmp(cut->t[i - 1].tenant, cut->t[i].tenant) >= 0)
			return false;
	return true;
}

/*
 * 3. The witness, before the sink begins taking part. *held: another
 * attempt holds it (rc 0; nothing of ours was written).
 */
static int take_open_witness(struct take *t, bool *held)
{
	const char *sinks[1] = { t->name };
	int rc;

	/* Steps 4 and 5 derive the inventory's keys and the index from the
	 * cut in its order: sorted once read (cut_read). */
	WS_ASSERT(!t->wit_open && cut_sorted(&t->cut));
	rc = ws_ckpt_create_sink_open_witness(t->c, t->opts->pipeline ? t->opts->pipeline : "walship",
					      t->opts->participant ? t->opts->participant : 1, &t->a, sinks, 1,
					      &t->wit);
	*held = rc == WS_EPRECOND && ws_ckpt_last_kind() == WS_CKPT_ACTIVE_ATTEMPT;
	if (*held)
		return 0;
	t->wit_open = rc == 0;
	return rc;
}

/*
 * Step 3 found another attempt's witness. Undecided: wait for it, and its
 * outcome is the result (settled). Decided (a crash after the decision left
 * its clean-up), or still undecided after the wait (its writer crashed, or
 * stalls past the documented bound): finish it, and the caller starts over
 * with a fresh ID.
 */
static int take_peer(struct take *t, unsigned round)
{
	struct ws_ckpt_witness peer;
	bool found, timed_out, is_decided, is_commit;
	unsigned wait_ms = t->opts->peer_wait_ms ? t->opts->peer_wait_ms : PEER_WAIT_MS_DEFAULT;
	int rc;

	/* Ours never opened: there is nothing of ours to undo. */
	WS_ASSERT(!t->wit_open && !t->inv_tried);
	if (round >= PEER_ROUNDS_MAX)
		return ws_fail(WS_EPRECOND, "checkpoint: the sink-open witness was held by another "
			       "attempt %u times in a row", round + 1);
	if ((rc = ws_ckpt_sink_open_witness(t->c, &peer, &found)) != 0)
		return rc;
	if (!found || peer.state != WS_CKPT_WITNESS_OPEN)
		return 0; /* closed meanwhile: try again with a fresh ID */
	if ((rc = decided(t->c, peer.attempt.checkpoint_id, &is_decided, &is_commit)) != 0)
		return rc;
	if (!is_decided) {
		rc = wait_for_peer(t->c, peer.attempt.checkpoint_id, wait_ms, t->out, &timed_out);
		if (rc || !timed_out) {
			t->settled = rc == 0; /* the peer decided: its outcome is the result */
			return rc;
		}
		/* Abort it: the head's CAS is the decision, so a writer that
		 * does come back finds its attempt decided and cannot commit it. */
		ws_info("checkpoint: attempt %" PRIu64 " of another writer is still undecided after %u "
			"ms; aborting it as crashed", peer.attempt.checkpoint_id, wait_ms);
	}
	return recover_peer(t->c, &peer);
}

/*
 * Step 4 found another attempt's inventory active while our witness is open.
 * Its witness is closed (there is one witness, and it is ours): an attempt
 * whose begin_inventory landed but whose writer never heard so, and whose
 * abort then closed its witness and left the inventory. No writer goes on
 * with such an attempt (the head decides it Abort here, or already holds its
 * outcome), so finish it as recovery would; the caller then admits ours.
 * Without this, a shared sink refused every later checkpoint for good.
 */
static int take_stray_inventory(struct take *t)
{
	struct ws_ckpt_inventory inv = { 0 };
	bool active = false;
	int rc = ws_ckpt_active_inventory(t->c, &inv, &active);

	if (rc == 0 && active && !ws_ckpt_attempt_equal(&inv.attempt, &t->a)) {
		ws_info("checkpoint: attempt %" PRIu64 " left its inventory active with its witness closed; "
			"finishing it before attempt %" PRIu64, inv.attempt.checkpoint_id, t->a.checkpoint_id);
		rc = finish_attempt(t->c, &inv.attempt, &inv, NULL);
		if (rc == WS_EPRECOND && ws_ckpt_last_kind() == WS_CKPT_STATE_MISMATCH)
			rc = 0; /* another recoverer moved first */
	}
	ws_ckpt_inventory_free(&inv);
	return rc;
}

/* 4. Admit the inventory: every artifact key, before any is written. */
static int take_admit_inventory(struct take *t)
{
	struct ws_ckpt_inventory_result ir;
	int rc;

	/* Our witness is open: a crash from here on is found and finished by recovery. */
	WS_ASSERT(t->wit_open && ws_ckpt_attempt_equal(&t->wit.attempt, &t->a) && !t->inv_tried);
	t->inv.scope = WS_CKPT_SCOPE_LOCAL;
	t->inv.attempt = t->a;
	t->inv.key_count = t->cut.count;
	if (t->cut.count && !(t->inv.keys = calloc(t->cut.count, sizeof(*t->inv.keys))))
		return -ENOMEM;
	for (size_t i = 0; i < t->cut.count; i++)
		artifact_key(t->inv.keys[i], t->a.checkpoint_id, t->cut.t[i].tenant);
	if ((rc = ws_ckpt_deployment_id(t->c, t->inv.deployment)) != 0)
		return rc;
	t->inv_tried = true;
	rc = ws_ckpt_begin_inventory(t->c, &t->inv, &ir);
	if (rc == WS_EPRECOND && ws_ckpt_last_kind() == WS_CKPT_ACTIVE_ATTEMPT && (rc = take_stray_inventory(t)) == 0)
		rc = ws_ckpt_begin_inventory(t->c, &t->inv, &ir);
	if (rc)
		return rc;
	t->inv_active = true;
	return 0;
}

/* 5. The artifacts, create-once, each at the key the inventory admitted for it. */
static int take_write_artifacts(struct take *t)
{
	char tmp[4096];
	int rc;

	/* Every key is durably admitted before any is written, so an abort
	 * (or recovery) finds each artifact this step may leave. */
	WS_ASSERT(t->inv_active && t->inv.key_count == t->cut.count);
	memset(&t->idx, 0, sizeof(t->idx));
	memcpy(t->idx.deployment, t->inv.deployment, sizeof(t->idx.deployment));
	t->idx.checkpoint_id = t->a.checkpoint_id;
	t->idx.epoch = t->a.epoch;
	t->idx.tenant_count = t->cut.count;
	t->idx.tenants = t->cut.t;
	t->idx.artifact_count = t->cut.count;
	if (t->cut.count && !(t->idx.artifacts = calloc(t->cut.count, sizeof(*t->idx.artifacts))))
		return -ENOMEM;
	if (t->have_latest) {
		t->idx.has_predecessor = true;
		t->idx.predecessor = t->latest.committed;
	}
	snprintf(tmp, sizeof(tmp), "%s/walship-ckpt-%d-%" PRIx64 ".db", t->tmpdir, (int)getpid(), t->a.token);
	for (size_t i = 0; i < t->cut.count; i++) {
		rc = artifact_write(t->c, t->sink->store, &t->cut.t[i], t->inv.keys[i], t->have_prev ? &t->prev : NULL,
				    tmp, &t->idx.artifacts[i], t->out);
		if (rc)
			return rc;
	}
	return 0;
}

/* 6. The committed index, content-addressed. */
static int take_create_index(struct take *t)
{
	int rc;

	/* The index names only artifacts written at admitted keys. */
	WS_ASSERT(t->inv_active && t->idx.artifact_count == t->inv.key_count);
	for (size_t i = 0; i < t->idx.artifact_count; i++)
		WS_ASSERT(strcmp(t->idx.artifacts[i].key, t->inv.keys[i]) == 0);
	if ((rc = ws_ckpt_create_committed(t->c, &t->idx, &t->ref)) != 0)
		return rc;
	t->created = true;
	return 0;
}

/*
 * Step 7 lost: another outcome won and ours is not the decision. Clean our
 * attempt up; the durable winner is the result, and a stale epoch an error
 * naming the epoch to use.
 */
static int take_lost(struct take *t, const struct ws_ckpt_record_result *rr)
{
	struct ws_ckpt_head h;
	bool hfound = false;
	int rc = finish_attempt(t->c, &t->a, &t->inv, &t->wit);

	t->settled = true;
	if (!rc && rr->kind == WS_CKPT_STALE_EPOCH) {
		/* A higher epoch decided while ours ran. */
		if (ws_ckpt_decision_head(t->c, &h, &hfound) != 0 || !hfound)
			h.epoch = rr->winner.epoch;
		return ws_fail(WS_EFENCED, "checkpoint %" PRIu64 ": epoch %" PRIu64 " is stale: this sink's "
			       "checkpoints are decided at epoch %" PRIu64 " (pass --epoch %" PRIu64 " or "
			       "higher)", t->a.checkpoint_id, t->a.epoch, h.epoch, h.epoch);
	}
	memset(t->out, 0, sizeof(*t->out));
	t->out->id = rr->winner.checkpoint_id;
	t->out->committed = rr->winner.verdict == WS_CKPT_COMMIT;
	if (t->out->committed)
		info_from(&rr->winner.committed, NULL, false, t->out);
	return rc;
}

/* 7. Record Commit: the head's CAS is the decision. */
static int take_record_commit(struct take *t)
{
	struct ws_ckpt_record_result rr;
	int rc;

	/* A Commit names only a durable index of this attempt. */
	WS_ASSERT(t->created && t->ref.id == t->a.checkpoint_id);
	rc = ws_ckpt_record_outcome(t->c, t->a.epoch, t->a.checkpoint_id, WS_CKPT_SCOPE_LOCAL, NULL, NULL,
				    WS_CKPT_COMMIT, &t->ref, &rr);
	if (rc)
		return rc;
	if (rr.kind != WS_CKPT_OK && rr.kind != WS_CKPT_CONVERGED)
		return take_lost(t, &rr);
	t->committed = true;
	return 0;
}

/*
 * 8. Clean up: complete the inventory, close the witness. The checkpoint is
 * committed whatever happens now: a failed clean-up is finished by the next
 * call (recovery).
 */
static void take_clean_up(struct take *t)
{
	struct ws_ckpt_inventory_result ir;
	uint64_t bytes = t->out->artifact_bytes, incr = t->out->incremental;

	/* Only a decided Commit's attempt is cleaned up without its abort. */
	WS_ASSERT(t->committed && t->inv_active && t->wit_open);
	info_from(&t->ref, &t->idx, true, t->out);
	t->out->artifact_bytes = bytes;
	t->out->incremental = incr;
	if (ws_ckpt_complete_inventory(t->c, &t->inv, &ir) != 0 || ws_ckpt_clear_sink_open_witness(t->c, &t->wit) != 0)
		t->out->cleanup_pending = true;
}

/*
 * After an aborted attempt's clean-up: was it committed after all (the
 * decision landed before the error), or did another writer's outcome win
 * while ours ran? *settled: yes, and out holds the result.
 */
static int take_abort_winner(struct take *t, bool forked, bool *settled)
{
	bool is_decided, is_commit, tfound;
	struct ws_ckpt_outcome term;

	*settled = true;
	if (decided(t->c, t->a.checkpoint_id, &is_decided, &is_commit) == 0 && is_commit) {
		info_from(&t->ref, &t->idx, true, t->out);
		return 0;
	}
	/* Another writer decided a later checkpoint while ours ran (its ID
	 * made ours terminal): that durable winner is the result. */
	if (ws_ckpt_latest_terminal(t->c, &term, &tfound) == 0 && tfound && term.checkpoint_id > t->a.checkpoint_id)
		return wait_for_peer(t->c, term.checkpoint_id, 0, t->out, NULL);
	/* Or committed an earlier one after we read the latest Commit: our
	 * Commit named a stale predecessor (a fork), ours is now aborted, and
	 * their Commit is the durable winner. */
	if (forked && ws_ckpt_latest_commit(t->c, &term, &tfound) == 0 && tfound &&
	    term.checkpoint_id != t->a.checkpoint_id) {
		struct ws_ckpt_index widx;
		memset(t->out, 0, sizeof(*t->out));
		t->out->id = term.checkpoint_id;
		t->out->committed = true;
		if (ws_ckpt_load_committed(t->c, &term.committed, &widx) == 0) {
			info_from(&term.committed, &widx, false, t->out);
			ws_ckpt_index_free(&widx);
		}
		return 0;
	}
	*settled = false;
	return 0;
}

/*
 * The abort path: an error (rc) between steps 3 and 7. Record Abort (unless
 * the head shows the Commit won), seal the candidate, delete every
 * inventoried artifact, complete the inventory, close the witness. The
 * failure's detail is kept; the clean-up may fail too (then the next call
 * recovers from the durable state).
 */
static int take_abort(struct take *t, int rc)
{
	struct ws_ckpt_inventory durable = { 0 };
	bool dactive = false, settled;
	/* Taken before the clean-up's own calls overwrite them. */
	bool forked = ws_ckpt_last_kind() == WS_CKPT_FORKED_PREDECESSOR;
	char detail[512];
	int crc;

	/* Only an attempt that opened its witness and did not commit aborts. */
	WS_ASSERT(rc != 0 && t->wit_open && !t->committed);
	snprintf(detail, sizeof(detail), "%s", ws_errmsg());
	/* begin_inventory failed: did its write land anyway? */
	if (t->inv_tried && !t->inv_active && ws_ckpt_active_inventory(t->c, &durable, &dactive) == 0 && dactive &&
	    ws_ckpt_attempt_equal(&durable.attempt, &t->a))
		t->inv_active = true;
	ws_ckpt_inventory_free(&durable);
	crc = finish_attempt(t->c, &t->a, t->inv_active ? &t->inv : NULL, &t->wit);
	if (crc == 0) {
		int wrc = take_abort_winner(t, forked, &settled);
		if (settled)
			return wrc;
	}
	return ws_fail(rc, "checkpoint %" PRIu64 " aborted: %s%s", t->a.checkpoint_id, detail,
		       crc ? " (clean-up left for recovery)" : "");
}

int ws_checkpoint_take(struct ws_sink *sink, const struct ws_checkpoint_opts *opts, struct ws_checkpoint_info *out)
{
	static const struct ws_checkpoint_opts none;
	struct take t;
	int rc;

	take_init(&t, sink, opts ? opts : &none, out);
	if (t.opts->epoch > INT64_MAX)
		return ws_fail(WS_ECONFIG, "checkpoint: epoch %" PRIu64 " is above 2^63-1 (owner epochs are "
			       "0..9223372036854775807)", t.opts->epoch);
	rc = ckpt_open(sink, true, t.opts->wait_ms ? t.opts->wait_ms : LEASE_WAIT_MS_DEFAULT, &t.c);
	if (rc == 0)
		rc = take_recover(&t);
	/* Steps 1-3 again, with a fresh ID, while another attempt holds the witness. */
	for (unsigned round = 0; rc == 0; round++) {
		bool held;
		if ((rc = take_allocate(&t)) != 0 || (rc = take_read_cut(&t)) != 0 ||
		    (rc = take_open_witness(&t, &held)) != 0 || !held)
			break;
		if ((rc = take_peer(&t, round)) != 0 || t.settled)
			break;
	}
	if (rc || t.settled)
		goto done;
	if ((rc = take_admit_inventory(&t)) != 0 || (rc = take_write_artifacts(&t)) != 0 ||
	    (rc = take_create_index(&t)) != 0)
		goto abort;
	rc = take_record_commit(&t);
	if (t.settled)
		goto done;
	if (rc)
		goto abort;
	take_clean_up(&t);
	goto done;
abort:
	rc = take_abort(&t, rc);
done:
	take_free(&t);
	return rc;
}

/* ---- reading checkpoints -------------------------------------------------------------- */

/* The ref of checkpoint id (0: the latest Commit), walking predecessors. */
static int find_ref(struct ws_ckpt *c, uint64_t id, struct ws_ckpt_ref *ref, struct ws_ckpt_index *idx)
{
	struct ws_ckpt_outcome latest;
	bool found;
	int rc = ws_ckpt_latest_commit(c, &latest, &found);
	if (rc)
		return rc;
	if (!found)
		return ws_fail(WS_ENOTFOUND, "no committed checkpoint at this sink");
	*ref = latest.committed;
	for (unsigned n = 0; n < PREDECESSORS_MAX; n++) {
		rc = ws_ckpt_load_committed(c, ref, idx);
		if (rc == WS_ENOTFOUND && id)
			return ws_fail(WS_ENOTFOUND, "checkpoint %" PRIu64 " is not stored (retention removed "
				       "it, or it was never committed)", id);
		if (rc)
			return rc;
		if (!id || idx->checkpoint_id == id)
			return 0;
		if (idx->checkpoint_id < id || !idx->has_predecessor) {
			ws_ckpt_index_free(idx);
			return ws_fail(WS_ENOTFOUND, "checkpoint %" PRIu64 " is not a committed checkpoint", id);
		}
		*ref = idx->predecessor;
		ws_ckpt_index_free(idx);
	}
	return ws_fail(WS_ETOOBIG, "checkpoint chain longer than %u", PREDECESSORS_MAX);
}

int ws_checkpoint_base_for(struct ws_sink *sink, const char *tenant, struct ws_restore_base *out)
{
	struct ws_ckpt *c;
	struct ws_ckpt_ref ref;
	struct ws_ckpt_index idx;
	struct ws_obj_info info;
	int rc = ws_store_head(sink->store, HEAD_KEY, &info);

	if (rc)
		return rc; /* WS_ENOTFOUND: nothing decided, the common case */
	if ((rc = ckpt_open(sink, false, LEASE_WAIT_MS_DEFAULT, &c)) != 0)
		return rc;
	rc = find_ref(c, 0, &ref, &idx);
	if (rc == 0) {
		rc = base_from_index(&idx, tenant, out);
		ws_ckpt_index_free(&idx);
	}
	ws_ckpt_close(c);
	return rc;
}

/*
 * Each committed checkpoint from start back through its predecessors,
 * newest first, while they are stored: fn's non-zero return ends the walk
 * and is returned. Where else it ends is end's (enum walk_end).
 */
static int walk_committed_to(struct ws_ckpt *c, struct ws_ckpt_ref ref, enum walk_end end, committed_fn fn,
			     void *arg)
{
	for (unsigned n = 0; n < PREDECESSORS_MAX; n++) {
		struct ws_ckpt_index idx;
		bool more;
		int rc = ws_ckpt_load_committed(c, &ref, &idx);
		if (rc && end == WALK_END_ANY_FAILURE)
			return 0;
		if (rc == WS_ENOTFOUND && (n > 0 || end == WALK_END_MISSING))
			return 0;
		if (rc)
			return rc;
		rc = fn(&ref, &idx, arg);
		more = idx.has_predecessor;
		if (more)
			ref = idx.predecessor;
		ws_ckpt_index_free(&idx);
		if (rc || !more)
			return rc;
	}
	return 0;
}

/* The walk that a missing index ends (retention removed the older ones), except the first when first_must_exist. */
static int walk_committed(struct ws_ckpt *c, struct ws_ckpt_ref ref, bool first_must_exist, committed_fn fn,
			  void *arg)
{
	return walk_committed_to(c, ref, first_must_exist ? WALK_END_MISSING_AFTER_FIRST : WALK_END_MISSING, fn, arg);
}

/* Room for one more element in a growing array (*cap elements of elem bytes). */
static int grow(void **arr, size_t *cap, size_t count, size_t elem)
{
	void *n;
	size_t ncap;
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
	if (base_from_index(idx, w->tenant, &b) != 0)
		return 0;
	if (grow((void **)&w->bases, &w->cap, w->count, sizeof(*w->bases)) != 0)
		return -ENOMEM;
	w->bases[w->count++] = b;
	return 0;
}

int ws_checkpoint_bases_for(struct ws_sink *sink, const char *tenant, struct ws_restore_base **out, size_t *count)
{
	struct ws_ckpt *c;
	struct ws_ckpt_outcome latest;
	struct ws_obj_info info;
	bool found;
	int rc = ws_store_head(sink->store, HEAD_KEY, &info);

	*out = NULL;
	*count = 0;
	if (rc)
		return rc;
	if ((rc = ckpt_open(sink, false, 0, &c)) != 0)
		return rc;
	rc = ws_ckpt_latest_commit(c, &latest, &found);
	if (!rc && found) {
		struct bases_walk w = { tenant, NULL, 0, 0 };
		rc = walk_committed(c, latest.committed, true, add_base, &w);
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

	if ((rc = ckpt_open(sink, false, 0, &c)) != 0)
		return rc;
	rc = ws_ckpt_retention_state(c, &st, &found);
	if (!rc && !found)
		rc = WS_ENOTFOUND;
	if (!rc)
		rc = ws_ckpt_load_committed(c, &st.protected_ref, &idx);
	if (!rc) {
		t = index_tenant(&idx, tenant);
		if (t) {
			cut_of(t, cut);
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
static int retiring_below(struct ws_ckpt *c, uint64_t *below)
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
		if ((rc = base_from_index(idx, t, &base)) != 0 || (rc = ws_artifact_verify(w->sink->store, &base)) != 0) {
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

int ws_checkpoint_verify(struct ws_sink *sink, const char *only, ws_problem_fn fn, void *arg, uint64_t *verified_id)
{
	struct ws_ckpt *c = NULL;
	struct ws_ckpt_outcome latest;
	struct ws_ckpt_index idx;
	struct ws_obj_info info;
	bool found;
	int rc, first = 0;

	*verified_id = 0;
	rc = ws_store_head(sink->store, HEAD_KEY, &info);
	if (rc == WS_ENOTFOUND) {
		/* Nothing decided, the common case; unless committed indexes are
		 * there: then the head that names the latest was lost. */
		struct ws_list_page page;
		memset(&page, 0, sizeof(page));
		rc = ws_store_list(sink->store, WS_CKPT_PREFIX "/committed/", "", 1, &page);
		found = rc == 0 && page.count > 0;
		ws_list_page_free(&page);
		if (rc)
			return problem(fn, arg, NULL, WS_CKPT_PREFIX "/committed/", ws_fail_wrap(rc, "list checkpoints"),
				       &first);
		if (found)
			problem(fn, arg, NULL, HEAD_KEY,
				ws_fail(WS_EINCOMPLETE, "checkpoint object %s is missing, but committed "
					"checkpoint indexes exist under " WS_CKPT_PREFIX "/committed/", HEAD_KEY),
				&first);
		return first;
	}
	if (rc)
		return problem(fn, arg, NULL, HEAD_KEY, ws_fail_wrap(rc, "read %s", HEAD_KEY), &first);
	if ((rc = ckpt_open(sink, false, 0, &c)) != 0)
		return problem(fn, arg, NULL, HEAD_KEY, rc, &first);
	rc = ws_ckpt_latest_commit(c, &latest, &found);
	if (rc) {
		problem(fn, arg, NULL, HEAD_KEY, rc, &first);
		goto out;
	}
	if (!found)
		goto out;
	if ((rc = ws_ckpt_load_committed(c, &latest.committed, &idx)) != 0) {
		problem(fn, arg, NULL, latest.committed.key, rc, &first);
		goto out;
	}
	for (size_t i = 0; i < idx.tenant_count; i++) {
		const char *t = idx.tenants[i].tenant;
		struct ws_fmt_watermark wm;
		struct ws_restore_base base;
		char key[WS_KEY_MAX];
		if (only && strcmp(only, t) != 0)
			continue;
		/* The tenant a Commit names must still have a watermark: without
		 * one, nothing restores its latest state. */
		if (ws_key_watermark(key, sizeof(key), t) != 0)
			key[0] = '\0';
		rc = ws_wm_load(sink->store, t, &wm, NULL);
		if (rc == WS_ENOTFOUND)
			rc = ws_fail(WS_EINCOMPLETE, "tenant %s: watermark %s is missing, but checkpoint %" PRIu64
				     " names the tenant", t, key, idx.checkpoint_id);
		if (rc)
			problem(fn, arg, t, key, rc, &first);
		/* The artifact the latest state starts from: its bytes and that
		 * it opens as a database (one damaged bit is reported here). */
		if ((rc = base_from_index(&idx, t, &base)) != 0 || (rc = ws_artifact_verify(sink->store, &base)) != 0)
			problem(fn, arg, t, base.artifact_key, rc, &first);
	}
	{
		/* The older checkpoints restore --checkpoint still takes: verify
		 * passes none of them that restore would refuse. */
		struct older_verify w = { sink, only, fn, arg, 0, &first };
		rc = retiring_below(c, &w.below);
		if (rc == 0 && idx.has_predecessor)
			rc = walk_committed(c, idx.predecessor, false, verify_older, &w);
		if (rc != 0 && rc != 1)
			problem(fn, arg, NULL, latest.committed.key,
				ws_fail_wrap(rc, "checkpoints before %" PRIu64, idx.checkpoint_id), &first);
	}
	*verified_id = idx.checkpoint_id;
	ws_ckpt_index_free(&idx);
out:
	ws_ckpt_close(c);
	return first;
}

struct list_walk {
	ws_checkpoint_fn fn;
	void *arg;
	uint64_t below;          /* retiring_below */
};

static int list_one(const struct ws_ckpt_ref *ref, const struct ws_ckpt_index *idx, void *arg)
{
	struct list_walk *w = arg;
	struct ws_checkpoint_info info;
	if (idx->checkpoint_id < w->below)
		return 1; /* being removed by retention, and every older one */
	info_from(ref, idx, true, &info);
	return w->fn(&info, w->arg);
}

int ws_checkpoint_list(struct ws_sink *sink, ws_checkpoint_fn fn, void *arg)
{
	struct ws_ckpt *c;
	struct ws_ckpt_outcome latest;
	struct list_walk w = { fn, arg, 0 };
	bool found;
	int rc = ckpt_open(sink, false, LEASE_WAIT_MS_DEFAULT, &c);

	if (rc)
		return rc;
	rc = ws_ckpt_latest_commit(c, &latest, &found);
	if (!rc && found && (rc = retiring_below(c, &w.below)) == 0) {
		rc = walk_committed(c, latest.committed, true, list_one, &w);
		if (rc == 1)
			rc = 0;
	}
	ws_ckpt_close(c);
	return rc;
}

/* ---- what the namespace names (verify --orphans) ----------------------------------------- */

struct named_walk {
	ws_named_fn fn;
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
		cut_of(&idx->tenants[i], &cut);
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

int ws_checkpoint_named(struct ws_sink *sink, ws_named_fn fn, void *arg)
{
	static const char *const singletons[] = {
		WS_CKPT_PREFIX "/deployment", HEAD_KEY, WS_CKPT_PREFIX "/inventory", WS_CKPT_PREFIX "/retention",
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
	if ((rc = ckpt_open(sink, false, 0, &c)) != 0)
		return rc;
	rc = ws_ckpt_latest_commit(c, &latest, &found);
	if (!rc && found)
		rc = walk_committed(c, latest.committed, false, named_one, &w);
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
	if ((rc = ckpt_open(sink, false, LEASE_WAIT_MS_DEFAULT, &c)) != 0)
		return rc;
	rc = find_ref(c, checkpoint_id, &ref, &idx);
	if (rc)
		goto out;
	{
		uint64_t below;
		rc = retiring_below(c, &below);
		if (rc == 0 && idx.checkpoint_id < below)
			rc = ws_fail(WS_ENOTFOUND, "checkpoint %" PRIu64 " is being removed: retention keeps "
				     "checkpoint %" PRIu64 " and later (run `walship retention` to finish "
				     "removing it)", idx.checkpoint_id, below);
		if (rc) {
			ws_ckpt_index_free(&idx);
			goto out;
		}
	}
	rc = base_from_index(&idx, tenant, &base);
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

static void cut_of(const struct ws_ckpt_tenant_entry *t, struct ws_chain_stop *out)
{
	memset(out, 0, sizeof(*out));
	snprintf(out->key, sizeof(out->key), "%s", t->manifest_key);
	if (!hex_to_sha(t->manifest_sha256, out->sha))
		memset(out->sha, 0, sizeof(out->sha)); /* never matches: nothing is taken for the cut */
	out->length = t->manifest_length;
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
	cut_of(t, &cut);
	if ((rc = ws_chain_load_stop(x->s, t->tenant, &wm, &cut, &c, &stopped)) != 0)
		return ws_fail_wrap(rc, "retention: tenant %s: live chain", t->tenant);
	rc = keyset_add_chain(ks, &c);
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
	cut_of(t, &cut);
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
 * that a REBASE then cut off from the live stream (a REBASE names no
 * predecessor), and a tail's manifest that never became its watermark's.
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
		for (uint32_t k = 0; k < m.snap_count && !rc; k++)
			if (!keyset_has(keep, m.snaps[k].key) && (rc = ret_delete(x, m.snaps[k].key)) == 0)
				rc = keyset_add(&done, m.snaps[k].key);
		for (uint32_t k = 0; k < m.batch_count && !rc; k++)
			if (!ws_fmt_objref_inline(&m.batches[k]) && !keyset_has(keep, m.batches[k].key) &&
			    (rc = ret_delete(x, m.batches[k].key)) == 0)
				rc = keyset_add(&done, m.batches[k].key);
		if (!rc && !keyset_has(keep, keys[i]))
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

/* The refs of the checkpoints older than p that are still stored, newest first. */
struct refs_walk {
	struct ws_ckpt_ref *refs;
	size_t count, cap;
};

static int add_ref(const struct ws_ckpt_ref *ref, const struct ws_ckpt_index *idx, void *arg)
{
	struct refs_walk *w = arg;
	(void)idx;
	if (grow((void **)&w->refs, &w->cap, w->count, sizeof(*w->refs)) != 0)
		return -ENOMEM;
	w->refs[w->count++] = *ref;
	return 0;
}

static int older_refs(struct ret_ctx *x, const struct ws_ckpt_index *p, struct ws_ckpt_ref **out, size_t *count)
{
	struct refs_walk w = { NULL, 0, 0 };
	int rc = p->has_predecessor ? walk_committed(x->c, p->predecessor, false, add_ref, &w) : 0;

	if (rc) {
		free(w.refs);
		w.refs = NULL;
		w.count = 0;
	}
	*out = w.refs;
	*count = w.count;
	return rc;
}

/*
 * Phase SWEEP_ARTIFACTS: the artifacts of older checkpoints; each tenant's
 * stream before the protected cut; and the chains behind older checkpoints'
 * cuts that a REBASE has since cut off from the live stream.
 */
static int sweep_artifacts(struct ret_ctx *x, const struct ws_ckpt_index *p)
{
	struct ws_ckpt_ref *refs;
	size_t n;
	int rc = older_refs(x, p, &refs, &n);

	for (size_t i = 0; i < n && !rc; i++) {
		struct ws_ckpt_index idx;
		rc = ws_ckpt_load_committed(x->c, &refs[i], &idx);
		if (rc)
			break;
		for (size_t k = 0; k < idx.artifact_count && !rc; k++) {
			if (index_artifact(p, idx.artifacts[k].key))
				continue;
			if (!artifact_key_of(idx.artifacts[k].key, idx.checkpoint_id)) {
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
		cut_of(t, &head);
		rc = sweep_chain(x, t, &head, &keep);
		/* Older cuts of this tenant: usually already gone with the sweep
		 * above (they are the cut's ancestors), else a superseded chain. */
		for (size_t r = 0; r < n && !rc; r++) {
			struct ws_ckpt_index idx;
			const struct ws_ckpt_tenant_entry *ot;
			if ((rc = ws_ckpt_load_committed(x->c, &refs[r], &idx)) != 0)
				break;
			ot = index_tenant(&idx, t->tenant);
			if (ot && strcmp(ot->manifest_key, t->manifest_key) != 0) {
				cut_of(ot, &head);
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
	struct ws_ckpt_ref *refs;
	size_t n;
	int rc = older_refs(x, p, &refs, &n);

	for (size_t i = n; i > 0 && !rc; i--) {
		if (x->fn)
			x->fn(refs[i - 1].key, x->arg);
		x->rep->deleted++;
		x->rep->checkpoints_deleted++;
		if (x->dry)
			continue;
		if ((rc = WS_FAULT("retention.before_delete")) != 0) {
			ws_fail(rc, "fault retention.before_delete at %s", refs[i - 1].key);
			break;
		}
		rc = ws_ckpt_delete_committed(x->c, &refs[i - 1]);
		if (!rc && (rc = WS_FAULT("retention.after_delete")) != 0)
			ws_fail(rc, "fault retention.after_delete at %s", refs[i - 1].key);
	}
	free(refs);
	return rc;
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
	struct ws_ckpt_ref *refs;
	size_t n;
	int rc = older_refs(x, p, &refs, &n);

	for (size_t i = 0; i < n && !rc; i++) {
		struct ws_ckpt_index idx;
		if ((rc = ws_ckpt_load_committed(x->c, &refs[i], &idx)) != 0)
			break;
		for (size_t k = 0; k < idx.tenant_count && !rc; k++) {
			const char *t = idx.tenants[k].tenant;
			struct ws_fmt_watermark wm;
			int wrc;
			if (index_tenant(p, t))
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
		int rc = base_from_index(p, p->tenants[i].tenant, &base);
		if (!rc)
			rc = ws_artifact_verify(x->s, &base);
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
	int rc = x->keep > 1 ? walk_committed(x->c, *protected_ref, true, keep_step, &w) : 0;
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
	if ((rc = ckpt_open(sink, true, LEASE_WAIT_MS_DEFAULT, &x.c)) != 0)
		return rc;
	if ((rc = ws_ckpt_latest_commit(x.c, &latest, &found)) != 0 || !found)
		goto out;
	rep->ran = true;
	rep->protected_id = latest.checkpoint_id;
	/* A dry run goes the way the real one would, from the durable record
	 * (a run a crash left in flight resumes at its phase), writing nothing. */
	/* A run a crash left in flight for an older cut finishes first. */
	if ((rc = ws_ckpt_retention_state(x.c, &st, &sfound)) != 0)
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
	seen_free(&x);
	ws_ckpt_close(x.c);
	return rc;
}
