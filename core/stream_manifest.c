/*
 * Step 7 and 8: the generation manifest (stored, inline with its batch, or
 * carried by the watermark) and the watermark's compare-and-swap.
 */
#include "stream_internal.h"
#include "adapt.h"

/* How often the watermark's wait for key_ms looks whether the engine stops. */
#define KEY_WAIT_STEP_MS 20


/*
 * The earliest time the next manifest may be stamped with: the stamp of
 * the manifest the watermark names (read once from the sink when this
 * stream did not write it), so stamps never go back along a tenant's
 * history, whatever the clock does (NTP stepping it back, a takeover by a
 * host whose clock is behind). restore --time takes the run of manifests
 * from the oldest it loads that are stamped at or before the time; that
 * run starts at a re-base or a checkpoint's cut, and a re-base stamped
 * before the history behind it would let a time before that history
 * restore commits made after it. A stamp raised to the floor is later
 * than the read it stands for, never earlier: a restore by time then
 * yields an earlier state, never a later one.
 */
static int64_t stamp_floor(struct ws_stream *st)
{
	struct ws_fmt_manifest m;
	struct ws_buf b;

	if (!st->mark.have)
		return INT64_MIN;
	if (strcmp(st->mark.stamp_key, st->mark.wm.manifest_key) == 0)
		return st->mark.stamp_ms;
	/* Unreadable (retention, a damaged object): the watermark's own time
	 * is the best known; it is not later than its manifest's stamp. */
	st->mark.stamp_ms = st->mark.wm.time_ms;
	ws_buf_init(&b, 256u << 20);
	/* A carried one is in hand (this call's fencing read, or kept from our own last write). */
	const bool carried = st->mark.wm.carried_len && st->carry.buf.len == st->mark.wm.carried_len;
	if ((carried || ws_store_get(st->sink->store, st->mark.wm.manifest_key, 0, UINT64_MAX, &b, NULL) == 0) &&
	    ws_fmt_manifest_decode(carried ? st->carry.buf.data : b.data, carried ? st->carry.buf.len : b.len, &m) == 0) {
		if (strcmp(m.tenant, st->tenant) == 0 && m.time_ms > st->mark.stamp_ms)
			st->mark.stamp_ms = m.time_ms;
		ws_fmt_manifest_free(&m);
	}
	ws_buf_free(&b);
	snprintf(st->mark.stamp_key, sizeof(st->mark.stamp_key), "%s", st->mark.wm.manifest_key);
	return st->mark.stamp_ms;
}

/*
 * The time as of which everything the source had committed is durable
 * (its age is the RPO): when this call began, if it ships all it found; a
 * partial ship (shed, or stopped at the work bound) leaves commits behind
 * whose age is unknown, so the time stays where the last complete ship put
 * it (from when the stream opened if none). *mono: the same by the
 * monotonic clock (0: not known).
 */
static int64_t durable_time(const struct ws_stream *st, const struct tail *t, uint64_t *mono)
{
	if (st->at.frames_shed == 0 && !st->at.early_stop && !t->unproven) {
		*mono = st->call.mono_ms;
		return st->call.wall_ms;
	}
	if (st->mark.have) {
		*mono = st->mark.wm.seq == st->mark.own_seq ? st->mark.own_mono_ms : 0;
		return st->mark.wm.time_ms;
	}
	*mono = 0;
	return st->opened_ms;
}

/* 7. The generation manifest: names every batch and part of this call,
 * chained to the manifest the watermark names (unless re-basing). */
/*
 * A manifest that carries its batch is that batch's upload too, and meets
 * a struggling sink as a batch would (pipe.h): under `block` it is tried
 * again, with a growing pause, until it lands or the engine stops (never
 * under the application's write lock); under `shed` the call sheds its
 * range (no manifest, no watermark: the next call ships it); otherwise
 * the call fails. 0, TAIL_DONE (shed: *out filled) or the error.
 */
