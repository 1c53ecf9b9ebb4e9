/*
 * A follower of one tenant from the sink alone (follow.h).
 *
 * Position. The follower holds the state at a commit: the manifest it
 * last finished (`at`: key, SHA-256 and length, its watermark sequence),
 * the WAL generation and frame of the last commit handed and that frame's
 * cumulative checksum. SQLite's checksum runs over every frame of a
 * generation, so a manifest of the same generation whose frame at that
 * number carries the same checksum holds the very frames the follower
 * applied up to it: frames after it continue its state.
 *
 * Steady state. A conditional read of the watermark; when it changed, the
 * chain from its head back to the manifest held (ws_chain_load_since:
 * every manifest verified, links checked) and each manifest after it
 * applied in order. The oldest manifest of that walk is one of:
 *   - the manifest held: everything after it continues it;
 *   - a manifest of the same sequence that is not it: the carried head
 *     the follower applied, merged with later tails (docs/FORMAT.md
 *     "Watermark"), which continues it when its frames do (checked);
 *   - a REBASE: it continues the state only when its generation is the
 *     one held and its frames pass through the commit held with the same
 *     checksum (a re-base within the same WAL); otherwise its image may
 *     differ from anything the follower can reach by frames: rebuild;
 *   - an older one, or a missing predecessor: retention removed what lay
 *     between: rebuild.
 * A watermark behind the manifest held (the store lost writes) is refused:
 * readers of a replica never go back in time.
 * Any manifest or object that is missing while applying is retention
 * racing the follower: rebuild. Any that does not verify is an error
 * naming it; nothing of it is handed (each transaction is handed only
 * after every frame up to its commit verified).
 *
 * Rebuild. restore's image of the watermark's head (ws_restore_image_wm),
 * from the newest checkpoint's artifact when the chain passes through its
 * cut, else from the chain's base; read back whole and handed once.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "chain.h"
#include "ckpt_read.h"
#include "follow.h"
#include "publish.h"
#include "replay.h"
#include "restore.h"
#include "sink.h"
#include "ws_assert.h"
#include "ws_clock.h"
#include "ws_logging.h"

/* The follower cannot go on from what it holds: rebuild (never returned). */
#define NEED_REBUILD 1

struct ws_follow {
	struct ws_sink *sink;
	struct ws_follow_config cfg;
	struct ws_follow_ops ops;
	void *arg;
	char tenant[WS_TENANT_NAME_MAX];
	char wm_key[WS_KEY_MAX];
	struct ws_etag wm_tag;         /* validator of the watermark read last ("" : read it whole next) */
	struct ws_buf wm_raw;          /* its bytes (a carried head points into them) */
	/* the position held (file comment) */
	bool have;
	struct ws_chain_stop at;
	uint64_t at_seq;
	struct ws_fmt_gen gen;
	uint64_t frame;
	uint32_t cksum[2];
	uint32_t chain;                /* tx_id's chain */
	int64_t source_ms;
	/* one transaction's pages, gathered across batches */
	uint32_t *pgno;
	uint8_t *pages;
	size_t n, cap;
	struct ws_buf obj;
	struct ws_buf plain;     /* a sealed batch's frames, opened */
	struct ws_follow_stats st;
	struct ws_follow_cadence cad;
	bool dense;              /* the wait before the next read is dense_ms */
};

int ws_follow_open(struct ws_sink *sink, const struct ws_follow_config *cfg, const struct ws_follow_ops *ops,
		   void *arg, struct ws_follow **out)
{
	struct ws_follow *f;

	*out = NULL;
	if (!sink || !cfg || !ops || !ops->image || !ops->apply)
		return ws_fail(-EINVAL, "follow: no sink, configuration or callbacks");
	if (!cfg->tenant || !ws_tenant_name_valid(cfg->tenant))
		return ws_fail(-EINVAL, "follow: invalid tenant name '%s'", cfg->tenant ? cfg->tenant : "");
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->sink = sink;
	f->cfg = *cfg;
	if (!f->cfg.poll_ms)
		f->cfg.poll_ms = WS_FOLLOW_POLL_MS_DEFAULT;
	if (!f->cfg.dense_ms)
		f->cfg.dense_ms = WS_FOLLOW_DENSE_MS_DEFAULT;
	if (!f->cfg.image_bytes_max)
		f->cfg.image_bytes_max = WS_FOLLOW_IMAGE_BYTES_MAX_DEFAULT;
	f->ops = *ops;
	f->arg = arg;
	snprintf(f->tenant, sizeof(f->tenant), "%s", cfg->tenant);
	f->cfg.tenant = f->tenant;
	WS_ASSERT(ws_key_watermark(f->wm_key, sizeof(f->wm_key), f->tenant) == 0); /* a valid name fits */
	ws_buf_init(&f->wm_raw, WS_WM_BYTES_MAX);
	ws_buf_init(&f->obj, (size_t)1 << 30);
	ws_buf_init(&f->plain, (size_t)1 << 31);
	*out = f;
	return 0;
}

