/* A replica fed by one query's events (replica.h, ws_replica_feed). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "replica.h"
#include "walship.h"
#include "ws_fail.h"

#define PENDING_BYTES_DEFAULT (1ull << 30)

struct ws_replica_feed {
	struct ws_replica *r;
	uint64_t pending_bytes_max;
	bool hydrated;
	uint32_t page_size;      /* of the Hydrated the slices follow */
	uint32_t *pgno;          /* the Changed slices of the transaction under way */
	uint8_t *pages;
	size_t n, cap;
	uint32_t db_pages;       /* from its commit slice, 0 before */
	struct ws_replica_feed_stats stats;
};

struct ws_replica_feed *ws_replica_feed_new(struct ws_replica *r, uint64_t pending_bytes_max, int *err)
{
	struct ws_replica_feed *f = r ? calloc(1, sizeof(*f)) : NULL;
	if (!f) {
		int rc = r ? ws_fail(-ENOMEM, "replica feed: out of memory") : ws_fail(WS_ECONFIG, "replica feed: NULL");
		if (err)
			*err = rc;
		return NULL;
	}
	f->r = r;
	f->pending_bytes_max = pending_bytes_max ? pending_bytes_max : PENDING_BYTES_DEFAULT;
	return f;
}

void ws_replica_feed_free(struct ws_replica_feed *f)
{
	if (!f)
		return;
	free(f->pgno);
	free(f->pages);
	free(f);
}

void ws_replica_feed_stats(const struct ws_replica_feed *f, struct ws_replica_feed_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (f)
		*out = f->stats;
}

static void drop(struct ws_replica_feed *f)
{
	f->n = 0;
	f->db_pages = 0;
}

static int grow(struct ws_replica_feed *f, size_t more)
{
	size_t want = f->n + more;
	if ((uint64_t)want * f->page_size > f->pending_bytes_max)
		return ws_fail(WS_ETOOBIG, "replica feed: a transaction of more than %llu bytes of pages",
			       (unsigned long long)f->pending_bytes_max);
	if (want <= f->cap)
		return 0;
	size_t cap = want * 2;
	uint32_t *p = realloc(f->pgno, cap * sizeof(*p));
	if (p)
		f->pgno = p;
	uint8_t *g = p ? realloc(f->pages, cap * f->page_size) : NULL;
	if (!g)
		return ws_fail(-ENOMEM, "replica feed: out of memory");
	f->pages = g;
	f->cap = cap;
	return 0;
}

static int buffer(struct ws_replica_feed *f, const struct ws_event *e)
{
	uint32_t n = e->u.update.u.changed.count;
	if (!f->hydrated || e->u.update.page_size != f->page_size)
		return ws_fail(WS_EFORMAT, "replica feed: tenant %s: pages before their Hydrated, or of another size",
			       e->tenant ? e->tenant : "?");
	if (e->u.update.u.changed.position <= ws_replica_tx(f->r))
		return ws_fail(WS_EFORMAT, "replica feed: tenant %s: pages at or before the last transaction applied",
			       e->tenant ? e->tenant : "?");
	int rc = grow(f, n);
	if (rc)
		return rc;
	memcpy(f->pgno + f->n, e->u.update.u.changed.pgno, n * sizeof(uint32_t));
	memcpy(f->pages + f->n * f->page_size, e->u.update.u.changed.pages, (size_t)n * f->page_size);
	f->n += n;
	if (e->u.update.u.changed.db_pages)
		f->db_pages = e->u.update.u.changed.db_pages;
	return 0;
}

static int hydrate(struct ws_replica_feed *f, const struct ws_event *e)
{
	drop(f);
	f->hydrated = false;
	int rc = ws_replica_image(f->r, e->u.update.u.hydrated.tx_id, e->u.update.u.hydrated.image,
				  e->u.update.u.hydrated.pages, e->u.update.page_size);
	if (rc)
		return rc;
	f->hydrated = true;
	f->page_size = e->u.update.page_size;
	f->stats.images++;
	return 0;
}

static int progressed(struct ws_replica_feed *f, const struct ws_event *e)
{
	if (f->n == 0 || e->u.progressed.tx_id <= ws_replica_tx(f->r))
		return 0;
	if (f->db_pages == 0)
		return ws_fail(WS_EFORMAT, "replica feed: tenant %s: a Progressed before its commit's pages",
			       e->tenant ? e->tenant : "?");
	int rc = ws_replica_apply(f->r, e->u.progressed.tx_id, f->pgno, f->pages, (uint32_t)f->n, f->page_size,
				  f->db_pages);
	if (rc == 0) {
		f->stats.applied++;
		f->stats.last_pages = (uint32_t)f->n;
		f->stats.last_db_pages = f->db_pages;
	}
	drop(f);
	return rc;
}

int ws_replica_feed(struct ws_replica_feed *f, const struct ws_event *e)
{
	int rc;
	if (!f || !e)
		return ws_fail(WS_ECONFIG, "replica feed: NULL");
	switch (e->kind) {
	case WS_EVENT_UPDATE:
		rc = e->u.update.kind == WS_UPDATE_HYDRATED ? hydrate(f, e) : buffer(f, e);
		break;
	case WS_EVENT_PROGRESSED:
		rc = progressed(f, e);
		break;
	default:
		drop(f);
		f->hydrated = false;
		f->stats.faults++;
		return 1;
	}
	if (rc) {
		drop(f);
		f->hydrated = false;
	}
	return rc;
}
