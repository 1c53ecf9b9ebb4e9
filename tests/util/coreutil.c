#include "coreutil.h"
#include "core_internal.h"
#include "sink.h"
#include "ws_store.h"
#include "ws_clock.h"
#include "ws_store.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

void wt_env_init(struct wt_env *e, const char *tag, unsigned page_size)
{
	int err = 0;
	memset(e, 0, sizeof(*e));
	e->dir = wt_tmpdir(tag);
	assert_non_null(e->dir);
	e->db = wt_path(e->dir, "src.db");
	assert_int_not_equal(asprintf(&e->wal, "%s-wal", e->db), -1);
	e->sink_dir = wt_path(e->dir, "sink");
	e->out_dir = wt_path(e->dir, "out");
	assert_int_equal(mkdir(e->out_dir, 0755), 0);
	assert_int_not_equal(asprintf(&e->sink_url, "file://%s", e->sink_dir), -1);
	e->sink = ws_sink_open(e->sink_url, &err);
	assert_int_equal(err, 0);
	assert_non_null(e->sink);
	e->page_size = page_size ? page_size : 4096;
	e->w = wt_writer_open(e->db, page_size);
}

void wt_env_free(struct wt_env *e)
{
	if (e->w)
		sqlite3_close(e->w);
	ws_sink_close(e->sink);
	wt_rmrf(e->dir);
	free(e->dir);
	free(e->db);
	free(e->wal);
	free(e->sink_dir);
	free(e->sink_url);
	free(e->out_dir);
}

void wt_tail_ok(struct ws_stream *st, struct ws_outcome *o)
{
	int rc = ws_stream_tail_frames(st, o);
	if (rc)
		fail_msg("tail_frames: %s (%s)", ws_strerror(rc), ws_errmsg());
}

/* Schema and every row of t, in key order. */
uint64_t wt_content_hash(sqlite3 *db, int64_t *rows_out)
{
	static const char *const q[] = { "SELECT type, name, sql FROM sqlite_master ORDER BY name",
					  "SELECT * FROM t ORDER BY 1" };
	uint64_t h = 1469598103934665603ull;
	int64_t rows = 0;
	for (size_t qi = 0; qi < 2; qi++) {
		sqlite3_stmt *s = NULL;
		int rc;
		if (sqlite3_prepare_v2(db, q[qi], -1, &s, NULL) != SQLITE_OK)
			fail_msg("prepare %s: %s", q[qi], sqlite3_errmsg(db));
		while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
			int n = sqlite3_column_count(s);
			for (int c = 0; c < n; c++) {
				int type = sqlite3_column_type(s, c);
				uint8_t t8 = (uint8_t)type;
				wt_fnv(&h, &t8, 1);
				if (type == SQLITE_INTEGER) {
					int64_t v = sqlite3_column_int64(s, c);
					wt_fnv(&h, &v, sizeof(v));
				} else if (type != SQLITE_NULL) {
					const void *p = type == SQLITE_BLOB ? sqlite3_column_blob(s, c)
									    : (const void *)sqlite3_column_text(s, c);
					uint64_t len = (uint64_t)sqlite3_column_bytes(s, c);
					wt_fnv(&h, &len, sizeof(len));
					if (len)
						wt_fnv(&h, p, (size_t)len);
				}
			}
			if (qi == 1)
				rows++;
		}
		if (rc != SQLITE_DONE)
			fail_msg("step %s: %s", q[qi], sqlite3_errmsg(db));
		sqlite3_finalize(s);
	}
	if (rows_out)
		*rows_out = rows;
	return h;
}

/* Open a restored file read-only: integrity_check must be ok; returns its hash. */
uint64_t wt_file_hash(const char *path, int64_t *rows)
{
	sqlite3 *db = wt_open_checked(path);
	uint64_t h = wt_content_hash(db, rows);
	sqlite3_close(db);
	return h;
}

char *wt_out_path(struct wt_env *e)
{
	char name[64];
	snprintf(name, sizeof(name), "r%u.db", e->restores++);
	return wt_path(e->out_dir, name);
}

uint64_t wt_restore_hash(struct wt_env *e, const char *tenant, const struct ws_restore_opts *o, int64_t *rows)
{
	char *out = wt_out_path(e);
	uint64_t h;
	int rc;
	rc = ws_restore(e->sink, tenant, o, out);
	if (rc)
		fail_msg("restore: %s (%s)", ws_strerror(rc), ws_errmsg());
	h = wt_file_hash(out, rows);
	unlink(out);
	free(out);
	return h;
}

int wt_try_restore(struct wt_env *e, const char *tenant, const struct ws_restore_opts *o, uint64_t *hash)
{
	char *out = wt_out_path(e);
	int rc = ws_restore(e->sink, tenant, o, out);
	if (rc == 0) {
		*hash = wt_file_hash(out, NULL);
		unlink(out);
	}
	free(out);
	return rc;
}

