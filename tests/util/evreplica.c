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

bool replica_progress(struct replica *r, uint64_t tx, uint64_t *hash)
{
	assert_true(tx >= r->last_tx);
	if (tx == r->last_tx) {
		/* A marker: no slice of a transaction after it was sent before it. */
		assert_int_equal(r->npend, 0);
		return false;
	}
	*hash = replica_apply(r, tx);
	return true;
}

/* ---- an engine over a test's database, a channel on it ------------------ */

uint32_t ev_engine_age_ms = 50;

struct ws_engine *ev_engine_up(const char *sink_url, unsigned shards, uint32_t batch_frames_max,
				   uint64_t wal_ckpt_bytes, uint64_t ring_bytes)
{
	struct ws_shard_config sc[2];
	struct ws_engine_config ec;
	struct ws_engine *e;
	int err = 0;
	for (unsigned i = 0; i < 2; i++) {
		ws_shard_config_default(&sc[i]);
		sc[i].ring_bytes = 8 << 20;
		sc[i].batch_bytes_max = 1 << 20;
		if (batch_frames_max)
			sc[i].batch_frames_max = batch_frames_max;
		sc[i].batch_age_ms_max = ev_engine_age_ms;
		sc[i].key_write_interval_ms = 0;
	}
	memset(&ec, 0, sizeof(ec));
	ec.sink_url = sink_url;
	ec.shards = shards;
	ec.shard = sc;
	ec.epoch = 1;
	ec.pointer_generation = 1;
	ec.wal_checkpoint_bytes = wal_ckpt_bytes;
	ec.events_ring_bytes = ring_bytes;
	e = ws_engine_create(&ec, &err);
	if (!e)
		fail_msg("engine: %s (%s)", ws_strerror(err), ws_errmsg());
	return e;
}

void ev_add_tenant(struct ws_engine *e, const char *name, const char *db, int shard)
{
	struct ws_tenant_config tc = { .name = name, .db_path = db, .shard = shard };
	int rc = ws_engine_add_tenant(e, &tc);
	if (rc)
		fail_msg("add %s: %s", name, ws_errmsg());
}

struct ws_events *ev_channel(struct ws_engine *e, uint32_t deadline_ms)
{
	struct ws_events_config c = { .deadline_ms = deadline_ms };
	int err = 0;
	struct ws_events *ev = ws_events_open(e, &c, &err);
	if (!ev)
		fail_msg("events open: %s", ws_errmsg());
	return ev;
}

uint64_t ev_subscribe1(struct ws_events *ev, const char *tenant)
{
	uint64_t q = 0;
	int rc = ws_events_subscribe(ev, &tenant, 1, &q);
	if (rc)
		fail_msg("subscribe %s: %s (%s)", tenant, ws_strerror(rc), ws_errmsg());
	return q;
}

/* The next event, which must come within 20 s. */
void ev_next_ok(struct ws_events *ev, struct ws_event *out)
{
	int rc = ws_events_next(ev, out, 20000);
	if (rc)
		fail_msg("no event in 20 s: %s", ws_strerror(rc));
}

