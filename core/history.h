/*
 * A tenant's history across re-bases (history.c): the chain the watermark
 * names, then each chain before it, reached through the link its
 * successor's REBASE base records (docs/FORMAT.md "Manifest").
 */
#ifndef WS_CORE_HISTORY_H
#define WS_CORE_HISTORY_H

#include "chain_cut.h"
#include "core_internal.h"

/* One chain of the history. */
struct ws_hist_chain {
	struct ws_chain c;
	struct ws_restore_base base; /* when from_cut */
	bool from_cut;               /* c.m[0] is base's cut: its state is the artifact (history before it removed) */
};

/* How a walk to the chain before another ends. */
enum ws_hist_end {
	WS_HIST_MORE = 0,    /* the older chain is loaded */
	WS_HIST_FIRST,       /* none: the chain starts the tenant's history (its base names no predecessor) */
	WS_HIST_REMOVED,     /* retention removed the older history (behind the cut it protected) */
	WS_HIST_UNLINKED,    /* its REBASE base records no link, but a watermark came before it */
};

/*
 * The chain before c (whose c->m[0] is the base the walk goes behind): out
 * loaded (*end WS_HIST_MORE), or *end says why there is none. A truncated
 * older chain starts at a stored checkpoint's cut in it (retained: verify's
 * reading, the cut retention protected; skip as ws_chain_from_cut). A link
 * to a manifest that is missing, damaged or does not precede the base, or
 * history missing that no retention run removed, is an error naming it.
 */
int ws_hist_prev(struct ws_sink *sink, const char *tenant, const struct ws_chain *c, bool retained,
		 struct ws_cut_skip *skip, struct ws_hist_chain *out, enum ws_hist_end *end) WS_MUST_CHECK;
void ws_hist_chain_free(struct ws_hist_chain *h);

/* The WAL generation of g as keys name it: g<checkpoint_seq:08x>-<salt1:08x><salt2:08x>, or g-none. */
#define WS_GEN_ID_MAX 32
void ws_gen_id(const struct ws_fmt_gen *g, char out[WS_GEN_ID_MAX]);

#endif
