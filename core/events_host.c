/*
 * The event channel, the host's side: a channel (struct ws_events) reads
 * every shard ring its queries need, a record at a time, copies it out and
 * checks it was not written over meanwhile (events.h), and turns it into
 * the events of walship.h: one per query for Hydrated and Changed, one per
 * channel for Progressed, Faulted before anything else. Everything here
 * runs on the host's thread (a channel is for one thread at a time), but
 * for the commands it posts to the shards and waits for.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine_internal.h"
#include "events.h"
#include "ws_assert.h"
#include "ws_clock.h"
#include "ws_logging.h"

#define QUERIES_DEFAULT 4096u
#define DEADLINE_DEFAULT_MS 500u
#define IMAGE_DEFAULT ((uint64_t)1 << 30)
#define TMAP_BUCKETS 1024u

const char *ws_fault_cause_name(enum ws_fault_cause c)
{
	switch (c) {
	case WS_CAUSE_DERIVE: return "derive";
	case WS_CAUSE_WORKER_LOST: return "worker_lost";
	case WS_CAUSE_ROLLBACK: return "rollback";
	case WS_CAUSE_PUSH_DEADLINE: return "push_deadline";
	}
	return "?";
}

const char *ws_update_kind_name(enum ws_update_kind k)
{
	return k == WS_UPDATE_HYDRATED ? "hydrated" : k == WS_UPDATE_CHANGED ? "changed" : "?";
}

/* One tenant of a query. */
struct qtenant {
	char name[WS_TENANT_MAX];
	uint64_t tenant_id;
	unsigned shard;
	uint64_t tap_epoch;
	bool hydrated;          /* its REC_HYDRATED was read: events after h_tx follow */
	bool need_hy;           /* single-thread: to be hydrated again (ws_ev_chan_rehydrate) */
	uint64_t h_tx;
	uint8_t *image;         /* until its REC_HYDRATED is read (sqlite3_free) */
	uint64_t pages;
	uint32_t page_size;
	struct qtenant *next_in_map; /* tenant_id -> qtenants of live queries */
	struct query *q;
};

struct query {
	uint64_t id;
	bool live;              /* events flow (false: faulted, awaiting the host's unsubscribe) */
	size_t n;
	struct qtenant *t;
	struct query *next;
};

struct pending_fault {
	uint64_t query_id;
	enum ws_fault_cause cause;
	char tenant[WS_TENANT_MAX];
	char reason[WS_EVENTS_REASON_MAX];
};

struct ws_events {
	struct ws_engine *e;
	struct ws_ev_hub *hub;
	unsigned slot;
	uint64_t slot_gen;
	struct ws_events_config cfg;
	struct query *queries;
	size_t nqueries;
	struct qtenant *map[TMAP_BUCKETS];
	uint32_t *interest;     /* per shard: live (query, tenant) pairs there */
	uint64_t *cursor;       /* per shard: read up to here (published to the slot) */
	/* Markers (docs/EVENTS.md "Markers"): comb[s * nshards + s2], live
	 * combined queries with tenants on both s and s2 (s != s2); mark_out[s],
	 * a marker asked of shard s and no Progressed of it read since. */
	uint32_t *comb;
	bool *mark_out;
	bool *scratch;          /* per shard, for comb_count */
	unsigned rr;            /* the shard read next */
	/* The record being turned into events. */
	uint8_t *buf;
	size_t buf_cap;
	bool have_cur;
	unsigned cur_shard;
	uint64_t *cur_q;        /* the queries it goes to, as they stood when it was read */
	size_t cur_n, cur_i;
	char cur_tenant[WS_TENANT_MAX];
	uint8_t *delivered_image; /* the last Hydrated's, freed at the next call */
	struct pending_fault *faults;
	size_t nfaults, faults_head, faults_cap;
	/* Single-thread mode (events_single.c; NULL: an engine's channel). */
	struct ws_ev_single *single;
	bool rehydrate;         /* some query's need_hy is set */
};

static struct qtenant **bucket(struct ws_events *ev, uint64_t tenant_id)
{
	return &ev->map[(tenant_id * 0x9e3779b97f4a7c15ull) >> 54 & (TMAP_BUCKETS - 1)];
}

static struct query *find_query(struct ws_events *ev, uint64_t id)
{
	for (struct query *q = ev->queries; q; q = q->next)
		if (q->id == id)
			return q;
	return NULL;
}

static struct ws_ev_slot *slot_of(struct ws_events *ev) { return &ev->hub->slots[ev->slot]; }

/* One more (or one less) live pair on shard s. From none, the channel
 * starts at the ring's head: nothing before concerns it. */
static void interest_add(struct ws_events *ev, unsigned s)
{
	struct ws_ev_slot *sl = slot_of(ev);
	if (ev->interest[s]++ == 0) {
		if (ev->mark_out)
			ev->mark_out[s] = false;
		ev->cursor[s] = __atomic_load_n(&ev->hub->rings[s].head, __ATOMIC_ACQUIRE);
		__atomic_store_n(&sl->cursor[s], ev->cursor[s], __ATOMIC_RELEASE);
		/* Any shed pending from an earlier interest is moot. */
		__atomic_store_n(&sl->shed_ack[s], __atomic_load_n(&sl->shed_seq[s], __ATOMIC_ACQUIRE), __ATOMIC_RELEASE);
	}
	__atomic_store_n(&sl->interest[s], ev->interest[s], __ATOMIC_RELEASE);
}