int put_inline_manifest(struct ws_stream *st, struct tail *t, const struct iovec *iov, bool slot,
			struct ws_outcome *out)
{
	const enum ws_policy policy = st->call.locked && st->policy == WS_POLICY_BLOCK ? WS_POLICY_THROTTLE
									       : st->policy;
	uint32_t backoff = WS_PIPE_BACKOFF_MIN_MS;
	for (;;) {
		int rc = ws_store_putv(st->sink->store, t->mkey, iov, 1, WS_PUT_CREATE, NULL, NULL);
		if (rc == WS_EPRECOND && slot)
			return rc; /* the slot is read back (put_slot) */
		if (rc == WS_EPRECOND)
			rc = ws_store_created_same(st->sink->store, t->mkey, iov, 1);
		if (rc == 0)
			return 0;
		if (rc == WS_ETHROTTLED)
			st->call.throttle++;
		/* The caller retries the whole call after the store's
		 * Retry-After (ws_store.throttle_fail_fast): nothing shed. */
		if (!ws_err_transient(rc) || (rc == WS_ETHROTTLED && st->sink->store->throttle_fail_fast))
			return ws_fail_wrap(rc, "tenant %s: upload %s", st->tenant, t->mkey);
		if (policy == WS_POLICY_SHED && !st->drain) {
			st->at.frames_shed = t->last - t->sc.first_frame + 1;
			ws_info("tenant %s: shed frames %" PRIu64 "..%" PRIu64 " (%s)", st->tenant, t->sc.first_frame,
				t->last, ws_strerror(rc));
			return done_shed(st, t, out);
		}
		/* As the pipe's uploads (the engine stops them with ws_pipe_give_up). */
		if (!ws_pipe_waits_out(st->pipe, policy, rc))
			return ws_fail_wrap(rc, "tenant %s: upload %s (carrying its batch; policy %s%s; nothing "
					    "acknowledged)", st->tenant, t->mkey, ws_policy_name(policy),
					    st->call.locked ? ", not waited out under the database's write lock" : "");
		ws_debug("tenant %s: sink struggling (%s); block policy waits %u ms and retries %s", st->tenant,
			 ws_errmsg(), backoff, t->mkey);
		ws_sleep_ms(backoff);
		backoff = ws_pipe_backoff_next(backoff);
	}
}

/* This call ships one inline batch, and no snapshot, on top of the
 * watermark: what a carried manifest may be. A re-base names no
 * predecessor: it is never carried. */
static bool one_inline_on_wm(const struct ws_stream *st, const struct tail *t)
{
	return t->kind != WS_MANIFEST_REBASE && st->mark.have && !st->at.snap_count && st->at.inl_held &&
	       st->at.batch_count == 1;
}

/* ... and continues the watermark's generation: what a carried manifest
 * may take in. */
static bool one_inline_continue(const struct ws_stream *st, const struct tail *t)
{
	return t->kind == WS_MANIFEST_CONTINUE && one_inline_on_wm(st, t);
}

/*
 * The most bytes the carried manifest of sequence seq may grow to: between
 * 1/2 and 3/2 of inline_batch_bytes_max, drawn from the tenant's name and
 * seq (the same for every merge into it). Tenants that write alike would
 * otherwise pass one bound on the same round and all store their merges
 * together: one round of two writes a tenant, which ages every one of them
 * by as much again, and then a round of one.
 */
static uint64_t carry_bound(const struct ws_stream *st, uint64_t seq)
{
	uint64_t h = ws_xxh64(st->tenant, strlen(st->tenant)) ^ (seq * 0x9e3779b97f4a7c15ull);
	/* splitmix64's finaliser: seq alone changes every bit */
	h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
	h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
	h ^= h >> 31;
	return st->inline_max / 2 + h % (st->inline_max + 1);
}

/*
 * Whether this call's manifest of mlen bytes (sequence seq) may be carried
 * by its watermark (one write for the call): one_inline_on_wm (a
 * continuation, or the first manifest of a next generation), while
 * the sink holds writes back (or always, as configured), and at most
 * carry_bound, merges included (each merge writes it whole again, and
 * each fencing read reads it back: the bound trades request count against
 * bytes).
 */
static bool carry_wanted(struct ws_stream *st, const struct tail *t, uint64_t seq, uint64_t mlen)
{
	if (st->carry.mode == WS_CARRY_NEVER || !one_inline_on_wm(st, t) || mlen > carry_bound(st, seq))
		return false;
	return st->carry.mode == WS_CARRY_ALWAYS || ws_store_pressed(st->sink->store);
}

/* The carried manifest the watermark names, stored under its own key (the
 * key names its content: any earlier store of it wrote the same bytes),
 * so that the manifest written now can link to it. */
