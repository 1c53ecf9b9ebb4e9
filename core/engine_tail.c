/*
 * One tail of one tenant on its shard's thread: when it is due, what it
 * ships, and what it tells the host (on_outcome) and the metrics.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <unistd.h>

#include "adapt.h"
#include "core_internal.h"
#include "pipe.h"
#include "ws_clock.h"
#include "ws_hash.h"
#include "ws_logging.h"
#include "ws_reader.h"
#include "engine_internal.h"

/* The effective throttle_age_ms_max and tail_ms_max (0 = derived). */
static uint32_t throttle_age(const struct ws_shard_config *c)
{
	return c->throttle_age_ms_max ? c->throttle_age_ms_max : c->batch_age_ms_max / 2 * 3;
}

static uint32_t tail_bound(const struct ws_shard_config *c)
{
	return c->tail_ms_max ? c->tail_ms_max : c->batch_age_ms_max / 2;
}

/* How far ahead of the interval's end a tenant's tail starts: what its
 * tails take to be ready for their watermark write, while the shard has
 * lanes (on its own thread the wait would hold every other tenant). */
static uint32_t key_lead(const struct shard *sh, const struct tenant *t)
{
	return ws_eng_lanes_on(sh) ? t->lead_ms : 0;
}

/* A tail wanted at `at`, which ends with a watermark write: (adaptive) its
 * write no sooner than one key_write_interval_ms after the tenant's last
 * one went out, whatever made it due (a change, a continuation, a retry,
 * lost events); the tail starts its lead before that, and its watermark
 * write waits (ws_stream_set_key_wait). */
uint64_t ws_eng_key_due(const struct shard *sh, const struct tenant *t, uint64_t at)
{
	/* A tenant with manifest slots acknowledges each tail with its own
	 * slot: no watermark write per tail to space out (docs/SLOTS.md). */
	if (!sh->cfg.adaptive || (t->st && ws_stream_slots(t->st)))
		return at;
	return ws_adapt_key_due(at, t->wm_sent_ms, sh->cfg.key_write_interval_ms, key_lead(sh, t));
}

/* When a tenant's change seen now is due: its gather time, and ws_eng_key_due. */
uint64_t ws_eng_due_after_change(const struct shard *sh, const struct tenant *t, uint64_t now)
{
	uint32_t age = sh->cfg.adaptive && t->age_ms ? t->age_ms : sh->cfg.batch_age_ms_max;
	return ws_eng_key_due(sh, t, now + age);
}

/* ---- the shard thread ---------------------------------------------------- */

static void lru_unlink(struct shard *sh, struct tenant *t)
{
	if (t->lru_prev)
		t->lru_prev->lru_next = t->lru_next;
	else if (sh->lru_head == t)
		sh->lru_head = t->lru_next;
	if (t->lru_next)
		t->lru_next->lru_prev = t->lru_prev;
	else if (sh->lru_tail == t)
		sh->lru_tail = t->lru_prev;
	t->lru_prev = t->lru_next = NULL;
	WS_ASSERT(!sh->lru_head == !sh->lru_tail);
}

static void lru_front(struct shard *sh, struct tenant *t)
{
	WS_ASSERT(t->open && t->shard == sh->id);
	lru_unlink(sh, t);
	t->lru_next = sh->lru_head;
	if (sh->lru_head)
		sh->lru_head->lru_prev = t;
	sh->lru_head = t;
	if (!sh->lru_tail)
		sh->lru_tail = t;
}

void ws_eng_park(struct shard *sh, struct tenant *t)
{
	if (!t->open)
		return;
	WS_ASSERT(sh->open_count > 0);
	ws_stream_park(t->st);
	t->open = false;
	sh->open_count--;
	lru_unlink(sh, t);
}

/*
 * Park the least recently tailed streams until one more may open: never
 * one whose tail is in flight on a lane (its files are in use there; the
 * budget has room for the lanes' own, engine.c open_budget).
 */
