/*
 * Prefetch: a chain's objects fetched ahead of the replay that applies them.
 *
 * A thread of the window's own walks the objects a replay takes, in the
 * order it takes them, and reads up to n of them at once (ws_store_get_many:
 * concurrent GETs over an s3:// store's connections; one after another from
 * a file:// directory, still beside the replay's work). The replay takes
 * them from a ring of n slots strictly in order, and verifies each (hashes,
 * links, SQLite's checksum chain) before it applies a byte of it, exactly
 * as it verifies one it fetched itself: the window changes when an object
 * is read, never what is checked nor in which order.
 *
 * A second thread of the window's opens each object read, in the same
 * order (ws_seal_open_batch / _snap: decrypted, decompressed, its XXH3
 * checked) while the replay applies the ones before it and the first
 * thread reads the ones after, so that work is off the replay's path. Opening is a
 * function of the object's bytes alone, and its outcome (the plaintext, or
 * the error and message) waits in the slot until the replay reaches the
 * object and has checked its header against the manifest and the chain: an
 * object refused there is refused as before, and one that cannot be opened
 * is refused at its place in the order, with the message opening it gave.
 * An object whose header does not decode or gives another plaintext length
 * than its manifest entry is not opened here (the replay opens it itself). An object that cannot
 * be read reaches the replay at its place in the order, with the error and
 * message a fetch of its own would have given; restore stops there (nothing
 * is published), verify reports it and goes on.
 *
 * Memory: at most n objects are held (read or being read), and their
 * recorded lengths together with the room their opening takes (plaintext,
 * and the decrypted compressed bytes when both sealed) at most
 * WS_PREFETCH_BYTES_MAX unless one object alone is larger; an object is
 * opened only once its room fits that and, with the others opened ahead, a
 * quarter of it, or once it is the next the replay takes.
 * A slot's buffers are kept for its next object (no fresh pages to fault in
 * per object) unless larger than their share of WS_PREFETCH_BYTES_MAX and
 * than twice what that object needs, and while what free slots keep stays
 * within WS_PREFETCH_BYTES_MAX (the ring cycles through all n slots however
 * few objects the budget lets in); the replay's plaintext buffers come back
 * to a pool of two that the opener draws from. So the window holds about
 * min(n x the largest object, WS_PREFETCH_BYTES_MAX), at most twice that in
 * the capacity of the buffers holding it (they grow by doubling), the
 * budget again in free slots' buffers at most, and two plaintext buffers,
 * plus the object the replay is applying (test_prefetch_bounded checks
 * these bounds). A
 * window that runs out of memory is given up with a warning, and the rest
 * is read one object at a time (a checkpoint builds its image under a
 * 64 MiB heap: test_bounded_memory).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chain.h"
#include "prefetch.h"
#include "ws_seal.h"
#include "ws_assert.h"
#include "ws_fault.h"
#include "ws_logging.h"

#define PREFETCH_OBJ_MAX ((size_t)1 << 30) /* as the replay's own buffer */
#define PREFETCH_STACK_BYTES ((size_t)2 << 20) /* curl and TLS under it need far less */

enum slot_state { SLOT_FREE = 0, SLOT_BUSY, SLOT_FETCHED, SLOT_READY };

struct slot {
	struct ws_buf b;
	struct ws_buf plain;              /* its payload opened, when sealed */
	struct ws_obj_opened op;          /* what opening it found */
	uint64_t room;                    /* plain's bytes counted in held */
	uint64_t kept;                    /* FREE: its buffers' capacity, counted in free_cap */
	uint64_t cap, used;               /* its buffers' capacity and bytes, as last recorded */
	size_t mi;                        /* c->m index of the manifest naming it */
	bool snap;                        /* a snapshot part (else a batch) */
	const struct ws_fmt_objref *ref;
	int rc;                           /* the fetch's outcome */
	char msg[2048];                   /* its message (the fetching thread's ws_errmsg), when rc != 0:
					   * kept here, so a failure to allocate is still named */
	enum slot_state state;
};