int store_carried(struct ws_stream *st)
{
	struct iovec iov = { st->carry.buf.data, st->carry.buf.len };
	int rc;
	if (st->carry.buf.len != st->mark.wm.carried_len)
		return ws_fail(WS_EINCOMPLETE, "tenant %s: the manifest %s its watermark carries was not kept",
			       st->tenant, st->mark.wm.manifest_key);
	rc = WS_FAULT("stream.before_carried_store");
	if (rc)
		return ws_fail(rc, "tenant %s: injected fault before storing the carried manifest", st->tenant);
	rc = put_immutable(st, st->mark.wm.manifest_key, &iov, 1);
	if (rc)
		return rc;
	st->call.report.puts++;
	st->call.report.bytes += iov.iov_len;
	st->carry.own = false; /* stored: what follows links to it */
	return 0;
}

/*
 * A tail that merges into the carried manifest the watermark names (which
 * this stream wrote and stored nowhere): the new manifest takes that one's
 * place, with its kind (CONTINUE, or the NEXT_GEN that began this
 * generation), sequence, predecessor, first frame and seed, its inline
 * batches and then this call's, and the end and time of each tail it
 * held (the merged tails' index). p is that manifest, decoded; refs, iov
 * and tails are filled for the encoder.
 */
static int merge_carried(struct ws_stream *st, struct ws_fmt_manifest *m, const struct ws_fmt_manifest *p,
			 struct ws_fmt_objref **refs, struct iovec **iov, int *iovcnt, struct ws_fmt_tail **tails)
{
	const uint32_t n = p->batch_count + m->batch_count;
	*refs = calloc(n, sizeof(**refs));
	*iov = calloc(n + 1, sizeof(**iov));
	/* Each tail merged in keeps its own end and time (version 3): the
	 * carried one's tails, then its last, which this call follows. */
	*tails = calloc((size_t)p->tail_count + 1, sizeof(**tails));
	if (!*refs || !*iov || !*tails)
		return -ENOMEM;
	if (p->tail_count) /* p->tails is NULL when it holds none */
		memcpy(*tails, p->tails, p->tail_count * sizeof(**tails));
	(*tails)[p->tail_count].frame = p->last_frame;
	(*tails)[p->tail_count].time_ms = p->time_ms;
	m->tails = *tails;
	m->tail_count = p->tail_count + 1;
	for (uint32_t k = 0; k < p->batch_count; k++) {
		const struct ws_fmt_objref *r = &p->batches[k];
		WS_ASSERT(ws_fmt_objref_inline(r)); /* carried manifests hold inline batches only */
		(*refs)[k] = *r;
		(*iov)[k].iov_base = st->carry.buf.data + r->inline_off;
		(*iov)[k].iov_len = r->length;
	}
	memcpy(*refs + p->batch_count, m->batches, m->batch_count * sizeof(**refs));
	for (int i = 0; i < m->inline_iovcnt; i++)
		(*iov)[p->batch_count + (uint32_t)i] = m->inline_iov[i];
	*iovcnt = (int)p->batch_count + m->inline_iovcnt;
	m->batches = *refs;
	m->batch_count = n;
	m->inline_iov = *iov;
	m->inline_iovcnt = *iovcnt;
	m->kind = p->kind; /* a carried NEXT_GEN stays the generation's first */
	m->wm_seq = p->wm_seq;
	m->first_frame = p->first_frame;
	m->valid_from_frame = p->valid_from_frame;
	m->seed_cksum[0] = p->seed_cksum[0];
	m->seed_cksum[1] = p->seed_cksum[1];
	snprintf(m->prev_key, sizeof(m->prev_key), "%s", p->prev_key);
	memcpy(m->prev_sha, p->prev_sha, WS_SHA256_LEN);
	m->prev_length = p->prev_length;
	if (m->time_ms < p->time_ms)
		m->time_ms = p->time_ms;
	return 0;
}