static void make_room(struct shard *sh)
{
	struct tenant *v = sh->lru_tail;
	while (sh->open_count >= sh->open_max && v) {
		struct tenant *prev = v->lru_prev;
		if (!v->in_flight)
			ws_eng_park(sh, v);
		v = prev;
	}
}

void ws_eng_mark_due(struct tenant *t, uint64_t due)
{
	/* A failing tenant backs off whatever makes it due again: a writer's
	 * next commit must not turn the backoff into batch_age_ms_max. */
	if (due < t->retry_at)
		due = t->retry_at;
	/* A change seen while its tail was in flight on a lane, before that
	 * tail failed: the backoff holds it back too. */
	if (t->dirty && t->due_ms < t->retry_at)
		t->due_ms = t->retry_at;
	if (!t->dirty || due < t->due_ms)
		t->due_ms = due;
	t->dirty = true;
	WS_ASSERT(t->due_ms >= t->retry_at);
}

/* How long a followed tenant's commit under way waits for its next look. */
static uint32_t index_wait(const struct shard *sh, struct tenant *t)
{
	uint32_t cap = sh->cfg.batch_age_ms_max ? sh->cfg.batch_age_ms_max : 1;
	t->index_wait_ms = t->index_wait_ms ? t->index_wait_ms * 2 : 1;
	if (t->index_wait_ms > cap)
		t->index_wait_ms = cap;
	return t->index_wait_ms;
}

/* The warning's threshold: stall_warn_ms, or 4 x batch_age_ms_max up to a minute. */
static uint64_t stall_ms(const struct shard *sh)
{
	uint64_t ms = sh->cfg.stall_warn_ms ? sh->cfg.stall_warn_ms : (uint64_t)sh->cfg.batch_age_ms_max * 4;
	return ms > STALL_WARN_MS_MAX && !sh->cfg.stall_warn_ms ? STALL_WARN_MS_MAX : (ms ? ms : 1);
}

static uint64_t rpo_ms(const struct tenant *t, uint64_t now)
{
	int64_t wm = __atomic_load_n(&t->wm_mono_ms, __ATOMIC_RELAXED);
	int64_t since = wm ? wm : t->added_mono_ms;
	return (int64_t)now > since ? now - (uint64_t)since : 0;
}

static void stall_warn(struct shard *sh, struct tenant *t, uint64_t now)
{
	uint64_t rpo = rpo_ms(t, now);
	ws_warn("tenant %s: nothing shipped for %" PRIu64 " ms (%" PRIu64 " tails deferred): the store answers: "
		"%s; RPO %" PRIu64 ".%03u s", t->name, now - t->trouble_ms, ld(&t->deferrals), t->answer,
		rpo / 1000, (unsigned)(rpo % 1000));
	t->warn_ms = now;
	__atomic_store_n(&t->stalled, 1, __ATOMIC_RELAXED);
	(void)sh;
}

uint64_t ws_eng_stall_check(struct shard *sh, struct tenant *t, uint64_t now)
{
	const uint64_t limit = stall_ms(sh);
	const uint64_t repeat = limit > STALL_REPEAT_MS ? limit : STALL_REPEAT_MS;
	if (!t->trouble_ms)
		return UINT64_MAX;
	if (!t->warn_ms && now >= t->trouble_ms + limit)
		stall_warn(sh, t, now);
	else if (t->warn_ms && now >= t->warn_ms + repeat)
		stall_warn(sh, t, now);
	return t->warn_ms ? t->warn_ms + repeat : t->trouble_ms + limit;
}

/* A tail that did not ship: trouble starts now unless it already had. */
static void trouble(struct shard *sh, struct tenant *t, const char *answer, uint64_t refusals)
{
	uint64_t now = ws_mono_ms();
	if (!t->trouble_ms)
		t->trouble_ms = now;
	snprintf(t->answer, sizeof(t->answer), "%s", answer);
	t->pending_throttle += refusals;
	(void)ws_eng_stall_check(sh, t, now);
}

