/*
 * The scan: ring slots reserved, parts published and collected in order
 * (part_done), merged along the checksum chain, a re-base's snapshot, and
 * what of it all is durable (settle).
 */
#include "stream_internal.h"

void part_done(void *arg, uint32_t idx, const struct ws_pipe_desc *d)
{
	struct ws_stream *st = arg;
	uint32_t i = idx - st->at.part_base;
	if (i >= st->at.part_count)
		return;
	struct ws_part_result *res = &st->call.parts[i].res;
	res->done = true;
	res->rc = d->rc;
	st->call.throttle += d->throttle_retries;
	if (d->rc && d->why[0] && !st->at.upload_why[0]) {
		snprintf(st->at.upload_why_key, sizeof(st->at.upload_why_key), "%s", d->key);
		snprintf(st->at.upload_why, sizeof(st->at.upload_why), "%s", d->why);
	}
	/* The event channel's Changed slices come from this very read, in
	 * WAL order (slots are collected in publish order), while the frames
	 * are still in their slot: no second read of the WAL. */
	if (st->ev_tap && d->checked)
		ws_ev_tap_slot(st->ev_tap, d, ws_pipe_slot(st->pipe, idx));
	if (d->checked) {
		struct ws_fmt_objref *ref = &res->ref;
		res->chk = d->chk;
		ref->first = d->batch.first_frame;
		ref->count = d->chk.ship;
		ref->length = d->hdr_len + d->payload_len;
		/* The real key, for the manifest, or for the message that names
		 * the upload that failed. */
		if (d->chk.ship && !d->chk.dropped)
			snprintf(ref->key, sizeof(ref->key), "%s", d->key);
		if (d->rc == 0 && d->chk.ship)
			ref->xxh = d->hdr_xxh;
		if (d->chk.dropped || !d->chk.ship)
			return; /* nothing was sent */
		if (d->hold && d->rc == 0) {
			/* Kept in its slot for the manifest, which carries it. */
			ref->key[0] = '\0';
			st->at.inl_held = true;
			st->at.inl_idx = idx;
			return;
		}
	}
	if (d->rc == 0) {
		st->call.report.puts++;
		st->call.report.bytes += d->hdr_len + d->payload_len;
	}
}

/*
 * A free ring slot for the next part. Under `shed` a full ring is the sink
 * not keeping up: no wait, -EAGAIN. Otherwise wait (block and throttle):
 * the uploader frees slots as the sink takes them, or as their bounded
 * retries run out.
 */
static int reserve_slot(struct ws_stream *st, uint32_t *idx)
{
	int rc = room_part(st, st->at.part_count);
	if (rc == WS_ETOOBIG)
		return ws_fail(rc, "tenant %s: more than %u objects in one call; raise batch_bytes_max", st->tenant,
			       MAX_PARTS);
	if (rc)
		return ws_fail(rc, "tenant %s: no memory for the call's %u objects", st->tenant, st->at.part_count + 1);
	return ws_pipe_reserve(st->pipe, st->at.shed_nowait ? 0 : -1, idx);
}

/*
 * Publishing a batch or snapshot part whose payload is already in ring
 * slot idx: its header travels in the descriptor, the payload goes to the
 * sink straight from the slot. The object is named and referenced by its
 * header hash, which covers the payload hash: the payload is hashed once.
 * publish_begin: the fault site and the slot's policy.
 */
static int publish_begin(struct ws_stream *st, struct ws_pipe_desc *d, const struct ws_fmt_objref *ref,
			 const char *fault_site, bool checked)
{
	int rc = WS_FAULT(fault_site);
	if (rc)
		return ws_fail(rc, "tenant %s: injected fault before uploading %s", st->tenant, ref->key);
	/* Under the application's write lock a struggling sink is not
	 * waited out (block): the call fails, the lock goes, the next call
	 * (unlocked) waits. */
	d->policy = st->call.locked && st->policy == WS_POLICY_BLOCK ? WS_POLICY_THROTTLE : st->policy;
	d->checked = checked;
	return 0;
}

/* publish_end: the part joins the call's, the slot goes to the pipe. */
static int publish_end(struct ws_stream *st, uint32_t idx, struct ws_pipe_desc *d, const struct ws_fmt_objref *ref,
		       size_t payload_len, const struct ws_part *info)
{
	uint64_t used;
	int rc;
	d->chk.dropped = false;
	d->rc = 0;
	d->throttle_retries = 0;
	/* Parts and ring slots go in step: part i of this call is ring slot
	 * part_base + i, which is how part_done finds it. */
	WS_ASSERT(st->at.part_count < MAX_PARTS && idx == st->at.part_base + st->at.part_count);
	st->call.parts[st->at.part_count] = *info;
	st->call.parts[st->at.part_count].res.done = false;
	st->at.part_count++;
	used = st->pipe->outstanding + payload_len; /* a checked batch: what it may hold */
	if (used > st->at.high_water)
		st->at.high_water = used;
	if ((rc = WS_FAULT("stream.ring_handover")) != 0)
		return ws_fail(rc, "tenant %s: injected fault publishing %s", st->tenant, ref->key);
	ws_pipe_publish(st->pipe);
	return 0;
}

