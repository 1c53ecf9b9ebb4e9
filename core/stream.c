/*
 * A tenant stream: open, park, close, its accessors, and the watermark
 * and outcome helpers every step uses. The tail itself: stream_internal.h.
 */
#include "stream_internal.h"

/* ---- open / close ----------------------------------------------------- */

int ws_tail_work_init(struct ws_tail_work *w)
{
	memset(w, 0, sizeof(*w));
	ws_buf_init(&w->scratch, 64u << 20);
	w->batches = calloc(WORK_INITIAL, sizeof(*w->batches));
	w->snaps = calloc(WORK_INITIAL, sizeof(*w->snaps));
	w->parts = calloc(WORK_INITIAL, sizeof(*w->parts));
	if (!w->batches || !w->snaps || !w->parts) {
		ws_tail_work_free(w);
		return -ENOMEM;
	}
	w->batches_cap = w->snaps_cap = w->parts_cap = WORK_INITIAL;
	return 0;
}

/* Room for entry n of an array of *cap elements (doubled, up to max). */
static int grow_to(void **arr, uint32_t *cap, uint32_t n, uint32_t max, size_t elem)
{
	uint32_t ncap = *cap;
	void *p;
	if (n < *cap)
		return 0;
	while (ncap <= n && ncap < max)
		ncap = ncap * 2 < max ? ncap * 2 : max;
	if (n >= ncap)
		return WS_ETOOBIG;
	p = realloc(*arr, (size_t)ncap * elem);
	if (!p)
		return -ENOMEM;
	memset((char *)p + (size_t)*cap * elem, 0, (size_t)(ncap - *cap) * elem);
	*arr = p;
	*cap = ncap;
	return 0;
}

void ws_tail_work_free(struct ws_tail_work *w)
{
	ws_buf_free(&w->scratch);
	free(w->batches);
	free(w->snaps);
	free(w->parts);
	memset(w, 0, sizeof(*w));
}

void use_work(struct ws_stream *st, struct ws_tail_work *w)
{
	st->work = w;
	st->call.batches = w->batches;
	st->call.snaps = w->snaps;
	st->call.parts = w->parts;
}

/*
 * Room for batch, snapshot part or part entry n of this call. The arrays
 * are the shard's, shared by its streams one call at a time: a stream
 * takes their current addresses at the start of each call and after each
 * growth.
 */
int room_batch(struct ws_stream *st, uint32_t n)
{
	int rc = grow_to((void **)&st->work->batches, &st->work->batches_cap, n, MAX_REFS, sizeof(*st->call.batches));
	use_work(st, st->work);
	return rc;
}

int room_snap(struct ws_stream *st, uint32_t n)
{
	int rc = grow_to((void **)&st->work->snaps, &st->work->snaps_cap, n, MAX_SNAPS, sizeof(*st->call.snaps));
	use_work(st, st->work);
	return rc;
}

int room_part(struct ws_stream *st, uint32_t n)
{
	int rc = grow_to((void **)&st->work->parts, &st->work->parts_cap, n, MAX_PARTS, sizeof(*st->call.parts));
	use_work(st, st->work);
	return rc;
}

/* The stream's seal: its codec, and its key file's keys (the last seals),
 * which join the sink's for reading. */
static int seal_setup(struct ws_stream *st, const struct ws_seal_config *c)
{
	char who[WS_TENANT_MAX + 8];
	snprintf(who, sizeof(who), "tenant %s", st->tenant);
	return ws_sink_seal_resolve(st->sink, who, c, &st->seal_keys, &st->seal);
}

/* Validate the config and make the stream; no reader, pipe or SQLite yet. */
static struct ws_stream *stream_new(struct ws_sink *sink, const struct ws_stream_config *cfg, int *err)
{
	struct ws_stream *st = NULL;
	int rc;

