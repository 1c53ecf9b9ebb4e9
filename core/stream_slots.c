/*
 * Manifest slots, the writer (docs/SLOTS.md 3.1, "As built (writer)"):
 * with st->slots a tail is acknowledged by one create-once manifest slot
 * `<tenant>/e<E>-p<P>/l<lane>/m<seq>` in our lane; the watermark is the
 * lane's opener and a hint written at most once per hint_slots slots.
 *
 * - The head is found as every reader finds it (ws_head_load): mark.wm is
 *   the head, mark.stored the watermark object.
 * - A lane is opened when the head's lane is not ours (first contact, a
 *   takeover, the upgrade from a watermark of versions 1..3): the head
 *   lane is closed at head + 1 first (a close record naming our new lane),
 *   then the watermark is swapped to name our lane, its hint the head.
 *   Closing first means every reader that starts from the new watermark's
 *   hint (a slot whose own lane the probe starts in, or for a
 *   content-named hint our lane) walks the same close to our lane.
 * - A tail whose one write is its slot makes no fencing read (the create
 *   fences); any other reads our lane's next slot before its first upload.
 * - A refused create is read back: our bytes (an earlier attempt landed)
 *   are acknowledged; a close record is Fenced (nothing else written) or
 *   WS_ELOSTRACE (batches uploaded); another slot is another writer with
 *   our token. An ambiguous failure keeps the slot pending (mark.pend_*):
 *   the next head read adopts it when it is there with our bytes.
 */
#include <sys/random.h>

#include "slots.h"
#include "stream_internal.h"

bool mark_fenced(const struct ws_stream *st)
{
	if (!st->slots)
		return st->mark.have && fenced_by(st, &st->mark.wm);
	return st->mark.fence_have;
}

/* A token seen on the way (watermark, lane, slot, close): noted when it fences us. */
static void fence_note(struct ws_stream *st, uint64_t epoch, uint64_t pg)
{
	if (st->mark.fence_have || !ws_fmt_token_fences(epoch, pg, st->epoch, st->pg))
		return;
	st->mark.fence_have = true;
	st->mark.fence_epoch = epoch;
	st->mark.fence_pg = pg;
}

static void mark_none(struct ws_stream *st)
{
	st->mark.have = st->mark.stored_have = false;
	memset(&st->mark.stored_etag, 0, sizeof(st->mark.stored_etag));
	st->mark.lane = st->mark.head_lane = st->mark.hint_seq = 0;
	st->mark.head_closed = false;
	st->mark.fence_have = false;
	st->mark.pend_seq = 0;
	st->mark.loaded = true;
	st->txn.continuous = false;
}

/*
 * refresh_wm with slots: the head as readers find it. Our own pending slot
 * (an ambiguous create) that landed is our last write; continuity holds
 * only while the head is our own last write. A carried head (a watermark
 * of version 3, before the lane opens) keeps its bytes in carry.buf.
 */
