/*
 * A tenant's head: the watermark, or with manifest slots the last slot
 * reached from the watermark's hint (docs/SLOTS.md "core/slots.c",
 * docs/FORMAT.md "Keys", "Manifest" version 4, "Close record"). Nothing
 * read here is trusted: each slot is bound to its key and linked to the
 * head found before it, each close record checked against the lane and
 * sequence it closes; a slot that cannot be read or does not check is an
 * error naming it, never the end of the chain (item 3).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "chain.h"
#include "sink.h"
#include "slots.h"
#include "ws_fault.h"

/* Close records in a row at one sequence before the probe gives up: tokens
 * fence by "either number higher", which is no order, so forged closes
 * could send the probe round a cycle of lanes. */
#define CLOSES_AT_ONE_SEQ 64u
#define SLOT_BYTES_MAX WS_SLOT_BYTES_MAX

void ws_head_free(struct ws_head *h)
{
	ws_buf_free(&h->raw);
}

/* The probe's position: the head found so far and the lane it goes on in. */
struct probe {
	struct ws_store *s;
	const char *tenant;
	struct ws_head *h;
	struct ws_buf b;
	uint64_t epoch, pg, lane;
};

static bool links_head(const struct ws_fmt_watermark *hd, const char *prev_key, const uint8_t *prev_sha,
		       uint64_t prev_len)
{
	return strcmp(prev_key, hd->manifest_key) == 0 && prev_len == hd->manifest_length &&
	       memcmp(prev_sha, hd->manifest_sha, WS_SHA256_LEN) == 0;
}

/* Slot key at seq in the probe's lane. */
static int slot_key(const struct probe *p, uint64_t seq, char key[WS_KEY_MAX])
{
	if (ws_key_slot(key, WS_KEY_MAX, p->tenant, p->epoch, p->pg, p->lane, seq) != 0)
		return ws_fail(WS_ETOOBIG, "tenant %s: slot key too long", p->tenant);
	return 0;
}

/* A manifest at key (seq): bound to it, linked to the head; it becomes the head. */
static int take_manifest(struct probe *p, const char *key)
{
	struct ws_fmt_watermark *hd = &p->h->head;
	struct ws_fmt_manifest m;
	int rc = ws_fmt_manifest_decode(p->b.data, p->b.len, &m);
	if (rc)
		return ws_fail_wrap(rc, "tenant %s: manifest slot %s", p->tenant, key);
	if ((rc = ws_slot_manifest_bound(p->tenant, key, &m)) != 0)
		goto out;
	if (!links_head(hd, m.prev_key, m.prev_sha, m.prev_length)) {
		rc = ws_fail(WS_EINCOMPLETE, "tenant %s: manifest slot %s does not link to the head before it (%s, "
			     "sequence %" PRIu64 "): it names '%s' as its predecessor", p->tenant, key,
			     hd->manifest_key[0] ? hd->manifest_key : "none", hd->seq, m.prev_key);
		goto out;
	}
	hd->epoch = m.epoch;
	hd->pointer_generation = m.pointer_generation;
	hd->seq = m.wm_seq;
	hd->time_ms = m.durable_ms;
	hd->gen = m.gen;
	hd->last_frame = m.last_frame;
	hd->end_cksum[0] = m.end_cksum[0];
	hd->end_cksum[1] = m.end_cksum[1];
	snprintf(hd->manifest_key, sizeof(hd->manifest_key), "%s", key);
	ws_sha256(p->b.data, p->b.len, hd->manifest_sha);
	hd->manifest_length = p->b.len;
out:
	ws_fmt_manifest_free(&m);
	return rc;
}

/* A close record at key (seq): it closes this lane at this sequence, after
 * the head; 1 when it was a removal's (the probe ends), else the probe's
 * lane is now the closer's. */
static int take_close(struct probe *p, const char *key, uint64_t seq)
{
	const struct ws_fmt_watermark *hd = &p->h->head;
	struct ws_fmt_close c;
	const char *why = NULL;
	int rc = ws_fmt_close_decode(p->b.data, p->b.len, &c);
	if (rc)
		return ws_fail_wrap(rc, "tenant %s: close record %s", p->tenant, key);
	if (strcmp(c.tenant, p->tenant) != 0)
		why = "it is another tenant's";
	else if (c.epoch != p->epoch || c.pointer_generation != p->pg || c.lane != p->lane)
		why = "it closes another lane than its key's";
	else if (c.seq != seq)
		why = "its sequence is not its key's";
	else if (!links_head(hd, c.prev_key, c.prev_sha, c.prev_length))
		why = "it does not close after the head before it";
	else if (!c.removed && !ws_fmt_token_fences(c.closer_epoch, c.closer_pg, c.epoch, c.pointer_generation))
		why = "its closer does not fence the lane it closes";
	if (why)
		return ws_fail(WS_EFORMAT, "tenant %s: close record %s is refused: %s (tenant '%s', lane %016" PRIx64
			       " at sequence %" PRIu64 ", after '%s'; the head before it: %s, sequence %" PRIu64 ")",
			       p->tenant, key, why, c.tenant, c.lane, c.seq, c.prev_key,
			       hd->manifest_key[0] ? hd->manifest_key : "none", hd->seq);
	if (c.removed)
		return 1;
	p->epoch = c.closer_epoch;
	p->pg = c.closer_pg;
	p->lane = c.closer_lane;
	return 0;
}

