/* The follower tests' replica and engine scenario (folreplica.h). */
#include "folreplica.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coreutil.h"
#include "core_internal.h"
#include "follow.h"

void mem_init(struct mem *m, const struct record *rec)
{
	memset(m, 0, sizeof(*m));
	m->rec = rec;
	m->at = -1;
}

void mem_free(struct mem *m)
{
	free(m->img);
	m->img = NULL;
}

static int at_state(const struct mem *m)
{
	return find_state(m->rec, image_hash(m->img, m->pages * m->page_size));
}

int mem_image(void *arg, uint64_t tx, const uint8_t *img, uint64_t pages, uint32_t ps)
{
	struct mem *m = arg;
	int at;
	assert_true(tx > m->last_tx);
	free(m->img);
	m->img = malloc(pages * ps + 1);
	assert_non_null(m->img);
	memcpy(m->img, img, pages * ps);
	m->pages = pages;
	m->page_size = ps;
	m->last_tx = tx;
	at = at_state(m);
	if (at < 0 || at < m->at)
		fail_msg("image at tx %llx is not a committed state at or after the last one (%d, was %d)",
			 (unsigned long long)tx, at, m->at);
	m->at = at;
	m->images++;
	return 0;
}

int mem_apply(void *arg, uint64_t tx, const uint32_t *pgno, const uint8_t *pages, uint32_t n, uint32_t ps,
	      uint32_t db_pages)
{
	struct mem *m = arg;
	int at;
	assert_true(m->img != NULL && ps == m->page_size && n > 0 && db_pages > 0);
	assert_true(tx > m->last_tx);
	if (db_pages > m->pages) {
		m->img = realloc(m->img, (size_t)db_pages * ps);
		assert_non_null(m->img);
		memset(m->img + m->pages * ps, 0, (db_pages - m->pages) * ps);
	}
	m->pages = db_pages;
	for (uint32_t i = 0; i < n; i++)
		if (pgno[i] <= m->pages)
			memcpy(m->img + (size_t)(pgno[i] - 1) * ps, pages + (size_t)i * ps, ps);
	m->last_tx = tx;
	at = at_state(m);
	/* Exactly the next state the writer committed: none skipped, none torn. */
	if (at != m->at + 1)
		fail_msg("transaction tx %llx made state %d, the last was %d", (unsigned long long)tx, at, m->at);
	m->at = at;
	m->txns++;
	return 0;
}

static struct ws_engine *engine_up(const char *sink_url)
{
	struct ws_shard_config sc;
	struct ws_engine_config ec;
	struct ws_engine *e;
	int err = 0;
	ws_shard_config_default(&sc);
	sc.ring_bytes = 8 << 20;
	sc.batch_bytes_max = 1 << 20;
	sc.batch_age_ms_max = 20;
	memset(&ec, 0, sizeof(ec));
	ec.sink_url = sink_url;
	ec.shards = 1;
	ec.shard = &sc;
	ec.epoch = 1;
	ec.pointer_generation = 1;
	ec.wal_checkpoint_bytes = 64 << 10;
	e = ws_engine_create(&ec, &err);
	if (!e)
		fail_msg("engine: %s (%s)", ws_strerror(err), ws_errmsg());
	return e;
}

/* A round of the writer: commits, and every fourth an application checkpoint (busy: given up at once). */
static void writer_round(struct wt_env *env, struct record *rec, unsigned k)
{
	static const char *const modes[] = { "PASSIVE", "FULL", "RESTART", "TRUNCATE" };
	char sql[64];
	for (int i = 0; i < 4; i++) {
		wt_write_txn(env->w, i == 2 ? 30 : 1 + i, 500);
		record_state(rec, env->w);
	}
	if (k % 2 == 1) {
		snprintf(sql, sizeof(sql), "PRAGMA wal_checkpoint(%s)", modes[(k / 2) % 4]);
		sqlite3_busy_timeout(env->w, 0);
		wt_exec(env->w, sql);
		sqlite3_busy_timeout(env->w, 5000);
	}
}

void fol_engine_scenario(const char *tag, const char *sink_url, unsigned rounds, uint64_t *rebuilds,
			 uint64_t *lists_steady)
{
	struct ws_follow_config fc = { .tenant = "live" };
	struct ws_tenant_config tc = { .name = "live" };
	struct ws_follow_stats st;
	struct ws_follow *f = NULL;
	struct record *rec = calloc(1, sizeof(*rec));
	struct wt_env env;
	struct ws_sink *sink;
	struct mem m;
	const struct ws_follow_ops ops = { mem_image, mem_apply };
	uint64_t lists0;
	int err = 0;

	assert_non_null(rec);
	wt_env_init(&env, tag, 0);
	if (!sink_url)
		sink_url = env.sink_url;
	wt_write_txn(env.w, 3, 500);
	record_state(rec, env.w);
	struct ws_engine *e = engine_up(sink_url);
	tc.db_path = env.db;
	if (ws_engine_add_tenant(e, &tc) != 0 || ws_engine_flush(e) != 0)
		fail_msg("engine: %s", ws_errmsg());
	/* The follower reads through its own handle, as another host would. */
	if (!(sink = ws_sink_open(sink_url, &err)))
		fail_msg("sink %s: %s", sink_url, ws_errmsg());
	mem_init(&m, rec);
	if (ws_follow_open(sink, &fc, &ops, &m, &f) != 0 || ws_follow_poll(f, NULL) != 0)
		fail_msg("follow: %s", ws_errmsg());
	lists0 = sink->store->stats.lists;
	for (unsigned k = 0; k < rounds; k++) {
		writer_round(&env, rec, k);
		/* Whatever the engine shipped so far: each state reached is checked. */
		if (ws_follow_poll(f, NULL) != 0)
			fail_msg("poll: %s", ws_errmsg());
	}
	if (ws_engine_flush(e) != 0 || ws_follow_poll(f, NULL) != 0)
		fail_msg("flush and poll: %s", ws_errmsg());
	if (m.at != (int)rec->n - 1)
		fail_msg("after the engine flushed the follower is at state %d of %u", m.at, rec->n);
	ws_follow_stats(f, &st);
	*rebuilds = st.rebuilds;
	*lists_steady = sink->store->stats.lists - lists0;
	ws_follow_close(f);
	ws_sink_close(sink);
	assert_int_equal(ws_engine_stop(e), 0);
	ws_engine_destroy(e);
	mem_free(&m);
	free(rec);
	wt_env_free(&env);
}