/* A checked batch: its fields were set by the tail (ws_pipe_describe_batch),
 * its results by whichever thread read it. */
static int publish_batch(struct ws_stream *st, uint32_t idx, size_t payload_len, const struct ws_part *info)
{
	const struct ws_fmt_objref *ref = &info->res.ref;
	struct ws_pipe_desc *d = ws_pipe_desc(st->pipe, idx);
	int rc = publish_begin(st, d, ref, "stream.before_batch_put", true);
	if (rc)
		return rc;
	WS_ASSERT(!info->snap && d->batch.first_frame == ref->first);
	return publish_end(st, idx, d, ref, payload_len, info);
}

/* A snapshot part: sent as it is, under the header given (from the
 * slot's seal buffer when sealed). */
static int publish_snap(struct ws_stream *st, uint32_t idx, const uint8_t *hdr, size_t hdr_len, size_t payload_len,
			bool sealed, const struct ws_part *info)
{
	const struct ws_fmt_objref *ref = &info->res.ref;
	struct ws_pipe_desc *d = ws_pipe_desc(st->pipe, idx);
	int rc = publish_begin(st, d, ref, "stream.before_snapshot_put", false);
	if (rc)
		return rc;
	WS_ASSERT(info->snap && hdr_len <= sizeof(d->hdr));
	snprintf(d->key, sizeof(d->key), "%s", ref->key);
	if (hdr_len)
		memcpy(d->hdr, hdr, hdr_len);
	d->hdr_len = (uint32_t)hdr_len;
	d->payload_len = payload_len;
	d->delegated = false;
	d->hold = false;
	d->seal = NULL;
	d->sealed = sealed;
	return publish_end(st, idx, d, ref, payload_len, info);
}

/* ---- the scan --------------------------------------------------------- */

/*
 * Put the parts of a checked scan in chain order: starting from the cursor
 * the call began with, each slot that followed an unbroken chain extends
 * it by its valid frames and commits; the first slot that did not reach
 * its end (or failed) ends it, and every later slot (read ahead of knowing
 * that, never sent) is dropped with the slots that hold nothing to send.
 * Each kept part then carries the cursor's commit after it, as settle
 * expects.
 */