int refresh_head(struct ws_stream *st)
{
	struct ws_head h;
	int rc;

	st->mark.wrote_last = false;
	st->carry.own = false;
	carry_drop(st);
	rc = ws_head_load(st->sink->store, st->tenant, 0, &h);
	if (rc == WS_ENOTFOUND) {
		ws_head_free(&h);
		mark_none(st);
		return 0;
	}
	if (rc) {
		ws_head_free(&h);
		st->mark.loaded = false;
		return rc;
	}
	if (h.wm.version < 4 && h.wm.carried_len)
		carry_take(st, &h.raw, &h.wm);
	struct ws_fmt_watermark w = h.head;
	w.carried = NULL;
	st->mark.stored = h.wm;
	st->mark.stored.carried = NULL;
	st->mark.stored_etag = h.etag;
	st->mark.stored_have = true;
	st->mark.head_lane = h.lane;
	st->mark.head_lane_epoch = h.lane_epoch;
	st->mark.head_lane_pg = h.lane_pg;
	st->mark.head_closed = h.closed;
	st->mark.hint_seq = h.wm.version >= 4 ? h.wm.seq : 0;
	if (own_or_not(st, &w))
		ws_info("tenant %s: slot %s, whose create had no answer, is there with our bytes: acknowledged as "
			"our last write", st->tenant, w.manifest_key);
	st->mark.wm = w;
	st->mark.have = w.seq > 0;
	st->mark.fence_have = false;
	fence_note(st, h.wm.epoch, h.wm.pointer_generation);
	if (h.lane)
		fence_note(st, h.lane_epoch, h.lane_pg);
	if (st->mark.have)
		fence_note(st, w.epoch, w.pointer_generation);
	/* Our lane (this process's, or an earlier one's with our token: adopted). */
	st->mark.lane = h.lane && !h.closed && h.lane_epoch == st->epoch && h.lane_pg == st->pg ? h.lane : 0;
	st->mark.loaded = true;
	ws_head_free(&h);
	return 0;
}

/*
 * A slot at our lane's next sequence that is not this call's own bytes:
 * a close record (its closer fences us: TAIL_DONE, the fencing token
 * noted), our pending slot (the next attempt adopts it: TAIL_RETRY), or
 * another writer's with our token (WS_EPRECOND). The head is read again
 * before the next decision.
 */
static int slot_found(struct ws_stream *st, const char *key, const struct ws_buf *b, enum ws_fmt_slot_kind kind,
		      uint64_t seq)
{
	if (kind == WS_FMT_SLOT_CLOSE) {
		struct ws_fmt_close c;
		int rc = ws_fmt_close_decode(b->data, b->len, &c);
		st->mark.loaded = false;
		if (rc)
			return ws_fail_wrap(rc, "tenant %s: close record %s", st->tenant, key);
		if (c.removed)
			return ws_fail(WS_EFORMAT, "tenant %s: our lane was closed by removal (forget) at %s; shipping "
				       "it again needs a walship that reopens lanes after forget (docs/SLOTS.md stage 2); "
				       "nothing acknowledged", st->tenant, key);
		fence_note(st, c.closer_epoch, c.closer_pg);
		if (!st->mark.fence_have)
			return ws_fail(WS_EFORMAT, "tenant %s: close record %s closes our lane naming epoch %" PRIu64
				       " pointer generation %" PRIu64 ", which does not fence us", st->tenant, key,
				       c.closer_epoch, c.closer_pg);
		st->mark.loaded = true; /* fenced: that is all the next tail needs to know */
		return TAIL_DONE;
	}
	uint8_t sha[WS_SHA256_LEN];
	ws_sha256(b->data, b->len, sha);
	st->mark.loaded = false;
	if (st->mark.pend_seq == seq && memcmp(sha, st->mark.pend_msha, WS_SHA256_LEN) == 0) {
		ws_info("tenant %s: slot %s, whose create had no answer, is there with our bytes; starting over from it",
			st->tenant, key);
		return TAIL_RETRY;
	}
	return ws_fail(WS_EPRECOND, "tenant %s: slot %s was created by another writer with our token (epoch %" PRIu64
		       ", pointer generation %" PRIu64 "); nothing acknowledged", st->tenant, key, st->epoch, st->pg);
}

/*
 * The fencing read with slots: our lane's next slot. 0: absent, go on;
 * TAIL_DONE: closed (fenced); TAIL_RETRY; or an error.
 */