static void interest_drop(struct ws_events *ev, unsigned s)
{
	WS_ASSERT(ev->interest[s] > 0);
	ev->interest[s]--;
	__atomic_store_n(&slot_of(ev)->interest[s], ev->interest[s], __ATOMIC_RELEASE);
}

/*
 * q's shard pairs count d more in comb (a combined query: tenants on two
 * shards or more). Any change of the queries lets the channel ask every
 * shard again: a marker it asked of a tenant no longer followed never
 * comes.
 */
static void comb_count(struct ws_events *ev, const struct query *q, int d)
{
	const unsigned ns = ev->hub->nshards;
	if (ev->single)
		return;
	memset(ev->mark_out, 0, ns * sizeof(*ev->mark_out));
	memset(ev->scratch, 0, ns * sizeof(*ev->scratch));
	for (size_t i = 0; i < q->n; i++)
		ev->scratch[q->t[i].shard] = true;
	for (unsigned s = 0; s < ns; s++)
		for (unsigned s2 = 0; ev->scratch[s] && s2 < ns; s2++)
			if (s2 != s && ev->scratch[s2])
				ev->comb[s * ns + s2] += (uint32_t)d;
}

/* A tenant on shard s2 of a live query that also has one on shard s (0: none). */
static uint64_t comb_tenant(const struct ws_events *ev, unsigned s, unsigned s2)
{
	for (const struct query *q = ev->queries; q; q = q->next) {
		uint64_t on_s2 = 0;
		bool on_s = false;
		for (size_t i = 0; q->live && i < q->n; i++) {
			on_s |= q->t[i].shard == s;
			if (q->t[i].shard == s2 && !on_s2)
				on_s2 = q->t[i].tenant_id;
		}
		if (on_s && on_s2)
			return on_s2;
	}
	return 0;
}

/*
 * The channel delivered a Progressed of worker s (not a marker): every
 * other worker of a combined query with a tenant on s is to progress too
 * before the query's cv_min advances. Ask each a marker, unless one is
 * asked already and none of its Progressed read since; its shard sends it
 * only if it has sent nothing newer (the tenant's own Progressed answers),
 * at most once per marker_ms.
 */
static void ask_markers(struct ws_events *ev, unsigned s)
{
	const unsigned ns = ev->hub->nshards;
	for (unsigned s2 = 0; s2 < ns; s2++) {
		if (s2 == s || !ev->comb[s * ns + s2] || ev->mark_out[s2])
			continue;
		uint64_t id = comb_tenant(ev, s, s2);
		if (!id)
			continue;
		ev->mark_out[s2] = true;
		/* M1: the shard's exchange (engine_shard.c) takes it. */
		__atomic_store_n(&slot_of(ev)->mark_req[s2], id, __ATOMIC_RELEASE);
		ws_eng_shard_wake(&ev->e->shards[s2]);
	}
}

static void map_unlink(struct ws_events *ev, struct qtenant *qt)
{
	for (struct qtenant **pp = bucket(ev, qt->tenant_id); *pp; pp = &(*pp)->next_in_map) {
		if (*pp == qt) {
			*pp = qt->next_in_map;
			return;
		}
	}
}

/* Tell tenant i's shard that the query no longer follows it. wait: for its
 * answer (unsubscribe, close); else the command goes on its own (from
 * inside ws_events_next, which must not wait for a busy shard). */
static void release_tap(struct ws_events *ev, const struct qtenant *qt, bool wait)
{
	if (ev->single) {
		ws_ev_single_release(ev->single, qt->tap_epoch);
		return;
	}
	struct shard *sh = &ev->e->shards[qt->shard];
	struct cmd *c = calloc(1, sizeof(*c));
	if (!c) {
		ws_warn("events: no memory to release tenant %s's tap: it is fed until its last query goes", qt->name);
		return;
	}
	c->kind = CMD_UNSUBSCRIBE;
	snprintf(c->name, sizeof(c->name), "%s", qt->name);
	c->tap_epoch = qt->tap_epoch;
	c->detached = !wait;
	if (ws_eng_shard_post(sh, c) != 0) {
		free(c); /* stopped: the tap went with its shard */
		return;
	}
	if (wait) {
		(void)ws_eng_shard_wait(sh, c);
		free(c);
	}
}

/* The query's events stop: out of the map, interest dropped, taps released. */
static void query_stop(struct ws_events *ev, struct query *q, bool wait)
{
	if (!q->live)
		return;
	q->live = false;
	comb_count(ev, q, -1);
	for (size_t i = 0; i < q->n; i++) {
		struct qtenant *qt = &q->t[i];
		map_unlink(ev, qt);
		interest_drop(ev, qt->shard);
		release_tap(ev, qt, wait);
		sqlite3_free(qt->image);
		qt->image = NULL;
	}
}

static void query_free(struct ws_events *ev, struct query *q)
{
	for (struct query **pp = &ev->queries; *pp; pp = &(*pp)->next) {
		if (*pp == q) {
			*pp = q->next;
			break;
		}
	}
	for (size_t i = 0; i < q->n; i++)
		sqlite3_free(q->t[i].image);
	free(q->t);
	free(q);
	ev->nqueries--;
}

