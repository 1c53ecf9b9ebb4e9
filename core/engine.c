/*
 * The engine: N shards, each one thread pinned to its core, with its own
 * io_uring (ws_reader: registered buffer over [small area | spill ring],
 * WAL files as fixed files), its own upload pipeline (pipe.h: the ring
 * plus an upload thread with its own connection to the sink), its own
 * connection for manifests and watermarks, and its own tenants. Shards
 * share nothing on the hot path; the registry (names → tenants, for
 * add/remove and metrics) is the only shared structure, behind a mutex the
 * shard threads never take while tailing.
 *
 * Waking: one inotify instance per shard watches each tenant's directory;
 * a write to a tenant's -wal file marks it dirty and due batch_age_ms_max
 * later, so a burst of commits becomes one tail. A shard with nothing due
 * sleeps in poll(2) with no timeout: an idle tenant costs no CPU and no
 * object-store request.
 *
 * Open-file budget: an open stream holds two SQLite connections and a WAL
 * descriptor (about 7 descriptors). A shard keeps at most open_max streams
 * open and parks the least recently tailed one beyond that; a parked
 * tenant re-proves continuity from the sink's watermark on its next tail
 * (and re-bases if its WAL restarted meanwhile), so parking never costs
 * correctness, only a possible re-base.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <unistd.h>

#include "adapt.h"
#include "core_internal.h"
#include "engine.h"
#include "ws_stream.h"
#include "pipe.h"
#include "ws_clock.h"
#include "ws_hash.h"
#include "ws_logging.h"
#include "ws_reader.h"

#define SMALL_BYTES ((size_t)128 << 10)   /* header/probe reads; >= one 64 KiB-page frame */
#define FDS_PER_STREAM 7
#define RETRY_MIN_MS 100
#define RETRY_MAX_MS 30000
/* While events keep coming, the inotify queue is read at most this often
 * (and at most every quarter of batch_age_ms_max): a busy writer makes one
 * event per WAL write, and waking for each of them cost more CPU than
 * shipping its frames. Identical events wait merged in the kernel's queue. */
#define EVENTS_GAP_MAX_MS 10

ws_engine_store_fn ws_engine_open_store_hook;
int (*ws_engine_poll_hook)(void);
void *ws_engine_open_store_arg;

struct tenant;

/* One file name a tenant answers to in its watched directory (shard.names). */
struct name_ent {
	struct name_ent *next;
	struct tenant *t;
	bool wal;            /* the -wal file (else the database file) */
};

struct tenant {
	char name[WS_TENANT_MAX];
	char *db_path;
	char *dir;           /* directory watched */
	char *db_base;       /* "x.db" and "x.db-wal" as inotify names them */
	char *wal_base;
	unsigned shard;
	enum ws_policy policy;
	bool removing;       /* under reg_mu: a remove's REMOVE is queued or running */
	bool adding;         /* under reg_mu: its add still waits for its ADD (the add holds it) */
	bool removed;        /* under reg_mu: a remove is done with it while adding; the add frees it */

	/* Shard thread only. */
	struct ws_stream *st;
	int dir_idx;
	size_t idx;          /* position in shard.tenants */
	struct name_ent ent[2];
	bool dirty;
	uint64_t due_ms;
	uint32_t retry_ms;
	uint64_t retry_at;   /* mono ms: after a failed tail, not due before this (0: none) */
	uint32_t age_ms;     /* gather time of the next tail (adapt.h; 0 or batch_age_ms_max unless throttled) */
	uint64_t wm_put_ms;  /* mono time our last watermark write for it finished (0: none yet) */
	bool open;
	struct tenant *lru_prev, *lru_next;

	/* Metrics: written by the shard thread, read by anyone (relaxed atomics). */
	uint64_t tails, errors, frames, bytes, puts, throttle, shed_frames, sheds, last_frame;
	/* The RPO's base, on the monotonic clock (a wall clock stepped back
	 * must not read a backlog as 0): the watermark's time, or when the
	 * tenant was added while no watermark is known. 0: none yet. */
	int64_t wm_mono_ms;
	int64_t added_mono_ms;
	uint32_t last_outcome;
	uint32_t fenced;
};

struct watched_dir {
	int wd;
	char *path;
	unsigned refs;
};

enum cmd_kind { CMD_ADD, CMD_REMOVE, CMD_FLUSH, CMD_STOP };

struct cmd {
	enum cmd_kind kind;
	struct tenant *t;
	int rc;
	char err[512];
	bool done;
	bool ran;            /* run by the shard (false: refused, queued behind STOP) */
	struct cmd *next;
};

struct shard {
	struct ws_engine *e;
	unsigned id;
	struct ws_shard_config cfg;
	pthread_t thread;
	bool started;
	struct ws_sink sink;            /* manifests, watermarks, reads */
	struct ws_store *up_store;      /* the upload thread's connection */
	struct ws_reader *reader;
	struct ws_pipe pipe;
	bool pipe_ok;
	struct ws_tail_work work;
	int ifd, evfd;

	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct cmd *cmds, *cmds_tail;

	/* Shard thread only. */
	struct tenant **tenants;
	size_t n, cap;
	struct watched_dir *dirs;
	size_t ndirs;
	/* (watch descriptor, file name) -> tenants, so an inotify event costs
	 * the same with ten thousand tenants on the shard as with one. */
	struct name_ent **names;
	size_t nnames_buckets, nnames;
	struct tenant *lru_head, *lru_tail;
	unsigned open_count, open_max;
	bool stopped;

	/* Metrics. */
	uint64_t tails, wakeups, errors, frames, bytes, puts, throttle, shed_frames, high_water;
	uint64_t ended_early, coalesced, carried, deferred;
	uint32_t tenant_count;
};

struct ws_engine {
	struct ws_engine_config cfg;
	struct ws_shard_config *shard_cfg;  /* our copy; cfg.shard points at it */
	char *sink_url;
	struct shard *shards;
	unsigned nshards;
	bool stopped;
	int stop_rc;

	pthread_mutex_t reg_mu;         /* the registry */
	struct tenant **reg;
	size_t nreg, capreg;
};