static int merge_checked(struct ws_stream *st, struct scan *sc, uint32_t first_part)
{
	uint32_t keep_parts = first_part, keep_refs = first_part < st->at.part_count ? st->call.parts[first_part].ref : 0;
	bool chain = true;
	int read_rc = 0;
	uint64_t read_at = 0;

	ws_pipe_drain(st->pipe);
	for (uint32_t i = first_part; i < st->at.part_count; i++) {
		struct ws_part pt = st->call.parts[i];
		const struct ws_wal_run *run = &pt.res.chk.run;
		const bool read = pt.res.done && pt.res.chk.filled;
		if (pt.res.chk.dropped)
			chain = false; /* the upload side saw the chain end before it */
		if (!chain)
			continue;
		/* The chain reached a slot the upload thread could not read:
		 * where the WAL's commits end is unknown, and the call must fail
		 * (ending the chain there would read as "nothing more", an Empty
		 * or a complete tail, and let walship's WAL checkpoint copy the
		 * unread commits away). */
		if (pt.res.done && !pt.res.chk.filled && pt.res.rc) {
			read_rc = pt.res.rc;
			read_at = pt.res.ref.first;
			chain = false;
			continue;
		}
		/* A slot that is not the tail's first took its seed from the
		 * file, read at another moment than the slot before it: SQLite
		 * rewrites the frames of a transaction that spilled, with new
		 * checksums, when it commits. Only a seed equal to where the
		 * chain so far ended continues it (invariant 11); the slot
		 * and everything after it are another chain's, never shipped. */
		if (read && (run->seed[0] != sc->cur.cksum[0] || run->seed[1] != sc->cur.cksum[1])) {
			ws_debug("tenant %s: slot at frame %" PRIu64 " does not continue the checksum chain read "
				 "before it (rewritten meanwhile); the chain ends at frame %" PRIu64,
				 st->tenant, run->first_frame, sc->cur.next_frame - 1);
			chain = false;
			continue;
		}
		/* What the slot's reader found holds whether or not its upload
		 * then failed (settle decides about that). */
		if (read) {
			WS_ASSERT(run->first_frame == sc->cur.next_frame);
			if (run->valid > 0) {
				sc->cur.next_frame = run->first_frame + run->valid;
				sc->cur.cksum[0] = run->end_cksum[0];
				sc->cur.cksum[1] = run->end_cksum[1];
			}
			if (run->last_commit) {
				sc->cur.last_commit = run->last_commit;
				sc->cur.commit_cksum[0] = run->commit_cksum[0];
				sc->cur.commit_cksum[1] = run->commit_cksum[1];
				sc->cur.commit_db_size = run->commit_db_size;
			}
		}
		pt.res.last_commit = sc->cur.last_commit;
		pt.res.commit_cksum[0] = sc->cur.commit_cksum[0];
		pt.res.commit_cksum[1] = sc->cur.commit_cksum[1];
		pt.res.commit_db_size = sc->cur.commit_db_size;
		if (!read || !pt.res.chk.cont)
			chain = false;
		if (read && pt.res.chk.ship == 0)
			continue; /* nothing was sent for it */
		/* Kept parts stay in order, each naming a batch at or after the last
		 * kept one's; the batch it names travels with it (res.ref). */
		WS_ASSERT(!pt.snap && keep_refs <= pt.ref && pt.ref < st->at.batch_count);
		pt.ref = keep_refs++;
		st->call.parts[keep_parts++] = pt;
	}
	st->at.part_count = keep_parts;
	st->at.batch_count = keep_refs;
	/* Every part so far is collected; the next slot published fills the
	 * next part (part_done maps ring index - part_base to a part). */
	st->at.part_base = st->pipe->ring.head - st->at.part_count;
	if (read_rc)
		return ws_fail(read_rc, "tenant %s: read %s from frame %" PRIu64 " (upload thread): %s (nothing "
			       "acknowledged)", st->tenant, st->wal_path, read_at, ws_strerror(read_rc));
	return 0;
}

/* The most an inline batch of plain_len bytes of frames may hold, sealed
 * or not (its header and the codec's worst case). */
static uint64_t hold_bytes(const struct ws_stream *st, uint64_t plain_len)
{
	if (!ws_seal_on(&st->seal))
		return plain_len + WS_BATCH_HDR_SIZE;
	return ws_seal_bound(&st->seal, (size_t)plain_len) + WS_BATCH_HDR2_SIZE;
}

/* ---- read ahead (struct ws_stream_ahead) ------------------------------ */

/* The most frames a first slot holds: one slot, one batch (batch_frames_max). */
static uint32_t slot_frames_max(const struct ws_stream *st, uint32_t page_size)
{
	size_t n = st->pipe->ring.slot_bytes / ws_wal_frame_size(page_size);
	if (st->batch_frames_max && st->batch_frames_max < n)
		n = st->batch_frames_max;
	return n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
}

void ahead_arm(struct ws_stream *st, const struct scan *sc, uint64_t last)
{
	struct ws_stream_ahead *a = &st->ahead;
	ahead_drop(st);
	if (sc->gen.wal_magic == 0 || last == 0)
		return;
	a->gen = sc->gen;
	a->first = last + 1;
	a->seed[0] = a->end[0] = sc->cur.commit_cksum[0];
	a->seed[1] = a->end[1] = sc->cur.commit_cksum[1];
	a->cap = slot_frames_max(st, sc->gen.page_size);
	a->armed = true;
}

void ahead_drop(struct ws_stream *st)
{
	st->ahead.armed = false;
	st->ahead.n = 0;
	ws_buf_reset(&st->ahead.buf);
}

