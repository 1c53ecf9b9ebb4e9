/* ls and verify: read-only views of a sink. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chain.h"
#include "chain_cut.h"
#include "ckpt_read.h"
#include "history.h"
#include "inspect.h"
#include "outcome.h"
#include "restore.h"
#include "sink.h"
#include "slots.h"
#include "ws_ckpt.h"
#include "ws_fault.h"
#include "ws_logging.h"

/* Calls fn per tenant name in order: one LIST per top-level name
 * (ws_store_next_top), so a name of any length, or one that is no
 * tenant's, is stepped over rather than listed again. */
typedef int (*ws_tenant_name_fn)(const char *tenant, void *arg);

int ws_tenants_each(struct ws_store *s, ws_tenant_name_fn fn, void *arg)
{
	char name[WS_KEY_MAX] = "", next[WS_KEY_MAX];
	int rc;
	for (;;) {
		rc = ws_store_next_top(s, name, next);
		if (rc)
			return ws_fail_wrap(rc, "list %s", s->url);
		if (!next[0])
			return 0;
		memcpy(name, next, sizeof(name));
		if (!ws_tenant_name_valid(name)) {
			if (strcmp(name, "checkpoints") != 0)
				ws_info("%s: skipping \"%.40s%s\" (%zu bytes): not a tenant name", s->url, name,
					strlen(name) > 40 ? "..." : "", strlen(name));
			continue;
		}
		rc = fn(name, arg);
		if (rc)
			return rc;
	}
}

struct ls_ctx {
	struct ws_store *s;
	ws_tenant_fn fn;
	void *arg;
	int first_err;   /* of a tenant that could not be read; the walk goes on */
};

/* What reading a sink finds is the sink's problem, never a configuration
 * error: exit status 2 means the arguments or config were wrong. */
int ws_read_err(int rc)
{
	return rc == WS_ECONFIG ? WS_EFORMAT : rc;
}

static int ls_one(const char *tenant, void *arg)
{
	struct ls_ctx *x = arg;
	struct ws_tenant_info info;
	struct ws_fmt_watermark wm;
	char token[WS_KEY_MAX] = "";
	char prefix[WS_KEY_MAX];
	char err[1024];
	int rc;

	memset(&info, 0, sizeof(info));
	snprintf(info.tenant, sizeof(info.tenant), "%s", tenant);
	rc = ws_wm_load(x->s, tenant, &wm, NULL);
	if (rc && rc != WS_ENOTFOUND) {
		/* Reported with the tenant, and the other tenants still listed. */
		snprintf(err, sizeof(err), "%s", ws_errmsg());
		info.error = err;
		if (!x->first_err)
			x->first_err = ws_read_err(rc);
	}
	if (rc == 0) {
		info.has_watermark = true;
		ws_wm_to_public(&wm, &info.watermark);
		info.page_size = wm.gen.page_size;
	}
	snprintf(prefix, sizeof(prefix), "%s/", tenant);
	for (;;) {
		struct ws_list_page page;
		memset(&page, 0, sizeof(page));
		rc = ws_store_list(x->s, prefix, token, WS_LIST_PAGE_MAX, &page);
		if (rc) {
			ws_fail_wrap(rc, "list %s", prefix);
			snprintf(err, sizeof(err), "%s", ws_errmsg());
			info.error = err;
			if (!x->first_err)
				x->first_err = ws_read_err(rc);
			break;
		}
		info.objects += page.count;
		rc = ws_list_page_add_bytes(x->s, &page, &info.bytes);
		if (rc) {
			/* A size no store holds, or a sum that would wrap: never a wrong count. */
			snprintf(err, sizeof(err), "%s", ws_errmsg());
			info.error = err;
			if (!x->first_err)
				x->first_err = rc;
			ws_list_page_free(&page);
			break;
		}
		bool more = page.truncated;
		if (more)
			snprintf(token, sizeof(token), "%s", page.next_token);
		ws_list_page_free(&page);
		if (!more)
			break;
	}
	return x->fn(&info, x->arg);
}