	if (!sink || !cfg || !cfg->db_path || !ws_tenant_name_valid(cfg->tenant)) {
		rc = ws_fail(WS_ECONFIG, "tenant name '%s' invalid: use 1..127 of [A-Za-z0-9._-], not "
			     "starting with '.' or '_', not \"checkpoints\"", cfg && cfg->tenant ? cfg->tenant : "");
		goto fail;
	}
	/* Owner tokens are 0..2^63-1, as the CLI takes them and JSON prints them. */
	if (cfg->epoch > INT64_MAX || cfg->pointer_generation > INT64_MAX) {
		rc = ws_fail(WS_ECONFIG, "tenant %s: epoch %" PRIu64 " / pointer generation %" PRIu64 ": owner "
			     "tokens are 0..9223372036854775807", cfg->tenant, cfg->epoch, cfg->pointer_generation);
		goto fail;
	}
	if (cfg->batch_bytes_max && cfg->batch_bytes_max < BATCH_BYTES_MIN) {
		rc = ws_fail(WS_ECONFIG, "tenant %s: batch_bytes_max %zu is below one 64 KiB frame (%zu)",
			     cfg->tenant, cfg->batch_bytes_max, BATCH_BYTES_MIN);
		goto fail;
	}
	if (cfg->policy != WS_POLICY_BLOCK && cfg->policy != WS_POLICY_THROTTLE && cfg->policy != WS_POLICY_SHED) {
		rc = ws_fail(WS_ECONFIG, "tenant %s: unknown backpressure policy %d", cfg->tenant, (int)cfg->policy);
		goto fail;
	}
	st = calloc(1, sizeof(*st));
	if (!st) {
		rc = -ENOMEM;
		goto fail;
	}
	st->sink = sink;
	snprintf(st->tenant, sizeof(st->tenant), "%s", cfg->tenant);
	st->epoch = cfg->epoch;
	st->pg = cfg->pointer_generation;
	st->policy = cfg->policy;
	st->batch_bytes_max = cfg->batch_bytes_max ? cfg->batch_bytes_max : BATCH_BYTES_DEFAULT;
	st->batch_frames_max = cfg->batch_frames_max;
	st->txn.held = -1;
	st->txn.locker = -1;
	st->wal_checkpoint_bytes = cfg->wal_checkpoint_bytes ? cfg->wal_checkpoint_bytes : WAL_CKPT_DEFAULT;
	st->inline_max = cfg->inline_batch_bytes_max == UINT64_MAX ? 0
			 : cfg->inline_batch_bytes_max ? cfg->inline_batch_bytes_max : INLINE_DEFAULT;
	/* A manifest is encoded whole in memory and read whole by every reader
	 * of the chain: what it carries stays small. */
	if (st->inline_max > INLINE_MAX)
		st->inline_max = INLINE_MAX;
	st->carry.mode = cfg->carry;
	if (st->carry.mode != WS_CARRY_PRESSED && st->carry.mode != WS_CARRY_ALWAYS &&
	    st->carry.mode != WS_CARRY_NEVER) {
		rc = ws_fail(WS_ECONFIG, "tenant %s: carry %d is not one of pressed, always, never", cfg->tenant,
			     (int)cfg->carry);
		goto fail;
	}
	if (cfg->hint_slots > WS_HINT_SLOTS_MAX) {
		rc = ws_fail(WS_ECONFIG, "tenant %s: hint_slots %u must be 1..%u (0: %u)", cfg->tenant, cfg->hint_slots,
			     WS_HINT_SLOTS_MAX, WS_HINT_SLOTS_DEFAULT);
		goto fail;
	}
	st->hint_slots = cfg->hint_slots ? cfg->hint_slots : WS_HINT_SLOTS_DEFAULT;
	/* Slots rest on create-once: where a conditional write does not
	 * fence, two owners would both "create" a slot. */
	st->slots = cfg->slots && ws_store_cas_fences(sink->store);
	if (cfg->slots && !st->slots)
		ws_info("tenant %s: slots = on asks for manifest slots, but the store's conditional writes do not "
			"fence (conditional_writes = off, or a store of another kind): the watermark is written per "
			"tail instead", cfg->tenant);
	if (st->slots)
		st->carry.mode = WS_CARRY_NEVER; /* a slot is the tail's one write */
	ws_buf_init(&st->carry.buf, WS_WM_BYTES_MAX);
	ws_buf_init(&st->carry.next, WS_WM_BYTES_MAX);
	ws_buf_init(&st->ahead.buf, 0);
	st->io.wal_fd = st->io.wal_slot = -1;
	if ((rc = seal_setup(st, &cfg->seal)) != 0)
		goto fail;
	st->opened_ms = ws_wall_ms();
	if (asprintf(&st->db_path, "%s", cfg->db_path) < 0 ||
	    asprintf(&st->wal_path, "%s-wal", cfg->db_path) < 0) {
		st->db_path = st->wal_path = NULL;
		rc = -ENOMEM;
		goto fail;
	}
	{
		struct stat sb;
		if (stat(st->db_path, &sb) != 0) {
			rc = ws_fail(-ENOENT, "tenant %s: database %s does not exist", st->tenant, st->db_path);
			goto fail;
		}
		/* A device (/dev/zero, a disk named by a typo) or a FIFO is no
		 * database: shipped as one it "succeeds" with nothing in it. */
		if (!S_ISREG(sb.st_mode)) {
			rc = ws_fail(WS_ECONFIG, "tenant %s: database %s is not a regular file", st->tenant,
				     st->db_path);
			goto fail;
		}
	}
	*err = 0;
	return st;
fail:
	ws_stream_close(st);
	*err = rc;
	return NULL;
}

