/*
 * tail_frames: steps 1 to 6 and 9, the call's driver and its retries
 * (the steps are listed in stream_internal.h).
 */
#include "stream_internal.h"
#include "adapt.h"

/* Empty: nothing new since the watermark (or only an uncommitted transaction). */
static int done_empty(const struct ws_stream *st, struct ws_outcome *out)
{
	memset(out, 0, sizeof(*out));
	out->kind = WS_OUTCOME_EMPTY;
	if (st->mark.have)
		ws_wm_to_public(&st->mark.wm, &out->u.empty.watermark);
	fill_rpo(st, &out->u.empty.rpo);
	return TAIL_DONE;
}

static int done_fenced(const struct ws_stream *st, struct ws_outcome *out)
{
	fill_fenced(st, out);
	return TAIL_DONE;
}

/* 1. The live generation: the WAL header, or "none" for an empty or absent WAL. */
static int step_read_generation(struct ws_stream *st, struct tail *t)
{
	int rc;
	if (access(st->db_path, F_OK) != 0)
		return ws_fail(-ENOENT, "tenant %s: database %s vanished", st->tenant, st->db_path);
	/* (The sites are the held look's: the unheld one has its own.) */
	if (!t->unheld && (rc = WS_FAULT("stream.before_wal_header")) != 0)
		return ws_fail(rc, "tenant %s: injected fault before reading the WAL header", st->tenant);
	rc = file_refresh(st, st->wal_path, &st->io.wal_fd, &st->io.wal_slot);
	if (rc && rc != -ENOENT)
		return rc;
	t->wal_bytes = file_size(st->io.wal_fd);
	if (t->wal_bytes != 0) {
		rc = read_wal_gen(st, &t->wh);
		if (rc == -ENOENT) {
			/* No frame SQLite would read: the database file alone. */
			if (t->unheld)
				return 0; /* said by the held look that follows */
			ws_warn("tenant %s: %s (%" PRIu64 " bytes) holds no valid WAL header and SQLite's wal-index "
				"names no frame: read as an empty WAL, as SQLite reads it (the database file alone)",
				st->tenant, st->wal_path, t->wal_bytes);
			t->wal_bytes = 0;
		} else if (rc) {
			return rc;
		} else if ((rc = wal_index_bound(st, &t->wh, &t->wal_bytes)) != 0) {
			return rc;
		}
	}
	if (t->wal_bytes == 0 && t->unheld)
		return 0; /* the database file is read through a connection */
	if (t->wal_bytes == 0) {
		uint32_t ps, pages;
		rc = db_header(st, &ps, &pages);
		if (rc)
			return rc;
		t->sc.gen.page_size = ps;
	} else {
		t->sc.gen.wal_magic = t->wh.magic;
		t->sc.gen.checkpoint_seq = t->wh.checkpoint_seq;
		t->sc.gen.salt1 = t->wh.salt1;
		t->sc.gen.salt2 = t->wh.salt2;
		t->sc.gen.page_size = t->wh.page_size;
		ws_wal_cursor_init(&t->sc.cur, &t->wh);
	}
	if (!t->unheld && (rc = WS_FAULT("stream.after_wal_header")) != 0)
		return ws_fail(rc, "tenant %s: injected fault after reading the WAL header", st->tenant);
	return 0;
}

/* Start the scan over from frame 1 of the live generation (a re-base). */
static void scan_from_top(struct tail *t)
{
	t->kind = WS_MANIFEST_REBASE;
	if (t->sc.gen.wal_magic != 0)
		ws_wal_cursor_init(&t->sc.cur, &t->wh);
	t->sc.first_frame = t->sc.cur.next_frame ? t->sc.cur.next_frame : 1;
	t->sc.seed[0] = t->sc.cur.cksum[0];
	t->sc.seed[1] = t->sc.cur.cksum[1];
}

/*
 * 2. Decide continuity: from the watermark we know, how this call goes on
 * (CONTINUE: the same generation, still holding the frame we stopped at;
 * NEXT_GEN: another generation, which only our unbroken read mark proves
 * follows what we shipped; else REBASE). Decides Fenced by a watermark we
 * already hold, and Empty when nothing new is there, without a request.
 */
