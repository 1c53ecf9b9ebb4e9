/* A sink's key layout (sink.c): the names a tenant's objects go by. */
#ifndef WS_CORE_SINK_H
#define WS_CORE_SINK_H

#include "core_internal.h"

/* Key layout (docs/FORMAT.md "Keys"). */
int ws_key_watermark(char *out, size_t cap, const char *tenant);
/* "<tenant>/e<epoch>-p<pg>/g<seq>-<salt1><salt2>" (or ".../g-none"). */
int ws_key_gen_prefix(char *out, size_t cap, const char *tenant, uint64_t epoch, uint64_t pg,
		      const struct ws_fmt_gen *gen);

/* The watermark sequence a manifest key carries (".../m<seq:016x>-<sha>"), or 0. */
uint64_t ws_key_manifest_seq(const char *key);

/* The watermark sequence a batch or snapshot part key carries, or 0 (none:
 * a key of the format before keys carried it, or no such key). */
uint64_t ws_key_object_seq(const char *key);

/*
 * A ws_seal_config resolved (who: what errors name, e.g. "tenant x"): the
 * codec WS_CODEC_DEFAULT stands for, the level checked, and the key file's
 * keys loaded into own (the writer's: its last) and added to the sink's for
 * reading. out->key points into own. Errors: WS_ECONFIG (codec, level, a
 * key file's line), the key file's.
 */
int ws_sink_seal_resolve(struct ws_sink *sink, const char *who, const struct ws_seal_config *c,
			 struct ws_keyring *own, struct ws_seal *out) WS_MUST_CHECK;

#endif