struct ws_stream *ws_stream_open(struct ws_sink *sink, const struct ws_stream_config *cfg, int *err)
{
	struct ws_stream *st = stream_new(sink, cfg, err);
	int rc;
	if (!st)
		return NULL;
	st->own_reader = true;
	rc = ws_tail_work_init(&st->own_work);
	if (rc)
		goto fail;
	use_work(st, &st->own_work);
	st->io.reader = ws_reader_open(st->batch_bytes_max + OWN_SMALL_BYTES, 2, cfg->reader_flags, &rc);
	if (!st->io.reader)
		goto fail;
	/* One slot, uploaded on our thread at publish, and header reads after
	 * it: a batch held for its manifest (inline) outlives the reads that
	 * check the WAL again before the manifest is written. */
	st->io.small_off = st->batch_bytes_max;
	st->io.small_bytes = OWN_SMALL_BYTES;
	st->io.ring_off = 0;
	rc = ws_pipe_init(&st->own_pipe, ws_reader_buf(st->io.reader), st->batch_bytes_max, 1, sink->store, 1, false,
			  false);
	if (rc)
		goto fail;
	st->pipe = &st->own_pipe;
	if (ws_seal_on(&st->seal) && (rc = ws_pipe_seal_reserve(st->pipe)) != 0)
		goto fail;
	*err = 0;
	return st;
fail:
	ws_stream_close(st);
	*err = rc;
	return NULL;
}

struct ws_stream *ws_stream_open_shared(struct ws_sink *sink, const struct ws_stream_config *cfg,
					const struct ws_stream_shared *sh, int *err)
{
	struct ws_stream *st = stream_new(sink, cfg, err);
	if (!st)
		return NULL;
	st->io.reader = sh->reader;
	st->io.small_off = sh->small_off;
	st->io.small_bytes = sh->small_bytes;
	st->io.ring_off = sh->ring_off;
	st->pipe = sh->pipe;
	st->batch_bytes_max = sh->pipe->ring.slot_bytes;
	use_work(st, sh->work);
	if (ws_seal_on(&st->seal) && (*err = ws_pipe_seal_reserve(st->pipe)) != 0) {
		ws_stream_close(st);
		return NULL;
	}
	return st;
}

/* The carried manifest's bytes go; the next call's fencing read brings
 * them back with the watermark. */
void carry_drop(struct ws_stream *st) { ws_buf_free(&st->carry.buf); }

/* The manifest watermark w carries (or none), for this call: moved to the
 * front of the buffer w was read into (raw), which becomes carry. */