static int step_decide_continuity(struct ws_stream *st, struct tail *t, struct ws_outcome *out)
{
	struct scan *sc = &t->sc;
	int rc;

	t->fresh = !st->mark.loaded;
	if (t->fresh && (rc = refresh_wm(st)) != 0)
		return rc;
	/* A watermark we hold that fences us: say so before anything else,
	 * re-reading it (unless just read) so the outcome names the current
	 * owner. A takeover after our last read is found by the fencing read
	 * that comes before any upload; an idle stale owner makes no request. */
	if (mark_fenced(st)) {
		if (!t->fresh && (rc = refresh_wm(st)) != 0)
			return rc;
		return done_fenced(st, out);
	}
	/* With no WAL on either side, only the held read mark proves the
	 * database file unchanged: without it, writes may have come and been
	 * checkpointed away (a TRUNCATE, or the last connection closing). */
	bool same_gen = !st->rebase_next && st->mark.have && st->mark.wm.version >= 2 &&
			ws_fmt_gen_equal(&st->mark.wm.gen, &sc->gen) && (sc->gen.wal_magic != 0 || st->txn.continuous);
	if (same_gen && sc->gen.wal_magic != 0 && st->mark.wm.last_frame > 0) {
		/* Prove the live WAL still holds the frame we stopped at. */
		uint8_t *buf = ws_reader_buf(st->io.reader) + st->io.small_off;
		uint64_t off = ws_wal_frame_offset(sc->gen.page_size, st->mark.wm.last_frame);
		struct ws_wal_frame_hdr fh = { 0 };
		ssize_t got = ws_reader_read(st->io.reader, st->io.wal_slot, off, st->io.small_off, WS_WAL_FRAME_HDR_SIZE);
		if (got < 0)
			return ws_fail((int)got, "tenant %s: read %s", st->tenant, st->wal_path);
		if (got == (ssize_t)WS_WAL_FRAME_HDR_SIZE)
			ws_wal_frame_hdr_decode(buf, &fh);
		if (got != (ssize_t)WS_WAL_FRAME_HDR_SIZE || fh.cksum1 != st->mark.wm.end_cksum[0] ||
		    fh.cksum2 != st->mark.wm.end_cksum[1])
			same_gen = false;
	}
	if (same_gen) {
		t->kind = WS_MANIFEST_CONTINUE;
		if (sc->gen.wal_magic != 0 && st->mark.wm.last_frame > 0)
			ws_wal_cursor_resume(&sc->cur, &t->wh, st->mark.wm.last_frame + 1, st->mark.wm.end_cksum);
	} else if (!st->rebase_next && st->mark.have && st->txn.continuous &&
		   !ws_fmt_gen_equal(&st->mark.wm.gen, &sc->gen)) {
		/* A different generation is all the handover proves; the same
		 * salts with different frames would be a WAL we cannot explain. */
		t->kind = WS_MANIFEST_NEXT_GEN;
	} else {
		t->kind = WS_MANIFEST_REBASE;
	}
	sc->first_frame = sc->cur.next_frame ? sc->cur.next_frame : 1;
	sc->seed[0] = sc->cur.cksum[0];
	sc->seed[1] = sc->cur.cksum[1];
	if (t->kind == WS_MANIFEST_REBASE)
		return 0;

	/* Nothing new? Decide without a single store request. */
	if (sc->gen.wal_magic != 0) {
		uint64_t off = ws_wal_frame_offset(sc->gen.page_size, sc->cur.next_frame);
		const uint32_t fsz = ws_wal_frame_size(sc->gen.page_size);
		if (off + fsz <= t->wal_bytes) {
			struct ws_wal_cursor probe = sc->cur;
			ssize_t got = ws_reader_read(st->io.reader, st->io.wal_slot, off, st->io.small_off, fsz);
			/* A failed read proves nothing: Empty would leave the
			 * commits there unshipped with no failure to retry, and
			 * let walship's WAL checkpoint copy them away. A short one
			 * (the file changed since its size was taken): the scan
			 * finds what is there. */
			if (got < 0)
				return ws_fail((int)got, "tenant %s: read %s at %" PRIu64 ": %s (nothing acknowledged)",
					       st->tenant, st->wal_path, off, ws_strerror((int)got));
			if (got != (ssize_t)fsz ||
			    ws_wal_cursor_step(&probe, ws_reader_buf(st->io.reader) + st->io.small_off, NULL) == 1)
				return 0;
		}
	}
	return done_empty(st, out);
}

/*
 * Whether this tail may fence with its watermark's compare-and-swap
 * instead of a read: its frames look like riding inside the watermark (a
 * carried manifest: no snapshot, one inline batch, the sink holding writes
 * back or carry=always), the etag to swap on is our own last write's with
 * nothing read since (its carried manifest still in hand), and the store
 * refuses a swap once the object changed. A takeover then makes that one
 * write fail, having written nothing: Fenced. Where the guess is wrong
 * (more frames, a manifest stored after all) the read is made before the
 * first upload (fence_before_upload).
 */