/* Queue Faulted for q (delivered before any other event) and stop it. */
static void fault_query(struct ws_events *ev, struct query *q, enum ws_fault_cause cause, const char *tenant,
			const char *reason)
{
	struct pending_fault *f;
	if (!q->live)
		return;
	if (ev->nfaults == ev->faults_cap) {
		size_t cap = ev->faults_cap ? ev->faults_cap * 2 : 16;
		struct pending_fault *n = malloc(cap * sizeof(*n));
		if (!n) {
			ws_error("events: no memory to queue query %" PRIu64 "'s fault (%s): it is stopped without one",
				 q->id, reason);
			query_stop(ev, q, false);
			return;
		}
		for (size_t i = 0; i < ev->nfaults; i++)
			n[i] = ev->faults[(ev->faults_head + i) % ev->faults_cap];
		free(ev->faults);
		ev->faults = n;
		ev->faults_cap = cap;
		ev->faults_head = 0;
	}
	f = &ev->faults[(ev->faults_head + ev->nfaults++) % ev->faults_cap];
	f->query_id = q->id;
	f->cause = cause;
	snprintf(f->tenant, sizeof(f->tenant), "%s", tenant ? tenant : "");
	snprintf(f->reason, sizeof(f->reason), "%s", reason);
	query_stop(ev, q, false);
}

/* Every live query with a tenant on shard s (or, tenant_id != 0, with that tenant). */
static void fault_where(struct ws_events *ev, unsigned s, uint64_t tenant_id, enum ws_fault_cause cause,
			const char *reason)
{
	for (struct query *q = ev->queries; q; q = q->next) {
		if (!q->live)
			continue;
		for (size_t i = 0; i < q->n; i++) {
			if (tenant_id ? q->t[i].tenant_id == tenant_id : q->t[i].shard == s) {
				fault_query(ev, q, cause, q->t[i].name, reason);
				break;
			}
		}
	}
}

/* Shard s shed this channel (or the channel found itself overrun): its
 * queries there end, and reading goes on from the ring's head. */
static void shed(struct ws_events *ev, unsigned s, uint32_t why, int64_t shed_ns, uint64_t behind)
{
	struct ws_ev_slot *sl = slot_of(ev);
	char reason[WS_EVENTS_REASON_MAX];
	if (why == 1)
		snprintf(reason, sizeof(reason), "shard %u: the host left an event unread past deadline_ms %u "
			 "(shed at %" PRId64 " ms on the monotonic clock)", s, ev->cfg.deadline_ms, shed_ns / 1000000);
	else if (shed_ns) /* the shard measured it */
		snprintf(reason, sizeof(reason), "shard %u: the host fell more than lag_bytes_max %" PRIu64 " bytes "
			 "behind (shed at %" PRId64 " ms on the monotonic clock)", s, ev->cfg.lag_bytes_max,
			 shed_ns / 1000000);
	else
		snprintf(reason, sizeof(reason), "shard %u: the host fell %" PRIu64 " bytes behind (lag_bytes_max %"
			 PRIu64 ")", s, behind, ev->cfg.lag_bytes_max);
	if (ev->single) {
		/* The seed's delta overflow: Hydrated again, never Faulted. */
		ws_ev_chan_rehydrate(ev, reason);
		return;
	}
	fault_where(ev, s, 0, WS_CAUSE_PUSH_DEADLINE, reason);
	ev->cursor[s] = __atomic_load_n(&ev->hub->rings[s].head, __ATOMIC_ACQUIRE);
	__atomic_store_n(&sl->cursor[s], ev->cursor[s], __ATOMIC_RELEASE);
}

/* Sheds the shards have decided (S2 pairs with their S1). */
static void take_sheds(struct ws_events *ev)
{
	struct ws_ev_slot *sl = slot_of(ev);
	for (unsigned s = 0; s < ev->hub->nshards; s++) {
		uint64_t seq = __atomic_load_n(&sl->shed_seq[s], __ATOMIC_ACQUIRE); /* S2 */
		if (seq == __atomic_load_n(&sl->shed_ack[s], __ATOMIC_RELAXED))
			continue;
		if (ev->interest[s])
			shed(ev, s, __atomic_load_n(&sl->shed_why[s], __ATOMIC_RELAXED),
			     __atomic_load_n(&sl->shed_ns[s], __ATOMIC_RELAXED), 0);
		__atomic_store_n(&sl->shed_ack[s], seq, __ATOMIC_RELEASE);
	}
}

static void ring_get(void *dst, const uint8_t *src, size_t n)
{
	const uint64_t *s = (const uint64_t *)(const void *)src;
	uint8_t *d = dst;
	WS_ASSERT(n % 8 == 0);
	for (size_t i = 0; i < n / 8; i++) {
		uint64_t w = __atomic_load_n(&s[i], __ATOMIC_ACQUIRE); /* R1: pairs with W2 */
		memcpy(d + i * 8, &w, 8);
	}
}

/*
 * Copy the record at shard s's cursor into buf: 1 when one was read (the
 * cursor past it), 0 when none is there, -1 when the shard wrote over it
 * (the channel is shed there).
 */
static int read_record(struct ws_events *ev, unsigned s)
{
	const struct ws_ev_ring *r = &ev->hub->rings[s];
	const uint64_t cur = ev->cursor[s];
	const uint64_t head = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE); /* C1: pairs with P1 */
	uint64_t pos, lim;
	uint32_t len;
	if (cur >= head)
		return 0;
	/* A single-thread channel's bound is checked here, by its reader: no
	 * shard thread checks it (ws_ev_chan_open). */
	if (head - cur > (ev->single ? ev->cfg.lag_bytes_max : r->cap)) {
		shed(ev, s, 2, 0, head - cur);
		return -1;
	}
	const uint8_t *at = r->mem + (cur & (r->cap - 1));
	pos = __atomic_load_n((const uint64_t *)(const void *)at, __ATOMIC_ACQUIRE);
	len = (uint32_t)__atomic_load_n((const uint64_t *)(const void *)(at + 8), __ATOMIC_ACQUIRE);
	if (pos != cur || len < 16 || len % 16 || len > r->cap / 4 + 16 || len > ev->buf_cap) {
		shed(ev, s, 2, 0, head - cur);
		return -1;
	}
	ring_get(ev->buf, at, len);
	/* R2: after the copy (its acquire loads, R1), the write limit (W1 in
	 * events.c): past cur + cap, the shard may have written over what was
	 * copied. */
	lim = __atomic_load_n(&r->wlim, __ATOMIC_RELAXED);
	if (lim > cur + r->cap) {
		shed(ev, s, 2, 0, lim - cur);
		return -1;
	}
	ev->cursor[s] = cur + len;
	/* The shard's lag and deadline checks read it (acquire). */
	__atomic_store_n(&slot_of(ev)->cursor[s], ev->cursor[s], __ATOMIC_RELEASE);
	return 1;
}