struct ws_prefetch {
	struct ws_store *s;
	const struct ws_chain *c;
	size_t upto;
	size_t cur_m;   /* the fetcher's cursor: the next object to fetch is */
	uint32_t cur_k; /* c->m[cur_m]'s k-th (snapshot parts first, then batches) */
	unsigned n;
	struct slot *slots;
	struct ws_get_req *reqs; /* a round's reads (n) */
	size_t *back;            /* the slot each read is for (n) */
	unsigned head, tail;     /* the next slot the replay takes; the next the fetcher fills */
	uint64_t held;           /* recorded lengths of the BUSY and READY slots, and their rooms */
	uint64_t budget;         /* WS_PREFETCH_BYTES_MAX, or a test's */
	uint64_t free_cap;       /* buffers' capacity kept by FREE slots for their next objects */
	uint64_t rooms;          /* rooms of the objects opened and not taken */
	struct ws_buf pool[2];   /* plaintext buffers the replay handed back, for the opener to reuse */
	unsigned npool;
	struct ws_prefetch_stats st;
	bool stop, ended;        /* the replay is done; the fetcher is (and the opener once it is past the last) */
	bool opened_all;         /* the opener is done */
	bool off;                /* the window was given up (out of memory): one at a time from there */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t th, oth;       /* the fetcher, the opener */
};

static uint32_t parts_of(const struct ws_fmt_manifest *m)
{
	return (m->kind == WS_MANIFEST_REBASE ? m->snap_count : 0) + m->batch_count;
}

/* The object at the cursor (NULL: none left); *mi its manifest, *snap
 * whether it is a snapshot part. */
static const struct ws_fmt_objref *cursor_ref(struct ws_prefetch *p, size_t *mi, bool *snap)
{
	while (p->cur_m <= p->upto && p->cur_m < p->c->count) {
		const struct ws_fmt_manifest *m = &p->c->m[p->cur_m];
		uint32_t snaps = m->kind == WS_MANIFEST_REBASE ? m->snap_count : 0;
		if (p->cur_k < snaps + m->batch_count) {
			*mi = p->cur_m;
			*snap = p->cur_k < snaps;
			return p->cur_k < snaps ? &m->snaps[p->cur_k] : &m->batches[p->cur_k - snaps];
		}
		p->cur_m++;
		p->cur_k = 0;
	}
	return NULL;
}

/* A carried head's inline batch: in memory, no read of the store. */
static bool from_memory(const struct ws_chain *c, size_t mi, const struct ws_fmt_objref *ref)
{
	return c->carried && mi + 1 == c->count && ws_fmt_objref_inline(ref);
}

static void slot_failed(struct slot *sl, int rc)
{
	sl->rc = rc;
	if (rc)
		snprintf(sl->msg, sizeof(sl->msg), "%s", ws_errmsg());
}

/*
 * Read the k slots from `first` (ring order) at once and judge each as
 * ws_chain_obj_fetch would. A read that failed among several is read
 * again alone, for its own message (get_many keeps none) and because the
 * store may answer now.
 */