static bool fence_by_cas(struct ws_stream *st, const struct tail *t)
{
	if (!st->mark.loaded || !st->mark.have || !st->mark.wrote_last || !st->mark.etag.s[0] ||
	    st->mark.own_etag_refused || !ws_store_cas_fences(st->sink->store))
		return false;
	if (t->kind == WS_MANIFEST_REBASE || !st->inline_max || st->carry.mode == WS_CARRY_NEVER ||
	    (st->carry.mode != WS_CARRY_ALWAYS && !ws_store_pressed(st->sink->store)))
		return false;
	if (st->mark.wm.carried_len && st->carry.buf.len != st->mark.wm.carried_len)
		return false; /* parked since: the carried manifest is not in hand */
	if (t->sc.gen.wal_magic == 0)
		return false;
	const uint64_t start = ws_wal_frame_offset(t->sc.gen.page_size, t->sc.first_frame);
	return start < t->wal_bytes && t->wal_bytes - start <= st->inline_max;
}

/*
 * 3. Fence: a pure read of the watermark before the first upload, so a
 * stale owner writes nothing. The watermark may have moved since step 2
 * (another writer of our own epoch, or a takeover at a lower level): the
 * decision is made again from it. A tail whose one write is the watermark
 * skips the read and fences with that write (fence_by_cas).
 */
static int step_fence(struct ws_stream *st, struct tail *t, struct ws_outcome *out)
{
	int rc;
	WS_ASSERT(st->at.part_count == 0); /* nothing uploaded before the fencing read */
	if (st->slots) {
		if ((rc = slot_fence(st, t, out)) != 0)
			return rc;
		goto decided;
	}
	if (fence_by_cas(st, t)) {
		/* What step 2 decided from is our own last write: it stands
		 * until the swap (or the read before an upload) finds otherwise. */
		st->at.fence_deferred = true;
		st->at.part_base = st->pipe->ring.head;
		if ((rc = WS_FAULT("stream.fence_by_cas")) != 0)
			return ws_fail(rc, "tenant %s: injected fault where the fencing read is skipped", st->tenant);
		goto decided;
	}
	if ((rc = WS_FAULT("stream.before_fence")) != 0)
		return ws_fail(rc, "tenant %s: injected fault before the fencing read", st->tenant);
	lane_out(st);
	rc = refresh_wm(st);
	lane_in(st);
	/* Other tails published meanwhile: this attempt's parts start here. */
	st->at.part_base = st->pipe->ring.head;
	if (rc)
		return rc;
	if (st->mark.have && fenced_by(st, &st->mark.wm))
		return done_fenced(st, out);
	if (t->kind != WS_MANIFEST_REBASE) {
		/* NEXT_GEN: continuous holds only while the watermark read now is
		 * our own last write (refresh_wm), and the live WAL must be
		 * another generation than the one it names. */
		bool still = st->mark.have &&
			     ((t->kind == WS_MANIFEST_CONTINUE && ws_fmt_gen_equal(&st->mark.wm.gen, &t->sc.gen) &&
			       st->mark.wm.last_frame + 1 == t->sc.first_frame && st->mark.wm.end_cksum[0] == t->sc.seed[0] &&
			       st->mark.wm.end_cksum[1] == t->sc.seed[1]) ||
			      (t->kind == WS_MANIFEST_NEXT_GEN && st->txn.continuous && st->mark.wm.epoch == st->epoch &&
			       st->mark.wm.pointer_generation == st->pg && !ws_fmt_gen_equal(&st->mark.wm.gen, &t->sc.gen)));
		if (!still)
			scan_from_top(t);
	}
decided:
	/* The WAL was reset and nothing new written yet: the database file is
	 * exactly the last shipped state. */
	if (t->kind == WS_MANIFEST_NEXT_GEN && t->sc.gen.wal_magic == 0)
		return done_empty(st, out);
	rc = ws_key_gen_prefix(t->sc.prefix, sizeof(t->sc.prefix), st->tenant, st->epoch, st->pg, &t->sc.gen);
	if (rc)
		return ws_fail(rc, "tenant %s: key too long", st->tenant);
	return 0;
}

/*
 * A re-base reads and uploads the whole database file: taken for a call
 * that then cannot prove continuity (a stream parked over the open-file
 * budget, a database replaced at its path), the write lock would hold the
 * application's writers for all of it. Let go before the scan; the call
 * goes on as an unlocked one (its own read transaction keeps the image
 * exact), and walship's WAL checkpoint waits for a later locked call.
 */
static void unlock_for_rebase(struct ws_stream *st, struct tail *t)
{
	if (!t->locked || t->kind != WS_MANIFEST_REBASE)
		return;
	write_lock_release(st);
	t->locked = false;
	st->call.locked = false;
	ws_debug("tenant %s: re-basing: the database's write lock is let go first", st->tenant);
}

