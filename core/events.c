/*
 * The event channel, the shards' side: each shard's ring (events.h has
 * its record layout), the emitter of a tapped tenant fed by the tail's own
 * reads of WAL frames, the baseline image a subscription starts from, and
 * the check that sheds a channel that does not keep up. Everything here
 * runs on a shard's thread but the hub's life (ws_ev_hub_create/destroy).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sqlite3.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "events.h"
#include "ws_assert.h"
#include "ws_clock.h"
#include "ws_fault.h"
#include "ws_logging.h"
#include "walidx.h"
#include "ws_wal.h"

/* ---- the hub ------------------------------------------------------------ */

static uint64_t pow2_at_least(uint64_t v)
{
	uint64_t p = WS_EV_RING_MIN;
	while (p < v)
		p <<= 1;
	return p;
}

void ws_ev_hub_destroy(struct ws_ev_hub *h)
{
	if (!h)
		return;
	for (unsigned i = 0; i < WS_EV_SLOTS; i++) {
		struct ws_ev_slot *s = &h->slots[i];
		if (s->efd >= 0)
			close(s->efd);
		free(s->cursor);
		free(s->interest);
		free(s->shed_seq);
		free(s->shed_ns);
		free(s->shed_why);
		free(s->shed_ack);
		free(s->mark_req);
	}
	for (unsigned i = 0; h->rings && i < h->nshards; i++)
		free(h->rings[i].mem);
	free(h->rings);
	pthread_mutex_destroy(&h->mu);
	free(h);
}

int ws_ev_hub_create(struct ws_ev_hub **out, unsigned nshards, uint64_t ring_bytes)
{
	struct ws_ev_hub *h = calloc(1, sizeof(*h));
	uint64_t cap = pow2_at_least(ring_bytes ? ring_bytes : WS_EV_RING_DEFAULT);
	if (!h)
		return -ENOMEM;
	pthread_mutex_init(&h->mu, NULL);
	h->nshards = nshards;
	for (unsigned i = 0; i < WS_EV_SLOTS; i++)
		h->slots[i].efd = -1;
	h->rings = calloc(nshards, sizeof(*h->rings));
	if (!h->rings)
		goto nomem;
	for (unsigned i = 0; i < nshards; i++) {
		/* aligned_alloc: records are read and written a word at a time. */
		h->rings[i].mem = aligned_alloc(64, cap);
		if (!h->rings[i].mem)
			goto nomem;
		h->rings[i].cap = cap;
	}
	for (unsigned i = 0; i < WS_EV_SLOTS; i++) {
		struct ws_ev_slot *s = &h->slots[i];
		s->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		s->cursor = calloc(nshards, sizeof(*s->cursor));
		s->interest = calloc(nshards, sizeof(*s->interest));
		s->shed_seq = calloc(nshards, sizeof(*s->shed_seq));
		s->shed_ns = calloc(nshards, sizeof(*s->shed_ns));
		s->shed_why = calloc(nshards, sizeof(*s->shed_why));
		s->shed_ack = calloc(nshards, sizeof(*s->shed_ack));
		s->mark_req = calloc(nshards, sizeof(*s->mark_req));
		if (s->efd < 0) {
			int rc = -errno;
			ws_ev_hub_destroy(h);
			return ws_fail(rc, "events: eventfd: %s", strerror(-rc));
		}
		if (!s->cursor || !s->interest || !s->shed_seq || !s->shed_ns || !s->shed_why || !s->shed_ack ||
		    !s->mark_req)
			goto nomem;
	}
	h->next_query = 1;
	*out = h;
	return 0;
nomem:
	ws_ev_hub_destroy(h);
	return ws_fail(-ENOMEM, "events: no memory for %u rings of %" PRIu64 " bytes", nshards, cap);
}

/* ---- writing records ------------------------------------------------------ */

