/* A chain that starts at a checkpoint's cut (chain_cut.c). */
#ifndef WS_CORE_CHAIN_CUT_H
#define WS_CORE_CHAIN_CUT_H

#include "core_internal.h"

/*
 * c is truncated (walked from wm): history retention removed before the
 * latest Commit's cut, when that cut (key, SHA-256 and length) is in c. Then
 * drop the manifests before it (c->m[0] is the cut, whose state is base's
 * artifact) and fill base. Otherwise fail as ws_chain_load does
 * (WS_EINCOMPLETE: the missing manifest). skip (may be NULL): checkpoints
 * not to use as the base (their artifact failed to serve this restore).
 */
#define WS_CUT_SKIP_MAX 16u
struct ws_cut_skip {
	uint64_t ids[WS_CUT_SKIP_MAX];
	size_t n;
	uint64_t failed;        /* set by a restore whose base artifact failed; 0: none */
	char passed_over[WS_KEY_MAX + 160]; /* an artifact of a cut in the chain that was not there
					     * whole (missing, or not its recorded size); "" none */
	bool before_used_cut;   /* the point asked for is before the cut the restore started from */
	uint64_t wm_checked;    /* 1 + the watermark sequence the went-back check was run for; 0: none */
	bool went_back;         /* refused: the watermark went back (no other base serves) */
};
int ws_chain_from_cut(struct ws_sink *sink, const char *tenant, const struct ws_fmt_watermark *wm,
		      struct ws_chain *c, struct ws_restore_base *base, struct ws_cut_skip *skip) WS_MUST_CHECK;

/*
 * ws_chain_from_cut for verify: the missing link must be history a
 * retention run removed (the cut that run protected is in c), else it is
 * reported as missing.
 */
int ws_chain_from_cut_retained(struct ws_sink *sink, const char *tenant, const struct ws_fmt_watermark *wm,
			       struct ws_chain *c, struct ws_restore_base *base) WS_MUST_CHECK;

#endif
