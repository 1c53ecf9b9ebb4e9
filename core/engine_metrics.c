/* The engine's metrics: per tenant and shard, as structs and as Prometheus text. */
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

/* ---- metrics ------------------------------------------------------------- */

static void tenant_metrics(const struct ws_engine *e, const struct tenant *t, struct ws_tenant_metrics *m)
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
	m->frames_read_ahead = ld(&t->read_ahead);
	m->last_frame = ld(&t->last_frame);
	m->last_outcome = (enum ws_outcome_kind)__atomic_load_n(&t->last_outcome, __ATOMIC_RELAXED);
	m->fenced = __atomic_load_n(&t->fenced, __ATOMIC_RELAXED) != 0;
	m->deferrals = ld(&t->deferrals);
	int64_t ack = __atomic_load_n(&t->ack_mono_ms, __ATOMIC_RELAXED);
	if (!ack)
		ack = t->added_mono_ms;
	m->since_ack_ms = now > ack ? (uint64_t)(now - ack) : 0;
	m->stalled = __atomic_load_n(&t->stalled, __ATOMIC_RELAXED) != 0;
	/* Until its final tail has shipped everything, from the stop on. */
	m->undrained = __atomic_load_n(&e->stopping, __ATOMIC_RELAXED) && !__atomic_load_n(&t->drained, __ATOMIC_RELAXED);
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
	m->tails_key_waited = ld(&sh->key_waits);
	return 0;
}

int ws_engine_tenant_metrics(struct ws_engine *e, const char *name, struct ws_tenant_metrics *out)
{
	struct tenant *t;
	pthread_mutex_lock(&e->reg_mu);
	t = name ? ws_eng_reg_find(e, name) : NULL;
	if (t)
		tenant_metrics(e, t, out);
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
		tenant_metrics(e, e->reg[i], &m);
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
	if (f->off == SIZE_MAX - 2) {
		emit(t, "%s{tenant=\"%s\",shard=\"%u\"} %" PRIu64 ".%03u\n", f->name, m->tenant, m->shard,
		     m->since_ack_ms / 1000, (unsigned)(m->since_ack_ms % 1000));
		return 0;
	}
	if (f->off == SIZE_MAX)
		v = m->fenced;
	else if (f->off == SIZE_MAX - 3)
		v = m->stalled;
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
		{ "walship_tenant_deferrals_total", "counter", "Tails a throttling store refused, deferred to its "
		  "Retry-After.", offsetof(struct ws_tenant_metrics, deferrals) },
		{ "walship_tenant_last_ack_age_seconds", "gauge", "Time since the last acknowledged tail (or the add).",
		  SIZE_MAX - 2 },
		{ "walship_tenant_stalled", "gauge", "1 while nothing shipped for stall_warn_ms (warned).", SIZE_MAX - 3 },
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
		{ "walship_shard_tails_key_waited_total", "counter", "Tails whose watermark write waited for "
		  "key_write_interval_ms, the rest of the tail done.", offsetof(struct ws_shard_metrics, tails_key_waited) },
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