int slot_read_fence(struct ws_stream *st)
{
	char key[WS_KEY_MAX];
	enum ws_fmt_slot_kind kind;
	struct ws_buf b;
	const uint64_t seq = (st->mark.have ? st->mark.wm.seq : 0) + 1;
	int rc = WS_FAULT("stream.before_slot_read");
	if (rc)
		return ws_fail(rc, "tenant %s: injected fault before reading our lane's next slot", st->tenant);
	const bool let_go = st->at.part_count == 0;
	ws_buf_init(&b, WS_SLOT_BYTES_MAX);
	if (let_go)
		lane_out(st);
	rc = ws_slot_get(st->sink->store, st->tenant, st->epoch, st->pg, st->mark.lane, seq, &b, &kind, key);
	if (let_go) {
		lane_in(st);
		st->at.part_base = st->pipe->ring.head; /* others published meanwhile */
	}
	if (rc == WS_ENOTFOUND) {
		ws_errclear();
		rc = 0;
	} else if (rc) {
		st->mark.loaded = false;
	} else {
		rc = slot_found(st, key, &b, kind, seq);
	}
	ws_buf_free(&b);
	return rc;
}

/*
 * Close the head's lane at seq (head + 1), naming lane, ours to be. 0
 * closed (now, or by an earlier attempt of ours); TAIL_DONE: closed by
 * a token that fences us; TAIL_RETRY: its owner created that slot first
 * (the head moved past what this call decided from: nothing uploaded
 * yet); or an error.
 */
static int lane_close(struct ws_stream *st, uint64_t lane, uint64_t seq)
{
	struct ws_fmt_close c;
	char key[WS_KEY_MAX];
	int rc;

	memset(&c, 0, sizeof(c));
	snprintf(c.tenant, sizeof(c.tenant), "%s", st->tenant);
	c.epoch = st->mark.head_lane_epoch;
	c.pointer_generation = st->mark.head_lane_pg;
	c.lane = st->mark.head_lane;
	c.seq = seq;
	c.closer_epoch = st->epoch;
	c.closer_pg = st->pg;
	c.closer_lane = lane;
	if (st->mark.have) {
		snprintf(c.prev_key, sizeof(c.prev_key), "%s", st->mark.wm.manifest_key);
		memcpy(c.prev_sha, st->mark.wm.manifest_sha, WS_SHA256_LEN);
		c.prev_length = st->mark.wm.manifest_length;
	}
	c.time_ms = ws_wall_ms();
	if ((rc = ws_fmt_close_encode(&c, &st->work->scratch)) != 0)
		return ws_fail(rc, "tenant %s: cannot encode the close record of lane %016" PRIx64, st->tenant, c.lane);
	if (ws_key_slot(key, sizeof(key), st->tenant, c.epoch, c.pointer_generation, c.lane, seq) != 0)
		return ws_fail(WS_ETOOBIG, "tenant %s: slot key too long", st->tenant);
	if ((rc = WS_FAULT("stream.before_lane_close")) != 0)
		return ws_fail(rc, "tenant %s: injected fault before closing lane %016" PRIx64, st->tenant, c.lane);
	lane_out(st);
	rc = ws_store_put(st->sink->store, key, st->work->scratch.data, st->work->scratch.len, WS_PUT_CREATE, NULL,
			  NULL);
	lane_in(st);
	st->at.part_base = st->pipe->ring.head;
	if (rc == 0) {
		st->call.report.puts++;
		st->call.report.bytes += st->work->scratch.len;
		return 0;
	}
	st->mark.loaded = false;
	if (rc != WS_EPRECOND)
		return ws_fail_wrap(rc, "tenant %s: close lane %016" PRIx64 " at %s (nothing acknowledged)", st->tenant,
				    c.lane, key);
	ws_errclear();
	/* Taken: read it. */
	struct ws_buf b;
	enum ws_fmt_slot_kind kind;
	struct ws_fmt_close there;
	ws_buf_init(&b, WS_SLOT_BYTES_MAX);
	rc = ws_slot_get(st->sink->store, st->tenant, c.epoch, c.pointer_generation, c.lane, seq, &b, &kind, key);
	if (rc == 0 && kind == WS_FMT_SLOT_CLOSE && (rc = ws_fmt_close_decode(b.data, b.len, &there)) == 0) {
		if (!there.removed && there.closer_epoch == st->epoch && there.closer_pg == st->pg &&
		    there.closer_lane == lane)
			rc = 0; /* an earlier attempt of this very close landed */
		else if (!there.removed && ws_fmt_token_fences(there.closer_epoch, there.closer_pg, st->epoch, st->pg)) {
			fence_note(st, there.closer_epoch, there.closer_pg);
			st->mark.loaded = true;
			rc = TAIL_DONE;
		} else {
			rc = TAIL_RETRY;
		}
	} else if (rc == 0) {
		ws_info("tenant %s: slot %s was created by its lane's owner before our close: the head moved past "
			"what this call decided from; starting over, nothing uploaded", st->tenant, key);
		rc = TAIL_RETRY;
	} else if (rc == WS_ENOTFOUND) {
		rc = ws_fail(-EIO, "tenant %s: the create of close record %s was refused as already there, but it is "
			     "absent now; nothing acknowledged", st->tenant, key);
	}
	ws_buf_free(&b);
	return rc;
}