int step_write_manifest(struct ws_stream *st, struct tail *t, struct ws_outcome *out)
{
	const struct scan *sc = &t->sc;
	struct ws_fmt_manifest m, pm;
	struct ws_fmt_objref *mrefs = NULL;
	struct ws_fmt_tail *mtails = NULL;
	struct iovec *miov = NULL;
	int miovcnt = 0;
	bool have_pm = false, carried_stored = false;
	char shahex[WS_SHA256_HEX_LEN + 1];
	int rc;

	WS_ASSERT(t->kind == WS_MANIFEST_REBASE || t->last >= sc->first_frame);
	memset(&m, 0, sizeof(m));
	snprintf(m.tenant, sizeof(m.tenant), "%s", st->tenant);
	m.epoch = st->epoch;
	m.pointer_generation = st->pg;
	m.wm_seq = (st->mark.have ? st->mark.wm.seq : 0) + 1;
	/* Stamped after the scan, not before it: a reused WAL file lets the
	 * scan meet commits made while it ran, and restore by time must never
	 * yield a commit made after the time it was asked for. */
	t->sc.read_ms = ws_wall_ms();
	m.time_ms = t->sc.read_ms;
	{
		int64_t floor = stamp_floor(st);
		if (m.time_ms < floor)
			m.time_ms = floor;
	}
	m.gen = sc->gen;
	m.kind = t->kind;
	m.first_frame = sc->first_frame;
	m.last_frame = t->last;
	m.valid_from_frame = t->kind == WS_MANIFEST_REBASE ? t->last : sc->first_frame;
	m.seed_cksum[0] = sc->seed[0];
	m.seed_cksum[1] = sc->seed[1];
	m.end_cksum[0] = t->last ? sc->cur.commit_cksum[0] : sc->seed[0];
	m.end_cksum[1] = t->last ? sc->cur.commit_cksum[1] : sc->seed[1];
	m.db_pages = t->db_pages;
	if (st->slots) {
		/* A slot of our lane (version 4); its durable_ms is the
		 * watermark's time_ms of the legacy path, never before time_ms. */
		uint64_t mono;
		WS_ASSERT(st->mark.lane != 0 && !st->mark.wm.carried_len);
		m.lane = st->mark.lane;
		m.durable_ms = durable_time(st, t, &mono);
		if (m.durable_ms < m.time_ms)
			m.durable_ms = m.time_ms;
		t->durable_ms = m.durable_ms;
	}
	if (st->mark.have && t->kind != WS_MANIFEST_REBASE) {
		snprintf(m.prev_key, sizeof(m.prev_key), "%s", st->mark.wm.manifest_key);
		memcpy(m.prev_sha, st->mark.wm.manifest_sha, WS_SHA256_LEN);
		m.prev_length = st->mark.wm.manifest_length;
	}
	name_parts(st);
	m.batch_count = st->at.batch_count;
	m.batches = st->call.batches;
	m.snap_count = st->at.snap_count;
	m.snaps = st->call.snaps;
	struct iovec inl[2];
	for (uint32_t k = 0; k < m.batch_count; k++) {
		if (!ws_fmt_objref_inline(&m.batches[k]))
			continue;
		/* The batch held in its slot (part_done): the only inline one. */
		struct ws_pipe_desc *d = ws_pipe_desc(st->pipe, st->at.inl_idx);
		WS_ASSERT(st->at.inl_held && m.inline_iovcnt == 0 &&
			  m.batches[k].length == d->hdr_len + d->payload_len);
		inl[0].iov_base = d->hdr;
		inl[0].iov_len = d->hdr_len;
		inl[1].iov_base = ws_pipe_payload(st->pipe, st->at.inl_idx, d);
		inl[1].iov_len = d->payload_len;
		m.inline_iov = inl;
		m.inline_iovcnt = 2;
	}
	if (st->mark.have && st->mark.wm.carried_len) {
		/* The watermark carries the manifest this one follows: merge
		 * into it when this stream wrote it and this call ships one
		 * inline batch more of its generation; otherwise store it first,
		 * so that this manifest can link to it. A re-base links to
		 * nothing, but its watermark replaces the carried one, the only
		 * copy of every state that manifest holds: stored all the same,
		 * so that history stays in the sink (restore by time, checkpoints
		 * and retention find it as any manifest a re-base cut off). */
		if (st->carry.own && one_inline_continue(st, t)) {
			rc = ws_fmt_manifest_decode(st->carry.buf.data, st->carry.buf.len, &pm);
			if (rc) {
				rc = ws_fail_wrap(rc, "tenant %s: the carried manifest %s", st->tenant,
						  st->mark.wm.manifest_key);
				goto out;
			}
			have_pm = true;
			if (pm.kind == WS_MANIFEST_REBASE || !pm.prev_key[0] || pm.wm_seq != st->mark.wm.seq ||
			    pm.last_frame + 1 != m.first_frame || !ws_fmt_gen_equal(&pm.gen, &m.gen) ||
			    pm.end_cksum[0] != m.seed_cksum[0] || pm.end_cksum[1] != m.seed_cksum[1]) {
				rc = ws_fail(WS_EINCOMPLETE, "tenant %s: this call does not continue the carried "
					     "manifest %s", st->tenant, st->mark.wm.manifest_key);
				goto out;
			}
			if ((rc = merge_carried(st, &m, &pm, &mrefs, &miov, &miovcnt, &mtails)) != 0)
				goto out;
			t->merged = true;
		} else if ((rc = fence_before_upload(st)) != 0 || (rc = store_carried(st)) != 0) {
			goto out;
		} else {
			carried_stored = true;
		}
	}
	if (st->mark.have && t->kind == WS_MANIFEST_REBASE && (!st->mark.wm.carried_len || carried_stored)) {
		/* A re-base links back to the manifest the watermark named, the
		 * head of the chain it follows (docs/FORMAT.md "Manifest"), when
		 * that one is stored: restore reaches the history behind it. */
		snprintf(m.prev_key, sizeof(m.prev_key), "%s", st->mark.wm.manifest_key);
		memcpy(m.prev_sha, st->mark.wm.manifest_sha, WS_SHA256_LEN);
		m.prev_length = st->mark.wm.manifest_length;
	}
	rc = ws_fmt_manifest_encode(&m, &st->work->scratch);
	if (rc) {
		rc = ws_fail(rc, "tenant %s: cannot encode manifest", st->tenant);
		goto out;
	}

	t->mlen = st->work->scratch.len;
	ws_sha256(st->work->scratch.data, st->work->scratch.len, t->msha);
	ws_hex(t->msha, 8, shahex);
	if (st->slots ? ws_key_slot(t->mkey, sizeof(t->mkey), st->tenant, st->epoch, st->pg, m.lane, m.wm_seq) != 0
		      : snprintf(t->mkey, sizeof(t->mkey), "%s/m%016" PRIx64 "-%s", sc->prefix, m.wm_seq, shahex) >=
				(int)sizeof(t->mkey)) {
		rc = ws_fail(WS_ETOOBIG, "tenant %s: manifest key too long", st->tenant);
		goto out;
	}
	/* Carried: the watermark is this manifest's one write (step 8). */
	t->carried = !st->slots && carry_wanted(st, t, m.wm_seq, t->mlen);
	if (st->slots) {
		/* The tail's one write, created once: it acknowledges, and
		 * (with no fencing read made) fences too. */
		rc = WS_FAULT("stream.before_slot_put");
		if (rc) {
			rc = ws_fail(rc, "tenant %s: injected fault before the slot's create", st->tenant);
			goto out;
		}
		struct iovec iov = { st->work->scratch.data, st->work->scratch.len };
		lane_out(st);
		rc = put_slot(st, t, &iov, m.inline_iovcnt != 0, out);
		lane_in(st);
		if (rc)
			goto out;
		st->call.report.puts++;
		st->call.report.bytes += iov.iov_len;
	} else if (t->carried) {
		ws_buf_reset(&st->carry.next);
		rc = ws_buf_append(&st->carry.next, st->work->scratch.data, st->work->scratch.len);
		if (rc)
			goto out;
	} else {
		if ((rc = fence_before_upload(st)) != 0)
			goto out;
		rc = WS_FAULT("stream.before_manifest_put");
		if (rc) {
			rc = ws_fail(rc, "tenant %s: injected fault before manifest upload", st->tenant);
			goto out;
		}
		struct iovec iov = { st->work->scratch.data, st->work->scratch.len };
		/* Encoded whole (an inline batch copied out of its slot): the
		 * shard's next tail may read while this write waits. */
		lane_out(st);
		rc = m.inline_iovcnt ? put_inline_manifest(st, t, &iov, false, out) : put_immutable(st, t->mkey, &iov, 1);
		lane_in(st);
		if (rc)
			goto out;
		st->call.report.puts++;
		st->call.report.bytes += iov.iov_len;
	}
	snprintf(st->mark.stamp_key, sizeof(st->mark.stamp_key), "%s", t->mkey);
	st->mark.stamp_ms = m.time_ms;
out:
	if (have_pm)
		ws_fmt_manifest_free(&pm);
	free(mrefs);
	free(mtails);
	free(miov);
	return rc;
}