/* Slot seq absent: is seq + 1 there (a lost acknowledged write)? Read seq
 * again after finding seq + 1, as a writer may have created both since.
 * 0: no hole, 1: seq is there now (probe it again), or the error. */
static int hole_check(struct probe *p, uint64_t seq, const char *key)
{
	char next[WS_KEY_MAX];
	struct ws_obj_info info;
	int rc;
	if ((rc = slot_key(p, seq + 1, next)) != 0)
		return rc;
	p->h->probes++;
	rc = ws_store_head(p->s, next, &info);
	if (rc == WS_ENOTFOUND)
		return 0;
	if (rc)
		return ws_fail_wrap(rc, "tenant %s: read slot %s", p->tenant, next);
	p->h->probes++;
	rc = ws_store_head(p->s, key, &info);
	if (rc == 0)
		return 1;
	if (rc != WS_ENOTFOUND)
		return ws_fail_wrap(rc, "tenant %s: read slot %s", p->tenant, key);
	return ws_fail(WS_EINCOMPLETE, "tenant %s: slot %s is missing while slot %s after it is there: the store "
		       "lost an acknowledged write (a slot is only created after the one before it), so the latest "
		       "state is not known; refused", p->tenant, key, next);
}

/* After the probe's 404: 1 when the watermark now hints past the head
 * found (or changed version, or went: start again), 0 when not. */
static int reread(struct probe *p)
{
	struct ws_head *h = p->h;
	struct ws_etag tag = h->etag;
	struct ws_fmt_watermark now;
	int rc;

	ws_buf_reset(&p->b);
	rc = ws_store_get_changed(p->s, h->wm_key, &tag, &p->b);
	if (rc == 1)
		return 0;
	if (rc == WS_ENOTFOUND)
		return 1;
	if (rc)
		return ws_fail_wrap(rc, "tenant %s: read watermark %s again after probing its slots", p->tenant,
				    h->wm_key);
	if ((rc = ws_fmt_watermark_decode(p->b.data, p->b.len, &now)) != 0)
		return ws_fail_wrap(rc, "tenant %s: watermark %s (read again after probing its slots)", p->tenant,
				    h->wm_key);
	return now.version < 4 || now.seq > h->head.seq;
}

/* The lane the probe starts in: the hint slot's own, or (a content-named
 * hint, or none) the watermark's. */
static int probe_start(struct probe *p)
{
	const struct ws_fmt_watermark *w = &p->h->wm;
	uint64_t seq;
	if (w->seq && ws_key_slot_parse(w->manifest_key, p->tenant, &p->epoch, &p->pg, &p->lane, &seq)) {
		if (seq != w->seq)
			return ws_fail(WS_EFORMAT, "tenant %s: watermark %s names slot %s as its hint at sequence %"
				       PRIu64 ", which is not the slot's", p->tenant, p->h->wm_key, w->manifest_key,
				       w->seq);
		return 0;
	}
	p->epoch = w->epoch;
	p->pg = w->pointer_generation;
	p->lane = w->lane;
	return 0;
}