int ws_list_tenants(struct ws_sink *sink, const char *tenant, ws_tenant_fn fn, void *arg)
{
	struct ls_ctx x = { sink->store, fn, arg, 0 };
	int rc;
	if (tenant) {
		if (!ws_tenant_name_valid(tenant))
			return ws_fail(WS_ECONFIG, "tenant name '%s' is invalid", tenant);
		rc = ls_one(tenant, &x);
	} else {
		rc = ws_tenants_each(sink->store, ls_one, &x);
	}
	return ws_read_err(rc ? rc : x.first_err);
}

struct verify_ctx {
	struct ws_sink *sink;
	struct ws_store *s;
	ws_problem_fn fn;
	void *arg;
	int first_err;
	bool explicit_tenant;
	uint64_t verified_id;   /* the Commit whose artifacts ws_checkpoint_verify checked */
};

/*
 * The highest watermark sequence any of tenant's manifests was written for
 * (0: no manifest), and that manifest's key. A manifest is written for the
 * sequence after the watermark its tail read, so one above 1 proves that a
 * watermark was written (acknowledged) before it.
 */
struct seq_max {
	uint64_t max;
	char *key;
};

static int seq_max_key(const char *key, uint64_t seq, void *arg)
{
	struct seq_max *m = arg;
	if (seq > m->max) {
		m->max = seq;
		snprintf(m->key, WS_KEY_MAX, "%s", key);
	}
	return 0;
}

static int manifest_seq_max(struct ws_store *s, const char *tenant, uint64_t *max, char key[WS_KEY_MAX])
{
	char prefix[WS_KEY_MAX];
	struct seq_max m = { 0, key };
	int rc;

	key[0] = '\0';
	snprintf(prefix, WS_KEY_MAX, "%s/", tenant);
	rc = ws_manifests_each(s, prefix, seq_max_key, &m);
	*max = m.max;
	return rc ? ws_fail_wrap(rc, "tenant %s", tenant) : 0;
}

/* One problem of tenant's (key may be NULL), err's message the last failed
 * call's; verification goes on with the next tenant (returns 0). */
static int tenant_problem(struct verify_ctx *x, const char *tenant, const char *key, int err)
{
	if (x->fn)
		x->fn(tenant, key, err, ws_errmsg(), x->arg);
	if (!x->first_err)
		x->first_err = err;
	return 0;
}

/*
 * The chains before live (each behind the re-base that links to it), each
 * built to its last state as restore --time builds it: every object and
 * link checked, problems reported through rep. A link to history retention
 * removed ends the walk; one to history missing for another reason, or
 * damaged, is a problem (reported; *rc its error when none was).
 */
static void verify_older(struct verify_ctx *x, const char *tenant, const struct ws_chain *live,
			 struct ws_replay_report *rep, int *rc)
{
	struct ws_hist_chain h, prev;
	enum ws_hist_end end;
	const struct ws_chain *c = live;
	unsigned problems = rep->problems;
	int prc;

	memset(&h, 0, sizeof(h));
	for (;;) {
		prc = ws_hist_prev(x->sink, tenant, c, true, NULL, &prev, &end);
		if (prc) {
			ws_replay_keep_going(rep, tenant, c->m[0].prev_key, prc);
			break;
		}
		if (end != WS_HIST_MORE)
			break;
		ws_hist_chain_free(&h);
		h = prev;
		c = &h.c;
		prc = ws_replay_verify(x->s, tenant, c, h.from_cut ? &h.base : NULL,
				       h.from_cut && h.base.checkpoint_id == x->verified_id, rep);
		if (prc && rep->problems == problems) {
			/* No object's problem: reported alone, the walk ends. */
			ws_replay_keep_going(rep, tenant, NULL, prc);
			break;
		}
		problems = rep->problems;
		if (h.from_cut)
			break; /* the chain starts at a cut: nothing before it is linked */
	}
	ws_hist_chain_free(&h);
	if (rep->problems && !*rc)
		*rc = rep->first_err;
}

