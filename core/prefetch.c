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
 * is read, never what is checked nor in which order. An object that cannot
 * be read reaches the replay at its place in the order, with the error and
 * message a fetch of its own would have given; restore stops there (nothing
 * is published), verify reports it and goes on.
 *
 * Memory: at most n objects are held (read or being read), and their
 * recorded lengths together at most WS_PREFETCH_BYTES_MAX unless one object
 * alone is larger. A slot's buffer is kept for its next object (no fresh
 * pages to fault in per object) unless it is larger than its share of
 * WS_PREFETCH_BYTES_MAX and than twice that object. So the window holds
 * about min(n x the largest object, WS_PREFETCH_BYTES_MAX), at most twice
 * that in buffers' capacity, plus the object the replay is applying. A
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
#include "ws_assert.h"
#include "ws_fault.h"
#include "ws_logging.h"

#define PREFETCH_OBJ_MAX ((size_t)1 << 30) /* as the replay's own buffer */
#define PREFETCH_STACK_BYTES ((size_t)2 << 20) /* curl and TLS under it need far less */

enum slot_state { SLOT_FREE = 0, SLOT_BUSY, SLOT_READY };

struct slot {
	struct ws_buf b;
	size_t mi;                        /* c->m index of the manifest naming it */
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
	uint64_t held;           /* recorded lengths of the BUSY and READY slots */
	bool stop, ended;        /* the replay is done; the fetcher is */
	bool off;                /* the window was given up (out of memory): one at a time from there */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t th;
};

static uint32_t parts_of(const struct ws_fmt_manifest *m)
{
	return (m->kind == WS_MANIFEST_REBASE ? m->snap_count : 0) + m->batch_count;
}

/* The object at the cursor (NULL: none left); *mi its manifest. */
static const struct ws_fmt_objref *cursor_ref(struct ws_prefetch *p, size_t *mi)
{
	while (p->cur_m <= p->upto && p->cur_m < p->c->count) {
		const struct ws_fmt_manifest *m = &p->c->m[p->cur_m];
		uint32_t snaps = m->kind == WS_MANIFEST_REBASE ? m->snap_count : 0;
		if (p->cur_k < snaps + m->batch_count) {
			*mi = p->cur_m;
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
		if (sl->b.cap > WS_PREFETCH_BYTES_MAX / p->n && sl->b.cap > 2 * sl->ref->length) {
			ws_buf_free(&sl->b);
			ws_buf_init(&sl->b, PREFETCH_OBJ_MAX);
		}
		ws_buf_reset(&sl->b);
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

static void *fetcher(void *arg)
{
	struct ws_prefetch *p = arg;
	pthread_mutex_lock(&p->mu);
	for (;;) {
		size_t mi;
		const struct ws_fmt_objref *ref = cursor_ref(p, &mi);
		/* Room for the next object: a free slot, and within the byte
		 * budget unless the window is empty. */
		while (!p->stop && ref && (p->slots[p->tail].state != SLOT_FREE ||
					   (p->held > 0 && p->held + ref->length > WS_PREFETCH_BYTES_MAX)))
			pthread_cond_wait(&p->cv, &p->mu);
		if (p->stop || !ref)
			break;
		/* A round: as many of the next objects as there is room for. */
		unsigned first = p->tail, k = 0;
		while (ref && k < p->n && p->slots[p->tail].state == SLOT_FREE &&
		       (p->held == 0 || p->held + ref->length <= WS_PREFETCH_BYTES_MAX)) {
			struct slot *sl = &p->slots[p->tail];
			sl->mi = mi;
			sl->ref = ref;
			sl->state = SLOT_BUSY;
			p->held += ref->length;
			p->tail = (p->tail + 1) % p->n;
			p->cur_k++;
			k++;
			ref = cursor_ref(p, &mi);
		}
		WS_ASSERT(k > 0);
		pthread_mutex_unlock(&p->mu);
		fetch_round(p, first, k);
		pthread_mutex_lock(&p->mu);
		for (unsigned j = 0; j < k; j++)
			p->slots[(first + j) % p->n].state = SLOT_READY;
		pthread_cond_broadcast(&p->cv);
	}
	p->ended = true;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

struct ws_prefetch *ws_prefetch_start(struct ws_store *s, const struct ws_chain *c, size_t from, size_t upto,
				      unsigned n)
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
	p->slots = calloc(n, sizeof(*p->slots));
	p->reqs = calloc(n, sizeof(*p->reqs));
	p->back = calloc(n, sizeof(*p->back));
	if (!p->slots || !p->reqs || !p->back)
		goto no_window;
	for (unsigned j = 0; j < n; j++)
		ws_buf_init(&p->slots[j].b, PREFETCH_OBJ_MAX);
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	/* A stack of its own size: the default (8 MiB) would count against a
	 * process's heap limit (RLIMIT_DATA) more than the window itself. */
	pthread_attr_t at;
	int terr = pthread_attr_init(&at);
	if (!terr) {
		(void)pthread_attr_setstacksize(&at, PREFETCH_STACK_BYTES);
		terr = pthread_create(&p->th, &at, fetcher, p);
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

int ws_prefetch_take(struct ws_prefetch *p, size_t i, const struct ws_fmt_objref *ref, struct ws_buf *out)
{
	struct slot *sl;
	struct ws_buf t;
	int rc;

	pthread_mutex_lock(&p->mu);
	sl = &p->slots[p->head];
	while (sl->state != SLOT_READY && !p->ended)
		pthread_cond_wait(&p->cv, &p->mu);
	/* The replay takes exactly the objects listed, in their order, so the
	 * fetcher never ends before the one taken is read. */
	WS_ASSERT(sl->state == SLOT_READY && sl->mi == i && sl->ref == ref);
	t = *out;
	*out = sl->b;
	sl->b = t;
	rc = sl->rc;
	if (rc)
		ws_fail(rc, "%s", sl->msg);
	sl->state = SLOT_FREE;
	p->held -= ref->length;
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
	for (unsigned j = 0; j < p->n; j++)
		ws_buf_free(&p->slots[j].b);
	p->off = true;
}

void ws_prefetch_end(struct ws_prefetch *p)
{
	if (!p)
		return;
	window_off(p);
	pthread_cond_destroy(&p->cv);
	pthread_mutex_destroy(&p->mu);
	free(p->slots);
	free(p->reqs);
	free(p->back);
	free(p);
}

int ws_prefetch_or_fetch(struct ws_prefetch *p, struct ws_store *s, const struct ws_chain *c, size_t i,
			 const struct ws_fmt_objref *ref, struct ws_buf *out)
{
	if (p && !p->off) {
		int rc = ws_prefetch_take(p, i, ref, out);
		if (rc != -ENOMEM)
			return rc;
		/* The window is a speed-up, never a condition of the restore: out
		 * of memory for it (a process under a heap limit), it is given up
		 * and this object and the rest are read one at a time, each into
		 * the replay's own buffer, as with n = 1. */
		ws_warn("%s; fetching the rest one object at a time", ws_errmsg());
		window_off(p);
	}
	return ws_chain_obj_fetch(s, c, i, ref, out);
}