/*
 * Every byte of a ring is written and read with atomic word stores
 * (release, W2) and loads (acquire, R1 in events_host.c): a channel may be
 * copying a record while the shard writes over it (the channel then finds
 * out and discards its copy), and a word at a time is what makes that a
 * checked race rather than undefined behaviour. A word the channel read
 * from an overwrite synchronizes with its store, which the write limit's
 * store (W1) precedes: the channel's load of the limit after its copy
 * (R2) then sees the overwrite. No fence (TSan models none); on x86-64
 * these are plain moves.
 */
static void ring_put(uint8_t *dst, const void *src, size_t n)
{
	uint64_t *d = (uint64_t *)(void *)dst;
	const uint8_t *s = src;
	size_t words = n / 8;
	WS_ASSERT(((uintptr_t)dst & 7) == 0);
	for (size_t i = 0; i < words; i++) {
		uint64_t w;
		memcpy(&w, s + i * 8, 8);
		__atomic_store_n(&d[i], w, __ATOMIC_RELEASE); /* W2 */
	}
	if (n % 8) {
		uint64_t w = 0;
		memcpy(&w, s + words * 8, n % 8);
		__atomic_store_n(&d[words], w, __ATOMIC_RELEASE); /* W2 */
	}
}

static size_t round16(size_t n) { return (n + 15) & ~(size_t)15; }

/*
 * Room for a record of len bytes (a multiple of 16, at most a quarter of
 * the ring) at the shard's write head: a PAD record fills the ring's end
 * first when it would wrap. Before a byte is written, the write limit
 * moves past it (W1, program-ordered before the record's release stores
 * W2; the channel reads the limit after its copy, R2 in events_host.c).
 */
static uint8_t *rec_reserve(struct ws_ev_ring *r, size_t len)
{
	uint64_t at = r->whead;
	uint64_t off = at & (r->cap - 1);
	WS_ASSERT(len % 16 == 0 && len <= r->cap / 4);
	if (off + len > r->cap) {
		struct ev_rec pad = { .pos = at, .len = (uint32_t)(r->cap - off), .kind = REC_PAD };
		__atomic_store_n(&r->wlim, at + pad.len, __ATOMIC_RELAXED); /* W1 */
		ring_put(r->mem + off, &pad, 16);
		at += pad.len;
		off = 0;
	}
	__atomic_store_n(&r->wlim, at + len, __ATOMIC_RELAXED); /* W1 */
	r->whead = at + len;
	return r->mem + off;
}

static void rec_header(uint8_t *p, struct ev_rec *h, uint64_t pos)
{
	h->pos = pos;
	h->mono_ns = (int64_t)ws_mono_ns();
	ring_put(p, h, sizeof(*h));
}

static uint64_t pos_of(const struct ws_ev_ring *r, const uint8_t *p, size_t len)
{
	(void)p;
	return r->whead - len;
}

static void emit_simple(struct ws_ev_ring *r, struct ev_rec *h, const void *payload, size_t plen)
{
	size_t len = round16(sizeof(*h) + plen);
	uint8_t *p = rec_reserve(r, len);
	h->len = (uint32_t)len;
	if (plen)
		ring_put(p + sizeof(*h), payload, plen);
	rec_header(p, h, pos_of(r, p, len));
}

/* ---- shedding, waking ----------------------------------------------------- */

static void wake(struct ws_ev_slot *s)
{
	uint64_t one = 1;
	if (write(s->efd, &one, sizeof(one)) != sizeof(one) && errno != EAGAIN)
		ws_warn("events: cannot wake a channel: %s", strerror(errno));
}

/*
 * When the oldest record channel slot s has not read from ring r (its
 * cursor cur) began to count against its deadline; false when none is
 * there. A PAD is no event (only its first 16 bytes are written; under
 * them lies an earlier lap): the record after it is. No deadline counts
 * from before the host last came out of ws_events_subscribe, nor while it
 * is inside (it cannot read there): then it counts from now.
 */