int ws_stream_read_ahead(struct ws_stream *st, struct ws_ev_tap *tap, bool *under_way)
{
	struct ws_stream_ahead *a = &st->ahead;
	const uint32_t ps = a->gen.page_size, fsz = ws_wal_frame_size(ps);
	const uint64_t next = a->first + a->n;
	uint32_t mx;
	int rc;

	*under_way = false;
	/* The tap must stand where these frames begin: it emitted every frame
	 * before them, of this generation (a tap anywhere else waits for the
	 * tail, which knows how its frames follow the tap's). */
	if (!a->armed || !tap || tap->faulted || st->txn.held < 0 || st->io.wal_fd < 0 || tap->salt1 != a->gen.salt1 ||
	    tap->salt2 != a->gen.salt2 || tap->spec_next < next || tap->commit + 1 > next)
		return 0;
	/* Committed frames only: the wal-index's, of this generation (our read
	 * mark keeps the WAL from restarting under them). */
	if (!wal_index_mx(st, a->gen.salt1, a->gen.salt2, &mx) || a->n >= a->cap)
		return 0;
	/* The WAL runs past the wal-index: most often a commit under way (its
	 * writer syncs the frames before it writes the wal-index, and only
	 * the frames wake the shard): look again soon (wal_index_bound). */
	*under_way = file_size(st->io.wal_fd) > ws_wal_frame_offset(ps, (uint64_t)mx + 1);
	if (mx < next)
		return 0;
	uint64_t want = (uint64_t)mx - next + 1;
	if (want > a->cap - a->n)
		want = a->cap - a->n;
	rc = ws_buf_reserve(&a->buf, (size_t)want * fsz);
	if (rc)
		return rc;
	uint8_t *frames = a->buf.data + (size_t)a->n * fsz;
	if ((rc = WS_FAULT("engine.read_ahead")) != 0)
		return rc;
	ssize_t got = pread(st->io.wal_fd, frames, (size_t)want * fsz, (off_t)ws_wal_frame_offset(ps, next));
	if (got < 0)
		return -errno;
	struct ws_wal_run run = { .first_frame = next, .seed = { a->end[0], a->end[1] } };
	(void)ws_wal_run_check(&run, a->gen.wal_magic == WS_WAL_MAGIC_BE, ps, a->gen.salt1, a->gen.salt2, frames,
			       (uint32_t)((size_t)got / fsz), NULL);
	if (run.last_commit < next)
		return 0; /* no whole transaction yet */
	/* Up to its last commit: what a tail would ship of them. */
	run.valid = (uint32_t)(run.last_commit - next + 1);
	ws_ev_tap_frames(tap, &a->gen, &run, frames);
	a->n += run.valid;
	a->buf.len = (size_t)a->n * fsz;
	a->end[0] = run.commit_cksum[0];
	a->end[1] = run.commit_cksum[1];
	return (int)run.valid;
}

/* The frames read ahead that this scan's first slot, at frame next with
 * seed seed, takes (0: none). */
static uint32_t ahead_take(const struct ws_stream *st, const struct scan *sc, enum at_limit at_limit)
{
	const struct ws_stream_ahead *a = &st->ahead;
	if (!a->armed || a->n == 0 || at_limit == LIMIT_REBASE || sc->cur.next_frame != a->first ||
	    sc->cur.cksum[0] != a->seed[0] || sc->cur.cksum[1] != a->seed[1] || !ws_fmt_gen_equal(&sc->gen, &a->gen) ||
	    a->n > slot_frames_max(st, sc->gen.page_size))
		return 0;
	return a->n;
}

/*
 * The scan when every slot is checked where it is read (pipe.h): the tail
 * reads and checks every other slot itself and hands the others to the
 * upload thread to read and check, assuming the chain goes on through
 * them; the in-order merge sorts out where it really ended. Stops at the
 * end of the file, at a slot of its own that ended the chain, or (shed)
 * at a full ring.
 */