static bool after(uint64_t tx, uint64_t h_tx)
{
	return WS_TX_CHAIN(tx) > WS_TX_CHAIN(h_tx) || (WS_TX_CHAIN(tx) == WS_TX_CHAIN(h_tx) && WS_TX_FRAME(tx) > WS_TX_FRAME(h_tx));
}

/* The record just read: which queries it goes to (cur_q), or a fault. */
static void take_record(struct ws_events *ev, unsigned s)
{
	const struct ev_rec *h = (const struct ev_rec *)(const void *)ev->buf;
	ev->cur_n = ev->cur_i = 0;
	ev->cur_shard = s;
	ev->cur_tenant[0] = '\0';
	switch (h->kind) {
	case REC_HYDRATED: {
		if (h->count != ev->slot || h->aux != ev->slot_gen)
			return; /* another channel's */
		struct query *q = find_query(ev, h->query_id);
		if (!q || !q->live)
			return;
		for (size_t i = 0; i < q->n; i++) {
			if (q->t[i].tenant_id == h->tenant_id && !q->t[i].hydrated) {
				q->t[i].hydrated = true;
				q->t[i].h_tx = h->tx;
				ev->cur_q[ev->cur_n++] = q->id;
				snprintf(ev->cur_tenant, sizeof(ev->cur_tenant), "%s", q->t[i].name);
				break;
			}
		}
		break;
	}
	case REC_CHANGED:
	case REC_PROGRESSED: {
		/* A marker repeats the tenant's last tx_id: a query hydrated there takes it too. */
		const bool marker = h->kind == REC_PROGRESSED && (h->aux & WS_EV_MARKER);
		for (struct qtenant *qt = *bucket(ev, h->tenant_id); qt; qt = qt->next_in_map) {
			if (qt->tenant_id != h->tenant_id || !qt->hydrated ||
			    (marker ? after(qt->h_tx, h->tx) : !after(h->tx, qt->h_tx)))
				continue;
			snprintf(ev->cur_tenant, sizeof(ev->cur_tenant), "%s", qt->name);
			ev->cur_q[ev->cur_n++] = qt->q->id;
			if (h->kind == REC_PROGRESSED)
				break; /* once per channel */
		}
		if (h->kind == REC_PROGRESSED && !ev->single) {
			if (ev->cur_n || marker)
				ev->mark_out[s] = false; /* worker s answered */
			if (ev->cur_n && !marker)
				ask_markers(ev, s);
		}
		break;
	}
	case REC_FAULT: {
		const char *reason = (const char *)(ev->buf + sizeof(*h));
		ev->buf[h->len - 1] = '\0';
		fault_where(ev, s, h->tenant_id, (enum ws_fault_cause)h->cause, reason);
		break;
	}
	case REC_WORKER_LOST: {
		char reason[WS_EVENTS_REASON_MAX];
		snprintf(reason, sizeof(reason), "shard %u: its thread ended (the engine stopped)", s);
		fault_where(ev, s, 0, WS_CAUSE_WORKER_LOST, reason);
		break;
	}
	default:
		break; /* REC_PAD */
	}
	ev->have_cur = ev->cur_n > 0;
}

/* The next event of the current record, if one of its queries is still live. */
static bool deliver(struct ws_events *ev, struct ws_event *out)
{
	const struct ev_rec *h = (const struct ev_rec *)(const void *)ev->buf;
	while (ev->cur_i < ev->cur_n) {
		struct query *q = find_query(ev, ev->cur_q[ev->cur_i++]);
		if (!q || !q->live)
			continue;
		memset(out, 0, sizeof(*out));
		out->tenant = ev->cur_tenant;
		if (h->kind == REC_PROGRESSED) {
			out->kind = WS_EVENT_PROGRESSED;
			out->u.progressed.worker = ev->cur_shard;
			out->u.progressed.tx_id = h->tx;
			return true;
		}
		out->kind = WS_EVENT_UPDATE;
		out->u.update.query_id = q->id;
		if (h->kind == REC_CHANGED) {
			out->u.update.kind = WS_UPDATE_CHANGED;
			out->u.update.page_size = h->page_size;
			out->u.update.u.changed.position = h->tx;
			out->u.update.u.changed.count = h->count;
			out->u.update.u.changed.db_pages = (uint32_t)h->aux;
			out->u.update.u.changed.pgno = (const uint32_t *)(const void *)(ev->buf + sizeof(*h));
			out->u.update.u.changed.pages = ev->buf + sizeof(*h) + (((size_t)h->count * 4 + 7) & ~(size_t)7);
			return true;
		}
		/* REC_HYDRATED: the image the subscribe took, handed over now. */
		for (size_t i = 0; i < q->n; i++) {
			struct qtenant *qt = &q->t[i];
			if (qt->tenant_id != h->tenant_id)
				continue;
			out->u.update.kind = WS_UPDATE_HYDRATED;
			out->u.update.page_size = qt->page_size;
			out->u.update.u.hydrated.tx_id = qt->h_tx;
			out->u.update.u.hydrated.image = qt->image;
			out->u.update.u.hydrated.pages = qt->pages;
			ev->delivered_image = qt->image;
			qt->image = NULL;
			return true;
		}
	}
	ev->have_cur = false;
	return false;
}