void carry_take(struct ws_stream *st, struct ws_buf *raw, const struct ws_fmt_watermark *w)
{
	carry_drop(st);
	if (!w->carried) {
		ws_buf_free(raw);
		return;
	}
	memmove(raw->data, w->carried, (size_t)w->carried_len);
	raw->len = (size_t)w->carried_len;
	st->carry.buf = *raw;
	ws_buf_init(raw, WS_WM_BYTES_MAX);
}

void ws_stream_park(struct ws_stream *st)
{
	for (int i = 0; i < 2; i++) {
		if (st->txn.conn[i]) {
			conn_end_read(st, i);
			sqlite3_close(st->txn.conn[i]);
			st->txn.conn[i] = NULL;
		}
	}
	st->txn.held = -1;
	st->txn.continuous = false;
	st->txn.have_ident = false;
	if (st->io.reader)
		file_close(st, &st->io.wal_fd, &st->io.wal_slot);
	carry_drop(st);
	/* Without its read mark nothing read ahead is known to stay. */
	ahead_drop(st);
	ws_buf_free(&st->ahead.buf);
}

bool ws_stream_parked(const struct ws_stream *st) { return st->txn.held < 0 && !st->txn.conn[0] && !st->txn.conn[1]; }

void ws_stream_close(struct ws_stream *st)
{
	if (!st)
		return;
	if (st->ev_single)
		ws_ev_single_stream_closed(st->ev_single); /* its channel refuses what needs it from now on */
	ws_stream_park(st);
	if (st->own_reader) {
		if (st->pipe)
			ws_pipe_destroy(st->pipe);
		ws_reader_close(st->io.reader);
		ws_tail_work_free(&st->own_work);
	}
	carry_drop(st);
	ws_buf_free(&st->carry.next);
	ws_snap_prev_free(&st->reuse);
	free(st->db_path);
	free(st->wal_path);
	ws_keyring_free(&st->seal_keys);
	free(st);
}

void ws_stream_last_call(const struct ws_stream *st, struct ws_stream_call *out) { *out = st->call.report; }
bool ws_stream_slots(const struct ws_stream *st) { return st->slots; }
uint64_t ws_stream_wm_last_frame(const struct ws_stream *st) { return st->mark.have ? st->mark.wm.last_frame : 0; }

/* The public flags are io's (io cannot see walship.h). */
_Static_assert(WS_READ_FORCE_PREAD == WS_READER_FORCE_PREAD && WS_READ_SQPOLL == WS_READER_SQPOLL,
	       "reader flags in walship.h and ws_reader.h differ");

/* ---- helpers ---------------------------------------------------------- */

void fill_rpo(const struct ws_stream *st, struct ws_rpo_status *rpo)
{
	int64_t now = ws_wall_ms();
	int64_t since = st->mark.have ? st->mark.wm.time_ms : st->opened_ms;
	rpo->has_watermark = st->mark.have;
	/* Our own watermark's age by the monotonic clock: a wall clock
	 * stepped back would read it as 0 for as long as the step. */
	if (st->mark.have && st->mark.own_mono_ms && st->mark.wm.seq == st->mark.own_seq &&
	    memcmp(st->mark.wm.manifest_sha, st->mark.own_msha, WS_SHA256_LEN) == 0) {
		uint64_t mono = ws_mono_ms();
		rpo->watermark_age_ms = mono > st->mark.own_mono_ms ? mono - st->mark.own_mono_ms : 0;
		return;
	}
	rpo->watermark_age_ms = now > since ? (uint64_t)(now - since) : 0;
}

int64_t ws_stream_wm_time_ms(const struct ws_stream *st) { return st->mark.have ? st->mark.wm.time_ms : 0; }

/* Throttle retries of this call: the sink's own requests (manifest,
 * watermark, reads) plus the parts, when an uploader's store sent them. */
uint64_t call_throttle(const struct ws_stream *st)
{
	uint64_t own = __atomic_load_n(&st->sink->store->stats.throttle_retries, __ATOMIC_RELAXED) -
		       st->call.throttle_at_start;
	return own + (st->pipe->store == st->sink->store ? 0 : st->call.throttle);
}