/* 4. Scan and check the WAL from the first frame to ship, publishing each
 * slot as a batch (pipe.h); learns the last commit and its database size. */
static int step_scan(struct ws_stream *st, struct tail *t, struct ws_outcome *out)
{
	struct scan *sc = &t->sc;
	int rc;
	WS_ASSERT(st->txn.held >= 0); /* every frame is read under our read mark */
	unlock_for_rebase(st, t);
	/* Shed stops reading at a full ring, except while re-basing: the
	 * snapshot must be whole, and a database larger than the ring would
	 * otherwise never re-base at all. */
	st->at.shed_nowait = st->policy == WS_POLICY_SHED && !st->drain && t->kind != WS_MANIFEST_REBASE;
	/* The work bound, never while re-basing: the snapshot names the cut. */
	st->at.tail_stop_ms = 0;
	if (st->tail_ms && t->kind != WS_MANIFEST_REBASE) {
		uint64_t at = ws_mono_ms() + st->tail_ms;
		/* One watermark write per key_ms: reading on is free until the
		 * tail must be ready for the next one (with slots, no
		 * watermark write per tail: none to be ready for). */
		const uint64_t key_at =
			st->slots ? 0 : ws_adapt_key_due(0, st->mark.sent_mono_ms, st->key_ms, st->lead_ms);
		st->at.tail_stop_ms = key_at > at ? key_at : at;
	}
	if (st->ev_tap)
		ws_ev_tap_begin(st->ev_tap, t->kind, st->mark.have, st->mark.wm.gen.salt1, st->mark.wm.gen.salt2,
				st->mark.wm.last_frame);
	if (sc->gen.wal_magic != 0) {
		rc = scan_checked(st, sc, t->wal_bytes, t->kind == WS_MANIFEST_REBASE ? LIMIT_REBASE : LIMIT_STOP);
		/* Taken into the first slot, or not this tail's: dropped. */
		ahead_drop(st);
		if (rc)
			return rc;
		/* Stopped before any commit (one transaction longer than the
		 * bound): going on is the only way forward. */
		if (st->at.early_stop && sc->cur.last_commit < sc->first_frame) {
			st->at.early_stop = false;
			st->at.tail_stop_ms = 0;
			rc = scan_checked(st, sc, t->wal_bytes, LIMIT_ONE_TXN);
			if (rc)
				return rc;
		}
		if (st->at.shed_stop && (rc = scan_rest(st, sc, t->wal_bytes)) != 0)
			return rc;
	}
	ahead_drop(st);
	if ((rc = WS_FAULT("stream.after_scan")) != 0)
		return ws_fail(rc, "tenant %s: injected fault after the WAL scan", st->tenant);
	t->last = sc->gen.wal_magic ? sc->cur.last_commit : 0;
	if (t->kind != WS_MANIFEST_REBASE && t->last < sc->first_frame)
		return done_empty(st, out); /* only an uncommitted transaction was there */
	if (t->last > 0) {
		t->db_pages = sc->cur.commit_db_size;
	} else {
		uint32_t ps;
		rc = db_header(st, &ps, &t->db_pages);
		if (rc)
			return rc;
		if (sc->gen.wal_magic == 0)
			sc->gen.page_size = ps;
	}
	return 0;
}

/* 5. A re-base uploads the database file read under the same read mark. */
static int step_snapshot(struct ws_stream *st, struct tail *t)
{
	int rc;
	if (t->kind != WS_MANIFEST_REBASE)
		return 0;
	/* The earlier image whose unchanged parts it names (snap_reuse.h):
	 * the base of the chain the watermark it replaces names. */
	ws_snap_prev_free(&st->reuse);
	if (st->mark.have && !st->rebase_next && !st->seal.key) {
		rc = ws_snap_prev_load(st->sink->store, st->tenant, &st->mark.wm, &st->reuse);
		if (rc)
			return ws_fail_wrap(rc, "tenant %s: read the image before the re-base", st->tenant);
		if ((rc = WS_FAULT("stream.reuse_loaded")) != 0)
			return ws_fail(rc, "tenant %s: injected fault after the earlier image was read", st->tenant);
	}
	rc = upload_snapshot(st, &t->sc, t->db_pages);
	if (rc)
		return rc;
	if ((rc = WS_FAULT("stream.after_snapshot")) != 0)
		return ws_fail(rc, "tenant %s: injected fault after the snapshot", st->tenant);
	return 0;
}

