/* The public views of stored records (outcome.c). */
#ifndef WS_CORE_OUTCOME_H
#define WS_CORE_OUTCOME_H

#include "core_internal.h"

/* A stored generation as the seed's WalGeneration; salted=false: salts unknown. */
void ws_gen_to_public(const struct ws_fmt_gen *g, bool salted, struct ws_wal_generation *out);
void ws_gen_from_fmt(const struct ws_fmt_watermark *wm, struct ws_wal_generation *out);
/* The public view of a stored watermark. */
void ws_wm_to_public(const struct ws_fmt_watermark *w, struct ws_watermark *out);

#endif