static bool unread_since(const struct ws_ev_ring *r, const struct ws_ev_slot *s, uint64_t cur, int64_t now,
			 int64_t *t)
{
	const uint8_t *at = r->mem + (cur & (r->cap - 1));
	/* len and kind, in host byte order (little-endian, as the channel reads them). */
	uint64_t w = __atomic_load_n((const uint64_t *)(const void *)(at + offsetof(struct ev_rec, len)), __ATOMIC_RELAXED);
	if ((uint16_t)(w >> 32) == REC_PAD) {
		cur += (uint32_t)w;
		if (cur >= r->whead)
			return false;
		at = r->mem + (cur & (r->cap - 1));
	}
	if (__atomic_load_n(&s->paused, __ATOMIC_ACQUIRE)) {
		*t = now;
		return true;
	}
	*t = (int64_t)__atomic_load_n((const uint64_t *)(const void *)(at + offsetof(struct ev_rec, mono_ns)),
				      __ATOMIC_RELAXED);
	int64_t resumed = __atomic_load_n(&s->resume_ns, __ATOMIC_RELAXED);
	if (resumed > *t)
		*t = resumed;
	return true;
}

/* Why slot s is to be shed now (1 deadline, 2 lag, 0 not), and when to look again (*next_ms). */
static uint32_t shed_why(const struct ws_ev_ring *r, const struct ws_ev_slot *s, uint64_t cur, int64_t now,
			 uint64_t *next_ms)
{
	int64_t t;
	if (r->whead - cur > s->lag_bytes)
		return 2;
	if (!unread_since(r, s, cur, now, &t))
		return 0;
	if (now - t > (int64_t)s->deadline_ns)
		return 1;
	if ((uint64_t)(t + (int64_t)s->deadline_ns) / 1000000u + 1 < *next_ms)
		*next_ms = (uint64_t)(t + (int64_t)s->deadline_ns) / 1000000u + 1;
	return 0;
}

uint64_t ws_ev_flush(struct ws_ev_hub *h, unsigned shard)
{
	struct ws_ev_ring *r = &h->rings[shard];
	const int64_t now = (int64_t)ws_mono_ns();
	uint64_t next_ms = UINT64_MAX;
	/* P1: publishes every record before it (the channel's acquire load of
	 * head, C1, pairs with it); seq_cst so that the load of waiting below
	 * cannot be ordered before it (Dekker with the channel's W/H pair). */
	__atomic_store_n(&r->head, r->whead, __ATOMIC_SEQ_CST);
	for (unsigned i = 0; i < WS_EV_SLOTS; i++) {
		struct ws_ev_slot *s = &h->slots[i];
		if (!__atomic_load_n(&s->live, __ATOMIC_ACQUIRE) || !__atomic_load_n(&s->interest[shard], __ATOMIC_ACQUIRE))
			continue;
		/* Shed once: until the channel has seen it (shed_ack), it is not looked at again. */
		uint64_t seq = __atomic_load_n(&s->shed_seq[shard], __ATOMIC_RELAXED);
		if (__atomic_load_n(&s->shed_ack[shard], __ATOMIC_ACQUIRE) != seq)
			continue;
		uint64_t cur = __atomic_load_n(&s->cursor[shard], __ATOMIC_ACQUIRE);
		uint32_t why = cur < r->whead ? shed_why(r, s, cur, now, &next_ms) : 0;
		if (why) {
			__atomic_store_n(&s->shed_ns[shard], now, __ATOMIC_RELAXED);
			__atomic_store_n(&s->shed_why[shard], why, __ATOMIC_RELAXED);
			/* S1: the time and reason before the bump (the channel's acquire load, S2). */
			__atomic_store_n(&s->shed_seq[shard], seq + 1, __ATOMIC_RELEASE);
			ws_warn("events: shard %u shed channel %u: %s", shard, i,
				why == 1 ? "an event was left unread past its deadline" : "it fell lag_bytes_max behind");
			wake(s);
		} else if (__atomic_load_n(&s->waiting, __ATOMIC_SEQ_CST)) {
			wake(s);
		}
	}
	return next_ms;
}

