/* The event tests' host side (evreplica.h). */
#include "evreplica.h"

#include <stdlib.h>
#include <string.h>

#include "ws_hash.h"

/* ---- the source's record of committed states --------------------------- */

uint64_t image_hash(const uint8_t *img, uint64_t bytes) { return ws_xxh64(img, (size_t)bytes); }

/* The writer's database as it committed it (its own connection, no transaction open). */
void record_state(struct record *r, sqlite3 *w)
{
	sqlite3_int64 size = 0;
	uint8_t *img = sqlite3_serialize(w, "main", &size, 0);
	assert_non_null(img);
	assert_true(r->n < STATES_MAX);
	r->hash[r->n++] = image_hash(img, (uint64_t)size);
	sqlite3_free(img);
}

int find_state(const struct record *r, uint64_t h)
{
	for (unsigned i = 0; i < r->n; i++)
		if (r->hash[i] == h)
			return (int)i;
	return -1;
}

/* ---- the host: a page map per tenant ----------------------------------- */


void replica_free(struct replica *r)
{
	free(r->img);
	free(r->pend_pgno);
	free(r->pend_pages);
	memset(r, 0, sizeof(*r));
}

void replica_hydrate(struct replica *r, const struct ws_event *e)
{
	replica_free(r);
	r->page_size = e->u.update.page_size;
	r->pages = e->u.update.u.hydrated.pages;
	r->img = malloc(r->pages * r->page_size + 1);
	assert_non_null(r->img);
	memcpy(r->img, e->u.update.u.hydrated.image, r->pages * r->page_size);
	r->last_tx = e->u.update.u.hydrated.tx_id;
	r->hydrated = true;
}

void replica_buffer(struct replica *r, const struct ws_event *e)
{
	const uint32_t n = e->u.update.u.changed.count;
	assert_true(r->hydrated);
	assert_int_equal(e->u.update.page_size, r->page_size);
	/* After the last Progressed of the tenant: never a slice of one applied. */
	assert_true(e->u.update.u.changed.position > r->last_tx);
	if (r->npend + n > r->cap) {
		r->cap = (r->npend + n) * 2;
		r->pend_pgno = realloc(r->pend_pgno, r->cap * sizeof(uint32_t));
		r->pend_pages = realloc(r->pend_pages, r->cap * r->page_size);
		assert_non_null(r->pend_pgno);
		assert_non_null(r->pend_pages);
	}
	memcpy(r->pend_pgno + r->npend, e->u.update.u.changed.pgno, n * sizeof(uint32_t));
	memcpy(r->pend_pages + r->npend * r->page_size, e->u.update.u.changed.pages, (size_t)n * r->page_size);
	r->npend += n;
	if (e->u.update.u.changed.db_pages)
		r->pend_db_pages = e->u.update.u.changed.db_pages;
	r->slices_in_txn++;
}

/* Progressed: apply what was buffered, in WAL order; returns the image's hash. */
uint64_t replica_apply(struct replica *r, uint64_t tx)
{
	assert_true(tx > r->last_tx);
	/* Its commit's slice came before it, and said the database's size. */
	assert_true(r->npend > 0 && r->pend_db_pages > 0);
	if (r->pend_db_pages > r->pages) {
		r->img = realloc(r->img, (size_t)r->pend_db_pages * r->page_size);
		assert_non_null(r->img);
		memset(r->img + r->pages * r->page_size, 0, (r->pend_db_pages - r->pages) * r->page_size);
	}
	r->pages = r->pend_db_pages;
	for (size_t i = 0; i < r->npend; i++) {
		uint32_t pg = r->pend_pgno[i];
		assert_true(pg >= 1);
		if (pg <= r->pages)
			memcpy(r->img + (size_t)(pg - 1) * r->page_size, r->pend_pages + i * r->page_size, r->page_size);
	}
	r->npend = 0;
	r->pend_db_pages = 0;
	r->last_tx = tx;
	if (r->slices_in_txn > r->max_slices_in_txn)
		r->max_slices_in_txn = r->slices_in_txn;
	r->slices_in_txn = 0;
	return image_hash(r->img, r->pages * r->page_size);
}