int scan_checked(struct ws_stream *st, struct scan *sc, uint64_t wal_bytes, enum at_limit at_limit)
{
	const uint32_t fsz = ws_wal_frame_size(sc->gen.page_size);
	const size_t slot_frames = st->pipe->ring.slot_bytes / fsz;
	size_t per_chunk = slot_frames;
	const uint32_t first_part = st->at.part_count;
	uint64_t next = sc->cur.next_frame;
	/* Frames read ahead of this tail: its first slot, from memory. They
	 * are committed and checked: the scan goes at least to their end,
	 * even past the size this call measured before they were read. */
	const uint32_t ahead = ahead_take(st, sc, at_limit);
	if (ahead && ws_wal_frame_offset(sc->gen.page_size, next + ahead) > wal_bytes)
		wal_bytes = ws_wal_frame_offset(sc->gen.page_size, next + ahead);

	if (st->batch_frames_max && st->batch_frames_max < per_chunk)
		per_chunk = st->batch_frames_max;
	const uint64_t start = ws_wal_frame_offset(sc->gen.page_size, next);
	const uint64_t frames_total = start < wal_bytes ? (wal_bytes - start) / fsz : 0;
	/* One call names at most MAX_REFS batches. A backlog larger than that
	 * many batches of batch_frames_max is read in larger ones (up to a
	 * slot): the setting bounds how long a frame waits in a batch, and a
	 * backlog has waited already. Otherwise a tail of many small batches
	 * would fail on every retry, and the tenant never ship again. */
	const uint64_t refs_left = MAX_REFS - st->at.batch_count;
	if (per_chunk < slot_frames && (uint64_t)per_chunk * refs_left < frames_total) {
		uint64_t need = (frames_total + refs_left - 1) / refs_left;
		per_chunk = need < slot_frames ? (size_t)need : slot_frames;
	}
	const bool multi = frames_total > per_chunk;
	/* A tail this small sends its one batch inside its manifest: two
	 * writes instead of three. Never in a re-base, whose snapshot parts
	 * reserve slots after the scan. */
	const bool hold = st->inline_max && !multi && at_limit != LIMIT_REBASE &&
			  hold_bytes(st, frames_total * fsz) <= st->inline_max;
	/* Batches of their own: the fencing read comes before them. */
	if (!hold) {
		int rc = fence_before_upload(st);
		if (rc)
			return rc;
	}
	for (uint32_t k = 0;; k++) {
		uint64_t off = ws_wal_frame_offset(sc->gen.page_size, next);
		struct ws_pipe_desc *d;
		struct ws_part part;
		uint32_t idx;
		size_t want;
		bool own_cont = true;
		int rc;

		if (off + fsz > wal_bytes)
			break;
		want = per_chunk;
		if ((wal_bytes - off) / fsz < want)
			want = (size_t)((wal_bytes - off) / fsz);
		/* Whole frames, inside the file as measured and inside one slot. */
		WS_ASSERT(want > 0 && want <= slot_frames && off + want * fsz <= wal_bytes);
		/* The work bound: what is published so far ships now; the rest
		 * is the next tail's (never the first slot: a tail makes progress). */
		if (k > 0 && st->at.tail_stop_ms && ws_mono_ms() >= st->at.tail_stop_ms) {
			rc = WS_FAULT("stream.tail_bound");
			if (rc)
				return ws_fail(rc, "tenant %s: injected fault at the tail's work bound", st->tenant);
			st->at.early_stop = true;
			break;
		}
		/* As many batches as one manifest names: a backlog beyond that
		 * (a long outage under small batches, walship's read mark holding
		 * the WAL) ships in prefixes, one per call, up to the last commit
		 * read, and the next call goes on; a flush or the final drain goes
		 * on to the end. A re-base must reach its read mark in one
		 * manifest (the image may hold pages of every frame below it),
		 * and a call must make progress. */
		int lim = st->at.batch_count >= MAX_REFS ? WS_ETOOBIG : k > 0 ? WS_FAULT("stream.batch_limit") : 0;
		if (lim) {
			if (at_limit == LIMIT_STOP && k > 0) {
				st->at.early_stop = true;
				break;
			}
			if (lim != WS_ETOOBIG)
				return ws_fail(lim, "tenant %s: injected fault at the call's batch limit", st->tenant);
			return ws_fail(WS_ETOOBIG, "tenant %s: the WAL holds more than %u batches of %zu frames "
				       "(batch_bytes_max)%s; raise batch_bytes_max", st->tenant, MAX_REFS, slot_frames,
				       at_limit == LIMIT_REBASE ? " to re-base from" : " in one transaction");
		}
		rc = reserve_slot(st, &idx);
		if (rc == -EAGAIN) {
			st->at.shed_stop = true;
			break;
		}
		if (rc)
			return rc;
		if ((rc = room_batch(st, st->at.batch_count)) != 0)
			return ws_fail(rc, "tenant %s: no room for batch %u of the call", st->tenant, st->at.batch_count + 1);
		d = ws_pipe_desc(st->pipe, idx);
		ws_pipe_describe_batch(d, &(struct ws_pipe_batch_spec){
			.gen = sc->gen,
			.first_frame = next,
			.seed_cksum = { sc->cur.cksum[0], sc->cur.cksum[1] },
			.first_slot = k == 0,
			.hold = hold && k == 0,
			/* The pipe decides which thread reads the slot; the
			 * first holds the frames read ahead, copied here (the
			 * rest of it read from the WAL): so a tail of a few
			 * commits stays one slot, inline in its manifest. */
			.delegated = !(k == 0 && ahead) && !ws_pipe_reads_here(st->pipe, k, multi),
			.wal_fd = st->io.wal_fd,
			.wal_off = off,
			.want = (uint32_t)want,
			.per_chunk = (uint32_t)per_chunk,
			.src = k == 0 && ahead ? st->ahead.buf.data : NULL,
			.src_frames = k == 0 && ahead ? (ahead < want ? ahead : (uint32_t)want) : 0,
			.key_prefix = sc->prefix,
			.seal = &st->seal,
			/* The key carries the manifest's watermark sequence, as a
			 * snapshot part's does: a later chain that re-ships the same
			 * frames (a re-base of a WAL an older chain shipped) never
			 * names an object of that older chain, which retention may
			 * be deleting. */
			.key_seq = (st->mark.have ? st->mark.wm.seq : 0) + 1,
		});
		memset(&part, 0, sizeof(part));
		part.res.ref.first = next;
		/* Named for messages until the reader sets the real key. */
		if (snprintf(part.res.ref.key, sizeof(part.res.ref.key), "%s/b%016" PRIx64, sc->prefix, next) >=
		    (int)sizeof(part.res.ref.key))
			return ws_fail(WS_ETOOBIG, "tenant %s: batch key too long", st->tenant);
		part.ref = st->at.batch_count;
		st->at.batch_count++;
		if (!d->delegated) {
			rc = ws_pipe_fill(st->pipe, st->io.reader, st->io.wal_slot, st->io.ring_off, idx, d);
			if (rc)
				return ws_fail(rc == WS_ETOOBIG ? rc : -EIO, "tenant %s: read %s at %" PRIu64 ": %s",
					       st->tenant, st->wal_path, off, ws_strerror(rc));
			own_cont = d->chk.cont;
		}
		rc = publish_batch(st, idx, want * fsz, &part);
		if (rc)
			return rc;
		if (!own_cont)
			break; /* the chain ended in a slot read here */
		next += want;
	}
	return merge_checked(st, sc, first_part);
}

