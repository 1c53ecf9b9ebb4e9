/*
 * The shard thread: its tenants' watched directories and file names
 * (inotify), its commands, and its loop: tail what is due, sleep in poll(2)
 * until a change or a command.
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
		.slots = sh->cfg.slots,
		.hint_slots = sh->cfg.hint_slots,
		.seal = t->seal,
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
	WS_ASSERT(t->shard == sh->id && sh->n < sh->cap);
	t->idx = sh->n;
	sh->tenants[sh->n++] = t;
	__atomic_store_n(&sh->tenant_count, (uint32_t)sh->n, __ATOMIC_RELAXED);
	ws_eng_mark_due(t, 0); /* first tail at once */
	return 0;
}

static int do_remove(struct shard *sh, struct tenant *t)
{
	int rc;
	if (!t->st)
		return 0; /* its ADD failed: never on this shard */
	WS_ASSERT(t->shard == sh->id && sh->tenants[t->idx] == t);
	rc = ws_eng_tail_one(sh, NULL, t, TAIL_DRAIN);
	if (t->tap) {
		/* Its queries end: nothing more will come of it. */
		ws_ev_tap_fault(t->tap, WS_CAUSE_DERIVE, "tenant %s was removed from the engine", t->name);
		free(t->tap);
		t->tap = NULL;
	}
	ws_eng_park(sh, t);
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

/* The stop's drain deadline has passed: the tenant is left as it is. */
static bool drain_late(const struct shard *sh, enum tail_mode mode)
{
	return mode == TAIL_DRAIN && sh->e->drain_deadline_ms && ws_mono_ms() >= sh->e->drain_deadline_ms;
}

static int drain_left(struct tenant *t)
{
	return ws_fail(-ETIMEDOUT, "tenant %s: drain_ms_max reached; left unshipped past frame %" PRIu64
		       " (the next start ships it)", t->name, ld(&t->last_frame));
}

static int tail_all(struct shard *sh, enum tail_mode mode)
{
	struct first_err fe = { 0 };
	for (size_t i = 0; i < sh->n; i++) {
		struct tenant *t = sh->tenants[i];
		WS_ASSERT(t->idx == i && t->shard == sh->id);
		if (drain_late(sh, mode)) {
			ws_eng_first_err_note(&fe, drain_left(t));
			continue;
		}
		int rc = ws_eng_tail_one(sh, NULL, t, mode);
		/* A database replaced during the call: nothing was acknowledged
		 * and the stream let go of the old file, so the next call
		 * re-bases onto the new one. A flush or the final drain makes
		 * that call now instead of ending on the error. */
		if (rc == WS_EREPLACED)
			rc = ws_eng_tail_one(sh, NULL, t, mode);
		/* A call names at most as many batches as one manifest holds
		 * (and a drain with a deadline stops at its work bound): a flush
		 * or the final drain goes on to the end of the backlog, or to
		 * the deadline. */
		while (rc == 0 && ended_early(t))
			rc = drain_late(sh, mode) ? drain_left(t) : ws_eng_tail_one(sh, NULL, t, mode);
		if (rc == 0 && mode == TAIL_DRAIN)
			__atomic_store_n(&t->drained, 1, __ATOMIC_RELAXED);
		ws_eng_first_err_note(&fe, rc);
	}
	return ws_eng_first_err_done(&fe);
}

static struct tenant *own_tenant(struct shard *sh, const char *name)
{
	for (size_t i = 0; i < sh->n; i++)
		if (strcmp(sh->tenants[i]->name, name) == 0)
			return sh->tenants[i];
	return NULL;
}

/*
 * A query's baseline of one tenant of this shard (events.c). A tap that
 * follows a generation the WAL has left (a restart since its last tail)
 * cannot place the image among its events: tail the tenant first, then
 * take it again.
 */
static int do_subscribe(struct shard *sh, struct cmd *c)
{
	struct ws_ev_hub *hub = __atomic_load_n(&sh->e->hub, __ATOMIC_ACQUIRE);
	struct tenant *t = own_tenant(sh, c->name);
	int rc = -EAGAIN;
	if (!t)
		return ws_fail(WS_ENOTFOUND, "tenant %s: not registered (removed meanwhile)", c->name);
	WS_ASSERT(hub);
	c->hy->db_path = t->db_path;
	for (int attempt = 0; attempt < 3 && rc == -EAGAIN; attempt++) {
		if (attempt > 0)
			(void)ws_eng_tail_one(sh, NULL, t, TAIL_FLUSH);
		bool had = t->tap != NULL;
		rc = ws_ev_hydrate(hub, sh->id, &t->tap, t->ev_id, &t->ev_chain, t->ev_chain_salt, c->hy);
		if (rc == 0 && !had)
			t->tap_epoch++;
	}
	c->tap_epoch = t->tap_epoch;
	return rc;
}

static int do_unsubscribe(struct shard *sh, struct cmd *c)
{
	struct tenant *t = own_tenant(sh, c->name);
	/* A tap that a fault ended, or a tenant removed: nothing to count down. */
	if (t && t->tap && t->tap_epoch == c->tap_epoch)
		ws_ev_tap_release(&t->tap);
	return 0;
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
			ws_eng_cmd_finish(sh, c, ws_fail(-ESHUTDOWN, "shard %u: engine stopped", sh->id));
			continue;
		}
		c->ran = true;
		/* A command's tails run here, one after another, as with one
		 * tail in flight: the lanes' tails end first. */
		ws_eng_lanes_quiesce(sh);
		switch (c->kind) {
		case CMD_ADD: ws_eng_cmd_finish(sh, c, do_add(sh, c->t)); break;
		case CMD_REMOVE: ws_eng_cmd_finish(sh, c, do_remove(sh, c->t)); break;
		case CMD_FLUSH: ws_eng_cmd_finish(sh, c, tail_all(sh, TAIL_FLUSH)); break;
		case CMD_SUBSCRIBE: ws_eng_cmd_finish(sh, c, do_subscribe(sh, c)); break;
		case CMD_UNSUBSCRIBE: ws_eng_cmd_finish(sh, c, do_unsubscribe(sh, c)); break;
		case CMD_STOP: {
			int rc;
			/* Refuse new commands before the drain, not after it. */
			pthread_mutex_lock(&sh->mu);
			sh->stopped = true;
			pthread_mutex_unlock(&sh->mu);
			rc = tail_all(sh, TAIL_DRAIN);
			ws_eng_cmd_finish(sh, c, rc);
			stop = true;
			break;
		}
		}
	}
}

