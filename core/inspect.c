/* ls and verify: read-only views of a sink. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core_internal.h"
#include "replay.h"
#include "ws_fault.h"
#include "ws_logging.h"

/* Calls fn per tenant name in order: one LIST per top-level name
 * (ws_store_next_top), so a name of any length, or one that is no
 * tenant's, is stepped over rather than listed again. */
typedef int (*name_fn)(const char *tenant, void *arg);

static int for_each_tenant(struct ws_store *s, name_fn fn, void *arg)
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
static int read_err(int rc)
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
			x->first_err = read_err(rc);
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
				x->first_err = read_err(rc);
			break;
		}
		info.objects += page.count;
		for (size_t i = 0; i < page.count; i++)
			info.bytes += page.sizes ? page.sizes[i] : 0;
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
		rc = for_each_tenant(sink->store, ls_one, &x);
	}
	return read_err(rc ? rc : x.first_err);
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

static int verify_tenant(const char *tenant, struct verify_ctx *x)
{
	struct ws_fmt_watermark wm;
	struct ws_chain c;
	struct ws_replay_result res;
	struct ws_restore_base base;
	bool from_cut = false;
	int rc;

	rc = ws_wm_load(x->s, tenant, &wm, NULL);
	if (rc == WS_ENOTFOUND && !x->explicit_tenant) {
		/* Objects without a watermark: what a crash before the first
		 * watermark leaves. Nothing was acknowledged, nothing to verify. */
		ws_info("verify: tenant %s has objects but no watermark yet (nothing acknowledged)", tenant);
		return 0;
	}
	if (rc == WS_ENOTFOUND)
		ws_fail(rc, "tenant %s has no watermark: nothing was shipped", tenant);
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
		int arc;
		/* From the cut on (its own objects included, still stored), as
		 * for a full chain. */
		rc = ws_replay(x->s, tenant, &c, c.count - 1, c.m[c.count - 1].last_frame, -1, &res, &rep);
		ws_chain_free(&c);
		/* (An error that is no object's problem is reported below, alone.) */
		if (from_cut && base.checkpoint_id != x->verified_id && (!rc || rep.problems) &&
		    (arc = ws_artifact_verify(x->s, &base)) != 0) {
			if (!rc)
				rc = arc;
			rep.problems++;
			if (x->fn)
				x->fn(tenant, base.artifact_key, arc, ws_errmsg(), x->arg);
		}
		if (rep.problems) {
			/* Each already reported. */
			if (!x->first_err)
				x->first_err = rc;
			return 0;
		}
	}
	if (rc) {
		if (x->fn)
			x->fn(tenant, NULL, rc, ws_errmsg(), x->arg);
		if (!x->first_err)
			x->first_err = rc;
	}
	return 0; /* keep going: report every tenant */
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
		rc = for_each_tenant(sink->store, verify_one, &x);
		if (rc)
			return read_err(rc);
	}
	return read_err(x.first_err);
}