/*
 * 9. A re-base that named parts of the earlier image, its watermark
 * written: that image's manifest still stored proves no retention run has
 * begun deleting its parts, and one that does reads this watermark first
 * and keeps what it names (docs/CHECKPOINTS.md "Retention"). Gone, the
 * parts may be too: the call starts over at once and re-bases uploading
 * every part (TAIL_RETRY), so the state it acknowledges names only parts
 * it uploaded; a read that fails leaves the next call to do that.
 */
static int step_reuse_check(struct ws_stream *st, struct tail *t)
{
	int rc;
	if (t->kind != WS_MANIFEST_REBASE)
		return 0;
	st->rebase_next = false;
	if (st->at.snap_reused == 0) {
		ws_snap_prev_free(&st->reuse);
		return 0;
	}
	if ((rc = WS_FAULT("stream.before_reuse_check")) != 0) {
		st->rebase_next = true;
		return ws_fail(rc, "tenant %s: injected fault before the earlier image is read again", st->tenant);
	}
	rc = ws_snap_prev_still(st->sink->store, &st->reuse);
	if (rc > 0) {
		st->rebase_next = true;
		ws_warn("tenant %s: the re-base named %u parts of the image of %s, which retention removed "
			"meanwhile: re-basing again, uploading every part", st->tenant, st->at.snap_reused,
			st->reuse.base.key);
		rc = TAIL_RETRY;
	} else if (rc < 0) {
		st->rebase_next = true;
		rc = ws_fail_wrap(rc, "tenant %s: read %s again after the re-base (nothing acknowledged; the next "
				  "call re-bases uploading every part)", st->tenant, st->reuse.base.key);
	}
	ws_snap_prev_free(&st->reuse);
	return rc;
}

/* The outcome of a call that shed its range (nothing acknowledged). */
int done_shed(const struct ws_stream *st, const struct tail *t, struct ws_outcome *out)
{
	memset(out, 0, sizeof(*out));
	out->kind = WS_OUTCOME_SHED;
	out->u.shed.checkpoint_seq = t->sc.gen.checkpoint_seq;
	/* A re-base of a database without frames (no WAL) shed only its
	 * snapshot: no frame range, 0..0 as Streamed says of one. */
	if (t->last >= t->sc.first_frame) {
		out->u.shed.first_frame = t->sc.first_frame;
		out->u.shed.last_frame = t->last;
	}
	fill_bp(st, &out->u.shed.backpressure);
	fill_rpo(st, &out->u.shed.rpo);
	return TAIL_DONE;
}

/*
 * 6. Wait until everything published is durable (or failed), check that
 * what was read still belongs together (the WAL under a re-base, the file
 * at the path), and settle what of it the manifest names: all, the
 * persisted prefix, or nothing (Shed).
 */
static int step_settle(struct ws_stream *st, struct tail *t, struct ws_outcome *out)
{
	int rc;
	/* Every slot read (the upload thread reads some) before the WAL header
	 * is checked again, every part durable before the manifest. */
	ws_pipe_drain(st->pipe);
	WS_ASSERT(ws_pipe_used(st->pipe) == 0);
	/* Frames and pages came from the file our read mark pins only while
	 * the path still names it (invariant 9). First: the WAL at the path of
	 * a replaced database is another database's, free to move under us,
	 * and starting over would only meet it again. */
	if (!ident_same(st))
		return ws_fail(WS_EREPLACED, "tenant %s: database %s was replaced at its path during the call; "
			       "nothing acknowledged (the next call re-bases)", st->tenant, st->db_path);
	if (t->kind == WS_MANIFEST_CONTINUE && !st->txn.continuous && t->sc.gen.wal_magic != 0) {
		/* A fresh read mark: see step_write_watermark. What was
		 * scanned is still a state the source committed, and ships. */
		rc = wal_unmoved(st, &t->sc);
		if (rc < 0)
			return rc;
		t->unproven = rc == 0;
	}
	if (t->kind == WS_MANIFEST_REBASE && t->sc.gen.wal_magic != 0) {
		rc = wal_unmoved(st, &t->sc);
		if (rc < 0)
			return rc;
		if (rc == 0) {
			ws_info("tenant %s: the WAL was restarted (or emptied by a TRUNCATE checkpoint) during the "
				"re-base; starting it over", st->tenant);
			return TAIL_RETRY;
		}
	}
	rc = settle(st, &t->sc, t->kind, &t->last, &t->db_pages);
	if (rc < 0)
		return rc;
	if (rc == 1)
		return done_shed(st, t, out);
	/* What this tail ships is known: the commits after it may be read
	 * ahead while it writes its manifest and watermark. */
	if (st->ev_tap)
		ahead_arm(st, &t->sc, t->last);
	return 0;
}
static void step_report(const struct ws_stream *st, const struct tail *t, struct ws_outcome *out)
{
	struct ws_backpressure_report bp;
	memset(out, 0, sizeof(*out));
	fill_bp(st, &bp);
	if (t->kind == WS_MANIFEST_CONTINUE || !t->had) {
		out->kind = WS_OUTCOME_STREAMED;
		snprintf(out->u.streamed.generation_key, WS_GEN_KEY_MAX, "%s", t->mkey);
		out->u.streamed.first_frame = t->last ? t->sc.first_frame : 0;
		out->u.streamed.last_frame = t->last;
		out->u.streamed.checkpoint_seq = t->sc.gen.checkpoint_seq;
		out->u.streamed.frame_count = t->last ? t->last - t->sc.first_frame + 1 : 0;
		out->u.streamed.backpressure = bp;
		fill_rpo(st, &out->u.streamed.rpo);
	} else {
		out->kind = WS_OUTCOME_RESTARTED;
		snprintf(out->u.restarted.generation_key, WS_GEN_KEY_MAX, "%s", t->mkey);
		ws_gen_to_public(&t->prev.gen, t->prev.version >= 2, &out->u.restarted.previous_generation);
		ws_gen_to_public(&t->sc.gen, true, &out->u.restarted.new_generation);
		out->u.restarted.first_frame = t->last ? 1 : 0;
		out->u.restarted.last_frame = t->last;
		out->u.restarted.frame_count = t->last;
		out->u.restarted.backpressure = bp;
		fill_rpo(st, &out->u.restarted.rpo);
	}
}