/*
 * A tenant a query follows, its WAL written: with tails in flight, read its
 * new commits now (ws_stream_read_ahead) if its last tail settled, so its
 * events do not wait for that tail's manifest and watermark writes, nor
 * for a lane (docs/EVENTS.md "Latency"); its next tail ships them. A read
 * that fails costs only that wait: the tail reads them itself.
 */
static void read_ahead(struct shard *sh, struct tenant *t)
{
	bool under_way = false;
	t->ahead_at_ms = 0;
	if (!t->tap || !t->st || !t->open || !ws_eng_lanes_on(sh) || sh->cfg.read_ahead_off)
		return;
	int rc = ws_stream_read_ahead(t->st, t->tap, &under_way);
	/* A commit under way: look again in 1, 2, 4 .. batch_age_ms_max ms, as a tail does. */
	if (under_way && rc <= 0) {
		uint32_t cap = sh->cfg.batch_age_ms_max ? sh->cfg.batch_age_ms_max : 1;
		t->ahead_wait_ms = t->ahead_wait_ms ? t->ahead_wait_ms * 2 : 1;
		if (t->ahead_wait_ms > cap)
			t->ahead_wait_ms = cap;
		t->ahead_at_ms = ws_mono_ms() + t->ahead_wait_ms;
	} else if (under_way) {
		t->ahead_wait_ms = 0;
		t->ahead_at_ms = ws_mono_ms() + 1;
	} else {
		t->ahead_wait_ms = 0;
	}
	if (rc < 0)
		ws_warn("tenant %s: reading its commits ahead of its next tail failed (%s); that tail reads them",
			t->name, ws_strerror(rc));
	else if (rc > 0)
		add(&t->read_ahead, (uint64_t)rc);
	/* A tail in flight ends a faulted tap itself (ws_eng_tail_one). */
	if (t->tap->faulted && !t->in_flight) {
		free(t->tap);
		t->tap = NULL;
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
					ws_eng_mark_due(sh->tenants[i], ws_eng_key_due(sh, sh->tenants[i], now));
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
				WS_ASSERT(ne->t->shard == sh->id);
				/* A tenant a query follows is read at once: its events
				 * come from the tail's reads (docs/EVENTS.md "Latency").
				 * So is one with nothing open (idle since it was
				 * registered, or parked over the open-file budget): its
				 * tail takes the read mark that keeps the WAL from
				 * restarting under frames not yet shipped, which would
				 * cost a re-base. */
				const bool at_once = ne->t->tap || !ne->t->open; /* the shard's own record */
				ws_eng_mark_due(ne->t, at_once ? now : ws_eng_due_after_change(sh, ne->t, now));
				if (ne->wal) {
					/* A write: its commit's wait starts over at 1 ms. */
					ne->t->ahead_wait_ms = 0;
					read_ahead(sh, ne->t);
				}
			}
		}
	}
}

