/*
 * Taking a checkpoint of a sink, on top of the checkpoint decision store
 * (store/ws_ckpt.h, docs/CHECKPOINTS.md). Reading checkpoints and restore by
 * checkpoint are ckpt_read.c's, finishing an attempt that did not finish
 * ckpt_attempt.c's, retention retention.c's.
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

#include "artifact.h"
#include "chain.h"
#include "ckpt_attempt.h"
#include "ckpt_read.h"
#include "ckpt_repair.h"
#include "probes.h"
#include "tenant_removal.h"
#include "restore.h"
#include "sink.h"
#include "ws_assert.h"
#include "ws_clock.h"
#include "ws_fault.h"
#include "ws_logging.h"

#define PEER_WAIT_MS_DEFAULT 30000u
#define PEER_ROUNDS_MAX 8u

/* ---- the cut -------------------------------------------------------------------- */

struct cut {
	struct ws_ckpt_tenant_entry *t;
	size_t count, cap;
};

/*
 * A watermark that carries its manifest (docs/FORMAT.md "Watermark") names
 * a head stored nowhere else: the newest state the tenant acknowledged.
 * The cut is that head (a checkpoint never lags what was acknowledged at
 * its decision), so it is stored here under its own key first, create-once
 * with the watermark's very bytes (its key names its content: the owner,
 * storing it later, writes the same bytes). A cut must be an object that
 * restore, checkpoints and retention can read. The owner may go on merging
 * its next tails into that head: its next manifests then link to the
 * stored predecessor, not to the cut, and the live chain does not pass
 * through the cut; retention then keeps the whole live chain (it deletes
 * only behind a cut the live chain passes through), so nothing the cut
 * needs is removed, and restore builds such states from the chain.
 */
static int store_carried_cut(struct ws_store *s, const char *tenant, const struct ws_fmt_watermark *wm)
{
	struct ws_fmt_manifest m;
	struct iovec iov;
	int rc = ws_fmt_manifest_decode(wm->carried, (size_t)wm->carried_len, &m);
	if (rc)
		return ws_fail_wrap(rc, "tenant %s: manifest %s carried by its watermark", tenant, wm->manifest_key);
	if ((m.kind != WS_MANIFEST_CONTINUE && m.kind != WS_MANIFEST_NEXT_GEN) || !m.prev_key[0] ||
	    m.first_frame < 1 || (m.kind == WS_MANIFEST_NEXT_GEN && m.first_frame != 1) || m.wm_seq != wm->seq ||
	    m.last_frame != wm->last_frame || !ws_fmt_gen_equal(&m.gen, &wm->gen) || strcmp(m.tenant, tenant) != 0) {
		ws_fmt_manifest_free(&m);
		return ws_fail(WS_EFORMAT, "tenant %s: manifest %s carried by its watermark is not what the "
			       "watermark names (kind, predecessor, sequence, generation or last frame differ)",
			       tenant, wm->manifest_key);
	}
	ws_fmt_manifest_free(&m);
	if ((rc = WS_FAULT("checkpoint.before_carried_cut_put")) != 0)
		return ws_fail(rc, "fault checkpoint.before_carried_cut_put");
	iov.iov_base = (void *)(uintptr_t)wm->carried;
	iov.iov_len = (size_t)wm->carried_len;
	rc = ws_store_putv(s, wm->manifest_key, &iov, 1, WS_PUT_CREATE, NULL, NULL);
	if (rc == WS_EPRECOND)
		rc = ws_store_created_same(s, wm->manifest_key, &iov, 1);
	if (rc)
		return ws_fail_wrap(rc, "tenant %s: store the manifest %s its watermark carries (the cut)", tenant,
				    wm->manifest_key);
	return 0;
}

/*
 * The watermark wm (read with etag) carried the head just stored: replace
 * it, by compare-and-swap, with the same watermark naming that head
 * stored (version 2, nothing carried), so that the owner's next tail links
 * to the cut instead of merging into a copy of it: the live chain then
 * passes through the cut, retention cuts behind it and the next
 * checkpoint builds on its artifact. Losing the swap to the owner (a tail
 * merged since) is no error: the cut stays the head stored, a state that
 * was acknowledged, and retention keeps the chain it is not on.
 */
