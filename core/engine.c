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
 * correctness, only a possible re-base. A parked tenant with nothing new
 * stays parked through its tails (empty_unheld: no connection opened), and
 * the first change to its WAL makes it due at once.
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
#include "pipe.h"
#include "ws_clock.h"
#include "ws_hash.h"
#include "ws_logging.h"
#include "ws_reader.h"
#include "engine_internal.h"

ws_engine_store_fn ws_engine_open_store_hook;
int (*ws_engine_poll_hook)(void);
void *ws_engine_open_store_arg;

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
	c->tails_in_flight = TAILS_IN_FLIGHT_DEFAULT;
}


/* ---- registry ------------------------------------------------------------ */

static size_t reg_bucket(const struct ws_engine *e, const char *name)
{
	return (size_t)(ws_xxh64(name, strlen(name)) & (e->nbuckets - 1));
}

struct tenant *ws_eng_reg_find(struct ws_engine *e, const char *name)
{
	if (!e->nbuckets)
		return NULL;
	for (struct tenant *t = e->buckets[reg_bucket(e, name)]; t; t = t->hnext)
		if (!strcmp(t->name, name))
			return t;
	return NULL;
}

/* Room for one more tenant in the registry and its index (rehashed to
 * twice its size when full). */
static int reg_reserve(struct ws_engine *e)
{
	if (e->nreg == e->capreg) {
		size_t cap = e->capreg ? e->capreg * 2 : 64;
		struct tenant **n = realloc(e->reg, cap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		e->reg = n;
		e->capreg = cap;
	}
	if (e->nreg + 1 > e->nbuckets) {
		size_t nb = e->nbuckets ? e->nbuckets * 2 : 64;
		struct tenant **b = calloc(nb, sizeof(*b));
		if (!b)
			return -ENOMEM;
		free(e->buckets);
		e->buckets = b;
		e->nbuckets = nb;
		for (size_t i = 0; i < e->nreg; i++) {
			struct tenant *t = e->reg[i];
			size_t k = reg_bucket(e, t->name);
			t->hnext = b[k];
			b[k] = t;
		}
	}
	return 0;
}

static void reg_insert(struct ws_engine *e, struct tenant *t)
{
	WS_ASSERT(e->nreg < e->capreg && e->nreg < e->nbuckets);
	size_t k = reg_bucket(e, t->name);
	e->reg[e->nreg++] = t;
	t->hnext = e->buckets[k];
	e->buckets[k] = t;
}

/* Unlink t itself (not a namesake) from the registry; false if not there. */
static bool reg_unlink(struct ws_engine *e, const struct tenant *t)
{
	for (size_t i = 0; i < e->nreg; i++) {
		if (e->reg[i] == t) {
			memmove(&e->reg[i], &e->reg[i + 1], (e->nreg - i - 1) * sizeof(*e->reg));
			e->nreg--;
			for (struct tenant **p = &e->buckets[reg_bucket(e, t->name)]; *p; p = &(*p)->hnext) {
				if (*p == t) {
					*p = t->hnext;
					break;
				}
			}
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
	free(t->seal_key_file);
	free(t);
}

unsigned ws_engine_shard_of(const struct ws_engine *e, const char *name)
{
	return (unsigned)(ws_xxh64(name, strlen(name)) % e->nshards);
}

unsigned ws_engine_shards(const struct ws_engine *e) { return e->nshards; }

/* ---- commands (any thread → shard) ---------------------------------------- */

void ws_eng_shard_wake(struct shard *sh)
{
	uint64_t one = 1;
	if (write(sh->evfd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		ws_warn("shard %u: cannot wake: %s", sh->id, strerror(errno));
}

/* Queue c for the shard and wake it. */
static int shard_post(struct shard *sh, struct cmd *c)
{
	WS_ASSERT(c->kind == CMD_STOP || c->kind == CMD_FLUSH || c->kind == CMD_SUBSCRIBE ||
		  c->kind == CMD_UNSUBSCRIBE || c->t);
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
	ws_eng_shard_wake(sh);
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

int ws_eng_shard_post(struct shard *sh, struct cmd *c) { return shard_post(sh, c); }
int ws_eng_shard_wait(struct shard *sh, struct cmd *c) { return shard_wait(sh, c); }

static int shard_call(struct shard *sh, struct cmd *c)
{
	int rc = shard_post(sh, c);
	return rc ? rc : shard_wait(sh, c);
}

void ws_eng_first_err_note(struct first_err *f, int rc)
{
	if (rc && !f->rc) {
		f->rc = rc;
		snprintf(f->msg, sizeof(f->msg), "%s", ws_errmsg());
	}
}

int ws_eng_first_err_done(const struct first_err *f)
{
	if (f->rc)
		ws_fail(f->rc, "%s", f->msg);
	return f->rc;
}

void ws_eng_cmd_finish(struct shard *sh, struct cmd *c, int rc)
{
	if (c->detached) {
		free(c);
		return;
	}
	c->rc = rc;
	if (rc)
		snprintf(c->err, sizeof(c->err), "%s", ws_errmsg());
	pthread_mutex_lock(&sh->mu);
	c->done = true;
	pthread_cond_broadcast(&sh->cv);
	pthread_mutex_unlock(&sh->mu);
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

/* A lane's own connection (manifests, watermarks, fencing reads). */
static struct ws_store *open_lane_store(struct shard *sh, int *err)
{
	return open_store(sh->e, sh->id, false, WS_STORE_EXISTING, err);
}

static int check_shard(const struct ws_shard_config *c, unsigned i)
{
	cpu_set_t allowed;
	if (c->core < -1 || c->core >= CPU_SETSIZE)
		return ws_fail(WS_ECONFIG, "shard %u: core %d out of range", i, c->core);
	if (c->core >= 0 && sched_getaffinity(0, sizeof(allowed), &allowed) == 0 && !CPU_ISSET((size_t)c->core, &allowed))
		return ws_fail(WS_ECONFIG, "shard %u: core %d is not available to this process", i, c->core);
	if (c->batch_bytes_max < (uint64_t)WS_WAL_PAGE_MAX + WS_WAL_FRAME_HDR_SIZE + WS_BATCH_HDR_SIZE || c->batch_bytes_max > ((uint64_t)1 << 30))
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
	if (c->hint_slots > WS_HINT_SLOTS_MAX)
		return ws_fail(WS_ECONFIG, "shard %u: hint_slots %u must be 1..%u (0: %u)", i, c->hint_slots,
			       WS_HINT_SLOTS_MAX, WS_HINT_SLOTS_DEFAULT);
	if (c->tails_in_flight > WS_TAILS_IN_FLIGHT_MAX)
		return ws_fail(WS_ECONFIG, "shard %u: tails_in_flight %u must be 1..%u (0: %u)", i, c->tails_in_flight,
			       WS_TAILS_IN_FLIGHT_MAX, TAILS_IN_FLIGHT_DEFAULT);
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
	pthread_mutex_init(&sh->read_mu, NULL);
	pthread_cond_init(&sh->lane_cv, NULL);
	pthread_cond_init(&sh->idle_cv, NULL);
	sh->open_max = open_budget(e->nshards);
	/* The first shard's connection cleans crash leftovers; the others must not
	 * race it (a leftover of one is a live temporary of another). */
	sh->sink.store = open_store(e, i, false, i == 0 ? 0 : WS_STORE_EXISTING, &rc);
	if (!sh->sink.store)
		return rc;
	sh->sink.store->keys = &sh->sink.ring; /* its tenants' key files join it */
	sh->up_store = open_store(e, i, true, WS_STORE_EXISTING, &rc);
	if (!sh->up_store)
		return rc;
	/* Streams in flight on lanes are never parked to make room: as many
	 * more may be open (engine_tail.c make_room). */
	sh->reader = ws_reader_open(SMALL_BYTES + (size_t)nslots * slot,
				    sh->open_max + 4 + 2 * (c->tails_in_flight ? c->tails_in_flight : TAILS_IN_FLIGHT_DEFAULT),
				    flags, &rc);
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
	rc = ws_eng_lanes_init(sh, open_lane_store);
	if (rc)
		return rc;
	sh->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (sh->ifd < 0)
		return ws_fail(-errno, "shard %u: inotify: %s%s", i, strerror(errno),
			       errno == EMFILE ? " (fs.inotify.max_user_instances)" : "");
	sh->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (sh->evfd < 0)
		return ws_fail(-errno, "shard %u: eventfd: %s", i, strerror(errno));
	rc = -pthread_create(&sh->thread, NULL, ws_eng_shard_main, sh);
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
	ws_eng_lanes_free(sh);
	if (sh->pipe_ok)
		ws_pipe_destroy(&sh->pipe);
	ws_tail_work_free(&sh->work);
	ws_reader_close(sh->reader);
	ws_store_close(sh->up_store);
	ws_store_close(sh->sink.store);
	ws_keyring_free(&sh->sink.ring);
	if (sh->ifd >= 0)
		close(sh->ifd);
	if (sh->evfd >= 0)
		close(sh->evfd);
	pthread_mutex_destroy(&sh->mu);
	pthread_cond_destroy(&sh->cv);
	pthread_cond_destroy(&sh->lane_cv);
	pthread_cond_destroy(&sh->idle_cv);
	pthread_mutex_destroy(&sh->read_mu);
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
	/* Each shard keeps its key file's name: its tenants' streams load it. */
	for (unsigned i = 0; i < cfg->shards; i++)
		if (copy[i].seal.key_file && (copy[i].seal.key_file = strdup(copy[i].seal.key_file)) == NULL) {
			while (i-- > 0)
				free((void *)(uintptr_t)copy[i].seal.key_file);
			rc = -ENOMEM;
			goto fail;
		}
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

/* A tenant of tc, checked and its paths resolved, not yet registered. */
static struct tenant *tenant_new(struct ws_engine *e, const struct ws_tenant_config *tc, int *err)
{
	struct tenant *t;
	const char *slash;

	*err = 0;
	if (!tc || !tc->name || !ws_tenant_name_valid(tc->name)) {
		*err = ws_fail(WS_ECONFIG, "tenant name '%s' invalid: use 1..127 of [A-Za-z0-9._-], not starting "
			       "with '.' or '_'", tc && tc->name ? tc->name : "");
		return NULL;
	}
	if (!tc->db_path || !tc->db_path[0]) {
		*err = ws_fail(WS_ECONFIG, "tenant %s: no database path", tc->name);
		return NULL;
	}
	if (tc->shard < -1 || tc->shard >= (int)e->nshards) {
		*err = ws_fail(WS_ECONFIG, "tenant %s: shard %d out of range (engine has %u)", tc->name, tc->shard,
			       e->nshards);
		return NULL;
	}
	if (tc->has_policy && tc->policy != WS_POLICY_BLOCK && tc->policy != WS_POLICY_THROTTLE &&
	    tc->policy != WS_POLICY_SHED) {
		*err = ws_fail(WS_ECONFIG, "tenant %s: unknown policy %d", tc->name, (int)tc->policy);
		return NULL;
	}
	t = calloc(1, sizeof(*t));
	if (!t) {
		*err = -ENOMEM;
		return NULL;
	}
	snprintf(t->name, sizeof(t->name), "%s", tc->name);
	t->shard = tc->shard >= 0 ? (unsigned)tc->shard : ws_engine_shard_of(e, tc->name);
	t->policy = tc->has_policy ? tc->policy : e->cfg.shard[t->shard].policy;
	t->seal = tc->has_seal ? tc->seal : e->cfg.shard[t->shard].seal;
	if (t->seal.key_file && (t->seal_key_file = strdup(t->seal.key_file)) == NULL)
		goto nomem;
	t->seal.key_file = t->seal_key_file;
	t->db_path = realpath(tc->db_path, NULL);
	if (!t->db_path) {
		*err = ws_fail(errno == ENOENT ? -ENOENT : -errno, "tenant %s: database %s: %s", tc->name, tc->db_path,
			       strerror(errno));
		tenant_free(t);
		return NULL;
	}
	slash = strrchr(t->db_path, '/');
	t->dir = strndup(t->db_path, slash == t->db_path ? 1 : (size_t)(slash - t->db_path));
	t->db_base = strdup(slash + 1);
	if (!t->dir || !t->db_base || asprintf(&t->wal_base, "%s-wal", slash + 1) < 0) {
		t->wal_base = NULL;
		goto nomem;
	}
	t->added_mono_ms = (int64_t)ws_mono_ms();
	t->ev_id = __atomic_add_fetch(&e->next_ev_id, 1, __ATOMIC_RELAXED);
	return t;
nomem:
	tenant_free(t);
	*err = -ENOMEM;
	return NULL;
}

/* Register t and queue its ADD on its shard (c, which the caller waits
 * on with add_wait); on an error t is freed. */
static int add_post(struct ws_engine *e, struct tenant *t, struct cmd *c)
{
	int rc;
	pthread_mutex_lock(&e->reg_mu);
	struct tenant *old = ws_eng_reg_find(e, t->name);
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
	if (reg_reserve(e) != 0) {
		pthread_mutex_unlock(&e->reg_mu);
		tenant_free(t);
		return ws_fail(-ENOMEM, "tenant %s: out of memory registering it", t->name);
	}
	WS_ASSERT(t->shard < e->nshards);
	reg_insert(e, t);
	/* Posted under the registry's lock: a remove that finds the tenant
	 * there queues its REMOVE after this ADD, never before it. */
	c->kind = CMD_ADD;
	c->t = t;
	t->adding = true;
	rc = shard_post(&e->shards[t->shard], c);
	if (rc) {
		reg_unlink(e, t);
		pthread_mutex_unlock(&e->reg_mu);
		tenant_free(t);
		return rc;
	}
	pthread_mutex_unlock(&e->reg_mu);
	return 0;
}

/* The result of a posted ADD. */
static int add_wait(struct ws_engine *e, struct cmd *c)
{
	struct tenant *t = c->t;
	int rc = shard_wait(&e->shards[t->shard], c);
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

int ws_engine_add_tenant(struct ws_engine *e, const struct ws_tenant_config *tc)
{
	struct cmd c = { .kind = CMD_ADD };
	int rc;
	struct tenant *t = tenant_new(e, tc, &rc);
	if (!t)
		return rc;
	rc = add_post(e, t, &c);
	return rc ? rc : add_wait(e, &c);
}

/* The failure of the lowest index among those met so far, with its detail. */
struct batch_err {
	size_t at;
	int rc;
	char msg[512];
};

static void batch_err_note(struct batch_err *b, size_t i, int rc, int *rcs)
{
	if (rcs)
		rcs[i] = rc;
	if (rc && (!b->rc || i < b->at)) {
		b->at = i;
		b->rc = rc;
		snprintf(b->msg, sizeof(b->msg), "%s", ws_errmsg());
	}
}

/* Every ADD is queued before the first is waited on: a shard opens its
 * streams one after another without a round trip to the caller each, and
 * its first tails start once its queue is empty. */
int ws_engine_add_tenants(struct ws_engine *e, const struct ws_tenant_config *tcs, size_t n, int *rcs)
{
	struct batch_err first = { 0 };
	struct cmd *cs = calloc(n ? n : 1, sizeof(*cs));
	int rc;

	if (!cs)
		return ws_fail(-ENOMEM, "adding %zu tenants: out of memory", n);
	for (size_t i = 0; i < n; i++) {
		struct tenant *t = tenant_new(e, &tcs[i], &rc);
		if (t)
			rc = add_post(e, t, &cs[i]);
		else
			cs[i].t = NULL;
		if (rc)
			cs[i].t = NULL; /* nothing to wait for */
		batch_err_note(&first, i, rc, rcs);
	}
	for (size_t i = 0; i < n; i++) {
		if (cs[i].t)
			batch_err_note(&first, i, add_wait(e, &cs[i]), rcs);
	}
	free(cs);
	if (first.rc)
		ws_fail(first.rc, "%s", first.msg);
	return first.rc;
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
	t = name ? ws_eng_reg_find(e, name) : NULL;
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
	bool linked = reg_unlink(e, t);
	WS_ASSERT(linked); /* marked removing, nothing else unlinks it */
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
		ws_eng_first_err_note(&fe, rc);
		posted[i] = rc == 0;
	}
	for (unsigned i = 0; i < e->nshards; i++)
		if (posted[i])
			ws_eng_first_err_note(&fe, shard_wait(&e->shards[i], &c[i]));
	free(c);
	free(posted);
	return ws_eng_first_err_done(&fe);
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
	if (e->cfg.drain_ms_max)
		e->drain_deadline_ms = ws_mono_ms() + e->cfg.drain_ms_max;
	__atomic_store_n(&e->stopping, 1, __ATOMIC_RELAXED);
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
	free(e->buckets);
	ws_ev_hub_destroy(e->hub);
	free(e->shards);
	for (unsigned i = 0; e->shard_cfg && i < e->nshards; i++)
		free((void *)(uintptr_t)e->shard_cfg[i].seal.key_file);
	free(e->shard_cfg);
	free(e->sink_url);
	pthread_mutex_destroy(&e->reg_mu);
	free(e);
}