/* One tail in flight: every due tenant's tail on this thread, in turn. */
static void tail_due_here(struct shard *sh, uint64_t *now, uint64_t *events_ms)
{
	for (size_t i = 0; i < sh->n; i++) {
		struct tenant *t = sh->tenants[i];
		if (!t->dirty || t->due_ms > *now)
			continue;
		(void)ws_eng_tail_one(sh, NULL, t, TAIL_DUE);
		/* A change made while this tail ran is seen when it ends, not
		 * after every other due tenant's tail: its gather time counts
		 * from here, and a busy shard does not idle for a
		 * batch_age_ms_max after each round. */
		read_events(sh);
		*events_ms = *now = ws_mono_ms();
	}
}

/* Which of two due tenants goes to a lane first: one a query follows (its
 * events wait for the tail), then the longest due. */
static bool goes_before(const struct tenant *a, const struct tenant *b)
{
	if (!b || (a->tap != NULL) != (b->tap != NULL))
		return !b || a->tap != NULL;
	return a->due_ms < b->due_ms;
}

/*
 * Tails in flight: each due tenant not in flight goes to an idle lane (in
 * goes_before's order), so a shard with more due tenants than lanes serves
 * them in the order they became due. The rest wait for a lane's end.
 */
static void hand_out_due(struct shard *sh, uint64_t now)
{
	while (ws_eng_lane_idle(sh)) {
		struct tenant *first = NULL;
		for (size_t i = 0; i < sh->n; i++) {
			struct tenant *t = sh->tenants[i];
			if (t->dirty && !t->in_flight && t->due_ms <= now && goes_before(t, first))
				first = t;
		}
		if (!first || !ws_eng_lane_take(sh, first))
			return;
	}
}

/*
 * The markers the channels ask of this shard's tenants (docs/EVENTS.md
 * "Markers"): each channel slot holds at most one tenant id per shard. A
 * tenant no longer followed (its tap gone) is not answered; the channel
 * asks again when its queries change.
 */
static void take_mark_requests(struct shard *sh, struct ws_ev_hub *hub)
{
	for (unsigned i = 0; i < WS_EV_SLOTS; i++) {
		struct ws_ev_slot *s = &hub->slots[i];
		/* Read before taking: the loop runs at every wake-up, and most
		 * rounds nothing is asked (an exchange would write the line each time). */
		if (!__atomic_load_n(&s->live, __ATOMIC_ACQUIRE) ||
		    !__atomic_load_n(&s->mark_req[sh->id], __ATOMIC_RELAXED))
			continue;
		uint64_t id = __atomic_exchange_n(&s->mark_req[sh->id], 0, __ATOMIC_ACQ_REL);
		for (size_t k = 0; id && k < sh->n; k++) {
			if (sh->tenants[k]->ev_id == id) {
				if (sh->tenants[k]->tap)
					ws_ev_tap_want_mark(sh->tenants[k]->tap,
							    __atomic_load_n(&s->marker_ms, __ATOMIC_RELAXED));
				break;
			}
		}
	}
}

/* poll(2) with the read lock let go: the lanes read and ship while the shard waits. */
static int poll_unlocked(struct shard *sh, struct pollfd *pfd, int timeout)
{
	int prc, err;
	pthread_mutex_unlock(&sh->read_mu);
	prc = ws_engine_poll_hook ? ws_engine_poll_hook() : 0;
	if (prc)
		errno = -prc;
	else
		prc = poll(pfd, 2, timeout);
	err = errno;
	pthread_mutex_lock(&sh->read_mu);
	errno = err;
	return prc;
}

