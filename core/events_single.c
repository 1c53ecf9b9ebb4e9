/*
 * The event channel in single-thread mode (docs/EVENTS.md, "Single-thread
 * mode"): one stream, one shard, no shard thread and no channel thread.
 * The host calls ws_events_tail, which tails the stream on its own thread
 * and writes the events of that tail into the channel's own ring (the
 * engine's record layout, events.h), then reads them with ws_events_next.
 *
 * As the seed's single-thread Db, it never emits Faulted:
 *   - a WAL that cannot be decoded fails the ws_events_tail call (the
 *     tail's WS_ENOTWAL), and the queries stay as they were;
 *   - a frame never reaches the host before its commit: what a tail
 *     emitted past its last commit is taken back at the call's end
 *     (settle_tap), so no rollback can follow a delivery;
 *   - whatever would fault a query of an engine's channel (a gap the tap
 *     cannot cross, the host fell lag_bytes_max behind: the seed's delta
 *     overflow) drops the unread events and hydrates every query again.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "events.h"
#include "stream_internal.h"
#include "ws_assert.h"
#include "ws_logging.h"
#include "ws_stream.h"

/* The one tenant of the channel's hub (an engine counts from 1 too). */
#define SINGLE_TENANT_ID 1u

struct ws_ev_single {
	struct ws_stream *st;
	struct ws_ev_hub *hub;       /* one shard: shard 0 */
	struct ws_ev_tap *tap;       /* while a query follows the tenant */
	uint64_t tap_epoch;          /* bumped at every new tap */
	uint32_t chain;              /* tx_id's chain, kept across taps (struct tenant's ev_chain) */
	uint32_t chain_salt[2];
};

/* The channel outlived its stream (ws_stream_close first): what needs it is refused. */
static int stream_gone(void)
{
	return ws_fail(WS_ECONFIG, "events: the channel's stream was closed (close the channel first): "
		       "nothing can be tailed or hydrated");
}

void ws_ev_single_stream_closed(struct ws_events *ev)
{
	struct ws_ev_single *s = ws_ev_chan_single(ev);
	ws_warn("events: tenant %s: its stream closed before its single-thread channel", s->st->tenant);
	s->st = NULL;
}

int ws_ev_single_find(struct ws_ev_single *s, const char *name, uint64_t *tenant_id)
{
	if (!s->st)
		return stream_gone();
	if (strcmp(name, s->st->tenant) != 0)
		return ws_fail(WS_ENOTFOUND, "events: subscribe: tenant %s: a single-thread channel follows its "
			       "stream's tenant %s alone", name, s->st->tenant);
	*tenant_id = SINGLE_TENANT_ID;
	return 0;
}

int ws_ev_single_hydrate(struct ws_ev_single *s, struct ws_ev_hydrate *hy, uint64_t *tap_epoch)
{
	const bool had = s->tap != NULL;
	int rc;
	if (!s->st)
		return stream_gone();
	hy->db_path = s->st->db_path;
	rc = ws_ev_hydrate(s->hub, 0, &s->tap, SINGLE_TENANT_ID, &s->chain, s->chain_salt, hy);
	if (rc)
		return rc;
	if (!had) {
		s->tap->single = true;
		s->tap_epoch++;
	}
	*tap_epoch = s->tap_epoch;
	return 0;
}

void ws_ev_single_release(struct ws_ev_single *s, uint64_t tap_epoch)
{
	if (s->tap && tap_epoch == s->tap_epoch)
		ws_ev_tap_release(&s->tap);
}

void ws_ev_single_drop_tap(struct ws_ev_single *s)
{
	free(s->tap);
	s->tap = NULL;
}

void ws_ev_single_free(struct ws_ev_single *s)
{
	if (s->st)
		s->st->ev_single = NULL;
	free(s->tap);
	ws_ev_hub_destroy(s->hub);
	free(s);
}