static int verify_tenant_kept(const char *tenant, struct verify_ctx *x, struct ws_head *hd)
{
	struct ws_fmt_watermark wm;
	struct ws_chain c;
	struct ws_restore_base base;
	bool from_cut = false;
	int rc;

	/* The head as restore-latest finds it (with manifest slots: probed
	 * from the watermark's hint, and checked for a hole). */
	rc = ws_head_load(x->s, tenant, WS_HEAD_HOLES, hd);
	if (rc == WS_ENOTFOUND && !x->explicit_tenant) {
		/* Objects without a watermark: what a crash before the first
		 * watermark leaves (its manifests are all written for sequence
		 * 1). Nothing was acknowledged, nothing to verify. A manifest
		 * written for a later sequence shows a watermark was: it is
		 * gone, and restore refuses the tenant. */
		uint64_t max;
		char mkey[WS_KEY_MAX], wkey[WS_KEY_MAX];
		rc = manifest_seq_max(x->s, tenant, &max, mkey);
		if (rc == 0 && max < 2) {
			ws_info("verify: tenant %s has objects but no watermark yet (nothing acknowledged)", tenant);
			return 0;
		}
		/* Or its first watermark was written while we listed: then it
		 * is verified as any other. */
		if (rc == 0 && (ws_head_free(hd), rc = ws_head_load(x->s, tenant, WS_HEAD_HOLES, hd)) == WS_ENOTFOUND &&
		    ws_key_watermark(wkey, sizeof(wkey), tenant) == 0) {
			return tenant_problem(x, tenant, wkey,
					      ws_fail(WS_EINCOMPLETE, "tenant %s: watermark %s is missing, but "
						      "manifest %s was written after watermark %" PRIu64 ": shipped "
						      "state was acknowledged, and restore refuses the tenant", tenant,
						      wkey, mkey, max - 1));
		}
	}
	if (rc == WS_ENOTFOUND)
		ws_fail(rc, "tenant %s has no watermark: nothing was shipped", tenant);
	wm = hd->head;
	if (rc == 0 && wm.seq == 0) {
		/* A lane opened, no slot in it yet: nothing acknowledged. */
		ws_info("verify: tenant %s: its watermark opens lane %016" PRIx64 ", which holds no manifest slot "
			"yet (nothing acknowledged)", tenant, hd->wm.lane);
		return 0;
	}
	if (rc == 0 && ws_head_slots(hd)) {
		/* What restore-latest refuses: a head behind the latest cut. */
		struct ws_restore_base cb;
		if (ws_checkpoint_base_for(x->sink, tenant, &cb) == 0 && (rc = ws_head_behind_cut(tenant, hd, &cb)) != 0)
			return tenant_problem(x, tenant, hd->head.manifest_key, rc);
	}
	if (rc == 0 && !ws_head_slots(hd)) {
		/* A watermark that went back: restore of the latest state
		 * refuses it (there, only the watermark's own directory is
		 * searched; here every generation). */
		char ev[WS_KEY_MAX], wkey[WS_KEY_MAX];
		int back = ws_wm_went_back(x->s, tenant, &wm, true, ev);
		if (back < 0)
			rc = back;
		else if (back && ws_key_watermark(wkey, sizeof(wkey), tenant) == 0) {
			return tenant_problem(x, tenant, wkey,
					      ws_fail(WS_EINCOMPLETE, "tenant %s: watermark %s (sequence %" PRIu64
						      ") went back: manifest %s was written after watermark %" PRIu64
						      " on top of it; the store lost acknowledged writes", tenant, wkey,
						      wm.seq, ev, wm.seq + 1));
		}
	}
	if (rc == 0)
		rc = ws_chain_load_flags(x->s, tenant, &wm, WS_CHAIN_UPTO_MISSING, &c);
	if (rc == 0 && (rc = WS_FAULT("verify.after_chain_load")) != 0)
		ws_chain_free(&c);
	if (rc == 0 && ws_chain_truncated(&c)) {
		/* A missing link: complete anyway when retention removed the
		 * history before the latest Commit's cut, the cut's state being
		 * that checkpoint's artifact (verified below). */
		rc = ws_chain_from_cut_retained(x->sink, tenant, &wm, &c, &base);
		from_cut = rc == 0;
		if (rc)
			ws_chain_free(&c);
	}
	if (rc == 0) {
		struct ws_replay_report rep = { x->fn, x->arg, 0, 0 };
		/* The latest state, built as restore builds it (from the cut's
		 * artifact when the history before it is gone). An error that is
		 * no object's problem is reported below, alone. */
		rc = ws_replay_verify(x->s, tenant, &c, from_cut ? &base : NULL,
				      from_cut && base.checkpoint_id == x->verified_id, &rep);
		/* Then every chain before it that restore --time reaches. */
		if (!from_cut && (rc == 0 || rep.problems))
			verify_older(x, tenant, &c, &rep, &rc);
		ws_chain_free(&c);
		if (rep.problems) {
			/* Each already reported. */
			if (!x->first_err)
				x->first_err = rc;
			return 0;
		}
	}
	if (rc)
		tenant_problem(x, tenant, NULL, rc);
	return 0; /* keep going: report every tenant */
}