/*
 * The watermark write waits until key_ms after our last one went out, when
 * the engine asks (ws_stream_set_key_wait): it started this tail early so
 * that everything before this write (read, uploads, manifest) is done by
 * then. Called with the shard's read lock let go, as for the write itself;
 * the read mark is held, so the WAL keeps every frame this tail ships.
 */
static void key_wait(struct ws_stream *st)
{
	const uint64_t ready = ws_mono_ms();
	st->call.report.wm_ready_ms = ready;
	/* Never under the application's write lock (walship's own WAL
	 * checkpoint): its writers would wait out the interval too. That
	 * write goes out up to the lead early, once per checkpoint. */
	if (!st->key_wait || !st->key_ms || st->call.locked)
		return;
	(void)WS_FAULT("stream.key_wait"); /* a pause site: nothing to fail here */
	const uint64_t at = ws_adapt_key_due(0, st->mark.sent_mono_ms, st->key_ms, 0);
	/* In steps, so that an engine beginning to stop is not held up by a
	 * wait as long as the lead (up to half of key_ms). */
	for (uint64_t now = ws_mono_ms(); at > now; now = ws_mono_ms()) {
		if (st->key_wait_stop && __atomic_load_n(st->key_wait_stop, __ATOMIC_RELAXED))
			break;
		ws_sleep_ms((unsigned)(at - now < KEY_WAIT_STEP_MS ? at - now : KEY_WAIT_STEP_MS));
	}
	if (at > ready)
		st->call.report.key_wait_ms = ws_mono_ms() - ready;
}