void wt_point_check(struct wt_env *e, const char *tenant, const char *label, uint64_t hash, int64_t time_ms,
		    const char *gen, uint64_t frame)
{
	struct ws_restore_opts o = { 0 };
	uint64_t got = 0;
	o.time_ms = time_ms;
	if (wt_try_restore(e, tenant, &o, &got))
		fail_msg("%s: restore --time refused: %s", label, ws_errmsg());
	if (got != hash)
		fail_msg("%s: restore --time gave another state", label);
	if (!gen || !gen[0])
		return;
	memset(&o, 0, sizeof(o));
	o.frame = frame;
	o.generation = gen;
	if (wt_try_restore(e, tenant, &o, &got))
		fail_msg("%s: restore --frame %s:%llu refused: %s", label, gen, (unsigned long long)frame, ws_errmsg());
	if (got != hash)
		fail_msg("%s: restore --frame %s:%llu gave another state", label, gen, (unsigned long long)frame);
}

int wt_s3_new_bucket(const char *prefix, char *url, size_t len)
{
	char bucket[64];
	int err = 0;
	struct ws_store *s;
	snprintf(bucket, sizeof(bucket), "%s-%ld-%lld", prefix, (long)getpid(), (long long)time(NULL));
	snprintf(url, len, "s3://%s?endpoint=%s", bucket, getenv("WS_S3_ENDPOINT"));
	if (!(s = ws_store_open_flags(url, WS_STORE_EXISTING, &err)))
		return -1;
	err = ws_store_s3_create_bucket(s);
	ws_store_close(s);
	return err ? -1 : 0;
}

void wt_rebase_while_down(struct wt_env *e, enum wt_rebase_how how)
{
	char *tmp, sql[600];
	switch (how) {
	case WT_CLOSE_LAST_CONNECTION:
		/* The last connection closing checkpoints and deletes the WAL. */
		sqlite3_close(e->w);
		assert_int_equal(access(e->wal, F_OK), -1);
		e->w = wt_writer_open(e->db, 0);
		break;
	case WT_WAL_RESTART:
		wt_exec(e->w, "PRAGMA wal_checkpoint(TRUNCATE)");
		break;
	case WT_FILE_REPLACED:
		tmp = wt_path(e->dir, "new.db");
		snprintf(sql, sizeof(sql), "VACUUM INTO '%s'", tmp);
		wt_exec(e->w, sql);
		sqlite3_close(e->w);
		assert_int_equal(rename(tmp, e->db), 0);
		free(tmp);
		e->w = wt_writer_open(e->db, 0);
		break;
	}
}

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

bool wt_wal_pos(const struct wt_env *e, char gen[32], uint64_t *frame)
{
	struct stat sb;
	size_t len = 0;
	uint8_t *w = wt_read_file(e->wal, &len);
	bool have = w && len >= 32;
	if (have) {
		snprintf(gen, 32, "g%08x-%08x%08x", be32(w + 12), be32(w + 16), be32(w + 20));
		assert_int_equal(stat(e->wal, &sb), 0);
		*frame = ((uint64_t)sb.st_size - 32) / (24u + e->page_size);
	}
	free(w);
	return have;
}

void wt_mutator_init(struct wt_mutator *m, struct wt_env *e, unsigned how)
{
	memset(m, 0, sizeof(*m));
	m->e = e;
	m->how = how;
	assert_int_equal(sqlite3_open(e->db, &m->ck), SQLITE_OK);
}

void wt_mutator_free(struct wt_mutator *m)
{
	sqlite3_close(m->ck);
	m->ck = NULL;
}

void wt_mutator_record(struct wt_mutator *m)
{
	assert_true(m->nstates < WT_STATES_MAX);
	m->states[m->nstates++] = wt_content_hash(m->e->w, NULL);
}

int wt_mutator_find(const struct wt_mutator *m, uint64_t hash)
{
	for (unsigned i = m->nstates; i-- > 0;)
		if (m->states[i] == hash)
			return (int)i;
	return -1;
}

void wt_mutate(const char *site, void *arg)
{
	static const char *const ckpt[] = { NULL, "PASSIVE", "FULL", "RESTART", "TRUNCATE" };
	struct wt_mutator *m = arg;
	sqlite3 *w = m->e->w;
	int rc;
	(void)site;
	m->fired++;
	sqlite3_busy_timeout(w, 0);
	rc = sqlite3_exec(w, "BEGIN IMMEDIATE", NULL, NULL, NULL);
	sqlite3_busy_timeout(w, 5000);
	if (rc == SQLITE_BUSY)
		return;
	assert_int_equal(rc, SQLITE_OK);
	/* A row on the first pages and rows at the end: a state that a later
	 * transaction's frames alone would not bring back. */
	wt_exec(w, "UPDATE t SET v = randomblob(300) WHERE k = 1 + abs(random()) % 20");
	wt_exec(w, "INSERT INTO t(v) VALUES(randomblob(200)), (randomblob(200)), (randomblob(200))");
	wt_exec(w, "COMMIT");
	wt_mutator_record(m);
	if (m->how < 5 && ckpt[m->how]) {
		char sql[64];
		snprintf(sql, sizeof(sql), "PRAGMA wal_checkpoint(%s)", ckpt[m->how]);
		sqlite3_exec(m->ck, sql, NULL, NULL, NULL); /* busy is an answer too */
		wt_write_txn(w, 2, 200);
		wt_mutator_record(m);
	} else if (m->how == 5) {
		wt_exec(w, "PRAGMA cache_size=10");
		wt_write_txn(w, 300, 3000);
		wt_exec(w, "PRAGMA cache_size=-2000");
		wt_mutator_record(m);
	}
}