/* An acknowledged tail: the trouble, if any, is over. */
static void acknowledged(struct tenant *t)
{
	uint64_t now = ws_mono_ms();
	if (t->warn_ms)
		ws_warn("tenant %s: shipping again after %" PRIu64 " ms", t->name, now - t->trouble_ms);
	t->trouble_ms = t->warn_ms = 0;
	__atomic_store_n(&t->stalled, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&t->ack_mono_ms, (int64_t)now, __ATOMIC_RELAXED);
}

static void fill_error(struct tenant *t, struct ws_outcome *o, int rc, bool deferred)
{
	memset(o, 0, sizeof(*o));
	o->kind = WS_OUTCOME_ERROR;
	o->u.error.code = rc;
	o->u.error.deferred = deferred;
	snprintf(o->u.error.message, sizeof(o->u.error.message), "%s", ws_errmsg());
	o->u.error.rpo.has_watermark = __atomic_load_n(&t->wm_mono_ms, __ATOMIC_RELAXED) != 0;
	o->u.error.rpo.watermark_age_ms = rpo_ms(t, ws_mono_ms());
}

/* Under shed, a refused tail is the seed's Shed: the frames it left, re-read next time. */
static void fill_refused_shed(struct tenant *t, const struct ws_stream_call *call, uint64_t refusals,
			      struct ws_outcome *o)
{
	memset(o, 0, sizeof(*o));
	o->kind = WS_OUTCOME_SHED;
	o->u.shed.checkpoint_seq = call->checkpoint_seq;
	o->u.shed.first_frame = call->first_frame;
	o->u.shed.last_frame = call->last_frame;
	o->u.shed.backpressure.policy = t->policy;
	o->u.shed.backpressure.spill_high_water = call->spill_high_water;
	o->u.shed.backpressure.frames_shed = call->last_frame ? call->last_frame - call->first_frame + 1 : 0;
	o->u.shed.backpressure.throttle_retries = refusals;
	o->u.shed.rpo.has_watermark = __atomic_load_n(&t->wm_mono_ms, __ATOMIC_RELAXED) != 0;
	o->u.shed.rpo.watermark_age_ms = rpo_ms(t, ws_mono_ms());
}

static void report(struct shard *sh, struct tenant *t, const struct ws_outcome *o, int err)
{
	if (sh->e->cfg.on_outcome)
		sh->e->cfg.on_outcome(t->name, o, err, sh->e->cfg.arg);
}

/* Refused by a store that throttles (fail-fast): not an error, nothing
 * acknowledged; again after its Retry-After (until). Reported all the same. */
static void tail_deferred(struct shard *sh, struct tenant *t, const struct ws_stream_call *call, int rc,
			  uint64_t until)
{
	uint64_t refusals = call->throttle_retries ? call->throttle_retries : 1;
	struct ws_outcome o;

	if (!call->throttle_retries) {
		add(&t->throttle, 1);
		add(&sh->throttle, 1);
	}
	add(&sh->deferred, 1);
	add(&t->deferrals, 1);
	t->retry_ms = 0;
	t->retry_at = until;
	ws_eng_mark_due(t, ws_eng_key_due(sh, t, until));
	ws_debug("shard %u: %s (tenant %s again in %" PRIu64 " ms)", sh->id, ws_errmsg(), t->name,
		 until > ws_mono_ms() ? until - ws_mono_ms() : 0);
	if (t->policy == WS_POLICY_SHED) {
		/* The Shed says its refusals itself: none left for a later outcome. */
		fill_refused_shed(t, call, refusals, &o);
		trouble(sh, t, ws_errmsg(), 0);
		add(&t->sheds, 1);
		add(&t->shed_frames, o.u.shed.backpressure.frames_shed);
		add(&sh->shed_frames, o.u.shed.backpressure.frames_shed);
		__atomic_store_n(&t->last_outcome, (uint32_t)WS_OUTCOME_SHED, __ATOMIC_RELAXED);
		report(sh, t, &o, 0);
		return;
	}
	fill_error(t, &o, rc, true);
	trouble(sh, t, o.u.error.message, refusals);
	report(sh, t, &o, rc);
}