/*
 * What step 8 wrote (the watermark nw, or with slots the slot it names)
 * is acknowledged: the stream's state follows it, and the read mark is
 * handed over.
 */
static void landed(struct ws_stream *st, struct tail *t, struct ws_fmt_watermark *nw, const struct ws_etag *etag,
		   uint64_t nw_mono)
{
	const struct ws_etag new_etag = *etag;
	t->prev = st->mark.wm;
	t->had = st->mark.have;
	/* The manifest this watermark carries stays in hand, this stream's to
	 * merge into while the watermark there is this write: the next tail
	 * may fence with its own swap on this write's etag (step_fence).
	 * Parking drops it; a fencing read brings it back (refresh_wm). */
	carry_drop(st);
	if (t->carried) {
		st->carry.buf = st->carry.next;
		ws_buf_init(&st->carry.next, WS_WM_BYTES_MAX);
	} else {
		ws_buf_free(&st->carry.next);
	}
	st->carry.own = t->carried;
	st->call.report.carried = t->carried;
	nw->carried = NULL;
	st->mark.wm = *nw;
	st->mark.etag = new_etag;
	st->mark.have = true;
	st->mark.own_seq = nw->seq;
	memcpy(st->mark.own_msha, nw->manifest_sha, WS_SHA256_LEN);
	st->mark.own_mono_ms = nw_mono;
	/* No etag known (the store gave none, even to a HEAD): re-read it
	 * before the next swap rather than send one that cannot match. */
	st->mark.loaded = st->slots || new_etag.s[0] != '\0';
	st->mark.wrote_last = !st->slots && st->mark.loaded;
	/* continuous: no frame past this watermark can have been
	 * checkpointed away unshipped, so a new generation continues it
	 * (NEXT_GEN). A read mark held since our last watermark, or a REBASE
	 * (its snapshot under this mark, the WAL checked unmoved), proves it.
	 * A CONTINUE on a fresh mark (after a park, a restart, a takeover)
	 * does not by itself: the mark may be 0 over a WAL whose frames past
	 * the watermark were backfilled and never shipped, and mark 0 does not
	 * hold a restart off. Only when the call shipped all it scanned with
	 * the WAL unmoved after the scan did that generation end no later than
	 * what shipped (while mark 0 is held nothing more can be backfilled,
	 * and a restart needs everything backfilled). Otherwise the shipped
	 * prefix is acknowledged, and a new generation re-bases. */
	bool proven = st->txn.continuous || t->kind != WS_MANIFEST_CONTINUE ||
		      (!t->unproven && st->at.frames_shed == 0 && !st->at.early_stop);
	/* After a partial ship (shed, or stopped at the work bound) the old
	 * mark stays: frames between what shipped and it must not be
	 * checkpointed away. */
	if (!t->locked && st->at.frames_shed == 0 && !st->at.early_stop)
		handover_read(st);
	st->txn.continuous = proven;
}