void ws_follow_close(struct ws_follow *f)
{
	if (!f)
		return;
	ws_buf_free(&f->wm_raw);
	ws_buf_free(&f->obj);
	ws_buf_free(&f->plain);
	free(f->pgno);
	free(f->pages);
	free(f);
}

int64_t ws_follow_source_ms(const struct ws_follow *f) { return f->source_ms; }

void ws_follow_stats(const struct ws_follow *f, struct ws_follow_stats *out) { *out = f->st; }

static uint64_t tx_id(const struct ws_follow *f, uint64_t frame)
{
	return (uint64_t)f->chain << 32 | (uint32_t)frame;
}

/* ---- rebuild ------------------------------------------------------------- */

/* The file at path, whole, into *img (at most max bytes). */
static int read_image(const char *path, uint64_t max, uint8_t **img, uint64_t *len)
{
	struct stat sb;
	uint64_t got = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc = 0;

	*img = NULL;
	if (fd < 0 || fstat(fd, &sb) != 0) {
		rc = ws_fail(-errno, "follow: cannot read the rebuilt image %s: %s", path, strerror(errno));
		goto out;
	}
	*len = (uint64_t)sb.st_size;
	if (*len > max) {
		rc = ws_fail(WS_ETOOBIG, "follow: the rebuilt image is %" PRIu64 " bytes, more than image_bytes_max "
			     "(%" PRIu64 ")", *len, max);
		goto out;
	}
	*img = malloc(*len ? (size_t)*len : 1);
	if (!*img) {
		rc = -ENOMEM;
		goto out;
	}
	while (got < *len) {
		ssize_t r = pread(fd, *img + got, (size_t)(*len - got), (off_t)got);
		if (r <= 0) {
			rc = ws_fail(r < 0 ? -errno : -EIO, "follow: read the rebuilt image %s", path);
			goto out;
		}
		got += (uint64_t)r;
	}
out:
	if (fd >= 0)
		close(fd);
	if (rc) {
		free(*img);
		*img = NULL;
	}
	return rc;
}

/* restore's image of wm's head into tmp: from the newest checkpoint when it serves, else the whole chain. */
static int build_image(struct ws_follow *f, const struct ws_fmt_watermark *wm, const char *tmp,
		       struct ws_replay_result *res)
{
	struct ws_restore_base base;
	bool have_base = ws_checkpoint_base_for(f->sink, f->tenant, &base) == 0;
	int rc = ws_restore_image_wm(f->sink->store, f->tenant, wm, have_base ? &base : NULL, tmp, res);

	if (rc && have_base) {
		/* Its artifact damaged or gone, or the head does not pass through
		 * its cut: the chain's own base may still serve. */
		ws_info("follow: tenant %s: from checkpoint %" PRIu64 ": %s; building from the whole chain", f->tenant,
			base.checkpoint_id, ws_errmsg());
		rc = ws_restore_image_wm(f->sink->store, f->tenant, wm, NULL, tmp, res);
	}
	return rc;
}

/* Hold the position of wm's head: the state just handed. */
static void hold_head(struct ws_follow *f, const struct ws_fmt_watermark *wm, const struct ws_fmt_gen *gen)
{
	f->have = true;
	snprintf(f->at.key, sizeof(f->at.key), "%s", wm->manifest_key);
	memcpy(f->at.sha, wm->manifest_sha, WS_SHA256_LEN);
	f->at.length = wm->manifest_length;
	f->at_seq = wm->seq;
	f->gen = *gen;
	f->frame = wm->last_frame;
	f->cksum[0] = wm->end_cksum[0];
	f->cksum[1] = wm->end_cksum[1];
}