void fill_bp(const struct ws_stream *st, struct ws_backpressure_report *bp)
{
	memset(bp, 0, sizeof(*bp));
	bp->policy = st->policy;
	bp->spill_high_water = st->at.high_water;
	bp->throttle_retries = call_throttle(st);
	bp->frames_shed = st->at.frames_shed;
}

/*
 * The head w was just read: a write of ours whose reply was lost (an
 * ambiguous failure) that landed after all is our last write; continuous
 * (a read mark held since our last write) stays only while w is that write.
 * Returns whether the pending write was found there.
 */
bool own_or_not(struct ws_stream *st, const struct ws_fmt_watermark *w)
{
	const bool pend = st->mark.pend_seq && w->seq == st->mark.pend_seq &&
			  memcmp(w->manifest_sha, st->mark.pend_msha, WS_SHA256_LEN) == 0;
	if (pend) {
		st->mark.own_seq = st->mark.pend_seq;
		memcpy(st->mark.own_msha, st->mark.pend_msha, WS_SHA256_LEN);
		st->mark.own_mono_ms = st->mark.pend_mono_ms;
	}
	st->mark.pend_seq = 0;
	if (!st->mark.own_seq || w->seq != st->mark.own_seq ||
	    memcmp(w->manifest_sha, st->mark.own_msha, WS_SHA256_LEN) != 0)
		st->txn.continuous = false;
	return pend;
}

/*
 * Read the watermark. continuous (our read mark held since our own last
 * watermark write) stays only while the watermark is still that write: one
 * another writer put there (an owner with our very tokens, a restart that
 * overlapped us) is no continuation of what we shipped, and a new
 * generation must not be chained onto it. An unreadable watermark leaves
 * the cache as it was, marked for a re-read.
 */
int refresh_wm(struct ws_stream *st)
{
	struct ws_fmt_watermark w;
	struct ws_etag etag;
	if (st->slots)
		return refresh_head(st);
	st->mark.wrote_last = false; /* what is known now is what this read finds */
	/* The watermark lands in carry_next: a manifest it carries is kept. */
	int rc = ws_wm_load_keep(st->sink->store, st->tenant, &w, &etag, &st->carry.next);
	/* Still ours to merge into only if it is the very watermark we wrote
	 * last (a fencing read finds it so); anything else read back is
	 * stored before it is linked to. */
	st->carry.own = st->carry.own && rc == 0 && w.carried_len && st->mark.own_seq == w.seq &&
			memcmp(w.manifest_sha, st->mark.own_msha, WS_SHA256_LEN) == 0;
	if (rc == 0)
		carry_take(st, &st->carry.next, &w);
	else
		ws_buf_free(&st->carry.next);
	w.carried = NULL;
	if (rc == WS_ENOTFOUND) {
		carry_drop(st);
		st->mark.have = false;
		memset(&st->mark.etag, 0, sizeof(st->mark.etag));
		st->mark.loaded = true;
		st->txn.continuous = false;
		return 0;
	}
	if (rc) {
		/* Nothing learned: the next decision reads it again first. */
		st->mark.loaded = false;
		return rc;
	}
	own_or_not(st, &w);
	st->mark.wm = w;
	st->mark.etag = etag;
	st->mark.have = true;
	st->mark.loaded = true;
	return 0;
}

/*
 * The fencing read a tail skipped (step_fence: it meant to fence with its
 * watermark's compare-and-swap), made before it uploads anything else: a
 * stale owner leaves no object behind. The call goes on only if the
 * watermark there is still our own last write; otherwise it starts over
 * (TAIL_RETRY, nothing uploaded), and the next attempt decides from what
 * this read found (Fenced, or what follows another writer).
 */