static int uncarry(struct ws_store *s, const char *tenant, const struct ws_fmt_watermark *wm,
		   const struct ws_etag *etag)
{
	struct ws_fmt_watermark nw = *wm;
	struct ws_buf b;
	char key[WS_KEY_MAX];
	int rc = ws_key_watermark(key, sizeof(key), tenant);

	if (rc)
		return rc;
	nw.version = 2;
	nw.carried = NULL;
	nw.carried_len = 0;
	ws_buf_init(&b, WS_WM_BYTES_MAX);
	rc = ws_fmt_watermark_encode(&nw, &b);
	if (!rc && (rc = WS_FAULT("checkpoint.before_uncarry_put")) != 0)
		rc = ws_fail(rc, "fault checkpoint.before_uncarry_put");
	else if (!rc)
		rc = ws_store_put(s, key, b.data, b.len, WS_PUT_CAS, etag, NULL);
	ws_buf_free(&b);
	if (rc == WS_EPRECOND) {
		ws_info("checkpoint: tenant %s: its owner wrote the watermark since it was read; the cut is the "
			"head it carried, %s, stored", tenant, wm->manifest_key);
		return 0;
	}
	if (rc)
		return ws_fail_wrap(rc, "tenant %s: write watermark %s naming the cut %s stored", tenant, key,
				    wm->manifest_key);
	return 0;
}