static int rebuild(struct ws_follow *f, const struct ws_fmt_watermark *wm, unsigned *handed)
{
	struct ws_replay_result res;
	struct ws_chain head;
	uint8_t *img = NULL;
	uint64_t len = 0;
	char *tmp = NULL;
	int fd = -1, rc;

	/* The head's generation, salts included (a version 1 watermark has none). */
	rc = ws_chain_load_since(f->sink->store, f->tenant, wm, NULL, wm->seq, &head, NULL);
	if (rc)
		return rc;
	if ((rc = ws_verify_tmp_open(f->tenant, &tmp, &fd)) != 0)
		goto out;
	close(fd);
	rc = build_image(f, wm, tmp, &res);
	if (!rc)
		rc = read_image(tmp, f->cfg.image_bytes_max, &img, &len);
	unlink(tmp);
	if (rc)
		goto out;
	/* The source's database is in WAL mode when it has a WAL: its header
	 * says so (restore made the file a standalone rollback one). */
	if (len >= 100 && head.m[head.count - 1].gen.wal_magic)
		img[18] = img[19] = 2;
	f->chain++;
	f->source_ms = wm->time_ms;
	rc = f->ops.image(f->arg, tx_id(f, res.commit_frame), img, res.page_size ? len / res.page_size : 0,
			  res.page_size);
	if (rc)
		goto out;
	hold_head(f, wm, &head.m[head.count - 1].gen);
	f->st.rebuilds++;
	if (handed)
		(*handed)++;
out:
	free(img);
	free(tmp);
	ws_chain_free(&head);
	return rc;
}

/* ---- the steady state ---------------------------------------------------- */

/* Room for one more page in the transaction being gathered. */
static int txn_room(struct ws_follow *f, uint32_t ps)
{
	size_t ncap;
	void *p;

	if (f->n < f->cap)
		return 0;
	ncap = f->cap ? f->cap * 2 : 64;
	if ((uint64_t)ncap * ps > f->cfg.image_bytes_max)
		return ws_fail(WS_ETOOBIG, "follow: tenant %s: a transaction of more than %zu pages of %" PRIu32
			       " bytes passes image_bytes_max (%" PRIu64 ")", f->tenant, f->cap, ps,
			       f->cfg.image_bytes_max);
	if (!(p = realloc(f->pgno, ncap * sizeof(*f->pgno))))
		return -ENOMEM;
	f->pgno = p;
	if (!(p = realloc(f->pages, ncap * ps)))
		return -ENOMEM;
	f->pages = p;
	f->cap = ncap;
	return 0;
}

/* The source time of the commit at frame no of m: the merged tail's that ended at or after it. */
static int64_t commit_ms(const struct ws_fmt_manifest *m, uint64_t no)
{
	for (uint32_t k = 0; k < m->tail_count; k++)
		if (m->tails[k].frame >= no)
			return m->tails[k].time_ms;
	return m->time_ms;
}

/* Where a manifest's walk through its frames stands. */
struct walk {
	const struct ws_chain *c;
	size_t i;
	uint64_t skip;          /* frames up to here are held already */
	unsigned *handed;
};

/* One frame of c->m[i]: skipped (held, its checksum checked at the frame
 * held), or gathered, and its transaction handed at its commit. */