static uint64_t ld(const uint64_t *p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
static void add(uint64_t *p, uint64_t v) { __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }
static void st64(uint64_t *p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }
static void max64(uint64_t *p, uint64_t v)
{
	uint64_t cur = ld(p);
	while (v > cur && !__atomic_compare_exchange_n(p, &cur, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

void ws_shard_config_default(struct ws_shard_config *c)
{
	memset(c, 0, sizeof(*c));
	c->core = -1;
	c->ring_bytes = (uint64_t)64 << 20;
	c->batch_bytes_max = (uint64_t)4 << 20;
	c->batch_frames_max = 4096;
	c->batch_age_ms_max = 1000;
	c->policy = WS_POLICY_BLOCK;
	c->uploads_in_flight = 8;
	c->retry_attempts_max = 10;
	c->retry_deadline_ms = 30000;
	c->sqpoll = false;
	c->adaptive = true;
	c->throttle_age_ms_max = 0;
	c->key_write_interval_ms = 1000;
	c->tail_ms_max = 0;
}

/* The effective throttle_age_ms_max and tail_ms_max (0 = derived). */
static uint32_t throttle_age(const struct ws_shard_config *c)
{
	return c->throttle_age_ms_max ? c->throttle_age_ms_max : c->batch_age_ms_max / 2 * 3;
}

static uint32_t tail_bound(const struct ws_shard_config *c)
{
	return c->tail_ms_max ? c->tail_ms_max : c->batch_age_ms_max / 2;
}

/* A tail wanted at `at`, which ends with a watermark write: (adaptive) no
 * sooner than one key_write_interval_ms after the tenant's last one,
 * whatever made it due (a change, a continuation, a retry, lost events). */
static uint64_t key_due(const struct shard *sh, const struct tenant *t, uint64_t at)
{
	if (!sh->cfg.adaptive)
		return at;
	return ws_adapt_key_due(at, t->wm_put_ms, sh->cfg.key_write_interval_ms);
}

/* When a tenant's change seen now is due: its gather time, and key_due. */
static uint64_t due_after_change(const struct shard *sh, const struct tenant *t, uint64_t now)
{
	uint32_t age = sh->cfg.adaptive && t->age_ms ? t->age_ms : sh->cfg.batch_age_ms_max;
	return key_due(sh, t, now + age);
}

/* ---- registry ------------------------------------------------------------ */

static struct tenant *reg_find(struct ws_engine *e, const char *name, size_t *pos)
{
	for (size_t i = 0; i < e->nreg; i++) {
		if (!strcmp(e->reg[i]->name, name)) {
			if (pos)
				*pos = i;
			return e->reg[i];
		}
	}
	return NULL;
}

/* Unlink t itself (not a namesake) from the registry; false if not there. */
static bool reg_unlink(struct ws_engine *e, const struct tenant *t)
{
	for (size_t i = 0; i < e->nreg; i++) {
		if (e->reg[i] == t) {
			memmove(&e->reg[i], &e->reg[i + 1], (e->nreg - i - 1) * sizeof(*e->reg));
			e->nreg--;
			return true;
		}
	}
	return false;
}

static void tenant_free(struct tenant *t)
{
	if (!t)
		return;
	free(t->db_path);
	free(t->dir);
	free(t->db_base);
	free(t->wal_base);
	free(t);
}

unsigned ws_engine_shard_of(const struct ws_engine *e, const char *name)
{
	return (unsigned)(ws_xxh64(name, strlen(name)) % e->nshards);
}

unsigned ws_engine_shards(const struct ws_engine *e) { return e->nshards; }

/* ---- commands (any thread → shard) ---------------------------------------- */

/* Queue c for the shard and wake it. */
static int shard_post(struct shard *sh, struct cmd *c)
{
	uint64_t one = 1;
	c->done = false;
	c->ran = false;
	c->next = NULL;
	pthread_mutex_lock(&sh->mu);
	if (sh->stopped) {
		pthread_mutex_unlock(&sh->mu);
		return ws_fail(-ESHUTDOWN, "shard %u: engine stopped", sh->id);
	}
	if (sh->cmds_tail)
		sh->cmds_tail->next = c;
	else
		sh->cmds = c;
	sh->cmds_tail = c;
	pthread_mutex_unlock(&sh->mu);
	if (write(sh->evfd, &one, sizeof(one)) != sizeof(one))
		ws_warn("shard %u: cannot wake: %s", sh->id, strerror(errno));
	return 0;
}

/* Wait for a posted c; its result, with its detail. */
static int shard_wait(struct shard *sh, struct cmd *c)
{
	pthread_mutex_lock(&sh->mu);
	while (!c->done)
		pthread_cond_wait(&sh->cv, &sh->mu);
	pthread_mutex_unlock(&sh->mu);
	if (c->rc && c->err[0])
		ws_fail(c->rc, "%s", c->err);
	return c->rc;
}

static int shard_call(struct shard *sh, struct cmd *c)
{
	int rc = shard_post(sh, c);
	return rc ? rc : shard_wait(sh, c);
}

/* The first failure of several, with its detail (for ws_fail at the end). */
struct first_err {
	int rc;
	char msg[512];
};

static void first_err_note(struct first_err *f, int rc)
{
	if (rc && !f->rc) {
		f->rc = rc;
		snprintf(f->msg, sizeof(f->msg), "%s", ws_errmsg());
	}
}

static int first_err_done(const struct first_err *f)
{
	if (f->rc)
		ws_fail(f->rc, "%s", f->msg);
	return f->rc;
}

static void cmd_finish(struct shard *sh, struct cmd *c, int rc)
{
	c->rc = rc;
	if (rc)
		snprintf(c->err, sizeof(c->err), "%s", ws_errmsg());
	pthread_mutex_lock(&sh->mu);
	c->done = true;
	pthread_cond_broadcast(&sh->cv);
	pthread_mutex_unlock(&sh->mu);
}

/* ---- the shard thread ---------------------------------------------------- */

static void lru_unlink(struct shard *sh, struct tenant *t)
{
	if (t->lru_prev)
		t->lru_prev->lru_next = t->lru_next;
	else if (sh->lru_head == t)
		sh->lru_head = t->lru_next;
	if (t->lru_next)
		t->lru_next->lru_prev = t->lru_prev;
	else if (sh->lru_tail == t)
		sh->lru_tail = t->lru_prev;
	t->lru_prev = t->lru_next = NULL;
}

static void lru_front(struct shard *sh, struct tenant *t)
{
	lru_unlink(sh, t);
	t->lru_next = sh->lru_head;
	if (sh->lru_head)
		sh->lru_head->lru_prev = t;
	sh->lru_head = t;
	if (!sh->lru_tail)
		sh->lru_tail = t;
}

static void park(struct shard *sh, struct tenant *t)
{
	if (!t->open)
		return;
	ws_stream_park(t->st);
	t->open = false;
	sh->open_count--;
	lru_unlink(sh, t);
}

static void mark_due(struct tenant *t, uint64_t due)
{
	/* A failing tenant backs off whatever makes it due again: a writer's
	 * next commit must not turn the backoff into batch_age_ms_max. */
	if (due < t->retry_at)
		due = t->retry_at;
	if (!t->dirty || due < t->due_ms)
		t->due_ms = due;
	t->dirty = true;
}

/* Why a tail runs, and so what it may leave for the next one. */
enum tail_mode {
	TAIL_DUE,   /* the shard's own schedule: may stop at its work bound, may shed */
	TAIL_FLUSH, /* ws_engine_flush: ships everything committed, unless it sheds */
	TAIL_DRAIN, /* the final drain, a removal: everything committed, or an error */
};

/* One tail of one tenant; returns its error (Fenced and Shed are not errors). */
static int tail_one(struct shard *sh, struct tenant *t, enum tail_mode mode)
{
	struct ws_engine *e = sh->e;
	struct ws_outcome o;
	struct ws_stream_call call;
	const struct ws_rpo_status *rpo;
	uint64_t frames = 0;
	int rc;

	t->dirty = false;
	if (!t->open) {
		while (sh->open_count >= sh->open_max && sh->lru_tail)
			park(sh, sh->lru_tail);
	}
	ws_stream_set_tail_bound(t->st, mode == TAIL_DUE && sh->cfg.adaptive ? tail_bound(&sh->cfg) : 0,
				 sh->cfg.key_write_interval_ms);
	ws_stream_set_drain(t->st, mode == TAIL_DRAIN);
	/* The shard's own schedule does not wait out a throttled write on
	 * this thread, where every tenant's manifest and watermark writes go
	 * one at a time: the tail fails with nothing acknowledged, and the
	 * tenant is tailed again once the store's Retry-After is over, while
	 * the others go on at the pacer's cut rate (as the AWS SDKs' adaptive
	 * mode: the refused request waits, the client's token bucket paces the
	 * rest). A flush and the final drain wait as before. */
	const bool fail_fast = mode == TAIL_DUE && sh->cfg.adaptive;
	sh->sink.store->throttle_fail_fast = fail_fast;
	sh->sink.store->throttle_until_ms = 0;
	rc = ws_stream_tail_frames(t->st, &o);
	sh->sink.store->throttle_fail_fast = false;
	if (!ws_stream_parked(t->st) && !t->open) {
		t->open = true;
		sh->open_count++;
	}
	if (t->open)
		lru_front(sh, t);
	ws_stream_last_call(t->st, &call);

	add(&t->tails, 1);
	add(&sh->tails, 1);
	add(&t->puts, call.puts);
	add(&sh->puts, call.puts);
	add(&t->bytes, call.bytes);
	add(&sh->bytes, call.bytes);
	add(&t->throttle, call.throttle_retries);
	add(&sh->throttle, call.throttle_retries);
	add(&t->shed_frames, call.frames_shed);
	add(&sh->shed_frames, call.frames_shed);
	max64(&sh->high_water, call.spill_high_water);
	if (rc == WS_ETHROTTLED && fail_fast && sh->sink.store->throttle_until_ms) {
		/* Refused by a store that throttles: not an error, nothing
		 * acknowledged; again after its Retry-After. */
		uint64_t until = sh->sink.store->throttle_until_ms;
		if (!call.throttle_retries) {
			add(&t->throttle, 1);
			add(&sh->throttle, 1);
		}
		add(&sh->deferred, 1);
		t->retry_ms = 0;
		t->retry_at = until;
		mark_due(t, key_due(sh, t, until));
		ws_debug("shard %u: %s (tenant %s again in %" PRIu64 " ms)", sh->id, ws_errmsg(), t->name,
			 until > ws_mono_ms() ? until - ws_mono_ms() : 0);
		return 0;
	}
	if (rc) {
		/* The watermark at the sink is no younger for the failure: once
		 * the stream has read it (a restart during an outage), the RPO is
		 * its age, not the time since this process added the tenant. */
		int64_t wt = ws_stream_wm_time_ms(t->st), now = ws_wall_ms();
		if (wt && !__atomic_load_n(&t->wm_mono_ms, __ATOMIC_RELAXED))
			__atomic_store_n(&t->wm_mono_ms, (int64_t)ws_mono_ms() - (now > wt ? now - wt : 0),
					 __ATOMIC_RELAXED);
		add(&t->errors, 1);
		add(&sh->errors, 1);
		t->retry_ms = t->retry_ms ? t->retry_ms * 2 : RETRY_MIN_MS;
		if (t->retry_ms > RETRY_MAX_MS)
			t->retry_ms = RETRY_MAX_MS;
		t->retry_at = ws_mono_ms() + t->retry_ms;
		mark_due(t, key_due(sh, t, t->retry_at));
		ws_warn("shard %u: %s (retry in %u ms)", sh->id, ws_errmsg(), t->retry_ms);
		if (e->cfg.on_outcome) {
			memset(&o, 0, sizeof(o));
			e->cfg.on_outcome(t->name, &o, rc, e->cfg.arg);
		}
		return rc;
	}
	t->retry_ms = 0;
	t->retry_at = 0;
	__atomic_store_n(&t->last_outcome, (uint32_t)o.kind, __ATOMIC_RELAXED);
	__atomic_store_n(&t->fenced, o.kind == WS_OUTCOME_FENCED, __ATOMIC_RELAXED);
	if (o.kind == WS_OUTCOME_STREAMED)
		frames = o.u.streamed.frame_count;
	else if (o.kind == WS_OUTCOME_RESTARTED)
		frames = o.u.restarted.frame_count;
	add(&t->frames, frames);
	add(&sh->frames, frames);
	/* A fenced tenant's watermark is the new owner's: its frame is not ours. */
	if (o.kind != WS_OUTCOME_FENCED)
		st64(&t->last_frame, ws_stream_wm_last_frame(t->st));
	rpo = ws_outcome_rpo(&o);
	if (rpo && rpo->has_watermark)
		__atomic_store_n(&t->wm_mono_ms, (int64_t)ws_mono_ms() - (int64_t)rpo->watermark_age_ms,
				 __ATOMIC_RELAXED);
	if (o.kind == WS_OUTCOME_STREAMED || o.kind == WS_OUTCOME_RESTARTED)
		t->wm_put_ms = ws_mono_ms(); /* both end with a watermark write */
	if (sh->cfg.adaptive) {
		/* Throttled: gather longer, so the next tail's PUTs carry more
		 * frames and come less often; accepted: back towards normal. A
		 * tail whose watermark carried its manifest made one write
		 * whatever it gathered: gathering longer would only age the
		 * tenant whose write the store refused behind all the others. */
		t->age_ms = ws_adapt_age_next(t->age_ms, sh->cfg.batch_age_ms_max, throttle_age(&sh->cfg),
					      call.throttle_retries > 0 && !call.carried);
		if (t->age_ms > sh->cfg.batch_age_ms_max)
			add(&sh->coalesced, 1);
	}
	/* Stopped at its work bound: the rest of the backlog is due as soon as
	 * this tail's watermark write allows another (the next tail may reach
	 * the end of the WAL at once and write its own). */
	if (call.carried)
		add(&sh->carried, 1);
	if (call.ended_early) {
		add(&sh->ended_early, 1);
		mark_due(t, key_due(sh, t, ws_mono_ms()));
	}
	/* A commit under way (its frames written, the wal-index not yet):
	 * only the frames woke the engine, so look again after the usual gather. */
	if (call.past_index)
		mark_due(t, due_after_change(sh, t, ws_mono_ms()));
	/* Shed, or shipped a prefix and shed the rest: the rest is still to do. */
	if (o.kind == WS_OUTCOME_SHED || call.frames_shed > 0) {
		add(&t->sheds, 1);
		mark_due(t, key_due(sh, t, ws_mono_ms() + (sh->cfg.batch_age_ms_max ? sh->cfg.batch_age_ms_max : 10)));
	}
	if (e->cfg.on_outcome)
		e->cfg.on_outcome(t->name, &o, 0, e->cfg.arg);
	return 0;
}

static int watch_dir(struct shard *sh, struct tenant *t)
{
	for (size_t i = 0; i < sh->ndirs; i++) {
		if (sh->dirs[i].refs && !strcmp(sh->dirs[i].path, t->dir)) {
			sh->dirs[i].refs++;
			t->dir_idx = (int)i;
			return 0;
		}
	}
	int wd = inotify_add_watch(sh->ifd, t->dir, IN_MODIFY | IN_CREATE | IN_MOVED_TO);
	if (wd < 0)
		return ws_fail(-errno, "tenant %s: cannot watch %s: %s%s", t->name, t->dir, strerror(errno),
			       errno == ENOSPC ? " (fs.inotify.max_user_watches)" : "");
	struct watched_dir *d = NULL;
	for (size_t i = 0; i < sh->ndirs; i++)
		if (!sh->dirs[i].refs)
			d = &sh->dirs[i];
	if (!d) {
		struct watched_dir *n = realloc(sh->dirs, (sh->ndirs + 1) * sizeof(*n));
		if (!n) {
			inotify_rm_watch(sh->ifd, wd);
			return -ENOMEM;
		}
		sh->dirs = n;
		d = &sh->dirs[sh->ndirs++];
		d->path = NULL;
	}
	free(d->path);
	d->path = strdup(t->dir);
	d->wd = wd;
	d->refs = 1;
	t->dir_idx = (int)(d - sh->dirs);
	return d->path ? 0 : -ENOMEM;
}

static size_t name_bucket(const struct shard *sh, int wd, const char *name)
{
	uint64_t h = ws_xxh64(name, strlen(name)) ^ ((uint64_t)(uint32_t)wd * 0x9e3779b97f4a7c15ull);
	return (size_t)(h ^ (h >> 29)) & (sh->nnames_buckets - 1);
}

static const char *ent_name(const struct name_ent *n) { return n->wal ? n->t->wal_base : n->t->db_base; }

static int ent_wd(const struct shard *sh, const struct name_ent *n) { return sh->dirs[n->t->dir_idx].wd; }

/* Double the buckets when entries outnumber them. Chains only get longer
 * when that allocation fails: nothing breaks. */
static void names_grow(struct shard *sh)
{
	size_t nb = sh->nnames_buckets ? sh->nnames_buckets * 2 : 64;
	struct name_ent **b = calloc(nb, sizeof(*b));
	struct name_ent **old = sh->names;
	size_t oldn = sh->nnames_buckets;
	if (!b)
		return;
	sh->names = b;
	sh->nnames_buckets = nb;
	for (size_t i = 0; i < oldn; i++) {
		for (struct name_ent *n = old[i], *next; n; n = next) {
			size_t k = name_bucket(sh, ent_wd(sh, n), ent_name(n));
			next = n->next;
			n->next = b[k];
			b[k] = n;
		}
	}
	free(old);
}

/* Enter the tenant's two names (after watch_dir). */
static int names_add(struct shard *sh, struct tenant *t)
{
	if (sh->nnames + 2 > sh->nnames_buckets)
		names_grow(sh);
	if (!sh->names)
		return -ENOMEM;
	for (int i = 0; i < 2; i++) {
		struct name_ent *n = &t->ent[i];
		size_t k;
		n->t = t;
		n->wal = i == 0;
		k = name_bucket(sh, ent_wd(sh, n), ent_name(n));
		n->next = sh->names[k];
		sh->names[k] = n;
	}
	sh->nnames += 2;
	return 0;
}

static void names_remove(struct shard *sh, struct tenant *t)
{
	for (int i = 0; i < 2; i++) {
		struct name_ent *n = &t->ent[i];
		struct name_ent **pp = &sh->names[name_bucket(sh, ent_wd(sh, n), ent_name(n))];
		while (*pp && *pp != n)
			pp = &(*pp)->next;
		if (*pp) {
			*pp = n->next;
			sh->nnames--;
		}
	}
}

static void unwatch_dir(struct shard *sh, struct tenant *t)
{
	struct watched_dir *d = &sh->dirs[t->dir_idx];
	if (--d->refs == 0)
		inotify_rm_watch(sh->ifd, d->wd);
}

static int do_add(struct shard *sh, struct tenant *t)
{
	struct ws_engine *e = sh->e;
	struct ws_stream_config sc = {
		.tenant = t->name,
		.db_path = t->db_path,
		.epoch = e->cfg.epoch,
		.pointer_generation = e->cfg.pointer_generation,
		.policy = t->policy,
		.wal_checkpoint_bytes = e->cfg.wal_checkpoint_bytes,
		.batch_frames_max = sh->cfg.batch_frames_max,
		.inline_batch_bytes_max = sh->cfg.inline_batch_bytes_max,
		.carry = sh->cfg.carry,
	};
	struct ws_stream_shared shared = {
		.reader = sh->reader,
		.small_off = 0,
		.small_bytes = SMALL_BYTES,
		.ring_off = SMALL_BYTES,
		.pipe = &sh->pipe,
		.work = &sh->work,
	};
	int rc;

	if (sh->n == sh->cap) {
		size_t cap = sh->cap ? sh->cap * 2 : 64;
		struct tenant **n = realloc(sh->tenants, cap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		sh->tenants = n;
		sh->cap = cap;
	}
	t->st = ws_stream_open_shared(&sh->sink, &sc, &shared, &rc);
	if (!t->st)
		return rc;
	rc = watch_dir(sh, t);
	if (rc == 0 && (rc = names_add(sh, t)) != 0)
		unwatch_dir(sh, t);
	if (rc) {
		ws_stream_close(t->st);
		t->st = NULL;
		return rc;
	}
	t->idx = sh->n;
	sh->tenants[sh->n++] = t;
	__atomic_store_n(&sh->tenant_count, (uint32_t)sh->n, __ATOMIC_RELAXED);
	mark_due(t, 0); /* first tail at once */
	return 0;
}

static int do_remove(struct shard *sh, struct tenant *t)
{
	int rc;
	if (!t->st)
		return 0; /* its ADD failed: never on this shard */
	rc = tail_one(sh, t, TAIL_DRAIN);
	park(sh, t);
	names_remove(sh, t);
	unwatch_dir(sh, t);
	ws_stream_close(t->st);
	t->st = NULL;
	sh->tenants[t->idx] = sh->tenants[--sh->n];
	sh->tenants[t->idx]->idx = t->idx;
	__atomic_store_n(&sh->tenant_count, (uint32_t)sh->n, __ATOMIC_RELAXED);
	return rc;
}

static bool ended_early(const struct tenant *t)
{
	struct ws_stream_call call;
	ws_stream_last_call(t->st, &call);
	return call.ended_early;
}

static int tail_all(struct shard *sh, enum tail_mode mode)
{
	struct first_err fe = { 0 };
	for (size_t i = 0; i < sh->n; i++) {
		int rc = tail_one(sh, sh->tenants[i], mode);
		/* A database replaced during the call: nothing was acknowledged
		 * and the stream let go of the old file, so the next call
		 * re-bases onto the new one. A flush or the final drain makes
		 * that call now instead of ending on the error. */
		if (rc == WS_EREPLACED)
			rc = tail_one(sh, sh->tenants[i], mode);
		/* A call names at most as many batches as one manifest holds
		 * (and stops earlier at nothing else here: no work bound): a
		 * flush or the final drain goes on to the end of the backlog. */
		while (rc == 0 && ended_early(sh->tenants[i]))
			rc = tail_one(sh, sh->tenants[i], mode);
		first_err_note(&fe, rc);
	}
	return first_err_done(&fe);
}

/* Returns true when the shard must stop. */
static bool run_commands(struct shard *sh)
{
	bool stop = false;
	for (;;) {
		struct cmd *c;
		pthread_mutex_lock(&sh->mu);
		c = sh->cmds;
		if (c) {
			sh->cmds = c->next;
			if (!sh->cmds)
				sh->cmds_tail = NULL;
		}
		pthread_mutex_unlock(&sh->mu);
		if (!c)
			return stop;
		if (stop) {
			/* Queued behind STOP: the final drain is over, nothing
			 * more runs here (an ADD now would never be shipped). */
			cmd_finish(sh, c, ws_fail(-ESHUTDOWN, "shard %u: engine stopped", sh->id));
			continue;
		}
		c->ran = true;
		switch (c->kind) {
		case CMD_ADD: cmd_finish(sh, c, do_add(sh, c->t)); break;
		case CMD_REMOVE: cmd_finish(sh, c, do_remove(sh, c->t)); break;
		case CMD_FLUSH: cmd_finish(sh, c, tail_all(sh, TAIL_FLUSH)); break;
		case CMD_STOP: {
			int rc;
			/* Refuse new commands before the drain, not after it. */
			pthread_mutex_lock(&sh->mu);
			sh->stopped = true;
			pthread_mutex_unlock(&sh->mu);
			rc = tail_all(sh, TAIL_DRAIN);
			cmd_finish(sh, c, rc);
			stop = true;
			break;
		}
		}
	}
}

static void read_events(struct shard *sh)
{
	_Alignas(struct inotify_event) char buf[16384];
	uint64_t now = ws_mono_ms();
	for (;;) {
		ssize_t n = read(sh->ifd, buf, sizeof(buf));
		if (n <= 0)
			break;
		for (char *p = buf; p < buf + n;) {
			const struct inotify_event *ev = (const struct inotify_event *)p;
			p += sizeof(*ev) + ev->len;
			if (ev->mask & IN_Q_OVERFLOW) {
				/* Lost events: everyone is a suspect. */
				for (size_t i = 0; i < sh->n; i++)
					mark_due(sh->tenants[i], key_due(sh, sh->tenants[i], now));
				continue;
			}
			if (!ev->len)
				continue;
			if (!sh->names)
				continue;
			for (struct name_ent *ne = sh->names[name_bucket(sh, ev->wd, ev->name)]; ne; ne = ne->next) {
				if (ent_wd(sh, ne) != ev->wd || strcmp(ev->name, ent_name(ne)))
					continue;
				/* Writes to the WAL are commits to ship; a database file
				 * created or renamed into place is a new database. Writes
				 * to the database file itself are WAL checkpoints (ours
				 * too): nothing to ship. Closes are not watched: parking a
				 * stream closes files, and must not wake it again. */
				if (!ne->wal && !(ev->mask & (IN_CREATE | IN_MOVED_TO)))
					continue;
				mark_due(ne->t, due_after_change(sh, ne->t, now));
			}
		}
	}
}

static void *shard_main(void *arg)
{
	struct shard *sh = arg;
	bool stop = false, poll_failing = false;
	char name[16];

	snprintf(name, sizeof(name), "ws-shard-%u", sh->id);
	pthread_setname_np(pthread_self(), name);

	if (sh->cfg.core >= 0) {
		cpu_set_t set;
		CPU_ZERO(&set);
		CPU_SET((size_t)sh->cfg.core, &set);
		int rc = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
		if (rc)
			ws_warn("shard %u: cannot pin to core %d: %s", sh->id, sh->cfg.core, strerror(rc));
	}
	const uint64_t events_gap = sh->cfg.batch_age_ms_max / 4 < EVENTS_GAP_MAX_MS ? sh->cfg.batch_age_ms_max / 4 :
										       EVENTS_GAP_MAX_MS;
	uint64_t events_ms = 0; /* when the inotify queue was last read */
	while (!stop) {
		struct pollfd pfd[2] = { { sh->ifd, POLLIN, 0 }, { sh->evfd, POLLIN, 0 } };
		uint64_t now = ws_mono_ms(), next = UINT64_MAX;
		int timeout;

		stop = run_commands(sh);
		if (stop)
			break;
		for (size_t i = 0; i < sh->n; i++) {
			struct tenant *t = sh->tenants[i];
			if (!t->dirty)
				continue;
			if (t->due_ms <= now) {
				(void)tail_one(sh, t, TAIL_DUE);
				/* A change made while this tail ran is seen when it
				 * ends, not after every other due tenant's tail: its
				 * gather time counts from here, and a busy shard does
				 * not idle for a batch_age_ms_max after each round. */
				read_events(sh);
				events_ms = now = ws_mono_ms();
			}
		}
		/* When the next tail is due, over every tenant: the events read
		 * after a tail may have made one due that this pass went by. */
		for (size_t i = 0; i < sh->n; i++)
			if (sh->tenants[i]->dirty && sh->tenants[i]->due_ms < next)
				next = sh->tenants[i]->due_ms;
		/* Events read moments ago: let the next ones gather (the fd
		 * leaves the poll set until the gap is over). A first event after
		 * a quiet spell is read at once. */
		if (events_gap && now < events_ms + events_gap) {
			pfd[0].fd = -1;
			if (events_ms + events_gap < next)
				next = events_ms + events_gap;
		}
		if (next == UINT64_MAX)
			timeout = -1;
		else
			timeout = next <= now ? 0 : (int)(next - now > INT_MAX ? INT_MAX : next - now);
		int prc = ws_engine_poll_hook ? ws_engine_poll_hook() : 0;
		if (prc)
			errno = -prc;
		else
			prc = poll(pfd, 2, timeout);
		if (prc < 0 && errno != EINTR) {
			/* (ENOMEM: the kernel's, for a moment.) The shard goes on:
			 * leaving its loop would leave every later command, the
			 * engine's stop included, waiting for ever. */
			if (!poll_failing)
				ws_error("shard %u: poll: %s; retrying every 10 ms", sh->id, strerror(errno));
			poll_failing = true;
			ws_sleep_ms(10);
			continue;
		}
		poll_failing = false;
		add(&sh->wakeups, 1);
		if (pfd[0].fd >= 0 && (pfd[0].revents & POLLIN)) {
			read_events(sh);
			events_ms = ws_mono_ms();
		}
		if (pfd[1].revents & POLLIN) {
			uint64_t v;
			if (read(sh->evfd, &v, sizeof(v)) < 0 && errno != EAGAIN)
				ws_warn("shard %u: eventfd: %s", sh->id, strerror(errno));
		}
	}
	return NULL;
}

/* ---- create / destroy ---------------------------------------------------- */

/*
 * The upload thread reads and checks half of the shard's slots, in
 * parallel with the shard thread. Left to itself the scheduler keeps
 * waking it on the core of the shard thread that woke it (the two then
 * take turns on one core), so a pinned shard's upload thread may run on
 * any core but that one.
 */
static void keep_upload_off_core(struct shard *sh, int core)
{
	cpu_set_t set;
	if (core < 0 || !sh->pipe.started)
		return;
	CPU_ZERO(&set);
	if (sched_getaffinity(0, sizeof(set), &set) != 0)
		return;
	CPU_CLR((size_t)core, &set);
	if (CPU_COUNT(&set) == 0)
		return; /* no other core to use */
	int rc = pthread_setaffinity_np(sh->pipe.thread, sizeof(set), &set);
	if (rc)
		ws_warn("shard %u: cannot keep the upload thread off core %d: %s", sh->id, core, strerror(rc));
}

static struct ws_store *open_store(struct ws_engine *e, unsigned shard, bool uploader, unsigned flags, int *err)
{
	const struct ws_shard_config *c = &e->cfg.shard[shard];
	/* The shard's retry bounds, uploads in flight and (adaptive) paced
	 * writes, unless the URL says; passed beside the URL, so messages echo
	 * only what the user wrote. */
	const struct ws_store_limits lim = { c->retry_attempts_max, c->retry_deadline_ms, c->uploads_in_flight,
					     !c->adaptive };
	if (ws_engine_open_store_hook)
		return ws_engine_open_store_hook(e->sink_url, shard, uploader, ws_engine_open_store_arg, err);
	return ws_store_open_limits(e->sink_url, &lim, flags, err);
}

static int check_shard(const struct ws_shard_config *c, unsigned i)
{
	cpu_set_t allowed;
	if (c->core < -1 || c->core >= CPU_SETSIZE)
		return ws_fail(WS_ECONFIG, "shard %u: core %d out of range", i, c->core);
	if (c->core >= 0 && sched_getaffinity(0, sizeof(allowed), &allowed) == 0 && !CPU_ISSET((size_t)c->core, &allowed))
		return ws_fail(WS_ECONFIG, "shard %u: core %d is not available to this process", i, c->core);
	if (c->batch_bytes_max < (uint64_t)65536 + 24 + WS_BATCH_HDR_SIZE || c->batch_bytes_max > ((uint64_t)1 << 30))
		return ws_fail(WS_ECONFIG, "shard %u: batch_bytes_max %" PRIu64 " must be 65656..1GiB", i,
			       c->batch_bytes_max);
	if (c->ring_bytes / c->batch_bytes_max < 2)
		return ws_fail(WS_ECONFIG, "shard %u: ring_bytes %" PRIu64 " must hold at least two batches of "
			       "batch_bytes_max %" PRIu64, i, c->ring_bytes, c->batch_bytes_max);
	if (c->ring_bytes > ((uint64_t)64 << 30))
		return ws_fail(WS_ECONFIG, "shard %u: ring_bytes %" PRIu64 " over 64GiB", i, c->ring_bytes);
	if (c->batch_frames_max == 0)
		return ws_fail(WS_ECONFIG, "shard %u: batch_frames_max must be at least 1", i);
	if (c->uploads_in_flight == 0 || c->uploads_in_flight > 64)
		return ws_fail(WS_ECONFIG, "shard %u: uploads_in_flight %u must be 1..64", i, c->uploads_in_flight);
	if (c->retry_attempts_max == 0)
		return ws_fail(WS_ECONFIG, "shard %u: retry_attempts_max must be at least 1", i);
	if (c->policy != WS_POLICY_BLOCK && c->policy != WS_POLICY_THROTTLE && c->policy != WS_POLICY_SHED)
		return ws_fail(WS_ECONFIG, "shard %u: unknown policy %d", i, (int)c->policy);
	if (c->carry != WS_CARRY_PRESSED && c->carry != WS_CARRY_ALWAYS && c->carry != WS_CARRY_NEVER)
		return ws_fail(WS_ECONFIG, "shard %u: unknown carry %d", i, (int)c->carry);
	return 0;
}

/* Room for every descriptor we may need: the soft limit up to the hard one. */
static unsigned open_budget(unsigned shards)
{
	struct rlimit rl;
	rlim_t lim = 1024;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		if (rl.rlim_cur < rl.rlim_max) {
			rl.rlim_cur = rl.rlim_max;
			setrlimit(RLIMIT_NOFILE, &rl);
			getrlimit(RLIMIT_NOFILE, &rl);
		}
		lim = rl.rlim_cur == RLIM_INFINITY ? 1u << 20 : rl.rlim_cur;
	}
	if (lim > (1u << 20))
		lim = 1u << 20;
	rlim_t spare = lim > 512 ? lim - 256 : lim / 2;
	unsigned per = (unsigned)(spare / FDS_PER_STREAM / shards);
	return per < 4 ? 4 : per;
}

static int shard_init(struct ws_engine *e, struct shard *sh, unsigned i)
{
	const struct ws_shard_config *c = &e->cfg.shard[i];
	size_t slot = (size_t)c->batch_bytes_max;
	uint32_t nslots = (uint32_t)(c->ring_bytes / slot);
	unsigned flags = e->cfg.reader_flags | (c->sqpoll ? WS_READER_SQPOLL : 0);
	int rc;

	sh->e = e;
	sh->id = i;
	sh->cfg = *c;
	sh->ifd = sh->evfd = -1;
	pthread_mutex_init(&sh->mu, NULL);
	pthread_cond_init(&sh->cv, NULL);
	sh->open_max = open_budget(e->nshards);
	/* The first shard's connection cleans crash leftovers; the others must not
	 * race it (a leftover of one is a live temporary of another). */
	sh->sink.store = open_store(e, i, false, i == 0 ? 0 : WS_STORE_EXISTING, &rc);
	if (!sh->sink.store)
		return rc;
	sh->up_store = open_store(e, i, true, WS_STORE_EXISTING, &rc);
	if (!sh->up_store)
		return rc;
	sh->reader = ws_reader_open(SMALL_BYTES + (size_t)nslots * slot, sh->open_max + 4, flags, &rc);
	if (!sh->reader)
		return rc;
	rc = ws_tail_work_init(&sh->work);
	if (rc)
		return ws_fail(rc, "shard %u: out of memory", i);
	/* The upload thread reads slots through io_uring only where the
	 * shard does (never under --force-pread). */
	rc = ws_pipe_init(&sh->pipe, ws_reader_buf(sh->reader) + SMALL_BYTES, slot, nslots, sh->up_store,
			  c->uploads_in_flight, true, ws_reader_backend(sh->reader) == WS_READER_URING);
	if (rc)
		return ws_fail(rc, "shard %u: cannot start the upload thread", i);
	ws_pipe_set_adaptive(&sh->pipe, c->adaptive);
	sh->pipe_ok = true;
	keep_upload_off_core(sh, c->core);
	sh->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (sh->ifd < 0)
		return ws_fail(-errno, "shard %u: inotify: %s%s", i, strerror(errno),
			       errno == EMFILE ? " (fs.inotify.max_user_instances)" : "");
	sh->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (sh->evfd < 0)
		return ws_fail(-errno, "shard %u: eventfd: %s", i, strerror(errno));
	rc = -pthread_create(&sh->thread, NULL, shard_main, sh);
	if (rc)
		return ws_fail(rc, "shard %u: cannot start its thread", i);
	sh->started = true;
	ws_info("shard %u: core %d, ring %u x %zu bytes, policy %s, WAL reads by %s, %u streams open at most",
		i, c->core, nslots, slot, ws_policy_name(c->policy), ws_reader_backend_name(sh->reader), sh->open_max);
	return 0;
}

static void shard_free(struct shard *sh)
{
	if (!sh->e)
		return; /* ws_engine_create failed before this shard's turn: nothing to free */
	if (sh->started) {
		struct cmd c = { .kind = CMD_STOP };
		if (sh->pipe_ok)
			ws_pipe_give_up(&sh->pipe);
		if (!sh->stopped)
			(void)shard_call(sh, &c);
		pthread_join(sh->thread, NULL);
		sh->started = false;
	}
	for (size_t i = 0; i < sh->n; i++) {
		ws_stream_close(sh->tenants[i]->st);
		sh->tenants[i]->st = NULL;
	}
	free(sh->tenants);
	free(sh->names);
	for (size_t i = 0; i < sh->ndirs; i++)
		free(sh->dirs[i].path);
	free(sh->dirs);
	if (sh->pipe_ok)
		ws_pipe_destroy(&sh->pipe);
	ws_tail_work_free(&sh->work);
	ws_reader_close(sh->reader);
	ws_store_close(sh->up_store);
	ws_store_close(sh->sink.store);
	if (sh->ifd >= 0)
		close(sh->ifd);
	if (sh->evfd >= 0)
		close(sh->evfd);
	pthread_mutex_destroy(&sh->mu);
	pthread_cond_destroy(&sh->cv);
}

struct ws_engine *ws_engine_create(const struct ws_engine_config *cfg, int *err)
{
	struct ws_engine *e = NULL;
	int rc;

	if (!cfg || !cfg->sink_url || !cfg->sink_url[0]) {
		rc = ws_fail(WS_ECONFIG, "engine: no sink URL");
		goto fail;
	}
	if (cfg->shards == 0 || cfg->shards > WS_SHARDS_MAX || !cfg->shard) {
		rc = ws_fail(WS_ECONFIG, "engine: shards %u must be 1..%u", cfg->shards, WS_SHARDS_MAX);
		goto fail;
	}
	for (unsigned i = 0; i < cfg->shards; i++)
		if ((rc = check_shard(&cfg->shard[i], i)) != 0)
			goto fail;
	e = calloc(1, sizeof(*e));
	if (!e) {
		rc = -ENOMEM;
		goto fail;
	}
	pthread_mutex_init(&e->reg_mu, NULL);
	e->cfg = *cfg;
	e->sink_url = strdup(cfg->sink_url);
	e->shards = calloc(cfg->shards, sizeof(*e->shards));
	if (!e->sink_url || !e->shards) {
		rc = -ENOMEM;
		goto fail;
	}
	e->cfg.shard = NULL; /* the caller's array; each shard keeps its copy */
	struct ws_shard_config *copy = calloc(cfg->shards, sizeof(*copy));
	if (!copy) {
		rc = -ENOMEM;
		goto fail;
	}
	memcpy(copy, cfg->shard, cfg->shards * sizeof(*copy));
	e->shard_cfg = copy;
	e->cfg.shard = copy;
	e->cfg.sink_url = e->sink_url;
	e->nshards = cfg->shards;
	for (unsigned i = 0; i < e->nshards; i++)
		if ((rc = shard_init(e, &e->shards[i], i)) != 0)
			goto fail;
	*err = 0;
	return e;
fail:
	ws_engine_destroy(e);
	*err = rc;
	return NULL;
}

int ws_engine_add_tenant(struct ws_engine *e, const struct ws_tenant_config *tc)
{
	struct tenant *t;
	struct cmd c = { .kind = CMD_ADD };
	const char *slash;
	int rc;

	if (!tc || !tc->name || !ws_tenant_name_valid(tc->name))
		return ws_fail(WS_ECONFIG, "tenant name '%s' invalid: use 1..127 of [A-Za-z0-9._-], not starting "
			       "with '.' or '_'", tc && tc->name ? tc->name : "");
	if (!tc->db_path || !tc->db_path[0])
		return ws_fail(WS_ECONFIG, "tenant %s: no database path", tc->name);
	if (tc->shard < -1 || tc->shard >= (int)e->nshards)
		return ws_fail(WS_ECONFIG, "tenant %s: shard %d out of range (engine has %u)", tc->name, tc->shard,
			       e->nshards);
	if (tc->has_policy && tc->policy != WS_POLICY_BLOCK && tc->policy != WS_POLICY_THROTTLE &&
	    tc->policy != WS_POLICY_SHED)
		return ws_fail(WS_ECONFIG, "tenant %s: unknown policy %d", tc->name, (int)tc->policy);
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	snprintf(t->name, sizeof(t->name), "%s", tc->name);
	t->shard = tc->shard >= 0 ? (unsigned)tc->shard : ws_engine_shard_of(e, tc->name);
	t->policy = tc->has_policy ? tc->policy : e->cfg.shard[t->shard].policy;
	t->db_path = realpath(tc->db_path, NULL);
	if (!t->db_path) {
		rc = ws_fail(errno == ENOENT ? -ENOENT : -errno, "tenant %s: database %s: %s", tc->name, tc->db_path,
			     strerror(errno));
		tenant_free(t);
		return rc;
	}
	slash = strrchr(t->db_path, '/');
	t->dir = strndup(t->db_path, slash == t->db_path ? 1 : (size_t)(slash - t->db_path));
	t->db_base = strdup(slash + 1);
	if (!t->dir || !t->db_base || asprintf(&t->wal_base, "%s-wal", slash + 1) < 0) {
		t->wal_base = NULL;
		tenant_free(t);
		return -ENOMEM;
	}
	t->added_mono_ms = (int64_t)ws_mono_ms();

	pthread_mutex_lock(&e->reg_mu);
	struct tenant *old = reg_find(e, t->name, NULL);
	if (old) {
		/* A tenant being removed is still registered until its stream is
		 * closed: a second stream of the same name must not start before. */
		rc = old->removing ? ws_fail(-EBUSY, "tenant %s: still being removed; add it again once its "
					     "remove has returned", t->name)
				   : ws_fail(WS_ECONFIG, "tenant %s: already registered", t->name);
		pthread_mutex_unlock(&e->reg_mu);
		tenant_free(t);
		return rc;
	}
	if (e->nreg == e->capreg) {
		size_t cap = e->capreg ? e->capreg * 2 : 64;
		struct tenant **n = realloc(e->reg, cap * sizeof(*n));
		if (!n) {
			pthread_mutex_unlock(&e->reg_mu);
			tenant_free(t);
			return -ENOMEM;
		}
		e->reg = n;
		e->capreg = cap;
	}
	e->reg[e->nreg++] = t;
	/* Posted under the registry's lock: a remove that finds the tenant
	 * there queues its REMOVE after this ADD, never before it. */
	c.t = t;
	t->adding = true;
	rc = shard_post(&e->shards[t->shard], &c);
	if (rc) {
		reg_unlink(e, t);
		pthread_mutex_unlock(&e->reg_mu);
		tenant_free(t);
		return rc;
	}
	pthread_mutex_unlock(&e->reg_mu);
	rc = shard_wait(&e->shards[t->shard], &c);
	/* A remove may have found the tenant meanwhile: if it is done, it
	 * left the tenant to be freed here (this call still used it); if it
	 * is not, it unlinks and frees it (its REMOVE finds it never added). */
	bool free_it;
	pthread_mutex_lock(&e->reg_mu);
	t->adding = false;
	free_it = t->removed || (rc && !t->removing && reg_unlink(e, t));
	pthread_mutex_unlock(&e->reg_mu);
	if (free_it)
		tenant_free(t);
	return rc;
}

int ws_engine_remove_tenant(struct ws_engine *e, const char *name)
{
	struct cmd c = { .kind = CMD_REMOVE };
	struct tenant *t;
	int rc;

	/*
	 * The tenant stays registered, marked, until its REMOVE has run: an add
	 * of the same name meanwhile is refused (on another shard it would
	 * start a second stream of the database before this one is closed).
	 * Posted under the registry's lock, as an add posts its ADD.
	 */
	pthread_mutex_lock(&e->reg_mu);
	t = name ? reg_find(e, name, NULL) : NULL;
	if (t && t->removing) {
		pthread_mutex_unlock(&e->reg_mu);
		return ws_fail(-EBUSY, "tenant %s: already being removed", name);
	}
	if (!t) {
		pthread_mutex_unlock(&e->reg_mu);
		return ws_fail(WS_ENOTFOUND, "tenant %s: not registered", name ? name : "(null)");
	}
	c.t = t;
	rc = shard_post(&e->shards[t->shard], &c);
	if (rc) {
		/* The shard has stopped: it still holds the tenant (its stream
		 * is closed with the shard), which stays registered:
		 * ws_engine_destroy frees it. */
		pthread_mutex_unlock(&e->reg_mu);
		return rc;
	}
	t->removing = true;
	pthread_mutex_unlock(&e->reg_mu);
	rc = shard_wait(&e->shards[t->shard], &c);
	pthread_mutex_lock(&e->reg_mu);
	if (!c.ran) {
		/* Queued behind the engine's STOP, never run: the shard still
		 * holds the tenant, as above. */
		t->removing = false;
		pthread_mutex_unlock(&e->reg_mu);
		return rc;
	}
	reg_unlink(e, t);
	/* Its add has not yet returned (its ADD failed, or the REMOVE ran
	 * before the add woke): that call frees it. */
	bool adding = t->adding;
	if (adding)
		t->removed = true;
	pthread_mutex_unlock(&e->reg_mu);
	if (!adding)
		tenant_free(t);
	return rc;
}

/* Send kind to every running shard at once (they work in parallel), then
 * collect each result. */
static int all_shards(struct ws_engine *e, enum cmd_kind kind)
{
	struct first_err fe = { 0 };
	struct cmd *c = calloc(e->nshards, sizeof(*c));
	bool *posted = calloc(e->nshards, sizeof(*posted));
	if (!c || !posted) {
		free(c);
		free(posted);
		return ws_fail(-ENOMEM, "engine: out of memory");
	}
	for (unsigned i = 0; i < e->nshards; i++) {
		if (!e->shards[i].started)
			continue;
		c[i].kind = kind;
		int rc = shard_post(&e->shards[i], &c[i]);
		first_err_note(&fe, rc);
		posted[i] = rc == 0;
	}
	for (unsigned i = 0; i < e->nshards; i++)
		if (posted[i])
			first_err_note(&fe, shard_wait(&e->shards[i], &c[i]));
	free(c);
	free(posted);
	return first_err_done(&fe);
}

int ws_engine_flush(struct ws_engine *e)
{
	return all_shards(e, CMD_FLUSH);
}

void ws_engine_give_up(struct ws_engine *e)
{
	/* pipe_ok is set before ws_engine_create returns and cleared only
	 * by ws_engine_destroy: safe to read from any thread meanwhile. */
	for (unsigned i = 0; e && i < e->nshards; i++)
		if (e->shards[i].pipe_ok)
			ws_pipe_give_up(&e->shards[i].pipe);
}

int ws_engine_stop(struct ws_engine *e)
{
	char msg[512];
	if (e->stopped)
		return e->stop_rc;
	/* A sink that is gone must not hold the stop for ever: block stops
	 * waiting out failures, now (a tail in flight too), and the final
	 * drain's uploads get their requests' own bounded retries. */
	ws_engine_give_up(e);
	/* Every shard drains at once. */
	e->stop_rc = all_shards(e, CMD_STOP);
	snprintf(msg, sizeof(msg), "%s", ws_errmsg());
	for (unsigned i = 0; i < e->nshards; i++) {
		if (e->shards[i].started) {
			pthread_join(e->shards[i].thread, NULL);
			e->shards[i].started = false;
		}
	}
	e->stopped = true;
	if (e->stop_rc)
		ws_fail(e->stop_rc, "%s", msg);
	return e->stop_rc;
}

void ws_engine_destroy(struct ws_engine *e)
{
	if (!e)
		return;
	if (e->shards) {
		for (unsigned i = 0; i < e->nshards; i++)
			shard_free(&e->shards[i]);
	}
	for (size_t i = 0; i < e->nreg; i++)
		tenant_free(e->reg[i]);
	free(e->reg);
	free(e->shards);
	free(e->shard_cfg);
	free(e->sink_url);
	pthread_mutex_destroy(&e->reg_mu);
	free(e);
}

/* ---- metrics ------------------------------------------------------------- */

static void tenant_metrics(const struct tenant *t, struct ws_tenant_metrics *m)
{
	int64_t now = (int64_t)ws_mono_ms();
	int64_t wm = __atomic_load_n(&t->wm_mono_ms, __ATOMIC_RELAXED);
	int64_t since = wm ? wm : t->added_mono_ms;
	memset(m, 0, sizeof(*m));
	snprintf(m->tenant, sizeof(m->tenant), "%s", t->name);
	m->shard = t->shard;
	m->policy = t->policy;
	m->rpo.has_watermark = wm != 0;
	m->rpo.watermark_age_ms = now > since ? (uint64_t)(now - since) : 0;
	if (__atomic_load_n(&t->fenced, __ATOMIC_RELAXED)) {
		/* Fenced carries no RPO (the seed): the stream is another
		 * owner's now, and its age would page the wrong operator. */
		m->rpo.has_watermark = false;
		m->rpo.watermark_age_ms = 0;
	}
	m->tails = ld(&t->tails);
	m->errors = ld(&t->errors);
	m->frames_shipped = ld(&t->frames);
	m->bytes_shipped = ld(&t->bytes);
	m->puts = ld(&t->puts);
	m->throttle_retries = ld(&t->throttle);
	m->frames_shed = ld(&t->shed_frames);
	m->sheds = ld(&t->sheds);
	m->last_frame = ld(&t->last_frame);
	m->last_outcome = (enum ws_outcome_kind)__atomic_load_n(&t->last_outcome, __ATOMIC_RELAXED);
	m->fenced = __atomic_load_n(&t->fenced, __ATOMIC_RELAXED) != 0;
}

int ws_engine_shard_metrics(struct ws_engine *e, unsigned i, struct ws_shard_metrics *m)
{
	struct shard *sh;
	if (i >= e->nshards)
		return ws_fail(WS_ENOTFOUND, "shard %u: engine has %u", i, e->nshards);
	sh = &e->shards[i];
	memset(m, 0, sizeof(*m));
	m->shard = i;
	m->core = sh->cfg.core;
	m->policy = sh->cfg.policy;
	m->tenants = __atomic_load_n(&sh->tenant_count, __ATOMIC_RELAXED);
	m->ring_bytes = (uint64_t)sh->pipe.ring.nslots * sh->pipe.ring.slot_bytes;
	m->ring_used = sh->pipe_ok ? (uint64_t)ws_pipe_used(&sh->pipe) * sh->pipe.ring.slot_bytes : 0;
	m->ring_high_water = ld(&sh->high_water);
	m->tails = ld(&sh->tails);
	m->wakeups = ld(&sh->wakeups);
	m->errors = ld(&sh->errors);
	m->frames_shipped = ld(&sh->frames);
	m->bytes_shipped = ld(&sh->bytes);
	m->puts = ld(&sh->puts);
	m->throttle_retries = ld(&sh->throttle);
	m->frames_shed = ld(&sh->shed_frames);
	m->read_path = sh->reader ? ws_reader_backend_name(sh->reader) : "none";
	m->uploads_window = sh->pipe_ok ? __atomic_load_n(&sh->pipe.window, __ATOMIC_RELAXED) : 0;
	m->window_decreases = sh->pipe_ok ? __atomic_load_n(&sh->pipe.decreases, __ATOMIC_RELAXED) : 0;
	m->tails_ended_early = ld(&sh->ended_early);
	m->tails_coalesced = ld(&sh->coalesced);
	m->tails_carried = ld(&sh->carried);
	m->tails_deferred = ld(&sh->deferred);
	return 0;
}

int ws_engine_tenant_metrics(struct ws_engine *e, const char *name, struct ws_tenant_metrics *out)
{
	struct tenant *t;
	pthread_mutex_lock(&e->reg_mu);
	t = name ? reg_find(e, name, NULL) : NULL;
	if (t)
		tenant_metrics(t, out);
	pthread_mutex_unlock(&e->reg_mu);
	if (!t)
		return ws_fail(WS_ENOTFOUND, "tenant %s: not registered", name ? name : "(null)");
	return 0;
}

int ws_engine_foreach_tenant(struct ws_engine *e, ws_tenant_metrics_fn fn, void *arg)
{
	int rc = 0;
	pthread_mutex_lock(&e->reg_mu);
	for (size_t i = 0; i < e->nreg && rc == 0; i++) {
		struct ws_tenant_metrics m;
		tenant_metrics(e->reg[i], &m);
		rc = fn(&m, arg);
	}
	pthread_mutex_unlock(&e->reg_mu);
	return rc;
}

struct text {
	char *p;
	size_t len, cap;
	int err;
};

static void emit(struct text *t, const char *fmt, ...) WS_PRINTF(2, 3);
static void emit(struct text *t, const char *fmt, ...)
{
	va_list ap;
	for (;;) {
		int n;
		if (t->err)
			return;
		va_start(ap, fmt);
		n = vsnprintf(t->p ? t->p + t->len : NULL, t->p ? t->cap - t->len : 0, fmt, ap);
		va_end(ap);
		if (n < 0) {
			t->err = -EINVAL;
			return;
		}
		if (t->p && t->len + (size_t)n < t->cap) {
			t->len += (size_t)n;
			return;
		}
		size_t cap = t->cap ? t->cap * 2 : 16384;
		while (cap < t->len + (size_t)n + 1)
			cap *= 2;
		char *np = realloc(t->p, cap);
		if (!np) {
			t->err = -ENOMEM;
			return;
		}
		t->p = np;
		t->cap = cap;
	}
}

struct tenant_family {
	const char *name, *type, *help;
	size_t off;      /* offset of a uint64_t in ws_tenant_metrics; SIZE_MAX: special */
};

static int text_tenant(const struct ws_tenant_metrics *m, void *arg)
{
	struct text *t = ((void **)arg)[0];
	const struct tenant_family *f = ((void **)arg)[1];
	uint64_t v;
	if (f->off == SIZE_MAX - 1) {
		if (!m->fenced) /* no RPO of a fenced tenant: no series */
			/* Seconds with three decimals from integers: %f would
			 * follow a host's LC_NUMERIC ("0,029" is no Prometheus
			 * number). */
			emit(t, "%s{tenant=\"%s\",shard=\"%u\"} %" PRIu64 ".%03u\n", f->name, m->tenant, m->shard,
			     m->rpo.watermark_age_ms / 1000, (unsigned)(m->rpo.watermark_age_ms % 1000));
		return 0;
	}
	if (f->off == SIZE_MAX)
		v = m->fenced;
	else
		memcpy(&v, (const char *)m + f->off, sizeof(v));
	emit(t, "%s{tenant=\"%s\",shard=\"%u\"} %" PRIu64 "\n", f->name, m->tenant, m->shard, v);
	return 0;
}

int ws_engine_metrics_text(struct ws_engine *e, char **out, size_t *len)
{
	static const struct tenant_family tf[] = {
		{ "walship_tenant_watermark_age_seconds", "gauge", "Age of the last durable watermark (RPO).",
		  SIZE_MAX - 1 },
		{ "walship_tenant_frames_shipped_total", "counter", "WAL frames made durable at the sink.",
		  offsetof(struct ws_tenant_metrics, frames_shipped) },
		{ "walship_tenant_bytes_shipped_total", "counter", "Bytes of objects written to the sink.",
		  offsetof(struct ws_tenant_metrics, bytes_shipped) },
		{ "walship_tenant_puts_total", "counter", "Objects written to the sink.",
		  offsetof(struct ws_tenant_metrics, puts) },
		{ "walship_tenant_throttle_retries_total", "counter", "Requests retried because the store throttled.",
		  offsetof(struct ws_tenant_metrics, throttle_retries) },
		{ "walship_tenant_frames_shed_total", "counter", "Frames dropped by the shed policy (re-read later).",
		  offsetof(struct ws_tenant_metrics, frames_shed) },
		{ "walship_tenant_tails_total", "counter", "tail_frames calls.", offsetof(struct ws_tenant_metrics, tails) },
		{ "walship_tenant_errors_total", "counter", "tail_frames calls that failed.",
		  offsetof(struct ws_tenant_metrics, errors) },
		{ "walship_tenant_last_frame", "gauge", "Last WAL frame named by the watermark.",
		  offsetof(struct ws_tenant_metrics, last_frame) },
		{ "walship_tenant_fenced", "gauge", "1 when the last tail was Fenced.", SIZE_MAX },
	};
	struct text t = { 0 };
	for (size_t i = 0; i < sizeof(tf) / sizeof(tf[0]); i++) {
		void *arg[2] = { &t, (void *)(uintptr_t)&tf[i] };
		emit(&t, "# HELP %s %s\n# TYPE %s %s\n", tf[i].name, tf[i].help, tf[i].name, tf[i].type);
		(void)ws_engine_foreach_tenant(e, text_tenant, arg);
	}
	static const struct { const char *name, *type, *help; size_t off; } sf[] = {
		{ "walship_shard_tenants", "gauge", "Tenants on the shard.", SIZE_MAX },
		{ "walship_shard_ring_bytes", "gauge", "Spill ring size.", offsetof(struct ws_shard_metrics, ring_bytes) },
		{ "walship_shard_ring_used_bytes", "gauge", "Spill ring slots in use, in bytes.",
		  offsetof(struct ws_shard_metrics, ring_used) },
		{ "walship_shard_ring_high_water_bytes", "gauge", "Highest spill occupancy of one tail.",
		  offsetof(struct ws_shard_metrics, ring_high_water) },
		{ "walship_shard_tails_total", "counter", "Tails run.", offsetof(struct ws_shard_metrics, tails) },
		{ "walship_shard_wakeups_total", "counter", "Times the shard thread woke.",
		  offsetof(struct ws_shard_metrics, wakeups) },
		{ "walship_shard_errors_total", "counter", "Tails that failed.", offsetof(struct ws_shard_metrics, errors) },
		{ "walship_shard_frames_shipped_total", "counter", "WAL frames made durable.",
		  offsetof(struct ws_shard_metrics, frames_shipped) },
		{ "walship_shard_bytes_shipped_total", "counter", "Bytes written to the sink.",
		  offsetof(struct ws_shard_metrics, bytes_shipped) },
		{ "walship_shard_puts_total", "counter", "Objects written.", offsetof(struct ws_shard_metrics, puts) },
		{ "walship_shard_throttle_retries_total", "counter", "Throttled requests retried.",
		  offsetof(struct ws_shard_metrics, throttle_retries) },
		{ "walship_shard_frames_shed_total", "counter", "Frames dropped by shed.",
		  offsetof(struct ws_shard_metrics, frames_shed) },
		{ "walship_shard_uploads_window", "gauge", "Uploads in flight allowed now (AIMD).", SIZE_MAX - 1 },
		{ "walship_shard_window_decreases_total", "counter", "Upload rounds the store throttled.",
		  offsetof(struct ws_shard_metrics, window_decreases) },
		{ "walship_shard_tails_ended_early_total", "counter", "Tails stopped at tail_ms_max.",
		  offsetof(struct ws_shard_metrics, tails_ended_early) },
		{ "walship_shard_tails_coalesced_total", "counter", "Tails after which changes gathered longer (throttled).",
		  offsetof(struct ws_shard_metrics, tails_coalesced) },
		{ "walship_shard_tails_carried_total", "counter", "Tails whose watermark carried their manifest "
		  "(one write).", offsetof(struct ws_shard_metrics, tails_carried) },
		{ "walship_shard_tails_deferred_total", "counter", "Tails a throttling store refused, tried again "
		  "after its Retry-After while the shard went on.", offsetof(struct ws_shard_metrics, tails_deferred) },
	};
	for (size_t i = 0; i < sizeof(sf) / sizeof(sf[0]); i++) {
		emit(&t, "# HELP %s %s\n# TYPE %s %s\n", sf[i].name, sf[i].help, sf[i].name, sf[i].type);
		for (unsigned s = 0; s < e->nshards; s++) {
			struct ws_shard_metrics m;
			uint64_t v;
			if (ws_engine_shard_metrics(e, s, &m))
				continue;
			if (sf[i].off == SIZE_MAX)
				v = m.tenants;
			else if (sf[i].off == SIZE_MAX - 1)
				v = m.uploads_window;
			else
				memcpy(&v, (const char *)&m + sf[i].off, sizeof(v));
			emit(&t, "%s{shard=\"%u\",policy=\"%s\"} %" PRIu64 "\n", sf[i].name, s, ws_policy_name(m.policy), v);
		}
	}
	if (t.err) {
		free(t.p);
		return ws_fail(t.err, "metrics: out of memory");
	}
	*out = t.p;
	*len = t.len;
	return 0;
}
