/*
 * Checkpoint decision store, part 5: tenants removed for good
 * (checkpoints/removed/<tenant>, docs/CHECKPOINTS.md "Removing a tenant").
 * A checkpoint whose cut misses a tenant the previous checkpoint named is
 * refused, unless this record says the tenant was removed on purpose once
 * that previous checkpoint (or a later one) was the latest Commit.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "ckpt_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ws_format.h"

static int removed_key(const char *tenant, char key[WS_KEY_MAX])
{
	if (!tenant || !ws_tenant_name_valid(tenant) || strcmp(tenant, WS_CKPT_PREFIX) == 0)
		return ckpt_fail(WS_CKPT_INVALID_INPUT, WS_ECONFIG, "checkpoint store: \"%s\" is not a tenant name",
				 tenant ? tenant : "(null)");
	snprintf(key, WS_KEY_MAX, "%s%s", WS_CKPT_REMOVED_PREFIX, tenant);
	return 0;
}

/* GET and decode the record at key: *found, *after, and its etag. */
static int load_removed(struct ws_ckpt *c, const char *key, const char *tenant, bool *found, uint64_t *after,
			struct ws_etag *etag)
{
	struct ws_buf b;
	int rc = ckpt_get_obj(c, key, 4096, &b, etag, found);
	*after = 0;
	if (rc == 0 && *found)
		rc = ckpt_dec_removed(key, b.data, b.len, ckpt_dep_or_none(c), tenant, after);
	ws_buf_free(&b);
	return rc;
}

int ws_ckpt_removed(struct ws_ckpt *c, const char *tenant, bool *found, uint64_t *after)
{
	char key[WS_KEY_MAX];
	int rc;

	ckpt_kind_set(WS_CKPT_OK);
	*found = false;
	*after = 0;
	if ((rc = removed_key(tenant, key)) != 0 || (rc = ckpt_refresh_dep(c, false)) != 0)
		return rc;
	return load_removed(c, key, tenant, found, after, NULL);
}

int ws_ckpt_record_removed(struct ws_ckpt *c, const char *tenant, uint64_t after)
{
	char key[WS_KEY_MAX];
	int rc;

	ckpt_kind_set(WS_CKPT_OK);
	if ((rc = ckpt_reader_refused(c, "record a removed tenant")) != 0 || (rc = removed_key(tenant, key)) != 0)
		return rc;
	if (after > WS_CKPT_ID_MAX)
		return ckpt_fail(WS_CKPT_INVALID_INPUT, WS_ECONFIG, "checkpoint store: removal of %s after "
				 "checkpoint %" PRIu64 ": no such checkpoint ID", tenant, after);
	if ((rc = ckpt_ensure_dep(c)) != 0)
		return rc;
	for (int i = 0; i < RETRY_MAX; i++) {
		struct ws_etag etag;
		bool found;
		uint64_t cur;
		size_t len = 0;
		char *body;

		memset(&etag, 0, sizeof(etag));
		if ((rc = load_removed(c, key, tenant, &found, &cur, &etag)) != 0)
			return rc;
		if (found && cur >= after)
			return ckpt_kind_set(WS_CKPT_CONVERGED), 0; /* recorded already, as late or later */
		if (!(body = ckpt_enc_removed(c->dep, tenant, after, &len)))
			return ckpt_fail(WS_CKPT_IO, -ENOMEM, "checkpoint store: encode %s: out of memory", key);
		rc = ws_store_put(c->s, key, body, len, found ? WS_PUT_CAS : WS_PUT_CREATE, found ? &etag : NULL, NULL);
		free(body);
		if (rc == 0)
			return 0;
		if (rc != WS_EPRECOND)
			return ckpt_io_fail(rc, "put", key);
	}
	return ckpt_contention(key);
}