static void fetch_round(struct ws_prefetch *p, unsigned first, unsigned k)
{
	size_t nr = 0;
	int rc;

	for (unsigned j = 0; j < k; j++) {
		struct slot *sl = &p->slots[(first + j) % p->n];
		/* A buffer larger than its share of the budget and than twice
		 * the object it is to hold goes back: the window's memory
		 * follows the objects it holds now. */
		if (sl->b.cap > p->budget / p->n && sl->b.cap > 2 * sl->ref->length) {
			ws_buf_free(&sl->b);
			ws_buf_init(&sl->b, PREFETCH_OBJ_MAX);
		}
		ws_buf_reset(&sl->b);
		ws_buf_reset(&sl->plain);
		sl->op.done = false;
		sl->room = 0;
		/* Room for the object as recorded, at once: no growing copy by
		 * copy as it arrives. (A larger one still grows to its end, and
		 * fails its check after.) */
		if (sl->ref->length <= PREFETCH_OBJ_MAX && ws_buf_reserve(&sl->b, (size_t)sl->ref->length) != 0)
			ws_buf_reset(&sl->b); /* out of memory now: the read says so */
		sl->rc = 0;
		if (from_memory(p->c, sl->mi, sl->ref)) {
			slot_failed(sl, ws_chain_obj_fetch(p->s, p->c, sl->mi, sl->ref, &sl->b));
			continue;
		}
		if ((rc = ws_obj_get_req(p->c->keys[sl->mi], sl->ref, &sl->b, &p->reqs[nr])) != 0) {
			slot_failed(sl, rc);
			continue;
		}
		p->back[nr++] = (first + j) % p->n;
	}
	/* The fetching thread, a round chosen and not yet read: a test pauses
	 * it here while the source is written and the sink moves on. */
	if ((rc = WS_FAULT("replay.prefetch")) != 0) {
		for (size_t r = 0; r < nr; r++)
			slot_failed(&p->slots[p->back[r]], ws_fail(rc, "read %s: injected failure at replay.prefetch",
								   p->reqs[r].key));
		return;
	}
	rc = ws_store_get_many(p->s, p->reqs, nr);
	for (size_t r = 0; r < nr; r++) {
		struct slot *sl = &p->slots[p->back[r]];
		if (rc == 0 && p->reqs[r].rc == 0) {
			slot_failed(sl, ws_obj_fetched(0, p->c->keys[sl->mi], sl->ref, &sl->b));
			continue;
		}
		slot_failed(sl, ws_chain_obj_fetch(p->s, p->c, sl->mi, sl->ref, &sl->b));
	}
}

/*
 * The room opening sl's object takes beyond the object (open_payload in
 * store/seal.c): its plaintext, and the decrypted compressed bytes when it
 * is both compressed and encrypted; 0 for a version 1 object (its payload
 * is in the object). Returns false when it is not to be opened here: its
 * header does not decode, or gives another plaintext length than the
 * manifest entry (the replay's own checks name what is wrong).
 */
static bool open_room(const struct ws_prefetch *p, const struct slot *sl, uint64_t *room)
{
	const struct ws_fmt_manifest *m = &p->c->m[sl->mi];
	const struct ws_fmt_seal *fs;
	uint64_t plain_len, want;
	size_t hl;
	union {
		struct ws_fmt_batch b;
		struct ws_fmt_snap sn;
	} h;

	if (sl->snap) {
		if (ws_fmt_snap_decode_hdr(sl->b.data, sl->b.len, &h.sn, &hl) != 0)
			return false;
		fs = &h.sn.seal;
		plain_len = ws_fmt_snap_plain_len(&h.sn);
		want = (uint64_t)sl->ref->count * m->gen.page_size;
	} else {
		if (ws_fmt_batch_decode_hdr(sl->b.data, sl->b.len, &h.b, &hl) != 0)
			return false;
		fs = &h.b.seal;
		plain_len = ws_fmt_batch_plain_len(&h.b);
		want = (uint64_t)sl->ref->count * ws_wal_frame_size(m->gen.page_size);
	}
	if (plain_len != want)
		return false;
	*room = ws_fmt_seal_plain(fs) ? 0 : plain_len;
	if (fs->cipher && fs->codec != WS_FMT_CODEC_NONE && fs->stored_len >= WS_SEAL_TAG_LEN)
		*room += fs->stored_len - WS_SEAL_TAG_LEN;
	return true;
}

/* What the slots hold and their buffers' capacity, as each slot's owner
 * last recorded them (under mu). */
static void note_held(struct ws_prefetch *p)
{
	uint64_t cap = 0, used = 0;
	for (unsigned j = 0; j < p->n; j++) {
		cap += p->slots[j].cap;
		if (p->slots[j].state != SLOT_FREE)
			used += p->slots[j].used;
	}
	for (unsigned j = 0; j < p->npool; j++)
		cap += p->pool[j].cap;
	if (used > p->st.used_max)
		p->st.used_max = used;
	if (p->held > p->st.held_max)
		p->st.held_max = p->held;
	if (cap > p->st.cap_max)
		p->st.cap_max = cap;
}

/* Record sl's buffers for note_held (under mu, by the thread using it). */
static void record(struct ws_prefetch *p, struct slot *sl)
{
	sl->cap = (uint64_t)sl->b.cap + sl->plain.cap;
	sl->used = (uint64_t)sl->b.len + sl->plain.len;
	note_held(p);
}