struct ws_events *ws_events_open_stream(struct ws_stream *st, const struct ws_events_config *cfg, int *err)
{
	struct ws_ev_single *s = NULL;
	struct ws_events *ev;
	int rc;
	if (!st) {
		rc = ws_fail(WS_ECONFIG, "events: open_stream: no stream");
		goto fail;
	}
	if (!st->own_reader) {
		rc = ws_fail(WS_ECONFIG, "events: tenant %s: the stream is an engine's (its shard tails it): open "
			     "the channel on the engine (ws_events_open)", st->tenant);
		goto fail;
	}
	if (st->ev_single) {
		rc = ws_fail(WS_ECONFIG, "events: tenant %s: its stream has a single-thread channel open already "
			     "(one per stream: subscribe on it as often as needed)", st->tenant);
		goto fail;
	}
	if (cfg && cfg->deadline_ms) {
		rc = ws_fail(WS_ECONFIG, "events: tenant %s: deadline_ms %u on a single-thread channel: nothing is "
			     "emitted while the host is away, so nothing can wait too long; its bound is "
			     "lag_bytes_max", st->tenant, cfg->deadline_ms);
		goto fail;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		rc = ws_fail(-ENOMEM, "events: tenant %s: no memory for a channel", st->tenant);
		goto fail;
	}
	s->st = st;
	/* The ring holds what the host may leave unread (lag_bytes_max),
	 * rounded up to a power of two (8 MiB when 0). */
	if ((rc = ws_ev_hub_create(&s->hub, 1, cfg ? cfg->lag_bytes_max : 0)) != 0)
		goto fail;
	ev = ws_ev_chan_open(NULL, s->hub, s, cfg, &rc);
	if (!ev)
		goto fail;
	st->ev_single = ev;
	*err = 0;
	return ev;
fail:
	if (s) {
		ws_ev_hub_destroy(s->hub);
		free(s);
	}
	*err = rc;
	return NULL;
}

/*
 * A frame never reaches the host before its commit: what the tap emitted
 * past its last commit in this call (from `from` on, a tail that stopped
 * inside a transaction, or failed there) is taken back, and the tap stands
 * at that commit again: the next tail, which starts at or before it (its
 * watermark), emits those frames again from its own read, with their
 * commit, or whatever replaced them. Only this thread reads the ring.
 */
static void settle_tap(struct ws_ev_single *s, uint64_t from)
{
	struct ws_ev_tap *tap = s->tap;
	struct ws_ev_ring *r = &s->hub->rings[0];
	uint64_t keep = from;
	if (tap->spec_next <= tap->commit + 1)
		return;
	for (uint64_t p = from; p < r->whead;) {
		const struct ev_rec *h = (const struct ev_rec *)(const void *)(r->mem + (p & (r->cap - 1)));
		WS_ASSERT(h->pos == p && h->len >= 16);
		p += h->len;
		if (h->kind == REC_PROGRESSED)
			keep = p;
	}
	ws_info("events: tenant %s: frames %" PRIu64 "..%" PRIu64 " read before their commit are held back until "
		"a tail reads it", s->st->tenant, tap->commit + 1, tap->spec_next - 1);
	r->whead = keep;
	/* The write limit stays: it bounds what the taken-back records overwrote. */
	__atomic_store_n(&r->head, keep, __ATOMIC_RELEASE);
	tap->spec_next = tap->commit + 1;
	tap->spec_ck[0] = tap->commit_ck[0];
	tap->spec_ck[1] = tap->commit_ck[1];
	tap->ck_known = tap->commit_ck_known;
}

int ws_events_tail(struct ws_events *ev, struct ws_outcome *out)
{
	struct ws_ev_single *s;
	struct ws_ev_ring *r;
	uint64_t from, cur, lag;
	int rc;
	if (!ev || !out)
		return ws_fail(WS_ECONFIG, "events: tail: NULL argument");
	s = ws_ev_chan_single(ev);
	if (!s)
		return ws_fail(WS_ECONFIG, "events: tail: the channel is an engine's (ws_events_open): its shards "
			       "tail the tenants; ws_events_tail drives a single-thread channel "
			       "(ws_events_open_stream)");
	if (!s->st)
		return stream_gone();
	r = &s->hub->rings[0];
	from = r->whead;
	ws_stream_set_events(s->st, s->tap);
	rc = ws_stream_tail_frames(s->st, out);
	ws_stream_set_events(s->st, NULL);
	/* A decode error (WS_ENOTWAL) is the call's error alone: the tap read
	 * nothing of that WAL and stands where it was. */
	if (s->tap && s->tap->faulted) {
		char why[WS_EVENTS_REASON_MAX];
		snprintf(why, sizeof(why), "tenant %s: its events cannot go on from where they stood (logged above)",
			 s->st->tenant);
		ws_ev_chan_rehydrate(ev, why);
	} else if (s->tap) {
		settle_tap(s, from);
	}
	/* The seed's delta overflow: the host left more than its bound unread
	 * (or this call wrote over what it had not read). */
	if (ws_ev_chan_cursor(ev, &cur, &lag) &&
	    (__atomic_load_n(&r->wlim, __ATOMIC_RELAXED) > cur + r->cap || r->whead - cur > lag)) {
		char why[WS_EVENTS_REASON_MAX];
		snprintf(why, sizeof(why), "tenant %s: the host left %" PRIu64 " bytes of events unread (lag_bytes_max %"
			 PRIu64 ")", s->st->tenant, r->whead - cur, lag);
		ws_ev_chan_rehydrate(ev, why);
	}
	return rc;
}