void *ws_eng_shard_main(void *arg)
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
	pthread_mutex_lock(&sh->read_mu);
	while (!stop) {
		struct pollfd pfd[2] = { { sh->ifd, POLLIN, 0 }, { sh->evfd, POLLIN, 0 } };
		uint64_t now = ws_mono_ms(), next = UINT64_MAX;
		int timeout;

		stop = run_commands(sh);
		if (stop)
			break;
		if (ws_eng_lanes_on(sh)) {
			for (size_t i = 0; i < sh->n; i++)
				if (sh->tenants[i]->ahead_at_ms && sh->tenants[i]->ahead_at_ms <= now)
					read_ahead(sh, sh->tenants[i]);
			hand_out_due(sh, now);
		} else
			tail_due_here(sh, &now, &events_ms);
		/* When the next tail is due, over every tenant: the events read
		 * after a tail may have made one due that this pass went by. A
		 * tenant in flight, or due while every lane is busy, waits for a
		 * lane's end, which wakes the shard (evfd). */
		const bool lane_free = !ws_eng_lanes_on(sh) || ws_eng_lane_idle(sh);
		struct ws_ev_hub *hub = __atomic_load_n(&sh->e->hub, __ATOMIC_ACQUIRE);
		if (hub)
			take_mark_requests(sh, hub);
		for (size_t i = 0; i < sh->n; i++) {
			/* A marker asked of a tenant whose tail is not in flight (a
			 * lane's end wakes the shard): due now, or when. */
			if (sh->tenants[i]->tap && !sh->tenants[i]->in_flight) {
				uint64_t at = ws_ev_tap_mark(sh->tenants[i]->tap, now);
				if (at < next)
					next = at;
			}
			if (sh->tenants[i]->dirty && !sh->tenants[i]->in_flight && lane_free &&
			    sh->tenants[i]->due_ms < next)
				next = sh->tenants[i]->due_ms;
			if (sh->tenants[i]->ahead_at_ms && sh->tenants[i]->ahead_at_ms < next)
				next = sh->tenants[i]->ahead_at_ms;
			/* A tenant that cannot ship is warned about on time, even
			 * while its retry waits longer than stall_warn_ms. */
			uint64_t warn_at = ws_eng_stall_check(sh, sh->tenants[i], now);
			if (warn_at < next)
				next = warn_at;
		}
		/* The event channel: every channel's deadline, on time while
		 * nothing else wakes the shard. */
		bool tapped = false;
		if (hub) {
			uint64_t at = ws_ev_flush(hub, sh->id);
			if (at < next)
				next = at;
			for (size_t i = 0; i < sh->n && !tapped; i++)
				tapped = sh->tenants[i]->tap != NULL;
		}
		/* Events read moments ago: let the next ones gather (the fd
		 * leaves the poll set until the gap is over). A first event after
		 * a quiet spell is read at once; none gather while a query
		 * follows a tenant of the shard. */
		if (events_gap && !tapped && now < events_ms + events_gap) {
			pfd[0].fd = -1;
			if (events_ms + events_gap < next)
				next = events_ms + events_gap;
		}
		if (next == UINT64_MAX)
			timeout = -1;
		else
			timeout = next <= now ? 0 : (int)(next - now > INT_MAX ? INT_MAX : next - now);
		int prc = poll_unlocked(sh, pfd, timeout);
		if (prc < 0 && errno != EINTR) {
			/* (ENOMEM: the kernel's, for a moment.) The shard goes on:
			 * leaving its loop would leave every later command, the
			 * engine's stop included, waiting for ever. */
			if (!poll_failing)
				ws_error("shard %u: poll: %s; retrying every 10 ms", sh->id, strerror(errno));
			poll_failing = true;
			pthread_mutex_unlock(&sh->read_mu);
			ws_sleep_ms(10);
			pthread_mutex_lock(&sh->read_mu);
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
	/* The worker ends: every query on it is told (worker_lost). */
	struct ws_ev_hub *hub = __atomic_load_n(&sh->e->hub, __ATOMIC_ACQUIRE);
	for (size_t i = 0; i < sh->n; i++) {
		free(sh->tenants[i]->tap);
		sh->tenants[i]->tap = NULL;
	}
	if (hub)
		ws_ev_worker_lost(hub, sh->id);
	pthread_mutex_unlock(&sh->read_mu);
	return NULL;
}