/*
 * 8. The watermark, last, by compare-and-swap on the one we fenced with: it
 * names only what is now durable. Then keep a read mark without a gap: from
 * here on a new generation is provably the continuation of what we shipped.
 */
int step_write_watermark(struct ws_stream *st, struct tail *t, struct ws_outcome *out)
{
	struct ws_fmt_watermark nw;
	struct ws_etag new_etag = { .s = "" };
	char wmkey[WS_KEY_MAX];
	int rc;

	WS_ASSERT(t->mkey[0] != '\0'); /* the manifest it names is durable */
	memset(&nw, 0, sizeof(nw));
	nw.version = 2;
	snprintf(nw.tenant, sizeof(nw.tenant), "%s", st->tenant);
	nw.epoch = st->epoch;
	nw.pointer_generation = st->pg;
	/* A manifest merged into the carried one takes its place, and its
	 * sequence: consecutive manifests still differ by exactly 1. */
	nw.seq = (st->mark.have ? st->mark.wm.seq : 0) + (t->merged ? 0 : 1);
	/* When everything committed was durable (the RPO's start). */
	uint64_t nw_mono;
	nw.time_ms = durable_time(st, t, &nw_mono);
	nw.gen = t->sc.gen;
	nw.last_frame = t->last;
	nw.end_cksum[0] = t->last ? t->sc.cur.commit_cksum[0] : t->sc.seed[0];
	nw.end_cksum[1] = t->last ? t->sc.cur.commit_cksum[1] : t->sc.seed[1];
	snprintf(nw.manifest_key, sizeof(nw.manifest_key), "%s", t->mkey);
	memcpy(nw.manifest_sha, t->msha, WS_SHA256_LEN);
	nw.manifest_length = t->mlen;
	if (st->slots) {
		/* The slot was this tail's write (step 7); the watermark is a
		 * hint, written now and then (maybe_hint). */
		rc = WS_FAULT("stream.after_slot_put");
		if (rc) {
			/* Created, and not reported: as a create whose answer was lost. */
			st->mark.pend_seq = nw.seq;
			memcpy(st->mark.pend_msha, nw.manifest_sha, WS_SHA256_LEN);
			st->mark.pend_mono_ms = nw_mono;
			st->mark.loaded = false;
			return ws_fail(rc, "tenant %s: injected fault after the slot was created", st->tenant);
		}
		landed(st, t, &nw, &new_etag, nw_mono);
		maybe_hint(st, t);
		return 0;
	}
	if (t->carried) {
		nw.carried = st->carry.next.data;
		nw.carried_len = st->carry.next.len;
	}
	rc = ws_fmt_watermark_encode(&nw, &st->work->scratch);
	if (rc)
		return ws_fail(rc, "tenant %s: cannot encode watermark", st->tenant);
	rc = ws_key_watermark(wmkey, sizeof(wmkey), st->tenant);
	if (rc)
		return rc;
	rc = WS_FAULT(t->carried ? "stream.before_carrying_watermark_put" : "stream.before_watermark_put");
	if (rc)
		return ws_fail(rc, "tenant %s: injected fault before watermark write", st->tenant);
	st->mark.pend_seq = nw.seq;
	memcpy(st->mark.pend_msha, nw.manifest_sha, WS_SHA256_LEN);
	st->mark.pend_mono_ms = nw_mono;
	lane_out(st);
	key_wait(st);
	rc = ws_store_put(st->sink->store, wmkey, st->work->scratch.data, st->work->scratch.len,
			  st->mark.have ? WS_PUT_CAS : WS_PUT_CREATE, st->mark.have ? &st->mark.etag : NULL, &new_etag);
	lane_in(st);
	if (rc == WS_EPRECOND) {
		const struct ws_etag before_etag = st->mark.etag;
		/* Someone wrote the watermark since our fencing read. Batches and
		 * the manifest are already up: this is not Fenced (a pure read),
		 * it is a lost race, and nothing of it is acknowledged. Unless
		 * the watermark there is this very one: an earlier attempt of
		 * this write landed and its reply was lost. */
		struct ws_fmt_watermark before = st->mark.wm;
		bool had = st->mark.have, was_continuous = st->txn.continuous;
		/* Fenced by the write itself: nothing but it was to be written. */
		const bool by_cas = st->at.fence_deferred;
		st->at.fence_deferred = false;
		int rc2 = refresh_wm(st);
		if (rc2)
			return rc2;
		if (st->mark.have && wm_same_write(&st->mark.wm, &nw)) {
			ws_info("tenant %s: watermark %s: the compare-and-swap was refused, but the watermark there "
				"is this write (an earlier attempt landed): written", st->tenant, wmkey);
			new_etag = st->mark.etag;
			st->mark.wm = before;
			st->mark.have = had;
			st->txn.continuous = was_continuous;
			rc = 0;
		} else if (had && before.carried_len && st->mark.have && !st->mark.wm.carried_len &&
			   wm_same_write(&st->mark.wm, &before)) {
			/* A checkpoint stored the head our fencing read found
			 * carried and put the same watermark there naming it
			 * stored (ckpt_take.c uncarry): nothing of ours is
			 * acknowledged; the call starts over and links to it. */
			ws_info("tenant %s: a checkpoint stored the carried manifest %s as its cut; shipping again "
				"on top of it", st->tenant, before.manifest_key);
			return TAIL_RETRY;
		} else if (by_cas && st->mark.have && fenced_by(st, &st->mark.wm)) {
			/* The refused write was this call's only one: a pure
			 * read after all, and the sink holds the new owner's
			 * state alone. */
			ws_info("tenant %s: epoch %llu pointer generation %llu took the stream over (our "
				"watermark's compare-and-swap was refused; we are %llu/%llu): fenced, nothing "
				"written", st->tenant, (unsigned long long)st->mark.wm.epoch,
				(unsigned long long)st->mark.wm.pointer_generation, (unsigned long long)st->epoch,
				(unsigned long long)st->pg);
			fill_fenced(st, out);
			return TAIL_DONE;
		} else if (by_cas && st->mark.have && wm_same_write(&st->mark.wm, &before) &&
			   st->mark.wm.carried_len == before.carried_len) {
			/* Nobody wrote it: the store did not take the etag our
			 * own write got back (another form than its reads give,
			 * a proxy's rewrite). The call starts over with the
			 * fencing read, and so does every later one. */
			st->mark.own_etag_refused = true;
			ws_warn("tenant %s: watermark %s: the store refused a compare-and-swap on the etag %s its "
				"own write returned, though the watermark there is still that write (read back "
				"with etag %s): this stream fences by a read before every tail from now on",
				st->tenant, wmkey, before_etag.s, st->mark.etag.s);
			return TAIL_RETRY;
		} else if (st->mark.have && fenced_by(st, &st->mark.wm))
			return ws_fail(WS_ELOSTRACE, "tenant %s: epoch %llu pointer generation %llu took the "
				       "stream over after our fencing read (we are %llu/%llu); objects uploaded "
				       "by this call are not named by any watermark; nothing acknowledged",
				       st->tenant, (unsigned long long)st->mark.wm.epoch,
				       (unsigned long long)st->mark.wm.pointer_generation, (unsigned long long)st->epoch,
				       (unsigned long long)st->pg);
		else {
			st->mark.loaded = false;
			return ws_fail(WS_EPRECOND, "tenant %s: watermark %s changed concurrently (another writer "
				       "with epoch %llu?); nothing acknowledged", st->tenant, wmkey,
				       (unsigned long long)st->epoch);
		}
	}
	st->at.fence_deferred = false;
	if (rc) {
		st->mark.loaded = false; /* ambiguous: re-read before the next decision */
		return ws_fail_wrap(rc, "tenant %s: write watermark %s", st->tenant, wmkey);
	}
	st->call.report.puts++;
	st->call.report.bytes += st->work->scratch.len;
	st->mark.sent_mono_ms = st->sink->store->write_sent_ms;
	rc = WS_FAULT("stream.after_watermark_put");
	if (rc)
		return ws_fail(rc, "tenant %s: injected fault after watermark write", st->tenant);

	landed(st, t, &nw, &new_etag, nw_mono);
	return 0;
}

/* 9. Report: Streamed for a continuation (or the very first watermark),
 * Restarted when the stream started over from a new generation. */