/*
 * After a shed stop: walk the rest of the chain (reading into the small
 * area, uploading nothing) to learn the last committed frame this call
 * dropped, so the outcome names the range exactly.
 */
int scan_rest(struct ws_stream *st, struct scan *sc, uint64_t wal_bytes)
{
	const uint32_t fsz = ws_wal_frame_size(sc->gen.page_size);
	const size_t per_chunk = st->io.small_bytes / fsz;
	uint8_t *buf = ws_reader_buf(st->io.reader) + st->io.small_off;

	for (;;) {
		uint64_t off = ws_wal_frame_offset(sc->gen.page_size, sc->cur.next_frame);
		size_t want = per_chunk, valid = 0;
		ssize_t got;
		if (off + fsz > wal_bytes)
			return 0;
		if ((wal_bytes - off) / fsz < want)
			want = (size_t)((wal_bytes - off) / fsz);
		got = ws_reader_read(st->io.reader, st->io.wal_slot, off, st->io.small_off, want * fsz);
		if (got < 0)
			return ws_fail(-EIO, "tenant %s: read %s at %" PRIu64 ": %s", st->tenant, st->wal_path,
				       off, ws_strerror((int)got));
		want = (size_t)got / fsz;
		while (valid < want && ws_wal_cursor_step(&sc->cur, buf + valid * fsz, NULL) == 1)
			valid++;
		if (valid < want || want < per_chunk)
			return 0;
	}
}

/* A snapshot part's header, and its payload's stored length: the pages in
 * the slot as they are (version 1), or sealed into its seal buffer. */
static int snap_object(struct ws_stream *st, uint32_t idx, struct ws_fmt_snap *s, const uint8_t *pages,
		       uint8_t hdr[WS_OBJ_HDR_MAX], size_t *hdr_len, size_t *stored)
{
	const size_t len = ws_fmt_snap_plain_len(s);
	if (!ws_seal_on(&st->seal)) {
		*hdr_len = ws_fmt_snap_encode_hdr(s, hdr);
		*stored = len;
		return 0;
	}
	return ws_seal_snap(&st->seal, s, &(struct iovec){ (void *)(uintptr_t)pages, len }, 1, hdr, hdr_len,
			    ws_pipe_seal_buf(st->pipe, idx), st->pipe->seal_slot_bytes, stored);
}

/*
 * The part of pages first..first+count-1, its header hdr as this re-base
 * would upload it: when the earlier image (st->reuse) has a part of
 * exactly these pages whose header hashes as this one and whose length is
 * this one's, its ref is this part's and nothing is uploaded
 * (snap_reuse.c). A version 1 header, and a version 2 one compressed
 * without a cipher (zstd makes the same bytes of the same pages at the same
 * level), name the pages alone; an encrypted part carries a fresh nonce and
 * never matches, so an encrypting stream loads no earlier image.
 */
static bool reuse_part(struct ws_stream *st, uint64_t first, size_t count, const uint8_t *hdr, size_t hdr_len,
		       size_t stored)
{
	const struct ws_fmt_objref *old = ws_snap_prev_find(&st->reuse, first, count);
	uint64_t xxh;
	if (!old || !ws_fmt_obj_hdr_hash(hdr, hdr_len, &xxh) || xxh != old->xxh || old->length != hdr_len + stored)
		return false;
	/* room_snap was made for this index by the caller. */
	st->call.snaps[st->at.snap_count++] = *old;
	st->at.snap_reused++;
	return true;
}