void wt_gate_wait(const char *site, void *arg)
{
	struct wt_gate *g = arg;
	(void)site;
	pthread_mutex_lock(&g->mu);
	g->paused = true;
	pthread_cond_broadcast(&g->cv);
	while (!g->go)
		pthread_cond_wait(&g->cv, &g->mu);
	pthread_mutex_unlock(&g->mu);
}

void wt_gate_until_paused(struct wt_gate *g)
{
	const uint64_t deadline = ws_mono_ms() + 10000;
	pthread_mutex_lock(&g->mu);
	while (!g->paused) {
		pthread_mutex_unlock(&g->mu);
		if (ws_mono_ms() > deadline)
			fail_msg("no thread reached the pause in 10 s");
		wt_sleep_ms(2);
		pthread_mutex_lock(&g->mu);
	}
	pthread_mutex_unlock(&g->mu);
}

void wt_gate_open(struct wt_gate *g)
{
	pthread_mutex_lock(&g->mu);
	g->go = true;
	pthread_cond_broadcast(&g->cv);
	pthread_mutex_unlock(&g->mu);
}

void wt_sink_put(const struct wt_env *e, const char *key, const void *data, size_t len)
{
	char *p = wt_path(e->sink_dir, key);
	for (char *s = p + 1; *s; s++)
		if (*s == '/') {
			*s = '\0';
			if (mkdir(p, 0755) != 0 && errno != EEXIST)
				fail_msg("mkdir %s: %s", p, strerror(errno));
			*s = '/';
		}
	unlink(p);
	assert_int_equal(wt_write_file(p, data, len), 0);
	free(p);
}

char *wt_tenant_state(struct ws_sink *sink, const char *tenant)
{
	struct ws_store *s = sink->store;
	char *out = NULL, *tok = NULL, prefix[WS_KEY_MAX], wmkey[WS_KEY_MAX];
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);
	assert_non_null(f);
	snprintf(prefix, sizeof(prefix), "%s/", tenant);
	for (;;) {
		struct ws_list_page p;
		memset(&p, 0, sizeof(p));
		assert_int_equal(ws_store_list(s, prefix, tok, 1000, &p), 0);
		for (size_t i = 0; i < p.count; i++)
			fprintf(f, "%s %" PRIu64 "\n", p.keys[i], p.sizes[i]);
		free(tok);
		tok = p.truncated ? strdup(p.next_token) : NULL;
		ws_list_page_free(&p);
		if (!tok)
			break;
	}
	assert_int_equal(ws_key_watermark(wmkey, sizeof(wmkey), tenant), 0);
	struct ws_buf b;
	ws_buf_init(&b, 256u << 20);
	assert_int_equal(ws_store_get(s, wmkey, 0, UINT64_MAX, &b, NULL), 0);
	for (size_t i = 0; i < b.len; i++)
		fprintf(f, "%02x", b.data[i]);
	ws_buf_free(&b);
	fclose(f);
	return out;
}

int wt_s3_fresh_bucket(const char *tag, char *bucket, size_t cap)
{
	char url[1024];
	int err = 0;
	snprintf(bucket, cap, "ws-%s-%ld-%lld", tag, (long)getpid(), (long long)time(NULL));
	snprintf(url, sizeof(url), "s3://%s?endpoint=%s", bucket, getenv("WS_S3_ENDPOINT"));
	struct ws_store *s = ws_store_open_flags(url, WS_STORE_EXISTING, &err);
	if (!s)
		return -1;
	err = ws_store_s3_create_bucket(s);
	ws_store_close(s);
	return err ? -1 : 0;
}

void wt_problem(const char *tenant, const char *key, int err, const char *detail, void *arg)
{
	struct wt_problems *p = arg;
	(void)tenant, (void)err;
	if (p->n++ == 0)
		snprintf(p->first, sizeof(p->first), "%s: %s", key ? key : "-", detail);
}

int wt_follow_no_image(void *arg, uint64_t tx, const uint8_t *img, uint64_t pages, uint32_t ps)
{
	(void)arg, (void)tx, (void)img, (void)pages, (void)ps;
	fail_msg("a follower was handed an image it must not get");
	return -1;
}

int wt_follow_no_apply(void *arg, uint64_t tx, const uint32_t *pgno, const uint8_t *pages, uint32_t n, uint32_t ps,
		       uint32_t dbp)
{
	(void)arg, (void)tx, (void)pgno, (void)pages, (void)n, (void)ps, (void)dbp;
	fail_msg("a follower was handed a transaction it must not get");
	return -1;
}