void ws_ev_worker_lost(struct ws_ev_hub *h, unsigned shard)
{
	struct ws_ev_ring *r = &h->rings[shard];
	struct ev_rec rec = { .kind = REC_WORKER_LOST };
	emit_simple(r, &rec, NULL, 0);
	__atomic_store_n(&r->dead, 1, __ATOMIC_RELEASE);
	(void)ws_ev_flush(h, shard);
}

/* ---- the tap --------------------------------------------------------------- */

void ws_ev_tap_fault(struct ws_ev_tap *tap, enum ws_fault_cause cause, const char *fmt, ...)
{
	char reason[WS_EVENTS_REASON_MAX];
	va_list ap;
	struct ev_rec rec = { .kind = REC_FAULT, .cause = (uint16_t)cause, .tenant_id = tap->tenant_id };
	if (tap->faulted)
		return;
	va_start(ap, fmt);
	vsnprintf(reason, sizeof(reason), fmt, ap);
	va_end(ap);
	if (tap->single) {
		/* Single-thread mode never faults a query: its channel
		 * (ws_events_tail) finds the tap ended and hydrates again. */
		ws_warn("events: %s (%s): its queries are hydrated again", reason, ws_fault_cause_name(cause));
		tap->faulted = true;
		return;
	}
	ws_warn("events: %s (%s): its queries are faulted", reason, ws_fault_cause_name(cause));
	emit_simple(&tap->hub->rings[tap->shard], &rec, reason, strlen(reason) + 1);
	tap->faulted = true;
	(void)ws_ev_flush(tap->hub, tap->shard);
}

void ws_ev_tap_begin(struct ws_ev_tap *tap, uint32_t kind, bool prev_have, uint32_t prev_salt1, uint32_t prev_salt2,
		     uint64_t prev_last)
{
	tap->began = true;
	tap->kind = kind;
	tap->prev_have = prev_have;
	tap->prev_salt1 = prev_salt1;
	tap->prev_salt2 = prev_salt2;
	tap->prev_last = prev_last;
}

/* Pages a Changed record of this page size holds at most. */
static uint32_t slice_pages(const struct ws_ev_ring *r, uint32_t page_size)
{
	size_t room = WS_EV_SLICE_BYTES < r->cap / 4 ? WS_EV_SLICE_BYTES : (size_t)(r->cap / 4);
	size_t n = (room - sizeof(struct ev_rec) - 16) / ((size_t)page_size + 4);
	return n ? (uint32_t)n : 1;
}

/* A Changed record: frames [from, from + n) of the slot, consecutive. */
static void emit_changed(struct ws_ev_tap *tap, const uint8_t *frames, uint32_t from, uint32_t n, uint64_t first_frame,
			 uint32_t page_size, uint32_t db_pages)
{
	struct ws_ev_ring *r = &tap->hub->rings[tap->shard];
	const uint32_t fsz = ws_wal_frame_size(page_size);
	const size_t pg_bytes = ((size_t)n * 4 + 7) & ~(size_t)7;
	const size_t len = round16(sizeof(struct ev_rec) + pg_bytes + (size_t)n * page_size);
	uint8_t *p = rec_reserve(r, len);
	uint8_t *q = p + sizeof(struct ev_rec);
	struct ev_rec rec = {
		.len = (uint32_t)len,
		.kind = REC_CHANGED,
		.tenant_id = tap->tenant_id,
		.tx = ((uint64_t)*tap->chain << 32) | (uint32_t)first_frame,
		.count = n,
		.page_size = page_size,
		.aux = db_pages,
	};
	uint32_t pg[64];
	for (uint32_t i = 0; i < n; i += 64) {
		uint32_t m = n - i < 64 ? n - i : 64;
		for (uint32_t j = 0; j < m; j++)
			pg[j] = ws_get_be32(frames + (size_t)(from + i + j) * fsz);
		ring_put(q + (size_t)i * 4, pg, (size_t)m * 4);
	}
	q += pg_bytes;
	for (uint32_t i = 0; i < n; i++)
		ring_put(q + (size_t)i * page_size, frames + (size_t)(from + i) * fsz + WS_WAL_FRAME_HDR_SIZE, page_size);
	rec_header(p, &rec, pos_of(r, p, len));
}