/* Upload the raw database file as snapshot parts (REBASE); db_pages at the cut. */
int upload_snapshot(struct ws_stream *st, const struct scan *sc, uint32_t db_pages)
{
	const uint32_t ps = sc->gen.page_size;
	const size_t slot_pages = st->pipe->ring.slot_bytes / ps;
	uint64_t file_bytes, file_pages, pages, reused_bytes = 0;
	size_t per_part;
	int rc0;
	/* The image is exact only under the read mark the scan was made under. */
	WS_ASSERT(st->txn.held >= 0);
	rc0 = db_size(st, &file_bytes);
	if (rc0)
		return rc0;
	file_pages = file_bytes / ps;
	pages = file_pages < db_pages ? file_pages : db_pages;
	per_part = ws_snap_grid_pages(pages, ps, (uint32_t)slot_pages, MAX_SNAPS);

	for (uint64_t p = 0; p < pages;) {
		size_t n = per_part;
		ssize_t got;
		struct ws_fmt_snap s;
		struct ws_fmt_objref *ref;
		struct ws_part part;
		uint8_t hdr[WS_OBJ_HDR_MAX];
		size_t hdr_len, stored;
		uint8_t *buf;
		uint32_t idx;
		int rc;

		if (pages - p < n)
			n = (size_t)(pages - p);
		rc = reserve_slot(st, &idx);
		if (rc == -EAGAIN) {
			st->at.shed_stop = true;
			return 0;
		}
		if (rc)
			return rc;
		buf = ws_pipe_slot(st->pipe, idx);
		got = db_read(st, p * ps, n * ps, buf);
		if (got < 0)
			return ws_fail((int)got, "tenant %s: read %s", st->tenant, st->db_path);
		n = (size_t)got / ps;
		WS_ASSERT(n <= per_part); /* a part fills one slot at most */
		if (n == 0)
			break; /* the file shrank under us; frames carry the rest */
		rc = room_snap(st, st->at.snap_count);
		if (rc == WS_ETOOBIG)
			return ws_fail(rc, "tenant %s: the database needs more than %u snapshot parts of %zu pages "
				       "(batch_bytes_max); raise batch_bytes_max", st->tenant, MAX_SNAPS, per_part);
		if (rc)
			return ws_fail(rc, "tenant %s: no memory for snapshot part %u", st->tenant, st->at.snap_count + 1);
		memset(&s, 0, sizeof(s));
		s.page_size = ps;
		s.first_page = (uint32_t)(p + 1);
		s.page_count = (uint32_t)n;
		s.payload_xxh = ws_xxh64(buf, n * ps);
		rc = snap_object(st, idx, &s, buf, hdr, &hdr_len, &stored);
		if (rc)
			return ws_fail_wrap(rc, "tenant %s: seal snapshot part of pages %" PRIu64 "+%zu", st->tenant,
					    p + 1, n);
		if (reuse_part(st, p + 1, n, hdr, hdr_len, stored)) {
			/* The slot is taken again for the next part. */
			reused_bytes += (uint64_t)n * ps;
			p += n;
			continue;
		}
		memset(&part, 0, sizeof(part));
		ref = &part.res.ref;
		ref->first = p + 1;
		ref->count = n;
		const bool named = ws_fmt_obj_hdr_hash(hdr, hdr_len, &ref->xxh);
		WS_ASSERT(named); /* a header just encoded names its hash */
		ref->length = hdr_len + stored;
		/* The key carries the manifest's watermark sequence: a later
		 * REBASE of the same bytes (a database without WAL between runs)
		 * never re-uses a part of an older chain, which retention may be
		 * deleting as that chain's history. */
		if (snprintf(ref->key, sizeof(ref->key), "%s/s%016" PRIx64 "-%016" PRIx64 "/%08" PRIx64 "-%016" PRIx64,
			     sc->prefix, sc->cur.last_commit, (st->mark.have ? st->mark.wm.seq : 0) + 1, p + 1,
			     ref->xxh) >= (int)sizeof(ref->key))
			return ws_fail(WS_ETOOBIG, "tenant %s: snapshot key too long", st->tenant);
		part.snap = true;
		part.ref = st->at.snap_count;
		st->at.snap_count++;
		rc = publish_snap(st, idx, hdr, hdr_len, stored, ws_seal_on(&st->seal), &part);
		if (rc)
			return rc;
		p += n;
	}
	if (st->reuse.have)
		ws_info("tenant %s: re-base names %u of %u parts (%" PRIu64 " of %" PRIu64 " bytes) of the image of %s "
			"again", st->tenant, st->at.snap_reused, st->at.snap_count, reused_bytes, pages * ps,
			st->reuse.base.key);
	return 0;
}