static void tail_failed(struct shard *sh, struct tenant *t, const struct ws_stream_call *call, int rc)
{
	/* The watermark at the sink is no younger for the failure: once
	 * the stream has read it (a restart during an outage), the RPO is
	 * its age, not the time since this process added the tenant. */
	int64_t wt = ws_stream_wm_time_ms(t->st), now = ws_wall_ms();
	struct ws_outcome o;

	if (wt && !__atomic_load_n(&t->wm_mono_ms, __ATOMIC_RELAXED))
		__atomic_store_n(&t->wm_mono_ms, (int64_t)ws_mono_ms() - (now > wt ? now - wt : 0), __ATOMIC_RELAXED);
	add(&t->errors, 1);
	add(&sh->errors, 1);
	t->retry_ms = t->retry_ms ? t->retry_ms * 2 : RETRY_MIN_MS;
	if (t->retry_ms > RETRY_MAX_MS)
		t->retry_ms = RETRY_MAX_MS;
	t->retry_at = ws_mono_ms() + t->retry_ms;
	ws_eng_mark_due(t, ws_eng_key_due(sh, t, t->retry_at));
	ws_warn("shard %u: %s (retry in %u ms)", sh->id, ws_errmsg(), t->retry_ms);
	fill_error(t, &o, rc, false);
	trouble(sh, t, o.u.error.message, call->throttle_retries);
	report(sh, t, &o, rc);
}

/* The refusals since the last acknowledged tail land in this one's count. */
static void land_refusals(struct tenant *t, struct ws_outcome *o)
{
	struct ws_backpressure_report *bp = NULL;
	if (o->kind == WS_OUTCOME_STREAMED)
		bp = &o->u.streamed.backpressure;
	else if (o->kind == WS_OUTCOME_RESTARTED)
		bp = &o->u.restarted.backpressure;
	if (!bp)
		return;
	bp->throttle_retries += t->pending_throttle;
	t->pending_throttle = 0;
}

