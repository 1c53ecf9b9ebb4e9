#ifndef WS_CLI_H
#define WS_CLI_H

#include "walship.h"

/* One JSON line on stdout for a tail_frames outcome. */
void ws_cli_print_outcome_json(const char *tenant, const struct ws_outcome *o);
/* One JSON line on stdout for a tenant listing. */
void ws_cli_print_tenant_json(const struct ws_tenant_info *t);

#endif