/* One probe from the watermark read: 0 done, 1 start again, or the error. */
static int probe(struct probe *p, unsigned flags)
{
	struct ws_head *h = p->h;
	unsigned closes = 0, again = 0;
	int rc;

	h->head = h->wm;
	h->head.version = 2;
	h->head.lane = 0;
	h->head.carried = NULL;
	h->head.carried_len = 0;
	h->closed = false;
	if ((rc = probe_start(p)) != 0)
		return rc;
	for (;;) {
		char key[WS_KEY_MAX];
		enum ws_fmt_slot_kind kind;
		const uint64_t seq = h->head.seq + 1;

		if ((rc = slot_key(p, seq, key)) != 0)
			return rc;
		if ((rc = WS_FAULT("chain.before_slot_probe")) != 0)
			return ws_fail(rc, "injected fault before reading slot %s", key);
		h->probes++;
		ws_buf_reset(&p->b);
		rc = ws_store_get(p->s, key, 0, UINT64_MAX, &p->b, NULL);
		if (rc == WS_ENOTFOUND) {
			if ((flags & WS_HEAD_HOLES) && (rc = hole_check(p, seq, key)) != 0) {
				if (rc < 0)
					return rc;
				/* Written meanwhile: read it. A store that keeps
				 * answering 404 to a GET of what a HEAD finds is
				 * broken, not a writer. */
				if (++again > 3)
					return ws_fail(WS_EBADSTORE, "tenant %s: slot %s reads as absent, and is "
						       "there to a HEAD, %u times in a row", p->tenant, key, again);
				continue;
			}
			if ((rc = WS_FAULT("chain.after_slot_probe")) != 0)
				return ws_fail(rc, "injected fault after slot %s was found absent", key);
			break;
		}
		if (rc == WS_ETOOBIG)
			return ws_fail(WS_EFORMAT, "tenant %s: slot %s is larger than any manifest (%u bytes)",
				       p->tenant, key, SLOT_BYTES_MAX);
		if (rc)
			return ws_fail_wrap(rc, "tenant %s: read slot %s", p->tenant, key);
		if ((rc = ws_fmt_slot_kind(p->b.data, p->b.len, &kind)) != 0)
			return ws_fail_wrap(rc, "tenant %s: slot %s", p->tenant, key);
		if (kind == WS_FMT_SLOT_MANIFEST) {
			if ((rc = take_manifest(p, key)) != 0)
				return rc;
			closes = again = 0;
			continue;
		}
		if (++closes > CLOSES_AT_ONE_SEQ)
			return ws_fail(WS_EFORMAT, "tenant %s: more than %u close records in a row at sequence %" PRIu64
				       " (the last %s): refused", p->tenant, CLOSES_AT_ONE_SEQ, seq, key);
		rc = take_close(p, key, seq);
		if (rc < 0)
			return rc;
		if (rc == 1) {
			h->closed = true;
			break;
		}
	}
	h->lane = p->lane;
	h->lane_epoch = p->epoch;
	h->lane_pg = p->pg;
	return reread(p);
}

int ws_head_load(struct ws_store *s, const char *tenant, unsigned flags, struct ws_head *h)
{
	struct probe p = { .s = s, .tenant = tenant, .h = h };
	int rc;

	memset(h, 0, sizeof(*h));
	ws_buf_init(&h->raw, WS_WM_BYTES_MAX);
	if (ws_key_watermark(h->wm_key, sizeof(h->wm_key), tenant) != 0)
		return ws_fail(WS_ETOOBIG, "tenant %s: watermark key too long", tenant);
	ws_buf_init(&p.b, SLOT_BYTES_MAX);
	for (;;) {
		rc = ws_wm_load_any(s, tenant, &h->wm, &h->etag, &h->raw);
		if (rc || h->wm.version < 4) {
			h->head = h->wm;
			break;
		}
		rc = probe(&p, flags);
		if (rc <= 0)
			break;
		if (h->restarts >= WS_HEAD_RESTARTS_MAX) {
			rc = ws_fail(-EAGAIN, "tenant %s: its watermark's hint moved past the head found %u times in a "
				     "row while its slots were probed; try again", tenant, h->restarts);
			break;
		}
		h->restarts++;
	}
	ws_buf_free(&p.b);
	return rc;
}

int ws_head_behind_cut(const char *tenant, const struct ws_head *h, const struct ws_restore_base *base)
{
	const uint64_t cut_seq = ws_key_any_manifest_seq(tenant, base->cut.key);
	if (!ws_head_slots(h) || cut_seq <= h->head.seq)
		return 0;
	return ws_fail(WS_EINCOMPLETE, "tenant %s: the head found (%s, sequence %" PRIu64 ") is behind the cut of "
		       "checkpoint %" PRIu64 " (%s, sequence %" PRIu64 "), a state that was acknowledged: the store "
		       "lost acknowledged writes, and the latest state it names is older than what was acknowledged; "
		       "refusing it (--time or --frame restores an earlier point on purpose)", tenant,
		       h->head.manifest_key, h->head.seq, base->checkpoint_id, base->cut.key, cut_seq);
}

int ws_slot_get(struct ws_store *s, const char *tenant, uint64_t epoch, uint64_t pg, uint64_t lane, uint64_t seq,
		struct ws_buf *b, enum ws_fmt_slot_kind *kind, char key[WS_KEY_MAX])
{
	int rc;
	if (ws_key_slot(key, WS_KEY_MAX, tenant, epoch, pg, lane, seq) != 0)
		return ws_fail(WS_ETOOBIG, "tenant %s: slot key too long", tenant);
	ws_buf_reset(b);
	rc = ws_store_get(s, key, 0, UINT64_MAX, b, NULL);
	if (rc == WS_ENOTFOUND)
		return rc;
	if (rc == WS_ETOOBIG)
		return ws_fail(WS_EFORMAT, "tenant %s: slot %s is larger than any manifest (%u bytes)", tenant, key,
			       SLOT_BYTES_MAX);
	if (rc)
		return ws_fail_wrap(rc, "tenant %s: read slot %s", tenant, key);
	if ((rc = ws_fmt_slot_kind(b->data, b->len, kind)) != 0)
		return ws_fail_wrap(rc, "tenant %s: slot %s", tenant, key);
	return 0;
}