static void tail_landed(struct shard *sh, struct tenant *t, const struct ws_stream_call *call, struct ws_outcome *o)
{
	const struct ws_rpo_status *rpo;
	uint64_t frames = 0;

	t->retry_ms = 0;
	t->retry_at = 0;
	__atomic_store_n(&t->last_outcome, (uint32_t)o->kind, __ATOMIC_RELAXED);
	__atomic_store_n(&t->fenced, o->kind == WS_OUTCOME_FENCED, __ATOMIC_RELAXED);
	if (o->kind == WS_OUTCOME_STREAMED)
		frames = o->u.streamed.frame_count;
	else if (o->kind == WS_OUTCOME_RESTARTED)
		frames = o->u.restarted.frame_count;
	add(&t->frames, frames);
	add(&sh->frames, frames);
	/* A fenced tenant's watermark is the new owner's: its frame is not ours. */
	if (o->kind != WS_OUTCOME_FENCED)
		st64(&t->last_frame, ws_stream_wm_last_frame(t->st));
	rpo = ws_outcome_rpo(o);
	if (rpo && rpo->has_watermark)
		__atomic_store_n(&t->wm_mono_ms, (int64_t)ws_mono_ms() - (int64_t)rpo->watermark_age_ms,
				 __ATOMIC_RELAXED);
	if (o->kind == WS_OUTCOME_STREAMED || o->kind == WS_OUTCOME_RESTARTED) {
		t->wm_sent_ms = ws_stream_wm_sent_ms(t->st); /* both end with a watermark write */
		/* A change seen while this tail was in flight was made due from
		 * the watermark write before this one: one interval from this
		 * one now (a followed tenant's changes are due at once). */
		if (t->dirty && !t->tap)
			t->due_ms = ws_eng_key_due(sh, t, t->due_ms);
	}
	if (o->kind == WS_OUTCOME_SHED)
		trouble(sh, t, "every frame of the tail shed (the store is throttling)", 0);
	else if (o->kind != WS_OUTCOME_FENCED)
		acknowledged(t);
	land_refusals(t, o);
	if (sh->cfg.adaptive) {
		/* Throttled: gather longer, so the next tail's PUTs carry more
		 * frames and come less often; accepted: back towards normal. A
		 * tail whose watermark carried its manifest made one write
		 * whatever it gathered: gathering longer would only age the
		 * tenant whose write the store refused behind all the others. */
		t->age_ms = ws_adapt_age_next(t->age_ms, sh->cfg.batch_age_ms_max, throttle_age(&sh->cfg),
					      call->throttle_retries > 0 && !call->carried);
		if (t->age_ms > sh->cfg.batch_age_ms_max)
			add(&sh->coalesced, 1);
	}
	/* Stopped at its work bound: the rest of the backlog is due as soon as
	 * this tail's watermark write allows another (the next tail may reach
	 * the end of the WAL at once and write its own). */
	if (call->carried)
		add(&sh->carried, 1);
	if (call->ended_early) {
		add(&sh->ended_early, 1);
		ws_eng_mark_due(t, ws_eng_key_due(sh, t, ws_mono_ms()));
	}
	/* A commit under way (its frames written, the wal-index not yet):
	 * only the frames woke the engine, so look again without a write to
	 * wake it. After the usual gather; a tenant a query follows sooner
	 * (its writer syncs the WAL, then publishes the commit: 1 ms, doubling
	 * up to the gather while it stays under way), or its events would
	 * wait a batch_age_ms_max for a commit already made. */
	if (call->past_index)
		ws_eng_mark_due(t, t->tap ? ws_mono_ms() + index_wait(sh, t) : ws_eng_due_after_change(sh, t, ws_mono_ms()));
	else
		t->index_wait_ms = 0;
	/* Shed, or shipped a prefix and shed the rest: the rest is still to do. */
	if (o->kind == WS_OUTCOME_SHED || call->frames_shed > 0) {
		add(&t->sheds, 1);
		ws_eng_mark_due(t, ws_eng_key_due(sh, t, ws_mono_ms() + (sh->cfg.batch_age_ms_max ? sh->cfg.batch_age_ms_max : 10)));
	}
	report(sh, t, o, 0);
}

/*
 * The tail's error as a Faulted reason (WS_EVENTS_REASON_MAX bytes): the
 * tenant's directory dropped from the paths it names, so what could not be
 * decoded (the WAL header's magic, page size, checksum...) fits after them.
 */
static void derive_reason(const struct tenant *t, char *out, size_t cap)
{
	const char *m = ws_errmsg();
	const size_t dl = strlen(t->dir);
	size_t n = 0;
	while (*m && n + 1 < cap) {
		if (dl && strncmp(m, t->dir, dl) == 0 && m[dl] == '/') {
			m += dl + 1;
			continue;
		}
		out[n++] = *m++;
	}
	out[n] = '\0';
}

/* One tail of one tenant; returns its error (Fenced and Shed are not errors,
 * nor a deferral). Every tail reaches on_outcome, once. */