/* A watermark (version 4) of our token and lane whose hint is the head
 * (none: seq 0, "lane opened"), stamped time_ms. */
static void wm_naming_head(const struct ws_stream *st, uint64_t lane, int64_t time_ms, struct ws_fmt_watermark *w)
{
	memset(w, 0, sizeof(*w));
	snprintf(w->tenant, sizeof(w->tenant), "%s", st->tenant);
	w->epoch = st->epoch;
	w->pointer_generation = st->pg;
	w->lane = lane;
	w->time_ms = time_ms;
	if (!st->mark.have)
		return;
	w->seq = st->mark.wm.seq;
	w->gen = st->mark.wm.gen;
	w->last_frame = st->mark.wm.last_frame;
	w->end_cksum[0] = st->mark.wm.end_cksum[0];
	w->end_cksum[1] = st->mark.wm.end_cksum[1];
	snprintf(w->manifest_key, sizeof(w->manifest_key), "%s", st->mark.wm.manifest_key);
	memcpy(w->manifest_sha, st->mark.wm.manifest_sha, WS_SHA256_LEN);
	w->manifest_length = st->mark.wm.manifest_length;
}

/*
 * Open our lane on top of the head (docs/SLOTS.md "As built (writer)"):
 * a carried head stored, the head's lane closed at head + 1, then the
 * watermark swapped to {our token, the new lane, hint = the head}. 0: our
 * lane is open; TAIL_DONE: Fenced (*out); TAIL_RETRY: the head or the
 * watermark moved (read again, nothing uploaded); or an error.
 */