static bool pop_fault(struct ws_events *ev, struct ws_event *out)
{
	struct pending_fault *f;
	if (!ev->nfaults)
		return false;
	f = &ev->faults[ev->faults_head];
	ev->faults_head = (ev->faults_head + 1) % ev->faults_cap;
	ev->nfaults--;
	memset(out, 0, sizeof(*out));
	out->kind = WS_EVENT_FAULTED;
	snprintf(ev->cur_tenant, sizeof(ev->cur_tenant), "%s", f->tenant);
	out->tenant = ev->cur_tenant[0] ? ev->cur_tenant : NULL;
	out->u.faulted.query_id = f->query_id;
	out->u.faulted.cause = f->cause;
	snprintf(out->u.faulted.reason, sizeof(out->u.faulted.reason), "%s", f->reason);
	return true;
}

/* Read records until one makes an event (true), or none is there (false). */
static bool step(struct ws_events *ev, struct ws_event *out)
{
	for (;;) {
		if (pop_fault(ev, out))
			return true;
		if (ev->have_cur && deliver(ev, out))
			return true;
		take_sheds(ev);
		if (ev->nfaults)
			continue;
		bool any = false;
		for (unsigned k = 0; k < ev->hub->nshards && !any; k++) {
			unsigned s = (ev->rr + k) % ev->hub->nshards;
			if (!ev->interest[s])
				continue;
			int rc = read_record(ev, s);
			if (rc == 0)
				continue;
			any = true;
			/* Stay on the shard while it has records: its events in order. */
			ev->rr = s;
			if (rc > 0)
				take_record(ev, s);
			else
				ev->rr = s + 1;
		}
		if (!any) {
			ev->rr++;
			return false;
		}
	}
}

/* The baseline of q's tenant qt: a command to its shard, or inline (single-thread). */
static int hydrate_one(struct ws_events *ev, struct query *q, struct qtenant *qt)
{
	struct ws_ev_hydrate hy = {
		.tenant = qt->name,
		.db_path = NULL,
		.query_id = q->id,
		.slot = ev->slot,
		.slot_gen = ev->slot_gen,
		.image_bytes_max = ev->cfg.image_bytes_max,
	};
	int rc;
	if (ev->single) {
		rc = ws_ev_single_hydrate(ev->single, &hy, &qt->tap_epoch);
	} else {
		struct cmd c = { .kind = CMD_SUBSCRIBE, .hy = &hy };
		snprintf(c.name, sizeof(c.name), "%s", qt->name);
		rc = ws_eng_shard_post(&ev->e->shards[qt->shard], &c);
		if (rc == 0)
			rc = ws_eng_shard_wait(&ev->e->shards[qt->shard], &c);
		qt->tap_epoch = c.tap_epoch;
	}
	if (rc)
		return rc;
	qt->image = hy.image;
	qt->pages = hy.pages;
	qt->page_size = hy.page_size;
	return 0;
}

void ws_ev_chan_rehydrate(struct ws_events *ev, const char *why)
{
	WS_ASSERT(ev->single);
	ws_warn("events: %s: the events the host has not read are dropped; every query of the channel is "
		"hydrated again", why);
	ev->have_cur = false;
	/* Single-thread: the ring is written on this thread only, between reads. */
	ev->cursor[0] = __atomic_load_n(&ev->hub->rings[0].head, __ATOMIC_ACQUIRE);
	__atomic_store_n(&slot_of(ev)->cursor[0], ev->cursor[0], __ATOMIC_RELEASE);
	ws_ev_single_drop_tap(ev->single);
	for (struct query *q = ev->queries; q; q = q->next) {
		for (size_t i = 0; q->live && i < q->n; i++) {
			struct qtenant *qt = &q->t[i];
			qt->hydrated = false;
			qt->need_hy = true;
			qt->tap_epoch = 0; /* counts in no tap */
			sqlite3_free(qt->image);
			qt->image = NULL;
		}
	}
	ev->rehydrate = true;
}

/* Single-thread: the queries ws_ev_chan_rehydrate marked get their baseline again. */
static int rehydrate(struct ws_events *ev)
{
	for (int attempt = 0;; attempt++) {
		int rc = 0;
		for (struct query *q = ev->queries; q && !rc; q = q->next) {
			for (size_t i = 0; q->live && i < q->n && !rc; i++) {
				if (q->t[i].need_hy && (rc = hydrate_one(ev, q, &q->t[i])) == 0)
					q->t[i].need_hy = false;
			}
		}
		if (rc == 0) {
			ev->rehydrate = false;
			return 0;
		}
		if (rc != -EAGAIN)
			return rc;
		if (attempt == 2)
			return ws_fail(-EBUSY, "events: the WAL restarted under a baseline three times: call "
				       "ws_events_next again");
		/* The WAL restarted between two baselines on one tap: all again, on a new one. */
		ws_ev_chan_rehydrate(ev, "the WAL restarted while the queries were hydrated again");
	}
}

