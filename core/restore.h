/* Building a tenant's database from its chain (restore.c). */
#ifndef WS_CORE_RESTORE_H
#define WS_CORE_RESTORE_H

#include "replay.h"

/*
 * verify: the latest state of c built as restore builds it, in a temporary
 * file under TMPDIR (removed after): every object fetched and checked, each
 * bad one reported through rep and the rest checked on; when none was bad,
 * the image is finished and must pass PRAGMA integrity_check, as restore's
 * must before it is published. cut: c->m[0] is that checkpoint's cut, whose
 * state is its artifact (history before it removed), else NULL;
 * cut_reported: a bad artifact was already reported (ws_checkpoint_verify
 * checked it): counted, not reported again. Returns 0, the first problem's
 * error, or an error that is no object's (reported by the caller, with
 * ws_errmsg()).
 */
int ws_replay_verify(struct ws_store *s, const char *tenant, const struct ws_chain *c,
		     const struct ws_restore_base *cut, bool cut_reported,
		     struct ws_replay_report *rep) WS_MUST_CHECK;

/*
 * Build the tenant's database exactly at the state of the manifest head
 * names into path (created or truncated, a rollback-journal file), from
 * the base artifact (when the chain passes through base->cut; may be NULL)
 * or from the chain's REBASE base. *used_base tells which.
 */
int ws_restore_image(struct ws_store *s, const char *tenant, const struct ws_chain_stop *head,
		     const struct ws_restore_base *base, const char *path, bool *used_base) WS_MUST_CHECK;

/*
 * ws_restore_image at the state of the manifest wm names, which the
 * watermark may carry (wm->carried kept): the latest state a reader of
 * that watermark follows on from. res: where the image is (page size,
 * database size, last commit). base as ws_restore_image.
 */
int ws_restore_image_wm(struct ws_store *s, const char *tenant, const struct ws_fmt_watermark *wm,
			const struct ws_restore_base *base, const char *path, struct ws_replay_result *res)
	WS_MUST_CHECK;

#endif
