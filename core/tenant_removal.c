/*
 * Removing a tenant for good (docs/CHECKPOINTS.md "Removing a tenant").
 *
 * A checkpoint's cut names every tenant it finds a watermark for. One that
 * sees fewer tenants than the previous checkpoint named (a listing that came
 * back short, a directory hidden, a watermark deleted by hand) would commit a
 * cut without them: retention then refuses (their only base may be an older
 * checkpoint's artifact), so nothing is lost, but the checkpoint is useless.
 * Such a cut is refused, naming the missing tenants, unless the tenant was
 * removed on purpose: `walship forget --tenant NAME` (ws_tenant_forget)
 * records checkpoints/removed/<tenant> with the latest Commit's ID and
 * deletes the tenant's watermark, so checkpoints stop naming it and the
 * retention after the next checkpoint deletes its objects. A record covers
 * only the tenant as checkpoints up to that ID named it: a tenant of that
 * name shipped again gets a watermark, a later checkpoint names it, and it is
 * a new tenant that no record covers.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chain.h"
#include "ckpt_read.h"
#include "sink.h"
#include "tenant_removal.h"
#include "ws_assert.h"
#include "ws_format.h"
#include "ws_logging.h"

#define MISSING_NAMED_MAX 8u   /* tenants named in the refusal; the rest counted */
#define NAMED_BYTES (MISSING_NAMED_MAX * (2 * 128 + 8))

int ws_removal_check_cut(struct ws_ckpt *c, const struct ws_ckpt_index *prev, const struct ws_ckpt_tenant_entry *cut,
			 size_t n, const char *sink_url)
{
	char names[NAMED_BYTES] = "";
	size_t used = 0, j = 0, missing = 0;
	int rc;

	for (size_t i = 0; i < prev->tenant_count; i++) {
		const char *t = prev->tenants[i].tenant;
		bool found = false;
		uint64_t after = 0;
		int cmp = 1;

		/* Both sorted by name (the index's invariant, cut_read's sort). */
		while (j < n && (cmp = strcmp(cut[j].tenant, t)) < 0)
			j++;
		if (j < n && cmp == 0)
			continue;
		if ((rc = ws_ckpt_removed(c, t, &found, &after)) != 0)
			return ws_fail_wrap(rc, "checkpoint: tenant %s, named by checkpoint %" PRIu64 " and not seen now",
					    t, prev->checkpoint_id);
		if (found && after >= prev->checkpoint_id)
			continue; /* removed for good: the previous checkpoint named it as it was then */
		if (missing++ < MISSING_NAMED_MAX)
			used += (size_t)snprintf(names + used, sizeof(names) - used, "%s%s (%s/" WS_WM_NAME ")",
						 used ? ", " : "", t, t);
		WS_ASSERT(used < sizeof(names));
	}
	if (!missing)
		return 0;
	if (missing > MISSING_NAMED_MAX)
		snprintf(names + used, sizeof(names) - used, " and %zu more", missing - MISSING_NAMED_MAX);
	return ws_fail(WS_EINCOMPLETE, "checkpoint: %zu tenant(s) that checkpoint %" PRIu64 " named are not in this "
		       "cut: %s (the listing of %s did not show them, or their watermark is not there); nothing was "
		       "written. A tenant removed for good: walship forget --sink URL --tenant NAME", missing,
		       prev->checkpoint_id, names, sink_url);
}

/* The tenant's watermark is there (or cannot be told not to be): *present. */
static int wm_present(struct ws_store *s, const char *tenant, bool *present)
{
	char key[WS_KEY_MAX];
	struct ws_obj_info info;
	int rc;

	if ((rc = ws_key_watermark(key, sizeof(key), tenant)) != 0)
		return rc;
	rc = ws_store_head(s, key, &info);
	*present = rc != WS_ENOTFOUND;
	return rc == WS_ENOTFOUND ? 0 : rc;
}

/* Every object under <tenant>/, a page at a time, the watermark read again before each delete. */
static int sweep_tenant(struct ws_store *s, const char *tenant, bool dry_run, void (*fn)(const char *, void *),
			void *arg, uint64_t *deleted)
{
	char prefix[WS_KEY_MAX], token[WS_KEY_MAX] = "";
	struct ws_list_page page;
	int rc = 0;

	snprintf(prefix, sizeof(prefix), "%s/", tenant);
	memset(&page, 0, sizeof(page));
	do {
		bool present = false;
		if ((rc = ws_store_list(s, prefix, token, WS_LIST_PAGE_MAX, &page)) != 0)
			return ws_fail_wrap(rc, "retention: list %s of removed tenant %s", prefix, tenant);
		if ((rc = wm_present(s, tenant, &present)) != 0 || present) {
			if (present)
				ws_info("retention: tenant %s, removed for good, is shipped again (it has a "
					"watermark): a new tenant, its objects kept", tenant);
			ws_list_page_free(&page);
			return rc;
		}
		/* A forgotten tenant with manifest slots keeps its close records
		 * (docs/SLOTS.md): not this walship's to sweep. */
		for (size_t i = 0; i < page.count && !rc; i++)
			if (ws_key_slot_any(page.keys[i]))
				rc = ws_slot_key_refuse("retention: removed tenant", page.keys[i]);
		if (rc) {
			ws_list_page_free(&page);
			return rc;
		}
		if (!dry_run && page.count &&
		    (rc = ws_store_del_many(s, (const char *const *)page.keys, page.count)) != 0) {
			ws_list_page_free(&page);
			return ws_fail_wrap(rc, "retention: delete the objects of removed tenant %s", tenant);
		}
		for (size_t i = 0; i < page.count; i++)
			if (fn)
				fn(page.keys[i], arg);
		*deleted += page.count;
		snprintf(token, sizeof(token), "%s", page.truncated ? page.next_token : "");
		ws_list_page_free(&page);
		/* A dry run deletes nothing, so the next page starts after this one's last key. */
	} while (token[0]);
	return 0;
}