/* The capacity a buffer of cap bytes has once it holds need (ws_buf_reserve doubles from 256). */
static uint64_t grown(uint64_t cap, uint64_t need)
{
	uint64_t c = cap ? cap : 256;
	while (c < need)
		c *= 2;
	return c;
}

/*
 * Open slot idx's object (read without error) once the room its plaintext
 * buffer takes fits: within the budget with the rest, and within a
 * quarter of it with the other objects opened ahead (opening one or two
 * ahead of the replay is what overlaps the two; more only holds memory);
 * or at once when it is the next the replay takes (the slots before it
 * are READY, so the replay frees room without waiting on this one).
 * Called and returns with mu held; the opening runs without it. An
 * opening out of memory is left to the replay, as a read is.
 */
static void open_slot(struct ws_prefetch *p, unsigned idx)
{
	struct slot *sl = &p->slots[idx];
	struct ws_fmt_batch bh;
	struct ws_fmt_snap sh;
	uint64_t need, room;
	int rc;

	if (sl->rc != 0 || !open_room(p, sl, &need))
		return;
	if (need && sl->plain.cap == 0 && p->npool > 0)
		sl->plain = p->pool[--p->npool]; /* no fresh pages to fault in */
	if (sl->plain.cap > p->budget / p->n && sl->plain.cap > 2 * need) {
		ws_buf_free(&sl->plain);
		ws_buf_init(&sl->plain, (size_t)1 << 31);
	}
	room = need ? grown(sl->plain.cap, need) : 0;
	while (!p->stop && p->head != idx &&
	       (p->held + room > p->budget || p->rooms + room > p->budget / 4))
		pthread_cond_wait(&p->cv, &p->mu);
	if (p->stop)
		return;
	sl->room = room;
	p->held += room;
	p->rooms += room;
	pthread_mutex_unlock(&p->mu);
	/* The opening thread, an object read and about to be opened: a test
	 * pauses it here while the source is written and the sink moves on. */
	rc = WS_FAULT("replay.prefetch_open");
	if (rc)
		ws_fail(rc, "injected failure at replay.prefetch_open");
	else if (sl->snap)
		rc = ws_seal_open_snap(p->s->keys, sl->b.data, sl->b.len, &sh, &sl->plain, &sl->op.payload);
	else
		rc = ws_seal_open_batch(p->s->keys, sl->b.data, sl->b.len, &bh, &sl->plain, &sl->op.payload);
	sl->op.rc = rc;
	sl->op.done = rc != -ENOMEM;
	if (rc == -ENOMEM) {
		ws_buf_free(&sl->plain);
		ws_buf_init(&sl->plain, (size_t)1 << 31);
	} else if (rc) {
		snprintf(sl->op.msg, sizeof(sl->op.msg), "%s", ws_errmsg());
	}
	pthread_mutex_lock(&p->mu);
	record(p, sl);
}