static int lane_open(struct ws_stream *st, struct ws_outcome *out)
{
	struct ws_fmt_watermark nw;
	struct ws_etag etag = { .s = "" };
	char wmkey[WS_KEY_MAX];
	uint64_t lane = 0;
	int rc;

	if (st->mark.head_closed)
		return ws_fail(WS_EFORMAT, "tenant %s: its lane was closed by removal (forget); shipping it again "
			       "needs a walship that reopens lanes after forget (docs/SLOTS.md stage 2)", st->tenant);
	while (lane == 0)
		if (getrandom(&lane, sizeof(lane), 0) != (ssize_t)sizeof(lane))
			return ws_fail(-errno, "tenant %s: getrandom for a lane id failed", st->tenant);
	/* The hint names the head: a carried one is stored first. */
	if (st->mark.have && st->mark.wm.carried_len) {
		if ((rc = store_carried(st)) != 0)
			return rc;
		st->mark.wm.carried_len = 0;
		carry_drop(st);
	}
	if (st->mark.head_lane) {
		rc = lane_close(st, lane, (st->mark.have ? st->mark.wm.seq : 0) + 1);
		if (rc == TAIL_DONE)
			fill_fenced(st, out);
		if (rc)
			return rc;
	}
	if ((rc = WS_FAULT("stream.before_lane_open")) != 0) {
		st->mark.loaded = false; /* our close may stand: read the head again */
		return ws_fail(rc, "tenant %s: injected fault before opening our lane", st->tenant);
	}
	wm_naming_head(st, lane, st->mark.have ? st->mark.wm.time_ms : ws_wall_ms(), &nw);
	if ((rc = ws_fmt_watermark_encode(&nw, &st->work->scratch)) != 0)
		return ws_fail(rc, "tenant %s: cannot encode watermark", st->tenant);
	if ((rc = ws_key_watermark(wmkey, sizeof(wmkey), st->tenant)) != 0)
		return rc;
	lane_out(st);
	rc = ws_store_put(st->sink->store, wmkey, st->work->scratch.data, st->work->scratch.len,
			  st->mark.stored_have ? WS_PUT_CAS : WS_PUT_CREATE,
			  st->mark.stored_have ? &st->mark.stored_etag : NULL, &etag);
	lane_in(st);
	st->at.part_base = st->pipe->ring.head;
	if (rc == WS_EPRECOND) {
		ws_errclear();
		st->mark.loaded = false;
		ws_info("tenant %s: the watermark changed while we opened our lane; reading the head again, nothing "
			"uploaded", st->tenant);
		return TAIL_RETRY;
	}
	if (rc) {
		st->mark.loaded = false;
		return ws_fail_wrap(rc, "tenant %s: open our lane (watermark %s; nothing acknowledged)", st->tenant,
				    wmkey);
	}
	st->call.report.puts++;
	st->call.report.bytes += st->work->scratch.len;
	ws_info("tenant %s: opened lane %016" PRIx64 " (epoch %" PRIu64 ", pointer generation %" PRIu64
		") on the head at sequence %" PRIu64 "%s", st->tenant, lane, st->epoch, st->pg, nw.seq,
		st->mark.head_lane ? ", its lane closed" : "");
	st->mark.stored = nw;
	st->mark.stored_etag = etag;
	st->mark.stored_have = true;
	st->mark.lane = st->mark.head_lane = lane;
	st->mark.head_lane_epoch = st->epoch;
	st->mark.head_lane_pg = st->pg;
	st->mark.hint_seq = nw.seq;
	st->mark.hint_mono_ms = ws_mono_ms();
	st->mark.just_opened = true;
	/* No etag known: read again before the next swap (the hint's). */
	if (!etag.s[0])
		st->mark.stored_have = false, st->mark.loaded = false;
	if ((rc = WS_FAULT("stream.after_lane_open")) != 0) {
		st->mark.loaded = false;
		return ws_fail(rc, "tenant %s: injected fault after opening our lane", st->tenant);
	}
	return 0;
}

/* A tail whose frames may all go inside its slot: no batch of its own, no
 * snapshot (a guess; where wrong, the read is made before the first upload). */
static bool slot_only(const struct ws_stream *st, const struct tail *t)
{
	if (t->kind == WS_MANIFEST_REBASE || !st->inline_max || t->sc.gen.wal_magic == 0)
		return false;
	const uint64_t start = ws_wal_frame_offset(t->sc.gen.page_size, t->sc.first_frame);
	return start < t->wal_bytes && t->wal_bytes - start <= st->inline_max;
}

/* Step 3 with slots. 0: go on; TAIL_DONE: Fenced; TAIL_RETRY; or an error. */
int slot_fence(struct ws_stream *st, struct tail *t, struct ws_outcome *out)
{
	int rc;
	if (mark_fenced(st)) {
		fill_fenced(st, out);
		return TAIL_DONE;
	}
	if (!st->mark.lane && (rc = lane_open(st, out)) != 0)
		return rc;
	/* Our lane just opened (nothing in it), or this call's head read
	 * probed it to its end just now: no read to make. A tail whose one
	 * write is its slot still leaves the fencing to its create. */
	const bool read_now = !t->fresh && !st->mark.just_opened;
	st->mark.just_opened = false;
	if (slot_only(st, t)) {
		st->at.fence_deferred = true;
		if ((rc = WS_FAULT("stream.slot_fence_skipped")) != 0)
			return ws_fail(rc, "tenant %s: injected fault where the slot read is skipped", st->tenant);
		return 0;
	}
	if (!read_now)
		return 0;
	rc = slot_read_fence(st);
	if (rc == TAIL_DONE)
		fill_fenced(st, out);
	return rc;
}