/* The frames this attempt set out to ship, for the engine's report of a refused call. */
static void call_range(struct ws_stream *st, const struct tail *t)
{
	st->call.report.checkpoint_seq = t->sc.gen.checkpoint_seq;
	st->call.report.first_frame = t->last >= t->sc.first_frame ? t->sc.first_frame : 0;
	st->call.report.last_frame = t->last >= t->sc.first_frame ? t->last : 0;
}

static int tail_inner(struct ws_stream *st, struct ws_outcome *out, bool locked)
{
	struct tail t;
	int rc;

	memset(out, 0, sizeof(*out));
	memset(&t, 0, sizeof(t));
	t.locked = locked;
	if ((rc = step_read_generation(st, &t)) != 0 || (rc = step_decide_continuity(st, &t, out)) != 0 ||
	    (rc = step_fence(st, &t, out)) != 0 || (rc = step_scan(st, &t, out)) != 0 ||
	    (rc = step_snapshot(st, &t)) != 0 || (rc = step_settle(st, &t, out)) != 0 ||
	    (rc = step_write_manifest(st, &t, out)) != 0 || (rc = step_write_watermark(st, &t, out)) != 0 ||
	    (rc = step_reuse_check(st, &t)) != 0) {
		call_range(st, &t);
		return rc == TAIL_DONE ? 0 : rc;
	}
	call_range(st, &t);
	step_report(st, &t, out);
	return 0;
}

/* A stale owner ships nothing, so its read marks protect nothing: let
 * the application's WAL checkpoints through (issue: a fenced stream must
 * not pin the WAL for ever). The next tail that is not fenced re-bases. */
static void release_reads(struct ws_stream *st)
{
	for (int i = 0; i < 2; i++)
		conn_end_read(st, i);
	st->txn.held = -1;
	st->txn.continuous = false;
}

/* Per attempt of a call: no part published, nothing shed; its parts
 * start at the ring's head (part_done maps ring index - part_base to a
 * part). */
static void attempt_reset(struct ws_stream *st)
{
	st->at = (struct ws_stream_attempt){ .part_base = st->pipe->ring.head };
}

/* The generation the watermark names has passed wal_checkpoint_bytes. */
static bool wm_gen_past_ckpt_bytes(const struct ws_stream *st)
{
	return st->mark.wm.last_frame * ws_wal_frame_size(st->mark.wm.gen.page_size) >= st->wal_checkpoint_bytes;
}

/*
 * Whether the live WAL is still the generation the watermark names. A
 * WAL that restarted since (a writer's own checkpoint) is as long as its
 * new frames, not as the watermark's last frame: locking writers out and
 * checkpointing it then would only restart the WAL a second time, a few
 * frames in. A restart between this look and the lock is caught after
 * the call (wm_gen_past_ckpt_bytes on what it shipped).
 */