/* A Progressed at frame (marker: the tap's last one again, nothing new). */
static void emit_progressed(struct ws_ev_tap *tap, uint64_t frame, bool marker)
{
	struct ev_rec rec = {
		.kind = REC_PROGRESSED,
		.tenant_id = tap->tenant_id,
		.tx = ((uint64_t)*tap->chain << 32) | (uint32_t)frame,
		.aux = marker ? WS_EV_MARKER : 0,
	};
	emit_simple(&tap->hub->rings[tap->shard], &rec, NULL, 0);
	/* Any Progressed of the tenant answers a marker asked of it. */
	tap->mark_want = false;
}

void ws_ev_tap_want_mark(struct ws_ev_tap *tap, uint32_t gap_ms)
{
	uint64_t at = tap->mark_last_ms + gap_ms;
	if (!tap->mark_want || at < tap->mark_at_ms)
		tap->mark_at_ms = at;
	tap->mark_want = true;
}

uint64_t ws_ev_tap_mark(struct ws_ev_tap *tap, uint64_t now_ms)
{
	if (!tap->mark_want)
		return UINT64_MAX;
	if (tap->faulted) {
		tap->mark_want = false;
		return UINT64_MAX;
	}
	/* Frames of a transaction under way were emitted (Changed before its
	 * commit): its commit's Progressed answers, or its rollback's fault.
	 * A marker now would tell a host to apply pages that never committed. */
	if (tap->spec_next != tap->commit + 1)
		return UINT64_MAX;
	if (now_ms < tap->mark_at_ms)
		return tap->mark_at_ms;
	emit_progressed(tap, tap->commit, true);
	/* The clock at the send, not the loop's now_ms (taken before the
	 * reads and hand-outs of this round): markers stay marker_ms apart. */
	tap->mark_last_ms = ws_mono_ms();
	(void)ws_ev_flush(tap->hub, tap->shard);
	return UINT64_MAX;
}

/* Frames of another WAL generation than the tap's: go on with them, or fault. */
static bool tap_new_generation(struct ws_ev_tap *tap, uint32_t salt1, uint32_t salt2, uint32_t ckpt_seq)
{
	if (tap->spec_next > tap->commit + 1) {
		ws_ev_tap_fault(tap, WS_CAUSE_ROLLBACK, "tenant id %" PRIu64 ": the WAL restarted (generation %u) over "
				"frames %" PRIu64 "..%" PRIu64 " delivered as Changed before any commit of them",
				tap->tenant_id, ckpt_seq, tap->commit + 1, tap->spec_next - 1);
		return false;
	}
	/* The previous generation ended where the tap stands: the tail's own
	 * proof (NEXT_GEN: its read mark held since the watermark it wrote at
	 * that frame). A tap that saw no frame of its generation, hydrated
	 * from the database file alone, follows any next one the tail proves. */
	bool follows = tap->began && tap->kind == WS_MANIFEST_NEXT_GEN &&
		       ((tap->prev_have && tap->prev_salt1 == tap->salt1 && tap->prev_salt2 == tap->salt2 &&
			 tap->prev_last == tap->commit) ||
			(tap->commit == 0 && tap->spec_next == 1));
	if (!follows) {
		ws_ev_tap_fault(tap, WS_CAUSE_DERIVE, "tenant id %" PRIu64 ": re-based onto WAL generation %u: the "
				"commits after frame %" PRIu64 " of the generation its events followed cannot be "
				"proven read", tap->tenant_id, ckpt_seq, tap->commit);
		return false;
	}
	tap->salt1 = salt1;
	tap->salt2 = salt2;
	++*tap->chain;
	tap->chain_salt[0] = salt1;
	tap->chain_salt[1] = salt2;
	tap->commit = 0;
	tap->spec_next = 1;
	tap->ck_known = tap->commit_ck_known = false;
	return true;
}