int fence_before_upload(struct ws_stream *st)
{
	if (!st->at.fence_deferred)
		return 0;
	st->at.fence_deferred = false;
	WS_ASSERT(st->at.part_count == 0 || st->at.inl_held);
	int rc = WS_FAULT("stream.before_deferred_fence");
	if (rc)
		return ws_fail(rc, "tenant %s: injected fault before the deferred fencing read", st->tenant);
	if (st->slots) {
		/* Found closed: the next attempt answers Fenced from it. */
		rc = slot_read_fence(st);
		return rc == TAIL_DONE ? TAIL_RETRY : rc;
	}
	const struct ws_fmt_watermark before = st->mark.wm;
	/* The shard's other tails may go on meanwhile only while nothing of
	 * this call is in the ring: an inline batch held in its slot (before
	 * a carried manifest is stored) must not be reserved over. */
	const bool let_go = st->at.part_count == 0;
	if (let_go)
		lane_out(st);
	rc = refresh_wm(st);
	if (let_go) {
		lane_in(st);
		st->at.part_base = st->pipe->ring.head; /* others published meanwhile */
	}
	if (rc)
		return rc;
	if (st->mark.have && wm_same_write(&st->mark.wm, &before) && st->mark.wm.carried_len == before.carried_len)
		return 0;
	ws_info("tenant %s: the watermark moved since our last write (found sequence %" PRIu64 ", epoch %" PRIu64
		", pointer generation %" PRIu64 "); the call starts over from it, nothing uploaded",
		st->tenant, st->mark.have ? st->mark.wm.seq : 0, st->mark.have ? st->mark.wm.epoch : 0,
		st->mark.have ? st->mark.wm.pointer_generation : 0);
	return TAIL_RETRY;
}

/* w is the watermark write nw (read back): the same sequence, owner and manifest. */
bool wm_same_write(const struct ws_fmt_watermark *w, const struct ws_fmt_watermark *nw)
{
	return w->seq == nw->seq && w->epoch == nw->epoch && w->pointer_generation == nw->pointer_generation &&
	       w->last_frame == nw->last_frame && w->manifest_length == nw->manifest_length &&
	       strcmp(w->manifest_key, nw->manifest_key) == 0 &&
	       memcmp(w->manifest_sha, nw->manifest_sha, WS_SHA256_LEN) == 0;
}

bool fenced_by(const struct ws_stream *st, const struct ws_fmt_watermark *w)
{
	return ws_fmt_token_fences(w->epoch, w->pointer_generation, st->epoch, st->pg);
}

void fill_fenced(const struct ws_stream *st, struct ws_outcome *out)
{
	const bool slot = st->slots && st->mark.fence_have;
	memset(out, 0, sizeof(*out));
	out->kind = WS_OUTCOME_FENCED;
	out->u.fenced.current_epoch = slot ? st->mark.fence_epoch : st->mark.wm.epoch;
	out->u.fenced.our_epoch = st->epoch;
	out->u.fenced.current_pointer_generation = slot ? st->mark.fence_pg : st->mark.wm.pointer_generation;
	out->u.fenced.our_pointer_generation = st->pg;
}

void ws_stream_set_lane(struct ws_stream *st, const struct ws_stream_lane *lane)
{
	st->lane = *lane;
	st->sink = lane->sink;
	use_work(st, lane->work);
}

void lane_out(struct ws_stream *st)
{
	if (!st->lane.hold)
		return;
	/* Nothing of this call is left for another tail's collection. */
	WS_ASSERT(ws_pipe_used(st->pipe) == 0);
	st->lane.hold(st->lane.arg, false);
}

void lane_in(struct ws_stream *st)
{
	if (!st->lane.hold)
		return;
	st->lane.hold(st->lane.arg, true);
	/* Other tails' calls set the pipe's collection to theirs meanwhile. */
	st->pipe->on_done = part_done;
	st->pipe->arg = st;
}

/* Upload one immutable object under a key that embeds its hash: an existing
 * object with that key is this same content from an earlier attempt. */
int put_immutable(struct ws_stream *st, const char *key, const struct iovec *iov, int iovcnt)
{
	int rc = ws_store_putv(st->sink->store, key, iov, iovcnt, WS_PUT_CREATE, NULL, NULL);
	if (rc == WS_EPRECOND)
		rc = ws_store_created_same(st->sink->store, key, iov, iovcnt);
	if (rc)
		return ws_fail_wrap(rc, "tenant %s: upload %s", st->tenant, key);
	return 0;
}

/* The pipe's result for one of this call's parts (collected in order). */