/*
 * Create this tail's slot (key t->mkey, seq head + 1). 0: acknowledged;
 * TAIL_DONE: shed (put_inline_manifest) or Fenced (no fencing read was
 * made, nothing else written); or an error, nothing acknowledged.
 */
int put_slot(struct ws_stream *st, struct tail *t, const struct iovec *iov, bool inl, struct ws_outcome *out)
{
	const uint64_t seq = (st->mark.have ? st->mark.wm.seq : 0) + 1;
	const bool only = st->at.fence_deferred; /* no read was made: this create fences */
	char key[WS_KEY_MAX];
	enum ws_fmt_slot_kind kind;
	struct ws_buf b;
	int rc;

	st->at.fence_deferred = false;
	rc = inl ? put_inline_manifest(st, t, iov, true, out)
		 : ws_store_putv(st->sink->store, t->mkey, iov, 1, WS_PUT_CREATE, NULL, NULL);
	if (rc == 0 || rc == TAIL_DONE)
		return rc;
	if (rc != WS_EPRECOND) {
		/* It may have landed: the next head read adopts it when it is there with these bytes. */
		st->mark.pend_seq = seq;
		memcpy(st->mark.pend_msha, t->msha, WS_SHA256_LEN);
		st->mark.pend_mono_ms = 0;
		st->mark.loaded = false;
		return ws_fail_wrap(rc, "tenant %s: create slot %s (nothing acknowledged; the next tail reads it back)",
				    st->tenant, t->mkey);
	}
	ws_errclear();
	if ((rc = WS_FAULT("stream.slot_taken")) != 0)
		return ws_fail(rc, "tenant %s: injected fault after the create of %s was refused", st->tenant, t->mkey);
	ws_buf_init(&b, WS_SLOT_BYTES_MAX);
	rc = ws_slot_get(st->sink->store, st->tenant, st->epoch, st->pg, st->mark.lane, seq, &b, &kind, key);
	if (rc == WS_ENOTFOUND) {
		st->mark.loaded = false;
		rc = ws_fail(-EIO, "tenant %s: the create of slot %s was refused as already there, but it is absent "
			     "now; nothing acknowledged", st->tenant, key);
	} else if (rc) {
		st->mark.loaded = false;
	} else if (kind == WS_FMT_SLOT_MANIFEST && b.len == t->mlen) {
		uint8_t sha[WS_SHA256_LEN];
		ws_sha256(b.data, b.len, sha);
		rc = memcmp(sha, t->msha, WS_SHA256_LEN) == 0 ? 0 : slot_found(st, key, &b, kind, seq);
		if (rc == 0)
			ws_info("tenant %s: the create of slot %s was refused, but the slot there is this one (an "
				"earlier attempt landed): acknowledged", st->tenant, key);
	} else {
		rc = slot_found(st, key, &b, kind, seq);
	}
	ws_buf_free(&b);
	if (rc != TAIL_DONE)
		return rc;
	if (only) {
		ws_info("tenant %s: epoch %" PRIu64 " pointer generation %" PRIu64 " closed our lane (the create of %s "
			"was refused; we are %" PRIu64 "/%" PRIu64 "): fenced, nothing written", st->tenant,
			st->mark.fence_epoch, st->mark.fence_pg, t->mkey, st->epoch, st->pg);
		fill_fenced(st, out);
		return TAIL_DONE;
	}
	return ws_fail(WS_ELOSTRACE, "tenant %s: epoch %" PRIu64 " pointer generation %" PRIu64 " closed our lane at "
		       "%s after our fencing read (we are %" PRIu64 "/%" PRIu64 "); objects uploaded by this call are "
		       "named by nothing; nothing acknowledged", st->tenant, st->mark.fence_epoch, st->mark.fence_pg,
		       t->mkey, st->epoch, st->pg);
}