static void *fetcher(void *arg)
{
	struct ws_prefetch *p = arg;
	pthread_mutex_lock(&p->mu);
	for (;;) {
		size_t mi;
		bool snap = false;
		const struct ws_fmt_objref *ref = cursor_ref(p, &mi, &snap);
		/* Room for the next object: a free slot, and within the byte
		 * budget unless the window is empty. */
		while (!p->stop && ref && (p->slots[p->tail].state != SLOT_FREE ||
					   (p->held > 0 && p->held + ref->length > p->budget)))
			pthread_cond_wait(&p->cv, &p->mu);
		if (p->stop || !ref)
			break;
		/* A round: as many of the next objects as there is room for. */
		unsigned first = p->tail, k = 0;
		while (ref && k < p->n && p->slots[p->tail].state == SLOT_FREE &&
		       (p->held == 0 || p->held + ref->length <= p->budget)) {
			struct slot *sl = &p->slots[p->tail];
			p->free_cap -= sl->kept;
			sl->kept = 0;
			sl->mi = mi;
			sl->snap = snap;
			sl->ref = ref;
			sl->state = SLOT_BUSY;
			p->held += ref->length;
			p->tail = (p->tail + 1) % p->n;
			p->cur_k++;
			k++;
			ref = cursor_ref(p, &mi, &snap);
		}
		WS_ASSERT(k > 0);
		pthread_mutex_unlock(&p->mu);
		fetch_round(p, first, k);
		pthread_mutex_lock(&p->mu);
		for (unsigned j = 0; j < k; j++) {
			struct slot *sl = &p->slots[(first + j) % p->n];
			sl->state = SLOT_FETCHED;
			record(p, sl);
		}
		pthread_cond_broadcast(&p->cv);
	}
	p->ended = true;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

/* The opening thread: each object read, in the replay's order, opened
 * (open_slot) and handed to the replay (READY). */
static void *opener(void *arg)
{
	struct ws_prefetch *p = arg;
	unsigned at = 0;
	pthread_mutex_lock(&p->mu);
	for (;;) {
		struct slot *sl = &p->slots[at];
		while (!p->stop && sl->state != SLOT_FETCHED && !(p->ended && sl->state == SLOT_FREE))
			pthread_cond_wait(&p->cv, &p->mu);
		if (p->stop || sl->state != SLOT_FETCHED)
			break; /* stopped, or every object read was handed over */
		open_slot(p, at);
		sl->state = SLOT_READY;
		pthread_cond_broadcast(&p->cv);
		at = (at + 1) % p->n;
	}
	p->opened_all = true;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

struct ws_prefetch *ws_prefetch_start_budget(struct ws_store *s, const struct ws_chain *c, size_t from, size_t upto,
					     unsigned n, uint64_t budget)
{
	struct ws_prefetch *p;
	uint64_t objects = 0;

	if (n <= 1)
		return NULL;
	for (size_t i = from; i <= upto && i < c->count; i++)
		objects += parts_of(&c->m[i]);
	if (objects <= 1)
		return NULL;
	if (objects < n)
		n = (unsigned)objects;
	if (!(p = calloc(1, sizeof(*p))))
		goto no_window;
	p->s = s;
	p->c = c;
	p->upto = upto;
	p->cur_m = from;
	p->n = n;
	p->budget = budget;
	p->slots = calloc(n, sizeof(*p->slots));
	p->reqs = calloc(n, sizeof(*p->reqs));
	p->back = calloc(n, sizeof(*p->back));
	if (!p->slots || !p->reqs || !p->back)
		goto no_window;
	for (unsigned j = 0; j < n; j++) {
		ws_buf_init(&p->slots[j].b, PREFETCH_OBJ_MAX);
		ws_buf_init(&p->slots[j].plain, (size_t)1 << 31); /* as the replay's own */
	}
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	/* A stack of its own size: the default (8 MiB) would count against a
	 * process's heap limit (RLIMIT_DATA) more than the window itself. */
	pthread_attr_t at;
	int terr = pthread_attr_init(&at);
	if (!terr) {
		(void)pthread_attr_setstacksize(&at, PREFETCH_STACK_BYTES);
		terr = pthread_create(&p->th, &at, fetcher, p);
		if (!terr && (terr = pthread_create(&p->oth, &at, opener, p)) != 0) {
			pthread_mutex_lock(&p->mu);
			p->stop = true;
			pthread_cond_broadcast(&p->cv);
			pthread_mutex_unlock(&p->mu);
			pthread_join(p->th, NULL);
		}
		pthread_attr_destroy(&at);
	}
	if (terr) {
		pthread_cond_destroy(&p->cv);
		pthread_mutex_destroy(&p->mu);
		goto no_window;
	}
	return p;
no_window:
	/* Not a failure of the restore: its objects are fetched one by one. */
	ws_warn("cannot start fetching %u objects at once (out of memory or threads): fetching one at a time", n);
	if (p) {
		free(p->slots);
		free(p->reqs);
		free(p->back);
		free(p);
	}
	return NULL;
}

struct ws_prefetch *ws_prefetch_start(struct ws_store *s, const struct ws_chain *c, size_t from, size_t upto,
				      unsigned n)
{
	return ws_prefetch_start_budget(s, c, from, upto, n, WS_PREFETCH_BYTES_MAX);
}

int ws_prefetch_take(struct ws_prefetch *p, size_t i, const struct ws_fmt_objref *ref, struct ws_buf *out,
		     struct ws_buf *plain, struct ws_obj_opened *op)
{
	struct slot *sl;
	struct ws_buf t;
	int rc;

	pthread_mutex_lock(&p->mu);
	sl = &p->slots[p->head];
	while (sl->state != SLOT_READY && !p->opened_all)
		pthread_cond_wait(&p->cv, &p->mu);
	/* The replay takes exactly the objects listed, in their order, so the
	 * fetcher never ends before the one taken is read. */
	WS_ASSERT(sl->state == SLOT_READY && sl->mi == i && sl->ref == ref);
	t = *out;
	*out = sl->b;
	sl->b = t;
	/* The payload opened points into the buffers handed over with it;
	 * the replay's last plaintext buffer goes to the opener's pool. */
	t = *plain;
	*plain = sl->plain;
	ws_buf_init(&sl->plain, (size_t)1 << 31);
	if (t.cap && p->npool < sizeof(p->pool) / sizeof(p->pool[0]) && t.cap <= p->budget)
		p->pool[p->npool++] = t;
	else
		ws_buf_free(&t);
	op->done = sl->op.done;
	if (op->done) {
		op->rc = sl->op.rc;
		op->payload = sl->op.payload;
		if (op->rc)
			snprintf(op->msg, sizeof(op->msg), "%s", sl->op.msg);
	}
	rc = sl->rc;
	if (rc)
		ws_fail(rc, "%s", sl->msg);
	sl->state = SLOT_FREE;
	p->held -= ref->length + sl->room;
	p->rooms -= sl->room;
	sl->room = 0;
	/* The buffer handed over is kept for the slot's next object while
	 * what free slots keep stays within the budget: the ring cycles
	 * through all n slots, however few objects the budget lets in. */
	sl->kept = sl->b.cap;
	if (p->free_cap + sl->kept > p->budget) {
		ws_buf_free(&sl->b);
		ws_buf_init(&sl->b, PREFETCH_OBJ_MAX);
		sl->kept = 0;
	}
	p->free_cap += sl->kept;
	sl->cap = sl->kept;
	p->head = (p->head + 1) % p->n;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	return rc;
}

/* Stop the fetcher, wait for it, and give the slots' buffers back. */
static void window_off(struct ws_prefetch *p)
{
	if (p->off)
		return;
	pthread_mutex_lock(&p->mu);
	p->stop = true;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	pthread_join(p->th, NULL);
	pthread_join(p->oth, NULL);
	while (p->npool > 0)
		ws_buf_free(&p->pool[--p->npool]);
	for (unsigned j = 0; j < p->n; j++) {
		ws_buf_free(&p->slots[j].b);
		ws_buf_free(&p->slots[j].plain);
	}
	p->off = true;
}

void ws_prefetch_end(struct ws_prefetch *p, struct ws_prefetch_stats *st)
{
	if (!p)
		return;
	window_off(p);
	if (st)
		*st = p->st;
	pthread_cond_destroy(&p->cv);
	pthread_mutex_destroy(&p->mu);
	free(p->slots);
	free(p->reqs);
	free(p->back);
	free(p);
}

int ws_prefetch_or_fetch(struct ws_prefetch *p, struct ws_store *s, const struct ws_chain *c, size_t i,
			 const struct ws_fmt_objref *ref, struct ws_buf *out, struct ws_buf *plain,
			 struct ws_obj_opened *op)
{
	op->done = false;
	if (p && !p->off) {
		int rc = ws_prefetch_take(p, i, ref, out, plain, op);
		if (rc != -ENOMEM)
			return rc;
		/* The window is a speed-up, never a condition of the restore: out
		 * of memory for it (a process under a heap limit), it is given up
		 * and this object and the rest are read one at a time, each into
		 * the replay's own buffer, as with n = 1. */
		ws_warn("%s; fetching the rest one object at a time", ws_errmsg());
		window_off(p);
		op->done = false;
	}
	return ws_chain_obj_fetch(s, c, i, ref, out);
}