static int frame_one(struct ws_follow *f, struct walk *w, const uint8_t *fr, uint64_t no)
{
	const struct ws_fmt_manifest *m = &w->c->m[w->i];
	const uint32_t ps = m->gen.page_size;
	struct ws_wal_frame_hdr fh;
	int rc;

	ws_wal_frame_hdr_decode(fr, &fh);
	if (no <= w->skip) {
		if (no == w->skip && (fh.cksum1 != f->cksum[0] || fh.cksum2 != f->cksum[1]))
			return NEED_REBUILD; /* not the frames applied: another history */
		return 0;
	}
	if (fh.pgno == 0)
		return ws_fail(WS_ECORRUPT, "tenant %s: manifest %s: frame %" PRIu64 " has page 0", f->tenant,
			       w->c->keys[w->i], no);
	if ((rc = txn_room(f, ps)) != 0)
		return rc;
	f->pgno[f->n] = fh.pgno;
	memcpy(f->pages + f->n * ps, fr + WS_WAL_FRAME_HDR_SIZE, ps);
	f->n++;
	if (!fh.db_size)
		return 0;
	if (no == m->last_frame && (rc = ws_replay_check_end(f->tenant, w->c->keys[w->i], m, fr, no)) != 0)
		return rc;
	f->source_ms = commit_ms(m, no);
	rc = f->ops.apply(f->arg, tx_id(f, no), f->pgno, f->pages, (uint32_t)f->n, ps, fh.db_size);
	f->n = 0;
	if (rc)
		return rc;
	f->frame = no;
	f->cksum[0] = fh.cksum1;
	f->cksum[1] = fh.cksum2;
	f->st.txns++;
	if (w->handed)
		(*w->handed)++;
	return 0;
}

/* Every batch of c->m[i], verified and walked frame by frame up to its last commit. */
static int manifest_frames(struct ws_follow *f, struct walk *w)
{
	const struct ws_fmt_manifest *m = &w->c->m[w->i];
	const uint32_t fsz = ws_wal_frame_size(m->gen.page_size);
	uint32_t run[2] = { m->seed_cksum[0], m->seed_cksum[1] };
	int rc = 0;

	f->n = 0;
	for (uint32_t k = 0; k < m->batch_count && !rc; k++) {
		const struct ws_fmt_objref *ref = &m->batches[k];
		char name[WS_KEY_MAX + 32];
		struct ws_fmt_batch bh;
		const uint8_t *frames;
		uint32_t end[2];

		if (!ws_fmt_objref_inline(ref))
			snprintf(name, sizeof(name), "%s", ref->key);
		else
			snprintf(name, sizeof(name), "%s (inline batch %u)", w->c->keys[w->i], k);
		rc = ws_chain_obj_fetch(f->sink->store, w->c, w->i, ref, &f->obj);
		if (!rc)
			rc = ws_batch_verify(f->sink->store->keys, f->obj.data, f->obj.len, m, ref, name, run, end, NULL,
					     &bh, &f->plain, &frames);
		if (rc)
			return ws_fail_wrap(rc, "tenant %s", f->tenant);
		for (uint64_t j = 0; j < bh.frame_count && !rc; j++) {
			if (bh.first_frame + j > m->last_frame)
				break; /* past the manifest's last commit: never applied */
			rc = frame_one(f, w, frames + j * fsz, bh.first_frame + j);
		}
		run[0] = end[0];
		run[1] = end[1];
	}
	return rc;
}

/*
 * Apply c->m[i] on the state held. Same generation: the frames held are
 * skipped, and the manifest must pass through the commit held (its frame
 * there, or its seed right after it) with the checksum held. Another
 * generation: only a NEXT_GEN, whose link the chain walk checked, starts
 * it (the next tx_id chain). Anything else: NEED_REBUILD.
 */
static int manifest_apply(struct ws_follow *f, const struct ws_chain *c, size_t i, unsigned *handed)
{
	const struct ws_fmt_manifest *m = &c->m[i];
	struct walk w = { c, i, 0, handed };
	int rc;

	if (ws_fmt_gen_equal(&m->gen, &f->gen)) {
		if (f->frame + 1 < m->first_frame || f->frame > m->last_frame)
			return NEED_REBUILD;
		if (f->frame + 1 == m->first_frame &&
		    (m->seed_cksum[0] != f->cksum[0] || m->seed_cksum[1] != f->cksum[1]))
			return NEED_REBUILD;
		w.skip = f->frame;
	} else if (m->kind == WS_MANIFEST_NEXT_GEN && i > 0) {
		f->chain++;
		f->gen = m->gen;
		f->frame = 0;
	} else {
		return NEED_REBUILD;
	}
	if ((rc = manifest_frames(f, &w)) != 0)
		return rc;
	/* The whole manifest is held: it is the position now. */
	WS_ASSERT(f->frame == m->last_frame || m->last_frame == 0);
	snprintf(f->at.key, sizeof(f->at.key), "%s", c->keys[i]);
	f->at_seq = m->wm_seq;
	f->st.manifests++;
	return 0;
}