static bool wal_still_wm_gen(struct ws_stream *st)
{
	struct ws_wal_hdr wh;
	if (file_refresh(st, st->wal_path, &st->io.wal_fd, &st->io.wal_slot) != 0 || file_size(st->io.wal_fd) == 0)
		return false;
	if (read_wal_gen(st, &wh) != 0)
		return false; /* the call's own read of it says what is wrong */
	return wh.magic == st->mark.wm.gen.wal_magic && wh.checkpoint_seq == st->mark.wm.gen.checkpoint_seq &&
	       wh.salt1 == st->mark.wm.gen.salt1 && wh.salt2 == st->mark.wm.gen.salt2;
}

/*
 * A parked stream (no SQLite connection open: just registered, a start
 * over what is stored, or over the open-file budget) with nothing new
 * since its watermark: Empty, decided from the WAL file and the watermark
 * alone, and the stream stays parked. Opening the database and taking a
 * read mark costs more than the rest of such a tail (a start with 10,000
 * idle tenants was mostly that), and a mark taken only to be held proves
 * nothing a later tail can use (continuity needs a mark held since a
 * watermark this stream wrote). The steps are the held tail's, with one
 * more look: the WAL header read again after the look past the watermark's
 * last frame, so a restart in between (which a read mark would have held
 * off) is seen. Whatever else is found (new frames, no WAL, another
 * generation, walship's own WAL checkpoint due, a WAL header it cannot
 * read) goes the held way, which opens the database first (SQLite then
 * recovers its wal-index). An error reading the watermark, or a frame
 * past it, is the tail's, as in the held way. Returns 1 with *out decided (Empty, or Fenced
 * by the watermark it read), 0 to go the held way, or an error.
 */
static int empty_unheld(struct ws_stream *st, struct ws_outcome *out)
{
	struct tail t;
	int rc;

	if (!ws_stream_parked(st) || st->ev_tap)
		return 0;
	/* walship's own WAL checkpoint is due: the held way takes it. */
	if (st->mark.have && st->mark.wm.gen.wal_magic != 0 && st->last_ok && wm_gen_past_ckpt_bytes(st))
		return 0;
	memset(&t, 0, sizeof(t));
	t.unheld = true;
	/* A WAL read as SQLite would not read it (a wal-index no connection
	 * has recovered yet, say): the held way opens the database first. */
	if (step_read_generation(st, &t) != 0) {
		ws_errclear();
		return 0;
	}
	if (t.sc.gen.wal_magic == 0)
		return 0;
	rc = step_decide_continuity(st, &t, out);
	if (rc != TAIL_DONE)
		return rc; /* 0: something to ship; or an error */
	if (out->kind == WS_OUTCOME_EMPTY) {
		if ((rc = WS_FAULT("stream.unheld_empty")) != 0)
			return ws_fail(rc, "tenant %s: injected fault after an unheld look found nothing new",
				       st->tenant);
		if (wal_unmoved(st, &t.sc) != 1) {
			ws_errclear();
			memset(out, 0, sizeof(*out));
			return 0;
		}
	}
	/* Parked as ws_stream_park leaves it: no WAL descriptor, no carried
	 * manifest (the next fencing read brings it back). */
	file_close(st, &st->io.wal_fd, &st->io.wal_slot);
	carry_drop(st);
	return 1;
}