/*
 * Frames that do not continue the chain the tap emitted: the frame it
 * emitted last is not the one before them now. Past its last commit, the
 * writer replaced frames it had (rolled back); at or before it, what the
 * tap emitted was not the WAL's (never so: a committed frame is not
 * rewritten in its generation), and a query fed from it must not go on.
 */
static void tap_chain_broken(struct ws_ev_tap *tap, uint64_t at)
{
	if (tap->spec_next > tap->commit + 1)
		ws_ev_tap_fault(tap, WS_CAUSE_ROLLBACK, "tenant id %" PRIu64 ": frames %" PRIu64 "..%" PRIu64
				" delivered as Changed were replaced before they committed (the writer rolled back)",
				tap->tenant_id, tap->commit + 1, tap->spec_next - 1);
	else if (at <= tap->commit)
		ws_ev_tap_fault(tap, WS_CAUSE_DERIVE, "tenant id %" PRIu64 ": frame %" PRIu64 ", read again, is not "
				"the frame emitted before (committed up to frame %" PRIu64 ")", tap->tenant_id, at,
				tap->commit);
	else
		ws_ev_tap_fault(tap, WS_CAUSE_DERIVE, "tenant id %" PRIu64 ": frame %" PRIu64 " does not follow "
				"committed frame %" PRIu64 " as it was emitted", tap->tenant_id, at, tap->commit);
}

void ws_ev_tap_slot(struct ws_ev_tap *tap, const struct ws_pipe_desc *d, const uint8_t *frames)
{
	if (!d->checked || !d->chk.filled || d->chk.dropped)
		return;
	ws_ev_tap_frames(tap, &d->batch.gen, &d->chk.run, frames);
}

void ws_ev_tap_frames(struct ws_ev_tap *tap, const struct ws_fmt_gen *gen, const struct ws_wal_run *run,
		      const uint8_t *frames)
{
	const uint32_t ps = gen->page_size;
	const uint32_t fsz = ws_wal_frame_size(ps);
	uint32_t pend_from = 0, pend_n = 0;
	uint64_t pend_first = 0;
	uint32_t per;
	int rc;

	if (!tap || tap->faulted || run->valid == 0)
		return;
	per = slice_pages(&tap->hub->rings[tap->shard], ps);
	if ((rc = WS_FAULT("events.derive")) != 0) {
		ws_ev_tap_fault(tap, WS_CAUSE_DERIVE, "tenant id %" PRIu64 ": injected fault decoding frames %" PRIu64
				"..%" PRIu64, tap->tenant_id, run->first_frame, run->first_frame + run->valid - 1);
		return;
	}
	if ((gen->salt1 != tap->salt1 || gen->salt2 != tap->salt2) &&
	    !tap_new_generation(tap, gen->salt1, gen->salt2, gen->checkpoint_seq))
		return;
	if (run->first_frame > tap->spec_next) {
		ws_ev_tap_fault(tap, WS_CAUSE_DERIVE, "tenant id %" PRIu64 ": frames %" PRIu64 "..%" PRIu64
				" were never read before frame %" PRIu64, tap->tenant_id, tap->spec_next,
				run->first_frame - 1, run->first_frame);
		return;
	}
	for (uint32_t i = 0; i < run->valid; i++) {
		const uint64_t k = run->first_frame + i;
		struct ws_wal_frame_hdr fh;
		ws_wal_frame_hdr_decode(frames + (size_t)i * fsz, &fh);
		if (k < tap->spec_next) {
			/* Emitted before (a tail read it again), or delivered before
			 * its commit and since replaced (the writer rolled back and
			 * wrote other frames there). The checksum chain tells: the
			 * last frame emitted covers every byte before it. */
			if ((k > tap->commit && fh.db_size != 0) ||
			    (k == tap->spec_next - 1 && tap->ck_known &&
			     (fh.cksum1 != tap->spec_ck[0] || fh.cksum2 != tap->spec_ck[1]))) {
				tap_chain_broken(tap, k);
				return;
			}
			continue;
		}
		/* A run that starts at the next frame: its seed is the checksum of
		 * the frame before it, which must be the one the tap emitted. */
		if (i == 0 && tap->ck_known && (run->seed[0] != tap->spec_ck[0] || run->seed[1] != tap->spec_ck[1])) {
			tap_chain_broken(tap, k);
			return;
		}
		if (pend_n == 0) {
			pend_from = i;
			pend_first = k;
		}
		pend_n++;
		tap->spec_next = k + 1;
		tap->spec_ck[0] = fh.cksum1;
		tap->spec_ck[1] = fh.cksum2;
		tap->ck_known = true;
		if (fh.db_size != 0 || pend_n == per) {
			emit_changed(tap, frames, pend_from, pend_n, pend_first, ps, fh.db_size);
			pend_n = 0;
		}
		if (fh.db_size != 0) {
			emit_progressed(tap, k, false);
			tap->commit = k;
			tap->commit_ck[0] = fh.cksum1;
			tap->commit_ck[1] = fh.cksum2;
			tap->commit_ck_known = true;
		}
	}
	if (pend_n)
		emit_changed(tap, frames, pend_from, pend_n, pend_first, ps, 0);
	(void)ws_ev_flush(tap->hub, tap->shard);
}

