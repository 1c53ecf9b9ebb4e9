/* Walking a sink's tenants, shared by ls, verify and verify --orphans (inspect.c). */
#ifndef WS_CORE_INSPECT_H
#define WS_CORE_INSPECT_H

#include "core_internal.h"

/* Calls fn per tenant name in order; a name that is no tenant's is stepped over. */
typedef int (*ws_tenant_name_fn)(const char *tenant, void *arg);
int ws_tenants_each(struct ws_store *s, ws_tenant_name_fn fn, void *arg) WS_MUST_CHECK;
/* What reading a sink finds is the sink's problem, never a configuration error. */
int ws_read_err(int rc);

#endif
