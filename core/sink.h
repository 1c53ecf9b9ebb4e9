/* A sink's key layout (sink.c): the names a tenant's objects go by. */
#ifndef WS_CORE_SINK_H
#define WS_CORE_SINK_H

#include "core_internal.h"

/* Key layout (docs/FORMAT.md "Keys"). */
int ws_key_watermark(char *out, size_t cap, const char *tenant);
/* "<tenant>/e<epoch>-p<pg>/g<seq>-<salt1><salt2>" (or ".../g-none"). */
int ws_key_gen_prefix(char *out, size_t cap, const char *tenant, uint64_t epoch, uint64_t pg,
		      const struct ws_fmt_gen *gen);

/*
 * The watermark sequence a manifest key carries (".../m<seq:016x>-<sha>"), or 0.
 * A slot key (".../l<lane>/m<seq:016x>", below) is 0 too, on purpose: its
 * callers (retention's sweeps, orphans, the went-back check) apply the
 * rules of content-named manifests, which do not hold for slots (retention
 * must stop at the watermark's hint, a close record is no manifest). The
 * listings that delete or report refuse a slot key they meet instead
 * (ws_key_slot_any); the went-back check passes it by.
 */
uint64_t ws_key_manifest_seq(const char *key);

/* The watermark sequence a batch or snapshot part key carries, or 0 (none:
 * a key of the format before keys carried it, a slot key, or no such key). */
uint64_t ws_key_object_seq(const char *key);

/* A manifest slot's key (docs/FORMAT.md "Keys"; written with slots = on, core/stream_slots.c):
 * "<tenant>/e<epoch>-p<pg>/l<lane:016x>/m<seq:016x>", the epoch and pointer
 * generation as ws_key_gen_prefix writes them. A slot holds a version 4
 * manifest or a close record. */
int ws_key_slot(char *out, size_t cap, const char *tenant, uint64_t epoch, uint64_t pg, uint64_t lane,
		uint64_t seq);
/* True only for a key of exactly that shape under tenant (decimal numbers
 * as written, lane and seq non-zero in lower-case hex, nothing after);
 * then the fields are set. */
bool ws_key_slot_parse(const char *key, const char *tenant, uint64_t *epoch, uint64_t *pg, uint64_t *lane,
		       uint64_t *seq);
/* Whether key is a slot key of any tenant (its first path element). */
bool ws_key_slot_any(const char *key);

/*
 * A ws_seal_config resolved (who: what errors name, e.g. "tenant x"): the
 * codec WS_CODEC_DEFAULT stands for, the level checked, and the key file's
 * keys loaded into own (the writer's: its last) and added to the sink's for
 * reading. out->key points into own. Errors: WS_ECONFIG (codec, level, a
 * key file's line), the key file's.
 */
int ws_sink_seal_resolve(struct ws_sink *sink, const char *who, const struct ws_seal_config *c,
			 struct ws_keyring *own, struct ws_seal *out) WS_MUST_CHECK;

/*
 * A manifest read at key is the one its key names: at a slot key
 * (ws_key_slot_parse) a version 4 manifest of that tenant, epoch, pointer
 * generation, lane and sequence (the key holds no hash: a slot copied to
 * another key, or another tenant's, is refused); anywhere else no version 4
 * one. WS_EFORMAT naming the key and the field, else 0.
 */
int ws_slot_manifest_bound(const char *tenant, const char *key, const struct ws_fmt_manifest *m) WS_MUST_CHECK;

/* The sequence a manifest key names, content-named or a slot; 0: neither. */
uint64_t ws_key_any_manifest_seq(const char *tenant, const char *key);

#endif
