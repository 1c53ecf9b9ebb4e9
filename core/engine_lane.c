/*
 * Tails in flight (docs/DESIGN.md "Tails in flight"): a shard's lanes, each
 * a thread that runs one due tail at a time. A tail holds the shard's
 * read_mu while it reads the WAL, publishes to the shared pipe and collects
 * its slots; it lets it go while it waits for the store (its fencing read,
 * its manifest and watermark writes: ws_stream_lane), so the next due
 * tenant's tail reads and ships meanwhile. A tenant has at most one tail in
 * flight (tenant.in_flight), so its manifests and watermarks stay in order;
 * each tail reaches the host (on_outcome, metrics) on its lane, under
 * read_mu, once its watermark is durable or it failed.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core_internal.h"
#include "engine_internal.h"
#include "ws_fault.h"
#include "ws_logging.h"
#include "ws_stream.h"

/* The stream's hold (ws_stream_lane): off while its tail waits for the store. */
static void lane_hold(void *arg, bool on)
{
	struct lane *ln = arg;
	if (on) {
		pthread_mutex_lock(&ln->sh->read_mu);
		return;
	}
	pthread_mutex_unlock(&ln->sh->read_mu);
	/* A pause site only: the store request that follows has nothing to
	 * fail here (its own sites do). The shard's other tails go on. */
	(void)WS_FAULT("engine.lane_store_wait");
}

void ws_eng_lane_of(struct shard *sh, struct lane *ln, struct ws_stream_lane *out)
{
	if (ln)
		*out = (struct ws_stream_lane){ &ln->sink, &ln->work, lane_hold, ln };
	else
		*out = (struct ws_stream_lane){ &sh->sink, &sh->work, NULL, NULL };
}

/* read_mu held: the tail ln was given, then ln idle again. */
static void lane_run(struct lane *ln)
{
	struct shard *sh = ln->sh;
	struct tenant *t = ln->t;

	WS_ASSERT(t->in_flight && t->shard == sh->id);
	(void)ws_eng_tail_one(sh, ln, t, TAIL_DUE);
	t->in_flight = false;
	ln->t = NULL;
	WS_ASSERT(sh->lanes_busy > 0);
	sh->lanes_busy--;
	pthread_cond_broadcast(&sh->idle_cv);
	/* Its tenant may be due again, and this lane is free for another. */
	ws_eng_shard_wake(sh);
}

static void *lane_main(void *arg)
{
	struct lane *ln = arg;
	struct shard *sh = ln->sh;
	char name[16];

	snprintf(name, sizeof(name), "ws-lane-%u.%u", sh->id % 1000, ln->id);
	pthread_setname_np(pthread_self(), name);
	pthread_mutex_lock(&sh->read_mu);
	for (;;) {
		while (!ln->t && !sh->lanes_stop)
			pthread_cond_wait(&sh->lane_cv, &sh->read_mu);
		if (!ln->t)
			break;
		lane_run(ln);
	}
	pthread_mutex_unlock(&sh->read_mu);
	return NULL;
}

/* Shard thread, read_mu held: lane ln's store, work and thread, at its first tail. */
static int lane_start(struct shard *sh, struct lane *ln)
{
	int rc;
	ln->sink.store = sh->lane_open(sh, &rc);
	if (!ln->sink.store)
		return rc;
	/* Sealed objects it reads back open with the shard's tenants' keys. */
	ln->sink.store->keys = &sh->sink.ring;
	rc = ws_tail_work_init(&ln->work);
	if (rc)
		return ws_fail(rc, "shard %u: out of memory", sh->id);
	rc = -pthread_create(&ln->thread, NULL, lane_main, ln);
	if (rc)
		return ws_fail(rc, "shard %u: cannot start a thread", sh->id);
	ln->started = true;
	return 0;
}

/* A lane that cannot start is left out for good, and said so once. */
static void lane_unusable(struct shard *sh, struct lane *ln, int rc)
{
	ws_warn("shard %u: tail lane %u cannot start (%s: %s); %u of %u lanes left", sh->id, ln->id, ws_strerror(rc),
		ws_errmsg(), sh->nlanes - sh->lanes_failed - 1, sh->nlanes);
	ws_tail_work_free(&ln->work);
	ws_store_close(ln->sink.store);
	ln->sink.store = NULL;
	ln->failed = true;
	sh->lanes_failed++;
}

int ws_eng_lanes_init(struct shard *sh, struct ws_store *(*open)(struct shard *sh, int *err))
{
	const unsigned n = sh->cfg.tails_in_flight ? sh->cfg.tails_in_flight : TAILS_IN_FLIGHT_DEFAULT;
	if (n <= 1)
		return 0; /* every tail on the shard's thread, as one lane */
	sh->lanes = calloc(n, sizeof(*sh->lanes));
	if (!sh->lanes)
		return -ENOMEM;
	sh->nlanes = n;
	sh->lane_open = open;
	for (unsigned i = 0; i < n; i++) {
		sh->lanes[i].sh = sh;
		sh->lanes[i].id = i;
	}
	return 0;
}

/* An idle lane: a started one, else the next to start (NULL: none). */
static struct lane *idle_lane(struct shard *sh)
{
	for (unsigned i = 0; i < sh->nlanes; i++)
		if (sh->lanes[i].started && !sh->lanes[i].t)
			return &sh->lanes[i];
	for (unsigned i = 0; i < sh->nlanes; i++) {
		struct lane *ln = &sh->lanes[i];
		if (ln->started || ln->failed)
			continue;
		int rc = lane_start(sh, ln);
		if (rc == 0)
			return ln;
		lane_unusable(sh, ln, rc);
	}
	return NULL;
}

bool ws_eng_lane_take(struct shard *sh, struct tenant *t)
{
	struct lane *ln = idle_lane(sh);
	WS_ASSERT(!t->in_flight && t->st);
	if (!ln)
		return false;
	t->in_flight = true;
	ln->t = t;
	sh->lanes_busy++;
	pthread_cond_broadcast(&sh->lane_cv);
	return true;
}

void ws_eng_lanes_quiesce(struct shard *sh)
{
	while (sh->lanes_busy)
		pthread_cond_wait(&sh->idle_cv, &sh->read_mu);
}

void ws_eng_lanes_free(struct shard *sh)
{
	pthread_mutex_lock(&sh->read_mu);
	sh->lanes_stop = true;
	pthread_cond_broadcast(&sh->lane_cv);
	pthread_mutex_unlock(&sh->read_mu);
	for (unsigned i = 0; i < sh->nlanes; i++) {
		struct lane *ln = &sh->lanes[i];
		if (ln->started)
			pthread_join(ln->thread, NULL);
		WS_ASSERT(!ln->t); /* the shard's stop quiesced them */
		ws_tail_work_free(&ln->work);
		ws_store_close(ln->sink.store);
	}
	free(sh->lanes);
	sh->lanes = NULL;
	sh->nlanes = 0;
}