/*
 * The watermark's hint, lazily: once the head is hint_slots past it (and
 * key_ms after our last hint; under a store that holds writes back only
 * at 4 x hint_slots), a compare-and-swap naming the slot just created.
 * Its failure never changes the tail's outcome: refused, the watermark is
 * read again (a token that fences us there makes the next tail Fenced);
 * any other failure is retried on a later tail.
 */
void maybe_hint(struct ws_stream *st, const struct tail *t)
{
	const uint64_t head = st->mark.wm.seq, hint = st->hint_slots, now = ws_mono_ms();
	struct ws_fmt_watermark hw;
	struct ws_etag etag = { .s = "" };
	char wmkey[WS_KEY_MAX];
	int rc;

	if (!st->mark.stored_have || head < st->mark.hint_seq + hint)
		return;
	if (st->key_ms && st->mark.hint_mono_ms && now - st->mark.hint_mono_ms < st->key_ms)
		return;
	if (ws_store_pressed(st->sink->store) && head < st->mark.hint_seq + 4 * hint)
		return;
	wm_naming_head(st, st->mark.lane, t->durable_ms, &hw);
	if (ws_fmt_watermark_encode(&hw, &st->work->scratch) != 0 || ws_key_watermark(wmkey, sizeof(wmkey), st->tenant) != 0) {
		ws_warn("tenant %s: cannot encode the hint watermark: %s", st->tenant, ws_errmsg());
		ws_errclear();
		return;
	}
	if ((rc = WS_FAULT("stream.before_hint_put")) != 0) {
		ws_debug("tenant %s: injected fault before the hint's write (the tail stays acknowledged)", st->tenant);
		ws_errclear();
		return;
	}
	lane_out(st);
	rc = ws_store_put(st->sink->store, wmkey, st->work->scratch.data, st->work->scratch.len, WS_PUT_CAS,
			  &st->mark.stored_etag, &etag);
	if (rc == WS_EPRECOND) {
		struct ws_fmt_watermark w;
		struct ws_etag we;
		struct ws_buf raw;
		ws_errclear();
		ws_buf_init(&raw, WS_WM_BYTES_MAX);
		rc = ws_wm_load_any(st->sink->store, st->tenant, &w, &we, &raw);
		if (rc == 0) {
			st->mark.stored = w;
			st->mark.stored.carried = NULL;
			st->mark.stored_etag = we;
			if (w.version >= 4 && w.seq > st->mark.hint_seq)
				st->mark.hint_seq = w.seq;
			fence_note(st, w.epoch, w.pointer_generation);
		}
		ws_buf_free(&raw);
		ws_info("tenant %s: the hint's compare-and-swap was refused (the watermark there: epoch %" PRIu64
			", pointer generation %" PRIu64 "%s); the tail stays acknowledged", st->tenant,
			rc == 0 ? w.epoch : 0, rc == 0 ? w.pointer_generation : 0,
			st->mark.fence_have ? ": fenced from the next tail on" : "");
		ws_errclear();
	} else if (rc) {
		ws_debug("tenant %s: the hint's write failed (%s); the tail stays acknowledged, a later one writes it",
			 st->tenant, ws_errmsg());
		ws_errclear();
	} else {
		st->call.report.puts++;
		st->call.report.bytes += st->work->scratch.len;
		st->mark.stored = hw;
		st->mark.stored_etag = etag;
		st->mark.hint_seq = head;
		st->mark.hint_mono_ms = now;
		if (!etag.s[0])
			st->mark.loaded = false; /* no etag to swap on: read it first */
	}
	lane_in(st);
}