int ws_removal_sweep(struct ws_ckpt *c, bool dry_run, void (*fn)(const char *key, void *arg), void *arg,
		     uint64_t *deleted)
{
	struct ws_store *s = ws_ckpt_store(c);
	struct ws_list_page page;
	char token[WS_KEY_MAX] = "";
	int rc = 0;

	*deleted = 0;
	memset(&page, 0, sizeof(page));
	do {
		if ((rc = ws_store_list(s, WS_CKPT_REMOVED_PREFIX, token, WS_LIST_PAGE_MAX, &page)) != 0)
			return ws_fail_wrap(rc, "retention: list %s", WS_CKPT_REMOVED_PREFIX);
		for (size_t i = 0; i < page.count && rc == 0; i++) {
			const char *t = page.keys[i] + strlen(WS_CKPT_REMOVED_PREFIX);
			bool found = false;
			uint64_t after = 0;
			/* The record must decode (a damaged one is named, nothing deleted for it). */
			if ((rc = ws_ckpt_removed(c, t, &found, &after)) == 0 && found)
				rc = sweep_tenant(s, t, dry_run, fn, arg, deleted);
		}
		snprintf(token, sizeof(token), "%s", page.truncated ? page.next_token : "");
		ws_list_page_free(&page);
	} while (rc == 0 && token[0]);
	return rc;
}

int ws_tenant_forget(struct ws_sink *sink, const char *tenant, struct ws_forget_report *rep)
{
	struct ws_forget_report none;
	struct ws_ckpt_outcome latest;
	struct ws_list_page page;
	struct ws_ckpt *c = NULL;
	char key[WS_KEY_MAX];
	bool found = false, present = false, named = false;
	int rc;

	if (!rep)
		rep = &none;
	memset(rep, 0, sizeof(*rep));
	if (!tenant || !ws_tenant_name_valid(tenant) || strcmp(tenant, WS_CKPT_PREFIX) == 0)
		return ws_fail(WS_ECONFIG, "forget: \"%s\" is not a tenant name", tenant ? tenant : "(null)");
	/* Its forget must close its lane first (docs/SLOTS.md), which this walship cannot. */
	if ((rc = ws_wm_slots_check(sink->store, tenant, "forget")) != 0)
		return rc;
	if ((rc = ws_ckread_open(sink, true, WS_CKPT_LEASE_WAIT_MS, &c)) != 0)
		return rc;
	if ((rc = ws_ckpt_latest_commit(c, &latest, &found)) != 0)
		goto out;
	rep->after_checkpoint = found ? latest.checkpoint_id : 0;
	if (found) {
		struct ws_ckpt_index idx;
		if ((rc = ws_ckpt_load_committed(c, &latest.committed, &idx)) != 0)
			goto out;
		for (size_t i = 0; i < idx.tenant_count && !named; i++)
			named = strcmp(idx.tenants[i].tenant, tenant) == 0;
		ws_ckpt_index_free(&idx);
	}
	if ((rc = wm_present(sink->store, tenant, &present)) != 0)
		goto out;
	snprintf(key, sizeof(key), "%s/", tenant);
	memset(&page, 0, sizeof(page));
	if ((rc = ws_store_list(sink->store, key, NULL, 1, &page)) != 0)
		goto out;
	rep->had_objects = page.count > 0;
	ws_list_page_free(&page);
	if (!present && !rep->had_objects && !named) {
		rc = ws_fail(WS_ENOTFOUND, "forget: no tenant %s in %s: nothing is stored under that name and the "
			     "latest checkpoint does not name it", tenant, sink->store->url);
		goto out;
	}
	/* The record first: a crash before the watermark's delete leaves a
	 * tenant that checkpoints still name (it has a watermark), and forget
	 * again finishes it. */
	if ((rc = ws_ckpt_record_removed(c, tenant, rep->after_checkpoint)) != 0)
		goto out;
	if (present) {
		if ((rc = ws_key_watermark(key, sizeof(key), tenant)) != 0 ||
		    (rc = ws_store_del(sink->store, key)) != 0) {
			rc = ws_fail_wrap(rc, "forget: delete the watermark of %s", tenant);
			goto out;
		}
		rep->had_watermark = true;
	}
out:
	ws_ckpt_close(c);
	return rc;
}