int ws_eng_tail_one(struct shard *sh, struct lane *ln, struct tenant *t, enum tail_mode mode)
{
	struct ws_outcome o;
	struct ws_stream_call call;
	int rc;

	struct ws_stream_lane sl;
	struct ws_store *store;

	WS_ASSERT(t->shard == sh->id && t->st);
	WS_ASSERT(sh->tenants[t->idx] == t);
	t->dirty = false;
	if (!t->open)
		make_room(sh);
	ws_eng_lane_of(sh, ln, &sl);
	ws_stream_set_lane(t->st, &sl);
	store = sl.sink->store;
	/* A drain with a deadline ends its tails at their work bound too, so
	 * it can stop between two of them when the deadline comes. */
	const bool bounded = (mode == TAIL_DUE && sh->cfg.adaptive) || (mode == TAIL_DRAIN && sh->e->drain_deadline_ms);
	ws_stream_set_tail_bound(t->st, bounded ? tail_bound(&sh->cfg) : 0, sh->cfg.key_write_interval_ms);
	ws_stream_set_drain(t->st, mode == TAIL_DRAIN);
	/* The shard's own schedule does not wait out a throttled write on
	 * this thread (or lane), where tenants' manifest and watermark writes
	 * go one at a time: the tail fails with nothing acknowledged, and the
	 * tenant is tailed again once the store's Retry-After is over, while
	 * the others go on at the pacer's cut rate (as the AWS SDKs' adaptive
	 * mode: the refused request waits, the client's token bucket paces the
	 * rest). A flush and the final drain wait as before. */
	const bool fail_fast = mode == TAIL_DUE && sh->cfg.adaptive;
	/* Its watermark write waits out key_write_interval_ms, the tail
	 * having started its lead before (ws_eng_key_due): a due tail of an
	 * open tenant nobody follows, as ws_eng_key_due made it due (a
	 * followed tenant, and one with nothing open, are tailed at once:
	 * engine_shard.c read_events). */
	const bool key_wait = fail_fast && t->open && !t->tap && !ws_stream_slots(t->st);
	ws_stream_set_key_wait(t->st, key_wait, key_lead(sh, t), &sh->e->stopping);
	const uint64_t started = ws_mono_ms();
	store->throttle_fail_fast = fail_fast;
	store->throttle_until_ms = 0;
	ws_stream_set_events(t->st, t->tap);
	rc = ws_stream_tail_frames(t->st, &o);
	ws_stream_set_events(t->st, NULL);
	store->throttle_fail_fast = false;
	if (t->tap) {
		/* A WAL that cannot be decoded ends the events derived from it. */
		if (rc == WS_ENOTWAL) {
			char reason[WS_EVENTS_REASON_MAX];
			derive_reason(t, reason, sizeof(reason));
			ws_ev_tap_fault(t->tap, WS_CAUSE_DERIVE, "%s", reason);
		}
		if (t->tap->faulted) {
			free(t->tap);
			t->tap = NULL;
		}
	}
	if (!ws_stream_parked(t->st) && !t->open) {
		t->open = true;
		sh->open_count++;
	}
	if (t->open)
		lru_front(sh, t);
	WS_ASSERT(sh->open_count <= sh->open_max + 1 + sh->nlanes);
	ws_stream_last_call(t->st, &call);

	add(&t->tails, 1);
	add(&sh->tails, 1);
	add(&t->puts, call.puts);
	add(&sh->puts, call.puts);
	add(&t->bytes, call.bytes);
	add(&sh->bytes, call.bytes);
	add(&t->throttle, call.throttle_retries);
	add(&sh->throttle, call.throttle_retries);
	add(&t->shed_frames, call.frames_shed);
	add(&sh->shed_frames, call.frames_shed);
	max64(&sh->high_water, call.spill_high_water);
	if (key_wait && call.wm_ready_ms >= started)
		(void)ws_adapt_lead_next(&t->lead_ms, &t->lead_dev_ms, call.wm_ready_ms - started,
					 sh->cfg.key_write_interval_ms / 2);
	if (call.key_wait_ms)
		add(&sh->key_waits, 1);
	if (rc == WS_ETHROTTLED && fail_fast && store->throttle_until_ms) {
		tail_deferred(sh, t, &call, rc, store->throttle_until_ms);
		return 0;
	}
	if (rc) {
		tail_failed(sh, t, &call, rc);
		return rc;
	}
	tail_landed(sh, t, &call, &o);
	return 0;
}