/* The watermark's bytes are kept while its chain is verified: a manifest it
 * carries is stored nowhere else. */
static int verify_tenant(const char *tenant, struct verify_ctx *x)
{
	struct ws_head hd;
	int rc = verify_tenant_kept(tenant, x, &hd);
	ws_head_free(&hd);
	return rc;
}

/* Problems of one tenant, held back until its verification is final. */
struct problems {
	struct problem {
		char *key;
		int err;
		char *detail;
	} *p;
	size_t count;
	bool missing;            /* an object was not there */
};

static void collect(const char *tenant, const char *key, int err, const char *detail, void *arg)
{
	struct problems *pb = arg;
	struct problem *np = realloc(pb->p, (pb->count + 1) * sizeof(*pb->p));
	(void)tenant;
	if (err == WS_ENOTFOUND || err == WS_EINCOMPLETE)
		pb->missing = true;
	if (!np)
		return;
	pb->p = np;
	np[pb->count].key = key ? strdup(key) : NULL;
	np[pb->count].err = err;
	np[pb->count].detail = strdup(detail ? detail : "");
	pb->count++;
}

static void problems_free(struct problems *pb)
{
	for (size_t i = 0; i < pb->count; i++) {
		free(pb->p[i].key);
		free(pb->p[i].detail);
	}
	free(pb->p);
	memset(pb, 0, sizeof(*pb));
}

/*
 * A reader must never report corruption because a writer is busy: a
 * retention run may delete the history before a newer checkpoint's cut
 * between our reading the chain and our reading its objects. An object
 * found missing makes the tenant's check run again from a fresh watermark
 * and chain (which then start at that cut); only what is still missing
 * then is reported. A truly missing object is missing every time.
 */
#define VERIFY_ATTEMPTS 3

static int verify_one(const char *tenant, void *arg)
{
	struct verify_ctx *x = arg;
	ws_problem_fn fn = x->fn;
	void *farg = x->arg;
	int first = x->first_err, rc = 0;
	struct problems pb;

	memset(&pb, 0, sizeof(pb));
	for (unsigned attempt = 1;; attempt++) {
		problems_free(&pb);
		x->fn = collect;
		x->arg = &pb;
		x->first_err = 0;
		verify_tenant(tenant, x);
		rc = x->first_err;
		if (!pb.count || !pb.missing || attempt == VERIFY_ATTEMPTS)
			break;
		ws_info("verify: tenant %s: an object went missing while checked (a retention run?); checking "
			"again from a fresh watermark", tenant);
	}
	x->fn = fn;
	x->arg = farg;
	x->first_err = first ? first : rc;
	for (size_t i = 0; fn && i < pb.count; i++)
		fn(tenant, pb.p[i].key, pb.p[i].err, pb.p[i].detail, farg);
	problems_free(&pb);
	return 0;
}

int ws_verify(struct ws_sink *sink, const char *tenant, ws_problem_fn fn, void *arg)
{
	struct verify_ctx x = { sink, sink->store, fn, arg, 0, tenant != NULL, 0 };
	int rc;
	if (tenant && !ws_tenant_name_valid(tenant))
		return ws_fail(WS_ECONFIG, "tenant name '%s' is invalid", tenant);
	/* Checkpoints first: the latest Commit's artifacts, and the tenants it
	 * names that lost their watermark (which the listing below would
	 * take for objects without one). */
	x.first_err = ws_checkpoint_verify(sink, tenant, fn, arg, &x.verified_id);
	if (tenant) {
		if (!ws_tenant_name_valid(tenant))
			return ws_fail(WS_ECONFIG, "tenant name '%s' is invalid", tenant);
		verify_one(tenant, &x);
	} else {
		rc = ws_tenants_each(sink->store, verify_one, &x);
		if (rc)
			return ws_read_err(rc);
	}
	return ws_read_err(x.first_err);
}