/* The manifest the walk from wm ended at continues the state held from index *first on. */
static int walk_start(const struct ws_follow *f, const struct ws_chain *c, bool stopped, size_t *first)
{
	const struct ws_fmt_manifest *m0 = &c->m[0];

	*first = 0;
	if (stopped) {
		*first = 1; /* the manifest held itself */
		return 0;
	}
	/* A merge of the manifest held, or a re-base: manifest_apply checks
	 * that its frames pass through the commit held. */
	if (m0->kind == WS_MANIFEST_REBASE && f->frame == 0)
		return NEED_REBUILD; /* no frame to prove the database file the same */
	if (m0->wm_seq == f->at_seq || m0->kind == WS_MANIFEST_REBASE)
		return ws_fmt_gen_equal(&m0->gen, &f->gen) ? 0 : NEED_REBUILD;
	return NEED_REBUILD; /* behind retention */
}

/* The link to c->m[i] from its successor (or, the head, from wm). */
static void link_of(const struct ws_chain *c, size_t i, const struct ws_fmt_watermark *wm, struct ws_chain_stop *out)
{
	if (i + 1 == c->count) {
		memcpy(out->sha, wm->manifest_sha, WS_SHA256_LEN);
		out->length = wm->manifest_length;
		return;
	}
	memcpy(out->sha, c->m[i + 1].prev_sha, WS_SHA256_LEN);
	out->length = c->m[i + 1].prev_length;
}

/* Everything after the state held up to wm's head, or NEED_REBUILD. */
static int advance(struct ws_follow *f, const struct ws_fmt_watermark *wm, unsigned *handed)
{
	struct ws_chain c;
	bool stopped = false;
	size_t first;
	int rc;

	/* A watermark behind the state applied: the store lost acknowledged
	 * writes (or the tenant was forgotten and shipped anew). Following
	 * it would take readers back in time: refused; a follower started
	 * anew builds whatever the sink holds then. */
	if (wm->seq < f->at_seq)
		return ws_fail(WS_ECORRUPT, "tenant %s: the watermark %s went back to sequence %" PRIu64 " behind the "
			       "manifest %s (sequence %" PRIu64 ") this follower applied: the store lost acknowledged "
			       "writes, or the tenant was shipped anew; not following it back", f->tenant, f->wm_key,
			       wm->seq, f->at.key, f->at_seq);
	rc = ws_chain_load_since(f->sink->store, f->tenant, wm, &f->at, f->at_seq, &c, &stopped);
	if (rc == WS_EINCOMPLETE || rc == WS_ENOTFOUND)
		return NEED_REBUILD; /* a manifest gone under the walk: retention */
	if (rc)
		return rc;
	rc = walk_start(f, &c, stopped, &first);
	for (size_t i = first; i < c.count && !rc; i++) {
		rc = manifest_apply(f, &c, i, handed);
		if (!rc)
			link_of(&c, i, wm, &f->at);
	}
	ws_chain_free(&c);
	/* An object gone while it was read: retention removed it meanwhile. */
	return rc == WS_EINCOMPLETE ? NEED_REBUILD : rc;
}

/* Read the watermark if it changed: 1 unchanged, 0 decoded into wm, or an error naming it. */
static int wm_read(struct ws_follow *f, struct ws_fmt_watermark *wm)
{
	int rc;

	ws_buf_reset(&f->wm_raw);
	f->st.polls++;
	if (f->dense)
		f->st.dense++;
	const uint64_t at = ws_mono_ms();
	rc = ws_store_get_changed(f->sink->store, f->wm_key, &f->wm_tag, &f->wm_raw);
	if (rc == 0 || rc == 1)
		ws_follow_cadence_seen(&f->cad, at, rc == 0);
	if (rc == 1) {
		f->st.unchanged++;
		return 1;
	}
	if (rc == WS_ENOTFOUND)
		return ws_fail(WS_ENOTFOUND, "tenant %s has no watermark at %s (%s): nothing was shipped for it",
			       f->tenant, f->sink->store->url, f->wm_key);
	if (rc == WS_ETOOBIG)
		return ws_fail(WS_EFORMAT, "tenant %s: watermark %s is larger than the %u bytes a watermark can be",
			       f->tenant, f->wm_key, WS_WM_BYTES_MAX);
	if (rc)
		return ws_fail_wrap(rc, "tenant %s: read watermark %s", f->tenant, f->wm_key);
	if ((rc = ws_fmt_watermark_decode(f->wm_raw.data, f->wm_raw.len, wm)) != 0)
		return ws_fail_wrap(rc, "tenant %s: watermark %s", f->tenant, f->wm_key);
	if (strcmp(wm->tenant, f->tenant) != 0)
		return ws_fail(WS_EFORMAT, "tenant %s: watermark %s belongs to tenant '%s' (foreign object)",
			       f->tenant, f->wm_key, wm->tenant);
	return ws_wm_slots_refuse(f->tenant, f->wm_key, wm);
}