static int cut_add(struct ws_store *s, const char *tenant, struct cut *cut)
{
	struct ws_fmt_watermark wm;
	struct ws_ckpt_tenant_entry *e;
	struct ws_etag etag;
	struct ws_buf wmraw;
	int rc;

	ws_buf_init(&wmraw, WS_WM_BYTES_MAX);
	rc = ws_wm_load_keep(s, tenant, &wm, &etag, &wmraw);
	if (rc == 0 && wm.carried_len && (rc = store_carried_cut(s, tenant, &wm)) == 0)
		rc = uncarry(s, tenant, &wm, &etag);
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
	ws_ckread_hex_of(wm.manifest_sha, e->manifest_sha256);
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
		qsort(cut->t, cut->count, sizeof(*cut->t), ws_ckread_tenant_cmp);
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
		ws_ckread_hex_of(sha, hex);
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
	if (ws_ckread_base_from_index(idx, x->tenant, &base) != 0)
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
 * checkpoint ref or one of its predecessors, newest first, past any index
 * that is damaged or missing (ws_ckread_walk_past).
 */
static int image_from_older(struct ws_ckpt *c, struct ws_store *s, const char *tenant,
			    const struct ws_chain_stop *head, const struct ws_ckpt_ref *ref, const char *tmp,
			    bool *used)
{
	struct older x = { s, tenant, tmp, head, used, WS_EINCOMPLETE, 0, "no checkpoint with this tenant is stored" };

	if (ws_ckread_walk_committed(c, *ref, true, older_try, &x) == 1)
		return 0;
	return ws_fail(x.first ? x.first : x.rc, "tenant %s: no stored checkpoint's artifact and no full chain "
		       "builds its image (first: %s)", tenant, x.why);
}

/*
 * What is stored of the image mapped at *map (*len bytes, SHA-256 sha):
 * with a seal, the version 2 artifact sealed into a file beside tmp, which
 * replaces the mapping, and sha becomes the stored bytes'. The index
 * records the stored object's length and SHA-256 either way.
 */
static int artifact_stored(const struct ws_seal *seal, const char *tmp, void **map, size_t *len,
			   uint8_t sha[WS_SHA256_LEN])
{
	char path[4096 + 8];
	int rc;
	if (!ws_seal_on(seal))
		return 0;
	snprintf(path, sizeof(path), "%s.sealed", tmp);
	rc = ws_artifact_seal_file(seal, *map, *len, sha, path);
	if (*map)
		munmap(*map, *len);
	*map = NULL;
	*len = 0;
	if (rc)
		return ws_fail_wrap(rc, "checkpoint: seal the artifact");
	rc = map_file(path, map, len);
	unlink(path); /* the mapping keeps the bytes until unmapped */
	if (!rc)
		ws_sha256(*map, *len, sha);
	return rc;
}

/*
 * Build, hash and upload one tenant's artifact at its cut (create-once).
 * prev: the previous Commit's index, whose artifact is the base when the
 * tenant's chain passes through its cut (NULL: none, or it is damaged).
 * older: where the older checkpoints start (NULL: none stored). seal: the
 * tenant's artifact seal (ws_seal_on false: version 1, the image as it is).
 */
static int artifact_write(struct ws_ckpt *c, struct ws_store *s, const struct ws_ckpt_tenant_entry *t,
			  const char *key, const struct ws_ckpt_index *prev, const struct ws_ckpt_ref *older,
			  const char *tmp, const struct ws_seal *seal, struct ws_ckpt_artifact *out,
			  struct ws_checkpoint_info *info)
{
	void *map = NULL;
	size_t len = 0;
	struct iovec iov;
	struct ws_chain_stop head;
	struct ws_restore_base base;
	bool have_base = prev && ws_ckread_base_from_index(prev, t->tenant, &base) == 0, used = false;
	uint8_t sha[WS_SHA256_LEN];
	int rc;

	memset(&head, 0, sizeof(head));
	snprintf(head.key, sizeof(head.key), "%s", t->manifest_key);
	if (!ws_ckread_hex_to_sha(t->manifest_sha256, head.sha))
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
	 * checkpoint's artifact could not be used, its index is damaged, or the
	 * previous checkpoint left the tenant out): start from an older
	 * checkpoint's artifact, newest first. */
	if (rc && older)
		rc = image_from_older(c, s, t->tenant, &head, older, tmp, &used);
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
	if ((rc = artifact_stored(seal, tmp, &map, &len, sha)) != 0)
		goto out;
	memset(out, 0, sizeof(*out));
	snprintf(out->key, sizeof(out->key), "%s", key);
	out->length = len;
	ws_ckread_hex_of(sha, out->sha256);
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
	struct ws_art_seals seals;             /* each tenant's artifact seal */
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
	ws_art_seals_free(&t->seals);
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
	int rc;

	/* The handle is open and nothing of this call's attempt exists yet. */
	WS_ASSERT(t->c && !t->wit_open && !t->inv_tried);
	/* A damaged inventory or witness would stop every attempt, every
	 * writer's alike: rebuilt first, from the rest of the sink. */
	if ((rc = ws_repair_controls(t->c, t->opts->pipeline ? t->opts->pipeline : "walship",
				     t->opts->participant ? t->opts->participant : 1, t->name)) != 0)
		return rc;
	if (ws_store_kind(t->sink->store) != WS_STORE_FILE && !t->opts->recover)
		return 0;
	return ws_attempt_recover_locked(t->c, &recovered);
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
	if ((rc = ws_attempt_epoch_check(t->c, t->a.epoch)) != 0)
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
		rc = ws_ckpt_load_committed(t->c, &t->latest.committed, &t->prev);
		if (rc && !ws_ckread_damaged(rc, ws_ckpt_last_kind()))
			return rc;
		/* A damaged or missing index of the latest Commit does not stop
		 * checkpoints: this one names it as its predecessor all the same
		 * (the decision needs only its ref) and builds its images without
		 * it; readers walk past it, retention removes it. */
		if (rc)
			ws_info("checkpoint: the latest checkpoint %" PRIu64 "'s index is damaged or missing (%s); "
				"committing past it, its images built from the chain", t->latest.checkpoint_id,
				ws_errmsg());
		t->have_prev = rc == 0;
	}
	if ((rc = cut_read(t->sink->store, &t->cut)) != 0)
		return rc;
	/* Every tenant the previous checkpoint named, unless removed for good. */
	return t->have_prev ? ws_removal_check_cut(t->c, &t->prev, t->cut.t, t->cut.count, t->sink->store->url) : 0;
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
	if ((rc = ws_attempt_decided(t->c, peer.attempt.checkpoint_id, &is_decided, &is_commit)) != 0)
		return rc;
	if (!is_decided) {
		rc = ws_attempt_wait_peer(t->c, peer.attempt.checkpoint_id, wait_ms, t->out, &timed_out);
		if (rc || !timed_out) {
			t->settled = rc == 0; /* the peer decided: its outcome is the result */
			return rc;
		}
		/* Abort it: the head's CAS is the decision, so a writer that
		 * does come back finds its attempt decided and cannot commit it. */
		ws_info("checkpoint: attempt %" PRIu64 " of another writer is still undecided after %u "
			"ms; aborting it as crashed", peer.attempt.checkpoint_id, wait_ms);
	}
	return ws_attempt_recover_peer(t->c, &peer);
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
		rc = ws_attempt_finish(t->c, &inv.attempt, &inv, NULL);
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
		ws_ckread_artifact_key(t->inv.keys[i], t->a.checkpoint_id, t->cut.t[i].tenant);
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
	const struct ws_ckpt_ref *older;
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
	/* The checkpoints before this one: the previous one's predecessors, or,
	 * its index damaged, every stored one (the walk goes past it). */
	if (t->have_prev)
		older = t->prev.has_predecessor ? &t->prev.predecessor : NULL;
	else
		older = t->have_latest ? &t->latest.committed : NULL;
	for (size_t i = 0; i < t->cut.count; i++) {
		rc = artifact_write(t->c, t->sink->store, &t->cut.t[i], t->inv.keys[i], t->have_prev ? &t->prev : NULL,
				    older, tmp, ws_art_seals_for(&t->seals, t->cut.t[i].tenant), &t->idx.artifacts[i],
				    t->out);
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
	int rc = ws_attempt_finish(t->c, &t->a, &t->inv, &t->wit);

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
		ws_ckread_info_from(&rr->winner.committed, NULL, false, t->out);
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
	ws_ckread_info_from(&t->ref, &t->idx, true, t->out);
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
	if (ws_attempt_decided(t->c, t->a.checkpoint_id, &is_decided, &is_commit) == 0 && is_commit) {
		ws_ckread_info_from(&t->ref, &t->idx, true, t->out);
		return 0;
	}
	/* Another writer decided a later checkpoint while ours ran (its ID
	 * made ours terminal): that durable winner is the result. */
	if (ws_ckpt_latest_terminal(t->c, &term, &tfound) == 0 && tfound && term.checkpoint_id > t->a.checkpoint_id)
		return ws_attempt_wait_peer(t->c, term.checkpoint_id, 0, t->out, NULL);
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
			ws_ckread_info_from(&term.committed, &widx, false, t->out);
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
	crc = ws_attempt_finish(t->c, &t->a, t->inv_active ? &t->inv : NULL, &t->wit);
	if (crc == 0) {
		int wrc = take_abort_winner(t, forked, &settled);
		if (settled)
			return wrc;
	}
	return ws_fail(rc, "checkpoint %" PRIu64 " aborted: %s%s", t->a.checkpoint_id, detail,
		       crc ? " (clean-up left for recovery)" : "");
}

/*
 * After a checkpoint: remove the conditional-write probes killed processes
 * left (older than WS_PROBE_STALE_MS; a live one is younger). The
 * checkpoint stands whatever happens here; a failure is a warning and the
 * next checkpoint (or retention) tries again.
 */
static void take_sweep_probes(struct take *t)
{
	uint64_t removed = 0;
	if (ws_probes_sweep(t->sink->store, ws_wall_ms(), WS_PROBE_STALE_MS, false, NULL, NULL, &removed, NULL) != 0)
		ws_warn("checkpoint %" PRIu64 ": stale conditional-write probes not removed: %s", t->out->id,
			ws_errmsg());
	else if (removed)
		ws_info("checkpoint %" PRIu64 ": removed %" PRIu64 " stale conditional-write probe(s)", t->out->id,
			removed);
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
	rc = ws_art_seals_resolve(sink, t.opts, &t.seals);
	if (rc == 0)
		rc = ws_ckread_open(sink, true, t.opts->wait_ms ? t.opts->wait_ms : WS_CKPT_LEASE_WAIT_MS, &t.c);
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
	if (rc == 0)
		take_sweep_probes(&t);
	take_free(&t);
	return rc;
}
