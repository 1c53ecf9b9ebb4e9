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

/* A tail wanted at `at`, which ends with a watermark write: (adaptive) no
 * sooner than one key_write_interval_ms after the tenant's last one,
 * whatever made it due (a change, a continuation, a retry, lost events). */
uint64_t ws_eng_key_due(const struct shard *sh, const struct tenant *t, uint64_t at)
{
	if (!sh->cfg.adaptive)
		return at;
	return ws_adapt_key_due(at, t->wm_put_ms, sh->cfg.key_write_interval_ms);
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
}

static void lru_front(struct shard *sh, struct tenant *t)
{
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
	ws_stream_park(t->st);
	t->open = false;
	sh->open_count--;
	lru_unlink(sh, t);
}

void ws_eng_mark_due(struct tenant *t, uint64_t due)
{
	/* A failing tenant backs off whatever makes it due again: a writer's
	 * next commit must not turn the backoff into batch_age_ms_max. */
	if (due < t->retry_at)
		due = t->retry_at;
	if (!t->dirty || due < t->due_ms)
		t->due_ms = due;
	t->dirty = true;
}

/* One tail of one tenant; returns its error (Fenced and Shed are not errors). */
int ws_eng_tail_one(struct shard *sh, struct tenant *t, enum tail_mode mode)
{
	struct ws_engine *e = sh->e;
	struct ws_outcome o;
	struct ws_stream_call call;
	const struct ws_rpo_status *rpo;
	uint64_t frames = 0;
	int rc;

	t->dirty = false;
	if (!t->open) {
		while (sh->open_count >= sh->open_max && sh->lru_tail)
			ws_eng_park(sh, sh->lru_tail);
	}
	ws_stream_set_tail_bound(t->st, mode == TAIL_DUE && sh->cfg.adaptive ? tail_bound(&sh->cfg) : 0,
				 sh->cfg.key_write_interval_ms);
	ws_stream_set_drain(t->st, mode == TAIL_DRAIN);
	/* The shard's own schedule does not wait out a throttled write on
	 * this thread, where every tenant's manifest and watermark writes go
	 * one at a time: the tail fails with nothing acknowledged, and the
	 * tenant is tailed again once the store's Retry-After is over, while
	 * the others go on at the pacer's cut rate (as the AWS SDKs' adaptive
	 * mode: the refused request waits, the client's token bucket paces the
	 * rest). A flush and the final drain wait as before. */
	const bool fail_fast = mode == TAIL_DUE && sh->cfg.adaptive;
	sh->sink.store->throttle_fail_fast = fail_fast;
	sh->sink.store->throttle_until_ms = 0;
	rc = ws_stream_tail_frames(t->st, &o);
	sh->sink.store->throttle_fail_fast = false;
	if (!ws_stream_parked(t->st) && !t->open) {
		t->open = true;
		sh->open_count++;
	}
	if (t->open)
		lru_front(sh, t);
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
	if (rc == WS_ETHROTTLED && fail_fast && sh->sink.store->throttle_until_ms) {
		/* Refused by a store that throttles: not an error, nothing
		 * acknowledged; again after its Retry-After. */
		uint64_t until = sh->sink.store->throttle_until_ms;
		if (!call.throttle_retries) {
			add(&t->throttle, 1);
			add(&sh->throttle, 1);
		}
		add(&sh->deferred, 1);
		t->retry_ms = 0;
		t->retry_at = until;
		ws_eng_mark_due(t, ws_eng_key_due(sh, t, until));
		ws_debug("shard %u: %s (tenant %s again in %" PRIu64 " ms)", sh->id, ws_errmsg(), t->name,
			 until > ws_mono_ms() ? until - ws_mono_ms() : 0);
		return 0;
	}
	if (rc) {
		/* The watermark at the sink is no younger for the failure: once
		 * the stream has read it (a restart during an outage), the RPO is
		 * its age, not the time since this process added the tenant. */
		int64_t wt = ws_stream_wm_time_ms(t->st), now = ws_wall_ms();
		if (wt && !__atomic_load_n(&t->wm_mono_ms, __ATOMIC_RELAXED))
			__atomic_store_n(&t->wm_mono_ms, (int64_t)ws_mono_ms() - (now > wt ? now - wt : 0),
					 __ATOMIC_RELAXED);
		add(&t->errors, 1);
		add(&sh->errors, 1);
		t->retry_ms = t->retry_ms ? t->retry_ms * 2 : RETRY_MIN_MS;
		if (t->retry_ms > RETRY_MAX_MS)
			t->retry_ms = RETRY_MAX_MS;
		t->retry_at = ws_mono_ms() + t->retry_ms;
		ws_eng_mark_due(t, ws_eng_key_due(sh, t, t->retry_at));
		ws_warn("shard %u: %s (retry in %u ms)", sh->id, ws_errmsg(), t->retry_ms);
		if (e->cfg.on_outcome) {
			memset(&o, 0, sizeof(o));
			e->cfg.on_outcome(t->name, &o, rc, e->cfg.arg);
		}
		return rc;
	}
	t->retry_ms = 0;
	t->retry_at = 0;
	__atomic_store_n(&t->last_outcome, (uint32_t)o.kind, __ATOMIC_RELAXED);
	__atomic_store_n(&t->fenced, o.kind == WS_OUTCOME_FENCED, __ATOMIC_RELAXED);
	if (o.kind == WS_OUTCOME_STREAMED)
		frames = o.u.streamed.frame_count;
	else if (o.kind == WS_OUTCOME_RESTARTED)
		frames = o.u.restarted.frame_count;
	add(&t->frames, frames);
	add(&sh->frames, frames);
	/* A fenced tenant's watermark is the new owner's: its frame is not ours. */
	if (o.kind != WS_OUTCOME_FENCED)
		st64(&t->last_frame, ws_stream_wm_last_frame(t->st));
	rpo = ws_outcome_rpo(&o);
	if (rpo && rpo->has_watermark)
		__atomic_store_n(&t->wm_mono_ms, (int64_t)ws_mono_ms() - (int64_t)rpo->watermark_age_ms,
				 __ATOMIC_RELAXED);
	if (o.kind == WS_OUTCOME_STREAMED || o.kind == WS_OUTCOME_RESTARTED)
		t->wm_put_ms = ws_mono_ms(); /* both end with a watermark write */
	if (sh->cfg.adaptive) {
		/* Throttled: gather longer, so the next tail's PUTs carry more
		 * frames and come less often; accepted: back towards normal. A
		 * tail whose watermark carried its manifest made one write
		 * whatever it gathered: gathering longer would only age the
		 * tenant whose write the store refused behind all the others. */
		t->age_ms = ws_adapt_age_next(t->age_ms, sh->cfg.batch_age_ms_max, throttle_age(&sh->cfg),
					      call.throttle_retries > 0 && !call.carried);
		if (t->age_ms > sh->cfg.batch_age_ms_max)
			add(&sh->coalesced, 1);
	}
	/* Stopped at its work bound: the rest of the backlog is due as soon as
	 * this tail's watermark write allows another (the next tail may reach
	 * the end of the WAL at once and write its own). */
	if (call.carried)
		add(&sh->carried, 1);
	if (call.ended_early) {
		add(&sh->ended_early, 1);
		ws_eng_mark_due(t, ws_eng_key_due(sh, t, ws_mono_ms()));
	}
	/* A commit under way (its frames written, the wal-index not yet):
	 * only the frames woke the engine, so look again after the usual gather. */
	if (call.past_index)
		ws_eng_mark_due(t, ws_eng_due_after_change(sh, t, ws_mono_ms()));
	/* Shed, or shipped a prefix and shed the rest: the rest is still to do. */
	if (o.kind == WS_OUTCOME_SHED || call.frames_shed > 0) {
		add(&t->sheds, 1);
		ws_eng_mark_due(t, ws_eng_key_due(sh, t, ws_mono_ms() + (sh->cfg.batch_age_ms_max ? sh->cfg.batch_age_ms_max : 10)));
	}
	if (e->cfg.on_outcome)
		e->cfg.on_outcome(t->name, &o, 0, e->cfg.arg);
	return 0;
}