/* Single-thread: what the ws_events_tail calls wrote; nothing comes while waiting. */
static int next_single(struct ws_events *ev, struct ws_event *out, int timeout_ms)
{
	if (timeout_ms != 0)
		return ws_fail(WS_ECONFIG, "events: next: timeout_ms %d on a single-thread channel "
			       "(ws_events_open_stream): no thread emits while it waits; call ws_events_tail, "
			       "then ws_events_next with timeout_ms 0", timeout_ms);
	/* Twice: reading may find the host fell behind its bound (shed). */
	for (int pass = 0; pass < 2; pass++) {
		int rc;
		if (ev->rehydrate && (rc = rehydrate(ev)) != 0)
			return rc;
		if (step(ev, out))
			return 0;
		if (!ev->rehydrate)
			break;
	}
	return -EAGAIN;
}

static void drain_fd(int efd)
{
	uint64_t v;
	if (read(efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		ws_warn("events: eventfd: %s", strerror(errno));
}

int ws_events_next(struct ws_events *ev, struct ws_event *out, int timeout_ms)
{
	struct ws_ev_slot *sl;
	uint64_t until;
	if (!ev || !out)
		return ws_fail(WS_ECONFIG, "events: next: NULL argument");
	sqlite3_free(ev->delivered_image);
	ev->delivered_image = NULL;
	if (ev->single)
		return next_single(ev, out, timeout_ms);
	sl = slot_of(ev);
	until = timeout_ms > 0 ? ws_mono_ms() + (uint64_t)timeout_ms : 0;
	for (;;) {
		if (step(ev, out)) {
			__atomic_store_n(&sl->waiting, 0, __ATOMIC_RELAXED);
			return 0;
		}
		/* W/H: waiting before the last look (seq_cst), so a shard that
		 * publishes after the look sees it and wakes the fd (Dekker with
		 * P1); the fd drained before that look. Left set on -EAGAIN: a
		 * host that polls ws_events_fd itself is woken as this loop is. */
		__atomic_store_n(&sl->waiting, 1, __ATOMIC_SEQ_CST);
		drain_fd(sl->efd);
		if (step(ev, out)) {
			__atomic_store_n(&sl->waiting, 0, __ATOMIC_RELAXED);
			return 0;
		}
		int wait = -1;
		if (timeout_ms == 0)
			return -EAGAIN;
		if (timeout_ms > 0) {
			uint64_t now = ws_mono_ms();
			if (now >= until)
				return -EAGAIN;
			wait = (int)(until - now);
		}
		struct pollfd p = { .fd = sl->efd, .events = POLLIN };
		if (poll(&p, 1, wait) < 0 && errno != EINTR)
			return ws_fail(-errno, "events: poll: %s", strerror(errno));
	}
}

int ws_events_fd(const struct ws_events *ev)
{
	return ev && !ev->single ? ev->hub->slots[ev->slot].efd : -1;
}

struct ws_ev_single *ws_ev_chan_single(const struct ws_events *ev) { return ev->single; }

bool ws_ev_chan_cursor(const struct ws_events *ev, uint64_t *cursor, uint64_t *lag_bytes_max)
{
	*cursor = ev->cursor[0];
	*lag_bytes_max = ev->cfg.lag_bytes_max;
	return ev->interest[0] > 0;
}

struct ws_events *ws_events_open(struct ws_engine *e, const struct ws_events_config *cfg, int *err)
{
	struct ws_ev_hub *hub;
	int rc;
	if (!e) {
		*err = ws_fail(WS_ECONFIG, "events: no engine");
		return NULL;
	}
	pthread_mutex_lock(&e->reg_mu);
	hub = e->hub;
	if (!hub) {
		rc = ws_ev_hub_create(&hub, e->nshards, e->cfg.events_ring_bytes);
		if (rc) {
			pthread_mutex_unlock(&e->reg_mu);
			*err = rc;
			return NULL;
		}
		/* A1: the shards' acquire loads of e->hub see it whole. */
		__atomic_store_n(&e->hub, hub, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&e->reg_mu);
	return ws_ev_chan_open(e, hub, NULL, cfg, err);
}

struct ws_events *ws_ev_chan_open(struct ws_engine *e, struct ws_ev_hub *hub, struct ws_ev_single *single,
				  const struct ws_events_config *cfg, int *err)
{
	struct ws_events *ev = calloc(1, sizeof(*ev));
	int rc;
	if (!ev) {
		rc = -ENOMEM;
		goto fail;
	}
	ev->e = e;
	ev->single = single;
	if (cfg)
		ev->cfg = *cfg;
	if (!ev->cfg.deadline_ms)
		ev->cfg.deadline_ms = DEADLINE_DEFAULT_MS;
	if (!ev->cfg.queries_max)
		ev->cfg.queries_max = QUERIES_DEFAULT;
	if (!ev->cfg.image_bytes_max)
		ev->cfg.image_bytes_max = IMAGE_DEFAULT;
	if (!ev->cfg.marker_ms)
		ev->cfg.marker_ms = WS_EV_MARKER_MS_DEFAULT;
	ev->slot = WS_EV_SLOTS;
	ev->hub = hub;
	const uint64_t cap = hub->rings[0].cap;
	if (!ev->cfg.lag_bytes_max || ev->cfg.lag_bytes_max > cap)
		ev->cfg.lag_bytes_max = cap;
	ev->buf_cap = cap / 4 + 16;
	ev->buf = aligned_alloc(64, (ev->buf_cap + 63) & ~(size_t)63);
	ev->cur_q = calloc(ev->cfg.queries_max, sizeof(*ev->cur_q));
	ev->interest = calloc(hub->nshards, sizeof(*ev->interest));
	ev->cursor = calloc(hub->nshards, sizeof(*ev->cursor));
	ev->comb = calloc((size_t)hub->nshards * hub->nshards, sizeof(*ev->comb));
	ev->mark_out = calloc(hub->nshards, sizeof(*ev->mark_out));
	ev->scratch = calloc(hub->nshards, sizeof(*ev->scratch));
	if (!ev->buf || !ev->cur_q || !ev->interest || !ev->cursor || !ev->comb || !ev->mark_out || !ev->scratch) {
		rc = -ENOMEM;
		goto fail;
	}
	pthread_mutex_lock(&hub->mu);
	for (unsigned i = 0; i < WS_EV_SLOTS; i++) {
		struct ws_ev_slot *sl = &hub->slots[i];
		if (__atomic_load_n(&sl->live, __ATOMIC_RELAXED))
			continue;
		uint64_t v;
		ev->slot = i;
		ev->slot_gen = ++sl->gen;
		sl->deadline_ns = (uint64_t)ev->cfg.deadline_ms * 1000000u;
		sl->lag_bytes = ev->cfg.lag_bytes_max;
		if (single) {
			/* No thread writes while the host is away: no deadline,
			 * and the bound is the reader's (read_record). */
			sl->deadline_ns = (uint64_t)1 << 62;
			sl->lag_bytes = UINT64_MAX;
		}
		__atomic_store_n(&sl->marker_ms, ev->cfg.marker_ms, __ATOMIC_RELAXED);
		sl->waiting = 1; /* the fd is woken before any ws_events_next (a host may poll it first) */
		sl->paused = 0;
		for (unsigned s = 0; s < hub->nshards; s++) {
			__atomic_store_n(&sl->interest[s], 0, __ATOMIC_RELAXED);
			__atomic_store_n(&sl->mark_req[s], 0, __ATOMIC_RELAXED);
			__atomic_store_n(&sl->shed_ack[s], __atomic_load_n(&sl->shed_seq[s], __ATOMIC_RELAXED),
					 __ATOMIC_RELAXED);
		}
		while (read(sl->efd, &v, sizeof(v)) > 0)
			; /* a wake meant for the slot's last channel */
		/* L1: the settings above before the shards see it live. */
		__atomic_store_n(&sl->live, 1, __ATOMIC_RELEASE);
		break;
	}
	pthread_mutex_unlock(&hub->mu);
	if (ev->slot == WS_EV_SLOTS) {
		rc = ws_fail(WS_ETOOBIG, "events: %u channels open already", WS_EV_SLOTS);
		goto fail;
	}
	*err = 0;
	return ev;
fail:
	if (ev) {
		free(ev->buf);
		free(ev->cur_q);
		free(ev->interest);
		free(ev->cursor);
		free(ev->comb);
		free(ev->mark_out);
		free(ev->scratch);
		free(ev);
	}
	*err = rc;
	return NULL;
}

void ws_events_close(struct ws_events *ev)
{
	if (!ev)
		return;
	while (ev->queries) {
		query_stop(ev, ev->queries, true);
		query_free(ev, ev->queries);
	}
	struct ws_ev_slot *sl = slot_of(ev);
	pthread_mutex_lock(&ev->hub->mu);
	__atomic_store_n(&sl->live, 0, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&ev->hub->mu);
	sqlite3_free(ev->delivered_image);
	free(ev->faults);
	free(ev->buf);
	free(ev->cur_q);
	free(ev->interest);
	free(ev->cursor);
	free(ev->comb);
	free(ev->mark_out);
	free(ev->scratch);
	if (ev->single)
		ws_ev_single_free(ev->single); /* its hub too, the slot freed above */
	free(ev);
}

/*
 * The host cannot read while it waits in ws_events_subscribe: the shards
 * run no deadline on the channel meanwhile, and none counts from before it
 * came out (the lag bound still holds).
 */
static void deadline_pause(struct ws_events *ev, bool on)
{
	struct ws_ev_slot *sl = slot_of(ev);
	if (!on)
		__atomic_store_n(&sl->resume_ns, (int64_t)ws_mono_ns(), __ATOMIC_RELAXED);
	/* Release: the resume time before the shards see the pause end. */
	__atomic_store_n(&sl->paused, on ? 1u : 0u, __ATOMIC_RELEASE);
}

static int subscribe(struct ws_events *ev, const char *const *tenants, size_t n, uint64_t *query_id);

int ws_events_subscribe(struct ws_events *ev, const char *const *tenants, size_t n, uint64_t *query_id)
{
	int rc;
	if (!ev || ev->single)
		return subscribe(ev, tenants, n, query_id);
	deadline_pause(ev, true);
	rc = subscribe(ev, tenants, n, query_id);
	deadline_pause(ev, false);
	return rc;
}

static int subscribe(struct ws_events *ev, const char *const *tenants, size_t n, uint64_t *query_id)
{
	struct query *q = NULL;
	size_t done = 0;
	int rc;
	if (!ev || !tenants || !query_id || n == 0)
		return ws_fail(WS_ECONFIG, "events: subscribe: %s", n == 0 && ev && tenants && query_id ?
			       "no tenant named" : "NULL argument");
	if (ev->single && n > 1)
		return ws_fail(WS_ECONFIG, "events: subscribe: %zu tenants on a single-thread channel "
			       "(ws_events_open_stream): it has one shard and one tenant, its stream's; a query of "
			       "several tenants or shards needs an engine's channel (ws_events_open)", n);
	if (ev->nqueries >= ev->cfg.queries_max)
		return ws_fail(WS_ETOOBIG, "events: %u queries open on the channel already (queries_max)",
			       ev->cfg.queries_max);
	q = calloc(1, sizeof(*q));
	if (!q || !(q->t = calloc(n, sizeof(*q->t)))) {
		free(q);
		return ws_fail(-ENOMEM, "events: no memory for a query of %zu tenants", n);
	}
	q->n = n;
	/* Each tenant: registered, named once; its shard and id. */
	for (size_t i = 0; i < n; i++) {
		struct qtenant *qt = &q->t[i];
		struct tenant *t;
		if (!tenants[i]) {
			rc = ws_fail(WS_ECONFIG, "events: subscribe: tenant %zu is NULL", i);
			goto fail;
		}
		for (size_t j = 0; j < i; j++) {
			if (strcmp(tenants[j], tenants[i]) == 0) {
				rc = ws_fail(WS_ECONFIG, "events: subscribe: tenant %s named twice", tenants[i]);
				goto fail;
			}
		}
		if (ev->single) {
			if ((rc = ws_ev_single_find(ev->single, tenants[i], &qt->tenant_id)) != 0)
				goto fail;
			snprintf(qt->name, sizeof(qt->name), "%s", tenants[i]);
			qt->q = q;
			continue;
		}
		pthread_mutex_lock(&ev->e->reg_mu);
		t = ws_eng_reg_find(ev->e, tenants[i]);
		if (t && !t->removing) {
			qt->tenant_id = t->ev_id;
			qt->shard = t->shard;
		}
		pthread_mutex_unlock(&ev->e->reg_mu);
		if (!t || !qt->tenant_id) {
			rc = ws_fail(WS_ENOTFOUND, "events: subscribe: tenant %s is not registered", tenants[i]);
			goto fail;
		}
		snprintf(qt->name, sizeof(qt->name), "%s", tenants[i]);
		qt->q = q;
	}
	q->id = __atomic_fetch_add(&ev->hub->next_query, 1, __ATOMIC_RELAXED);
	q->live = true;
	/* One baseline per tenant, each on its shard; the channel reads from
	 * each ring's head as it was before the command (interest_add). */
	for (; done < n; done++) {
		struct qtenant *qt = &q->t[done];
		interest_add(ev, qt->shard);
		rc = hydrate_one(ev, q, qt);
		if (rc) {
			interest_drop(ev, qt->shard);
			goto fail;
		}
		qt->next_in_map = *bucket(ev, qt->tenant_id);
		*bucket(ev, qt->tenant_id) = qt;
	}
	q->next = ev->queries;
	ev->queries = q;
	ev->nqueries++;
	comb_count(ev, q, 1);
	*query_id = q->id;
	return 0;
fail:
	{
		char msg[512];
		snprintf(msg, sizeof(msg), "%s", ws_errmsg());
		for (size_t i = 0; i < done; i++) {
			map_unlink(ev, &q->t[i]);
			interest_drop(ev, q->t[i].shard);
			release_tap(ev, &q->t[i], true);
			sqlite3_free(q->t[i].image);
		}
		free(q->t);
		free(q);
		return ws_fail(rc, "%s", msg);
	}
}

int ws_events_unsubscribe(struct ws_events *ev, uint64_t query_id)
{
	struct query *q;
	if (!ev)
		return ws_fail(WS_ECONFIG, "events: unsubscribe: NULL channel");
	q = find_query(ev, query_id);
	if (!q)
		return ws_fail(WS_ENOTFOUND, "events: unsubscribe: no query %" PRIu64 " on the channel (never "
			       "subscribed, or unsubscribed already)", query_id);
	query_stop(ev, q, true);
	/* Its Faulted, if one is queued, goes with it: no event of it follows. */
	for (size_t i = 0, m = ev->nfaults; i < m; i++) {
		struct pending_fault f = ev->faults[ev->faults_head];
		ev->faults_head = (ev->faults_head + 1) % ev->faults_cap;
		ev->nfaults--;
		if (f.query_id != query_id)
			ev->faults[(ev->faults_head + ev->nfaults++) % ev->faults_cap] = f;
	}
	query_free(ev, q);
	return 0;
}

int ws_events_cv_init(struct ws_events *ev, uint64_t query_id, struct ws_events_cv *cv)
{
	struct query *q;
	if (!ev || !cv)
		return ws_fail(WS_ECONFIG, "events: cv_init: NULL argument");
	q = find_query(ev, query_id);
	if (!q || !q->live)
		return ws_fail(WS_ENOTFOUND, "events: cv_init: no live query %" PRIu64, query_id);
	memset(cv, 0, sizeof(*cv));
	cv->query_id = query_id;
	for (size_t i = 0; i < q->n; i++) {
		bool seen = false;
		for (unsigned w = 0; w < cv->workers; w++)
			seen |= cv->worker[w] == q->t[i].shard;
		if (!seen)
			cv->worker[cv->workers++] = q->t[i].shard;
	}
	return 0;
}

bool ws_events_cv_note(struct ws_events_cv *cv, const struct ws_event *e)
{
	bool all = true, hit = false;
	if (!cv || !e || e->kind != WS_EVENT_PROGRESSED)
		return false;
	for (unsigned w = 0; w < cv->workers; w++) {
		if (cv->worker[w] == e->u.progressed.worker) {
			cv->progressed[w] = true;
			hit = true;
		}
		all &= cv->progressed[w];
	}
	if (!hit || !all)
		return false;
	for (unsigned w = 0; w < cv->workers; w++)
		cv->progressed[w] = false;
	cv->cv_min++;
	return true;
}
