/* Tenants removed for good (tenant_removal.c, docs/CHECKPOINTS.md "Removing a tenant"). */
#ifndef WS_CORE_TENANT_REMOVAL_H
#define WS_CORE_TENANT_REMOVAL_H

#include "core_internal.h"
#include "ws_ckpt.h"

/*
 * A cut (cut, n tenants, sorted by name) must name every tenant the previous
 * Commit's index prev names, except one removed for good while prev (or a
 * later checkpoint) was the latest Commit: otherwise WS_EINCOMPLETE naming
 * the missing tenants (a listing that came back short, a watermark hidden or
 * deleted) and the command that removes one for good.
 */
int ws_removal_check_cut(struct ws_ckpt *c, const struct ws_ckpt_index *prev, const struct ws_ckpt_tenant_entry *cut,
			 size_t n, const char *sink_url) WS_MUST_CHECK;

/*
 * Retention: every object of each tenant removed for good that has no
 * watermark, deleted (dry_run: only reported), fn (may be NULL) called per
 * key, *deleted counting them. A tenant with a watermark shipped again (a
 * new tenant) and is left alone; the watermark is read again before each
 * batch of deletes and the tenant's sweep stops once one appears.
 */
int ws_removal_sweep(struct ws_ckpt *c, bool dry_run, void (*fn)(const char *key, void *arg), void *arg,
		     uint64_t *deleted) WS_MUST_CHECK;

#endif