int ws_stream_tail_frames(struct ws_stream *st, struct ws_outcome *out)
{
	bool locked = false;
	int rc;

	/* The call's state is new; the attempt's is reset before each attempt
	 * reads it (attempt_reset). */
	st->call = (struct ws_stream_call_state){
		.wall_ms = ws_wall_ms(),
		.mono_ms = ws_mono_ms(),
		.throttle_at_start = __atomic_load_n(&st->sink->store->stats.throttle_retries, __ATOMIC_RELAXED),
	};
	/* The shard's per-call arrays, where another stream's call left them. */
	use_work(st, st->work);
	/* Known to be fenced: answer from a fresh read of the watermark, with
	 * no read transaction taken. */
	if (mark_fenced(st)) {
		if ((rc = refresh_wm(st)) != 0)
			return rc;
		if (mark_fenced(st)) {
			release_reads(st);
			fill_fenced(st, out);
			return 0;
		}
	}
	/* The path names another file than the one we hold: a new life of the
	 * tenant. Let go of the old file; hold_read opens the new one and
	 * the call re-bases. */
	if (st->txn.held >= 0 && !ident_same(st)) {
		ws_info("tenant %s: database %s was replaced at its path; re-basing", st->tenant, st->db_path);
		ws_stream_park(st);
	}
	rc = empty_unheld(st, out);
	if (rc != 0) {
		st->last_ok = rc == 1 && out->kind == WS_OUTCOME_EMPTY;
		st->call.report.throttle_retries = call_throttle(st);
		return rc == 1 ? 0 : rc;
	}
	rc = hold_read(st);
	if (rc == WS_EREPLACED) {
		ws_stream_park(st); /* replaced while we opened it: once more */
		rc = hold_read(st);
	}
	if (rc)
		return rc;
	/* The WAL in use (not the file, which SQLite reuses from the top
	 * without shrinking) is what must stay bounded. */
	/* The write lock stops the application's writers for the length of
	 * this call: only when the last call went through (a sink that fails
	 * now would hold them for its retries), and then with no upload
	 * waited out (publish_begin). */
	if (st->mark.have && st->mark.wm.gen.wal_magic != 0 && st->last_ok && wm_gen_past_ckpt_bytes(st) &&
	    wal_still_wm_gen(st)) {
		if ((rc = WS_FAULT("stream.before_checkpoint_lock")) != 0)
			return ws_fail(rc, "tenant %s: injected fault before the WAL checkpoint's write lock",
				       st->tenant);
		locked = write_lock_try(st);
	}
	st->call.locked = locked;
	st->pipe->on_done = part_done;
	st->pipe->arg = st;
	for (unsigned attempt = 1;; attempt++) {
		attempt_reset(st);
		rc = tail_inner(st, out, st->txn.locker >= 0); /* an attempt that re-based let it go */
		/* A failed call may leave parts in flight: none outlives it. */
		ws_pipe_drain(st->pipe);
		if (rc != TAIL_RETRY)
			break;
		if (attempt == TAIL_ATTEMPTS) {
			rc = ws_fail(-EAGAIN, "tenant %s: the call started over %u times in a row (the WAL restarted "
				     "under a re-base%s); nothing acknowledged", st->tenant, attempt,
				     st->slots ? ", or the head moved while our lane was opened" : "");
			break;
		}
	}
	st->pipe->on_done = NULL;
	st->pipe->arg = NULL;
	st->call.report.throttle_retries = call_throttle(st);
	st->call.report.frames_shed = st->at.frames_shed;
	st->call.report.spill_high_water = st->at.high_water;
	/* Ended early: what it read shipped, the rest is due at once. A call
	 * that shed (nothing, or a prefix) waits as shedding says. */
	st->call.report.ended_early = rc == 0 && st->at.early_stop && st->at.frames_shed == 0 &&
			       (out->kind == WS_OUTCOME_STREAMED || out->kind == WS_OUTCOME_RESTARTED);
	st->call.report.past_index = rc == 0 && st->at.past_index;
	st->call.locked = false;
	st->last_ok = rc == 0 && out->kind != WS_OUTCOME_SHED && out->kind != WS_OUTCOME_FENCED;
	locked = locked && st->txn.locker >= 0;
	if (locked) {
		/* Nothing could commit since the scan began: on success every
		 * committed frame in the WAL is durable at the sink, unless the
		 * tail stopped at its work bound. */
		if (rc == 0 && out->kind != WS_OUTCOME_FENCED && out->kind != WS_OUTCOME_SHED &&
		    st->at.frames_shed == 0 && !st->at.early_stop && st->txn.continuous && wm_gen_past_ckpt_bytes(st) &&
		    WS_FAULT("stream.before_wal_checkpoint") == 0)
			wal_checkpoint_locked(st);
		write_lock_release(st);
	}
	if (rc == WS_EREPLACED)
		ws_stream_park(st);
	else if (rc == 0 && out->kind == WS_OUTCOME_FENCED)
		release_reads(st);
	else if (st->txn.held >= 0 && conn_db_mode(st, st->txn.held) != DB_WAL)
		/* An empty file (shipped as an empty database) or one not in
		 * WAL mode: a read transaction there is a lock that keeps the
		 * application from writing, or from switching it to WAL. */
		release_reads(st);
	return rc;
}

uint64_t ws_stream_wal_checkpoints(const struct ws_stream *st) { return st->wal_checkpoints; }

void ws_stream_set_drain(struct ws_stream *st, bool drain) { st->drain = drain; }

void ws_stream_set_events(struct ws_stream *st, struct ws_ev_tap *tap) { st->ev_tap = tap; }

void ws_stream_set_tail_bound(struct ws_stream *st, uint32_t tail_ms, uint32_t key_ms)
{
	st->tail_ms = tail_ms;
	st->key_ms = key_ms;
}

void ws_stream_set_key_wait(struct ws_stream *st, bool wait, uint32_t lead_ms, const uint32_t *stop)
{
	st->key_wait = wait;
	st->lead_ms = wait ? lead_ms : 0;
	st->key_wait_stop = stop;
}

uint64_t ws_stream_wm_sent_ms(const struct ws_stream *st) { return st->mark.sent_mono_ms; }