void ws_ev_tap_release(struct ws_ev_tap **tapp)
{
	struct ws_ev_tap *tap = *tapp;
	if (!tap)
		return;
	WS_ASSERT(tap->subs > 0);
	if (--tap->subs == 0) {
		free(tap);
		*tapp = NULL;
	}
}

/* ---- the baseline ------------------------------------------------------------ */

static int busy_poll_1ms(void *arg, int count)
{
	(void)arg;
	if (count >= 2000)
		return 0;
	ws_sleep_ms(1);
	return 1;
}

static int pragma_int(sqlite3 *db, const char *sql, int64_t *out)
{
	sqlite3_stmt *s = NULL;
	int rc = sqlite3_prepare_v2(db, sql, -1, &s, NULL);
	if (rc == SQLITE_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
		*out = sqlite3_column_int64(s, 0);
		rc = SQLITE_OK;
	}
	sqlite3_finalize(s);
	return rc;
}

int ws_ev_hydrate(struct ws_ev_hub *h, unsigned shard, struct ws_ev_tap **tapp, uint64_t tenant_id, uint32_t *chain,
		  uint32_t *chain_salt, struct ws_ev_hydrate *hy)
{
	sqlite3 *db = NULL;
	sqlite3_file *f = NULL;
	struct ws_walidx_hdr wi;
	sqlite3_int64 size = 0;
	int64_t ps = 0;
	bool locked = false;
	char *mode = NULL;
	struct ws_ev_tap *tap = *tapp;
	int rc;

	hy->image = NULL;
	rc = sqlite3_open_v2(hy->db_path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
	if (rc != SQLITE_OK) {
		rc = ws_fail(rc == SQLITE_CANTOPEN ? -ENOENT : -EIO, "tenant %s: cannot open %s for its baseline: %s",
			     hy->tenant, hy->db_path, db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
		goto fail;
	}
	/* Never checkpoint or delete the application's WAL on close. */
	sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, (int *)NULL);
	sqlite3_busy_handler(db, busy_poll_1ms, NULL);
	/*
	 * The write lock, for as long as the image takes to copy: nothing
	 * commits meanwhile, so the wal-index's last frame names exactly the
	 * state the image holds (SQLite offers no other way to learn the
	 * position of a read transaction's snapshot).
	 */
	if ((rc = sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL)) != SQLITE_OK) {
		rc = ws_fail(rc == SQLITE_BUSY ? -EBUSY : -EIO, "tenant %s: cannot take %s's write lock for its "
			     "baseline: %s", hy->tenant, hy->db_path, sqlite3_errmsg(db));
		goto fail;
	}
	locked = true;
	{
		sqlite3_stmt *s = NULL;
		if (sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &s, NULL) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW)
			mode = sqlite3_mprintf("%s", (const char *)sqlite3_column_text(s, 0));
		sqlite3_finalize(s);
	}
	if (!mode || strcmp(mode, "wal") != 0) {
		rc = ws_fail(WS_ECONFIG, "tenant %s: %s is not in WAL mode (%s): no events", hy->tenant, hy->db_path,
			     mode ? mode : "unknown");
		goto fail;
	}
	if (sqlite3_file_control(db, "main", SQLITE_FCNTL_FILE_POINTER, &f) != SQLITE_OK || !ws_walidx_read(f, &wi)) {
		rc = ws_fail(-EAGAIN, "tenant %s: %s's wal-index cannot be read for its baseline", hy->tenant,
			     hy->db_path);
		goto fail;
	}
	if (pragma_int(db, "PRAGMA page_size", &ps) != SQLITE_OK || ps <= 0) {
		rc = ws_fail(-EIO, "tenant %s: %s: page size: %s", hy->tenant, hy->db_path, sqlite3_errmsg(db));
		goto fail;
	}
	hy->image = sqlite3_serialize(db, "main", &size, 0);
	if (!hy->image && size != 0) {
		rc = ws_fail(-ENOMEM, "tenant %s: no memory for %s's image", hy->tenant, hy->db_path);
		goto fail;
	}
	sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
	locked = false;
	if ((uint64_t)size > hy->image_bytes_max) {
		rc = ws_fail(WS_ETOOBIG, "tenant %s: its database is %lld bytes, over image_bytes_max %" PRIu64,
			     hy->tenant, (long long)size, hy->image_bytes_max);
		goto fail;
	}
	if (tap) {
		/* Queries follow it already: the image must be at or after where
		 * its events stand, in its generation, or the new query could
		 * not tell which of them it holds. */
		if (tap->faulted || tap->salt1 != wi.salt1 || tap->salt2 != wi.salt2 || tap->commit > wi.mx_frame ||
		    tap->spec_next - 1 > wi.mx_frame) {
			rc = ws_fail(-EAGAIN, "tenant %s: the WAL moved on from the generation its events follow; "
				     "tail it first", hy->tenant);
			goto fail;
		}
	} else {
		tap = calloc(1, sizeof(*tap));
		if (!tap) {
			rc = ws_fail(-ENOMEM, "tenant %s: no memory for its tap", hy->tenant);
			goto fail;
		}
		tap->hub = h;
		tap->shard = shard;
		tap->tenant_id = tenant_id;
		tap->chain = chain;
		tap->chain_salt = chain_salt;
		tap->salt1 = wi.salt1;
		tap->salt2 = wi.salt2;
		tap->commit = wi.mx_frame;
		tap->spec_next = (uint64_t)wi.mx_frame + 1;
		if (*chain == 0 || chain_salt[0] != wi.salt1 || chain_salt[1] != wi.salt2) {
			++*chain;
			chain_salt[0] = wi.salt1;
			chain_salt[1] = wi.salt2;
		}
		*tapp = tap;
	}
	tap->subs++;
	hy->page_size = (uint32_t)ps;
	hy->pages = (uint64_t)size / (uint64_t)ps;
	hy->tx_id = ((uint64_t)*chain << 32) | wi.mx_frame;
	{
		struct ev_rec rec = {
			.kind = REC_HYDRATED,
			.tenant_id = tenant_id,
			.tx = hy->tx_id,
			.query_id = hy->query_id,
			.count = hy->slot,
			.page_size = hy->page_size,
			.aux = hy->slot_gen,
		};
		emit_simple(&h->rings[shard], &rec, NULL, 0);
	}
	(void)ws_ev_flush(h, shard);
	sqlite3_free(mode);
	sqlite3_close(db);
	return 0;
fail:
	if (locked)
		sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
	sqlite3_free(hy->image);
	hy->image = NULL;
	sqlite3_free(mode);
	sqlite3_close(db);
	return rc;
}