/* Batch k of the call: after the merge, the kept batches are the first
 * parts, in order, each at its place. */
static const struct ws_part *batch_part(const struct ws_stream *st, uint32_t k)
{
	const struct ws_part *pt = &st->call.parts[k];
	WS_ASSERT(k < st->at.part_count && !pt->snap && pt->ref == k);
	return pt;
}

/*
 * After the drain: what of this call is durable. Returns 0 to go on with
 * the manifest (*last and *db_pages possibly cut back to the persisted
 * prefix), 1 for Shed (nothing usable persisted; *last is the range
 * dropped), or an error.
 */
int settle(struct ws_stream *st, struct scan *sc, uint32_t kind, uint64_t *last, uint32_t *db_pages)
{
	const struct ws_part *keep = NULL;
	const char *bad_key = NULL;
	bool broken = false, snap_bad = false;
	uint32_t prefix = 0;
	int first_err = 0;

	for (uint32_t i = 0; i < st->at.part_count; i++) {
		const struct ws_part *pt = &st->call.parts[i];
		int r = pt->res.done ? pt->res.rc : -EIO;
		if (r && !first_err) {
			first_err = r;
			bad_key = pt->res.ref.key;
		}
		if (pt->snap) {
			snap_bad |= r != 0;
			continue;
		}
		if (!broken && r == 0) {
			prefix = pt->ref + 1;
			keep = pt;
		} else {
			broken = true;
		}
	}
	if (first_err && (st->policy != WS_POLICY_SHED || st->drain || !ws_err_transient(first_err)))
		return ws_fail(first_err, "tenant %s: upload %s: %s (policy %s%s; nothing acknowledged)", st->tenant,
			       bad_key, strcmp(bad_key, st->at.upload_why_key) == 0 ? st->at.upload_why : ws_strerror(first_err),
			       ws_policy_name(st->policy),
			       st->call.locked ? ", not waited out under the database's write lock" : "");
	if (first_err || st->at.shed_stop) {
		uint64_t range_last = *last;
		uint64_t kept = keep ? keep->res.last_commit : 0;
		if (kind == WS_MANIFEST_REBASE || snap_bad || kept < sc->first_frame) {
			/* Nothing usable persisted: no manifest, no watermark. */
			st->at.frames_shed = range_last >= sc->first_frame ? range_last - sc->first_frame + 1 : 0;
			ws_info("tenant %s: shed frames %" PRIu64 "..%" PRIu64 " (%s)", st->tenant, sc->first_frame,
				range_last, first_err ? ws_strerror(first_err) : "spill ring full");
			return 1;
		}
		st->at.frames_shed = range_last - kept;
		st->at.batch_count = prefix;
		sc->cur.last_commit = kept;
		sc->cur.commit_cksum[0] = keep->res.commit_cksum[0];
		sc->cur.commit_cksum[1] = keep->res.commit_cksum[1];
		sc->cur.commit_db_size = keep->res.commit_db_size;
		*last = kept;
		*db_pages = keep->res.commit_db_size;
		ws_info("tenant %s: shipped frames %" PRIu64 "..%" PRIu64 ", shed %" PRIu64 " (%s)", st->tenant,
			sc->first_frame, kept, st->at.frames_shed, first_err ? ws_strerror(first_err) : "spill ring full");
	}
	/* Batches that extend past the last commit stay unnamed by the manifest;
	 * drop trailing batches that contain no committed frame at all. */
	WS_ASSERT(st->at.batch_count <= st->at.part_count);
	while (st->at.batch_count > 0 && batch_part(st, st->at.batch_count - 1)->res.ref.first > *last)
		st->at.batch_count--;
	return 0;
}

/*
 * The manifest's lists of this call's batches and snapshot parts, from the
 * parts' results: batch k (k < batch_count) and every snapshot part, each
 * at its place (ws_part.ref).
 */
void name_parts(struct ws_stream *st)
{
	uint32_t snaps = 0;
	for (uint32_t k = 0; k < st->at.batch_count; k++)
		st->call.batches[k] = batch_part(st, k)->res.ref;
	for (uint32_t i = st->at.batch_count; i < st->at.part_count; i++) {
		const struct ws_part *pt = &st->call.parts[i];
		if (!pt->snap)
			continue; /* a batch settle left unnamed */
		WS_ASSERT(pt->ref < st->at.snap_count);
		st->call.snaps[pt->ref] = pt->res.ref;
		snaps++;
	}
	/* every snapshot part named, once: uploaded, or the earlier image's */
	WS_ASSERT(snaps + st->at.snap_reused == st->at.snap_count);
}