int ws_follow_poll(struct ws_follow *f, unsigned *handed)
{
	struct ws_fmt_watermark wm;
	int rc;

	if (handed)
		*handed = 0;
	rc = wm_read(f, &wm);
	if (rc == 1)
		return 0;
	if (!rc && f->have)
		rc = advance(f, &wm, handed);
	if ((!rc && !f->have) || rc == NEED_REBUILD) {
		if (rc == NEED_REBUILD)
			ws_info("follow: tenant %s: cannot go on from manifest %s (frame %" PRIu64 "): rebuilding from "
				"the head", f->tenant, f->at.key, f->frame);
		rc = rebuild(f, &wm, handed);
	}
	/* Not all of it was applied: read the same watermark again next time. */
	if (rc)
		memset(&f->wm_tag, 0, sizeof(f->wm_tag));
	WS_ASSERT(rc != NEED_REBUILD);
	return rc;
}

/* ---- the watermark's cadence (follow.h) ---------------------------------- */

void ws_follow_cadence_seen(struct ws_follow_cadence *c, uint64_t at_ms, bool changed)
{
	if (changed) {
		if (c->last_ms && at_ms > c->last_ms) {
			const uint64_t gap = at_ms - c->last_ms;
			c->gaps[c->next] = gap > UINT32_MAX ? UINT32_MAX : (uint32_t)gap;
			c->next = (c->next + 1) % WS_FOLLOW_GAPS;
			if (c->ngaps < WS_FOLLOW_GAPS)
				c->ngaps++;
		}
		c->last_ms = at_ms;
		c->last_unc_ms = c->read_ms && at_ms > c->read_ms ? at_ms - c->read_ms : 0;
	}
	c->read_ms = at_ms;
}

uint32_t ws_follow_cadence_wait(const struct ws_follow_cadence *c, uint64_t now_ms, uint32_t poll_ms,
				uint32_t dense_ms, bool *dense)
{
	uint64_t lo = UINT64_MAX, hi = 0;

	*dense = false;
	if (c->ngaps < 2 || dense_ms >= poll_ms)
		return poll_ms;
	for (unsigned i = 0; i < c->ngaps; i++) {
		lo = c->gaps[i] < lo ? c->gaps[i] : lo;
		hi = c->gaps[i] > hi ? c->gaps[i] : hi;
	}
	if (lo < 4 * (uint64_t)poll_ms)
		return poll_ms; /* a source that writes often: nothing to gain for the reads */
	const uint64_t start = c->last_ms - c->last_unc_ms + lo - dense_ms;
	uint64_t end = c->last_ms + hi + dense_ms;
	if (end > start + 2 * (uint64_t)poll_ms)
		end = start + 2 * (uint64_t)poll_ms;
	if (now_ms + poll_ms <= start || now_ms >= end)
		return poll_ms;
	if (now_ms < start)
		return (uint32_t)(start - now_ms); /* the next read opens the window */
	*dense = true;
	return dense_ms;
}

int ws_follow_run(struct ws_follow *f, const volatile int *stop)
{
	/* stop: set by a signal handler (volatile: read again each round). */
	while (!*stop) {
		unsigned handed = 0;
		int rc = ws_follow_poll(f, &handed);
		if (rc)
			return rc;
		f->dense = false;
		if (!handed) {
			uint32_t ms = ws_follow_cadence_wait(&f->cad, ws_mono_ms(), f->cfg.poll_ms, f->cfg.dense_ms,
							     &f->dense);
			struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
			nanosleep(&ts, NULL);
		}
	}
	return 0;
}
