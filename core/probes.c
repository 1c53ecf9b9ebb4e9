/*
 * Conditional-write probes a killed process left behind (docs/CHECKPOINTS.md
 * "Orphans"): the checkpoint store's shared open writes
 * checkpoints/probe/<32 hex>, the S3 backend's open _walship/probe-<16 hex>,
 * each deleted at once after its few requests. A process killed between the
 * create and the delete leaves one for good, and `verify --fail-on-orphans`
 * fails on it. Checkpoints and retention remove those older than
 * WS_PROBE_STALE_MS by their store's last-modified time, so a live
 * process's probe is never touched.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "probes.h"
#include "ws_assert.h"
#include "ws_ckpt.h"
#include "ws_logging.h"

#define CKPT_PROBE_PREFIX WS_CKPT_PREFIX "/probe/"
#define S3_PROBE_PREFIX "_walship/probe-"

static bool hex_run(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return s[n] == '\0';
}

bool ws_probe_key(const char *key)
{
	if (strncmp(key, CKPT_PROBE_PREFIX, sizeof(CKPT_PROBE_PREFIX) - 1) == 0)
		return hex_run(key + sizeof(CKPT_PROBE_PREFIX) - 1, 32);
	if (strncmp(key, S3_PROBE_PREFIX, sizeof(S3_PROBE_PREFIX) - 1) == 0)
		return hex_run(key + sizeof(S3_PROBE_PREFIX) - 1, 16);
	return false;
}

struct sweep {
	struct ws_store *s;
	int64_t now_ms;
	uint64_t stale_ms;
	bool dry_run;
	void (*fn)(const char *key, void *arg);
	void *arg;
	uint64_t removed, fresh;
};

static int sweep_one(struct sweep *w, const char *key)
{
	struct ws_obj_info info;
	int rc;

	if (!ws_probe_key(key))
		return 0; /* not a probe of ours: verify --orphans lists it as foreign */
	memset(&info, 0, sizeof(info));
	rc = ws_store_head(w->s, key, &info);
	if (rc == WS_ENOTFOUND)
		return 0; /* its writer deleted it meanwhile */
	if (rc)
		return ws_fail_wrap(rc, "stale probes: HEAD %s", key);
	/* A time ahead of ours (clock skew) is fresh. */
	if (info.mtime_ms > w->now_ms || (uint64_t)(w->now_ms - info.mtime_ms) < w->stale_ms) {
		w->fresh++;
		return 0;
	}
	if (!w->dry_run) {
		if ((rc = ws_store_del(w->s, key)) != 0)
			return ws_fail_wrap(rc, "stale probes: delete %s", key);
		ws_info("removed %s, a conditional-write probe left %" PRId64 " s ago by a process that stopped "
			"before deleting it", key, (w->now_ms - info.mtime_ms) / 1000);
	}
	w->removed++;
	if (w->fn)
		w->fn(key, w->arg);
	return 0;
}

static int sweep_prefix(struct sweep *w, const char *prefix)
{
	struct ws_list_page page;
	char token[WS_KEY_MAX] = "";
	int rc = 0;

	memset(&page, 0, sizeof(page));
	do {
		if ((rc = ws_store_list(w->s, prefix, token, WS_LIST_PAGE_MAX, &page)) != 0)
			return ws_fail_wrap(rc, "stale probes: list %s", prefix);
		for (size_t i = 0; i < page.count && rc == 0; i++)
			rc = sweep_one(w, page.keys[i]);
		/* ws_store_list checks each page moves past the token. */
		WS_ASSERT(!page.truncated || page.next_token[0]);
		snprintf(token, sizeof(token), "%s", page.next_token);
		if (!page.truncated)
			token[0] = '\0';
		ws_list_page_free(&page);
	} while (rc == 0 && token[0]);
	return rc;
}

int ws_probes_sweep(struct ws_store *s, int64_t now_ms, uint64_t stale_ms, bool dry_run,
		    void (*fn)(const char *key, void *arg), void *arg, uint64_t *removed, uint64_t *fresh)
{
	struct sweep w = { s, now_ms, stale_ms, dry_run, fn, arg, 0, 0 };
	int rc = sweep_prefix(&w, CKPT_PROBE_PREFIX);

	if (rc == 0)
		rc = sweep_prefix(&w, S3_PROBE_PREFIX);
	if (removed)
		*removed = w.removed;
	if (fresh)
		*fresh = w.fresh;
	return rc;
}
